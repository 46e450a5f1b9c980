// In-memory labelled dataset and the readers for the Debian-packaged data
// sets (Fashion-MNIST IDX, sklearn digits CSV).
//
// Every reader validates what it reads from disk (magic numbers, sizes,
// value ranges) and returns INVALID_ARGUMENT with the file name and the
// problem; a missing file is NOT_FOUND with a hint to run
// deploy/install-deps.sh. Thread-compatible value types.
#ifndef TANDEM_ML_DATA_DATASET_H_
#define TANDEM_ML_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/conv_layers.h"
#include "ml/model/layer.h"

namespace tandem::ml {

struct Dataset {
  Matrix features;          // one sample per row, values in [0, 1] for images
  std::vector<int> labels;  // in [0, num_classes)
  int num_classes = 0;
  ImageShape shape;         // C x H x W of a row (1 x 8 x 8 for digits)
  // Optional natural group id per sample (writer, device, source). Empty if
  // the data set has none.
  std::vector<int> groups;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Rows `indices` as a new dataset (groups copied when present).
  // Returns INVALID_ARGUMENT for an index out of range.
  absl::StatusOr<Dataset> Subset(absl::Span<const int64_t> indices) const;
  // Checks internal consistency (row/label counts, label range, shape).
  absl::Status Validate() const;
};

// Default install locations (Debian packages dataset-fashion-mnist and
// python3-sklearn, installed by deploy/install-deps.sh).
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr char kDigitsCsv[] =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// Reads a gzip-compressed (or plain) IDX3 image file (magic 0x00000803,
// big-endian dims) into rows scaled to [0, 1]. `max_items` > 0 truncates.
absl::StatusOr<Matrix> ReadIdxImages(const std::string& path, int64_t max_items = 0);
// Reads an IDX1 label file (magic 0x00000801). Any byte value is returned;
// LoadFashionMnist() then checks the class range.
absl::StatusOr<std::vector<int>> ReadIdxLabels(const std::string& path, int64_t max_items = 0);

// Fashion-MNIST split "train" (60000) or "t10k" (10000) from `dir`.
// Returns INVALID_ARGUMENT when image and label counts differ or labels are
// outside [0, 10).
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, const std::string& split,
                                         int64_t max_items = 0);

// sklearn digits: 1797 rows of 64 integers in [0, 16] then the label in
// [0, 9], comma separated, no header; features scaled by 1/16.
absl::StatusOr<Dataset> LoadDigitsCsv(const std::string& path = kDigitsCsv);

// Deterministic split into (train, test) with `test_fraction` of the rows
// (shuffled by `seed`). INVALID_ARGUMENT when the fraction is not in (0, 1).
absl::StatusOr<std::pair<Dataset, Dataset>> TrainTestSplit(const Dataset& data,
                                                           double test_fraction, uint64_t seed);

// The project's datasets by name, as (train, test): "digits" (sklearn
// digits, a seeded 80/20 split) or "fmnist" (Fashion-MNIST train / t10k,
// truncated to max_train / max_test items when > 0). Every party of a
// federation (coordinator evaluation, clients' shards, tandem-sim) uses this,
// so that all agree on the split. INVALID_ARGUMENT for another name;
// NOT_FOUND (with the install hint) when the package is missing.
absl::StatusOr<std::pair<Dataset, Dataset>> LoadNamedDataset(const std::string& name,
                                                             uint64_t split_seed,
                                                             int64_t max_train = 0,
                                                             int64_t max_test = 0);

}  // namespace tandem::ml

#endif  // TANDEM_ML_DATA_DATASET_H_
