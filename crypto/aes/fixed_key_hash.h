// Fixed-key AES-128 correlation-robust hash and the PRGs built on it.
//
//   H(x) = AES_k(sigma(x)) ^ sigma(x),  sigma(xL || xR) = (xL ^ xR) || xL
//
// is the (circular) correlation-robust hash of Guo, Katz, Wang, Yu,
// "Efficient and secure multiparty computation from fixed-key block ciphers"
// (IEEE S&P 2020, ePrint 2019/074), in the ideal-permutation model. The key is
// public and fixed; security comes from AES being modelled as a random
// permutation, not from the key's secrecy.
//
// Four instruction-set paths compute bit-identical results and are chosen at
// run time (__builtin_cpu_supports): VAES on zmm (AVX-512), VAES on ymm (AVX2
// CPUs without AVX-512, e.g. AMD Zen 3), AES-NI on xmm, and a portable
// constant-time software AES. None branches or indexes tables on
// data.
//
// FixedKeyHash is an immutable value type: thread-safe for concurrent const
// use, cheap to copy (the 176-byte key schedule plus a pointer).
#ifndef TANDEM_CRYPTO_AES_FIXED_KEY_HASH_H_
#define TANDEM_CRYPTO_AES_FIXED_KEY_HASH_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "crypto/aes/block.h"
#include "crypto/aes/internal/aes_kernels.h"

namespace tandem::crypto {

enum class AesPath {
  kPortable = 0,  // software AES, any CPU
  kAesNi = 1,     // AES-NI, xmm
  kVaes = 2,      // VAES + AVX-512F/BW/VL, zmm
  kVaes256 = 3,   // VAES + AVX2, ymm (no AVX-512 needed)
};

absl::string_view AesPathName(AesPath path);
// The path named `name` ("portable", "aesni", "vaes", "vaes256");
// INVALID_ARGUMENT for another name.
absl::StatusOr<AesPath> AesPathFromName(absl::string_view name);
// True when this CPU (and OS) can run `path`. kPortable is always supported.
bool AesPathSupported(AesPath path);
// The fastest supported path: kVaes, else kVaes256, else kAesNi, else
// kPortable. The environment variable TANDEM_AES_PATH (a name above), read
// once per process, overrides it when that path is supported (to measure or
// compare the paths on one machine, e.g. the AES-NI and VAES-256 figures on
// an AVX-512 CPU); an unknown or unsupported name is logged and ignored.
AesPath BestAesPath();
// Every supported path, slowest first.
std::vector<AesPath> SupportedAesPaths();

class FixedKeyHash {
 public:
  // `key` is the public 16-byte AES key. Returns INVALID_ARGUMENT when the
  // key is not 16 bytes, FAILED_PRECONDITION when `path` is not supported by
  // this CPU.
  static absl::StatusOr<FixedKeyHash> Create(absl::Span<const uint8_t> key, AesPath path);
  // Key = first 16 bytes of SHA-256(name): a nothing-up-my-sleeve fixed key.
  // Returns FAILED_PRECONDITION for an unsupported path, INTERNAL when
  // OpenSSL fails.
  static absl::StatusOr<FixedKeyHash> FromName(absl::string_view name, AesPath path);

  AesPath path() const { return path_; }

  // out[i] = AES_k(in[i]) (raw block cipher, for known-answer tests).
  // REQUIRES: out.size() == in.size(); in and out are equal or disjoint.
  void Encrypt(absl::Span<const Block> in, absl::Span<Block> out) const;
  // out[i] = H(in[i]). REQUIRES as for Encrypt.
  void Hash(absl::Span<const Block> in, absl::Span<Block> out) const;
  // PRG: out[i] = H(seed ^ (first + i)), the counter xored into the low 64
  // bits. Expands one seed into out.size() blocks.
  void HashCounter(Block seed, uint64_t first, absl::Span<Block> out) const;
  // One level of the half-tree (Guo et al., Eurocrypt 2023): for each parent
  // p, left = H(p) ^ (lsb(p) ? cw : 0) and right = left ^ p, stored as
  // children[2i], children[2i+1]. REQUIRES: children.size() == 2 *
  // parents.size(), no overlap.
  void ExpandLevel(absl::Span<const Block> parents, Block cw, absl::Span<Block> children) const;
  // Early-termination DPF leaf conversion: for each seed s with t = lsb(s),
  // v = H(s) + (t ? vc : 0) in lanes of lane_bits (32 or 64), negated
  // lane-wise when `negate`; out[i] = v, or out[i] += v when `add`.
  // REQUIRES: out.size() == seeds.size(); out may be unaligned memory.
  void LeafConvert(absl::Span<const Block> seeds, Block vc, bool negate, int lane_bits, bool add,
                   absl::Span<Block> out) const;
  // Block-leaf conversion of one seed s (t = lsb(s)): v_i = H(s ^ (first +
  // i)) + (t ? vc[i] : 0) lane-wise, negated when `negate`; out[i] = v_i or
  // out[i] += v_i. REQUIRES: vc.size() == out.size().
  void LeafConvertCounter(Block seed, uint64_t first, absl::Span<const Block> vc, bool negate,
                          int lane_bits, bool add, absl::Span<Block> out) const;

 private:
  FixedKeyHash(const internal::RoundKeys& keys, const internal::AesKernels* kernels,
               AesPath path)
      : keys_(keys), kernels_(kernels), path_(path) {}

  internal::RoundKeys keys_;
  const internal::AesKernels* kernels_;  // not owned, static storage
  AesPath path_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_AES_FIXED_KEY_HASH_H_
