// Coordinator request handling (no network): check-ins that assign (one
// durable SQLite insert each), repeated check-ins (memory only), UploadDone
// (one durable update each, after the ticket's Ed25519 verification), the
// metrics page. The physical limit of the
// durable calls is one fsync (the SQLite WAL commit) per call.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/core/coordinator.h"
#include "server/testing/scripted_aggregator.h"

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
    c = *Coordinator::Create(o, *crypto::Ed25519SigningKey::Generate(random.get()), eval, &leader,
                             &helper, *std::move(store), &clock, random.get());
    while (c->Status().phase() != "collecting") (void)c->Tick();
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  testing::ScriptedAggregator leader{true}, helper{false};
  FakeClock clock;
  std::unique_ptr<DeterministicRandom> random = DeterministicRandom::FromSeed(1);
  std::unique_ptr<Coordinator> c;
};

void BM_CheckInAssign(benchmark::State& state) {
  Fixture f;
  int64_t i = 0;
  proto::CheckInRequest r;
  for (auto _ : state) {
    r.set_client_id(absl::StrCat("c", i++));
    benchmark::DoNotOptimize(f.c->CheckIn(r));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInAssign)->UseRealTime();

void BM_CheckInRepeat(benchmark::State& state) {
  Fixture f;
  proto::CheckInRequest r;
  r.set_client_id("same");
  (void)f.c->CheckIn(r);
  for (auto _ : state) benchmark::DoNotOptimize(f.c->CheckIn(r));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInRepeat);

void BM_UploadDone(benchmark::State& state) {
  Fixture f;
  constexpr int kClients = 4096;
  proto::CheckInRequest in;
  std::vector<proto::UploadDoneRequest> done(kClients);
  for (int i = 0; i < kClients; ++i) {
    in.set_client_id(absl::StrCat("c", i));
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
