// Every kernel over the wire (issue 20 item 4). Starts the real tandem-worker
// on loopback (port 0) with small limits (4 MiB messages, 10^6 elements per
// input), asks it for Capabilities and, for every kernel listed, runs the
// request of worker_kernel_cases.cc over gRPC and the same request in
// process through a KernelRegistry built by RegisterBuiltinKernels (the
// reference), then compares output values. A listed kernel without a case
// fails the test. Then bad requests (wrong dtype, rank, unknown param, NaN,
// oversized tensors and messages, kernel-level shape errors, zero-size
// dimensions) must be refused with INVALID_ARGUMENT (RESOURCE_EXHAUSTED for
// a message over the gRPC cap) while the worker keeps serving. Requests ask
// for the "cpu" backend: every kernel here is deterministic on the CPU (the
// seeded ones take their seeds as params), so wire and reference agree to
// the bit in practice; the CUDA paths are compared with the CPU reference by
// the gpu-labelled tests, not here. Label integration.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/model_store.h"
#include "ml/worker/tensor_codec.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_kernel_cases.h"
#include "tests/integration/worker_process.h"

namespace tandem {
namespace {

using ::tandem::testing::AllKernelCases;
using ::tandem::testing::KernelCase;
using ::tandem::testing::WorkerProcess;
using Code = grpc::StatusCode;

constexpr int kMaxMessageMb = 4;
constexpr int64_t kMaxTensorElements = 1000 * 1000;

std::vector<float> Floats(const proto::Tensor& t) {
  std::vector<float> v(t.data().size() / sizeof(float));
  std::memcpy(v.data(), t.data().data(), v.size() * sizeof(float));
  return v;
}

// Adds a gtest failure per mismatch between a wire output and the reference
// (dtype, shape, then values). Returns true when every byte is equal.
bool CompareOutput(const proto::Tensor& got, const proto::Tensor& want, const KernelCase& c) {
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(std::vector<int64_t>(got.shape().begin(), got.shape().end()),
            std::vector<int64_t>(want.shape().begin(), want.shape().end()));
  if (got.dtype() != want.dtype() || got.data().size() != want.data().size()) {
    ADD_FAILURE() << "output " << want.name() << ": " << got.data().size() << " bytes, want "
                  << want.data().size();
    return false;
  }
  if (got.data() == want.data()) return true;
  if (want.dtype() != proto::DTYPE_FLOAT32) {
    ADD_FAILURE() << "output " << want.name() << " (" << ml::worker::DTypeName(want.dtype())
                  << ") differs from the reference; integer outputs must be exact";
    return false;
  }
  const std::vector<float> g = Floats(got), w = Floats(want);
  int bad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double err = std::fabs(double{g[i]} - double{w[i]});
    if (!(err <= c.rtol * std::fabs(double{w[i]}) + c.atol) && ++bad <= 3) {
      ADD_FAILURE() << "output " << want.name() << "[" << i << "] = " << g[i] << ", reference "
                    << w[i];
    }
  }
  return false;
}

class WorkerAllKernelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    process_ = new WorkerProcess;
    if (!process_->Start(TANDEM_WORKER_BINARY,
                         {"--listen=127.0.0.1:0", "--max_concurrency=2",
                          absl::StrCat("--max_message_mb=", kMaxMessageMb),
                          absl::StrCat("--max_tensor_melements=", kMaxTensorElements / 1000000)})) {
      return;
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    stub_ =
        proto::Worker::NewStub(grpc::CreateCustomChannel(process_->address(),
                                                         grpc::InsecureChannelCredentials(), args))
            .release();
    reference_ = new ml::worker::KernelRegistry;
    if (!ml::worker::RegisterBuiltinKernels(reference_).ok()) {
      delete reference_;
      reference_ = nullptr;
    }
    // The cases' models, on the worker and in the reference's store.
    models_ = new ml::worker::ModelStore(int64_t{64} << 20);
    for (const KernelCase& c : AllKernelCases()) {
      if (!c.model.has_value()) continue;
      grpc::ClientContext ctx;
      proto::ModelInfo info;
      auto writer = stub_->LoadModel(&ctx, &info);
      proto::WorkerModelChunk chunk;
      *chunk.mutable_header() = *c.model;
      writer->Write(chunk);
      writer->WritesDone();
      const grpc::Status loaded = writer->Finish();
      EXPECT_TRUE(loaded.ok()) << c.model->name() << ": " << loaded.error_message();
      ml::worker::TensorSet tensors;
      for (const proto::Tensor& t : c.model->tensors()) {
        auto w = ml::worker::DecodeTensor(t, kMaxTensorElements, t.name());
        EXPECT_TRUE(w.ok()) << w.status();
        if (w.ok()) tensors.push_back({t.name(), std::move(w->f32)});
      }
      auto held = models_->Load(
          c.model->name(), 0, c.model->kind(),
          ml::worker::ModelConfig(c.model->config().begin(), c.model->config().end()),
          std::move(tensors), false);
      EXPECT_TRUE(held.ok()) << held.status();
    }
  }
  static void TearDownTestSuite() {
    delete stub_;
    stub_ = nullptr;
    delete reference_;
    reference_ = nullptr;
    delete models_;
    models_ = nullptr;
    if (process_ != nullptr && process_->Alive()) {
      EXPECT_EQ(process_->Stop(), 0);  // clean exit on SIGTERM
    }
    delete process_;
    process_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(stub_, nullptr) << "tandem-worker did not start";
    ASSERT_NE(reference_, nullptr) << "RegisterBuiltinKernels failed";
  }

