#include "server/core/task_spec.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ml/model/safetensors.h"

namespace tandem::server {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

proto::TaskSpec Parse(const std::string& text) {
  proto::TaskSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

constexpr char kMlp[] = R"pb(
  task_id: "t1"
  model { mlp_hidden: 16 dataset: "digits" }
)pb";

TEST(TaskSpecTest, TheShippedExampleMapsOntoTheCoordinatorsOptions) {
  auto spec = ReadTaskSpec(std::string(TANDEM_SOURCE_DIR) + "/deploy/tasks/digits-mlp.textproto");
  ASSERT_THAT(spec, IsOk());
  auto t = TaskOptionsFromSpec(*spec, "");
  ASSERT_THAT(t, IsOk());
  const CoordinatorOptions& o = t->options;
  EXPECT_EQ(o.task_id, "digits-mlp");
  EXPECT_EQ(t->population, "digits-phones");
  EXPECT_EQ(t->dataset, "digits");
  ASSERT_EQ(o.model.hidden_size(), 1);
  EXPECT_EQ(o.model.hidden(0), 32);
  EXPECT_EQ(o.training.local_steps(), 20u);
  EXPECT_DOUBLE_EQ(o.task.secure_sum.clip_l2_norm, 2.0);
  EXPECT_DOUBLE_EQ(o.task.secure_sum.noise_multiplier, 1.0);
  EXPECT_TRUE(o.task.secure_sum.norm_proofs);
  EXPECT_DOUBLE_EQ(o.task.sample_rate, 0.5);
  EXPECT_EQ(o.rounds, 5u);
  EXPECT_EQ(o.evaluation.every, 1u);
}

// A dataset of `cols` features per example in `shape`, 10 classes.
ml::Dataset Shaped(ml::ImageShape shape, int64_t cols) {
  ml::Dataset d;
  d.num_classes = 10;
  d.shape = shape;
  d.features = ml::Matrix::Zero(2, cols);
  d.labels = {0, 1};
  return d;
}

TEST(TaskSpecTest, TheShippedCnnFitsImagesOfAnySizeAndNotFlatFeatures) {
  auto spec = ReadTaskSpec(std::string(TANDEM_SOURCE_DIR) + "/deploy/tasks/digits-cnn.textproto");
  ASSERT_THAT(spec, IsOk());
  auto t = TaskOptionsFromSpec(*spec, "");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dataset, "digits");
  ASSERT_EQ(t->options.model.layers_size(), 7);
  proto::ModelSpec m = t->options.model;
  ASSERT_THAT(FitModelToDataset(Shaped({1, 8, 8}, 64), &m), IsOk());
  EXPECT_EQ(m.input_dim(), 64);
  EXPECT_EQ(m.num_classes(), 10);
  ASSERT_EQ(m.input_shape_size(), 3);
  EXPECT_EQ(m.input_shape(1), 8);
  ASSERT_THAT(FitModelToDataset(Shaped({1, 28, 28}, 784), &m), IsOk());  // fmnist
  EXPECT_EQ(m.input_shape(2), 28);
  // Flat features (a shape that is not the rows'): conv2d has no image.
  absl::Status flat = FitModelToDataset(Shaped({1, 1, 1}, 64), &m);
  EXPECT_EQ(flat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(flat.message().find("task_spec.model.layers[0] (conv2d)"), std::string::npos) << flat;
  // One of mlp_hidden, layers and weights_file.
  proto::TaskSpec both = *spec;
  both.mutable_model()->add_mlp_hidden(4);
  EXPECT_NE(TaskOptionsFromSpec(both, "").status().message().find("task_spec.model"),
            std::string::npos);
}

TEST(TaskSpecTest, UnsetFieldsTakeThePrivateDefaults) {
  auto t = TaskOptionsFromSpec(Parse(kMlp), "");
  ASSERT_THAT(t, IsOk());
  const CoordinatorOptions& o = t->options;
  EXPECT_EQ(t->population, "t1");  // a population of its own
  EXPECT_DOUBLE_EQ(o.task.secure_sum.noise_multiplier, 1.0);
  EXPECT_TRUE(o.task.secure_sum.norm_proofs);
  EXPECT_EQ(o.task.secure_sum.min_batch_size, 10u);
  EXPECT_EQ(o.min_reports, 10u);
  EXPECT_EQ(o.init_seed, 1u);
  EXPECT_EQ(o.evaluation.every, 0u);
  EXPECT_EQ(o.round_timeout, absl::Seconds(30));
  EXPECT_EQ(o.task.secure_sum.encoding, EncodingChoice::kAuto);  // the smaller upload per round
  auto dense =
      TaskOptionsFromSpec(Parse(std::string(kMlp) + R"pb(encoding { encoding: "dense" })pb"), "");
  ASSERT_THAT(dense, IsOk());
  EXPECT_EQ(dense->options.task.secure_sum.encoding, EncodingChoice::kDense);
  EXPECT_EQ(o.target_epsilon, 0);  // the noise multiplier as given
  auto target =
      TaskOptionsFromSpec(Parse(std::string(kMlp) + R"pb(privacy { target_epsilon: 2.5 })pb"), "");
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(target->options.target_epsilon, 2.5);
  EXPECT_EQ(o.max_upload_vs_dense, 0);  // d as given
  auto cap = TaskOptionsFromSpec(
      Parse(std::string(kMlp) + R"pb(encoding { max_upload_vs_dense: 1 })pb"), "");
  ASSERT_THAT(cap, IsOk());
  EXPECT_EQ(cap->options.max_upload_vs_dense, 1.0);
}

TEST(TaskSpecTest, EveryBadFieldIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"pb(model { mlp_hidden: 16 dataset: "digits" })pb", "task_spec.task_id"},
      {R"pb(task_id: "bad id"
            model { mlp_hidden: 16 dataset: "digits" })pb",
       "task_spec.task_id"},
      {R"pb(task_id: "t"
            population: "a b"
            model { mlp_hidden: 16 dataset: "digits" })pb",
       "task_spec.population"},
      {R"pb(task_id: "t")pb", "task_spec.model"},
      {R"pb(task_id: "t"
            model { mlp_hidden: 16 weights_file: "w.safetensors" })pb",
       "task_spec.model:"},
      {R"pb(task_id: "t"
            model { mlp_hidden: 16 mlp_hidden: 0 dataset: "digits" })pb",
       "task_spec.model.mlp_hidden[1]"},
      {R"pb(task_id: "t"
            model { mlp_hidden: 16 dataset: "imagenet" })pb",
       "task_spec.model.dataset"},
      {R"pb(task_id: "t"
            model { weights_file: "missing.safetensors" })pb",
       "task_spec.model.weights_file"},
      {R"pb(task_id: "t"
            model {
              mlp_hidden: 16
              dataset: "digits"
              input_shape: [ 64 ]
            })pb",
       "task_spec.model.input_shape"},
      {std::string(kMlp) + R"pb(training { local_steps: 0 })pb", "task_spec.training.local_steps"},
      {std::string(kMlp) + R"pb(training { learning_rate: -1 })pb",
       "task_spec.training.learning_rate"},
      {std::string(kMlp) + R"pb(training { momentum: 1 })pb", "task_spec.training.momentum"},
      {std::string(kMlp) + R"pb(training { server_optimizer: "sgd" })pb",
       "task_spec.training.server_optimizer"},
      {std::string(kMlp) + R"pb(encoding { block_size: 0 })pb", "task_spec.encoding.block_size"},
      {std::string(kMlp) + R"pb(encoding { block_selection: "all" })pb",
       "task_spec.encoding.block_selection"},
      {std::string(kMlp) + R"pb(encoding { encoding: "sparse" })pb", "task_spec.encoding.encoding"},
      {std::string(kMlp) + R"pb(privacy { clip: 0 })pb", "task_spec.privacy.clip"},
      {std::string(kMlp) + R"pb(privacy { noise_multiplier: -1 })pb",
       "task_spec.privacy.noise_multiplier"},
      {std::string(kMlp) + R"pb(privacy { delta: 1 })pb", "task_spec.privacy.delta"},
      {std::string(kMlp) + R"pb(encoding { max_upload_vs_dense: -1 })pb",
       "task_spec.encoding.max_upload_vs_dense"},
      {std::string(kMlp) + R"pb(encoding { max_upload_vs_dense: 1 log_blocks_per_group: 2 })pb",
       "task_spec.encoding.max_upload_vs_dense"},
      {std::string(kMlp) + R"pb(privacy { target_epsilon: 0 })pb",
       "task_spec.privacy.target_epsilon"},
      {std::string(kMlp) + R"pb(privacy { target_epsilon: 2 noise_multiplier: 1 })pb",
       "task_spec.privacy.target_epsilon"},
      {std::string(kMlp) + R"pb(privacy { sample_rate: 0 })pb", "task_spec.privacy.sample_rate"},
      {std::string(kMlp) + R"pb(rounds { min_reports: 5 })pb", "task_spec.rounds.min_reports"},
      {std::string(kMlp) + R"pb(rounds { target_reports: 11 min_reports: 12 })pb",
       "task_spec.rounds.target_reports"},
      {std::string(kMlp) + R"pb(rounds { round_timeout_s: 0 })pb",
       "task_spec.rounds.round_timeout_s"},
      {std::string(kMlp) + R"pb(rounds { enrollment_s: 30 })pb", "task_spec.rounds.enrollment_s"},
      {std::string(kMlp) + R"pb(evaluation { every: 1 max_examples: 0 })pb",
       "task_spec.evaluation"},
  };
  for (const auto& [text, field] : cases) {
    EXPECT_THAT(TaskOptionsFromSpec(Parse(text), "/nonexistent").status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)))
        << text;
  }
}

