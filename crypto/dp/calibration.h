// Inverses of the RDP accountant (accountant.h): how many rounds a budget
// buys at a given noise, and the least noise a planned task needs to stay
// within a target epsilon (what a task's `privacy.target_epsilon` sets, and
// Opacus' make_private_with_epsilon offers for DP-SGD).
//
// A plan is a list of release kinds, composed by adding RDP curves [Mironov
// 2017, Prop. 1]: a task's training rounds (with PREAMBLE's block sampling
// when clients pick random blocks: RdpBlockSampledGaussian,
// block_sampling.h) and its private evaluation rounds. Epsilon falls as the
// noise multiplier grows (each per-round bound is non-increasing in sigma),
// so the search is a bisection.
//
// Pure functions, thread-safe.
#ifndef TANDEM_CRYPTO_DP_CALIBRATION_H_
#define TANDEM_CRYPTO_DP_CALIBRATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/dp/accountant.h"

namespace tandem::dp {

// Largest number of rounds whose epsilon stays <= target_epsilon (0 when a
// single round already exceeds it; capped at kMaxSteps). Bisection over
// steps. INVALID_ARGUMENT for a target that is not finite and > 0, or for
// what ComputeRdp refuses.
absl::StatusOr<int64_t> MaxSteps(double q, double sigma, double target_epsilon, double delta,
                                 absl::Span<const double> orders, EpsilonConversion conversion);

// `steps` releases at sampling rate q, each client sending one of
// `blocks_per_group` random blocks per group (1: every value), at noise
// multiplier `sigma`, or at the one being calibrated when sigma is 0.
struct PlannedReleases {
  double q = 0;
  int64_t steps = 0;
  int64_t blocks_per_group = 1;
  double sigma = 0;
};

// Smallest noise multiplier (to relative precision 1e-6, rounded up) for
// which the whole plan stays within target_epsilon. INVALID_ARGUMENT for
// an empty plan, one without an entry at sigma 0, steps outside
// [1, kMaxSteps], a fixed sigma that is negative or not finite, a bad q,
// blocks_per_group, delta or orders; NOT_FOUND when even sigma = 1e6 (or,
// for the fixed entries alone, any sigma) does not suffice.
absl::StatusOr<double> MinNoiseMultiplier(absl::Span<const PlannedReleases> plan,
                                          double target_epsilon, double delta,
                                          absl::Span<const double> orders,
                                          EpsilonConversion conversion);

// The same for `steps` rounds at rate q without block sampling.
absl::StatusOr<double> MinNoiseMultiplier(double q, int64_t steps, double target_epsilon,
                                          double delta, absl::Span<const double> orders,
                                          EpsilonConversion conversion);

}  // namespace tandem::dp

#endif  // TANDEM_CRYPTO_DP_CALIBRATION_H_
