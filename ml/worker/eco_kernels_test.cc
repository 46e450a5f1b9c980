#include "ml/worker/eco_kernels.h"

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/eco/genetic_transfer.h"
#include "ml/eco/learngene.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::ml::kernels::Tensor;
using ::tandem::testing::StatusIs;

// MakeCnn(1x8x8, 3 classes, {4, 6, 8}): 489 parameters.
const std::map<std::string, double> kArch = {{"channels", 1}, {"height", 8}, {"width", 8},
                                             {"classes", 3},  {"conv1", 4},  {"conv2", 6},
                                             {"hidden", 8}};

class EcoKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(RegisterEcoKernels(&registry_).ok());
    model_ = *MakeCnn({1, 8, 8}, 3, {4, 6, 8});
    model_->InitFromSeed(7);
    layout_ = *eco::CnnGeneLayout(*model_);
  }

  absl::StatusOr<std::vector<proto::Tensor>> Run(const std::string& kernel,
                                                 std::vector<proto::Tensor> inputs,
                                                 std::map<std::string, double> params = {}) {
    proto::KernelRequest req;
    req.set_kernel(kernel);
    for (proto::Tensor& t : inputs) *req.add_inputs() = std::move(t);
    for (const auto& [k, v] : kArch) (*req.mutable_params())[k] = v;
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    return registry_.Run(req);
  }

  static proto::Tensor Flat(const char* name, std::vector<float> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return EncodeFloat(name, *Tensor::FromData({n}, std::move(v)));
  }
  static std::vector<float> Values(const proto::Tensor& t) {
    const Tensor f = *ToFloatTensor(t);
    return std::vector<float>(f.data().begin(), f.data().end());
  }
  static proto::Tensor MaskBytes(const std::vector<std::vector<bool>>& masks) {
    std::string b;
    for (const auto& m : masks)
      for (bool x : m) b.push_back(x ? 1 : 0);
    const int64_t n = static_cast<int64_t>(b.size());
    return EncodeBytes("masks", {n}, b);
  }
  static std::vector<float> Concat(const eco::Learngene& g) {
    std::vector<float> out;
    for (const auto& w : g.weights) out.insert(out.end(), w.begin(), w.end());
    return out;
  }

  KernelRegistry registry_;
  std::unique_ptr<Model> model_;
  eco::GeneLayout layout_;
};

