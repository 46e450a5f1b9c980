// tandem-client: one federated client over the SDK (participant.h). Loads
// its shard of a project dataset (the same Dirichlet split every client of
// the federation computes from --num_shards/--alpha/--data_seed) and takes
// part in rounds until the task is done.
//   tandem-client --coordinator=127.0.0.1:7000 --client_id=c7 --shard=7
//       --num_shards=20 --dataset=digits --state_dir=/tmp/c7 --insecure_plaintext
// (one command line).
// With TLS, pin the two aggregators (the coordinator's answer is checked
// against them and the certificates must carry the names):
//   --tls_ca=ca.pem --leader=10.0.0.2:7100 --leader_name=leader.tandem
//   --helper=10.0.0.3:7100 --helper_name=helper.tandem
// Exit status: 0 when the task is done (or --max_rounds contributed), 1 on
// bad flags/data or after --max_errors consecutive failures.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "client/internal/device_identity.h"
#include "ml/data/dataset.h"
#include "ml/data/partition.h"
#include "tandem/client/participant.h"

ABSL_FLAG(std::string, coordinator, "", "coordinator host:port");
ABSL_FLAG(std::string, coordinator_name, "",
          "the coordinator's TLS identity (e.g. coordinator.tandem), checked instead of the "
          "host of --coordinator (which may then be an IP address its certificate does not list)");
ABSL_FLAG(std::string, client_id, "",
          "this client's pseudonym (empty = tandem-<hostname>, for container replicas)");
ABSL_FLAG(std::string, task_id, "", "task (empty = the coordinator's)");
ABSL_FLAG(std::string, dataset, "digits", "digits or fmnist");
ABSL_FLAG(uint64_t, data_seed, 1, "seed of the train/test split and of the shards");
ABSL_FLAG(int, num_shards, 1, "clients the training split is divided among");
ABSL_FLAG(int, shard, 0,
          "this client's shard in [0, num_shards); -1 = from --shard_env, or a hash of "
          "--client_id when that is unset (replicas of one container image)");
ABSL_FLAG(std::string, shard_env, "",
          "environment variable holding the shard (e.g. JOB_COMPLETION_INDEX of a k8s Job)");
ABSL_FLAG(int64_t, train_items, 0, "fmnist training images loaded (0 = all)");
ABSL_FLAG(double, alpha, 0.5, "Dirichlet label-skew parameter of the split");
ABSL_FLAG(std::string, state_dir, "",
          "SDK state (the device key, the pending report); empty = none (a new device key "
          "every run)");
ABSL_FLAG(bool, print_device, false,
          "print this device's id and public key (hex; what `tandem-admin devices enroll "
          "--public_key` takes), creating the key in --state_dir if needed, and exit");
ABSL_FLAG(std::string, enrollment_token_file, "",
          "file holding this device's enrollment token (tandem-admin token mint); sent until "
          "the coordinator has enrolled the device key");
ABSL_FLAG(std::string, enrollment_token_line_env, "",
          "with --enrollment_token_file holding one token per line (tandem-admin token mint "
          "--count=N): the environment variable whose value is this device's line index (e.g. "
          "JOB_COMPLETION_INDEX of an indexed Kubernetes Job); empty = the file is one token");
ABSL_FLAG(bool, insecure_plaintext, false, "no TLS (local runs only)");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots verifying the servers");
ABSL_FLAG(int, max_rounds, 0, "stop after contributing this many rounds (0 = until done)");
ABSL_FLAG(int, max_errors, 20, "consecutive failures before giving up");
ABSL_FLAG(int, threads, 1, "local training threads");
ABSL_FLAG(uint64_t, seed, 0, "local training seed (0 = random)");
ABSL_FLAG(std::string, leader, "",
          "pinned leader upload address host:port (with --helper); a check-in naming another "
          "is refused. Empty = trust the coordinator's");
ABSL_FLAG(std::string, leader_name, "",
          "pinned TLS identity of the leader (with --helper_name): uploads verify the leader's "
          "certificate against it");
ABSL_FLAG(std::string, helper, "", "pinned helper upload address host:port (with --leader)");
ABSL_FLAG(std::string, helper_name, "",
          "pinned TLS identity of the helper (with --leader_name)");
ABSL_FLAG(uint64_t, max_model_bytes, uint64_t{256} << 20,
          "largest model download accepted from the coordinator");
ABSL_FLAG(uint64_t, max_dimension, uint64_t{1} << 24,
          "largest round dimension D accepted from the coordinator");

