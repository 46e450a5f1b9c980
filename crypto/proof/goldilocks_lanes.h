// Lazy ("relaxed") arithmetic in F_p, p = 2^64 - 2^32 + 1
// (crypto/field/goldilocks.h), for the transforms of crypto/proof/ntt.h and
// the prover of crypto/proof/flp.h: one element at a time (portable), and
// four at a time in the 64-bit lanes of an AVX2 register when the build
// targets AVX2 (__AVX2__; -march=native on a machine that has it), eight in
// an AVX-512 register when it targets AVX-512F (namespace x8).
//
// Relaxed values are any uint64_t congruent to the element (x or x + p
// when x < 2^64 - p). The lane functions compute, lane by lane, exactly the
// same 64-bit results as the scalar ones (the same formulas; tested bit for
// bit in goldilocks_lanes_test.cc), so a transform built from either gives
// identical outputs, not only congruent ones.
//
// Formulas: 2^64 = 2^32 - 1 and 2^96 = -1 (mod p), as in goldilocks.h.
// The 64 x 64 -> 128-bit product in lanes is the schoolbook product of
// 32-bit halves (Knuth, TAOCP vol. 2, Section 4.3.1, Algorithm M with base
// 2^32) on the 32 x 32 -> 64-bit multiplier (vpmuludq): a b = ll + (lh +
// hl) 2^32 + hh 2^64, the middle sum split so that no partial sum
// overflows 64 bits. AVX2 has only signed 64-bit comparisons; x < y
// unsigned is (x ^ 2^63) < (y ^ 2^63) signed. Branch-free throughout.
#ifndef TANDEM_CRYPTO_PROOF_GOLDILOCKS_LANES_H_
#define TANDEM_CRYPTO_PROOF_GOLDILOCKS_LANES_H_

#include <cstdint>

#include "crypto/field/goldilocks.h"

#if defined(__AVX2__) || defined(__AVX512F__)
// GCC 12's AVX-512 shift intrinsics start from _mm512_undefined_epi32(),
// which GCC 12 reports under -Wmaybe-uninitialized at -O1 (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace tandem::crypto::proof::lanes {

namespace gl = ::tandem::crypto::field::goldilocks;

// a * b mod p, relaxed, for any 64-bit a, b: gl::Reduce128 without its
// last conditional subtraction.
inline uint64_t MulRelaxed(uint64_t a, uint64_t b) {
  const unsigned __int128 x = static_cast<unsigned __int128>(a) * b;
  const uint64_t hi = static_cast<uint64_t>(x >> 64), lo = static_cast<uint64_t>(x);
  const uint64_t hh = hi >> 32, hl = hi & gl::kEpsilon;
  uint64_t t0 = lo - hh;
  t0 -= gl::kEpsilon & gl::Mask(lo < hh);
  const uint64_t t1 = hl * gl::kEpsilon;
  const uint64_t t2 = t0 + t1;
  return t2 + (gl::kEpsilon & gl::Mask(t2 < t1));
}
// a relaxed, b canonical: a + b, relaxed. A carry means a + b - 2^64 <
// p - 1, so adding 2^64 mod p = 2^32 - 1 back cannot carry again.
inline uint64_t AddRelaxed(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;
  return s + (gl::kEpsilon & gl::Mask(s < b));
}
// a relaxed, b canonical: a - b, relaxed. A borrow means a < b < p, and
// a - b + 2^64 - (2^32 - 1) = a - b + p lies in [1, p).
inline uint64_t SubRelaxed(uint64_t a, uint64_t b) {
  const uint64_t d = a - b;
  return d - (gl::kEpsilon & gl::Mask(a < b));
}

#if defined(__AVX2__)
inline constexpr bool kHaveLanes = true;
using Lanes = __m256i;  // four uint64_t

