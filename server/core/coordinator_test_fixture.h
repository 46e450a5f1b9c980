// The fixture of the coordinator core's tests (coordinator_test.cc,
// coordinator_evaluation_test.cc): a Coordinator over SQLite files in a
// temporary directory, scripted aggregators, a fake clock, test devices.
// Test-only.
#ifndef TANDEM_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_
#define TANDEM_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/core/coordinator.h"
#include "server/testing/scripted_aggregator.h"
#include "server/testing/test_devices.h"

namespace tandem::server {

using ::tandem::server::testing::ScriptedAggregator;

inline ml::Dataset EvalData() {
  ml::Dataset d;
  d.num_classes = 2;
  d.features = ml::Matrix::Zero(8, 4);
  d.shape = {1, 1, 4};
  for (int i = 0; i < 8; ++i) {
    d.features(i, i % 4) = 1.0f;
    d.labels.push_back(i % 2);
  }
  return d;
}

inline CoordinatorOptions Options() {
  CoordinatorOptions o;
  o.task_id = "t1";
  o.model.set_input_dim(4);
  o.model.add_hidden(3);
  o.model.set_num_classes(2);
  o.rounds = 2;
  o.min_reports = 2;
  o.round_timeout = absl::Seconds(10);
  o.task.sample_rate = 1.0;
  o.task.secure_sum.block_size = 8;
  o.task.secure_sum.clip_l2_norm = 1.0;
  o.task.secure_sum.max_reports = 100;
  // These tests are about the state machine: a quorum of 2 (the private
  // defaults, z = 1 and norm proofs, stay on).
  o.task.secure_sum.min_batch_size = 1;
  return o;
}

inline crypto::Ed25519SigningKey TicketKey(char fill = 'k') {
  return *crypto::Ed25519SigningKey::FromSeed(std::string(32, fill));
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  // A coordinator over the files in dir_; devices enroll themselves (open
  // policy: these tests are about rounds; device_registry_test and the
  // integration tests cover enrollment).
  absl::StatusOr<std::unique_ptr<Coordinator>> Make(CoordinatorOptions o = Options()) {
    TANDEM_ASSIGN_OR_RETURN(auto store, CoordinatorStore::Open((dir_ / "c.db").string()));
    devices_.reset();
    TANDEM_ASSIGN_OR_RETURN(device_store_, DeviceStore::Open((dir_ / "devices.db").string()));
    DeviceRegistryOptions ro;
    ro.policy = DevicePolicy::kOpen;
    TANDEM_ASSIGN_OR_RETURN(devices_, DeviceRegistry::Create(ro, device_store_.get(), &clock_));
    o.devices = devices_.get();
    return Coordinator::Create(std::move(o), TicketKey(), EvalData(), &leader_, &helper_,
                               std::move(store), &clock_, random_.get());
  }
  // The signed check-in of the test device `label` (its client id is
  // Id(label)).
  proto::CheckInRequest In(const std::string& label) {
    return testing::SignedCheckIn(label, absl::ToUnixMillis(clock_.Now()));
  }
  static std::string Id(const std::string& label) { return testing::TestDeviceId(label); }
  // Coordinator::CheckIn, remembering the ticket of an assignment.
  absl::StatusOr<proto::CheckInResponse> CheckIn(Coordinator& c, const proto::CheckInRequest& r) {
    absl::StatusOr<proto::CheckInResponse> out = c.CheckIn(r);
    if (out.ok() && out->outcome() == proto::CheckInResponse::OUTCOME_TASK) {
      tickets_[r.client_id()] = out->ticket();
    }
    return out;
  }
  // The client's UploadDone with the ticket it was given; the report id is
  // the ticket id unless `tag` asks for another.
  proto::UploadDoneRequest Done(const std::string& label, uint64_t round, char tag = 0) {
    const std::string id = Id(label);
    proto::UploadDoneRequest r;
    r.set_client_id(id);
    r.set_task_id("t1");
    r.set_round_id(round);
    r.set_bytes_uploaded(1000);
    auto it = tickets_.find(id);
    if (it != tickets_.end()) {
      *r.mutable_ticket() = it->second;
      proto::UploadTicket t;
      if (t.ParseFromString(it->second.ticket())) r.set_report_id(t.ticket_id());
    }
    if (tag != 0 || r.report_id().empty()) r.set_report_id(std::string(16, tag ? tag : 'r'));
    return r;
  }
  void TickUntil(Coordinator& c, const std::string& phase) {
    for (int i = 0; i < 5 && c.Status().phase() != phase; ++i) TANDEM_ASSERT_OK(c.Tick());
    ASSERT_EQ(c.Status().phase(), phase);
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<DeterministicRandom> random_ = DeterministicRandom::FromSeed(7);
  ScriptedAggregator leader_{true}, helper_{false};
  std::map<std::string, proto::SignedUploadTicket> tickets_;  // by device id
  std::unique_ptr<DeviceStore> device_store_;
  std::unique_ptr<DeviceRegistry> devices_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_COORDINATOR_TEST_FIXTURE_H_
