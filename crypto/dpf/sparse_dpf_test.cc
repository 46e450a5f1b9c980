// SparseDpf: reconstruction over many (D, B, k, value_bits), honest keys
// always verify, and malformed or adversarial key pairs are caught by the
// VDPF digest or the validator.
#include "crypto/dpf/sparse_dpf.h"

#include <tuple>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using KeyPair = std::pair<proto::SparseKeySet, proto::SparseKeySet>;

struct Report {
  std::vector<uint32_t> indices;
  std::vector<uint64_t> values;
};

Report RandomReport(const SparseDpf& dpf, SecureRandom* rng) {
  Report r;
  const uint64_t mask = dpf.value_bits() == 64 ? ~uint64_t{0} : 0xffffffffULL;
  for (int g = 0; g < dpf.num_groups(); ++g) {
    r.indices.push_back(static_cast<uint32_t>(rng->NextUint64().value() % dpf.blocks_per_group()));
  }
  for (int i = 0; i < dpf.num_groups() * dpf.block_size(); ++i) {
    r.values.push_back(rng->NextUint64().value() & mask);
  }
  return r;
}

// Sum of both servers' evaluations, mod 2^value_bits.
std::vector<uint64_t> Reconstruct(const SparseDpf& dpf, const KeyPair& keys,
                                  ProofDigest* d0 = nullptr, ProofDigest* d1 = nullptr) {
  std::vector<uint64_t> a0(dpf.dimension()), a1(dpf.dimension());
  SparseDpfScratch scratch;
  auto r0 = dpf.EvaluateAndAccumulate(keys.first, absl::MakeSpan(a0), &scratch);
  auto r1 = dpf.EvaluateAndAccumulate(keys.second, absl::MakeSpan(a1), &scratch);
  EXPECT_THAT(r0.status(), IsOk());
  EXPECT_THAT(r1.status(), IsOk());
  if (d0 != nullptr && r0.ok()) *d0 = *r0;
  if (d1 != nullptr && r1.ok()) *d1 = *r1;
  const uint64_t mask = dpf.value_bits() == 64 ? ~uint64_t{0} : 0xffffffffULL;
  for (size_t i = 0; i < a0.size(); ++i) a0[i] = (a0[i] + a1[i]) & mask;
  return a0;
}

// Number of blocks with a non-zero entry in group g.
int NonZeroBlocks(const SparseDpf& dpf, const std::vector<uint64_t>& v, int g) {
  int count = 0;
  for (uint64_t blk = 0; blk < dpf.blocks_per_group(); ++blk) {
    const uint64_t base = g * dpf.group_dimension() + blk * dpf.block_size();
    bool nz = false;
    for (int j = 0; j < dpf.block_size(); ++j) nz |= v[base + j] != 0;
    count += nz;
  }
  return count;
}

bool DigestsAgree(const SparseDpf& dpf, const KeyPair& keys) {
  SparseDpfScratch scratch;
  auto d0 = dpf.ComputeProofDigest(keys.first, &scratch);
  auto d1 = dpf.ComputeProofDigest(keys.second, &scratch);
  EXPECT_THAT(d0.status(), IsOk());
  EXPECT_THAT(d1.status(), IsOk());
  return d0.ok() && d1.ok() && *d0 == *d1;
}

// (dimension, block_size, num_groups, value_bits)
using Shape = std::tuple<uint64_t, int, int, int>;
class SparseDpfPropertyTest : public ::testing::TestWithParam<Shape> {};

