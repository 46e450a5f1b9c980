// Every CUDA kernel against its CPU reference on seeded random inputs.
// Label gpu; each test skips when no CUDA device is present (CPU-only
// builds and machines without a driver pass by skipping).
// Tolerance: 2e-5 absolute for float attention (different summation order,
// online softmax); bit-exact for the integer Hamming scores.
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;

#define TANDEM_SKIP_WITHOUT_GPU()                                   \
  if (!CudaDeviceAvailable()) {                                     \
    GTEST_SKIP() << "no CUDA device: " << ActiveBackendDescription(); \
  }

TEST(CudaEquivalence, DusaStagesAndForwardMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 64, 128}) {
    SCOPED_TRACE(d);
    const Tensor q = RandomTensor({2, 3, 256, d}, 1), k = RandomTensor({2, 3, 256, d}, 2),
                 v = RandomTensor({2, 3, 256, d}, 3);
    for (int64_t b : {1, 16, 32, 256}) {
      SCOPED_TRACE(b);
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor cpu, DusaForward(q, k, v, b, Backend::kCpu));
      TANDEM_ASSERT_OK_AND_ASSIGN(Tensor gpu, DusaForward(q, k, v, b, Backend::kCuda));
      EXPECT_LT(MaxAbsDiff(cpu, gpu), 2e-5);
    }
  }
}

TEST(CudaEquivalence, HammingScoresAreBitExact) {
  TANDEM_SKIP_WITHOUT_GPU();
  const Tensor qh = RandomTensor({4, 128}, 4), kh = RandomTensor({100003, 128}, 5);
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes qc, PackSignBits(qh));
  TANDEM_ASSERT_OK_AND_ASSIGN(PackedCodes kc, PackSignBits(kh));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto cpu, HammingScores(qc, kc, Backend::kCpu));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto gpu, HammingScores(qc, kc, Backend::kCuda));
  EXPECT_EQ(cpu, gpu);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto top_cpu, HammingTopK(qc, kc, 2000, Backend::kCpu));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto top_gpu, HammingTopK(qc, kc, 2000, Backend::kCuda));
  EXPECT_EQ(top_cpu, top_gpu);
}

TEST(CudaEquivalence, ChooseBackendPrefersCudaWithDevice) {
  TANDEM_SKIP_WITHOUT_GPU();
  EXPECT_THAT(ChooseBackend("", true), ::tandem::testing::IsOkAndHolds(Backend::kCuda));
}

}  // namespace
}  // namespace tandem::ml::kernels
