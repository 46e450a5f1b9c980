/* tandem client SDK, C ABI (for apps in C, Swift, Kotlin/JNI, Rust FFI...).
 *
 * Return values are absl/gRPC status codes: 0 = OK, 1 = CANCELLED,
 * 3 = INVALID_ARGUMENT, 8 = RESOURCE_EXHAUSTED (out of memory),
 * 9 = FAILED_PRECONDITION, 13 = INTERNAL, 14 = UNAVAILABLE, ... On error a
 * message is written to `error` (NUL-terminated, truncated to error_len)
 * when error is not NULL. No C++ exception ever leaves a function of this
 * header: the library's out-of-memory and other exceptions become
 * RESOURCE_EXHAUSTED / INTERNAL.
 * ABI: additive only. Existing structs never change; new settings come as
 * new structs (with a leading struct_size) and new functions.
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

/* The SDK's version, "MAJOR.MINOR.PATCH" (a static string): what an app
 * linked against the shared library (libtandem_client.so.0) really loaded. */
const char* tandem_client_version(void);

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

/* As tandem_report_encoder_encode, for deployments with upload tickets (the
 * aggregators refuse uploads without one): `ticket` holds `ticket_len`
 * bytes, the serialized SignedUploadTicket of the client's assignment
 * (CheckInResponse.ticket). The report goes under the ticket's 16-byte id
 * (written to report_id) and both requests carry the ticket.
 * INVALID_ARGUMENT for a ticket that does not parse or whose id is not 16
 * bytes; FAILED_PRECONDITION for a ticket of another task or round than the
 * encoder's spec. */
int tandem_report_encoder_encode_ticketed(const tandem_report_encoder* encoder,
                                          const float* update, size_t n, const uint8_t* ticket,
                                          size_t ticket_len, uint8_t report_id[16],
                                          tandem_buffer* to_leader, tandem_buffer* to_helper,
                                          char* error, size_t error_len);

/* Participant (tandem/client/participant.h): takes part in the rounds of a
 * federated task. The data arrays are copied at create. Link
 * tandem_client_transport for these. */
typedef struct tandem_participant tandem_participant;

typedef struct {
  const char* coordinator;   /* host:port */
  const char* client_id;     /* the app's label, [A-Za-z0-9._-]{1,64}; the servers
                                know the device by its key's id (state_dir keeps
                                the key) */
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

/* The aggregators the participant trusts and the bounds on what the
 * coordinator may ask (tandem/client/participant.h, ParticipantOptions).
 * Set struct_size = sizeof(tandem_participant_trust); later versions only
 * append fields, and the library reads only the first struct_size bytes.
 * Strings are NUL-terminated; NULL or "" = not set. Addresses and names are
 * pinned in pairs (both leader and helper, or neither). */
typedef struct {
  size_t struct_size;
  const char* leader_address;  /* host:port of the leader's upload listener */
  const char* leader_name;     /* TLS identity the leader's certificate carries */
  const char* helper_address;  /* host:port of the helper's upload listener */
  const char* helper_name;     /* TLS identity the helper's certificate carries */
  uint64_t max_model_bytes;    /* model download bound; 0 = 256 MiB */
  uint64_t max_dimension;      /* round dimension D bound; 0 = 2^24 */
  /* Appended: nonzero turns error feedback off (ParticipantOptions.
   * error_feedback; on by default, also for callers whose struct_size
   * predates this field). */
  int32_t no_error_feedback;
  /* Appended: the operator's enrollment token for this device
   * (ParticipantOptions.enrollment_token: the text `tandem-admin token mint`
   * prints); NULL or "" = none (the device key must already be enrolled). */
  const char* enrollment_token;
} tandem_participant_trust;

int tandem_participant_create(const tandem_participant_options* options,
                              tandem_participant** out, char* error, size_t error_len);
/* As tandem_participant_create, with pinned aggregators and bounds (`trust`
 * may be NULL: nothing pinned, default bounds). A check-in naming other
 * aggregators than the pinned ones, or one server for both roles, makes
 * participate_once return 9 (FAILED_PRECONDITION) without uploading. */
int tandem_participant_create_with_trust(const tandem_participant_options* options,
                                         const tandem_participant_trust* trust,
                                         tandem_participant** out, char* error,
                                         size_t error_len);
/* Held-out examples for private federated evaluation rounds (the task's
 * eval_every): `rows` examples of the create call's `cols` features
 * (row-major) and one label in [0, num_classes) each, copied. Without them
 * the device leaves evaluation assignments unreported. Call before
 * participate_once, never concurrently with it. 3 (INVALID_ARGUMENT) for
 * null arrays or rows < 1. */
int tandem_participant_set_held_out(tandem_participant* participant, const float* features,
                                    int64_t rows, const int32_t* labels, char* error,
                                    size_t error_len);
/* What one example (one row of `cols` features) is: an image of `channels`
 * x `height` x `width` values, channel-major (PyTorch's NCHW), for training
 * and held-out data alike. A task whose native model takes another shape
 * is then refused before training (participate_once returns 3). Without it
 * rows are taken as the task's model lays out its input. 3
 * (INVALID_ARGUMENT) unless the product is the create call's cols. Call
 * before participate_once, never concurrently with it. */
int tandem_participant_set_example_shape(tandem_participant* participant, int64_t channels,
                                         int64_t height, int64_t width, char* error,
                                         size_t error_len);
/* One check-in (and, when assigned, one contribution or evaluation). */
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
