#include "crypto/proof/ntt.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "crypto/proof/goldilocks_lanes.h"
#include "crypto/proof/ntt_x8.h"

namespace tandem::crypto::proof {
namespace {

size_t BitReverse(size_t x, int bits) {
  size_t r = 0;
  for (int b = 0; b < bits; ++b) r |= ((x >> b) & 1) << (bits - 1 - b);
  return r;
}

// roots[m + j] = w^(j n / 2m) for m = 1, 2, .., n/2 and j < m, where w has
// order n: the twiddles of the stage of half-size m, contiguous.
std::vector<uint64_t> StageRoots(uint64_t w, int log_n) {
  const size_t n = size_t{1} << log_n;
  std::vector<uint64_t> roots(std::max<size_t>(n, 2), 0);
  for (int k = 0; k < log_n; ++k) {
    const size_t m = size_t{1} << k;
    const uint64_t step = gl::Pow(w, n / (2 * m));  // a primitive 2m-th root
    uint64_t x = 1;
    for (size_t j = 0; j < m; ++j) {
      roots[m + j] = x;
      x = gl::Mul(x, step);
    }
  }
  return roots;
}

using lanes::AddRelaxed;
using lanes::MulRelaxed;
using lanes::SubRelaxed;

#if defined(__AVX2__)
// Hybrid steps: four butterflies in AVX2 lanes and four more in scalar
// registers (or every other 8-element group in scalar code in the first
// stages), which the core runs side by side on its vector and integer
// units (on an AMD EPYC Zen 1 core, whose 256-bit operations are two
// 128-bit halves, BM_WireTransforms: ~5 % faster than lanes alone, ~20 %
// faster than the portable code). Either way the results are those of the
// portable code.
constexpr bool kHybrid = true;
constexpr size_t kStep = kHybrid ? 8 : 4;  // butterflies per step, half-size >= kStep
using lanes::Lanes;
using lanes::Load;
using lanes::Store;

// The portable butterflies of the stages of half-size 1 and 2 on x[0..8),
// DIT order, each input first multiplied by scale[j] when scale is not
// null: the scalar half of the hybrid steps below.
void DitGroup8(const uint64_t* in, const uint64_t* scale, uint64_t* x, const uint64_t* roots) {
  if (scale != nullptr) {
    for (int j = 0; j < 8; ++j) x[j] = gl::Mul(in[j], scale[j]);
  } else if (in != x) {
    for (int j = 0; j < 8; ++j) x[j] = in[j];
  }
  for (size_t m = 1; m <= 2; m *= 2) {
    for (size_t start = 0; start < 8; start += 2 * m) {
      for (size_t j = 0; j < m; ++j) {
        const uint64_t a = x[start + j];
        const uint64_t b = gl::Reduce64(MulRelaxed(x[start + m + j], roots[m + j]));
        x[start + j] = AddRelaxed(a, b);
        x[start + m + j] = SubRelaxed(a, b);
      }
    }
  }
}
// The same for DIF: half-sizes 2, then 1.
void DifGroup8(uint64_t* x, const uint64_t* roots) {
  for (size_t m = 2; m >= 1; m /= 2) {
    for (size_t start = 0; start < 8; start += 2 * m) {
      for (size_t j = 0; j < m; ++j) {
        const uint64_t a = x[start + j], b = gl::Reduce64(x[start + m + j]);
        x[start + j] = AddRelaxed(a, b);
        x[start + m + j] = MulRelaxed(SubRelaxed(a, b), roots[m + j]);
      }
    }
  }
}

// The stage of half-size 4: in lanes, every other group in scalar
// registers when kHybrid.
void DitStage4(uint64_t* x, size_t n, const uint64_t* roots) {
  const Lanes w = Load(roots + 4);
  for (size_t start = 0; start < n; start += 8) {
    if (kHybrid && (start & 8) != 0) {
      for (size_t j = 0; j < 4; ++j) {
        const uint64_t a = x[start + j];
        const uint64_t b = gl::Reduce64(MulRelaxed(x[start + 4 + j], roots[4 + j]));
        x[start + j] = AddRelaxed(a, b);
        x[start + 4 + j] = SubRelaxed(a, b);
      }
      continue;
    }
    const Lanes a = Load(x + start);
    const Lanes b = lanes::Reduce64(lanes::MulRelaxed(Load(x + start + 4), w));
    Store(x + start, lanes::AddRelaxed(a, b));
    Store(x + start + 4, lanes::SubRelaxed(a, b));
  }
}
void DifStage4(uint64_t* x, size_t n, const uint64_t* roots) {
  const Lanes w = Load(roots + 4);
  for (size_t start = 0; start < n; start += 8) {
    if (kHybrid && (start & 8) != 0) {
      for (size_t j = 0; j < 4; ++j) {
        const uint64_t a = x[start + j], b = gl::Reduce64(x[start + 4 + j]);
        x[start + j] = AddRelaxed(a, b);
        x[start + 4 + j] = MulRelaxed(SubRelaxed(a, b), roots[4 + j]);
      }
      continue;
    }
    const Lanes a = Load(x + start), b = lanes::Reduce64(Load(x + start + 4));
    Store(x + start, lanes::AddRelaxed(a, b));
    Store(x + start + 4, lanes::MulRelaxed(lanes::SubRelaxed(a, b), w));
  }
}

// Decimation in time over n >= 8 values, the same butterflies as
// NttDomain::CoefficientsToValuesPortable four at a time: in -> out (in ==
// out allowed), each input first multiplied by scale[j] (gl::Mul) when
// scale is not null. The stages of half-size 1 and 2 are fused, eight
// values per step, rearranged between 128-bit halves; for j = 0 the lanes
// multiply by w = 1, which MulRelaxed returns unchanged (the portable code
// skips it: same result).
void DitLanes(const uint64_t* in, const uint64_t* scale, uint64_t* out, size_t n,
              const uint64_t* roots) {
  const Lanes w2 =
      _mm256_setr_epi64x(1, static_cast<int64_t>(roots[3]), 1, static_cast<int64_t>(roots[3]));
  for (size_t i = 0; i < n; i += 8) {
    if (kHybrid && (i & 8) != 0) {
      DitGroup8(in + i, scale == nullptr ? nullptr : scale + i, out + i, roots);
      continue;
    }
    Lanes v0 = Load(in + i), v1 = Load(in + i + 4);
    if (scale != nullptr) {
      v0 = lanes::Reduce64(lanes::MulRelaxed(v0, Load(scale + i)));
      v1 = lanes::Reduce64(lanes::MulRelaxed(v1, Load(scale + i + 4)));
    }
    // Half-size 1 (w = 1): pairs (x0, x1), (x2, x3), ...
    const Lanes a = _mm256_unpacklo_epi64(v0, v1);                   // x0 x4 x2 x6
    const Lanes b = lanes::Reduce64(_mm256_unpackhi_epi64(v0, v1));  // x1 x5 x3 x7
    const Lanes s = lanes::AddRelaxed(a, b), d = lanes::SubRelaxed(a, b);
    // Half-size 2: pairs (y0, y2) with w = 1, (y1, y3) with w = roots[3].
    const Lanes u0 = _mm256_unpacklo_epi64(s, d), u1 = _mm256_unpackhi_epi64(s, d);  // y0-3, y4-7
    const Lanes lo = _mm256_permute2x128_si256(u0, u1, 0x20);                        // y0 y1 y4 y5
    const Lanes hi = lanes::Reduce64(
        lanes::MulRelaxed(_mm256_permute2x128_si256(u0, u1, 0x31), w2));  // y2 y3 y6 y7
    const Lanes c = lanes::AddRelaxed(lo, hi), e = lanes::SubRelaxed(lo, hi);
    Store(out + i, _mm256_permute2x128_si256(c, e, 0x20));
    Store(out + i + 4, _mm256_permute2x128_si256(c, e, 0x31));
  }
  for (size_t m = 4; m < n; m *= 2) {
    if (m < kStep) {
      DitStage4(out, n, roots);
      continue;
    }
    const uint64_t* w = roots + m;
    for (size_t start = 0; start < n; start += 2 * m) {
      uint64_t* lo = out + start;
      uint64_t* hi = lo + m;
      for (size_t j = 0; j < m; j += kStep) {
        const Lanes a = Load(lo + j);
        const Lanes b = lanes::Reduce64(lanes::MulRelaxed(Load(hi + j), Load(w + j)));
        Store(lo + j, lanes::AddRelaxed(a, b));
        Store(hi + j, lanes::SubRelaxed(a, b));
        if (kHybrid) {
          for (size_t k = j + 4; k < j + 8; ++k) {
            const uint64_t sa = lo[k], sb = gl::Reduce64(MulRelaxed(hi[k], w[k]));
            lo[k] = AddRelaxed(sa, sb);
            hi[k] = SubRelaxed(sa, sb);
          }
        }
      }
    }
  }
}

// Decimation in frequency over n >= 8 values in place, the butterflies of
// NttDomain::ValuesToCoefficientsPortable four at a time; the last two
// stages (half-sizes 2 and 1) fused as in DitLanes.
void DifLanes(uint64_t* x, size_t n, const uint64_t* roots) {
  for (size_t m = n / 2; m >= 4; m /= 2) {
    if (m < kStep) {
      DifStage4(x, n, roots);
      continue;
    }
    const uint64_t* w = roots + m;
    for (size_t start = 0; start < n; start += 2 * m) {
      uint64_t* lo = x + start;
      uint64_t* hi = lo + m;
      for (size_t j = 0; j < m; j += kStep) {
        const Lanes a = Load(lo + j), b = lanes::Reduce64(Load(hi + j));
        Store(lo + j, lanes::AddRelaxed(a, b));
        Store(hi + j, lanes::MulRelaxed(lanes::SubRelaxed(a, b), Load(w + j)));
        if (kHybrid) {
          for (size_t k = j + 4; k < j + 8; ++k) {
            const uint64_t sa = lo[k], sb = gl::Reduce64(hi[k]);
            lo[k] = AddRelaxed(sa, sb);
            hi[k] = MulRelaxed(SubRelaxed(sa, sb), w[k]);
          }
        }
      }
    }
  }
  const Lanes w2 =
      _mm256_setr_epi64x(1, static_cast<int64_t>(roots[3]), 1, static_cast<int64_t>(roots[3]));
  for (size_t i = 0; i < n; i += 8) {
    if (kHybrid && (i & 8) != 0) {
      DifGroup8(x + i, roots);
      continue;
    }
    const Lanes v0 = Load(x + i), v1 = Load(x + i + 4);
    // Half-size 2: pairs (x0, x2) with w = 1, (x1, x3) with w = roots[3].
    const Lanes lo = _mm256_permute2x128_si256(v0, v1, 0x20);                   // x0 x1 x4 x5
    const Lanes hi = lanes::Reduce64(_mm256_permute2x128_si256(v0, v1, 0x31));  // x2 x3 x6 x7
    const Lanes c = lanes::AddRelaxed(lo, hi);                                  // y0 y1 y4 y5
    const Lanes d = lanes::MulRelaxed(lanes::SubRelaxed(lo, hi), w2);           // y2 y3 y6 y7
    // Half-size 1 (w = 1): pairs (y0, y1), (y2, y3), ...
    const Lanes a = _mm256_unpacklo_epi64(c, d);                   // y0 y2 y4 y6
    const Lanes b = lanes::Reduce64(_mm256_unpackhi_epi64(c, d));  // y1 y3 y5 y7
    const Lanes s = lanes::AddRelaxed(a, b), e = lanes::SubRelaxed(a, b);
    const Lanes u0 = _mm256_unpacklo_epi64(s, e),
                u1 = _mm256_unpackhi_epi64(s, e);  // z0 z1 z4 z5, z2 z3 z6 z7
    Store(x + i, _mm256_permute2x128_si256(u0, u1, 0x20));
    Store(x + i + 4, _mm256_permute2x128_si256(u0, u1, 0x31));
  }
}
#endif  // __AVX2__

}  // namespace

absl::StatusOr<NttDomain> NttDomain::Create(int log_size) {
  if (log_size < 0 || log_size > 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("NTT log size must be in [0, 24], got ", log_size));
  }
  NttDomain d;
  d.log_n_ = log_size;
  d.n_ = size_t{1} << log_size;
  const uint64_t omega = gl::RootOfUnity(log_size);
  d.points_.resize(d.n_);
  uint64_t x = 1;
  for (size_t i = 0; i < d.n_; ++i) {
    d.points_[i] = x;
    x = gl::Mul(x, omega);
  }
  d.roots_ = StageRoots(omega, log_size);
  d.inv_roots_ = StageRoots(gl::Inverse(omega), log_size);
  const uint64_t inv_n = gl::Inverse(d.n_);
  for (int s = 0; s < kMaxCosets; ++s) {
    d.shifts_[s] = gl::Pow(gl::kGenerator, static_cast<uint64_t>(s));
    std::vector<uint64_t> powers(d.n_);
    uint64_t h = inv_n;  // h_s^j / n
    for (size_t j = 0; j < d.n_; ++j) {
      powers[j] = h;
      h = gl::Mul(h, d.shifts_[s]);
    }
    d.scale_[s].resize(d.n_);
    for (size_t j = 0; j < d.n_; ++j) d.scale_[s][j] = powers[BitReverse(j, log_size)];
  }
  return d;
}

