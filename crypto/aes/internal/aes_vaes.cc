// VAES kernels: AES rounds on 512-bit zmm registers (4 blocks each), 4 zmm
// (16 blocks) in flight. Tails shorter than 16 blocks go to the AES-NI
// kernels, which every VAES CPU also has. Selected only when the CPU reports
// VAES and AVX-512F/BW (aes_path.cc).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_epi32).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "crypto/aes/internal/aes_kernels.h"

#define TANDEM_VAES_TARGET __attribute__((target("aes,vaes,avx512f,avx512bw,avx512vl")))
#define TANDEM_VAES_INLINE TANDEM_VAES_TARGET inline __attribute__((always_inline))

namespace tandem::crypto::internal {
namespace {

constexpr size_t kRegs = 4;                // zmm in flight
constexpr size_t kBlocks = 4 * kRegs;      // blocks per iteration

struct Keys {
  __m512i k[11];
};

TANDEM_VAES_INLINE Keys LoadKeys(const RoundKeys& keys) {
  Keys out;
  for (int r = 0; r < 11; ++r) {
    out.k[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&keys.rk[r])));
  }
  return out;
}

TANDEM_VAES_INLINE __m512i Load(const Block* p) { return _mm512_loadu_si512(p); }
TANDEM_VAES_INLINE void Store(Block* p, __m512i v) { _mm512_storeu_si512(p, v); }

TANDEM_VAES_INLINE __m512i SigmaZ(__m512i x) {
  const __m512i swapped = _mm512_shuffle_epi32(x, static_cast<_MM_PERM_ENUM>(0x4e));
  const __m512i hi_mask = _mm512_set_epi64(-1, 0, -1, 0, -1, 0, -1, 0);
  return _mm512_xor_si512(swapped, _mm512_and_si512(x, hi_mask));
}

TANDEM_VAES_INLINE void EncryptN(const Keys& k, __m512i* x) {
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm512_xor_si512(x[j], k.k[0]);
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 8
    for (size_t j = 0; j < kRegs; ++j) x[j] = _mm512_aesenc_epi128(x[j], k.k[r]);
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm512_aesenclast_epi128(x[j], k.k[10]);
}

TANDEM_VAES_INLINE void MmoN(const Keys& k, __m512i* x) {
  __m512i s[kRegs];
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = s[j] = SigmaZ(x[j]);
  EncryptN(k, x);
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegs; ++j) x[j] = _mm512_xor_si512(x[j], s[j]);
}

TANDEM_VAES_TARGET void Encrypt(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) x[j] = Load(in + i + 4 * j);
    EncryptN(k, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 4 * j, x[j]);
  }
  if (i < n) AesNiKernels().encrypt(keys, in + i, out + i, n - i);
}

TANDEM_VAES_TARGET void Mmo(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) x[j] = Load(in + i + 4 * j);
    MmoN(k, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 4 * j, x[j]);
  }
  if (i < n) AesNiKernels().mmo(keys, in + i, out + i, n - i);
}

TANDEM_VAES_TARGET void MmoCounter(const RoundKeys& keys, Block base, uint64_t first,
                                   Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  const __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&base)));
  const int64_t f = static_cast<int64_t>(first);
  __m512i ctr = _mm512_set_epi64(0, f + 3, 0, f + 2, 0, f + 1, 0, f);
  const __m512i step = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) {
      x[j] = _mm512_xor_si512(b, ctr);
      ctr = _mm512_add_epi64(ctr, step);
    }
    MmoN(k, x);
    for (size_t j = 0; j < kRegs; ++j) Store(out + i + 4 * j, x[j]);
  }
  if (i < n) AesNiKernels().mmo_counter(keys, base, first + i, out + i, n - i);
}

TANDEM_VAES_TARGET void ExpandLevel(const RoundKeys& keys, const Block* parents, size_t n,
                                    Block cw, Block* children) {
  const Keys k = LoadKeys(keys);
  const __m512i c = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&cw)));
  const __m512i one_lo = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
  // Interleave left/right children: [L0 R0 L1 R1] and [L2 R2 L3 R3].
  const __m512i idx_a = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i idx_b = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i p[kRegs];
    __m512i h[kRegs];
    for (size_t j = 0; j < kRegs; ++j) h[j] = p[j] = Load(parents + i + 4 * j);
    MmoN(k, h);
    for (size_t j = 0; j < kRegs; ++j) {
      const __m512i t = _mm512_sub_epi64(_mm512_setzero_si512(), _mm512_and_si512(p[j], one_lo));
      const __m512i mask = _mm512_shuffle_epi32(t, static_cast<_MM_PERM_ENUM>(0x44));
      const __m512i left = _mm512_xor_si512(h[j], _mm512_and_si512(c, mask));
      const __m512i right = _mm512_xor_si512(left, p[j]);
      Store(children + 2 * (i + 4 * j), _mm512_permutex2var_epi64(left, idx_a, right));
      Store(children + 2 * (i + 4 * j) + 4, _mm512_permutex2var_epi64(left, idx_b, right));
    }
  }
  if (i < n) AesNiKernels().expand_level(keys, parents + i, n - i, cw, children + 2 * i);
}

