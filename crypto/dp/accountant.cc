#include "crypto/dp/accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "crypto/dp/block_sampling.h"

namespace tandem::dp {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int kMaxSeriesTerms = 2'000'000;

double LogAdd(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

// log(exp(a) - exp(b)); REQUIRES a >= b.
double LogSub(double a, double b) {
  if (b == kNegInf) return a;
  if (a == b) return kNegInf;
  return a + std::log1p(-std::exp(b - a));
}

// log(erfc(x)), accurate for large x via the asymptotic series
// erfc(x) ~ exp(-x^2) / (x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)).
double LogErfc(double x) {
  if (x < 25.0) return std::log(std::erfc(x));
  const double x2 = x * x;
  const double series = 1.0 - 1.0 / (2 * x2) + 3.0 / (4 * x2 * x2) - 15.0 / (8 * x2 * x2 * x2);
  return -x2 - std::log(x) - 0.5 * std::log(M_PI) + std::log(series);
}

// log A_a for integer a >= 2 [MTZ19, Sec. 3.3, integer case].
double LogAInteger(double q, double sigma, int64_t alpha) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double lg_a1 = std::lgamma(static_cast<double>(alpha) + 1);
  double log_a = kNegInf;
  for (int64_t i = 0; i <= alpha; ++i) {
    const double di = static_cast<double>(i);
    const double log_binom =
        lg_a1 - std::lgamma(di + 1) - std::lgamma(static_cast<double>(alpha - i) + 1);
    const double term = log_binom + di * log_q + static_cast<double>(alpha - i) * log_1mq +
                        (di * di - di) / (2 * sigma * sigma);
    log_a = LogAdd(log_a, term);
  }
  return log_a;
}

// log A_a for fractional a > 1 [MTZ19, Sec. 3.3]: A_a = A_0 + A_1 with
//   A_0 = sum_i C(a,i) q^i (1-q)^(a-i) exp((i^2-i)/(2s^2)) erfc((i - z0)/(sqrt(2) s)) / 2,
//   A_1 = sum_i C(a,i) q^(a-i) (1-q)^i exp((j^2-j)/(2s^2)) erfc((z0 - j)/(sqrt(2) s)) / 2,
// where j = a - i and z0 = s^2 log(1/q - 1) + 1/2. C(a,i) changes sign for
// i > a, so positive and negative parts are summed separately.
absl::StatusOr<double> LogAFractional(double q, double sigma, double alpha) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double z0 = sigma * sigma * (std::log(1 / q - 1)) + 0.5;
  const double s2 = 2 * sigma * sigma;
  const double sqrt2s = std::sqrt(2.0) * sigma;
  double pos0 = kNegInf, neg0 = kNegInf, pos1 = kNegInf, neg1 = kNegInf;
  double log_coef = 0;  // log |C(a, i)|
  bool coef_negative = false;
  for (int i = 0; i < kMaxSeriesTerms; ++i) {
    const double di = i;
    const double j = alpha - di;
    const double log_t0 = log_coef + di * log_q + j * log_1mq;
    const double log_t1 = log_coef + j * log_q + di * log_1mq;
    const double log_e0 = std::log(0.5) + LogErfc((di - z0) / sqrt2s);
    const double log_e1 = std::log(0.5) + LogErfc((z0 - j) / sqrt2s);
    const double log_s0 = log_t0 + (di * di - di) / s2 + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / s2 + log_e1;
    if (coef_negative) {
      neg0 = LogAdd(neg0, log_s0);
      neg1 = LogAdd(neg1, log_s1);
    } else {
      pos0 = LogAdd(pos0, log_s0);
      pos1 = LogAdd(pos1, log_s1);
    }
    if (di > alpha && std::max(log_s0, log_s1) < -30) {
      if (neg0 > pos0 || neg1 > pos1) {
        return absl::InternalError("RDP series: negative partial sum (numerical failure)");
      }
      return LogAdd(LogSub(pos0, neg0), LogSub(pos1, neg1));
    }
    // C(a, i+1) = C(a, i) (a - i) / (i + 1).
    const double factor = alpha - di;
    log_coef += std::log(std::fabs(factor)) - std::log(di + 1);
    if (factor < 0) coef_negative = !coef_negative;
  }
  return absl::InternalError(
      absl::StrCat("RDP series did not converge (q=", q, ", sigma=", sigma, ", order=", alpha, ")"));
}

