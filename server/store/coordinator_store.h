// Durable state of tandem-coordinator: the task checkpoint after every
// released (or abandoned) round, the open round with its deadline, who was
// assigned and who reported an upload, the round history and small metadata
// (the secret sampling key, the task's configuration fingerprint).
//
// What survives a restart (SIGKILL included): every committed call below.
// The coordinator resumes the open round with the same aggregation round id
// and deadline, so both aggregators keep the reports they accepted for it.
//
// Error codes: INVALID_ARGUMENT for bad arguments, FAILED_PRECONDITION for
// calls out of order (no open round, another round open), DATA_LOSS for a
// stored blob that no longer parses, UNAVAILABLE/INTERNAL from SQLite.
// Thread safety: all methods are thread-safe (one internal mutex).
#ifndef TANDEM_SERVER_STORE_COORDINATOR_STORE_H_
#define TANDEM_SERVER_STORE_COORDINATOR_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/sqlite/database.h"
#include "proto/coordinator.pb.h"

namespace tandem::server {

struct OpenRoundRecord {
  uint64_t aggregation_round = 0;  // round id on both aggregators
  uint64_t model_version = 0;      // version the round will produce
  int64_t opened_unix_ms = 0;
  int64_t deadline_unix_ms = 0;
};

struct AssignmentRecord {
  std::string client_id;
  bool done = false;
  std::string report_id;  // set when done
  uint64_t bytes_up = 0;
};

class CoordinatorStore {
 public:
  // Opens or creates `path` (WAL, synchronous=FULL).
  static absl::StatusOr<std::unique_ptr<CoordinatorStore>> Open(const std::string& path);

  absl::StatusOr<std::optional<std::string>> GetMeta(const std::string& key);
  absl::Status PutMeta(const std::string& key, const std::string& value);

  // The checkpoint written by the last FinishRound/AbandonRound (none at first).
  absl::StatusOr<std::optional<proto::TaskCheckpoint>> LoadCheckpoint();
  // The round opened and neither finished nor abandoned, if any.
  absl::StatusOr<std::optional<OpenRoundRecord>> LoadOpenRound();
  // The largest aggregation round id ever opened (0 = none).
  absl::StatusOr<uint64_t> LastAggregationRound();
  absl::StatusOr<std::vector<AssignmentRecord>> LoadAssignments(uint64_t aggregation_round);
  absl::StatusOr<std::vector<proto::RoundSummary>> LoadHistory();

  // FAILED_PRECONDITION when a round is open or the id is not new.
  absl::Status BeginRound(const OpenRoundRecord& round);
  // Idempotent. FAILED_PRECONDITION when the round is not the open one.
  absl::Status PutAssignment(uint64_t aggregation_round, const std::string& client_id);
  // FAILED_PRECONDITION when the client was not assigned in the open round.
  // Idempotent for the same report id; ALREADY_EXISTS for another one.
  absl::Status MarkDone(uint64_t aggregation_round, const std::string& client_id,
                        const std::string& report_id, uint64_t bytes_up);
  // One transaction: the round is closed, the checkpoint replaced and (for a
  // release) the summary appended.
  absl::Status FinishRound(uint64_t aggregation_round, const proto::TaskCheckpoint& checkpoint,
                           const proto::RoundSummary& summary);
  absl::Status AbandonRound(uint64_t aggregation_round, const proto::TaskCheckpoint& checkpoint);

 private:
  explicit CoordinatorStore(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  // The client's assignment in `aggregation_round` if that round is open.
  absl::StatusOr<std::optional<AssignmentRecord>> FindOpenAssignmentLocked(
      uint64_t aggregation_round, const std::string& client_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CloseRound(uint64_t aggregation_round, const char* state,
                          const proto::TaskCheckpoint& checkpoint,
                          const proto::RoundSummary* summary);

  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_STORE_COORDINATOR_STORE_H_