void NttDomain::ValuesToCoefficientsPortable(absl::Span<uint64_t> data) const {
  // Decimation in frequency with omega^-1: natural order in, bit-reversed
  // out; butterfly (a, b) -> (a + b, (a - b) w), w = 1 at j = 0. Relaxed
  // in and out.
  uint64_t* x = data.data();
  for (size_t m = n_ / 2; m >= 1; m /= 2) {
    const uint64_t* w = inv_roots_.data() + m;
    for (size_t start = 0; start < n_; start += 2 * m) {
      uint64_t* lo = x + start;
      uint64_t* hi = lo + m;
      {
        const uint64_t a = lo[0], b = gl::Reduce64(hi[0]);
        lo[0] = AddRelaxed(a, b);
        hi[0] = SubRelaxed(a, b);
      }
      for (size_t j = 1; j < m; ++j) {
        const uint64_t a = lo[j], b = gl::Reduce64(hi[j]);
        lo[j] = AddRelaxed(a, b);
        hi[j] = MulRelaxed(SubRelaxed(a, b), w[j]);
      }
    }
  }
}

void NttDomain::CoefficientsToValuesPortable(absl::Span<uint64_t> data) const {
  // Decimation in time: bit-reversed in, natural out; butterfly
  // (a, b) -> (a + b w, a - b w), w = 1 at j = 0. Relaxed in and out.
  uint64_t* x = data.data();
  for (size_t m = 1; m < n_; m *= 2) {
    const uint64_t* w = roots_.data() + m;
    for (size_t start = 0; start < n_; start += 2 * m) {
      uint64_t* lo = x + start;
      uint64_t* hi = lo + m;
      {
        const uint64_t a = lo[0], b = gl::Reduce64(hi[0]);
        lo[0] = AddRelaxed(a, b);
        hi[0] = SubRelaxed(a, b);
      }
      for (size_t j = 1; j < m; ++j) {
        const uint64_t a = lo[j], b = gl::Reduce64(MulRelaxed(hi[j], w[j]));
        lo[j] = AddRelaxed(a, b);
        hi[j] = SubRelaxed(a, b);
      }
    }
  }
}

