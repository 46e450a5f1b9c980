// The table of kernels tandem-worker serves: each entry declares its typed
// input signature, accepted scalar parameters (with defaults and ranges) and
// a runner. Validate() turns a KernelRequest into a KernelCall or an error:
//   unknown kernel                                  -> UNIMPLEMENTED
//   wrong input count, dtype, rank, byte size,
//   element cap, NaN, unknown/out-of-range param    -> INVALID_ARGUMENT
//   unknown backend name                            -> INVALID_ARGUMENT
//   "cuda" without a device / CUDA version          -> UNAVAILABLE
//   a model named for a kernel that takes none, a model of another kind,
//   no model for a kernel that requires one         -> INVALID_ARGUMENT
//   the model store's codes (NOT_FOUND, FAILED_PRECONDITION) for the model
// Models (ml/worker/model_store.h): a request may name a loaded model; the
// kernel then reads its weights (inputs marked from_model are omitted from
// the request) and, for a training kernel, updates it in place (outputs
// marked from_model are written into the model, not returned). For a model
// of kind "tensors" the registry does both by tensor name, for "mlp" / "cnn"
// through the flat parameter vector named "weights"; typed kinds are handled
// by the kernel's runner through KernelCall::model.
// KV caches (ml/worker/kv_cache_store.h): a request may name a cache
// (KernelRequest.kv_cache); inputs marked from_cache are then left out of
// the request and read from the cache ("keys", "values": (heads, N,
// head_dim); "codes": the (N, code_bytes) uint8 codes of kv_cache.head),
// N = kv_cache.tokens or every token held. Codes: a cache named for a
// kernel without from_cache inputs -> INVALID_ARGUMENT; no cache store ->
// FAILED_PRECONDITION; then the store's (NOT_FOUND, FAILED_PRECONDITION,
// INVALID_ARGUMENT). A spec without gathers_from_cache gets a copy of the
// prefix (its runner stays that of request tensors); one with it (every
// builtin that reads a cache: spotlight.topk, attention.dense, adakv.*)
// gets the cache itself and reads the pages in place (ScanCodes, ScanRows,
// GatherRows), copying only pages the host cannot read (a CUDA cache's).
// Lifecycle: built once at startup (Register), then read-only.
// Thread safety: const methods may be called concurrently once registration
// is finished; Register is not thread-safe.
#ifndef TANDEM_ML_WORKER_KERNEL_REGISTRY_H_
#define TANDEM_ML_WORKER_KERNEL_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ml/kernels/backend.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/model_store.h"
#include "ml/worker/tensor_codec.h"
#include "proto/worker.pb.h"

namespace tandem::ml::worker {

struct InputSpec {
  std::string name;
  proto::DType dtype = proto::DTYPE_FLOAT32;  // FLOAT64 is accepted for FLOAT32 inputs
  int rank = 1;
  // Supplied by (inputs) or written into (outputs) the referenced model
  // when the request names one.
  bool from_model = false;
  // The model tensor it maps to in a "tensors" model, when not `name`
  // (e.g. output q_next replaces the model's q_hist).
  std::string model_tensor = {};
  const std::string& model_name() const { return model_tensor.empty() ? name : model_tensor; }
  // Read from the KV cache the request names, when it names one: "keys",
  // "values" or "codes" (see the file comment); empty = never.
  std::string from_cache = {};
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
  // The referenced model, locked (shared, or exclusive for a training
  // kernel) until the call is destroyed; null without a model. With a
  // model, inputs marked from_model are empty placeholders unless the
  // model's kind is "tensors" (then they hold the model's tensors).
  std::shared_ptr<ModelLease> model;
  // Set when the request names a KV cache and the spec gathers_from_cache:
  // the store (not owned; outlives the call), the cache's key and the token
  // count the call reads (fixed for the call: appends may go on). The
  // from_cache float inputs are then empty; the runner gathers what it
  // needs (KvCacheStore::GatherRows).
  const KvCacheStore* cache = nullptr;
  std::string cache_key;
  int64_t cache_tokens = 0;
  int cache_head = 0;  // KvCacheRef.head: whose codes a Spotlight kernel scores

