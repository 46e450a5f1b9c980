#include "crypto/sign/device_auth.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "proto/aggregator.pb.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::StatusCode kUnauth = absl::StatusCode::kUnauthenticated;
// RFC 8032 TEST 1 key (seed and public key).
constexpr char kSeedHex[] = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
constexpr char kPublicHex[] = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
constexpr int64_t kNow = 1700000000000;
constexpr int64_t kSkew = 60000;

std::string Nonce(char first = 0) {
  std::string n;
  for (int i = 0; i < 16; ++i) n.push_back(static_cast<char>(first + i));
  return n;
}

Ed25519SigningKey Rfc8032Key() {
  return *Ed25519SigningKey::FromSeed(absl::HexStringToBytes(kSeedHex));
}

Ed25519SigningKey Fresh(uint64_t seed) {
  auto rng = DeterministicRandom::FromSeed(seed);
  return *Ed25519SigningKey::Generate(rng.get());
}

proto::CheckInRequest Signed(const Ed25519SigningKey& key, int64_t ts = kNow) {
  proto::CheckInRequest r;
  r.set_task_id("task-7");
  EXPECT_THAT(SignCheckIn(key, ts, Nonce(), &r), IsOk());
  return r;
}

// Known answers computed independently (Python hashlib and `openssl pkeyutl
// -sign -rawin` over the documented encoding).
TEST(DeviceAuthTest, KnownAnswerDeviceIdAndCheckInSignature) {
  EXPECT_EQ(DeviceId(absl::HexStringToBytes(kPublicHex)), "dev-0bf091952ce0e7ac0e53b6bfc1aead1c");
  const proto::CheckInRequest r = Signed(Rfc8032Key());
  EXPECT_EQ(r.client_id(), "dev-0bf091952ce0e7ac0e53b6bfc1aead1c");
  EXPECT_EQ(absl::BytesToHexString(r.signature()),
            "ff7100c9ba846abd3ef24213a135413f34c0a4406b23bbd1ae0463096239d7b9"
            "e5be41a98af2809bfc1c7b025c54863b3a114d48e9c5a494c161ee0fb3f28603");
  auto key = VerifyCheckIn(r, kNow, kSkew);
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->Raw(), absl::HexStringToBytes(kPublicHex));
}

TEST(DeviceAuthTest, DistinctKeysHaveDistinctIdsOfTheClientIdAlphabet) {
  std::vector<std::string> ids;
  for (uint64_t s = 1; s <= 64; ++s) ids.push_back(DeviceId(Fresh(s).PublicKeyRaw()));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i].size(), 36u);
    EXPECT_EQ(ids[i].find_first_not_of("dev-0123456789abcdef"), std::string::npos);
    for (size_t j = i + 1; j < ids.size(); ++j) EXPECT_NE(ids[i], ids[j]);
  }
}

TEST(DeviceAuthTest, CheckInRefusesEveryAlteredField) {
  const Ed25519SigningKey key = Fresh(7);
  const proto::CheckInRequest good = Signed(key);
  ASSERT_THAT(VerifyCheckIn(good, kNow, kSkew), IsOk());
  std::vector<proto::CheckInRequest> bad(8, good);
  bad[0].set_task_id("task-8");
  bad[1].set_timestamp_unix_ms(kNow + 1);
  bad[2].set_nonce(Nonce(1));
  bad[3].mutable_enrollment_token()->set_token("x");
  bad[4].mutable_signature()->back() ^= 1;
  bad[5].clear_signature();
  bad[6].set_client_id(DeviceId(Fresh(8).PublicKeyRaw()));  // someone else's id
  bad[7].set_device_public_key(Fresh(8).PublicKeyRaw());    // someone else's key
  for (const auto& r : bad) EXPECT_THAT(VerifyCheckIn(r, kNow, kSkew), StatusIs(kUnauth));
}