  static grpc::Status Run(const proto::KernelRequest& req, proto::KernelResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub_->Run(&ctx, req, resp);
  }
  // Expects INVALID_ARGUMENT with `reason` in the message.
  static void ExpectInvalid(const proto::KernelRequest& req, const std::string& reason) {
    proto::KernelResponse ignored;
    const grpc::Status s = Run(req, &ignored);
    EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << reason << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(reason), std::string::npos) << s.error_message();
  }
  static std::vector<proto::KernelInfo> Capabilities() {
    grpc::ClientContext ctx;
    proto::CapabilitiesResponse caps;
    EXPECT_TRUE(stub_->Capabilities(&ctx, {}, &caps).ok());
    return {caps.kernels().begin(), caps.kernels().end()};
  }
  static bool Healthy() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    proto::HealthResponse h;
    return stub_->Health(&ctx, {}, &h).ok() && h.serving();
  }
  // The case table by kernel name.
  static std::map<std::string, KernelCase> Cases() {
    std::map<std::string, KernelCase> by_name;
    for (KernelCase& c : AllKernelCases()) {
      const std::string name = c.request.kernel();
      EXPECT_TRUE(by_name.emplace(name, std::move(c)).second) << "two cases for " << name;
    }
    return by_name;
  }
  // A valid request (attention.dense) still answered.
  static void ExpectStillServing() {
    proto::KernelResponse r;
    const grpc::Status s = Run(Cases().at("attention.dense").request, &r);
    EXPECT_TRUE(s.ok()) << "the worker stopped serving: " << s.error_message();
  }

  static WorkerProcess* process_;
  static proto::Worker::Stub* stub_;
  static ml::worker::KernelRegistry* reference_;
  static ml::worker::ModelStore* models_;  // the reference's models
};
WorkerProcess* WorkerAllKernelsTest::process_ = nullptr;
proto::Worker::Stub* WorkerAllKernelsTest::stub_ = nullptr;
ml::worker::KernelRegistry* WorkerAllKernelsTest::reference_ = nullptr;
ml::worker::ModelStore* WorkerAllKernelsTest::models_ = nullptr;

