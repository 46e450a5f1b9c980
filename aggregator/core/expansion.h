// Parallel expansion of validated key shares (oneTBB across reports and
// across chunks of the domain). Pure compute over caller-owned buffers.
#ifndef TANDEM_AGGREGATOR_CORE_EXPANSION_H_
#define TANDEM_AGGREGATOR_CORE_EXPANSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/dpf/sparse_dpf.h"
#include "proto/dpf.pb.h"

namespace tandem::aggregator {

// Proof digest of every share, in order. Errors of the first failing share.
absl::StatusOr<std::vector<crypto::ProofDigest>> ComputeDigests(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares);

// accumulator += sum of the shares' expansions (mod 2^value_bits), for
// shares whose digests were already compared (so no digest is computed).
// On error the accumulator holds a partial sum and must be discarded (the
// caller works on a copy). REQUIRES accumulator.size() == dpf.dimension()
// (INVALID_ARGUMENT otherwise, nothing added).
absl::Status AccumulateShares(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares,
    absl::Span<uint64_t> accumulator);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_EXPANSION_H_
