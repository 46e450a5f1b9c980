// In-process gRPC server on a loopback port: service codes end to end.
#include "ml/worker/worker_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/tensor_stream.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

class WorkerServiceTest : public ::testing::Test {
 protected:
  void Start(WorkerOptions options) {
    ASSERT_TRUE(RegisterBuiltinKernels(&registry_).ok());
    ASSERT_TRUE(registry_
                    .Register({"test.block", "blocks until released", false, {}, {}, {},
                               [this](const KernelCall&)
                                   -> absl::StatusOr<std::vector<proto::Tensor>> {
                                 // Only one call runs at a time (max_concurrency 1).
                                 if (!entered_.HasBeenNotified()) entered_.Notify();
                                 release_.WaitForNotification();
                                 return std::vector<proto::Tensor>{};
                               }})
                    .ok());
    auto w = StartWorker("127.0.0.1:0", &registry_, &clock_, options);
    ASSERT_TRUE(w.ok()) << w.status();
    worker_ = *std::move(w);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(worker_->port),
                                       grpc::InsecureChannelCredentials());
    stub_ = proto::Worker::NewStub(channel);
  }

  grpc::Status Call(const proto::KernelRequest& req, proto::KernelResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub_->Run(&ctx, req, resp);
  }

  KernelRegistry registry_;
  FakeClock clock_;
  absl::Notification entered_, release_;
  std::unique_ptr<RunningWorker> worker_;
  std::unique_ptr<proto::Worker::Stub> stub_;
};

TEST_F(WorkerServiceTest, HealthAndCapabilities) {
  Start({});
  grpc::ClientContext c1;
  proto::HealthResponse health;
  ASSERT_TRUE(stub_->Health(&c1, {}, &health).ok());
  EXPECT_TRUE(health.serving());
  EXPECT_FALSE(health.backend().empty());
  grpc::ClientContext c2;
  proto::CapabilitiesResponse caps;
  ASSERT_TRUE(stub_->Capabilities(&c2, {}, &caps).ok());
  KernelRegistry builtins;
  ASSERT_TRUE(RegisterBuiltinKernels(&builtins).ok());
  EXPECT_EQ(static_cast<size_t>(caps.kernels_size()), builtins.Describe().size() + 1);  // + test.block
  for (const auto& k : caps.kernels()) EXPECT_EQ(k.backends(0), "cpu") << k.name();
}

TEST_F(WorkerServiceTest, RunMatchesLibraryAndReportsBackend) {
  Start({});
  proto::KernelRequest req;
  req.set_kernel("attention.dense");
  std::vector<kernels::Tensor> in;
  for (uint64_t s = 1; s <= 3; ++s) in.push_back(kernels::testing::RandomTensor({2, 6, 8}, s));
  for (const auto& t : in) *req.add_inputs() = EncodeFloat("t", t);
  (*req.mutable_params())["causal"] = 1;
  proto::KernelResponse resp;
  ASSERT_TRUE(Call(req, &resp).ok());
  EXPECT_EQ(resp.backend(), "cpu");
  EXPECT_EQ(resp.elapsed_us(), 0);  // FakeClock does not move
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::Tensor got, ToFloatTensor(resp.outputs(0)));
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::Tensor want,
                              kernels::DenseAttention(in[0], in[1], in[2], true));
  EXPECT_EQ(kernels::testing::MaxAbsDiff(got, want), 0.0);
}

TEST_F(WorkerServiceTest, RunStreamCarriesTensorsLargerThanOneMessage) {
  Start({.max_message_bytes = 64 << 10});
  proto::KernelRequest req;
  req.set_kernel("attention.dense");
  std::vector<kernels::Tensor> in;
  for (uint64_t s = 1; s <= 3; ++s) in.push_back(kernels::testing::RandomTensor({2, 256, 64}, s));
  for (const auto& t : in) *req.add_inputs() = EncodeFloat("t", t);  // 3 x 128 KiB
  proto::KernelResponse unary;
  EXPECT_EQ(Call(req, &unary).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  grpc::ClientContext ctx;
  auto stream = stub_->RunStream(&ctx);
  for (const proto::KernelRequestChunk& c : SplitRequest(req, 16 << 10)) {
    ASSERT_TRUE(stream->Write(c));
  }
  ASSERT_TRUE(stream->WritesDone());
  ResponseAssembler assembler(64 << 20);
  proto::KernelResponseChunk chunk;
  int chunks = 0;
  while (stream->Read(&chunk)) {
    TANDEM_ASSERT_OK(assembler.Add(chunk));
    ++chunks;
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_GT(chunks, 2);  // 128 KiB of output in chunks of at most 32 KiB
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::KernelResponse resp, assembler.Finish());
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::Tensor got, ToFloatTensor(resp.outputs(0)));
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::Tensor want,
                              kernels::DenseAttention(in[0], in[1], in[2], false));
  EXPECT_EQ(kernels::testing::MaxAbsDiff(got, want), 0.0);
}

