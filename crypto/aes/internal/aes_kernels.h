// Internal: the per-instruction-set AES-128 kernels behind FixedKeyHash.
//
// Four implementations with bit-identical results (tested):
//   portable   constant-time software AES (SWAR GF(2^8) inversion, no tables)
//   aesni      AES-NI on xmm registers, 8 blocks in flight
//   vaes256    VAES on ymm registers (AVX2, no AVX-512), 16 blocks in flight
//   vaes       VAES on zmm registers (AVX-512), 16 blocks in flight
// All kernels are pure functions over caller buffers; thread-compatible.
// Preconditions (REQUIRES) are checked by the callers, never here.
#ifndef TANDEM_CRYPTO_AES_INTERNAL_AES_KERNELS_H_
#define TANDEM_CRYPTO_AES_INTERNAL_AES_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "crypto/aes/block.h"

namespace tandem::crypto::internal {

// AES-128 encryption key schedule (FIPS-197 section 5.2), 11 round keys in
// the byte order of the state (FIPS-197 input order).
struct RoundKeys {
  Block rk[11];
};

// FIPS-197 key expansion. The fixed keys are public, so this need not be
// constant time; it is anyway (it uses the table-free S-box).
RoundKeys ExpandAes128Key(const uint8_t key[16]);

// sigma(x) of Guo, Katz, Wang, Yu (ePrint 2019/074): for x = xL || xR with xL
// the high half, sigma(x) = (xL ^ xR) || xL. In Block terms: lo' = hi,
// hi' = hi ^ lo. An orthomorphism, as the correlation-robust hash requires.
constexpr Block Sigma(Block x) { return {x.hi, x.hi ^ x.lo}; }

struct AesKernels {
  const char* name;
  // out[i] = AES_k(in[i]). in == out allowed.
  void (*encrypt)(const RoundKeys& keys, const Block* in, Block* out, size_t n);
  // out[i] = AES_k(sigma(in[i])) ^ sigma(in[i]). in == out allowed.
  void (*mmo)(const RoundKeys& keys, const Block* in, Block* out, size_t n);
  // out[i] = mmo(base ^ {first + i, 0}): the PRG that expands one leaf seed.
  void (*mmo_counter)(const RoundKeys& keys, Block base, uint64_t first, Block* out,
                      size_t n);
  // One half-tree level (Guo et al., Eurocrypt 2023, Fig. 3): for parent p
  // with control bit t = lsb(p), h = mmo(p) ^ (t ? cw : 0), then
  // children[2i] = h and children[2i+1] = h ^ p. REQUIRES: children does not
  // overlap parents.
  void (*expand_level)(const RoundKeys& keys, const Block* parents, size_t n, Block cw,
                       Block* children);
  // Early-termination leaf conversion, one AES block per leaf (BGI16 3.2.1):
  // for seed s with t = lsb(s), v = mmo(s) + (t ? vc : 0) in lanes of
  // lane_bits (32 or 64) bits, negated lane-wise when `negate`; then
  // out[i] = v, or out[i] += v (lane-wise) when `add`. out may be unaligned.
  void (*leaf_convert)(const RoundKeys& keys, const Block* seeds, size_t n, Block vc,
                       bool negate, int lane_bits, bool add, Block* out);
  // Block-leaf conversion of one seed s (t = lsb(s)) into n blocks:
  // v_i = mmo(s ^ {first + i, 0}) + (t ? vc[i] : 0) lane-wise, negated when `negate`;
  // out[i] = v_i, or out[i] += v_i when `add`. vc and out may be unaligned.
  void (*leaf_convert_counter)(const RoundKeys& keys, Block seed, uint64_t first, size_t n,
                               const Block* vc,
                               bool negate, int lane_bits, bool add, Block* out);
};

// Expands to the eight instantiations of a kernel template F<k64, kNeg, kAdd>
// selected by the runtime flags (used by the SIMD kernel files).
#define TANDEM_DISPATCH_LANES(F, lane_bits, negate, add, ...)                        \
  do {                                                                              \
    const bool w64_ = (lane_bits) == 64;                                            \
    if (w64_ && !(negate) && !(add)) return F<true, false, false>(__VA_ARGS__);     \
    if (w64_ && !(negate) && (add)) return F<true, false, true>(__VA_ARGS__);       \
    if (w64_ && (negate) && !(add)) return F<true, true, false>(__VA_ARGS__);       \
    if (w64_ && (negate) && (add)) return F<true, true, true>(__VA_ARGS__);         \
    if (!(negate) && !(add)) return F<false, false, false>(__VA_ARGS__);            \
    if (!(negate) && (add)) return F<false, false, true>(__VA_ARGS__);              \
    if ((negate) && !(add)) return F<false, true, false>(__VA_ARGS__);              \
    return F<false, true, true>(__VA_ARGS__);                                       \
  } while (false)

// Lane-wise arithmetic of leaf_convert on one block (shared scalar code).
inline Block LeafLanes(Block conv, Block vc_masked, bool negate, int lane_bits, bool add,
                       Block prev) {
  uint64_t w[2] = {conv.lo, conv.hi};
  const uint64_t c[2] = {vc_masked.lo, vc_masked.hi};
  const uint64_t p[2] = {prev.lo, prev.hi};
  for (int k = 0; k < 2; ++k) {
    if (lane_bits == 64) {
      uint64_t v = w[k] + c[k];
      if (negate) v = 0 - v;
      w[k] = add ? p[k] + v : v;
    } else {
      uint64_t out = 0;
      for (int h = 0; h < 2; ++h) {
        uint32_t v = static_cast<uint32_t>(w[k] >> (32 * h)) + static_cast<uint32_t>(c[k] >> (32 * h));
        if (negate) v = 0u - v;
        if (add) v += static_cast<uint32_t>(p[k] >> (32 * h));
        out |= static_cast<uint64_t>(v) << (32 * h);
      }
      w[k] = out;
    }
  }
  return {w[0], w[1]};
}

const AesKernels& PortableAesKernels();
// REQUIRES: the CPU supports the instruction set (AesPathSupported in
// fixed_key_hash.h).
const AesKernels& AesNiKernels();
const AesKernels& Vaes256Kernels();  // AES + VAES + AVX2
const AesKernels& VaesKernels();     // AES + VAES + AVX-512F/BW/VL

}  // namespace tandem::crypto::internal

#endif  // TANDEM_CRYPTO_AES_INTERNAL_AES_KERNELS_H_
