// InfiGFusion Graph-on-Logits Distillation (arXiv 2505.13893;
// kernels_research.md section 12). Each model's logits become a
// co-activation graph over vocabulary channels, and the student's graph is
// pulled towards the teacher's with a sorting-based closed-form surrogate of
// the Gromov-Wasserstein (GW) distance, O(n log n) instead of O(n^4) [F].
//
// The paper's exact surrogate is not public (the criterion file is absent
// from both repositories), so this is the spec's reconstruction [I]:
//   p_t = softmax(z_t / tau) over the vocabulary; p~_t keeps the top-k entries
//         of row t (by logit, ties to the lower id) and zeroes the rest;
//   A   = sum_t p~_t p~_t^T restricted to the active ids (n_A <= T k nodes);
//   d_i = sum_j A_ij = sum_t p~_ti s_t,  s_t = sum_j p~_tj  (node strength,
//         O(T k) without forming A);
//   GLD = (1/n) sum_r (dS_(r) - dT_(r))^2, both strength lists sorted in
//         descending order and zero-padded to n = max(n_S, n_T)
//         (1-D optimal transport between the strength distributions).
// Softmax-then-top-k (rather than raw logits) keeps A non-negative and
// bounded by T; padding (rather than a union of ids) keeps GLD invariant
// under independent relabelling of either model's vocabulary.
//
// Guarantee (proved here, checked in gld_test.cc against brute force), for
// n x n graphs A, B with degree vectors a, b:
//   (1) min over permutations P of ||A - P B P^T||_F^2 >= GLD(a, b), by
//       Cauchy-Schwarz on each row sum and the rearrangement inequality;
//   (2) for every coupling pi with uniform marginals 1/n,
//       sum_ijkl (A_ik - B_jl)^2 pi_ij pi_kl >= GLD(a, b) / n^2, by Jensen
//       on the inner sum and optimality of the sorted 1-D coupling.
// So GLD / n^2 is a lower bound of the exact (coupling) GW objective, which
// is itself at most the permutation optimum / n^2.
//
// Thread safety: pure functions; rows run on the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_DISTILL_GLD_H_
#define TANDEM_ML_KERNELS_DISTILL_GLD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::distill {

struct GldOptions {
  int64_t top_k = 8;        // k per position (not recovered from the paper [I])
  double temperature = 1.0; // tau of the softmax
};

// Largest graph BuildCoActivationGraph forms densely (n x n float64).
inline constexpr int64_t kMaxGraphNodes = 4096;

struct RowTopK {
  int64_t rows = 0, k = 0;
  std::vector<int64_t> indices;  // (rows, k), per row by descending value
  std::vector<float> values;     // (rows, k)
};

// Top-k of every row of logits (T, V). INVALID_ARGUMENT unless rank 2 and
// 1 <= k <= V.
absl::StatusOr<RowTopK> TopKLogits(const Tensor& logits, int64_t k);

struct CoActivationGraph {
  std::vector<int64_t> nodes;     // active vocabulary ids, ascending (n)
  std::vector<double> adjacency;  // (n, n), A_ij = sum_t p~_ti p~_tj
  std::vector<double> strengths;  // (n), row sums of A
};

// The graph of one model's logits (T, V). INVALID_ARGUMENT on rank, k
// outside [1, V], temperature not in [1e-3, 1e3], or more than
// kMaxGraphNodes active ids.
absl::StatusOr<CoActivationGraph> BuildCoActivationGraph(const Tensor& logits,
                                                         const GldOptions& options);

// (1/n) sum_r (a_(r) - b_(r))^2 with both sorted descending and the shorter
// zero-padded to n = max sizes; 0 when both are empty.
double SortedStrengthDistance(std::vector<double> a, std::vector<double> b);

struct GldLossResult {
  double loss = 0;
  int64_t nodes = 0;     // n = max(n_S, n_T)
  Tensor grad_student;   // d loss / d student logits (T, V)
};

// GLD between teacher and student logits (T, V) and its gradient with
// respect to the student's logits (top-k sets and sort order held fixed:
// the loss is smooth where they do not change). INVALID_ARGUMENT on shape
// mismatch or options as BuildCoActivationGraph (no node cap).
absl::StatusOr<GldLossResult> GldLoss(const Tensor& teacher, const Tensor& student,
                                      const GldOptions& options);

// sum_ijkl (A_ik - B_jl)^2 pi_ij pi_kl for n x n matrices a, b and a
// coupling pi (n x n). REQUIRES: sizes n*n (checked by the callers).
double GwObjective(absl::Span<const double> a, absl::Span<const double> b,
                   absl::Span<const double> pi, int64_t n);

// min over permutations sigma of sum_ik (A_ik - B_sigma(i)sigma(k))^2, by
// brute force (n! permutations). INVALID_ARGUMENT unless 1 <= n <= 9 and
// both have n*n entries.
absl::StatusOr<double> ExactPermutationGw(absl::Span<const double> a, absl::Span<const double> b,
                                          int64_t n);

}  // namespace tandem::ml::kernels::distill

#endif  // TANDEM_ML_KERNELS_DISTILL_GLD_H_
