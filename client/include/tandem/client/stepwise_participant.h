// tandem client SDK, C++ API: take part in a round when the app trains the
// model itself (a Python/PyTorch/NumPy app through the `tandem` Python
// package, or any framework). Participant (participant.h) trains the task's
// model with ml/; this one hands the model to the app and takes back the
// update, one step per call:
//
//   auto p = tandem::client::StepwiseParticipant::Create(options, {store});
//   auto r = (*p)->CheckIn();                      // assignment or not
//   if (r->outcome == CheckInOutcome::kAssigned) {
//     auto model = (*p)->DownloadModel();          // flat float32, per tensor
//     std::vector<float> update = Train(*model, r->assignment);
//     auto up = (*p)->Upload(update, examples);    // clip, encode, upload
//   }
//
// Everything between the update and the servers stays in the SDK: the
// assignment's checks (pinned aggregators, upload ticket, bounds on every
// size), FedLUAR packing (the round's recycled tensors are dropped), L2
// clipping, fixed point, block sampling,
// the PREAMBLE DPF key shares and, in norm-bound rounds, the norm proofs,
// the uploads with retries and UploadDone. The report (ticket included) is
// kept in memory and, with a StateStore, on disk before the first upload:
// an Upload retried after a network error, or a CheckIn after the app was
// killed mid-upload, resends that same report (never a second one).
//
// No Eigen, gRPC, CUDA or protobuf types cross this header.
// Thread safety: one of CheckIn/DownloadModel/Upload/Pending runs at a time
// (a concurrent call gets FAILED_PRECONDITION); Cancel may be called from
// any thread and makes the running call return CANCELLED at its next step
// (network calls in flight are cancelled).
// Error codes: as Participant (participant.h); FAILED_PRECONDITION also for
// DownloadModel/Upload without a current assignment.
#ifndef TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_STEPWISE_PARTICIPANT_H_
#define TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_STEPWISE_PARTICIPANT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tandem/client/participant.h"