void NttDomain::ValuesToCoefficients(absl::Span<uint64_t> data) const {
  if (n_ >= 16 && internal::HaveNttX8()) {
    internal::DifX8(data.data(), n_, inv_roots_.data());
    return;
  }
#if defined(__AVX2__)
  if (n_ >= 8) {
    DifLanes(data.data(), n_, inv_roots_.data());
    return;
  }
#endif
  ValuesToCoefficientsPortable(data);
}

void NttDomain::CoefficientsToValues(absl::Span<uint64_t> data) const {
  if (n_ >= 16 && internal::HaveNttX8()) {
    internal::DitX8(data.data(), nullptr, data.data(), n_, roots_.data());
    return;
  }
#if defined(__AVX2__)
  if (n_ >= 8) {
    DitLanes(data.data(), nullptr, data.data(), n_, roots_.data());
    return;
  }
#endif
  CoefficientsToValuesPortable(data);
}

void NttDomain::CoefficientsToCosetValues(absl::Span<const uint64_t> coeffs, int s,
                                          absl::Span<uint64_t> out) const {
  const uint64_t* scale = scale_[s].data();
  if (n_ >= 16 && internal::HaveNttX8()) {
    internal::DitX8(coeffs.data(), scale, out.data(), n_, roots_.data());
    return;
  }
#if defined(__AVX2__)
  if (n_ >= 8) {
    DitLanes(coeffs.data(), scale, out.data(), n_, roots_.data());
    return;
  }
#endif
  for (size_t j = 0; j < n_; ++j) out[j] = gl::Mul(coeffs[j], scale[j]);
  CoefficientsToValuesPortable(out);
}

