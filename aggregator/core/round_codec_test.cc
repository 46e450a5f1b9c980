// The blob a server stores and the digest it keeps of it (issue 36: one
// pass over each share's bytes). For every kind of round, the digest an
// upload computes from the request (RoundCodec::StoredDigest: the content
// digest the device signs) is the store's ShareDigest of the blob, so a
// store reading the blob back checks it; the blob parses back to the share;
// and blobs of older stores (bare key sets, SHA-256 digests) still read.
#include "aggregator/core/round_codec.h"

#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/task.h"
#include "aggregator/store/report_store.h"
#include "aggregator/testing/report_factory.h"
#include "base/testing/status_matchers.h"
#include "crypto/dpf/public_digest.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::IsOk;

struct Case {
  const char* name;
  proto::RoundParameters params;
  bool ticketed;
};

std::shared_ptr<const RoundCodec> Codec(const proto::RoundParameters& p, Role role) {
  AggregatorOptions options;
  options.role = role;
  return CodecForRound(p, options).value();
}

TEST(RoundCodecTest, TheUploadsDigestIsTheStoresDigestOfTheBlobInEveryRoundKind) {
  const Case cases[] = {
      {"plain", testing::MakeRoundParameters("t", 1, 4, 8, 3), false},
      {"plain, ticketed", testing::MakeRoundParameters("t", 1, 4, 8, 3), true},
      {"norm bound", testing::MakeNormRoundParameters("t", 1, 4, 8, 3, 1 << 20, 1 << 22), false},
      {"norm bound, ticketed", testing::MakeNormRoundParameters("t", 1, 4, 8, 3, 1 << 20, 1 << 22),
       true},
      {"dense", testing::MakeDenseRoundParameters("t", 1, 96, 0), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const bool dense = c.params.encoding() == proto::REPORT_ENCODING_DENSE;
    absl::StatusOr<testing::TestReport> report =
        dense ? testing::MakeDenseReport(c.params, std::vector<int64_t>(96, 3), 7)
              : testing::MakeReport(c.params, 11);
    ASSERT_THAT(report.status(), IsOk());
    for (Role role : {Role::kLeader, Role::kHelper}) {
      const proto::UploadRequest& request =
          role == Role::kLeader ? report->to_leader : report->to_helper;
      const auto codec = Codec(c.params, role);
      ASSERT_THAT(codec->ValidateUpload(request), IsOk());
      const std::string td = c.ticketed ? std::string(32, '\x42') : std::string();
      const std::string blob = codec->EncodeStored(request, td);
      std::optional<crypto::ProofDigest> p;
      absl::StatusOr<std::string> digest = codec->StoredDigest(request, td, blob, &p);
      ASSERT_THAT(digest.status(), IsOk());
      EXPECT_EQ(*digest, ShareDigest(blob));
      EXPECT_EQ(*digest, crypto::UploadContentDigestOf(request, td));  // what devices sign
      if (dense) {
        EXPECT_FALSE(p.has_value());
        EXPECT_EQ(*digest, crypto::Sha256Digest(blob));
        continue;
      }
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(*p, crypto::PublicPartsDigest(request.key_share()).value());
      EXPECT_NE(*digest, crypto::Sha256Digest(blob));
      absl::StatusOr<ParsedShare> parsed = codec->ParseStored(blob, c.ticketed);
      ASSERT_THAT(parsed.status(), IsOk());
      EXPECT_EQ(parsed->keys().SerializeAsString(), request.key_share().SerializeAsString());
      EXPECT_EQ(parsed->ticket_digest, td);
      // One flipped byte anywhere in the blob: the digest no longer matches.
      std::string flipped = blob;
      flipped[flipped.size() / 2] ^= 0x10;
      EXPECT_NE(ShareDigest(flipped), *digest);
    }
  }
}

// A store written before content digest v2 holds a bare key set for rounds
// without bound or ticket, under SHA-256: it still parses, and its digest
// is SHA-256 (the bare set never reads as a StoredReportShare).
TEST(RoundCodecTest, BareKeySetsOfOlderStoresStillParse) {
  const proto::RoundParameters params = testing::MakeRoundParameters("t", 1, 4, 8, 3);
  const testing::TestReport report = testing::MakeReport(params, 5).value();
  const std::string bare = report.to_helper.key_share().SerializeAsString();
  EXPECT_EQ(ShareDigest(bare), crypto::Sha256Digest(bare));
  const auto codec = Codec(params, Role::kHelper);
  absl::StatusOr<ParsedShare> parsed = codec->ParseStored(bare, /*ticketed=*/false);
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(parsed->keys().SerializeAsString(), bare);
  // Not in a ticketed round: there the blob must name its ticket.
  EXPECT_FALSE(codec->ParseStored(bare, /*ticketed=*/true).ok());
  EXPECT_EQ(ShareDigest("share-a"), crypto::Sha256Digest("share-a"));
}

// An exchange with the helper takes verify_batch_size reports, fewer where
// their verifier shares would not fit its byte budget, never none.
TEST(RoundCodecTest, ExchangeBatchesStayWithinTheVerifierByteBudget) {
  const auto plain = Codec(testing::MakeRoundParameters("t", 1, 4, 8, 3), Role::kLeader);
  EXPECT_EQ(plain->VerifierElements(), 0u);
  EXPECT_EQ(plain->ExchangeBatchSize(256), 256u);
  EXPECT_EQ(plain->ExchangeBatchSize(256, 1), 256u);  // nothing to weigh
  const auto norm =
      Codec(testing::MakeNormRoundParameters("t", 1, 4, 8, 3, 1 << 20, 1 << 22), Role::kLeader);
  const size_t per_report = 8 * norm->VerifierElements();
  ASSERT_EQ(norm->VerifierElements(), norm->proof()->circuit().flp().verifier_length());
  ASSERT_GT(per_report, 0u);
  EXPECT_EQ(norm->ExchangeBatchSize(256), 256u);  // 16 MiB holds 256 of these
  EXPECT_EQ(norm->ExchangeBatchSize(256, 3 * per_report + 7), 3u);
  EXPECT_EQ(norm->ExchangeBatchSize(2, 3 * per_report), 2u);
  EXPECT_EQ(norm->ExchangeBatchSize(256, per_report - 1), 1u);
  EXPECT_EQ(norm->ExchangeBatchSize(0), 1u);
}

// The hash both servers compare for a report in the verification exchange
// is a wire format between two daemons, perhaps of different versions:
// known answers (Python's hashlib over tag NUL | len(id) | len(ticket) |
// id | ticket digest | VDPF digest).
TEST(BoundCheckHashTest, KnownAnswers) {
  crypto::ProofDigest digest;
  for (size_t i = 0; i < digest.size(); ++i) digest[i] = static_cast<uint8_t>(100 + i);
  std::string ticket(32, '\0');
  for (size_t i = 0; i < ticket.size(); ++i) ticket[i] = static_cast<char>(i);
  EXPECT_EQ(absl::BytesToHexString(BoundCheckHash("report-7", ticket, digest)),
            "9f9fea6dafc05c2f4a304698782aed938317a719b686060558c201a43fcdcf66");
  EXPECT_EQ(absl::BytesToHexString(BoundCheckHash("report-7", "", digest)),
            "09478739a0b07997801d7bccf3b8708aa1b0340420b956130e715e5dcbad16a9");
}

}  // namespace
}  // namespace tandem::aggregator
