// Internal: what the client checks in a coordinator's assignment before it
// allocates, trains or uploads anything. The coordinator is untrusted for
// privacy (it must not learn an update) and for the client's resources (it
// must not make an edge device allocate or compute without bound), so every
// size, setting and endpoint it sends is checked here against the client's
// own options.
//
// Error codes: INVALID_ARGUMENT for values outside the client's bounds or a
// malformed ticket; FAILED_PRECONDITION for an assignment the client refuses
// on principle (aggregators other than the pinned ones, one server for both
// roles, a ticket for another task or round).
// All functions are pure and thread-safe.
#ifndef TANDEM_CLIENT_INTERNAL_ASSIGNMENT_CHECKS_H_
#define TANDEM_CLIENT_INTERNAL_ASSIGNMENT_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/aggregator.pb.h"
#include "proto/common.pb.h"
#include "proto/coordinator.pb.h"
#include "tandem/client/participant.h"

namespace tandem::client {

// Bounds on the training settings a coordinator may send.
inline constexpr uint32_t kMaxLocalEpochs = 1000;
inline constexpr uint32_t kMaxLocalSteps = 1000000;
inline constexpr uint32_t kMaxBatchSize = 1u << 16;
inline constexpr int kMaxHiddenLayers = 64;
inline constexpr int64_t kMaxLayerWidth = int64_t{1} << 24;  // input_dim and hidden widths
inline constexpr int32_t kMaxClasses = 1 << 16;
inline constexpr int kMaxOpaqueTensors = 65536;  // tensors of an opaque model
inline constexpr double kMaxLearningRate = 1e3;
// retry_after_ms the client honours at most (a longer one is clamped).
inline constexpr int64_t kMaxRetryAfterMs = int64_t{24} * 3600 * 1000;
// Round parameters (as crypto/dpf and crypto/proof accept them).
inline constexpr uint32_t kMaxNumGroups = 4096;
inline constexpr uint32_t kMaxBlockSize = 1u << 20;
inline constexpr uint32_t kMaxLogNumBlocks = 24;

// Participant creation: pins given in pairs, not one server for both roles,
// bounds >= 1. INVALID_ARGUMENT otherwise.
absl::Status ValidateTrustOptions(const ParticipantOptions& options);

// `address` (host:port) in the form the role checks compare: lower case,
// without a gRPC scheme prefix (dns:///, ipv4:, ipv6:), loopback names
// (localhost, 127.0.0.1, [::1]) folded into one.
std::string NormalizeAddress(absl::string_view address);

// The endpoints to upload to for an assignment naming `leader` and `helper`:
// the coordinator's, checked against the options' pins, with the pinned TLS
// names as server_name (SSL target name override) when names are pinned.
// INVALID_ARGUMENT for a missing address; FAILED_PRECONDITION for an
// endpoint other than the pinned one or one address/TLS name for both roles.
struct UploadEndpoints {
  proto::Endpoint leader;
  proto::Endpoint helper;
  bool pinned = false;  // addresses or names came from the options
};
absl::StatusOr<UploadEndpoints> ResolveUploadEndpoints(const ParticipantOptions& options,
                                                       const proto::Endpoint& leader,
                                                       const proto::Endpoint& helper);

// The UploadTicket inside `signed_ticket`, required to be for `task_id` and
// `round_id` with a 16-byte ticket id (the report id to upload under).
// INVALID_ARGUMENT for an empty/unparsable ticket or another id length;
// FAILED_PRECONDITION for a ticket of another task or round.
absl::StatusOr<proto::UploadTicket> ParseUploadTicketFor(
    const proto::SignedUploadTicket& signed_ticket, absl::string_view task_id, uint64_t round_id);

// The assignment's upload ticket, parsed (its signature is the aggregators'
// business): nullopt when the assignment carries none (an unticketed
// deployment). INVALID_ARGUMENT for an unparsable ticket or a ticket id that
// is not 16 bytes; FAILED_PRECONDITION for a ticket of another task/round.
absl::StatusOr<std::optional<proto::UploadTicket>> CheckAssignmentTicket(
    const proto::CheckInResponse& task);

// The round's report parameters against the client's bounds (D, k, B, d and
// their product; the legacy top-level copies in the CheckInResponse must
// agree). INVALID_ARGUMENT otherwise.
absl::Status CheckRoundBounds(const proto::CheckInResponse& task,
                              const ParticipantOptions& options);

// An opaque model's tensors (unique names of 1-128 bytes, at most 16
// dimensions each >= 1) and classes (0 or in [2, kMaxClasses]). Returns its
// parameter count, which must fit in options.max_model_bytes as float32.
// INVALID_ARGUMENT otherwise.
absl::StatusOr<uint64_t> CheckOpaqueModel(const proto::ModelSpec& model,
                                          const ParticipantOptions& options);

// The training settings (epochs, steps, batch, rates, CoIDO fraction, MLP
// shape or opaque tensors). Returns the model's parameter count, which must
// fit in options.max_model_bytes as float32. INVALID_ARGUMENT otherwise.
absl::StatusOr<uint64_t> CheckTrainingBounds(const proto::TrainingConfig& training,
                                             const ParticipantOptions& options);

// FedLUAR recycled tensor indices: sorted, distinct, < num_tensors.
absl::Status CheckRecycledLayers(const proto::TrainingConfig& training, size_t num_tensors);

// The downloaded serialized proto::Model: at most max_bytes, one float32
// tensor whose shape product is `params`. Returns its values.
// INVALID_ARGUMENT for a size outside the bounds, DATA_LOSS for a blob that
// is not such a model.
absl::StatusOr<std::vector<float>> ParseModelBlob(const std::string& blob, uint64_t params,
                                                  uint64_t max_bytes);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_ASSIGNMENT_CHECKS_H_