bool NttDomain::InCosets(uint64_t r, int cosets) const {
  const uint64_t rn = gl::Pow(r, n_);
  bool in = false;
  for (int s = 0; s < cosets; ++s) in |= rn == gl::Pow(shifts_[s], n_);
  return in;
}

void NttDomain::LagrangeCoefficients(uint64_t r, int cosets, absl::Span<uint64_t> out) const {
  uint64_t c[kMaxCosets];
  for (int s = 0; s < cosets; ++s) c[s] = gl::Pow(shifts_[s], n_);
  const uint64_t rn = gl::Pow(r, n_);
  uint64_t z = 1;  // Z(r) = prod_s (r^n - c_s)
  for (int s = 0; s < cosets; ++s) z = gl::Mul(z, gl::Sub(rn, c[s]));
  // den[s n + i] = d_s (r - x), x = h_s omega^i; inverted in one batch.
  std::vector<uint64_t> den(static_cast<size_t>(cosets) * n_), xs(den.size());
  for (int s = 0; s < cosets; ++s) {
    uint64_t d = gl::Mul(n_, c[s]);
    for (int t = 0; t < cosets; ++t) {
      if (t != s) d = gl::Mul(d, gl::Sub(c[s], c[t]));
    }
    for (size_t i = 0; i < n_; ++i) {
      const uint64_t x = gl::Mul(shifts_[s], points_[i]);
      xs[s * n_ + i] = x;
      den[s * n_ + i] = gl::Mul(d, gl::Sub(r, x));
    }
  }
  BatchInverse(den, out);
  for (size_t k = 0; k < den.size(); ++k) out[k] = gl::Mul(gl::Mul(out[k], xs[k]), z);
}

}  // namespace tandem::crypto::proof
