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

// acc[i] += a[i] (x[i]^2 - 1) for i < n: relaxed a, x (any 64-bit values)
// and acc; eight at a time in AVX-512 lanes or four in AVX2 lanes when the
// build has them, with the same formulas (crypto/proof/goldilocks_lanes.h).
void AccumulateCubic(const uint64_t* a, const uint64_t* x, size_t n, uint64_t* acc) {
  size_t i = 0;
#if defined(__AVX512F__)
  namespace x8 = lanes::x8;
  const x8::Lanes one8 = x8::Splat(1);
  for (; i + 8 <= n; i += 8) {
    const x8::Lanes xi = x8::Load(x + i);
    const x8::Lanes prod =
        x8::Reduce64(x8::MulRelaxed(x8::Load(a + i), x8::SubRelaxed(x8::MulRelaxed(xi, xi), one8)));
    x8::Store(acc + i, x8::AddRelaxed(x8::Load(acc + i), prod));
  }
#elif defined(__AVX2__)
  // Four products in lanes and four in scalar registers per step (the core
  // runs both kinds of units side by side).
  const lanes::Lanes one4 = lanes::Splat(1);
  for (; i + 8 <= n; i += 8) {
    const lanes::Lanes xi = lanes::Load(x + i);
    const lanes::Lanes prod = lanes::Reduce64(
        lanes::MulRelaxed(lanes::Load(a + i), lanes::SubRelaxed(lanes::MulRelaxed(xi, xi), one4)));
    lanes::Store(acc + i, lanes::AddRelaxed(lanes::Load(acc + i), prod));
    for (size_t y = i + 4; y < i + 8; ++y) {
      const uint64_t p = gl::Reduce64(
          lanes::MulRelaxed(a[y], lanes::SubRelaxed(lanes::MulRelaxed(x[y], x[y]), 1)));
      acc[y] = lanes::AddRelaxed(acc[y], p);
    }
  }
#endif
  for (; i < n; ++i) {
    const uint64_t prod =
        gl::Reduce64(lanes::MulRelaxed(a[i], lanes::SubRelaxed(lanes::MulRelaxed(x[i], x[i]), 1)));
    acc[i] = lanes::AddRelaxed(acc[i], prod);
  }
}

// The wire domain for M' parallel calls and Q seeds: log2 of the least
// power of two >= Q + M'.
int LogWireDomain(size_t parallel, int queries) {
  return std::bit_width(parallel + static_cast<size_t>(queries) - 1);
}

}  // namespace

absl::StatusOr<ParallelSumCubicFlp> ParallelSumCubicFlp::Create(size_t num_calls,
                                                                size_t chunk_length,
                                                                int num_queries) {
  if (num_calls < 1 || num_calls > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("num_calls must be in [1, 2^24], got ",
                                                   num_calls));
  }
  if (num_queries < 1 || num_queries > 8) {
    return absl::InvalidArgumentError("num_queries must be in [1, 8]");
  }
  if (chunk_length > num_calls) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_length ", chunk_length, " exceeds num_calls ", num_calls));
  }
  const size_t q = static_cast<size_t>(num_queries);
  if (chunk_length == 0) {
    // For each N = 2^k the least c with Q + ceil(M / c) <= N; keep the
    // shortest proof 2cQ + 3N (the first on ties: the smaller N).
    auto length = [&](size_t c) {
      const size_t parallel = (num_calls + c - 1) / c;
      return 2 * c * q + 3 * (size_t{1} << LogWireDomain(parallel, num_queries));
    };
    size_t best = num_calls;
    for (int k = 1; k <= 24; ++k) {
      const size_t n = size_t{1} << k;
      if (n <= q) continue;
      const size_t c = std::max<size_t>(1, (num_calls + (n - q) - 1) / (n - q));
      if (length(c) < length(best)) best = c;
      if (c == 1) break;
    }
    chunk_length = best;
  }
  const size_t parallel = (num_calls + chunk_length - 1) / chunk_length;
  const int log_n = LogWireDomain(parallel, num_queries);
  if (log_n > 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("FLP wire domain 2^", log_n, " exceeds 2^24; raise chunk_length"));
  }
  TANDEM_ASSIGN_OR_RETURN(NttDomain domain, NttDomain::Create(log_n));
  return ParallelSumCubicFlp(num_calls, chunk_length, num_queries, parallel, std::move(domain));
}