TEST(DeviceAuthTest, ImpersonationNeedsTheKey) {
  // An outsider signs a check-in with its own key but names the victim's
  // id and key: refused.
  const Ed25519SigningKey victim = Fresh(1), outsider = Fresh(2);
  proto::CheckInRequest r = Signed(outsider);
  r.set_client_id(DeviceId(victim.PublicKeyRaw()));
  r.set_device_public_key(victim.PublicKeyRaw());
  EXPECT_THAT(VerifyCheckIn(r, kNow, kSkew), StatusIs(kUnauth, HasSubstr("signature")));
}

TEST(DeviceAuthTest, TimestampOutsideTheSkewIsRefused) {
  const Ed25519SigningKey key = Fresh(3);
  EXPECT_THAT(VerifyCheckIn(Signed(key, kNow - kSkew), kNow, kSkew), IsOk());
  EXPECT_THAT(VerifyCheckIn(Signed(key, kNow + kSkew), kNow, kSkew), IsOk());
  EXPECT_THAT(VerifyCheckIn(Signed(key, kNow - kSkew - 1), kNow, kSkew),
              StatusIs(kUnauth, HasSubstr("clock")));
  EXPECT_THAT(VerifyCheckIn(Signed(key, kNow + kSkew + 1), kNow, kSkew), StatusIs(kUnauth));
}

TEST(DeviceAuthTest, MalformedKeysAndNoncesAreRefused) {
  proto::CheckInRequest r = Signed(Fresh(4));
  r.set_device_public_key(std::string(32, '\0'));  // small-order point
  r.set_client_id(DeviceId(r.device_public_key()));
  EXPECT_THAT(VerifyCheckIn(r, kNow, kSkew), StatusIs(kUnauth));
  r = Signed(Fresh(4));
  r.set_nonce("short");
  EXPECT_THAT(VerifyCheckIn(r, kNow, kSkew), StatusIs(kUnauth));
  r = Signed(Fresh(4));
  r.mutable_enrollment_token()->set_token(std::string(kMaxEnrollmentTokenBytes + 1, 'x'));
  EXPECT_THAT(VerifyCheckIn(r, kNow, kSkew), StatusIs(kUnauth));
  proto::CheckInRequest s;
  EXPECT_THAT(SignCheckIn(Fresh(4), kNow, "short", &s),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A ticket for task "task-7", round 3, naming `device`'s key.
proto::UploadTicket TicketFor(const Ed25519SigningKey& device) {
  proto::UploadTicket t;
  t.set_task_id("task-7");
  t.set_round_id(3);
  t.set_ticket_id(Nonce());
  t.set_expiry_unix_ms(kNow);
  t.set_device_public_key(device.PublicKeyRaw());
  return t;
}

class UploadSignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const proto::UploadTicket t = TicketFor(device_);
    ticket_ = t;
    upload_.set_task_id("task-7");
    upload_.set_round_id(3);
    upload_.set_report_id(Nonce());
    *upload_.mutable_ticket() = *SignUploadTicket(coordinator_, t);
    upload_.mutable_key_share()->set_num_groups(1);
    upload_.mutable_norm_proof()->add_witness(5);
  }
  absl::Status Verify(const proto::UploadRequest& u, UploadRole role) const {
    const std::string td = TicketDigest(u.ticket());
    return VerifyUploadSignature(
        ticket_, role, td,
        UploadContentDigest(u.key_share(), u.has_norm_proof() ? &u.norm_proof() : nullptr, td),
        u.device_signature());
  }

  Ed25519SigningKey coordinator_ = Fresh(10);
  Ed25519SigningKey device_ = Fresh(11);
  proto::UploadTicket ticket_;
  proto::UploadRequest upload_;
};

TEST_F(UploadSignatureTest, VerifiesForItsRoleOnly) {
  ASSERT_THAT(SignUpload(device_, UploadRole::kLeader, &upload_), IsOk());
  EXPECT_THAT(Verify(upload_, UploadRole::kLeader), IsOk());
  // The leader replaying the client's signed upload to the helper: refused.
  EXPECT_THAT(Verify(upload_, UploadRole::kHelper), StatusIs(kUnauth));
}

