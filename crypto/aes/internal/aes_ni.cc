// AES-NI kernels (xmm), 8 independent blocks in flight to hide the aesenc
// latency. Compiled with a target attribute, so a portable -march build still
// contains them; FixedKeyHash only selects them when the CPU has AES-NI.
#include <immintrin.h>

#include "crypto/aes/internal/aes_kernels.h"

#define TANDEM_AESNI_TARGET __attribute__((target("aes,sse4.1")))
#define TANDEM_AESNI_INLINE TANDEM_AESNI_TARGET inline __attribute__((always_inline))

namespace tandem::crypto::internal {
namespace {

constexpr size_t kWays = 8;

struct Keys {
  __m128i k[11];
};

TANDEM_AESNI_INLINE Keys LoadKeys(const RoundKeys& keys) {
  Keys out;
  for (int r = 0; r < 11; ++r) {
    out.k[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&keys.rk[r]));
  }
  return out;
}

TANDEM_AESNI_INLINE __m128i Load(const Block* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
TANDEM_AESNI_INLINE void Store(Block* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

// lo' = hi, hi' = hi ^ lo (see Sigma in aes_kernels.h).
TANDEM_AESNI_INLINE __m128i SigmaX(__m128i x) {
  const __m128i swapped = _mm_shuffle_epi32(x, 0x4e);
  return _mm_xor_si128(swapped, _mm_and_si128(x, _mm_set_epi64x(-1, 0)));
}

// Encrypts N blocks in place.
template <size_t N>
TANDEM_AESNI_INLINE void EncryptN(const Keys& k, __m128i* x) {
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) x[j] = _mm_xor_si128(x[j], k.k[0]);
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 8
    for (size_t j = 0; j < N; ++j) x[j] = _mm_aesenc_si128(x[j], k.k[r]);
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) x[j] = _mm_aesenclast_si128(x[j], k.k[10]);
}

// x[j] <- MMO(x[j]).
template <size_t N>
TANDEM_AESNI_INLINE void MmoN(const Keys& k, __m128i* x) {
  __m128i s[N];
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) x[j] = s[j] = SigmaX(x[j]);
  EncryptN<N>(k, x);
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) x[j] = _mm_xor_si128(x[j], s[j]);
}

TANDEM_AESNI_TARGET void Encrypt(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    __m128i x[kWays];
    for (size_t j = 0; j < kWays; ++j) x[j] = Load(in + i + j);
    EncryptN<kWays>(k, x);
    for (size_t j = 0; j < kWays; ++j) Store(out + i + j, x[j]);
  }
  for (; i < n; ++i) {
    __m128i x[1] = {Load(in + i)};
    EncryptN<1>(k, x);
    Store(out + i, x[0]);
  }
}

TANDEM_AESNI_TARGET void Mmo(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    __m128i x[kWays];
    for (size_t j = 0; j < kWays; ++j) x[j] = Load(in + i + j);
    MmoN<kWays>(k, x);
    for (size_t j = 0; j < kWays; ++j) Store(out + i + j, x[j]);
  }
  for (; i < n; ++i) {
    __m128i x[1] = {Load(in + i)};
    MmoN<1>(k, x);
    Store(out + i, x[0]);
  }
}

TANDEM_AESNI_TARGET void MmoCounter(const RoundKeys& keys, Block base, uint64_t first,
                                    Block* out, size_t n) {
  const Keys k = LoadKeys(keys);
  const __m128i b = Load(&base);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    __m128i x[kWays];
    for (size_t j = 0; j < kWays; ++j) {
      x[j] = _mm_xor_si128(b, _mm_set_epi64x(0, static_cast<int64_t>(first + i + j)));
    }
    MmoN<kWays>(k, x);
    for (size_t j = 0; j < kWays; ++j) Store(out + i + j, x[j]);
  }
  for (; i < n; ++i) {
    __m128i x[1] = {_mm_xor_si128(b, _mm_set_epi64x(0, static_cast<int64_t>(first + i)))};
    MmoN<1>(k, x);
    Store(out + i, x[0]);
  }
}

// Mask of all ones where lsb(p) == 1, computed without leaving the vector unit.
TANDEM_AESNI_INLINE __m128i ControlMask(__m128i p) {
  const __m128i t = _mm_and_si128(p, _mm_set_epi64x(0, 1));
  return _mm_shuffle_epi32(_mm_sub_epi64(_mm_setzero_si128(), t), 0x44);
}

template <size_t N>
TANDEM_AESNI_INLINE void ExpandN(const Keys& k, __m128i cw, const Block* parents,
                                 Block* children) {
  __m128i p[N];
  __m128i h[N];
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) h[j] = p[j] = Load(parents + j);
  MmoN<N>(k, h);