TEST_F(WorkerServiceTest, RunStreamRejectsAMalformedSequence) {
  Start({});
  grpc::ClientContext ctx;
  auto stream = stub_->RunStream(&ctx);
  proto::KernelRequestChunk data_first;
  data_first.set_data("xxxx");
  ASSERT_TRUE(stream->Write(data_first));
  stream->WritesDone();
  proto::KernelResponseChunk ignored;
  while (stream->Read(&ignored)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The chunks, then WritesDone; the call's status (responses dropped).
grpc::Status SendChunks(proto::Worker::Stub* stub,
                        const std::vector<proto::KernelRequestChunk>& chunks) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->RunStream(&ctx);
  for (const auto& c : chunks) {
    if (!stream->Write(c)) break;  // the worker answered early
  }
  stream->WritesDone();
  proto::KernelResponseChunk ignored;
  while (stream->Read(&ignored)) {
  }
  return stream->Finish();
}

TEST_F(WorkerServiceTest, RunStreamCopyIsExactAndMalformedChunksNeverReachAKernel) {
  std::atomic<int> runs{0};
  ASSERT_TRUE(
      registry_
          .Register({"test.count",
                     "counts its calls",
                     false,
                     {{"x", proto::DTYPE_FLOAT32, 1}},
                     {},
                     {{"y", proto::DTYPE_FLOAT32, 1}},
                     [&runs](const KernelCall& c) -> absl::StatusOr<std::vector<proto::Tensor>> {
                       ++runs;
                       return std::vector<proto::Tensor>{EncodeFloat("y", c.f32(0))};
                     }})
          .ok());
  Start({.max_message_bytes = 64 << 10, .max_stream_bytes = 1 << 20});
  // tensor.copy: 256 KiB each way, four messages' worth, bit for bit.
  proto::KernelRequest copy;
  copy.set_kernel("tensor.copy");
  *copy.add_inputs() = EncodeFloat("x", kernels::testing::RandomTensor({65536}, 9));
  {
    grpc::ClientContext ctx;
    auto stream = stub_->RunStream(&ctx);
    ASSERT_TRUE(WriteRequestChunks(
        copy, 24 << 10, [&](const proto::KernelRequestChunk& c) { return stream->Write(c); }));
    ASSERT_TRUE(stream->WritesDone());
    ResponseAssembler assembler(1 << 20);
    proto::KernelResponseChunk chunk;
    while (stream->Read(&chunk)) TANDEM_ASSERT_OK(assembler.Add(chunk));
    ASSERT_TRUE(stream->Finish().ok());
    TANDEM_ASSERT_OK_AND_ASSIGN(proto::KernelResponse resp, assembler.Finish());
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).shape(0), 65536);
    EXPECT_TRUE(resp.outputs(0).data() == copy.inputs(0).data());
  }
  proto::KernelRequest req = copy;
  req.set_kernel("test.count");
  const std::vector<proto::KernelRequestChunk> good = SplitRequest(req, 16 << 10);
  std::vector<std::pair<std::string, std::vector<proto::KernelRequestChunk>>> bad;
  bad.push_back({"data past the declared", good});
  bad.back().second.push_back(good.back());
  bad.push_back({"ended inside input 0", good});
  bad.back().second.pop_back();
  bad.push_back({"names input 1", good});
  bad.back().second[1].set_input_index(1);
  bad.push_back({"unsupported dtype", good});
  bad.back().second[0].mutable_header()->mutable_inputs(0)->set_dtype(proto::DTYPE_UNSPECIFIED);
  bad.push_back({"size limit", good});  // 4 MiB declared, 1 MiB allowed
  bad.back().second[0].mutable_header()->mutable_inputs(0)->set_shape(0, 1 << 20);
  bad.push_back({"only the first chunk", good});
  bad.back().second.push_back(good.front());
  for (const auto& [what, chunks] : bad) {
    const grpc::Status s = SendChunks(stub_.get(), chunks);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_THAT(s.error_message(), HasSubstr(what));
  }
  EXPECT_EQ(runs.load(), 0);
  EXPECT_TRUE(SendChunks(stub_.get(), good).ok());
  EXPECT_EQ(runs.load(), 1);
}

