// EncodeReports: a parallel encoding builds exactly the reports of a serial
// one for a fixed crypto seed (what makes tandem-sim's parallel rounds
// reproducible), reports differ between rounds and seeds, every report
// carries a signed ticket and device signatures, and a bad update's error
// comes back instead of a partial round.
#include "server/sim/private_mean.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/secure_sum.h"

namespace tandem::sim {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

const absl::Time kExpiry = absl::FromUnixSeconds(1'800'000'000);

struct Encoding {
  std::optional<server::SecureSum> sum;
  std::optional<client::ReportBuilder> builder;
  std::optional<crypto::Ed25519SigningKey> ticket_key;
  std::vector<std::vector<float>> updates;
};

Encoding Make(size_t clients) {
  Encoding s;
  server::SecureSumConfig c;
  c.task_id = "encode-test";
  c.model_dimension = 1000;
  c.block_size = 32;
  c.log_blocks_per_group = 1;
  c.norm_proofs = true;
  s.sum.emplace(server::SecureSum::Create(c).value());
  s.builder.emplace(
      client::ReportBuilder::Create(client::ReportParametersFromRound(s.sum->RoundParameters(7)))
          .value());
  auto rng = DeterministicRandom::FromSeed(5);
  s.ticket_key.emplace(crypto::Ed25519SigningKey::Generate(rng.get()).value());
  for (size_t i = 0; i < clients; ++i) {
    std::vector<float> u(1000);
    for (size_t j = 0; j < u.size(); ++j) u[j] = 0.001f * std::sin(0.1f * (i + 1) * j);
    s.updates.push_back(std::move(u));
  }
  return s;
}

std::vector<std::string> Bytes(const std::vector<EncodedReport>& reports) {
  std::vector<std::string> out;
  for (const EncodedReport& r : reports) {
    out.push_back(r.leader.SerializeAsString());
    out.push_back(r.helper.SerializeAsString());
  }
  return out;
}

TEST(EncodeReports, AnyThreadCountBuildsTheSameReportsForASeed) {
  Encoding s = Make(6);
  auto one = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 1);
  auto two = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 2);
  auto four =
      EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 4);
  ASSERT_THAT(one, IsOk());
  ASSERT_THAT(two, IsOk());
  ASSERT_THAT(four, IsOk());
  ASSERT_EQ(one->size(), 6u);
  EXPECT_TRUE(Bytes(*one) == Bytes(*two));  // no megabytes of diff on failure
  EXPECT_TRUE(Bytes(*one) == Bytes(*four));
  // Every report is its own: distinct ids, signed tickets, device signatures.
  std::set<std::string> ids;
  for (const EncodedReport& r : *one) {
    ids.insert(r.leader.report_id());
    EXPECT_EQ(r.leader.report_id(), r.helper.report_id());
    EXPECT_EQ(r.leader.report_id().size(), 16u);
    EXPECT_FALSE(r.leader.ticket().signature().empty());
    EXPECT_EQ(r.leader.device_signature().size(), 64u);
    EXPECT_EQ(r.helper.device_signature().size(), 64u);
    EXPECT_NE(r.leader.device_signature(), r.helper.device_signature());
    EXPECT_TRUE(r.leader.has_norm_proof());
  }
  EXPECT_EQ(ids.size(), 6u);
}

TEST(EncodeReports, SeedAndRoundChangeTheReports) {
  Encoding s = Make(2);
  auto a = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 2);
  auto b = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 43, 2);
  auto c = EncodeReports(*s.builder, "encode-test", 8, s.updates, &*s.ticket_key, kExpiry, 42, 2);
  auto d = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 0, 2);
  auto e = EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 0, 2);
  for (auto* r : {&a, &b, &c, &d, &e}) ASSERT_THAT(*r, IsOk());
  EXPECT_NE((*a)[0].leader.report_id(), (*b)[0].leader.report_id());
  EXPECT_NE((*a)[0].leader.report_id(), (*c)[0].leader.report_id());
  EXPECT_NE((*d)[0].leader.report_id(), (*e)[0].leader.report_id());  // OpenSSL: fresh
}

TEST(EncodeReports, WithoutATicketKeyNoSignatures) {
  Encoding s = Make(2);
  auto r = EncodeReports(*s.builder, "encode-test", 7, s.updates, nullptr, kExpiry, 42, 2);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE((*r)[0].leader.ticket().signature().empty());
  EXPECT_TRUE((*r)[0].leader.device_signature().empty());
}

TEST(EncodeReports, ABadUpdateFailsTheRoundWithItsError) {
  Encoding s = Make(4);
  s.updates[2][5] = std::nanf("");
  EXPECT_THAT(
      EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 2),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      EncodeReports(*s.builder, "encode-test", 7, s.updates, &*s.ticket_key, kExpiry, 42, 0),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::sim
