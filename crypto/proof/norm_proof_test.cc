#include "crypto/proof/norm_proof.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/public_digest.h"
#include "crypto/dpf/sparse_dpf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

constexpr int kLogBlocks = 3, kBlock = 8, kGroups = 4;
constexpr uint64_t kDim = uint64_t{kGroups} * (1 << kLogBlocks) * kBlock;

proto::BlockDpfParameters Group() {
  proto::BlockDpfParameters g;
  g.set_log_num_blocks(kLogBlocks);
  g.set_block_size(kBlock);
  g.set_value_bits(64);
  return g;
}

proto::NormBoundParameters Bound(uint64_t block, uint64_t total) {
  proto::NormBoundParameters b;
  b.set_max_block_l2_squared(block);
  b.set_max_l2_squared(total);
  return b;
}

struct Report {
  std::string id = std::string(16, 'r');
  std::vector<uint32_t> idx;
  std::pair<proto::SparseKeySet, proto::SparseKeySet> keys;
};

Report MakeKeys(const std::vector<int64_t>& values, SecureRandom* rng) {
  SparseDpf dpf = SparseDpf::Create(kDim, kBlock, kGroups, 64).value();
  Report r;
  for (int g = 0; g < kGroups; ++g) r.idx.push_back(rng->NextUint64().value() % 8);
  std::vector<uint64_t> enc(values.begin(), values.end());
  r.keys = dpf.GenerateKeys(r.idx, enc, rng).value();
  return r;
}

// Both servers' path: fused full-domain evaluation and derived shares
// (EvaluateAndDerive, as aggregator/core), query, decide.
bool ServersAccept(const NormProofSystem& sys, const std::string& id,
                   const proto::SparseKeySet& k0, const proto::SparseKeySet& k1,
                   const proto::NormProofShare& p0, const proto::NormProofShare& p1,
                   const std::string& seed0, const std::string& seed1) {
  SparseDpf dpf = SparseDpf::Create(kDim, kBlock, kGroups, 64).value();
  SparseDpfScratch scratch;
  proto::NormProofVerifierShare v[2];
  const proto::SparseKeySet* keys[2] = {&k0, &k1};
  const proto::NormProofShare* shares[2] = {&p0, &p1};
  const std::string* seeds[2] = {&seed0, &seed1};
  for (int party = 0; party < 2; ++party) {
    if (!sys.ValidateShare(*shares[party], party).ok()) return false;
    std::vector<uint64_t> derived(sys.circuit().derived_length());
    auto digest = sys.EvaluateAndDerive(dpf, party, *keys[party], absl::MakeSpan(derived), &scratch);
    EXPECT_THAT(digest.status(), IsOk());
    if (!digest.ok()) return false;
    auto share =
        sys.Query(party, id, *keys[party], *shares[party], derived, *digest, *seeds[party]);
    EXPECT_THAT(share.status(), IsOk());
    v[party] = *share;
  }
  const bool a = sys.Decide(v[0], v[1]), b = sys.Decide(v[1], v[0]);
  EXPECT_EQ(a, b);  // the decision is joint: same inputs, same answer
  return a;
}

class NormProofTest : public ::testing::Test {
 protected:
  NormProofTest() : sys_(NormProofSystem::Create(Group(), kGroups, Bound(200, 500)).value()) {}

  bool Accept(const Report& r, const proto::NormProofShare& p0, const proto::NormProofShare& p1) {
    return ServersAccept(sys_, r.id, r.keys.first, r.keys.second, p0, p1, seed_, seed_);
  }

  NormProofSystem sys_;
  std::string seed_ = std::string(32, 'q');
};

std::vector<int64_t> RandomValues(SecureRandom* rng, int magnitude) {
  std::vector<int64_t> v(kGroups * kBlock);
  for (auto& x : v) {
    x = static_cast<int64_t>(rng->NextUint64().value() % (2 * magnitude + 1)) - magnitude;
  }
  return v;
}

