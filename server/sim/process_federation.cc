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
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/enrollment.h"

namespace tandem::sim {
namespace {

using testing::ChildProcess;
using testing::RootsFile;
using testing::DaemonProcess;

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
  // Dense 2-server secret sharing of the full update: 2 x 8 bytes x params
  // of the model the coordinator builds (ml/model_zoo).
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Model> model,
                          ml::MakeMlp(p.input_dim, o.hidden, p.num_classes));
  const uint64_t dense_per_client = 2 * 8 * static_cast<uint64_t>(model->num_params());
  TANDEM_ASSIGN_OR_RETURN(const uint32_t log_blocks_per_group,
                          LogBlocksPerGroup(o, static_cast<uint64_t>(model->num_params())));
  const std::string& certs = aggregators.certs_dir;
  const std::string dir = absl::StrCat(p.work_dir, "/", o.name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> hidden;
  for (int64_t h : o.hidden) hidden.push_back(absl::StrCat(h));
  std::vector<std::string> args = {
      // The collector listeners with the coordinator's certificate; the
      // upload listeners and TLS names announced to clients.
      "--listen=127.0.0.1:0", "--leader=" + aggregators.leader_collector,
      "--helper=" + aggregators.helper_collector, "--announce_leader=" + aggregators.leader,
      "--announce_helper=" + aggregators.helper, "--leader_name=leader.tandem",
      "--helper_name=helper.tandem", "--tls_cert=" + certs + "/coordinator.pem",
      "--tls_key=" + certs + "/coordinator.key", "--tls_ca=" + RootsFile(certs, "coordinator"),
      "--ticket_key=" + certs + "/ticket.key", "--state_dir=" + dir + "/coordinator",
      o.norm_proofs ? "--norm_proofs" : "--nonorm_proofs",
      absl::StrCat("--min_batch_size=", o.min_batch_size),
      "--task_id=" + o.name, "--dataset=" + p.dataset,
      absl::StrCat("--eval_items=", p.eval_items), absl::StrCat("--data_seed=", o.seed),
      "--hidden=" + absl::StrJoin(hidden, ","), absl::StrCat("--init_seed=", o.seed),
      absl::StrCat("--rounds=", o.rounds), absl::StrCat("--sample_rate=", o.sample_rate),
      absl::StrCat("--min_reports=", o.min_batch_size),
      absl::StrCat("--max_reports=", std::max(1, o.clients)),
      absl::StrCat("--enrollment_s=", p.enrollment_s),
      absl::StrCat("--round_timeout_s=", p.round_timeout_s),
      absl::StrCat("--num_recycled=", o.fedluar ? o.num_recycled : 0),
      absl::StrCat("--fedluar_seed=", o.seed), absl::StrCat("--block_size=", o.block_size),
      absl::StrCat("--log_blocks_per_group=", log_blocks_per_group),
      o.block_selection == proto::BLOCK_SELECTION_TOP_NORM ? "--block_selection=topk"
                                                           : "--block_selection=random",
      absl::StrCat("--clip=", o.clip_l2_norm), absl::StrCat("--noise_multiplier=", o.noise_multiplier),
      absl::StrCat("--delta=", o.delta), absl::StrCat("--epsilon_budget=", o.epsilon_budget),
      absl::StrCat("--local_steps=", o.local_steps), absl::StrCat("--batch_size=", o.batch_size),
      absl::StrCat("--client_lr=", o.client_lr), absl::StrCat("--server_lr=", o.server_lr),
      absl::StrCat("--coido_fraction=", o.coido ? o.coido_fraction : 1.0)};
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
        r.dense_bytes_up = dense_per_client * h.uploads_done();
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
