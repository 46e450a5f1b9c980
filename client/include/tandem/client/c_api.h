/* tandem client SDK, C ABI (for apps in C, Swift, Kotlin/JNI, Rust FFI...).
 *
 * Return values are absl/gRPC status codes: 0 = OK, 1 = CANCELLED,
 * 3 = INVALID_ARGUMENT, 13 = INTERNAL, 14 = UNAVAILABLE, ... On error a
 * message is written to `error` (NUL-terminated, truncated to error_len)
 * when error is not NULL.
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

/* Participant (tandem/client/participant.h): takes part in the rounds of a
 * federated task. The data arrays are copied at create. Link
 * tandem_client_transport for these. */
typedef struct tandem_participant tandem_participant;

typedef struct {
  const char* coordinator;   /* host:port */
  const char* client_id;     /* [A-Za-z0-9._-]{1,64} */
  const char* task_id;       /* NULL or "" = the coordinator's task */
  const char* state_dir;     /* NULL = nothing persisted */
  int32_t insecure_plaintext;
  const char* tls_root_ca;   /* PEM file, NULL without TLS */
  const float* features;     /* rows x cols, row-major */
  int64_t rows;
  int64_t cols;
  const int32_t* labels;     /* rows labels in [0, num_classes) */
  int32_t num_classes;
} tandem_participant_options;

enum {
  TANDEM_ROUND_CONTRIBUTED = 0,
  TANDEM_ROUND_NOT_SELECTED = 1,
  TANDEM_ROUND_TASK_DONE = 2
};

typedef struct {
  int32_t outcome;           /* TANDEM_ROUND_* */
  uint64_t round_id;
  int64_t retry_after_ms;
  uint64_t examples;
  uint64_t bytes_up;
  uint64_t bytes_down;
} tandem_round_result;

int tandem_participant_create(const tandem_participant_options* options,
                              tandem_participant** out, char* error, size_t error_len);
/* One check-in (and, when assigned, one contribution). */
int tandem_participant_participate_once(tandem_participant* participant,
                                        tandem_round_result* result, char* error,
                                        size_t error_len);
/* Thread-safe: makes a running participate_once return 1 (CANCELLED). */
void tandem_participant_cancel(tandem_participant* participant);
void tandem_participant_destroy(tandem_participant* participant);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_CLIENT_INCLUDE_TANDEM_CLIENT_C_API_H_ */
