/* tandem client SDK, C ABI (for apps in C, Swift, Kotlin/JNI, Rust FFI...).
 *
 * Return values are absl/gRPC status codes: 0 = OK, 3 = INVALID_ARGUMENT,
 * 13 = INTERNAL. On error a message is written to `error` (NUL-terminated,
 * truncated to error_len) when error is not NULL.
 * Ownership: objects and buffers returned by the library are freed with the
 * matching tandem_*_free / _destroy call. Thread safety: one encoder may be
 * used from several threads at once; buffers are not shared. */
#ifndef TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_C_API_H_
#define TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tandem_report_encoder tandem_report_encoder;

typedef struct {
  const char* task_id;      /* NUL-terminated */
  uint64_t round_id;
  uint64_t dimension;       /* D = num_groups * 2^log_num_blocks * block_size */
  uint32_t block_size;
  uint32_t num_groups;
  uint32_t log_num_blocks;
  int32_t frac_bits;
  double clip_l2_norm;
  uint64_t max_summands;
} tandem_round_spec;

typedef struct {
  uint8_t* data;
  size_t size;
} tandem_buffer;

int tandem_report_encoder_create(const tandem_round_spec* spec, tandem_report_encoder** out,
                                 char* error, size_t error_len);
void tandem_report_encoder_destroy(tandem_report_encoder* encoder);

/* Encodes one update of `n` floats. On success `to_leader` and `to_helper`
 * hold serialized UploadRequests and `report_id` (16 bytes, caller-owned
 * array) the idempotency key. */
int tandem_report_encoder_encode(const tandem_report_encoder* encoder, const float* update,
                                 size_t n, uint8_t report_id[16], tandem_buffer* to_leader,
                                 tandem_buffer* to_helper, char* error, size_t error_len);
void tandem_buffer_free(tandem_buffer* buffer);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_C_API_H_ */
