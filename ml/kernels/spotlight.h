// Spotlight Attention retrieval: a non-linear hash of queries and keys into
// sign-bit codes and Hamming top-k selection of the KV entries to attend
// (Li et al., arXiv 2508.19740; semantics from kernels_research.md section 7).
//
//   h(x) = L2(L1(x)),  L1(x) = SiLU(x W1 + b1) + x,  L2(x) = x W2 + b2 + x
//   code(x) bit j = [h_j(x) > 0], packed 32 bits per uint32 (bit j of word w
//   is dimension 32 w + j, LSB first)
//   s(q, k) = popcount(~(c_q XOR c_k)) = (d + <sgn h(q), sgn h(k)>) / 2
// For GQA the G query heads of a KV head score one key code by the sum of
// their similarities. Top-k keeps the k highest scores, ties towards the
// lower position, so selection is deterministic. With W = 0, b = 0 the hash
// is sign(x) (the LSH-like baseline).
// Thread safety: pure functions over the global oneTBB arena / the GPU.
#ifndef TANDEM_ML_KERNELS_SPOTLIGHT_H_
#define TANDEM_ML_KERNELS_SPOTLIGHT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

// Hash MLP parameters, d x d matrices applied as x W (row vectors).
struct SpotlightHashWeights {
  Tensor w1, b1, w2, b2;  // (d, d), (d), (d, d), (d)
  int64_t dim() const { return w1.rank() == 2 ? w1.dim(0) : 0; }
  // W ~ N(0, scale^2 / d) entries, b ~ N(0, 0.01^2), from a fixed seed.
  static absl::StatusOr<SpotlightHashWeights> Random(int64_t d, uint64_t seed, float scale = 1.0f);
  // All zero: the hash is the identity.
  static absl::StatusOr<SpotlightHashWeights> Zeros(int64_t d);
};

// Returns INVALID_ARGUMENT unless the four tensors have shapes (d,d), (d),
// (d,d), (d) with d a positive multiple of 32.
absl::Status ValidateHashWeights(const SpotlightHashWeights& w);

// Row-major packed codes: rows x words uint32.
struct PackedCodes {
  int64_t rows = 0;
  int64_t words = 0;
  std::vector<uint32_t> bits;
};

// h(x) for x (n, d). INVALID_ARGUMENT on shape mismatch or bad weights.
absl::StatusOr<Tensor> SpotlightHash(const Tensor& x, const SpotlightHashWeights& w);
// Sign bits of h (n, d), d % 32 == 0. INVALID_ARGUMENT otherwise.
absl::StatusOr<PackedCodes> PackSignBits(const Tensor& h);
// +1 / -1 per bit, shape (rows, 32 words): the inverse of PackSignBits on signs.
absl::StatusOr<Tensor> UnpackSigns(const PackedCodes& codes);

// score_j = sum over query rows g of popcount(~(q_g XOR k_j)), for every key
// row j. INVALID_ARGUMENT when word counts differ or inputs are empty or
// malformed; UNAVAILABLE for kCuda without a device; INTERNAL on CUDA error.
absl::StatusOr<std::vector<int32_t>> HammingScores(const PackedCodes& queries,
                                                   const PackedCodes& keys,
                                                   Backend backend = Backend::kCpu);
// HammingScores over `rows` key codes of queries.words words each in the
// caller's memory (`keys`, rows x words uint32, 4-byte aligned: a KV cache
// page, no copy), into out[0, rows). CPU only. INVALID_ARGUMENT for
// malformed queries, rows < 1 or an `out` of another size. Thread-safe.
absl::Status HammingScoresInto(const PackedCodes& queries, const uint32_t* keys, int64_t rows,
                               absl::Span<int32_t> out);
// Positions of the k best scores, best first (ties: lower position).
// INVALID_ARGUMENT unless 1 <= k <= keys.rows; other errors as HammingScores.
absl::StatusOr<std::vector<int64_t>> HammingTopK(const PackedCodes& queries,
                                                 const PackedCodes& keys, int64_t k,
                                                 Backend backend = Backend::kCpu);
// HammingTopK's selection over scores already computed (HammingScores of
// `queries` against the keys): positions of the k best, best first (ties:
// lower position), without scoring again. INVALID_ARGUMENT unless
// 1 <= k <= scores.size() and every score is in [0, 32 queries.rows
// queries.words].
absl::StatusOr<std::vector<int64_t>> TopKOfScores(const PackedCodes& queries,
                                                  absl::Span<const int32_t> scores, int64_t k);
// Reference default k = max(min(N, 20), N - int(0.98 N)).
int64_t SpotlightDefaultTopK(int64_t n);

// Attention of the query rows q (G, d) over the selected rows of k, v (N, d)
// only (the -inf mask elsewhere). INVALID_ARGUMENT on shape mismatch or an
// index outside [0, N).
absl::StatusOr<Tensor> SelectedAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const std::vector<int64_t>& selected);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_SPOTLIGHT_H_
