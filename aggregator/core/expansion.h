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

// accumulator += sum of the shares' expansions (mod 2^value_bits) and returns
// their digests. On error the accumulator is unchanged. REQUIRES
// accumulator.size() == dpf.dimension() (INVALID_ARGUMENT otherwise).
absl::StatusOr<std::vector<crypto::ProofDigest>> AccumulateShares(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares,
    absl::Span<uint64_t> accumulator);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_EXPANSION_H_
