/* Compiled as C: the SDK's C ABI links and runs from a C program. */
#include <stdio.h>
#include <string.h>

#include "tandem/client/c_api.h"

int main(void) {
  tandem_round_spec spec;
  memset(&spec, 0, sizeof(spec));
  spec.task_id = "c-app";
  spec.round_id = 1;
  spec.dimension = 128;
  spec.block_size = 16;
  spec.num_groups = 4;
  spec.log_num_blocks = 1;
  spec.frac_bits = 16;
  spec.clip_l2_norm = 1.0;
  spec.max_summands = 100;
  char err[256];
  tandem_report_encoder* enc = NULL;
  if (tandem_report_encoder_create(&spec, &enc, err, sizeof(err)) != 0) {
    fprintf(stderr, "create: %s\n", err);
    return 1;
  }
  float update[128];
  for (int i = 0; i < 128; ++i) update[i] = 0.001f * (float)i;
  unsigned char id[16];
  tandem_buffer a = {0}, b = {0};
  int rc = tandem_report_encoder_encode(enc, update, 128, id, &a, &b, err, sizeof(err));
  if (rc != 0 || a.size == 0 || b.size == 0) {
    fprintf(stderr, "encode: %d %s\n", rc, err);
    return 1;
  }
  printf("c abi: %zu + %zu bytes\n", a.size, b.size);
  tandem_buffer_free(&a);
  tandem_buffer_free(&b);
  /* Ticketed encode: bytes that are no ticket are an error code, not a crash. */
  const uint8_t junk[3] = {0xff, 0xff, 0xff};
  rc = tandem_report_encoder_encode_ticketed(enc, update, 128, junk, sizeof(junk), id, &a, &b, err,
                                             sizeof(err));
  if (rc != 3) {
    fprintf(stderr, "encode_ticketed: want 3, got %d\n", rc);
    return 1;
  }
  /* The trust settings are plain C (used with tandem_client_transport). */
  tandem_participant_trust trust;
  memset(&trust, 0, sizeof(trust));
  trust.struct_size = sizeof(trust);
  trust.leader_name = "leader.tandem";
  trust.helper_name = "helper.tandem";
  (void)trust;
  tandem_report_encoder_destroy(enc);
  return 0;
}
