// Internal: the Participant's round logic (see the public participant.h):
// check-in, the assignment's checks (client/internal/assignment_checks.h:
// pinned aggregators, upload ticket, bounds on every size), download, CoIDO
// selection, local training, FedLUAR packing, PREAMBLE report under the
// ticket's id, upload, UploadDone, with the pending report (ticket included)
// kept in the StateStore until the coordinator has it.
// Thread safety: as Participant. Owns the transport; the environment's
// pointers are not owned.
#ifndef TANDEM_CLIENT_INTERNAL_ROUND_RUNNER_H_
#define TANDEM_CLIENT_INTERNAL_ROUND_RUNNER_H_

#include <atomic>
#include <memory>

#include "client/internal/assignment_checks.h"
#include "client/internal/block_selection.h"
#include "client/internal/device_identity.h"
#include "client/internal/report_delivery.h"
#include "client/internal/round_transport.h"
#include "ml/data/dataset.h"
#include "ml/model/model.h"
#include "tandem/client/participant.h"

namespace tandem::client {

class RoundRunner : public Participant {
 public:
  // INVALID_ARGUMENT for bad options; env.clock/random must be non-null here.
  static absl::StatusOr<std::unique_ptr<RoundRunner>> Create(
      const ParticipantOptions& options, const Environment& env,
      std::unique_ptr<RoundTransport> transport);

  absl::StatusOr<RoundResult> ParticipateOnce() override;
  void Cancel() override;

 private:
  RoundRunner(ParticipantOptions options, Environment env, std::unique_ptr<RoundTransport> t,
              std::unique_ptr<DeviceIdentity> device)
      : options_(std::move(options)),
        env_(env),
        transport_(std::move(t)),
        device_(std::move(device)) {}
  absl::StatusOr<RoundResult> Contribute(const proto::CheckInResponse& task);
  // The assigned model version, downloaded into `global` and a model of
  // the task's architecture.
  absl::StatusOr<std::unique_ptr<ml::Model>> DownloadAssignedModel(
      const proto::CheckInResponse& task, uint64_t params, RoundResult* result,
      std::vector<float>* global);
  // An evaluation round's metrics vector (eval_metrics.h) over the held-out
  // examples; FAILED_PRECONDITION when the app has none.
  absl::StatusOr<std::vector<float>> EvaluateModel(const proto::CheckInResponse& task,
                                                   uint64_t params, RoundResult* result);
  // The packed update of a model of `params` parameters (checked bounds).
  absl::StatusOr<std::vector<float>> TrainUpdate(const proto::CheckInResponse& task,
                                                 uint64_t params, RoundResult* result);
  absl::Status Deliver(const proto::CheckInResponse& task, const UploadEndpoints& endpoints,
                       const PendingReport& report, RoundResult* result);
  absl::Status CheckCancelled() const;

  const ParticipantOptions options_;
  const Environment env_;
  std::unique_ptr<RoundTransport> transport_;
  std::unique_ptr<DeviceIdentity> device_;  // this device's key (device_identity.h)
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> running_{false};
  std::atomic<bool> warned_unpinned_{false};  // the no-pins warning is logged once
  ErrorFeedback feedback_;                    // top-norm rounds' residual (also in env_.storage)
};

// LocalData -> ml::Dataset. INVALID_ARGUMENT for inconsistent sizes, labels
// out of range or non-finite features.
absl::StatusOr<ml::Dataset> DatasetFromLocalData(const LocalData& data);
// INVALID_ARGUMENT when the data states a shape (LocalData::shape) and the
// task's native model takes another (ModelSpec.input_shape).
absl::Status CheckExampleShape(const LocalData& data, const proto::ModelSpec& model);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_ROUND_RUNNER_H_
