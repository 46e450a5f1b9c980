#include "crypto/proof/flp.h"

#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::IsOkAndHolds;
using ::tandem::testing::StatusIs;

uint64_t RandomElement(SecureRandom* rng) { return gl::Reduce64(rng->NextUint64().value()); }

// The gadget by its definition: a (x^2 - 1).
uint64_t Cubic(uint64_t a, uint64_t x) { return gl::Mul(a, gl::Sub(gl::Mul(x, x), 1)); }

struct ProofRun {
  std::vector<uint64_t> inputs, proof;
  uint64_t gadget_sum = 0;
};

ProofRun MakeRun(const ParallelSumCubicFlp& flp, SecureRandom* rng) {
  ProofRun run;
  run.inputs.resize(flp.input_length());
  for (auto& v : run.inputs) v = RandomElement(rng);
  for (size_t i = 0; i < flp.num_calls(); ++i) {
    run.gadget_sum = gl::Add(run.gadget_sum, Cubic(run.inputs[2 * i], run.inputs[2 * i + 1]));
  }
  std::vector<uint64_t> seeds(flp.seed_length());
  for (auto& v : seeds) v = RandomElement(rng);
  run.proof.resize(flp.proof_length());
  EXPECT_THAT(flp.Prove(run.inputs, seeds, absl::MakeSpan(run.proof)), IsOk());
  return run;
}

// Splits x into two additive shares, queries both and decides on the sum.
absl::StatusOr<bool> ShareAndDecide(const ParallelSumCubicFlp& flp, const ProofRun& run,
                                    uint64_t affine, SecureRandom* rng) {
  std::vector<uint64_t> in0(run.inputs.size()), in1(run.inputs.size());
  std::vector<uint64_t> pr0(run.proof.size()), pr1(run.proof.size());
  for (size_t i = 0; i < in0.size(); ++i) {
    in0[i] = RandomElement(rng);
    in1[i] = gl::Sub(run.inputs[i], in0[i]);
  }
  for (size_t i = 0; i < pr0.size(); ++i) {
    pr0[i] = RandomElement(rng);
    pr1[i] = gl::Sub(run.proof[i], pr0[i]);
  }
  const uint64_t a0 = RandomElement(rng);
  std::vector<uint64_t> points = {gl::kP - 5, 1000003};
  points.resize(flp.num_queries(), 0);
  for (int q = 2; q < flp.num_queries(); ++q) points[q] = 77777 + q;
  std::vector<uint64_t> v0(flp.verifier_length()), v1(flp.verifier_length());
  if (auto s = flp.Query(in0, pr0, a0, points, absl::MakeSpan(v0)); !s.ok()) return s;
  if (auto s = flp.Query(in1, pr1, gl::Sub(affine, a0), points, absl::MakeSpan(v1)); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < v0.size(); ++i) v0[i] = gl::Add(v0[i], v1[i]);
  return flp.Decide(v0);
}

class FlpShapes : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(FlpShapes, AcceptsExactlyWhenOutputIsZero) {
  const auto [calls, chunk, queries] = GetParam();
  auto flp = ParallelSumCubicFlp::Create(calls, chunk, queries);
  ASSERT_THAT(flp.status(), IsOk());
  auto rng = DeterministicRandom::FromSeed(calls * 31 + chunk);
  for (int trial = 0; trial < 3; ++trial) {
    ProofRun run = MakeRun(*flp, rng.get());
    const uint64_t zeroing = gl::Neg(run.gadget_sum);
    EXPECT_THAT(ShareAndDecide(*flp, run, zeroing, rng.get()), IsOkAndHolds(true));
    EXPECT_THAT(ShareAndDecide(*flp, run, gl::Add(zeroing, 1), rng.get()), IsOkAndHolds(false));
    // Any single corrupted proof element is caught.
    for (size_t pos : {size_t{0}, run.proof.size() / 2, run.proof.size() - 1}) {
      ProofRun bad = run;
      bad.proof[pos] = gl::Add(bad.proof[pos], 1 + trial);
      EXPECT_THAT(ShareAndDecide(*flp, bad, zeroing, rng.get()), IsOkAndHolds(false)) << pos;
    }
    // Corrupting an input changes the gadget outputs the proof claims.
    ProofRun bad = run;
    bad.inputs[1] = gl::Add(bad.inputs[1], 1);
    EXPECT_THAT(ShareAndDecide(*flp, bad, zeroing, rng.get()), IsOkAndHolds(false));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlpShapes,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(7, 3, 2),
                                           std::make_tuple(100, 0, 2),
                                           std::make_tuple(1000, 64, 3)));

