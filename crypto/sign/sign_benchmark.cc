// Ticket signing and verification costs.
//   build-sign/crypto/sign/crypto_sign_benchmark
// BM_TicketVerify is the aggregator's per-report cost (VerifyUploadTicket +
// CheckTicketFor); BM_TicketSign the coordinator's per-check-in cost.
#include <cstdint>
#include <string>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/sign/ed25519.h"
#include "crypto/sign/upload_ticket.h"
#include "proto/aggregator.pb.h"

namespace tandem::crypto {
namespace {

constexpr int64_t kExpiry = 1700000000000;

Ed25519SigningKey BenchKey() {
  auto rng = DeterministicRandom::FromSeed(1);
  return *Ed25519SigningKey::Generate(rng.get());
}

proto::UploadTicket BenchTicket(uint64_t i) {
  proto::UploadTicket t;
  t.set_task_id("mnist-fedavg");
  t.set_round_id(17);
  std::string id(16, '\0');
  for (int b = 0; b < 8; ++b) id[b] = static_cast<char>(i >> (8 * b));
  t.set_ticket_id(id);
  t.set_expiry_unix_ms(kExpiry);
  return t;
}

void BM_TicketSign(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  uint64_t i = 0;
  for (auto _ : state) {
    auto s = SignUploadTicket(key, BenchTicket(i++));
    if (!s.ok()) state.SkipWithError("sign failed");
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TicketSign);

void BM_TicketVerify(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  const Ed25519VerifyingKey pub = *key.VerifyingKey();
  const proto::UploadTicket ticket = BenchTicket(5);
  const proto::SignedUploadTicket signed_ticket = *SignUploadTicket(key, ticket);
  for (auto _ : state) {
    auto t = VerifyUploadTicket(pub, signed_ticket);
    if (!t.ok() || !CheckTicketFor(*t, "mnist-fedavg", 17, ticket.ticket_id(), kExpiry - 1).ok()) {
      state.SkipWithError("verify failed");
    }
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TicketVerify);

// Raw Ed25519 verification of a 64-byte message (the floor under
// BM_TicketVerify).
void BM_Ed25519VerifyRaw(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  const Ed25519VerifyingKey pub = *Ed25519VerifyingKey::FromRaw(key.PublicKeyRaw());
  const std::string msg(64, 'm');
  const std::string sig = *key.Sign(msg);
  for (auto _ : state) {
    absl::Status s = pub.Verify(msg, sig);
    if (!s.ok()) state.SkipWithError("verify failed");
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Ed25519VerifyRaw);

// Loading a verifying key (includes the point and small-order checks); done
// once per process, listed so its cost is known.
void BM_Ed25519VerifyingKeyFromRaw(benchmark::State& state) {
  const std::string raw = BenchKey().PublicKeyRaw();
  for (auto _ : state) {
    auto k = Ed25519VerifyingKey::FromRaw(raw);
    if (!k.ok()) state.SkipWithError("FromRaw failed");
    benchmark::DoNotOptimize(k);
  }
}
BENCHMARK(BM_Ed25519VerifyingKeyFromRaw);

}  // namespace
}  // namespace tandem::crypto
