#include "base/logging.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

class CapturingSink : public LogSink {
 public:
  void Send(LogSeverity severity, absl::string_view file, int line,
            absl::string_view message) override {
    lines.emplace_back(message);
    severities.push_back(severity);
  }
  std::vector<std::string> lines;
  std::vector<LogSeverity> severities;
};

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = SetLogSink(&sink_); }
  void TearDown() override {
    SetLogSink(previous_);
    SetMinLogSeverity(LogSeverity::kInfo);
    SetVerbosity(0);
  }
  CapturingSink sink_;
  LogSink* previous_ = nullptr;
};

TEST_F(LoggingTest, LogReachesInstalledSink) {
  TANDEM_LOG(INFO) << "round " << 7;
  TANDEM_LOG(ERROR) << "bad";
  ASSERT_EQ(sink_.lines.size(), 2u);
  EXPECT_EQ(sink_.lines[0], "round 7");
  EXPECT_EQ(sink_.severities[1], LogSeverity::kError);
}

TEST_F(LoggingTest, MinSeverityDropsLowerLines) {
  SetMinLogSeverity(LogSeverity::kWarning);
  TANDEM_LOG(INFO) << "dropped";
  TANDEM_LOG(WARNING) << "kept";
  EXPECT_THAT(sink_.lines, ::testing::ElementsAre("kept"));
}

TEST_F(LoggingTest, VlogObeysVerbosityAndSkipsEvaluation) {
  int evaluated = 0;
  auto side_effect = [&] { return ++evaluated; };
  TANDEM_VLOG(1) << side_effect();
  EXPECT_EQ(evaluated, 0);
  SetVerbosity(1);
  TANDEM_VLOG(1) << side_effect();
  EXPECT_EQ(evaluated, 1);
  EXPECT_THAT(sink_.lines, ::testing::ElementsAre("1"));
}

TEST(LoggingDeathTest, CheckFailureAborts) {
  EXPECT_DEATH({ TANDEM_CHECK(1 + 1 == 3) << "math"; }, "Check failed: 1 \\+ 1 == 3 math");
}

TEST(LoggingDeathTest, PassingCheckDoesNothing) {
  int x = 2;
  TANDEM_CHECK(x == 2) << "never printed";
  SUCCEED();
}

}  // namespace
}  // namespace tandem
