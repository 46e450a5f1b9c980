#include "server/core/released_models.h"

#include <filesystem>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"

namespace tandem::server {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

TEST(ReleasedModelsTest, OneTensorPerParameterWithTheModelsNamesAndShapes) {
  auto mlp = ml::MakeMlp(64, {32}, 10);
  ASSERT_THAT(mlp, IsOk());
  (*mlp)->InitFromSeed(7);
  const std::vector<float> params = (*mlp)->Flatten();
  auto file = ReleasedModelFile((*mlp)->param_infos(), params, "digits", 3);
  ASSERT_THAT(file, IsOk());
  ASSERT_EQ(file->tensors.size(), (*mlp)->param_infos().size());
  std::vector<float> joined;
  for (size_t i = 0; i < file->tensors.size(); ++i) {
    const ml::ParamInfo& p = (*mlp)->param_infos()[i];
    EXPECT_EQ(file->tensors[i].name, p.name);
    EXPECT_EQ(file->tensors[i].shape, p.shape);
    auto values = ml::AsFloat32(file->tensors[i]);
    ASSERT_THAT(values, IsOk());
    joined.insert(joined.end(), values->begin(), values->end());
  }
  EXPECT_EQ(joined, params);  // bit-exact, in the model's order
  EXPECT_EQ(file->metadata.at("tandem.task_id"), "digits");
  EXPECT_EQ(file->metadata.at("tandem.model_version"), "3");

  std::vector<float> short_params(params.begin(), params.end() - 1);
  EXPECT_THAT(ReleasedModelFile((*mlp)->param_infos(), short_params, "digits", 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ReleasedModelsTest, VersionsAreWrittenAndListed) {
  const std::string dir = ::testing::TempDir() + "/released_models_test/models/t";
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(ReleasedVersions(dir).empty());  // no directory yet
  auto mlp = ml::MakeMlp(8, {4}, 2);
  ASSERT_THAT(mlp, IsOk());
  const std::vector<float> params = (*mlp)->Flatten();
  for (uint64_t v : {2, 10, 1}) {
    TANDEM_ASSERT_OK(WriteReleasedModel(dir, (*mlp)->param_infos(), params, "t", v));
  }
  EXPECT_EQ(ReleasedVersions(dir), (std::vector<uint64_t>{1, 2, 10}));
  auto back = ml::ReadSafetensorsFile(ReleasedModelPath(dir, 10));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->metadata.at("tandem.model_version"), "10");
  std::filesystem::remove_all(::testing::TempDir() + "/released_models_test");
}

TEST(ReleasedModelsTest, AnOpaqueModelComesFromASafetensorsFile) {
  const std::string dir = ::testing::TempDir() + "/released_models_opaque";
  std::filesystem::create_directories(dir);
  ml::SafetensorsFile f;
  f.tensors.push_back(
      *ml::Float32Tensor("conv.weight", {2, 1, 3, 3}, std::vector<float>(18, 0.5f)));
  f.tensors.push_back(*ml::Float32Tensor("conv.bias", {2}, std::vector<float>{1, 2}));
  f.tensors.push_back(*ml::Float32Tensor("temperature", {}, std::vector<float>{3}));
  TANDEM_ASSERT_OK(ml::WriteSafetensorsFile(dir + "/init.safetensors", f));
  auto m = OpaqueModelFromFile(dir + "/init.safetensors", 1 << 20);
  ASSERT_THAT(m, IsOk());
  ASSERT_EQ(m->spec.tensors_size(), 3);
  EXPECT_EQ(m->spec.tensors(0).name(), "conv.weight");
  EXPECT_EQ(m->params.size(), 21u);
  EXPECT_EQ(m->params[18], 1.0f);
  auto layout = OpaqueLayout(m->spec, 1 << 20);
  ASSERT_THAT(layout, IsOk());
  EXPECT_TRUE((*layout)[0].recyclable());  // rank 4: FedLUAR may recycle it
  EXPECT_FALSE((*layout)[1].recyclable());
  EXPECT_EQ((*layout)[2].offset, 20);
  EXPECT_EQ((*layout)[2].size, 1);  // a scalar
  // Exported again under the same names and shapes.
  auto file = ReleasedModelFile(*layout, m->params, "t", 1);
  ASSERT_THAT(file, IsOk());
  EXPECT_EQ(file->tensors[0].shape, (std::vector<int64_t>{2, 1, 3, 3}));
  EXPECT_TRUE(file->tensors[2].shape.empty());

  EXPECT_THAT(OpaqueModelFromFile(dir + "/init.safetensors", 20).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // too many parameters
  f.tensors[1].data[0] = '\xff';                              // NaN bytes
  f.tensors[1].data[1] = '\xff';
  f.tensors[1].data[2] = '\xff';
  f.tensors[1].data[3] = '\xff';
  TANDEM_ASSERT_OK(ml::WriteSafetensorsFile(dir + "/nan.safetensors", f));
  EXPECT_THAT(OpaqueModelFromFile(dir + "/nan.safetensors", 1 << 20).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(OpaqueModelFromFile(dir + "/missing.safetensors", 1 << 20).status(),
              StatusIs(absl::StatusCode::kNotFound));
  proto::ModelSpec bad = m->spec;
  bad.mutable_tensors(1)->set_name("conv.weight");
  EXPECT_THAT(OpaqueLayout(bad, 1 << 20).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = m->spec;
  bad.mutable_tensors(0)->set_shape(1, 0);
  EXPECT_THAT(OpaqueLayout(bad, 1 << 20).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = m->spec;
  bad.mutable_tensors(0)->set_name("conv weight");
  EXPECT_THAT(OpaqueLayout(bad, 1 << 20).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::server
