// The AVX2 lane functions of goldilocks_lanes.h against the scalar ones,
// bit for bit (relaxed outputs included), on edge values and random ones;
// and the scalar ones against gl:: (congruence). Skipped where the build
// has no AVX2 (only the scalar functions exist there).
#include "crypto/proof/goldilocks_lanes.h"

#include <vector>

#include "base/random.h"
#include "gtest/gtest.h"

namespace tandem::crypto::proof::lanes {
namespace {

// Relaxed operands: canonical edge values, x + p for small x, 2^64 - 1.
std::vector<uint64_t> Operands(bool canonical_only) {
  std::vector<uint64_t> v = {0,
                             1,
                             2,
                             gl::kP - 1,
                             gl::kP - 2,
                             gl::kEpsilon,       // 2^32 - 1
                             uint64_t{1} << 32,  // 2^32
                             (uint64_t{1} << 32) + 1,
                             uint64_t{1} << 63,
                             gl::kP - (uint64_t{1} << 32),  // 2^64 - 2^33 + 1
                             0xffffffff00000000ULL};        // 2^64 - 2^32 = p - 1
  if (!canonical_only) {
    v.push_back(gl::kP);            // relaxed 0
    v.push_back(gl::kP + 1);        // relaxed 1
    v.push_back(~uint64_t{0});      // relaxed 2^32 - 2
    v.push_back(gl::kP + 0x12345);  // relaxed
  }
  auto rng = DeterministicRandom::FromSeed(7);
  for (int i = 0; i < 64; ++i) {
    const uint64_t x = rng->NextUint64().value();
    v.push_back(canonical_only ? gl::Reduce64(x) : x);
  }
  return v;
}

TEST(GoldilocksLanes, ScalarFunctionsAreCongruent) {
  for (uint64_t a : Operands(false)) {
    for (uint64_t b : Operands(true)) {
      ASSERT_EQ(gl::Reduce64(MulRelaxed(a, b)), gl::Mul(gl::Reduce64(a), b)) << a << " " << b;
      ASSERT_EQ(gl::Reduce64(AddRelaxed(a, b)), gl::Add(gl::Reduce64(a), b)) << a << " " << b;
      ASSERT_EQ(gl::Reduce64(SubRelaxed(a, b)), gl::Sub(gl::Reduce64(a), b)) << a << " " << b;
    }
  }
}

TEST(GoldilocksLanes, LanesEqualScalarBitForBit) {
#if defined(__AVX2__)
  const std::vector<uint64_t> any = Operands(false), canonical = Operands(true);
  // Every (a, b) pair, four pairs per call, b rotated through the lanes.
  for (size_t i = 0; i < any.size(); ++i) {
    for (size_t j = 0; j + 4 <= canonical.size(); ++j) {
      uint64_t a[4], b[4], rel[4], out[4];
      for (int k = 0; k < 4; ++k) {
        a[k] = any[(i + k) % any.size()];
        b[k] = canonical[j + k];
        rel[k] = any[(i + j + k) % any.size()];
      }
      const Lanes va = Load(a), vb = Load(b), vrel = Load(rel);
      Store(out, MulRelaxed(va, vrel));
      for (int k = 0; k < 4; ++k) ASSERT_EQ(out[k], MulRelaxed(a[k], rel[k]));
      Store(out, AddRelaxed(va, vb));
      for (int k = 0; k < 4; ++k) ASSERT_EQ(out[k], AddRelaxed(a[k], b[k]));
      Store(out, SubRelaxed(va, vb));
      for (int k = 0; k < 4; ++k) ASSERT_EQ(out[k], SubRelaxed(a[k], b[k]));
      Store(out, Reduce64(va));
      for (int k = 0; k < 4; ++k) ASSERT_EQ(out[k], gl::Reduce64(a[k]));
    }
  }
#else
  GTEST_SKIP() << "built without AVX2";
#endif
}

TEST(GoldilocksLanes, EightLanesEqualScalarBitForBit) {
  if (!lanes::x8::kHaveLanes) GTEST_SKIP() << "built without AVX-512F";
#if defined(__AVX512F__)
  const std::vector<uint64_t> any = Operands(false), canonical = Operands(true);
  for (size_t i = 0; i < any.size(); ++i) {
    for (size_t j = 0; j + 8 <= canonical.size(); ++j) {
      uint64_t a[8], b[8], rel[8], out[8];
      for (int k = 0; k < 8; ++k) {
        a[k] = any[(i + k) % any.size()];
        b[k] = canonical[j + k];
        rel[k] = any[(i + j + k) % any.size()];
      }
      const x8::Lanes va = x8::Load(a), vb = x8::Load(b), vrel = x8::Load(rel);
      x8::Store(out, x8::MulRelaxed(va, vrel));
      for (int k = 0; k < 8; ++k) ASSERT_EQ(out[k], MulRelaxed(a[k], rel[k]));
      x8::Store(out, x8::AddRelaxed(va, vb));
      for (int k = 0; k < 8; ++k) ASSERT_EQ(out[k], AddRelaxed(a[k], b[k]));
      x8::Store(out, x8::SubRelaxed(va, vb));
      for (int k = 0; k < 8; ++k) ASSERT_EQ(out[k], SubRelaxed(a[k], b[k]));
      x8::Store(out, x8::Reduce64(va));
      for (int k = 0; k < 8; ++k) ASSERT_EQ(out[k], gl::Reduce64(a[k]));
    }
  }
#endif
}

}  // namespace
}  // namespace tandem::crypto::proof::lanes
