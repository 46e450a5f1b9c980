#include "crypto/proof/ntt_x8.h"

#include <cstdlib>

#include "crypto/proof/goldilocks_lanes.h"

namespace tandem::crypto::proof::internal {

#if defined(__AVX512F__)
namespace {

namespace x8 = lanes::x8;
using x8::Lanes;

// The stages of half-size m = 1, 2, 4 act inside blocks of 16 values held
// in two registers v0 = x[0..8), v1 = x[8..16). A stage pairs x[i] (bit m
// of i clear: the "lo" values, in order) with x[i + m]; Gather(m) lists the
// lo indices, Scatter(m) where each x[i] lands after the butterflies
// (index k < 8: lo result k; 8 + k: hi result k), both as operands of
// _mm512_permutex2var_epi64 (index < 8 picks the first register).
struct BlockStage {
  Lanes lo, hi, back0, back1;
  Lanes twiddle;  // roots[m + lo_k mod m], lane k
};

BlockStage MakeStage(size_t m, const uint64_t* roots) {
  alignas(64) uint64_t lo[8], hi[8], back[16], w[8];
  size_t k = 0;
  for (size_t i = 0; i < 16; ++i) {
    if ((i & m) != 0) continue;
    lo[k] = i;
    hi[k] = i + m;
    back[i] = k;
    back[i + m] = 8 + k;
    w[k] = roots[m + i % m];
    ++k;
  }
  return {x8::Load(lo), x8::Load(hi), x8::Load(back), x8::Load(back + 8), x8::Load(w)};
}

// One DIT butterfly stage of the block: (a, b) -> (a + b w, a - b w).
inline void DitBlockStage(const BlockStage& s, Lanes* v0, Lanes* v1) {
  const Lanes a = _mm512_permutex2var_epi64(*v0, s.lo, *v1);
  const Lanes b =
      x8::Reduce64(x8::MulRelaxed(_mm512_permutex2var_epi64(*v0, s.hi, *v1), s.twiddle));
  const Lanes sum = x8::AddRelaxed(a, b), diff = x8::SubRelaxed(a, b);
  *v0 = _mm512_permutex2var_epi64(sum, s.back0, diff);
  *v1 = _mm512_permutex2var_epi64(sum, s.back1, diff);
}

// One DIF butterfly stage of the block: (a, b) -> (a + b, (a - b) w).
inline void DifBlockStage(const BlockStage& s, Lanes* v0, Lanes* v1) {
  const Lanes a = _mm512_permutex2var_epi64(*v0, s.lo, *v1);
  const Lanes b = x8::Reduce64(_mm512_permutex2var_epi64(*v0, s.hi, *v1));
  const Lanes sum = x8::AddRelaxed(a, b);
  const Lanes diff = x8::MulRelaxed(x8::SubRelaxed(a, b), s.twiddle);
  *v0 = _mm512_permutex2var_epi64(sum, s.back0, diff);
  *v1 = _mm512_permutex2var_epi64(sum, s.back1, diff);
}

}  // namespace

bool HaveNttX8() { return true; }

// The portable code skips the multiplication by w = 1 (j = 0): MulRelaxed
// returns its operand unchanged for w = 1, so the lanes that multiply by it
// give the same values.
void DitX8(const uint64_t* in, const uint64_t* scale, uint64_t* out, size_t n,
           const uint64_t* roots) {
  const BlockStage s1 = MakeStage(1, roots), s2 = MakeStage(2, roots), s4 = MakeStage(4, roots);
  for (size_t i = 0; i < n; i += 16) {
    Lanes v0 = x8::Load(in + i), v1 = x8::Load(in + i + 8);
    if (scale != nullptr) {
      v0 = x8::Reduce64(x8::MulRelaxed(v0, x8::Load(scale + i)));
      v1 = x8::Reduce64(x8::MulRelaxed(v1, x8::Load(scale + i + 8)));
    }
    DitBlockStage(s1, &v0, &v1);
    DitBlockStage(s2, &v0, &v1);
    DitBlockStage(s4, &v0, &v1);
    x8::Store(out + i, v0);
    x8::Store(out + i + 8, v1);
  }
  for (size_t m = 8; m < n; m *= 2) {
    const uint64_t* w = roots + m;
    for (size_t start = 0; start < n; start += 2 * m) {
      uint64_t* lo = out + start;
      uint64_t* hi = lo + m;
      for (size_t j = 0; j < m; j += 8) {
        const Lanes a = x8::Load(lo + j);
        const Lanes b = x8::Reduce64(x8::MulRelaxed(x8::Load(hi + j), x8::Load(w + j)));
        x8::Store(lo + j, x8::AddRelaxed(a, b));
        x8::Store(hi + j, x8::SubRelaxed(a, b));
      }
    }
  }
}

void DifX8(uint64_t* x, size_t n, const uint64_t* roots) {
  for (size_t m = n / 2; m >= 8; m /= 2) {
    const uint64_t* w = roots + m;
    for (size_t start = 0; start < n; start += 2 * m) {
      uint64_t* lo = x + start;
      uint64_t* hi = lo + m;
      for (size_t j = 0; j < m; j += 8) {
        const Lanes a = x8::Load(lo + j), b = x8::Reduce64(x8::Load(hi + j));
        x8::Store(lo + j, x8::AddRelaxed(a, b));
        x8::Store(hi + j, x8::MulRelaxed(x8::SubRelaxed(a, b), x8::Load(w + j)));
      }
    }
  }
  const BlockStage s1 = MakeStage(1, roots), s2 = MakeStage(2, roots), s4 = MakeStage(4, roots);
  for (size_t i = 0; i < n; i += 16) {
    Lanes v0 = x8::Load(x + i), v1 = x8::Load(x + i + 8);
    DifBlockStage(s4, &v0, &v1);
    DifBlockStage(s2, &v0, &v1);
    DifBlockStage(s1, &v0, &v1);
    x8::Store(x + i, v0);
    x8::Store(x + i + 8, v1);
  }
}

#else  // !__AVX512F__

bool HaveNttX8() { return false; }
void DitX8(const uint64_t*, const uint64_t*, uint64_t*, size_t, const uint64_t*) { std::abort(); }
void DifX8(uint64_t*, size_t, const uint64_t*) { std::abort(); }

#endif

}  // namespace tandem::crypto::proof::internal
