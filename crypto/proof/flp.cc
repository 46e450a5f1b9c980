#include "crypto/proof/flp.h"

#include <bit>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/goldilocks_lanes.h"

namespace tandem::crypto::proof {
namespace {

// out[q][w] = sum_{i < rows} coeff[q][i] * in[i * stride + w] mod p for
// q < kQ query points and w < kW columns in one pass over the rows (the
// input share is read once for all points), the accumulators in registers:
// 128-bit sums of products (< 2^128) with their carries out of bit 128
// counted (DotAccumulator::Fold). Any 64-bit inputs.
template <int kW, int kQ>
void ColumnSums(const uint64_t* const* coeff, size_t rows, const uint64_t* __restrict in,
                size_t stride, uint64_t* const* out) {
  constexpr size_t kAhead = 8;
  unsigned __int128 acc[kQ][kW] = {};
  uint64_t carries[kQ][kW] = {};
  for (size_t i = 0; i < rows; ++i) {
    const uint64_t* row = in + i * stride;
    // The large stride defeats the hardware prefetcher.
    if (i + kAhead < rows) __builtin_prefetch(row + kAhead * stride);
    for (int q = 0; q < kQ; ++q) {
      const uint64_t c = coeff[q][i];
      for (int w = 0; w < kW; ++w) {
        const unsigned __int128 prod = static_cast<unsigned __int128>(c) * row[w];
        acc[q][w] += prod;
        carries[q][w] += static_cast<uint64_t>(acc[q][w] < prod);
      }
    }
  }
  for (int q = 0; q < kQ; ++q) {
    for (int w = 0; w < kW; ++w) out[q][w] = DotAccumulator::Fold(acc[q][w], carries[q][w]);
  }
}

#if defined(__AVX512F__) || defined(__AVX2__)
// ColumnSums<L::kWidth, kQ> in the lanes of L (lanes::WideOps): each row's
// kWidth columns loaded once for every point, multiplied mod p and added
// into two relaxed accumulators per point (even and odd rows: two short
// dependency chains instead of one long one). The sums are reduced to
// canonical at the end, so they equal the scalar ones exactly. Any 64-bit
// inputs.
template <typename L, int kQ>
void ColumnSumsLanes(const uint64_t* const* coeff, size_t rows, const uint64_t* __restrict in,
                     size_t stride, uint64_t* const* out) {
  constexpr size_t kAhead = 8;
  typename L::V acc[2][kQ];
  for (int q = 0; q < kQ; ++q) acc[0][q] = acc[1][q] = L::Splat(0);
  for (size_t i = 0; i < rows; ++i) {
    const uint64_t* row = in + i * stride;
    if (i + kAhead < rows) __builtin_prefetch(row + kAhead * stride);
    const typename L::V x = L::Load(row);
    typename L::V* a = acc[i & 1];
    for (int q = 0; q < kQ; ++q) a[q] = L::AddRelaxed(a[q], L::Mul(L::Splat(coeff[q][i]), x));
  }
  for (int q = 0; q < kQ; ++q) L::Store(out[q], L::Add(acc[0][q], L::Canonical(acc[1][q])));
}
#endif

// acc[i] += rho (x[i]^3 - x[i]) for i < n: rho canonical, x and acc
// relaxed (any 64-bit values); eight at a time in AVX-512 lanes or four in
// AVX2 lanes when the build has them, with the same formulas
// (crypto/proof/goldilocks_lanes.h), so every path gives the same bits.
void AccumulateRange(uint64_t rho, const uint64_t* x, size_t n, uint64_t* acc) {
  size_t i = 0;
#if defined(__AVX512F__)
  namespace x8 = lanes::x8;
  const x8::Lanes one8 = x8::Splat(1), rho8 = x8::Splat(rho);
  for (; i + 8 <= n; i += 8) {
    const x8::Lanes xi = x8::Load(x + i);
    const x8::Lanes cube =
        x8::MulRelaxed(xi, x8::SubRelaxed(x8::MulRelaxed(xi, xi), one8));  // x^3 - x
    x8::Store(acc + i, x8::AddRelaxed(x8::Load(acc + i), x8::Reduce64(x8::MulRelaxed(rho8, cube))));
  }
#elif defined(__AVX2__)
  const lanes::Lanes one4 = lanes::Splat(1), rho4 = lanes::Splat(rho);
  for (; i + 4 <= n; i += 4) {
    const lanes::Lanes xi = lanes::Load(x + i);
    const lanes::Lanes cube =
        lanes::MulRelaxed(xi, lanes::SubRelaxed(lanes::MulRelaxed(xi, xi), one4));
    lanes::Store(acc + i, lanes::AddRelaxed(lanes::Load(acc + i),
                                            lanes::Reduce64(lanes::MulRelaxed(rho4, cube))));
  }
#endif
  for (; i < n; ++i) {
    const uint64_t cube =
        lanes::MulRelaxed(x[i], lanes::SubRelaxed(lanes::MulRelaxed(x[i], x[i]), 1));
    acc[i] = lanes::AddRelaxed(acc[i], gl::Reduce64(lanes::MulRelaxed(rho, cube)));
  }
}

// acc[i] += a[i] * b[i] for i < n (b = nullptr: a[i]^2): relaxed a, b and
// acc; lanes as AccumulateRange.
void AccumulateProduct(const uint64_t* a, const uint64_t* b, size_t n, uint64_t* acc) {
  if (b == nullptr) b = a;
  size_t i = 0;
#if defined(__AVX512F__)
  namespace x8 = lanes::x8;
  for (; i + 8 <= n; i += 8) {
    const x8::Lanes prod = x8::Reduce64(x8::MulRelaxed(x8::Load(a + i), x8::Load(b + i)));
    x8::Store(acc + i, x8::AddRelaxed(x8::Load(acc + i), prod));
  }
#elif defined(__AVX2__)
  for (; i + 4 <= n; i += 4) {
    const lanes::Lanes prod =
        lanes::Reduce64(lanes::MulRelaxed(lanes::Load(a + i), lanes::Load(b + i)));
    lanes::Store(acc + i, lanes::AddRelaxed(lanes::Load(acc + i), prod));
  }
#endif
  for (; i < n; ++i)
    acc[i] = lanes::AddRelaxed(acc[i], gl::Reduce64(lanes::MulRelaxed(a[i], b[i])));
}

// log2 of the wire domain for M' rows and Q seeds: of the least power of two
// >= Q + M'.
int LogWireDomain(size_t rows, int queries) {
  return std::bit_width(rows + static_cast<size_t>(queries) - 1);
}

}  // namespace

size_t RangeSquareFlp::WireDomainSize(size_t num_rows, int num_queries) {
  return size_t{1} << LogWireDomain(num_rows, num_queries);
}

absl::StatusOr<RangeSquareFlp> RangeSquareFlp::Create(size_t num_rows, size_t range_slots,
                                                      size_t square_slots, int num_queries) {
  if (num_rows < 1 || num_rows > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_rows must be in [1, 2^24], got ", num_rows));
  }
  if (range_slots > (size_t{1} << 20) || square_slots < 1 || square_slots > (size_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a row needs 0 to 2^20 range slots and 1 to 2^20 square slots; got ",
                     range_slots, " and ", square_slots));
  }
  if (num_queries < 1 || num_queries > 8) {
    return absl::InvalidArgumentError("num_queries must be in [1, 8]");
  }
  const int log_n = LogWireDomain(num_rows, num_queries);
  if (log_n > 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("FLP wire domain 2^", log_n, " exceeds 2^24; put more slots in a row"));
  }
  TANDEM_ASSIGN_OR_RETURN(NttDomain domain, NttDomain::Create(log_n));
  return RangeSquareFlp(num_rows, range_slots, square_slots, num_queries, std::move(domain));
}

