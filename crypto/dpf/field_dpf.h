// A point DPF with outputs in the prime field F_p, p = 2^61 - 1: the tree of
// Boyle, Gilboa & Ishai (CCS'16, "Function Secret Sharing: Improvements and
// Extensions", Fig. 1), one 128-bit seed and two control bits per node, with
// the PRG G(s) = (H_L(s), H_R(s)) of two fixed-key MMO hashes and the leaf
// conversion H_V(s) mod p. For checks on secret-shared data (sketches, proof
// values), where the 2^64 ring of crypto/dpf/dpf.h does not fit: shares add
// up mod p to beta at alpha and to 0 elsewhere.
//
// Leaf conversion: 128 hash bits reduced mod p; the distance from uniform is
// below 2^-66 per output. Key generation and evaluation select with masks,
// never branching or indexing on alpha's bits or control bits.
//
// Keys are plain value types (the check protocols that use them carry them
// inside their own messages). Immutable; thread-safe for const use.
#ifndef TANDEM_CRYPTO_DPF_FIELD_DPF_H_
#define TANDEM_CRYPTO_DPF_FIELD_DPF_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/aes/block.h"
#include "crypto/aes/fixed_key_hash.h"

namespace tandem::crypto {

struct FieldDpfCorrection {
  Block seed;
  uint64_t control_left = 0;   // 0 or 1
  uint64_t control_right = 0;  // 0 or 1
};

struct FieldDpfKey {
  int party = 0;                               // 0 or 1
  Block seed;                                  // secret root seed
  std::vector<FieldDpfCorrection> corrections;  // one per level (public)
  uint64_t output_correction = 0;              // in [0, p) (public)
};

class FieldDpf {
 public:
  // 1 <= log_domain_size <= 62. INVALID_ARGUMENT otherwise.
  static absl::StatusOr<FieldDpf> Create(int log_domain_size, AesPath path = BestAesPath());

  int log_domain_size() const { return n_; }

  // Keys for f(alpha) = beta (mod p), f(x) = 0 elsewhere. INVALID_ARGUMENT
  // for alpha outside the domain or beta >= p; rng errors propagate.
  absl::StatusOr<std::pair<FieldDpfKey, FieldDpfKey>> GenerateKeys(uint64_t alpha, uint64_t beta,
                                                                   SecureRandom* rng) const;
  // This party's share of f(x). INVALID_ARGUMENT for a malformed key or x
  // outside the domain.
  absl::StatusOr<uint64_t> EvaluateAt(const FieldDpfKey& key, uint64_t x) const;
  // Shares of f(0..2^n-1) into `out` (size 2^n). INVALID_ARGUMENT on size.
  absl::Status EvaluateFullDomain(const FieldDpfKey& key, absl::Span<uint64_t> out) const;

 private:
  FieldDpf(int n, FixedKeyHash left, FixedKeyHash right, FixedKeyHash value)
      : n_(n), left_(left), right_(right), value_(value) {}
  absl::Status ValidateKey(const FieldDpfKey& key) const;
  // (s, t) children of `seed`, control bits cleared from the seeds.
  void Expand(Block seed, Block* s_left, uint64_t* t_left, Block* s_right,
              uint64_t* t_right) const;
  uint64_t Convert(Block seed) const;
  uint64_t Output(const FieldDpfKey& key, Block seed, uint64_t t) const;

  int n_;
  FixedKeyHash left_, right_, value_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_FIELD_DPF_H_
