// Dense two-server additive sharing of a D-vector over Z_2^w (w = 32 or
// 64): the encoding of Prio3 (CFRG VDAF draft, "Prio3" with a helper seed)
// and the honest baseline PREAMBLE (Asi et al., NeurIPS 2025) is measured
// against. tandem uses it for rounds where it sends fewer bytes than
// PREAMBLE's block-sparse keys (proto ReportEncoding, chosen per round by
// the coordinator).
//
//   helper share: a 16-byte seed s; its values r = G(s), D elements of Z_2^w
//   leader share: x - r mod 2^w, packed in D * w / 8 bytes (little endian)
//
// G(s) = the lanes of H(s ^ 0), H(s ^ 1), .. (the fixed-key AES hash of
// crypto/aes/fixed_key_hash.h in counter mode, key from the name
// "tandem.dense.prg.v1"): the same correlation-robust PRG the DPF leaves
// use, so its security rests on the same ideal-permutation assumption.
// Each server alone sees a uniformly random vector (the leader's is x plus
// a pseudorandom pad; the helper's is the pad). There is no structure to
// verify (any two shares add up to some vector): the norm proof
// (crypto/proof/dense_norm_proof.h) is what bounds a report.
//
// Immutable after Create; thread-safe for const use.
#ifndef TANDEM_CRYPTO_DENSE_DENSE_SHARING_H_
#define TANDEM_CRYPTO_DENSE_DENSE_SHARING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/aes/fixed_key_hash.h"
#include "crypto/dpf/sparse_dpf.h"
#include "proto/dpf.pb.h"

namespace tandem::crypto {

inline constexpr size_t kDenseSeedBytes = 16;
// Largest D of a dense round (the aggregators' own caps are lower).
inline constexpr uint64_t kMaxDenseDimension = uint64_t{1} << 28;

class DenseSharing {
 public:
  // INVALID_ARGUMENT unless 1 <= dimension <= kMaxDenseDimension and
  // value_bits is 32 or 64; INTERNAL when the AES key cannot be derived.
  static absl::StatusOr<DenseSharing> Create(uint64_t dimension, int value_bits);

  uint64_t dimension() const { return dimension_; }
  int value_bits() const { return value_bits_; }
  // Size of the leader's `values` (D * w / 8).
  uint64_t leader_value_bytes() const { return dimension_ * (value_bits_ / 8); }

  // Client: the (leader, helper) shares of `values` (D elements, each
  // < 2^w), with a helper seed from `rng`. INVALID_ARGUMENT on a size or an
  // element out of range; rng errors propagate.
  absl::StatusOr<std::pair<proto::DenseShare, proto::DenseShare>> Share(
      absl::Span<const uint64_t> values, SecureRandom* rng) const;
  // The same with a given 16-byte helper seed (known-answer vectors).
  absl::StatusOr<std::pair<proto::DenseShare, proto::DenseShare>> ShareWithSeed(
      absl::Span<const uint64_t> values, absl::string_view helper_seed) const;

  // INVALID_ARGUMENT unless `share` is a well-formed share of `party`
  // (0: values of exactly leader_value_bytes(), no seed; 1: a 16-byte seed,
  // no values) with no unknown fields.
  absl::Status Validate(const proto::DenseShare& share, int party) const;

  // out = the share's D values. INVALID_ARGUMENT for a share that does not
  // validate (for either party) or out.size() != D.
  absl::Status Expand(const proto::DenseShare& share, absl::Span<uint64_t> out) const;
  // accumulator += the share's values (-= when `subtract`), mod 2^w; the
  // same errors, raised before anything is added.
  absl::Status Accumulate(const proto::DenseShare& share, absl::Span<uint64_t> accumulator,
                          bool subtract = false) const;
  // accumulator += the share's values and values_out = them, in one pass.
  absl::Status AccumulateAndExpand(const proto::DenseShare& share, absl::Span<uint64_t> accumulator,
                                   absl::Span<uint64_t> values_out) const;

  // What both servers put in a dense report's Verify check in place of a
  // VDPF digest: SHA-256 of a domain tag, D and w. It is the same for every
  // well-formed report of the round (nothing about a dense sharing can be
  // checked without the proof), so equal check values mean only that both
  // servers hold a share of the same shape.
  const ProofDigest& round_digest() const { return round_digest_; }

 private:
  DenseSharing(uint64_t dimension, int value_bits, FixedKeyHash prg, ProofDigest digest)
      : dimension_(dimension), value_bits_(value_bits), prg_(prg), round_digest_(digest) {}
  // The party's share into out (= when !add, += when add and !subtract,
  // -= when add and subtract). REQUIRES: validated share, out.size() == D.
  void Apply(const proto::DenseShare& share, absl::Span<uint64_t> out, bool add,
             bool subtract) const;
  absl::Status CheckEither(const proto::DenseShare& share) const;
  // Calls fn(begin, end, pad) for consecutive ranges [begin, end) of the D
  // values, `pad` pointing at G(seed)'s little-endian words for them (one
  // AES chunk at a time, no D-sized buffer).
  template <typename Fn>
  void ForEachPadChunk(Block seed, Fn fn) const;

  uint64_t dimension_;
  int value_bits_;
  FixedKeyHash prg_;
  ProofDigest round_digest_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DENSE_DENSE_SHARING_H_
