// Starts the real tandem-worker binary on loopback (port 0), calls every
// kernel through a gRPC stub and compares with the CPU reference of
// ml/kernels called in-process, then sends malformed requests. Label
// integration.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/cat.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/tensor_codec.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_process.h"

namespace tandem {
namespace {

using ml::kernels::Tensor;
using ml::kernels::testing::MaxAbsDiff;
using ml::kernels::testing::RandomTensor;
using ml::worker::EncodeBytes;
using ml::worker::EncodeFloat;
using ml::worker::ToFloatTensor;
using ::tandem::testing::WorkerProcess;

class WorkerIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    process_ = new WorkerProcess;
    ASSERT_TRUE(
        process_->Start(TANDEM_WORKER_BINARY, {"--listen=127.0.0.1:0", "--max_concurrency=2"}));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    stub_ = proto::Worker::NewStub(grpc::CreateCustomChannel(
                                       "127.0.0.1:" + std::to_string(process_->port()),
                                       grpc::InsecureChannelCredentials(), args))
                .release();
  }
  void SetUp() override { ASSERT_NE(stub_, nullptr) << "tandem-worker did not start"; }
  static void TearDownTestSuite() {
    delete stub_;
    stub_ = nullptr;
    EXPECT_EQ(process_->Stop(), 0);  // clean exit on SIGTERM
    delete process_;
    process_ = nullptr;
  }

  static grpc::Status Run(const std::string& kernel, const std::vector<proto::Tensor>& inputs,
                          const std::map<std::string, double>& params,
                          proto::KernelResponse* resp) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    for (const auto& t : inputs) *req.add_inputs() = t;
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->Run(&ctx, req, resp);
  }

  static Tensor Out(const proto::KernelResponse& r, int i) { return *ToFloatTensor(r.outputs(i)); }

  static std::vector<int64_t> Int64s(const proto::Tensor& t) {
    std::vector<int64_t> v(t.data().size() / 8);
    std::memcpy(v.data(), t.data().data(), t.data().size());
    return v;
  }

  static WorkerProcess* process_;
  static proto::Worker::Stub* stub_;
};
WorkerProcess* WorkerIntegrationTest::process_ = nullptr;
proto::Worker::Stub* WorkerIntegrationTest::stub_ = nullptr;

TEST_F(WorkerIntegrationTest, HealthAndCapabilities) {
  grpc::ClientContext c1, c2;
  proto::HealthResponse h;
  ASSERT_TRUE(stub_->Health(&c1, {}, &h).ok());
  EXPECT_TRUE(h.serving());
  proto::CapabilitiesResponse caps;
  ASSERT_TRUE(stub_->Capabilities(&c2, {}, &caps).ok());
  // The binary serves exactly the registry's kernels.
  ml::worker::KernelRegistry builtins;
  ASSERT_TRUE(ml::worker::RegisterBuiltinKernels(&builtins).ok());
  EXPECT_EQ(static_cast<size_t>(caps.kernels_size()), builtins.Describe().size());
}

TEST_F(WorkerIntegrationTest, AttentionDuSaAndCatMatchReference) {
  const Tensor q = RandomTensor({4, 32, 16}, 1), k = RandomTensor({2, 32, 16}, 2),
               v = RandomTensor({2, 32, 16}, 3);
  proto::KernelResponse r;
  ASSERT_TRUE(Run("attention.dense", {EncodeFloat("q", q), EncodeFloat("k", k), EncodeFloat("v", v)},
                  {{"causal", 1}}, &r).ok());
  EXPECT_LE(MaxAbsDiff(Out(r, 0), *ml::kernels::DenseAttention(q, k, v, true)), 1e-6);

  const Tensor q4 = RandomTensor({1, 2, 64, 16}, 4), k4 = RandomTensor({1, 2, 64, 16}, 5),
               v4 = RandomTensor({1, 2, 64, 16}, 6);
  proto::KernelResponse d;
  ASSERT_TRUE(Run("dusa.forward", {EncodeFloat("q", q4), EncodeFloat("k", k4), EncodeFloat("v", v4)},
                  {{"block_size", 8}}, &d).ok());
  EXPECT_LE(MaxAbsDiff(Out(d, 0), *ml::kernels::DusaForward(q4, k4, v4, 8)), 2e-5);

  const Tensor z = RandomTensor({2, 2, 24}, 7), cv = RandomTensor({2, 24, 8}, 8);
  proto::KernelResponse c;
  ASSERT_TRUE(Run("cat.mix", {EncodeFloat("z", z), EncodeFloat("v", cv)}, {}, &c).ok());
  EXPECT_LE(MaxAbsDiff(Out(c, 0), *ml::kernels::CatMix(z, cv, ml::kernels::CatMethod::kGather)), 1e-5);

  const Tensor x = RandomTensor({1, 16, 8}, 9), wa = RandomTensor({8, 2}, 10),
               wv = RandomTensor({8, 8}, 11), wo = RandomTensor({8, 8}, 12);
  proto::KernelResponse f;
  ASSERT_TRUE(Run("cat.forward", {EncodeFloat("x", x), EncodeFloat("w_a", wa), EncodeFloat("w_v", wv),
                                  EncodeFloat("w_o", wo)}, {{"gather", 1}}, &f).ok());
  EXPECT_LE(MaxAbsDiff(Out(f, 0), *ml::kernels::CatForward(x, wa, wv, wo, ml::kernels::CatMethod::kGather)),
            1e-6);
}

