// tandem-sim: a private federation on this machine. Starts both aggregation
// servers as real tandem-aggregator processes on loopback, splits the data
// among N clients (Dirichlet label skew), runs R rounds per variant (FedAvg,
// FedLUAR; private = PREAMBLE block-sparse DPF reports + discrete Gaussian
// noise, and a clear-text FedAvg baseline), prints progress and writes a
// report folder (metrics.csv, metrics.json, report.html). --model picks the
// clients' model (sim_models.h); --block_selection and --blocks_fraction set
// which and how many blocks each private report carries; --noise_sweep runs
// every private variant once per noise multiplier (the report's
// privacy-utility plot).
//   tandem-sim --rounds=5 --clients=20 --report_dir=reports/latest
//   tandem-sim --model=deep_cnn --block_selection=top_norm --blocks_fraction=0.25
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/logging.h"
#include "ml/data/dataset.h"
#include "server/sim/federation.h"
#include "server/sim/private_mean.h"
#include "server/sim/process_federation.h"
#include "server/sim/report.h"
#include "server/sim/sim_models.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

ABSL_FLAG(std::string, mode, "inprocess",
          "inprocess: clients simulated in this process (fast, many clients); processes: "
          "tandem-coordinator and one tandem-client process per client");
ABSL_FLAG(std::string, bin_dir, "", "directory of the build tree (default: next to tandem-sim)");
ABSL_FLAG(std::string, dataset, "fmnist", "fmnist (Debian dataset-fashion-mnist) or digits");
ABSL_FLAG(int64_t, train_items, 0, "training images used (0 = all)");
ABSL_FLAG(int64_t, test_items, 2000, "test images used (0 = all)");
ABSL_FLAG(std::string, variants, "fedavg,fedluar,fedluar-coido",
          "private variants: fedavg, fedluar, fedluar-coido");
ABSL_FLAG(bool, baseline, true, "also run clear-text FedAvg (no PREAMBLE, no DP)");
ABSL_FLAG(int, rounds, 5, "rounds per variant");
ABSL_FLAG(int, clients, 1000, "clients in the federation");
ABSL_FLAG(double, sample_rate, 0.1, "q: probability that a client joins a round");
ABSL_FLAG(int, local_steps, 20, "local SGD steps per round");
ABSL_FLAG(double, client_lr, 0.05, "client learning rate");
ABSL_FLAG(double, alpha, 0.5, "Dirichlet label-skew parameter");
ABSL_FLAG(std::string, partition, "mixture",
          "client split: mixture (per-client Dirichlet(alpha p) label mixtures, any number of "
          "clients), dirichlet (per-class split with redraws, small federations), iid, quantity");
ABSL_FLAG(double, size_sigma, 0.0,
          "log-normal sigma of client sizes for --partition=mixture|quantity (0 = equal)");
ABSL_FLAG(std::string, hidden, "32", "MLP hidden widths, comma separated");
ABSL_FLAG(std::string, model, "mlp",
          "model the clients train: mlp (--hidden), cnn or deep_cnn (8 weight tensors; square "
          "images such as Fashion-MNIST's; --mode=inprocess only)");
ABSL_FLAG(int, num_recycled, 1, "FedLUAR: weight tensors recycled per round");
ABSL_FLAG(int, block_size, 256, "PREAMBLE block size B");
ABSL_FLAG(int, log_blocks_per_group, 1,
          "PREAMBLE d: one of 2^d blocks per group is sent (upload ~ 1/2^d)");
ABSL_FLAG(int, value_bits, 0,
          "width of the shared values, 32 or 64 (0: 32 where the round's sum and noise fit)");
ABSL_FLAG(double, blocks_fraction, 0,
          "fraction of its blocks a client sends, in (0, 1]; sets d to the nearest power of two "
          "(0 = use --log_blocks_per_group)");
ABSL_FLAG(std::string, block_selection, "random",
          "private variants: random (one uniform block per group, unbiased by 2^d) or top_norm "
          "(the largest block per group, the rest kept as the client's error feedback)");
ABSL_FLAG(std::string, encoding, "auto",
          "private variants' report encoding: auto (per round, the smaller upload), preamble or "
          "dense");
