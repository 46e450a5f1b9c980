// Provisioning at the aggregators by their own operators (issue 33 item 2),
// with real daemons: each tandem-aggregator serves its operator API to its
// own operator's certificate only; a task its operator did not provision
// gets no round, one provisioned at run time does, its terms are fixed,
// retiring it stops new rounds, and every change survives a SIGKILL.
#include <grpcpp/create_channel.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator_admin.grpc.pb.h"
#include "tests/integration/aggregator_pair_fixture.h"
#include "tests/testing/daemon_process.h"

namespace tandem::integration {
namespace {

using ::testing::HasSubstr;

class AggregatorAdminTest : public AggregatorPairTest {
 protected:
  AggregatorAdminTest() { operator_api_ = true; }

  std::unique_ptr<proto::AggregatorAdmin::Stub> Admin(const std::string& who, bool helper) {
    return proto::AggregatorAdmin::NewStub(
        As(who).To(helper ? pair_.helper_admin_address() : pair_.leader_admin_address(),
                   helper ? "helper.tandem" : "leader.tandem"));
  }
  grpc::StatusCode Provision(const std::string& who, bool helper, const std::string& task,
                             const std::string& population, double budget,
                             proto::ProvisionTaskResponse* out = nullptr,
                             uint64_t max_sent_values = 0) {
    proto::ProvisionTaskRequest req;
    req.mutable_task()->set_task_id(task);
    req.mutable_task()->set_population(population);
    req.mutable_task()->mutable_policy()->set_epsilon_budget(budget);
    if (max_sent_values != 0) {
      req.mutable_task()->mutable_policy()->set_max_sent_values(max_sent_values);
    }
    proto::ProvisionTaskResponse r;
    const grpc::Status s = Admin(who, helper)->ProvisionTask(Deadline().get(), req, &r);
    if (out != nullptr) *out = r;
    return s.error_code();
  }
  grpc::StatusCode Retire(const std::string& who, bool helper, const std::string& task) {
    proto::RetireTaskRequest req;
    req.set_task_id(task);
    proto::RetireTaskResponse r;
    return Admin(who, helper)->RetireTask(Deadline().get(), req, &r).error_code();
  }
  // "id:origin[:retired]" of every task the aggregator lists.
  std::string Listed(bool helper) {
    proto::ListProvisionedTasksResponse r;
    const grpc::Status s = Admin(helper ? "helper-operator" : "leader-operator", helper)
                               ->ListProvisionedTasks(Deadline().get(), {}, &r);
    if (!s.ok()) return s.error_message();
    std::string out;
    for (const proto::ProvisionedTask& t : r.tasks()) {
      absl::StrAppend(&out, t.task_id(), ":", t.origin(), t.retired() ? ":retired" : "", ";");
    }
    return out;
  }
  grpc::Status OpenRound(bool helper, const std::string& task, uint64_t round) {
    proto::OpenRoundRequest open;
    *open.mutable_parameters() = params_;
    open.mutable_parameters()->set_task_id(task);
    open.mutable_parameters()->set_round_id(round);
    proto::OpenRoundResponse r;
    return Collector(As("coordinator"), helper)->OpenRound(Deadline().get(), open, &r);
  }
  grpc::StatusCode Open(bool helper, const std::string& task, uint64_t round) {
    return OpenRound(helper, task, round).error_code();
  }
};

TEST_F(AggregatorAdminTest, EachOperatorProvisionsItsOwnAggregatorAndChangesSurviveSigkill) {
  const std::string before = Listed(false);
  EXPECT_EQ(before, "adv-eval:config;adv-solo:config;adv-task:config;");
  // Not provisioned: no round at either.
  for (bool helper : {false, true})
    EXPECT_EQ(Open(helper, "new-task", 1), grpc::StatusCode::FAILED_PRECONDITION);

  // Only an aggregator's own operator provisions it.
  for (const char* who : {"coordinator", "operator", "outsider", "smuggler", "helper-operator"}) {
    SCOPED_TRACE(who);
    EXPECT_EQ(Provision(who, /*helper=*/false, "new-task", "phones", 6),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Provision("leader-operator", /*helper=*/true, "new-task", "phones", 6),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Listed(false), before);
  EXPECT_EQ(Listed(true), before);

  // Bad terms are refused before anything is written.
  EXPECT_EQ(Provision("leader-operator", false, "bad id!", "", 6),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "phones", -1),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Provision("leader-operator", false, "big-task", "", 6, nullptr, uint64_t{1} << 20),
            grpc::StatusCode::FAILED_PRECONDITION);  // above the listeners' limits
  EXPECT_EQ(Provision("leader-operator", false, "adv-task", "phones", 1),
            grpc::StatusCode::FAILED_PRECONDITION);  // a config task's terms are fixed
  EXPECT_EQ(Listed(false), before);

  // Provisioned by each operator: rounds open at both.
  proto::ProvisionTaskResponse r;
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "phones", 6, &r), grpc::StatusCode::OK);
  EXPECT_TRUE(r.created());
  EXPECT_EQ(Open(false, "new-task", 1), grpc::StatusCode::OK);
  EXPECT_EQ(Open(true, "new-task", 1), grpc::StatusCode::FAILED_PRECONDITION);  // not yet there
  EXPECT_EQ(Provision("helper-operator", true, "new-task", "phones", 6), grpc::StatusCode::OK);
  EXPECT_EQ(Open(true, "new-task", 1), grpc::StatusCode::OK);
  // A retry changes nothing; other terms are refused.
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "phones", 6, &r), grpc::StatusCode::OK);
  EXPECT_FALSE(r.created());
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "phones", 60),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "tablets", 6),
            grpc::StatusCode::FAILED_PRECONDITION);
  const std::string provisioned = "adv-eval:config;adv-solo:config;adv-task:config;new-task:api;";
  EXPECT_EQ(Listed(false), provisioned);
  // It joined its population's ledger: the status names it.
  auto st = Status(false, "new-task");
  ASSERT_THAT(st, IsOk());
  EXPECT_EQ(st->population(), "phones");

  // SIGKILL and restart: the provisioned task is still there, its round open.
  KillPair();
  TANDEM_ASSERT_OK(StartPair());
  EXPECT_EQ(Listed(false), provisioned);
  EXPECT_EQ(Listed(true), provisioned);
  EXPECT_EQ(Open(false, "new-task", 1), grpc::StatusCode::OK);  // idempotent: same round

  // Retired by both: no new round, never provisioned again, also after a SIGKILL.
  EXPECT_EQ(Retire("helper-operator", false, "new-task"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Retire("leader-operator", false, "no-such-task"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Retire("leader-operator", false, "new-task"), grpc::StatusCode::OK);
  EXPECT_EQ(Retire("helper-operator", true, "new-task"), grpc::StatusCode::OK);
  for (bool helper : {false, true})
    EXPECT_EQ(Open(helper, "new-task", 2), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Provision("leader-operator", false, "new-task", "phones", 6),
            grpc::StatusCode::FAILED_PRECONDITION);
  KillPair();
  TANDEM_ASSERT_OK(StartPair());
  const std::string retired =
      "adv-eval:config;adv-solo:config;adv-task:config;new-task:api:retired;";
  EXPECT_EQ(Listed(false), retired);
  EXPECT_EQ(Listed(true), retired);
  for (bool helper : {false, true})
    EXPECT_EQ(Open(helper, "new-task", 2), grpc::StatusCode::FAILED_PRECONDITION);
  // The retired task's open round still holds its charge in the population
  // "phones" (budget 6): a round of another task of it does not fit beside
  // it (the ledger spans config and API tasks), one of another population does.
  const grpc::Status shared = OpenRound(false, "adv-task", 1);
  EXPECT_EQ(shared.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(shared.error_message(), HasSubstr("population"));
  EXPECT_EQ(Open(false, "adv-solo", 1), grpc::StatusCode::OK);
  // The coordinator abandons that round (its task was deleted there): the
  // charge leaves the ledger and the population's other task opens. Only
  // the coordinator may; a released round could not be.
  proto::AbandonRoundRequest abandon;
  abandon.set_task_id("new-task");
  abandon.set_round_id(1);
  proto::AbandonRoundResponse abandoned;
  EXPECT_EQ(Collector(As("leader-operator"), false)
                ->AbandonRound(Deadline().get(), abandon, &abandoned)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Open(false, "adv-task", 1), grpc::StatusCode::FAILED_PRECONDITION);
  for (bool helper : {false, true}) {
    EXPECT_EQ(Collector(As("coordinator"), helper)
                  ->AbandonRound(Deadline().get(), abandon, &abandoned)
                  .error_code(),
              grpc::StatusCode::OK);
  }
  EXPECT_EQ(Open(false, "adv-task", 1), grpc::StatusCode::OK);
}

// tandem-admin aggregator provision|list|retire, the operator's command line.
TEST_F(AggregatorAdminTest, TandemAdminProvisionsListsAndRetires) {
  auto run = [&](std::vector<std::string> args, std::string* out) {
    args.push_back("--admin=" + pair_.leader_admin_address());
    args.push_back("--tls_cert=" + dir_ + "/leader-operator.pem");
    args.push_back("--tls_key=" + dir_ + "/leader-operator.key");
    args.push_back("--tls_ca=" + dir_ + "/ca.pem");
    const std::string log = dir_ + "/admin.log";
    std::filesystem::remove(log);
    auto p = tandem::testing::ChildProcess::Spawn(TANDEM_ADMIN_BIN, args, log);
    if (!p.ok()) return -1;
    absl::StatusOr<int> rc = (*p)->Wait(absl::Seconds(30));
    *out = Read(log);
    return rc.ok() ? *rc : -1;
  };
  std::string out;
  ASSERT_EQ(run({"aggregator", "provision", "--task=cli-task", "--population=phones",
                 "--policy=epsilon_budget: 4 min_batch_size: 20"},
                &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("task cli-task provisioned"));
  ASSERT_EQ(run({"aggregator", "list"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("cli-task population=phones origin=api epsilon_budget=4"));
  EXPECT_THAT(out, HasSubstr("min_batch=20"));
  EXPECT_NE(run({"aggregator", "provision", "--task=cli-task2", "--policy=no such field: 1"}, &out),
            0);
  EXPECT_THAT(out, HasSubstr("PrivacyPolicy"));
  ASSERT_EQ(run({"aggregator", "retire", "--task=cli-task"}, &out), 0) << out;
  ASSERT_EQ(run({"aggregator", "list"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("cli-task population=phones origin=api retired"));
}

}  // namespace
}  // namespace tandem::integration
