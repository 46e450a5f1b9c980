// Check-ins the coordinator sustains with 1 and 10 tasks open (issue 33's
// measure), through the TaskHost as the daemon routes them (no network):
// each verifies the device's Ed25519 proof once, then either names its task
// (one map lookup) or is offered to every task in turn (each draws its own
// PRF); an assignment adds one durable SQLite insert. Next to
// server_benchmark's BM_CheckInAssign (one task, no host) and the Ed25519
// verification (~190 us here), the per-check-in floor.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/core/task_host.h"
#include "server/testing/scripted_aggregator.h"
#include "server/testing/test_devices.h"

namespace tandem::server {
namespace {

struct Fixture {
  // `tasks` tasks, all collecting, sampling with probability q.
  Fixture(int tasks, double q) {
    dir = std::filesystem::temp_directory_path() / "tandem_task_host_bench";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    device_store = *DeviceStore::Open((dir / "devices.db").string());
    devices = *DeviceRegistry::Create({}, device_store.get(), &clock);
    host = *TaskHost::Create({.devices = devices.get(), .clock = &clock});
    ml::Dataset eval;
    eval.num_classes = 10;
    eval.shape = {1, 1, 64};
    eval.features = ml::Matrix::Zero(10, 64);
    for (int i = 0; i < 10; ++i) eval.labels.push_back(i);
    for (int t = 0; t < tasks; ++t) {
      CoordinatorOptions o;
      o.task_id = absl::StrCat("task", t);
      o.model.set_input_dim(64);
      o.model.add_hidden(32);
      o.model.set_num_classes(10);
      o.round_timeout = absl::Hours(1);
      o.task.sample_rate = q;
      o.task.secure_sum.max_reports = 1u << 30;
      o.task.secure_sum.block_size = 64;
      o.task.secure_sum.min_batch_size = 1;
      o.min_reports = 1;
      o.devices = devices.get();
      auto store = CoordinatorStore::Open((dir / absl::StrCat("c", t, ".db")).string());
      TaskParts parts;
      parts.coordinator =
          *Coordinator::Create(o, *crypto::Ed25519SigningKey::Generate(random.get()), eval, &leader,
                               &helper, *std::move(store), &clock, random.get());
      while (parts.coordinator->Status().phase() != "collecting") (void)parts.coordinator->Tick();
      (void)host->Adopt(std::move(parts), {});
    }
  }
  ~Fixture() {
    host.reset();
    std::filesystem::remove_all(dir);
  }
  // `n` enrolled devices' signed check-ins naming `task` (empty: any).
  std::vector<proto::CheckInRequest> CheckIns(int n, const std::string& task) {
    std::vector<proto::CheckInRequest> out;
    for (int i = 0; i < n; ++i) {
      const std::string label = absl::StrCat("d", i);
      (void)devices->EnrollKey(testing::TestDeviceKey(label).PublicKeyRaw(), "bench");
      out.push_back(testing::SignedCheckIn(label, absl::ToUnixMillis(clock.Now()), task));
    }
    return out;
  }
  std::filesystem::path dir;
  testing::ScriptedAggregator leader{true}, helper{false};
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> random = DeterministicRandom::FromSeed(1);
  std::unique_ptr<DeviceStore> device_store;
  std::unique_ptr<DeviceRegistry> devices;
  std::unique_ptr<TaskHost> host;
};

constexpr int kBatch = 1000;

// Times `in` through the host; each must end in `want`.
void CheckIns(benchmark::State& state, Fixture& f, const std::vector<proto::CheckInRequest>& in,
              proto::CheckInResponse::Outcome want) {
  size_t i = 0;
  for (auto _ : state) {
    auto r = f.host->CheckIn(in[i++], "");
    if (!r.ok() || r->outcome() != want) {
      state.SkipWithError("unexpected outcome");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// Assigned check-ins naming the last task; range(0) tasks open.
void BM_HostCheckInNamed(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), 1.0);
  CheckIns(state, f, f.CheckIns(kBatch, absl::StrCat("task", state.range(0) - 1)),
           proto::CheckInResponse::OUTCOME_TASK);
}
BENCHMARK(BM_HostCheckInNamed)->Arg(1)->Arg(10)->UseRealTime()->Iterations(kBatch);

// Check-ins for any task that no task samples (q tiny): each is offered to
// every open task, the worst case of routing.
void BM_HostCheckInAnyNotSampled(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), 1e-9);
  CheckIns(state, f, f.CheckIns(kBatch, ""), proto::CheckInResponse::OUTCOME_RETRY_LATER);
}
BENCHMARK(BM_HostCheckInAnyNotSampled)->Arg(1)->Arg(10)->UseRealTime()->Iterations(kBatch);

// Assigned check-ins for any task (q = 1: the first task offered assigns).
void BM_HostCheckInAnyAssigned(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), 1.0);
  CheckIns(state, f, f.CheckIns(kBatch, ""), proto::CheckInResponse::OUTCOME_TASK);
}
BENCHMARK(BM_HostCheckInAnyAssigned)->Arg(1)->Arg(10)->UseRealTime()->Iterations(kBatch);

}  // namespace
}  // namespace tandem::server
