// Private federated evaluation (issue 33 item 5) through the real daemons:
// after every released version, the tandem-client processes evaluate it on
// their held-out examples (their rows of the digits test split) and send
// the metrics through both aggregators, each adding its own noise (one of
// them an app embedding the C ABI, its held-out examples set with
// tandem_participant_set_held_out); the
// coordinator records the noised sums with their standard deviation and
// charges the release. Checked against the clear sums, computed here
// independently (ml::GradientEngine::Evaluate on the released model the
// coordinator kept as safetensors).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ml/data/dataset.h"
#include "ml/model/model_zoo.h"
#include "ml/model/safetensors.h"
#include "ml/train/trainer.h"
#include "tandem/client/c_api.h"
#include "tests/integration/federation_fixture.h"

namespace tandem::testing {
namespace {

constexpr int kClients = 4;
constexpr int kMaxExamples = 100;
constexpr double kEvalNoise = 0.005;  // sd ~1.6 examples: a 2% decoding error shows

struct ClearSums {
  double examples = 0;
  double correct = 0;
  double loss_sum = 0;
  std::vector<double> class_examples = std::vector<double>(10, 0.0);
};

// What the kClients clients evaluate: rows i % kClients == k of the test
// split (tandem-client's held-out examples), the first kMaxExamples each.
ClearSums ClearEvaluation(uint64_t version, const std::string& models_dir) {
  ClearSums out;
  auto file = ml::ReadSafetensorsFile(absl::StrCat(models_dir, "/v", version, ".safetensors"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return out;
  std::vector<float> params;
  for (const ml::SafeTensor& t : file->tensors) {
    auto v = ml::AsFloat32(t);
    EXPECT_TRUE(v.ok());
    params.insert(params.end(), v->begin(), v->end());
  }
  auto model = ml::MakeMlp(64, {32}, 10);
  EXPECT_TRUE(model.ok());
  EXPECT_TRUE((*model)->SetParams(params).ok());
  auto data = ml::LoadNamedDataset("digits", 1);
  EXPECT_TRUE(data.ok());
  auto engine = ml::GradientEngine::Create(1);
  for (int k = 0; k < kClients; ++k) {
    std::vector<int64_t> rows;
    for (int64_t i = k; i < data->second.size() && rows.size() < kMaxExamples; i += kClients) {
      rows.push_back(i);
    }
    auto mine = data->second.Subset(rows);
    auto e = (*engine)->Evaluate(**model, *mine);
    EXPECT_TRUE(e.ok());
    const double n = static_cast<double>(rows.size());
    out.examples += n;
    out.correct += e->accuracy * n;
    out.loss_sum += e->loss * n;  // losses of a trained model stay below the clip (10 nats)
    for (int label : mine->labels) out.class_examples[label] += 1;
  }
  return out;
}

using FederatedEvaluationTest = FederationFixture;

// Client 0 as an app embedding the C ABI would run it: its rows k % 4 == 0
// of the train split to train on, of the test split held out
// (tandem_participant_set_held_out), until the task is done. *rc: 0 when
// it finished, else the failing call's code.
void RunCAbiDevice(int port, const std::string& certs, const AggregatorPair* pair,
                   const std::string& state_dir, int* evaluations, int* rc) {
  *rc = -1;
  auto data = ml::LoadNamedDataset("digits", 1);
  if (!data.ok()) return;
  auto rows = [](int64_t n) {
    std::vector<int64_t> r;
    for (int64_t i = 0; i < n; i += kClients) r.push_back(i);
    return r;
  };
  auto train = data->first.Subset(rows(data->first.size()));
  auto held = data->second.Subset(rows(data->second.size()));
  std::vector<int32_t> train_labels(train->labels.begin(), train->labels.end());
  std::vector<int32_t> held_labels(held->labels.begin(), held->labels.end());
  const std::string address = absl::StrCat("127.0.0.1:", port), ca = certs + "/ca.pem";
  tandem_participant_options o{};
  o.coordinator = address.c_str();
  o.client_id = "c-abi-device";
  o.state_dir = state_dir.c_str();
  o.tls_root_ca = ca.c_str();
  o.features = train->features.data();  // row-major (ml::Matrix)
  o.rows = train->features.rows();
  o.cols = train->features.cols();
  o.labels = train_labels.data();
  o.num_classes = train->num_classes;
  const std::string leader = pair->leader_address(), helper = pair->helper_address();
  const absl::StatusOr<std::string> token = MintEnrollmentToken(certs);
  if (!token.ok()) return;
  tandem_participant_trust trust{};
  trust.struct_size = sizeof(trust);
  trust.leader_address = leader.c_str();
  trust.leader_name = "leader.tandem";
  trust.helper_address = helper.c_str();
  trust.helper_name = "helper.tandem";
  trust.enrollment_token = token->c_str();
  tandem_participant* p = nullptr;
  char err[256];
  if ((*rc = tandem_participant_create_with_trust(&o, &trust, &p, err, sizeof(err))) != 0) return;
  if ((*rc = tandem_participant_set_held_out(p, held->features.data(), held->features.rows(),
                                             held_labels.data(), err, sizeof(err))) != 0) {
    tandem_participant_destroy(p);
    return;
  }
  // Its examples are the digits' 1 x 8 x 8 images (a shape whose product is
  // not cols is refused).
  if (tandem_participant_set_example_shape(p, 1, 8, 9, err, sizeof(err)) != 3 ||
      (*rc = tandem_participant_set_example_shape(p, 1, 8, 8, err, sizeof(err))) != 0) {
    if (*rc == 0) *rc = -3;
    tandem_participant_destroy(p);
    return;
  }
  *rc = -2;
  for (int i = 0; i < 3000; ++i) {
    tandem_round_result r{};
    if (tandem_participant_participate_once(p, &r, err, sizeof(err)) != 0) {
      absl::SleepFor(absl::Milliseconds(50));
      continue;
    }
    if (r.outcome == TANDEM_ROUND_TASK_DONE) {
      *rc = 0;
      break;
    }
    // An evaluation reports the held-out examples it counted (its 90 test
    // rows); a training round its 360 train rows.
    if (r.outcome == TANDEM_ROUND_CONTRIBUTED &&
        r.examples == static_cast<uint64_t>(std::min<int64_t>(held->size(), kMaxExamples))) {
      ++*evaluations;
    }
    if (r.outcome == TANDEM_ROUND_NOT_SELECTED)
      absl::SleepFor(absl::Milliseconds(r.retry_after_ms));
  }
  tandem_participant_destroy(p);
}

TEST_F(FederatedEvaluationTest, PrivateFederatedEvaluationSumsEqualTheClearSumsWithinTheNoise) {
  StartCoordinator({"--rounds=2", absl::StrCat("--target_reports=", kClients), "--min_reports=2",
                    "--noise_multiplier=0.05", "--eval_every=1",
                    absl::StrCat("--eval_max_examples=", kMaxExamples),
                    absl::StrCat("--eval_noise_multiplier=", kEvalNoise)});
  // Clients 1..3: tandem-client processes; client 0: the C ABI in process.
  for (int k = 1; k < kClients; ++k) StartClient(k, kClients);
  int c_evaluations = 0, c_rc = -1;
  std::thread c_device(RunCAbiDevice, port_, dir_, &pair_, dir_ + "/c-abi", &c_evaluations, &c_rc);
  const proto::CoordinatorStatusResponse s =
      WaitFor([](const auto& s) { return s.phase() == "done"; }, absl::Seconds(240));
  c_device.join();
  ASSERT_EQ(s.phase(), "done") << s.DebugString();
  EXPECT_EQ(c_rc, 0);
  EXPECT_EQ(c_evaluations, 2);  // the C ABI device reported both evaluations
  // Released v1, its evaluation, released v2, its evaluation.
  ASSERT_EQ(s.history_size(), 4) << s.DebugString();
  double epsilon = 0;
  for (int i = 0; i < 4; ++i) {
    const proto::RoundSummary& r = s.history(i);
    EXPECT_EQ(r.has_evaluation(), i % 2 == 1) << i;
    EXPECT_EQ(r.model_version(), static_cast<uint64_t>(i / 2 + 1));
    EXPECT_GT(r.epsilon(), epsilon) << "round " << i << " was not charged";
    epsilon = r.epsilon();
  }
  EXPECT_DOUBLE_EQ(s.epsilon_spent(), epsilon);
  for (const proto::RoundSummary& r : s.history()) {  // the figures of bench/README.md
    std::printf(
        "%s round of version %llu: %.2f s, %llu bytes up per client, %llu down\n",
        r.has_evaluation() ? "evaluation" : "training",
        static_cast<unsigned long long>(r.model_version()), r.seconds(),
        static_cast<unsigned long long>(r.bytes_up() / std::max<uint64_t>(1, r.uploads_done())),
        static_cast<unsigned long long>(r.bytes_down()));
  }
  EXPECT_EQ(s.last_evaluation().model_version(), 2u);
  {  // The operator's view: tandem-status shows the evaluations.
    const std::string log = dir_ + "/status.txt";
    auto st = ChildProcess::Spawn(
        TANDEM_STATUS_BIN,
        {absl::StrCat("--coordinator=127.0.0.1:", port_), "--tls_ca=" + dir_ + "/ca.pem"}, log);
    ASSERT_TRUE(st.ok());
    ASSERT_EQ(*(*st)->Wait(absl::Seconds(20)), 0);
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("federated evaluation of version 2: accuracy"), std::string::npos) << text;
    EXPECT_NE(text.find("       2E"), std::string::npos) << text;
  }

  for (int i : {1, 3}) {
    const proto::FederatedEvaluation& e = s.history(i).evaluation();
    SCOPED_TRACE(absl::StrCat("evaluation of version ", e.model_version()));
    EXPECT_EQ(e.reports(), static_cast<uint64_t>(kClients));
    // Both servers' noise, sigma = z * sqrt(5) per server in units of 1/m.
    const double sd = std::sqrt(2.0) * kEvalNoise * std::sqrt(5.0) * kMaxExamples;
    EXPECT_NEAR(e.count_stddev(), sd, 0.02 * sd);
    EXPECT_NEAR(e.loss_stddev(), sd * 10, 0.2 * sd);
    const ClearSums clear =
        ClearEvaluation(e.model_version(), dir_ + "/coordinator/models/default");
    const double bound = 6 * e.count_stddev() + 0.05;  // + fixed-point rounding
    EXPECT_NEAR(e.examples(), clear.examples, bound);
    EXPECT_NEAR(e.correct(), clear.correct, bound);
    EXPECT_NEAR(e.loss_sum(), clear.loss_sum, 6 * e.loss_stddev() + 0.05);
    ASSERT_EQ(e.class_examples_size(), 10);
    ASSERT_EQ(e.class_correct_size(), 10);
    double noise_seen = std::abs(e.examples() - clear.examples);
    for (int c = 0; c < 10; ++c) {
      EXPECT_NEAR(e.class_examples(c), clear.class_examples[c], bound) << c;
      noise_seen = std::max(noise_seen, std::abs(e.class_examples(c) - clear.class_examples[c]));
    }
    // The servers did add noise (|N(0, sd^2)| < 0.01 on 11 sums: ~1e-20).
    EXPECT_GT(noise_seen, 0.01);
    EXPECT_NEAR(e.accuracy(), clear.correct / clear.examples, 0.05);
    EXPECT_EQ(s.history(i).accuracy(), e.accuracy());
    EXPECT_EQ(s.history(i).evaluated_by(), "federated");
  }
}

}  // namespace
}  // namespace tandem::testing
