#include "crypto/proof/flp.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto::proof {
namespace {

// out[w] = sum_{i < rows} coeff[i] * in[i * stride + w] mod p for w < kW,
// the accumulators in registers. Lazy reduction: products of canonical
// elements are < 2^122, so 31 of them on top of a folded value (< p) fit in
// 128 bits; folds every 31 rows.
template <int kW>
void ColumnSums(const uint64_t* __restrict coeff, size_t rows, const uint64_t* __restrict in,
                size_t stride, uint64_t* out) {
  constexpr size_t kAhead = 8;
  unsigned __int128 acc[kW] = {};
  auto fold = [&] {
    for (int w = 0; w < kW; ++w) {
      acc[w] = field::Reduce128(static_cast<uint64_t>(acc[w] >> 64), static_cast<uint64_t>(acc[w]));
    }
  };
  for (size_t i0 = 0; i0 < rows; i0 += 31) {
    const size_t end = std::min(rows, i0 + 31);
    for (size_t i = i0; i < end; ++i) {
      const uint64_t c = coeff[i];
      const uint64_t* row = in + i * stride;
      // The large stride defeats the hardware prefetcher.
      if (i + kAhead < rows) __builtin_prefetch(row + kAhead * stride);
      for (int w = 0; w < kW; ++w) acc[w] += static_cast<unsigned __int128>(c) * row[w];
    }
    fold();
  }
  for (int w = 0; w < kW; ++w) out[w] = static_cast<uint64_t>(acc[w]);
}

}  // namespace

absl::StatusOr<ParallelSumMul3Flp> ParallelSumMul3Flp::Create(size_t num_calls,
                                                              size_t chunk_length,
                                                              int num_queries) {
  if (num_calls < 1 || num_calls > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("num_calls must be in [1, 2^24], got ",
                                                   num_calls));
  }
  if (num_queries < 1 || num_queries > 8) {
    return absl::InvalidArgumentError("num_queries must be in [1, 8]");
  }
  if (chunk_length == 0) {
    chunk_length = static_cast<size_t>(std::ceil(2.0 * std::sqrt(static_cast<double>(num_calls))));
    chunk_length = std::min(chunk_length, num_calls);
  }
  if (chunk_length > num_calls) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_length ", chunk_length, " exceeds num_calls ", num_calls));
  }
  const size_t parallel = (num_calls + chunk_length - 1) / chunk_length;
  const size_t n = static_cast<size_t>(num_queries) + parallel;
  TANDEM_ASSIGN_OR_RETURN(LagrangeDomain wires, LagrangeDomain::Create(n));
  TANDEM_ASSIGN_OR_RETURN(LagrangeDomain proof, LagrangeDomain::Create(3 * (n - 1) + 1));
  return ParallelSumMul3Flp(num_calls, chunk_length, num_queries, parallel, std::move(wires),
                            std::move(proof));
}

double ParallelSumMul3Flp::SoundnessLog2() const {
  const double n = static_cast<double>(wire_domain_.size());
  const double t = static_cast<double>(proof_domain_.size());
  return queries_ * std::log2(3.0 * (n - 1) / (static_cast<double>(kP61) - t));
}

uint64_t ParallelSumMul3Flp::InputAt(absl::Span<const uint64_t> inputs, size_t l,
                                     size_t x) const {
  // Point Q + i holds ParallelSum call i; wire l = 3t + component is Mul3
  // call i * c + t.
  const size_t call = (x - queries_) * chunk_ + l / 3;
  return call < num_calls_ ? inputs[3 * call + l % 3] : 0;
}

absl::Status ParallelSumMul3Flp::Prove(absl::Span<const uint64_t> inputs,
                                       absl::Span<const uint64_t> wire_seeds,
                                       absl::Span<uint64_t> proof) const {
  if (inputs.size() != input_length() || wire_seeds.size() != seed_length() ||
      proof.size() != proof_length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FLP prove sizes: inputs ", inputs.size(), "/", input_length(), ", seeds ",
        wire_seeds.size(), "/", seed_length(), ", proof ", proof.size(), "/", proof_length()));
  }
  const size_t n = wire_domain_.size();
  const size_t t = proof_domain_.size();
  const size_t wires = 3 * chunk_;
  // Wire values on {0..T-1}, wire-major: the first N from seeds and inputs,
  // the rest by Lagrange extension (one coefficient row per new point).
  std::vector<uint64_t> values(wires * t);
  for (size_t l = 0; l < wires; ++l) {
    uint64_t* w = &values[l * t];
    for (int q = 0; q < queries_; ++q) w[q] = wire_seeds[l * queries_ + q];
    for (size_t x = queries_; x < n; ++x) w[x] = InputAt(inputs, l, x);
  }
  std::vector<uint64_t> row(n);
  for (size_t x = n; x < t; ++x) {
    wire_domain_.Coefficients(x, absl::MakeSpan(row));
    for (size_t l = 0; l < wires; ++l) {
      uint64_t* w = &values[l * t];
      DotAccumulator acc;
      for (size_t i = 0; i < n; ++i) acc.Add(row[i], w[i]);
      w[x] = acc.Get();
    }
  }
  std::copy(wire_seeds.begin(), wire_seeds.end(), proof.begin());
  uint64_t* p = proof.data() + seed_length();
  for (size_t x = 0; x < t; ++x) {
    uint64_t sum = 0;
    for (size_t c = 0; c < chunk_; ++c) {
      const uint64_t ab = field::Mul(values[(3 * c) * t + x], values[(3 * c + 1) * t + x]);
      sum = field::Add(sum, field::Mul(ab, values[(3 * c + 2) * t + x]));
    }
    p[x] = sum;
  }
  return absl::OkStatus();
}

