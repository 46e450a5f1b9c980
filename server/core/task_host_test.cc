// TaskHost: routing, the operator's task API and the registry across a
// restart, over real Coordinators and SQLite files (scripted aggregators,
// fake clock; the drivers are not started, so each test ticks by hand).
// The daemons' version is tests/integration/task_api_test.cc.
#include "server/core/task_host.h"

#include <filesystem>

#include "server/core/coordinator_test_fixture.h"

namespace tandem::server {
namespace {

class TaskHostTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Make());  // "t1", and the device registry
    boot_ = std::move(c);
  }
  // A host over dir_/tasks.db whose factory builds Options() under the
  // spec's id (population "bad" is refused, naming the field).
  absl::StatusOr<std::unique_ptr<TaskHost>> Host() {
    host_.reset();
    task_store_.reset();
    TANDEM_ASSIGN_OR_RETURN(task_store_, TaskStore::Open((dir_ / "tasks.db").string()));
    TaskHostOptions o;
    o.devices = devices_.get();
    o.store = task_store_.get();
    o.tasks_dir = (dir_ / "tasks").string();
    o.models_root = (dir_ / "models").string();
    o.clock = &clock_;
    o.max_tasks = 3;
    o.factory = [this](const proto::TaskSpec& spec,
                       const std::string& task_dir) -> absl::StatusOr<TaskParts> {
      ++built_;
      if (spec.population() == "bad") {
        return absl::InvalidArgumentError("task_spec.population: refused by the test");
      }
      CoordinatorOptions co = Options();
      co.task_id = spec.task_id();
      co.devices = devices_.get();
      TANDEM_ASSIGN_OR_RETURN(
          auto store, CoordinatorStore::Open((std::filesystem::path(task_dir) / "c.db").string()));
      TaskParts parts;
      TANDEM_ASSIGN_OR_RETURN(
          parts.coordinator,
          Coordinator::Create(std::move(co), TicketKey(), EvalData(), &leader_, &helper_,
                              std::move(store), &clock_, random_.get()));
      return parts;
    };
    return TaskHost::Create(std::move(o));
  }
  static proto::CreateTaskRequest Spec(const std::string& id, const std::string& population = "") {
    proto::CreateTaskRequest r;
    r.mutable_spec()->set_task_id(id);
    r.mutable_spec()->set_population(population);
    return r;
  }
  std::shared_ptr<Coordinator> Task(TaskHost& host, const std::string& id) {
    for (auto& c : host.Coordinators()) {
      if (c->task_id() == id) return c;
    }
    return nullptr;
  }
  void Collecting(Coordinator& c) {
    for (int i = 0; i < 5 && c.Status().phase() != "collecting"; ++i) TANDEM_ASSERT_OK(c.Tick());
    ASSERT_EQ(c.Status().phase(), "collecting");
  }

  std::unique_ptr<Coordinator> boot_;
  std::unique_ptr<TaskStore> task_store_;
  std::unique_ptr<TaskHost> host_;
  int built_ = 0;
};

TEST_F(TaskHostTest, RoutesCheckInsByTaskAndOffersAnAnyTaskCheckInToEveryTask) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, Host());
  TaskParts parts;
  parts.coordinator = std::move(boot_);
  TANDEM_ASSERT_OK(host->Adopt(std::move(parts), {}));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::TaskInfo t2, host->CreateTask(Spec("t2"), "op"));
  EXPECT_EQ(t2.state(), "active");
  EXPECT_EQ(t2.origin(), "api");
  EXPECT_EQ(t2.updated_by(), "op");
  EXPECT_EQ(t2.status().task_id(), "t2");
  auto c1 = Task(*host, "t1");
  auto c2 = Task(*host, "t2");
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  // Only t2 collects: a check-in for t1 waits, one for t2 and one for any
  // task are assigned t2's round.
  Collecting(*c2);
  proto::CheckInRequest for_t1 = In("a");
  for_t1.set_task_id("t1");
  // (The task id is signed: the device signs what it asks for.)
  for_t1 = testing::SignedCheckIn("a", absl::ToUnixMillis(clock_.Now()), "t1");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r1, host->CheckIn(for_t1, ""));
  EXPECT_EQ(r1.outcome(), proto::CheckInResponse::OUTCOME_RETRY_LATER);
  EXPECT_EQ(r1.task_id(), "t1");
  TANDEM_ASSERT_OK_AND_ASSIGN(
      auto r2,
      host->CheckIn(testing::SignedCheckIn("b", absl::ToUnixMillis(clock_.Now()), "t2"), ""));
  EXPECT_EQ(r2.outcome(), proto::CheckInResponse::OUTCOME_TASK);
  EXPECT_EQ(r2.task_id(), "t2");
  for (int i = 0; i < 4; ++i) {  // whichever task the rotation starts at
    TANDEM_ASSERT_OK_AND_ASSIGN(auto any, host->CheckIn(In(absl::StrCat("any", i)), ""));
    EXPECT_EQ(any.outcome(), proto::CheckInResponse::OUTCOME_TASK);
    EXPECT_EQ(any.task_id(), "t2");
  }
  EXPECT_EQ(c2->Status().assigned(), 5u);
  EXPECT_EQ(c1->Status().assigned(), 0u);
  // An unknown task, after the device proof; a replayed request is refused
  // by the registry before any task is looked at.
  EXPECT_EQ(host->CheckIn(testing::SignedCheckIn("c", absl::ToUnixMillis(clock_.Now()), "t9"), "")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(host->CheckIn(for_t1, "").status().code(), absl::StatusCode::kUnauthenticated);
  // Status: an empty id is the command line's task; several tasks are listed.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, host->Status(""));
  EXPECT_EQ(s.task_id(), "t1");
  EXPECT_EQ(host->List().size(), 2u);
  EXPECT_EQ(host->Status("t9").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TaskHostTest, APausedTaskAssignsNoOneAndStartsNoRoundUntilResumed) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, Host());
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t2"), "op").status());
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::TaskInfo p, host->Pause("t2", "op2"));
  EXPECT_EQ(p.state(), "paused");
  auto c2 = Task(*host, "t2");
  for (int i = 0; i < 3; ++i) TANDEM_ASSERT_OK(c2->Tick());
  EXPECT_EQ(c2->Status().phase(), "paused");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, host->CheckIn(In("a"), ""));
  EXPECT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_RETRY_LATER);
  // Paused survives a restart of the host (the registry).
  host.reset();
  TANDEM_ASSERT_OK_AND_ASSIGN(host, Host());
  TANDEM_ASSERT_OK(host->Start());
  host->Stop();  // drivers off again: this test ticks by hand
  c2 = Task(*host, "t2");
  ASSERT_NE(c2, nullptr);
  EXPECT_TRUE(c2->paused());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto info, host->Get("t2"));
  EXPECT_EQ(info.state(), "paused");
  EXPECT_EQ(info.updated_by(), "op2");
  TANDEM_ASSERT_OK(host->Resume("t2", "op").status());
  Collecting(*c2);
  TANDEM_ASSERT_OK_AND_ASSIGN(r, host->CheckIn(In("b"), ""));
  EXPECT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_TASK);
}

