// Exact discrete Gaussian noise for the aggregators' shares.
//
// Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy",
// NeurIPS 2020 (arXiv 2004.00010), [CKS20]:
//   Algorithm 1: Bernoulli(exp(-gamma)) for rational gamma >= 0, using only
//                Bernoulli(rational) draws (exact, no floating point);
//   Algorithm 2: discrete Laplace with scale t (here s = 1);
//   Algorithm 3: discrete Gaussian N_Z(0, sigma^2) by rejection from the
//                discrete Laplace with t = floor(sigma) + 1.
// The output has exactly P[X = x] proportional to exp(-x^2 / (2 sigma^2)) on
// Z, given a uniform SecureRandom. All arithmetic is on integers (up to 384
// bits, internal/big_uint.h) and every uniform integer is drawn by rejection
// (no modulo bias). The running time is random (as for any exact sampler);
// it does not depend on secrets other than the noise itself.
//
// In tandem each aggregator adds its own independent noise to its aggregate
// share before release (the DAP convention, specs/dpf_research.md 1.2), so
// the released sum carries N_Z(0, 2 sigma^2) when both are honest and at
// least N_Z(0, sigma^2) when one is.
#ifndef TANDEM_CRYPTO_DP_DISCRETE_GAUSSIAN_H_
#define TANDEM_CRYPTO_DP_DISCRETE_GAUSSIAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"

namespace tandem::dp {

namespace internal {
class BufferedRandom;
}  // namespace internal

// A non-negative rational num/den. Valid values for sigma^2: 1 <= num < 2^63,
// 1 <= den < 2^63.
struct Rational {
  uint64_t num = 0;
  uint64_t den = 1;
};

// Largest accepted numerator/denominator (exclusive): 2^63.
inline constexpr uint64_t kMaxRationalPart = uint64_t{1} << 63;

// Converts a double variance to a Rational. The conversion is exact when the
// reduced binary fraction fits (numerator and denominator < 2^63, i.e. for
// every double in [2^-10, 2^62] and many more); otherwise the value is
// rounded to the nearest multiple of 2^-62. Returns INVALID_ARGUMENT for NaN,
// infinities, values <= 0, values >= 2^63 or values that round to zero.
absl::StatusOr<Rational> VarianceFromDouble(double sigma2);

// INVALID_ARGUMENT unless 1 <= sigma2.num, sigma2.den < kMaxRationalPart:
// the variances the sampler and the noise functions below accept.
absl::Status ValidateSigma2(const Rational& sigma2);

// Samples N_Z(0, sigma^2). One instance per noise stream; not thread-safe
// (use one sampler per thread, each with its own SecureRandom). The
// SecureRandom is not owned and must outlive the sampler.
class DiscreteGaussianSampler {
 public:
  ~DiscreteGaussianSampler();
  // Returns INVALID_ARGUMENT when sigma2 is outside [1, 2^63) / [1, 2^63) or
  // `random` is null.
  static absl::StatusOr<std::unique_ptr<DiscreteGaussianSampler>> Create(const Rational& sigma2,
                                                                         SecureRandom* random);

  // One draw [CKS20, Algorithm 3]. Returns INTERNAL when the SecureRandom
  // fails or (with probability below 2^-1000) a draw leaves the int64 range.
  absl::StatusOr<int64_t> Sample();
  // Fills `out` with independent draws.
  absl::Status SampleInto(absl::Span<int64_t> out);

  const Rational& sigma2() const { return sigma2_; }
  // floor(sigma) + 1, the Laplace scale of the rejection sampler.
  uint64_t laplace_scale() const { return t_; }

 private:
  DiscreteGaussianSampler(const Rational& sigma2, uint64_t t, SecureRandom* random);

  Rational sigma2_;
  uint64_t t_;
  std::unique_ptr<internal::BufferedRandom> random_;
};

// Adds independent N_Z(0, sigma2) noise to every coordinate of a Z_2^64
// aggregate share, in place (two's complement wrap-around: a negative draw
// subtracts modulo 2^64). Returns the Create() errors; on INTERNAL the share
// is partially noised and must not be released.
// Shares of at most kNoiseChunk coordinates draw from `random` itself, one
// sampler in order. Longer ones are noised in chunks of kNoiseChunk, chunk c
// from its own AES-128-CTR stream whose key and counter are drawn from
// `random` for it, in chunk order, first (`random` is only called from this
// thread); `run_chunks` runs the chunks, in any order and on any threads
// (the caller's pool: an aggregator passes oneTBB's), for the same noise.
// The form without it runs them one after the other on this thread.
inline constexpr size_t kNoiseChunk = 8192;
// run_chunks(n, body) calls body(i) once for every i in [0, n) and returns
// when all have returned.
using ChunkRunner = absl::FunctionRef<void(size_t n, absl::FunctionRef<void(size_t)> body)>;
absl::Status AddDiscreteGaussianNoise(const Rational& sigma2, absl::Span<uint64_t> share,
                                      SecureRandom* random, ChunkRunner run_chunks);
absl::Status AddDiscreteGaussianNoise(const Rational& sigma2, absl::Span<uint64_t> share,
                                      SecureRandom* random);

// The release rule of an aggregator: noise of variance sigma2 on every
// coordinate and a minimum batch size below which nothing is released.
struct ReleasePolicy {
  Rational sigma2;
  // Aggregates of fewer accepted reports than this are never released.
  int64_t min_batch_size = 1;
};

// Checks the batch size, then noises `share` in place. Returns
// FAILED_PRECONDITION when batch_size < policy.min_batch_size (the share is
// left untouched and must not be released), INVALID_ARGUMENT for
// min_batch_size < 1 or an invalid sigma2, INTERNAL from the generator.
absl::Status NoiseShareForRelease(const ReleasePolicy& policy, int64_t batch_size,
                                  absl::Span<uint64_t> share, SecureRandom* random,
                                  ChunkRunner run_chunks);
absl::Status NoiseShareForRelease(const ReleasePolicy& policy, int64_t batch_size,
                                  absl::Span<uint64_t> share, SecureRandom* random);

}  // namespace tandem::dp

#endif  // TANDEM_CRYPTO_DP_DISCRETE_GAUSSIAN_H_
