#include "ml/kernels/backend.h"

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;

TEST(Backend, EmptyRequestFallsBackToCpuWithoutDevice) {
  const Backend expected = CudaDeviceAvailable() ? Backend::kCuda : Backend::kCpu;
  EXPECT_THAT(ChooseBackend("", /*kernel_has_cuda=*/true), IsOkAndHolds(expected));
  EXPECT_THAT(ChooseBackend("", /*kernel_has_cuda=*/false), IsOkAndHolds(Backend::kCpu));
}

TEST(Backend, CpuIsAlwaysAvailable) {
  EXPECT_THAT(ChooseBackend("cpu", true), IsOkAndHolds(Backend::kCpu));
  EXPECT_EQ(BackendName(Backend::kCpu), "cpu");
  EXPECT_EQ(BackendName(Backend::kCuda), "cuda");
}

TEST(Backend, CudaUnavailableWithoutDeviceOrKernel) {
  EXPECT_THAT(ChooseBackend("cuda", /*kernel_has_cuda=*/false),
              StatusIs(absl::StatusCode::kUnavailable));
  if (!CudaDeviceAvailable()) {
    EXPECT_THAT(ChooseBackend("cuda", true), StatusIs(absl::StatusCode::kUnavailable));
  } else {
    EXPECT_THAT(ChooseBackend("cuda", true), IsOkAndHolds(Backend::kCuda));
  }
}

TEST(Backend, UnknownNameIsInvalidArgument) {
  EXPECT_THAT(ChooseBackend("tpu", true), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Backend, DescriptionNamesTheBackend) {
  const std::string d = ActiveBackendDescription();
  EXPECT_EQ(d.rfind(CudaDeviceAvailable() ? "cuda" : "cpu", 0), 0u) << d;
}

}  // namespace
}  // namespace tandem::ml::kernels
