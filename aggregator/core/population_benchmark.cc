// What a population's shared privacy ledger (population.cc, issue 33) costs
// at OpenRound: the RDP composition of every round the population's tasks
// released or hold open. BM_OpenRoundPopulation/N: a helper whose
// population "phones" has N tasks; tasks 1..N-1 each hold an open round
// (z = 1, the policy's q = 0.5, so each is one sampled-Gaussian charge,
// the expensive series of crypto/dp/accountant.h); each iteration is task
// 0's OpenRound again (idempotent), which composes the N-1 held rounds and
// its own. N = 1 is a task alone: the difference is the ledger's cost.
// In-memory stores: the store's own cost is not what is measured.
#include <benchmark/benchmark.h>

#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/store/in_memory_report_store.h"
#include "aggregator/testing/report_factory.h"
#include "base/clock.h"
#include "base/random.h"

namespace tandem::aggregator {
namespace {

proto::RoundParameters Round(const std::string& task) {
  proto::RoundParameters p = testing::MakeRoundParameters(task, 1, /*log_num_blocks=*/1,
                                                          /*block_size=*/8, /*num_groups=*/2);
  // z = sigma / (clip * 2^frac) = 1.
  const double delta = 16.0 * 65536.0;
  p.set_noise_variance(delta * delta);
  return p;
}

void BM_OpenRoundPopulation(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  proto::AggregatorConfig config;
  config.mutable_default_policy()->set_min_noise_multiplier(1);
  config.mutable_default_policy()->set_min_batch_size(1);
  config.mutable_default_policy()->set_require_norm_proofs(false);
  config.mutable_default_policy()->set_sampling_rate(0.5);
  config.mutable_default_policy()->set_epsilon_budget(std::numeric_limits<double>::infinity());
  for (int t = 0; t < n; ++t) {
    proto::TaskPolicy* p = config.add_task_policies();
    p->set_task_id(absl::StrCat("task-", t));
    p->set_population("phones");
  }
  absl::StatusOr<PolicySet> policies = PolicySet::FromConfig(config);
  if (!policies.ok()) {
    state.SkipWithError(std::string(policies.status().message()).c_str());
    return;
  }
  AggregatorOptions o;
  o.role = Role::kHelper;
  o.policies = *std::move(policies);
  FakeClock clock;
  auto noise = DeterministicRandom::FromSeed(1);
  auto aggregator = Aggregator::Create(
      o,
      [](absl::string_view, bool) -> absl::StatusOr<std::unique_ptr<ReportStore>> {
        return std::make_unique<InMemoryReportStore>();
      },
      nullptr, &clock, noise.get());
  if (!aggregator.ok()) {
    state.SkipWithError(std::string(aggregator.status().message()).c_str());
    return;
  }
  for (int t = 1; t < n; ++t) {
    if (absl::Status s = (*aggregator)->OpenRound(Round(absl::StrCat("task-", t))); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  const proto::RoundParameters mine = Round("task-0");
  for (auto _ : state) {
    absl::Status s = (*aggregator)->OpenRound(mine);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  state.counters["held_rounds"] = n - 1;
}
BENCHMARK(BM_OpenRoundPopulation)->Arg(1)->Arg(2)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::aggregator
