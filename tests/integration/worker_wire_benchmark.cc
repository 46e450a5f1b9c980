// Worker over the wire (issue 20 item 7): one real tandem-worker process on
// loopback, called through a gRPC stub. Measures
//   BM_HealthRoundTrip     gRPC floor: an empty unary call, no kernel.
//   BM_RunSmall            Run of sdpgo.feature_weights on a (1, 4) float32
//                          input: client-observed latency next to the
//                          server's elapsed_us (counter server_us).
//   BM_RunLarge            the same kernel on a (4096, 4096) float32 input
//                          (64 MiB in, 64 MiB out): bytes/s of request plus
//                          response next to the kernel's elapsed_us.
//   BM_Memcpy64MiB         in-process memcpy of 64 MiB, the reference for the
//                          loopback bandwidth.
//   BM_LoadModel64MiB, BM_ReadModel64MiB
//                          a 64 MiB "tensors" model up (chunks of the given
//                          size) and down (the worker's 1 MiB chunks).
//   BM_RunStreamCopy64MiB  tensor.copy (y = x) of 64 MiB through RunStream:
//                          up_Bps / down_Bps each way next to server_us.
//   BM_PeerUpload64MiB, BM_PeerDownload64MiB
//                          the peer: the same bytes in chunks over a plain
//                          gRPC stream to a do-nothing service in this
//                          process (issue 38 item 5).
// This process tunes malloc as tandem-worker does (TuneAllocatorForLargeBuffers).
//   BM_RunSmallShared      requests/s of the small call, 1/4/16 client
//                          threads sharing ONE channel and stub.
//   BM_RunSmallPerThread   the same with one channel per client thread
//                          (local subchannel pool, so separate connections).
//   BM_HealthRoundTripTls, BM_RunSmallTls
//                          the same calls to a second worker as deployed
//                          (issue 34 item 6): mutual TLS and the caller gate
//                          (one established connection; the handshake is
//                          paid once).
// The worker is started once, lazily, by the first benchmark that needs it,
// and SIGKILLed at normal process exit (WorkerProcess's destructor). Stubs are
// thread-safe; every other global here is written once under the
// function-local static initialisation.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/large_buffers.h"
#include "benchmark/benchmark.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_process.h"
#include "tests/integration/worker_wire_peer.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using ::tandem::testing::WorkerProcess;

// The client end tuned as tandem-worker tunes itself (base/large_buffers.h),
// before main: the worker, its clients here and the peer all run alike.
const bool kMallocTuned = TuneAllocatorForLargeBuffers();

constexpr int kMessageMb = 80;          // 64 MiB tensor + headroom
constexpr int64_t kLargeSide = 4096;    // 4096 * 4096 * 4 B = 64 MiB
constexpr int kMaxClientThreads = 16;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, bool own_pool) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMessageMb << 20);
  args.SetMaxSendMessageSize(kMessageMb << 20);
  if (own_pool) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// The worker process and the stubs; built once, owned by a function-local
// static destroyed at exit (stubs first, then the process, which SIGKILLs the
// child). Null process when the worker failed to start.
struct Wire {
  std::unique_ptr<WorkerProcess> process;
  std::unique_ptr<WorkerProcess> tls_process;       // mutual TLS + caller gate
  std::unique_ptr<proto::Worker::Stub> tls_shared;  // as operator.tandem
  std::string certs_dir;
  std::unique_ptr<proto::Worker::Stub> shared;              // one channel
  std::vector<std::unique_ptr<proto::Worker::Stub>> per_thread;  // one channel each
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const Wire& GetWire() {
  static const Wire wire = [] {
    Wire wire_init;
    Wire* w = &wire_init;
    w->process = std::make_unique<WorkerProcess>();
    // max_concurrency above the client thread count, so no call is refused.
    if (!w->process->Start(TANDEM_WORKER_BINARY,
                           {"--listen=127.0.0.1:0", "--max_concurrency=64",
                            "--max_message_mb=" + std::to_string(kMessageMb),
                            "--max_tensor_melements=64"})) {
      w->process.reset();
      return wire_init;
    }
    w->shared = proto::Worker::NewStub(NewChannel(w->process->address(), false));
    for (int i = 0; i < kMaxClientThreads; ++i) {
      w->per_thread.push_back(proto::Worker::NewStub(NewChannel(w->process->address(), true)));
    }
    w->certs_dir = testing::MakeTempDir("tandem_worker_wire");
    if (!w->certs_dir.empty() && testing::MakeRoleCertificates(w->certs_dir).ok()) {
      const std::string d = w->certs_dir;
      auto tls = std::make_unique<WorkerProcess>();
      if (tls->Start(TANDEM_WORKER_BINARY,
                     {"--listen=127.0.0.1:0", "--max_concurrency=64",
                      "--tls_cert=" + d + "/worker.pem", "--tls_key=" + d + "/worker.key",
                      "--tls_ca=" + d + "/ca.pem", "--callers=operator.tandem"})) {
        grpc::SslCredentialsOptions o;
        o.pem_root_certs = ReadAll(d + "/ca.pem");
        o.pem_cert_chain = ReadAll(d + "/operator.pem");
        o.pem_private_key = ReadAll(d + "/operator.key");
        grpc::ChannelArguments args;
        args.SetSslTargetNameOverride("worker.tandem");
        w->tls_shared = proto::Worker::NewStub(
            grpc::CreateCustomChannel(tls->address(), grpc::SslCredentials(o), args));
        w->tls_process = std::move(tls);
      }
    }
    return wire_init;
  }();
  return wire;
}

proto::KernelRequest FeatureWeightsRequest(int64_t rows, int64_t cols) {
  proto::KernelRequest req;
  req.set_kernel("sdpgo.feature_weights");
  proto::Tensor* t = req.add_inputs();
  t->set_name("feature_grad");
  t->set_dtype(proto::DTYPE_FLOAT32);
  t->add_shape(rows);
  t->add_shape(cols);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 97) + 1) * 0.01f;
  t->set_data(v.data(), v.size() * sizeof(float));
  return req;
}