double ParallelSumCubicFlp::SoundnessLog2() const {
  const double t = static_cast<double>(proof_domain_size());
  return queries_ * std::log2((t - 1.0) / (static_cast<double>(gl::kP) - t - queries_));
}

absl::Status ParallelSumCubicFlp::Prove(absl::Span<const uint64_t> inputs,
                                        absl::Span<const uint64_t> wire_seeds,
                                        absl::Span<uint64_t> proof) const {
  if (inputs.size() != input_length() || wire_seeds.size() != seed_length() ||
      proof.size() != proof_length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FLP prove sizes: inputs ", inputs.size(), "/", input_length(), ", seeds ",
        wire_seeds.size(), "/", seed_length(), ", proof ", proof.size(), "/", proof_length()));
  }
  const size_t n = domain_.size();
  const size_t q = static_cast<size_t>(queries_);
  const size_t wires = 2 * chunk_;
  std::copy(wire_seeds.begin(), wire_seeds.end(), proof.begin());
  // p on H, gH, g^2 H, accumulated gadget by gadget in relaxed form
  // (crypto/proof/goldilocks_lanes.h), made canonical once at the end.
  std::vector<uint64_t> acc(3 * n, 0);
  // Per gadget t: its two wires on H (values), as coefficients, and on a
  // coset; all of size N (L1-resident for the N of interest).
  std::vector<uint64_t> buffer(6 * n);
  uint64_t* values[2] = {&buffer[0], &buffer[n]};
  uint64_t* coeffs[2] = {&buffer[2 * n], &buffer[3 * n]};
  uint64_t* coset[2] = {&buffer[4 * n], &buffer[5 * n]};
  for (size_t t = 0; t < chunk_; ++t) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t l = 2 * t + k;
      uint64_t* w = values[k];
      for (size_t s = 0; s < q; ++s) w[s] = wire_seeds[l * q + s];
      // Point omega^(Q+i) holds ParallelSum call i; wire l = 2t + k is
      // Cubic call i c + t, at inputs[2 (i c + t) + k] = inputs[i 2c + l]
      // (zero past the last call: public sizes).
      for (size_t i = 0; i < parallel_calls_; ++i) {
        const size_t idx = i * wires + l;
        w[q + i] = idx < inputs.size() ? inputs[idx] : 0;
      }
      std::fill(w + q + parallel_calls_, w + n, 0);
      std::copy(w, w + n, coeffs[k]);
      domain_.ValuesToCoefficients(absl::MakeSpan(coeffs[k], n));
    }
    AccumulateCubic(values[0], values[1], n, &acc[0]);
    for (int s = 1; s < 3; ++s) {
      for (size_t k = 0; k < 2; ++k) {
        domain_.CoefficientsToCosetValues(absl::MakeConstSpan(coeffs[k], n), s,
                                          absl::MakeSpan(coset[k], n));
      }
      AccumulateCubic(coset[0], coset[1], n, &acc[s * n]);
    }
  }
  uint64_t* p = proof.data() + seed_length();
  for (size_t x = 0; x < 3 * n; ++x) p[x] = gl::Reduce64(acc[x]);
  return absl::OkStatus();
}