#pragma GCC unroll 8
  for (size_t j = 0; j < N; ++j) {
    const __m128i left = _mm_xor_si128(h[j], _mm_and_si128(cw, ControlMask(p[j])));
    Store(children + 2 * j, left);
    Store(children + 2 * j + 1, _mm_xor_si128(left, p[j]));
  }
}

TANDEM_AESNI_TARGET void ExpandLevel(const RoundKeys& keys, const Block* parents, size_t n,
                                     Block cw, Block* children) {
  const Keys k = LoadKeys(keys);
  const __m128i c = Load(&cw);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) ExpandN<kWays>(k, c, parents + i, children + 2 * i);
  for (; i < n; ++i) ExpandN<1>(k, c, parents + i, children + 2 * i);
}

// o <- lanes(h + masked_vc), negated when kNeg, added to *o when kAdd.
template <bool k64, bool kNeg, bool kAdd>
TANDEM_AESNI_INLINE void FinishLeaf(__m128i h, __m128i masked_vc, Block* o) {
  const __m128i zero = _mm_setzero_si128();
  __m128i v = k64 ? _mm_add_epi64(h, masked_vc) : _mm_add_epi32(h, masked_vc);
  if (kNeg) v = k64 ? _mm_sub_epi64(zero, v) : _mm_sub_epi32(zero, v);
  if (kAdd) v = k64 ? _mm_add_epi64(Load(o), v) : _mm_add_epi32(Load(o), v);
  Store(o, v);
}

template <bool k64, bool kNeg, bool kAdd>
TANDEM_AESNI_TARGET void LeafConvertT(const RoundKeys& keys, const Block* seeds, size_t n,
                                      Block vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m128i c = Load(&vc);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    __m128i p[kWays];
    __m128i h[kWays];
    for (size_t j = 0; j < kWays; ++j) h[j] = p[j] = Load(seeds + i + j);
    MmoN<kWays>(k, h);
    for (size_t j = 0; j < kWays; ++j) {
      FinishLeaf<k64, kNeg, kAdd>(h[j], _mm_and_si128(c, ControlMask(p[j])), out + i + j);
    }
  }
  for (; i < n; ++i) {
    __m128i p = Load(seeds + i);
    __m128i h[1] = {p};
    MmoN<1>(k, h);
    FinishLeaf<k64, kNeg, kAdd>(h[0], _mm_and_si128(c, ControlMask(p)), out + i);
  }
}

TANDEM_AESNI_TARGET void LeafConvert(const RoundKeys& keys, const Block* seeds, size_t n,
                                     Block vc, bool negate, int lane_bits, bool add,
                                     Block* out) {
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
TANDEM_AESNI_TARGET void LeafConvertCounterT(const RoundKeys& keys, Block seed, uint64_t first, size_t n,
                                             const Block* vc, Block* out) {
  const Keys k = LoadKeys(keys);
  const __m128i b = Load(&seed);
  const __m128i t = ControlMask(b);
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    __m128i x[kWays];
    for (size_t j = 0; j < kWays; ++j) {
      x[j] = _mm_xor_si128(b, _mm_set_epi64x(0, static_cast<int64_t>(first + i + j)));
    }
    MmoN<kWays>(k, x);
    for (size_t j = 0; j < kWays; ++j) {
      FinishLeaf<k64, kNeg, kAdd>(x[j], _mm_and_si128(Load(vc + i + j), t), out + i + j);
    }
  }
  for (; i < n; ++i) {
    __m128i x[1] = {_mm_xor_si128(b, _mm_set_epi64x(0, static_cast<int64_t>(first + i)))};
    MmoN<1>(k, x);
    FinishLeaf<k64, kNeg, kAdd>(x[0], _mm_and_si128(Load(vc + i), t), out + i);
  }
}

TANDEM_AESNI_TARGET void LeafConvertCounter(const RoundKeys& keys, Block seed, uint64_t first, size_t n,
                                            const Block* vc, bool negate, int lane_bits,
                                            bool add, Block* out) {
  TANDEM_DISPATCH_LANES(LeafConvertCounterT, lane_bits, negate, add, keys, seed, first, n, vc, out);
}

}  // namespace

const AesKernels& AesNiKernels() {
  static constexpr AesKernels kKernels = {"aesni",      &Encrypt,     &Mmo,
                                          &MmoCounter, &ExpandLevel, &LeafConvert,
                                          &LeafConvertCounter};
  return kKernels;
}

}  // namespace tandem::crypto::internal
