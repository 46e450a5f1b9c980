#include "ml/data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace tandem::ml {
namespace {

constexpr char kInstallHint[] =
    " (install the data sets with deploy/install-deps.sh: Debian packages "
    "dataset-fashion-mnist and python3-sklearn)";

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// Reads a whole gzip (or plain; zlib passes those through) file.
absl::StatusOr<std::string> ReadGzFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("data file missing: ", path, kInstallHint));
  }
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path, kInstallHint));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const int n = gzread(f.get(), buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f.get(), &err);
      return absl::InvalidArgumentError(absl::StrCat(path, ": gzip error: ", msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{1} << 31)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 2 GiB"));
    }
  }
  return out;
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

absl::Status Dataset::Validate() const {
  if (features.rows() != size()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset: ", features.rows(), " rows but ",
                                                   size(), " labels"));
  }
  if (num_classes <= 0) return absl::InvalidArgumentError("dataset: num_classes must be > 0");
  for (int l : labels) {
    if (l < 0 || l >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("dataset: label ", l, " outside [0, ",
                                                     num_classes, ")"));
    }
  }
  if (shape.size() != features.cols()) {
    return absl::InvalidArgumentError("dataset: image shape does not match the row width");
  }
  if (!groups.empty() && static_cast<int64_t>(groups.size()) != size()) {
    return absl::InvalidArgumentError("dataset: groups size differs from the sample count");
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> Dataset::Subset(absl::Span<const int64_t> indices) const {
  Dataset out;
  out.num_classes = num_classes;
  out.shape = shape;
  out.features.resize(static_cast<Eigen::Index>(indices.size()), features.cols());
  out.labels.resize(indices.size());
  if (!groups.empty()) out.groups.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t j = indices[i];
    if (j < 0 || j >= size()) {
      return absl::InvalidArgumentError(absl::StrCat("subset: index ", j, " outside [0, ", size(), ")"));
    }
    out.features.row(static_cast<Eigen::Index>(i)) = features.row(j);
    out.labels[i] = labels[j];
    if (!groups.empty()) out.groups[i] = groups[j];
  }
  return out;
}

absl::StatusOr<Matrix> ReadIdxImages(const std::string& path, int64_t max_items) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, ReadGzFile(path));
  if (bytes.size() < 16) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated IDX header"));
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (BigEndian32(p) != 0x00000803) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bad IDX3 magic 0x",
                                                   absl::Hex(BigEndian32(p))));
  }
  const uint64_t n = BigEndian32(p + 4), rows = BigEndian32(p + 8), cols = BigEndian32(p + 12);
  if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": implausible image size ", rows, "x", cols));
  }
  if (bytes.size() - 16 != n * rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header says ", n, " images of ", rows,
                                                   "x", cols, " but the payload has ",
                                                   bytes.size() - 16, " bytes"));
  }
  const uint64_t take = max_items > 0 ? std::min<uint64_t>(n, max_items) : n;
  Matrix m(static_cast<Eigen::Index>(take), static_cast<Eigen::Index>(rows * cols));
  const unsigned char* px = p + 16;
  for (uint64_t i = 0; i < take * rows * cols; ++i) m.data()[i] = px[i] * (1.0f / 255.0f);
  return m;
}

absl::StatusOr<std::vector<int>> ReadIdxLabels(const std::string& path, int64_t max_items) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, ReadGzFile(path));
  if (bytes.size() < 8) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated IDX header"));
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (BigEndian32(p) != 0x00000801) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bad IDX1 magic 0x",
                                                   absl::Hex(BigEndian32(p))));
  }
  const uint64_t n = BigEndian32(p + 4);
  if (bytes.size() - 8 != n) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header says ", n,
                                                   " labels but the payload has ", bytes.size() - 8));
  }
  const uint64_t take = max_items > 0 ? std::min<uint64_t>(n, max_items) : n;
  return std::vector<int>(p + 8, p + 8 + take);
}

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, const std::string& split,
                                         int64_t max_items) {
  if (split != "train" && split != "t10k") {
    return absl::InvalidArgumentError(absl::StrCat("fashion-mnist: split must be train or t10k, got ", split));
  }
  Dataset d;
  TANDEM_ASSIGN_OR_RETURN(d.features,
                          ReadIdxImages(absl::StrCat(dir, "/", split, "-images-idx3-ubyte.gz"), max_items));
  TANDEM_ASSIGN_OR_RETURN(d.labels,
                          ReadIdxLabels(absl::StrCat(dir, "/", split, "-labels-idx1-ubyte.gz"), max_items));
  d.num_classes = 10;
  d.shape = {1, 28, 28};
  if (d.features.cols() != 784) {
    return absl::InvalidArgumentError(absl::StrCat("fashion-mnist: images are not 28x28"));
  }
  TANDEM_RETURN_IF_ERROR(d.Validate());
  return d;
}

absl::StatusOr<Dataset> LoadDigitsCsv(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, ReadGzFile(path));
  Dataset d;
  d.num_classes = 10;
  d.shape = {1, 8, 8};
  std::vector<float> values;
  int64_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    ++line_no;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cells.size() != 65) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected 65 columns, got ",
                                                     cells.size()));
    }
    for (size_t c = 0; c < 65; ++c) {
      double v = 0;
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(cells[c]), &v) || v != static_cast<int>(v)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": column ", c + 1,
                                                       " is not an integer"));
      }
      const int iv = static_cast<int>(v);
      if (c < 64) {
        if (iv < 0 || iv > 16) {
          return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": pixel ", iv,
                                                         " outside [0, 16]"));
        }
        values.push_back(static_cast<float>(iv) / 16.0f);
      } else {
        if (iv < 0 || iv > 9) {
          return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": label ", iv,
                                                         " outside [0, 9]"));
        }
        d.labels.push_back(iv);
      }
    }
  }
  if (d.labels.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));
  d.features = ConstMatrixMap(values.data(), d.size(), 64);
  TANDEM_RETURN_IF_ERROR(d.Validate());
  return d;
}

absl::StatusOr<std::pair<Dataset, Dataset>> TrainTestSplit(const Dataset& data,
                                                           double test_fraction, uint64_t seed) {
  if (!(test_fraction > 0 && test_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("split: test fraction ", test_fraction,
                                                   " not in (0, 1)"));
  }
  std::vector<int64_t> idx(static_cast<size_t>(data.size()));
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937_64 gen(seed);
  std::shuffle(idx.begin(), idx.end(), gen);
  const size_t n_test = static_cast<size_t>(test_fraction * static_cast<double>(idx.size()));
  std::vector<int64_t> test(idx.begin(), idx.begin() + n_test), train(idx.begin() + n_test, idx.end());
  TANDEM_ASSIGN_OR_RETURN(Dataset tr, data.Subset(train));
  TANDEM_ASSIGN_OR_RETURN(Dataset te, data.Subset(test));
  return std::make_pair(std::move(tr), std::move(te));
}

absl::StatusOr<std::pair<Dataset, Dataset>> LoadNamedDataset(const std::string& name,
                                                             uint64_t split_seed,
                                                             int64_t max_train,
                                                             int64_t max_test) {
  if (name == "digits") {
    TANDEM_ASSIGN_OR_RETURN(Dataset all, LoadDigitsCsv());
    return TrainTestSplit(all, 0.2, split_seed);
  }
  if (name == "fmnist") {
    TANDEM_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(kFashionMnistDir, "train", max_train));
    TANDEM_ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(kFashionMnistDir, "t10k", max_test));
    return std::make_pair(std::move(train), std::move(test));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset '", name, "' (expected digits or fmnist)"));
}

}  // namespace tandem::ml
