#include "ml/data/dataset.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// The real data sets: these tests FAIL (not skip) when the packages are
// missing, and the message names deploy/install-deps.sh.
TEST(Digits, LoadsTheSklearnCsv) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset d, LoadDigitsCsv());
  EXPECT_EQ(d.size(), 1797);
  EXPECT_EQ(d.features.cols(), 64);
  EXPECT_EQ(d.num_classes, 10);
  std::vector<int> counts(10);
  for (int l : d.labels) ++counts[l];
  for (int c : counts) EXPECT_GE(c, 170);  // about 180 per class
  EXPECT_GE(d.features.minCoeff(), 0.0f);
  EXPECT_LE(d.features.maxCoeff(), 1.0f);
  EXPECT_EQ(d.labels[0], 0);  // first row of digits.csv is a zero
}

TEST(FashionMnist, LoadsTheTestSplit) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset d, LoadFashionMnist(kFashionMnistDir, "t10k"));
  EXPECT_EQ(d.size(), 10000);
  EXPECT_EQ(d.features.cols(), 784);
  std::vector<int> counts(10);
  for (int l : d.labels) ++counts[l];
  for (int c : counts) EXPECT_EQ(c, 1000);
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset head, LoadFashionMnist(kFashionMnistDir, "t10k", 5));
  EXPECT_EQ(head.size(), 5);
  EXPECT_EQ(head.features.row(4), d.features.row(4));
}

TEST(Readers, MissingFileNamesTheInstallScript) {
  EXPECT_THAT(LoadDigitsCsv("/nonexistent/digits.csv.gz"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("deploy/install-deps.sh")));
  EXPECT_THAT(LoadFashionMnist("/nonexistent", "train"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("deploy/install-deps.sh")));
  EXPECT_THAT(LoadFashionMnist(kFashionMnistDir, "validation"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Readers, IdxRoundTripAndCorruptHeaders) {
  const std::string dir = ::testing::TempDir();
  const std::string img = dir + "/t-images.gz", lab = dir + "/t-labels.gz";
  WriteGz(img, Be32(0x803) + Be32(2) + Be32(2) + Be32(3) + std::string("\x00\xff\x10\x20\x30\x40" "abcdef", 12));
  TANDEM_ASSERT_OK_AND_ASSIGN(Matrix m, ReadIdxImages(img));
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 6);
  EXPECT_FLOAT_EQ(m(0, 1), 1.0f);
  EXPECT_FLOAT_EQ(m(1, 0), 'a' / 255.0f);
  // Wrong magic, size mismatch, truncated header.
  WriteGz(img, Be32(0x801) + Be32(2) + Be32(2) + Be32(3) + std::string(12, 'x'));
  EXPECT_THAT(ReadIdxImages(img), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
  WriteGz(img, Be32(0x803) + Be32(3) + Be32(2) + Be32(3) + std::string(12, 'x'));
  EXPECT_THAT(ReadIdxImages(img), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("payload")));
  WriteGz(img, Be32(0x803) + Be32(3));
  EXPECT_THAT(ReadIdxImages(img), StatusIs(absl::StatusCode::kInvalidArgument));
  WriteGz(img, Be32(0x803) + Be32(1) + Be32(100000) + Be32(1));
  EXPECT_THAT(ReadIdxImages(img), StatusIs(absl::StatusCode::kInvalidArgument));
  WriteGz(lab, Be32(0x801) + Be32(3) + std::string("\x01\x02\x09", 3));
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<int> labels, ReadIdxLabels(lab));
  EXPECT_EQ(labels, (std::vector<int>{1, 2, 9}));
  WriteGz(lab, Be32(0x801) + Be32(4) + std::string("\x01\x02\x09", 3));
  EXPECT_THAT(ReadIdxLabels(lab), StatusIs(absl::StatusCode::kInvalidArgument));
  // Corrupt gzip stream.
  {
    std::ofstream f(lab, std::ios::binary);
    f << std::string("\x1f\x8b\x08\x00garbage-garbage-garbage", 26);
  }
  EXPECT_THAT(ReadIdxLabels(lab), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Readers, DigitsCsvValidation) {
  const std::string path = ::testing::TempDir() + "/digits_bad.csv.gz";
  std::string row;
  for (int i = 0; i < 64; ++i) row += "3,";
  WriteGz(path, row + "7\n");
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset ok, LoadDigitsCsv(path));
  EXPECT_EQ(ok.labels, std::vector<int>{7});
  EXPECT_FLOAT_EQ(ok.features(0, 0), 3.0f / 16.0f);
  WriteGz(path, row + "10\n");
  EXPECT_THAT(LoadDigitsCsv(path), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label")));
  WriteGz(path, "17," + row.substr(2) + "1\n");
  EXPECT_THAT(LoadDigitsCsv(path), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pixel")));
  WriteGz(path, row + "\n");
  EXPECT_THAT(LoadDigitsCsv(path), StatusIs(absl::StatusCode::kInvalidArgument));
  WriteGz(path, "a," + row.substr(2) + "1\n");
  EXPECT_THAT(LoadDigitsCsv(path), StatusIs(absl::StatusCode::kInvalidArgument));
  WriteGz(path, "");
  EXPECT_THAT(LoadDigitsCsv(path), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Dataset, SubsetAndSplit) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Dataset d, LoadDigitsCsv());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto split, TrainTestSplit(d, 0.25, 3));
  EXPECT_EQ(split.first.size() + split.second.size(), d.size());
  EXPECT_EQ(split.second.size(), 449);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto again, TrainTestSplit(d, 0.25, 3));
  EXPECT_EQ(split.second.labels, again.second.labels);
  EXPECT_THAT(TrainTestSplit(d, 1.0, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(d.Subset(std::vector<int64_t>{0, 5000}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml
