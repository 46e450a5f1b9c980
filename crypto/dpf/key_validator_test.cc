// Key validator: every malformed field is INVALID_ARGUMENT, and thousands of
// seeded random mutations of a valid serialized key set go through
// parse + validate + evaluate without a crash (the g++ / ASan counterpart of
// key_parser_fuzzer.cc).
#include "crypto/dpf/key_validator.h"

#include <string>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/sparse_dpf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

class KeyValidatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dpf_ = std::make_unique<SparseDpf>(SparseDpf::Create(3 * 8 * 4, 4, 3, 32).value());
    auto rng = DeterministicRandom::FromSeed(77);
    std::vector<uint64_t> values(12);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 1000 + i;
    keys_ = dpf_->GenerateKeys(std::vector<uint32_t>{1, 7, 0}, values, rng.get()).value().first;
    shape_ = dpf_->Shape(0);
  }
  void ExpectInvalid(const proto::SparseKeySet& keys) {
    EXPECT_THAT(ValidateSparseKeySet(keys, shape_), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(ParseSparseKeySet(keys.SerializeAsString(), shape_),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  std::unique_ptr<SparseDpf> dpf_;
  proto::SparseKeySet keys_;
  ExpectedKeySetShape shape_;
};

TEST_F(KeyValidatorTest, ValidKeyPasses) {
  EXPECT_THAT(ValidateSparseKeySet(keys_, shape_), IsOk());
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::SparseKeySet parsed,
                              ParseSparseKeySet(keys_.SerializeAsString(), shape_));
  EXPECT_EQ(parsed.SerializeAsString(), keys_.SerializeAsString());
}

TEST_F(KeyValidatorTest, RejectsEachMalformedField) {
  auto mutate = [&](auto fn) {
    proto::SparseKeySet k = keys_;
    fn(k);
    ExpectInvalid(k);
  };
  mutate([](proto::SparseKeySet& k) { k.clear_group_parameters(); });
  mutate([](proto::SparseKeySet& k) { k.mutable_group_parameters()->set_block_size(5); });
  mutate([](proto::SparseKeySet& k) { k.mutable_group_parameters()->set_log_num_blocks(2); });
  mutate([](proto::SparseKeySet& k) { k.mutable_group_parameters()->set_value_bits(64); });
  mutate([](proto::SparseKeySet& k) { k.set_num_groups(2); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys()->RemoveLast(); });
  mutate([](proto::SparseKeySet& k) { *k.add_keys() = k.keys(0); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(1)->set_party(2); });
  mutate([](proto::SparseKeySet& k) {
    for (auto& key : *k.mutable_keys()) key.set_party(1);  // consistent, but not this server's
  });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(0)->set_seed(std::string(15, 'a')); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(0)->set_seed(std::string(17, 'a')); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(2)->mutable_correction_words()->RemoveLast(); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(2)->add_correction_words()->set_seed(std::string(16, 0)); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(1)->mutable_correction_words(0)->set_seed("x"); });
  // 32-bit keys carry their corrections packed (4 bytes each): a word short
  // or long, an extra fixed64 beside them, or the unpacked form instead.
  mutate([](proto::SparseKeySet& k) {
    k.mutable_keys(1)->mutable_value_correction_packed()->pop_back();
  });
  mutate([](proto::SparseKeySet& k) {
    k.mutable_keys(1)->mutable_value_correction_packed()->append(4, 0);
  });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(1)->add_value_correction(0); });
  mutate([](proto::SparseKeySet& k) {
    proto::BlockDpfKey& key = *k.mutable_keys(1);
    for (size_t j = 0; j < key.value_correction_packed().size(); j += 4) {
      key.add_value_correction(static_cast<uint8_t>(key.value_correction_packed()[j]));
    }
    key.clear_value_correction_packed();
  });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(0)->set_proof_correction(std::string(32, 0)); });
  mutate([](proto::SparseKeySet& k) { k.mutable_keys(0)->clear_proof_correction(); });
}

// At 64 bits the corrections are fixed64 values: the packed form is refused.
TEST(KeyValidatorWideTest, SixtyFourBitKeysRefuseThePackedForm) {
  const SparseDpf dpf = SparseDpf::Create(3 * 8 * 4, 4, 3, 64).value();
  auto rng = DeterministicRandom::FromSeed(78);
  const std::vector<uint64_t> values(12, uint64_t{1} << 40);
  proto::SparseKeySet keys =
      dpf.GenerateKeys(std::vector<uint32_t>{1, 7, 0}, values, rng.get()).value().first;
  EXPECT_TRUE(keys.keys(0).value_correction_packed().empty());
  EXPECT_EQ(keys.keys(0).value_correction_size(), 4);
  EXPECT_THAT(ValidateSparseKeySet(keys, dpf.Shape(0)), IsOk());
  keys.mutable_keys(2)->set_value_correction_packed(std::string(16, 0));
  EXPECT_THAT(ValidateSparseKeySet(keys, dpf.Shape(0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(KeyValidatorTest, RejectsTruncatedOversizedAndUnknownFields) {
  const std::string wire = keys_.SerializeAsString();
  for (size_t len = 0; len < wire.size(); ++len) {
    EXPECT_THAT(ParseSparseKeySet(absl::string_view(wire).substr(0, len), shape_),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << len;
  }
  std::string big = wire;
  big.append(MaxSerializedKeySetSize(shape_), '\0');
  EXPECT_THAT(ParseSparseKeySet(big, shape_), StatusIs(absl::StatusCode::kInvalidArgument));
  // Field 15, length-delimited, 3 bytes: parses, but is an unknown field.
  std::string unknown = wire + std::string("\x7a\x03" "abc", 5);
  EXPECT_THAT(ParseSparseKeySet(unknown, shape_), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseSparseKeySet("\xff\xff\xff", shape_),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(KeyValidatorTest, RejectsBadExpectedShape) {
  ExpectedKeySetShape s = shape_;
  s.num_groups = 0;
  EXPECT_THAT(ValidateSparseKeySet(keys_, s), StatusIs(absl::StatusCode::kInvalidArgument));
  s = shape_;
  s.party = 3;
  EXPECT_THAT(ValidateSparseKeySet(keys_, s), StatusIs(absl::StatusCode::kInvalidArgument));
  s = shape_;
  s.log_num_blocks = 25;
  EXPECT_THAT(ValidateSparseKeySet(keys_, s), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Seeded random mutations: bit flips, byte overwrites, truncation, insertion,
// span duplication. Each result must be OK or INVALID_ARGUMENT; accepted
// mutants must evaluate without error.
TEST_F(KeyValidatorTest, RandomMutationsNeverCrash) {
  const std::string wire = keys_.SerializeAsString();
  auto rng = DeterministicRandom::FromSeed(20261202);
  SparseDpfScratch scratch;
  std::vector<uint64_t> acc(dpf_->dimension());
  int accepted = 0;
  int rejected = 0;
  constexpr int kMutations = 4000;
  for (int i = 0; i < kMutations; ++i) {
    std::string m = wire;
    const int edits = 1 + static_cast<int>(rng->NextUint64().value() % 3);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      const uint64_t r = rng->NextUint64().value();
      const size_t pos = (r >> 8) % m.size();
      switch (r % 5) {
        case 0:
          m[pos] = static_cast<char>(m[pos] ^ (1 << ((r >> 40) % 8)));
          break;
        case 1:
          m[pos] = static_cast<char>(r >> 48);
          break;
        case 2:
          m.resize(pos);
          break;
        case 3:
          m.insert(pos, 1 + (r >> 40) % 8, static_cast<char>(r >> 32));
          break;
        case 4: {
          const size_t len = std::min<size_t>(m.size() - pos, 1 + (r >> 40) % 32);
          m.insert(pos, m.substr(pos, len));
          break;
        }
      }
    }
    auto parsed = ParseSparseKeySet(m, shape_);
    if (!parsed.ok()) {
      ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << parsed.status();
      ++rejected;
      continue;
    }
    ++accepted;
    ASSERT_THAT(dpf_->EvaluateAndAccumulate(*parsed, absl::MakeSpan(acc), &scratch), IsOk());
  }
  // Most structural mutations must be caught; flips inside seeds and
  // corrections are well-formed and legitimately accepted.
  EXPECT_GT(rejected, kMutations / 4);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace tandem::crypto