TEST_P(SparseDpfPropertyTest, SharesSumToTheSparseVectorAndDigestsAgree) {
  const auto [dim, b, k, bits] = GetParam();
  TANDEM_ASSERT_OK_AND_ASSIGN(SparseDpf dpf, SparseDpf::Create(dim, b, k, bits));
  auto rng = DeterministicRandom::FromSeed(dim * 31 + b * 7 + k + bits);
  for (int trial = 0; trial < 3; ++trial) {
    const Report r = RandomReport(dpf, rng.get());
    TANDEM_ASSERT_OK_AND_ASSIGN(KeyPair keys, dpf.GenerateKeys(r.indices, r.values, rng.get()));
    ProofDigest d0, d1, p0;
    const std::vector<uint64_t> sum = Reconstruct(dpf, keys, &d0, &d1);
    std::vector<uint64_t> expected(dim, 0);
    for (int g = 0; g < k; ++g) {
      for (int j = 0; j < b; ++j) {
        expected[g * dpf.group_dimension() + uint64_t{r.indices[g]} * b + j] = r.values[g * b + j];
      }
    }
    EXPECT_EQ(sum, expected);
    EXPECT_EQ(d0, d1);
    SparseDpfScratch scratch;
    TANDEM_ASSERT_OK_AND_ASSIGN(p0, dpf.ComputeProofDigest(keys.first, &scratch));
    EXPECT_EQ(p0, d0);
    // Accumulate (no digest) adds exactly what EvaluateAndAccumulate adds.
    std::vector<uint64_t> b0(dim, 5), b1(dim, 0 - uint64_t{5});
    ASSERT_THAT(dpf.Accumulate(keys.first, absl::MakeSpan(b0), &scratch), IsOk());
    ASSERT_THAT(dpf.Accumulate(keys.second, absl::MakeSpan(b1), &scratch), IsOk());
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : 0xffffffffULL;
    for (uint64_t i = 0; i < dim; ++i) ASSERT_EQ((b0[i] + b1[i]) & mask, expected[i]) << i;
    // EvaluateBlockSums: each group's blocks of a full evaluation summed
    // mod 2^w, with the same digest; the two parties' sums add up to the
    // sent blocks (every other block cancels).
    std::vector<uint64_t> both(size_t(k) * b, 0);
    for (const proto::SparseKeySet* set : {&keys.first, &keys.second}) {
      std::vector<uint64_t> full(dim, 0);
      TANDEM_ASSERT_OK_AND_ASSIGN(ProofDigest want,
                                  dpf.EvaluateAndAccumulate(*set, absl::MakeSpan(full), &scratch));
      std::vector<uint64_t> want_sums(size_t(k) * b, 0);
      for (uint64_t i = 0; i < dim; ++i) {
        uint64_t& s = want_sums[(i / dpf.group_dimension()) * b + i % b];
        s = (s + full[i]) & mask;
      }
      std::vector<uint64_t> sums(size_t(k) * b, 7);  // overwritten
      TANDEM_ASSERT_OK_AND_ASSIGN(ProofDigest got,
                                  dpf.EvaluateBlockSums(*set, absl::MakeSpan(sums), &scratch));
      EXPECT_EQ(got, want);
      EXPECT_EQ(sums, want_sums);
      for (size_t j = 0; j < both.size(); ++j) both[j] = (both[j] + sums[j]) & mask;
      // EvaluateAccumulateAndSum: the same three results from one
      // evaluation, added onto a non-zero accumulator.
      std::vector<uint64_t> acc(dim);
      for (uint64_t i = 0; i < dim; ++i) acc[i] = (i * 0x9e3779b97f4a7c15ULL) & mask;
      std::vector<uint64_t> acc_want = acc;
      for (uint64_t i = 0; i < dim; ++i) acc_want[i] = (acc_want[i] + full[i]) & mask;
      std::vector<uint64_t> fused_sums(size_t(k) * b, 3);  // overwritten
      TANDEM_ASSERT_OK_AND_ASSIGN(
          ProofDigest fused, dpf.EvaluateAccumulateAndSum(*set, absl::MakeSpan(acc),
                                                          absl::MakeSpan(fused_sums), &scratch));
      EXPECT_EQ(fused, want);
      EXPECT_EQ(fused_sums, want_sums);
      EXPECT_EQ(acc, acc_want);
    }
    {
      // Size errors leave the accumulator untouched.
      std::vector<uint64_t> acc(dim, 9), bad_sums(size_t(k) * b + 1);
      EXPECT_THAT(dpf.EvaluateAccumulateAndSum(keys.first, absl::MakeSpan(acc),
                                               absl::MakeSpan(bad_sums), &scratch)
                      .status(),
                  StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_EQ(acc, std::vector<uint64_t>(dim, 9));
      std::vector<uint64_t> short_acc(dim - 1 + (dim == 1 ? 2 : 0)), ok_sums(size_t(k) * b);
      EXPECT_THAT(dpf.EvaluateAccumulateAndSum(keys.first, absl::MakeSpan(short_acc),
                                               absl::MakeSpan(ok_sums), &scratch)
                      .status(),
                  StatusIs(absl::StatusCode::kInvalidArgument));
    }
    std::vector<uint64_t> sent(r.values);
    for (uint64_t& v : sent) v &= mask;
    EXPECT_EQ(both, sent);
    std::vector<uint64_t> short_sums(size_t(k) * b - 1);
    EXPECT_THAT(dpf.EvaluateBlockSums(keys.first, absl::MakeSpan(short_sums), &scratch).status(),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, SparseDpfPropertyTest,
    ::testing::Values(Shape{1, 1, 1, 64}, Shape{8, 1, 1, 64}, Shape{8, 1, 8, 32},
                      Shape{64, 4, 2, 64}, Shape{64, 2, 2, 64}, Shape{96, 3, 4, 32},
                      Shape{1024, 16, 4, 64}, Shape{1024, 16, 4, 32}, Shape{6 * 128, 6, 1, 64},
                      Shape{4096, 1, 1, 64},
                      Shape{1 << 14, 1024, 16, 64}, Shape{1 << 14, 256, 2, 32},
                      Shape{5 * 2048 * 2, 5, 2, 64}, Shape{3 * 7 * 64, 7, 3, 32}));

class SparseDpfAdversarialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dpf_ = std::make_unique<SparseDpf>(SparseDpf::Create(4 * 16 * 8, 8, 4, 64).value());
    rng_ = DeterministicRandom::FromSeed(2024);
    const Report r = RandomReport(*dpf_, rng_.get());
    keys_ = dpf_->GenerateKeys(r.indices, r.values, rng_.get()).value();
  }
  std::unique_ptr<SparseDpf> dpf_;
  std::unique_ptr<DeterministicRandom> rng_;
  KeyPair keys_;
};

TEST_F(SparseDpfAdversarialTest, HonestKeysAlwaysPass) {
  for (int i = 0; i < 50; ++i) {
    const Report r = RandomReport(*dpf_, rng_.get());
    TANDEM_ASSERT_OK_AND_ASSIGN(KeyPair keys, dpf_->GenerateKeys(r.indices, r.values, rng_.get()));
    EXPECT_TRUE(DigestsAgree(*dpf_, keys)) << i;
  }
}

void XorByte(std::string* s, size_t i, uint8_t v) { (*s)[i] = static_cast<char>((*s)[i] ^ v); }

TEST_F(SparseDpfAdversarialTest, TwoNonZeroLeavesAreCaught) {
  // The same tampered last-level correction word to both servers splits the
  // path: both children of the last on-path node now decode non-zero.
  KeyPair bad = keys_;
  for (proto::SparseKeySet* s : {&bad.first, &bad.second}) {
    XorByte(s->mutable_keys(1)->mutable_correction_words(3)->mutable_seed(), 5, 0x40);
  }
  const std::vector<uint64_t> sum = Reconstruct(*dpf_, bad);
  EXPECT_EQ(NonZeroBlocks(*dpf_, sum, 1), 2);  // the attack is real
  EXPECT_FALSE(DigestsAgree(*dpf_, bad));
}

TEST_F(SparseDpfAdversarialTest, TamperedUpperCorrectionWordIsCaught) {
  KeyPair bad = keys_;
  for (proto::SparseKeySet* s : {&bad.first, &bad.second}) {
    XorByte(s->mutable_keys(2)->mutable_correction_words(0)->mutable_seed(), 0, 0x02);
  }
  const std::vector<uint64_t> sum = Reconstruct(*dpf_, bad);
  EXPECT_GT(NonZeroBlocks(*dpf_, sum, 2), 1);
  EXPECT_FALSE(DigestsAgree(*dpf_, bad));
}

TEST_F(SparseDpfAdversarialTest, UnrelatedRootSeedsAreCaught) {
  KeyPair bad = keys_;
  bad.second.mutable_keys(0)->set_seed(std::string(16, '\x5a'));
  EXPECT_GT(NonZeroBlocks(*dpf_, Reconstruct(*dpf_, bad), 0), 1);
  EXPECT_FALSE(DigestsAgree(*dpf_, bad));
}

TEST_F(SparseDpfAdversarialTest, MismatchedPublicPartsAreCaught) {
  {
    KeyPair bad = keys_;
    XorByte(bad.second.mutable_keys(3)->mutable_correction_words(2)->mutable_seed(), 9, 1);
    EXPECT_FALSE(DigestsAgree(*dpf_, bad));
  }
  {
    KeyPair bad = keys_;  // a value correction only the leader sees changed
    bad.first.mutable_keys(0)->set_value_correction(3, bad.first.keys(0).value_correction(3) + 1);
    EXPECT_FALSE(DigestsAgree(*dpf_, bad));
  }
  {
    KeyPair bad = keys_;
    XorByte(bad.first.mutable_keys(2)->mutable_proof_correction(), 63, 0x80);
    EXPECT_FALSE(DigestsAgree(*dpf_, bad));
  }
}

// P (public_digest.h): equal for the two parties' sets of one report, blind
// to seeds and party, moved by every public field; a digest given the wrong
// P is not the key set's digest.
TEST_F(SparseDpfAdversarialTest, PublicDigestBindsEveryPublicPartAndNothingElse) {
  TANDEM_ASSERT_OK_AND_ASSIGN(const ProofDigest p, PublicPartsDigest(keys_.first));
  EXPECT_THAT(PublicPartsDigest(keys_.second), ::tandem::testing::IsOkAndHolds(p));
  KeyPair other = keys_;
  other.first.mutable_keys(1)->set_seed(std::string(16, '\x11'));
  EXPECT_THAT(PublicPartsDigest(other.first), ::tandem::testing::IsOkAndHolds(p));
  const auto changed = [&](auto edit) {
    proto::SparseKeySet k = keys_.first;
    edit(k);
    return PublicPartsDigest(k).value() != p;
  };
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {
    XorByte(k.mutable_keys(0)->mutable_correction_words(0)->mutable_seed(), 15, 1);
  }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {
    k.mutable_keys(3)->set_value_correction(7, k.keys(3).value_correction(7) ^ 1);
  }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {
    XorByte(k.mutable_keys(2)->mutable_proof_correction(), 0, 1);
  }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {
    k.mutable_group_parameters()->set_block_size(k.group_parameters().block_size() + 1);
  }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) { k.set_num_groups(k.num_groups() + 1); }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {  // the same bytes, another field
    proto::BlockDpfKey* key = k.mutable_keys(0);
    std::string moved(reinterpret_cast<const char*>(key->value_correction().data()),
                      8 * key->value_correction_size());
    key->clear_value_correction();
    key->set_value_correction_packed(moved);
  }));
  EXPECT_TRUE(changed([](proto::SparseKeySet& k) {  // groups swapped
    k.mutable_keys()->SwapElements(0, 1);
  }));
  SparseDpfScratch scratch;
  TANDEM_ASSERT_OK_AND_ASSIGN(const ProofDigest honest,
                              dpf_->ComputeProofDigest(keys_.first, &scratch));
  EXPECT_THAT(dpf_->ComputeProofDigest(keys_.first, &scratch, &p),
              ::tandem::testing::IsOkAndHolds(honest));
  ProofDigest wrong = p;
  wrong[31] ^= 1;
  EXPECT_THAT(dpf_->ComputeProofDigest(keys_.first, &scratch, &wrong),
              ::tandem::testing::IsOkAndHolds(::testing::Ne(honest)));
}

