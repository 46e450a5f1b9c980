// WorkerService's KV cache RPCs: CreateKvCache, AppendKvCache (chunks, as
// LoadModel), DropKvCache, ListKvCaches over a KvCacheStore.
#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "ml/worker/worker_service.h"

namespace tandem::ml::worker {
namespace {

grpc::Status NoStore() {
  return ToGrpcStatus(absl::FailedPreconditionError("this worker holds no KV caches"));
}

void FillInfo(const KvCacheSummary& s, proto::KvCacheInfo* info) {
  proto::KvCacheSpec* spec = info->mutable_spec();
  spec->set_name(std::string(KvCacheStore::NameOf(s.name)));
  spec->set_heads(s.shape.heads);
  spec->set_head_dim(s.shape.head_dim);
  spec->set_code_bits(s.shape.code_bits);
  spec->set_dtype(proto::DTYPE_FLOAT32);
  info->set_tokens(s.tokens);
  info->set_capacity_tokens(s.capacity_tokens);
  info->set_bytes(s.bytes);
  info->set_backend(s.backend);
}

// The append's tensors, checked against the cache's shape from the header
// alone (before any data arrives): keys, values (heads, n, head_dim)
// float32/float64, codes (heads, n, code_bytes) uint8 iff the cache holds
// codes. Returns n. INVALID_ARGUMENT naming the first mismatch.
absl::StatusOr<int64_t> CheckAppendHeader(const proto::KvCacheAppend& h,
                                          const KvCacheSummary& cache) {
  const KvCacheShape& s = cache.shape;
  const int want = s.code_bits > 0 ? 3 : 2;
  if (h.tensors_size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an append to KV cache '", cache.name, "' carries ", want, " tensors (keys, values",
        want == 3 ? ", codes" : "", "), got ", h.tensors_size()));
  }
  const int64_t n = h.tensors(0).shape_size() == 3 ? h.tensors(0).shape(1) : -1;
  for (int i = 0; i < want; ++i) {
    const proto::Tensor& t = h.tensors(i);
    const char* what = i == 0 ? "keys" : i == 1 ? "values" : "codes";
    const bool codes = i == 2;
    const bool dtype_ok =
        codes ? t.dtype() == proto::DTYPE_UINT8
              : t.dtype() == proto::DTYPE_FLOAT32 || t.dtype() == proto::DTYPE_FLOAT64;
    if (!dtype_ok) {
      return absl::InvalidArgumentError(absl::StrCat(what, " of a KV cache append must be ",
                                                     codes ? "uint8" : "float32 or float64",
                                                     ", got ", DTypeName(t.dtype())));
    }
    const int64_t last = codes ? s.code_bytes() : s.head_dim;
    if (t.shape_size() != 3 || t.shape(0) != s.heads || t.shape(1) != n || n < 1 ||
        t.shape(2) != last) {
      std::string got;
      for (int64_t d : t.shape()) absl::StrAppend(&got, got.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(
          absl::StrCat(what, " must be (heads = ", s.heads, ", n >= 1 tokens as in keys, ",
                       codes ? "code_bytes = " : "head_dim = ", last, ") for KV cache '",
                       cache.name, "', got (", got, ")"));
    }
  }
  return n;
}

}  // namespace

std::string WorkerService::CacheOwner(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  const std::vector<std::string> ids = PeerIdentities(*auth);
  return ids.empty() ? "" : ids.front();
}

grpc::Status WorkerService::CreateKvCache(grpc::ServerContext* context,
                                          const proto::CreateKvCacheRequest* request,
                                          proto::KvCacheInfo* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (caches_ == nullptr) return NoStore();
  const proto::KvCacheSpec& spec = request->spec();
  if (spec.dtype() != proto::DTYPE_UNSPECIFIED && spec.dtype() != proto::DTYPE_FLOAT32) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("KV caches hold float32 keys and values, not ", DTypeName(spec.dtype()))));
  }
  // A name alone: the owner's part of the key is the caller's identity.
  if (spec.name().find('/') != std::string::npos) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("KV cache name '", spec.name(), "' may only hold [A-Za-z0-9._-]")));
  }
  absl::StatusOr<KvCacheSummary> made =
      caches_->CreateCache(KvCacheStore::Key(CacheOwner(*context), spec.name()),
                           {spec.heads(), spec.head_dim(), spec.code_bits()}, spec.replace());
  if (!made.ok()) return ToGrpcStatus(made.status());
  FillInfo(*made, response);
  TANDEM_VLOG(1) << "KV cache " << made->name << " created";
  return grpc::Status::OK;
}

