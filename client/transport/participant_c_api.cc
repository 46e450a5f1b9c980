// The participant half of the C ABI (tandem/client/c_api.h). Every entry
// point runs behind the exception barrier (client/internal/c_error.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/c_error.h"
#include "tandem/client/c_api.h"
#include "tandem/client/participant.h"

namespace {

// The app's training examples (copied at create) and, once set, its
// held-out examples. Set before participate_once, read by it: the mutex only
// keeps a misuse from being a data race.
class CDataSource : public tandem::client::DataSource {
 public:
  explicit CDataSource(tandem::client::LocalData data) : data_(std::move(data)) {}
  absl::StatusOr<tandem::client::LocalData> Load() override {
    absl::MutexLock lock(&mu_);
    tandem::client::LocalData d = data_;
    d.shape = shape_;
    return d;
  }
  absl::StatusOr<tandem::client::LocalData> LoadHeldOut() override {
    absl::MutexLock lock(&mu_);
    if (!held_out_.has_value()) return DataSource::LoadHeldOut();
    tandem::client::LocalData d = *held_out_;
    d.shape = shape_;
    return d;
  }
  // Every example's shape (LocalData::shape), for training and held-out data.
  void SetShape(std::vector<int64_t> shape) {
    absl::MutexLock lock(&mu_);
    shape_ = std::move(shape);
  }
  const tandem::client::LocalData& data() const { return data_; }
  void SetHeldOut(tandem::client::LocalData held_out) {
    absl::MutexLock lock(&mu_);
    held_out_ = std::move(held_out);
  }

 private:
  const tandem::client::LocalData data_;
  absl::Mutex mu_;
  std::optional<tandem::client::LocalData> held_out_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> shape_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

struct tandem_participant {
  std::unique_ptr<CDataSource> data;
  std::unique_ptr<tandem::client::StateStore> store;
  std::unique_ptr<tandem::client::Participant> impl;
};

namespace {

using tandem::client::internal::Fail;
using tandem::client::internal::Guard;
using tandem::client::internal::GuardVoid;

// Local data copied at create: at most 2^32 feature values (16 GiB) and
// 2^16 classes; the product is checked before anything is read or allocated.
constexpr int64_t kMaxFeatureValues = int64_t{1} << 32;
constexpr int32_t kMaxClasses = 1 << 16;

const char* OrEmpty(const char* s) { return s == nullptr ? "" : s; }

// Whether `field` (at offset `off`, of `size` bytes) lies within the
// caller's struct_size: fields appended after the caller's version are
// left at their defaults.
bool Has(const tandem_participant_trust* t, size_t off, size_t size) {
  return t->struct_size >= off + size;
}

absl::Status ApplyTrust(const tandem_participant_trust* t, tandem::client::ParticipantOptions* po) {
  if (t == nullptr) return absl::OkStatus();
  if (t->struct_size < offsetof(tandem_participant_trust, leader_address)) {
    return absl::InvalidArgumentError(
        "tandem_participant_trust.struct_size must be sizeof(tandem_participant_trust)");
  }
#define TANDEM_TRUST_HAS(field) Has(t, offsetof(tandem_participant_trust, field), sizeof(t->field))
  if (TANDEM_TRUST_HAS(leader_address)) po->leader_address = OrEmpty(t->leader_address);
  if (TANDEM_TRUST_HAS(leader_name)) po->leader_name = OrEmpty(t->leader_name);
  if (TANDEM_TRUST_HAS(helper_address)) po->helper_address = OrEmpty(t->helper_address);
  if (TANDEM_TRUST_HAS(helper_name)) po->helper_name = OrEmpty(t->helper_name);
  if (TANDEM_TRUST_HAS(max_model_bytes) && t->max_model_bytes != 0) {
    po->max_model_bytes = t->max_model_bytes;
  }
  if (TANDEM_TRUST_HAS(max_dimension) && t->max_dimension != 0) {
    po->max_dimension = t->max_dimension;
  }
  if (TANDEM_TRUST_HAS(no_error_feedback)) po->error_feedback = t->no_error_feedback == 0;
  if (TANDEM_TRUST_HAS(enrollment_token)) po->enrollment_token = OrEmpty(t->enrollment_token);
#undef TANDEM_TRUST_HAS
  return absl::OkStatus();
}

int Create(const tandem_participant_options* o, const tandem_participant_trust* trust,
           tandem_participant** out, char* error, size_t error_len) {
  if (o == nullptr || out == nullptr || o->coordinator == nullptr || o->client_id == nullptr ||
      o->features == nullptr || o->labels == nullptr || o->rows < 1 || o->cols < 1) {
    return Fail(
        absl::InvalidArgumentError(
            "options, coordinator, client_id, features, labels and rows/cols >= 1 required"),
        error, error_len);
  }
  if (o->rows > kMaxFeatureValues / o->cols || o->num_classes < 2 || o->num_classes > kMaxClasses) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "local data too large or malformed: rows * cols must be <= ", kMaxFeatureValues,
                    " and num_classes in [2, ", kMaxClasses, "]")),
                error, error_len);
  }
  tandem::client::ParticipantOptions po;
  po.coordinator = o->coordinator;
  po.client_id = o->client_id;
  po.task_id = OrEmpty(o->task_id);
  po.insecure_plaintext = o->insecure_plaintext != 0;
  po.tls_root_ca = OrEmpty(o->tls_root_ca);
  const absl::Status applied = ApplyTrust(trust, &po);
  if (!applied.ok()) return Fail(applied, error, error_len);

  tandem::client::LocalData d;
  d.rows = o->rows;
  d.cols = o->cols;
  const size_t values = static_cast<size_t>(o->rows) * static_cast<size_t>(o->cols);
  d.features.assign(o->features, o->features + values);
  d.labels.assign(o->labels, o->labels + o->rows);
  d.num_classes = o->num_classes;
  auto p = std::make_unique<tandem_participant>();
  p->data = std::make_unique<CDataSource>(std::move(d));
  if (o->state_dir != nullptr && o->state_dir[0] != '\0') {
    auto s = tandem::client::MakeFileStateStore(o->state_dir);
    if (!s.ok()) return Fail(s.status(), error, error_len);
    p->store = *std::move(s);
  }
  tandem::client::Environment env;
  env.data = p->data.get();
  env.storage = p->store.get();
  auto impl = tandem::client::Participant::Create(po, env);
  if (!impl.ok()) return Fail(impl.status(), error, error_len);
  p->impl = *std::move(impl);
  *out = p.release();
  return 0;
}

}  // namespace

