#include "aggregator/core/policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("privacy policy: ", what));
}

absl::Status Validate(const Policy& p) {
  if (!(p.min_noise_multiplier >= 0) || std::isinf(p.min_noise_multiplier)) {
    return Invalid("min_noise_multiplier must be finite and >= 0");
  }
  if (p.min_batch_size < 1) return Invalid("min_batch_size must be >= 1");
  if (p.max_dimension < 1 || p.max_dimension > (uint64_t{1} << 27)) {
    return Invalid("max_dimension must be in [1, 2^27]");
  }
  if (p.max_reports_per_round < 1) return Invalid("max_reports_per_round must be >= 1");
  if (p.max_sent_values < 1 || p.max_sent_values > (uint64_t{1} << 24)) {
    return Invalid("max_sent_values must be in [1, 2^24]");
  }
  if (!(p.epsilon_budget > 0)) return Invalid("epsilon_budget must be > 0 (inf: no budget)");
  if (!(p.delta > 0 && p.delta < 1)) return Invalid("delta must be in (0, 1)");
  if (!(p.sampling_rate > 0 && p.sampling_rate <= 1)) {
    return Invalid("sampling_rate must be in (0, 1]");
  }
  return absl::OkStatus();
}

void Overlay(const proto::PrivacyPolicy& src, Policy& dst) {
  if (src.has_min_noise_multiplier()) dst.min_noise_multiplier = src.min_noise_multiplier();
  if (src.has_min_batch_size()) dst.min_batch_size = src.min_batch_size();
  if (src.has_max_dimension()) dst.max_dimension = src.max_dimension();
  if (src.has_max_reports_per_round()) dst.max_reports_per_round = src.max_reports_per_round();
  if (src.has_max_sent_values()) dst.max_sent_values = src.max_sent_values();
  if (src.has_epsilon_budget()) dst.epsilon_budget = src.epsilon_budget();
  if (src.has_delta()) dst.delta = src.delta();
  if (src.has_sampling_rate()) dst.sampling_rate = src.sampling_rate();
  if (src.has_require_norm_proofs()) dst.require_norm_proofs = src.require_norm_proofs();
}

}  // namespace

absl::StatusOr<Policy> ResolvePolicy(const proto::PrivacyPolicy& task,
                                     const proto::PrivacyPolicy& fallback) {
  Policy p;
  Overlay(fallback, p);
  Overlay(task, p);
  TANDEM_RETURN_IF_ERROR(Validate(p));
  return p;
}

absl::Status PolicySet::Add(const proto::TaskPolicy& t, const proto::PrivacyPolicy& fallback) {
  TANDEM_RETURN_IF_ERROR(ValidateId(t.task_id(), "task_policies.task_id"));
  const std::string population = t.population().empty() ? t.task_id() : t.population();
  TANDEM_RETURN_IF_ERROR(ValidateId(population, "task_policies.population"));
  absl::StatusOr<Policy> p = ResolvePolicy(t.policy(), fallback);
  if (!p.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", t.task_id(), "': ", p.status().message()));
  }
  if (per_task_.contains(t.task_id())) {
    return absl::AlreadyExistsError(absl::StrCat("task '", t.task_id(), "' has two policies"));
  }
  // One ledger per population: its RDP curves compose only at one delta.
  for (const auto& [other, other_population] : population_) {
    if (other_population != population) continue;
    const double delta = per_task_.at(other).delta;
    if (delta != p->delta) {
      return absl::InvalidArgumentError(absl::StrCat(
          "population '", population, "': task '", t.task_id(), "' has delta ", p->delta,
          ", another task of the population ", delta, " (one ledger needs one delta)"));
    }
    break;
  }
  per_task_.emplace(t.task_id(), *p);
  population_.emplace(t.task_id(), population);
  return absl::OkStatus();
}

