#include "crypto/dp/discrete_gaussian.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dp/internal/big_uint.h"
#include "crypto/dp/internal/buffered_random.h"
#include "crypto/dp/internal/cks20.h"

namespace tandem::dp {
namespace {

using internal::BigUint;
using internal::BufferedRandom;
using u128 = unsigned __int128;

// Bernoulli(p) for p = num / den <= 1 as [U < num] with U uniform in [0, den).
absl::StatusOr<bool> BernoulliRatio(const BigUint& num, const BigUint& den, BufferedRandom& r) {
  TANDEM_ASSIGN_OR_RETURN(const BigUint u, r.UniformBelow(den));
  return u < num;
}

// [CKS20, Algorithm 1] for gamma = num/den in [0, 1]: K <- 1; draw
// A ~ Bernoulli(gamma / K) until A = 0, incrementing K; return [K odd].
// Word-sized fast path while den * K fits in 64 bits.
absl::StatusOr<bool> BernoulliExpMinusFraction(const BigUint& num, const BigUint& den,
                                               BufferedRandom& r) {
  const bool small = num.BitLength() <= 64 && den.BitLength() <= 64;
  for (uint64_t k = 1;; ++k) {
    bool a;
    if (small && static_cast<u128>(den.limb(0)) * k <= UINT64_MAX) {
      TANDEM_ASSIGN_OR_RETURN(const uint64_t u, r.UniformBelow(den.limb(0) * k));
      a = u < num.limb(0);
    } else {
      bool overflow = false;
      const BigUint dk = BigUint::Mul(den, BigUint(k), &overflow);
      if (overflow) return absl::InternalError("discrete gaussian: Bernoulli denominator overflow");
      TANDEM_ASSIGN_OR_RETURN(a, BernoulliRatio(num, dk, r));
    }
    if (!a) return (k & 1) == 1;
  }
}

absl::StatusOr<bool> BernoulliExpMinusOne(BufferedRandom& r) {
  static const BigUint kOne(1);
  return BernoulliExpMinusFraction(kOne, kOne, r);
}

// [CKS20, Algorithm 1] for any gamma = num/den >= 0: peel off one
// Bernoulli(exp(-1)) per unit of gamma (exp(-gamma) = exp(-1)^k exp(-(gamma-k))),
// then the fractional part. Only subtraction and comparison are needed.
absl::StatusOr<bool> BernoulliExpMinusBig(BigUint num, const BigUint& den, BufferedRandom& r) {
  while (den < num) {
    TANDEM_ASSIGN_OR_RETURN(const bool b, BernoulliExpMinusOne(r));
    if (!b) return false;
    num = BigUint::Sub(num, den);
  }
  return BernoulliExpMinusFraction(num, den, r);
}

// floor(sqrt(num / den)), exact. REQUIRES: valid sigma^2 (so the root < 2^32).
uint64_t FloorSqrtRatio(uint64_t num, uint64_t den) {
  uint64_t r = static_cast<uint64_t>(
      std::floor(std::sqrt(static_cast<long double>(num) / static_cast<long double>(den))));
  auto fits = [&](uint64_t x) {  // x^2 * den <= num
    return static_cast<u128>(x) * x * den <= static_cast<u128>(num);
  };
  while (r > 0 && !fits(r)) --r;
  while (fits(r + 1)) ++r;
  return r;
}

}  // namespace

absl::StatusOr<Rational> VarianceFromDouble(double sigma2) {
  if (!std::isfinite(sigma2) || !(sigma2 > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("discrete gaussian: variance must be finite and > 0, got ", sigma2));
  }
  if (sigma2 >= 9223372036854775808.0) {  // 2^63
    return absl::InvalidArgumentError(
        absl::StrCat("discrete gaussian: variance must be < 2^63, got ", sigma2));
  }
  int e = 0;
  const double m = std::frexp(sigma2, &e);                   // sigma2 = m 2^e, m in [0.5, 1)
  uint64_t mant = static_cast<uint64_t>(std::ldexp(m, 53));  // exact, < 2^53
  int exp2 = e - 53;                                         // sigma2 = mant 2^exp2
  while ((mant & 1) == 0 && exp2 < 0) {
    mant >>= 1;
    ++exp2;
  }
  if (exp2 >= 0) return Rational{mant << exp2, 1};  // < 2^63 by the check above.
  const int shift = -exp2;
  if (shift <= 62) return Rational{mant, uint64_t{1} << shift};
  // Round to the nearest multiple of 2^-62.
  const int excess = shift - 62;
  uint64_t num = 0;
  if (excess < 64) {
    const u128 rounded =
        (static_cast<u128>(mant) + (static_cast<u128>(1) << (excess - 1))) >> excess;
    num = static_cast<uint64_t>(rounded);
  }
  if (num == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("discrete gaussian: variance ", sigma2, " rounds to zero at 2^-62"));
  }
  int den_shift = 62;
  while ((num & 1) == 0 && den_shift > 0) {
    num >>= 1;
    --den_shift;
  }
  return Rational{num, uint64_t{1} << den_shift};
}

