// The two building blocks of the CKS20 sampler, exposed for the tests of
// crypto/dp only (discrete_gaussian.h is the API). Internal to crypto/dp.
#ifndef TANDEM_CRYPTO_DP_INTERNAL_CKS20_H_
#define TANDEM_CRYPTO_DP_INTERNAL_CKS20_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "crypto/dp/discrete_gaussian.h"
#include "crypto/dp/internal/buffered_random.h"

namespace tandem::dp::internal {

// Draws Bernoulli(exp(-gamma)) for gamma = num/den [CKS20, Algorithm 1].
// Exact. Returns INVALID_ARGUMENT for den == 0, INTERNAL when `random` fails.
absl::StatusOr<bool> SampleBernoulliExpMinus(const Rational& gamma,
                                             BufferedRandom& random);

// Draws the discrete Laplace with P[X = x] proportional to exp(-|x| / t)
// [CKS20, Algorithm 2 with s = 1]. Returns INVALID_ARGUMENT for t == 0 or
// t >= 2^32.
absl::StatusOr<int64_t> SampleDiscreteLaplace(uint64_t t, BufferedRandom& random);

}  // namespace tandem::dp::internal

#endif  // TANDEM_CRYPTO_DP_INTERNAL_CKS20_H_
