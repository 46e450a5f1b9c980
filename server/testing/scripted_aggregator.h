// Test-only AggregatorClient for the coordinator's state machine: records
// OpenRound/Finalize calls and answers Finalize like an aggregator that
// counted `accepted` reports whose sum share is `share_value` in every
// coordinate (the helper's share is 0). The real daemons are exercised by
// tests/integration/coordinator_test.cc. Not thread-safe.
#ifndef TANDEM_SERVER_TESTING_SCRIPTED_AGGREGATOR_H_
#define TANDEM_SERVER_TESTING_SCRIPTED_AGGREGATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/core/aggregator_client.h"

namespace tandem::server::testing {

class ScriptedAggregator : public AggregatorClient {
 public:
  explicit ScriptedAggregator(bool leader) : leader_(leader) {}
  absl::StatusOr<proto::OpenRoundResponse> OpenRound(const proto::RoundParameters& p) override {
    if (fail_open) return absl::UnavailableError("down");
    if (!refuse_open.ok()) return refuse_open;
    opened.push_back(p);
    return open_response;
  }
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest& r) override {
    finalized.push_back(r.round_id());
    proto::FinalizeResponse f;
    f.set_accepted_reports(accepted);
    const uint64_t d = opened.back().dimension();
    std::vector<uint64_t> v(d, leader_ ? share_value : 0);
    f.mutable_aggregate_share()->set_dtype(proto::DTYPE_UINT64);
    f.mutable_aggregate_share()->add_shape(static_cast<int64_t>(d));
    f.mutable_aggregate_share()->set_data(
        std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
    return f;
  }
  absl::Status AbandonRound(const std::string& task_id, uint64_t round_id) override {
    abandoned.push_back(round_id);
    return absl::OkStatus();
  }
  std::vector<proto::RoundParameters> opened;
  std::vector<uint64_t> finalized;
  std::vector<uint64_t> abandoned;
  uint64_t accepted = 0;
  uint64_t share_value = 0;
  bool fail_open = false;
  absl::Status refuse_open;  // a policy refusal OpenRound answers with, when not OK
  proto::OpenRoundResponse open_response;  // what a successful OpenRound answers

 private:
  bool leader_;
};

}  // namespace tandem::server::testing

#endif  // TANDEM_SERVER_TESTING_SCRIPTED_AGGREGATOR_H_
