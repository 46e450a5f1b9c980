#include "server/core/yaml_message.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/task.pb.h"
#include "server/core/task_spec.h"

namespace tandem::server {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

TEST(YamlMessageTest, TheShippedYamlCnnIsTheShippedTextproto) {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/deploy/tasks/";
  auto yaml = ReadTaskSpec(dir + "digits-cnn.yaml");
  auto text = ReadTaskSpec(dir + "digits-cnn.textproto");
  ASSERT_THAT(yaml, IsOk());
  ASSERT_THAT(text, IsOk());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*yaml, *text))
      << yaml->DebugString() << "\nvs\n"
      << text->DebugString();
  EXPECT_EQ(yaml->model().layers_size(), 7);
}

TEST(YamlMessageTest, ScalarsOfEveryKind) {
  proto::TaskSpec spec;
  TANDEM_ASSERT_OK(ParseYamlMessage(R"(
task_id: "quoted id"
training: {local_steps: 7, learning_rate: 1e-3}
privacy: {norm_proofs: false, clip: .inf}
rounds: {rounds: 18446744073709551615}
model: {layers: [{kind: dense, units: -1}], dataset: ~}
)",
                                    &spec));
  EXPECT_EQ(spec.task_id(), "quoted id");
  EXPECT_EQ(spec.training().local_steps(), 7u);
  EXPECT_DOUBLE_EQ(spec.training().learning_rate(), 1e-3);
  EXPECT_FALSE(spec.privacy().norm_proofs());
  EXPECT_TRUE(spec.privacy().has_norm_proofs());
  EXPECT_TRUE(std::isinf(spec.privacy().clip()));
  EXPECT_EQ(spec.rounds().rounds(), UINT64_MAX);
  EXPECT_EQ(spec.model().layers(0).units(), -1);
}

// Each refusal names the field's path and the line, and leaves nothing.
TEST(YamlMessageTest, RefusalsNameTheFieldAndTheLine) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  const Case cases[] = {
      {"model:\n  layerz: []\n", "model.layerz (line 2): no such field in TaskModelSpec"},
      {"model:\n  layers:\n    - {kind: dense, units: three}\n",
       "model.layers[0].units (line 3): expected an integer, got 'three'"},
      {"model:\n  layers: {kind: dense}\n",
       "model.layers (line 2): a repeated field takes a sequence"},
      {"training: 5\n", "training (line 1): expected a mapping"},
      {"rounds:\n  rounds: -1\n", "rounds.rounds (line 2): expected an unsigned integer"},
      {"rounds:\n  rounds: 99999999999999999999\n", "rounds.rounds (line 2)"},
      {"rounds:\n  rounds: '5'\n", "expected an unsigned integer, got '5'"},
      {"privacy: {norm_proofs: yes}\n", "privacy.norm_proofs (line 1): expected true or false"},
      {"task_id: a\ntask_id: b\n", "task_id (line 2): given twice"},
      {"task_id: [a]\n", "task_id (line 1): expected a single value"},
      {"model: [unclosed\n", "not YAML (line "},
      {"task_id: a\n---\ntask_id: b\n", "more than one YAML document"},
      {"- a\n- b\n", "the document (line 1): expected a mapping"},
      {"", "empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    proto::TaskSpec spec;
    spec.set_task_id("left over");
    EXPECT_THAT(ParseYamlMessage(c.yaml, &spec),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)));
    EXPECT_EQ(spec.ByteSizeLong(), 0u);
  }
}

// Aliases count each time they are used: a document that expands past
// kMaxYamlNodes is refused, however small its text.
TEST(YamlMessageTest, AliasExpansionIsBounded) {
  std::string yaml = "model:\n  layers: [&l {kind: relu}";
  for (size_t i = 0; i < kMaxYamlNodes; ++i) yaml += ",*l";
  yaml += "]\n";
  proto::TaskSpec spec;
  EXPECT_THAT(ParseYamlMessage(yaml, &spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nodes")));
  EXPECT_THAT(ParseYamlMessage(std::string(kMaxYamlBytes + 1, ' '), &spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
}

}  // namespace
}  // namespace tandem::server