namespace tandem::client {

// One tensor of the task's flat model vector (flatten order, row-major;
// dense weights are [out, in] as in PyTorch's nn.Linear).
struct ModelTensor {
  std::string name;  // e.g. "fc1.weight"
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat vector
  int64_t size = 0;
  bool recycled = false;  // FedLUAR: not uploaded this round (its update is dropped)
};

// The local training the coordinator asks for (the app may follow it).
struct TrainingSettings {
  uint32_t local_epochs = 0;
  uint32_t local_steps = 0;  // 0 = local_epochs epochs
  uint32_t batch_size = 0;
  double learning_rate = 0;
  double momentum = 0;
  double coido_fraction = 1;  // fraction of the local data to train on
};

// A federated evaluation assignment (issue 33): evaluate the model version
// (DownloadModel) on held-out examples and report the counts
// (UploadEvaluation), instead of training.
struct EvaluationSettings {
  uint32_t max_examples = 0;  // count at most this many examples
  double loss_clip = 0;       // clip each example's cross-entropy to [0, loss_clip]
  uint32_t num_classes = 0;
};

struct Assignment {
  std::string task_id;
  uint64_t round_id = 0;  // aggregation round
  uint64_t model_version = 0;
  int64_t deadline_unix_ms = 0;
  std::vector<ModelTensor> tensors;
  uint64_t num_params = 0;  // sum of the tensors' sizes
  // An opaque model's example shape as the task states it (e.g. {1, 28,
  // 28}): the app checks its examples against it before training; empty
  // when the task states none (tandem-native models check their own).
  std::vector<int64_t> input_shape;
  TrainingSettings training;
  double clip_l2_norm = 0;  // the update is clipped to this L2 norm
  int frac_bits = 0;
  uint64_t dimension = 0;    // D of the report (packed update, padded)
  bool norm_proofs = false;  // reports carry a norm-bound proof
  bool ticketed = false;     // uploads carry a coordinator-signed ticket
  // Serialized tandem.proto.RoundParameters of the round, as both
  // aggregators opened it (for ReportEncoder::CreateForRound).
  std::string round_parameters;
  // Set for a federated evaluation round: UploadEvaluation, not Upload.
  std::optional<EvaluationSettings> evaluation;
};

enum class CheckInOutcome {
  kAssigned,     // `assignment` is set: download, train, upload
  kResent,       // a stored report of this round was delivered; nothing to train
  kNotSelected,  // check in again after retry_after_ms
  kTaskDone,     // the task is finished
};

struct CheckInResult {
  CheckInOutcome outcome = CheckInOutcome::kNotSelected;
  int64_t retry_after_ms = 0;
  uint64_t round_id = 0;  // kAssigned, kResent
  uint64_t bytes_up = 0;  // kResent: both uploads
  std::optional<Assignment> assignment;
};

struct ModelDownload {
  std::vector<float> values;  // num_params floats, the tensors' concatenation
  uint64_t bytes_down = 0;
};

struct UploadResult {
  uint64_t round_id = 0;
  std::string report_id;     // 16 bytes (the ticket's id)
  uint64_t bytes_up = 0;     // both uploads
  double clip_factor = 1.0;  // min(1, C / ||packed update||); 1 for a resent report
  bool resent = false;       // the report of an earlier failed Upload was resent
};

// A report encoded and not yet known to be delivered.
struct PendingReportInfo {
  std::string task_id;
  uint64_t round_id = 0;
  std::string report_id;
  bool stored = false;  // in the StateStore (else in memory only)
};

// What the SDK uses from the app; pointers are not owned and must outlive
// the participant. Null storage = the pending report lives in memory only;
// null clock/random = the real clock and OpenSSL.
struct StepwiseEnvironment {
  StateStore* storage = nullptr;
  Clock* clock = nullptr;
  SecureRandom* random = nullptr;
};

class StepwiseParticipant {
 public:
  // INVALID_ARGUMENT for bad options (as Participant::Create; `threads` and
  // `seed` are the app's business here and ignored).
  static absl::StatusOr<std::unique_ptr<StepwiseParticipant>> Create(
      const ParticipantOptions& options, const StepwiseEnvironment& env = {});
  virtual ~StepwiseParticipant() = default;

  // Checks in. kAssigned replaces any earlier assignment; a stored report of
  // the assigned round is resent instead (kResent); an older round's stored
  // report is dropped.
  virtual absl::StatusOr<CheckInResult> CheckIn() = 0;
  // The current assignment's global model (SHA-256 checked, size bounded).
  virtual absl::StatusOr<ModelDownload> DownloadModel() = 0;
  // `update` = trained minus downloaded model, num_params floats, every
  // tensor included (the recycled ones are dropped here). INVALID_ARGUMENT
  // for another length or a non-finite value, checked before anything is
  // encoded, stored or sent: a pending report stays as it was. When a
  // report of the current assignment is pending (an earlier Upload failed
  // after encoding), that report is resent and `update` is only checked.
  // The assignment ends when the upload and UploadDone succeed.
  virtual absl::StatusOr<UploadResult> Upload(absl::Span<const float> update,
                                              uint64_t num_examples) = 0;
  // An evaluation assignment's counts (EvaluationSettings): checked
  // (consistent, within max_examples and loss_clip; INVALID_ARGUMENT
  // otherwise), encoded as the metrics vector and sent like an update.
  // FAILED_PRECONDITION for a training assignment (and Upload for an
  // evaluation one).
  virtual absl::StatusOr<UploadResult> UploadEvaluation(const EvaluationCounts& counts) = 0;
  // The pending report (memory or store), if any.
  virtual absl::StatusOr<std::optional<PendingReportInfo>> Pending() = 0;
  // The current assignment: set by CheckIn's kAssigned, ended by a
  // delivered Upload, kResent, kTaskDone or a refused assignment.
  virtual absl::StatusOr<std::optional<Assignment>> CurrentAssignment() = 0;
  virtual void Cancel() = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_STEPWISE_PARTICIPANT_H_
