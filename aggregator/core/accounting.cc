// The aggregator's own privacy accounting (aggregator/core/policy.h) and the
// hash both servers compare for a report in the verification exchange.
#include <limits>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/task.h"
#include "base/status_macros.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator {
namespace {

constexpr char kCheckHashTag[] = "tandem.report_check.v1";

}  // namespace

absl::StatusOr<dp::PrivacyAccountant> MakeAccountant(const Policy& policy) {
  dp::AccountantOptions o;
  o.delta = policy.delta;
  o.epsilon_budget = std::numeric_limits<double>::max();
  return dp::PrivacyAccountant::Create(o);
}

std::string BoundCheckHash(absl::string_view report_id, absl::string_view ticket_digest,
                           const crypto::ProofDigest& digest) {
  // tag (with its NUL) | len(report_id) | len(ticket_digest) | report_id |
  // ticket_digest | digest, the lengths one byte each.
  std::string message(kCheckHashTag, sizeof(kCheckHashTag));
  message.push_back(static_cast<char>(static_cast<uint8_t>(report_id.size())));
  message.push_back(static_cast<char>(static_cast<uint8_t>(ticket_digest.size())));
  absl::StrAppend(&message, report_id, ticket_digest,
                  absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
  return crypto::Sha256Digest(message);
}

absl::StatusOr<double> Aggregator::EpsilonWith(const Task& task,
                                               const proto::RoundParameters& p) const {
  TANDEM_ASSIGN_OR_RETURN(const double z, NoiseMultiplierOf(p));
  if (z == 0 || task.released_without_noise) return std::numeric_limits<double>::infinity();
  return task.accountant->EpsilonIfCharged(task.policy.sampling_rate, z, 1);
}

absl::Status Aggregator::ChargeRelease(Task& task, const proto::RoundParameters& p) {
  TANDEM_ASSIGN_OR_RETURN(const double z, NoiseMultiplierOf(p));
  ++task.released_rounds;
  LedgerReleased(task.id, task.policy.sampling_rate, z, static_cast<int64_t>(p.round_id()));
  if (z == 0) {
    task.released_without_noise = true;
    return absl::OkStatus();
  }
  return task.accountant->Charge(task.policy.sampling_rate, z, 1);
}

}  // namespace tandem::aggregator