TEST_F(WorkerAllKernelsTest, EveryListedKernelHasACase) {
  const std::vector<proto::KernelInfo> listed = Capabilities();
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.size(), reference_->Describe().size());
  const std::map<std::string, KernelCase> cases = Cases();
  std::vector<std::string> missing;
  std::set<std::string> names;
  for (const proto::KernelInfo& k : listed) {
    names.insert(k.name());
    if (!cases.contains(k.name())) missing.push_back(k.name());
  }
  EXPECT_TRUE(missing.empty()) << "kernels listed by Capabilities without a case in "
                                  "tests/integration/worker_kernel_cases.cc: "
                               << absl::StrJoin(missing, ", ");
  std::vector<std::string> stale;
  for (const auto& [name, c] : cases) {
    if (!names.contains(name)) stale.push_back(name);
  }
  EXPECT_TRUE(stale.empty()) << "cases for kernels the worker does not list: "
                             << absl::StrJoin(stale, ", ");
}

TEST_F(WorkerAllKernelsTest, EveryKernelMatchesTheInProcessReference) {
  const std::map<std::string, KernelCase> cases = Cases();
  int compared = 0, bitwise = 0;
  for (const proto::KernelInfo& info : Capabilities()) {
    SCOPED_TRACE(info.name());
    const auto it = cases.find(info.name());
    if (it == cases.end()) continue;  // reported by EveryListedKernelHasACase
    const KernelCase& c = it->second;
    proto::KernelResponse wire;
    const grpc::Status s = Run(c.request, &wire);
    ASSERT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
    EXPECT_EQ(wire.backend(), "cpu");
    absl::StatusOr<std::vector<proto::Tensor>> want = reference_->Run(c.request, models_);
    ASSERT_TRUE(want.ok()) << want.status();
    // The outputs are the ones Capabilities documents, in order.
    ASSERT_EQ(wire.outputs_size(), info.outputs_size());
    ASSERT_EQ(want->size(), static_cast<size_t>(info.outputs_size()));
    bool exact = true;
    for (int i = 0; i < info.outputs_size(); ++i) {
      SCOPED_TRACE(absl::StrCat("output ", i, " (", info.outputs(i).name(), ")"));
      EXPECT_EQ(wire.outputs(i).dtype(), info.outputs(i).dtype());
      EXPECT_EQ(wire.outputs(i).shape_size(), info.outputs(i).rank());
      EXPECT_FALSE((*want)[i].data().empty() && info.outputs(i).rank() == 0);
      exact = CompareOutput(wire.outputs(i), (*want)[i], c) && exact;
    }
    ++compared;
    bitwise += exact ? 1 : 0;
  }
  EXPECT_EQ(compared, static_cast<int>(cases.size()));
  std::printf("compared %d kernels over gRPC with the in-process registry; %d bitwise equal\n",
              compared, bitwise);
}