TEST_F(WorkerIntegrationTest, AdaKvMatchesReference) {
  const Tensor q = RandomTensor({4, 80, 8}, 13), k = RandomTensor({2, 80, 8}, 14),
               v = RandomTensor({2, 80, 8}, 15);
  ml::kernels::AdaKvOptions o;
  o.snap.window = 8;
  o.snap.kernel = 5;
  o.budget = 24;
  o.alpha = 0.2;
  proto::KernelResponse s;
  ASSERT_TRUE(Run("adakv.scores", {EncodeFloat("q", q), EncodeFloat("k", k)},
                  {{"window", 8}, {"kernel", 5}}, &s).ok());
  EXPECT_LE(MaxAbsDiff(Out(s, 0), *ml::kernels::SnapKvScores(q, k, o.snap)), 1e-7);
  proto::KernelResponse c;
  ASSERT_TRUE(Run("adakv.compress", {EncodeFloat("q", q), EncodeFloat("k", k), EncodeFloat("v", v)},
                  {{"window", 8}, {"kernel", 5}, {"budget", 24}, {"alpha", 0.2}}, &c).ok());
  const ml::kernels::CompactKv ref = *ml::kernels::AdaKvCompress(q, k, v, o);
  EXPECT_EQ(MaxAbsDiff(Out(c, 0), ref.keys), 0.0);
  EXPECT_EQ(MaxAbsDiff(Out(c, 1), ref.values), 0.0);
  EXPECT_EQ(Int64s(c.outputs(2)), ref.cu_seqlens);
  std::vector<int64_t> flat;
  for (const auto& h : ref.kept) flat.insert(flat.end(), h.begin(), h.end());
  EXPECT_EQ(Int64s(c.outputs(3)), flat);
}

TEST_F(WorkerIntegrationTest, SpotlightMatchesReference) {
  const auto w = *ml::kernels::SpotlightHashWeights::Random(128, 16);
  const Tensor x = RandomTensor({300, 128}, 17);
  proto::KernelResponse h;
  ASSERT_TRUE(Run("spotlight.hash", {EncodeFloat("x", x), EncodeFloat("w1", w.w1), EncodeFloat("b1", w.b1),
                                     EncodeFloat("w2", w.w2), EncodeFloat("b2", w.b2)}, {}, &h).ok());
  const Tensor href = *ml::kernels::SpotlightHash(x, w);
  EXPECT_LE(MaxAbsDiff(Out(h, 0), href), 1e-6);
  const auto codes = *ml::kernels::PackSignBits(href);
  ASSERT_EQ(h.outputs(1).data().size(), codes.bits.size() * 4);
  EXPECT_EQ(std::memcmp(h.outputs(1).data().data(), codes.bits.data(), codes.bits.size() * 4), 0);
  // Top-k of the first 4 rows (one GQA group) against all 300 codes.
  const std::string qbytes = h.outputs(1).data().substr(0, 4 * 16);
  proto::KernelResponse t;
  ASSERT_TRUE(Run("spotlight.topk", {EncodeBytes("q", {4, 16}, qbytes), h.outputs(1)}, {{"k", 25}}, &t).ok());
  ml::kernels::PackedCodes qc{4, 4, std::vector<uint32_t>(codes.bits.begin(), codes.bits.begin() + 16)};
  EXPECT_EQ(Int64s(t.outputs(0)), *ml::kernels::HammingTopK(qc, codes, 25));

  const Tensor q = RandomTensor({8, 128}, 18), k = RandomTensor({64, 128}, 19);
  proto::KernelResponse l;
  ASSERT_TRUE(Run("spotlight.ranking_loss", {EncodeFloat("q", q), EncodeFloat("k", k), EncodeFloat("w1", w.w1),
                                             EncodeFloat("b1", w.b1), EncodeFloat("w2", w.w2),
                                             EncodeFloat("b2", w.b2)},
                  {{"gamma", 8}, {"top_fraction", 0.1}}, &l).ok());
  ml::kernels::SpotlightLossOptions lo;
  lo.gamma = 8;
  lo.top_fraction = 0.1f;
  const auto lref = *ml::kernels::SpotlightRankingLoss(q, k, w, lo);
  EXPECT_NEAR(Out(l, 0).data()[0], lref.loss, 1e-6);
  EXPECT_LE(MaxAbsDiff(Out(l, 1), lref.grads.w1), 1e-7);
}