ABSL_FLAG(double, clip, 1.0, "L2 clipping bound C of each update");
ABSL_FLAG(double, noise_multiplier, 0.5, "discrete Gaussian sigma / C per aggregator");
ABSL_FLAG(std::string, noise_sweep, "",
          "comma-separated noise multipliers, e.g. 0.5,1,2: every private variant runs once per "
          "value (replaces --noise_multiplier; the report's privacy-utility plot joins them)");
ABSL_FLAG(double, max_upload_vs_dense, 0,
          "> 0: each private variant's d is the smallest whose reports upload at most this "
          "multiple of dense two-server sharing (replaces --log_blocks_per_group and "
          "--blocks_fraction)");
ABSL_FLAG(double, target_epsilon, 0,
          "> 0: each private variant's noise multiplier is the least for which its --rounds "
          "rounds stay within this epsilon, crediting PREAMBLE's random block sampling "
          "(replaces --noise_multiplier; excludes --noise_sweep)");
ABSL_FLAG(double, epsilon_budget, 0,
          "stop a private variant before a round would exceed this epsilon (0 = no limit)");
ABSL_FLAG(uint64_t, seed, 1, "seed of data split, init and sampling");
ABSL_FLAG(std::string, task_id, "",
          "with --leader (aggregators running elsewhere): the task their operators provisioned "
          "for simulations; empty = a fresh task id per configuration (aggregators that allow "
          "unprovisioned tasks)");
ABSL_FLAG(std::string, report_dir, "reports/latest", "where the report is written");
ABSL_FLAG(std::string, aggregator_bin, "", "tandem-aggregator binary (default: build tree)");
ABSL_FLAG(std::string, leader, "",
          "use a running leader aggregator (its upload listener host:port) instead of starting one");
ABSL_FLAG(std::string, helper, "", "use a running helper aggregator (with --leader)");
ABSL_FLAG(std::string, leader_collector, "",
          "the running leader's collector listener host:port (with --leader and --certs_dir)");
ABSL_FLAG(std::string, helper_collector, "", "the running helper's collector listener host:port");
ABSL_FLAG(std::string, certs_dir, "",
          "TLS and ticket material (deploy/make-certs.sh output, or ca.pem + per-role files): "
          "for the aggregators started here, or for running ones with --leader (then empty "
          "means plaintext, unticketed aggregators); empty without --leader: made afresh");
ABSL_FLAG(bool, norm_proofs, true,
          "every report carries a norm-bound proof both aggregators check");
ABSL_FLAG(int32_t, client_threads, 0,
          "clients trained and reports encoded at once with --mode=inprocess (0: every "
          "core); the run is the same for any count");
ABSL_FLAG(std::string, aggregator_store, "segments",
          "share storage of the aggregators started here: segments (append-only segment "
          "files indexed by SQLite, the daemons' --segment_share_files) or sqlite (shares "
          "in the SQLite file, the daemons' default); both fsync every acknowledged upload");
ABSL_FLAG(bool, aggregator_relaxed_durability, false,
          "the aggregators started here commit without fsync (their relaxed_durability: "
          "every acknowledged upload survives a SIGKILL of the daemon, not a power loss; "
          "their state folder is deleted at exit anyway)");
ABSL_FLAG(uint32_t, min_batch_size, 1,
          "no aggregate of fewer reports is released (the daemons' own default is 10)");