// Generic mistakes, tried on every kernel: each input with a wrong dtype, a
// wrong rank and (float inputs) a NaN, a float64 that overflows float32, a
// missing input, an unknown param, and NaN / infinite values of each param.
TEST_F(WorkerAllKernelsTest, EveryKernelRejectsMalformedRequests) {
  const std::map<std::string, KernelCase> cases = Cases();
  for (const proto::KernelInfo& info : Capabilities()) {
    SCOPED_TRACE(info.name());
    const auto it = cases.find(info.name());
    if (it == cases.end()) continue;
    const proto::KernelRequest& good = it->second.request;
    for (int i = 0; i < good.inputs_size(); ++i) {
      SCOPED_TRACE(absl::StrCat("input ", i));
      const proto::Tensor& t = good.inputs(i);
      proto::KernelRequest bad = good;
      // Same element size, other type: int32 <-> float32, int64 -> float64...
      static const std::map<proto::DType, proto::DType> kSwap = {
          {proto::DTYPE_FLOAT32, proto::DTYPE_INT32},
          {proto::DTYPE_INT32, proto::DTYPE_FLOAT32},
          {proto::DTYPE_INT64, proto::DTYPE_FLOAT64},
          {proto::DTYPE_UINT8, proto::DTYPE_FLOAT32}};
      bad.mutable_inputs(i)->set_dtype(kSwap.at(t.dtype()));
      ExpectInvalid(bad, ": dtype ");
      bad = good;
      bad.mutable_inputs(i)->add_shape(1);
      ExpectInvalid(bad, ": rank ");
      if (t.dtype() == proto::DTYPE_FLOAT32 && !t.data().empty()) {
        bad = good;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(bad.mutable_inputs(i)->mutable_data()->data(), &nan, sizeof(nan));
        ExpectInvalid(bad, "NaN or infinity");
        // As float64 (accepted for float32 inputs), 1e300 overflows to inf.
        std::vector<double> wide(t.data().size() / 4, 0.5);
        wide[0] = 1e300;
        bad = good;
        bad.mutable_inputs(i)->set_dtype(proto::DTYPE_FLOAT64);
        bad.mutable_inputs(i)->set_data(wide.data(), wide.size() * sizeof(double));
        ExpectInvalid(bad, "NaN or infinity");  // float64 overflowing float32
      }
    }
    if (good.inputs_size() > 0) {
      proto::KernelRequest bad = good;
      bad.mutable_inputs()->RemoveLast();
      ExpectInvalid(bad, absl::StrCat(" takes ", good.inputs_size(), " inputs"));
    }
    proto::KernelRequest bad = good;
    (*bad.mutable_params())["no_such_param"] = 1;
    ExpectInvalid(bad, "unknown param 'no_such_param'");
    for (const std::string& p : info.params()) {
      for (double v :
           {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
            -std::numeric_limits<double>::infinity()}) {
        bad = good;
        (*bad.mutable_params())[p] = v;
        ExpectInvalid(bad, absl::StrCat("param ", p, " = "));
      }
    }
    // The worker still runs this kernel correctly formed.
    proto::KernelResponse r;
    EXPECT_TRUE(Run(good, &r).ok());
  }
  ExpectStillServing();
}

