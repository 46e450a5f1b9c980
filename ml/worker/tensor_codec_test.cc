#include "ml/worker/tensor_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::testing::StatusIs;

TEST(TensorCodec, FloatRoundTrip) {
  const kernels::Tensor t = kernels::testing::RandomTensor({2, 3, 4}, 1);
  const proto::Tensor p = EncodeFloat("x", t);
  EXPECT_EQ(p.data().size(), 24u * 4);
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w, DecodeTensor(p, 1000, "x"));
  EXPECT_EQ(w.shape, t.shape());
  EXPECT_EQ(kernels::testing::MaxAbsDiff(w.f32, t), 0.0);
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::Tensor back, ToFloatTensor(p));
  EXPECT_EQ(back.shape(), t.shape());
}

TEST(TensorCodec, Float64IsConvertedToFloat) {
  proto::Tensor p;
  p.set_dtype(proto::DTYPE_FLOAT64);
  p.add_shape(2);
  const double v[2] = {1.5, -2.25};
  p.set_data(reinterpret_cast<const char*>(v), sizeof(v));
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w, DecodeTensor(p, 10, "p"));
  EXPECT_EQ(w.f32.data()[0], 1.5f);
  EXPECT_EQ(w.f32.data()[1], -2.25f);
}

TEST(TensorCodec, IntegerTensorsKeepRawBytes) {
  const proto::Tensor p = EncodeInt64("i", {3}, {1, -2, 3});
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w, DecodeTensor(p, 10, "i"));
  ASSERT_EQ(w.raw.size(), 24u);
  int64_t second;
  std::memcpy(&second, w.raw.data() + 8, 8);
  EXPECT_EQ(second, -2);
}

