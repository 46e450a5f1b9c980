// Spotlight top-k over a KV cache of 512K tokens (1 KV head, 4 query heads,
// 128-bit codes) through a tandem-worker on loopback (in process, gRPC over
// 127.0.0.1, CPU backend):
//   BM_TopKResidentCache   the codes held by the worker (KernelRequest.kv_cache)
//   BM_TopKResidentCacheSelectedScores  the same, answering the k selected
//                          scores (selected_scores) instead of all 512K
//   BM_TopKCodesInRequest  the 8 MiB of key codes sent with every request
//   BM_TopKKernelOnly      the kernel alone in process (the floor)
// and one Ada-KV decode step (adakv.decode, 4 query heads over the 2,048
// kept positions of the cache's KV head, every 256th token):
//   BM_DecodeResidentCache q, kept and cu_seqlens sent; the worker gathers
//                          the kept keys and values from the cache
//   BM_DecodeCompactSent   the kept keys and values sent with every step
//                          (512 KiB; no cache)
//   BM_DecodeKernelOnly    CompactDecodeAttention alone in process
// and BM_ReadFloatsWholeCache: KvCacheStore::ReadFloats of every key (64 MiB),
// the copy each full-cache kernel on a cache took per call until
// 2026-12-06 (attention.dense, adakv.scores and adakv.compress now read the
// pages in place; a CUDA worker's pages are still copied):
//   BM_CompressResidentCache  adakv.compress of the whole cache, q's window sent
//   BM_CompressKernelOnly     AdaKvCompress alone in process on tensors
//   BM_AttentionResidentCache attention.dense, 4 query heads x 1 query, over
//                             the whole cache read in place
// The other worker variants return the same outputs (1024 indices and 512K
// int32 scores, 2 MiB). Counters: kernel_us = the worker's elapsed_us.
// The cache's keys and values (head_dim 32, zeros) are appended once, in
// 64K-token streamed appends.
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/large_buffers.h"
#include "benchmark/benchmark.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/spotlight.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "ml/worker/worker_service.h"

