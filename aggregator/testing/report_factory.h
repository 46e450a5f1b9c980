// Test clients: real block-sparse DPF reports for an aggregation round, with
// the dense vector they encode (for comparing the aggregate with the plain
// sum). Test-only.
#ifndef TANDEM_AGGREGATOR_TESTING_REPORT_FACTORY_H_
#define TANDEM_AGGREGATOR_TESTING_REPORT_FACTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/core/policy.h"
#include "crypto/sign/ed25519.h"
#include "proto/aggregator.pb.h"

namespace tandem::aggregator::testing {

struct TestReport {
  proto::UploadRequest to_leader;
  proto::UploadRequest to_helper;
  std::vector<uint64_t> dense;  // the vector the two shares encode
};

// Round parameters with D = num_groups * 2^log_num_blocks * block_size,
// 64-bit values, no noise, no deadline.
proto::RoundParameters MakeRoundParameters(const std::string& task_id, uint64_t round_id,
                                           uint32_t log_num_blocks, uint32_t block_size,
                                           uint32_t num_groups);

// As MakeRoundParameters, with a norm bound (squared L2, integer units) on
// every block and on the whole report: reports must carry norm proofs.
proto::RoundParameters MakeNormRoundParameters(const std::string& task_id, uint64_t round_id,
                                               uint32_t log_num_blocks, uint32_t block_size,
                                               uint32_t num_groups, uint64_t max_block_l2_squared,
                                               uint64_t max_l2_squared);

// A report with one random block per group, entries in [0, 2^20) (in
// [-2, 2] with a norm proof when the round has a norm bound), keys and
// report id drawn from DeterministicRandom::FromSeed(seed).
absl::StatusOr<TestReport> MakeReport(const proto::RoundParameters& params, uint64_t seed);

// A report of the given signed block values (num_groups * block_size, group
// order) at random block positions. In a norm-bound round it carries a
// proof: the honest one (INVALID_ARGUMENT when the values exceed a bound),
// or with `cheat` a proof of an all-zero witness, as a malicious client
// would send for a report over the bound.
absl::StatusOr<TestReport> MakeReportWithValues(const proto::RoundParameters& params,
                                                const std::vector<int64_t>& values,
                                                uint64_t seed, bool cheat = false);

// A dense round (RoundParameters.encoding DENSE) of `dimension` 64-bit
// values, the fixed point of MakeRoundParameters, with a norm bound on the
// whole report when max_l2_squared > 0.
proto::RoundParameters MakeDenseRoundParameters(const std::string& task_id, uint64_t round_id,
                                                uint64_t dimension, uint64_t max_l2_squared);

// A client's dense report of the signed `values` (dimension entries) under
// report id `id` (little-endian in 16 bytes), with the honest norm proof in
// a round with a bound, or with `witness` a cheating client's proof over
// that witness. INVALID_ARGUMENT when an honest proof is impossible.
absl::StatusOr<TestReport> MakeDenseReport(const proto::RoundParameters& params,
                                           const std::vector<int64_t>& values, uint64_t id,
                                           const std::vector<uint64_t>* witness = nullptr);

// The policy of tests of the bare aggregation arithmetic (no noise floor,
// batches of one, no proofs required, no budget); never a daemon default.
Policy PermissiveTestPolicy();
PolicySet PermissiveTestPolicies();

// The test device of `report`: an Ed25519 key derived from its report id
// (deterministic, so a test can sign again after changing the report).
absl::StatusOr<crypto::Ed25519SigningKey> TestDeviceKey(const TestReport& report);

// Signs an upload ticket for `report` (its report id, the round's task and
// round, expiring at `expiry_unix_ms`) and attaches it to both requests.
// With `bind_device` (the default, what a real coordinator issues) the
// ticket names TestDeviceKey(report) and both uploads are signed with it
// (SignTestUploads); without, the ticket names no device (what daemons with
// allow_unbound_tickets and older coordinators accept).
absl::Status AttachTicket(TestReport& report, const proto::RoundParameters& params,
                          const crypto::Ed25519SigningKey& key, int64_t expiry_unix_ms,
                          bool bind_device = true);

// Signs both uploads again with TestDeviceKey(report) (after a test changed
// a share). A no-op for reports whose ticket names no device.
absl::Status SignTestUploads(TestReport& report);

// Decodes a FinalizeResponse share into uint64 values (INVALID_ARGUMENT on a
// malformed tensor).
absl::StatusOr<std::vector<uint64_t>> ShareValues(const proto::FinalizeResponse& response);

// The aggregate the two released shares reconstruct (mod 2^64).
// INVALID_ARGUMENT for malformed or differently sized shares.
absl::StatusOr<std::vector<uint64_t>> SumShares(const proto::FinalizeResponse& leader,
                                                const proto::FinalizeResponse& helper);

// acc += v coordinate-wise (mod 2^64); an empty acc takes v's size.
void AddInto(std::vector<uint64_t>& acc, const std::vector<uint64_t>& v);

}  // namespace tandem::aggregator::testing

#endif  // TANDEM_AGGREGATOR_TESTING_REPORT_FACTORY_H_
