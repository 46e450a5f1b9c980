// Shared by the kernel tables of tandem-worker (builtin_kernels.cc and the
// family files): parameter-spec constructors and the per-request caps that
// keep a small request from making the worker allocate or compute without
// bound. Header-only; thread-safe (pure functions).
#ifndef TANDEM_ML_WORKER_KERNEL_SPEC_HELPERS_H_
#define TANDEM_ML_WORKER_KERNEL_SPEC_HELPERS_H_

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ml/kernels/tensor.h"
#include "ml/worker/kernel_registry.h"

namespace tandem::ml::worker {

inline constexpr double kMaxInt = 1 << 24;                // integer parameters
inline constexpr double kMaxScratch = double{1 << 26};    // 256 MiB of float32
inline constexpr double kMaxWork = 2e12;                  // FLOPs: ~10 s at this machine's roof

// INVALID_ARGUMENT "request too large: what = amount exceeds cap" unless
// amount <= cap (NaN fails).
inline absl::Status Budget(double amount, double cap, const char* what) {
  if (!(amount <= cap)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request too large: ", what, " = ", amount, " exceeds ", cap));
  }
  return absl::OkStatus();
}

inline double Dim(const kernels::Tensor& t, int i) { return static_cast<double>(t.dim(i)); }

// A non-float input's elements (int64, int32, uint8 ...) as a vector of T:
// raw.size() / sizeof(T) of them. An empty input may come with null
// pointers, which memcpy must not see.
template <typename T>
std::vector<T> RawValues(const WireTensor& w) {
  std::vector<T> v(w.raw.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), w.raw.data(), v.size() * sizeof(T));
  return v;
}

inline ParamSpec Int(std::string name, double def, double lo, double hi) {
  return {std::move(name), def, lo, hi, true};
}
inline ParamSpec Real(std::string name, double def, double lo, double hi) {
  return {std::move(name), def, lo, hi, false};
}
inline ParamSpec Flag(std::string name) { return {std::move(name), 0, 0, 1, true}; }

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KERNEL_SPEC_HELPERS_H_