double RangeSquareFlp::SoundnessLog2() const {
  const double t = static_cast<double>(proof_domain_size());
  return queries_ * std::log2((t - 1.0) / (static_cast<double>(gl::kP) - t - queries_));
}

absl::Status RangeSquareFlp::Prove(absl::Span<const uint64_t> inputs,
                                   absl::Span<const uint64_t> slot_weights,
                                   absl::Span<const uint64_t> wire_seeds,
                                   absl::Span<uint64_t> proof) const {
  if (inputs.size() != input_length() || slot_weights.size() != range_ ||
      wire_seeds.size() != seed_length() || proof.size() != proof_length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FLP prove sizes: inputs ", inputs.size(), "/", input_length(), ", slot weights ",
        slot_weights.size(), "/", range_, ", seeds ", wire_seeds.size(), "/", seed_length(),
        ", proof ", proof.size(), "/", proof_length()));
  }
  const size_t n = domain_.size();
  const size_t q = static_cast<size_t>(queries_);
  const size_t width = wires();
  std::copy(wire_seeds.begin(), wire_seeds.end(), proof.begin());
  // On H, gH, g^2 H (3N points each below), in relaxed form
  // (crypto/proof/goldilocks_lanes.h): acc, the weighted range terms; sq,
  // the sum of the squares; weight, wire 0. p = acc + weight * sq, made
  // canonical once at the end.
  std::vector<uint64_t> acc(3 * n, 0), sq(3 * n, 0), weight(3 * n);
  // One wire at a time: its values on the three cosets and its
  // coefficients (L1-resident for the N of interest).
  std::vector<uint64_t> values(3 * n), coeffs(n);
  for (size_t l = 0; l < width; ++l) {
    uint64_t* w = l == 0 ? weight.data() : values.data();
    for (size_t s = 0; s < q; ++s) w[s] = wire_seeds[l * q + s];
    // Point omega^(Q+i) holds row i: inputs[i W + l].
    for (size_t i = 0; i < rows_; ++i) w[q + i] = inputs[i * width + l];
    std::fill(w + q + rows_, w + n, 0);
    std::copy(w, w + n, coeffs.data());
    domain_.ValuesToCoefficients(absl::MakeSpan(coeffs));
    for (int s = 1; s < 3; ++s) {
      domain_.CoefficientsToCosetValues(coeffs, s, absl::MakeSpan(w + s * n, n));
    }
    if (l == 0) continue;
    if (l <= range_) {
      AccumulateRange(slot_weights[l - 1], w, 3 * n, acc.data());
    } else {
      AccumulateProduct(w, nullptr, 3 * n, sq.data());
    }
  }
  AccumulateProduct(weight.data(), sq.data(), 3 * n, acc.data());
  uint64_t* p = proof.data() + seed_length();
  for (size_t x = 0; x < 3 * n; ++x) p[x] = gl::Reduce64(acc[x]);
  return absl::OkStatus();
}

