// VAES-256 kernels: AES rounds on 256-bit ymm registers (2 blocks each), 8 ymm
// (16 blocks) in flight, for CPUs with VAES and AVX2 but no AVX-512 (AMD
// Zen 3, Intel client parts). Tails shorter than 16 blocks go to the AES-NI
// kernels, which every VAES CPU also has. Selected when the CPU reports AES,
// VAES and AVX2 (fixed_key_hash.cc).
//
// Only VEX-encoded AVX2/VAES instructions: the target attribute adds no
// AVX-512 feature, and crypto/CMakeLists.txt compiles this file with
// -mno-avx512f so that a -march=native build on an AVX-512 machine cannot emit
// EVEX encodings (zmm, ymm16-31, k masks) here either.
#include <immintrin.h>

#include "crypto/aes/internal/aes_kernels.h"

#define TANDEM_VAES256_TARGET __attribute__((target("aes,vaes,avx2")))
#define TANDEM_VAES256_INLINE TANDEM_VAES256_TARGET inline __attribute__((always_inline))

namespace tandem::crypto::internal {
namespace {

// VAESENC ymm has a latency of about 4 cycles and issues on two ports on
// Zen 3, so 8 independent ymm keep both busy. AVX2 has 16 ymm registers: the
// states stay in registers, each round key is loaded once per round (see
// InRegister), the sigma copies of MmoN spill to L1 and parents/seeds are
// reloaded after the rounds (Reload). On Intel cores the AES units share
// ports with the other vector ops, so the kernels also keep those few
// (SelectIfLsb, the counter form of sigma, FinishLeaf).
constexpr size_t kRegs = 8;            // ymm in flight
constexpr size_t kBlocks = 2 * kRegs;  // blocks per iteration

struct Keys {
  __m256i k[11];
};

TANDEM_VAES256_INLINE __m256i Broadcast(const Block& b) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&b)));
}

TANDEM_VAES256_INLINE Keys LoadKeys(const RoundKeys& keys) {
  Keys out;
  for (int r = 0; r < 11; ++r) out.k[r] = Broadcast(keys.rk[r]);
  return out;
}

