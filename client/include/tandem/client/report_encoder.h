// tandem client SDK, C++ API: turn a model update into the two upload
// requests of a private aggregation round (PREAMBLE block-sparse DPF key
// shares, one per aggregation server). What an edge app embeds; the app
// sends `to_leader` to the leader and `to_helper` to the helper (AggregatorUpload
// service, proto/aggregator.proto) over its own transport or the SDK's.
//
//   auto enc = tandem::client::ReportEncoder::Create(spec);   // per round
//   auto report = (*enc)->Encode(update);                      // per client
//
// The round spec comes from the coordinator's CheckInResponse. No Eigen,
// gRPC, CUDA or protobuf types cross this header.
// Thread safety: Encode is const and thread-safe; each call draws fresh
// randomness from OpenSSL (or the SecureRandom given to Create).
#ifndef TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_REPORT_ENCODER_H_
#define TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_REPORT_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem {
class SecureRandom;
}

namespace tandem::client {

// Which block of each group a report carries (RoundParameters.block_selection,
// set by the coordinator: it decodes accordingly). kTopNorm: each group's
// largest-L2 block, the rest returned as EncodedReport::residual for the app
// to add to its next update (error feedback; ParticipantOptions.
// error_feedback does this for SDK participants).
enum class BlockSelection { kRandom = 0, kTopNorm = 1 };

struct RoundSpec {
  std::string task_id;
  uint64_t round_id = 0;
  uint64_t dimension = 0;        // D = num_groups * 2^log_num_blocks * block_size
  uint32_t block_size = 0;       // B
  uint32_t num_groups = 0;       // k
  uint32_t log_num_blocks = 0;   // d
  int frac_bits = 16;            // fixed-point fraction bits
  double clip_l2_norm = 1.0;     // C
  uint64_t max_summands = 1;     // reports per round (fixed-point headroom)
  uint64_t max_dimension = uint64_t{1} << 24;  // D refused above this (INVALID_ARGUMENT)
  BlockSelection block_selection = BlockSelection::kRandom;
};

struct EncodedReport {
  std::string report_id;   // 16 bytes (the ticket's id), the idempotency key of both uploads
  std::string to_leader;   // serialized tandem.proto.UploadRequest
  std::string to_helper;   // serialized tandem.proto.UploadRequest
  double clip_factor = 1;  // min(1, C / ||update||) (kTopNorm: of the sent blocks)
  // kTopNorm: `update` minus the blocks sent (same length as `update`),
  // unclipped; empty for kRandom. Never leaves the device.
  std::vector<float> residual;
};

class ReportEncoder {
 public:
  // INVALID_ARGUMENT for an inconsistent spec. `random` (not owned, may be
  // null = OpenSSL) must outlive the encoder.
  static absl::StatusOr<std::unique_ptr<ReportEncoder>> Create(const RoundSpec& spec,
                                                               SecureRandom* random = nullptr);
  // As Create, for a round as the coordinator announced it:
  // `round_parameters` is a serialized tandem.proto.RoundParameters
  // (CheckInResponse.round_parameters, Assignment::round_parameters of
  // stepwise_participant.h). Rounds with a norm bound get norm-bound proofs
  // in both requests. D above `max_dimension` is refused. INVALID_ARGUMENT
  // for bytes that do not parse or an inconsistent round.
  static absl::StatusOr<std::unique_ptr<ReportEncoder>> CreateForRound(
      absl::string_view round_parameters, uint64_t max_dimension = uint64_t{1} << 24,
      SecureRandom* random = nullptr);
  virtual ~ReportEncoder() = default;

  // `update` has at most D floats (zero-padded). INVALID_ARGUMENT for a
  // longer update or non-finite values; INTERNAL when randomness fails.
  virtual absl::StatusOr<EncodedReport> Encode(absl::Span<const float> update) const = 0;

  // As Encode, under an upload ticket: `signed_ticket` is the serialized
  // SignedUploadTicket of the assignment (CheckInResponse.ticket). The report
  // id is the ticket's id and both requests carry the ticket.
  // INVALID_ARGUMENT for a ticket that does not parse or whose id is not 16
  // bytes; FAILED_PRECONDITION for a ticket of another task/round than the
  // spec's.
  virtual absl::StatusOr<EncodedReport> EncodeWithTicket(absl::Span<const float> update,
                                                         absl::string_view signed_ticket) const = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_REPORT_ENCODER_H_