grpc::Status CallRun(proto::Worker::Stub* stub, const proto::KernelRequest& req,
                     proto::KernelResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub->Run(&ctx, req, resp);
}

// Skips the benchmark when the worker is missing; true when it may run.
bool Ready(benchmark::State& state) {
  if (GetWire().process == nullptr) {
    state.SkipWithError("tandem-worker did not start");
    return false;
  }
  return true;
}

void BM_HealthRoundTrip(benchmark::State& state) {
  if (!Ready(state)) return;
  proto::Worker::Stub* stub = GetWire().shared.get();
  for (auto _ : state) {
    grpc::ClientContext ctx;
    proto::HealthRequest req;
    proto::HealthResponse resp;
    grpc::Status s = stub->Health(&ctx, req, &resp);
    if (!s.ok()) {
      state.SkipWithError(s.error_message().c_str());
      return;
    }
  }
}
BENCHMARK(BM_HealthRoundTrip)->UseRealTime();

// Shared body of the Run benchmarks: counters server_us (mean elapsed_us of
// the kernel as the worker reports it) and bytes/s of request + response.
void RunLoop(benchmark::State& state, proto::Worker::Stub* stub, const proto::KernelRequest& req) {
  int64_t server_us = 0, bytes = 0;
  for (auto _ : state) {
    proto::KernelResponse resp;
    grpc::Status s = CallRun(stub, req, &resp);
    if (!s.ok()) {
      state.SkipWithError(s.error_message().c_str());
      return;
    }
    server_us += resp.elapsed_us();
    bytes += static_cast<int64_t>(req.ByteSizeLong() + resp.ByteSizeLong());
  }
  state.counters["server_us"] =
      benchmark::Counter(static_cast<double>(server_us), benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(bytes);
}

void BM_RunSmall(benchmark::State& state) {
  if (!Ready(state)) return;
  const proto::KernelRequest req = FeatureWeightsRequest(1, 4);
  RunLoop(state, GetWire().shared.get(), req);
}
BENCHMARK(BM_RunSmall)->UseRealTime();

void BM_RunLarge(benchmark::State& state) {
  if (!Ready(state)) return;
  const proto::KernelRequest req = FeatureWeightsRequest(kLargeSide, kLargeSide);
  RunLoop(state, GetWire().shared.get(), req);
}
BENCHMARK(BM_RunLarge)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Memcpy64MiB(benchmark::State& state) {
  const size_t n = static_cast<size_t>(kLargeSide * kLargeSide) * sizeof(float);
  std::vector<char> src(n, 1), dst(n, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memcpy64MiB)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Transfer throughput (issue 38 item 5) ----

constexpr size_t kLargeBytes = static_cast<size_t>(kLargeSide * kLargeSide) * sizeof(float);

proto::ModelHeader LargeModel(const std::string& name) {
  proto::ModelHeader h;
  h.set_name(name);
  h.set_kind("tensors");
  h.set_replace(true);
  proto::Tensor* t = h.add_tensors();
  t->set_name("w");
  t->set_dtype(proto::DTYPE_FLOAT32);
  t->add_shape(kLargeSide);
  t->add_shape(kLargeSide);
  std::vector<float> v(static_cast<size_t>(kLargeSide * kLargeSide));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 97) + 1) * 0.01f;
  t->set_data(v.data(), v.size() * sizeof(float));
  return h;
}

