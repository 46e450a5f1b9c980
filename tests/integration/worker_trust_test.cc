// The worker's trust model (issue 34 item 6) against a real tandem-worker:
// mutual TLS with a caller gate, model writers, plaintext only on loopback,
// and streams that take a concurrency slot and a share of the in-flight byte
// budget before the worker buffers anything. Each attack asserts the
// refusal code and that the held model did not change. Label adversarial.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/model_kinds.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_process.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using ::tandem::testing::ChildProcess;
using ::tandem::testing::WorkerProcess;
using Code = grpc::StatusCode;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Deadline(grpc::ClientContext* ctx, int seconds = 20) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

// The federation model as the coordinator pushes it: an MLP 4-8-3.
proto::ModelHeader FederationModel(uint64_t version, uint64_t seed) {
  auto mlp = *ml::MakeMlp(4, {8}, 3);
  mlp->InitFromSeed(seed);
  proto::ModelHeader h;
  h.set_name("federation.default");
  h.set_version(version);
  h.set_kind("mlp");
  for (const auto& [k, v] : std::vector<std::pair<std::string, int64_t>>{
           {"in", 4}, {"hidden_layers", 1}, {"hidden0", 8}, {"classes", 3}}) {
    (*h.mutable_config())[k] = v;
  }
  for (const auto& t : ml::worker::ZooModelTensors(*mlp)) {
    *h.add_tensors() = ml::worker::EncodeFloat(t.name, t.value);
  }
  h.set_replace(true);
  return h;
}

grpc::Status Load(proto::Worker::Stub* stub, const proto::ModelHeader& h) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  proto::ModelInfo info;
  auto writer = stub->LoadModel(&ctx, &info);
  for (const auto& c : ml::worker::SplitModel(h, 1024)) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

// The held model's bytes (all tensors concatenated) as `stub` reads them.
grpc::Status ReadBack(proto::Worker::Stub* stub, uint64_t* version, std::string* bytes) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  proto::ReadModelRequest req;
  req.mutable_model()->set_name("federation.default");
  auto reader = stub->ReadModel(&ctx, req);
  ml::worker::ModelAssembler assembler(size_t{64} << 20);
  proto::WorkerModelChunk c;
  while (reader->Read(&c)) (void)assembler.Add(std::move(c));
  grpc::Status s = reader->Finish();
  if (!s.ok()) return s;
  absl::StatusOr<proto::ModelHeader> h = assembler.Finish();
  if (!h.ok()) return grpc::Status(Code::DATA_LOSS, std::string(h.status().message()));
  *version = h->version();
  bytes->clear();
  for (const proto::Tensor& t : h->tensors()) *bytes += t.data();
  return s;
}

class WorkerTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tandem_worker_trust");
    ASSERT_TRUE(testing::MakeRoleCertificates(dir_).ok());
  }
  // A stub presenting `identity`'s certificate of MakeRoleCertificates ("" =
  // no client certificate), trusting `ca` for the worker.
  std::unique_ptr<proto::Worker::Stub> As(const std::string& identity, int port,
                                          const std::string& ca = "ca") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadAll(dir_ + "/" + ca + ".pem");
    if (!identity.empty()) {
      o.pem_cert_chain = ReadAll(dir_ + "/" + identity + ".pem");
      o.pem_private_key = ReadAll(dir_ + "/" + identity + ".key");
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("worker.tandem");
    return proto::Worker::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(o), args));
  }
  std::vector<std::string> TlsFlags() {
    return {"--listen=127.0.0.1:0", "--tls_cert=" + dir_ + "/worker.pem",
            "--tls_key=" + dir_ + "/worker.key", "--tls_ca=" + dir_ + "/ca.pem"};
  }
  // The exit code of a worker that must refuse to start.
  int RefusedStart(const std::vector<std::string>& flags) {
    auto p = ChildProcess::Spawn(TANDEM_WORKER_BINARY, flags, dir_ + "/refused.log");
    if (!p.ok()) return -1;
    absl::StatusOr<int> rc = (*p)->Wait(absl::Seconds(20));
    return rc.ok() ? *rc : -1;
  }
  std::string dir_;
};

