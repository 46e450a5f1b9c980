// Internal: StepwiseParticipant (public stepwise_participant.h) over a
// RoundTransport, so that tests can script the network. Shares the
// assignment checks (assignment_checks.h) and the pending report and its
// delivery (report_delivery.h) with RoundRunner.
// Thread safety: as StepwiseParticipant. Owns the transport; the
// environment's pointers are not owned. The assignment and the in-memory
// pending report are touched only by the one call that holds `busy_`.
#ifndef TANDEM_CLIENT_INTERNAL_STEPWISE_RUNNER_H_
#define TANDEM_CLIENT_INTERNAL_STEPWISE_RUNNER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "client/internal/assignment_checks.h"
#include "client/internal/block_selection.h"
#include "client/internal/device_identity.h"
#include "client/internal/report_delivery.h"
#include "client/internal/round_transport.h"
#include "ml/fedluar/fedluar.h"
#include "tandem/client/stepwise_participant.h"

namespace tandem::client {

class StepwiseRunner : public StepwiseParticipant {
 public:
  // INVALID_ARGUMENT for bad options; env.clock/random must be non-null here.
  static absl::StatusOr<std::unique_ptr<StepwiseRunner>> Create(
      const ParticipantOptions& options, const StepwiseEnvironment& env,
      std::unique_ptr<RoundTransport> transport);

  absl::StatusOr<CheckInResult> CheckIn() override;
  absl::StatusOr<ModelDownload> DownloadModel() override;
  absl::StatusOr<UploadResult> Upload(absl::Span<const float> update,
                                      uint64_t num_examples) override;
  absl::StatusOr<UploadResult> UploadEvaluation(const EvaluationCounts& counts) override;
  absl::StatusOr<std::optional<PendingReportInfo>> Pending() override;
  absl::StatusOr<std::optional<Assignment>> CurrentAssignment() override;
  void Cancel() override;

 private:
  // The checked assignment the next DownloadModel/Upload work on.
  struct Current {
    proto::CheckInResponse task;
    UploadEndpoints endpoints;
    Assignment public_view;
    std::vector<ml::TensorSlice> slices;
    std::vector<size_t> recycled;
  };

  StepwiseRunner(ParticipantOptions options, StepwiseEnvironment env,
                 std::unique_ptr<RoundTransport> t, std::unique_ptr<DeviceIdentity> device)
      : options_(std::move(options)),
        env_(env),
        transport_(std::move(t)),
        device_(std::move(device)) {}
  absl::StatusOr<CheckInResult> Assign(const proto::CheckInResponse& task);
  // The report of `packed` (the packed update or the metrics vector) for the
  // current assignment: built, signed and stored once (a pending report of
  // the round is resent instead), then delivered; the assignment ends.
  absl::StatusOr<UploadResult> Send(const Current& c, absl::Span<const float> packed,
                                    uint64_t num_examples, bool error_feedback);
  // The pending report of `task`'s round (memory first, then the store), or
  // nullopt; a stored report of another round is deleted.
  absl::StatusOr<std::optional<PendingReport>> PendingFor(const proto::CheckInResponse& task);
  absl::Status Deliver(const Current& current, const PendingReport& report, uint64_t examples,
                       uint64_t* bytes_up);
  absl::Status CheckCancelled() const;

  const ParticipantOptions options_;
  const StepwiseEnvironment env_;
  std::unique_ptr<RoundTransport> transport_;
  std::unique_ptr<DeviceIdentity> device_;  // this device's key (device_identity.h)
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> busy_{false};
  std::optional<Current> current_;
  std::optional<PendingReport> pending_;  // the last encoded, undelivered report
  ErrorFeedback feedback_;                // top-norm rounds' residual (also in env_.storage)
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_STEPWISE_RUNNER_H_