grpc::Status LoadLarge(proto::Worker::Stub* stub, const proto::ModelHeader& model, size_t chunk) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  proto::ModelInfo info;
  auto writer = stub->LoadModel(&ctx, &info);
  ml::worker::WriteModelChunks(model, chunk,
                               [&](const proto::WorkerModelChunk& c) { return writer->Write(c); });
  writer->WritesDone();
  return writer->Finish();
}

void SetThroughput(benchmark::State& state, const char* name, double bytes, double seconds) {
  // Binary prefixes, as bytes_per_second: "1G/s" is 1 GiB/s.
  state.counters[name] = benchmark::Counter(bytes / seconds, benchmark::Counter::kDefaults,
                                            benchmark::Counter::kIs1024);
}

// LoadModel of one 64 MiB float32 tensor ("tensors" kind), replaced each time.
void BM_LoadModel64MiB(benchmark::State& state) {
  if (!Ready(state)) return;
  static const proto::ModelHeader model = LargeModel("wire.bench");
  const size_t chunk = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    grpc::Status s = LoadLarge(GetWire().shared.get(), model, chunk);
    if (!s.ok()) {
      state.SkipWithError(s.error_message().c_str());
      return;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_LoadModel64MiB)
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ReadModel of the 64 MiB model BM_LoadModel64MiB loads (loaded here first).
void BM_ReadModel64MiB(benchmark::State& state) {
  if (!Ready(state)) return;
  static const proto::ModelHeader model = LargeModel("wire.bench");
  proto::Worker::Stub* stub = GetWire().shared.get();
  if (grpc::Status s = LoadLarge(stub, model, 1 << 20); !s.ok()) {
    state.SkipWithError(s.error_message().c_str());
    return;
  }
  for (auto _ : state) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    proto::ReadModelRequest req;
    req.mutable_model()->set_name("wire.bench");
    auto reader = stub->ReadModel(&ctx, req);
    ml::worker::ModelAssembler assembler(kMessageMb << 20);
    proto::WorkerModelChunk c;  // reused: its buffer is parsed into again
    absl::Status added = absl::OkStatus();
    while (reader->Read(&c) && added.ok()) added = assembler.Add(c);
    grpc::Status s = reader->Finish();
    absl::StatusOr<proto::ModelHeader> got = assembler.Finish();
    if (!s.ok() || !added.ok() || !got.ok() || got->tensors(0).data().size() != kLargeBytes) {
      state.SkipWithError("ReadModel failed");
      return;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_ReadModel64MiB)->UseRealTime()->Unit(benchmark::kMillisecond);

// RunStream of a 64 MiB input: counters up_Bps (request bytes / time to the
// first response chunk, less the kernel's elapsed_us) and down_Bps
// (response bytes / time from the first response chunk to the last).
void StreamLoop(benchmark::State& state, const proto::KernelRequest& req, size_t chunk) {
  proto::Worker::Stub* stub = GetWire().shared.get();
  double up_s = 0, down_s = 0, up_bytes = 0, down_bytes = 0, server_us = 0;
  for (auto _ : state) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    const auto t0 = std::chrono::steady_clock::now();
    auto stream = stub->RunStream(&ctx);
    ml::worker::WriteRequestChunks(
        req, chunk, [&](const proto::KernelRequestChunk& c) { return stream->Write(c); });
    stream->WritesDone();
    ml::worker::ResponseAssembler assembler(size_t{1} << 30);
    proto::KernelResponseChunk c;
    absl::Status added = absl::OkStatus();
    std::chrono::steady_clock::time_point t1;
    bool first = true;
    while (stream->Read(&c) && added.ok()) {
      if (first) t1 = std::chrono::steady_clock::now();
      first = false;
      added = assembler.Add(c);
    }
    const auto t2 = std::chrono::steady_clock::now();
    grpc::Status s = stream->Finish();
    absl::StatusOr<proto::KernelResponse> resp = assembler.Finish();
    if (!s.ok() || !added.ok() || !resp.ok()) {
      state.SkipWithError(s.ok() ? "malformed response stream" : s.error_message().c_str());
      return;
    }
    up_s += std::chrono::duration<double>(t1 - t0).count() - resp->elapsed_us() * 1e-6;
    server_us += static_cast<double>(resp->elapsed_us());
    down_s += std::chrono::duration<double>(t2 - t1).count();
    up_bytes += static_cast<double>(req.inputs(0).data().size());
    for (const proto::Tensor& t : resp->outputs()) down_bytes += t.data().size();
  }
  SetThroughput(state, "up_Bps", up_bytes, up_s);
  SetThroughput(state, "down_Bps", down_bytes, down_s);
  state.counters["server_us"] = benchmark::Counter(server_us, benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(static_cast<int64_t>(up_bytes + down_bytes));
}

// tensor.copy (y = x) of 64 MiB through RunStream: the transfer alone, in
// chunks of the given size (the worker answers in 1 MiB chunks).
void BM_RunStreamCopy64MiB(benchmark::State& state) {
  if (!Ready(state)) return;
  static const proto::KernelRequest req = [] {
    proto::KernelRequest r = FeatureWeightsRequest(kLargeSide * kLargeSide, 1);
    r.set_kernel("tensor.copy");
    r.mutable_inputs(0)->set_name("x");
    r.mutable_inputs(0)->mutable_shape()->RemoveLast();
    return r;
  }();
  StreamLoop(state, req, static_cast<size_t>(state.range(0)));
}
BENCHMARK(BM_RunStreamCopy64MiB)
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The peer (tests/integration/worker_wire_peer.h), started once, lazily,
// and leaked (a static reached at exit by no one).
testing::WirePeer* GetPeer() {
  static testing::WirePeer* peer =
      testing::WirePeer::Start(kLargeBytes, kMessageMb << 20).release();
  return peer;
}

void BM_PeerUpload64MiB(benchmark::State& state) {
  if (GetPeer() == nullptr) {
    state.SkipWithError("the peer did not start");
    return;
  }
  const size_t chunk = static_cast<size_t>(state.range(0));
  const std::string payload(kLargeBytes, '\x5a');
  for (auto _ : state) {
    grpc::ClientContext ctx;
    proto::ModelInfo info;
    auto writer = GetPeer()->stub()->LoadModel(&ctx, &info);
    proto::WorkerModelChunk c;
    for (size_t off = 0; off < payload.size(); off += chunk) {
      c.set_data(payload.data() + off, std::min(chunk, payload.size() - off));
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    if (grpc::Status s = writer->Finish(); !s.ok() || info.bytes() != int64_t{kLargeBytes}) {
      state.SkipWithError("peer upload failed");
      return;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_PeerUpload64MiB)
    ->Arg(256 << 10)
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_PeerDownload64MiB(benchmark::State& state) {
  if (GetPeer() == nullptr) {
    state.SkipWithError("the peer did not start");
    return;
  }
  for (auto _ : state) {
    grpc::ClientContext ctx;
    proto::ReadModelRequest req;
    req.mutable_model()->set_version(static_cast<uint64_t>(state.range(0)));
    auto reader = GetPeer()->stub()->ReadModel(&ctx, req);
    proto::WorkerModelChunk c;
    size_t n = 0;
    while (reader->Read(&c)) n += c.data().size();
    if (grpc::Status s = reader->Finish(); !s.ok() || n != kLargeBytes) {
      state.SkipWithError("peer download failed");
      return;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kLargeBytes));
}
BENCHMARK(BM_PeerDownload64MiB)
    ->Arg(256 << 10)
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The worker as deployed: mutual TLS and the caller gate on every call.
bool TlsReady(benchmark::State& state) {
  if (GetWire().tls_shared == nullptr) {
    state.SkipWithError("the TLS tandem-worker did not start");
    return false;
  }
  return true;
}

void BM_HealthRoundTripTls(benchmark::State& state) {
  if (!TlsReady(state)) return;
  proto::Worker::Stub* stub = GetWire().tls_shared.get();
  for (auto _ : state) {
    grpc::ClientContext ctx;
    proto::HealthResponse resp;
    grpc::Status s = stub->Health(&ctx, proto::HealthRequest(), &resp);
    if (!s.ok()) {
      state.SkipWithError(s.error_message().c_str());
      return;
    }
  }
}
BENCHMARK(BM_HealthRoundTripTls)->UseRealTime();

void BM_RunSmallTls(benchmark::State& state) {
  if (!TlsReady(state)) return;
  RunLoop(state, GetWire().tls_shared.get(), FeatureWeightsRequest(1, 4));
}
BENCHMARK(BM_RunSmallTls)->UseRealTime();

// Requests/s: items_per_second summed over threads (real time).
void SmallThroughput(benchmark::State& state, bool per_thread) {
  if (!Ready(state)) return;
  const Wire& w = GetWire();
  proto::Worker::Stub* stub =
      per_thread ? w.per_thread[static_cast<size_t>(state.thread_index())].get() : w.shared.get();
  RunLoop(state, stub, FeatureWeightsRequest(1, 4));
  state.SetItemsProcessed(state.iterations());
}

void BM_RunSmallShared(benchmark::State& state) { SmallThroughput(state, false); }
BENCHMARK(BM_RunSmallShared)->Threads(1)->Threads(4)->Threads(kMaxClientThreads)->UseRealTime();

void BM_RunSmallPerThread(benchmark::State& state) { SmallThroughput(state, true); }
BENCHMARK(BM_RunSmallPerThread)
    ->Threads(1)
    ->Threads(4)
    ->Threads(kMaxClientThreads)
    ->UseRealTime();

}  // namespace
}  // namespace tandem
