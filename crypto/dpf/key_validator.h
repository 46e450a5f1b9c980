// Validation of SparseKeySet messages from the wire, before any math.
//
// Every field of proto/dpf.proto is checked against the parameters the
// servers expect (sizes, counts, ranges, party). Failures are
// INVALID_ARGUMENT with a message naming the field; nothing here crashes on
// any input. Pure functions, thread-safe.
#ifndef TANDEM_CRYPTO_DPF_KEY_VALIDATOR_H_
#define TANDEM_CRYPTO_DPF_KEY_VALIDATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto {

// What the receiving server expects of a key set.
struct ExpectedKeySetShape {
  uint32_t log_num_blocks = 0;  // tree depth d per group
  uint32_t block_size = 0;      // B
  uint32_t value_bits = 64;     // 32 or 64
  uint32_t num_groups = 0;      // k
  int party = -1;               // 0 or 1 to require that party; -1 accepts either
};

// Returns INVALID_ARGUMENT when `shape` itself is out of range (see
// BlockDpf::Create; 1 <= num_groups <= 4096).
absl::Status ValidateShape(const ExpectedKeySetShape& shape);

// Upper bound of the serialized size of a valid key set of this shape, with
// value_correction in proto3's default packed encoding (what SparseDpf
// writes); wire inputs longer than this are rejected before parsing.
uint64_t MaxSerializedKeySetSize(const ExpectedKeySetShape& shape);

// Returns INVALID_ARGUMENT when `keys` does not match `shape`: parameters,
// group count, party (0/1, the same in every key, equal to shape.party when
// set), seed length 16, correction word count d and seed length 16, value
// correction count B with entries < 2^value_bits, proof correction length 64,
// or unknown fields anywhere.
absl::Status ValidateSparseKeySet(const proto::SparseKeySet& keys,
                                  const ExpectedKeySetShape& shape);

// Parses and validates wire bytes. INVALID_ARGUMENT when the input is
// oversized, does not parse, or fails ValidateSparseKeySet.
absl::StatusOr<proto::SparseKeySet> ParseSparseKeySet(absl::string_view wire,
                                                      const ExpectedKeySetShape& shape);

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_KEY_VALIDATOR_H_
