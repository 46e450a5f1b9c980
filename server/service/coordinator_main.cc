// tandem-coordinator: runs the rounds of federated tasks over the two
// aggregation servers: the one its command line defines and any an operator
// creates through the task API (tandem-admin task create; server/core/
// task_host.h).
//   tandem-coordinator --leader=leader:7101 --helper=helper:7102
//     --announce_leader=leader:7001 --announce_helper=helper:7002
//     --tls_cert=coordinator.pem --tls_key=coordinator.key --tls_ca=ca.pem
//     --ticket_key=ticket.key --state_dir=/tmp/coord --dataset=digits --rounds=5
// or, the task as a document instead of the task flags:
//     ... --task_spec=deploy/tasks/digits-mlp.textproto
// --leader/--helper are the aggregators' collector listeners (mutual TLS with
// this coordinator's certificate, identities pinned by --leader_name /
// --helper_name); --announce_* are their upload listeners, which clients get.
// Defaults are the private ones: TLS, noise multiplier 1.0, norm proofs, min
// batch 10 (quorum 10). Local runs: --insecure_plaintext (loopback only).
// Prints "admin on PORT" and "metrics on PORT" (when serving them), then
// "listening on PORT", once serving; SIGINT /
// SIGTERM shut it down. Restarted with the same --state_dir it resumes the
// task from its checkpoint.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/logging.h"
#include "base/shutdown_signals.h"
#include "base/status_macros.h"
#include "ml/data/dataset.h"
#include "server/core/released_models.h"
#include "server/core/task_spec.h"
#include "server/service/coordinator_daemon.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "listen address host:port (port 0 = any)");
ABSL_FLAG(std::string, leader, "",
          "leader aggregator's collector listener host:port (mutual TLS); must differ from "
          "--helper");
ABSL_FLAG(std::string, helper, "", "helper aggregator's collector listener host:port");
ABSL_FLAG(std::string, leader_name, "leader.tandem",
          "the leader's TLS identity (DNS SAN its certificate must carry; pinned on the "
          "collector channel and announced to clients); must differ from --helper_name");
ABSL_FLAG(std::string, helper_name, "helper.tandem", "the helper's TLS identity");
ABSL_FLAG(std::string, announce_leader, "",
          "leader upload address given to clients (required with TLS; plaintext default "
          "--leader)");
ABSL_FLAG(std::string, announce_helper, "",
          "helper upload address given to clients (required with TLS; plaintext default "
          "--helper)");
ABSL_FLAG(std::string, state_dir, "", "directory of coordinator.db");
ABSL_FLAG(std::string, ticket_key, "",
          "required: Ed25519 upload-ticket signing key, PKCS#8 PEM (openssl genpkey -algorithm "
          "ed25519); the aggregators get its public key (openssl pkey -pubout)");
ABSL_FLAG(bool, insecure_plaintext, false, "no TLS (local runs only)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this coordinator (its server certificate and its client "
          "certificate towards the aggregators; required with TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots verifying the aggregators");
ABSL_FLAG(int, metrics_port, -1,
          "serve Prometheus /metrics on this port, with the live dashboard beside it: the "
          "tasks at / and each task's rounds and plots at /tasks/<task_id> (0 = any, -1 = off)");
ABSL_FLAG(std::string, worker, "",
          "host:port of a tandem-worker (mutual TLS, or plaintext on loopback) that receives each "
          "released model as 'federation.<task_id>' and evaluates it; empty = evaluate here");
ABSL_FLAG(std::string, worker_name, "worker.tandem",
          "the worker's TLS identity (with TLS the coordinator calls it over mutual TLS)");
ABSL_FLAG(std::string, worker_ca, "", "PEM roots verifying the worker (default: --tls_ca)");
ABSL_FLAG(std::string, device_enrollment, "enrolled",
          "who may check in: enrolled (keys an operator enrolled with tandem-admin, or that "
          "redeem an enrollment token) or open (any device key; loopback simulations only)");