// Kernel-level validation behind the generic checks, one case per family,
// and the size limits: each refused, each followed by a valid call.
TEST_F(WorkerAllKernelsTest, KernelLevelErrorsAndSizeLimits) {
  using ml::kernels::Tensor;
  using ml::kernels::testing::RandomTensor;
  using ml::worker::EncodeBytes;
  using ml::worker::EncodeFloat;
  using ml::worker::EncodeInt32;
  using ml::worker::EncodeInt64;
  const std::map<std::string, KernelCase> cases = Cases();
  // The case of `kernel` with input `i` replaced and `params` overridden.
  auto with = [&](const std::string& kernel, int i, const proto::Tensor* t,
                  std::map<std::string, double> params = {}) {
    proto::KernelRequest r = cases.at(kernel).request;
    if (t != nullptr) *r.mutable_inputs(i) = *t;
    for (const auto& [k, v] : params) (*r.mutable_params())[k] = v;
    return r;
  };
  struct Bad {
    std::string reason;  // expected in the error message
    proto::KernelRequest request;
    Code code = Code::INVALID_ARGUMENT;
  };
  std::vector<Bad> bad;
  const proto::Tensor k_other_dim = EncodeFloat("k", RandomTensor({2, 16, 4}, 1));
  bad.push_back({"must match", with("attention.dense", 1, &k_other_dim)});
  bad.push_back({"must be an integer", with("dusa.forward", 0, nullptr, {{"block_size", 8.5}})});
  bad.push_back(
      {"must divide the sequence length", with("dusa.forward", 0, nullptr, {{"block_size", 7}})});
  bad.push_back({"smaller than the window", with("adakv.compress", 0, nullptr, {{"budget", 4}})});
  const proto::Tensor codes3 = EncodeBytes("key_codes", {1, 3}, "abc");
  bad.push_back({"positive multiple of 4", with("spotlight.topk", 1, &codes3)});
  const proto::Tensor mask2 =
      EncodeBytes("masks", {2, 4}, std::string("\x02\x00\x01\x00\x00\x01\x01\x01", 8));
  bad.push_back({"0/1 bytes", with("prune.reweighted_gradient", 0, &mask2)});
  bad.push_back({"keep 7 of 6", with("prune.project", 0, nullptr, {{"keep", 7}})});
  const proto::Tensor off = EncodeFloat("points", *Tensor::FromData({1, 3}, {1.0f, 2.0f, 3.0f}));
  bad.push_back({"not on the hyperboloid", with("hdd.logmap0", 0, &off)});
  // Zero features: Exp0 REQUIRES D >= 1 (was served as OK before the fix).
  const proto::Tensor no_features = EncodeFloat("features", *Tensor::Zeros({5, 0}));
  bad.push_back({"hdd.expmap0 needs D >= 1", with("hdd.expmap0", 0, &no_features)});
  bad.push_back({"top_k must be in", with("gld.loss", 0, nullptr, {{"top_k", 31}})});
  const proto::Tensor label5 = EncodeInt64("labels", {3}, {0, 5, 2});
  bad.push_back({"label 5 of sample 1", with("sdpgo.step", 1, &label5)});
  bad.push_back({"beta = 2.5 must be in", with("sled.energy_loss", 0, nullptr, {{"beta", 2.5}})});
  const proto::Tensor long_len = EncodeInt64("lengths", {2}, {13, 9});
  bad.push_back({"length[0] = 13", with("trajmamba.encode", 3, &long_len)});
  const proto::Tensor unstable = EncodeFloat("a", *Tensor::FromData({2}, {-1.0f, 1.0f}));
  bad.push_back({"A must be negative", with("trajmamba.scan", 2, &unstable)});
  const proto::Tensor cone3 = EncodeFloat("cone", *Tensor::FromData({1, 3}, {1, 1, 1}));
  bad.push_back({"cone matrix has 3 columns", with("frappe.allocation", 1, &cone3)});
  std::vector<int32_t> labels(16, 0);
  labels[0] = -7;
  const proto::Tensor neg = EncodeInt32("labels", {4, 2, 2}, labels);
  bad.push_back({"voxel label -7", with("partpacker.pack", 0, &neg)});
  bad.push_back({"unknown backend 'tpu'", with("ren.merge", 0, nullptr)});
  bad.back().request.set_backend("tpu");
  bad.push_back({"unknown kernel", with("ren.merge", 0, nullptr), Code::UNIMPLEMENTED});
  bad.back().request.set_kernel("ren.no_such_kernel");
  // A small request whose DuSA dense block would need 16384^2 scores.
  proto::KernelRequest huge_block;
  huge_block.set_kernel("dusa.forward");
  for (uint64_t s = 1; s <= 3; ++s) {
    *huge_block.add_inputs() = EncodeFloat("t", RandomTensor({1, 1, 16384, 1}, s));
  }
  (*huge_block.mutable_params())["block_size"] = 16384;
  bad.push_back({"request too large: DuSA scores", huge_block});
  // One element over the worker's per-input cap (4 MB, under the 4 MiB
  // message cap): INVALID_ARGUMENT from the registry.
  const proto::Tensor over_cap = EncodeFloat("tokens", *Tensor::Zeros({kMaxTensorElements + 1, 1}));
  bad.push_back({"exceed the cap of 1000000", with("ren.merge", 0, &over_cap)});
  // 4.4 MB: over the gRPC message cap, refused by gRPC before the service.
  const proto::Tensor over_msg =
      EncodeFloat("tokens", *Tensor::Zeros({(int64_t{kMaxMessageMb} << 20) / 4 + 100000, 1}));
  bad.push_back({"", with("ren.merge", 0, &over_msg), Code::RESOURCE_EXHAUSTED});  // gRPC's message
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.reason);
    proto::KernelResponse r;
    const grpc::Status s = Run(b.request, &r);
    EXPECT_EQ(s.error_code(), b.code) << s.error_message();
    EXPECT_NE(s.error_message().find(b.reason), std::string::npos) << s.error_message();
    ExpectStillServing();
  }
}