TEST(TaskSpecTest, AnyModelFromAWeightsFileBesideTheSpec) {
  const std::string dir = ::testing::TempDir() + "/task_spec_test";
  std::filesystem::create_directories(dir);
  ml::SafetensorsFile f;
  f.tensors.push_back(*ml::Float32Tensor("fc.weight", {10, 4}, std::vector<float>(40, 0.1f)));
  f.tensors.push_back(*ml::Float32Tensor("fc.bias", {10}, std::vector<float>(10, 0.f)));
  TANDEM_ASSERT_OK(ml::WriteSafetensorsFile(dir + "/init.safetensors", f));
  auto t = TaskOptionsFromSpec(Parse(R"pb(task_id: "any"
                                          model { weights_file: "init.safetensors" num_classes: 10 }
                                          evaluation { every: 1 })pb"),
                               dir);
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->dataset.empty());
  ASSERT_EQ(t->options.model.tensors_size(), 2);
  EXPECT_EQ(t->options.model.tensors(0).name(), "fc.weight");
  EXPECT_EQ(t->options.model.num_classes(), 10);
  EXPECT_EQ(t->options.initial_params.size(), 50u);
  EXPECT_EQ(t->options.model.input_shape_size(), 0);
  // The clients' data schema travels with the model; bounded.
  auto shaped = TaskOptionsFromSpec(Parse(R"pb(task_id: "any"
                                               model {
                                                 weights_file: "init.safetensors"
                                                 input_shape: [ 1, 2, 2 ]
                                               })pb"),
                                    dir);
  ASSERT_THAT(shaped, IsOk());
  EXPECT_EQ(std::vector<int64_t>(shaped->options.model.input_shape().begin(),
                                 shaped->options.model.input_shape().end()),
            (std::vector<int64_t>{1, 2, 2}));
  for (const char* bad :
       {"input_shape: [ 0 ]", "input_shape: [ 1, 1, 1, 1, 1 ]", "input_shape: [ 4096, 4096, 2 ]"}) {
    EXPECT_THAT(
        TaskOptionsFromSpec(Parse(absl::StrCat(R"pb(task_id: "any"
                                                    model { weights_file: "init.safetensors")pb",
                                               bad, "}")),
                            dir)
            .status(),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.input_shape")))
        << bad;
  }
  // Federated evaluation needs the model's classes.
  EXPECT_THAT(TaskOptionsFromSpec(Parse(R"pb(task_id: "any"
                                             model { weights_file: "init.safetensors" }
                                             evaluation { every: 1 })pb"),
                                  dir)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("evaluation.every")));
  std::filesystem::remove_all(dir);
}

TEST(TaskSpecTest, ParseErrorsNameTheLine) {
  const std::string path = ::testing::TempDir() + "/bad_task_spec.textproto";
  std::ofstream(path) << "task_id: \"t\"\nmodel {\n  mlp_widths: 3\n}\n";
  EXPECT_THAT(ReadTaskSpec(path).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(":3:")));
  EXPECT_THAT(ReadTaskSpec(path + ".missing").status(), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace tandem::server