absl::Status ValidateSigma2(const Rational& s) {
  if (s.num == 0 || s.den == 0 || s.num >= kMaxRationalPart || s.den >= kMaxRationalPart) {
    return absl::InvalidArgumentError(
        absl::StrCat("discrete gaussian: sigma^2 = ", s.num, "/", s.den,
                     " must have numerator and denominator in [1, 2^63)"));
  }
  return absl::OkStatus();
}

namespace internal {

absl::StatusOr<bool> SampleBernoulliExpMinus(const Rational& gamma, BufferedRandom& random) {
  if (gamma.den == 0) return absl::InvalidArgumentError("Bernoulli(exp(-gamma)): zero denominator");
  return BernoulliExpMinusBig(BigUint(gamma.num), BigUint(gamma.den), random);
}

absl::StatusOr<int64_t> SampleDiscreteLaplace(uint64_t t, BufferedRandom& random) {
  if (t == 0 || t >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("discrete laplace: scale t = ", t, " must be in [1, 2^32)"));
  }
  const BigUint big_t(t);
  while (true) {
    // U uniform in [0, t), kept with probability exp(-U/t).
    TANDEM_ASSIGN_OR_RETURN(const uint64_t u, random.UniformBelow(t));
    TANDEM_ASSIGN_OR_RETURN(const bool d, BernoulliExpMinusFraction(BigUint(u), big_t, random));
    if (!d) continue;
    // V geometric: count successes of Bernoulli(exp(-1)).
    uint64_t v = 0;
    while (true) {
      TANDEM_ASSIGN_OR_RETURN(const bool a, BernoulliExpMinusOne(random));
      if (!a) break;
      if (++v >= (uint64_t{1} << 30)) {
        return absl::InternalError("discrete laplace: geometric draw out of range");
      }
    }
    const uint64_t x = u + t * v;  // < 2^62
    TANDEM_ASSIGN_OR_RETURN(const bool negative, random.Bit());
    if (negative && x == 0) continue;  // Reject -0 so that 0 is not counted twice.
    return negative ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
  }
}

}  // namespace internal

DiscreteGaussianSampler::DiscreteGaussianSampler(const Rational& sigma2, uint64_t t,
                                                 SecureRandom* random)
    : sigma2_(sigma2), t_(t), random_(std::make_unique<internal::BufferedRandom>(random)) {}

DiscreteGaussianSampler::~DiscreteGaussianSampler() = default;

absl::StatusOr<std::unique_ptr<DiscreteGaussianSampler>> DiscreteGaussianSampler::Create(
    const Rational& sigma2, SecureRandom* random) {
  TANDEM_RETURN_IF_ERROR(ValidateSigma2(sigma2));
  if (random == nullptr) return absl::InvalidArgumentError("discrete gaussian: null SecureRandom");
  const uint64_t t = FloorSqrtRatio(sigma2.num, sigma2.den) + 1;
  return std::unique_ptr<DiscreteGaussianSampler>(new DiscreteGaussianSampler(sigma2, t, random));
}

absl::StatusOr<int64_t> DiscreteGaussianSampler::Sample() {
  // [CKS20, Algorithm 3] with sigma^2 = n/d and t = floor(sigma) + 1:
  //   Y ~ Lap_Z(t); accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)).
  // As one fraction: gamma = (|Y| d t - n)^2 / (2 n d t^2). Bounds: |Y| < 2^62,
  // d, n < 2^63, t <= 2^32, so the numerator < 2^318 and the denominator
  // < 2^191, within BigUint's 384 bits.
  const BigUint n(sigma2_.num);
  const BigUint d(sigma2_.den);
  const BigUint t(t_);
  bool overflow = false;
  const BigUint dt = BigUint::Mul(d, t, &overflow);
  const BigUint den = BigUint::Mul(
      BigUint::Mul(BigUint::Mul(BigUint(2), n, &overflow), dt, &overflow), t, &overflow);
  if (overflow) return absl::InternalError("discrete gaussian: denominator overflow");
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t y, internal::SampleDiscreteLaplace(t_, *random_));
    const uint64_t abs_y = y < 0 ? static_cast<uint64_t>(-y) : static_cast<uint64_t>(y);
    const BigUint a = BigUint::Mul(BigUint(abs_y), dt, &overflow);
    const BigUint diff = n < a ? BigUint::Sub(a, n) : BigUint::Sub(n, a);
    const BigUint num = BigUint::Mul(diff, diff, &overflow);
    if (overflow) return absl::InternalError("discrete gaussian: numerator overflow");
    TANDEM_ASSIGN_OR_RETURN(const bool accept, BernoulliExpMinusBig(num, den, *random_));
    if (accept) return y;
  }
}

