// Whole-system ingest with N replicas per operator (issue 24 item 4): N
// leader and N helper tandem-aggregator processes on loopback, each
// operator's state in its own database of one local PostgreSQL server
// (aggregator/store/testing/postgres_server.h, synchronous_commit on), and
// this process as the clients: uploader threads spread real DPF reports
// over the replicas over gRPC (at most 256 per replica ahead of the
// verification). Leader replica i verifies with helper replica i (a sticky
// channel per replica, as a Service address gives it).
//   BM_ReplicaIngest/log2D/replicas: one iteration = 64 more reports
//     decided (accepted or rejected, read from the leader's Status, i.e.
//     the database); items/s = reports/s of the whole system.
// Counters (CPU seconds from /proc over the measured loop):
//   agg_cores    aggregator processes' CPU (both operators) / wall time
//   db_cores     every postgres process's CPU / wall time
//   client_cores this process (uploads: protobuf and gRPC) / wall time
//   db_share     db CPU / all CPU measured
//   reports_per_agg_cpu_s  reports per aggregator CPU-second (per-replica
//     efficiency: constant when replicas scale without overhead)
//   build/tests/integration/aggregator_replicas_benchmark --benchmark_min_time=10
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/store/testing/postgres_server.h"
#include "aggregator/testing/report_factory.h"
#include "tests/testing/aggregator_endpoint.h"
#include "tests/testing/daemon_process.h"

namespace tandem {
namespace {

using ::tandem::testing::AggregatorEndpoint;
using ::tandem::testing::DaemonProcess;
using ::tandem::testing::Loopback;

// utime + stime of `pid` in seconds (0 when it is gone).
double CpuSeconds(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(f, line)) return 0;
  // Fields after the parenthesised command name; utime, stime are 14, 15.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of every process named "postgres" (the server and backends),
// including backends that exited (their CPU moves to the postmaster's
// cutime/cstime, fields 16 and 17).
double PostgresCpuSeconds() {
  double total = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
    std::string name;
    if (!std::getline(comm, name) || name != "postgres") continue;
    std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(f, line)) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 17 && rest >> field; ++i) {
      if (i >= 14) total += std::stod(field);
    }
  }
  closedir(d);
  return total / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

AggregatorEndpoint Connect(const DaemonProcess& p) {
  return AggregatorEndpoint::Connect(Loopback(p.port()), grpc::InsecureChannelCredentials());
}

