#include "server/sim/process_federation.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "ml/model/model_zoo.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/task_admin.grpc.pb.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/enrollment.h"

namespace tandem::sim {
namespace {

using testing::ChildProcess;
using testing::RootsFile;
using testing::DaemonProcess;

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The federation's task as the document an operator would write.
proto::TaskSpec TaskSpecOf(const FederationOptions& o, const ProcessOptions& p,
                           uint32_t log_blocks_per_group) {
  proto::TaskSpec s;
  s.set_task_id(o.name);
  proto::TaskModelSpec& m = *s.mutable_model();
  for (int64_t h : o.hidden) m.add_mlp_hidden(h);
  m.set_dataset(p.dataset);
  m.set_init_seed(o.seed);
  proto::TaskTrainingSpec& t = *s.mutable_training();
  t.set_local_steps(o.local_steps);
  t.set_batch_size(o.batch_size);
  t.set_learning_rate(o.client_lr);
  t.set_coido_fraction(o.coido ? o.coido_fraction : 1.0);
  t.set_server_lr(o.server_lr);
  t.set_fedluar_recycled(o.fedluar ? o.num_recycled : 0);
  t.set_fedluar_seed(o.seed);
  proto::TaskEncodingSpec& e = *s.mutable_encoding();
  e.set_block_size(o.block_size);
  e.set_log_blocks_per_group(log_blocks_per_group);
  if (o.value_bits != 0) e.set_value_bits(o.value_bits);
  e.set_block_selection(o.block_selection == proto::BLOCK_SELECTION_TOP_NORM ? "topk" : "random");
  e.set_encoding(std::string(server::EncodingChoiceName(o.encoding)));
  proto::TaskPrivacySpec& v = *s.mutable_privacy();
  v.set_clip(o.clip_l2_norm);
  v.set_noise_multiplier(o.noise_multiplier);
  v.set_norm_proofs(o.norm_proofs);
  v.set_delta(o.delta);
  v.set_epsilon_budget(o.epsilon_budget);
  v.set_min_batch_size(o.min_batch_size);
  v.set_sample_rate(o.sample_rate);
  proto::TaskRoundsSpec& r = *s.mutable_rounds();
  r.set_rounds(o.rounds);
  r.set_min_reports(o.min_batch_size);
  r.set_max_reports(std::max(1, o.clients));
  r.set_round_timeout_s(p.round_timeout_s);
  r.set_enrollment_s(p.enrollment_s);
  return s;
}

// TaskAdmin.CreateTask on the coordinator's admin listener, with the
// operator's certificate (mutual TLS).
absl::Status CreateTask(const proto::TaskSpec& spec, const std::string& certs,
                        const std::string& admin_address) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ReadFileOrEmpty(RootsFile(certs, "client"));
  tls.pem_cert_chain = ReadFileOrEmpty(certs + "/operator.pem");
  tls.pem_private_key = ReadFileOrEmpty(certs + "/operator.key");
  if (tls.pem_cert_chain.empty() || tls.pem_private_key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        certs, " has no operator certificate (operator.pem): remake it with deploy/make-certs.sh"));
  }
  auto stub =
      proto::TaskAdmin::NewStub(grpc::CreateChannel(admin_address, grpc::SslCredentials(tls)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  proto::CreateTaskRequest req;
  *req.mutable_spec() = spec;
  proto::TaskInfo info;
  const grpc::Status s = stub->CreateTask(&ctx, req, &info);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("creating task ", spec.task_id(), ": ", s.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<RoundRecord>> RunProcessFederation(
    const FederationOptions& o, const ProcessOptions& p, const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress) {
  if (!o.private_aggregation) {
    return absl::InvalidArgumentError("process mode always aggregates privately");
  }
  if (aggregators.certs_dir.empty() || aggregators.leader_collector.empty() ||
      aggregators.helper_collector.empty()) {
    return absl::InvalidArgumentError(
        "process mode runs with TLS, roles and tickets: it needs the certificates directory and "
        "both collector addresses");
  }
  if (o.model != "mlp") {
    return absl::InvalidArgumentError(
        "process mode trains MLPs only (tandem-coordinator serves proto ModelSpec MLPs)");
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model,
                          ml::MakeMlp(p.input_dim, o.hidden, p.num_classes));
  TANDEM_ASSIGN_OR_RETURN(const uint32_t log_blocks_per_group,
                          LogBlocksPerGroup(o, static_cast<uint64_t>(model->num_params())));
  const std::string& certs = aggregators.certs_dir;
  const std::string dir = absl::StrCat(p.work_dir, "/", o.name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // The coordinator runs no command-line task: its task is created through
  // the task API with the operator's certificate, as an operator would
  // (tandem-admin task create; issue 33 item 9).
  std::vector<std::string> args = {
      // The collector listeners with the coordinator's certificate; the
      // upload listeners and TLS names announced to clients.
      "--listen=127.0.0.1:0",
      "--leader=" + aggregators.leader_collector,
      "--helper=" + aggregators.helper_collector,
      "--announce_leader=" + aggregators.leader,
      "--announce_helper=" + aggregators.helper,
      "--leader_name=leader.tandem",
      "--helper_name=helper.tandem",
      "--tls_cert=" + certs + "/coordinator.pem",
      "--tls_key=" + certs + "/coordinator.key",
      "--tls_ca=" + RootsFile(certs, "coordinator"),
      "--ticket_key=" + certs + "/ticket.key",
      "--state_dir=" + dir + "/coordinator",
      "--nocommand_line_task",
      "--admin_listen=127.0.0.1:0",
      "--admin_identities=operator.tandem",
      "--admin_ca=" + certs + "/coordinator-ca.pem",
      absl::StrCat("--eval_items=", p.eval_items),
      absl::StrCat("--data_seed=", o.seed)};
  // Device enrollment as an operator runs it: an enrollment key whose public
  // half the coordinator trusts, and one single-use token per client (what
  // an app's backend hands each device; `tandem-admin token mint`).
  TANDEM_ASSIGN_OR_RETURN(const std::string enroll_pub, testing::EnsureEnrollmentKey(dir));
  args.push_back("--enrollment_keys=" + enroll_pub);
  std::vector<std::string> tokens;
  for (int k = 0; k < o.clients; ++k) {
    TANDEM_ASSIGN_OR_RETURN(std::string path, testing::WriteEnrollmentToken(
                                                  dir, absl::StrCat(dir, "/client", k, ".token")));
    tokens.push_back(std::move(path));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DaemonProcess> coordinator,
                          DaemonProcess::Start(p.coordinator_bin, args, dir + "/coordinator.log"));
  const std::string address = testing::Loopback(coordinator->port());
  TANDEM_RETURN_IF_ERROR(CreateTask(TaskSpecOf(o, p, log_blocks_per_group), certs,
                                    testing::Loopback(coordinator->named_port("admin"))));
  std::vector<std::unique_ptr<ChildProcess>> clients;
  for (int k = 0; k < o.clients; ++k) {
    const std::string id = absl::StrCat("client", k);
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> c,
        ChildProcess::Spawn(
            p.client_bin,
            {"--coordinator=" + address, "--client_id=" + id, "--task_id=" + o.name,
             "--tls_ca=" + RootsFile(certs, "client"),
             // Pinned: the client checks what the coordinator announces.
             "--leader=" + aggregators.leader, "--leader_name=leader.tandem",
             "--helper=" + aggregators.helper, "--helper_name=helper.tandem",
             "--dataset=" + p.dataset, absl::StrCat("--data_seed=", o.seed),
             absl::StrCat("--train_items=", p.train_items),
             absl::StrCat("--num_shards=", o.clients), absl::StrCat("--shard=", k),
             absl::StrCat("--alpha=", o.dirichlet_alpha), "--state_dir=" + dir + "/" + id,
             "--max_errors=100", "--enrollment_token_file=" + tokens[k],
             absl::StrCat("--seed=", o.seed * 1000 + k + 1)},
            dir + "/clients.log"));
    clients.push_back(std::move(c));
  }

  grpc::SslCredentialsOptions roots;
  {
    std::ifstream in(RootsFile(certs, "client"));
    roots.pem_root_certs.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto stub = proto::Coordinator::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(roots)));
  std::vector<RoundRecord> records;
  const absl::Time end = absl::Now() + absl::Seconds(p.round_timeout_s * (o.rounds + 1));
  while (absl::Now() < end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    proto::CoordinatorStatusResponse s;
    if (stub->Status(&ctx, proto::CoordinatorStatusRequest(), &s).ok()) {
      for (int i = static_cast<int>(records.size()); i < s.history_size(); ++i) {
        const proto::RoundSummary& h = s.history(i);
        RoundRecord r;
        r.variant = o.name;
        r.round = static_cast<int>(h.model_version());
        r.participants = static_cast<int>(h.uploads_done());
        r.accepted_reports = h.accepted_reports();
        r.test_accuracy = h.accuracy();
        r.test_loss = h.loss();
        r.bytes_up = h.bytes_up();
        // The coordinator's baselines for the round's real D (FedLUAR rounds
        // send fewer tensors than the model has).
        r.clear_bytes_up = h.clear_bytes_up();
        r.dense_bytes_up = h.dense_bytes_up();
        r.encoding = h.encoding();
        r.bytes_down = h.bytes_down();
        r.epsilon = h.epsilon();
        r.seconds = h.seconds();
        records.push_back(r);
        if (progress) progress(r);
      }
      if (s.phase() == "done") break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  for (auto& c : clients) {
    if (!c->Wait(absl::Seconds(30)).ok()) c->Kill();
  }
  (void)coordinator->Terminate();
  if (records.size() < static_cast<size_t>(o.rounds) && o.epsilon_budget == 0) {
    return absl::DeadlineExceededError(absl::StrCat(o.name, ": only ", records.size(), " of ",
                                                    o.rounds, " rounds released; logs in ", dir));
  }
  return records;
}

}  // namespace tandem::sim
