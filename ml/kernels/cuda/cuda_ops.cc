#include "ml/kernels/cuda/cuda_ops.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/backend.h"

#ifdef TANDEM_HAVE_CUDA
#include "ml/kernels/cuda/cuda_kernels.h"
#endif

namespace tandem::ml::kernels {
namespace {

#ifdef TANDEM_HAVE_CUDA
// Allocates the CompactKv tensors once the device knows the total size.
class TensorSink : public cuda::CompactSink {
 public:
  // With d = 0 only the kept positions are received.
  TensorSink(int64_t d, CompactKv* out) : d_(d), out_(out) {}
  bool Reserve(int64_t total_rows, int64_t** kept, float** keys, float** values) override {
    flat_kept_.assign(static_cast<size_t>(total_rows) + 1, 0);
    *kept = flat_kept_.data();
    if (d_ == 0) return true;
    auto k = Tensor::Zeros({total_rows, d_});
    auto v = Tensor::Zeros({total_rows, d_});
    if (!k.ok() || !v.ok()) {
      status_ = k.ok() ? v.status() : k.status();
      return false;
    }
    out_->keys = *std::move(k);
    out_->values = *std::move(v);
    *keys = out_->keys.mutable_ptr();
    *values = out_->values.mutable_ptr();
    return true;
  }
  const absl::Status& status() const { return status_; }
  const std::vector<int64_t>& flat_kept() const { return flat_kept_; }

 private:
  int64_t d_;
  CompactKv* out_;
  std::vector<int64_t> flat_kept_;
  absl::Status status_;
};
#endif

}  // namespace

CudaArenaCounters CudaArenaStats() {
#ifdef TANDEM_HAVE_CUDA
  const cuda::ArenaStats s = cuda::CudaArenaStats();
  return CudaArenaCounters{s.allocations, s.bytes_allocated, s.bytes_live};
#else
  return CudaArenaCounters{};
#endif
}

void CudaArenaRelease() {
#ifdef TANDEM_HAVE_CUDA
  if (CudaDeviceAvailable()) cuda::CudaArenaReleaseThisThread();
#endif
}

absl::StatusOr<AdaKvCudaResult> AdaKvCompactCuda(const Tensor& scores, const Tensor& k,
                                                 const Tensor& v, int64_t window,
                                                 int64_t budget_prime, double alpha,
                                                 AdaKvGather gather) {
  TANDEM_RETURN_IF_ERROR(CheckRank(scores, 2, "scores"));
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 3, "k"));
  if (v.shape() != k.shape()) return absl::InvalidArgumentError("k and v shapes differ");
  const int64_t hkv = scores.dim(0), l = scores.dim(1), n = k.dim(1);
  if (k.dim(0) != hkv || window < 0 || l + window > n) {
    return absl::InvalidArgumentError(absl::StrCat("scores ", scores.ShapeString(), " and window ",
                                                   window, " do not fit k/v ", k.ShapeString()));
  }
  if (budget_prime < 0) return absl::InvalidArgumentError("budget_prime must be >= 0");
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha ", alpha, " outside [0, 1]"));
  }
  for (float s : scores.data()) {
    if (std::isnan(s)) return absl::InvalidArgumentError("scores contain NaN");
  }
  if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device present");