TEST_F(NormProofTest, HonestReportsAreAlwaysAccepted) {
  auto rng = DeterministicRandom::FromSeed(1);
  for (int trial = 0; trial < 12; ++trial) {
    // |x| <= 3: block norm^2 <= 72 <= 200, total <= 288 <= 500.
    Report r = MakeKeys(RandomValues(rng.get(), 3), rng.get());
    auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get());
    ASSERT_THAT(proof.status(), IsOk());
    EXPECT_TRUE(Accept(r, proof->first, proof->second)) << trial;
  }
  // Exactly at the bounds: block norm^2 = 200 (2 * 10^2) in each of two
  // groups, total 400 + 100 = 500.
  std::vector<int64_t> v(kGroups * kBlock, 0);
  v[0] = 10, v[1] = -10, v[8] = 10, v[9] = 10, v[16] = -10;
  Report r = MakeKeys(v, rng.get());
  // The P it hashed, handed out for the device's signatures, is the keys'.
  ProofDigest public_parts{};
  auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get(), &public_parts);
  ASSERT_THAT(proof.status(), IsOk());
  EXPECT_TRUE(Accept(r, proof->first, proof->second));
  EXPECT_EQ(public_parts, PublicPartsDigest(r.keys.first).value());
}

TEST_F(NormProofTest, ServerDerivationMatchesTheClients) {
  auto rng = DeterministicRandom::FromSeed(2);
  Report r = MakeKeys(RandomValues(rng.get(), 3), rng.get());
  std::vector<uint64_t> derived, u0, u1;
  ASSERT_THAT(sys_.ClientValues(r.keys.first, r.keys.second, &derived, &u0, &u1),
              IsOk());
  SparseDpf dpf = SparseDpf::Create(kDim, kBlock, kGroups, 64).value();
  SparseDpfScratch scratch;
  std::vector<uint64_t> sum(derived.size(), 0);
  for (const proto::SparseKeySet* keys : {&r.keys.first, &r.keys.second}) {
    std::vector<uint64_t> expansion(kDim, 0), share(derived.size());
    ASSERT_THAT(dpf.EvaluateAndAccumulate(*keys, absl::MakeSpan(expansion), &scratch).status(),
                IsOk());
    const int party = static_cast<int>(keys->keys(0).party());
    ASSERT_THAT(sys_.DeriveInputShare(party, expansion, absl::MakeSpan(share)), IsOk());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = gl::Add(sum[i], share[i]);
    // The fused path: same shares, same digest as the separate passes.
    std::vector<uint64_t> fused(derived.size());
    auto digest = sys_.EvaluateAndDerive(dpf, party, *keys, absl::MakeSpan(fused), &scratch);
    ASSERT_THAT(digest.status(), IsOk());
    EXPECT_EQ(fused, share);
    EXPECT_EQ(*digest, dpf.ComputeProofDigest(*keys, &scratch).value());
  }
  EXPECT_EQ(sum, derived);
  // Parameters that differ from the proof system's are refused.
  SparseDpf other = SparseDpf::Create(kDim, kBlock / 2, kGroups, 64).value();
  std::vector<uint64_t> out(derived.size());
  EXPECT_THAT(sys_.EvaluateAndDerive(other, 0, r.keys.first, absl::MakeSpan(out), &scratch)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(NormProofTest, OverBoundReportsAreRejected) {
  auto rng = DeterministicRandom::FromSeed(3);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int64_t> v = RandomValues(rng.get(), 3);
    v[trial % v.size()] = trial < 3 ? 15 : (int64_t{1} << (20 + 6 * trial));  // 225 > 200
    Report r = MakeKeys(v, rng.get());
    EXPECT_THAT(sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument));
    // A cheating client proves an all-zero witness (c = 0, slack 0) or the
    // honest-looking witness of a small vector: both rejected.
    std::vector<uint64_t> derived, u0, u1;
    ASSERT_THAT(sys_.ClientValues(r.keys.first, r.keys.second, &derived, &u0, &u1),
                IsOk());
    std::vector<uint64_t> zero(sys_.circuit().witness_length(), 0);
    auto cheat = sys_.ProveWithWitness(r.id, r.keys.first, r.keys.second, derived, zero,
                                       rng.get());
    ASSERT_THAT(cheat.status(), IsOk());
    EXPECT_FALSE(Accept(r, cheat->first, cheat->second));
    std::vector<uint64_t> small_u1 = u1;
    for (size_t j = 0; j < u0.size(); ++j) small_u1[j] = u0[j];  // claims v = 0 everywhere
    auto w = sys_.circuit().Witness(u0, small_u1).value();
    auto cheat2 = sys_.ProveWithWitness(r.id, r.keys.first, r.keys.second, derived, w, rng.get());
    ASSERT_THAT(cheat2.status(), IsOk());
    EXPECT_FALSE(Accept(r, cheat2->first, cheat2->second));
  }
}