absl::Status ValidateMechanism(double q, double sigma) {
  if (!(q >= 0.0 && q <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling rate q must be in [0, 1], got ", q));
  }
  if (!(sigma > 0.0) || !std::isfinite(sigma)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise multiplier must be finite and > 0, got ", sigma));
  }
  return absl::OkStatus();
}

absl::Status ValidateOrders(absl::Span<const double> orders) {
  if (orders.empty()) return absl::InvalidArgumentError("RDP orders: empty");
  for (double a : orders) {
    if (!(a > 1.0) || !std::isfinite(a)) {
      return absl::InvalidArgumentError(absl::StrCat("RDP order must be finite and > 1, got ", a));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDelta(double delta) {
  if (!(delta > 0.0 && delta < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
  }
  return absl::OkStatus();
}

absl::Status ValidateSteps(int64_t steps) {
  if (steps < 0 || steps > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat("steps must be in [0, 2^40], got ", steps));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<double> DefaultOrders() {
  std::vector<double> orders = {1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5};
  for (int a = 5; a < 64; ++a) orders.push_back(a);
  orders.insert(orders.end(), {128., 256., 512.});
  return orders;
}

absl::StatusOr<double> RdpSubsampledGaussian(double q, double sigma, double order) {
  TANDEM_RETURN_IF_ERROR(ValidateMechanism(q, sigma));
  TANDEM_RETURN_IF_ERROR(ValidateOrders(absl::MakeConstSpan(&order, 1)));
  if (q == 0.0) return 0.0;
  if (q == 1.0) return order / (2 * sigma * sigma);
  double log_a;
  if (order == std::floor(order) && order < 1e7) {
    log_a = LogAInteger(q, sigma, static_cast<int64_t>(order));
  } else {
    TANDEM_ASSIGN_OR_RETURN(log_a, LogAFractional(q, sigma, order));
  }
  return std::max(0.0, log_a / (order - 1));
}

absl::StatusOr<double> RdpGaussian(double sigma, double order) {
  return RdpSubsampledGaussian(1.0, sigma, order);
}

absl::StatusOr<std::vector<double>> ComputeRdp(double q, double sigma, int64_t steps,
                                               absl::Span<const double> orders,
                                               int64_t blocks_per_group) {
  TANDEM_RETURN_IF_ERROR(ValidateSteps(steps));
  TANDEM_RETURN_IF_ERROR(ValidateOrders(orders));
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double a : orders) {
    TANDEM_ASSIGN_OR_RETURN(const double r, RdpBlockSampledGaussian(q, sigma, blocks_per_group, a));
    rdp.push_back(r * static_cast<double>(steps));
  }
  return rdp;
}

absl::StatusOr<PrivacySpent> EpsilonFromRdp(absl::Span<const double> orders,
                                            absl::Span<const double> rdp, double delta,
                                            EpsilonConversion conversion) {
  TANDEM_RETURN_IF_ERROR(ValidateOrders(orders));
  TANDEM_RETURN_IF_ERROR(ValidateDelta(delta));
  if (orders.size() != rdp.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDP curve has ", rdp.size(), " values for ", orders.size(), " orders"));
  }
  PrivacySpent best{std::numeric_limits<double>::infinity(), orders[0]};
  const double log_delta = std::log(delta);
  for (size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k];
    if (!(rdp[k] >= 0.0)) {
      return absl::InvalidArgumentError(absl::StrCat("RDP value must be >= 0, got ", rdp[k]));
    }
    double eps;
    if (conversion == EpsilonConversion::kClassic) {
      eps = rdp[k] - log_delta / (a - 1);
    } else {
      eps = rdp[k] + std::log((a - 1) / a) - (log_delta + std::log(a)) / (a - 1);
    }
    eps = std::max(0.0, eps);
    if (eps < best.epsilon) best = {eps, a};
  }
  return best;
}

absl::StatusOr<PrivacySpent> ComputeEpsilon(double q, double sigma, int64_t steps, double delta,
                                            absl::Span<const double> orders,
                                            EpsilonConversion conversion) {
  TANDEM_ASSIGN_OR_RETURN(const std::vector<double> rdp, ComputeRdp(q, sigma, steps, orders));
  return EpsilonFromRdp(orders, rdp, delta, conversion);
}

// ------------------------------------------------------- PrivacyAccountant

PrivacyAccountant::PrivacyAccountant(AccountantOptions options)
    : options_(std::move(options)), rdp_(options_.orders.size(), 0.0) {
  spent_.order = options_.orders.empty() ? 0 : options_.orders[0];
}

absl::StatusOr<PrivacyAccountant> PrivacyAccountant::Create(AccountantOptions options) {
  TANDEM_RETURN_IF_ERROR(ValidateOrders(options.orders));
  TANDEM_RETURN_IF_ERROR(ValidateDelta(options.delta));
  if (!(options.epsilon_budget > 0.0) || !std::isfinite(options.epsilon_budget)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon budget must be finite and > 0, got ", options.epsilon_budget));
  }
  if (options.conversion != EpsilonConversion::kClassic &&
      options.conversion != EpsilonConversion::kImproved) {
    return absl::InvalidArgumentError("unknown epsilon conversion");
  }
  return PrivacyAccountant(std::move(options));
}

absl::Status PrivacyAccountant::AddEntry(const LedgerEntry& entry, std::vector<double>& rdp) const {
  TANDEM_RETURN_IF_ERROR(ValidateMechanism(entry.q, entry.sigma));
  if (entry.steps < 1 || entry.steps > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat("steps must be in [1, 2^40], got ", entry.steps));
  }
  TANDEM_ASSIGN_OR_RETURN(
      const std::vector<double> add,
      ComputeRdp(entry.q, entry.sigma, entry.steps, options_.orders, entry.blocks_per_group));
  for (size_t k = 0; k < rdp.size(); ++k) rdp[k] += add[k];
  return absl::OkStatus();
}

absl::StatusOr<double> PrivacyAccountant::EpsilonIfCharged(double q, double sigma, int64_t steps,
                                                           int64_t blocks_per_group) const {
  std::vector<double> rdp = rdp_;
  TANDEM_RETURN_IF_ERROR(AddEntry({q, sigma, steps, blocks_per_group}, rdp));
  TANDEM_ASSIGN_OR_RETURN(const PrivacySpent s,
                          EpsilonFromRdp(options_.orders, rdp, options_.delta, options_.conversion));
  return s.epsilon;
}

absl::Status PrivacyAccountant::Charge(double q, double sigma, int64_t steps,
                                       int64_t blocks_per_group) {
  std::vector<double> rdp = rdp_;
  TANDEM_RETURN_IF_ERROR(AddEntry({q, sigma, steps, blocks_per_group}, rdp));
  TANDEM_ASSIGN_OR_RETURN(const PrivacySpent s,
                          EpsilonFromRdp(options_.orders, rdp, options_.delta, options_.conversion));
  if (s.epsilon > options_.epsilon_budget) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "privacy budget exhausted: charging %d round(s) would spend epsilon %.6g > budget %.6g "
        "(spent %.6g)", steps, s.epsilon, options_.epsilon_budget, spent_.epsilon));
  }
  rdp_ = std::move(rdp);
  spent_ = s;
  if (!ledger_.empty() && ledger_.back().q == q && ledger_.back().sigma == sigma &&
      ledger_.back().blocks_per_group == blocks_per_group) {
    ledger_.back().steps += steps;
  } else {
    ledger_.push_back({q, sigma, steps, blocks_per_group});
  }
  return absl::OkStatus();
}

