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

}  // namespace
}  // namespace tandem::server
