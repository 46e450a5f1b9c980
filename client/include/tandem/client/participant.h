// tandem client SDK, C++ API: take part in the rounds of a federated task.
// What an edge app embeds (the C ABI in c_api.h wraps it):
//
//   MyData data;                                   // implements DataSource
//   tandem::client::Environment env{&data};        // storage/clock/random optional
//   auto p = tandem::client::Participant::Create(options, env);
//   while (true) {
//     auto r = (*p)->ParticipateOnce();            // one check-in
//     if (!r.ok() || r->outcome == RoundOutcome::kTaskDone) break;
//     sleep(r->retry_after_ms);
//   }
//
// One ParticipateOnce() call: check in with the coordinator; when assigned,
// download the model in chunks (SHA-256 checked), select local data with
// CoIDO when the round asks for it, train locally, drop the tensors FedLUAR
// recycles this round, clip to the round's L2 bound, encode in fixed point,
// sample one block per group, make the PREAMBLE block-DPF key shares, upload
// them to both aggregators (retries; the report id is the assignment's upload
// ticket id, and the coordinator-signed ticket goes with both uploads) and
// report the upload (with the ticket) to the coordinator. The report, ticket
// included, is stored (StateStore) before the first upload, so that an app
// killed mid-upload resends the same report (never a second one) when it
// comes back within the round.
//
// No Eigen, gRPC, CUDA or protobuf types cross this header.
// Thread safety: ParticipateOnce runs one round at a time (a second
// concurrent call gets FAILED_PRECONDITION); Cancel may be called from any
// thread and makes the running call return CANCELLED at its next step.
// Device identity: every check-in is signed with the device's own key and
// carries the enrollment token until the device is enrolled; each upload is
// signed for the ticket the coordinator issued to that key. A device that is
// not enrolled gets PERMISSION_DENIED from ParticipateOnce.
// Error codes: INVALID_ARGUMENT (bad options or local data, or an assignment
// outside the client's bounds: sizes, training settings, a malformed upload
// ticket), UNAVAILABLE / DEADLINE_EXCEEDED (network, after retries),
// FAILED_PRECONDITION (round closed meanwhile; an assignment naming other
// aggregators than the pinned ones, one server for both roles, or a ticket
// for another task/round), CANCELLED, and the servers' codes.
#ifndef TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_PARTICIPANT_H_
#define TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_PARTICIPANT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
class Clock;
class SecureRandom;
}  // namespace tandem

namespace tandem::client {

// The app's labelled training examples: rows x cols features, row-major.
struct LocalData {
  std::vector<float> features;
  int64_t rows = 0;
  int64_t cols = 0;
  // What one row is: {channels, height, width} of an image (its C*H*W
  // values channel-major, as PyTorch's NCHW tensors), {cols} for flat
  // features, or empty (no claim: the row is taken as the task's model lays
  // out its input). When set, a task whose model takes another shape is
  // refused before training (a 1x28x28 image is not a 4x14x14 one).
  std::vector<int64_t> shape;
  std::vector<int> labels;  // in [0, num_classes)
  int num_classes = 0;
};

// What a client's private federated evaluation counts (issue 33; server/
// core/federated_evaluation.h): its first max_examples held-out examples,
// each example's cross-entropy clipped to [0, loss_clip]. Participant counts
// them itself; a StepwiseParticipant's app counts them and hands them over.
struct EvaluationCounts {
  int64_t examples = 0;
  int64_t correct = 0;
  double loss_sum = 0;                  // of the clipped per-example losses
  std::vector<int64_t> class_examples;  // num_classes entries, summing to examples
  std::vector<int64_t> class_correct;   // num_classes entries, summing to correct
};

// Supplies the local data when a round needs it (called once per assigned
// round, so that fresh data is picked up). Must be thread-compatible.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual absl::StatusOr<LocalData> Load() = 0;
  // Examples never trained on, for private federated evaluation rounds
  // (the task's eval_every). Default: none (FAILED_PRECONDITION; the
  // assignment is then left unreported, like a dropped-out client).
  virtual absl::StatusOr<LocalData> LoadHeldOut() {
    return absl::FailedPreconditionError("this app supplies no held-out examples");
  }
};

// A DataSource over data fixed at construction (a CLI's shard, a C app's
// copied arrays), with optional held-out examples.
class FixedDataSource : public DataSource {
 public:
  explicit FixedDataSource(LocalData data) : data_(std::move(data)) {}
  FixedDataSource(LocalData data, LocalData held_out)
      : data_(std::move(data)), held_out_(std::move(held_out)), has_held_out_(true) {}
  absl::StatusOr<LocalData> Load() override { return data_; }
  absl::StatusOr<LocalData> LoadHeldOut() override {
    if (!has_held_out_) return DataSource::LoadHeldOut();
    return held_out_;
  }

 private:
  LocalData data_;
  LocalData held_out_;
  bool has_held_out_ = false;
};

// Small durable key-value storage for the SDK's own state (the pending
// report). Values are binary strings of up to a few MB.
class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual absl::StatusOr<std::optional<std::string>> Get(const std::string& key) = 0;
  virtual absl::Status Put(const std::string& key, const std::string& value) = 0;
  virtual absl::Status Delete(const std::string& key) = 0;
};

