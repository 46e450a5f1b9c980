// Models as resources over the wire: starts the real tandem-worker on
// loopback (port 0) with a 1 MiB model budget and a model directory, then
// over gRPC loads models in chunks and from a checkpoint, runs kernels with
// them and trains them, and compares every value with the ml/ library
// called in process with the same weights and inputs; reads trained models
// back, unloads them, and checks the errors (unknown model, wrong shapes,
// NaN weights, over budget, paths outside the model directory) while the
// worker keeps serving. Label integration.
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/model/checkpoint.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/model_kinds.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_process.h"

namespace tandem {
namespace {

using ml::kernels::Tensor;
using ml::kernels::testing::RandomTensor;
using ml::worker::EncodeFloat;
using ml::worker::ToFloatTensor;
using ::tandem::testing::WorkerProcess;
using Code = grpc::StatusCode;

constexpr size_t kChunkBytes = 4096;  // many chunks per model

std::string Bytes(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.ptr()), t.size() * sizeof(float));
}

class WorkerModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/tandem_worker_models_XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    model_dir_ = new std::string(dir);
    auto mlp = *ml::MakeMlp(4, {8}, 3);
    mlp->InitFromSeed(17);
    if (!ml::SaveCheckpoint(*mlp, *model_dir_ + "/mlp.ckpt").ok()) return;
    // A link inside the directory to a file outside it.
    if (symlink("/etc/hostname", (*model_dir_ + "/escape.ckpt").c_str()) != 0) return;
    process_ = new WorkerProcess;
    if (!process_->Start(TANDEM_WORKER_BINARY,
                         {"--listen=127.0.0.1:0", "--max_concurrency=2", "--max_model_mb=1",
                          "--model_dir=" + *model_dir_})) {
      return;
    }
    stub_ = proto::Worker::NewStub(
                grpc::CreateChannel(process_->address(), grpc::InsecureChannelCredentials()))
                .release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    stub_ = nullptr;
    if (process_ != nullptr && process_->Alive()) {
      EXPECT_EQ(process_->Stop(), 0);  // clean exit on SIGTERM
    }
    delete process_;
    process_ = nullptr;
    if (model_dir_ != nullptr) {
      unlink((*model_dir_ + "/mlp.ckpt").c_str());
      unlink((*model_dir_ + "/escape.ckpt").c_str());
      rmdir(model_dir_->c_str());
    }
    delete model_dir_;
    model_dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(stub_, nullptr) << "tandem-worker did not start"; }

  static void Deadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  static proto::ModelHeader Header(const std::string& name, const std::string& kind,
                                   const std::map<std::string, int64_t>& config,
                                   const ml::worker::TensorSet& tensors) {
    proto::ModelHeader h;
    h.set_name(name);
    h.set_kind(kind);
    for (const auto& [k, v] : config) (*h.mutable_config())[k] = v;
    for (const auto& t : tensors) *h.add_tensors() = EncodeFloat(t.name, t.value);
    return h;
  }

  // LoadModel with the header split into chunks of kChunkBytes.
  static grpc::Status Load(const proto::ModelHeader& h, proto::ModelInfo* info,
                           int* chunks = nullptr) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    auto writer = stub_->LoadModel(&ctx, info);
    const auto parts = ml::worker::SplitModel(h, kChunkBytes);
    if (chunks != nullptr) *chunks = static_cast<int>(parts.size());
    for (const auto& c : parts) {
      if (!writer->Write(c)) break;  // the worker answered early
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static grpc::Status Read(const std::string& name, proto::ModelHeader* out) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::ReadModelRequest req;
    req.mutable_model()->set_name(name);
    auto reader = stub_->ReadModel(&ctx, req);
    ml::worker::ModelAssembler assembler(size_t{64} << 20);
    proto::WorkerModelChunk c;
    while (reader->Read(&c)) EXPECT_TRUE(assembler.Add(std::move(c)).ok());
    grpc::Status s = reader->Finish();
    if (s.ok()) *out = *assembler.Finish();
    return s;
  }

  static grpc::Status Run(const std::string& kernel, const std::vector<proto::Tensor>& inputs,
                          const std::map<std::string, double>& params, const std::string& model,
                          proto::KernelResponse* resp) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    req.set_backend("cpu");
    for (const auto& t : inputs) *req.add_inputs() = t;
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    if (!model.empty()) req.mutable_model()->set_name(model);
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub_->Run(&ctx, req, resp);
  }

  static proto::ListModelsResponse List() {
    grpc::ClientContext ctx;
    proto::ListModelsResponse r;
    EXPECT_TRUE(stub_->ListModels(&ctx, {}, &r).ok());
    return r;
  }

  static grpc::Status Unload(const std::string& name, proto::UnloadModelResponse* r) {
    grpc::ClientContext ctx;
    proto::UnloadModelRequest req;
    req.mutable_model()->set_name(name);
    return stub_->UnloadModel(&ctx, req, r);
  }

  static void ExpectStillServing() {
    grpc::ClientContext ctx;
    proto::HealthResponse h;
    ASSERT_TRUE(stub_->Health(&ctx, {}, &h).ok());
    proto::KernelResponse r;
    EXPECT_TRUE(
        Run("ren.merge", {EncodeFloat("tokens", RandomTensor({4, 8}, 1))}, {}, "", &r).ok());
  }

  static WorkerProcess* process_;
  static proto::Worker::Stub* stub_;
  static std::string* model_dir_;
};
WorkerProcess* WorkerModelTest::process_ = nullptr;
proto::Worker::Stub* WorkerModelTest::stub_ = nullptr;
std::string* WorkerModelTest::model_dir_ = nullptr;

