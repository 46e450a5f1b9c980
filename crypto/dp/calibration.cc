#include "crypto/dp/calibration.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::dp {
namespace {

absl::Status ValidateTarget(double target_epsilon) {
  if (!(target_epsilon > 0.0) || !std::isfinite(target_epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target epsilon must be finite and > 0, got ", target_epsilon));
  }
  return absl::OkStatus();
}

// Adds `steps` rounds of (q, sigma, blocks) to the curve `rdp`.
absl::Status AddCurve(const PlannedReleases& r, double sigma, absl::Span<const double> orders,
                      std::vector<double>* rdp) {
  TANDEM_ASSIGN_OR_RETURN(const std::vector<double> c,
                          ComputeRdp(r.q, sigma, r.steps, orders, r.blocks_per_group));
  for (size_t k = 0; k < c.size(); ++k) (*rdp)[k] += c[k];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> MaxSteps(double q, double sigma, double target_epsilon, double delta,
                                 absl::Span<const double> orders, EpsilonConversion conversion) {
  TANDEM_RETURN_IF_ERROR(ValidateTarget(target_epsilon));
  TANDEM_ASSIGN_OR_RETURN(const std::vector<double> per_step, ComputeRdp(q, sigma, 1, orders));
  std::vector<double> scaled(per_step.size());
  auto fits = [&](int64_t steps) -> absl::StatusOr<bool> {
    for (size_t k = 0; k < per_step.size(); ++k)
      scaled[k] = per_step[k] * static_cast<double>(steps);
    TANDEM_ASSIGN_OR_RETURN(const PrivacySpent s,
                            EpsilonFromRdp(orders, scaled, delta, conversion));
    return s.epsilon <= target_epsilon;
  };
  // Exponential search for an upper bracket, then bisection (eps grows with steps).
  int64_t lo = 0, hi = 1;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const bool ok, fits(hi));
    if (!ok) break;
    lo = hi;
    if (hi >= kMaxSteps) return kMaxSteps;
    hi = std::min(hi * 2, kMaxSteps);
  }
  while (hi - lo > 1) {  // invariant: fits(lo) (or lo == 0), !fits(hi)
    const int64_t mid = lo + (hi - lo) / 2;
    TANDEM_ASSIGN_OR_RETURN(const bool ok, fits(mid));
    (ok ? lo : hi) = mid;
  }
  return lo;
}

absl::StatusOr<double> MinNoiseMultiplier(absl::Span<const PlannedReleases> plan,
                                          double target_epsilon, double delta,
                                          absl::Span<const double> orders,
                                          EpsilonConversion conversion) {
  TANDEM_RETURN_IF_ERROR(ValidateTarget(target_epsilon));
  if (plan.empty()) return absl::InvalidArgumentError("the release plan is empty");
  bool calibrated = false;
  std::vector<double> fixed(orders.size(), 0.0);
  for (const PlannedReleases& r : plan) {
    if (r.steps < 1 || r.steps > kMaxSteps) {
      return absl::InvalidArgumentError(
          absl::StrCat("planned steps must be in [1, 2^40], got ", r.steps));
    }
    if (!(r.sigma >= 0.0) || !std::isfinite(r.sigma)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a planned noise multiplier must be finite and >= 0, got ", r.sigma));
    }
    if (r.sigma == 0.0) {
      calibrated = true;
      // Validates q, blocks and orders once, before the search.
      TANDEM_RETURN_IF_ERROR(ComputeRdp(r.q, 1.0, r.steps, orders, r.blocks_per_group).status());
    } else {
      TANDEM_RETURN_IF_ERROR(AddCurve(r, r.sigma, orders, &fixed));
    }
  }
  if (!calibrated)
    return absl::InvalidArgumentError("no planned release has the noise to calibrate");
  TANDEM_ASSIGN_OR_RETURN(const PrivacySpent floor,
                          EpsilonFromRdp(orders, fixed, delta, conversion));
  if (floor.epsilon > target_epsilon) {
    return absl::NotFoundError(
        absl::StrCat("no noise multiplier reaches epsilon ", target_epsilon,
                     ": the releases at fixed noise and delta's term alone spend ", floor.epsilon));
  }
  std::vector<double> rdp;
  auto eps_at = [&](double sigma) -> absl::StatusOr<double> {
    rdp = fixed;
    for (const PlannedReleases& r : plan) {
      if (r.sigma == 0.0) TANDEM_RETURN_IF_ERROR(AddCurve(r, sigma, orders, &rdp));
    }
    TANDEM_ASSIGN_OR_RETURN(const PrivacySpent s, EpsilonFromRdp(orders, rdp, delta, conversion));
    return s.epsilon;
  };
  constexpr double kMaxSigma = 1e6;
  double hi = 1.0;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(const double e, eps_at(hi));
    if (e <= target_epsilon) break;
    hi *= 2;
    if (hi > kMaxSigma) {
      return absl::NotFoundError(
          absl::StrCat("no noise multiplier <= 1e6 reaches epsilon ", target_epsilon));
    }
  }
  double lo = hi / 2;
  while (true) {  // Ensure eps(lo) > target (else shrink lo).
    if (lo < 1e-3) {
      lo = 0;
      break;
    }
    TANDEM_ASSIGN_OR_RETURN(const double e, eps_at(lo));
    if (e > target_epsilon) break;
    hi = lo;
    lo /= 2;
  }
  while (hi - lo > 1e-6 * hi) {  // invariant: eps(hi) <= target < eps(lo)
    const double mid = 0.5 * (lo + hi);
    TANDEM_ASSIGN_OR_RETURN(const double e, eps_at(mid));
    (e <= target_epsilon ? hi : lo) = mid;
  }
  return hi;
}

absl::StatusOr<double> MinNoiseMultiplier(double q, int64_t steps, double target_epsilon,
                                          double delta, absl::Span<const double> orders,
                                          EpsilonConversion conversion) {
  const PlannedReleases plan{.q = q, .steps = steps};
  return MinNoiseMultiplier(absl::MakeConstSpan(&plan, 1), target_epsilon, delta, orders,
                            conversion);
}

}  // namespace tandem::dp
