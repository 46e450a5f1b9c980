#include "ml/train/centralized.h"

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(RunCentralized, TrainsDigitsOnFullRandomAndCoidoSubsets) {
  CentralizedOptions o;
  o.dataset = "digits";
  o.model = "mlp";
  o.epochs = 8;
  o.batch_size = 32;
  int calls = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(CentralizedResult full,
                              RunCentralized(o, [&](const EpochReport&) { ++calls; }));
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(full.train_size, 1348);
  EXPECT_GT(full.epochs.back().test.accuracy, 0.93);
  o.subset = "random";
  TANDEM_ASSERT_OK_AND_ASSIGN(CentralizedResult random, RunCentralized(o, {}));
  EXPECT_EQ(random.train_size, 270);
  o.subset = "coido";
  TANDEM_ASSERT_OK_AND_ASSIGN(CentralizedResult coido, RunCentralized(o, {}));
  EXPECT_EQ(coido.train_size, 270);
  EXPECT_GT(coido.selection_seconds, 0.0);
  o.model = "cnn";
  o.subset = "full";
  o.epochs = 1;
  TANDEM_ASSERT_OK_AND_ASSIGN(CentralizedResult cnn, RunCentralized(o, {}));
  EXPECT_GT(cnn.forward_flops_per_sample, 0.0);
}

TEST(RunCentralized, RejectsUnknownNamesAndMissingData) {
  CentralizedOptions o;
  o.dataset = "cifar";
  EXPECT_THAT(RunCentralized(o, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  o.dataset = "digits";
  o.model = "resnet";
  EXPECT_THAT(RunCentralized(o, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  o.model = "mlp";
  o.optimizer = "lamb";
  EXPECT_THAT(RunCentralized(o, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  o.optimizer = "sgd";
  o.subset = "half";
  EXPECT_THAT(RunCentralized(o, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  o.subset = "full";
  o.digits_csv = "/nonexistent/digits.csv.gz";
  EXPECT_THAT(RunCentralized(o, {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("deploy/install-deps.sh")));
}

}  // namespace
}  // namespace tandem::ml
