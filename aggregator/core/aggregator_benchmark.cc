// Sustained ingest of one aggregation server: per report, validation of the
// upload, the VDPF digest for the verification exchange and the expansion
// into the accumulator, on all cores (oneTBB). The leader and the helper do
// the same work, so this is the per-server rate a deployment sees; the
// physical bound is the AES work of the expansion (bench/README.md).
// BM_IngestTwoPass is the former schedule (digest pass, then a second
// expansion into the accumulator) for comparison.
// BM_IngestTicketed adds what the trust boundary costs per upload: the
// coordinator's Ed25519 ticket verified and checked against the report;
// BM_IngestDeviceSigned also the device's signature of the upload (issue 34;
// its content digest is the SHA-256 the server computes for its store
// anyway, so it is precomputed here).
//   build/aggregator/core/aggregator_benchmark --benchmark_filter=Ingest
#include <benchmark/benchmark.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/prepared_noise.h"
#include "aggregator/testing/report_factory.h"
#include "base/random.h"
#include "crypto/dp/discrete_gaussian.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator {
namespace {

// D = k * 2^d * B with B = 2^10, k = 16.
void Ingest(benchmark::State& state, bool ticketed, bool fused = true, bool device = false) {
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  const uint32_t block = 1024, groups = 16;
  const uint32_t log_blocks = log_d - 10 - 4;
  proto::RoundParameters params =
      testing::MakeRoundParameters("bench", 1, log_blocks, block, groups);
  auto dpf = crypto::SparseDpf::Create(params.dimension(), block, groups, 64);
  if (!dpf.ok()) {
    state.SkipWithError("dpf");
    return;
  }
  constexpr int kReports = 16;
  std::vector<proto::SparseKeySet> shares;
  std::vector<proto::UploadRequest> uploads;
  std::vector<std::string> contents;  // the stored encodings' digests
  auto key = crypto::Ed25519SigningKey::FromSeed(std::string(32, 's'));
  auto verifying = key->VerifyingKey();
  for (int i = 0; i < kReports; ++i) {
    auto r = testing::MakeReport(params, 1000 + i);
    if (!r.ok() || !testing::AttachTicket(*r, params, *key, int64_t{1} << 50).ok()) {
      state.SkipWithError("report");
      return;
    }
    shares.push_back(r->to_leader.key_share());
    uploads.push_back(r->to_leader);
    contents.push_back(crypto::UploadContentDigest(r->to_leader.key_share(), nullptr,
                                                   crypto::TicketDigest(r->to_leader.ticket())));
  }
  std::vector<const proto::SparseKeySet*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  const crypto::ExpectedKeySetShape shape = dpf->Shape(0);
  std::vector<uint64_t> acc(params.dimension(), 0);
  for (auto _ : state) {
    if (ticketed) {
      // Concurrent uploads check their tickets on the server's threads.
      std::atomic<bool> bad{false};
      tbb::parallel_for(size_t{0}, uploads.size(), [&](size_t i) {
        const proto::UploadRequest& u = uploads[i];
        auto t = crypto::VerifyUploadTicket(*verifying, u.ticket());
        if (!t.ok() ||
            !crypto::CheckTicketFor(*t, u.task_id(), u.round_id(), u.report_id(), 1).ok()) {
          bad = true;
        } else if (device && !crypto::VerifyUploadSignature(*t, crypto::UploadRole::kLeader,
                                                            crypto::TicketDigest(u.ticket()),
                                                            contents[i], u.device_signature())
                                  .ok()) {
          bad = true;
        }
      });
      if (bad) state.SkipWithError("ticket");
    }
    for (const auto& s : shares) {
      if (!crypto::ValidateSparseKeySet(s, shape).ok()) state.SkipWithError("validate");
    }
    // One expansion per report: digest and accumulation in one pass, as
    // the servers' Verify exchange runs it (expansion.h).
    if (fused) {
      auto digests = ComputeDigests(*dpf, ptrs, absl::MakeSpan(acc));
      if (!digests.ok()) state.SkipWithError("expand");
    } else {  // the former schedule: digest pass, then accumulation pass
      auto digests = ComputeDigests(*dpf, ptrs);
      if (!digests.ok() || !AccumulateShares(*dpf, ptrs, absl::MakeSpan(acc)).ok()) {
        state.SkipWithError("expand");
      }
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(state.iterations() * kReports);
  state.counters["D"] = static_cast<double>(params.dimension());
  state.counters["upload_bytes"] = static_cast<double>(shares[0].ByteSizeLong());
}
void BM_Ingest(benchmark::State& state) { Ingest(state, false); }
void BM_IngestTicketed(benchmark::State& state) { Ingest(state, true); }
void BM_IngestDeviceSigned(benchmark::State& state) { Ingest(state, true, true, true); }
BENCHMARK(BM_IngestDeviceSigned)->Arg(17)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_IngestTwoPass(benchmark::State& state) { Ingest(state, false, /*fused=*/false); }
BENCHMARK(BM_Ingest)->Arg(17)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_IngestTicketed)->Arg(17)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_IngestTwoPass)->Arg(17)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// A release's noise as an aggregator draws it (dp::NoiseShareForRelease,
// OpenSSL randomness, chunks on every core through RunOnEveryCore); arg:
// log2 of the share's length. crypto_dp_benchmark BM_NoiseShare is the
// same noise on one thread.
void BM_ReleaseNoise(benchmark::State& state) {
  std::vector<uint64_t> share(size_t{1} << state.range(0));
  for (auto _ : state) {
    if (!dp::NoiseShareForRelease({{uint64_t{1} << 32, 1}, 1}, 1, absl::MakeSpan(share),
                                  OpenSslRandom::Default(), RunOnEveryCore)
             .ok()) {
      state.SkipWithError("noise failed");
    }
    benchmark::DoNotOptimize(share.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(share.size()));
}
BENCHMARK(BM_ReleaseNoise)->Arg(15)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// What is left of the noise at a release when it was drawn while the round
// was open (prepared_noise.h; the draw itself, untimed, is BM_ReleaseNoise's
// work on a thread of its own): one pass adding it to the share.
void BM_ReleasePreparedNoise(benchmark::State& state) {
  std::vector<uint64_t> share(size_t{1} << state.range(0));
  int64_t round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto noise = PreparedNoise::Start(++round, {uint64_t{1} << 32, 1}, share.size(),
                                      OpenSslRandom::Default());
    if (!noise.ok()) {
      state.SkipWithError("noise failed");
      break;
    }
    while (!(*noise)->Drawn()) absl::SleepFor(absl::Milliseconds(1));
    state.ResumeTiming();
    if (!(*noise)->AddTo(absl::MakeSpan(share)).ok()) state.SkipWithError("noise failed");
    benchmark::DoNotOptimize(share.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(share.size()));
}
BENCHMARK(BM_ReleasePreparedNoise)->Arg(15)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// What a server's RPC layer pays per upload before any check: parsing the
// serialized request (gRPC's sync handler parses into a heap message, one
// allocation per key, correction word and bytes field) and freeing it;
// arg 1 parses onto a protobuf arena with the daemon's options
// (Aggregator::UploadArenaOptions), as its upload service does.
void BM_ParseUpload(benchmark::State& state) {
  const uint32_t log_d = static_cast<uint32_t>(state.range(0));
  proto::RoundParameters params = testing::MakeRoundParameters("bench", 1, log_d - 14, 1024, 16);
  auto r = testing::MakeReport(params, 7);
  if (!r.ok()) {
    state.SkipWithError("report");
    return;
  }
  const std::string wire = r->to_leader.SerializeAsString();
  const bool arena = state.range(1) != 0;
  for (auto _ : state) {
    if (arena) {
      google::protobuf::Arena a(Aggregator::UploadArenaOptions());
      auto* m = google::protobuf::Arena::CreateMessage<proto::UploadRequest>(&a);
      if (!m->ParseFromString(wire)) state.SkipWithError("parse");
      benchmark::DoNotOptimize(m);
    } else {
      auto m = std::make_unique<proto::UploadRequest>();
      if (!m->ParseFromString(wire)) state.SkipWithError("parse");
      benchmark::DoNotOptimize(m.get());
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(wire.size()));
}
BENCHMARK(BM_ParseUpload)->ArgsProduct({{17, 20}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::aggregator
