// k-block-sparse vector sharing of PREAMBLE (Asi, Feldman, Keller, Rothblum,
// Talwar, NeurIPS 2025), partition variant: the D = Delta * B coordinates are
// cut into Delta blocks of B elements, the blocks into k contiguous groups of
// 2^d blocks (D = k * 2^d * B), and each group carries one verifiable block
// DPF key (block_dpf.h) encoding at most one non-zero block.
//
//   client                         leader (party 0)        helper (party 1)
//     GenerateKeys  --keys.first-->  ParseSparseKeySet      ParseSparseKeySet
//                   --keys.second------------------------>  (key_validator.h)
//                                    ComputeProofDigest     ComputeProofDigest
//                                           <---- compare 32 bytes ---->
//                                    EvaluateAndAccumulate  EvaluateAndAccumulate
//                                    (only for reports whose digests agree)
//
// The digest (v2) is SHA-256 over the digest P of the parameters and every
// group's public parts (correction words, value correction, proof
// correction; PublicPartsDigest, public_digest.h) and each group's VDPF leaf
// proofs pi~_x (de Castro & Polychroniadou, Eurocrypt 2022):
//   SHA-256(u64 len || "tandem.vdpf.digest.v2" || P || for each group g:
//           u64 g || its leaf proofs (BlockDpf's transcript)).
// A caller that has P already (the upload's content digest hashed it, or
// the client's other key set) passes it and the public parts are not hashed
// again; without it the digest computes P first. Equal digests
// mean, except with negligible probability, that both servers hold the same
// public parts and that every group decodes to at most one non-zero block.
// Norm bounds are out of scope here.
//
// SparseDpf is an immutable value type, thread-safe for const use; each
// thread uses its own SparseDpfScratch.
#ifndef TANDEM_CRYPTO_DPF_SPARSE_DPF_H_
#define TANDEM_CRYPTO_DPF_SPARSE_DPF_H_

#include <array>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dpf/block_dpf.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/public_digest.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto {

// Reusable per-thread evaluation state (buffers, hash context). Not
// thread-safe. Construction never fails; the hash context is created lazily.
class SparseDpfScratch {
 public:
  SparseDpfScratch();
  ~SparseDpfScratch();
  SparseDpfScratch(SparseDpfScratch&&) noexcept;
  SparseDpfScratch& operator=(SparseDpfScratch&&) noexcept;

