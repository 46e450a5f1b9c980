// A federation on one machine: the coordinator logic (cohort sampling with
// rate q, FedAvg or FedLUAR server side, privacy accounting) and N clients
// (local SGD, PREAMBLE reports) in this process, the two aggregation servers
// as real tandem-aggregator daemons on loopback, reached over gRPC.
//
// With private = false the clients' updates are averaged in the clear (the
// baseline the private run is compared with).
#ifndef TANDEM_SERVER_SIM_FEDERATION_H_
#define TANDEM_SERVER_SIM_FEDERATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/data/dataset.h"
#include "ml/data/partition.h"
#include "proto/aggregator.pb.h"
#include "server/core/secure_sum.h"

namespace tandem::sim {

struct FederationOptions {
  std::string name = "fedavg";   // label in the report
  // The aggregators' task. Empty: a fresh id per run ("sim-<name>-<nonce>",
  // for aggregators that allow unprovisioned tasks). Set: a task their
  // operator provisioned for simulations (e.g. deploy/docker-compose.yml's
  // "sim"); a run's rounds are numbered after every earlier run's (the
  // run's start in unix ms x 1000 + round), and the population's budget
  // carries over from run to run, as it should.
  std::string task_id;
  bool fedluar = false;
  // CoIDO: each client scores its data with the global model's embeddings
  // and losses and trains on the selected fraction only.
  bool coido = false;
  double coido_fraction = 0.2;
  int num_recycled = 1;          // FedLUAR R
  bool private_aggregation = true;
  int rounds = 5;
  int clients = 20;
  double sample_rate = 0.5;      // q: each client joins a round with probability q
  int local_steps = 20;
  int64_t batch_size = 32;
  double client_lr = 0.05;
  double server_lr = 1.0;
  std::vector<int64_t> hidden = {32};
  // The model the clients train (sim_models.h): "mlp" (of `hidden`), "cnn"
  // or "deep_cnn" (square one-channel images, e.g. Fashion-MNIST's 28x28).
  std::string model = "mlp";
  // PREAMBLE / DP
  uint32_t block_size = 256;
  uint32_t log_blocks_per_group = 1;  // a client sends 1 of 2^d blocks per group
  // Width of the shared values: 32 or 64, 0 = 32 where the sum fits
  // (server::SecureSumConfig::value_bits).
  uint32_t value_bits = 0;
  // The fraction of its blocks a client sends, in (0, 1]; 0 = 1 / 2^d with
  // d = log_blocks_per_group. Otherwise it sets d (LogBlocksPerGroup below).
  double blocks_fraction = 0;
  // Which block of each group a client sends (client/internal/
  // block_selection.h): RANDOM (unbiased by the coordinator's 2^d scale) or
  // TOP_NORM (the largest block, unscaled; each client keeps what it did
  // not send as its error-feedback residual, client_memory.h). Private
  // rounds only: the clear baseline averages the dense updates.
  proto::BlockSelection block_selection = proto::BLOCK_SELECTION_RANDOM;
  // Report encoding of private rounds (server/core/secure_sum.h): auto picks
  // the one with the smaller upload per round.
  server::EncodingChoice encoding = server::EncodingChoice::kAuto;
  double clip_l2_norm = 2.0;
  double noise_multiplier = 0.3; // sigma / C per aggregator (0 = no noise)
  double delta = 1e-5;
  double epsilon_budget = 0;     // rounds stop once the next would exceed it (0 = none)
  // Every report carries a norm-bound proof that both aggregators check (the
  // private default of tandem-coordinator and of the aggregators' policy).
  bool norm_proofs = false;
  uint32_t min_batch_size = 1;   // no aggregate of fewer reports is released
  double dirichlet_alpha = 0.5;  // label skew of the client split
  // How the training set is split over the clients: "mixture" (per-client
  // Dirichlet(alpha * p) label mixtures, retry-free at any number of
  // clients, ml/data/scalable_partition.h), "dirichlet" (per-class
  // Dirichlet split with redraws, ml/data/partition.h: small federations
  // only), "iid", or "quantity" (IID labels, log-normal sizes).
  std::string partition = "mixture";
  double size_sigma = 0.0;  // log-normal sigma of client sizes ("mixture", "quantity")
  uint64_t seed = 1;
  // Seed of the clients' cryptographic randomness (block choice, DPF keys,
  // report ids): 0 = OpenSSL (the default), otherwise DeterministicRandom
  // for reproducible runs. The aggregators' noise always comes from OpenSSL.
  uint64_t crypto_seed = 0;
  int threads = 1;
  // Clients of a round that train, and reports that are encoded (clip,
  // fixed point, DPF keys, norm proofs, tickets, signatures), at once:
  // 0 = every core (oneTBB). Each client's training depends on (seed,
  // round, client) and each report's randomness on (crypto_seed, round,
  // index) only, so any count gives the same run for fixed seeds.
  int client_threads = 0;
};

// PREAMBLE's d for a model of `model_dimension` parameters. With
// blocks_fraction f > 0: the model has n = ceil(dim / B) blocks and the
// target number of groups (one block sent from each) is k* = max(1,
// round(f * n)); a round's k is ceil(n / 2^d) (SecureSum), so d is the one
// whose k is nearest to k* in ratio (ties: the smaller d, more upload),
// among those with k <= 4096. The sent fraction is then about 1 / 2^d: a
// power of two, the granularity of the block DPF's groups. With f = 0:
// log_blocks_per_group. INVALID_ARGUMENT for f outside [0, 1] or a model
// too large for 4096 groups at any d <= 24.
absl::StatusOr<uint32_t> LogBlocksPerGroup(const FederationOptions& o, uint64_t model_dimension);

// The clients' shards of `train` as FederationOptions.partition says.
// INVALID_ARGUMENT for an unknown partition; the partitioners' errors.
absl::StatusOr<ml::Partition> SplitClients(const FederationOptions& o, const ml::Dataset& train);

// The clients' data as index ranges into the one shared training set: the
// rows of client c are rows[offsets[c]] .. rows[offsets[c + 1] - 1] of it.
// 8 bytes per sample plus 8 per client whatever the number of clients; no
// client's samples are copied until it trains (then only its own, for the
// length of its local steps). Immutable after construction; thread-safe to
// read.
class ClientShards {
 public:
  // Flattens `partition` (every index in [0, samples), each at most once;
  // INVALID_ARGUMENT otherwise, or for an empty partition or client).
  static absl::StatusOr<ClientShards> Create(const ml::Partition& partition, int64_t samples);