// 32-bit keys carry their value corrections packed (4 bytes each): they
// reconstruct the vector, and a packed correction only the leader sees
// changed is caught like an unpacked one.
TEST(SparseDpfPackedTest, ThirtyTwoBitKeysArePackedAndTamperingIsCaught) {
  const SparseDpf dpf = SparseDpf::Create(4 * 16 * 8, 8, 4, 32).value();
  auto rng = DeterministicRandom::FromSeed(91);
  std::vector<uint64_t> values(4 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0xfffffff0u + i % 16;  // near 2^32
  const std::vector<uint32_t> blocks = {3, 0, 15, 9};
  TANDEM_ASSERT_OK_AND_ASSIGN(KeyPair keys, dpf.GenerateKeys(blocks, values, rng.get()));
  EXPECT_EQ(keys.first.keys(0).value_correction_size(), 0);
  EXPECT_EQ(keys.first.keys(0).value_correction_packed().size(), 4u * 8);
  const std::vector<uint64_t> sum = Reconstruct(dpf, keys);
  for (int g = 0; g < 4; ++g) {
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(sum[g * 16 * 8 + blocks[g] * 8 + j], values[g * 8 + j]) << g << " " << j;
    }
  }
  EXPECT_TRUE(DigestsAgree(dpf, keys));
  KeyPair bad = keys;
  XorByte(bad.first.mutable_keys(1)->mutable_value_correction_packed(), 5, 0x01);
  EXPECT_FALSE(DigestsAgree(dpf, bad));
}

