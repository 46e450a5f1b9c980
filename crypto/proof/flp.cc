#include "crypto/proof/flp.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto::proof {

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

  const size_t wires = 3 * chunk_;
  std::vector<uint64_t> lambda(n), mu(t);
  for (int q = 0; q < queries_; ++q) {
    uint64_t* out = verifier_share.data() + 1 + q * (wires + 1);
    wire_domain_.Coefficients(query_points[q], absl::MakeSpan(lambda));
    std::vector<DotAccumulator> acc(wires);
    for (size_t l = 0; l < wires; ++l) {
      for (int s = 0; s < queries_; ++s) acc[l].Add(lambda[s], proof_share[l * queries_ + s]);
    }
    // Inputs are call-major, so the 3c wires of point Q + i are contiguous.
    for (size_t i = 0; i < parallel_calls_; ++i) {
      const uint64_t coeff = lambda[queries_ + i];
      const size_t first = 3 * i * chunk_;
      const size_t count = std::min(wires, input_length() - std::min(first, input_length()));
      for (size_t l = 0; l < count; ++l) acc[l].Add(coeff, input_share[first + l]);
    }
    for (size_t l = 0; l < wires; ++l) out[l] = acc[l].Get();
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