int64_t PrivacyAccountant::TotalSteps() const {
  int64_t total = 0;
  for (const LedgerEntry& e : ledger_) total += e.steps;
  return total;
}

// Format (one record per line, doubles as C99 hex floats so that a
// checkpoint restores bit-identical state):
//   tandem-rdp-accountant v1
//   conversion <classic|improved>
//   delta <hex>
//   budget <hex>
//   orders <n> <hex>...
//   entries <m>
//   entry <q hex> <sigma hex> <steps> [<blocks per group> when > 1]  (m lines)
std::string PrivacyAccountant::Serialize() const {
  std::string out = "tandem-rdp-accountant v1\n";
  absl::StrAppend(&out, "conversion ",
                  options_.conversion == EpsilonConversion::kClassic ? "classic" : "improved", "\n");
  absl::StrAppend(&out, absl::StrFormat("delta %a\nbudget %a\n", options_.delta, options_.epsilon_budget));
  absl::StrAppend(&out, "orders ", options_.orders.size());
  for (double a : options_.orders) absl::StrAppend(&out, absl::StrFormat(" %a", a));
  absl::StrAppend(&out, "\nentries ", ledger_.size(), "\n");
  for (const LedgerEntry& e : ledger_) {
    // The fourth field only with block sampling: checkpoints without it
    // read as 1, and a ledger without block sampling writes what it did.
    absl::StrAppend(&out, absl::StrFormat("entry %a %a %d", e.q, e.sigma, e.steps),
                    e.blocks_per_group == 1 ? "" : absl::StrCat(" ", e.blocks_per_group), "\n");
  }
  return out;
}

namespace {

absl::StatusOr<double> ParseDouble(absl::string_view s) {
  const std::string owned(s);
  if (owned.empty()) return absl::InvalidArgumentError("accountant checkpoint: empty number");
  char* end = nullptr;
  const double v = std::strtod(owned.c_str(), &end);
  if (end != owned.c_str() + owned.size() || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("accountant checkpoint: bad number '", s, "'"));
  }
  return v;
}

absl::StatusOr<int64_t> ParseInt(absl::string_view s) {
  int64_t v;
  if (!absl::SimpleAtoi(s, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("accountant checkpoint: bad integer '", s, "'"));
  }
  return v;
}

