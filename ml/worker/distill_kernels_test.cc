#include "ml/worker/distill_kernels.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/distill/gld.h"
#include "ml/kernels/distill/hdd.h"
#include "ml/kernels/distill/sled.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::ml::kernels::Tensor;
using ::tandem::ml::kernels::testing::MaxAbsDiff;
using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;
namespace ds = ::tandem::ml::kernels::distill;

class DistillKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterDistillKernels(&registry_).ok()); }

  // Validates and runs a request; the outputs as proto tensors.
  absl::StatusOr<std::vector<proto::Tensor>> Run(const std::string& kernel,
                                                 std::vector<proto::Tensor> inputs,
                                                 std::map<std::string, double> params = {}) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    for (proto::Tensor& t : inputs) *req.add_inputs() = std::move(t);
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    return registry_.Run(req);
  }

  static Tensor F(const proto::Tensor& t) { return *ToFloatTensor(t); }
  static double Scalar(const proto::Tensor& t) { return F(t).data()[0]; }

  KernelRegistry registry_;
};

TEST_F(DistillKernelsTest, RegistersEveryKernelOnce) {
  const auto infos = registry_.Describe();
  std::vector<std::string> names;
  for (const auto& i : infos) names.push_back(i.name());
  EXPECT_EQ(names, (std::vector<std::string>{"gld.graph", "gld.loss", "hdd.distill_step", "hdd.expmap0",
                                             "hdd.logmap0", "hdd.loss", "sdpgo.feature_weights",
                                             "sdpgo.step", "sled.energy_loss"}));
  EXPECT_THAT(RegisterDistillKernels(&registry_), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DistillKernelsTest, HddMapsRoundTripAndLossMatchesTheLibrary) {
  const Tensor f = RandomTensor({5, 7}, 1, 0.5f);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto x, Run("hdd.expmap0", {EncodeFloat("features", f)}, {{"k", 2.4}}));
  ASSERT_EQ(F(x[0]).shape(), (std::vector<int64_t>{5, 8}));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto back, Run("hdd.logmap0", {x[0]}, {{"k", 2.4}}));
  EXPECT_LT(MaxAbsDiff(F(back[0]), f), 1e-5);

  const Tensor real = RandomTensor({20, 7}, 2), syn = RandomTensor({4, 7}, 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, Run("hdd.loss", {EncodeFloat("real", real), EncodeFloat("synthetic", syn)},
                                          {{"k", 2.4}, {"lambda", 100}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(ds::HddLossResult want, ds::HddCentroidLoss(real, syn, {.k = 2.4, .lambda = 100}));
  EXPECT_FLOAT_EQ(Scalar(l[0]), static_cast<float>(want.loss));
  EXPECT_FLOAT_EQ(Scalar(l[1]), static_cast<float>(want.distance));
  EXPECT_EQ(MaxAbsDiff(F(l[2]), want.grad_synthetic), 0.0);
}

TEST_F(DistillKernelsTest, HddDistillStepSumsClassLossesAndCapsTheEmbedding) {
  const Tensor real = RandomTensor({2, 10, 6}, 4), syn = RandomTensor({2, 3, 6}, 5);
  const Tensor vel = *Tensor::Zeros({2, 3, 6});
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Run("hdd.distill_step", {EncodeFloat("r", real), EncodeFloat("s", syn),
                                                               EncodeFloat("v", vel)},
                                          {{"lr", 0.1}}));
  double sum = 0;
  for (int64_t c = 0; c < 2; ++c) {
    auto slice = [&](const Tensor& t, int64_t n) {
      return *Tensor::FromData({n, 6}, std::vector<float>(t.data().begin() + c * n * 6,
                                                          t.data().begin() + (c + 1) * n * 6));
    };
    sum += ds::HddCentroidLoss(slice(real, 10), slice(syn, 3), {})->loss;
  }
  EXPECT_NEAR(Scalar(r[0]), sum, 1e-4 * sum);
  EXPECT_EQ(F(r[1]).shape(), syn.shape());
  // A 2048 x 65536 embedding would need 1.3e8 floats of scratch.
  const Tensor wide = RandomTensor({1, 1, 2048}, 6);
  EXPECT_THAT(Run("hdd.distill_step", {EncodeFloat("r", wide), EncodeFloat("s", wide), EncodeFloat("v", wide)},
                  {{"embed_dim", 65536}}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("request too large")));
}

TEST_F(DistillKernelsTest, GldGraphAndLoss) {
  const Tensor t = RandomTensor({6, 30}, 7, 2.0f), s = RandomTensor({6, 30}, 8, 2.0f);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto g, Run("gld.graph", {EncodeFloat("logits", t)}, {{"top_k", 3}}));
  ASSERT_EQ(g[0].dtype(), proto::DTYPE_INT64);
  const int64_t n = g[0].shape(0);
  std::vector<int64_t> nodes(static_cast<size_t>(n));
  std::memcpy(nodes.data(), g[0].data().data(), nodes.size() * sizeof(int64_t));
  TANDEM_ASSERT_OK_AND_ASSIGN(ds::CoActivationGraph want, ds::BuildCoActivationGraph(t, {.top_k = 3}));
  EXPECT_EQ(nodes, want.nodes);
  EXPECT_EQ(F(g[1]).shape(), (std::vector<int64_t>{n, n}));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto l, Run("gld.loss", {EncodeFloat("t", t), EncodeFloat("s", s)},
                                          {{"top_k", 3}, {"temperature", 2}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(ds::GldLossResult wl, ds::GldLoss(t, s, {.top_k = 3, .temperature = 2}));
  EXPECT_FLOAT_EQ(Scalar(l[0]), static_cast<float>(wl.loss));
  EXPECT_EQ(MaxAbsDiff(F(l[1]), wl.grad_student), 0.0);
  EXPECT_THAT(Run("gld.loss", {EncodeFloat("t", t), EncodeFloat("s", s)}, {{"top_k", 31}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DistillKernelsTest, SdpgoStepTakesInt64Labels) {
  const Tensor z = RandomTensor({3, 5}, 9), f = RandomTensor({3, 4}, 10);
  Tensor q = *Tensor::Zeros({3, 5});
  for (float& v : q.mutable_data()) v = 0.2f;
  auto inputs = [&](std::vector<int64_t> labels) {
    return std::vector<proto::Tensor>{EncodeFloat("z", z), EncodeInt64("y", {3}, labels), EncodeFloat("f", f),
                                      EncodeFloat("g", f), EncodeFloat("fp", *Tensor::Zeros({3, 4})),
                                      EncodeFloat("q", q)};
  };
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Run("sdpgo.step", inputs({0, 4, 2}), {{"lambda", 0.1}}));
  const Tensor terms = F(r[1]);
  EXPECT_NEAR(Scalar(r[0]), terms.data()[0] + 9.0 * terms.data()[1] + terms.data()[2], 1e-4);
  EXPECT_EQ(F(r[5]).shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_THAT(Run("sdpgo.step", inputs({0, 5, 2})), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Run("sdpgo.step", inputs({0, 1, 2}), {{"temperature", 0}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto w, Run("sdpgo.feature_weights", {EncodeFloat("g", f)}));
  EXPECT_EQ(F(w[0]).shape(), f.shape());
}

TEST_F(DistillKernelsTest, SledEnergyLossMatchesTheLibrary) {
  const Tensor s = RandomTensor({4, 3, 8}, 11), y = RandomTensor({4, 8}, 12);
  const Tensor mask = *Tensor::FromData({4}, {1, 1, 0, 1});
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, Run("sled.energy_loss", {EncodeFloat("s", s), EncodeFloat("y", y),
                                                               EncodeFloat("m", mask)},
                                          {{"beta", 1.5}}));
  TANDEM_ASSERT_OK_AND_ASSIGN(ds::EnergyLossResult want, ds::EnergyDistanceLoss(s, y, mask, {.beta = 1.5}));
  EXPECT_FLOAT_EQ(Scalar(r[0]), static_cast<float>(want.loss));
  EXPECT_EQ(MaxAbsDiff(F(r[1]), want.grad_samples), 0.0);
  EXPECT_THAT(Run("sled.energy_loss", {EncodeFloat("s", s), EncodeFloat("y", y), EncodeFloat("m", mask)},
                  {{"beta", 2.5}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Run("sled.energy_loss", {EncodeFloat("s", RandomTensor({4, 1, 8}, 1)), EncodeFloat("y", y),
                                       EncodeFloat("m", mask)}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::worker
