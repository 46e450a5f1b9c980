// The C ABI's contract with the host app: error codes with messages, never
// an exception. This binary replaces the global operator new so that a test
// can make large allocations fail (std::bad_alloc, as on a device out of
// memory) and check that the entry point returns RESOURCE_EXHAUSTED instead
// of unwinding into C. Nothing else shares the binary, so the replacement
// touches no other test.
#include "tandem/client/c_api.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/internal/c_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.pb.h"

namespace {

// Allocations of at least this many bytes throw std::bad_alloc on this
// thread (0 = never). Constant-initialized: usable before main.
thread_local size_t fail_at_or_above = 0;

void* Allocate(size_t n) {
  if (fail_at_or_above != 0 && n >= fail_at_or_above) throw std::bad_alloc();
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* AllocateNoThrow(size_t n) noexcept {
  try {
    return Allocate(n);
  } catch (...) {
    return nullptr;
  }
}

// Scope in which allocations >= `bytes` fail.
class FailLargeAllocations {
 public:
  explicit FailLargeAllocations(size_t bytes) { fail_at_or_above = bytes; }
  ~FailLargeAllocations() { fail_at_or_above = 0; }
};

}  // namespace

void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return AllocateNoThrow(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return AllocateNoThrow(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tandem::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kInvalidArgument = 3;
constexpr int kResourceExhausted = 8;
constexpr int kFailedPrecondition = 9;
constexpr int kInternal = 13;

TEST(CApiGuard, ExceptionsBecomeCodesWithMessages) {
  char err[64];
  EXPECT_EQ(internal::Guard(err, sizeof(err), []() -> int { throw std::bad_alloc(); }),
            kResourceExhausted);
  EXPECT_STREQ(err, "tandem: out of memory");
  EXPECT_EQ(internal::Guard(err, sizeof(err),
                            []() -> int { throw std::length_error("vector::_M_default_append"); }),
            kInternal);
  EXPECT_THAT(std::string(err), StartsWith("tandem: unexpected exception: vector::"));
  EXPECT_EQ(internal::Guard(err, sizeof(err), []() -> int { throw 42; }), kInternal);
  EXPECT_THAT(std::string(err), HasSubstr("non-standard"));
  // Tiny or missing buffers: truncated, NUL-terminated, never overrun.
  char tiny[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(internal::Guard(tiny, sizeof(tiny), []() -> int { throw std::runtime_error("long"); }),
            kInternal);
  EXPECT_EQ(tiny[3], '\0');
  EXPECT_EQ(internal::Guard(nullptr, 0, []() -> int { throw std::bad_alloc(); }),
            kResourceExhausted);
  EXPECT_EQ(internal::Guard(err, sizeof(err), [] { return 0; }), 0);
}

tandem_round_spec Spec(uint64_t dimension, uint32_t groups, uint32_t log_blocks, uint32_t block) {
  tandem_round_spec s;
  std::memset(&s, 0, sizeof(s));
  s.task_id = "c-app";
  s.round_id = 1;
  s.dimension = dimension;
  s.num_groups = groups;
  s.log_num_blocks = log_blocks;
  s.block_size = block;
  s.frac_bits = 16;
  s.clip_l2_norm = 1.0;
  s.max_summands = 100;
  return s;
}

TEST(CApi, AbsurdSizesAreErrorCodes) {
  char err[256];
  tandem_report_encoder* enc = nullptr;
  // 2^12 groups x 2^24 blocks x 2^20: consistent and absurd (2^56 values).
  const tandem_round_spec huge = Spec(uint64_t{1} << 56, 4096, 24, 1 << 20);
  EXPECT_EQ(tandem_report_encoder_create(&huge, &enc, err, sizeof(err)), kInvalidArgument);
  EXPECT_EQ(enc, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("dimension"));
  // Participant local data whose size overflows: refused before any read.
  float features[4] = {0, 0, 0, 0};
  int32_t labels[2] = {0, 1};
  tandem_participant_options o;
  std::memset(&o, 0, sizeof(o));
  o.coordinator = "127.0.0.1:1";
  o.client_id = "c1";
  o.insecure_plaintext = 1;
  o.features = features;
  o.labels = labels;
  o.rows = int64_t{1} << 40;
  o.cols = int64_t{1} << 40;
  o.num_classes = 2;
  tandem_participant* p = nullptr;
  EXPECT_EQ(tandem_participant_create(&o, &p, err, sizeof(err)), kInvalidArgument);
  EXPECT_EQ(p, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("too large"));
}

TEST(CApi, OutOfMemoryInsideAnEntryPointIsResourceExhausted) {
  char err[256];
  tandem_report_encoder* enc = nullptr;
  const tandem_round_spec spec = Spec(uint64_t{1} << 20, 16, 12, 16);  // D = 2^20
  ASSERT_EQ(tandem_report_encoder_create(&spec, &enc, err, sizeof(err)), 0) << err;
  std::vector<float> update(16, 0.01f);
  uint8_t id[16];
  tandem_buffer a = {nullptr, 0}, b = {nullptr, 0};
  {
    // The encoder's O(D) buffers (4 MiB and more) cannot be had.
    FailLargeAllocations oom(1 << 20);
    EXPECT_EQ(tandem_report_encoder_encode(enc, update.data(), update.size(), id, &a, &b, err,
                                           sizeof(err)),
              kResourceExhausted);
  }
  EXPECT_STREQ(err, "tandem: out of memory");
  EXPECT_EQ(a.data, nullptr);
  // The same call with memory succeeds: nothing was left half-done.
  ASSERT_EQ(
      tandem_report_encoder_encode(enc, update.data(), update.size(), id, &a, &b, err, sizeof(err)),
      0)
      << err;
  tandem_buffer_free(&a);
  tandem_buffer_free(&b);
  tandem_report_encoder_destroy(enc);

  // Participant create copies the app's arrays: 2^19 features (2 MiB).
  std::vector<float> features(size_t{1} << 19, 0.5f);
  std::vector<int32_t> labels(size_t{1} << 18, 1);
  tandem_participant_options o;
  std::memset(&o, 0, sizeof(o));
  o.coordinator = "127.0.0.1:1";
  o.client_id = "c1";
  o.insecure_plaintext = 1;
  o.features = features.data();
  o.labels = labels.data();
  o.rows = int64_t{1} << 18;
  o.cols = 2;
  o.num_classes = 2;
  tandem_participant* p = nullptr;
  {
    FailLargeAllocations oom(1 << 20);
    EXPECT_EQ(tandem_participant_create(&o, &p, err, sizeof(err)), kResourceExhausted);
  }
  EXPECT_EQ(p, nullptr);
}

TEST(CApi, TrustSettingsArePinsAndBounds) {
  char err[256];
  float features[4] = {0, 1, 1, 0};
  int32_t labels[2] = {0, 1};
  tandem_participant_options o;
  std::memset(&o, 0, sizeof(o));
  o.coordinator = "127.0.0.1:1";
  o.client_id = "c1";
  o.insecure_plaintext = 1;
  o.features = features;
  o.labels = labels;
  o.rows = 2;
  o.cols = 2;
  o.num_classes = 2;
  tandem_participant_trust t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.leader_address = "127.0.0.1:7100";
  t.leader_name = "leader.tandem";
  t.helper_address = "127.0.0.1:7200";
  t.helper_name = "helper.tandem";
  tandem_participant* p = nullptr;
  ASSERT_EQ(tandem_participant_create_with_trust(&o, &t, &p, err, sizeof(err)), 0) << err;
  tandem_participant_destroy(p);
  ASSERT_EQ(tandem_participant_create_with_trust(&o, nullptr, &p, err, sizeof(err)), 0) << err;
  tandem_participant_destroy(p);
  // One server for both roles, half a pin, or no struct_size: refused.
  t.helper_address = "localhost:7100";
  EXPECT_EQ(tandem_participant_create_with_trust(&o, &t, &p, err, sizeof(err)), kInvalidArgument);
  EXPECT_THAT(std::string(err), HasSubstr("both"));
  t.helper_address = nullptr;
  EXPECT_EQ(tandem_participant_create_with_trust(&o, &t, &p, err, sizeof(err)), kInvalidArgument);
  t.helper_address = "127.0.0.1:7200";
  t.struct_size = 0;
  EXPECT_EQ(tandem_participant_create_with_trust(&o, &t, &p, err, sizeof(err)), kInvalidArgument);
  // A caller built against an older header (only the first four strings)
  // gets default bounds: the library reads no further.
  t.struct_size = offsetof(tandem_participant_trust, max_model_bytes);
  t.max_model_bytes = 1;  // outside the caller's struct: ignored
  ASSERT_EQ(tandem_participant_create_with_trust(&o, &t, &p, err, sizeof(err)), 0) << err;
  tandem_participant_destroy(p);
}

TEST(CApi, TicketedReportsGoUnderTheTicketId) {
  char err[256];
  tandem_report_encoder* enc = nullptr;
  const tandem_round_spec spec = Spec(128, 4, 1, 16);
  ASSERT_EQ(tandem_report_encoder_create(&spec, &enc, err, sizeof(err)), 0) << err;
  proto::UploadTicket u;
  u.set_task_id("c-app");
  u.set_round_id(1);
  u.set_ticket_id("0123456789abcdef");
  proto::SignedUploadTicket signed_ticket;
  signed_ticket.set_ticket(u.SerializeAsString());
  signed_ticket.set_signature(std::string(64, 's'));
  const std::string bytes = signed_ticket.SerializeAsString();
  std::vector<float> update(128, 0.001f);
  uint8_t id[16];
  tandem_buffer a = {nullptr, 0}, b = {nullptr, 0};
  ASSERT_EQ(tandem_report_encoder_encode_ticketed(enc, update.data(), update.size(),
                                                  reinterpret_cast<const uint8_t*>(bytes.data()),
                                                  bytes.size(), id, &a, &b, err, sizeof(err)),
            0)
      << err;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(id), 16), "0123456789abcdef");
  proto::UploadRequest ra, rb;
  ASSERT_TRUE(ra.ParseFromArray(a.data, static_cast<int>(a.size)));
  ASSERT_TRUE(rb.ParseFromArray(b.data, static_cast<int>(b.size)));
  EXPECT_EQ(ra.report_id(), "0123456789abcdef");
  EXPECT_EQ(ra.ticket().SerializeAsString(), bytes);
  EXPECT_EQ(rb.ticket().SerializeAsString(), bytes);
  tandem_buffer_free(&a);
  tandem_buffer_free(&b);
  // Another round's ticket, and bytes that are no ticket.
  u.set_round_id(2);
  signed_ticket.set_ticket(u.SerializeAsString());
  const std::string other = signed_ticket.SerializeAsString();
  EXPECT_EQ(tandem_report_encoder_encode_ticketed(enc, update.data(), update.size(),
                                                  reinterpret_cast<const uint8_t*>(other.data()),
                                                  other.size(), id, &a, &b, err, sizeof(err)),
            kFailedPrecondition);
  const uint8_t junk[3] = {0xff, 0xff, 0xff};
  EXPECT_EQ(tandem_report_encoder_encode_ticketed(enc, update.data(), update.size(), junk,
                                                  sizeof(junk), id, &a, &b, err, sizeof(err)),
            kInvalidArgument);
  tandem_report_encoder_destroy(enc);
}

}  // namespace
}  // namespace tandem::client
