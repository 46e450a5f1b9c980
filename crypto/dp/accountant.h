// Renyi-DP accountant for the Poisson-subsampled Gaussian mechanism.
//
// Per-round RDP: Mironov, Talwar, Zhang, "Renyi Differential Privacy of the
// Sampled Gaussian Mechanism", arXiv 1908.10530 (2019) [MTZ19]:
//   integer orders a: A_a = sum_{i=0..a} C(a,i) (1-q)^(a-i) q^i exp((i^2 - i) / (2 s^2)),
//   fractional orders: A_a = A_0 + A_1, the two erfc series of [MTZ19, 3.3];
//   RDP(a) = log(A_a) / (a - 1). Everything is evaluated in log space.
// Without subsampling (q = 1) the Gaussian has RDP(a) = a / (2 s^2) [Mironov
// 2017, Prop. 7]; so does the discrete Gaussian N_Z(0, s^2) for an integer
// query of sensitivity 1 in one dimension [CKS20, Thm 4: (1/(2 s^2))-zCDP].
// For a d-dimensional discrete Gaussian [CKS20, Thm 15] adds a term of order
// d exp(-pi^2 s^2) (s in integer units), negligible for the fixed-point
// scales tandem uses, and not modelled here.
//
// Composition over rounds adds RDP curves [Mironov 2017, Prop. 1].
// Conversion to (epsilon, delta), minimised over the orders:
//   kClassic:  eps = RDP(a) + log(1/delta) / (a - 1)           [Mironov 2017, Prop. 3]
//   kImproved: eps = RDP(a) + log((a-1)/a) - (log(delta) + log(a)) / (a - 1)
//              [Balle, Barthe, Gaboardi, Hsu, Sato, AISTATS 2020, Thm 21;
//               CKS20, Prop. 12]; never larger than kClassic for a >= 1.
//
// The free functions are pure and thread-safe. PrivacyAccountant is a value
// object (no internal locking): the coordinator owns one per task, charges it
// round by round and checkpoints Serialize().
#ifndef TANDEM_CRYPTO_DP_ACCOUNTANT_H_
#define TANDEM_CRYPTO_DP_ACCOUNTANT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem::dp {

enum class EpsilonConversion { kClassic = 0, kImproved = 1 };

// The most steps a curve or a ledger line composes (2^40).
inline constexpr int64_t kMaxSteps = int64_t{1} << 40;

// The orders of TF-Privacy's compute_dp_sgd_privacy: 1.25, 1.5, 1.75, 2,
// 2.25, 2.5, 3, 3.5, 4, 4.5, 5..63, 128, 256, 512.
std::vector<double> DefaultOrders();

// RDP at `order` of one step of the Poisson-subsampled Gaussian with
// sampling rate q and noise multiplier sigma (noise stddev / L2 sensitivity).
// Returns INVALID_ARGUMENT unless 0 <= q <= 1, sigma > 0 (finite) and
// order > 1 (finite); INTERNAL if the series fails to converge.
absl::StatusOr<double> RdpSubsampledGaussian(double q, double sigma, double order);

// RDP of the Gaussian (or, in one dimension, the discrete Gaussian) without
// subsampling: order / (2 sigma^2). Same as RdpSubsampledGaussian(1, ...).
// Returns INVALID_ARGUMENT unless sigma > 0 and order > 1 (both finite).
absl::StatusOr<double> RdpGaussian(double sigma, double order);

// RDP curve of `steps` compositions over `orders`; with blocks_per_group
// > 1, of rounds with PREAMBLE's block sampling (RdpBlockSampledGaussian,
// crypto/dp/block_sampling.h), which is this for 1.
absl::StatusOr<std::vector<double>> ComputeRdp(double q, double sigma, int64_t steps,
                                               absl::Span<const double> orders,
                                               int64_t blocks_per_group = 1);

struct PrivacySpent {
  double epsilon = 0;
  double order = 0;  // The minimising order.
};

// (epsilon, delta) from an RDP curve. Returns INVALID_ARGUMENT for
// mismatched or empty spans, orders <= 1, negative RDP, delta outside (0, 1).
absl::StatusOr<PrivacySpent> EpsilonFromRdp(absl::Span<const double> orders,
                                            absl::Span<const double> rdp, double delta,
                                            EpsilonConversion conversion);

// Epsilon of `steps` rounds (ComputeRdp + EpsilonFromRdp).
absl::StatusOr<PrivacySpent> ComputeEpsilon(double q, double sigma, int64_t steps, double delta,
                                            absl::Span<const double> orders,
                                            EpsilonConversion conversion);

struct AccountantOptions {
  std::vector<double> orders = DefaultOrders();
  double delta = 1e-5;           // Target delta, in (0, 1).
  double epsilon_budget = 1.0;   // Total epsilon the task may spend, > 0.
  EpsilonConversion conversion = EpsilonConversion::kImproved;
};

// One ledger line: `steps` rounds at sampling rate q and noise multiplier
// sigma, each client sending one of `blocks_per_group` blocks per group
// chosen at random (PREAMBLE's block sampling, crypto/dp/block_sampling.h;
// 1: no block sampling).
struct LedgerEntry {
  double q = 0;
  double sigma = 0;
  int64_t steps = 0;
  int64_t blocks_per_group = 1;
};

// The task's privacy ledger. Create() validates the options; Charge()
// refuses a round that would overspend. Not thread-safe; copyable.
class PrivacyAccountant {
 public:
  // Returns INVALID_ARGUMENT for empty/invalid orders, delta outside (0, 1)
  // or a non-positive / non-finite budget.
  static absl::StatusOr<PrivacyAccountant> Create(AccountantOptions options);

  // Epsilon after also charging (q, sigma, steps, blocks_per_group),
  // without charging.
  absl::StatusOr<double> EpsilonIfCharged(double q, double sigma, int64_t steps,
                                          int64_t blocks_per_group = 1) const;
  // Charges `steps` rounds (with block sampling when blocks_per_group > 1:
  // RdpBlockSampledGaussian). Returns RESOURCE_EXHAUSTED (ledger unchanged)
  // when the resulting epsilon would exceed the budget, INVALID_ARGUMENT for
  // bad q/sigma/steps (steps >= 1) or blocks_per_group.
  absl::Status Charge(double q, double sigma, int64_t steps = 1, int64_t blocks_per_group = 1);

  // Epsilon spent so far (0 for an empty ledger).
  double SpentEpsilon() const { return spent_.epsilon; }
  double RemainingEpsilon() const { return options_.epsilon_budget - spent_.epsilon; }
  int64_t TotalSteps() const;
  const std::vector<LedgerEntry>& ledger() const { return ledger_; }
  const AccountantOptions& options() const { return options_; }

  // Text checkpoint (exact: doubles as hex floats). Deserialize validates
  // every field and returns INVALID_ARGUMENT for malformed input, then
  // re-derives the RDP curve from the ledger.
  std::string Serialize() const;
  static absl::StatusOr<PrivacyAccountant> Deserialize(absl::string_view text);

 private:
  explicit PrivacyAccountant(AccountantOptions options);
  absl::Status AddEntry(const LedgerEntry& entry, std::vector<double>& rdp) const;

  AccountantOptions options_;
  std::vector<LedgerEntry> ledger_;  // Consecutive identical mechanisms are merged.
  std::vector<double> rdp_;          // Composed RDP at options_.orders.
  PrivacySpent spent_;
};

}  // namespace tandem::dp

#endif  // TANDEM_CRYPTO_DP_ACCOUNTANT_H_