namespace tandem::ml::worker {
namespace {

// Tuned as tandem-worker tunes itself (base/large_buffers.h), before main:
// the cache reads' 8 MiB buffers are then reused, not page-faulted in again.
const bool kMallocTuned = TuneAllocatorForLargeBuffers();

constexpr int64_t kTokens = int64_t{1} << 19;  // 512K
constexpr int64_t kAppendTokens = int64_t{1} << 16;
constexpr int kCodeBytes = 16, kQueryHeads = 4, kHeadDim = 32;
constexpr int64_t kTopK = 1024;
constexpr int64_t kKept = 2048, kKeptStride = kTokens / kKept;
constexpr int64_t kWindow = 32;

std::string KeyCodes() {
  std::string codes(static_cast<size_t>(kTokens * kCodeBytes), '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : codes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  return codes;
}

// One worker with one filled cache for the whole binary.
struct Fixture {
  KernelRegistry registry;
  std::unique_ptr<KvCacheStore> caches;
  std::unique_ptr<RunningWorker> worker;
  std::unique_ptr<proto::Worker::Stub> stub;
  std::string codes = KeyCodes();
  proto::Tensor query;

  Fixture() {
    if (!RegisterBuiltinKernels(&registry).ok()) std::abort();
    caches =
        *KvCacheStore::Create({.max_bytes = int64_t{1} << 30}, std::make_unique<HostKvAllocator>());
    WorkerOptions options;
    worker = *StartWorker("127.0.0.1:0", &registry, RealClock::Default(), options, nullptr, nullptr,
                          caches.get());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    stub = proto::Worker::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(worker->port), grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext ctx;
    proto::CreateKvCacheRequest create;
    create.mutable_spec()->set_name("seq");
    create.mutable_spec()->set_heads(1);
    create.mutable_spec()->set_head_dim(kHeadDim);
    create.mutable_spec()->set_code_bits(kCodeBytes * 8);
    proto::KvCacheInfo info;
    if (!stub->CreateKvCache(&ctx, create, &info).ok()) std::abort();
    const std::string zeros(static_cast<size_t>(kAppendTokens * kHeadDim * 4), '\0');
    for (int64_t at = 0; at < kTokens; at += kAppendTokens) {
      proto::KvCacheAppend header;
      header.set_name("seq");
      for (const char* name : {"keys", "values"}) {
        proto::Tensor* t = header.add_tensors();
        t->set_name(name);
        t->set_dtype(proto::DTYPE_FLOAT32);
        for (int64_t d : {int64_t{1}, kAppendTokens, int64_t{kHeadDim}}) t->add_shape(d);
      }
      proto::Tensor* c = header.add_tensors();
      c->set_dtype(proto::DTYPE_UINT8);
      for (int64_t d : {int64_t{1}, kAppendTokens, int64_t{kCodeBytes}}) c->add_shape(d);
      const absl::string_view data[] = {
          zeros, zeros,
          absl::string_view(codes).substr(static_cast<size_t>(at * kCodeBytes),
                                          static_cast<size_t>(kAppendTokens * kCodeBytes))};
      grpc::ClientContext actx;
      auto writer = stub->AppendKvCache(&actx, &info);
      WriteKvAppendChunks(header, data, kStreamChunkBytes,
                          [&](const proto::KvCacheAppendChunk& ch) { return writer->Write(ch); });
      writer->WritesDone();
      if (!writer->Finish().ok()) std::abort();
    }
    if (info.tokens() != kTokens) std::abort();
    query = EncodeBytes("query_codes", {kQueryHeads, kCodeBytes},
                        codes.substr(0, kQueryHeads * kCodeBytes));
  }
};

Fixture& Shared() {
  static Fixture* f = new Fixture;
  return *f;
}

void RunKernel(benchmark::State& state, const proto::KernelRequest& req) {
  Fixture& f = Shared();
  double kernel_us = 0;
  for (auto _ : state) {
    grpc::ClientContext ctx;
    proto::KernelResponse resp;
    const grpc::Status s = f.stub->Run(&ctx, req, &resp);
    if (!s.ok()) {
      state.SkipWithError(s.error_message().c_str());
      return;
    }
    kernel_us += static_cast<double>(resp.elapsed_us());
    benchmark::DoNotOptimize(resp);
  }
  state.counters["kernel_us"] = benchmark::Counter(kernel_us, benchmark::Counter::kAvgIterations);
}

// A CPU-backend request for `kernel` with `inputs`, naming the benchmark's
// cache when `cached`.
proto::KernelRequest CpuRequest(const char* kernel, std::vector<proto::Tensor> inputs,
                                bool cached) {
  proto::KernelRequest req;
  req.set_kernel(kernel);
  req.set_backend("cpu");
  for (proto::Tensor& t : inputs) *req.add_inputs() = std::move(t);
  if (cached) req.mutable_kv_cache()->set_name("seq");
  return req;
}

void BM_TopKResidentCache(benchmark::State& state) {
  proto::KernelRequest req = CpuRequest("spotlight.topk", {Shared().query}, /*cached=*/true);
  (*req.mutable_params())["k"] = kTopK;
  RunKernel(state, req);
}
BENCHMARK(BM_TopKResidentCache)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TopKResidentCacheSelectedScores(benchmark::State& state) {
  proto::KernelRequest req = CpuRequest("spotlight.topk", {Shared().query}, /*cached=*/true);
  (*req.mutable_params())["k"] = kTopK;
  (*req.mutable_params())["selected_scores"] = 1;
  RunKernel(state, req);
}
BENCHMARK(BM_TopKResidentCacheSelectedScores)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TopKCodesInRequest(benchmark::State& state) {
  proto::KernelRequest req = CpuRequest(
      "spotlight.topk",
      {Shared().query, EncodeBytes("key_codes", {kTokens, kCodeBytes}, Shared().codes)},
      /*cached=*/false);
  (*req.mutable_params())["k"] = kTopK;
  RunKernel(state, req);
  state.SetBytesProcessed(state.iterations() * kTokens * kCodeBytes);
}
BENCHMARK(BM_TopKCodesInRequest)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TopKKernelOnly(benchmark::State& state) {
  // The first `rows` codes of the cache's, as the worker's kernel sees them.
  const auto codes = [](int64_t rows) {
    kernels::PackedCodes c{rows, kCodeBytes / 4, std::vector<uint32_t>(rows * kCodeBytes / 4)};
    std::memcpy(c.bits.data(), Shared().codes.data(), c.bits.size() * 4);
    return c;
  };
  const kernels::PackedCodes q = codes(kQueryHeads), k = codes(kTokens);
  for (auto _ : state) {
    auto scores = kernels::HammingScores(q, k);
    auto top = kernels::TopKOfScores(q, *scores, kTopK);  // as the worker's kernel
    benchmark::DoNotOptimize(scores);
    benchmark::DoNotOptimize(top);
  }
}
BENCHMARK(BM_TopKKernelOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

// The decode benchmarks' inputs: q (4, 32), kept (every 256th token),
// cu_seqlens {0, 2048}, and the kept rows of the cache (zeros, as appended).
proto::Tensor DecodeQuery() {
  std::vector<float> q(static_cast<size_t>(kQueryHeads * kHeadDim));
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * static_cast<float>(i % 17);
  return EncodeFloat("q", *kernels::Tensor::FromData({kQueryHeads, kHeadDim}, std::move(q)));
}
std::vector<int64_t> KeptPositions() {
  std::vector<int64_t> kept(kKept);
  for (int64_t i = 0; i < kKept; ++i) kept[i] = i * kKeptStride;
  return kept;
}

void BM_DecodeResidentCache(benchmark::State& state) {
  RunKernel(state, CpuRequest("adakv.decode",
                              {DecodeQuery(), EncodeInt64("kept", {kKept}, KeptPositions()),
                               EncodeInt64("cu_seqlens", {2}, {0, kKept})},
                              /*cached=*/true));
}
BENCHMARK(BM_DecodeResidentCache)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeCompactSent(benchmark::State& state) {
  const kernels::Tensor rows = *kernels::Tensor::Zeros({1, kKept, kHeadDim});
  std::vector<int64_t> all(kKept);
  for (int64_t i = 0; i < kKept; ++i) all[i] = i;
  RunKernel(state, CpuRequest("adakv.decode",
                              {DecodeQuery(), EncodeFloat("k", rows), EncodeFloat("v", rows),
                               EncodeInt64("kept", {kKept}, all),
                               EncodeInt64("cu_seqlens", {2}, {0, kKept})},
                              /*cached=*/false));
  state.SetBytesProcessed(state.iterations() * 2 * kKept * kHeadDim * 4);
}
BENCHMARK(BM_DecodeCompactSent)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeKernelOnly(benchmark::State& state) {
  const kernels::Tensor rows = *kernels::Tensor::Zeros({1, kKept, kHeadDim});
  auto q = kernels::Tensor::Zeros({kQueryHeads, kHeadDim});
  for (auto _ : state) {
    std::vector<std::vector<int64_t>> kept(1);
    kept[0].resize(kKept);
    for (int64_t i = 0; i < kKept; ++i) kept[0][i] = i;
    auto compact = kernels::CompactKvCache(rows, rows, std::move(kept));
    auto out = kernels::CompactDecodeAttention(*q, *compact);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_DecodeKernelOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadFloatsWholeCache(benchmark::State& state) {
  Fixture& f = Shared();
  for (auto _ : state) {
    auto keys = f.caches->ReadFloats("seq", KvPart::kKeys, 0);
    if (!keys.ok()) state.SkipWithError("read");
    benchmark::DoNotOptimize(keys);
  }
  state.SetBytesProcessed(state.iterations() * kTokens * kHeadDim * 4);
}
BENCHMARK(BM_ReadFloatsWholeCache)->Unit(benchmark::kMillisecond)->UseRealTime();

// Ada-KV compaction of the whole cache (window 32 queries of 4 heads, budget
// 2,048 per KV head): q's window sent (16 KiB), the keys scored in place in
// the cache's pages, the kept rows gathered.
kernels::Tensor WindowQueries() {
  std::vector<float> q(static_cast<size_t>(kQueryHeads * kWindow * kHeadDim));
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
  return *kernels::Tensor::FromData({kQueryHeads, kWindow, kHeadDim}, q);
}

void BM_CompressResidentCache(benchmark::State& state) {
  proto::KernelRequest req =
      CpuRequest("adakv.compress", {EncodeFloat("q", WindowQueries())}, /*cached=*/true);
  (*req.mutable_params())["window"] = kWindow;
  (*req.mutable_params())["budget"] = kKept;
  RunKernel(state, req);
}
BENCHMARK(BM_CompressResidentCache)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same compaction in process on contiguous tensors (the floor: no RPC,
// no pages).
void BM_CompressKernelOnly(benchmark::State& state) {
  static const kernels::Tensor* k =
      new kernels::Tensor(*kernels::Tensor::Zeros({1, kTokens, kHeadDim}));
  kernels::AdaKvOptions o;
  o.snap.window = kWindow;
  o.budget = kKept;
  const kernels::Tensor q = WindowQueries();
  for (auto _ : state) {
    auto kv = kernels::AdaKvCompress(q, *k, *k, o);
    if (!kv.ok()) state.SkipWithError(kv.status().ToString().c_str());
    benchmark::DoNotOptimize(kv);
  }
}
BENCHMARK(BM_CompressKernelOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

// Dense attention of 4 query heads, one query each (a decode step without
// compaction), over every token of the cache, read in place.
void BM_AttentionResidentCache(benchmark::State& state) {
  std::vector<float> q(static_cast<size_t>(kQueryHeads * kHeadDim), 0.25f);
  proto::KernelRequest req =
      CpuRequest("attention.dense",
                 {EncodeFloat("q", *kernels::Tensor::FromData({kQueryHeads, 1, kHeadDim}, q))},
                 /*cached=*/true);
  RunKernel(state, req);
}
BENCHMARK(BM_AttentionResidentCache)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tandem::ml::worker
