// Ada-KV: head-wise adaptive KV-cache budget allocation on top of SnapKV
// scoring (Feng et al., arXiv 2407.11550; SnapKV: Li et al., arXiv
// 2404.14469). Semantics follow kernels_research.md section 2 (the reference
// AdaptiveSnapKVCluster algorithm, restated from its formulas).
//
// Pipeline for the prefill of one layer, post-RoPE q (H, N, d), k/v
// (H_kv, N, d), GQA group G = H / H_kv, window w, L = N - w:
//  1. SnapKvScores: A = softmax(q[-w:] k^T / sqrt d) with the causal mask
//     inside the window; s_h[j] = mean_i A_h[i, j] for j < L; GQA reduction
//     over the G query heads of a KV head (mean or max); 1-D pooling with
//     kernel k, padding k/2, stride 1 (max: pad -inf; avg: zero padding,
//     divisor k, like avg_pool1d with count_include_pad).
//  2. AllocateBudgets: B' = budget - w. If B' >= L keep everything. Else take
//     the global top-(H_kv B') of all heads' scores (the minimiser of the
//     paper's L1 bound 2hC - 2C sum I A), count c_h per head, and apply the
//     safeguard floor: cap_h = round(c_h (1 - alpha) + int(B' alpha)).
//     round() is half-to-even (as in the reference's Python), so sum cap_h may
//     differ from H_kv B' by up to H_kv / 2. alpha = 1 is uniform SnapKV.
//  3. SelectKept: each head keeps its own top cap_h plus the last w tokens.
//  4. CompactKvCache: gathers the kept rows into a flattened [sum b_h, d]
//     layout with cu_seqlens (exclusive prefix sums of b_h = cap_h + w), the
//     layout varlen decode attention reads.
// Ties always break towards the lower (head, position), so results are
// deterministic. Thread safety: pure functions over the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_ADAKV_H_
#define TANDEM_ML_KERNELS_ADAKV_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ml/kernels/kv_runs.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

enum class GqaReduce { kMean, kMax };
enum class PoolKind { kMax, kAvg };

struct SnapKvOptions {
  int64_t window = 32;               // w, observation window (tokens), 1 <= w < N
  int64_t kernel = 7;                // pooling kernel, odd, >= 1
  GqaReduce gqa = GqaReduce::kMean;  // reduction over a KV head's query heads
  PoolKind pool = PoolKind::kMax;    // Ada-KV default max; kvpress SnapKV uses avg
};

struct AdaKvOptions {
  SnapKvOptions snap;
  int64_t budget = 128;  // B per head, window included (base_capacity), >= window
  double alpha = 0.2;    // safeguard floor fraction in [0, 1]
};

struct BudgetAllocation {
  std::vector<int64_t> counts;  // c_h: head h's share of the global top-(H_kv B')
  std::vector<int64_t> caps;    // cap_h: kept non-window tokens of head h
};

struct CompactKv {
  Tensor keys;                             // (sum_h b_h, d)
  Tensor values;                           // (sum_h b_h, d)
  std::vector<int64_t> cu_seqlens;         // H_kv + 1 offsets into keys/values
  std::vector<std::vector<int64_t>> kept;  // per head, ascending positions
};

// Returns (H_kv, N - w) scores. q is (H, N, d), of which the last w rows
// are the window, or the window alone (H, w, d). INVALID_ARGUMENT on bad
// shapes (see ValidateAttentionShapes), w outside [1, N), or an
// even/non-positive kernel.
absl::StatusOr<Tensor> SnapKvScores(const Tensor& q, const Tensor& k, const SnapKvOptions& opt);

// SnapKvScores of H_kv heads of N keys of dim d given as runs (kv_runs.h;
// values unused, may be null): equal to SnapKvScores over the same keys bit
// for bit. keys() is called twice per query head, concurrently.
// Errors as SnapKvScores, INVALID_ARGUMENT when the runs do not cover
// [0, N) in order, and keys()'s own.
absl::StatusOr<Tensor> SnapKvScoresOfRuns(const Tensor& q, int64_t hkv, int64_t n, int64_t d,
                                          KvRuns keys, const SnapKvOptions& opt);

// scores (H_kv, L); budget_prime = B' >= 0; alpha in [0, 1]. INVALID_ARGUMENT
// otherwise or when a score is NaN.
absl::StatusOr<BudgetAllocation> AllocateBudgets(const Tensor& scores, int64_t budget_prime,
                                                 double alpha);

// Per head the top caps[h] positions of scores (ties: lower position first)
// plus positions [L, L + window), sorted ascending. INVALID_ARGUMENT when
// caps has the wrong length or a cap is outside [0, L].
absl::StatusOr<std::vector<std::vector<int64_t>>> SelectKept(const Tensor& scores,
                                                             const std::vector<int64_t>& caps,
                                                             int64_t window);

// Gathers k/v (H_kv, N, d) rows listed in kept (one list per head, positions
// in [0, N)). INVALID_ARGUMENT on shape mismatch or an out-of-range position.
absl::StatusOr<CompactKv> CompactKvCache(const Tensor& k, const Tensor& v,
                                         std::vector<std::vector<int64_t>> kept);

// Steps 2-3 on scores (H_kv, L) with opt's budget, alpha and window: the
// kept positions of each head. Errors as the steps, plus INVALID_ARGUMENT
// when budget < window.
absl::StatusOr<std::vector<std::vector<int64_t>>> AdaKvSelect(const Tensor& scores,
                                                              const AdaKvOptions& opt);

// Steps 1-4 together. Errors as the steps, plus INVALID_ARGUMENT when
// budget < window.
absl::StatusOr<CompactKv> AdaKvCompress(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const AdaKvOptions& opt);

// One decode step over a compacted cache: q (H, d) with H = G * H_kv,
// output (H, d), query head h attending KV head h / G's b_h entries.
// INVALID_ARGUMENT on shape mismatch.
absl::StatusOr<Tensor> CompactDecodeAttention(const Tensor& q, const CompactKv& cache);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_ADAKV_H_