TEST(Flp, LengthsFollowTheConstruction) {
  auto flp = ParallelSumCubicFlp::Create(1000, 64, 2);
  ASSERT_THAT(flp.status(), IsOk());
  EXPECT_EQ(flp->num_parallel_calls(), 16u);                 // ceil(1000 / 64)
  EXPECT_EQ(flp->wire_domain_size(), 32u);                   // 2^k >= Q + M' = 18
  EXPECT_EQ(flp->proof_domain_size(), 96u);                  // H, gH, g^2 H
  EXPECT_EQ(flp->input_length(), 2000u);                     // (a, x) per call
  EXPECT_EQ(flp->proof_length(), 2u * 64 * 2 + 96);          // seeds + p
  EXPECT_EQ(flp->verifier_length(), 1u + 2 * (2 * 64 + 1));
  const double p = 18446744069414584321.0;
  EXPECT_NEAR(flp->SoundnessLog2(), 2 * std::log2(95.0 / (p - 96 - 2)), 1e-9);
}

TEST(Flp, AutomaticChunkMinimisesTheProofLength) {
  for (size_t calls : {1, 7, 100, 5000, 49713}) {
    auto flp = ParallelSumCubicFlp::Create(calls, 0, 2);
    ASSERT_THAT(flp.status(), IsOk());
    for (size_t c = 1; c <= calls; c += 1 + c / 16) {
      auto other = ParallelSumCubicFlp::Create(calls, c, 2);
      ASSERT_THAT(other.status(), IsOk());
      EXPECT_LE(flp->proof_length(), other->proof_length()) << calls << " " << c;
    }
  }
  // The benchmark's circuit (k = 16, B = 1024, 33 slack bits each): 49,713
  // calls, chunk 196, N = 256: 2 * 196 * 2 + 768 = 1552 elements (N = 512
  // needs c = 98: 392 + 1536; N = 128, c = 395: 1580 + 384).
  auto flp = ParallelSumCubicFlp::Create(49713, 0, 2).value();
  EXPECT_EQ(flp.chunk_length(), 196u);
  EXPECT_EQ(flp.wire_domain_size(), 256u);
  EXPECT_EQ(flp.proof_length(), 1552u);
}

// Every single proof element and every single input, perturbed, is caught.
TEST(Flp, EverySingleElementTamperingIsRejected) {
  auto flp = ParallelSumCubicFlp::Create(20, 3, 2).value();
  auto rng = DeterministicRandom::FromSeed(77);
  ProofRun run = MakeRun(flp, rng.get());
  const uint64_t zeroing = gl::Neg(run.gadget_sum);
  ASSERT_THAT(ShareAndDecide(flp, run, zeroing, rng.get()), IsOkAndHolds(true));
  for (size_t pos = 0; pos < run.proof.size(); ++pos) {
    ProofRun bad = run;
    bad.proof[pos] = gl::Add(bad.proof[pos], 1 + pos);
    EXPECT_THAT(ShareAndDecide(flp, bad, zeroing, rng.get()), IsOkAndHolds(false)) << pos;
  }
  for (size_t pos = 0; pos < run.inputs.size(); ++pos) {
    ProofRun bad = run;
    bad.inputs[pos] = gl::Sub(bad.inputs[pos], 1 + pos);
    EXPECT_THAT(ShareAndDecide(flp, bad, zeroing, rng.get()), IsOkAndHolds(false)) << pos;
  }
}

