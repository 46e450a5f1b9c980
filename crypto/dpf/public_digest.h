// The digest of a report's public DPF parts, hashed once and shared by the
// two digests that cover them.
//
// Both keys of a PREAMBLE report (sparse_dpf.h) carry the same public parts:
// per group, the correction words, the value corrections and the VDPF proof
// correction; they are most of a share's bytes (4 or 8 bytes per sent value).
// Two digests must bind them: the VDPF digest the servers compare
// (SparseDpf::ComputeProofDigest; de Castro & Polychroniadou, Eurocrypt 2022,
// compare a hash of the public parts and the leaf proofs) and the content
// digest a device signs (crypto/sign/device_auth.h). Hashing the public
// parts into each cost a client four passes over them (two VDPF digests, two
// content digests) and each server two (bench/README.md, issue 36). Both
// digests now start from this one: a client hashes them twice (its proof,
// its signatures), a server once.
//
//   P = SHA-256(kPublicDomain || u64 log_num_blocks || u64 block_size ||
//               u64 value_bits || u64 num_groups || u64 number of keys ||
//               for each key g: u64 g || u64 number of correction words ||
//                 (u64 16 || seed) per correction word ||
//                 u64 len || value_correction as 8-byte little-endian words ||
//                 u64 len || value_correction_packed ||
//                 u64 len || proof_correction)
//
// (u64: 8 bytes little-endian; len in bytes.) It reads the message as it is,
// with every variable-length field length-prefixed, so it is an injective
// encoding of those fields whether or not the keys validate: equal P means
// equal public parts except with the probability of a SHA-256 collision.
// The values are hashed as they travel (4 bytes each in 32-bit rounds), not
// widened. Replacing the hash of raw public parts by the hash of P in the
// VDPF transcript is a collision-resistant composition; the security
// argument of the digest comparison is unchanged (our design [I]).
//
// Thread-safe (a pure function). Errors: INTERNAL if OpenSSL fails.
#ifndef TANDEM_CRYPTO_DPF_PUBLIC_DIGEST_H_
#define TANDEM_CRYPTO_DPF_PUBLIC_DIGEST_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto {

using ProofDigest = std::array<uint8_t, 32>;

// P of `keys` (see the file comment). Party and seeds are not read: the two
// parties' key sets of one report give the same P.
absl::StatusOr<ProofDigest> PublicPartsDigest(const proto::SparseKeySet& keys);

// Whether `a` and `b` carry the same public parts (every field P reads), so
// that one P serves both: a memory compare, ~50x cheaper than hashing again.
bool SamePublicParts(const proto::SparseKeySet& a, const proto::SparseKeySet& b);

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_PUBLIC_DIGEST_H_
