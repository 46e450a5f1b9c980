// Populations: one privacy ledger over every task of a population
// (aggregator/core/policy.h PolicySet, proto/config.proto TaskPolicy).
//
// A population is the set of devices whose privacy several tasks spend (a
// training task and its evaluation task, two models over the same phones).
// Composition over all of them adds their RDP curves [Mironov 2017, Prop.
// 1], whatever task each round belongs to, so this server keeps one ledger
// line per task -- the (q, z) of each round it released, and of the round it
// holds open -- and a round of any task opens only if the composition of
// every line of the population plus that round stays within the opening
// task's epsilon_budget. A round held open is charged in advance: it may
// still be released, and two tasks of one population must not both be
// admitted on the same remaining budget. [I] Charging an open round that
// is later abandoned is conservative (nothing was released): its charge is
// dropped when its task opens its next round, or when the coordinator
// abandons it (AbandonRound: its task was deleted).
//
// Replicated stores (issue 24): the population's other tasks are reloaded
// from the store before the check, so releases by other replicas count;
// two replicas opening rounds of two tasks of one population at the same
// instant can still both pass (the same window exists for one task's
// replicas): serialise a population's OpenRounds on one replica.
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/task.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

std::vector<std::string> Aggregator::PopulationTasks(absl::string_view task_id) const {
  std::vector<std::string> tasks = policies()->TasksOf(policies()->PopulationOf(task_id));
  if (tasks.empty()) tasks.push_back(std::string(task_id));
  return tasks;
}

void Aggregator::LedgerReset(const std::string& task_id) {
  absl::MutexLock lock(&ledger_mu_);
  ledgers_[task_id] = TaskLedger{};
}

void Aggregator::LedgerReleased(const std::string& task_id, double q, double z, int64_t round_id) {
  absl::MutexLock lock(&ledger_mu_);
  TaskLedger& line = ledgers_[task_id];
  if (z == 0) {
    line.released_without_noise = true;
  } else {
    line.released.emplace_back(q, z);
  }
  if (line.open_round == round_id) line.open_round = 0;
}

void Aggregator::LedgerHoldOpen(const std::string& task_id, double q, double z, int64_t round_id) {
  absl::MutexLock lock(&ledger_mu_);
  ledgers_[task_id].Hold(round_id, q, z);
}

void Aggregator::LedgerDropHold(const std::string& task_id, int64_t round_id) {
  absl::MutexLock lock(&ledger_mu_);
  auto it = ledgers_.find(task_id);
  if (it != ledgers_.end() && it->second.open_round == round_id) it->second.open_round = 0;
}

absl::Status Aggregator::AbandonRound(absl::string_view task_id, uint64_t round) {
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(task_id, /*create=*/false));
  const int64_t round_id = static_cast<int64_t>(round);
  absl::MutexLock process_lock(&task->process_mu);
  TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, round_id));
  {
    absl::ReaderMutexLock lock(&task->state_mu);
    if (round_id == 0 || round_id > task->round_id) {
      return absl::NotFoundError(absl::StrCat("round ", round_id, " was never opened"));
    }
    if (round_id < task->round_id) return absl::OkStatus();  // superseded: abandoned already
    if (task->closed && task->released) {
      return absl::FailedPreconditionError(
          absl::StrCat("round ", round_id, " was released; it cannot be abandoned"));
    }
    if (task->closed) return absl::OkStatus();  // a retry
  }
  TANDEM_RETURN_IF_ERROR(task->store->CloseRound(round_id));
  {
    absl::MutexLock lock(&task->state_mu);
    task->closed = true;
    task->released = false;
  }
  LedgerDropHold(task->id, round_id);
  TANDEM_LOG(WARNING) << "task " << task->id << ": round " << round_id
                      << " abandoned by the coordinator (its task was deleted); nothing released";
  return absl::OkStatus();
}