TEST(Flp, QueryRejectsPointsInTheDomainAndRepeats) {
  auto flp = ParallelSumCubicFlp::Create(10, 2, 2).value();
  std::vector<uint64_t> in(flp.input_length()), pr(flp.proof_length()), out(flp.verifier_length());
  // 1 is in H; 7 (the coset shift g) and 49 = g^2 are in gH and g^2 H;
  // -1 is in H (N even).
  for (uint64_t inside : {uint64_t{1}, uint64_t{7}, uint64_t{49}, gl::kP - 1}) {
    EXPECT_TRUE(flp.InProofDomain(inside)) << inside;
    EXPECT_THAT(flp.Query(in, pr, 0, std::vector<uint64_t>{inside, 99999}, absl::MakeSpan(out)),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THAT(flp.Query(in, pr, 0, std::vector<uint64_t>{99999, 99999}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(flp.Query(in, pr, 0, std::vector<uint64_t>{gl::kP, 99999}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(flp.Query(in, pr, 0, std::vector<uint64_t>{12345, 99999}, absl::MakeSpan(out)),
              IsOk());
  EXPECT_THAT(flp.Decide(std::vector<uint64_t>(3)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The proof's polynomial values against their definition: p(x) = sum_t
// f_2t(x) (f_2t+1(x)^2 - 1) with each wire polynomial f_l evaluated at
// x by barycentric interpolation of its values on H (the seeds, the
// inputs, zeros), independently of the prover's transforms.
TEST(Flp, ProofPolynomialMatchesTheWireInterpolants) {
  auto rng = DeterministicRandom::FromSeed(31);
  for (auto [calls, chunk] : {std::pair<size_t, size_t>{1000, 64}, {50, 7}, {9, 1}}) {
    const ParallelSumCubicFlp flp = ParallelSumCubicFlp::Create(calls, chunk, 2).value();
    const ProofRun run = MakeRun(flp, rng.get());
    const size_t n = flp.wire_domain_size(), q = 2, wires = 2 * chunk;
    const NttDomain domain = NttDomain::Create(std::countr_zero(n)).value();
    // Wire values on H.
    std::vector<std::vector<uint64_t>> values(wires, std::vector<uint64_t>(n, 0));
    for (size_t l = 0; l < wires; ++l) {
      for (size_t s = 0; s < q; ++s) values[l][s] = run.proof[l * q + s];
      for (size_t i = 0; i < flp.num_parallel_calls(); ++i) {
        const size_t idx = i * wires + l;
        values[l][q + i] = idx < run.inputs.size() ? run.inputs[idx] : 0;
      }
    }
    const uint64_t* p = run.proof.data() + flp.seed_length();
    std::vector<uint64_t> lagrange(n);
    for (int s = 0; s < 3; ++s) {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t x = gl::Mul(domain.CosetShift(s), domain.Point(i));
        std::vector<uint64_t> at(wires);
        if (s == 0) {
          for (size_t l = 0; l < wires; ++l) at[l] = values[l][i];
        } else {
          domain.LagrangeCoefficients(x, 1, absl::MakeSpan(lagrange));
          for (size_t l = 0; l < wires; ++l) {
            for (size_t k = 0; k < n; ++k)
              at[l] = gl::Add(at[l], gl::Mul(lagrange[k], values[l][k]));
          }
        }
        uint64_t expected = 0;
        for (size_t t = 0; t < chunk; ++t) {
          expected = gl::Add(expected, Cubic(at[2 * t], at[2 * t + 1]));
        }
        ASSERT_EQ(p[s * n + i], expected)
            << "calls " << calls << ", coset " << s << ", point " << i;
      }
    }
  }
}

// At the benchmark's shape (49,713 calls, chunk 196, N = 256): the proof
// equals the one computed with the portable transforms and plain gl::
// arithmetic (the prover before its AVX2 kernels), element for element.
TEST(Flp, ProofEqualsThePortableComputation) {
  const ParallelSumCubicFlp flp = ParallelSumCubicFlp::Create(49713, 196, 2).value();
  auto rng = DeterministicRandom::FromSeed(32);
  const ProofRun run = MakeRun(flp, rng.get());
  const size_t n = flp.wire_domain_size(), q = 2, wires = 2 * flp.chunk_length();
  const NttDomain domain = NttDomain::Create(std::countr_zero(n)).value();
  std::vector<uint64_t> expected(3 * n, 0), values(n), coeffs(n), coset(n);
  std::vector<std::vector<uint64_t>> at(2, std::vector<uint64_t>(3 * n));
  for (size_t t = 0; t < flp.chunk_length(); ++t) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t l = 2 * t + k;
      std::fill(values.begin(), values.end(), 0);
      for (size_t s = 0; s < q; ++s) values[s] = run.proof[l * q + s];
      for (size_t i = 0; i < flp.num_parallel_calls(); ++i) {
        const size_t idx = i * wires + l;
        values[q + i] = idx < run.inputs.size() ? run.inputs[idx] : 0;
      }
      coeffs = values;
      domain.ValuesToCoefficientsPortable(absl::MakeSpan(coeffs));
      for (size_t x = 0; x < n; ++x) at[k][x] = values[x];
      for (int s = 1; s < 3; ++s) {
        for (size_t j = 0; j < n; ++j) coset[j] = gl::Mul(coeffs[j], domain.CosetScale(s)[j]);
        domain.CoefficientsToValuesPortable(absl::MakeSpan(coset));
        for (size_t x = 0; x < n; ++x) at[k][s * n + x] = gl::Reduce64(coset[x]);
      }
    }
    for (size_t x = 0; x < 3 * n; ++x) {
      expected[x] = gl::Add(expected[x], Cubic(at[0][x], at[1][x]));
    }
  }
  const std::vector<uint64_t> p(run.proof.begin() + flp.seed_length(), run.proof.end());
  EXPECT_EQ(p, expected);
}

TEST(Flp, CreateValidates) {
  EXPECT_THAT(ParallelSumCubicFlp::Create(0, 0, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParallelSumCubicFlp::Create(10, 11, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParallelSumCubicFlp::Create(10, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto::proof