inline Lanes Load(const uint64_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline void Store(uint64_t* p, Lanes v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline Lanes Splat(uint64_t x) { return _mm256_set1_epi64x(static_cast<int64_t>(x)); }

// All ones in the lanes where x < y (unsigned).
inline Lanes LessThan(Lanes x, Lanes y) {
  const Lanes sign = Splat(uint64_t{1} << 63);
  return _mm256_cmpgt_epi64(_mm256_xor_si256(y, sign), _mm256_xor_si256(x, sign));
}
// gl::Reduce64 per lane: x - p where x >= p, i.e. x > p - 1.
inline Lanes Reduce64(Lanes x) {
  const Lanes sign = Splat(uint64_t{1} << 63);
  const Lanes ge =
      _mm256_cmpgt_epi64(_mm256_xor_si256(x, sign), Splat((gl::kP - 1) ^ (uint64_t{1} << 63)));
  return _mm256_sub_epi64(x, _mm256_and_si256(ge, Splat(gl::kP)));
}
inline Lanes AddRelaxed(Lanes a, Lanes b) {
  const Lanes s = _mm256_add_epi64(a, b);
  return _mm256_add_epi64(s, _mm256_and_si256(Splat(gl::kEpsilon), LessThan(s, b)));
}
inline Lanes SubRelaxed(Lanes a, Lanes b) {
  const Lanes d = _mm256_sub_epi64(a, b);
  return _mm256_sub_epi64(d, _mm256_and_si256(Splat(gl::kEpsilon), LessThan(a, b)));
}
inline Lanes MulRelaxed(Lanes a, Lanes b) {
  const Lanes eps = Splat(gl::kEpsilon);
  // The 128-bit products hi 2^64 + lo (vpmuludq reads the low 32 bits).
  const Lanes a_hi = _mm256_srli_epi64(a, 32), b_hi = _mm256_srli_epi64(b, 32);
  const Lanes ll = _mm256_mul_epu32(a, b), lh = _mm256_mul_epu32(a, b_hi);
  const Lanes hl = _mm256_mul_epu32(a_hi, b), hh = _mm256_mul_epu32(a_hi, b_hi);
  // t = hl + ll / 2^32 <= (2^32 - 1)^2 + 2^32 - 1 < 2^64; u = lh + t mod
  // 2^32 < 2^64; a b = ll mod 2^32 + (u mod 2^32) 2^32 + (hh + t / 2^32 +
  // u / 2^32) 2^64.
  const Lanes t = _mm256_add_epi64(hl, _mm256_srli_epi64(ll, 32));
  const Lanes u = _mm256_add_epi64(lh, _mm256_and_si256(t, eps));
  const Lanes lo = _mm256_blend_epi32(ll, _mm256_slli_epi64(u, 32), 0xaa);
  const Lanes hi =
      _mm256_add_epi64(_mm256_add_epi64(hh, _mm256_srli_epi64(t, 32)), _mm256_srli_epi64(u, 32));
  // The reduction of MulRelaxed above, lane by lane.
  const Lanes h_hi = _mm256_srli_epi64(hi, 32), h_lo = _mm256_and_si256(hi, eps);
  Lanes t0 = _mm256_sub_epi64(lo, h_hi);
  t0 = _mm256_sub_epi64(t0, _mm256_and_si256(eps, LessThan(lo, h_hi)));
  const Lanes t1 = _mm256_sub_epi64(_mm256_slli_epi64(h_lo, 32), h_lo);  // h_lo (2^32 - 1)
  const Lanes t2 = _mm256_add_epi64(t0, t1);
  return _mm256_add_epi64(t2, _mm256_and_si256(eps, LessThan(t2, t1)));
}
#else
inline constexpr bool kHaveLanes = false;
#endif

// Eight at a time in the lanes of an AVX-512 register when the build
// targets AVX-512F (__AVX512F__): the same formulas as the AVX2 lanes, with
// AVX-512's unsigned comparisons into mask registers and masked adds and
// subtracts in place of the sign-flip comparisons and and-masks.
namespace x8 {
#if defined(__AVX512F__)
inline constexpr bool kHaveLanes = true;
using Lanes = __m512i;  // eight uint64_t

inline Lanes Load(const uint64_t* p) { return _mm512_loadu_si512(p); }
inline void Store(uint64_t* p, Lanes v) { _mm512_storeu_si512(p, v); }
inline Lanes Splat(uint64_t x) { return _mm512_set1_epi64(static_cast<long long>(x)); }

inline Lanes Reduce64(Lanes x) {
  const Lanes p = Splat(gl::kP);
  return _mm512_mask_sub_epi64(x, _mm512_cmpge_epu64_mask(x, p), x, p);
}
inline Lanes AddRelaxed(Lanes a, Lanes b) {
  const Lanes s = _mm512_add_epi64(a, b);
  return _mm512_mask_add_epi64(s, _mm512_cmplt_epu64_mask(s, b), s, Splat(gl::kEpsilon));
}
inline Lanes SubRelaxed(Lanes a, Lanes b) {
  const Lanes d = _mm512_sub_epi64(a, b);
  return _mm512_mask_sub_epi64(d, _mm512_cmplt_epu64_mask(a, b), d, Splat(gl::kEpsilon));
}
inline Lanes MulRelaxed(Lanes a, Lanes b) {
  const Lanes eps = Splat(gl::kEpsilon);
  const Lanes a_hi = _mm512_srli_epi64(a, 32), b_hi = _mm512_srli_epi64(b, 32);
  const Lanes ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, b_hi);
  const Lanes hl = _mm512_mul_epu32(a_hi, b), hh = _mm512_mul_epu32(a_hi, b_hi);
  const Lanes t = _mm512_add_epi64(hl, _mm512_srli_epi64(ll, 32));
  const Lanes u = _mm512_add_epi64(lh, _mm512_and_si512(t, eps));
  const Lanes lo = _mm512_mask_blend_epi32(0xaaaa, ll, _mm512_slli_epi64(u, 32));
  const Lanes hi =
      _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64(t, 32)), _mm512_srli_epi64(u, 32));
  const Lanes h_hi = _mm512_srli_epi64(hi, 32), h_lo = _mm512_and_si512(hi, eps);
  Lanes t0 = _mm512_sub_epi64(lo, h_hi);
  t0 = _mm512_mask_sub_epi64(t0, _mm512_cmplt_epu64_mask(lo, h_hi), t0, eps);
  const Lanes t1 = _mm512_sub_epi64(_mm512_slli_epi64(h_lo, 32), h_lo);  // h_lo (2^32 - 1)
  const Lanes t2 = _mm512_add_epi64(t0, t1);
  return _mm512_mask_add_epi64(t2, _mm512_cmplt_epu64_mask(t2, t1), t2, eps);
}
#else
inline constexpr bool kHaveLanes = false;
#endif
}  // namespace x8

