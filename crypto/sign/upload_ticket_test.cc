#include "crypto/sign/upload_ticket.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/ed25519.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.pb.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::StatusCode kUnauth = absl::StatusCode::kUnauthenticated;

std::string Hex(absl::string_view hex) { return absl::HexStringToBytes(hex); }

// RFC 8032 TEST 1 key: the known-answer ticket below is signed with it.
constexpr char kSeedHex[] = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
constexpr int64_t kExpiry = 1700000000000;

proto::UploadTicket MakeTicket(absl::string_view task = "task-7", uint64_t round = 42,
                               std::string id = std::string()) {
  if (id.empty()) {
    for (int i = 0; i < 16; ++i) id.push_back(static_cast<char>(i));
  }
  proto::UploadTicket t;
  t.set_task_id(std::string(task));
  t.set_round_id(round);
  t.set_ticket_id(id);
  t.set_expiry_unix_ms(kExpiry);
  return t;
}

class UploadTicketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto key = Ed25519SigningKey::FromSeed(Hex(kSeedHex));
    ASSERT_THAT(key, IsOk());
    key_ = std::make_unique<Ed25519SigningKey>(*key);
    auto pub = key_->VerifyingKey();
    ASSERT_THAT(pub, IsOk());
    pub_ = std::make_unique<Ed25519VerifyingKey>(*pub);
    auto rng = DeterministicRandom::FromSeed(99);
    auto other = Ed25519SigningKey::Generate(rng.get());
    ASSERT_THAT(other, IsOk());
    other_ = std::make_unique<Ed25519SigningKey>(*other);
  }
  proto::SignedUploadTicket Sign(const proto::UploadTicket& t) const {
    auto s = SignUploadTicket(*key_, t);
    EXPECT_THAT(s, IsOk());
    return s.ok() ? *s : proto::SignedUploadTicket();
  }
  // Signs arbitrary bytes as if they were a ticket (what a buggy or
  // compromised signer could produce).
  proto::SignedUploadTicket SignRaw(const std::string& bytes) const {
    proto::SignedUploadTicket s;
    s.set_ticket(bytes);
    auto sig = key_->Sign(UploadTicketSigningInput(bytes));
    EXPECT_THAT(sig, IsOk());
    if (sig.ok()) s.set_signature(*sig);
    s.set_key_id(TicketKeyId(key_->PublicKeyRaw()));
    return s;
  }
  std::unique_ptr<Ed25519SigningKey> key_;
  std::unique_ptr<Ed25519VerifyingKey> pub_;
  std::unique_ptr<Ed25519SigningKey> other_;
};

// Ticket bytes by hand (field 1 "task-7", 2 = 42, 3 = 00..0f, 4 = 1.7e12);
// signature and digest from an independent Ed25519 / SHA-256 implementation.
TEST_F(UploadTicketTest, KnownAnswer) {
  const proto::SignedUploadTicket s = Sign(MakeTicket());
  EXPECT_EQ(absl::BytesToHexString(s.ticket()),
            "0a067461736b2d37102a1a10000102030405060708090a0b0c0d0e0f2080d095ffbc31");
  EXPECT_EQ(absl::BytesToHexString(s.signature()),
            "75570b1043deec7c87884b8c27db020d021b9a256a0c32d2528929789dc40351"
            "c4700676f62278063e9d00a20a93bf4106e879e16edb1f2ea802b3e5627f8408");
  EXPECT_EQ(absl::BytesToHexString(TicketDigest(s)),
            "bb93de4f280868c5a54085379660c24bb7b2955a04bb2cf0c22381548567d566");
  EXPECT_EQ(UploadTicketSigningInput("ab"), std::string("tandem.upload_ticket.v1\0ab", 26));
  // SHA-256 of the RFC 8032 TEST 1 public key d75a9801...511a (hashlib).
  EXPECT_EQ(absl::BytesToHexString(s.key_id()), "21fe31dfa154a261");
}