TEST_F(UploadSignatureTest, ASwappedShareOrProofIsRefused) {
  ASSERT_THAT(SignUpload(device_, UploadRole::kHelper, &upload_), IsOk());
  proto::UploadRequest swapped = upload_;
  swapped.mutable_key_share()->set_num_groups(2);
  EXPECT_THAT(Verify(swapped, UploadRole::kHelper), StatusIs(kUnauth));
  swapped = upload_;
  swapped.mutable_norm_proof()->set_witness(0, 6);
  EXPECT_THAT(Verify(swapped, UploadRole::kHelper), StatusIs(kUnauth));
  swapped = upload_;
  swapped.clear_device_signature();
  EXPECT_THAT(Verify(swapped, UploadRole::kHelper), StatusIs(kUnauth, HasSubstr("no device")));
}

TEST_F(UploadSignatureTest, AStolenTicketCannotBeSpentFromAnotherKey) {
  const Ed25519SigningKey thief = Fresh(12);
  // The SDK refuses to sign for a ticket of another key...
  EXPECT_THAT(SignUpload(thief, UploadRole::kLeader, &upload_),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // ...and a thief that signs anyway is refused by the verifier.
  const std::string td = TicketDigest(upload_.ticket());
  const std::string content = UploadContentDigest(upload_.key_share(), &upload_.norm_proof(), td);
  const std::string sig = *thief.Sign(UploadSigningInput(UploadRole::kLeader, td, content));
  EXPECT_THAT(VerifyUploadSignature(ticket_, UploadRole::kLeader, td, content, sig),
              StatusIs(kUnauth));
  proto::UploadTicket unbound = ticket_;
  unbound.clear_device_public_key();
  EXPECT_THAT(VerifyUploadSignature(unbound, UploadRole::kLeader, td, content, sig),
              StatusIs(kUnauth, HasSubstr("names no device key")));
}

class EnrollmentTokenTest : public ::testing::Test {
 protected:
  proto::EnrollmentToken Token() const {
    proto::EnrollmentToken t;
    t.set_token_id(Nonce());
    t.set_expiry_unix_ms(kNow + 1000);
    t.set_issuer("ops.backend-1");
    return t;
  }
  Ed25519SigningKey op_ = Fresh(20);
  Ed25519SigningKey other_op_ = Fresh(21);
  std::vector<Ed25519VerifyingKey> trusted_ = {*other_op_.VerifyingKey(), *op_.VerifyingKey()};
};

TEST_F(EnrollmentTokenTest, RoundTripsThroughTextAndVerifiesUnderAnyTrustedKey) {
  auto signed_token = MintEnrollmentToken(op_, Token());
  ASSERT_THAT(signed_token, IsOk());
  const std::string text = EncodeEnrollmentToken(*signed_token);
  EXPECT_EQ(text.rfind("tdmenroll1.", 0), 0u);
  auto decoded = DecodeEnrollmentToken(text + "\n");
  ASSERT_THAT(decoded, IsOk());
  auto t = VerifyEnrollmentToken(trusted_, *decoded, kNow);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->issuer(), "ops.backend-1");
}

