// The table of kernels tandem-worker serves: each entry declares its typed
// input signature, accepted scalar parameters (with defaults and ranges) and
// a runner. Validate() turns a KernelRequest into a KernelCall or an error:
//   unknown kernel                                  -> UNIMPLEMENTED
//   wrong input count, dtype, rank, byte size,
//   element cap, NaN, unknown/out-of-range param    -> INVALID_ARGUMENT
//   unknown backend name                            -> INVALID_ARGUMENT
//   "cuda" without a device / CUDA version          -> UNAVAILABLE
// Lifecycle: built once at startup (Register), then read-only.
// Thread safety: const methods may be called concurrently once registration
// is finished; Register is not thread-safe.
#ifndef TANDEM_ML_WORKER_KERNEL_REGISTRY_H_
#define TANDEM_ML_WORKER_KERNEL_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ml/kernels/backend.h"
#include "ml/worker/tensor_codec.h"
#include "proto/worker.pb.h"

namespace tandem::ml::worker {

struct InputSpec {
  std::string name;
  proto::DType dtype = proto::DTYPE_FLOAT32;  // FLOAT64 is accepted for FLOAT32 inputs
  int rank = 1;
};

struct ParamSpec {
  std::string name;
  double default_value = 0;
  double min = 0;        // inclusive
  double max = 0;        // inclusive
  bool integer = false;  // value must be integral
};

// A validated request, handed to a runner.
struct KernelCall {
  std::vector<WireTensor> inputs;        // in signature order
  std::map<std::string, double> params;  // every declared param, defaults filled
  kernels::Backend backend = kernels::Backend::kCpu;

  const kernels::Tensor& f32(size_t i) const { return inputs[i].f32; }
  double param(const std::string& name) const { return params.at(name); }
  int64_t int_param(const std::string& name) const { return static_cast<int64_t>(params.at(name)); }
};

struct KernelSpec {
  std::string name;
  std::string description;
  bool has_cuda = false;
  std::vector<InputSpec> inputs;
  std::vector<ParamSpec> params;
  std::vector<InputSpec> outputs;  // documentation for Capabilities
  // Runs the kernel; kernel-level shape errors come back as INVALID_ARGUMENT.
  std::function<absl::StatusOr<std::vector<proto::Tensor>>(const KernelCall&)> run;
};

struct RegistryLimits {
  int64_t max_tensor_elements = int64_t{1} << 26;  // per input tensor (256 MiB of float32)
};

class KernelRegistry {
 public:
  explicit KernelRegistry(RegistryLimits limits = {}) : limits_(limits) {}

  // INVALID_ARGUMENT for an empty or duplicate name, a missing runner or a
  // default outside its range.
  absl::Status Register(KernelSpec spec);
  // nullptr when unknown.
  const KernelSpec* Find(const std::string& name) const;
  // Capabilities entries, sorted by name.
  std::vector<proto::KernelInfo> Describe() const;
  // See the header comment for the codes.
  absl::StatusOr<KernelCall> Validate(const proto::KernelRequest& request) const;
  // Validate, then the kernel's runner on the same thread: what the worker
  // service runs for a request, without the transport (the in-process
  // reference of the tests). Validate's codes, then the kernel's.
  absl::StatusOr<std::vector<proto::Tensor>> Run(const proto::KernelRequest& request) const;

 private:
  RegistryLimits limits_;
  absl::flat_hash_map<std::string, KernelSpec> kernels_;
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KERNEL_REGISTRY_H_
