#include "crypto/proof/dense_norm_proof.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::testing::HasSubstr;

const std::string kReportId = "0123456789abcdef";
const std::string kQuerySeed(32, 'q');

proto::NormBoundParameters Bound(uint64_t total) {
  proto::NormBoundParameters b;
  b.set_max_block_l2_squared(total);
  b.set_max_l2_squared(total);
  return b;
}

// Values of L2 norm^2 = sum of squares of small signed integers, in Z_2^w.
std::vector<uint64_t> Encode(const std::vector<int64_t>& v, int w) {
  const uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  std::vector<uint64_t> out;
  for (int64_t x : v) out.push_back(static_cast<uint64_t>(x) & mask);
  return out;
}

struct Verdict {
  bool leader_ok, helper_ok, accepted;
};

// Both servers evaluate their shares and decide together.
Verdict Check(const DenseNormProof& sys, const proto::DenseShare& leader,
              const proto::DenseShare& helper, const proto::NormProofShare& p0,
              const proto::NormProofShare& p1) {
  std::vector<uint64_t> d0(sys.circuit().derived_length()), d1(sys.circuit().derived_length());
  Verdict v{};
  v.leader_ok = sys.EvaluateAndDerive(0, leader, {}, absl::MakeSpan(d0)).ok();
  v.helper_ok = sys.EvaluateAndDerive(1, helper, {}, absl::MakeSpan(d1)).ok();
  if (!v.leader_ok || !v.helper_ok) return v;
  auto q0 = sys.Query(0, kReportId, leader, p0, d0, kQuerySeed);
  auto q1 = sys.Query(1, kReportId, helper, p1, d1, kQuerySeed);
  v.accepted = q0.ok() && q1.ok() && sys.Decide(*q0, *q1);
  return v;
}

class DenseNormProofTest : public ::testing::TestWithParam<int> {};

TEST_P(DenseNormProofTest, HonestReportsAreAcceptedAndAccumulated) {
  const int w = GetParam();
  std::vector<int64_t> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(i % 7) - 3;
  uint64_t norm2 = 0;
  for (int64_t v : x) norm2 += static_cast<uint64_t>(v * v);
  auto sys = DenseNormProof::Create(x.size(), w, Bound(norm2));  // exactly at the bound
  ASSERT_TRUE(sys.ok()) << sys.status();
  EXPECT_LE(sys->SoundnessLog2(), -60.0);
  auto shares = sys->sharing().Share(Encode(x, w), OpenSslRandom::Default());
  ASSERT_TRUE(shares.ok());
  auto proof = sys->Prove(kReportId, shares->first, shares->second, OpenSslRandom::Default());
  ASSERT_TRUE(proof.ok()) << proof.status();
  Verdict v = Check(*sys, shares->first, shares->second, proof->first, proof->second);
  EXPECT_TRUE(v.accepted);
  // The evaluation that derives also accumulates the exact shares.
  std::vector<uint64_t> acc(x.size(), 0), derived(sys->circuit().derived_length());
  ASSERT_TRUE(
      sys->EvaluateAndDerive(0, shares->first, absl::MakeSpan(acc), absl::MakeSpan(derived)).ok());
  ASSERT_TRUE(
      sys->EvaluateAndDerive(1, shares->second, absl::MakeSpan(acc), absl::MakeSpan(derived)).ok());
  EXPECT_EQ(acc, Encode(x, w));
}

TEST_P(DenseNormProofTest, AReportOverTheBoundCannotBeProvedNorSmuggled) {
  const int w = GetParam();
  std::vector<int64_t> x(64, 0);
  x[5] = 100;  // norm^2 = 10,000 > 9,999
  auto sys = DenseNormProof::Create(x.size(), w, Bound(9999));
  ASSERT_TRUE(sys.ok());
  auto shares = sys->sharing().Share(Encode(x, w), OpenSslRandom::Default());
  ASSERT_TRUE(shares.ok());
  EXPECT_EQ(sys->Prove(kReportId, shares->first, shares->second, OpenSslRandom::Default())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A cheating client with a made-up witness (all zero, or all ones) is
  // rejected by the servers.
  for (uint64_t fill : {uint64_t{0}, uint64_t{1}}) {
    std::vector<uint64_t> witness(sys->circuit().witness_length(), fill);
    auto proof = sys->ProveWithWitness(kReportId, shares->first, shares->second, witness,
                                       OpenSslRandom::Default());
    ASSERT_TRUE(proof.ok());
    EXPECT_FALSE(Check(*sys, shares->first, shares->second, proof->first, proof->second).accepted);
  }
}

TEST_P(DenseNormProofTest, TamperedOrMismatchedSharesAreRejected) {
  const int w = GetParam();
  std::vector<int64_t> x(300, 1);
  auto sys = DenseNormProof::Create(x.size(), w, Bound(400));
  ASSERT_TRUE(sys.ok());
  auto a = sys->sharing().Share(Encode(x, w), OpenSslRandom::Default());
  auto b = sys->sharing().Share(Encode(x, w), OpenSslRandom::Default());
  ASSERT_TRUE(a.ok() && b.ok());
  auto pa = sys->Prove(kReportId, a->first, a->second, OpenSslRandom::Default());
  auto pb = sys->Prove(kReportId, b->first, b->second, OpenSslRandom::Default());
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_TRUE(Check(*sys, a->first, a->second, pa->first, pa->second).accepted);
  // One leader value changed after proving (a report of norm^2 > 400 now,
  // or still small: either way the binding breaks).
  proto::DenseShare tampered = a->first;
  (*tampered.mutable_values())[0] ^= 0x40;
  EXPECT_FALSE(Check(*sys, tampered, a->second, pa->first, pa->second).accepted);
  // The helper's seed of another report.
  EXPECT_FALSE(Check(*sys, a->first, b->second, pa->first, pa->second).accepted);
  // Proof shares of another report of the same vector.
  EXPECT_FALSE(Check(*sys, a->first, a->second, pb->first, pa->second).accepted);
  // A proof element changed.
  proto::NormProofShare bad = pa->first;
  bad.set_proof(0, (bad.proof(0) + 1) % gl::kP);
  EXPECT_FALSE(Check(*sys, a->first, a->second, bad, pa->second).accepted);
  // Shares for the wrong server are refused before any math.
  std::vector<uint64_t> d(sys->circuit().derived_length());
  EXPECT_THAT(sys->EvaluateAndDerive(0, a->second, {}, absl::MakeSpan(d)).message(),
              HasSubstr("party 1"));
}

INSTANTIATE_TEST_SUITE_P(Widths, DenseNormProofTest, ::testing::Values(32, 64));

TEST(DenseNormProofCreateTest, ChecksItsArguments) {
  EXPECT_FALSE(DenseNormProof::Create(0, 64, Bound(10)).ok());
  EXPECT_THAT(DenseNormProof::Create((uint64_t{1} << 20) + 1, 64, Bound(10)).status().message(),
              HasSubstr("2^20"));
  EXPECT_FALSE(DenseNormProof::Create(10, 16, Bound(10)).ok());
  EXPECT_FALSE(DenseNormProof::Create(10, 64, Bound(0)).ok());
}

}  // namespace
}  // namespace tandem::crypto::proof