TEST_F(EcoKernelsTest, RegistersOnceAndRejectsDuplicates) {
  EXPECT_NE(registry_.Find("eco.extract"), nullptr);
  EXPECT_NE(registry_.Find("eco.insert"), nullptr);
  EXPECT_NE(registry_.Find("eco.generate_step"), nullptr);
  EXPECT_THAT(RegisterEcoKernels(&registry_), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(EcoKernelsTest, ExtractMatchesLibrary) {
  auto out = Run("eco.extract", {Flat("weights", model_->Flatten())}, {{"keep_fraction", 0.5}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  auto masks = *eco::SelectCircuit(*model_, layout_, 0.5);
  const eco::Learngene want = *eco::ExtractLearngene(*model_, layout_, masks);
  EXPECT_EQ((*out)[0].data(), MaskBytes(want.masks).data());
  EXPECT_EQ(Values((*out)[1]), Concat(want));
  EXPECT_FLOAT_EQ(Values((*out)[2])[0],
                  static_cast<float>(want.num_params()) / static_cast<float>(model_->num_params()));
}

TEST_F(EcoKernelsTest, InsertMatchesLibrary) {
  auto masks = *eco::SelectCircuit(*model_, layout_, 0.5);
  const eco::Learngene gene = *eco::ExtractLearngene(*model_, layout_, masks);
  std::unique_ptr<Model> fresh = *MakeCnn({1, 8, 8}, 3, {4, 6, 8});
  fresh->InitFromSeed(11);
  auto out = Run("eco.insert",
                 {Flat("weights", fresh->Flatten()), MaskBytes(masks), Flat("gene", Concat(gene))});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(eco::InsertLearngene(gene, layout_, fresh.get()).ok());
  EXPECT_EQ(Values((*out)[0]), fresh->Flatten());
  EXPECT_TRUE(eco::IsCircuit(*fresh, layout_, masks));
}

TEST_F(EcoKernelsTest, GenerateStepMatchesSeededLibraryMutation) {
  auto masks = *eco::SelectCircuit(*model_, layout_, 0.5);
  const eco::Learngene gene = *eco::ExtractLearngene(*model_, layout_, masks);
  auto out = Run("eco.generate_step", {MaskBytes(masks), Flat("gene", Concat(gene))},
                 {{"rate", 0.5}, {"seed", 3}});
  ASSERT_TRUE(out.ok()) << out.status();
  std::unique_ptr<Model> carrier = *MakeCnn({1, 8, 8}, 3, {4, 6, 8});
  std::mt19937_64 gen(3);
  const eco::Learngene want = *eco::MutateLearngene(gene, layout_, *carrier, 0.5, gen);
  EXPECT_EQ((*out)[0].data(), MaskBytes(want.masks).data());
  EXPECT_EQ(Values((*out)[1]), Concat(want));
  EXPECT_NE((*out)[0].data(), MaskBytes(masks).data());  // rate 0.5 swaps units
  // Rate 0 returns the learngene unchanged.
  auto same =
      Run("eco.generate_step", {MaskBytes(masks), Flat("gene", Concat(gene))}, {{"rate", 0}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(Values((*same)[1]), Concat(gene));
}

TEST_F(EcoKernelsTest, RejectsBadInputs) {
  const auto code = absl::StatusCode::kInvalidArgument;
  std::vector<float> w = model_->Flatten();
  w.pop_back();
  EXPECT_THAT(Run("eco.extract", {Flat("weights", w)}), StatusIs(code));
  EXPECT_THAT(Run("eco.extract", {Flat("weights", model_->Flatten())}, {{"keep_fraction", 0}}),
              StatusIs(code));
  EXPECT_THAT(Run("eco.extract", {Flat("weights", model_->Flatten())}, {{"height", 3}}),
              StatusIs(code));
  // An architecture too large to build is refused before allocating.
  EXPECT_THAT(Run("eco.extract", {Flat("weights", model_->Flatten())},
                  {{"height", 1024}, {"width", 1024}, {"conv2", 4096}, {"hidden", 4096}}),
              StatusIs(code));
  auto masks = *eco::SelectCircuit(*model_, layout_, 0.5);
  const eco::Learngene gene = *eco::ExtractLearngene(*model_, layout_, masks);
  const proto::Tensor g = Flat("gene", Concat(gene));
  proto::Tensor two = MaskBytes(masks);
  (*two.mutable_data())[0] = 2;
  EXPECT_THAT(Run("eco.generate_step", {two, g}), StatusIs(code));
  auto empty_layer = masks;
  empty_layer[0].assign(4, false);
  EXPECT_THAT(Run("eco.generate_step", {MaskBytes(empty_layer), g}), StatusIs(code));
  EXPECT_THAT(Run("eco.generate_step", {EncodeBytes("masks", {3}, std::string(3, 1)), g}),
              StatusIs(code));
  std::vector<float> short_gene = Concat(gene);
  short_gene.pop_back();
  EXPECT_THAT(Run("eco.insert",
                  {Flat("weights", model_->Flatten()), MaskBytes(masks), Flat("gene", short_gene)}),
              StatusIs(code));
  EXPECT_THAT(Run("eco.generate_step", {MaskBytes(masks), g}, {{"rate", 1.5}}), StatusIs(code));
  EXPECT_THAT(Run("eco.generate_step", {MaskBytes(masks), g}, {{"seed", 0.5}}), StatusIs(code));
  // Registry-level: float weights given as int32.
  proto::Tensor wrong = Flat("weights", model_->Flatten());
  wrong.set_dtype(proto::DTYPE_INT32);
  EXPECT_THAT(Run("eco.extract", {wrong}), StatusIs(code));
}

}  // namespace
}  // namespace tandem::ml::worker