TEST_F(WorkerIntegrationTest, RenMatchesReference) {
  const Tensor f = RandomTensor({32, 6, 6}, 20);
  const Tensor pts = *Tensor::FromData({3, 2}, {5, 5, 40, 12, 60, 80});
  proto::KernelResponse r;
  ASSERT_TRUE(Run("ren.forward", {EncodeFloat("features", f), EncodeFloat("points", pts)},
                  {{"image_size", 84}, {"heads", 4}, {"layers", 2}, {"weight_seed", 7}}, &r).ok());
  const auto w = *ml::kernels::RenWeights::Random(32, 4, 2, 7);
  const auto ref = *ml::kernels::RenForward(f, pts, 84, w);
  EXPECT_LE(MaxAbsDiff(Out(r, 0), ref.tokens), 1e-6);
  EXPECT_LE(MaxAbsDiff(Out(r, 1), ref.maps), 1e-6);
  proto::KernelResponse m;
  ASSERT_TRUE(Run("ren.merge", {r.outputs(0)}, {{"threshold", 0.5}}, &m).ok());
  EXPECT_LE(MaxAbsDiff(Out(m, 0), *ml::kernels::MergeRegionTokens(ref.tokens, 0.5)), 1e-6);
}

TEST_F(WorkerIntegrationTest, MalformedRequestsAreRejected) {
  const Tensor t = RandomTensor({1, 4, 8}, 21);
  proto::KernelResponse r;
  EXPECT_EQ(Run("no.such.kernel", {}, {}, &r).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Run("attention.dense", {EncodeFloat("q", t)}, {}, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // missing inputs
  proto::Tensor truncated = EncodeFloat("q", t);
  truncated.mutable_data()->resize(7);
  EXPECT_EQ(Run("attention.dense", {truncated, EncodeFloat("k", t), EncodeFloat("v", t)}, {}, &r)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  proto::Tensor wrong_dtype = EncodeFloat("q", t);
  wrong_dtype.set_dtype(proto::DTYPE_INT32);
  EXPECT_EQ(Run("attention.dense", {wrong_dtype, EncodeFloat("k", t), EncodeFloat("v", t)}, {}, &r)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Run("attention.dense", {EncodeFloat("q", t), EncodeFloat("k", t), EncodeFloat("v", t)},
                {{"temperature", 2}}, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Run("spotlight.topk", {EncodeBytes("q", {1, 3}, "abc"), EncodeBytes("k", {1, 3}, "abc")},
                {}, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // codes not a multiple of 4 bytes
  EXPECT_EQ(Run("adakv.compress", {EncodeFloat("q", t), EncodeFloat("k", t), EncodeFloat("v", t)},
                {{"window", 4}, {"budget", 2}}, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // budget < window
  // The worker keeps serving after all of these.
  EXPECT_TRUE(Run("attention.dense", {EncodeFloat("q", t), EncodeFloat("k", t), EncodeFloat("v", t)},
                  {}, &r).ok());
}

TEST(WorkerProcessTest, SigtermShutsDownCleanlyAndBadFlagsFail) {
  WorkerProcess p;
  ASSERT_TRUE(p.Start(TANDEM_WORKER_BINARY, {"--listen=127.0.0.1:0"}));
  EXPECT_EQ(p.Stop(), 0);
  WorkerProcess bad;
  EXPECT_FALSE(bad.Start(TANDEM_WORKER_BINARY, {"--listen=127.0.0.1:0", "--max_concurrency=0"}));
  EXPECT_NE(bad.Stop(), 0);
}

}  // namespace
}  // namespace tandem
