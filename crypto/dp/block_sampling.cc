#include "crypto/dp/block_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dp/accountant.h"

namespace tandem::dp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// (1-q)^(-b) - 1 - b q for 0 < q < 1, b > 0, without the cancellation of
// the direct form at small q: for q <= 1/2 the binomial series
// sum_{n>=2} C(b+n-1, n) q^n (all terms positive); above, directly.
absl::StatusOr<double> CurvatureTerm(double q, double b) {
  if (q > 0.5) {
    const double log_pow = -b * std::log1p(-q);
    if (log_pow > 700) return kInf;
    return std::expm1(log_pow) - b * q;
  }
  double term = b * q;  // n = 1, not summed
  double sum = 0;
  for (int n = 2; n < 100'000; ++n) {
    term *= q * (b + n - 1) / n;
    if (!std::isfinite(term)) return kInf;
    sum += term;
    // Past the largest term (n > b q / (1 - q) + 1) the ratios are < 1 and
    // shrink toward q <= 1/2: the tail is below 2 * term.
    if (n > b + 2 && term < 1e-18 * sum) return sum;
  }
  return absl::InternalError(
      absl::StrCat("curvature series did not converge (q=", q, ", b=", b, ")"));
}

}  // namespace

absl::StatusOr<double> RdpBlockSampledGaussian(double q, double sigma, int64_t blocks_per_group,
                                               double order) {
  // Validates q, sigma and the order; the unamplified bound is also valid.
  TANDEM_ASSIGN_OR_RETURN(const double plain, RdpSubsampledGaussian(q, sigma, order));
  if (blocks_per_group < 1 || blocks_per_group > kMaxBlocksPerGroup) {
    return absl::InvalidArgumentError(
        absl::StrCat("blocks per group must be in [1, 2^24], got ", blocks_per_group));
  }
  if (blocks_per_group == 1 || q == 0.0) return plain;
  const double m = static_cast<double>(blocks_per_group);
  // Remove direction: the subsampled Gaussian at rate q/m, integer order.
  TANDEM_ASSIGN_OR_RETURN(const double remove,
                          RdpSubsampledGaussian(q / m, sigma, std::max(2.0, std::ceil(order))));
  // Add direction: the quadratic bound (q < 1), and q times the Gaussian's
  // (Renyi divergence is convex in its second argument: van Erven and
  // Harremoes 2014, Thm 12), whichever is lower.
  double add = q * order / (2 * sigma * sigma);
  if (q < 1.0) {
    TANDEM_ASSIGN_OR_RETURN(const double c, CurvatureTerm(q, order - 1));
    const double var = std::expm1(1.0 / (sigma * sigma)) / (m * m);
    const double x = c * var;
    if (std::isfinite(x)) add = std::min(add, std::log1p(x) / (order - 1));
  }
  return std::min(plain, std::max(remove, add));
}

}  // namespace tandem::dp