// The widest lanes this build has, as a type for templates over the lane
// width (kWidth elements a step): Mul, Add and Sub return canonical values,
// Add and Sub taking a relaxed first operand and a canonical second (the
// functions above, then Reduce64); AddRelaxed keeps the sum relaxed (for
// accumulators) and Canonical reduces it. Not defined in a build without
// AVX2 (callers test __AVX512F__ || __AVX2__).
#if defined(__AVX512F__)
struct WideOps {
  static constexpr int kWidth = 8;
  using V = x8::Lanes;
  static V Load(const uint64_t* p) { return x8::Load(p); }
  static void Store(uint64_t* p, V v) { x8::Store(p, v); }
  static V Splat(uint64_t x) { return x8::Splat(x); }
  static V Mul(V a, V b) { return x8::Reduce64(x8::MulRelaxed(a, b)); }
  static V Add(V a, V b) { return x8::Reduce64(x8::AddRelaxed(a, b)); }
  static V Sub(V a, V b) { return x8::Reduce64(x8::SubRelaxed(a, b)); }
  static V AddRelaxed(V a, V b) { return x8::AddRelaxed(a, b); }
  static V Canonical(V a) { return x8::Reduce64(a); }
};
#elif defined(__AVX2__)
struct WideOps {
  static constexpr int kWidth = 4;
  using V = Lanes;
  static V Load(const uint64_t* p) { return lanes::Load(p); }
  static void Store(uint64_t* p, V v) { lanes::Store(p, v); }
  static V Splat(uint64_t x) { return lanes::Splat(x); }
  static V Mul(V a, V b) { return Reduce64(MulRelaxed(a, b)); }
  static V Add(V a, V b) { return Reduce64(AddRelaxed(a, b)); }
  static V Sub(V a, V b) { return Reduce64(SubRelaxed(a, b)); }
  static V AddRelaxed(V a, V b) { return lanes::AddRelaxed(a, b); }
  static V Canonical(V a) { return Reduce64(a); }
};
#endif

}  // namespace tandem::crypto::proof::lanes

#endif  // TANDEM_CRYPTO_PROOF_GOLDILOCKS_LANES_H_