void BM_ReplicaIngest(benchmark::State& state) {
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  const int replicas = static_cast<int>(state.range(1));
  auto server = aggregator::testing::PostgresServer::Shared();
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return;
  }
  const std::string leader_db = aggregator::testing::UniqueName("bench_leader");
  const std::string helper_db = aggregator::testing::UniqueName("bench_helper");
  if (!(*server)->CreateDatabase(leader_db).ok() || !(*server)->CreateDatabase(helper_db).ok()) {
    state.SkipWithError("database");
    return;
  }
  const std::string dir = tandem::testing::MakeTempDir("tandem-replica-bench");
  std::vector<std::unique_ptr<DaemonProcess>> helpers, leaders;
  auto start = [&](const std::string& role, int i, const DaemonProcess* peer) {
    std::vector<std::string> args = {
        "--role=" + role,
        "--listen=127.0.0.1:0",
        absl::StrCat("--state_dir=", dir, "/", role, i),
        "--insecure_plaintext",
        "--allow_unticketed_uploads",
        "--allow_unprovisioned_tasks",
        std::string("--policy=") + tandem::testing::kPermissiveTestPolicy,
        "--postgres_conninfo=" + (*server)->ConninfoFor(role == "leader" ? leader_db : helper_db),
        absl::StrCat("--replica_id=", role.substr(0, 1), i)};
    if (peer != nullptr) args.push_back("--peer=" + Loopback(peer->port()));
    return DaemonProcess::Start(TANDEM_AGGREGATOR_BIN, args,
                                absl::StrCat(dir, "/", role, i, ".log"));
  };
  for (int i = 0; i < replicas; ++i) {
    auto h = start("helper", i, nullptr);
    if (!h.ok()) return state.SkipWithError("helper start");
    helpers.push_back(*std::move(h));
    auto l = start("leader", i, helpers.back().get());
    if (!l.ok()) return state.SkipWithError("leader start");
    leaders.push_back(*std::move(l));
  }
  std::vector<AggregatorEndpoint> leader_eps, helper_eps;
  for (int i = 0; i < replicas; ++i) {
    leader_eps.push_back(Connect(*leaders[i]));
    helper_eps.push_back(Connect(*helpers[i]));
  }
  // B = 2^10, k = 16 groups: the shape of aggregator_pair_benchmark.
  proto::RoundParameters params =
      aggregator::testing::MakeRoundParameters("bench", 1, log_d - 14, 1024, 16);
  if (!leader_eps[0].Open(params).ok() || !helper_eps[0].Open(params).ok()) {
    return state.SkipWithError("open");
  }
  std::vector<aggregator::testing::TestReport> pool;
  for (int i = 0; i < 32; ++i) {
    pool.push_back(*aggregator::testing::MakeReport(params, 500 + static_cast<uint64_t>(i)));
  }
  // Every replica loads the task before the clock starts.
  for (int i = 0; i < replicas; ++i) {
    (void)leader_eps[i].Status("bench");
    (void)helper_eps[i].Status("bench");
  }

  std::atomic<int64_t> uploaded{0}, decided{0};
  std::atomic<bool> stop{false}, failed{false};
  const int64_t ahead = 256 * replicas;
  std::vector<std::thread> threads;
  constexpr int kUploaders = 8;
  for (int t = 0; t < kUploaders; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t n = static_cast<uint64_t>(t); !stop.load(); n += kUploaders) {
        while (uploaded.load() - decided.load() >= ahead && !stop.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (stop.load()) break;
        proto::UploadRequest to_leader = pool[n % pool.size()].to_leader;
        proto::UploadRequest to_helper = pool[n % pool.size()].to_helper;
        std::string id(16, '\0');
        const uint64_t label = n + 1;
        std::memcpy(id.data(), &label, sizeof(label));
        to_leader.set_report_id(id);
        to_helper.set_report_id(id);
        // Spread over the replicas (a load balancer's round robin); the two
        // shares of one report reach different replica indices.
        const size_t l = n % static_cast<size_t>(replicas);
        const size_t h = (n / 2 + 1) % static_cast<size_t>(replicas);
        if (!leader_eps[l].Upload(to_leader).ok() || !helper_eps[h].Upload(to_helper).ok()) {
          failed = true;
        }
        ++uploaded;
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      auto s = leader_eps[0].Status("bench");
      if (s.ok()) decided = static_cast<int64_t>(s->accepted_reports() + s->rejected_reports());
      // Status counts the round's reports in the database: not too often.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  auto agg_cpu = [&] {
    double t = 0;
    for (const auto& p : leaders) t += CpuSeconds(p->pid());
    for (const auto& p : helpers) t += CpuSeconds(p->pid());
    return t;
  };
  // Warm-up: the first 64 reports.
  while (decided.load() < 64 && !failed.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t first = decided.load();
  const double agg0 = agg_cpu(), db0 = PostgresCpuSeconds(), self0 = SelfCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t target = first;
  for (auto _ : state) {
    target += 64;
    while (decided.load() < target && !failed.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t done = decided.load() - first;
  const double agg = agg_cpu() - agg0, db = PostgresCpuSeconds() - db0,
               self = SelfCpuSeconds() - self0;
  stop = true;
  for (std::thread& t : threads) t.join();
  if (failed) state.SkipWithError("upload failed");
  state.SetItemsProcessed(done);
  state.counters["D"] = static_cast<double>(params.dimension());
  state.counters["replicas"] = replicas;
  state.counters["agg_cores"] = agg / wall;
  state.counters["db_cores"] = db / wall;
  state.counters["client_cores"] = self / wall;
  state.counters["db_share"] = db / std::max(1e-9, agg + db + self);
  state.counters["reports_per_agg_cpu_s"] = static_cast<double>(done) / std::max(1e-9, agg);
  leaders.clear();
  helpers.clear();
  if (getenv("TANDEM_KEEP_TEST_DIR") == nullptr) std::filesystem::remove_all(dir);
}

BENCHMARK(BM_ReplicaIngest)
    ->ArgNames({"log2D", "replicas"})
    ->Args({17, 1})
    ->Args({17, 2})
    ->Args({17, 4})
    ->Args({20, 1})
    ->Args({20, 2})
    ->Args({20, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tandem
