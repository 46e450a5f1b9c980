// The aggregator's own privacy accounting (aggregator/core/policy.h) and the
// hash both servers compare for a report in the verification exchange.
#include <limits>

#include "aggregator/core/aggregator.h"
#include "aggregator/core/task.h"
#include "base/status_macros.h"
#include "openssl/sha.h"

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
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, kCheckHashTag, sizeof(kCheckHashTag));  // with its NUL
  const uint8_t lengths[2] = {static_cast<uint8_t>(report_id.size()),
                              static_cast<uint8_t>(ticket_digest.size())};
  SHA256_Update(&ctx, lengths, sizeof(lengths));
  SHA256_Update(&ctx, report_id.data(), report_id.size());
  SHA256_Update(&ctx, ticket_digest.data(), ticket_digest.size());
  SHA256_Update(&ctx, digest.data(), digest.size());
  std::string out(SHA256_DIGEST_LENGTH, '\0');
  SHA256_Final(reinterpret_cast<unsigned char*>(out.data()), &ctx);
  return out;
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
