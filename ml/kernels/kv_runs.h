// Keys and values held as runs of rows rather than one tensor (a KV cache's
// pages, ml/worker/kv_cache_store.h), and the fixed-position blocks the
// kernels that read them (SnapKvScoresOfRuns, DenseAttentionOfRuns) compute
// on. Blocks sit at multiples of kKvBlock whatever the runs, so a kernel
// runs the same products of the same shapes for any split of its keys, and
// its output equals the contiguous tensors' bit for bit (a GEMM's rounding
// depends on its shape). Thread safety: pure functions.
#ifndef TANDEM_ML_KERNELS_KV_RUNS_H_
#define TANDEM_ML_KERNELS_KV_RUNS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace tandem::ml::kernels {

// fn(keys, values, first, count): rows [first, first + count) of one KV
// head's keys and values (row stride d each; values may be null for a
// kernel that reads keys only). The rows are read only while fn runs.
using KvRunFn =
    absl::FunctionRef<void(const float* keys, const float* values, int64_t first, int64_t count)>;
// runs(kv_head, fn): calls fn for consecutive runs of that head covering
// [0, N) in order; returns its own error, if any. May be called
// concurrently (one call per query head or tile).
using KvRuns = absl::FunctionRef<absl::Status(int64_t kv_head, KvRunFn fn)>;

// Keys per block.
inline constexpr int64_t kKvBlock = 512;

// A block that straddles runs, assembled here (one per thread of a kernel).
struct KvBlockScratch {
  std::vector<float> keys, values;
};

// Delivers head `kv`'s runs to block(keys, values, b0, count) in blocks
// [b0, b0 + count) of kKvBlock keys at fixed positions (the last one
// shorter), for the blocks with lo <= b0 < hi only: a block inside one run
// is read in place, one that straddles runs is copied into *scratch first
// (values too when `with_values`; else block's values are null); blocks
// outside [lo, hi) are neither copied nor delivered. INVALID_ARGUMENT when
// the runs do not cover [0, n) in order; runs()'s own errors.
absl::Status VisitKvBlocks(
    KvRuns runs, int64_t kv, int64_t n, int64_t d, bool with_values, int64_t lo, int64_t hi,
    KvBlockScratch* scratch,
    absl::FunctionRef<void(const float* keys, const float* values, int64_t b0, int64_t count)>
        block);

}  // namespace tandem::ml::kernels

#endif  // TANDEM_ML_KERNELS_KV_RUNS_H_