// Files under `dir` (created), written atomically (write + fsync + rename).
absl::StatusOr<std::unique_ptr<StateStore>> MakeFileStateStore(const std::string& dir);

// What the SDK uses from the app. Pointers are not owned and must outlive
// the Participant. Null storage = nothing persisted; null clock/random =
// the real clock and OpenSSL.
struct Environment {
  DataSource* data = nullptr;
  StateStore* storage = nullptr;
  Clock* clock = nullptr;
  SecureRandom* random = nullptr;
};

struct ParticipantOptions {
  std::string coordinator;            // host:port
  // The TLS identity the coordinator's certificate must carry (a DNS SAN,
  // e.g. coordinator.tandem), checked instead of `coordinator`'s host: a
  // device that reaches the coordinator by IP address, or through a name
  // its certificate does not list, still verifies who it talks to. Empty:
  // the host of `coordinator`. Ignored with insecure_plaintext.
  std::string coordinator_name;
  // The app's label for this participant in logs ([A-Za-z0-9._-]{0,64}).
  // The servers know the device by the id of its own Ed25519 key (created
  // on first run, kept in the StateStore as "device-key"): "dev-" and 32
  // hex digits, which nobody without the key can use.
  std::string client_id;
  // The operator's permission to enroll this device (the text `tandem-admin
  // token mint` prints, handed out by the app's backend), sent with
  // check-ins until one succeeds. Empty: the device's key must already be
  // enrolled (tandem-admin devices enroll), or the coordinator be open.
  std::string enrollment_token;
  std::string task_id;                // empty = the coordinator's task
  bool insecure_plaintext = false;    // local runs only; otherwise TLS
  std::string tls_root_ca;            // PEM file verifying the servers
  int threads = 1;                    // local training threads
  int upload_attempts = 5;            // per aggregator, with backoff
  int64_t rpc_timeout_ms = 30000;
  uint64_t seed = 0;                  // local training shuffles (0 = random)

  // Aggregator pinning. The two aggregators are the client's privacy: each
  // sees one share, so a coordinator that named one server for both roles
  // (or its own) would learn every update. Pins come from the app's own
  // configuration, never from the coordinator.
  //  - leader_address / helper_address (host:port, both or neither): a
  //    CheckIn naming other upload endpoints is refused (FAILED_PRECONDITION).
  //  - leader_name / helper_name (TLS identities, both or neither): the
  //    uploads verify the server certificate against these names (SSL target
  //    name override), whatever address they go to; a CheckIn naming another
  //    server_name is refused (FAILED_PRECONDITION). Ignored with
  //    insecure_plaintext (no certificates).
  // With TLS the names are required (Create: INVALID_ARGUMENT without
  // them: fail closed). Only plaintext loopback runs may go without pins,
  // trusting the coordinator's endpoints (a warning is logged once). Always
  // refused, pinned or not: one host:port, or one TLS name, for both roles.
  std::string leader_address;
  std::string leader_name;
  std::string helper_address;
  std::string helper_name;

  // Bounds on what the coordinator may make this client allocate or run
  // (INVALID_ARGUMENT beyond them, checked before allocating).
  uint64_t max_model_bytes = uint64_t{256} << 20;  // serialized model download
  uint64_t max_dimension = uint64_t{1} << 24;      // D of a round (the report is O(D))

  // Error feedback, in rounds whose coordinator selects each group's
  // largest-norm block (top-k by norm; RoundParameters.block_selection
  // TOP_NORM): the client keeps what it did not send and adds it to its next
  // update of the same task (Stich et al. 2018; client/internal/
  // block_selection.h). Kept in the StateStore ("error-feedback", 4 bytes
  // per parameter) so that it survives a restart; in memory without one.
  // Ignored in random-selection rounds. Off: top-norm reports drop the rest.
  bool error_feedback = true;
};

enum class RoundOutcome {
  kContributed,   // trained and uploaded this round
  kNotSelected,   // no task now; check in again after retry_after_ms
  kTaskDone,      // the task is finished
};

struct RoundResult {
  RoundOutcome outcome = RoundOutcome::kNotSelected;
  uint64_t round_id = 0;              // aggregation round (kContributed)
  int64_t retry_after_ms = 0;
  uint64_t examples = 0;              // examples trained on (evaluated on, for an evaluation)
  uint64_t bytes_up = 0;              // both key-share uploads
  uint64_t bytes_down = 0;            // model download
  double clip_factor = 1.0;           // min(1, C / ||update||)
  bool resent = false;                // a stored report was resent, no training
  // The round was a private federated evaluation: the metrics of the held-out
  // examples (DataSource::LoadHeldOut) were uploaded, not an update.
  bool evaluated = false;
};

class Participant {
 public:
  // INVALID_ARGUMENT for bad options or a missing data source.
  static absl::StatusOr<std::unique_ptr<Participant>> Create(const ParticipantOptions& options,
                                                             const Environment& env);
  virtual ~Participant() = default;
  virtual absl::StatusOr<RoundResult> ParticipateOnce() = 0;
  virtual void Cancel() = 0;
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_PARTICIPANT_H_