#ifdef TANDEM_HAVE_CUDA
  const int64_t d = k.dim(2);
  AdaKvCudaResult r;
  if (hkv == 0 || l == 0 || d == 0) {
    // Degenerate sizes: nothing for the device to do; the CPU steps agree.
    TANDEM_ASSIGN_OR_RETURN(r.allocation, AllocateBudgets(scores, budget_prime, alpha));
    TANDEM_ASSIGN_OR_RETURN(auto kept, SelectKept(scores, r.allocation.caps, window));
    TANDEM_ASSIGN_OR_RETURN(r.cache, CompactKvCache(k, v, std::move(kept)));
    return r;
  }
  r.allocation.counts.assign(hkv, 0);
  r.allocation.caps.assign(hkv, 0);
  r.cache.cu_seqlens.assign(hkv + 1, 0);
  const bool on_device = gather == AdaKvGather::kDevice;
  TensorSink sink(on_device ? d : 0, &r.cache);
  const int rc =
      cuda::AdaKvCompact(scores.ptr(), on_device ? k.ptr() : nullptr, on_device ? v.ptr() : nullptr,
                         hkv, l, n, d, window, budget_prime, alpha, r.allocation.counts.data(),
                         r.allocation.caps.data(), r.cache.cu_seqlens.data(), &sink);
  if (rc == -2) return sink.status();
  if (rc < 0) return absl::InvalidArgumentError("sizes outside the CUDA Ada-KV limits");
  if (rc != 0) return absl::InternalError(absl::StrCat("CUDA Ada-KV compaction failed: ", rc));
  std::vector<std::vector<int64_t>> kept(hkv);
  for (int64_t h = 0; h < hkv; ++h) {
    kept[h].assign(sink.flat_kept().begin() + r.cache.cu_seqlens[h],
                   sink.flat_kept().begin() + r.cache.cu_seqlens[h + 1]);
  }
  if (!on_device) {
    TANDEM_ASSIGN_OR_RETURN(r.cache, CompactKvCache(k, v, std::move(kept)));
    return r;
  }
  r.cache.kept = std::move(kept);
  return r;
#else
  return absl::UnavailableError("built without CUDA");
#endif
}

absl::StatusOr<CompactKv> AdaKvCompressCuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AdaKvOptions& opt, AdaKvGather gather) {
  if (opt.budget < opt.snap.window) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget ", opt.budget, " is smaller than the window ", opt.snap.window));
  }
  if (v.shape() != k.shape()) return absl::InvalidArgumentError("k and v shapes differ");
  TANDEM_ASSIGN_OR_RETURN(Tensor scores, SnapKvScores(q, k, opt.snap));
  TANDEM_ASSIGN_OR_RETURN(AdaKvCudaResult r,
                          AdaKvCompactCuda(scores, k, v, opt.snap.window,
                                           opt.budget - opt.snap.window, opt.alpha, gather));
  return std::move(r.cache);
}

absl::StatusOr<Tensor> CompactDecodeAttentionCuda(const Tensor& q, const CompactKv& cache) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "q"));
  const int64_t hkv = static_cast<int64_t>(cache.cu_seqlens.size()) - 1;
  if (hkv < 1 || q.dim(0) % hkv != 0 || cache.keys.rank() != 2 || cache.keys.dim(1) != q.dim(1) ||
      cache.values.shape() != cache.keys.shape() || cache.cu_seqlens.front() != 0 ||
      cache.cu_seqlens.back() != cache.keys.dim(0)) {
    return absl::InvalidArgumentError("q (H, d) does not fit the compacted cache");
  }
  for (int64_t hh = 0; hh < hkv; ++hh) {
    if (cache.cu_seqlens[hh + 1] <= cache.cu_seqlens[hh]) {
      return absl::InvalidArgumentError(absl::StrCat("KV head ", hh, " keeps no entries"));
    }
  }
  const int64_t h = q.dim(0), d = q.dim(1);
  if (d < 1 || d > 256 || h > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA compacted decode supports 1 <= d <= 256 and H <= 65535, got d = ", d, ", H = ", h));
  }
  if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device present");
#ifdef TANDEM_HAVE_CUDA
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, d}));
  const int rc = cuda::CompactDecode(q.ptr(), h, d, cache.keys.ptr(), cache.values.ptr(),
                                     cache.cu_seqlens.data(), hkv, out.mutable_ptr());
  if (rc != 0) return absl::InternalError(absl::StrCat("CUDA compacted decode failed: ", rc));
  return out;
#else
  return absl::UnavailableError("built without CUDA");
#endif
}

}  // namespace tandem::ml::kernels