TEST_F(WorkerServiceTest, ErrorCodesReachTheClient) {
  Start({});
  proto::KernelRequest req;
  req.set_kernel("does.not.exist");
  proto::KernelResponse resp;
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  req.set_kernel("dusa.forward");
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Kernel-level shape error (block size does not divide N).
  for (uint64_t s = 1; s <= 3; ++s) {
    *req.add_inputs() = EncodeFloat("t", kernels::testing::RandomTensor({1, 1, 10, 4}, s));
  }
  (*req.mutable_params())["block_size"] = 3;
  const grpc::Status st = Call(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("block_size"), std::string::npos) << st.error_message();
  // A small request whose dense block would need 16384^2 scores is refused.
  proto::KernelRequest big;
  big.set_kernel("dusa.forward");
  for (uint64_t s = 1; s <= 3; ++s) {
    *big.add_inputs() = EncodeFloat("t", kernels::testing::RandomTensor({1, 1, 16384, 1}, s));
  }
  (*big.mutable_params())["block_size"] = 16384;
  const grpc::Status too_big = Call(big, &resp);
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_big.error_message().find("too large"), std::string::npos);
}

TEST_F(WorkerServiceTest, ConcurrencyLimitGivesResourceExhausted) {
  Start({.max_concurrency = 1});
  proto::KernelRequest block;
  block.set_kernel("test.block");
  grpc::Status first;
  std::thread t([&] {
    proto::KernelResponse r;
    first = Call(block, &r);
  });
  entered_.WaitForNotification();
  proto::KernelResponse resp;
  EXPECT_EQ(Call(block, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  release_.Notify();
  t.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_TRUE(Call(block, &resp).ok());  // the slot was released
  EXPECT_EQ(worker_->service->in_flight(), 0);
}

TEST_F(WorkerServiceTest, OversizedMessageIsRejected) {
  Start({.max_message_bytes = 4096});
  proto::KernelRequest req;
  req.set_kernel("ren.merge");
  *req.add_inputs() = EncodeFloat("tokens", kernels::testing::RandomTensor({100, 20}, 1));
  proto::KernelResponse resp;
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(WorkerServiceCreate, ValidatesOptions) {
  KernelRegistry r;
  FakeClock clock;
  EXPECT_THAT(WorkerService::Create(&r, &clock, {.max_concurrency = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WorkerService::Create(&r, &clock, {.max_message_bytes = 10}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WorkerService::Create(nullptr, &clock, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(StartWorker("localhost:bad", &r, &clock, {}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(WorkerService::Create(&r, &clock, {.max_inflight_bytes = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Issue 34 item 6: TLS without anyone allowed to call is a configuration
  // error, and plaintext listens on loopback only.
  WorkerOptions tls;
  tls.tls = {.insecure_plaintext = false,
             .cert_chain_path = "w.pem",
             .private_key_path = "w.key",
             .root_ca_path = ""};
  EXPECT_THAT(WorkerService::Create(&r, &clock, tls),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--callers")));
  for (const char* address : {"0.0.0.0:0", "[::]:0", "10.1.2.3:7100", "127.evil.example:0"}) {
    EXPECT_THAT(StartWorker(address, &r, &clock, {}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plaintext")))
        << address;
  }
}

TEST(ByteReservationTest, HoldsUpToTheLimitAndGivesBackOnScopeExit) {
  std::atomic<int64_t> in_use{0};
  {
    ByteReservation a(&in_use, 100);
    EXPECT_THAT(a.Add(60), IsOk());
    ByteReservation b(&in_use, 100);
    EXPECT_THAT(b.Add(50), StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_EQ(in_use.load(), 60);  // a refused add reserves nothing
    EXPECT_THAT(b.Add(40), IsOk());
    EXPECT_EQ(in_use.load(), 100);
  }
  EXPECT_EQ(in_use.load(), 0);
}

}  // namespace
}  // namespace tandem::ml::worker