TEST_F(UploadTicketTest, KeyIdChoosesAmongAcceptedKeys) {
  auto other_pub = other_->VerifyingKey();
  ASSERT_THAT(other_pub, IsOk());
  const proto::SignedUploadTicket mine = Sign(MakeTicket());
  auto theirs = SignUploadTicket(*other_, MakeTicket("task-7", 43));
  ASSERT_THAT(theirs, IsOk());
  EXPECT_NE(mine.key_id(), theirs->key_id());
  const Ed25519VerifyingKey* both[] = {pub_.get(), &*other_pub};
  auto a = VerifyUploadTicketWithAnyOf(both, mine);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->round_id(), 42u);
  auto b = VerifyUploadTicketWithAnyOf(both, *theirs);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->round_id(), 43u);
  // The old key dropped: its tickets name a key this server does not hold.
  const Ed25519VerifyingKey* current[] = {pub_.get(), nullptr};
  EXPECT_THAT(VerifyUploadTicketWithAnyOf(current, *theirs),
              StatusIs(kUnauth, HasSubstr(absl::BytesToHexString(theirs->key_id()))));
  // Lying about the id only picks the key the signature then fails under.
  proto::SignedUploadTicket lying = *theirs;
  lying.set_key_id(mine.key_id());
  EXPECT_THAT(VerifyUploadTicketWithAnyOf(both, lying), StatusIs(kUnauth, HasSubstr("signature")));
  proto::SignedUploadTicket unnamed = mine;
  unnamed.clear_key_id();
  EXPECT_THAT(VerifyUploadTicketWithAnyOf(both, unnamed), StatusIs(kUnauth, HasSubstr("key_id")));
  EXPECT_THAT(VerifyUploadTicket(*pub_, unnamed), StatusIs(kUnauth, HasSubstr("no key id")));
}

TEST_F(UploadTicketTest, SignVerifyCheckRoundTrip) {
  const proto::UploadTicket t = MakeTicket();
  const proto::SignedUploadTicket s = Sign(t);
  EXPECT_EQ(s.ticket(), t.SerializeAsString());
  EXPECT_EQ(s.signature().size(), kEd25519SignatureSize);
  EXPECT_EQ(Sign(t).SerializeAsString(), s.SerializeAsString());  // deterministic

  auto verified = VerifyUploadTicket(*pub_, s);
  ASSERT_THAT(verified, IsOk());
  EXPECT_EQ(verified->SerializeAsString(), t.SerializeAsString());
  EXPECT_THAT(CheckTicketFor(*verified, "task-7", 42, t.ticket_id(), kExpiry - 1), IsOk());
  EXPECT_THAT(CheckTicketFor(*verified, "task-7", 42, t.ticket_id(), kExpiry), IsOk());
  EXPECT_THAT(CheckTicketFor(*verified, "task-7", 42, t.ticket_id(), 0), IsOk());
}

