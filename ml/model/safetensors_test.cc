#include "ml/model/safetensors.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

std::string Le64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

uint64_t LoadHeaderEnd(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return 8 + n;
}

std::string FileOf(const std::string& header, const std::string& data) {
  return Le64(header.size()) + header + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string out(v.size() * 4, '\0');
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

// Known answer: the bytes the format's specification defines for one F32
// tensor "a" = [1, -2] (header padded with one space to 8-byte alignment),
// written out by hand.
TEST(SafetensorsTest, EncodesTheSpecifiedBytes) {
  SafetensorsFile f;
  auto a = Float32Tensor("a", {2}, std::vector<float>{1.0f, -2.0f});
  ASSERT_THAT(a, IsOk());
  f.tensors.push_back(*a);
  auto bytes = EncodeSafetensors(f);
  ASSERT_THAT(bytes, IsOk());
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(header.size(), 54u);
  const std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + header + "  " +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  EXPECT_EQ(*bytes, expected);
}

// What other writers emit (Python's json.dumps spacing, metadata, tensors
// listed out of buffer order, a scalar, an empty tensor) decodes.
TEST(SafetensorsTest, DecodesOtherWritersLayouts) {
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [1, 2], )"
      R"("data_offsets": [8, 16]}, "s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}, )"
      R"("e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [16, 16]}})";
  const std::string data = Le64(7) + Floats({0.5f, 3.0f});
  auto f = DecodeSafetensors(FileOf(header, data));
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(f->metadata.at("format"), "pt");
  ASSERT_EQ(f->tensors.size(), 3u);
  EXPECT_EQ(f->tensors[0].name, "s");  // buffer order
  EXPECT_EQ(f->tensors[0].shape.size(), 0u);
  EXPECT_EQ(f->tensors[1].name, "w");
  EXPECT_EQ(f->tensors[1].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*AsFloat32(f->tensors[1]), (std::vector<float>{0.5f, 3.0f}));
  EXPECT_EQ(f->tensors[2].name, "e");
  EXPECT_TRUE(f->tensors[2].data.empty());
}

TEST(SafetensorsTest, RoundTripsEveryDtypeBitExactly) {
  std::mt19937_64 gen(42);
  const char* dtypes[] = {"F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
  for (int trial = 0; trial < 20; ++trial) {
    SafetensorsFile f;
    f.metadata["trial"] = std::to_string(trial);
    for (int i = 0; i < 6; ++i) {
      SafeTensor t;
      t.name = "layer" + std::to_string(i) + ".weight";
      t.dtype = dtypes[gen() % std::size(dtypes)];
      const int rank = static_cast<int>(gen() % 4);
      for (int d = 0; d < rank; ++d) t.shape.push_back(static_cast<int64_t>(gen() % 5));
      t.data.resize(static_cast<size_t>(ElementCount(t.shape) * DtypeSize(t.dtype)));
      for (char& c : t.data) c = static_cast<char>(gen());
      f.tensors.push_back(std::move(t));
    }
    auto bytes = EncodeSafetensors(f);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(LoadHeaderEnd(*bytes) % 8, 0u);
    auto back = DecodeSafetensors(*bytes);
    ASSERT_THAT(back, IsOk());
    EXPECT_EQ(back->metadata, f.metadata);
    ASSERT_EQ(back->tensors.size(), f.tensors.size());
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      EXPECT_EQ(back->tensors[i].name, f.tensors[i].name);
      EXPECT_EQ(back->tensors[i].dtype, f.tensors[i].dtype);
      EXPECT_EQ(back->tensors[i].shape, f.tensors[i].shape);
      EXPECT_EQ(back->tensors[i].data, f.tensors[i].data);
    }
    EXPECT_EQ(*EncodeSafetensors(*back), *bytes);
  }
}

TEST(SafetensorsTest, EveryTruncationIsRefused) {
  SafetensorsFile f;
  f.tensors.push_back(*Float32Tensor("a", {3}, std::vector<float>{1, 2, 3}));
  const std::string bytes = *EncodeSafetensors(f);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(DecodeSafetensors(bytes.substr(0, n)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << n;
  }
}

TEST(SafetensorsTest, MalformedHeadersAreRefusedNamingTheRule) {
  const std::string data = Floats({1, 2});
  auto refused = [&](const std::string& header, const std::string& d, const char* why) {
    EXPECT_THAT(DecodeSafetensors(FileOf(header, d)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)))
        << header;
  };
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", data, "valid JSON");
  refused(R"([1,2])", data, "JSON object");
  refused(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", data, "unknown dtype");
  refused(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data, "non-negative");
  refused(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data, "elements");
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data, "begin <= end");
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data, "unknown field");
  refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data, "hole");
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          data, "overlapping");
  refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data, "belong to no");
  refused(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data, "past the data");
  refused(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", data,
          "elements");
  refused(R"({"__metadata__":{"k":1}})", "", "not a string");
  // A header length past the file, or beyond the limit.
  EXPECT_THAT(DecodeSafetensors(Le64(uint64_t{1} << 62) + "{}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("header length")));
}

TEST(SafetensorsTest, WriterRefusesWhatItCouldNotWriteFaithfully) {
  SafetensorsFile f;
  f.tensors.push_back(*Float32Tensor("a", {1}, std::vector<float>{1}));
  f.tensors.push_back(*Float32Tensor("a", {1}, std::vector<float>{2}));
  EXPECT_THAT(EncodeSafetensors(f).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  f.tensors.pop_back();
  f.tensors[0].data.pop_back();
  EXPECT_THAT(EncodeSafetensors(f).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Float32Tensor("b", {2, 2}, std::vector<float>{1, 2, 3}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  SafeTensor bad = *Float32Tensor("c", {1}, std::vector<float>{1});
  bad.name = "__metadata__";
  EXPECT_THAT(EncodeSafetensors({{bad}, {}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SafetensorsTest, AsFloat32RefusesNonFiniteValuesAndOtherDtypes) {
  auto t = Float32Tensor("w", {2}, std::vector<float>{1, std::nanf("")});
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(AsFloat32(*t).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
  t->dtype = "I32";
  EXPECT_THAT(AsFloat32(*t).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SafetensorsTest, FilesAreWrittenWholeAndReadBack) {
  const std::string dir = ::testing::TempDir() + "/safetensors_test";
  std::filesystem::create_directories(dir);
  SafetensorsFile f;
  f.tensors.push_back(*Float32Tensor("w", {2, 2}, std::vector<float>{1, 2, 3, 4}));
  const std::string path = dir + "/m.safetensors";
  TANDEM_ASSERT_OK(WriteSafetensorsFile(path, f));
  auto back = ReadSafetensorsFile(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->tensors[0].data, f.tensors[0].data);
  EXPECT_THAT(ReadSafetensorsFile(path, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
  EXPECT_THAT(ReadSafetensorsFile(dir + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound));
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);  // no leftovers
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::ml