absl::Status ParallelSumMul3Flp::Query(absl::Span<const uint64_t> input_share,
                                       absl::Span<const uint64_t> proof_share,
                                       uint64_t affine_share,
                                       absl::Span<const uint64_t> query_points,
                                       absl::Span<uint64_t> verifier_share) const {
  if (input_share.size() != input_length() || proof_share.size() != proof_length() ||
      query_points.size() != static_cast<size_t>(queries_) ||
      verifier_share.size() != verifier_length()) {
    return absl::InvalidArgumentError("FLP query sizes do not match the proof system");
  }
  const size_t n = wire_domain_.size();
  const size_t t = proof_domain_.size();
  for (int q = 0; q < queries_; ++q) {
    const uint64_t r = query_points[q];
    if (r < t || r >= kP61) {
      return absl::InvalidArgumentError("query point inside the evaluation domain or >= p");
    }
    for (int j = 0; j < q; ++j) {
      if (query_points[j] == r) return absl::InvalidArgumentError("repeated query point");
    }
  }
  const uint64_t* p = proof_share.data() + seed_length();
  uint64_t y = affine_share;
  for (size_t i = 0; i < parallel_calls_; ++i) y = field::Add(y, p[queries_ + i]);
  verifier_share[0] = y;

  // f_l(r_q) = sum_x L_x(r_q) f_l(x): the seeds at x < Q, the input share
  // at x = Q + i (row i of the call-major inputs holds the 3c wires of
  // point Q + i), column by column with lazy reduction (ColumnSums).
  const size_t wires = 3 * chunk_;
  const size_t nq = static_cast<size_t>(queries_);
  std::vector<uint64_t> lambda(nq * n), mu(t);
  for (size_t q = 0; q < nq; ++q) {
    wire_domain_.Coefficients(query_points[q], absl::MakeSpan(lambda.data() + q * n, n));
  }
  // Rows 0..full-1 are complete; row `full` (if any) holds `tail` wires,
  // the rest of it being the zero padding of missing calls.
  const size_t full = input_length() / wires;
  const size_t tail = input_length() % wires;
  std::vector<uint64_t> col(wires);
  for (size_t q = 0; q < nq; ++q) {
    uint64_t* out = verifier_share.data() + 1 + q * (wires + 1);
    const uint64_t* coeff = lambda.data() + q * n + nq;  // L_{Q+i}(r_q)
    const uint64_t* in = input_share.data();
    size_t l = 0;
    for (; l + 4 <= wires; l += 4) ColumnSums<4>(coeff, full, in + l, wires, &col[l]);
    for (; l < wires; ++l) ColumnSums<1>(coeff, full, in + l, wires, &col[l]);
    for (l = 0; l < wires; ++l) {
      DotAccumulator acc;
      acc.Add(1, col[l]);
      for (size_t s = 0; s < nq; ++s) acc.Add(lambda[q * n + s], proof_share[l * nq + s]);
      if (l < tail) acc.Add(coeff[full], input_share[full * wires + l]);
      out[l] = acc.Get();
    }
  }
  for (size_t q = 0; q < nq; ++q) {
    uint64_t* out = verifier_share.data() + 1 + q * (wires + 1);
    proof_domain_.Coefficients(query_points[q], absl::MakeSpan(mu));
    DotAccumulator pr;
    for (size_t x = 0; x < t; ++x) pr.Add(mu[x], p[x]);
    out[wires] = pr.Get();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ParallelSumMul3Flp::Decide(absl::Span<const uint64_t> verifier) const {
  if (verifier.size() != verifier_length()) {
    return absl::InvalidArgumentError("verifier message has the wrong length");
  }
  // Constant-time accumulation of the failure flags (the inputs are public
  // once reconstructed, but there is no reason to branch early).
  uint64_t bad = verifier[0];
  const size_t wires = 3 * chunk_;
  for (int q = 0; q < queries_; ++q) {
    const uint64_t* w = verifier.data() + 1 + q * (wires + 1);
    uint64_t g = 0;
    for (size_t c = 0; c < chunk_; ++c) {
      g = field::Add(g, field::Mul(field::Mul(w[3 * c], w[3 * c + 1]), w[3 * c + 2]));
    }
    bad |= g ^ w[wires];
  }
  return bad == 0;
}

}  // namespace tandem::crypto::proof