  const kernels::Tensor& f32(size_t i) const { return inputs[i].f32; }
  double param(const std::string& name) const { return params.at(name); }
  int64_t int_param(const std::string& name) const { return static_cast<int64_t>(params.at(name)); }
};

// A runner's outputs, moved in. (A braced std::vector<proto::Tensor>{...}
// copies every tensor from its initializer list: one more pass over each
// output's data, into freshly faulted memory.)
template <typename... Tensors>
std::vector<proto::Tensor> MoveOutputs(Tensors&&... tensors) {
  std::vector<proto::Tensor> out;
  out.reserve(sizeof...(tensors));
  (out.push_back(std::forward<Tensors>(tensors)), ...);
  return out;
}

struct KernelSpec {
  std::string name;
  std::string description;
  bool has_cuda = false;
  std::vector<InputSpec> inputs;
  std::vector<ParamSpec> params;
  std::vector<InputSpec> outputs;  // documentation for Capabilities
  // Runs the kernel; kernel-level shape errors come back as INVALID_ARGUMENT.
  std::function<absl::StatusOr<std::vector<proto::Tensor>>(const KernelCall&)> run;
  std::vector<std::string> model_kinds = {};  // kinds accepted in KernelRequest.model
  bool model_required = false;           // refuse requests without a model
  bool trains_model = false;             // exclusive lease; version + 1 per call
  // With a cache named, leave the from_cache inputs empty and hand the
  // runner the cache (KernelCall::cache) instead of copying every token of
  // it: for kernels that read a few rows (a decode step's kept tokens) or
  // read the pages in place (Spotlight's codes).
  bool gathers_from_cache = false;
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
  // See the header comment for the codes. `models` (not owned, may be
  // null: then a request naming a model gets FAILED_PRECONDITION) resolves
  // KernelRequest.model; the lease is taken last.
  // `caches` (not owned, may be null) resolves KernelRequest.kv_cache
  // among the caches of `cache_owner` (KvCacheStore::Key: the caller's
  // identity; another owner's cache is NOT_FOUND).
  absl::StatusOr<KernelCall> Validate(const proto::KernelRequest& request,
                                      ModelStore* models = nullptr,
                                      const KvCacheStore* caches = nullptr,
                                      absl::string_view cache_owner = "") const;
  // The same for a streamed request (RunStream): `request` without tensor
  // data, streamed[i] the data of request.inputs(i), moved into the call
  // (float32 without a copy). INVALID_ARGUMENT when the counts differ.
  absl::StatusOr<KernelCall> Validate(const proto::KernelRequest& request,
                                      std::vector<TensorBytes> streamed,
                                      ModelStore* models = nullptr,
                                      const KvCacheStore* caches = nullptr,
                                      absl::string_view cache_owner = "") const;
  // The kernel's runner on a validated call, then, with a model: outputs
  // marked from_model are dropped from the result (and, for a "tensors"
  // model, written into it by name; INVALID_ARGUMENT and no change when a
  // shape differs), and a training kernel's step is counted (version + 1).
  absl::StatusOr<std::vector<proto::Tensor>> RunCall(const KernelSpec& spec,
                                                     KernelCall& call) const;
  // Validate, then RunCall on the same thread: what the worker service runs
  // for a request, without the transport (the in-process reference of the
  // tests). Validate's codes, then the kernel's.
  absl::StatusOr<std::vector<proto::Tensor>> Run(const proto::KernelRequest& request,
                                                 ModelStore* models = nullptr,
                                                 const KvCacheStore* caches = nullptr,
                                                 absl::string_view cache_owner = "") const;

 private:
  RegistryLimits limits_;
  // Both Validate forms; `streamed` may be null (data in the request).
  absl::StatusOr<KernelCall> ValidateImpl(const proto::KernelRequest& request,
                                          std::vector<TensorBytes>* streamed, ModelStore* models,
                                          const KvCacheStore* caches,
                                          absl::string_view cache_owner) const;

  absl::flat_hash_map<std::string, KernelSpec> kernels_;
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_KERNEL_REGISTRY_H_