TEST_F(NormProofTest, TamperedSharesAreRejected) {
  auto rng = DeterministicRandom::FromSeed(4);
  Report r = MakeKeys(RandomValues(rng.get(), 3), rng.get());
  auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get()).value();
  ASSERT_TRUE(Accept(r, proof.first, proof.second));
  for (int pos : {0, 7, proof.first.proof_size() / 2, proof.first.proof_size() - 1}) {
    auto bad = proof.first;
    bad.set_proof(pos, gl::Add(bad.proof(pos), 1));  // a flipped proof share
    EXPECT_FALSE(Accept(r, bad, proof.second)) << pos;
  }
  for (int pos : {0, proof.first.witness_size() - 1}) {
    auto bad = proof.first;
    bad.set_witness(pos, gl::Add(bad.witness(pos), 1));
    EXPECT_FALSE(Accept(r, bad, proof.second)) << pos;
  }
  auto bad_seed = proof.second;
  bad_seed.mutable_seed()->at(0) ^= 1;
  EXPECT_FALSE(Accept(r, proof.first, bad_seed));
  auto bad_part = proof.first;
  bad_part.mutable_peer_joint_rand_part()->at(5) ^= 1;
  EXPECT_FALSE(Accept(r, bad_part, proof.second));
  // Servers that disagree on the query seed reject.
  EXPECT_FALSE(ServersAccept(sys_, r.id, r.keys.first, r.keys.second, proof.first, proof.second,
                             seed_, std::string(32, 'x')));
}

TEST_F(NormProofTest, InconsistentBlocksAndReplaysAreRejected) {
  auto rng = DeterministicRandom::FromSeed(5);
  Report small = MakeKeys(RandomValues(rng.get(), 3), rng.get());
  auto proof = sys_.Prove(small.id, small.keys.first, small.keys.second, rng.get())
                   .value();
  // The proof of a small report attached to keys that encode large blocks.
  std::vector<int64_t> big = RandomValues(rng.get(), 3);
  big[3] = 1 << 20;
  Report large = MakeKeys(big, rng.get());
  EXPECT_FALSE(Accept(large, proof.first, proof.second));
  // Leader keys of one report with helper keys of another.
  Report mixed = small;
  mixed.keys.second = large.keys.second;
  EXPECT_FALSE(Accept(mixed, proof.first, proof.second));
  // The same keys and proof replayed under another report id.
  Report replay = small;
  replay.id = std::string(16, 'z');
  EXPECT_FALSE(Accept(replay, proof.first, proof.second));
  EXPECT_TRUE(Accept(small, proof.first, proof.second));
}