ABSL_FLAG(std::string, enrollment_keys, "",
          "comma-separated PEM Ed25519 public keys whose enrollment tokens this coordinator "
          "redeems (tandem-admin token mint signs with the private half)");
ABSL_FLAG(double, checkin_max_skew_s, 60,
          "largest difference between a device's check-in timestamp and this clock");
ABSL_FLAG(double, checkin_rate_per_device, 5,
          "check-ins per second an enrolled device may make (bursts of 30; 0 = no limit)");
ABSL_FLAG(double, checkin_rate_per_address, 0,
          "check-ins per second from one source address (bursts of 4 s worth; 0 = no limit, "
          "the default: NATs put many devices behind one address)");
ABSL_FLAG(std::string, admin_listen, "",
          "operator API listener host:port (device enrollment/revocation; mutual TLS); empty = "
          "none");
ABSL_FLAG(std::string, admin_identities, "",
          "comma-separated certificate identities (DNS SAN or CN) of the operators allowed on "
          "--admin_listen (required with TLS)");
ABSL_FLAG(bool, command_line_task, true,
          "run the task the command line defines (--task_spec or the task flags); "
          "--nocommand_line_task runs only the tasks operators create with tandem-admin task "
          "create (the task API on --admin_listen)");
ABSL_FLAG(int32_t, max_tasks, 64, "most tasks running at once in this coordinator");
ABSL_FLAG(std::string, admin_ca, "",
          "PEM roots verifying the operators' client certificates on --admin_listen (default: "
          "--tls_ca; usually the coordinator operator's own CA)");
ABSL_FLAG(std::string, task_id, "default", "task id");
ABSL_FLAG(std::string, dataset, "digits", "held-out data for evaluation: digits or fmnist");
ABSL_FLAG(int64_t, eval_items, 2000, "fmnist test images used (0 = all)");
ABSL_FLAG(uint64_t, data_seed, 1, "seed of the digits train/test split (clients use the same)");
ABSL_FLAG(std::string, hidden, "32", "MLP hidden widths, comma separated");
ABSL_FLAG(uint64_t, init_seed, 1, "seed of the initial weights");
ABSL_FLAG(uint64_t, rounds, 5, "rounds to release");
ABSL_FLAG(double, sample_rate, 0.5, "q: probability that a checking-in client is assigned");
ABSL_FLAG(uint32_t, min_reports, 10,
          "quorum: fewest uploads that release a round (>= --min_batch_size)");
ABSL_FLAG(uint32_t, min_batch_size, 10,
          "fewest accepted reports the aggregators may release (RoundParameters.dp; each "
          "aggregator's policy may require more)");
ABSL_FLAG(uint32_t, target_reports, 0, "close a round early at this many uploads (0 = deadline)");
ABSL_FLAG(uint32_t, max_reports, 1000, "most reports per round");
ABSL_FLAG(double, round_timeout_s, 30, "seconds from opening to the upload deadline");
ABSL_FLAG(double, enrollment_s, 0,
          "assign check-ins only this long after opening; close once all assigned uploaded "
          "(0 = assign until the deadline)");
ABSL_FLAG(std::string, optimizer, "fedavg", "server optimizer: fedavg, fedadam or dana");
ABSL_FLAG(double, server_lr, 1.0, "server learning rate");
ABSL_FLAG(int, num_recycled, 0, "FedLUAR: weight tensors recycled per round (0 = FedAvg)");
ABSL_FLAG(uint64_t, fedluar_seed, 1, "FedLUAR draw seed");
ABSL_FLAG(uint32_t, block_size, 64, "PREAMBLE block size B");
ABSL_FLAG(uint32_t, log_blocks_per_group, 1, "PREAMBLE d (a client sends 1 of 2^d blocks)");
ABSL_FLAG(double, max_upload_vs_dense, 0,
          "> 0: d is the smallest whose reports upload at most this multiple of dense "
          "two-server sharing (D values at the round's width plus a seed); replaces "
          "--log_blocks_per_group (0 = off)");