TEST_F(UploadTicketTest, SignerRefusesTicketsNoAggregatorAccepts) {
  proto::UploadTicket t = MakeTicket();
  t.clear_task_id();
  EXPECT_THAT(SignUploadTicket(*key_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t = MakeTicket("task", 1, std::string(15, 'x'));
  EXPECT_THAT(SignUploadTicket(*key_, t),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("16 bytes")));
  t = MakeTicket("task", 1, std::string(17, 'x'));
  EXPECT_THAT(SignUploadTicket(*key_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t = MakeTicket();
  t.set_expiry_unix_ms(0);
  EXPECT_THAT(SignUploadTicket(*key_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t.set_expiry_unix_ms(-5);
  EXPECT_THAT(SignUploadTicket(*key_, t), StatusIs(absl::StatusCode::kInvalidArgument));
  t = MakeTicket(std::string(2000, 'a'));
  EXPECT_THAT(SignUploadTicket(*key_, t), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(UploadTicketTest, EveryTamperedTicketByteIsRefused) {
  const proto::SignedUploadTicket s = Sign(MakeTicket());
  for (size_t i = 0; i < s.ticket().size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      proto::SignedUploadTicket bad = s;
      (*bad.mutable_ticket())[i] = static_cast<char>(bad.ticket()[i] ^ (1 << bit));
      ASSERT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth, HasSubstr("signature")))
          << "byte " << i << " bit " << bit;
    }
  }
  proto::SignedUploadTicket longer = s;
  longer.mutable_ticket()->push_back('\0');
  EXPECT_THAT(VerifyUploadTicket(*pub_, longer), StatusIs(kUnauth));
  proto::SignedUploadTicket shorter = s;
  shorter.mutable_ticket()->pop_back();
  EXPECT_THAT(VerifyUploadTicket(*pub_, shorter), StatusIs(kUnauth));
}

TEST_F(UploadTicketTest, BadSignaturesAreUnauthenticated) {
  const proto::SignedUploadTicket s = Sign(MakeTicket());
  // Another key's signature, and the right key's verifying key elsewhere.
  auto forged = SignUploadTicket(*other_, MakeTicket());
  ASSERT_THAT(forged, IsOk());
  EXPECT_THAT(VerifyUploadTicket(*pub_, *forged), StatusIs(kUnauth, HasSubstr("key")));
  forged->set_key_id(TicketKeyId(pub_->Raw()));  // a forger naming the right key
  EXPECT_THAT(VerifyUploadTicket(*pub_, *forged), StatusIs(kUnauth, HasSubstr("signature")));
  auto other_pub = other_->VerifyingKey();
  ASSERT_THAT(other_pub, IsOk());
  EXPECT_THAT(VerifyUploadTicket(*other_pub, s), StatusIs(kUnauth));
  forged->set_key_id(TicketKeyId(other_pub->Raw()));
  EXPECT_THAT(VerifyUploadTicket(*other_pub, *forged), IsOk());

  proto::SignedUploadTicket bad = s;
  bad.clear_signature();
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth, HasSubstr("no signature")));
  bad.set_signature(s.signature().substr(0, 63));
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth, HasSubstr("64 bytes")));
  bad.set_signature(s.signature() + "x");
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth, HasSubstr("64 bytes")));
  bad.set_signature(std::string(64, '\0'));
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth));

  // Another ticket's signature.
  const proto::SignedUploadTicket s2 = Sign(MakeTicket("task-7", 43));
  bad = s;
  bad.set_signature(s2.signature());
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth));

  // A signature over the bare ticket bytes (no domain tag) is not a ticket
  // signature: keys used for other purposes cannot mint tickets.
  bad = s;
  bad.set_signature(*key_->Sign(s.ticket()));
  EXPECT_THAT(VerifyUploadTicket(*pub_, bad), StatusIs(kUnauth));

  proto::SignedUploadTicket empty;
  EXPECT_THAT(VerifyUploadTicket(*pub_, empty), StatusIs(kUnauth));
}

TEST_F(UploadTicketTest, SignedButMalformedTicketsAreUnauthenticated) {
  EXPECT_THAT(VerifyUploadTicket(*pub_, SignRaw("\xff\xff\xff")),
              StatusIs(kUnauth, HasSubstr("does not parse")));
  proto::UploadTicket t = MakeTicket("task", 1, std::string(8, 'x'));
  EXPECT_THAT(VerifyUploadTicket(*pub_, SignRaw(t.SerializeAsString())),
              StatusIs(kUnauth, HasSubstr("16 bytes")));
  t = MakeTicket();
  t.clear_task_id();
  EXPECT_THAT(VerifyUploadTicket(*pub_, SignRaw(t.SerializeAsString())),
              StatusIs(kUnauth, HasSubstr("task_id")));
  t = MakeTicket(std::string(1100, 'a'));
  EXPECT_THAT(VerifyUploadTicket(*pub_, SignRaw(t.SerializeAsString())),
              StatusIs(kUnauth, HasSubstr("over")));
  EXPECT_THAT(VerifyUploadTicket(*pub_, SignRaw("")), StatusIs(kUnauth));
  // Expiry 0 verifies (the signature is fine) but is refused by the check.
  t = MakeTicket();
  t.set_expiry_unix_ms(0);
  auto verified = VerifyUploadTicket(*pub_, SignRaw(t.SerializeAsString()));
  ASSERT_THAT(verified, IsOk());
  EXPECT_THAT(CheckTicketFor(*verified, "task-7", 42, t.ticket_id(), 1),
              StatusIs(kUnauth, HasSubstr("no expiry")));
}