// Zero-size dimensions in turn in every input of every kernel: the worker
// answers OK or INVALID_ARGUMENT, never crashes, hangs or fails internally.
// Finite inputs scaled to the edges of float32 (1e30, 1e-30) overflow
// inside some kernels (attention, CAT, DuSA, ...): the worker answers
// OUT_OF_RANGE for an output that holds NaN or infinity, never the NaN
// itself, and keeps serving.
TEST_F(WorkerAllKernelsTest, OverflowingInputsNeverAnswerNaN) {
  int out_of_range = 0;
  for (const auto& [name, c] : Cases()) {
    for (const float scale : {1e30f, 1e-30f}) {
      SCOPED_TRACE(absl::StrCat(name, " inputs x ", scale));
      proto::KernelRequest r = c.request;
      bool scaled = false;
      for (int i = 0; i < r.inputs_size(); ++i) {
        proto::Tensor* t = r.mutable_inputs(i);
        if (t->dtype() != proto::DTYPE_FLOAT32) continue;
        std::string& data = *t->mutable_data();
        for (size_t k = 0; k + sizeof(float) <= data.size(); k += sizeof(float)) {
          float x;
          std::memcpy(&x, data.data() + k, sizeof(x));
          x *= scale;
          std::memcpy(data.data() + k, &x, sizeof(x));
        }
        scaled = true;
      }
      if (!scaled) continue;
      proto::KernelResponse resp;
      const grpc::Status s = Run(r, &resp);
      if (s.error_code() == Code::OUT_OF_RANGE) {
        EXPECT_NE(s.error_message().find("NaN or infinity"), std::string::npos)
            << s.error_message();
        ++out_of_range;
        continue;
      }
      // Kernels may also refuse such inputs up front.
      ASSERT_TRUE(s.ok() || s.error_code() == Code::INVALID_ARGUMENT)
          << s.error_code() << ": " << s.error_message();
      for (const proto::Tensor& o : resp.outputs()) {
        if (o.dtype() != proto::DTYPE_FLOAT32) continue;
        for (size_t k = 0; k + sizeof(float) <= o.data().size(); k += sizeof(float)) {
          float x;
          std::memcpy(&x, o.data().data() + k, sizeof(x));
          ASSERT_TRUE(std::isfinite(x)) << o.name() << "[" << k / sizeof(float) << "]";
        }
      }
    }
  }
  // Without the output check ten kernels answered NaN or infinity here.
  EXPECT_GT(out_of_range, 0);
  ExpectStillServing();
}

TEST_F(WorkerAllKernelsTest, ZeroSizeDimensionsNeverBreakTheWorker) {
  const std::map<std::string, KernelCase> cases = Cases();
  for (const auto& [name, c] : cases) {
    for (int i = 0; i < c.request.inputs_size(); ++i) {
      for (int d = 0; d < c.request.inputs(i).shape_size(); ++d) {
        SCOPED_TRACE(absl::StrCat(name, " input ", i, " dim ", d, " = 0"));
        proto::KernelRequest r = c.request;
        r.mutable_inputs(i)->set_shape(d, 0);
        r.mutable_inputs(i)->clear_data();
        proto::KernelResponse resp;
        const grpc::Status s = Run(r, &resp);
        EXPECT_TRUE(s.ok() || s.error_code() == Code::INVALID_ARGUMENT)
            << s.error_code() << ": " << s.error_message();
        ASSERT_TRUE(Healthy()) << "tandem-worker died or hangs";
      }
    }
  }
  ExpectStillServing();
}

}  // namespace
}  // namespace tandem
