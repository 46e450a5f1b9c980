#include "crypto/proof/norm_circuit.h"

#include <cstdlib>
#include <tuple>
#include <utility>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;

// The gadget by its definition (crypto/proof/flp.h) on one row:
// sum_t rho_t (x_t^3 - x_t) + a sum_u v_u^2.
uint64_t Gadget(const NormCircuit& c, const uint64_t* row, absl::Span<const uint64_t> rho) {
  uint64_t g = 0, squares = 0;
  for (size_t t = 0; t < rho.size(); ++t) {
    const uint64_t x = row[1 + t];
    g = gl::Add(g, gl::Mul(rho[t], gl::Sub(gl::Mul(gl::Mul(x, x), x), x)));
  }
  for (size_t u = 0; u < c.flp().square_slots(); ++u) {
    const uint64_t v = row[1 + rho.size() + u];
    squares = gl::Add(squares, gl::Mul(v, v));
  }
  return gl::Add(g, gl::Mul(row[0], squares));
}

// y = sum_i s_i G(row i) + affine part, on full (unshared) values: zero iff
// every constraint holds (for these weights).
uint64_t CircuitOutput(const NormCircuit& c, const std::vector<uint64_t>& derived,
                       const std::vector<uint64_t>& witness, const std::vector<uint64_t>& weights) {
  std::vector<uint64_t> in(c.flp().input_length());
  EXPECT_THAT(c.GadgetInputs(0, derived, witness, weights, absl::MakeSpan(in)), IsOk());
  uint64_t y = c.AffineShare(0, witness, weights).value();
  const auto s = c.RowWeights(weights);
  for (size_t i = 0; i < c.flp().num_rows(); ++i) {
    y = gl::Add(y, gl::Mul(s[i], Gadget(c, &in[i * c.flp().wires()], c.SlotWeights(weights))));
  }
  return y;
}

// x < 3^count in `count` ternary digits from out[0] on.
void Ternary(uint64_t x, int count, uint64_t* out) {
  for (int i = 0; i < count; ++i, x /= 3) out[i] = x % 3;
}

struct Sample {
  std::vector<uint64_t> u0, u1, derived;
};

// u1 random, u0 = u1 + v (mod 2^w); derived limbs as the servers compute them
// from a single block (DeriveGroupShare of both parties, summed).
Sample MakeSample(const NormCircuit& c, const std::vector<int64_t>& v, SecureRandom* rng) {
  const size_t n = c.num_values(), b = c.block_size();
  const uint64_t mask = c.value_bits() == 64 ? ~uint64_t{0} : 0xffffffffULL;
  Sample s;
  s.u0.resize(n);
  s.u1.resize(n);
  s.derived.assign(2 * n, 0);
  for (size_t j = 0; j < n; ++j) {
    s.u1[j] = rng->NextUint64().value() & mask;
    s.u0[j] = (s.u1[j] + static_cast<uint64_t>(v[j])) & mask;
  }
  std::vector<uint64_t> lo(b), hi(b), y(b);
  for (int g = 0; g < c.num_blocks(); ++g) {
    for (int party = 0; party < 2; ++party) {
      for (size_t j = 0; j < b; ++j) {
        const uint64_t u = (party == 0 ? s.u0 : s.u1)[g * b + j];
        y[j] = party == 0 ? u : (0 - u) & mask;  // the DPF output (-1)^b u
      }
      EXPECT_THAT(c.DeriveGroupShare(party, y, absl::MakeSpan(lo), absl::MakeSpan(hi)), IsOk());
      for (size_t j = 0; j < b; ++j) {
        s.derived[g * b + j] = gl::Add(s.derived[g * b + j], lo[j]);
        s.derived[n + g * b + j] = gl::Add(s.derived[n + g * b + j], hi[j]);
      }
    }
  }
  return s;
}

// Weights as the joint randomness gives them: row weights non-zero.
std::vector<uint64_t> RandomWeights(const NormCircuit& c, SecureRandom* rng) {
  std::vector<uint64_t> w(c.weights_length());
  for (auto& x : w) x = gl::Reduce64(rng->NextUint64().value());
  for (size_t i = 0; i < c.flp().num_rows(); ++i) w[i] += w[i] == 0 ? 1 : 0;
  return w;
}

