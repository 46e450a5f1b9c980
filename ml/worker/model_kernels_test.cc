// Kernels reading and training loaded models, in process (KernelRegistry +
// ModelStore), against the ml/ library called directly with the same
// weights.
#include "ml/worker/model_kernels.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/kernels/distill/hdd.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/model_store.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using kernels::testing::RandomTensor;
using ::testing::HasSubstr;

bool Same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data().begin(), a.data().end(), b.data().begin());
}

class ModelKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterBuiltinKernels(&registry_).ok()); }

  static proto::KernelRequest Request(const std::string& kernel, std::vector<proto::Tensor> in,
                                      const std::map<std::string, double>& params,
                                      const std::string& model = "") {
    proto::KernelRequest r;
    r.set_kernel(kernel);
    for (proto::Tensor& t : in) *r.add_inputs() = std::move(t);
    for (const auto& [k, v] : params) (*r.mutable_params())[k] = v;
    if (!model.empty()) r.mutable_model()->set_name(model);
    return r;
  }
  absl::StatusOr<std::vector<proto::Tensor>> Run(const proto::KernelRequest& r) {
    return registry_.Run(r, &store_);
  }
  uint64_t Version(const std::string& name) {
    for (const ModelSummary& s : store_.List()) {
      if (s.name == name) return s.version;
    }
    return 0;
  }

  KernelRegistry registry_;
  ModelStore store_{int64_t{16} << 20};
};

