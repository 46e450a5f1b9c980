// Coordinator request handling (no network): check-ins that assign (the
// device's Ed25519 proof verified, one durable SQLite insert each), repeated
// check-ins (proof and replay check, memory only), refused check-ins of
// unenrolled keys (a Sybil flood: proof verified, then refused), UploadDone
// (one durable update each, after the ticket's Ed25519 verification), the
// metrics page. The physical limit of the
// durable calls is one fsync (the SQLite WAL commit) per call.
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "server/core/coordinator.h"
#include "server/testing/scripted_aggregator.h"
#include "server/testing/test_devices.h"

namespace tandem::server {
namespace {

struct Fixture {
  Fixture() {
    dir = std::filesystem::temp_directory_path() / "tandem_coordinator_bench";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    CoordinatorOptions o;
    o.task_id = "bench";
    o.model.set_input_dim(64);
    o.model.add_hidden(32);
    o.model.set_num_classes(10);
    o.round_timeout = absl::Hours(1);
    o.task.sample_rate = 1.0;
    o.task.secure_sum.max_reports = 1u << 30;
    o.task.secure_sum.block_size = 64;
    o.task.secure_sum.min_batch_size = 1;
    o.min_reports = 1;
    ml::Dataset eval;
    eval.num_classes = 10;
    eval.shape = {1, 1, 64};
    eval.features = ml::Matrix::Zero(10, 64);
    for (int i = 0; i < 10; ++i) eval.labels.push_back(i);
    auto store = CoordinatorStore::Open((dir / "c.db").string());
    device_store = *DeviceStore::Open((dir / "devices.db").string());
    devices = *DeviceRegistry::Create({}, device_store.get(), &clock);
    o.devices = devices.get();
    c = *Coordinator::Create(o, *crypto::Ed25519SigningKey::Generate(random.get()), eval, &leader,
                             &helper, *std::move(store), &clock, random.get());
    while (c->Status().phase() != "collecting") (void)c->Tick();
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  testing::ScriptedAggregator leader{true}, helper{false};
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> random = DeterministicRandom::FromSeed(1);
  std::unique_ptr<DeviceStore> device_store;
  std::unique_ptr<DeviceRegistry> devices;
  std::unique_ptr<Coordinator> c;
  // `n` signed check-ins (signing is the device's cost, not timed), of
  // devices c<first>..c<first+n-1>, enrolled on the allow-list if `enroll`.
  std::vector<proto::CheckInRequest> CheckIns(int first, int n, bool enroll, bool same = false) {
    std::vector<proto::CheckInRequest> out;
    for (int i = first; i < first + n; ++i) {
      const std::string label = absl::StrCat("c", same ? first : i);
      if (enroll && (!same || i == first)) {
        (void)devices->EnrollKey(testing::TestDeviceKey(label).PublicKeyRaw(), "bench");
      }
      out.push_back(testing::SignedCheckIn(label, absl::ToUnixMillis(clock.Now())));
    }
    return out;
  }
};

constexpr int kBatch = 2000;

void BM_CheckInAssign(benchmark::State& state) {
  Fixture f;
  const std::vector<proto::CheckInRequest> in = f.CheckIns(0, kBatch, /*enroll=*/true);
  size_t i = 0;
  for (auto _ : state) {
    const auto r = f.c->CheckIn(in[i++]);
    if (!r.ok() || r->outcome() != proto::CheckInResponse::OUTCOME_TASK) {
      state.SkipWithError("check-in was not assigned");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInAssign)->UseRealTime()->Iterations(kBatch);

void BM_CheckInRepeat(benchmark::State& state) {
  Fixture f;
  const std::vector<proto::CheckInRequest> in = f.CheckIns(0, 10 * kBatch, true, /*same=*/true);
  size_t i = 0;
  for (auto _ : state) {
    if (!f.c->CheckIn(in[i++]).ok()) {
      state.SkipWithError("repeated check-in refused");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInRepeat)->Iterations(10 * kBatch);

// The cost an outsider imposes per check-in of a key nobody enrolled.
void BM_CheckInRefusedUnenrolled(benchmark::State& state) {
  Fixture f;
  const std::vector<proto::CheckInRequest> in = f.CheckIns(0, 10 * kBatch, /*enroll=*/false);
  size_t i = 0;
  for (auto _ : state) {
    if (f.c->CheckIn(in[i++]).ok()) {
      state.SkipWithError("an unenrolled device was admitted");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInRefusedUnenrolled)->Iterations(10 * kBatch);

// An honest enrolled device's repeated check-in while another thread floods
// the coordinator with check-ins of unenrolled keys as fast as it can (the
// attacker's whole core): the honest latency next to BM_CheckInRepeat's, and
// the flood rate the refusals absorbed (counter flood_per_s).
void BM_CheckInRepeatUnderFlood(benchmark::State& state) {
  Fixture f;
  const std::vector<proto::CheckInRequest> honest = f.CheckIns(0, 10 * kBatch, true, true);
  const std::vector<proto::CheckInRequest> flood = f.CheckIns(1, 4096, /*enroll=*/false);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> flooded{0};
  std::thread attacker([&] {
    for (size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      (void)f.c->CheckIn(flood[i % flood.size()]);
      flooded.fetch_add(1, std::memory_order_relaxed);
    }
  });
  const absl::Time start = absl::Now();
  size_t i = 0;
  for (auto _ : state) {
    if (!f.c->CheckIn(honest[i++]).ok()) {
      state.SkipWithError("the honest check-in was refused");
      break;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  attacker.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["flood_per_s"] = static_cast<double>(flooded.load()) / seconds;
}
BENCHMARK(BM_CheckInRepeatUnderFlood)->UseRealTime()->Iterations(10 * kBatch);

void BM_UploadDone(benchmark::State& state) {
  Fixture f;
  constexpr int kClients = 4096;
  const std::vector<proto::CheckInRequest> ins = f.CheckIns(0, kClients, /*enroll=*/true);
  std::vector<proto::UploadDoneRequest> done(kClients);
  for (int i = 0; i < kClients; ++i) {
    const proto::CheckInRequest& in = ins[i];
    const proto::CheckInResponse r = *f.c->CheckIn(in);
    proto::UploadTicket t;
    (void)t.ParseFromString(r.ticket().ticket());
    done[i].set_task_id("bench");
    done[i].set_round_id(r.round_id());
    done[i].set_client_id(in.client_id());
    done[i].set_report_id(t.ticket_id());
    *done[i].mutable_ticket() = r.ticket();
  }
  int i = 0;
  for (auto _ : state) {
    if (i == kClients) {
      state.SkipWithError("ran out of assigned clients");
      break;
    }
    const absl::Status s = f.c->UploadDone(done[i++]);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UploadDone)->UseRealTime()->Iterations(2000);

void BM_Metrics(benchmark::State& state) {
  Fixture f;
  for (auto _ : state) benchmark::DoNotOptimize(f.c->Metrics());
}
BENCHMARK(BM_Metrics);

}  // namespace
}  // namespace tandem::server