absl::Status RangeSquareFlp::Query(absl::Span<const uint64_t> input_share,
                                   absl::Span<const uint64_t> proof_share, uint64_t affine_share,
                                   absl::Span<const uint64_t> row_weights,
                                   absl::Span<const uint64_t> query_points,
                                   absl::Span<uint64_t> verifier_share) const {
  if (input_share.size() != input_length() || proof_share.size() != proof_length() ||
      row_weights.size() != rows_ || query_points.size() != static_cast<size_t>(queries_) ||
      verifier_share.size() != verifier_length()) {
    return absl::InvalidArgumentError("FLP query sizes do not match the proof system");
  }
  const size_t n = domain_.size();
  const size_t nq = static_cast<size_t>(queries_);
  for (size_t q = 0; q < nq; ++q) {
    const uint64_t r = query_points[q];
    if (r >= gl::kP || InProofDomain(r)) {
      return absl::InvalidArgumentError("query point inside the proof domain or >= p");
    }
    for (size_t j = 0; j < q; ++j) {
      if (query_points[j] == r) return absl::InvalidArgumentError("repeated query point");
    }
  }
  const uint64_t* p = proof_share.data() + seed_length();
  DotAccumulator y;
  for (size_t i = 0; i < rows_; ++i) y.Add(row_weights[i], p[nq + i]);
  verifier_share[0] = gl::Add(y.Get(), affine_share);

  // f_l(r_q) = sum_x L_x(r_q) f_l(omega^x): the seeds at x < Q, the input
  // share at x = Q + i (row i of the row-major inputs holds the W wires of
  // point Q + i), zero beyond; column by column with lazy reduction.
  const size_t width = wires();
  std::vector<uint64_t> lambda(nq * n), mu(3 * n), col(nq * width);
  for (size_t q = 0; q < nq; ++q) {
    domain_.LagrangeCoefficients(query_points[q], 1, absl::MakeSpan(&lambda[q * n], n));
  }
  const uint64_t* in = input_share.data();
  const uint64_t* coeff[8];  // L_{Q+i}(r_q); num_queries <= 8
  for (size_t q = 0; q < nq; ++q) coeff[q] = &lambda[q * n + nq];
  for (size_t l = 0; l < width;) {
    uint64_t* out[8];
#if defined(__AVX512F__) || defined(__AVX2__)
    if (nq == 2 && l + lanes::WideOps::kWidth <= width) {
      for (size_t q = 0; q < 2; ++q) out[q] = &col[q * width + l];
      ColumnSumsLanes<lanes::WideOps, 2>(coeff, rows_, in + l, width, out);
      l += lanes::WideOps::kWidth;
      continue;
    }
#endif
    if (nq == 2 && l + 2 <= width) {
      for (size_t q = 0; q < 2; ++q) out[q] = &col[q * width + l];
      ColumnSums<2, 2>(coeff, rows_, in + l, width, out);
      l += 2;
    } else {
      for (size_t q = 0; q < nq; ++q) {
        out[0] = &col[q * width + l];
        ColumnSums<1, 1>(&coeff[q], rows_, in + l, width, out);
      }
      l += 1;
    }
  }
  for (size_t q = 0; q < nq; ++q) {
    uint64_t* out = verifier_share.data() + 1 + q * (width + 1);
    const uint64_t* lq = &lambda[q * n];
    for (size_t l = 0; l < width; ++l) {
      DotAccumulator acc;
      for (size_t s = 0; s < nq; ++s) acc.Add(lq[s], proof_share[l * nq + s]);
      out[l] = gl::Add(col[q * width + l], acc.Get());
    }
    domain_.LagrangeCoefficients(query_points[q], 3, absl::MakeSpan(mu));
    DotAccumulator pr;
    for (size_t x = 0; x < 3 * n; ++x) pr.Add(mu[x], p[x]);
    out[width] = pr.Get();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RangeSquareFlp::Decide(absl::Span<const uint64_t> verifier,
                                            absl::Span<const uint64_t> slot_weights) const {
  if (verifier.size() != verifier_length() || slot_weights.size() != range_) {
    return absl::InvalidArgumentError("verifier message or slot weights have the wrong length");
  }
  // Constant-time accumulation of the failure flags (the inputs are public
  // once reconstructed, but there is no reason to branch early).
  uint64_t bad = verifier[0];
  const size_t width = wires();
  for (int q = 0; q < queries_; ++q) {
    const uint64_t* w = verifier.data() + 1 + q * (width + 1);
    uint64_t g = 0, squares = 0;
    for (size_t t = 0; t < range_; ++t) {
      const uint64_t x = w[1 + t];
      g = gl::Add(g, gl::Mul(slot_weights[t], gl::Mul(x, gl::Sub(gl::Mul(x, x), 1))));
    }
    for (size_t u = 0; u < square_; ++u) {
      const uint64_t v = w[1 + range_ + u];
      squares = gl::Add(squares, gl::Mul(v, v));
    }
    g = gl::Add(g, gl::Mul(w[0], squares));
    bad |= g ^ w[width];
  }
  return bad == 0;
}

}  // namespace tandem::crypto::proof
