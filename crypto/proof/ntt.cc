#include "crypto/proof/ntt.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

// Inside the transforms values are "relaxed": any 64-bit representative of
// the element (x and x + p when x < 2^64 - p). gl::Mul accepts relaxed
// operands (Reduce128 takes any 128-bit product); these helpers avoid the
// final conditional subtractions where the next operation tolerates it.

// a * b mod p, relaxed, for any a, b: gl::Reduce128 without its last step.
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

void NttDomain::ValuesToCoefficients(absl::Span<uint64_t> data) const {
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

void NttDomain::CoefficientsToValues(absl::Span<uint64_t> data) const {
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
