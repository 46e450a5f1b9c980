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

// The gadget by its definition on one row (a, x_0..x_{r-1}, v_0..v_{s-1}):
// sum_t rho_t (x_t^3 - x_t) + a sum_u v_u^2.
uint64_t Gadget(const uint64_t* row, const std::vector<uint64_t>& rho, size_t square) {
  uint64_t g = 0, squares = 0;
  for (size_t t = 0; t < rho.size(); ++t) {
    const uint64_t x = row[1 + t];
    g = gl::Add(g, gl::Mul(rho[t], gl::Sub(gl::Mul(gl::Mul(x, x), x), x)));
  }
  for (size_t u = 0; u < square; ++u) {
    const uint64_t v = row[1 + rho.size() + u];
    squares = gl::Add(squares, gl::Mul(v, v));
  }
  return gl::Add(g, gl::Mul(row[0], squares));
}

struct ProofRun {
  std::vector<uint64_t> inputs, rho, row_weights, proof;
  uint64_t output = 0;  // sum_i s_i G(row i)
};

ProofRun MakeRun(const RangeSquareFlp& flp, SecureRandom* rng) {
  ProofRun run;
  run.inputs.resize(flp.input_length());
  run.rho.resize(flp.range_slots());
  run.row_weights.resize(flp.num_rows());
  for (auto* v : {&run.inputs, &run.rho, &run.row_weights}) {
    for (auto& x : *v) x = RandomElement(rng);
  }
  for (size_t i = 0; i < flp.num_rows(); ++i) {
    const uint64_t g = Gadget(&run.inputs[i * flp.wires()], run.rho, flp.square_slots());
    run.output = gl::Add(run.output, gl::Mul(run.row_weights[i], g));
  }
  std::vector<uint64_t> seeds(flp.seed_length());
  for (auto& v : seeds) v = RandomElement(rng);
  run.proof.resize(flp.proof_length());
  EXPECT_THAT(flp.Prove(run.inputs, run.rho, seeds, absl::MakeSpan(run.proof)), IsOk());
  return run;
}

// Splits the inputs and the proof into two additive shares, queries both
// and decides on the sum.
absl::StatusOr<bool> ShareAndDecide(const RangeSquareFlp& flp, const ProofRun& run, uint64_t affine,
                                    SecureRandom* rng) {
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
  if (auto s = flp.Query(in0, pr0, a0, run.row_weights, points, absl::MakeSpan(v0)); !s.ok()) {
    return s;
  }
  if (auto s =
          flp.Query(in1, pr1, gl::Sub(affine, a0), run.row_weights, points, absl::MakeSpan(v1));
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < v0.size(); ++i) v0[i] = gl::Add(v0[i], v1[i]);
  return flp.Decide(v0, run.rho);
}