TEST_F(WorkerModelTest, RenModelLoadedInChunksMatchesTheReference) {
  const auto w = *ml::kernels::RenWeights::Random(32, 4, 2, 99);
  const ml::worker::TensorSet tensors = ml::worker::ModelTensors(ml::worker::ModelWeights(w));
  proto::ModelInfo info;
  int chunks = 0;
  const grpc::Status s = Load(
      Header("region", "ren", {{"dim", 32}, {"heads", 4}, {"layers", 2}}, tensors), &info, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(chunks, 10);
  EXPECT_EQ(info.version(), 1u);
  EXPECT_EQ(info.bytes(), ml::worker::ModelWeightBytes(ml::worker::ModelWeights(w)));

  const Tensor f = RandomTensor({32, 6, 6}, 5);
  const Tensor p = *Tensor::FromData({3, 2}, {5, 5, 40, 12, 60, 80});
  proto::KernelResponse r;
  ASSERT_TRUE(Run("ren.forward", {EncodeFloat("features", f), EncodeFloat("points", p)},
                  {{"image_size", 84}}, "region", &r)
                  .ok());
  const ml::kernels::RenOutput want = *ml::kernels::RenForward(f, p, 84, w);
  EXPECT_EQ(r.outputs(0).data(), Bytes(want.tokens));
  EXPECT_EQ(r.outputs(1).data(), Bytes(want.maps));
  EXPECT_EQ(r.model().name(), "region");
  EXPECT_EQ(r.model().version(), 1u);

  const proto::ListModelsResponse list = List();
  bool found = false;
  for (const proto::ModelInfo& m : list.models()) {
    if (m.name() != "region") continue;
    found = true;
    EXPECT_EQ(m.kind(), "ren");
    EXPECT_EQ(m.bytes(), info.bytes());
    EXPECT_EQ(m.tensors_size(), static_cast<int>(tensors.size()));
    EXPECT_EQ(m.tensors(1).name(), "w_p");
    EXPECT_EQ(m.tensors(1).shape_size(), 2);
  }
  EXPECT_TRUE(found);
  EXPECT_GE(list.used_bytes(), info.bytes());
  EXPECT_EQ(list.max_bytes(), int64_t{1} << 20);
  proto::UnloadModelResponse u;
  ASSERT_TRUE(Unload("region", &u).ok());
  EXPECT_EQ(u.freed_bytes(), info.bytes());
}

TEST_F(WorkerModelTest, SpotlightHashTrainedOverRpcEqualsTheInProcessRun) {
  const auto w0 = *ml::kernels::SpotlightHashWeights::Random(32, 8);
  proto::ModelInfo info;
  ASSERT_TRUE(Load(Header("hash", "spotlight.hash", {{"dim", 32}},
                          ml::worker::ModelTensors(ml::worker::ModelWeights(w0))),
                   &info)
                  .ok());
  ml::kernels::SpotlightLossOptions lo;
  lo.gamma = 8;
  lo.top_fraction = 0.1f;
  ml::kernels::AdamWOptions ao;
  ao.lr = 2e-2f;
  auto trainer = *ml::kernels::SpotlightTrainer::Create(w0, lo, ao);
  const Tensor q = RandomTensor({16, 32}, 1), k = RandomTensor({64, 32}, 2);
  std::vector<float> losses;
  for (int step = 1; step <= 8; ++step) {
    proto::KernelResponse r;
    const grpc::Status s = Run("spotlight.train_step", {EncodeFloat("q", q), EncodeFloat("k", k)},
                               {{"gamma", 8}, {"top_fraction", 0.1}, {"lr", 2e-2}}, "hash", &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(r.outputs_size(), 1);
    losses.push_back(ToFloatTensor(r.outputs(0))->data()[0]);
    EXPECT_EQ(losses.back(), static_cast<float>(*trainer.Step(q, k)));
    EXPECT_EQ(r.model().version(), 1u + step);
  }
  EXPECT_LT(losses.back(), losses.front());

  proto::ModelHeader back;
  ASSERT_TRUE(Read("hash", &back).ok());
  EXPECT_EQ(back.version(), 9u);
  ASSERT_EQ(back.tensors_size(), 4);
  const ml::kernels::SpotlightHashWeights& want = trainer.weights();
  EXPECT_EQ(back.tensors(0).data(), Bytes(want.w1));  // bit for bit
  EXPECT_EQ(back.tensors(1).data(), Bytes(want.b1));
  EXPECT_EQ(back.tensors(2).data(), Bytes(want.w2));
  EXPECT_EQ(back.tensors(3).data(), Bytes(want.b2));
  EXPECT_NE(back.tensors(0).data(), Bytes(w0.w1));
  const proto::ListModelsResponse listed = List();
  for (const proto::ModelInfo& m : listed.models()) {
    if (m.name() == "hash") {
      EXPECT_EQ(m.train_steps(), 8);
      EXPECT_EQ(m.optimizer_bytes(), 3 * info.bytes());  // AdamW state on the entry
      EXPECT_EQ(m.bytes(), 4 * info.bytes());
    }
  }

  // Unloaded: every use of the name is NOT_FOUND; the bytes are freed.
  proto::UnloadModelResponse u;
  ASSERT_TRUE(Unload("hash", &u).ok());
  EXPECT_EQ(u.freed_bytes(), 4 * info.bytes());
  proto::KernelResponse r;
  const grpc::Status gone =
      Run("spotlight.hash", {EncodeFloat("x", RandomTensor({2, 32}, 3))}, {}, "hash", &r);
  EXPECT_EQ(gone.error_code(), Code::NOT_FOUND);
  EXPECT_NE(gone.error_message().find("'hash'"), std::string::npos) << gone.error_message();
  EXPECT_EQ(Read("hash", &back).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Unload("hash", &u).error_code(), Code::NOT_FOUND);
  ExpectStillServing();
}

TEST_F(WorkerModelTest, MaskGeneratorDistilledOverRpc) {
  auto ref = *ml::kernels::search::MaskGeneratorWeights::Random(8, 6, 5);
  proto::ModelInfo info;
  ASSERT_TRUE(Load(Header("mask", "trajmamba.mask", {{"dim", 8}, {"hidden", 6}},
                          ml::worker::ModelTensors(ml::worker::ModelWeights(ref))),
                   &info)
                  .ok());
  const Tensor points = RandomTensor({20, 8}, 1), teacher = RandomTensor({8}, 2, 0.3f);
  std::vector<float> losses;
  for (int step = 0; step < 10; ++step) {
    proto::KernelResponse r;
    ASSERT_TRUE(Run("trajmamba.mask_train_step",
                    {EncodeFloat("points", points), EncodeFloat("teacher", teacher)},
                    {{"keep_ratio", 0.3}, {"lr", 0.5}}, "mask", &r)
                    .ok());
    losses.push_back(ToFloatTensor(r.outputs(0))->data()[0]);
    ASSERT_TRUE(ml::kernels::search::MaskSgdStep(&ref, points, teacher, {0.3, 1.0}, 0.5).ok());
  }
  EXPECT_LT(losses.back(), losses.front());
  proto::ModelHeader back;
  ASSERT_TRUE(Read("mask", &back).ok());
  EXPECT_EQ(back.tensors(0).data(), Bytes(ref.w1));
  EXPECT_EQ(back.tensors(2).data(), Bytes(ref.w2));
  proto::KernelResponse r;
  ASSERT_TRUE(Run("trajmamba.mask", {EncodeFloat("points", points)}, {}, "mask", &r).ok());
  EXPECT_EQ(r.outputs(0).data(), Bytes(*ml::kernels::search::MaskScores(ref, points)));
  proto::UnloadModelResponse u;
  EXPECT_TRUE(Unload("mask", &u).ok());
}

TEST_F(WorkerModelTest, BadModelsAreRefusedAndTheWorkerKeepsServing) {
  const int64_t used = List().used_bytes();
  // 2.4 MB declared against a 1 MiB budget: refused on the header.
  proto::ModelHeader big;
  big.set_name("big");
  big.set_kind("tensors");
  *big.add_tensors() = EncodeFloat("x", *Tensor::Zeros({600000}));
  proto::ModelInfo info;
  grpc::Status s = Load(big, &info);
  EXPECT_EQ(s.error_code(), Code::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("out of memory"), std::string::npos) << s.error_message();
  ExpectStillServing();

  auto hash = ml::worker::ModelTensors(
      ml::worker::ModelWeights(*ml::kernels::SpotlightHashWeights::Random(32, 1)));
  hash[0].value = RandomTensor({32, 31}, 1);  // w1
  s = Load(Header("h", "spotlight.hash", {{"dim", 32}}, hash), &info);
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'w1'"), std::string::npos) << s.error_message();
  hash[0].value = RandomTensor({32, 32}, 1);
  hash[2].value.mutable_data()[7] = std::numeric_limits<float>::quiet_NaN();
  s = Load(Header("h", "spotlight.hash", {{"dim", 32}}, hash), &info);
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("NaN"), std::string::npos) << s.error_message();
  proto::KernelResponse r;
  s = Run("spotlight.hash", {EncodeFloat("x", RandomTensor({2, 32}, 3))}, {}, "h", &r);
  EXPECT_EQ(s.error_code(), Code::NOT_FOUND);
  // Checkpoints only from inside the model directory.
  for (const std::string path : {"../mlp.ckpt", "/etc/passwd", "a/../../x", "escape.ckpt"}) {
    proto::ModelHeader h =
        Header("c", "mlp", {{"in", 4}, {"hidden_layers", 1}, {"hidden0", 8}, {"classes", 3}}, {});
    h.set_checkpoint_path(path);
    EXPECT_EQ(Load(h, &info).error_code(), Code::PERMISSION_DENIED) << path;
  }
  EXPECT_EQ(List().used_bytes(), used);
  ExpectStillServing();
}

// Issue 38 item 5: the header declares every tensor's size, and chunks
// that disagree with it are refused before any model is built.
TEST_F(WorkerModelTest, MalformedChunkSequencesLoadNothing) {
  const int64_t used = List().used_bytes();
  const proto::ModelHeader h = Header("chunks", "tensors", {}, {{"w", RandomTensor({64, 32}, 4)}});
  const std::vector<proto::WorkerModelChunk> good = ml::worker::SplitModel(h, kChunkBytes);
  ASSERT_GT(good.size(), 2u);
  std::vector<std::pair<std::string, std::vector<proto::WorkerModelChunk>>> bad;
  bad.push_back({"data past the declared", good});
  bad.back().second.push_back(good.back());
  bad.push_back({"ended inside model tensor 0", good});
  bad.back().second.pop_back();
  bad.push_back({"names model tensor 3", good});
  bad.back().second[1].set_tensor_index(3);
  bad.push_back({"rank 9 > 8", good});
  for (int i = 0; i < 7; ++i)
    bad.back().second[0].mutable_header()->mutable_tensors(0)->add_shape(1);
  bad.push_back({"must be float32 or float64", good});
  bad.back().second[0].mutable_header()->mutable_tensors(0)->set_dtype(proto::DTYPE_INT32);
  for (const auto& [what, chunks] : bad) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::ModelInfo info;
    auto writer = stub_->LoadModel(&ctx, &info);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;  // the worker answered early
    }
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << what;
    EXPECT_NE(s.error_message().find(what), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(List().used_bytes(), used);
  proto::ModelInfo info;
  ASSERT_TRUE(Load(h, &info).ok());
  proto::ModelHeader back;
  ASSERT_TRUE(Read("chunks", &back).ok());
  EXPECT_EQ(back.tensors(0).data(), h.tensors(0).data());
  proto::UnloadModelResponse u;
  EXPECT_TRUE(Unload("chunks", &u).ok());
  ExpectStillServing();
}

TEST_F(WorkerModelTest, CheckpointFromTheModelDirectory) {
  proto::ModelHeader h =
      Header("fed", "mlp", {{"in", 4}, {"hidden_layers", 1}, {"hidden0", 8}, {"classes", 3}}, {});
  h.set_checkpoint_path("mlp.ckpt");
  proto::ModelInfo info;
  const grpc::Status s = Load(h, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.bytes(), (4 * 8 + 8 + 8 * 3 + 3) * 4);
  auto mlp = *ml::MakeMlp(4, {8}, 3);
  mlp->InitFromSeed(17);
  const ml::worker::TensorSet want = ml::worker::ZooModelTensors(*mlp);
  proto::ModelHeader back;
  ASSERT_TRUE(Read("fed", &back).ok());
  ASSERT_EQ(back.tensors_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(back.tensors(static_cast<int>(i)).name(), want[i].name);
    EXPECT_EQ(back.tensors(static_cast<int>(i)).data(), Bytes(want[i].value));
  }
  h.set_checkpoint_path("missing.ckpt");
  h.set_name("missing");
  EXPECT_EQ(Load(h, &info).error_code(), Code::NOT_FOUND);
  proto::UnloadModelResponse u;
  EXPECT_TRUE(Unload("fed", &u).ok());
}

}  // namespace
}  // namespace tandem