absl::Status DiscreteGaussianSampler::SampleInto(absl::Span<int64_t> out) {
  for (int64_t& x : out) {
    TANDEM_ASSIGN_OR_RETURN(x, Sample());
  }
  return absl::OkStatus();
}

namespace {

void RunSerially(size_t n, absl::FunctionRef<void(size_t)> body) {
  for (size_t i = 0; i < n; ++i) body(i);
}

absl::Status AddNoiseSerial(const Rational& sigma2, absl::Span<uint64_t> share,
                            SecureRandom* random) {
  TANDEM_ASSIGN_OR_RETURN(auto sampler, DiscreteGaussianSampler::Create(sigma2, random));
  for (uint64_t& x : share) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t noise, sampler->Sample());
    x += static_cast<uint64_t>(noise);  // Two's complement: wraps modulo 2^64.
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddDiscreteGaussianNoise(const Rational& sigma2, absl::Span<uint64_t> share,
                                      SecureRandom* random, ChunkRunner run_chunks) {
  if (share.size() <= kNoiseChunk) return AddNoiseSerial(sigma2, share, random);
  TANDEM_RETURN_IF_ERROR(ValidateSigma2(sigma2));
  if (random == nullptr) return absl::InvalidArgumentError("random must not be null");
  // Chunk c's stream: AES-128-CTR under a key and initial counter drawn
  // from `random` for it, in chunk order, before any chunk runs (a CTR
  // keystream under a secret random key, as NIST SP 800-90A's CTR_DRBG
  // output; deterministic for a deterministic `random`, whatever the
  // thread count).
  const size_t chunks = (share.size() + kNoiseChunk - 1) / kNoiseChunk;
  std::vector<std::array<uint8_t, 32>> keys(chunks);
  TANDEM_RETURN_IF_ERROR(
      random->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(keys.data()), 32 * chunks)));
  std::vector<absl::Status> status(chunks);
  run_chunks(chunks, [&](size_t c) {
    absl::StatusOr<std::unique_ptr<DeterministicRandom>> stream =
        DeterministicRandom::FromKeyMaterial(keys[c]);
    if (!stream.ok()) {
      status[c] = stream.status();
      return;
    }
    const size_t begin = c * kNoiseChunk;
    status[c] = AddNoiseSerial(
        sigma2, share.subspan(begin, std::min(kNoiseChunk, share.size() - begin)), stream->get());
  });
  OPENSSL_cleanse(keys.data(), 32 * chunks);
  for (const absl::Status& s : status) TANDEM_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status AddDiscreteGaussianNoise(const Rational& sigma2, absl::Span<uint64_t> share,
                                      SecureRandom* random) {
  return AddDiscreteGaussianNoise(sigma2, share, random, RunSerially);
}

absl::Status NoiseShareForRelease(const ReleasePolicy& policy, int64_t batch_size,
                                  absl::Span<uint64_t> share, SecureRandom* random) {
  return NoiseShareForRelease(policy, batch_size, share, random, RunSerially);
}

absl::Status NoiseShareForRelease(const ReleasePolicy& policy, int64_t batch_size,
                                  absl::Span<uint64_t> share, SecureRandom* random,
                                  ChunkRunner run_chunks) {
  if (policy.min_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("release policy: min_batch_size must be >= 1, got ", policy.min_batch_size));
  }
  TANDEM_RETURN_IF_ERROR(ValidateSigma2(policy.sigma2));
  if (batch_size < policy.min_batch_size) {
    return absl::FailedPreconditionError(absl::StrCat("release refused: batch of ", batch_size,
                                                      " reports is below the minimum of ",
                                                      policy.min_batch_size));
  }
  return AddDiscreteGaussianNoise(policy.sigma2, share, random, run_chunks);
}

}  // namespace tandem::dp