TEST_F(UploadTicketTest, RandomInputsNeverVerifyAndAreNeverInvalidArgument) {
  auto rng = DeterministicRandom::FromSeed(5);
  for (int i = 0; i < 200; ++i) {
    proto::SignedUploadTicket s;
    std::string ticket(static_cast<size_t>(i * 7 % 90), '\0');
    std::string sig(i % 3 == 0 ? 64 : static_cast<size_t>(i % 70), '\0');
    ASSERT_THAT(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(ticket.data()), ticket.size())),
                IsOk());
    ASSERT_THAT(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(sig.data()), sig.size())),
                IsOk());
    s.set_ticket(ticket);
    s.set_signature(sig);
    if (i % 2 == 0) s.set_key_id(TicketKeyId(pub_->Raw()));
    ASSERT_THAT(VerifyUploadTicket(*pub_, s), StatusIs(kUnauth)) << i;
  }
}

TEST_F(UploadTicketTest, CheckRefusesOtherTaskRoundReportAndExpired) {
  const proto::UploadTicket t = MakeTicket();
  auto v = VerifyUploadTicket(*pub_, Sign(t));
  ASSERT_THAT(v, IsOk());
  const std::string id = t.ticket_id();
  EXPECT_THAT(CheckTicketFor(*v, "task-8", 42, id, 0), StatusIs(kUnauth, HasSubstr("task")));
  EXPECT_THAT(CheckTicketFor(*v, "task-7x", 42, id, 0), StatusIs(kUnauth));
  EXPECT_THAT(CheckTicketFor(*v, "", 42, id, 0), StatusIs(kUnauth));
  // Replayed under another round of the same task.
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 43, id, 0), StatusIs(kUnauth, HasSubstr("round")));
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 41, id, 0), StatusIs(kUnauth));
  // Another report id (the ticket is one report).
  std::string other_id = id;
  other_id[15] = static_cast<char>(other_id[15] ^ 1);
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, other_id, 0),
              StatusIs(kUnauth, HasSubstr("report id")));
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, id.substr(0, 15), 0), StatusIs(kUnauth));
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, "", 0), StatusIs(kUnauth));
  // Expired one millisecond after the expiry.
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, id, kExpiry + 1),
              StatusIs(kUnauth, HasSubstr("expired")));
  // A checker's clock up to skew_ms ahead of the issuer's is tolerated, one
  // millisecond more is not, and the refusal names the tolerance.
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, id, kExpiry + 60000, 60000), IsOk());
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, id, kExpiry + 60001, 60000),
              StatusIs(kUnauth, HasSubstr("expired at")));
  EXPECT_THAT(CheckTicketFor(*v, "task-7", 42, id, kExpiry + 60001, 60000),
              StatusIs(kUnauth, HasSubstr("tolerated clock skew of 1m")));
  // A malformed (unverified) ticket is refused by the check on its own.
  proto::UploadTicket raw = t;
  raw.set_ticket_id("short");
  EXPECT_THAT(CheckTicketFor(raw, "task-7", 42, "short", 0), StatusIs(kUnauth));
}

TEST_F(UploadTicketTest, DigestCoversTheTicketBytesOnly) {
  const proto::SignedUploadTicket a = Sign(MakeTicket());
  const proto::SignedUploadTicket b = Sign(MakeTicket("task-7", 43));
  EXPECT_EQ(TicketDigest(a).size(), 32u);
  EXPECT_NE(TicketDigest(a), TicketDigest(b));
  proto::SignedUploadTicket resigned = a;
  resigned.set_signature(b.signature());
  EXPECT_EQ(TicketDigest(resigned), TicketDigest(a));
  // SHA-256("") for the empty ticket.
  EXPECT_EQ(absl::BytesToHexString(TicketDigest(proto::SignedUploadTicket())),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace tandem::crypto