TEST_F(NormProofTest, ValidateShareChecksEveryField) {
  auto rng = DeterministicRandom::FromSeed(6);
  Report r = MakeKeys(RandomValues(rng.get(), 1), rng.get());
  auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get()).value();
  EXPECT_THAT(sys_.ValidateShare(proof.first, 0), IsOk());
  EXPECT_THAT(sys_.ValidateShare(proof.second, 1), IsOk());
  EXPECT_THAT(sys_.ValidateShare(proof.first, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sys_.ValidateShare(proof.second, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  auto bad = proof.first;
  bad.set_proof(0, gl::kP);
  EXPECT_THAT(sys_.ValidateShare(bad, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = proof.first;
  bad.mutable_witness()->RemoveLast();
  EXPECT_THAT(sys_.ValidateShare(bad, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = proof.first;
  bad.set_blind("short");
  EXPECT_THAT(sys_.ValidateShare(bad, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Each single element of the leader's witness share, proof share and
// derived input share, perturbed, makes the servers reject.
TEST_F(NormProofTest, EverySingleElementTamperingIsRejected) {
  auto rng = DeterministicRandom::FromSeed(8);
  Report r = MakeKeys(RandomValues(rng.get(), 3), rng.get());
  auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get()).value();
  SparseDpf dpf = SparseDpf::Create(kDim, kBlock, kGroups, 64).value();
  SparseDpfScratch scratch;
  std::vector<uint64_t> derived0(sys_.circuit().derived_length()), derived1(derived0.size());
  const ProofDigest digest0 =
      sys_.EvaluateAndDerive(dpf, 0, r.keys.first, absl::MakeSpan(derived0), &scratch).value();
  const ProofDigest digest1 =
      sys_.EvaluateAndDerive(dpf, 1, r.keys.second, absl::MakeSpan(derived1), &scratch).value();
  const proto::NormProofVerifierShare v1 =
      sys_.Query(1, r.id, r.keys.second, proof.second, derived1, digest1, seed_).value();
  auto accept = [&](const proto::NormProofShare& share, const std::vector<uint64_t>& derived) {
    auto v0 = sys_.Query(0, r.id, r.keys.first, share, derived, digest0, seed_);
    EXPECT_THAT(v0.status(), IsOk());
    return v0.ok() && sys_.Decide(*v0, v1);
  };
  ASSERT_TRUE(accept(proof.first, derived0));
  for (int pos = 0; pos < proof.first.proof_size(); ++pos) {
    auto bad = proof.first;
    bad.set_proof(pos, gl::Add(bad.proof(pos), 1));
    EXPECT_FALSE(accept(bad, derived0)) << "proof " << pos;
  }
  for (int pos = 0; pos < proof.first.witness_size(); ++pos) {
    auto bad = proof.first;
    bad.set_witness(pos, gl::Sub(bad.witness(pos), 1));
    EXPECT_FALSE(accept(bad, derived0)) << "witness " << pos;
  }
  for (size_t pos = 0; pos < derived0.size(); ++pos) {
    std::vector<uint64_t> bad = derived0;
    bad[pos] = gl::Add(bad[pos], 1);
    EXPECT_FALSE(accept(proof.first, bad)) << "derived " << pos;
  }
}

// Reports of protocols v2 (F_(2^61-1), Lagrange domain), v3 (Mul3
// gadgets, three wires per call) and v4 (Cubic(a, x) gadgets, two wires
// per call, binary slack): a proof of their length is refused by
// ValidateShare with a message naming v5, elements >= p are refused, and a
// share of the right length verifies to a clean rejection.
TEST_F(NormProofTest, OldVersionSharesAreRefusedCleanly) {
  auto rng = DeterministicRandom::FromSeed(9);
  Report r = MakeKeys(RandomValues(rng.get(), 3), rng.get());
  auto proof = sys_.Prove(r.id, r.keys.first, r.keys.second, rng.get()).value();
  const RangeSquareFlp& flp = sys_.circuit().flp();
  const NormCircuit& circuit = sys_.circuit();
  // v2 to v4 made M = 3n + k S_b + S_t gadget calls (S: binary slack bits).
  const size_t m = 3 * circuit.num_values() +
                   circuit.num_blocks() * std::bit_width(circuit.bound().max_block_l2_squared) +
                   std::bit_width(circuit.bound().max_l2_squared);
  const size_t q = 2;
  // v2 lengths: c = ceil(2 sqrt(M)), N = Q + ceil(M / c), proof 3cQ + 3(N-1) + 1.
  const size_t c2 = static_cast<size_t>(std::ceil(2.0 * std::sqrt(static_cast<double>(m))));
  const size_t n2 = q + (m + c2 - 1) / c2;
  const size_t v2_length = 6 * c2 + 3 * (n2 - 1) + 1;
  // v3 lengths: 3cQ + 3N, N = 2^k >= Q + ceil(M / c), c minimising it.
  // v4 lengths: 2cQ + 3N, the same way.
  size_t v3_length = ~size_t{0}, v4_length = ~size_t{0};
  for (size_t c = 1; c <= m; ++c) {
    const size_t n = std::bit_ceil(q + (m + c - 1) / c);
    v3_length = std::min(v3_length, 3 * c * q + 3 * n);
    v4_length = std::min(v4_length, 2 * c * q + 3 * n);
  }
  for (const size_t old_length : {v2_length, v3_length, v4_length}) {
    ASSERT_NE(old_length, flp.proof_length());
    auto old = proof.first;
    old.clear_proof();
    for (size_t i = 0; i < old_length; ++i) old.add_proof(rng->NextUint64().value() >> 3);
    const absl::Status status = sys_.ValidateShare(old, 0);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument)) << old_length;
    EXPECT_THAT(status.message(), ::testing::HasSubstr("protocol v5"));
    EXPECT_FALSE(Accept(r, old, proof.second));
  }

  auto big = proof.first;
  big.set_witness(0, ~uint64_t{0});
  EXPECT_THAT(sys_.ValidateShare(big, 0).message(), ::testing::HasSubstr("2^64 - 2^32 + 1"));
  big = proof.first;
  big.set_proof(big.proof_size() - 1, gl::kP);
  EXPECT_THAT(sys_.ValidateShare(big, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  big.set_proof(big.proof_size() - 1, gl::kP - 1);  // the largest element is valid
  EXPECT_THAT(sys_.ValidateShare(big, 0), IsOk());

  auto same_length = proof.first;
  for (int i = 0; i < same_length.proof_size(); ++i) {
    same_length.set_proof(i, rng->NextUint64().value() >> 3);  // below 2^61 - 1
  }
  EXPECT_THAT(sys_.ValidateShare(same_length, 0), IsOk());
  EXPECT_FALSE(Accept(r, same_length, proof.second));
  EXPECT_TRUE(Accept(r, proof.first, proof.second));
}

TEST(NormProofSystem, SoundnessAtTheBenchmarkParameters) {
  proto::BlockDpfParameters g;
  g.set_log_num_blocks(6);  // D = 16 * 2^6 * 2^10 = 2^20
  g.set_block_size(1024);
  g.set_value_bits(64);
  const uint64_t bound = L2SquaredBoundForClip(1.0, 16, 16 * 1024);
  auto sys = NormProofSystem::Create(g, 16, Bound(bound, bound));
  ASSERT_THAT(sys.status(), IsOk());
  EXPECT_LE(sys->SoundnessLog2(), -60.0);
  // 2/(p - 1) dominates: log2(2^-63 + (767 / 2^64)^2) ~ -63 (N = 256).
  EXPECT_NEAR(sys->SoundnessLog2(), -63.0, 0.01);
  EXPECT_EQ(sys->circuit().values_per_row(), 69u);
  EXPECT_EQ(sys->circuit().flp().proof_length(), 1184u);    // 208 * 2 + 768
  EXPECT_EQ(sys->circuit().flp().verifier_length(), 419u);  // 1 + 2 (208 + 1)
}

TEST(L2SquaredBoundForClip, ClosedForm) {
  EXPECT_EQ(L2SquaredBoundForClip(1.0, 4, 16), 324u);  // (16 + 2)^2
  EXPECT_EQ(L2SquaredBoundForClip(0.5, 0, 4), 3u);     // ceil((0.5 + 1)^2) = ceil(2.25)
}

}  // namespace
}  // namespace tandem::crypto::proof