grpc::Status WorkerService::AppendKvCache(grpc::ServerContext* context,
                                          grpc::ServerReader<proto::KvCacheAppendChunk>* reader,
                                          proto::KvCacheInfo* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (caches_ == nullptr) return NoStore();
  if (grpc::Status s = TakeSlot(); !s.ok()) return s;
  SlotGuard slot(&in_flight_);
  ByteReservation bytes(&inflight_bytes_, options_.max_inflight_bytes);
  KvAppendAssembler assembler(static_cast<size_t>(options_.max_stream_bytes),
                              /*float_storage=*/true);
  // On the header, before its data arrives or any buffer is allocated: the
  // cache exists, the shapes match it, the in-flight and cache budgets hold.
  const std::string owner = CacheOwner(*context);
  assembler.OnHeader([&](const proto::KvCacheAppend& h, size_t declared) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(KvCacheSummary cache,
                            caches_->Find(KvCacheStore::Key(owner, h.name())));
    TANDEM_ASSIGN_OR_RETURN(const int64_t n, CheckAppendHeader(h, cache));
    TANDEM_RETURN_IF_ERROR(bytes.Add(static_cast<int64_t>(declared)));
    return caches_->CheckAppendFits(KvCacheStore::Key(owner, h.name()), n);
  });
  if (absl::Status s = ReadAllChunks<proto::KvCacheAppendChunk>(*reader, assembler, bytes);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<Streamed<proto::KvCacheAppend>> streamed = assembler.FinishStreamed();
  if (!streamed.ok()) {
    return ToGrpcStatus(absl::InvalidArgumentError(streamed.status().message()));
  }
  const proto::KvCacheAppend& h = streamed->header;
  std::vector<WireTensor> parts;
  for (int i = 0; i < h.tensors_size(); ++i) {
    // max_stream_bytes bounds the elements already; the codec's cap is the
    // kernels' tensor limit.
    absl::StatusOr<WireTensor> w =
        DecodeTensor(h.tensors(i), std::move(streamed->data[static_cast<size_t>(i)]),
                     kernels::kMaxTensorElements, absl::StrCat("KV cache tensor ", i));
    if (!w.ok()) return ToGrpcStatus(w.status());
    parts.push_back(*std::move(w));
  }
  if (parts.size() < 2) {
    return ToGrpcStatus(absl::InvalidArgumentError("an append carries keys and values"));
  }
  absl::StatusOr<KvCacheSummary> after =
      caches_->Append(KvCacheStore::Key(owner, h.name()), parts[0].f32, parts[1].f32,
                      parts.size() > 2 ? parts[2].raw : std::string());
  if (!after.ok()) return ToGrpcStatus(after.status());
  FillInfo(*after, response);
  return grpc::Status::OK;
}

grpc::Status WorkerService::DropKvCache(grpc::ServerContext* context,
                                        const proto::DropKvCacheRequest* request,
                                        proto::DropKvCacheResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (caches_ == nullptr) return NoStore();
  absl::StatusOr<int64_t> freed =
      caches_->Drop(KvCacheStore::Key(CacheOwner(*context), request->name()));
  if (!freed.ok()) return ToGrpcStatus(freed.status());
  response->set_freed_bytes(*freed);
  return grpc::Status::OK;
}

grpc::Status WorkerService::ListKvCaches(grpc::ServerContext* context,
                                         const proto::ListKvCachesRequest*,
                                         proto::ListKvCachesResponse* response) {
  if (grpc::Status s = Admit(*context, false); !s.ok()) return s;
  if (caches_ == nullptr) return NoStore();
  // The caller's caches only; used and max bytes are the worker's.
  const std::string mine = KvCacheStore::Key(CacheOwner(*context), "");
  for (const KvCacheSummary& s : caches_->List()) {
    if (KvCacheStore::OwnerPrefixOf(s.name) == mine) FillInfo(s, response->add_caches());
  }
  response->set_used_bytes(caches_->used_bytes());
  response->set_max_bytes(caches_->max_bytes());
  response->set_backend(std::string(caches_->backend()));
  return grpc::Status::OK;
}

}  // namespace tandem::ml::worker