TEST_F(WorkerTrustTest, OnlyNamedCallersReachItAndOnlyWritersChangeTheModel) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--callers=operator.tandem");
  flags.push_back("--model_writers=coordinator.tandem");
  WorkerProcess worker;
  ASSERT_TRUE(worker.Start(TANDEM_WORKER_BINARY, flags));
  auto coordinator = As("coordinator", worker.port());
  auto reader = As("operator", worker.port());
  auto outsider = As("outsider", worker.port());  // same CA, no role
  auto rogue = As("rogue", worker.port());        // coordinator's name, another CA
  auto anonymous = As("", worker.port());         // TLS without a client certificate

  const proto::ModelHeader v1 = FederationModel(1, 7);
  ASSERT_TRUE(Load(coordinator.get(), v1).ok());
  uint64_t version = 0;
  std::string before;
  ASSERT_TRUE(ReadBack(reader.get(), &version, &before).ok());
  EXPECT_EQ(version, 1u);

  // A reader reads, but neither replaces, unloads nor trains the model.
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::HealthResponse h;
    EXPECT_TRUE(reader->Health(&ctx, {}, &h).ok());
  }
  EXPECT_EQ(Load(reader.get(), FederationModel(2, 8)).error_code(), Code::PERMISSION_DENIED);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::UnloadModelRequest req;
    req.mutable_model()->set_name("federation.default");
    proto::UnloadModelResponse r;
    EXPECT_EQ(reader->UnloadModel(&ctx, req, &r).error_code(), Code::PERMISSION_DENIED);
  }
  {  // In-place training is a write, whatever the request's other fields.
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KernelRequest req;
    req.set_kernel("spotlight.train_step");
    req.mutable_model()->set_name("federation.default");
    proto::KernelResponse r;
    EXPECT_EQ(reader->Run(&ctx, req, &r).error_code(), Code::PERMISSION_DENIED);
  }
  // A certificate of the same CA without a role gets nothing at all.
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::ListModelsResponse r;
    EXPECT_EQ(outsider->ListModels(&ctx, {}, &r).error_code(), Code::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KernelRequest req;
    req.set_kernel("model.predict");
    proto::KernelResponse r;
    EXPECT_EQ(outsider->Run(&ctx, req, &r).error_code(), Code::PERMISSION_DENIED);
  }
  uint64_t v = 0;
  std::string bytes;
  EXPECT_EQ(ReadBack(outsider.get(), &v, &bytes).error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(Load(outsider.get(), FederationModel(3, 9)).error_code(), Code::PERMISSION_DENIED);
  // Another CA's certificate for the coordinator's name, and no
  // certificate: the handshake itself fails.
  EXPECT_NE(Load(rogue.get(), FederationModel(4, 10)).error_code(), Code::OK);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx, 5);
    proto::HealthResponse h;
    EXPECT_EQ(anonymous->Health(&ctx, {}, &h).error_code(), Code::UNAVAILABLE);
  }
  {
    auto plain = proto::Worker::NewStub(
        grpc::CreateChannel(worker.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    Deadline(&ctx, 5);
    proto::HealthResponse h;
    EXPECT_EQ(plain->Health(&ctx, {}, &h).error_code(), Code::UNAVAILABLE);
  }

  // Nothing changed: the writer's version 1, bit for bit.
  std::string after;
  ASSERT_TRUE(ReadBack(reader.get(), &version, &after).ok());
  EXPECT_EQ(version, 1u);
  EXPECT_TRUE(after == before);
  // The writer can move it on.
  ASSERT_TRUE(Load(coordinator.get(), FederationModel(2, 8)).ok());
  ASSERT_TRUE(ReadBack(reader.get(), &version, &after).ok());
  EXPECT_EQ(version, 2u);
  EXPECT_FALSE(after == before);
  EXPECT_EQ(worker.Stop(), 0);
}

// KV caches are keyed by their creator's TLS identity: another admitted
// caller cannot list, read (through a kernel), append to or drop them, gets
// NOT_FOUND as for a name never created, and may create its own cache of
// the same name; the creator's cache is unchanged by all of it.
TEST_F(WorkerTrustTest, ACallersKvCachesAreInvisibleToOtherCallers) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--callers=operator.tandem");
  flags.push_back("--model_writers=coordinator.tandem");
  flags.push_back("--max_gpu_mb=2");
  flags.push_back("--max_gpu_mb_per_caller=1");
  WorkerProcess worker;
  ASSERT_TRUE(worker.Start(TANDEM_WORKER_BINARY, flags));
  auto alice = As("operator", worker.port());
  auto bob = As("coordinator", worker.port());
  auto outsider = As("outsider", worker.port());
  constexpr int kHeads = 1, kDim = 4, kCodeBytes = 16;
  const auto create = [&](proto::Worker::Stub* stub, const std::string& name) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::CreateKvCacheRequest req;
    req.mutable_spec()->set_name(name);
    req.mutable_spec()->set_heads(kHeads);
    req.mutable_spec()->set_head_dim(kDim);
    req.mutable_spec()->set_code_bits(kCodeBytes * 8);
    proto::KvCacheInfo info;
    return stub->CreateKvCache(&ctx, req, &info);
  };
  const auto append = [&](proto::Worker::Stub* stub, const std::string& name, int64_t n,
                          proto::KvCacheInfo* info) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    auto writer = stub->AppendKvCache(&ctx, info);
    proto::KvCacheAppend a;
    a.set_name(name);
    const ml::kernels::Tensor kv = *ml::kernels::Tensor::FromData(
        {kHeads, n, kDim}, std::vector<float>(static_cast<size_t>(kHeads * n * kDim), 0.5f));
    *a.add_tensors() = ml::worker::EncodeFloat("keys", kv);
    *a.add_tensors() = ml::worker::EncodeFloat("values", kv);
    *a.add_tensors() =
        ml::worker::EncodeBytes("codes", {kHeads, n, kCodeBytes},
                                std::string(static_cast<size_t>(kHeads * n * kCodeBytes), 'x'));
    for (const auto& c : ml::worker::SplitKvAppend(a, 1024)) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  };
  const auto list = [&](proto::Worker::Stub* stub, proto::ListKvCachesResponse* r) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub->ListKvCaches(&ctx, {}, r);
  };
  const auto topk = [&](proto::Worker::Stub* stub, const std::string& name) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KernelRequest req;
    req.set_kernel("spotlight.topk");
    req.mutable_kv_cache()->set_name(name);
    *req.add_inputs() =
        ml::worker::EncodeBytes("query_codes", {1, kCodeBytes}, std::string(kCodeBytes, 'x'));
    proto::KernelResponse r;
    return stub->Run(&ctx, req, &r);
  };
  const auto drop = [&](proto::Worker::Stub* stub, const std::string& name) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::DropKvCacheRequest req;
    req.set_name(name);
    proto::DropKvCacheResponse r;
    return stub->DropKvCache(&ctx, req, &r);
  };

  ASSERT_TRUE(create(alice.get(), "seq-1").ok());
  proto::KvCacheInfo info;
  ASSERT_TRUE(append(alice.get(), "seq-1", 8, &info).ok());
  ASSERT_EQ(info.tokens(), 8);
  ASSERT_TRUE(topk(alice.get(), "seq-1").ok());

  // Bob is admitted, but alice's cache does not exist for him.
  proto::ListKvCachesResponse bobs;
  ASSERT_TRUE(list(bob.get(), &bobs).ok());
  EXPECT_EQ(bobs.caches_size(), 0);
  EXPECT_EQ(topk(bob.get(), "seq-1").error_code(), Code::NOT_FOUND);
  proto::KvCacheInfo ignored;
  EXPECT_EQ(append(bob.get(), "seq-1", 4, &ignored).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(drop(bob.get(), "seq-1").error_code(), Code::NOT_FOUND);
  // Nor can a name spell alice's key.
  EXPECT_EQ(drop(bob.get(), absl::StrCat(absl::BytesToHexString("operator.tandem"), "/seq-1"))
                .error_code(),
            Code::NOT_FOUND);
  EXPECT_EQ(create(bob.get(), "a/b").error_code(), Code::INVALID_ARGUMENT);
  // The same name is free for bob: his own cache, apart from alice's.
  ASSERT_TRUE(create(bob.get(), "seq-1").ok());
  ASSERT_TRUE(append(bob.get(), "seq-1", 2, &info).ok());
  EXPECT_EQ(info.tokens(), 2);
  // A certificate without a role reaches no cache RPC at all.
  proto::ListKvCachesResponse none;
  EXPECT_EQ(list(outsider.get(), &none).error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(create(outsider.get(), "seq-1").error_code(), Code::PERMISSION_DENIED);

  // Alice's cache: hers alone, unchanged.
  proto::ListKvCachesResponse alices;
  ASSERT_TRUE(list(alice.get(), &alices).ok());
  ASSERT_EQ(alices.caches_size(), 1);
  EXPECT_EQ(alices.caches(0).spec().name(), "seq-1");
  EXPECT_EQ(alices.caches(0).tokens(), 8);
  EXPECT_TRUE(drop(alice.get(), "seq-1").ok());
  ASSERT_TRUE(list(bob.get(), &bobs).ok());
  ASSERT_EQ(bobs.caches_size(), 1);
  EXPECT_EQ(bobs.caches(0).tokens(), 2);

  // Memory: 1 MiB a caller of the worker's 2. Alice's second 12,000 tokens
  // (48 B each, a new page as large as what the cache holds) would pass her
  // share: refused, nothing appended; bob's share is untouched by hers.
  ASSERT_TRUE(create(alice.get(), "big").ok());
  ASSERT_TRUE(append(alice.get(), "big", 12000, &info).ok());
  const grpc::Status over = append(alice.get(), "big", 12000, &ignored);
  EXPECT_EQ(over.error_code(), Code::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("--max_gpu_mb_per_caller"), std::string::npos)
      << over.error_message();
  ASSERT_TRUE(list(alice.get(), &alices).ok());
  ASSERT_EQ(alices.caches_size(), 1);
  EXPECT_EQ(alices.caches(0).tokens(), 12000);
  ASSERT_TRUE(append(bob.get(), "seq-1", 12000, &info).ok());
  EXPECT_EQ(info.tokens(), 12002);
  EXPECT_EQ(worker.Stop(), 0);
}

TEST_F(WorkerTrustTest, PlaintextOffLoopbackAndTlsWithoutCallersNeverStart) {
  EXPECT_EQ(RefusedStart({"--listen=0.0.0.0:0"}), 2);
  EXPECT_NE(ReadAll(dir_ + "/refused.log").find("plaintext worker is refused"), std::string::npos)
      << ReadAll(dir_ + "/refused.log");
  EXPECT_EQ(RefusedStart(TlsFlags()), 2);
  EXPECT_NE(ReadAll(dir_ + "/refused.log").find("--callers"), std::string::npos)
      << ReadAll(dir_ + "/refused.log");
}

// A stream holds its slot from its first byte: a second stream, a unary Run
// and a LoadModel are refused before the worker reads any of their data,
// and a stream that outgrows the in-flight budget is cut off.
TEST_F(WorkerTrustTest, StreamsTakeTheirSlotAndBytesBeforeTheWorkerBuffersThem) {
  WorkerProcess worker;
  ASSERT_TRUE(worker.Start(TANDEM_WORKER_BINARY,
                           {"--listen=127.0.0.1:0", "--max_concurrency=1", "--max_inflight_mb=1"}));
  auto stub = proto::Worker::NewStub(
      grpc::CreateChannel(worker.address(), grpc::InsecureChannelCredentials()));
  proto::KernelRequest small;
  small.set_kernel("no.such.kernel");
  // Stream A: one chunk, then it stays open (a slow or hostile sender).
  grpc::ClientContext a_ctx;
  Deadline(&a_ctx, 60);
  auto a = stub->RunStream(&a_ctx);
  ASSERT_TRUE(a->Write(ml::worker::SplitRequest(small, 1024).front()));
  // Once A's handler runs, every other call is refused at once.
  Code b_code = Code::OK;
  for (int i = 0; i < 100 && b_code != Code::RESOURCE_EXHAUSTED; ++i) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    auto b = stub->RunStream(&ctx);
    for (const auto& c : ml::worker::SplitRequest(small, 1024)) b->Write(c);
    b->WritesDone();
    b_code = b->Finish().error_code();
    if (b_code != Code::RESOURCE_EXHAUSTED) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(b_code, Code::RESOURCE_EXHAUSTED);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KernelResponse r;
    EXPECT_EQ(stub->Run(&ctx, small, &r).error_code(), Code::RESOURCE_EXHAUSTED);
  }
  EXPECT_EQ(Load(stub.get(), FederationModel(1, 7)).error_code(), Code::RESOURCE_EXHAUSTED);
  // A ends; its slot is free again (the unknown kernel is its own error).
  a->WritesDone();
  EXPECT_EQ(a->Finish().error_code(), Code::UNIMPLEMENTED);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KernelResponse r;
    EXPECT_EQ(stub->Run(&ctx, small, &r).error_code(), Code::UNIMPLEMENTED);
  }
  // 2 MiB of tensor data against a 1 MiB in-flight budget.
  proto::KernelRequest big = small;
  proto::Tensor* t = big.add_inputs();
  t->set_name("x");
  t->set_dtype(proto::DTYPE_FLOAT32);
  t->add_shape(512 * 1024);
  t->mutable_data()->assign(size_t{2} << 20, '\0');
  grpc::ClientContext ctx;
  Deadline(&ctx);
  auto c = stub->RunStream(&ctx);
  for (const auto& chunk : ml::worker::SplitRequest(big, 256 << 10)) {
    if (!c->Write(chunk)) break;  // the worker answered early
  }
  c->WritesDone();
  const grpc::Status s = c->Finish();
  EXPECT_EQ(s.error_code(), Code::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("streamed requests"), std::string::npos) << s.error_message();
  EXPECT_TRUE(worker.Alive());
  EXPECT_EQ(worker.Stop(), 0);
}

}  // namespace
}  // namespace tandem
