// Issue 33 items 2, 3, 4, 7 and 8 with real daemons: one tandem-coordinator
// runs its command line's task (an MLP) and a task an operator created
// through the task API (a CNN the C++ clients build from its spec) side by
// side, each trained by its own tandem-client processes through both
// aggregators, survives a SIGKILL with both open, exports a
// released model bit-exactly, and ends a task deleted mid-round without a
// release; only operators reach the task API (label adversarial for that
// one).
#include <filesystem>
#include <fstream>

#include "ml/model/safetensors.h"
#include "proto/task_admin.grpc.pb.h"
#include "tests/integration/federation_fixture.h"

namespace tandem::testing {
namespace {

class TaskApiTest : public FederationFixture {
 protected:
  std::vector<std::string> ProvisionedTasks() override { return {"default", "second"}; }
  std::unique_ptr<proto::TaskAdmin::Stub> Tasks() {
    return proto::TaskAdmin::NewStub(admin_channel_);
  }
  // A tandem-native CNN on the digits images (conv 3x3 with 8 channels,
  // ReLU, 2x2 max-pool, dense to the 10 classes) that the tandem-client
  // processes build from the spec and train; DP off (the fixture's
  // aggregators' policy), norm proofs on.
  static proto::CreateTaskRequest SecondTask(int rounds, int min_reports) {
    proto::CreateTaskRequest r;
    proto::TaskSpec& s = *r.mutable_spec();
    s.set_task_id("second");
    auto layer = [&](const char* kind, int64_t units = 0, int64_t padding = 0) {
      proto::LayerSpec* l = s.mutable_model()->add_layers();
      l->set_kind(kind);
      l->set_units(units);
      l->set_padding(padding);
    };
    layer("conv2d", 8, 1);
    layer("relu");
    layer("max_pool");
    layer("flatten");
    layer("dense", 10);
    s.mutable_model()->set_dataset("digits");
    s.mutable_model()->set_init_seed(5);
    s.mutable_privacy()->set_noise_multiplier(0);
    s.mutable_privacy()->set_min_batch_size(1);
    s.mutable_privacy()->set_sample_rate(1);
    s.mutable_privacy()->set_clip(4);
    s.mutable_rounds()->set_rounds(rounds);
    s.mutable_rounds()->set_min_reports(min_reports);
    s.mutable_rounds()->set_target_reports(min_reports);
    s.mutable_rounds()->set_round_timeout_s(60);
    return r;
  }
  absl::StatusOr<proto::TaskInfo> Create(const proto::CreateTaskRequest& r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    proto::TaskInfo info;
    grpc::Status s = Tasks()->CreateTask(&ctx, r, &info);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return info;
  }
  grpc::Status Call(const std::string& verb, const std::string& task, proto::TaskInfo* info) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    proto::TaskRequest r;
    r.set_task_id(task);
    auto stub = Tasks();
    if (verb == "get") return stub->GetTask(&ctx, r, info);
    if (verb == "delete") return stub->DeleteTask(&ctx, r, info);
    return stub->PauseTask(&ctx, r, info);
  }
  std::vector<proto::TaskInfo> List() {
    grpc::ClientContext ctx;
    proto::ListTasksResponse r;
    EXPECT_TRUE(Tasks()->ListTasks(&ctx, {}, &r).ok());
    return {r.tasks().begin(), r.tasks().end()};
  }
  // ExportModel's bytes, or its status.
  absl::StatusOr<std::string> Export(const std::string& task, uint64_t version) {
    grpc::ClientContext ctx;
    proto::ExportModelRequest req;
    req.set_task_id(task);
    req.set_version(version);
    auto reader = Tasks()->ExportModel(&ctx, req);
    std::string data;
    for (proto::ModelFileChunk c; reader->Read(&c);) data += c.data();
    grpc::Status s = reader->Finish();
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return data;
  }
  std::vector<std::string> Args() {
    return CoordinatorArgs(
        {"--rounds=3", "--min_reports=2", "--target_reports=2", "--round_timeout_s=60"});
  }
};

TEST_F(TaskApiTest, TwoTasksTrainSideBySideOnOneCoordinatorAndSurviveASigkill) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(Args()));
  auto created = Create(SecondTask(3, 2));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->state(), "active");
  EXPECT_EQ(created->origin(), "api");
  EXPECT_NE(created->updated_by().find("operator.tandem"), std::string::npos);
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StartClient(i, 4, "default"));
  for (int i = 2; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(StartClient(i, 4, "second"));
  // Both release their first version, then the coordinator dies with both
  // tasks open and comes back from its state directory.
  auto first = [](const proto::CoordinatorStatusResponse& s) { return s.completed_rounds() >= 1; };
  ASSERT_TRUE(first(WaitFor(first, absl::Minutes(3), "default")));
  ASSERT_TRUE(first(WaitFor(first, absl::Minutes(3), "second")));
  coordinator_->Kill();
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(Args()));
  auto all = [](const proto::CoordinatorStatusResponse& s) { return s.completed_rounds() >= 3; };
  const proto::CoordinatorStatusResponse d = WaitFor(all, absl::Minutes(4), "default");
  const proto::CoordinatorStatusResponse s = WaitFor(all, absl::Minutes(4), "second");
  ASSERT_EQ(d.completed_rounds(), 3u) << d.DebugString();
  ASSERT_EQ(s.completed_rounds(), 3u) << s.DebugString();
  // Each task counted only its own clients' reports, and learned.
  for (const auto* st : {&d, &s}) {
    for (const proto::RoundSummary& r : st->history()) {
      EXPECT_EQ(r.accepted_reports(), 2u);
      std::printf("task %s version %llu: accuracy %.4f, %.2f s, up %llu B, down %llu B\n",
                  st->task_id().c_str(), static_cast<unsigned long long>(r.model_version()),
                  r.accuracy(), r.seconds(), static_cast<unsigned long long>(r.bytes_up()),
                  static_cast<unsigned long long>(r.bytes_down()));
    }
    EXPECT_GT(st->last_accuracy(), 0.3) << st->task_id();  // chance: 0.1
  }
  const std::vector<proto::TaskInfo> tasks = List();
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].task_id(), "default");
  EXPECT_EQ(tasks[0].origin(), "flags");
  EXPECT_EQ(tasks[1].task_id(), "second");
  EXPECT_EQ(tasks[1].spec().model().layers(0).kind(), "conv2d");
  // Export: the released file, bit-exactly, and a model of the task's shape.
  auto exported = Export("second", 0);
  ASSERT_TRUE(exported.ok()) << exported.status();
  std::ifstream in(dir_ + "/coordinator/models/second/v3.safetensors", std::ios::binary);
  EXPECT_EQ(*exported, std::string(std::istreambuf_iterator<char>(in), {}));
  auto file = ml::DecodeSafetensors(*exported);
  ASSERT_TRUE(file.ok()) << file.status();
  size_t params = 0;
  for (const ml::SafeTensor& t : file->tensors) params += ml::AsFloat32(t)->size();
  EXPECT_EQ(params, size_t{8 * 9 + 8 + 8 * 4 * 4 * 10 + 10});
  bool conv = false;
  for (const ml::SafeTensor& t : file->tensors) conv |= t.name == "conv2d1.weight";
  EXPECT_TRUE(conv);
  EXPECT_EQ(Export("second", 9).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TaskApiTest, ATaskDeletedMidRoundEndsWithoutAReleaseAndStaysDeleted) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(Args()));
  // A quorum of 3 that only 2 clients serve: the round collects until
  // the deadline, and is deleted while it does.
  ASSERT_TRUE(Create(SecondTask(1, 3)).ok());
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StartClient(i, 2, "second"));
  auto uploaded = [](const proto::CoordinatorStatusResponse& s) { return s.uploads_done() >= 2; };
  ASSERT_TRUE(uploaded(WaitFor(uploaded, absl::Minutes(3), "second")));
  proto::TaskInfo info;
  ASSERT_TRUE(Call("delete", "second", &info).ok());
  EXPECT_EQ(info.state(), "deleted");
  EXPECT_NE(info.updated_by().find("operator.tandem"), std::string::npos);
  // The client that would have completed the quorum now finds no task.
  ASSERT_NO_FATAL_FAILURE(StartClient(2, 3, "second"));
  absl::SleepFor(absl::Seconds(4));  // rounds of this test take ~1 s
  // Both aggregators abandoned that round for good (its advance charge
  // left their population ledgers).
  for (const char* role : {"leader", "helper"}) {
    EXPECT_NE(ReadAll(dir_ + "/aggregators/" + role + ".log")
                  .find("task second: round 1 abandoned by the coordinator"),
              std::string::npos)
        << role;
  }
  // Gone from routing and status, nothing released, no export.
  EXPECT_FALSE(Status("second").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/coordinator/models/second"));
  EXPECT_EQ(Export("second", 0).status().code(), absl::StatusCode::kNotFound);
  // After a SIGKILL it is not restarted and its id is not reused.
  coordinator_->Kill();
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(Args()));
  ASSERT_TRUE(Call("get", "second", &info).ok());
  EXPECT_EQ(info.state(), "deleted");
  EXPECT_FALSE(info.has_status());
  EXPECT_EQ(Create(SecondTask(1, 3)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Call("pause", "second", &info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/coordinator/models/second"));
  // The command line's task still answers.
  EXPECT_TRUE(Status().ok());
}

TEST_F(TaskApiTest, OnlyOperatorsReachTheTaskApiAndABadDocumentCreatesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartCoordinatorWith(Args()));
  // A certificate of the same CA that is not an operator's (the
  // coordinator's own), and a caller without one.
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadAll(dir_ + "/ca.pem");
  grpc::SslCredentialsOptions as_coordinator = o;
  as_coordinator.pem_cert_chain = ReadAll(dir_ + "/coordinator.pem");
  as_coordinator.pem_private_key = ReadAll(dir_ + "/coordinator.key");
  const std::string addr = absl::StrCat("127.0.0.1:", admin_port_);
  for (const auto& [creds, code] :
       std::vector<std::pair<grpc::SslCredentialsOptions, grpc::StatusCode>>{
           {as_coordinator, grpc::StatusCode::PERMISSION_DENIED},
           {o, grpc::StatusCode::UNAVAILABLE}}) {
    auto stub = proto::TaskAdmin::NewStub(grpc::CreateChannel(addr, grpc::SslCredentials(creds)));
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      proto::TaskInfo info;
      EXPECT_EQ(stub->CreateTask(&ctx, SecondTask(1, 2), &info).error_code(), code);
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      proto::TaskRequest r;
      r.set_task_id("default");
      proto::TaskInfo info;
      EXPECT_EQ(stub->DeleteTask(&ctx, r, &info).error_code(), code);
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      proto::ListTasksResponse r;
      EXPECT_EQ(stub->ListTasks(&ctx, {}, &r).error_code(), code);
    }
  }
  // Bad documents: refused naming the field, nothing created.
  proto::CreateTaskRequest no_model = SecondTask(1, 2);
  no_model.mutable_spec()->clear_model();
  proto::CreateTaskRequest bad_layers = SecondTask(1, 2);  // dense on an image
  bad_layers.mutable_spec()->mutable_model()->mutable_layers()->DeleteSubrange(3, 1);
  proto::CreateTaskRequest bad_clip = SecondTask(1, 2);
  bad_clip.mutable_spec()->mutable_privacy()->set_clip(-1);
  proto::CreateTaskRequest bad_weights = SecondTask(1, 2);
  bad_weights.mutable_spec()->mutable_model()->clear_layers();
  bad_weights.mutable_spec()->mutable_model()->clear_dataset();
  bad_weights.mutable_spec()->mutable_model()->clear_init_seed();
  bad_weights.set_weights("truncated safetensors");
  for (const auto& [req, field] : std::vector<std::pair<proto::CreateTaskRequest, std::string>>{
           {no_model, "task_spec.model"},
           {bad_layers, "task_spec.model.layers[3] (dense)"},
           {bad_clip, "task_spec.privacy.clip"},
           {bad_weights, "task_spec.model.weights_file"}}) {
    auto r = Create(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status();
  }
  const std::vector<proto::TaskInfo> tasks = List();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].task_id(), "default");
  EXPECT_EQ(tasks[0].state(), "active");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/coordinator/tasks/second"));
}

}  // namespace
}  // namespace tandem::testing