TEST_F(EnrollmentTokenTest, ForgedExpiredAndMalformedTokensAreRefused) {
  auto good = *MintEnrollmentToken(op_, Token());
  EXPECT_THAT(VerifyEnrollmentToken(trusted_, good, kNow + 1001),
              StatusIs(kUnauth, HasSubstr("expired")));
  const std::vector<Ed25519VerifyingKey> only_other = {*other_op_.VerifyingKey()};
  EXPECT_THAT(VerifyEnrollmentToken(only_other, good, kNow), StatusIs(kUnauth));
  EXPECT_THAT(VerifyEnrollmentToken({}, good, kNow), StatusIs(kUnauth));
  auto tampered = good;
  tampered.mutable_token()->back() ^= 1;
  EXPECT_THAT(VerifyEnrollmentToken(trusted_, tampered, kNow), StatusIs(kUnauth));
  // A token signed by a device key (not an operator's) is refused.
  auto self_made = *MintEnrollmentToken(Fresh(30), Token());
  EXPECT_THAT(VerifyEnrollmentToken(trusted_, self_made, kNow), StatusIs(kUnauth));
  proto::EnrollmentToken t = Token();
  t.set_token_id("short");
  EXPECT_THAT(MintEnrollmentToken(op_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Token();
  t.set_device_public_key("short");
  EXPECT_THAT(MintEnrollmentToken(op_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Token();
  t.set_issuer("bad issuer!");
  EXPECT_THAT(MintEnrollmentToken(op_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeEnrollmentToken("tdmenroll1.!!!"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeEnrollmentToken("hello"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// StoredReportShareBytes writes field by field what building the
// StoredReportShare and serializing it deterministically writes: every
// combination of set and unset parts, empty and filled, random contents
// (the content digest devices sign and the blob servers store depend on it).
TEST(StoredReportShareBytesTest, EqualsTheBuiltMessageSerialized) {
  std::unique_ptr<DeterministicRandom> rng = DeterministicRandom::FromSeed(77);
  const auto bytes = [&](size_t n) {
    std::string s(n, '\0');
    rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(s.data()), n));
    return s;
  };
  const auto u64 = [&]() {
    uint64_t v = 0;
    (void)rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(&v), sizeof(v)));
    return v;
  };
  for (int trial = 0; trial < 64; ++trial) {
    const bool with_keys = trial & 1, with_proof = trial & 2, with_ticket = trial & 4,
               with_dense = trial & 8, empty_parts = trial & 16;
    proto::SparseKeySet keys;
    proto::NormProofShare proof;
    proto::DenseShare dense;
    if (!empty_parts) {
      keys.set_num_groups(3 + trial);
      keys.mutable_group_parameters()->set_block_size(16);
      for (int g = 0; g < 3; ++g) {
        proto::BlockDpfKey* k = keys.add_keys();
        k->set_party(trial % 2);
        k->set_seed(bytes(16));
        k->add_correction_words()->set_seed(bytes(16));
        for (int i = 0; i < 40 + trial; ++i) k->add_value_correction(u64());
        k->set_value_correction_packed(bytes(200 + 7 * trial));
        k->set_proof_correction(bytes(64));
      }
      for (int i = 0; i < 300; ++i) proof.add_witness(u64());
      proof.add_proof(u64());
      proof.set_seed(bytes(16));
      dense.set_party(1);
      dense.set_values(bytes(20000 + trial));  // a multi-byte length varint
    }
    const std::string ticket = with_ticket ? bytes(32) : std::string();
    proto::StoredReportShare built;
    if (with_keys) *built.mutable_key_share() = keys;
    if (with_proof) *built.mutable_norm_proof() = proof;
    built.set_ticket_digest(ticket);
    if (with_dense) *built.mutable_dense_share() = dense;
    std::string want(built.ByteSizeLong(), '\0');
    {
      google::protobuf::io::ArrayOutputStream stream(want.data(), static_cast<int>(want.size()));
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      built.SerializeWithCachedSizes(&coded);
    }
    EXPECT_EQ(StoredReportShareBytes(with_keys ? &keys : nullptr, with_proof ? &proof : nullptr,
                                     ticket, with_dense ? &dense : nullptr),
              want)
        << "trial " << trial;
  }
}

// Content digest v2 of a real PREAMBLE report (32-bit keys): the public
// parts enter through P, once for both shares; every part of either share
// still moves its digest, and the pair signer's signatures verify.
TEST(ContentDigestTest, BindsEveryPartAndSharesPBetweenTheTwoShares) {
  const SparseDpf dpf = SparseDpf::Create(4 * 16 * 8, 8, 4, 32).value();
  auto rng = DeterministicRandom::FromSeed(36);
  std::vector<uint64_t> values(4 * 8, 7);
  auto keys = dpf.GenerateKeys({1, 2, 3, 4}, values, rng.get()).value();
  const std::string td(32, '\x21');
  const ProofDigest p = PublicPartsDigest(keys.first).value();
  EXPECT_EQ(PublicPartsDigest(keys.second).value(), p);
  const std::string leader = UploadContentDigest(keys.first, nullptr, td);
  ASSERT_EQ(leader.size(), 32u);
  EXPECT_EQ(UploadContentDigest(keys.first, nullptr, td, &p), leader);
  EXPECT_NE(UploadContentDigest(keys.second, nullptr, td, &p), leader);  // other seeds
  const auto moved = [&](auto edit) {
    proto::SparseKeySet k = keys.first;
    proto::NormProofShare proof;
    std::string digest = td;
    edit(k, proof, digest);
    return UploadContentDigest(k, proof.witness_size() > 0 ? &proof : nullptr, digest) != leader;
  };
  using Keys = proto::SparseKeySet;
  using Proof = proto::NormProofShare;
  EXPECT_TRUE(moved([](Keys& k, Proof&, std::string&) {
    (*k.mutable_keys(2)->mutable_value_correction_packed())[5] ^= 1;
  }));
  EXPECT_TRUE(moved([](Keys& k, Proof&, std::string&) {
    (*k.mutable_keys(0)->mutable_correction_words(1)->mutable_seed())[0] ^= 1;
  }));
  EXPECT_TRUE(moved([](Keys& k, Proof&, std::string&) {
    (*k.mutable_keys(3)->mutable_proof_correction())[63] ^= 1;
  }));
  EXPECT_TRUE(
      moved([](Keys& k, Proof&, std::string&) { (*k.mutable_keys(1)->mutable_seed())[15] ^= 1; }));
  EXPECT_TRUE(moved([](Keys&, Proof& p, std::string&) { p.add_witness(1); }));
  EXPECT_TRUE(moved([](Keys&, Proof&, std::string& d) { d[0] ^= 1; }));
  // A P that is not the keys' is not their digest either.
  ProofDigest wrong = p;
  wrong[0] ^= 1;
  EXPECT_NE(UploadContentDigest(keys.first, nullptr, td, &wrong), leader);

  Ed25519SigningKey coordinator = Fresh(20), device = Fresh(21);
  const proto::UploadTicket t = TicketFor(device);
  proto::UploadRequest a, b;
  *a.mutable_ticket() = *b.mutable_ticket() = *SignUploadTicket(coordinator, t);
  *a.mutable_key_share() = keys.first;
  *b.mutable_key_share() = keys.second;
  ASSERT_THAT(SignUploadPair(device, &a, &b), IsOk());
  const std::string ticket_digest = TicketDigest(a.ticket());
  EXPECT_THAT(VerifyUploadSignature(t, UploadRole::kLeader, ticket_digest,
                                    UploadContentDigestOf(a, ticket_digest), a.device_signature()),
              IsOk());
  EXPECT_THAT(VerifyUploadSignature(t, UploadRole::kHelper, ticket_digest,
                                    UploadContentDigestOf(b, ticket_digest), b.device_signature()),
              IsOk());
  EXPECT_THAT(VerifyUploadSignature(t, UploadRole::kHelper, ticket_digest,
                                    UploadContentDigestOf(a, ticket_digest), b.device_signature()),
              StatusIs(kUnauth));
  // With the P the proof computed: the same signatures (Ed25519 is
  // deterministic); with a wrong one, signatures the servers refuse.
  proto::UploadRequest a2 = a, b2 = b;
  ASSERT_THAT(SignUploadPair(device, &a2, &b2, &p), IsOk());
  EXPECT_EQ(a2.device_signature(), a.device_signature());
  EXPECT_EQ(b2.device_signature(), b.device_signature());
  ASSERT_THAT(SignUploadPair(device, &a2, &b2, &wrong), IsOk());
  EXPECT_THAT(
      VerifyUploadSignature(t, UploadRole::kLeader, ticket_digest,
                            UploadContentDigestOf(a2, ticket_digest), a2.device_signature()),
      StatusIs(kUnauth));
  EXPECT_THAT(
      VerifyUploadSignature(t, UploadRole::kHelper, ticket_digest,
                            UploadContentDigestOf(b2, ticket_digest), b2.device_signature()),
      StatusIs(kUnauth));
}

}  // namespace
}  // namespace tandem::crypto