absl::Status ParallelSumCubicFlp::Query(absl::Span<const uint64_t> input_share,
                                        absl::Span<const uint64_t> proof_share,
                                        uint64_t affine_share,
                                        absl::Span<const uint64_t> query_points,
                                        absl::Span<uint64_t> verifier_share) const {
  if (input_share.size() != input_length() || proof_share.size() != proof_length() ||
      query_points.size() != static_cast<size_t>(queries_) ||
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
  uint64_t y = affine_share;
  for (size_t i = 0; i < parallel_calls_; ++i) y = gl::Add(y, p[nq + i]);
  verifier_share[0] = y;

  // f_l(r_q) = sum_x L_x(r_q) f_l(omega^x): the seeds at x < Q, the input
  // share at x = Q + i (row i of the call-major inputs holds the 2c wires
  // of point Q + i), zero beyond; column by column with lazy reduction.
  const size_t wires = 2 * chunk_;
  std::vector<uint64_t> lambda(nq * n), mu(3 * n), col(nq * wires);
  for (size_t q = 0; q < nq; ++q) {
    domain_.LagrangeCoefficients(query_points[q], 1, absl::MakeSpan(&lambda[q * n], n));
  }
  // Rows 0..full-1 are complete; row `full` (if any) holds `tail` wires,
  // the rest of it being the zero padding of missing calls.
  const size_t full = input_length() / wires;
  const size_t tail = input_length() % wires;
  const uint64_t* in = input_share.data();
  const uint64_t* coeff[8];  // L_{Q+i}(r_q); num_queries <= 8
  for (size_t q = 0; q < nq; ++q) coeff[q] = &lambda[q * n + nq];
  for (size_t l = 0; l < wires;) {
    uint64_t* out[8];
#if defined(__AVX512F__) || defined(__AVX2__)
    if (nq == 2 && l + lanes::WideOps::kWidth <= wires) {
      for (size_t q = 0; q < 2; ++q) out[q] = &col[q * wires + l];
      ColumnSumsLanes<lanes::WideOps, 2>(coeff, full, in + l, wires, out);
      l += lanes::WideOps::kWidth;
      continue;
    }
#endif
    if (nq == 2 && l + 2 <= wires) {
      for (size_t q = 0; q < 2; ++q) out[q] = &col[q * wires + l];
      ColumnSums<2, 2>(coeff, full, in + l, wires, out);
      l += 2;
    } else {
      for (size_t q = 0; q < nq; ++q) {
        out[0] = &col[q * wires + l];
        ColumnSums<1, 1>(&coeff[q], full, in + l, wires, out);
      }
      l += 1;
    }
  }
  for (size_t q = 0; q < nq; ++q) {
    uint64_t* out = verifier_share.data() + 1 + q * (wires + 1);
    const uint64_t* lq = &lambda[q * n];
    for (size_t l = 0; l < wires; ++l) {
      DotAccumulator acc;
      for (size_t s = 0; s < nq; ++s) acc.Add(lq[s], proof_share[l * nq + s]);
      if (l < tail) acc.Add(lq[nq + full], input_share[full * wires + l]);
      out[l] = gl::Add(col[q * wires + l], acc.Get());
    }
    domain_.LagrangeCoefficients(query_points[q], 3, absl::MakeSpan(mu));
    DotAccumulator pr;
    for (size_t x = 0; x < 3 * n; ++x) pr.Add(mu[x], p[x]);
    out[wires] = pr.Get();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ParallelSumCubicFlp::Decide(absl::Span<const uint64_t> verifier) const {
  if (verifier.size() != verifier_length()) {
    return absl::InvalidArgumentError("verifier message has the wrong length");
  }
  // Constant-time accumulation of the failure flags (the inputs are public
  // once reconstructed, but there is no reason to branch early).
  uint64_t bad = verifier[0];
  const size_t wires = 2 * chunk_;
  for (int q = 0; q < queries_; ++q) {
    const uint64_t* w = verifier.data() + 1 + q * (wires + 1);
    uint64_t g = 0;
    for (size_t c = 0; c < chunk_; ++c) {
      g = gl::Add(g, gl::Mul(w[2 * c], gl::Sub(gl::Mul(w[2 * c + 1], w[2 * c + 1]), 1)));
    }
    bad |= g ^ w[wires];
  }
  return bad == 0;
}

}  // namespace tandem::crypto::proof