TEST_F(ModelKernelsTest, RenForwardUsesTheLoadedWeights) {
  const auto w = *kernels::RenWeights::Random(16, 2, 2, 11);
  ASSERT_TRUE(store_
                  .Load("ren", 0, "ren", {{"dim", 16}, {"heads", 2}, {"layers", 2}},
                        ModelTensors(ModelWeights(w)), false)
                  .ok());
  const Tensor f = RandomTensor({16, 4, 4}, 1);
  const Tensor p = *Tensor::FromData({2, 2}, {3, 4, 50, 20});
  // heads / layers / weight_seed params are ignored with a model.
  auto out = Run(Request("ren.forward", {EncodeFloat("features", f), EncodeFloat("points", p)},
                         {{"image_size", 56}, {"heads", 8}, {"weight_seed", 3}}, "ren"));
  ASSERT_TRUE(out.ok()) << out.status();
  const kernels::RenOutput want = *kernels::RenForward(f, p, 56, w);
  EXPECT_TRUE(Same(*ToFloatTensor((*out)[0]), want.tokens));
  EXPECT_TRUE(Same(*ToFloatTensor((*out)[1]), want.maps));
  // Without the model: seeded weights, other values.
  auto seeded = Run(Request("ren.forward", {EncodeFloat("features", f), EncodeFloat("points", p)},
                            {{"image_size", 56}, {"heads", 2}, {"layers", 2}}));
  ASSERT_TRUE(seeded.ok());
  EXPECT_FALSE(Same(*ToFloatTensor((*seeded)[0]), want.tokens));
  // Features of another width: the kernel's shape error.
  EXPECT_EQ(
      Run(Request("ren.forward",
                  {EncodeFloat("features", RandomTensor({8, 4, 4}, 2)), EncodeFloat("points", p)},
                  {}, "ren"))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelKernelsTest, ModelReferenceErrors) {
  ASSERT_TRUE(
      store_
          .Load("mask", 0, "trajmamba.mask", {{"dim", 4}, {"hidden", 3}},
                ModelTensors(ModelWeights(*kernels::search::MaskGeneratorWeights::Random(4, 3, 1))),
                false)
          .ok());
  const proto::Tensor x = EncodeFloat("x", RandomTensor({2, 3}, 1));
  absl::Status s = Run(Request("ren.merge", {x}, {}, "mask")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("takes no model"));
  s = Run(Request("ren.forward", {EncodeFloat("features", RandomTensor({4, 2, 2}, 3)), x}, {},
                  "mask"))
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is of kind trajmamba.mask"));
  s = Run(Request("trajmamba.mask", {x}, {}, "gone")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'gone'"));
  proto::KernelRequest old = Request("trajmamba.mask", {x}, {}, "mask");
  old.mutable_model()->set_version(9);
  EXPECT_EQ(Run(old).status().code(), absl::StatusCode::kFailedPrecondition);
  // Points of width 3 for a generator of width 4.
  EXPECT_EQ(Run(Request("trajmamba.mask", {x}, {}, "mask")).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The weight inputs are not sent with a model.
  s = Run(Request("spotlight.hash", {x, x, x, x, x}, {}, "mask")).status();
  EXPECT_THAT(s.message(), HasSubstr("takes 1 inputs with a model"));
  // Without a store, a model reference cannot be served.
  EXPECT_EQ(registry_.Run(Request("trajmamba.mask", {x}, {}, "mask")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ModelKernelsTest, SpotlightTrainStepMatchesTheTrainerBitForBit) {
  const auto w0 = *kernels::SpotlightHashWeights::Random(32, 4);
  ASSERT_TRUE(
      store_.Load("hash", 0, "spotlight.hash", {{"dim", 32}}, ModelTensors(ModelWeights(w0)), false)
          .ok());
  kernels::SpotlightLossOptions lo;
  lo.gamma = 8;
  lo.top_fraction = 0.1f;
  kernels::AdamWOptions ao;
  ao.lr = 1e-2f;
  auto trainer = *kernels::SpotlightTrainer::Create(w0, lo, ao);
  const std::map<std::string, double> params = {{"gamma", 8}, {"top_fraction", 0.1}, {"lr", 1e-2}};
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    const Tensor q = RandomTensor({8, 32}, 100 + step), k = RandomTensor({48, 32}, 200 + step);
    auto out = Run(Request("spotlight.train_step", {EncodeFloat("q", q), EncodeFloat("k", k)},
                           params, "hash"));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);  // the weights stay in the model
    const double want = *trainer.Step(q, k);
    losses.push_back(ToFloatTensor((*out)[0])->data()[0]);
    EXPECT_EQ(losses.back(), static_cast<float>(want));
  }
  EXPECT_EQ(Version("hash"), 5u);
  absl::StatusOr<ModelSnapshot> snap = store_.Read("hash", 5);
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(Same(snap->tensors[0].value, trainer.weights().w1));
  EXPECT_TRUE(Same(snap->tensors[3].value, trainer.weights().b2));
  EXPECT_FALSE(Same(snap->tensors[0].value, w0.w1));
  EXPECT_EQ(snap->summary.optimizer_bytes, 3 * snap->summary.bytes / 4);
  // The hash kernel now answers with the trained weights.
  const Tensor x = RandomTensor({5, 32}, 9);
  auto h = Run(Request("spotlight.hash", {EncodeFloat("x", x)}, {}, "hash"));
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(Same(*ToFloatTensor((*h)[0]), *kernels::SpotlightHash(x, trainer.weights())));
  // Other optimizer params would silently reset the moments: refused.
  auto other = params;
  other["lr"] = 0.5;
  EXPECT_EQ(Run(Request("spotlight.train_step",
                        {EncodeFloat("q", RandomTensor({8, 32}, 1)),
                         EncodeFloat("k", RandomTensor({48, 32}, 2))},
                        other, "hash"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Version("hash"), 5u);
}

TEST_F(ModelKernelsTest, MaskDistillationTrainsTheModelInPlace) {
  const auto w0 = *kernels::search::MaskGeneratorWeights::Random(8, 6, 5);
  ASSERT_TRUE(store_
                  .Load("mask", 0, "trajmamba.mask", {{"dim", 8}, {"hidden", 6}},
                        ModelTensors(ModelWeights(w0)), false)
                  .ok());
  const Tensor points = RandomTensor({20, 8}, 1), teacher = RandomTensor({8}, 2, 0.3f);
  kernels::search::MaskGeneratorWeights ref = w0;
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    auto out = Run(Request("trajmamba.mask_train_step",
                           {EncodeFloat("points", points), EncodeFloat("teacher", teacher)},
                           {{"keep_ratio", 0.3}, {"lr", 0.5}}, "mask"));
    ASSERT_TRUE(out.ok()) << out.status();
    losses.push_back(ToFloatTensor((*out)[0])->data()[0]);
    const double want = *kernels::search::MaskSgdStep(&ref, points, teacher, {0.3, 1.0}, 0.5);
    EXPECT_EQ(losses.back(), static_cast<float>(want));
  }
  EXPECT_LT(losses.back(), losses.front());
  absl::StatusOr<ModelSnapshot> snap = store_.Read("mask", 21);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(Same(snap->tensors[0].value, ref.w1));
  EXPECT_TRUE(Same(snap->tensors[2].value, ref.w2));
  // The mask kernel reads the trained generator.
  auto scores = Run(Request("trajmamba.mask", {EncodeFloat("points", points)}, {}, "mask"));
  ASSERT_TRUE(scores.ok());
  EXPECT_TRUE(Same(*ToFloatTensor((*scores)[0]), *kernels::search::MaskScores(ref, points)));
}

TEST_F(ModelKernelsTest, HddDistillStepUpdatesATensorsModel) {
  const Tensor real = RandomTensor({2, 10, 4}, 1), syn = RandomTensor({2, 3, 4}, 2),
               vel = *Tensor::Zeros({2, 3, 4});
  ASSERT_TRUE(
      store_.Load("synthetic", 0, "tensors", {}, {{"synthetic", syn}, {"velocity", vel}}, false)
          .ok());
  // The same step without a model: the reference.
  auto want = Run(Request(
      "hdd.distill_step",
      {EncodeFloat("real", real), EncodeFloat("synthetic", syn), EncodeFloat("velocity", vel)},
      {{"lr", 0.5}}));
  ASSERT_TRUE(want.ok()) << want.status();
  auto got =
      Run(Request("hdd.distill_step", {EncodeFloat("real", real)}, {{"lr", 0.5}}, "synthetic"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);  // loss only
  EXPECT_EQ((*got)[0].data(), (*want)[0].data());
  absl::StatusOr<ModelSnapshot> snap = store_.Read("synthetic", 2);
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(Same(snap->tensors[0].value, *ToFloatTensor((*want)[1])));
  EXPECT_TRUE(Same(snap->tensors[1].value, *ToFloatTensor((*want)[2])));
  // A tensors model without the named tensors.
  ASSERT_TRUE(store_.Load("other", 0, "tensors", {}, {{"x", syn}}, false).ok());
  EXPECT_THAT(
      Run(Request("hdd.distill_step", {EncodeFloat("real", real)}, {}, "other")).status().message(),
      HasSubstr("needs a float32 tensor 'synthetic'"));
}

// SDPGO's history q lives in a model; each step replaces it with q_next.
TEST_F(ModelKernelsTest, SdpgoStepRefinesTheHistoryInPlace) {
  const Tensor q0 = *Tensor::FromData({3, 5}, std::vector<float>(15, 0.2f));
  ASSERT_TRUE(store_.Load("history", 0, "tensors", {}, {{"q_hist", q0}}, false).ok());
  const std::vector<proto::Tensor> batch = {EncodeFloat("logits", RandomTensor({3, 5}, 50)),
                                            EncodeInt64("labels", {3}, {0, 4, 2}),
                                            EncodeFloat("features", RandomTensor({3, 4}, 51)),
                                            EncodeFloat("feature_grad", RandomTensor({3, 4}, 52)),
                                            EncodeFloat("prev_features", RandomTensor({3, 4}, 53))};
  const std::map<std::string, double> p = {{"lambda", 0.1}, {"temperature", 2}};
  Tensor q = q0;
  for (int step = 0; step < 3; ++step) {
    std::vector<proto::Tensor> in = batch;
    in.push_back(EncodeFloat("q_hist", q));
    auto want = Run(Request("sdpgo.step", in, p));
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = Run(Request("sdpgo.step", batch, p, "history"));
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 5u);  // q_next went into the model
    EXPECT_EQ((*got)[0].data(), (*want)[0].data());
    q = *ToFloatTensor((*want)[5]);
  }
  absl::StatusOr<ModelSnapshot> snap = store_.Read("history", 4);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(Same(snap->tensors[0].value, q));
  EXPECT_FALSE(Same(q, q0));
}

TEST_F(ModelKernelsTest, CrossSpectraReadsItsCoefficientsFromAModel) {
  const Tensor coeffs = RandomTensor({2, 6}, 4);
  ASSERT_TRUE(store_.Load("adapter", 0, "tensors", {}, {{"coefficients", coeffs}}, false).ok());
  const std::map<std::string, double> p = {
      {"layers", 3}, {"d_out", 4}, {"d_in", 5}, {"location_seed", 9}};
  auto want = Run(Request("crossspectra.forward", {EncodeFloat("coefficients", coeffs)}, p));
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = Run(Request("crossspectra.forward", {}, p, "adapter"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].data(), (*want)[0].data());
  EXPECT_EQ((*got)[1].data(), (*want)[1].data());
  EXPECT_EQ(Version("adapter"), 1u);  // read only
}

// The federation's CNN as a "cnn" model: eco.extract reads its flat
// parameters, eco.insert writes a learngene into it in place.
TEST_F(ModelKernelsTest, EcoKernelsUseACnnModel) {
  auto cnn = *MakeCnn({1, 8, 8}, 3, {.conv1_channels = 4, .conv2_channels = 6, .hidden = 8});
  cnn->InitFromSeed(3);
  const ModelConfig config = {{"channels", 1}, {"height", 8}, {"width", 8}, {"classes", 3},
                              {"conv1", 4},    {"conv2", 6},  {"hidden", 8}};
  ASSERT_TRUE(store_.Load("fed", 0, "cnn", config, ZooModelTensors(*cnn), false).ok());
  std::map<std::string, double> arch(config.begin(), config.end());
  const std::vector<float> flat = cnn->Flatten();
  const Tensor weights = *Tensor::FromData({static_cast<int64_t>(flat.size())}, flat);
  auto want = Run(Request("eco.extract", {EncodeFloat("weights", weights)}, arch));
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = Run(Request("eco.extract", {}, arch, "fed"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) EXPECT_EQ((*got)[i].data(), (*want)[i].data());

  const proto::Tensor masks = (*want)[0], gene = (*want)[1];
  ASSERT_TRUE(store_.Load("fed", 0, "cnn", config, ZooModelTensors(*cnn), true).ok());
  auto inserted = Run(Request("eco.insert", {EncodeFloat("weights", weights), masks, gene}, arch));
  ASSERT_TRUE(inserted.ok()) << inserted.status();
  auto in_place = Run(Request("eco.insert", {masks, gene}, arch, "fed"));
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_TRUE(in_place->empty());  // the weights stay in the model
  EXPECT_EQ(Version("fed"), 3u);   // reloaded as 2, one step
  absl::StatusOr<ModelSnapshot> snap = store_.Read("fed", 0);
  ASSERT_TRUE(snap.ok());
  std::vector<float> back;
  for (const NamedTensor& t : snap->tensors) {
    back.insert(back.end(), t.value.data().begin(), t.value.data().end());
  }
  EXPECT_TRUE(Same(*Tensor::FromData({static_cast<int64_t>(back.size())}, back),
                   *ToFloatTensor((*inserted)[0])));
  // Arch params of another network: the parameter count does not match.
  arch["hidden"] = 9;
  EXPECT_EQ(Run(Request("eco.extract", {}, arch, "fed")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::ml::worker
