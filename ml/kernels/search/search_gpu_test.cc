// CUDA kernels of the search family against their CPU references on seeded
// random inputs. Label gpu; every test skips without a CUDA device.
// Tolerance: 1e-4 absolute for the float32 scan (different summation order:
// 16-lane shuffle tree on the GPU, sequential sum on the CPU).
#include <cmath>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/backend.h"
#include "ml/kernels/search/ssm_scan.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::search {
namespace {

using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;

TEST(SearchCudaEquivalence, SelectiveScanMatchesCpu) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device: " << ActiveBackendDescription();
  for (int64_t n : {1, 16, 128, 300}) {
    for (int64_t p : {1, 16, 37}) {
      SCOPED_TRACE(::testing::Message() << "N=" << n << " P=" << p);
      const int64_t batch = 2, len = 77, heads = 3;
      const Tensor x = RandomTensor({batch, len, heads, p}, 1),
                   dt = RandomTensor({batch, len, heads}, 2, 0.5f),
                   b = RandomTensor({batch, len, n}, 3), c = RandomTensor({batch, len, n}, 4),
                   d = RandomTensor({heads}, 5), bias = RandomTensor({heads}, 6, 0.1f),
                   h0 = RandomTensor({batch, heads, p, n}, 7);
      const Tensor a = *Tensor::FromData({heads}, {-1.0f, -4.0f, -12.0f});
      TANDEM_ASSERT_OK_AND_ASSIGN(
          ScanOutput cpu, SelectiveScan(x, dt, a, b, c, d, bias, {.chunk = 0, .initial_state = &h0}));
      TANDEM_ASSERT_OK_AND_ASSIGN(
          ScanOutput gpu, SelectiveScan(x, dt, a, b, c, d, bias,
                                        {.backend = Backend::kCuda, .initial_state = &h0}));
      const double scale = std::sqrt(static_cast<double>(n));
      EXPECT_LT(MaxAbsDiff(cpu.y, gpu.y), 1e-4 * scale);
      EXPECT_LT(MaxAbsDiff(cpu.state, gpu.state), 1e-4 * scale);
    }
  }
}

}  // namespace
}  // namespace tandem::ml::kernels::search
