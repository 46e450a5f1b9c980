// The C ABI (client/include/tandem/client/c_api.h) over ReportEncoder.
#include "tandem/client/c_api.h"

#include <cstdlib>
#include <cstring>
#include <memory>
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
using tandem::client::internal::Guard;
using tandem::client::internal::GuardVoid;

bool CopyOut(const std::string& bytes, tandem_buffer* out) {
  out->data = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
  if (out->data == nullptr) return false;
  std::memcpy(out->data, bytes.data(), bytes.size());
  out->size = bytes.size();
  return true;
}

// Copies an encoded report out to the caller (malloc'ed buffers).
int Emit(const absl::StatusOr<tandem::client::EncodedReport>& report, uint8_t report_id[16],
         tandem_buffer* to_leader, tandem_buffer* to_helper, char* error, size_t error_len) {
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

}  // namespace

extern "C" {

const char* tandem_client_version(void) { return TANDEM_CLIENT_VERSION; }

int tandem_report_encoder_create(const tandem_round_spec* spec, tandem_report_encoder** out,
                                 char* error, size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
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
    auto encoder = std::make_unique<tandem_report_encoder>();
    encoder->impl = *std::move(impl);
    *out = encoder.release();
    return 0;
  });
}

void tandem_report_encoder_destroy(tandem_report_encoder* encoder) {
  GuardVoid([&] { delete encoder; });
}

int tandem_report_encoder_encode(const tandem_report_encoder* encoder, const float* update,
                                 size_t n, uint8_t report_id[16], tandem_buffer* to_leader,
                                 tandem_buffer* to_helper, char* error, size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
    if (encoder == nullptr || (update == nullptr && n > 0) || report_id == nullptr ||
        to_leader == nullptr || to_helper == nullptr) {
      return Fail(absl::InvalidArgumentError("null argument"), error, error_len);
    }
    return Emit(encoder->impl->Encode(absl::MakeConstSpan(update, n)), report_id, to_leader,
                to_helper, error, error_len);
  });
}

int tandem_report_encoder_encode_ticketed(const tandem_report_encoder* encoder, const float* update,
                                          size_t n, const uint8_t* ticket, size_t ticket_len,
                                          uint8_t report_id[16], tandem_buffer* to_leader,
                                          tandem_buffer* to_helper, char* error, size_t error_len) {
  return Guard(error, error_len, [&]() -> int {
    if (encoder == nullptr || (update == nullptr && n > 0) || ticket == nullptr ||
        report_id == nullptr || to_leader == nullptr || to_helper == nullptr) {
      return Fail(absl::InvalidArgumentError("null argument"), error, error_len);
    }
    const absl::string_view t(reinterpret_cast<const char*>(ticket), ticket_len);
    return Emit(encoder->impl->EncodeWithTicket(absl::MakeConstSpan(update, n), t), report_id,
                to_leader, to_helper, error, error_len);
  });
}

void tandem_buffer_free(tandem_buffer* buffer) {
  if (buffer == nullptr) return;
  std::free(buffer->data);
  buffer->data = nullptr;
  buffer->size = 0;
}

}  // extern "C"