ABSL_FLAG(uint32_t, value_bits, 0,
          "width of the shared values, 32 or 64 (0: 32 where the round's sum and noise fit)");
ABSL_FLAG(std::string, block_selection, "random",
          "which block of each group clients send: random (unbiased, the sum is scaled by "
          "2^d) or topk (the largest-norm block, clients keep the rest as error feedback)");
ABSL_FLAG(std::string, encoding, "auto",
          "report encoding: auto (per round, the one with the smaller upload), preamble "
          "(block-sparse DPF keys) or dense (additive shares, helper's from a seed)");
ABSL_FLAG(double, clip, 2.0, "L2 clipping bound C");
ABSL_FLAG(double, noise_multiplier, 1.0,
          "z: discrete Gaussian sigma / L2 sensitivity, added by each aggregator (default 1.0; "
          "0 = off, refused by aggregators with the default policy)");
ABSL_FLAG(bool, norm_proofs, true,
          "clients prove each report's L2 bound in zero knowledge; both aggregators check it "
          "(--nonorm_proofs to disable)");
ABSL_FLAG(double, delta, 1e-5, "delta of the reported epsilon");
ABSL_FLAG(double, epsilon_budget, 0, "stop before a round would exceed this epsilon (0 = none)");
ABSL_FLAG(double, target_epsilon, 0,
          "> 0: the noise multiplier is the least for which --rounds rounds (and their "
          "evaluations) stay within this epsilon, crediting PREAMBLE's random block sampling; "
          "replaces --noise_multiplier, and the budget defaults to it (0 = off)");
ABSL_FLAG(uint32_t, local_steps, 20, "client mini-batch steps per round");
ABSL_FLAG(uint32_t, batch_size, 32, "client batch size");
ABSL_FLAG(double, client_lr, 0.05, "client learning rate");
ABSL_FLAG(double, coido_fraction, 1.0, "CoIDO: fraction of local data a client keeps (1 = all)");
ABSL_FLAG(std::string, task_spec, "",
          "the task as a document: a TaskSpec textproto (proto/task.proto, e.g. "
          "deploy/tasks/digits-mlp.textproto); replaces the task flags (model, training, "
          "encoding, privacy, rounds, evaluation), which are then refused");
ABSL_FLAG(std::string, model_file, "",
          "any model: a safetensors file (e.g. a PyTorch state_dict saved with "
          "tandem.save_safetensors) whose float32 tensors are the task's model and initial "
          "weights; clients train it with their own framework (StepwiseParticipant, Python)");
ABSL_FLAG(int32_t, num_classes, 0,
          "with --model_file: the model's classes (needed for --eval_every; 0 = unknown)");
ABSL_FLAG(uint32_t, eval_every, 0,
          "private federated evaluation: after every N released versions, sampled clients "
          "evaluate the model on their held-out examples through both aggregators (0 = off)");
ABSL_FLAG(uint32_t, eval_max_examples, 100,
          "federated evaluation: examples a client counts at most (its sensitivity)");
ABSL_FLAG(double, eval_loss_clip, 10, "federated evaluation: per-example loss clip (nats)");
ABSL_FLAG(double, eval_noise_multiplier, -1,
          "federated evaluation: noise multiplier per aggregator (< 0: --noise_multiplier)");