absl::StatusOr<PolicySet> PolicySet::FromConfig(const proto::AggregatorConfig& config) {
  PolicySet set;
  set.open_ = config.allow_unprovisioned_tasks();
  TANDEM_ASSIGN_OR_RETURN(set.default_, ResolvePolicy({}, config.default_policy()));
  for (const proto::TaskPolicy& t : config.task_policies()) {
    if (absl::Status s = set.Add(t, config.default_policy()); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
  }
  return set;
}

absl::StatusOr<PolicySet> PolicySet::With(const proto::TaskPolicy& task,
                                          const proto::PrivacyPolicy& fallback) const {
  if (retired_.contains(task.task_id())) {
    return absl::AlreadyExistsError(
        absl::StrCat("task '", task.task_id(), "' was retired: its id is not reused"));
  }
  PolicySet copy = *this;
  TANDEM_RETURN_IF_ERROR(copy.Add(task, fallback));
  return copy;
}

absl::StatusOr<PolicySet> PolicySet::Retired(absl::string_view task_id) const {
  if (!per_task_.contains(task_id)) {
    return absl::NotFoundError(absl::StrCat("task '", task_id, "' is not provisioned"));
  }
  PolicySet copy = *this;
  copy.retired_.insert(std::string(task_id));
  return copy;
}

bool PolicySet::Holds(const proto::TaskPolicy& task, const proto::PrivacyPolicy& fallback) const {
  auto it = per_task_.find(task.task_id());
  if (it == per_task_.end()) return false;
  absl::StatusOr<Policy> p = ResolvePolicy(task.policy(), fallback);
  const std::string population = task.population().empty() ? task.task_id() : task.population();
  return p.ok() && *p == it->second && population == PopulationOf(task.task_id());
}

std::vector<std::string> PolicySet::Tasks() const {
  std::vector<std::string> tasks;
  for (const auto& [task, p] : per_task_) tasks.push_back(task);
  std::sort(tasks.begin(), tasks.end());
  return tasks;
}

PolicySet PolicySet::Uniform(const Policy& policy) {
  PolicySet set;
  set.default_ = policy;
  set.open_ = true;
  return set;
}

bool PolicySet::Provisioned(absl::string_view task_id) const {
  return (open_ || per_task_.contains(task_id)) && !retired_.contains(task_id);
}

const Policy& PolicySet::For(absl::string_view task_id) const {
  auto it = per_task_.find(task_id);
  return it == per_task_.end() ? default_ : it->second;
}

std::string PolicySet::PopulationOf(absl::string_view task_id) const {
  auto it = population_.find(task_id);
  return it == population_.end() ? std::string(task_id) : it->second;
}

std::vector<std::string> PolicySet::TasksOf(absl::string_view population) const {
  std::vector<std::string> tasks;
  for (const auto& [task, p] : population_) {
    if (p == population) tasks.push_back(task);
  }
  std::sort(tasks.begin(), tasks.end());
  return tasks;
}

uint64_t PolicySet::MaxSentValues() const {
  uint64_t m = default_.max_sent_values;
  for (const auto& [id, p] : per_task_) m = std::max(m, p.max_sent_values);
  return m;
}

uint64_t PolicySet::MaxDimension() const {
  uint64_t m = default_.max_dimension;
  for (const auto& [id, p] : per_task_) m = std::max(m, p.max_dimension);
  return m;
}

absl::StatusOr<double> NoiseMultiplierOf(const proto::RoundParameters& p) {
  const double variance = p.noise_variance();
  if (!std::isfinite(variance) || variance < 0) {
    return absl::InvalidArgumentError("noise_variance must be finite and >= 0");
  }
  if (variance == 0) return 0.0;
  double sensitivity;
  if (p.has_norm_bound()) {
    sensitivity = std::sqrt(static_cast<double>(p.norm_bound().max_l2_squared()));
  } else {
    sensitivity = p.fixed_point().clip_l2_norm() * std::ldexp(1.0, p.fixed_point().fractional_bits());
  }
  if (!(sensitivity > 0) || !std::isfinite(sensitivity)) {
    return absl::InvalidArgumentError(
        "the round's sensitivity (norm bound, or clip_l2_norm * 2^fractional_bits) must be > 0");
  }
  return std::sqrt(variance) / sensitivity;
}

absl::Status CheckRoundAgainstPolicy(const proto::RoundParameters& p, const Policy& policy) {
  if (policy.require_norm_proofs && !p.has_norm_bound()) {
    return Invalid("this server requires norm proofs (the round has no norm_bound)");
  }
  if (p.fixed_point().fractional_bits() > 62) {
    return Invalid("fixed_point.fractional_bits must be <= 62");
  }
  TANDEM_ASSIGN_OR_RETURN(const double z, NoiseMultiplierOf(p));
  if (z < policy.min_noise_multiplier) {
    return Invalid(absl::StrCat("noise multiplier ", z, " is below this server's floor ",
                                policy.min_noise_multiplier));
  }
  if (p.dp().min_batch_size() < policy.min_batch_size) {
    return Invalid(absl::StrCat("min_batch_size ", p.dp().min_batch_size(),
                                " is below this server's ", policy.min_batch_size));
  }
  if (p.dimension() > policy.max_dimension) {
    return Invalid(absl::StrCat("dimension ", p.dimension(), " is above this server's ",
                                policy.max_dimension));
  }
  if (p.max_reports() > policy.max_reports_per_round) {  // 0: the server's cap
    return Invalid(absl::StrCat("max_reports must be <= ", policy.max_reports_per_round));
  }
  const uint64_t sent = p.encoding() == proto::REPORT_ENCODING_DENSE
                            ? p.dimension()
                            : uint64_t{p.num_groups()} * p.group_parameters().block_size();
  if (sent > policy.max_sent_values) {
    return Invalid(absl::StrCat("a report would carry ", sent, " values, above this server's ",
                                policy.max_sent_values));
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
