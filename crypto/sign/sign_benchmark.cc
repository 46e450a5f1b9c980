// Ticket signing and verification costs.
//   build-sign/crypto/sign/crypto_sign_benchmark
// BM_TicketVerify is the aggregator's per-report cost (VerifyUploadTicket +
// CheckTicketFor); BM_TicketSign the coordinator's per-check-in cost.
// BM_OpenSslEd25519{Verify,Sign,FromSeed} are the peers of the raw rows:
// OpenSSL 3's EVP Ed25519 as this code called it before
// crypto/sign/edwards25519.h (an EVP context per call).
#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "crypto/sign/device_auth.h"
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

// Device identity (device_auth.h): the device's cost per check-in and per
// upload, the servers' cost to verify them.
void BM_CheckInSign(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  const std::string nonce(kCheckInNonceSize, 'n');
  proto::CheckInRequest r;
  r.set_task_id("mnist-fedavg");
  for (auto _ : state) {
    if (!SignCheckIn(key, kExpiry, nonce, &r).ok()) state.SkipWithError("sign failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInSign);

void BM_CheckInVerify(benchmark::State& state) {
  proto::CheckInRequest r;
  r.set_task_id("mnist-fedavg");
  (void)SignCheckIn(BenchKey(), kExpiry, std::string(kCheckInNonceSize, 'n'), &r);
  for (auto _ : state) {
    auto k = VerifyCheckIn(r, kExpiry, 60000);
    if (!k.ok()) state.SkipWithError("verify failed");
    benchmark::DoNotOptimize(k);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckInVerify);

// An upload's device signature over a share of `range(0)` value corrections
// (16 groups x 1,024 x 8 bytes = the 134 KB share of D = 2^20): the content
// digest (SHA-256 over the share) and the signature. Per upload; a client
// signs two.
void BM_UploadSign(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  proto::UploadTicket t = BenchTicket(1);
  t.set_device_public_key(key.PublicKeyRaw());
  proto::UploadRequest u;
  *u.mutable_ticket() = *SignUploadTicket(key, t);
  proto::SparseKeySet* ks = u.mutable_key_share();
  ks->set_num_groups(16);
  for (int g = 0; g < 16; ++g) {
    proto::BlockDpfKey* k = ks->add_keys();
    k->set_seed(std::string(16, 's'));
    for (int64_t v = 0; v < state.range(0) / 16; ++v) k->add_value_correction(v * 2654435761u);
  }
  for (auto _ : state) {
    if (!SignUpload(key, UploadRole::kLeader, &u).ok()) state.SkipWithError("sign failed");
    benchmark::DoNotOptimize(u);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(ks->ByteSizeLong()));
}
BENCHMARK(BM_UploadSign)->Arg(16 * 1024);

// What an aggregator adds per upload: one Ed25519 verification (it has the
// content digest already, from storing the share).
void BM_UploadSignatureVerify(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  proto::UploadTicket t = BenchTicket(1);
  t.set_device_public_key(key.PublicKeyRaw());
  const std::string td(32, 't'), content(32, 'c');
  const std::string sig = *key.Sign(UploadSigningInput(UploadRole::kHelper, td, content));
  for (auto _ : state) {
    absl::Status s = VerifyUploadSignature(t, UploadRole::kHelper, td, content, sig);
    if (!s.ok()) state.SkipWithError("verify failed");
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UploadSignatureVerify);

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

void BM_OpenSslEd25519Verify(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  const std::string& raw = key.PublicKeyRaw();
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                  reinterpret_cast<const unsigned char*>(raw.data()), raw.size()),
      &EVP_PKEY_free);
  const std::string msg(64, 'm');
  const std::string sig = *key.Sign(msg);
  for (auto _ : state) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    const bool ok =
        EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) == 1 &&
        EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                         reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
    if (!ok) state.SkipWithError("OpenSSL verify failed");
    benchmark::DoNotOptimize(ok);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OpenSslEd25519Verify);

// Raw signing of a 64-byte message, and OpenSSL's EVP signing of the same
// (its peer: what Sign() called before edwards25519_sign.cc; identical
// signature bytes).
void BM_Ed25519SignRaw(benchmark::State& state) {
  const Ed25519SigningKey key = BenchKey();
  const std::string msg(64, 'm');
  for (auto _ : state) {
    absl::StatusOr<std::string> sig = key.Sign(msg);
    if (!sig.ok()) state.SkipWithError("sign failed");
    benchmark::DoNotOptimize(sig);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Ed25519SignRaw);

void BM_OpenSslEd25519Sign(benchmark::State& state) {
  const std::string seed(32, 's');
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                   reinterpret_cast<const unsigned char*>(seed.data()), 32),
      &EVP_PKEY_free);
  const std::string msg(64, 'm');
  std::string sig(64, '\0');
  for (auto _ : state) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    size_t len = sig.size();
    const bool ok =
        EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) == 1 &&
        EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                       reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
    if (!ok) state.SkipWithError("OpenSSL sign failed");
    benchmark::DoNotOptimize(sig);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OpenSslEd25519Sign);

// A device's fresh key from a seed (SHA-512 and [s]B), and OpenSSL's.
void BM_Ed25519FromSeed(benchmark::State& state) {
  const std::string seed(32, 's');
  for (auto _ : state) {
    auto key = Ed25519SigningKey::FromSeed(seed);
    if (!key.ok()) state.SkipWithError("FromSeed failed");
    benchmark::DoNotOptimize(key);
  }
}
BENCHMARK(BM_Ed25519FromSeed);

void BM_OpenSslEd25519FromSeed(benchmark::State& state) {
  const std::string seed(32, 's');
  for (auto _ : state) {
    EVP_PKEY* pkey = EVP_PKEY_new_raw_private_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), 32);
    unsigned char pub[32];
    size_t len = sizeof(pub);
    if (pkey == nullptr || EVP_PKEY_get_raw_public_key(pkey, pub, &len) != 1) {
      state.SkipWithError("OpenSSL key failed");
    }
    benchmark::DoNotOptimize(pub);
    EVP_PKEY_free(pkey);
  }
}
BENCHMARK(BM_OpenSslEd25519FromSeed);

// Loading a verifying key (the point and small-order checks, -A's odd
// multiples): once per report for the ticket's device key.
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