// rows, range slots, square slots, queries.
class FlpShapes : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(FlpShapes, AcceptsExactlyWhenOutputIsZero) {
  const auto [rows, range, square, queries] = GetParam();
  auto flp = RangeSquareFlp::Create(rows, range, square, queries);
  ASSERT_THAT(flp.status(), IsOk());
  auto rng = DeterministicRandom::FromSeed(rows * 31 + range * 7 + square);
  for (int trial = 0; trial < 3; ++trial) {
    ProofRun run = MakeRun(*flp, rng.get());
    const uint64_t zeroing = gl::Neg(run.output);
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
    // So does deciding under other slot weights or querying under other
    // row weights than the proof's.
    if (range > 0) {
      ProofRun other = run;
      other.rho[0] = gl::Add(other.rho[0], 1);
      EXPECT_THAT(ShareAndDecide(*flp, other, zeroing, rng.get()), IsOkAndHolds(false));
    }
    ProofRun other = run;
    other.row_weights[0] = gl::Add(other.row_weights[0], 1);
    EXPECT_THAT(ShareAndDecide(*flp, other, zeroing, rng.get()), IsOkAndHolds(false));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlpShapes,
                         ::testing::Values(std::make_tuple(1, 1, 1, 1), std::make_tuple(7, 2, 1, 2),
                                           std::make_tuple(5, 0, 3, 2),
                                           std::make_tuple(100, 4, 2, 2),
                                           std::make_tuple(300, 16, 8, 3)));

TEST(Flp, LengthsFollowTheConstruction) {
  auto flp = RangeSquareFlp::Create(1000, 8, 4, 2);
  ASSERT_THAT(flp.status(), IsOk());
  EXPECT_EQ(flp->wires(), 13u);                    // a, 8 x, 4 v
  EXPECT_EQ(flp->wire_domain_size(), 1024u);       // 2^k >= Q + M' = 1002
  EXPECT_EQ(flp->proof_domain_size(), 3072u);      // H, gH, g^2 H
  EXPECT_EQ(flp->input_length(), 13000u);          // row-major
  EXPECT_EQ(flp->proof_length(), 13u * 2 + 3072);  // seeds + p
  EXPECT_EQ(flp->verifier_length(), 1u + 2 * 14);  // y, then W + 1 per point
  EXPECT_EQ(RangeSquareFlp::WireDomainSize(1000, 2), 1024u);
  EXPECT_EQ(RangeSquareFlp::WireDomainSize(126, 2), 128u);
  EXPECT_EQ(RangeSquareFlp::WireDomainSize(127, 2), 256u);
  const double p = 18446744069414584321.0;
  EXPECT_NEAR(flp->SoundnessLog2(), 2 * std::log2(3071.0 / (p - 3072 - 2)), 1e-9);
}

// Every single proof element and every single input, perturbed, is caught.
TEST(Flp, EverySingleElementTamperingIsRejected) {
  auto flp = RangeSquareFlp::Create(20, 2, 1, 2).value();
  auto rng = DeterministicRandom::FromSeed(77);
  ProofRun run = MakeRun(flp, rng.get());
  const uint64_t zeroing = gl::Neg(run.output);
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
  auto flp = RangeSquareFlp::Create(10, 2, 1, 2).value();
  std::vector<uint64_t> in(flp.input_length()), pr(flp.proof_length()), out(flp.verifier_length());
  const std::vector<uint64_t> s(flp.num_rows(), 1);
  // 1 is in H; 7 (the coset shift g) and 49 = g^2 are in gH and g^2 H;
  // -1 is in H (N even).
  for (uint64_t inside : {uint64_t{1}, uint64_t{7}, uint64_t{49}, gl::kP - 1}) {
    EXPECT_TRUE(flp.InProofDomain(inside)) << inside;
    EXPECT_THAT(flp.Query(in, pr, 0, s, std::vector<uint64_t>{inside, 99999}, absl::MakeSpan(out)),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THAT(flp.Query(in, pr, 0, s, std::vector<uint64_t>{99999, 99999}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(flp.Query(in, pr, 0, s, std::vector<uint64_t>{gl::kP, 99999}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(flp.Query(in, pr, 0, std::vector<uint64_t>(3, 1), std::vector<uint64_t>{12345, 99999},
                        absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));  // row weights of another shape
  EXPECT_THAT(flp.Query(in, pr, 0, s, std::vector<uint64_t>{12345, 99999}, absl::MakeSpan(out)),
              IsOk());
  const std::vector<uint64_t> rho(2, 1);
  EXPECT_THAT(flp.Decide(std::vector<uint64_t>(3), rho).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(flp.Decide(out, std::vector<uint64_t>(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The wires' values on the three cosets, from their values on H (the
// seeds, the inputs, zeros) by the portable transforms and plain gl::
// arithmetic: at[l][s N + x].
std::vector<std::vector<uint64_t>> PortableWireValues(const RangeSquareFlp& flp,
                                                      const ProofRun& run) {
  const size_t n = flp.wire_domain_size(), q = flp.num_queries(), wires = flp.wires();
  const NttDomain domain = NttDomain::Create(std::countr_zero(n)).value();
  std::vector<std::vector<uint64_t>> at(wires, std::vector<uint64_t>(3 * n));
  std::vector<uint64_t> values(n), coeffs(n), coset(n);
  for (size_t l = 0; l < wires; ++l) {
    std::fill(values.begin(), values.end(), 0);
    for (size_t s = 0; s < q; ++s) values[s] = run.proof[l * q + s];
    for (size_t i = 0; i < flp.num_rows(); ++i) values[q + i] = run.inputs[i * wires + l];
    coeffs = values;
    domain.ValuesToCoefficientsPortable(absl::MakeSpan(coeffs));
    for (size_t x = 0; x < n; ++x) at[l][x] = values[x];
    for (int s = 1; s < 3; ++s) {
      for (size_t j = 0; j < n; ++j) coset[j] = gl::Mul(coeffs[j], domain.CosetScale(s)[j]);
      domain.CoefficientsToValuesPortable(absl::MakeSpan(coset));
      for (size_t x = 0; x < n; ++x) at[l][s * n + x] = gl::Reduce64(coset[x]);
    }
  }
  return at;
}

// The proof's polynomial values against their definition: p(x) = G(f(x))
// with each wire polynomial f_l evaluated at x by barycentric
// interpolation of its values on H, independently of the prover's
// transforms.
TEST(Flp, ProofPolynomialMatchesTheWireInterpolants) {
  auto rng = DeterministicRandom::FromSeed(31);
  for (auto [rows, range, square] :
       {std::tuple<size_t, size_t, size_t>{100, 6, 3}, {50, 2, 1}, {9, 1, 1}, {9, 0, 2}}) {
    const RangeSquareFlp flp = RangeSquareFlp::Create(rows, range, square, 2).value();
    const ProofRun run = MakeRun(flp, rng.get());
    const size_t n = flp.wire_domain_size(), q = 2, wires = flp.wires();
    const NttDomain domain = NttDomain::Create(std::countr_zero(n)).value();
    std::vector<std::vector<uint64_t>> values(wires, std::vector<uint64_t>(n, 0));
    for (size_t l = 0; l < wires; ++l) {
      for (size_t s = 0; s < q; ++s) values[l][s] = run.proof[l * q + s];
      for (size_t i = 0; i < rows; ++i) values[l][q + i] = run.inputs[i * wires + l];
    }
    const uint64_t* p = run.proof.data() + flp.seed_length();
    std::vector<uint64_t> lagrange(n), at(wires);
    for (int s = 0; s < 3; ++s) {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t x = gl::Mul(domain.CosetShift(s), domain.Point(i));
        std::fill(at.begin(), at.end(), 0);
        if (s == 0) {
          for (size_t l = 0; l < wires; ++l) at[l] = values[l][i];
        } else {
          domain.LagrangeCoefficients(x, 1, absl::MakeSpan(lagrange));
          for (size_t l = 0; l < wires; ++l) {
            for (size_t k = 0; k < n; ++k)
              at[l] = gl::Add(at[l], gl::Mul(lagrange[k], values[l][k]));
          }
        }
        ASSERT_EQ(p[s * n + i], Gadget(at.data(), run.rho, square))
            << "rows " << rows << ", coset " << s << ", point " << i;
      }
    }
  }
}

// At the benchmark's shape (16 blocks of 1,024 values, 69 values a row:
// 243 rows, 208 wires, N = 256): the proof equals the one computed with
// the portable transforms and plain gl:: arithmetic (the prover without
// its AVX2 or AVX-512 kernels), element for element.
TEST(Flp, ProofEqualsThePortableComputation) {
  const RangeSquareFlp flp = RangeSquareFlp::Create(243, 138, 69, 2).value();
  ASSERT_EQ(flp.wire_domain_size(), 256u);
  auto rng = DeterministicRandom::FromSeed(32);
  const ProofRun run = MakeRun(flp, rng.get());
  const auto at = PortableWireValues(flp, run);
  const size_t n = flp.wire_domain_size();
  std::vector<uint64_t> expected(3 * n), row(flp.wires());
  for (size_t x = 0; x < 3 * n; ++x) {
    for (size_t l = 0; l < flp.wires(); ++l) row[l] = at[l][x];
    expected[x] = Gadget(row.data(), run.rho, flp.square_slots());
  }
  const std::vector<uint64_t> p(run.proof.begin() + flp.seed_length(), run.proof.end());
  EXPECT_EQ(p, expected);
}

TEST(Flp, CreateValidates) {
  EXPECT_THAT(RangeSquareFlp::Create(0, 1, 1, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(10, 0, 0, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(10, 4, 0, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(10, 1, 1, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(10, 1, 1, 9).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(10, size_t{1} << 21, 1, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RangeSquareFlp::Create(size_t{1} << 24, 1, 1, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // N = 2^25
}

}  // namespace
}  // namespace tandem::crypto::proof