namespace {

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

// The build tree's root (binaries live at their CMake paths below it).
std::string BinDir() {
  if (!absl::GetFlag(FLAGS_bin_dir).empty()) return absl::GetFlag(FLAGS_bin_dir);
  return SelfDir() + "/../..";
}

// The aggregators' policy for this run: its smallest noise multiplier `z`
// as the floor (0 = a run without DP, an explicit choice of the simulator's
// operator), its minimum batch, norm proofs as asked, the simulator's
// Poisson rate as the trusted sampling rate, and its budget (none when 0).
std::string SimPolicy(double z) {
  const double budget = absl::GetFlag(FLAGS_epsilon_budget);
  // Every digit: a floor rounded up would refuse the variant it came from.
  return absl::StrCat("min_noise_multiplier: ", absl::StrFormat("%.17g", z),
                      " min_batch_size: ", absl::GetFlag(FLAGS_min_batch_size),
                      " require_norm_proofs: ", absl::GetFlag(FLAGS_norm_proofs) ? "true" : "false",
                      " sampling_rate: ", absl::GetFlag(FLAGS_sample_rate), " epsilon_budget: ",
                      z > 0 && budget > 0 ? absl::StrCat(budget) : std::string("inf"));
}

// Where a variant's time went: client updates per second of each phase
// (bench/sim.md compares them with their compute bounds).
void PrintPhases(const std::string& variant,
                 const std::vector<tandem::sim::RoundRecord>& records) {
  double train = 0, encode = 0, aggregate = 0, flops = 0, total = 0;
  long long updates = 0;
  for (const tandem::sim::RoundRecord& r : records) {
    train += r.train_seconds;
    encode += r.encode_seconds;
    aggregate += r.aggregate_seconds;
    flops += r.train_flops;
    total += r.seconds;
    updates += r.participants;
  }
  const auto rate = [&](double seconds) { return seconds > 0 ? updates / seconds : 0.0; };
  if (train + encode + aggregate <= 0) {
    // Process mode: the phases run in the tandem-client processes.
    std::printf("[%-26s] %lld client updates in %.2f s (%.1f /s; per-phase times are "
                "measured in --mode=inprocess only)\n",
                variant.c_str(), updates, total, rate(total));
    std::fflush(stdout);
    return;
  }
  std::printf("[%-26s] %lld client updates in %.2f s (%.1f /s): training %.2f s (%.1f /s, "
              "%.2f GFLOP/s), encoding %.2f s (%.1f /s), aggregation %.2f s (%.1f /s)\n",
              variant.c_str(), updates, total, rate(total), train, rate(train),
              train > 0 ? flops / train / 1e9 : 0.0, encode, rate(encode), aggregate,
              rate(aggregate));
  std::fflush(stdout);
}

// The cost of privacy in one line: what a client uploaded per round against
// the same update as clear FedAvg and as Prio3-style dense two-server
// sharing (server/core/upload_baselines.h).
void PrintBytes(const std::string& variant, const std::vector<tandem::sim::RoundRecord>& records) {
  double up = 0, clear = 0, dense = 0, clients = 0;
  int dense_rounds = 0, private_rounds = 0;
  for (const tandem::sim::RoundRecord& r : records) {
    dense_rounds += r.encoding == "dense";
    private_rounds += !r.encoding.empty();
    up += r.bytes_up;
    clear += r.clear_bytes_up;
    dense += r.dense_bytes_up;
    clients += r.participants;
  }
  if (clients <= 0 || clear <= 0 || dense <= 0) return;
  std::printf(
      "[%-26s] a client sent %.0f B per round, %.1f bits per coordinate: %.3fx clear "
      "FedAvg (%.0f B), %.3fx dense two-server sharing (%.0f B)%s\n",
      variant.c_str(), up / clients, 32.0 * up / clear, up / clear, clear / clients, up / dense,
      dense / clients,
      private_rounds == 0
          ? ""
          : absl::StrFormat("; dense encoding in %d of %d rounds", dense_rounds, private_rounds)
                .c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tandem federation simulator (real aggregators on loopback)");
  absl::ParseCommandLine(argc, argv);

  auto data = tandem::ml::LoadNamedDataset(absl::GetFlag(FLAGS_dataset), absl::GetFlag(FLAGS_seed),
                                           absl::GetFlag(FLAGS_train_items),
                                           absl::GetFlag(FLAGS_test_items));
  if (!data.ok()) {
    std::fprintf(stderr, "cannot load %s: %s (run deploy/install-deps.sh)\n",
                 absl::GetFlag(FLAGS_dataset).c_str(), data.status().ToString().c_str());
    return 1;
  }
  const tandem::ml::Dataset& train = data->first;
  const tandem::ml::Dataset& test = data->second;

  // The run's options, checked before any daemon starts.
  std::vector<tandem::sim::FederationOptions> runs;
  tandem::sim::FederationOptions base;
  base.rounds = absl::GetFlag(FLAGS_rounds);
  base.clients = absl::GetFlag(FLAGS_clients);
  base.sample_rate = absl::GetFlag(FLAGS_sample_rate);
  base.local_steps = absl::GetFlag(FLAGS_local_steps);
  base.client_lr = absl::GetFlag(FLAGS_client_lr);
  base.dirichlet_alpha = absl::GetFlag(FLAGS_alpha);
  base.partition = absl::GetFlag(FLAGS_partition);
  base.size_sigma = absl::GetFlag(FLAGS_size_sigma);
  base.num_recycled = absl::GetFlag(FLAGS_num_recycled);
  base.hidden.clear();
  for (absl::string_view h : absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',', absl::SkipEmpty())) {
    int64_t w = 0;
    if (!absl::SimpleAtoi(h, &w) || w < 1) {
      std::fprintf(stderr, "--hidden must be positive integers separated by commas\n");
      return 2;
    }
    base.hidden.push_back(w);
  }
  base.model = absl::GetFlag(FLAGS_model);
  base.block_size = static_cast<uint32_t>(absl::GetFlag(FLAGS_block_size));
  base.log_blocks_per_group = static_cast<uint32_t>(absl::GetFlag(FLAGS_log_blocks_per_group));
  base.blocks_fraction = absl::GetFlag(FLAGS_blocks_fraction);
  base.value_bits = static_cast<uint32_t>(absl::GetFlag(FLAGS_value_bits));
  if (const std::string sel = absl::GetFlag(FLAGS_block_selection); sel == "top_norm") {
    base.block_selection = tandem::proto::BLOCK_SELECTION_TOP_NORM;
  } else if (sel != "random") {
    std::fprintf(stderr, "--block_selection must be random or top_norm\n");
    return 2;
  }
  if (auto choice = tandem::server::EncodingChoiceFromName(absl::GetFlag(FLAGS_encoding));
      choice.ok()) {
    base.encoding = *choice;
  } else {
    std::fprintf(stderr, "--%s\n", std::string(choice.status().message()).c_str());
    return 2;
  }
  // The model and what each private report carries of it, checked before
  // any variant runs.
  auto model = tandem::sim::MakeSimModel(base.model, train.features.cols(), base.hidden,
                                         train.num_classes);
  if (!model.ok()) {
    std::fprintf(stderr, "--model: %s\n", model.status().ToString().c_str());
    return 2;
  }
  const auto dimension = static_cast<uint64_t>((*model)->num_params());
  auto log_blocks = tandem::sim::LogBlocksPerGroup(base, dimension);
  if (!log_blocks.ok()) {
    std::fprintf(stderr, "%s\n", log_blocks.status().ToString().c_str());
    return 2;
  }
  const uint64_t blocks = (dimension + base.block_size - 1) / base.block_size;
  const uint64_t groups = (blocks + (uint64_t{1} << *log_blocks) - 1) >> *log_blocks;
  std::printf(
      "model %s: %llu parameters, %llu blocks of %u; private reports: %s, d=%u, "
      "one block from each of %llu groups (%.1f%% of the blocks%s)\n",
      base.model.c_str(), static_cast<unsigned long long>(dimension),
      static_cast<unsigned long long>(blocks), base.block_size,
      absl::GetFlag(FLAGS_block_selection).c_str(), *log_blocks,
      static_cast<unsigned long long>(groups), 100.0 * groups / blocks,
      absl::GetFlag(FLAGS_max_upload_vs_dense) != 0 ? "; --max_upload_vs_dense sets d per variant"
                                                    : "");
  // The noise multipliers the private variants run with: --noise_sweep's,
  // else --noise_multiplier alone.
  std::vector<double> noises;
  for (absl::string_view z :
       absl::StrSplit(absl::GetFlag(FLAGS_noise_sweep), ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(z, &v) || !(v >= 0) || std::isinf(v)) {
      std::fprintf(stderr, "--noise_sweep must be non-negative numbers separated by commas\n");
      return 2;
    }
    noises.push_back(v);
  }
  const bool sweep = !noises.empty();
  const double target_epsilon = absl::GetFlag(FLAGS_target_epsilon);
  const double upload_cap = absl::GetFlag(FLAGS_max_upload_vs_dense);
  if (sweep && target_epsilon != 0) {
    std::fprintf(stderr, "--target_epsilon sets the noise: it excludes --noise_sweep\n");
    return 2;
  }
  if (!sweep) noises.push_back(absl::GetFlag(FLAGS_noise_multiplier));
  if (absl::GetFlag(FLAGS_mode) == "processes" && base.model != "mlp") {
    std::fprintf(stderr, "--mode=processes trains MLPs only (tandem-coordinator's models)\n");
    return 2;
  }

  base.clip_l2_norm = absl::GetFlag(FLAGS_clip);
  base.noise_multiplier = absl::GetFlag(FLAGS_noise_multiplier);
  base.seed = absl::GetFlag(FLAGS_seed);
  base.task_id = absl::GetFlag(FLAGS_task_id);
  base.epsilon_budget = absl::GetFlag(FLAGS_epsilon_budget);
  base.norm_proofs = absl::GetFlag(FLAGS_norm_proofs);
  base.min_batch_size = absl::GetFlag(FLAGS_min_batch_size);
  base.client_threads = absl::GetFlag(FLAGS_client_threads);
  if (absl::GetFlag(FLAGS_baseline)) {
    tandem::sim::FederationOptions o = base;
    o.name = "fedavg-clear";
    o.private_aggregation = false;
    o.block_selection = tandem::proto::BLOCK_SELECTION_RANDOM;  // dense mean: no blocks
    runs.push_back(o);
  }
  // Variant labels say what protects the updates: PREAMBLE alone (secure
  // aggregation) or PREAMBLE with DP noise, and with a sweep the noise.
  std::vector<std::string> families;  // runs[i]'s label without its noise
  if (!runs.empty()) families.push_back(runs[0].name);
  for (double z : noises) {
    std::string suffix = z > 0 || target_epsilon != 0 ? "-preamble-dp" : "-preamble";
    if (base.block_selection == tandem::proto::BLOCK_SELECTION_TOP_NORM) suffix += "-topnorm";
    for (absl::string_view v :
         absl::StrSplit(absl::GetFlag(FLAGS_variants), ',', absl::SkipEmpty())) {
      tandem::sim::FederationOptions o = base;
      o.noise_multiplier = z;
      if (v == "fedavg") {
        o.name = "fedavg" + suffix;
      } else if (v == "fedluar") {
        o.name = "fedluar" + suffix;
        o.fedluar = true;
      } else if (v == "fedluar-coido") {
        o.name = "fedluar-coido" + suffix;
        o.fedluar = true;
        o.coido = true;
      } else {
        std::fprintf(stderr, "unknown variant %s\n", std::string(v).c_str());
        return 2;
      }
      families.push_back(o.name);
      if (sweep) o.name += absl::StrCat("-z", z);
      if (target_epsilon != 0 || upload_cap != 0) {
        if (absl::Status s =
                tandem::sim::ApplySimTargets(upload_cap, target_epsilon, dimension, &o);
            !s.ok()) {
          std::fprintf(stderr, "--max_upload_vs_dense / --target_epsilon: %s\n",
                       s.ToString().c_str());
          return 2;
        }
        std::printf(
            "%s: d=%u, noise multiplier %.4f (upload cap %g x dense sharing, target "
            "epsilon %g over %d rounds; 0: off)\n",
            o.name.c_str(), o.log_blocks_per_group, o.noise_multiplier, upload_cap, target_epsilon,
            o.rounds);
      }
      runs.push_back(o);
    }
  }

  // Either aggregators already running elsewhere (--leader/--helper, e.g.
  // the docker-compose topology) or a pair started here on loopback.
  tandem::sim::AggregatorEndpoints endpoints{
      absl::GetFlag(FLAGS_leader), absl::GetFlag(FLAGS_helper),
      absl::GetFlag(FLAGS_leader_collector), absl::GetFlag(FLAGS_helper_collector),
      absl::GetFlag(FLAGS_certs_dir)};
  std::string state;
  absl::StatusOr<tandem::testing::AggregatorPair> pair;
  if (endpoints.leader.empty() != endpoints.helper.empty()) {
    std::fprintf(stderr, "--leader and --helper go together\n");
    return 2;
  }
  if (endpoints.leader.empty()) {
    std::string bin = absl::GetFlag(FLAGS_aggregator_bin);
    if (bin.empty()) bin = BinDir() + "/aggregator/service/tandem-aggregator";
    // The pair as a deployment runs it: TLS, the collector and peer APIs on
    // their own mutual-TLS ports checked by identity, coordinator-signed
    // upload tickets, and a privacy policy that matches this run (the
    // simulator is the operator of both servers here).
    // Certificates from --certs_dir (deploy/make-certs.sh, as run-main.sh
    // does) or made here.
    state = tandem::testing::MakeTempDir("tandem-sim");
    std::string certs = absl::GetFlag(FLAGS_certs_dir);
    if (certs.empty()) {
      certs = state;
      if (absl::Status s = tandem::testing::MakeRoleCertificates(certs); !s.ok()) {
        std::fprintf(stderr, "cannot make certificates: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    tandem::testing::AggregatorPairOptions po;
    po.certs_dir = certs;
    po.ticket_public_key = certs + "/ticket.pub";
    const std::string store = absl::GetFlag(FLAGS_aggregator_store);
    if (store == "segments") {
      po.extra_args.push_back("--segment_share_files");
    } else if (store != "sqlite") {
      std::fprintf(stderr, "--aggregator_store must be segments or sqlite, not '%s'\n",
                   store.c_str());
      return 1;
    }
    if (absl::GetFlag(FLAGS_aggregator_relaxed_durability)) {
      const std::string config = state + "/aggregator.textproto";
      std::ofstream(config) << "relaxed_durability: true\n";
      po.extra_args.push_back("--config=" + config);
    }
    // The floor: the smallest noise a private variant runs with (after
    // --target_epsilon's calibration).
    double floor = *std::min_element(noises.begin(), noises.end());
    for (const tandem::sim::FederationOptions& o : runs) {
      if (o.private_aggregation) floor = std::min(floor, o.noise_multiplier);
    }
    po.policy = SimPolicy(floor);
    std::printf("aggregator policy: %s\n", po.policy.c_str());
    pair = tandem::testing::StartAggregatorPair(bin, state, po);
    if (!pair.ok()) {
      std::fprintf(stderr, "cannot start the aggregators: %s\n", pair.status().ToString().c_str());
      return 1;
    }
    endpoints = {pair->leader_address(), pair->helper_address(),
                 pair->leader_collector_address(), pair->helper_collector_address(), certs};
  }
  std::printf("tandem-sim: %s, %lld train / %lld test samples, %d clients (alpha %.2f), q=%.2f\n"
              "aggregators: leader %s, helper %s (%s)\n",
              absl::GetFlag(FLAGS_dataset).c_str(), static_cast<long long>(train.size()),
              static_cast<long long>(test.size()), absl::GetFlag(FLAGS_clients),
              absl::GetFlag(FLAGS_alpha), absl::GetFlag(FLAGS_sample_rate),
              endpoints.leader.c_str(), endpoints.helper.c_str(),
              state.empty() ? "running elsewhere" : ("started here, logs in " + state).c_str());

  const bool processes = absl::GetFlag(FLAGS_mode) == "processes";
  if (!processes && absl::GetFlag(FLAGS_mode) != "inprocess") {
    std::fprintf(stderr, "--mode must be inprocess or processes\n");
    return 2;
  }
  tandem::sim::ProcessOptions po;
  po.coordinator_bin = BinDir() + "/server/tandem-coordinator";
  po.client_bin = BinDir() + "/client/tandem-client";
  po.dataset = absl::GetFlag(FLAGS_dataset);
  po.train_items = absl::GetFlag(FLAGS_train_items);
  po.eval_items = absl::GetFlag(FLAGS_test_items);
  po.input_dim = train.features.cols();
  po.num_classes = train.num_classes;
  std::string work;
  if (processes) {
    work = tandem::testing::MakeTempDir("tandem-sim-processes");
    po.work_dir = work;
    std::printf("process mode: tandem-coordinator + %d tandem-client processes per variant, "
                "logs in %s\n", absl::GetFlag(FLAGS_clients), work.c_str());
  }
  std::vector<tandem::sim::RoundRecord> all;
  for (const tandem::sim::FederationOptions& o : runs) {
    const auto show = [&](const tandem::sim::RoundRecord& r) {
      // Against the same updates as clear FedAvg and as dense two-server
      // sharing (server/core/upload_baselines.h).
      const auto x = [&](uint64_t base) {
        return base > 0 ? absl::StrFormat("%.2fx", static_cast<double>(r.bytes_up) / base)
                        : std::string("n/a");
      };
      std::printf(
          "[%-26s] round %2d/%d  clients %2d  reports %2llu  acc %.4f  up %8.1f KiB"
          " (%s clear, %s dense sharing%s%s)  down %8.1f KiB  eps %.3f  %.1fs\n",
          r.variant.c_str(), r.round, o.rounds, r.participants,
          static_cast<unsigned long long>(r.accepted_reports), r.test_accuracy, r.bytes_up / 1024.0,
          x(r.clear_bytes_up).c_str(), x(r.dense_bytes_up).c_str(), r.encoding.empty() ? "" : ", ",
          r.encoding.c_str(), r.bytes_down / 1024.0, r.epsilon, r.seconds);
      std::fflush(stdout);
    };
    // The clear baseline has no coordinator to run: always in process.
    auto records = processes && o.private_aggregation
                       ? tandem::sim::RunProcessFederation(o, po, endpoints, show)
                       : tandem::sim::RunFederation(o, train, test, endpoints, show);
    if (!records.ok()) {
      std::fprintf(stderr, "%s failed: %s\n", o.name.c_str(), records.status().ToString().c_str());
      return 1;
    }
    PrintPhases(o.name, *records);
    PrintBytes(o.name, *records);
    all.insert(all.end(), records->begin(), records->end());
  }
  const std::string dir = absl::GetFlag(FLAGS_report_dir);
  // What the report's parameters table shows: the values the runs used.
  tandem::sim::ReportParameters rp;
  rp.dataset = absl::GetFlag(FLAGS_dataset);
  rp.model = base.model == "mlp" ? absl::StrCat("mlp (hidden ", absl::GetFlag(FLAGS_hidden), ")")
                                 : base.model;
  rp.mode = absl::GetFlag(FLAGS_mode);
  rp.dimension = dimension;
  rp.block_size = base.block_size;
  rp.blocks = blocks;
  rp.log_blocks_per_group = *log_blocks;
  rp.groups = groups;
  rp.block_selection = absl::GetFlag(FLAGS_block_selection);
  rp.clip = base.clip_l2_norm;
  rp.sample_rate = base.sample_rate;
  rp.delta = base.delta;
  rp.rounds = base.rounds;
  rp.clients = base.clients;
  rp.local_steps = base.local_steps;
  rp.client_lr = base.client_lr;
  rp.partition = base.partition;
  rp.alpha = base.dirichlet_alpha;
  rp.norm_proofs = base.norm_proofs;
  for (size_t i = 0; i < runs.size(); ++i) {
    rp.variants.push_back({runs[i].name, families[i], runs[i].private_aggregation,
                           runs[i].private_aggregation ? runs[i].noise_multiplier : 0.0});
  }
  if (absl::Status s = tandem::sim::WriteReport(dir, "tandem federation report", all, rp);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("report: %s/report.html (metrics.csv, metrics.json)\n", dir.c_str());
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS of tandem-sim: %.1f MiB (the aggregator daemons not included)\n",
              usage.ru_maxrss / 1024.0);
  tandem::sim::CloseAggregatorChannels();  // else the daemons' shutdown waits on them
  if (pair.ok()) {
    (void)pair->leader->Terminate();
    (void)pair->helper->Terminate();
    std::filesystem::remove_all(state);
  }
  if (!work.empty()) std::filesystem::remove_all(work);
  return 0;
}
