#include "base/status_macros.h"

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  TANDEM_ASSIGN_OR_RETURN(int h, Half(x));
  TANDEM_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x, int* calls) {
  ++*calls;
  return x % 2 == 0 ? absl::OkStatus() : absl::OutOfRangeError("not even");
}

absl::Status BothEven(int a, int b, int* calls) {
  TANDEM_RETURN_IF_ERROR(CheckEven(a, calls));
  TANDEM_RETURN_IF_ERROR(CheckEven(b, calls));
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesValue) {
  EXPECT_THAT(Quarter(12), IsOkAndHolds(3));
}

TEST(StatusMacros, AssignOrReturnPropagatesErrorUnchanged) {
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd")));
}

TEST(StatusMacros, ReturnIfErrorStopsAtFirstError) {
  int calls = 0;
  EXPECT_THAT(BothEven(1, 2, &calls), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_THAT(BothEven(2, 4, &calls), IsOk());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace tandem