extern "C" int tandem_participant_create(const tandem_participant_options* o,
                                         tandem_participant** out, char* error, size_t error_len) {
  return Guard(error, error_len, [&] { return Create(o, nullptr, out, error, error_len); });
}

extern "C" int tandem_participant_create_with_trust(const tandem_participant_options* o,
                                                    const tandem_participant_trust* trust,
                                                    tandem_participant** out, char* error,
                                                    size_t error_len) {
  return Guard(error, error_len, [&] { return Create(o, trust, out, error, error_len); });
}

extern "C" int tandem_participant_set_held_out(tandem_participant* p, const float* features,
                                               int64_t rows, const int32_t* labels, char* error,
                                               size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
    if (p == nullptr || features == nullptr || labels == nullptr || rows < 1) {
      return Fail(
          absl::InvalidArgumentError("participant, features, labels and rows >= 1 are required"),
          error, error_len);
    }
    const tandem::client::LocalData& train = p->data->data();
    if (rows > kMaxFeatureValues / train.cols) {
      return Fail(absl::InvalidArgumentError("held-out data too large"), error, error_len);
    }
    tandem::client::LocalData d;
    d.rows = rows;
    d.cols = train.cols;
    d.num_classes = train.num_classes;
    d.features.assign(features, features + static_cast<size_t>(rows * train.cols));
    d.labels.assign(labels, labels + rows);
    p->data->SetHeldOut(std::move(d));
    return 0;
  });
}

extern "C" int tandem_participant_set_example_shape(tandem_participant* p, int64_t channels,
                                                    int64_t height, int64_t width, char* error,
                                                    size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
    if (p == nullptr) {
      return Fail(absl::InvalidArgumentError("participant is required"), error, error_len);
    }
    const int64_t cols = p->data->data().cols;
    if (channels < 1 || height < 1 || width < 1 || channels > cols || height > cols ||
        width > cols || channels * height * width != cols) {
      return Fail(
          absl::InvalidArgumentError("channels x height x width must be the create call's cols"),
          error, error_len);
    }
    p->data->SetShape({channels, height, width});
    return 0;
  });
}

extern "C" int tandem_participant_participate_once(tandem_participant* p,
                                                   tandem_round_result* result, char* error,
                                                   size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
    if (p == nullptr || result == nullptr) {
      return Fail(absl::InvalidArgumentError("participant and result are required"), error,
                  error_len);
    }
    absl::StatusOr<tandem::client::RoundResult> r = p->impl->ParticipateOnce();
    if (!r.ok()) return Fail(r.status(), error, error_len);
    switch (r->outcome) {
      case tandem::client::RoundOutcome::kContributed:
        result->outcome = TANDEM_ROUND_CONTRIBUTED;
        break;
      case tandem::client::RoundOutcome::kNotSelected:
        result->outcome = TANDEM_ROUND_NOT_SELECTED;
        break;
      case tandem::client::RoundOutcome::kTaskDone:
        result->outcome = TANDEM_ROUND_TASK_DONE;
        break;
    }
    result->round_id = r->round_id;
    result->retry_after_ms = r->retry_after_ms;
    result->examples = r->examples;
    result->bytes_up = r->bytes_up;
    result->bytes_down = r->bytes_down;
    return 0;
  });
}

extern "C" void tandem_participant_cancel(tandem_participant* p) {
  GuardVoid([&] {
    if (p != nullptr) p->impl->Cancel();
  });
}

extern "C" void tandem_participant_destroy(tandem_participant* p) {
  GuardVoid([&] { delete p; });
}
