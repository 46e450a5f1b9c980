#include "ml/kernels/dusa.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/attention_core.h"
#include "tbb/parallel_for.h"

#ifdef TANDEM_HAVE_CUDA
#include "ml/kernels/cuda/cuda_kernels.h"
#endif

namespace tandem::ml::kernels {
namespace {

absl::Status Validate(const Tensor& q, const Tensor& k, const Tensor& v, int64_t block_size) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 4, "q"));
  if (k.shape() != q.shape() || v.shape() != q.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("q ", q.ShapeString(), ", k ",
                                                   k.ShapeString(), ", v ", v.ShapeString(),
                                                   " must have equal shapes"));
  }
  const int64_t n = q.dim(2);
  if (block_size < 1 || block_size > n || n % block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size ", block_size, " must divide the sequence length ", n));
  }
  return absl::OkStatus();
}

// Token m of group g sits at g * group_mul + m * step.
struct Layout {
  int64_t groups, group_len, group_mul, step;
};

Layout LayoutFor(int64_t n, int64_t b, DusaStage stage) {
  if (stage == DusaStage::kIntraBlock) return {n / b, b, b, 1};
  return {b, n / b, 1, b};
}

absl::StatusOr<Tensor> RunStage(const Tensor& q, const Tensor& k, const Tensor& v, int64_t b,
                                DusaStage stage, Backend backend) {
  const int64_t bh = q.dim(0) * q.dim(1), n = q.dim(2), d = q.dim(3);
  const Layout l = LayoutFor(n, b, stage);
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(q.shape()));
  if (backend == Backend::kCuda) {
#ifdef TANDEM_HAVE_CUDA
    if (d > cuda::kMaxHeadDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA DuSA supports head dim <= ", cuda::kMaxHeadDim, ", got ", d));
    }
    const int rc = cuda::GroupedAttention(q.ptr(), k.ptr(), v.ptr(), out.mutable_ptr(), bh, n, d,
                                          l.groups, l.group_len, l.group_mul, l.step);
    if (rc != 0) return absl::InternalError(absl::StrCat("CUDA grouped attention failed: ", rc));
    return out;
#else
    return absl::UnavailableError("built without CUDA");
#endif
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* o = out.mutable_ptr();
  tbb::parallel_for(int64_t{0}, bh * l.groups, [&](int64_t task) {
    const int64_t head = task / l.groups, g = task % l.groups;
    const int64_t off = (head * n + g * l.group_mul) * d;
    const int64_t stride = l.step * d;
    internal::AttendRows(q.ptr() + off, stride, l.group_len, k.ptr() + off, stride,
                         v.ptr() + off, stride, l.group_len, d, internal::kNoCausalMask, scale,
                         o + off, stride);
  });
  return out;
}

absl::Status CheckBackend(Backend backend) {
  if (backend == Backend::kCuda && !CudaDeviceAvailable()) {
    return absl::UnavailableError("no CUDA device present");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> DusaStageForward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        int64_t block_size, DusaStage stage, Backend backend) {
  TANDEM_RETURN_IF_ERROR(Validate(q, k, v, block_size));
  TANDEM_RETURN_IF_ERROR(CheckBackend(backend));
  return RunStage(q, k, v, block_size, stage, backend);
}

absl::StatusOr<Tensor> DusaForward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   int64_t block_size, Backend backend) {
  TANDEM_RETURN_IF_ERROR(Validate(q, k, v, block_size));
  TANDEM_RETURN_IF_ERROR(CheckBackend(backend));
  TANDEM_ASSIGN_OR_RETURN(Tensor x1,
                          RunStage(q, k, v, block_size, DusaStage::kIntraBlock, backend));
  return RunStage(q, k, x1, block_size, DusaStage::kInterBlock, backend);
}

double DusaFlops(int64_t batch_heads, int64_t n, int64_t d, int64_t block_size) {
  return 4.0 * static_cast<double>(batch_heads) * n * d *
         (static_cast<double>(block_size) + static_cast<double>(n) / block_size);
}

}  // namespace tandem::ml::kernels