class NormCircuitBits : public ::testing::TestWithParam<int> {};

TEST_P(NormCircuitBits, HonestWitnessSatisfiesEveryConstraint) {
  const int bits = GetParam();
  auto c = NormCircuit::Create(3, 5, bits, {400, 900});
  ASSERT_THAT(c.status(), IsOk());
  auto rng = DeterministicRandom::FromSeed(bits);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> v(15);
    // Per block: entries in [-8, 8], so ||block||^2 <= 5 * 64 = 320 <= 400,
    // total <= 960; keep the total under 900 by zeroing the last block at random.
    for (auto& x : v) x = static_cast<int64_t>(rng->NextUint64().value() % 17) - 8;
    if (trial % 2 == 0) std::fill(v.begin() + 10, v.end(), 0);
    int64_t total = 0;
    for (int64_t x : v) total += x * x;
    Sample s = MakeSample(*c, v, rng.get());
    auto witness = c->Witness(s.u0, s.u1);
    if (total > 900) {
      EXPECT_THAT(witness.status(), StatusIs(absl::StatusCode::kInvalidArgument));
      continue;
    }
    ASSERT_THAT(witness.status(), IsOk());
    EXPECT_EQ(CircuitOutput(*c, s.derived, *witness, RandomWeights(*c, rng.get())), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(ValueBits, NormCircuitBits, ::testing::Values(32, 64));

TEST(NormCircuit, DerivedLimbsAreTheExactDifferences) {
  auto c = NormCircuit::Create(1, 4, 64, {1 << 20, 1 << 20}).value();
  auto rng = DeterministicRandom::FromSeed(3);
  Sample s = MakeSample(c, {5, -5, 0, 1000}, rng.get());
  const uint64_t lo_mask = (uint64_t{1} << c.lo_bits()) - 1;
  for (size_t j = 0; j < 4; ++j) {
    const int64_t xlo = int64_t(s.u0[j] & lo_mask) - int64_t(s.u1[j] & lo_mask);
    const int64_t xhi = int64_t(s.u0[j] >> c.lo_bits()) - int64_t(s.u1[j] >> c.lo_bits());
    EXPECT_EQ(s.derived[j], FromSigned(xlo));
    EXPECT_EQ(s.derived[4 + j], FromSigned(xhi));
  }
}

TEST(NormCircuit, OffPathBlocksCancelInTheGroupSum) {
  auto c = NormCircuit::Create(1, 2, 64, {100, 100}).value();
  auto rng = DeterministicRandom::FromSeed(5);
  const int l = c.lo_bits();
  // As signed integers (|x| < p/2), the field elements X_lo, X_hi.
  auto lift = [](uint64_t x) {
    return x > gl::kP / 2 ? -static_cast<int64_t>(gl::kP - x) : int64_t(x);
  };
  for (int trial = 0; trial < 64; ++trial) {
    // Four blocks; party outputs cancel (y1 = -y0) on blocks 0, 1, 3.
    std::vector<uint64_t> y0(8), y1(8);
    for (int i = 0; i < 8; ++i) {
      y0[i] = rng->NextUint64().value();
      y1[i] = 0 - y0[i];
    }
    y0[4] = y1[4] = 0;  // block 2 coordinate 0: aggregated 0
    y0[5] = 7;
    y1[5] = 0;  // block 2 coordinate 1: aggregated 7
    std::vector<uint64_t> lo0(2), hi0(2), lo1(2), hi1(2);
    ASSERT_THAT(c.DeriveGroupShare(0, y0, absl::MakeSpan(lo0), absl::MakeSpan(hi0)), IsOk());
    ASSERT_THAT(c.DeriveGroupShare(1, y1, absl::MakeSpan(lo1), absl::MakeSpan(hi1)), IsOk());
    for (int j = 0; j < 2; ++j) {
      const int64_t xlo = lift(gl::Add(lo0[j], lo1[j])), xhi = lift(gl::Add(hi0[j], hi1[j]));
      // Exact integers in range, and X_hi 2^L + X_lo = the aggregated value
      // mod 2^64 (the witness's borrow c absorbs a carry between the limbs).
      EXPECT_LT(std::abs(xlo), int64_t{1} << l);
      EXPECT_LT(std::abs(xhi), int64_t{1} << (64 - l));
      EXPECT_EQ(static_cast<uint64_t>(xhi) * (uint64_t{1} << l) + static_cast<uint64_t>(xlo),
                j == 0 ? 0u : 7u);
    }
  }
}

// DeriveFromBlockSums (the servers' path, in place on derived's second half)
// equals DeriveGroupShare on the group's outputs, for both parties and both
// value widths.
TEST(NormCircuit, BlockSumsDeriveTheSameShares) {
  for (int w : {32, 64}) {
    auto c = NormCircuit::Create(3, 4, w, {100, 100}).value();
    auto rng = DeterministicRandom::FromSeed(w);
    const uint64_t mask = w == 64 ? ~uint64_t{0} : 0xffffffffULL;
    const size_t b = 4, n = c.num_values(), blocks = 5;
    for (int party = 0; party < 2; ++party) {
      std::vector<uint64_t> outputs(c.num_blocks() * blocks * b), want(2 * n), got(2 * n);
      for (auto& y : outputs) y = rng->NextUint64().value() & mask;
      for (int g = 0; g < c.num_blocks(); ++g) {
        ASSERT_THAT(c.DeriveGroupShare(party,
                                       absl::MakeConstSpan(outputs).subspan(g * blocks * b,
                                                                            blocks * b),
                                       absl::MakeSpan(want).subspan(g * b, b),
                                       absl::MakeSpan(want).subspan(n + g * b, b)),
                    IsOk());
        for (size_t j = 0; j < b; ++j) {
          uint64_t& sum = got[n + g * b + j];
          for (size_t x = 0; x < blocks; ++x) sum = (sum + outputs[(g * blocks + x) * b + j]) & mask;
        }
      }
      const absl::Span<uint64_t> all(got);
      ASSERT_THAT(c.DeriveFromBlockSums(party, all.subspan(n), all), IsOk());
      EXPECT_EQ(got, want) << "w=" << w << " party=" << party;
      for (uint64_t x : got) EXPECT_LT(x, gl::kP);
    }
    std::vector<uint64_t> d(2 * n);
    EXPECT_THAT(c.DeriveFromBlockSums(0, absl::MakeConstSpan(d).subspan(0, n - 1),
                                      absl::MakeSpan(d)),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(c.DeriveFromBlockSums(2, absl::MakeConstSpan(d).subspan(0, n), absl::MakeSpan(d)),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

// Witnesses a cheating client could send for a report over the bound.
TEST(NormCircuit, OverBoundReportsViolateSomeConstraint) {
  auto c = NormCircuit::Create(2, 4, 64, {100, 150}).value();
  auto rng = DeterministicRandom::FromSeed(9);
  const int l = c.lo_bits();
  // 5 ternary digits for either bound: 3^4 = 81 <= 100 < 150 < 243 = 3^5.
  constexpr int kDigits = 5;
  // (a) A block of norm^2 104 > 100, slack digits of (100 - 104) mod 3^5.
  {
    Sample s = MakeSample(c, {10, 2, 0, 0, 1, 0, 0, 0}, rng.get());
    EXPECT_THAT(c.Witness(s.u0, s.u1).status(), StatusIs(absl::StatusCode::kInvalidArgument));
    std::vector<uint64_t> w(c.witness_length(), 0);
    const uint64_t lo_mask = (uint64_t{1} << l) - 1;
    for (size_t j = 0; j < 8; ++j) {
      const int64_t v = static_cast<int64_t>(s.u0[j] - s.u1[j]);
      const int64_t xlo = int64_t(s.u0[j] & lo_mask) - int64_t(s.u1[j] & lo_mask);
      w[j] = FromSigned((v - xlo) >> l);
    }
    ASSERT_EQ(c.slack_digits(), 3u * kDigits);
    Ternary(243 - 4, kDigits, &w[8]);
    Ternary(100 - 1, kDigits, &w[8 + kDigits]);
    Ternary(150 - 105, kDigits, &w[8 + 2 * kDigits]);
    EXPECT_NE(CircuitOutput(c, s.derived, w, RandomWeights(c, rng.get())), 0u);
  }
  // (b) One huge coordinate (2^40): no borrow witness in {-1, 0, 1} exists;
  // claiming c = 0 and zero norm fails constraint (2) or the norm sum.
  {
    Sample s = MakeSample(c, {int64_t{1} << 40, 0, 0, 0, 0, 0, 0, 0}, rng.get());
    std::vector<uint64_t> w(c.witness_length(), 0);
    Ternary(100, kDigits, &w[8]);
    EXPECT_NE(CircuitOutput(c, s.derived, w, RandomWeights(c, rng.get())), 0u);
  }
}

// The gadget rows on full values, against their definitions computed with
// generic field operations (covers the shift-based 2^L c) and the layout of
// norm_circuit.h: per row of block g the public weight a_i = -(sigma_g +
// tau) / s_i, then (c, h / K) per value in the range slots and v in the
// square slots, zeros past the block's last value; then the slack digits
// minus one in the range slots of the last rows. Row widths that divide the
// block and ones that leave a short last row.
TEST(NormCircuit, GadgetInputsFollowTheirDefinitions) {
  for (auto [blocks, block_size, w, per_row] : {std::tuple<int, int, int, size_t>{2, 3, 32, 0},
                                                {2, 3, 64, 1},
                                                {3, 21, 32, 8},
                                                {3, 21, 64, 7},
                                                {1, 40, 64, 0}}) {
    auto c = NormCircuit::Create(blocks, block_size, w, {1000, 1500}, per_row).value();
    auto rng = DeterministicRandom::FromSeed(12 + w + block_size);
    std::vector<uint64_t> derived(c.derived_length()), witness(c.witness_length());
    for (auto& x : derived) x = gl::Reduce64(rng->NextUint64().value());
    for (auto& x : witness) x = gl::Reduce64(rng->NextUint64().value());
    witness[0] = gl::kP - 1;
    const std::vector<uint64_t> weights = RandomWeights(c, rng.get());
    std::vector<uint64_t> in(c.flp().input_length());
    ASSERT_THAT(c.GadgetInputs(0, derived, witness, weights, absl::MakeSpan(in)), IsOk());
    const size_t n = c.num_values(), width = c.flp().wires(), per = c.values_per_row();
    const size_t b = static_cast<size_t>(block_size), rows_per_block = (b + per - 1) / per;
    ASSERT_EQ(width, 1 + 3 * per);
    ASSERT_EQ(c.flp().num_rows(),
              rows_per_block * blocks + (c.slack_digits() + 2 * per - 1) / (2 * per));
    const uint64_t two_l = gl::Pow(2, static_cast<uint64_t>(c.lo_bits()));
    const uint64_t k = gl::Pow(2, static_cast<uint64_t>(w - c.lo_bits()));
    const auto s = c.RowWeights(weights);
    const uint64_t* sigma = weights.data() + c.flp().num_rows() + c.flp().range_slots();
    const uint64_t tau = sigma[c.num_blocks()];
    std::vector<uint64_t> expected(in.size(), 0);
    for (size_t j = 0; j < n; ++j) {
      const size_t g = j / b, row = g * rows_per_block + (j % b) / per, u = (j % b) % per;
      uint64_t* o = &expected[row * width];
      o[0] = gl::Mul(gl::Neg(gl::Add(sigma[g], tau)), gl::Inverse(s[row]));
      const uint64_t cj = witness[j];
      const uint64_t h = gl::Sub(derived[n + j], cj);
      o[1 + 2 * u] = cj;
      o[2 + 2 * u] = gl::Mul(h, gl::Inverse(k));
      o[1 + 2 * per + u] = gl::Add(derived[j], gl::Mul(cj, two_l));
    }
    for (size_t e = 0; e < c.slack_digits(); ++e) {
      const size_t row = rows_per_block * blocks + e / (2 * per);
      expected[row * width + 1 + e % (2 * per)] = gl::Sub(witness[n + e], 1);
    }
    EXPECT_EQ(in, expected);
    // Party 1 holds no constants: its inputs plus party 0's are the inputs
    // of the summed shares (linearity), here with party 1's share zero.
    std::vector<uint64_t> zero_derived(derived.size()), zero_witness(witness.size());
    std::vector<uint64_t> in1(in.size());
    ASSERT_THAT(c.GadgetInputs(1, zero_derived, zero_witness, weights, absl::MakeSpan(in1)),
                IsOk());
    for (uint64_t x : in1) EXPECT_EQ(x, 0u);
    EXPECT_EQ(c.AffineShare(1, zero_witness, weights).value(), 0u);
  }
}

// The layout the proofs use: the benchmark's circuit (16 blocks of 1,024
// values, 64-bit values, ~2^33 bounds) and the automatic row width, which
// minimises the proof length (3C + 1) Q + 3N over every C.
TEST(NormCircuit, AutomaticRowWidthMinimisesTheProofLength) {
  const NormBound bound{uint64_t{1} << 33, uint64_t{1} << 33};
  const NormCircuit best = NormCircuit::Create(16, 1024, 64, bound).value();
  EXPECT_EQ(best.values_per_row(), 69u);
  EXPECT_EQ(best.flp().num_rows(), 243u);  // 16 * ceil(1024 / 69) + ceil(16 * 22 + 22) / 138)
  EXPECT_EQ(best.flp().wire_domain_size(), 256u);
  EXPECT_EQ(best.flp().proof_length(), 208u * 2 + 768);
  for (size_t per_row = 1; per_row <= 1024; per_row += 1 + per_row / 8) {
    const NormCircuit other = NormCircuit::Create(16, 1024, 64, bound, per_row).value();
    EXPECT_LE(best.flp().proof_length(), other.flp().proof_length()) << per_row;
  }
}

// Each constraint alone, broken in an otherwise honest report, makes y
// non-zero (probability 1/p of missing it over the weights).
TEST(NormCircuit, EachBrokenConstraintIsCaught) {
  auto c = NormCircuit::Create(2, 4, 64, {100, 150}).value();
  auto rng = DeterministicRandom::FromSeed(21);
  Sample s = MakeSample(c, {3, -4, 0, 5, -1, 2, 7, 0}, rng.get());
  const std::vector<uint64_t> honest = c.Witness(s.u0, s.u1).value();
  const std::vector<uint64_t> weights = RandomWeights(c, rng.get());
  ASSERT_EQ(CircuitOutput(c, s.derived, honest, weights), 0u);
  const size_t n = c.num_values();
  // (1) a borrow outside {-1, 0, 1}; (3)/(4) a slack digit of 3 (the slack
  // sum then differs too) and a slack digit changed within {0, 1, 2}.
  for (auto [pos, value] : {std::pair<size_t, uint64_t>{0, 2},
                            {3, FromSigned(-2)},
                            {n, 3},
                            {n + 1, (honest[n + 1] + 1) % 3}}) {
    std::vector<uint64_t> w = honest;
    w[pos] = value;
    EXPECT_NE(CircuitOutput(c, s.derived, w, weights), 0u) << pos;
  }
  // (2) a high limb off by one: h is no longer 0 or +-K.
  std::vector<uint64_t> derived = s.derived;
  derived[n + 2] = gl::Add(derived[n + 2], 1);
  EXPECT_NE(CircuitOutput(c, derived, honest, weights), 0u);
}

TEST(NormCircuit, CreateValidates) {
  EXPECT_THAT(NormCircuit::Create(0, 4, 64, {1, 1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NormCircuit::Create(1, 4, 16, {1, 1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NormCircuit::Create(1, 4, 64, {0, 1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NormCircuit::Create(1, 4, 64, {1, 1}, 5).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));  // wider rows than blocks
  // 2^16 values with a bound of 2^50: sums of squares would wrap mod p.
  EXPECT_THAT(NormCircuit::Create(64, 1024, 64, {uint64_t{1} << 50, uint64_t{1} << 50}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto::proof