namespace {

std::string ClientId() {
  if (!absl::GetFlag(FLAGS_client_id).empty()) return absl::GetFlag(FLAGS_client_id);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = std::string("tandem-") + host;
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '-';
  }
  return id.substr(0, 64);
}

absl::StatusOr<int> Shard(const std::string& client_id, int n) {
  int k = absl::GetFlag(FLAGS_shard);
  if (k >= 0) return k;
  if (!absl::GetFlag(FLAGS_shard_env).empty()) {
    const char* v = std::getenv(absl::GetFlag(FLAGS_shard_env).c_str());
    if (v == nullptr || !absl::SimpleAtoi(v, &k)) {
      return absl::InvalidArgumentError("--shard_env names no integer environment variable");
    }
    return k;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and hosts
  for (char c : client_id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<int>(h % static_cast<uint64_t>(n));
}

tandem::client::LocalData ToLocalData(const tandem::ml::Dataset& d) {
  tandem::client::LocalData out;
  out.rows = d.features.rows();
  out.cols = d.features.cols();
  out.features.assign(d.features.data(), d.features.data() + out.rows * out.cols);
  out.labels = d.labels;
  out.num_classes = d.num_classes;
  out.shape = {d.shape.channels, d.shape.height, d.shape.width};  // e.g. 1x8x8 digits
  return out;
}

absl::StatusOr<tandem::client::LocalData> LoadShard(const std::string& client_id) {
  const int n = absl::GetFlag(FLAGS_num_shards);
  if (n < 1) return absl::InvalidArgumentError("need num_shards >= 1");
  absl::StatusOr<int> shard = Shard(client_id, n);
  if (!shard.ok()) return shard.status();
  const int k = *shard;
  if (k < 0 || k >= n) return absl::InvalidArgumentError("need 0 <= shard < num_shards");
  auto data = tandem::ml::LoadNamedDataset(absl::GetFlag(FLAGS_dataset),
                                           absl::GetFlag(FLAGS_data_seed),
                                           absl::GetFlag(FLAGS_train_items), 1);
  if (!data.ok()) return data.status();
  const tandem::ml::Dataset& train = data->first;
  auto parts = tandem::ml::PartitionDirichlet(train.labels, train.num_classes, n,
                                              absl::GetFlag(FLAGS_alpha),
                                              absl::GetFlag(FLAGS_data_seed), /*min_per_client=*/10);
  if (!parts.ok()) return parts.status();
  auto mine = train.Subset((*parts)[k]);
  if (!mine.ok()) return mine.status();
  return ToLocalData(*mine);
}

// The shard, and for federated evaluation rounds the held-out examples:
// rows i of the dataset's test split with i % num_shards == shard (never
// trained on; loaded when first asked for).
class ShardDataSource : public tandem::client::DataSource {
 public:
  ShardDataSource(tandem::client::LocalData shard, int k, int n)
      : shard_(std::move(shard)), k_(k), n_(n) {}
  absl::StatusOr<tandem::client::LocalData> Load() override { return shard_; }
  absl::StatusOr<tandem::client::LocalData> LoadHeldOut() override {
    auto data = tandem::ml::LoadNamedDataset(absl::GetFlag(FLAGS_dataset),
                                             absl::GetFlag(FLAGS_data_seed), 1, 0);
    if (!data.ok()) return data.status();
    std::vector<int64_t> rows;
    for (int64_t i = k_; i < data->second.size(); i += n_) rows.push_back(i);
    auto mine = data->second.Subset(rows);
    if (!mine.ok()) return mine.status();
    return ToLocalData(*mine);
  }

 private:
  tandem::client::LocalData shard_;
  int k_;
  int n_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tandem federated client");
  absl::ParseCommandLine(argc, argv);
  const std::string client_id = ClientId();
  absl::StatusOr<tandem::client::LocalData> shard = LoadShard(client_id);
  if (!shard.ok()) {
    std::fprintf(stderr, "tandem-client: %s\n", shard.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<int> shard_index = Shard(client_id, absl::GetFlag(FLAGS_num_shards));
  if (!shard_index.ok()) {
    std::fprintf(stderr, "tandem-client: %s\n", shard_index.status().ToString().c_str());
    return 1;
  }
  ShardDataSource data(*std::move(shard), *shard_index, absl::GetFlag(FLAGS_num_shards));
  std::unique_ptr<tandem::client::StateStore> store;
  if (!absl::GetFlag(FLAGS_state_dir).empty()) {
    auto s = tandem::client::MakeFileStateStore(absl::GetFlag(FLAGS_state_dir));
    if (!s.ok()) {
      std::fprintf(stderr, "tandem-client: %s\n", s.status().ToString().c_str());
      return 1;
    }
    store = *std::move(s);
  }
  if (absl::GetFlag(FLAGS_print_device)) {
    auto device = tandem::client::DeviceIdentity::LoadOrCreate(
        store.get(), tandem::OpenSslRandom::Default(), "");
    if (!device.ok()) {
      std::fprintf(stderr, "tandem-client: %s\n", device.status().ToString().c_str());
      return 1;
    }
    std::printf("%s %s\n", (*device)->id().c_str(),
                absl::BytesToHexString((*device)->key().PublicKeyRaw()).c_str());
    return 0;
  }
  tandem::client::ParticipantOptions o;
  o.coordinator = absl::GetFlag(FLAGS_coordinator);
  o.coordinator_name = absl::GetFlag(FLAGS_coordinator_name);
  o.client_id = client_id;
  o.task_id = absl::GetFlag(FLAGS_task_id);
  o.insecure_plaintext = absl::GetFlag(FLAGS_insecure_plaintext);
  o.tls_root_ca = absl::GetFlag(FLAGS_tls_ca);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.leader_address = absl::GetFlag(FLAGS_leader);
  o.leader_name = absl::GetFlag(FLAGS_leader_name);
  o.helper_address = absl::GetFlag(FLAGS_helper);
  o.helper_name = absl::GetFlag(FLAGS_helper_name);
  o.max_model_bytes = absl::GetFlag(FLAGS_max_model_bytes);
  o.max_dimension = absl::GetFlag(FLAGS_max_dimension);
  if (const std::string path = absl::GetFlag(FLAGS_enrollment_token_file); !path.empty()) {
    std::ifstream in(path);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in) {
      std::fprintf(stderr, "tandem-client: cannot read the enrollment token %s\n", path.c_str());
      return 1;
    }
    o.enrollment_token = buf.str();
    if (const std::string env = absl::GetFlag(FLAGS_enrollment_token_line_env); !env.empty()) {
      const char* value = std::getenv(env.c_str());
      int line = -1;
      if (value == nullptr || !absl::SimpleAtoi(value, &line) || line < 0) {
        std::fprintf(stderr, "tandem-client: $%s must hold a line index\n", env.c_str());
        return 1;
      }
      std::vector<std::string> lines = absl::StrSplit(o.enrollment_token, '\n', absl::SkipEmpty());
      if (line >= static_cast<int>(lines.size())) {
        std::fprintf(stderr, "tandem-client: %s has no token line %d\n", path.c_str(), line);
        return 1;
      }
      o.enrollment_token = lines[line];
    }
  }
  tandem::client::Environment env;
  env.data = &data;
  env.storage = store.get();
  auto p = tandem::client::Participant::Create(o, env);
  if (!p.ok()) {
    std::fprintf(stderr, "tandem-client: %s\n", p.status().ToString().c_str());
    return 1;
  }
  int contributed = 0, errors = 0;
  while (true) {
    absl::StatusOr<tandem::client::RoundResult> r = (*p)->ParticipateOnce();
    if (!r.ok()) {
      std::fprintf(stderr, "tandem-client %s: %s\n", o.client_id.c_str(),
                   r.status().ToString().c_str());
      if (++errors >= absl::GetFlag(FLAGS_max_errors)) return 1;
      absl::SleepFor(absl::Milliseconds(200));
      continue;
    }
    errors = 0;
    switch (r->outcome) {
      case tandem::client::RoundOutcome::kTaskDone:
        std::printf("%s: task done after %d contributions\n", o.client_id.c_str(), contributed);
        return 0;
      case tandem::client::RoundOutcome::kNotSelected:
        absl::SleepFor(absl::Milliseconds(r->retry_after_ms));
        break;
      case tandem::client::RoundOutcome::kContributed:
        std::printf("%s: round %llu: %llu examples %s, %llu bytes up, %llu down%s\n",
                    o.client_id.c_str(), static_cast<unsigned long long>(r->round_id),
                    static_cast<unsigned long long>(r->examples),
                    r->evaluated ? "evaluated" : "trained",
                    static_cast<unsigned long long>(r->bytes_up),
                    static_cast<unsigned long long>(r->bytes_down), r->resent ? " (resent)" : "");
        std::fflush(stdout);
        if (++contributed == absl::GetFlag(FLAGS_max_rounds)) return 0;
        break;
    }
  }
}