TEST_F(SparseDpfAdversarialTest, TamperedProofCorrectionOnBothServersIsCaught) {
  KeyPair bad = keys_;
  for (proto::SparseKeySet* s : {&bad.first, &bad.second}) {
    XorByte(s->mutable_keys(1)->mutable_proof_correction(), 17, 0x10);
  }
  EXPECT_FALSE(DigestsAgree(*dpf_, bad));
}

TEST_F(SparseDpfAdversarialTest, SameValueCorrectionChangeKeepsOneBlock) {
  // An identical change of the public value correction only changes the
  // non-zero block's value (bounding it is the norm proof's job): still
  // one block per group, and the digests agree. Documents the guarantee.
  KeyPair bad = keys_;
  for (proto::SparseKeySet* s : {&bad.first, &bad.second}) {
    s->mutable_keys(0)->set_value_correction(0, s->keys(0).value_correction(0) ^ 0xff);
  }
  const std::vector<uint64_t> sum = Reconstruct(*dpf_, bad);
  for (int g = 0; g < dpf_->num_groups(); ++g) EXPECT_LE(NonZeroBlocks(*dpf_, sum, g), 1);
  EXPECT_TRUE(DigestsAgree(*dpf_, bad));
}

TEST_F(SparseDpfAdversarialTest, SwappedOrDuplicatedPartiesAreRejected) {
  // The leader expects party 0 and the helper party 1.
  EXPECT_THAT(ValidateSparseKeySet(keys_.second, dpf_->Shape(0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateSparseKeySet(keys_.first, dpf_->Shape(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::SparseKeySet mixed = keys_.first;
  *mixed.mutable_keys(2) = keys_.second.keys(2);
  EXPECT_THAT(ValidateSparseKeySet(mixed, dpf_->Shape(-1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateSparseKeySet(keys_.first, dpf_->Shape(0)), IsOk());
  EXPECT_THAT(ValidateSparseKeySet(keys_.second, dpf_->Shape(1)), IsOk());
}

TEST(SparseDpf, AllAesPathsGiveIdenticalKeysOutputsAndDigests) {
  std::vector<std::string> wires;
  std::vector<ProofDigest> digests;
  std::vector<std::vector<uint64_t>> sums;
  for (AesPath p : SupportedAesPaths()) {
    TANDEM_ASSERT_OK_AND_ASSIGN(SparseDpf dpf, SparseDpf::Create(2 * 8 * 4, 4, 2, 64, p));
    auto rng = DeterministicRandom::FromSeed(31337);
    const Report r = RandomReport(dpf, rng.get());
    TANDEM_ASSERT_OK_AND_ASSIGN(KeyPair keys, dpf.GenerateKeys(r.indices, r.values, rng.get()));
    ProofDigest d0, d1;
    sums.push_back(Reconstruct(dpf, keys, &d0, &d1));
    EXPECT_EQ(d0, d1);
    wires.push_back(keys.first.SerializeAsString() + keys.second.SerializeAsString());
    digests.push_back(d0);
  }
  for (size_t i = 1; i < wires.size(); ++i) {
    EXPECT_EQ(wires[i], wires[0]);
    EXPECT_EQ(digests[i], digests[0]);
    EXPECT_EQ(sums[i], sums[0]);
  }
}

TEST(SparseDpf, CreateRejectsBadShapes) {
  EXPECT_THAT(SparseDpf::Create(1000, 10, 4, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(3 * 10 * 4, 10, 4, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(0, 1, 1, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(64, 0, 1, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(64, 1, 0, 64), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(64, 1, 1, 16), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SparseDpf::Create(uint64_t{1} << 40, 1, 1, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SparseDpf, GenerateAndEvaluateRejectBadInputs) {
  TANDEM_ASSERT_OK_AND_ASSIGN(SparseDpf dpf, SparseDpf::Create(64, 4, 2, 64));
  auto rng = DeterministicRandom::FromSeed(9);
  std::vector<uint64_t> values(8, 1);
  EXPECT_THAT(dpf.GenerateKeys(std::vector<uint32_t>{0}, values, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(dpf.GenerateKeys(std::vector<uint32_t>{0, 8}, values, rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(dpf.GenerateKeys(std::vector<uint32_t>{0, 1}, std::vector<uint64_t>(7), rng.get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  TANDEM_ASSERT_OK_AND_ASSIGN(KeyPair keys,
                              dpf.GenerateKeys(std::vector<uint32_t>{0, 7}, values, rng.get()));
  SparseDpfScratch scratch;
  std::vector<uint64_t> acc(63);
  EXPECT_THAT(dpf.EvaluateAndAccumulate(keys.first, absl::MakeSpan(acc), &scratch),
              StatusIs(absl::StatusCode::kInvalidArgument));
  acc.resize(64);
  EXPECT_THAT(dpf.EvaluateAndAccumulate(keys.first, absl::MakeSpan(acc), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  proto::SparseKeySet bad = keys.first;
  bad.mutable_keys(1)->clear_proof_correction();
  EXPECT_THAT(dpf.EvaluateAndAccumulate(bad, absl::MakeSpan(acc), &scratch),
              StatusIs(absl::StatusCode::kInvalidArgument));
  for (uint64_t v : acc) EXPECT_EQ(v, 0u);  // nothing added on rejection
}

}  // namespace
}  // namespace tandem::crypto