TANDEM_VAES256_INLINE __m256i Load(const Block* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
TANDEM_VAES256_INLINE void Store(Block* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// Per 128-bit lane: lo' = hi, hi' = hi ^ lo (see Sigma in aes_kernels.h).
TANDEM_VAES256_INLINE __m256i SigmaY(__m256i x) {
  const __m256i swapped = _mm256_shuffle_epi32(x, 0x4e);
  const __m256i hi_mask = _mm256_set_epi64x(-1, 0, -1, 0);
  return _mm256_xor_si256(swapped, _mm256_and_si256(x, hi_mask));
}

// Returns v in a ymm register. With 8 states in flight, AVX2's 16 registers
// cannot also hold the 11 round keys, and GCC then feeds the keys to VAESENC
// as memory operands, which measured ~13 % slower on an Intel core than one
// load per round into a register followed by 8 register-register VAESENCs.
// The empty asm makes the compiler materialise the key once per round.
TANDEM_VAES256_INLINE __m256i InRegister(__m256i v) {
  __asm__ volatile("" : "+x"(v));
  return v;
}

// p, opaque to the optimiser: a load through it after the AES rounds is a
// real reload, not a value the compiler keeps live (and spills) across them.
TANDEM_VAES256_INLINE const Block* Reload(const Block* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

TANDEM_VAES256_INLINE void EncryptN(const Keys& k, __m256i* x) {
  const __m256i k0 = InRegister(k.k[0]);
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm256_xor_si256(x[j], k0);
  for (int r = 1; r < 10; ++r) {
    const __m256i kr = InRegister(k.k[r]);
#pragma GCC unroll 8
    for (size_t j = 0; j < kRegs; ++j) x[j] = _mm256_aesenc_epi128(x[j], kr);
  }
  const __m256i k10 = InRegister(k.k[10]);
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm256_aesenclast_epi128(x[j], k10);
}

TANDEM_VAES256_INLINE void MmoN(const Keys& k, __m256i* x) {
  __m256i s[kRegs];
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = s[j] = SigmaY(x[j]);
  EncryptN(k, x);
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm256_xor_si256(x[j], s[j]);
}

// Per 128-bit lane: c where lsb(p) == 1, else 0. VPSIGND(c, m) is c where
// m > 0 and 0 where m == 0; m is lsb(p) broadcast to the lane's four dwords.
// Three vector ops (the and/negate/shuffle/and mask takes four); on Intel
// cores the AES units share ports with these, so they count.
TANDEM_VAES256_INLINE __m256i SelectIfLsb(__m256i c, __m256i p) {
  const __m256i bit = _mm256_and_si256(p, _mm256_set_epi64x(0, 1, 0, 1));
  return _mm256_sign_epi32(c, _mm256_shuffle_epi32(bit, 0x00));
}

template <bool k64>
TANDEM_VAES256_INLINE __m256i AddLanes(__m256i a, __m256i b) {
  return k64 ? _mm256_add_epi64(a, b) : _mm256_add_epi32(a, b);
}
template <bool k64>
TANDEM_VAES256_INLINE __m256i SubLanes(__m256i a, __m256i b) {
  return k64 ? _mm256_sub_epi64(a, b) : _mm256_sub_epi32(a, b);
}

// o <- lanes(h + m), negated when kNeg, added to *o when kAdd. The negated
// forms are computed as (0 or *o) - m - h: one vector op fewer.
template <bool k64, bool kNeg, bool kAdd>
TANDEM_VAES256_INLINE void FinishLeaf(__m256i h, __m256i m, Block* o) {
  __m256i v;
  if (kNeg) {
    v = SubLanes<k64>(SubLanes<k64>(kAdd ? Load(o) : _mm256_setzero_si256(), m), h);
  } else {
    v = AddLanes<k64>(h, m);
    if (kAdd) v = AddLanes<k64>(Load(o), v);
  }
  Store(o, v);
}

// MMO of counter inputs without per-block sigma: sigma is linear and
// sigma(b ^ {c, 0}) = sigma(b) ^ {0, c}, so the counters run in the high
// 64 bits and each input is one xor with sigma(b).
struct SigmaCounters {
  __m256i sb;    // sigma(base) in both lanes
  __m256i next;  // {0, c} and {0, c + 1}: the next two counters
};

TANDEM_VAES256_INLINE SigmaCounters StartCounters(Block base, uint64_t first) {
  const int64_t f = static_cast<int64_t>(first);
  return {Broadcast(Sigma(base)), _mm256_set_epi64x(f + 1, 0, f, 0)};
}

// x[j] <- mmo(base ^ {c + 2j, 0}) || mmo(base ^ {c + 2j + 1, 0}); advances c.
TANDEM_VAES256_INLINE void MmoCountersN(const Keys& k, SigmaCounters& ctr, __m256i* x) {
  const __m256i step = _mm256_set_epi64x(2, 0, 2, 0);
  __m256i s[kRegs];
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) {
    x[j] = s[j] = _mm256_xor_si256(ctr.sb, ctr.next);
    ctr.next = _mm256_add_epi64(ctr.next, step);
  }
  EncryptN(k, x);
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm256_xor_si256(x[j], s[j]);
}

TANDEM_VAES256_TARGET void Encrypt(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) x[j] = Load(in + i + 2 * j);
    EncryptN(k, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 2 * j, x[j]);
  }
  if (i < n) AesNiKernels().encrypt(keys, in + i, out + i, n - i);
}

TANDEM_VAES256_TARGET void Mmo(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) x[j] = Load(in + i + 2 * j);
    MmoN(k, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 2 * j, x[j]);
  }
  if (i < n) AesNiKernels().mmo(keys, in + i, out + i, n - i);
}

TANDEM_VAES256_TARGET void MmoCounter(const RoundKeys& keys, Block base, uint64_t first, Block* out,
                                      size_t n) {
  const Keys k = LoadKeys(keys);
  SigmaCounters ctr = StartCounters(base, first);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i x[kRegs];
    MmoCountersN(k, ctr, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 2 * j, x[j]);
  }
  if (i < n) AesNiKernels().mmo_counter(keys, base, first + i, out + i, n - i);
}

