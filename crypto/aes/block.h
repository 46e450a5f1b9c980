// A 128-bit block, the unit of the fixed-key AES hash and of DPF seeds.
//
// Value type, trivially copyable. `lo` holds bytes 0..7 and `hi` bytes 8..15
// of the little-endian byte string, so memcpy between Block and 16 bytes is
// the wire encoding on the (little-endian) targets tandem supports.
#ifndef TANDEM_CRYPTO_AES_BLOCK_H_
#define TANDEM_CRYPTO_AES_BLOCK_H_

#include <bit>
#include <cstdint>
#include <cstring>

static_assert(std::endian::native == std::endian::little,
              "tandem crypto assumes a little-endian target");

namespace tandem::crypto {

struct alignas(16) Block {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend constexpr Block operator^(Block a, Block b) { return {a.lo ^ b.lo, a.hi ^ b.hi}; }
  friend constexpr Block operator&(Block a, Block b) { return {a.lo & b.lo, a.hi & b.hi}; }
  constexpr Block& operator^=(Block b) {
    lo ^= b.lo;
    hi ^= b.hi;
    return *this;
  }
  friend constexpr bool operator==(Block a, Block b) = default;
};
static_assert(sizeof(Block) == 16);

// Low bit of the block (the half-tree control bit), as 0 or 1.
constexpr uint64_t Lsb(Block b) { return b.lo & 1; }

// All-ones block when bit == 1, all-zero when bit == 0 (bit must be 0 or 1).
// Used instead of branches on secret bits.
constexpr Block MaskFromBit(uint64_t bit) {
  const uint64_t m = 0 - bit;
  return {m, m};
}

inline Block BlockFromBytes(const void* bytes16) {
  Block b;
  std::memcpy(&b, bytes16, 16);
  return b;
}

inline void BlockToBytes(Block b, void* bytes16) { std::memcpy(bytes16, &b, 16); }

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_AES_BLOCK_H_
