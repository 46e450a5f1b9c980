#include "ml/kernels/tensor.h"

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::testing::StatusIs;

TEST(Tensor, ZerosHasShapeAndZeros) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({2, 3}));
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.ShapeString(), "[2, 3]");
  for (float x : t.data()) EXPECT_EQ(x, 0.0f);
}

TEST(Tensor, ZerosRejectsNegativeDimension) {
  EXPECT_THAT(Tensor::Zeros({2, -1}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Tensor, ZerosRejectsOverflowingShape) {
  EXPECT_THAT(Tensor::Zeros({1 << 20, 1 << 20, 1 << 20}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Tensor, FromDataRejectsSizeMismatch) {
  EXPECT_THAT(Tensor::FromData({2, 2}, {1, 2, 3}), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::FromData({3}, {1, 2, 3}));
  EXPECT_EQ(t.data()[2], 3.0f);
}

TEST(Tensor, CheckRankRejectsWrongRankAndZeroDims) {
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({2, 0}));
  EXPECT_THAT(CheckRank(t, 2, "t"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckRank(t, 3, "t"), StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor u, Tensor::Zeros({2, 1}));
  EXPECT_THAT(CheckRank(u, 2, "u"), ::tandem::testing::IsOk());
}

}  // namespace
}  // namespace tandem::ml::kernels
