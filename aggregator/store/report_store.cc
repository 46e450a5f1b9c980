#include "aggregator/store/report_store.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator {

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> ReportStore::GetReports(
    absl::Span<const std::string> report_ids) {
  absl::flat_hash_map<std::string, ReportRecord> out;
  for (const std::string& id : report_ids) {
    TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
    absl::StatusOr<ReportRecord> r = GetReport(id);
    if (absl::IsNotFound(r.status())) continue;
    if (!r.ok()) return r.status();
    out.insert_or_assign(id, *std::move(r));
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> ReportStore::GetReportStates(
    absl::Span<const std::string> report_ids) {
  TANDEM_ASSIGN_OR_RETURN(auto out, GetReports(report_ids));
  for (auto& [id, r] : out) r.share.clear();
  return out;
}

absl::Status ReportStore::CountAndRelease(int64_t round_id, absl::string_view counted,
                                          absl::Span<const std::string> newly_counted,
                                          absl::string_view released) {
  if (!newly_counted.empty()) {
    TANDEM_RETURN_IF_ERROR(SaveAccumulator(round_id, counted, newly_counted));
  }
  return ReleaseRound(round_id, released);
}

absl::StatusOr<std::vector<ReportRecord>> ReportStore::ListReportStates(int64_t round_id,
                                                                        ReportFilter filter) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> out, ListReports(round_id, filter));
  for (ReportRecord& r : out) r.share.clear();
  return out;
}

std::string DigestOf(const PendingReport& r) {
  return r.share_digest.empty() ? ShareDigest(r.share) : r.share_digest;
}

std::string ShareDigest(absl::string_view share) {
  // A StoredReportShare with a key set and nothing unknown at its top two
  // levels. A bare SparseKeySet never passes: its num_groups (field 2,
  // varint) lands in StoredReportShare's unknown fields, field 2 being a
  // message there.
  proto::StoredReportShare stored;
  if (!share.empty() && share.size() <= kMaxShareBytes &&
      stored.ParseFromArray(share.data(), static_cast<int>(share.size())) &&
      stored.has_key_share() && !stored.has_dense_share() &&
      stored.GetReflection()->GetUnknownFields(stored).empty() &&
      stored.key_share().GetReflection()->GetUnknownFields(stored.key_share()).empty()) {
    std::string digest = crypto::UploadContentDigest(
        stored.key_share(), stored.has_norm_proof() ? &stored.norm_proof() : nullptr,
        stored.ticket_digest());
    if (!digest.empty()) return digest;
  }
  return crypto::Sha256Digest(share);
}

absl::Status ValidateRoundId(int64_t round_id) {
  if (round_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("round id must be >= 0, got ", round_id));
  }
  return absl::OkStatus();
}

absl::Status ValidateReportId(absl::string_view report_id) {
  if (report_id.empty() || report_id.size() > kMaxReportIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "report id must have 1..", kMaxReportIdBytes, " bytes, got ", report_id.size()));
  }
  return absl::OkStatus();
}

absl::Status ValidateShare(absl::string_view share) {
  if (share.size() > kMaxShareBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("share of ", share.size(), " bytes exceeds ", kMaxShareBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateParameters(absl::string_view parameters) {
  if (parameters.size() > kMaxParametersBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("round parameters of ", parameters.size(), " bytes exceed ", kMaxParametersBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateReplicaId(absl::string_view replica_id) {
  const bool sized = !replica_id.empty() && replica_id.size() <= 63;
  const bool charset = std::all_of(replica_id.begin(), replica_id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (!sized || !charset) {
    return absl::InvalidArgumentError("replica_id must be 1 to 63 characters of [A-Za-z0-9._-]");
  }
  return absl::OkStatus();
}

absl::Status ValidateRoundSecret(absl::string_view secret) {
  if (secret.empty() || secret.size() > 1024) {
    return absl::InvalidArgumentError("a round secret must have 1 to 1024 bytes");
  }
  return absl::OkStatus();
}

absl::Status ValidateAccumulatorUpdate(absl::string_view bytes,
                                       absl::Span<const std::string> newly_counted) {
  if (bytes.size() > kMaxAccumulatorBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("accumulator of ", bytes.size(), " bytes exceeds ", kMaxAccumulatorBytes));
  }
  std::set<absl::string_view> seen;
  for (const std::string& id : newly_counted) {
    TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError("SaveAccumulator: duplicate report id in newly_counted");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCountAndRelease(int64_t round_id, absl::string_view counted,
                                     absl::Span<const std::string> newly_counted,
                                     absl::string_view released) {
  TANDEM_RETURN_IF_ERROR(ValidateRoundId(round_id));
  TANDEM_RETURN_IF_ERROR(ValidateAccumulatorUpdate(counted, newly_counted));
  return ValidateAccumulatorUpdate(released, {});
}

absl::Status ValidateCommitBatch(absl::string_view bytes,
                                 absl::Span<const std::string> accept_and_count,
                                 absl::Span<const std::string> reject) {
  if (bytes.size() > kMaxAccumulatorBytes) {
    return absl::InvalidArgumentError("accumulator larger than kMaxAccumulatorBytes");
  }
  absl::flat_hash_set<std::string> seen;
  for (absl::Span<const std::string> list : {accept_and_count, reject}) {
    for (const std::string& id : list) {
      TANDEM_RETURN_IF_ERROR(ValidateReportId(id));
      if (!seen.insert(id).second) {
        return absl::InvalidArgumentError("CommitBatch names a report id twice");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CorruptStore(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("report store: corrupt ", what));
}

absl::Status CheckStoredReportRow(int64_t state, int64_t counted, ReportRecord* r) {
  if (!ValidateReportId(r->report_id).ok() || r->round_id < 0) {
    return CorruptStore("report id/round");
  }
  if (state < 0 || state > 2) return CorruptStore("report state");
  r->state = static_cast<ReportState>(state);
  if (counted != 0 && counted != 1) return CorruptStore("report counted flag");
  r->counted = counted == 1;
  if (r->counted && r->state != ReportState::kAccepted) {
    return CorruptStore("counted report not accepted");
  }
  if (r->share_digest.size() != 32) return CorruptStore("share digest");
  return absl::OkStatus();
}

absl::Status AddStateCount(int64_t state, int64_t n, ReportCounts* counts) {
  switch (state) {
    case 0:
      counts->pending = n;
      return absl::OkStatus();
    case 1:
      counts->accepted = n;
      return absl::OkStatus();
    case 2:
      counts->rejected = n;
      return absl::OkStatus();
    default:
      return CorruptStore("report state");
  }
}

bool KeepsShare(const ReportRecord& r) {
  return r.state == ReportState::kPending || (r.state == ReportState::kAccepted && !r.counted);
}

absl::Status CheckStoredShare(const ReportRecord& r) {
  if (r.share.size() > kMaxShareBytes) return CorruptStore("share size");
  // Stores written before 2026-12-07 hold SHA-256 of every share.
  if (KeepsShare(r) && ShareDigest(r.share) != r.share_digest &&
      crypto::Sha256Digest(r.share) != r.share_digest) {
    return CorruptStore("share (digest mismatch)");
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
