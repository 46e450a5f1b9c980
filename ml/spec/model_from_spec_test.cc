#include "ml/spec/model_from_spec.h"

#include <functional>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

proto::LayerSpec L(const std::string& kind, int64_t units = 0, int64_t kernel = 0,
                   int64_t stride = 0, int64_t padding = 0) {
  proto::LayerSpec l;
  l.set_kind(kind);
  l.set_units(units);
  l.set_kernel(kernel);
  l.set_stride(stride);
  l.set_padding(padding);
  return l;
}

// digits-shaped: 1 x 8 x 8 images, 10 classes.
proto::ModelSpec Cnn() {
  proto::ModelSpec s;
  s.set_input_dim(64);
  s.set_num_classes(10);
  for (int64_t d : {1, 8, 8}) s.add_input_shape(d);
  for (const proto::LayerSpec& l : {L("conv2d", 4, 3, 1, 1), L("relu"), L("max_pool"), L("flatten"),
                                    L("dense", 16), L("layer_norm"), L("gelu"), L("dense", 10)}) {
    *s.add_layers() = l;
  }
  return s;
}

TEST(ModelFromSpec, BuildsTheLayerListWithItsShapesAndNames) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto m, ModelFromSpec(Cnn()));
  // conv 4x(1*9)+4, dense (4*4*4)x16+16, layer norm 2x16, out 16x10+10.
  EXPECT_EQ(m->num_params(), 4 * 9 + 4 + 64 * 16 + 16 + 2 * 16 + 16 * 10 + 10);
  TANDEM_ASSERT_OK_AND_ASSIGN(const int64_t n, NativeParamCount(Cnn()));
  EXPECT_EQ(n, m->num_params());
  std::vector<std::string> names;
  for (const ParamInfo& p : m->param_infos()) names.push_back(p.name);
  EXPECT_EQ(names.front(), "conv2d1.weight");
  EXPECT_EQ(names.back(), "out.bias");
  // It trains: a forward pass gives 10 logits per example.
  m->InitFromSeed(3);
  Matrix x = Matrix::Random(5, 64);
  TANDEM_ASSERT_OK_AND_ASSIGN(const Matrix logits, m->Predict(x));
  EXPECT_EQ(logits.rows(), 5);
  EXPECT_EQ(logits.cols(), 10);
}

TEST(ModelFromSpec, TheMlpIsTheZoosMlp) {
  proto::ModelSpec s;
  s.set_input_dim(64);
  s.add_hidden(32);
  s.set_num_classes(10);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto a, ModelFromSpec(s));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto b, MakeMlp(64, {32}, 10));
  a->InitFromSeed(9);
  b->InitFromSeed(9);
  EXPECT_EQ(a->Flatten(), b->Flatten());
}

TEST(ModelFromSpec, RefusesSpecsThatDoNotChainNamingTheLayer) {
  struct Case {
    std::function<void(proto::ModelSpec*)> edit;
    std::string want;
  };
  const std::vector<Case> cases = {
      {[](proto::ModelSpec* s) { s->mutable_layers(0)->set_kind("conv3d"); },
       "model.layers[0] (conv3d): unknown kind"},
      {[](proto::ModelSpec* s) { s->mutable_layers()->DeleteSubrange(3, 1); },
       "model.layers[3] (dense): needs flat features"},
      {[](proto::ModelSpec* s) { s->mutable_layers(7)->set_units(9); },
       "must be the num_classes (10) logits"},
      {[](proto::ModelSpec* s) { s->mutable_layers(0)->set_kernel(11); },
       "model.layers[0] (conv2d)"},
      {[](proto::ModelSpec* s) { s->mutable_layers(0)->set_units(0); },
       "model.layers[0] (conv2d): units"},
      {[](proto::ModelSpec* s) { s->set_input_dim(65); }, "model.input_dim"},
      {[](proto::ModelSpec* s) { s->clear_input_shape(); }, "model.input_shape"},
      {[](proto::ModelSpec* s) { s->add_hidden(4); }, "exclusive"},
      {[](proto::ModelSpec* s) { *s->add_layers() = L("flatten"); }, "already flat"},
      {[](proto::ModelSpec* s) { s->mutable_layers(4)->set_units(int64_t{1} << 20); },
       "native bounds"},
      {[](proto::ModelSpec* s) { s->set_num_classes(1); }, "model.num_classes"},
      {[](proto::ModelSpec* s) {
         s->clear_layers();
         *s->add_layers() = L("relu");
       },
       "no layer has parameters"},
  };
  for (const Case& c : cases) {
    proto::ModelSpec s = Cnn();
    c.edit(&s);
    const absl::Status st = ModelFromSpec(s).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st << " want " << c.want;
    EXPECT_EQ(NativeParamCount(s).status().code(), absl::StatusCode::kInvalidArgument) << c.want;
  }
}

TEST(ModelFromSpec, AnEmbeddingBagReadsTokenIds) {
  proto::ModelSpec s;
  s.set_input_dim(6);
  s.set_num_classes(3);
  s.add_input_shape(6);
  proto::LayerSpec bag = L("embedding_bag", 8);
  bag.set_vocab(100);
  *s.add_layers() = bag;
  *s.add_layers() = L("relu");
  *s.add_layers() = L("dense", 3);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto m, ModelFromSpec(s));
  EXPECT_EQ(m->num_params(), 100 * 8 + 8 * 3 + 3);
  // Only as the first layer.
  proto::ModelSpec late = s;
  std::swap(*late.mutable_layers(0), *late.mutable_layers(1));
  EXPECT_NE(ModelFromSpec(late).status().message().find("must be the first layer"),
            std::string::npos);
}

// An opaque model's example shape: the one check the coordinator and the
// device both apply.
TEST(ModelFromSpec, OpaqueInputShapesAreBounded) {
  TANDEM_EXPECT_OK(CheckOpaqueInputShape({}));
  TANDEM_EXPECT_OK(CheckOpaqueInputShape({1, 28, 28}));
  TANDEM_EXPECT_OK(CheckOpaqueInputShape({int64_t{1} << 24}));
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
           {0}, {1, -3}, {1, 1, 1, 1, 1}, {4096, 4096, 2}, {int64_t{1} << 25}}) {
    EXPECT_THAT(CheckOpaqueInputShape(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.input_shape")));
  }
}

}  // namespace
}  // namespace tandem::ml