TANDEM_VAES256_TARGET void ExpandLevel(const RoundKeys& keys, const Block* parents, size_t n,
                                       Block cw, Block* children) {
  const Keys k = LoadKeys(keys);
  const __m256i c = Broadcast(cw);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i h[kRegs];
    for (size_t j = 0; j < kRegs; ++j) h[j] = Load(parents + i + 2 * j);
    MmoN(k, h);
    const Block* p = Reload(parents + i);  // children never overlap parents
    for (size_t j = 0; j < kRegs; ++j) {
      const __m256i pj = Load(p + 2 * j);
      const __m256i left = _mm256_xor_si256(h[j], SelectIfLsb(c, pj));
      const __m256i right = _mm256_xor_si256(left, pj);
      // left = [L0 L1], right = [R0 R1] -> children L0 R0 L1 R1. Four 128-bit
      // stores (VEXTRACTI128 to memory is a store) instead of two
      // VPERM2I128 + two 256-bit stores: no shuffle-port work.
      __m128i* o = reinterpret_cast<__m128i*>(children + 2 * (i + 2 * j));
      _mm_storeu_si128(o, _mm256_castsi256_si128(left));
      _mm_storeu_si128(o + 1, _mm256_castsi256_si128(right));
      _mm_storeu_si128(o + 2, _mm256_extracti128_si256(left, 1));
      _mm_storeu_si128(o + 3, _mm256_extracti128_si256(right, 1));
    }
  }
  if (i < n) AesNiKernels().expand_level(keys, parents + i, n - i, cw, children + 2 * i);
}

template <bool k64, bool kNeg, bool kAdd>
TANDEM_VAES256_TARGET void LeafConvertT(const RoundKeys& keys, const Block* seeds, size_t n,
                                        Block vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m256i c = Broadcast(vc);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i h[kRegs];
    for (size_t j = 0; j < kRegs; ++j) h[j] = Load(seeds + i + 2 * j);
    MmoN(k, h);
    // Seed j is reloaded before output j is written, so out == seeds is fine.
    const Block* p = Reload(seeds + i);
    for (size_t j = 0; j < kRegs; ++j) {
      FinishLeaf<k64, kNeg, kAdd>(h[j], SelectIfLsb(c, Load(p + 2 * j)), out + i + 2 * j);
    }
  }
  if (i < n) {
    AesNiKernels().leaf_convert(keys, seeds + i, n - i, vc, kNeg, k64 ? 64 : 32, kAdd, out + i);
  }
}

TANDEM_VAES256_TARGET void LeafConvert(const RoundKeys& keys, const Block* seeds, size_t n,
                                       Block vc, bool negate, int lane_bits, bool add, Block* out) {
  TANDEM_DISPATCH_LANES(LeafConvertT, lane_bits, negate, add, keys, seeds, n, vc, out);
}

template <bool k64, bool kNeg, bool kAdd>
TANDEM_VAES256_TARGET void LeafConvertCounterT(const RoundKeys& keys, Block seed, uint64_t first,
                                               size_t n, const Block* vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m256i t = _mm256_set1_epi64x(static_cast<int64_t>(0 - Lsb(seed)));
  SigmaCounters ctr = StartCounters(seed, first);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m256i x[kRegs];
    MmoCountersN(k, ctr, x);
    for (size_t j = 0; j < kRegs; ++j) {
      FinishLeaf<k64, kNeg, kAdd>(x[j], _mm256_and_si256(Load(vc + i + 2 * j), t), out + i + 2 * j);
    }
  }
  if (i < n) {
    AesNiKernels().leaf_convert_counter(keys, seed, first + i, n - i, vc + i, kNeg, k64 ? 64 : 32,
                                        kAdd, out + i);
  }
}

TANDEM_VAES256_TARGET void LeafConvertCounter(const RoundKeys& keys, Block seed, uint64_t first,
                                              size_t n, const Block* vc, bool negate, int lane_bits,
                                              bool add, Block* out) {
  TANDEM_DISPATCH_LANES(LeafConvertCounterT, lane_bits, negate, add, keys, seed, first, n, vc, out);
}

}  // namespace

const AesKernels& Vaes256Kernels() {
  static constexpr AesKernels kKernels = {
      "vaes256", &Encrypt, &Mmo, &MmoCounter, &ExpandLevel, &LeafConvert, &LeafConvertCounter};
  return kKernels;
}

}  // namespace tandem::crypto::internal