TEST(TensorCodec, RejectsMalformedTensors) {
  proto::Tensor p = EncodeFloat("x", kernels::testing::RandomTensor({4}, 2));
  proto::Tensor short_data = p;
  short_data.mutable_data()->resize(15);
  EXPECT_THAT(DecodeTensor(short_data, 100, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::Tensor no_dtype = p;
  no_dtype.set_dtype(proto::DTYPE_UNSPECIFIED);
  EXPECT_THAT(DecodeTensor(no_dtype, 100, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::Tensor bad_enum = p;
  bad_enum.set_dtype(static_cast<proto::DType>(99));
  EXPECT_THAT(DecodeTensor(bad_enum, 100, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::Tensor negative = p;
  negative.set_shape(0, -4);
  EXPECT_THAT(DecodeTensor(negative, 100, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeTensor(p, 3, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::Tensor huge = p;
  huge.clear_shape();
  for (int i = 0; i < 4; ++i) huge.add_shape(int64_t{1} << 20);
  EXPECT_THAT(DecodeTensor(huge, int64_t{1} << 40, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::Tensor nan = p;
  const float bad = NAN;
  std::memcpy(nan.mutable_data()->data(), &bad, 4);
  EXPECT_THAT(DecodeTensor(nan, 100, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ToFloatTensor(EncodeInt64("i", {1}, {1})),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorCodec, CheckFiniteOutputNamesTheFirstBadValue) {
  auto t = kernels::Tensor::FromData({3}, {1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(t.ok());
  proto::Tensor ok = EncodeFloat("y", *t);
  EXPECT_TRUE(CheckFiniteOutput(ok, "out 0").ok());
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto b = kernels::Tensor::FromData({3}, {1.0f, bad, 3.0f});
    ASSERT_TRUE(b.ok());
    const absl::Status s = CheckFiniteOutput(EncodeFloat("y", *b), "out 0");
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
    EXPECT_NE(s.message().find("out 0 holds NaN or infinity at index 1"), std::string::npos)
        << s.message();
  }
  // Integer outputs are not floats: never refused.
  EXPECT_TRUE(CheckFiniteOutput(EncodeInt32("i", {2}, {-1, 7}), "out 1").ok());
}

// Fills a TensorBytes for `t` (its declared size) with `data`, in 3-byte pieces.
TensorBytes Pieces(const proto::Tensor& t, absl::string_view data, bool floats) {
  TensorBytes b(t.dtype(), *DeclaredBytes(t, "t"), floats);
  for (size_t off = 0; off < data.size(); off += 3) {
    EXPECT_TRUE(b.Append(data.substr(off, 3)).ok());
  }
  return b;
}

TEST(TensorCodec, TensorBytesHoldsExactlyTheDeclaredSize) {
  const proto::Tensor p = EncodeFloat("x", kernels::testing::RandomTensor({4, 5}, 2));
  TANDEM_ASSERT_OK_AND_ASSIGN(size_t declared, DeclaredBytes(p, "x"));
  EXPECT_EQ(declared, 80u);
  for (bool floats : {true, false}) {
    TensorBytes b(p.dtype(), declared, floats);
    EXPECT_EQ(b.holds_floats(), floats);
    TANDEM_ASSERT_OK(b.Append(absl::string_view(p.data()).substr(0, 79)));
    EXPECT_FALSE(b.complete());
    EXPECT_THAT(b.Append("ab"), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(b.received_bytes(), 79u);  // a refused piece appends nothing
    TANDEM_ASSERT_OK(b.Append(absl::string_view(p.data()).substr(79)));
    EXPECT_TRUE(b.complete());
    EXPECT_EQ(b.TakeString(), p.data());
  }
  proto::Tensor bad = p;
  bad.set_dtype(static_cast<proto::DType>(42));
  EXPECT_THAT(DeclaredBytes(bad, "x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorCodec, StreamedDecodeMatchesTheWholeDecode) {
  const kernels::Tensor t = kernels::testing::RandomTensor({3, 7}, 4);
  const proto::Tensor p = EncodeFloat("x", t);
  proto::Tensor meta = p;
  meta.clear_data();
  for (bool floats : {true, false}) {
    TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w,
                                DecodeTensor(meta, Pieces(meta, p.data(), floats), 100, "x"));
    EXPECT_EQ(w.shape, t.shape());
    EXPECT_EQ(kernels::testing::MaxAbsDiff(w.f32, t), 0.0);
  }
  // float64 is converted, integers keep their bytes.
  proto::Tensor f64;
  f64.set_dtype(proto::DTYPE_FLOAT64);
  f64.add_shape(2);
  const double v[2] = {1.5, -2.25};
  const std::string bytes(reinterpret_cast<const char*>(v), sizeof(v));
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor d, DecodeTensor(f64, Pieces(f64, bytes, true), 10, "d"));
  EXPECT_EQ(d.f32.data()[1], -2.25f);
  const proto::Tensor i = EncodeInt64("i", {3}, {1, -2, 3});
  proto::Tensor imeta = i;
  imeta.clear_data();
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w,
                              DecodeTensor(imeta, Pieces(imeta, i.data(), true), 10, "i"));
  EXPECT_EQ(w.raw, i.data());
}

TEST(TensorCodec, StreamedDecodeRefusesShortDataNanAndTheCap) {
  const proto::Tensor p = EncodeFloat("x", kernels::testing::RandomTensor({16}, 5));
  proto::Tensor meta = p;
  meta.clear_data();
  for (bool floats : {true, false}) {
    EXPECT_THAT(DecodeTensor(meta, Pieces(meta, absl::string_view(p.data()).substr(0, 60), floats),
                             100, "x"),
                StatusIs(absl::StatusCode::kInvalidArgument));
    std::string nan = p.data();
    const float bad = NAN;
    std::memcpy(nan.data() + 8, &bad, 4);
    EXPECT_THAT(DecodeTensor(meta, Pieces(meta, nan, floats), 100, "x"),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(DecodeTensor(meta, Pieces(meta, p.data(), floats), 15, "x"),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

}  // namespace
}  // namespace tandem::ml::worker