absl::Status Aggregator::LoadPopulationPeers(absl::string_view task_id) {
  for (const std::string& peer : PopulationTasks(task_id)) {
    if (peer == task_id) continue;
    absl::StatusOr<Task*> loaded = GetTask(peer, /*create=*/false);
    if (absl::IsNotFound(loaded.status())) continue;  // never opened a round here
    TANDEM_RETURN_IF_ERROR(loaded.status());
    Task& other = **loaded;
    if (other.store->replicated() != nullptr) {
      absl::MutexLock process_lock(&other.process_mu);
      TANDEM_RETURN_IF_ERROR(LoadLatestRoundLocked(other));
    }
  }
  return absl::OkStatus();
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rounds of one (q, z): RDP composes additively, so a group of `steps`
// equal releases is one ComputeRdp of `steps` steps -- one evaluation of the
// sampled-Gaussian series (~1.2 ms at q < 1 here) instead of one per round.
using ChargeCounts = std::map<std::pair<double, double>, int64_t>;

absl::Status ChargeAll(const ChargeCounts& counts, dp::PrivacyAccountant& accountant) {
  for (const auto& [qz, steps] : counts) {
    TANDEM_RETURN_IF_ERROR(accountant.Charge(qz.first, qz.second, steps));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Aggregator::ReservePopulationBudget(const Task& task,
                                                 const proto::RoundParameters& p) {
  TANDEM_ASSIGN_OR_RETURN(const double z, NoiseMultiplierOf(p));
  const double q = task.policy.sampling_rate;
  const std::string population = policies()->PopulationOf(task.id);
  const std::vector<std::string> tasks = PopulationTasks(task.id);
  if (tasks.size() == 1) {
    // A population of one task: OpenRound's own check of the task's
    // accountant is this one; only the hold is recorded.
    LedgerHoldOpen(task.id, q, z, static_cast<int64_t>(p.round_id()));
    return absl::OkStatus();
  }
  TANDEM_ASSIGN_OR_RETURN(dp::PrivacyAccountant accountant, MakeAccountant(task.policy));

  absl::MutexLock lock(&ledger_mu_);
  bool infinite = z == 0;
  ChargeCounts counts;
  for (const std::string& id : tasks) {
    auto it = ledgers_.find(id);
    if (it == ledgers_.end()) continue;
    const TaskLedger& line = it->second;
    infinite = infinite || line.released_without_noise;
    for (const auto& qz : line.released) ++counts[qz];
    // The opening task's held round is the one `p` replaces (or repeats).
    if (id == task.id || line.open_round == 0) continue;
    if (line.open_z == 0) {
      infinite = true;
    } else {
      ++counts[{line.open_q, line.open_z}];
    }
  }
  double epsilon = kInf;
  if (!infinite) {
    ++counts[{q, z}];  // this round
    TANDEM_RETURN_IF_ERROR(ChargeAll(counts, accountant));
    epsilon = accountant.SpentEpsilon();
  }
  if (epsilon > task.policy.epsilon_budget) {
    return absl::FailedPreconditionError(
        absl::StrCat("releasing this round would spend epsilon ", epsilon, " at delta ",
                     task.policy.delta, " for population '", population, "' (", tasks.size(),
                     " task(s), counting the rounds they hold open), above this server's budget ",
                     task.policy.epsilon_budget, " for task ", task.id));
  }
  ledgers_[task.id].Hold(static_cast<int64_t>(p.round_id()), q, z);
  return absl::OkStatus();
}

absl::StatusOr<double> Aggregator::PopulationSpent(const Task& task) {
  TANDEM_ASSIGN_OR_RETURN(dp::PrivacyAccountant accountant, MakeAccountant(task.policy));
  const std::vector<std::string> tasks = PopulationTasks(task.id);
  ChargeCounts counts;
  {
    absl::MutexLock lock(&ledger_mu_);
    for (const std::string& id : tasks) {
      auto it = ledgers_.find(id);
      if (it == ledgers_.end()) continue;
      if (it->second.released_without_noise) return kInf;
      for (const auto& qz : it->second.released) ++counts[qz];
    }
  }
  TANDEM_RETURN_IF_ERROR(ChargeAll(counts, accountant));
  return accountant.SpentEpsilon();
}

}  // namespace tandem::aggregator
