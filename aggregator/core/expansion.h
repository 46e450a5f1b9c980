// Parallel expansion of validated key shares (oneTBB across reports and
// across chunks of the domain). Pure compute over caller-owned buffers.
//
// One expansion per report (PREAMBLE, Asi et al., NeurIPS 2025, leaves the
// server's schedule open): a server evaluates each share once, computing
// the VDPF digest it compares with its peer while adding the share into a
// tentative aggregate (ComputeDigests / EvaluateNormChecks with an
// accumulator). The few reports that are then not counted (rejected, or not
// yet seen by the peer) are taken out again with SubtractShares, so a
// rejected report is never counted and an accepted one is expanded once.
#ifndef TANDEM_AGGREGATOR_CORE_EXPANSION_H_
#define TANDEM_AGGREGATOR_CORE_EXPANSION_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/dpf/sparse_dpf.h"
#include "proto/dpf.pb.h"

namespace tandem::aggregator {

// body(i) for every i in [0, n) on every core (oneTBB), isolated: the
// calling thread, which may hold a task's mutex, runs only these while it
// waits, never another caller's work that might want that mutex. The
// ChunkRunner the aggregator gives dp::NoiseShareForRelease.
void RunOnEveryCore(size_t n, absl::FunctionRef<void(size_t)> body);

// Proof digest of every share, in order. With `accumulator` non-empty
// (dpf.dimension() entries) the same single evaluation of each share also
// adds it into the accumulator (SparseDpf::EvaluateAndAccumulate); without,
// only the tree and the leaf proofs are evaluated. Errors of the first
// failing share; on error the accumulator holds a partial sum and must be
// discarded (the caller works on a copy).
// `public_digests`: empty, or one per share, each PublicPartsDigest of its
// share or null (then hashed here).
absl::StatusOr<std::vector<crypto::ProofDigest>> ComputeDigests(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares,
    absl::Span<uint64_t> accumulator = absl::Span<uint64_t>(),
    absl::Span<const crypto::ProofDigest* const> public_digests = {});

// accumulator += sum of the shares' expansions (mod 2^value_bits), no
// digest. On error the accumulator holds a partial sum and must be
// discarded. REQUIRES accumulator.size() == dpf.dimension()
// (INVALID_ARGUMENT otherwise, nothing added).
absl::Status AccumulateShares(const crypto::SparseDpf& dpf,
                              absl::Span<const proto::SparseKeySet* const> shares,
                              absl::Span<uint64_t> accumulator);

// accumulator -= sum of the shares' expansions (mod 2^value_bits): undoes
// ComputeDigests/EvaluateNormChecks' additions for reports that are not
// counted. Same errors and REQUIRES as AccumulateShares (on error the
// accumulator is unchanged).
absl::Status SubtractShares(const crypto::SparseDpf& dpf,
                            absl::Span<const proto::SparseKeySet* const> shares,
                            absl::Span<uint64_t> accumulator);

// into += from (mod 2^value_bits), in parallel chunks. REQUIRES equal sizes
// (INVALID_ARGUMENT otherwise, nothing added).
absl::Status AddAccumulator(absl::Span<uint64_t> into, absl::Span<const uint64_t> from,
                            int value_bits);

// Runs visit(i, target, scratch) for every i in [0, n) on the worker
// threads, where each thread's `target` is a dimension-sized buffer (the
// first thread's is `accumulator` itself, the others zeroed buffers added
// into it mod 2^value_bits at the end, in parallel chunks): the building
// block of every function above, for callers that evaluate more per report
// (norm_verification.h). First error returned; the accumulator then holds a
// partial sum. REQUIRES accumulator.size() == dimension (INVALID_ARGUMENT).
using IntoAccumulator = absl::FunctionRef<absl::Status(size_t index, absl::Span<uint64_t> target,
                                                       crypto::SparseDpfScratch* scratch)>;
absl::Status ForEachIntoAccumulator(size_t n, uint64_t dimension, int value_bits,
                                    absl::Span<uint64_t> accumulator, IntoAccumulator visit);

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_EXPANSION_H_