absl::StatusOr<std::vector<absl::string_view>> Fields(absl::string_view line,
                                                      absl::string_view key) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
  if (f.empty() || f[0] != key) {
    return absl::InvalidArgumentError(
        absl::StrCat("accountant checkpoint: expected '", key, "', got '", line.substr(0, 40), "'"));
  }
  f.erase(f.begin());
  return f;
}

}  // namespace

absl::StatusOr<PrivacyAccountant> PrivacyAccountant::Deserialize(absl::string_view text) {
  if (text.size() > (1 << 20)) return absl::InvalidArgumentError("accountant checkpoint: too large");
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.size() < 6 || lines[0] != "tandem-rdp-accountant v1") {
    return absl::InvalidArgumentError("accountant checkpoint: bad header or truncated");
  }
  AccountantOptions o;
  TANDEM_ASSIGN_OR_RETURN(auto conv, Fields(lines[1], "conversion"));
  if (conv.size() != 1 || (conv[0] != "classic" && conv[0] != "improved")) {
    return absl::InvalidArgumentError("accountant checkpoint: bad conversion");
  }
  o.conversion = conv[0] == "classic" ? EpsilonConversion::kClassic : EpsilonConversion::kImproved;
  TANDEM_ASSIGN_OR_RETURN(auto delta, Fields(lines[2], "delta"));
  if (delta.size() != 1) return absl::InvalidArgumentError("accountant checkpoint: bad delta");
  TANDEM_ASSIGN_OR_RETURN(o.delta, ParseDouble(delta[0]));
  TANDEM_ASSIGN_OR_RETURN(auto budget, Fields(lines[3], "budget"));
  if (budget.size() != 1) return absl::InvalidArgumentError("accountant checkpoint: bad budget");
  TANDEM_ASSIGN_OR_RETURN(o.epsilon_budget, ParseDouble(budget[0]));
  TANDEM_ASSIGN_OR_RETURN(auto orders, Fields(lines[4], "orders"));
  if (orders.empty()) return absl::InvalidArgumentError("accountant checkpoint: bad orders");
  TANDEM_ASSIGN_OR_RETURN(const int64_t n_orders, ParseInt(orders[0]));
  if (n_orders < 1 || n_orders > 10000 || static_cast<size_t>(n_orders) != orders.size() - 1) {
    return absl::InvalidArgumentError("accountant checkpoint: order count mismatch");
  }
  o.orders.clear();
  for (size_t k = 1; k < orders.size(); ++k) {
    TANDEM_ASSIGN_OR_RETURN(const double a, ParseDouble(orders[k]));
    o.orders.push_back(a);
  }
  TANDEM_ASSIGN_OR_RETURN(auto entries, Fields(lines[5], "entries"));
  if (entries.size() != 1) return absl::InvalidArgumentError("accountant checkpoint: bad entries");
  TANDEM_ASSIGN_OR_RETURN(const int64_t n_entries, ParseInt(entries[0]));
  if (n_entries < 0 || static_cast<size_t>(n_entries) != lines.size() - 6) {
    return absl::InvalidArgumentError("accountant checkpoint: entry count mismatch");
  }
  TANDEM_ASSIGN_OR_RETURN(PrivacyAccountant acc, Create(std::move(o)));
  for (size_t k = 6; k < lines.size(); ++k) {
    TANDEM_ASSIGN_OR_RETURN(auto f, Fields(lines[k], "entry"));
    if (f.size() != 3 && f.size() != 4) {
      return absl::InvalidArgumentError("accountant checkpoint: bad entry");
    }
    LedgerEntry e;
    TANDEM_ASSIGN_OR_RETURN(e.q, ParseDouble(f[0]));
    TANDEM_ASSIGN_OR_RETURN(e.sigma, ParseDouble(f[1]));
    TANDEM_ASSIGN_OR_RETURN(e.steps, ParseInt(f[2]));
    if (f.size() == 4) {
      TANDEM_ASSIGN_OR_RETURN(e.blocks_per_group, ParseInt(f[3]));
    }
    TANDEM_RETURN_IF_ERROR(acc.AddEntry(e, acc.rdp_));
    acc.ledger_.push_back(e);
  }
  TANDEM_ASSIGN_OR_RETURN(acc.spent_, EpsilonFromRdp(acc.options_.orders, acc.rdp_,
                                                     acc.options_.delta, acc.options_.conversion));
  if (acc.ledger_.empty()) acc.spent_.epsilon = 0;
  if (acc.spent_.epsilon > acc.options_.epsilon_budget) {
    return absl::InvalidArgumentError(
        "accountant checkpoint: ledger spends more than its budget (tampered or corrupt)");
  }
  return acc;
}

}  // namespace tandem::dp