 private:
  friend class SparseDpf;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class SparseDpf {
 public:
  // Returns INVALID_ARGUMENT unless dimension == num_groups * 2^d *
  // block_size for some 0 <= d <= 24, 1 <= block_size <= 2^20,
  // 1 <= num_groups <= 4096 and value_bits is 32 or 64.
  static absl::StatusOr<SparseDpf> Create(uint64_t dimension, int block_size, int num_groups,
                                          int value_bits, AesPath path = BestAesPath());

  uint64_t dimension() const { return dimension_; }
  int block_size() const { return block_dpf_.block_size(); }
  int num_groups() const { return num_groups_; }
  int value_bits() const { return block_dpf_.value_bits(); }
  uint64_t blocks_per_group() const { return block_dpf_.num_blocks(); }
  uint64_t group_dimension() const { return block_dpf_.domain_size(); }
  // The shape a server passes to ParseSparseKeySet (party: -1 = either).
  ExpectedKeySetShape Shape(int party = -1) const;

  // Keys for the vector whose group g holds block_values[g*B, (g+1)*B) at
  // block block_index_per_group[g] of that group (coordinates
  // g * group_dimension() + index * B + j) and zeros elsewhere. Values are
  // reduced mod 2^value_bits. INVALID_ARGUMENT on wrong lengths or an index
  // >= blocks_per_group(); rng errors propagate.
  absl::StatusOr<std::pair<proto::SparseKeySet, proto::SparseKeySet>> GenerateKeys(
      absl::Span<const uint32_t> block_index_per_group, absl::Span<const uint64_t> block_values,
      SecureRandom* rng) const;

  // VDPF digest only (tree expansion and leaf proofs, no leaf expansion).
  // INVALID_ARGUMENT when `keys` does not validate against Shape().
  // `public_digest`, when non-null, must be PublicPartsDigest(keys) (every
  // digest-returning method below takes it the same way).
  absl::StatusOr<ProofDigest> ComputeProofDigest(const proto::SparseKeySet& keys,
                                                 SparseDpfScratch* scratch,
                                                 const ProofDigest* public_digest = nullptr) const;

  // accumulator[i] += this party's share of coordinate i (mod 2^value_bits;
  // with 32-bit values the accumulator entries stay below 2^32), and returns
  // the same digest as ComputeProofDigest. REQUIRES: accumulator.size() ==
  // dimension(), else INVALID_ARGUMENT (and nothing is added). Callers that
  // accumulate before comparing digests must be able to discard the
  // accumulator.
  absl::StatusOr<ProofDigest> EvaluateAndAccumulate(
      const proto::SparseKeySet& keys, absl::Span<uint64_t> accumulator, SparseDpfScratch* scratch,
      const ProofDigest* public_digest = nullptr) const;

  // Per group, the sum over its blocks of this party's shares:
  // block_sums[g * B + j] = sum over blocks x of group g of the share of
  // coordinate (g, x, j), mod 2^value_bits (BlockDpf::EvaluateBlockSum; no
  // D-sized buffer). What the norm proof's input shares are derived from.
  // Same digest as ComputeProofDigest. INVALID_ARGUMENT for keys that do not
  // validate or block_sums.size() != num_groups * B.
  absl::StatusOr<ProofDigest> EvaluateBlockSums(const proto::SparseKeySet& keys,
                                                absl::Span<uint64_t> block_sums,
                                                SparseDpfScratch* scratch,
                                                const ProofDigest* public_digest = nullptr) const;

  // EvaluateAndAccumulate and EvaluateBlockSums from ONE evaluation:
  // accumulator += this party's shares, block_sums (k * B, overwritten) =
  // the per-group block sums, and the digest. What a norm-bound round's
  // server runs so that the proof's inputs, the digest and the aggregate
  // come from a single expansion. INVALID_ARGUMENT on sizes or keys that do
  // not validate (both checked before anything is added).
  absl::StatusOr<ProofDigest> EvaluateAccumulateAndSum(
      const proto::SparseKeySet& keys, absl::Span<uint64_t> accumulator,
      absl::Span<uint64_t> block_sums, SparseDpfScratch* scratch,
      const ProofDigest* public_digest = nullptr) const;

  // As EvaluateAndAccumulate without the digest: for reports whose digests
  // were already compared with ComputeProofDigest (the recommended flow).
  absl::Status Accumulate(const proto::SparseKeySet& keys, absl::Span<uint64_t> accumulator,
                          SparseDpfScratch* scratch) const;

 private:
  SparseDpf(uint64_t dimension, int num_groups, BlockDpf block_dpf)
      : dimension_(dimension), num_groups_(num_groups), block_dpf_(std::move(block_dpf)) {}

  // What each group's evaluation does with the leaves.
  enum class Output { kNone, kAccumulate, kBlockSums, kAccumulateAndSums };
  // `out`: the D-sized accumulator (kAccumulate, kAccumulateAndSums) or the
  // k * B block sums (kBlockSums); `sums`: the block sums of
  // kAccumulateAndSums.
  absl::StatusOr<ProofDigest> Run(const proto::SparseKeySet& keys, absl::Span<uint64_t> out,
                                  absl::Span<uint64_t> sums, Output output, bool digest,
                                  SparseDpfScratch* scratch,
                                  const ProofDigest* public_digest) const;

  uint64_t dimension_;
  int num_groups_;
  BlockDpf block_dpf_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_SPARSE_DPF_H_
