// FftImpl::kFftw: Fft on top of FFTW 3, single precision (fftwf).
//
// Plans live in a process-wide cache keyed by (length, direction, aligned?)
// and are never destroyed (one pair per distinct length the process uses;
// FFTW plans are small next to the data they transform).
//
// Thread safety: FFTW's planner (fftwf_plan_*, fftwf_destroy_plan) is not
// thread-safe, so every planner call happens under PlanCache::mu_.
// fftwf_execute_dft on arrays other than the planning ones is thread-safe
// (FFTW manual, "Thread safety"), which is what Forward/Inverse do, without
// a lock. The new-array rule requires the same in-place-ness (we always plan
// and run in place) and the same SIMD alignment as the planning arrays: we
// keep one plan made on an fftwf_malloc'd (SIMD-aligned) buffer and one made
// with FFTW_UNALIGNED, and pick per call with fftwf_alignment_of (rows of a
// tensor at odd offsets are only 8-byte aligned).
//
// Planner flag: FFTW_ESTIMATE. FFTW_MEASURE times candidate plans at first
// use (tens of ms to seconds per length, per process, with the data arrays
// overwritten) and may pick a different algorithm on each run, so results
// would stop being bit-reproducible across runs; ESTIMATE is deterministic
// and costs microseconds. See bench/kernels.md for both measured.
#include "ml/kernels/fft.h"

#include <fftw3.h>

#include <complex>
#include <cstdint>
#include <memory>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tandem::ml::kernels::internal {
namespace {

// Global FFTW plan cache. Thread-safe; plans are owned by the cache for the
// life of the process.
class PlanCache {
 public:
  static PlanCache& Get() {
    static PlanCache* const cache = new PlanCache();
    return *cache;
  }

  // Returns the cached in-place plan for (n, sign, unaligned), making it on
  // first use; nullptr if FFTW fails to plan. sign is FFTW_FORWARD or
  // FFTW_BACKWARD.
  fftwf_plan Plan(int64_t n, int sign, bool unaligned) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const auto key = std::make_tuple(n, sign, unaligned);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    // The planning buffer: fftwf_malloc is SIMD-aligned; +1 element (8
    // bytes) gives a misaligned start for the FFTW_UNALIGNED plan.
    fftwf_complex* buf = fftwf_alloc_complex(static_cast<size_t>(n) + 1);
    if (buf == nullptr) return nullptr;
    fftwf_complex* start = unaligned ? buf + 1 : buf;
    const unsigned flags = FFTW_ESTIMATE | (unaligned ? FFTW_UNALIGNED : 0u);
    fftwf_plan plan = fftwf_plan_dft_1d(static_cast<int>(n), start, start, sign, flags);
    fftwf_free(buf);
    if (plan != nullptr) plans_.emplace(key, plan);
    return plan;
  }

 private:
  PlanCache() = default;

  absl::Mutex mu_;
  absl::flat_hash_map<std::tuple<int64_t, int, bool>, fftwf_plan> plans_ ABSL_GUARDED_BY(mu_);
};

class FftwFft final : public Fft {
 public:
  // The four plans are borrowed from PlanCache (never destroyed).
  FftwFft(int64_t n, fftwf_plan fwd, fftwf_plan fwd_unaligned, fftwf_plan inv,
          fftwf_plan inv_unaligned)
      : Fft(n),
        fwd_(fwd),
        fwd_unaligned_(fwd_unaligned),
        inv_(inv),
        inv_unaligned_(inv_unaligned) {}

  FftImpl impl() const override { return FftImpl::kFftw; }

  void Forward(std::complex<float>* x) const override { Run(fwd_, fwd_unaligned_, x); }

  void Inverse(std::complex<float>* x) const override {
    Run(inv_, inv_unaligned_, x);
    const float inv_n = 1.0f / static_cast<float>(size());
    float* f = reinterpret_cast<float*>(x);
    for (int64_t k = 0; k < 2 * size(); ++k) f[k] *= inv_n;
  }

 private:
  static void Run(fftwf_plan aligned, fftwf_plan unaligned, std::complex<float>* x) {
    // std::complex<float> is layout-compatible with float[2] ([complex.numbers]).
    fftwf_complex* c = reinterpret_cast<fftwf_complex*>(x);
    const bool is_aligned = fftwf_alignment_of(reinterpret_cast<float*>(x)) == 0;
    fftwf_execute_dft(is_aligned ? aligned : unaligned, c, c);
  }

  fftwf_plan fwd_, fwd_unaligned_, inv_, inv_unaligned_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Fft>> CreateFftwFft(int64_t n) {
  PlanCache& cache = PlanCache::Get();
  fftwf_plan fwd = cache.Plan(n, FFTW_FORWARD, false);
  fftwf_plan fwd_u = cache.Plan(n, FFTW_FORWARD, true);
  fftwf_plan inv = cache.Plan(n, FFTW_BACKWARD, false);
  fftwf_plan inv_u = cache.Plan(n, FFTW_BACKWARD, true);
  if (fwd == nullptr || fwd_u == nullptr || inv == nullptr || inv_u == nullptr) {
    return absl::InternalError(absl::StrCat("FFTW could not plan a length-", n, " FFT"));
  }
  return std::unique_ptr<Fft>(new FftwFft(n, fwd, fwd_u, inv, inv_u));
}

}  // namespace tandem::ml::kernels::internal