TEST_F(TaskHostTest, DeletingEndsTheOpenRoundWithoutAReleaseAndTheIdIsNeverReused) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, Host());
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t2"), "op").status());
  auto c2 = Task(*host, "t2");
  Collecting(*c2);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto r, host->CheckIn(In("a"), ""));
  ASSERT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_TASK);
  const int finalized_before = static_cast<int>(leader_.finalized.size());
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::TaskInfo d, host->Delete("t2", "op"));
  EXPECT_EQ(d.state(), "deleted");
  // Ended: no Finalize reached the aggregators, nothing released, the round
  // recorded abandoned; the task no longer routes.
  EXPECT_EQ(static_cast<int>(leader_.finalized.size()), finalized_before);
  // Both aggregators were told to abandon it (their ledgers drop its charge).
  EXPECT_EQ(leader_.abandoned, std::vector<uint64_t>{c2->Status().aggregation_round()});
  EXPECT_EQ(helper_.abandoned, leader_.abandoned);
  EXPECT_EQ(c2->Status().phase(), "done");
  EXPECT_EQ(c2->Status().completed_rounds(), 0u);
  EXPECT_EQ(c2->Metrics().rounds_abandoned, 1u);
  EXPECT_EQ(Task(*host, "t2"), nullptr);
  EXPECT_EQ(host->CheckIn(testing::SignedCheckIn("b", absl::ToUnixMillis(clock_.Now()), "t2"), "")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(host->Pause("t2", "op").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(host->CreateTask(Spec("t2"), "op").status().code(), absl::StatusCode::kAlreadyExists);
  // After a restart the deleted task is not re-created, and still refused.
  c2.reset();
  host.reset();
  built_ = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(host, Host());
  TANDEM_ASSERT_OK(host->Start());
  host->Stop();
  EXPECT_EQ(built_, 0);
  EXPECT_EQ(Task(*host, "t2"), nullptr);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto info, host->Get("t2"));
  EXPECT_EQ(info.state(), "deleted");
  EXPECT_FALSE(info.has_status());
  EXPECT_EQ(host->CreateTask(Spec("t2"), "op").status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(TaskHostTest, ABadTaskIsRefusedBeforeAnythingIsKept) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, Host());
  for (const char* id : {"..", ".", ".hidden", "", "a/b", "spaces no"}) {
    EXPECT_EQ(host->CreateTask(Spec(id), "op").status().code(), absl::StatusCode::kInvalidArgument)
        << id;
  }
  absl::Status bad = host->CreateTask(Spec("t3", "bad"), "op").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("task_spec.population"), std::string::npos) << bad;
  proto::CreateTaskRequest path_only = Spec("t4");
  path_only.mutable_spec()->mutable_model()->set_weights_file("/etc/shadow");
  EXPECT_EQ(host->CreateTask(path_only, "op").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(host->List().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "tasks" / "t3"));
  // The refused id is free: nothing was kept under it.
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t3"), "op").status());
  // max_tasks (3) live tasks at most.
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t5"), "op").status());
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t6"), "op").status());
  EXPECT_EQ(host->CreateTask(Spec("t7"), "op").status().code(),
            absl::StatusCode::kResourceExhausted);
  TANDEM_ASSERT_OK(host->Delete("t6", "op").status());
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t7"), "op").status());
  // Weights travel in the request and are kept beside the task's store.
  proto::CreateTaskRequest with_weights = Spec("t8");
  with_weights.set_weights("not safetensors");
  TANDEM_ASSERT_OK(host->Delete("t7", "op").status());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto t8, host->CreateTask(with_weights, "op"));
  EXPECT_EQ(t8.spec().model().weights_file(), "init.safetensors");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "tasks" / "t8" / "init.safetensors"));
}

TEST_F(TaskHostTest, AnApiTaskCannotBeShadowedByTheCommandLine) {
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host, Host());
  TANDEM_ASSERT_OK(host->CreateTask(Spec("t1"), "op").status());
  TaskParts parts;
  parts.coordinator = std::move(boot_);
  EXPECT_EQ(host->Adopt(std::move(parts), {}).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem::server
