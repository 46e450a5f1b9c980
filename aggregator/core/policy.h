// The privacy policy an aggregator enforces whatever the coordinator asks
// (ARCHITECTURE.md, trust model): a noise floor, a minimum batch, size caps,
// and the server's own privacy budget per task, kept by its own RDP
// accountant over the rounds it released.
//
// Why each server accounts with its own noise only: the DAP/Prio threat
// model assumes one honest server; the other may add no noise at all (or
// collude with the coordinator), so the only noise a server can count on is
// its own discrete Gaussian of variance noise_variance. Its release has L2
// sensitivity Delta = sqrt(norm_bound.max_l2_squared) in integer units when
// both servers prove the norm bound (crypto/proof/norm_proof.h), and the
// clip bound C * 2^fractional_bits the coordinator announced otherwise (then
// a dishonest coordinator that tells clients a larger clip is not caught;
// hence require_norm_proofs by default). The noise multiplier is
// z = sqrt(noise_variance) / Delta, and one release costs the RDP of the
// Gaussian (q = 1) [Mironov 2017; for the discrete Gaussian CKS20 Thm 4] or,
// only when the operator trusts the coordinator's Poisson sampling
// (policy sampling_rate < 1), of the sampled Gaussian [MTZ19].
//
// Thread safety: value types and pure functions.
#ifndef TANDEM_AGGREGATOR_CORE_POLICY_H_
#define TANDEM_AGGREGATOR_CORE_POLICY_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/aggregator.pb.h"
#include "proto/config.pb.h"

namespace tandem::aggregator {

// A resolved policy; the member initialisers are the private defaults a
// server gets without configuration (documented in proto/config.proto).
struct Policy {
  double min_noise_multiplier = 1.0;
  uint32_t min_batch_size = 10;
  uint64_t max_dimension = uint64_t{1} << 24;
  uint32_t max_reports_per_round = 100000;
  uint64_t max_sent_values = uint64_t{1} << 18;
  double epsilon_budget = 10.0;  // +inf: no budget (allowed only as an explicit choice)
  double delta = 1e-5;
  double sampling_rate = 1.0;    // 1: no amplification by subsampling
  bool require_norm_proofs = true;

  bool operator==(const Policy&) const = default;
};

// Fields set in `task` win over `fallback`'s, which win over the defaults.
// INVALID_ARGUMENT for values out of range (negative or NaN multiplier,
// min batch 0, delta outside (0, 1), sampling rate outside (0, 1], budget
// <= 0 or NaN, sizes 0).
absl::StatusOr<Policy> ResolvePolicy(const proto::PrivacyPolicy& task,
                                     const proto::PrivacyPolicy& fallback);

// The policies of one server: the tasks its operator provisioned, each with
// its policy and population; any other task id is refused (Provisioned),
// unless the set is open, when it gets the default policy as a population
// of its own.
//
// Why provisioning at the aggregator (Janus/DAP's "no aggregator processes
// a task its operator did not provision"): the budget is this server's
// promise to the devices. Were every task id the coordinator names a new
// budget, a coordinator could run one population under 16 task ids and
// spend 16 budgets. A population names who the promise is made to; its
// tasks share one ledger (aggregator/core/population.cc).
class PolicySet {
 public:
  // Validates every policy of `config` (INVALID_ARGUMENT naming the task or
  // population: a bad id, a duplicate task, tasks of one population with
  // different deltas). Open iff config.allow_unprovisioned_tasks.
  static absl::StatusOr<PolicySet> FromConfig(const proto::AggregatorConfig& config);
  // An open set with one policy for every task (tests of the bare protocol).
  static PolicySet Uniform(const Policy& policy);

  // Run-time provisioning by the aggregator's own operator (the operator
  // API, aggregator/service/admin_service.h), each a changed copy:
  // `task` added, validated as FromConfig's task_policies against
  // `fallback` (the config's default_policy); INVALID_ARGUMENT as there,
  // ALREADY_EXISTS for an id provisioned or retired before.
  absl::StatusOr<PolicySet> With(const proto::TaskPolicy& task,
                                 const proto::PrivacyPolicy& fallback) const;
  // `task_id` opens no new round (NOT_FOUND when it is not provisioned). It
  // stays in its population (TasksOf), whose ledger keeps its spending.
  absl::StatusOr<PolicySet> Retired(absl::string_view task_id) const;
  bool retired(absl::string_view task_id) const { return retired_.contains(task_id); }
  // Whether `task` is provisioned here with exactly its terms: the policy it
  // resolves to over `fallback`, and its population.
  bool Holds(const proto::TaskPolicy& task, const proto::PrivacyPolicy& fallback) const;
  // The provisioned task ids (retired ones included), sorted.
  std::vector<std::string> Tasks() const;

  // Whether OpenRound may create rounds for `task_id` (never a retired one).
  bool Provisioned(absl::string_view task_id) const;
  bool open() const { return open_; }
  const Policy& For(absl::string_view task_id) const;
  // The task's population (its own id when none was named, or the set is
  // open and it is not listed).
  std::string PopulationOf(absl::string_view task_id) const;
  // The provisioned tasks of `population` (sorted; empty for an open set's
  // unlisted tasks, whose population is their own).
  std::vector<std::string> TasksOf(absl::string_view population) const;
  // The largest max_sent_values / max_dimension over all policies (the
  // listeners' receive limits are per port, not per task).
  uint64_t MaxSentValues() const;
  uint64_t MaxDimension() const;

 private:
  // Adds one task (FromConfig, With). ALREADY_EXISTS for a second policy.
  absl::Status Add(const proto::TaskPolicy& task, const proto::PrivacyPolicy& fallback);

  Policy default_;
  bool open_ = false;
  absl::flat_hash_set<std::string> retired_;
  absl::flat_hash_map<std::string, Policy> per_task_;
  absl::flat_hash_map<std::string, std::string> population_;  // task id -> population
};

// z = sqrt(noise_variance) / Delta of the round (see the file comment);
// 0 for a round without noise. INVALID_ARGUMENT when Delta is not positive.
absl::StatusOr<double> NoiseMultiplierOf(const proto::RoundParameters& p);

// Checks the round against the policy, before anything is stored:
// INVALID_ARGUMENT naming the rule (noise below the floor, min batch below
// the server's, dimension or max_reports above its caps, sent values above
// max_sent_values, no norm bound when proofs are required).
absl::Status CheckRoundAgainstPolicy(const proto::RoundParameters& p, const Policy& policy);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_POLICY_H_
