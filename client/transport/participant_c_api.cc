// The participant half of the C ABI (tandem/client/c_api.h).
#include <memory>
#include <new>

#include "client/internal/c_error.h"
#include "tandem/client/c_api.h"
#include "tandem/client/participant.h"

struct tandem_participant {
  std::unique_ptr<tandem::client::FixedDataSource> data;
  std::unique_ptr<tandem::client::StateStore> store;
  std::unique_ptr<tandem::client::Participant> impl;
};

using tandem::client::internal::Fail;

extern "C" int tandem_participant_create(const tandem_participant_options* o,
                                         tandem_participant** out, char* error, size_t error_len) {
  if (o == nullptr || out == nullptr || o->coordinator == nullptr || o->client_id == nullptr ||
      o->features == nullptr || o->labels == nullptr || o->rows < 1 || o->cols < 1) {
    return Fail(absl::InvalidArgumentError(
                    "options, coordinator, client_id, features, labels and rows/cols >= 1 required"),
                error, error_len);
  }
  tandem::client::LocalData d;
  d.rows = o->rows;
  d.cols = o->cols;
  d.features.assign(o->features, o->features + o->rows * o->cols);
  d.labels.assign(o->labels, o->labels + o->rows);
  d.num_classes = o->num_classes;
  auto p = std::unique_ptr<tandem_participant>(new (std::nothrow) tandem_participant());
  if (p == nullptr) return Fail(absl::ResourceExhaustedError("out of memory"), error, error_len);
  p->data = std::make_unique<tandem::client::FixedDataSource>(std::move(d));
  if (o->state_dir != nullptr && o->state_dir[0] != '\0') {
    auto s = tandem::client::MakeFileStateStore(o->state_dir);
    if (!s.ok()) return Fail(s.status(), error, error_len);
    p->store = *std::move(s);
  }
  tandem::client::ParticipantOptions po;
  po.coordinator = o->coordinator;
  po.client_id = o->client_id;
  po.task_id = o->task_id == nullptr ? "" : o->task_id;
  po.insecure_plaintext = o->insecure_plaintext != 0;
  po.tls_root_ca = o->tls_root_ca == nullptr ? "" : o->tls_root_ca;
  tandem::client::Environment env;
  env.data = p->data.get();
  env.storage = p->store.get();
  auto impl = tandem::client::Participant::Create(po, env);
  if (!impl.ok()) return Fail(impl.status(), error, error_len);
  p->impl = *std::move(impl);
  *out = p.release();
  return 0;
}

extern "C" int tandem_participant_participate_once(tandem_participant* p,
                                                   tandem_round_result* result, char* error,
                                                   size_t error_len) {
  if (p == nullptr || result == nullptr) {
    return Fail(absl::InvalidArgumentError("participant and result are required"), error,
                error_len);
  }
  absl::StatusOr<tandem::client::RoundResult> r = p->impl->ParticipateOnce();
  if (!r.ok()) return Fail(r.status(), error, error_len);
  switch (r->outcome) {
    case tandem::client::RoundOutcome::kContributed: result->outcome = TANDEM_ROUND_CONTRIBUTED; break;
    case tandem::client::RoundOutcome::kNotSelected: result->outcome = TANDEM_ROUND_NOT_SELECTED; break;
    case tandem::client::RoundOutcome::kTaskDone: result->outcome = TANDEM_ROUND_TASK_DONE; break;
  }
  result->round_id = r->round_id;
  result->retry_after_ms = r->retry_after_ms;
  result->examples = r->examples;
  result->bytes_up = r->bytes_up;
  result->bytes_down = r->bytes_down;
  return 0;
}

extern "C" void tandem_participant_cancel(tandem_participant* p) {
  if (p != nullptr) p->impl->Cancel();
}

extern "C" void tandem_participant_destroy(tandem_participant* p) { delete p; }
