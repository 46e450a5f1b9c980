// Test-only: a RoundTransport that answers from fields the test sets and
// records every request (the runners' network seam), and the assignments
// the runners' tests script. Not thread-safe.
#ifndef TANDEM_CLIENT_INTERNAL_SCRIPTED_TRANSPORT_H_
#define TANDEM_CLIENT_INTERNAL_SCRIPTED_TRANSPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "client/internal/round_transport.h"
#include "proto/common.pb.h"

namespace tandem::client {

class ScriptedTransport : public RoundTransport {
 public:
  absl::StatusOr<proto::CheckInResponse> CheckIn(const proto::CheckInRequest& r) override {
    last_client = r.client_id();
    check_ins.push_back(r);
    return check_in;
  }
  absl::StatusOr<std::string> DownloadModel(const proto::DownloadModelRequest&) override {
    ++downloads;
    return model_blob;
  }
  absl::Status UploadDone(const proto::UploadDoneRequest& r) override {
    done.push_back(r);
    return absl::OkStatus();
  }
  absl::Status Upload(const proto::Endpoint& leader, const proto::Endpoint& helper,
                      const proto::UploadRequest& a, const proto::UploadRequest& b) override {
    uploads.push_back({a, b});
    endpoints.push_back({leader, helper});
    return upload_status;
  }
  void Cancel() override { cancelled = true; }

  proto::CheckInResponse check_in;
  std::string model_blob;
  absl::Status upload_status;
  std::string last_client;
  std::vector<proto::CheckInRequest> check_ins;
  int downloads = 0;
  bool cancelled = false;
  std::vector<proto::UploadDoneRequest> done;
  std::vector<std::pair<proto::UploadRequest, proto::UploadRequest>> uploads;
  std::vector<std::pair<proto::Endpoint, proto::Endpoint>> endpoints;
};

// An assignment for an MLP 3 -> 4 -> 2 (26 parameters), D = 2 groups x 2
// blocks x 8 = 32.
inline proto::CheckInResponse Task(uint64_t round) {
  proto::CheckInResponse t;
  t.set_outcome(proto::CheckInResponse::OUTCOME_TASK);
  t.set_task_id("t");
  t.set_round_id(round);
  proto::RoundParameters* rp = t.mutable_round_parameters();
  rp->set_task_id("t");
  rp->set_round_id(round);
  rp->set_dimension(32);
  rp->set_num_groups(2);
  rp->mutable_group_parameters()->set_log_num_blocks(1);
  rp->mutable_group_parameters()->set_block_size(8);
  rp->set_max_reports(10);
  rp->mutable_fixed_point()->set_fractional_bits(16);
  rp->mutable_fixed_point()->set_clip_l2_norm(1.0);
  proto::TrainingConfig* tc = t.mutable_training();
  tc->mutable_model()->set_input_dim(3);
  tc->mutable_model()->add_hidden(4);
  tc->mutable_model()->set_num_classes(2);
  tc->set_local_steps(5);
  tc->set_batch_size(4);
  tc->set_learning_rate(0.1);
  t.mutable_leader()->set_address("leader:1");
  t.mutable_helper()->set_address("helper:1");
  return t;
}

// A coordinator-signed ticket as the client sees it (the signature is the
// aggregators' to verify; 64 placeholder bytes here).
inline proto::SignedUploadTicket Ticket(const std::string& task, uint64_t round,
                                        const std::string& id,
                                        const std::string& device_public_key = "") {
  proto::UploadTicket t;
  t.set_task_id(task);
  t.set_round_id(round);
  t.set_ticket_id(id);
  t.set_device_public_key(device_public_key);
  t.set_expiry_unix_ms(1700000000000);
  proto::SignedUploadTicket s;
  s.set_ticket(t.SerializeAsString());
  s.set_signature(std::string(64, 's'));
  return s;
}

inline constexpr char kTicketId[] = "ticket-id-16byte";
static_assert(sizeof("ticket-id-16byte") == 17);

inline proto::CheckInResponse TicketedTask(uint64_t round, const std::string& id = kTicketId) {
  proto::CheckInResponse t = Task(round);
  *t.mutable_ticket() = Ticket("t", round, id);
  return t;
}

inline std::string ModelBlob(size_t n) {
  proto::Model m;
  proto::Tensor* t = m.add_layers();
  t->set_dtype(proto::DTYPE_FLOAT32);
  t->add_shape(static_cast<int64_t>(n));
  std::vector<float> p(n, 0.1f);
  t->set_data(std::string(reinterpret_cast<const char*>(p.data()), n * 4));
  return m.SerializeAsString();
}

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_SCRIPTED_TRANSPORT_H_
