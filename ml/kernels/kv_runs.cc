#include "ml/kernels/kv_runs.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels {

absl::Status VisitKvBlocks(
    KvRuns runs, int64_t kv, int64_t n, int64_t d, bool with_values, int64_t lo, int64_t hi,
    KvBlockScratch* scratch,
    absl::FunctionRef<void(const float* keys, const float* values, int64_t b0, int64_t count)>
        block) {
  const size_t block_floats = static_cast<size_t>(kKvBlock * d);
  if (scratch->keys.size() < block_floats) scratch->keys.resize(block_floats);
  if (with_values && scratch->values.size() < block_floats) scratch->values.resize(block_floats);
  int64_t covered = 0;
  bool in_order = true;
  TANDEM_RETURN_IF_ERROR(runs(kv, [&](const float* keys, const float* values, int64_t first,
                                      int64_t count) {
    if (!in_order || first != covered || count < 1 || count > n - first ||
        (with_values && values == nullptr)) {
      in_order = false;
      return;
    }
    for (int64_t at = first; at < first + count;) {
      const int64_t b0 = at / kKvBlock * kKvBlock, b1 = std::min(n, b0 + kKvBlock);
      const int64_t take = std::min(first + count, b1) - at;
      const int64_t from = (at - first) * d;
      if (b0 >= lo && b0 < hi) {  // else neither copied nor delivered
        if (at == b0 && take == b1 - b0) {
          block(keys + from, with_values ? values + from : nullptr, b0, take);
        } else {
          const size_t bytes = sizeof(float) * static_cast<size_t>(take * d);
          std::memcpy(scratch->keys.data() + (at - b0) * d, keys + from, bytes);
          if (with_values) {
            std::memcpy(scratch->values.data() + (at - b0) * d, values + from, bytes);
          }
          if (at + take == b1) {
            block(scratch->keys.data(), with_values ? scratch->values.data() : nullptr, b0,
                  b1 - b0);
          }
        }
      }
      at += take;
    }
    covered += count;
  }));
  if (!in_order || covered != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the keys of KV head ", kv, " came as runs that do not cover [0, ", n,
                     ") in order", with_values ? " with values" : ""));
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml::kernels
