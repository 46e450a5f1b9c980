// The release of a round's aggregate share at Finalize (aggregator.h): the
// checks of the batch size and the privacy budget, this server's noise, and
// the store transaction that makes the noised share the round's only
// release -- for one process, and for replicas that sum their partial
// accumulators first (issue 24).
//
// Replicas (ReplicatedWork): the replica that finalizes adopts every
// accepted report another replica has not yet counted (a replica killed
// with them, or one that has not reached its next checkpoint), expands them
// into its own partial and saves it, then sums every replica's partial and
// noises the sum once. The store releases it only if no replica committed in
// between (ReleaseSummed compares the count of counted reports under the
// round's row lock); otherwise the sum is taken again, with a fresh draw
// for the new sum (the discarded draw never left this process).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/expansion.h"
#include "aggregator/core/prepared_noise.h"
#include "aggregator/core/task.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "crypto/dp/discrete_gaussian.h"

namespace tandem::aggregator {
namespace {

// Sums attempted before Finalize gives up (ABORTED: retry the call).
constexpr int kReleaseAttempts = 8;

}  // namespace

absl::Status Aggregator::NoiseReleaseLocked(Task& task, const proto::RoundParameters& params,
                                            int64_t counted, std::vector<uint64_t>& share) {
  // The larger of the round's minimum and this server's own.
  const int64_t min_batch =
      std::max<int64_t>({int64_t{1}, params.dp().min_batch_size(), task.policy.min_batch_size});
  if (counted < min_batch) {
    return absl::FailedPreconditionError(
        absl::StrCat("only ", counted, " reports accepted; at least ", min_batch, " are required"));
  }
  // OpenRound checked the budget; checked again in case the policy file
  // changed across a restart while the round was open.
  TANDEM_ASSIGN_OR_RETURN(const double epsilon, EpsilonWith(task, params));
  if (epsilon > task.policy.epsilon_budget) {
    return absl::FailedPreconditionError(absl::StrCat("releasing would spend epsilon ", epsilon,
                                                      ", above the budget ",
                                                      task.policy.epsilon_budget));
  }
  if (params.noise_variance() > 0) {
    TANDEM_ASSIGN_OR_RETURN(dp::Rational sigma2, dp::VarianceFromDouble(params.noise_variance()));
    // The noise drawn since the round opened, once; else (a restart, a
    // failed draw, a second release) drawn now.
    std::unique_ptr<PreparedNoise> prepared = std::move(task.prepared_noise);
    if (prepared != nullptr &&
        prepared->Matches(static_cast<int64_t>(params.round_id()), sigma2, share.size())) {
      const absl::Status added = prepared->AddTo(absl::MakeSpan(share));
      if (added.ok()) return absl::OkStatus();
      TANDEM_LOG(WARNING) << "task " << task.id << ": the noise drawn ahead is unusable (" << added
                          << "); drawing it now";
    }
    // The noise's chunks on every core (RunOnEveryCore: isolated, as this
    // thread holds the task's mutex).
    TANDEM_RETURN_IF_ERROR(dp::NoiseShareForRelease(
        {sigma2, min_batch}, counted, absl::MakeSpan(share), noise_random_, RunOnEveryCore));
  }
  return absl::OkStatus();
}

void Aggregator::PrepareNoiseLocked(Task& task, const proto::RoundParameters& params,
                                    uint64_t dimension) {
  if (params.noise_variance() <= 0) {
    task.prepared_noise.reset();
    return;
  }
  const int64_t round_id = static_cast<int64_t>(params.round_id());
  absl::StatusOr<dp::Rational> sigma2 = dp::VarianceFromDouble(params.noise_variance());
  if (sigma2.ok() && task.prepared_noise != nullptr &&
      task.prepared_noise->Matches(round_id, *sigma2, dimension)) {
    return;  // this round's, drawn since it opened (a replica's reload)
  }
  task.prepared_noise.reset();  // another round's: joined and wiped
  absl::StatusOr<std::unique_ptr<PreparedNoise>> started =
      sigma2.ok() ? PreparedNoise::Start(round_id, *sigma2, dimension, noise_random_)
                  : absl::StatusOr<std::unique_ptr<PreparedNoise>>(sigma2.status());
  if (!started.ok()) {
    // Not fatal: the release draws its noise itself.
    TANDEM_LOG(WARNING) << "task " << task.id << ": noise not drawn ahead: " << started.status();
    return;
  }
  task.prepared_noise = *std::move(started);
}

absl::Status Aggregator::MarkReleasedLocked(Task& task, const proto::RoundParameters& params,
                                            std::vector<uint64_t> share, int64_t counted) {
  task.accumulator = std::move(share);
  task.counted = counted;
  task.uncheckpointed.clear();
  TANDEM_RETURN_IF_ERROR(ChargeRelease(task, params));
  absl::MutexLock lock(&task.state_mu);
  task.closed = true;
  task.released = true;
  TANDEM_LOG(INFO) << RoleName(options_.role) << " released task " << task.id << " round "
                   << task.round_id << " with " << counted << " reports";
  return absl::OkStatus();
}

absl::Status Aggregator::ReleaseLocked(Task& task, const proto::RoundParameters& params) {
  const int64_t round_id = static_cast<int64_t>(params.round_id());
  std::vector<uint64_t> share = task.accumulator;
  TANDEM_RETURN_IF_ERROR(NoiseReleaseLocked(task, params, task.counted, share));
  // The reports not checkpointed yet counted, and the round released, in
  // one transaction before anything is returned (the store counts what the
  // release contains): a crash before it leaves the round open and
  // un-noised, those reports accepted with their shares (the draw is lost,
  // never released); after it, every retry returns this draw.
  TANDEM_RETURN_IF_ERROR(task.store->CountAndRelease(round_id, EncodeAccumulator(task.accumulator),
                                                     task.uncheckpointed,
                                                     EncodeAccumulator(share)));
  if (!task.uncheckpointed.empty()) ++task.checkpoints;
  return MarkReleasedLocked(task, params, std::move(share), task.counted);
}

absl::Status Aggregator::ReleasePartialsLocked(Task& task, const proto::RoundParameters& params) {
  ReplicatedWork& work = *task.store->replicated();
  const int64_t round_id = static_cast<int64_t>(params.round_id());
  for (int attempt = 0; attempt < kReleaseAttempts; ++attempt) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<ReportRecord> adopted, work.AdoptUncounted(round_id));
    if (!adopted.empty()) {
      TANDEM_LOG(INFO) << "replica " << work.replica_id() << " adopts " << adopted.size()
                       << " accepted reports other replicas had not counted";
      TANDEM_RETURN_IF_ERROR(CommitRecordsLocked(task, adopted, {}));
    }
    TANDEM_RETURN_IF_ERROR(CheckpointLocked(task));
    TANDEM_ASSIGN_OR_RETURN(std::vector<PartialAccumulator> partials, work.ListPartials(round_id));
    std::shared_ptr<const RoundCodec> codec;
    {
      absl::ReaderMutexLock lock(&task.state_mu);
      codec = task.codec;
    }
    std::vector<uint64_t> sum(codec->dimension(), 0);
    int64_t total = 0;
    for (const PartialAccumulator& p : partials) {
      TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> values,
                              DecodeAccumulator(p.bytes, codec->dimension()));
      TANDEM_RETURN_IF_ERROR(AddAccumulator(absl::MakeSpan(sum), values, codec->value_bits()));
      total += p.report_count;
    }
    TANDEM_RETURN_IF_ERROR(NoiseReleaseLocked(task, params, total, sum));
    const absl::Status released = work.ReleaseSummed(round_id, EncodeAccumulator(sum), total);
    if (released.ok()) {
      TANDEM_LOG(INFO) << "replica " << work.replica_id() << " summed " << partials.size()
                       << " partial accumulators";
      return MarkReleasedLocked(task, params, std::move(sum), total);
    }
    if (!absl::IsAborted(released)) return released;
    TANDEM_LOG(INFO) << "task " << task.id << ": " << released.message() << "; summing again";
  }
  return absl::AbortedError(
      absl::StrCat("round ", round_id, " kept changing while its partials were summed; retry"));
}

}  // namespace tandem::aggregator
