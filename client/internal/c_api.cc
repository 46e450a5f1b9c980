// The C ABI (client/include/tandem/client/c_api.h) over ReportEncoder.
#include "tandem/client/c_api.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "client/internal/c_error.h"
#include "tandem/client/report_encoder.h"

struct tandem_report_encoder {
  std::unique_ptr<tandem::client::ReportEncoder> impl;
};

namespace {

using tandem::client::internal::Fail;

bool CopyOut(const std::string& bytes, tandem_buffer* out) {
  out->data = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
  if (out->data == nullptr) return false;
  std::memcpy(out->data, bytes.data(), bytes.size());
  out->size = bytes.size();
  return true;
}

}  // namespace

extern "C" {

int tandem_report_encoder_create(const tandem_round_spec* spec, tandem_report_encoder** out,
                                 char* error, size_t error_len) {
  if (spec == nullptr || out == nullptr || spec->task_id == nullptr) {
    return Fail(absl::InvalidArgumentError("spec, spec->task_id and out are required"), error,
                error_len);
  }
  tandem::client::RoundSpec s;
  s.task_id = spec->task_id;
  s.round_id = spec->round_id;
  s.dimension = spec->dimension;
  s.block_size = spec->block_size;
  s.num_groups = spec->num_groups;
  s.log_num_blocks = spec->log_num_blocks;
  s.frac_bits = spec->frac_bits;
  s.clip_l2_norm = spec->clip_l2_norm;
  s.max_summands = spec->max_summands;
  auto impl = tandem::client::ReportEncoder::Create(s);
  if (!impl.ok()) return Fail(impl.status(), error, error_len);
  auto* encoder = new (std::nothrow) tandem_report_encoder{*std::move(impl)};
  if (encoder == nullptr) return Fail(absl::ResourceExhaustedError("out of memory"), error, error_len);
  *out = encoder;
  return 0;
}

void tandem_report_encoder_destroy(tandem_report_encoder* encoder) { delete encoder; }

int tandem_report_encoder_encode(const tandem_report_encoder* encoder, const float* update,
                                 size_t n, uint8_t report_id[16], tandem_buffer* to_leader,
                                 tandem_buffer* to_helper, char* error, size_t error_len) {
  if (encoder == nullptr || (update == nullptr && n > 0) || report_id == nullptr ||
      to_leader == nullptr || to_helper == nullptr) {
    return Fail(absl::InvalidArgumentError("null argument"), error, error_len);
  }
  auto report = encoder->impl->Encode(absl::MakeConstSpan(update, n));
  if (!report.ok()) return Fail(report.status(), error, error_len);
  if (!CopyOut(report->to_leader, to_leader)) {
    return Fail(absl::ResourceExhaustedError("out of memory"), error, error_len);
  }
  if (!CopyOut(report->to_helper, to_helper)) {
    tandem_buffer_free(to_leader);
    return Fail(absl::ResourceExhaustedError("out of memory"), error, error_len);
  }
  std::memcpy(report_id, report->report_id.data(), 16);
  return 0;
}

void tandem_buffer_free(tandem_buffer* buffer) {
  if (buffer == nullptr) return;
  std::free(buffer->data);
  buffer->data = nullptr;
  buffer->size = 0;
}

}  // extern "C"