namespace {

// The flags a --task_spec replaces.
constexpr const char* kTaskFlags[] = {"task_id",
                                      "dataset",
                                      "hidden",
                                      "init_seed",
                                      "rounds",
                                      "sample_rate",
                                      "min_reports",
                                      "min_batch_size",
                                      "target_reports",
                                      "max_reports",
                                      "round_timeout_s",
                                      "enrollment_s",
                                      "optimizer",
                                      "server_lr",
                                      "num_recycled",
                                      "fedluar_seed",
                                      "block_size",
                                      "log_blocks_per_group",
                                      "max_upload_vs_dense",
                                      "value_bits",
                                      "block_selection",
                                      "encoding",
                                      "clip",
                                      "noise_multiplier",
                                      "norm_proofs",
                                      "delta",
                                      "epsilon_budget",
                                      "target_epsilon",
                                      "local_steps",
                                      "batch_size",
                                      "client_lr",
                                      "coido_fraction",
                                      "model_file",
                                      "num_classes",
                                      "eval_every",
                                      "eval_max_examples",
                                      "eval_loss_clip",
                                      "eval_noise_multiplier"};

absl::StatusOr<tandem::server::ServerOptimizer> ParseOptimizer(const std::string& s) {
  if (s == "fedavg") return tandem::server::ServerOptimizer::kFedAvg;
  if (s == "fedadam") return tandem::server::ServerOptimizer::kFedAdam;
  if (s == "dana") return tandem::server::ServerOptimizer::kDana;
  return absl::InvalidArgumentError("--optimizer must be fedavg, fedadam or dana");
}

absl::StatusOr<std::unique_ptr<tandem::server::CoordinatorDaemon>> Run() {
  using tandem::server::CoordinatorDaemonOptions;
  CoordinatorDaemonOptions d;
  d.listen_address = absl::GetFlag(FLAGS_listen);
  d.leader_address = absl::GetFlag(FLAGS_leader);
  d.helper_address = absl::GetFlag(FLAGS_helper);
  d.state_dir = absl::GetFlag(FLAGS_state_dir);
  d.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  d.worker_address = absl::GetFlag(FLAGS_worker);
  d.worker_name = absl::GetFlag(FLAGS_worker_name);
  d.worker_ca_path = absl::GetFlag(FLAGS_worker_ca);
  d.leader_name = absl::GetFlag(FLAGS_leader_name);
  d.helper_name = absl::GetFlag(FLAGS_helper_name);
  d.ticket_key_path = absl::GetFlag(FLAGS_ticket_key);
  d.tls = {absl::GetFlag(FLAGS_insecure_plaintext), absl::GetFlag(FLAGS_tls_cert),
           absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca), false};
  if (const std::string p = absl::GetFlag(FLAGS_device_enrollment); p == "open") {
    d.device_policy = tandem::server::DevicePolicy::kOpen;
  } else if (p != "enrolled") {
    return absl::InvalidArgumentError("--device_enrollment must be enrolled or open");
  }
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_enrollment_keys), ',', absl::SkipEmpty())) {
    d.enrollment_key_paths.emplace_back(k);
  }
  d.checkin_max_skew = absl::Seconds(absl::GetFlag(FLAGS_checkin_max_skew_s));
  d.checkin_rate_per_device = absl::GetFlag(FLAGS_checkin_rate_per_device);
  d.checkin_rate_per_address = absl::GetFlag(FLAGS_checkin_rate_per_address);
  d.admin_listen_address = absl::GetFlag(FLAGS_admin_listen);
  d.admin_ca_path = absl::GetFlag(FLAGS_admin_ca);
  for (absl::string_view id :
       absl::StrSplit(absl::GetFlag(FLAGS_admin_identities), ',', absl::SkipEmpty())) {
    d.admin_identities.emplace_back(id);
  }
  tandem::server::CoordinatorOptions& c = d.coordinator;
  c.task_id = absl::GetFlag(FLAGS_task_id);
  c.leader.set_address(absl::GetFlag(FLAGS_announce_leader));
  c.helper.set_address(absl::GetFlag(FLAGS_announce_helper));
  c.init_seed = absl::GetFlag(FLAGS_init_seed);
  c.rounds = absl::GetFlag(FLAGS_rounds);
  c.min_reports = absl::GetFlag(FLAGS_min_reports);
  c.target_reports = absl::GetFlag(FLAGS_target_reports);
  c.round_timeout = absl::Seconds(absl::GetFlag(FLAGS_round_timeout_s));
  c.enrollment_window = absl::Seconds(absl::GetFlag(FLAGS_enrollment_s));
  c.evaluation.every = absl::GetFlag(FLAGS_eval_every);
  c.evaluation.max_examples = absl::GetFlag(FLAGS_eval_max_examples);
  c.evaluation.loss_clip = absl::GetFlag(FLAGS_eval_loss_clip);
  c.evaluation.noise_multiplier = absl::GetFlag(FLAGS_eval_noise_multiplier);
  TANDEM_ASSIGN_OR_RETURN(c.task.optimizer, ParseOptimizer(absl::GetFlag(FLAGS_optimizer)));
  c.task.server_lr = absl::GetFlag(FLAGS_server_lr);
  c.task.num_recycled = absl::GetFlag(FLAGS_num_recycled);
  c.task.seed = absl::GetFlag(FLAGS_fedluar_seed);
  c.task.sample_rate = absl::GetFlag(FLAGS_sample_rate);
  c.task.delta = absl::GetFlag(FLAGS_delta);
  c.task.epsilon_budget = absl::GetFlag(FLAGS_epsilon_budget);
  c.target_epsilon = absl::GetFlag(FLAGS_target_epsilon);
  c.task.secure_sum.block_size = absl::GetFlag(FLAGS_block_size);
  c.task.secure_sum.log_blocks_per_group = absl::GetFlag(FLAGS_log_blocks_per_group);
  c.task.secure_sum.value_bits = absl::GetFlag(FLAGS_value_bits);
  c.max_upload_vs_dense = absl::GetFlag(FLAGS_max_upload_vs_dense);
  if (const std::string sel = absl::GetFlag(FLAGS_block_selection); sel == "topk") {
    c.task.secure_sum.block_selection = tandem::proto::BLOCK_SELECTION_TOP_NORM;
  } else if (sel != "random") {
    return absl::InvalidArgumentError("--block_selection must be random or topk");
  }
  TANDEM_ASSIGN_OR_RETURN(c.task.secure_sum.encoding,
                          tandem::server::EncodingChoiceFromName(absl::GetFlag(FLAGS_encoding)));
  c.task.secure_sum.clip_l2_norm = absl::GetFlag(FLAGS_clip);
  c.task.secure_sum.noise_multiplier = absl::GetFlag(FLAGS_noise_multiplier);
  c.task.secure_sum.max_reports = absl::GetFlag(FLAGS_max_reports);
  c.task.secure_sum.min_batch_size = absl::GetFlag(FLAGS_min_batch_size);
  c.task.secure_sum.norm_proofs = absl::GetFlag(FLAGS_norm_proofs);
  c.training.set_local_steps(absl::GetFlag(FLAGS_local_steps));
  c.training.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  c.training.set_learning_rate(absl::GetFlag(FLAGS_client_lr));
  c.training.set_momentum(0.9);
  c.training.set_coido_fraction(absl::GetFlag(FLAGS_coido_fraction));
  for (absl::string_view h : absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',', absl::SkipEmpty())) {
    int64_t width = 0;
    if (!absl::SimpleAtoi(h, &width) || width < 1) {
      return absl::InvalidArgumentError("--hidden must be positive integers separated by commas");
    }
    c.model.add_hidden(width);
  }
  std::string dataset = absl::GetFlag(FLAGS_dataset);
  if (const std::string path = absl::GetFlag(FLAGS_task_spec); !path.empty()) {
    // The task is the document: the flags that would also define it are refused.
    for (const char* name : kTaskFlags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      // (This Abseil keeps IsSpecifiedOnCommandLine private: a flag moved
      // off its default is what defines the task.)
      if (flag != nullptr && flag->CurrentValue() != flag->DefaultValue()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " and --task_spec both define the task: use the spec"));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(const tandem::proto::TaskSpec spec, tandem::server::ReadTaskSpec(path));
    d.boot_spec = spec;
    TANDEM_ASSIGN_OR_RETURN(tandem::server::TaskFromSpec t,
                            tandem::server::TaskOptionsFromSpec(
                                spec, std::filesystem::path(path).parent_path().string()));
    const tandem::proto::Endpoint leader = c.leader, helper = c.helper;
    c = std::move(t.options);
    c.leader = leader;
    c.helper = helper;
    TANDEM_LOG(INFO) << "task " << c.task_id << " (population " << t.population << ") from "
                     << path;
    dataset = t.dataset;  // empty for an opaque model
  } else if (const std::string path = absl::GetFlag(FLAGS_model_file); !path.empty()) {
    // Any model: its tensors and initial weights from the file; the clients'
    // framework trains it (--dataset and --hidden are then unused).
    TANDEM_ASSIGN_OR_RETURN(
        tandem::server::OpaqueModel m,
        tandem::server::OpaqueModelFromFile(path, tandem::server::kMaxOpaqueParams));
    c.model = std::move(m.spec);
    c.model.set_num_classes(absl::GetFlag(FLAGS_num_classes));
    c.initial_params = std::move(m.params);
    dataset.clear();
  }
  d.boot_task = absl::GetFlag(FLAGS_command_line_task);
  if (absl::GetFlag(FLAGS_max_tasks) < 1)
    return absl::InvalidArgumentError("--max_tasks must be >= 1");
  d.max_tasks = static_cast<size_t>(absl::GetFlag(FLAGS_max_tasks));
  // An API task's MLP names its dataset; the held-out split is this
  // process's (--data_seed, --eval_items), loaded when a task asks for it.
  d.load_dataset = [seed = absl::GetFlag(FLAGS_data_seed), items = absl::GetFlag(FLAGS_eval_items)](
                       const std::string& name) -> absl::StatusOr<tandem::ml::Dataset> {
    TANDEM_ASSIGN_OR_RETURN(auto data, tandem::ml::LoadNamedDataset(name, seed, 1, items));
    return std::move(data.second);
  };
  // An MLP's dataset: its input and classes, and the coordinator's held-out
  // evaluation. An opaque model has neither (nothing is loaded).
  tandem::ml::Dataset eval;
  if (!dataset.empty() && d.boot_task) {
    TANDEM_ASSIGN_OR_RETURN(auto data,
                            tandem::ml::LoadNamedDataset(dataset, absl::GetFlag(FLAGS_data_seed), 1,
                                                         absl::GetFlag(FLAGS_eval_items)));
    TANDEM_RETURN_IF_ERROR(tandem::server::FitModelToDataset(data.second, &c.model));
    eval = std::move(data.second);
  }
  return tandem::server::CoordinatorDaemon::Start(std::move(d), std::move(eval),
                                                  tandem::RealClock::Default(),
                                                  tandem::OpenSslRandom::Default());
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tandem coordinator: rounds of federated tasks");
  // State files (SQLite databases, WAL, segments) readable by this user only.
  ::umask(077);
  absl::ParseCommandLine(argc, argv);
  const tandem::ShutdownSignals signals;  // before any thread starts

  absl::StatusOr<std::unique_ptr<tandem::server::CoordinatorDaemon>> daemon = Run();
  if (!daemon.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  // Named ports first: launchers read them up to the "listening on" line.
  if ((*daemon)->admin_port() > 0) std::printf("admin on %d\n", (*daemon)->admin_port());
  if ((*daemon)->metrics_port() >= 0) std::printf("metrics on %d\n", (*daemon)->metrics_port());
  std::printf("listening on %d\n", (*daemon)->port());
  std::fflush(stdout);
  const int sig = signals.Wait([&] {
    const absl::Status s = (*daemon)->ReloadTls();
    TANDEM_LOG(INFO) << "SIGHUP: certificates " << (s.ok() ? "reloaded" : s.ToString());
  });
  TANDEM_LOG(INFO) << "signal " << sig << ": shutting down";
  (*daemon)->Shutdown();
  return 0;
}
