// GoogleTest matchers for absl::Status / absl::StatusOr (this Abseil ships
// none). Target tandem_base_testing; test-only.
//
//   EXPECT_THAT(s, IsOk());
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x")));
//   EXPECT_THAT(or_value, IsOkAndHolds(Eq(3)));
//   TANDEM_ASSERT_OK(s);  TANDEM_ASSERT_OK_AND_ASSIGN(auto v, or_value);
#ifndef TANDEM_BASE_TESTING_STATUS_MATCHERS_H_
#define TANDEM_BASE_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

template <typename InnerMatcher>
class IsOkAndHoldsMatcher {
 public:
  explicit IsOkAndHoldsMatcher(InnerMatcher inner) : inner_(std::move(inner)) {}

  template <typename StatusOrT>
  operator ::testing::Matcher<StatusOrT>() const {  // NOLINT
    using T = typename std::decay_t<StatusOrT>::value_type;
    const ::testing::Matcher<const T&> inner =
        ::testing::SafeMatcherCast<const T&>(inner_);
    return ::testing::MakeMatcher(new Impl<StatusOrT, T>(inner));
  }

 private:
  template <typename StatusOrT, typename T>
  class Impl : public ::testing::MatcherInterface<StatusOrT> {
   public:
    explicit Impl(::testing::Matcher<const T&> inner) : inner_(std::move(inner)) {}
    bool MatchAndExplain(StatusOrT actual,
                         ::testing::MatchResultListener* listener) const override {
      if (!actual.ok()) {
        *listener << "which has status " << actual.status();
        return false;
      }
      return inner_.MatchAndExplain(*actual, listener);
    }
    void DescribeTo(std::ostream* os) const override {
      *os << "is OK and holds a value that ";
      inner_.DescribeTo(os);
    }
    void DescribeNegationTo(std::ostream* os) const override {
      *os << "is not OK or holds a value that ";
      inner_.DescribeNegationTo(os);
    }

   private:
    ::testing::Matcher<const T&> inner_;
  };
  InnerMatcher inner_;
};

}  // namespace internal

MATCHER(IsOk, "is OK") {
  const absl::Status& s = internal::GetStatus(arg);
  if (!s.ok()) *result_listener << "which has status " << s;
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has status code " + ::testing::PrintToString(code)) {
  const absl::Status& s = internal::GetStatus(arg);
  *result_listener << "which has status " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

inline auto StatusIs(absl::StatusCode code) {
  return StatusIs(code, ::testing::_);
}

template <typename InnerMatcher>
internal::IsOkAndHoldsMatcher<InnerMatcher> IsOkAndHolds(InnerMatcher inner) {
  return internal::IsOkAndHoldsMatcher<InnerMatcher>(std::move(inner));
}

}  // namespace tandem::testing

#define TANDEM_ASSERT_OK(expr) \
  ASSERT_THAT(expr, ::tandem::testing::IsOk())
#define TANDEM_EXPECT_OK(expr) \
  EXPECT_THAT(expr, ::tandem::testing::IsOk())

#define TANDEM_MATCHERS_CONCAT_INNER_(a, b) a##b
#define TANDEM_MATCHERS_CONCAT_(a, b) TANDEM_MATCHERS_CONCAT_INNER_(a, b)
#define TANDEM_ASSERT_OK_AND_ASSIGN(lhs, rexpr)                              \
  auto TANDEM_MATCHERS_CONCAT_(tandem_statusor_, __LINE__) = (rexpr);        \
  ASSERT_THAT(TANDEM_MATCHERS_CONCAT_(tandem_statusor_, __LINE__).status(),  \
              ::tandem::testing::IsOk());                                    \
  lhs = std::move(TANDEM_MATCHERS_CONCAT_(tandem_statusor_, __LINE__)).value()

#endif  // TANDEM_BASE_TESTING_STATUS_MATCHERS_H_