template <bool k64, bool kNeg, bool kAdd>
TANDEM_VAES_TARGET void LeafConvertT(const RoundKeys& keys, const Block* seeds, size_t n,
                                     Block vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m512i c = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&vc)));
  const __m512i one_lo = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
  const __m512i zero = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i p[kRegs];
    __m512i h[kRegs];
    for (size_t j = 0; j < kRegs; ++j) h[j] = p[j] = Load(seeds + i + 4 * j);
    MmoN(k, h);
    for (size_t j = 0; j < kRegs; ++j) {
      const __m512i t = _mm512_sub_epi64(zero, _mm512_and_si512(p[j], one_lo));
      const __m512i mask = _mm512_shuffle_epi32(t, static_cast<_MM_PERM_ENUM>(0x44));
      __m512i v = _mm512_and_si512(c, mask);
      v = k64 ? _mm512_add_epi64(h[j], v) : _mm512_add_epi32(h[j], v);
      if (kNeg) v = k64 ? _mm512_sub_epi64(zero, v) : _mm512_sub_epi32(zero, v);
      Block* o = out + i + 4 * j;
      if (kAdd) v = k64 ? _mm512_add_epi64(Load(o), v) : _mm512_add_epi32(Load(o), v);
      Store(o, v);
    }
  }
  if (i < n) {
    AesNiKernels().leaf_convert(keys, seeds + i, n - i, vc, kNeg, k64 ? 64 : 32, kAdd, out + i);
  }
}

TANDEM_VAES_TARGET void LeafConvert(const RoundKeys& keys, const Block* seeds, size_t n,
                                    Block vc, bool negate, int lane_bits, bool add, Block* out) {
  const bool w64 = lane_bits == 64;
  if (w64 && !negate && !add) return LeafConvertT<true, false, false>(keys, seeds, n, vc, out);
  if (w64 && !negate && add) return LeafConvertT<true, false, true>(keys, seeds, n, vc, out);
  if (w64 && negate && !add) return LeafConvertT<true, true, false>(keys, seeds, n, vc, out);
  if (w64 && negate && add) return LeafConvertT<true, true, true>(keys, seeds, n, vc, out);
  if (!negate && !add) return LeafConvertT<false, false, false>(keys, seeds, n, vc, out);
  if (!negate && add) return LeafConvertT<false, false, true>(keys, seeds, n, vc, out);
  if (negate && !add) return LeafConvertT<false, true, false>(keys, seeds, n, vc, out);
  return LeafConvertT<false, true, true>(keys, seeds, n, vc, out);
}

template <bool k64, bool kNeg, bool kAdd>
TANDEM_VAES_TARGET void LeafConvertCounterT(const RoundKeys& keys, Block seed, uint64_t first, size_t n,
                                            const Block* vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&seed)));
  const __m512i t = _mm512_set1_epi64(static_cast<int64_t>(0 - Lsb(seed)));
  const __m512i zero = _mm512_setzero_si512();
  const int64_t f = static_cast<int64_t>(first);
  __m512i ctr = _mm512_set_epi64(0, f + 3, 0, f + 2, 0, f + 1, 0, f);
  const __m512i step = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
  size_t i = 0;
  for (; i + kBlocks <= n; i += kBlocks) {
    __m512i x[kRegs];
    for (size_t j = 0; j < kRegs; ++j) {
      x[j] = _mm512_xor_si512(b, ctr);
      ctr = _mm512_add_epi64(ctr, step);
    }
    MmoN(k, x);
    for (size_t j = 0; j < kRegs; ++j) {
      Block* o = out + i + 4 * j;
      __m512i v = _mm512_and_si512(Load(vc + i + 4 * j), t);
      v = k64 ? _mm512_add_epi64(x[j], v) : _mm512_add_epi32(x[j], v);
      if (kNeg) v = k64 ? _mm512_sub_epi64(zero, v) : _mm512_sub_epi32(zero, v);
      if (kAdd) v = k64 ? _mm512_add_epi64(Load(o), v) : _mm512_add_epi32(Load(o), v);
      Store(o, v);
    }
  }
  if (i < n) {
    AesNiKernels().leaf_convert_counter(keys, seed, first + i, n - i, vc + i, kNeg,
                                        k64 ? 64 : 32, kAdd, out + i);
  }
}

TANDEM_VAES_TARGET void LeafConvertCounter(const RoundKeys& keys, Block seed, uint64_t first, size_t n,
                                           const Block* vc, bool negate, int lane_bits,
                                           bool add, Block* out) {
  TANDEM_DISPATCH_LANES(LeafConvertCounterT, lane_bits, negate, add, keys, seed, first, n, vc, out);
}

}  // namespace

const AesKernels& VaesKernels() {
  static constexpr AesKernels kKernels = {"vaes",       &Encrypt,     &Mmo,
                                          &MmoCounter, &ExpandLevel, &LeafConvert,
                                          &LeafConvertCounter};
  return kKernels;
}

}  // namespace tandem::crypto::internal
