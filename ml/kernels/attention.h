// Dense scaled-dot-product attention (SDPA), the reference every sparse
// attention kernel here is checked against: O = softmax(Q K^T / sqrt(d) + M) V
// (Vaswani et al. 2017). GQA aware: query head h reads KV head h / (H / H_kv).
//
// Shapes: q (H, Nq, d), k and v (H_kv, Nk, d); output (H, Nq, d).
// Causal: query i sits at absolute position Nk - Nq + i and sees keys j <= it.
// Thread safety: pure functions; they use the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_ATTENTION_H_
#define TANDEM_ML_KERNELS_ATTENTION_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ml/kernels/kv_runs.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels {

// Returns INVALID_ARGUMENT unless q, k, v are rank 3 with matching d and
// Nk, k and v of equal shape, H divisible by H_kv, and (causal) Nq <= Nk.
absl::Status ValidateAttentionShapes(const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool causal);

// Blocked Eigen GEMMs with an online softmax over blocks of 512 keys,
// parallel over query tiles (a KV head's G query heads share one when
// queries are few) and, for a few tiles only, over 32K-key spans merged
// after (flash-decoding). Errors as ValidateAttentionShapes.
absl::StatusOr<Tensor> DenseAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                      bool causal);

// DenseAttention over H_kv heads of Nk keys and values of dim d given as
// runs (kv_runs.h; a KV cache's pages): equal to DenseAttention over the
// same tensors bit for bit. kv() is called once per (query tile, key
// span), concurrently. INVALID_ARGUMENT for a q that does not fit, causal
// with Nq > Nk, or runs that do not cover [0, Nk) in order; kv()'s own
// errors.
absl::StatusOr<Tensor> DenseAttentionOfRuns(const Tensor& q, int64_t hkv, int64_t nk, int64_t d,
                                            KvRuns kv, bool causal);

// Naive triple loop in double precision with an arbitrary mask:
// allowed(i, j) says whether query i may attend key j. Test reference only
// (O(H Nq Nk d), single-threaded). INVALID_ARGUMENT as above, or when some
// query row has no allowed key.
absl::StatusOr<Tensor> MaskedAttentionNaive(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const std::function<bool(int64_t, int64_t)>& allowed);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_ATTENTION_H_
