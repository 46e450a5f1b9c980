// cpp_app: a participant app built on the installed tandem client SDK
// (find_package(tandem), tandem::client). It reads its local examples from
// a CSV file (one example per line: the features, then the integer label;
// it keeps lines shard, shard + num_shards, ...), then takes part in the
// coordinator's rounds until it has contributed --rounds times or the task
// is done. Everything private happens inside the SDK: local training,
// clipping, encoding into the two PREAMBLE key shares, the uploads to the
// two aggregators it pins here.
//
//   cpp_app --coordinator=H:P --tls_ca=roots.pem --leader=H:P --leader_name=N
//           --helper=H:P --helper_name=N --token_file=F --state_dir=D
//           --data=F.csv [--shard=0 --num_shards=1 --feature_scale=1
//           --task_id=T --rounds=1 --max_errors=50 --client_id=app]
//
// Exit code 0 once done, 1 on a fatal error (bad flags or data, the SDK's
// refusal to start, or more than --max_errors failed check-ins).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tandem/client/c_api.h"
#include "tandem/client/participant.h"

namespace {

using tandem::client::LocalData;

// --name=value flags; anything else is an error.
bool ParseFlags(int argc, char** argv, std::map<std::string, std::string>* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::cerr << "cpp_app: expected --name=value, got " << a << "\n";
      return false;
    }
    (*flags)[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  return true;
}

std::string Flag(const std::map<std::string, std::string>& f, const std::string& name,
                 const std::string& fallback = "") {
  auto it = f.find(name);
  return it == f.end() ? fallback : it->second;
}

// The app's own data: every num_shards-th line of a CSV file.
class CsvShard : public tandem::client::DataSource {
 public:
  CsvShard(std::string path, int shard, int num_shards, float scale)
      : path_(std::move(path)), shard_(shard), num_shards_(num_shards), scale_(scale) {}

  absl::StatusOr<LocalData> Load() override {
    std::ifstream in(path_);
    if (!in) return absl::NotFoundError("cannot open " + path_);
    LocalData d;
    std::string line;
    for (int64_t n = 0; std::getline(in, line); ++n) {
      if (line.empty() || n % num_shards_ != shard_) continue;
      std::stringstream cells(line);
      std::string cell;
      std::vector<float> row;
      while (std::getline(cells, cell, ',')) row.push_back(std::strtof(cell.c_str(), nullptr));
      if (row.size() < 2) return absl::InvalidArgumentError(path_ + ": a line with < 2 columns");
      const int label = static_cast<int>(row.back());
      row.pop_back();
      if (d.cols == 0) d.cols = static_cast<int64_t>(row.size());
      if (static_cast<int64_t>(row.size()) != d.cols) {
        return absl::InvalidArgumentError(path_ + ": lines of different widths");
      }
      for (float v : row) d.features.push_back(v / scale_);
      d.labels.push_back(label);
      d.num_classes = std::max(d.num_classes, label + 1);
      ++d.rows;
    }
    if (d.rows == 0) return absl::InvalidArgumentError(path_ + ": no examples in this shard");
    d.num_classes = std::max(d.num_classes, 10);
    return d;
  }

 private:
  std::string path_;
  int shard_, num_shards_;
  float scale_;
};

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> f;
  if (!ParseFlags(argc, argv, &f)) return 1;
  std::cout << "cpp_app: tandem client SDK " << tandem_client_version() << std::endl;

  CsvShard data(Flag(f, "data"), std::stoi(Flag(f, "shard", "0")),
                std::stoi(Flag(f, "num_shards", "1")), std::stof(Flag(f, "feature_scale", "1")));
  absl::StatusOr<std::unique_ptr<tandem::client::StateStore>> store =
      tandem::client::MakeFileStateStore(Flag(f, "state_dir", "cpp_app-state"));
  if (!store.ok()) {
    std::cerr << "cpp_app: " << store.status() << "\n";
    return 1;
  }
  tandem::client::ParticipantOptions o;
  o.coordinator = Flag(f, "coordinator");
  o.client_id = Flag(f, "client_id", "cpp_app");
  o.task_id = Flag(f, "task_id");
  o.tls_root_ca = Flag(f, "tls_ca");
  o.leader_address = Flag(f, "leader");
  o.leader_name = Flag(f, "leader_name");
  o.helper_address = Flag(f, "helper");
  o.helper_name = Flag(f, "helper_name");
  std::ifstream token(Flag(f, "token_file"));
  std::getline(token, o.enrollment_token);  // empty: the device is enrolled already

  tandem::client::Environment env;
  env.data = &data;
  env.storage = store->get();
  absl::StatusOr<std::unique_ptr<tandem::client::Participant>> p =
      tandem::client::Participant::Create(o, env);
  if (!p.ok()) {
    std::cerr << "cpp_app: " << p.status() << "\n";
    return 1;
  }
  const int rounds = std::stoi(Flag(f, "rounds", "1"));
  const int max_errors = std::stoi(Flag(f, "max_errors", "50"));
  int contributed = 0, errors = 0;
  while (contributed < rounds) {
    absl::StatusOr<tandem::client::RoundResult> r = (*p)->ParticipateOnce();
    int64_t wait_ms = 1000;
    if (!r.ok()) {
      std::cerr << "cpp_app: check-in failed: " << r.status() << "\n";
      if (++errors > max_errors) return 1;
    } else if (r->outcome == tandem::client::RoundOutcome::kTaskDone) {
      std::cout << "cpp_app: the task is done" << std::endl;
      break;
    } else if (r->outcome == tandem::client::RoundOutcome::kContributed) {
      ++contributed;
      std::cout << "cpp_app: contributed to round " << r->round_id << " (" << r->examples
                << " examples, " << r->bytes_up << " bytes up)" << std::endl;
      wait_ms = 0;
    } else {
      wait_ms = std::min<int64_t>(r->retry_after_ms, 2000);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  return 0;
}