  int clients() const { return static_cast<int>(offsets_.size()) - 1; }
  absl::Span<const int64_t> rows(int client) const {
    return absl::MakeConstSpan(rows_).subspan(offsets_[client],
                                              offsets_[client + 1] - offsets_[client]);
  }
  // Heap bytes held (the benchmark's memory figure).
  size_t bytes() const { return (rows_.capacity() + offsets_.capacity()) * sizeof(int64_t); }

 private:
  ClientShards() = default;
  std::vector<int64_t> rows_;
  std::vector<int64_t> offsets_;
};

// SplitClients as ClientShards (the transient Partition is freed).
absl::StatusOr<ClientShards> ShardClients(const FederationOptions& o, const ml::Dataset& train);

struct RoundRecord {
  std::string variant;
  int round = 0;
  int participants = 0;
  uint64_t accepted_reports = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  uint64_t bytes_up = 0;         // all clients, this round
  // The same clients' updates as clear FedAvg and as Prio3-style dense
  // two-server sharing (server/core/upload_baselines.h), this round.
  uint64_t clear_bytes_up = 0;
  uint64_t dense_bytes_up = 0;
  std::string encoding;          // private rounds: "preamble" or "dense" (secure_sum.h)
  uint64_t bytes_down = 0;       // model download, all clients
  double epsilon = 0;            // cumulative, at `delta`
  double seconds = 0;
  // Where the round's wall time went (all clients of the round, one thread):
  // local training (incl. the client's copy of its rows and FedLUAR
  // packing), encoding (clipping, fixed point, PREAMBLE key shares, norm
  // proofs, tickets, request serialization) and aggregation (uploads to
  // both daemons, their verification and expansion, the release and its
  // decoding; the clear baseline: the plain mean).
  double train_seconds = 0;
  double encode_seconds = 0;
  double aggregate_seconds = 0;
  // Floating-point operations of the round's local training (3x the
  // forward pass per sample and step: forward, input and weight
  // gradients; 0 where the training is a callback's).
  double train_flops = 0;
};

// A running aggregator pair as its coordinator reaches it.
struct AggregatorEndpoints {
  std::string leader;  // upload listeners ("host:port")
  std::string helper;
  // Collector listeners; empty: the upload address (plaintext, shared port).
  std::string leader_collector;
  std::string helper_collector;
  // TLS and tickets: coordinator.{pem,key} and ticket.key, with the roots
  // either in one ca.pem (tests/testing/certificates.h MakeRoleCertificates)
  // or per party, <party>-roots.pem (deploy/make-certs.sh); servers named
  // leader.tandem / helper.tandem. Empty: plaintext, and aggregators that
  // accept unticketed uploads.
  std::string certs_dir;
};


// Runs one variant and calls `progress` after each round. INVALID_ARGUMENT
// for bad options (including MakeSimModel's) or a client whose local
// training diverged (a non-finite update); the aggregators' errors
// propagate.
absl::StatusOr<std::vector<RoundRecord>> RunFederation(
    const FederationOptions& options, const ml::Dataset& train, const ml::Dataset& test,
    const AggregatorEndpoints& aggregators,
    const std::function<void(const RoundRecord&)>& progress);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_FEDERATION_H_
