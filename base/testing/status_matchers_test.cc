#include "base/testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchers, IsOkDistinguishes) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(absl::UnknownError("y")), Not(IsOk()));
}

TEST(StatusMatchers, StatusIsChecksCodeAndMessage) {
  const absl::Status s = absl::InvalidArgumentError("bad key length");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("length")));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nope"))));
}

TEST(StatusMatchers, IsOkAndHoldsChecksValue) {
  EXPECT_THAT(absl::StatusOr<int>(5), IsOkAndHolds(Eq(5)));
  EXPECT_THAT(absl::StatusOr<int>(5), Not(IsOkAndHolds(Eq(6))));
  EXPECT_THAT(absl::StatusOr<int>(absl::AbortedError("z")), Not(IsOkAndHolds(Eq(5))));
}

}  // namespace
}  // namespace tandem::testing
