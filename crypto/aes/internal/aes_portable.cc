// Portable, table-free, constant-time AES-128 (FIPS-197). The S-box is
// computed as inversion in GF(2^8) (x^254) followed by the affine map, on
// eight bytes at a time packed in a uint64_t (SWAR), so no memory access
// depends on data. Slow (~microseconds per block): a fallback and the
// reference the fast paths are tested against.
#include <cstring>

#include "crypto/aes/internal/aes_kernels.h"

namespace tandem::crypto::internal {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ULL;

// Multiplication by x in GF(2^8) mod x^8+x^4+x^3+x+1, per byte.
inline uint64_t Xtime8(uint64_t a) {
  return ((a & 0x7f7f7f7f7f7f7f7fULL) << 1) ^ (((a >> 7) & kOnes) * 0x1b);
}

inline uint64_t GfMul8(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) {
    r ^= a & (((b >> i) & kOnes) * 0xff);
    a = Xtime8(a);
  }
  return r;
}

inline uint64_t Rotl8(uint64_t b, int k) {
  const uint64_t hi_mask = (0xffULL << k) & 0xff;  // bits that stay inside the byte
  return ((b << k) & (hi_mask * kOnes)) | ((b >> (8 - k)) & ((0xffULL >> (8 - k)) * kOnes));
}

// S-box on each of the eight bytes of w.
inline uint64_t SubBytes8(uint64_t w) {
  uint64_t p = w;
  uint64_t r = kOnes;
  for (int i = 0; i < 7; ++i) {  // r = w^(2+4+...+128) = w^254 = w^-1 (0 -> 0)
    p = GfMul8(p, p);
    r = GfMul8(r, p);
  }
  return r ^ Rotl8(r, 1) ^ Rotl8(r, 2) ^ Rotl8(r, 3) ^ Rotl8(r, 4) ^ (0x63 * kOnes);
}

inline uint8_t Xtime(uint8_t a) { return static_cast<uint8_t>((a << 1) ^ ((a >> 7) * 0x1b)); }

Block EncryptOne(const RoundKeys& keys, Block in) {
  Block s = in ^ keys.rk[0];
  for (int round = 1; round <= 10; ++round) {
    s.lo = SubBytes8(s.lo);
    s.hi = SubBytes8(s.hi);
    uint8_t a[16];
    uint8_t b[16];
    std::memcpy(a, &s, 16);
    // ShiftRows: state[r][c] = byte r + 4c; row r shifts left by r.
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < 4; ++r) b[r + 4 * c] = a[r + 4 * ((c + r) % 4)];
    }
    if (round != 10) {  // MixColumns (public round index, not secret)
      for (int c = 0; c < 4; ++c) {
        uint8_t* col = b + 4 * c;
        const uint8_t a0 = col[0], a1 = col[1], a2 = col[2], a3 = col[3];
        const uint8_t t = a0 ^ a1 ^ a2 ^ a3;
        col[0] = a0 ^ t ^ Xtime(a0 ^ a1);
        col[1] = a1 ^ t ^ Xtime(a1 ^ a2);
        col[2] = a2 ^ t ^ Xtime(a2 ^ a3);
        col[3] = a3 ^ t ^ Xtime(a3 ^ a0);
      }
    }
    std::memcpy(&s, b, 16);
    s ^= keys.rk[round];
  }
  return s;
}

inline Block MmoOne(const RoundKeys& keys, Block x) {
  const Block sx = Sigma(x);
  return EncryptOne(keys, sx) ^ sx;
}

void Encrypt(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = EncryptOne(keys, in[i]);
}

void Mmo(const RoundKeys& keys, const Block* in, Block* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = MmoOne(keys, in[i]);
}

void MmoCounter(const RoundKeys& keys, Block base, uint64_t first, Block* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = MmoOne(keys, base ^ Block{first + i, 0});
}

void ExpandLevel(const RoundKeys& keys, const Block* parents, size_t n, Block cw,
                 Block* children) {
  for (size_t i = 0; i < n; ++i) {
    const Block p = parents[i];
    const Block h = MmoOne(keys, p) ^ (cw & MaskFromBit(Lsb(p)));
    children[2 * i] = h;
    children[2 * i + 1] = h ^ p;
  }
}

void LeafConvert(const RoundKeys& keys, const Block* seeds, size_t n, Block vc, bool negate,
                 int lane_bits, bool add, Block* out) {
  for (size_t i = 0; i < n; ++i) {
    Block prev;
    std::memcpy(&prev, out + i, 16);
    const Block v = LeafLanes(MmoOne(keys, seeds[i]), vc & MaskFromBit(Lsb(seeds[i])), negate,
                              lane_bits, add, prev);
    std::memcpy(out + i, &v, 16);
  }
}

void LeafConvertCounter(const RoundKeys& keys, Block seed, uint64_t first, size_t n, const Block* vc,
                        bool negate, int lane_bits, bool add, Block* out) {
  const Block t = MaskFromBit(Lsb(seed));
  for (size_t i = 0; i < n; ++i) {
    Block prev, c;
    std::memcpy(&prev, out + i, 16);
    std::memcpy(&c, vc + i, 16);
    const Block v =
        LeafLanes(MmoOne(keys, seed ^ Block{first + i, 0}), c & t, negate, lane_bits, add, prev);
    std::memcpy(out + i, &v, 16);
  }
}

}  // namespace

RoundKeys ExpandAes128Key(const uint8_t key[16]) {
  uint8_t w[176];
  std::memcpy(w, key, 16);
  uint8_t rcon = 1;
  for (int i = 4; i < 44; ++i) {
    uint8_t t[4] = {w[4 * i - 4], w[4 * i - 3], w[4 * i - 2], w[4 * i - 1]};
    if (i % 4 == 0) {
      uint64_t word = 0;
      // RotWord then SubWord.
      word = static_cast<uint64_t>(t[1]) | static_cast<uint64_t>(t[2]) << 8 |
             static_cast<uint64_t>(t[3]) << 16 | static_cast<uint64_t>(t[0]) << 24;
      word = SubBytes8(word);
      t[0] = static_cast<uint8_t>(word) ^ rcon;
      t[1] = static_cast<uint8_t>(word >> 8);
      t[2] = static_cast<uint8_t>(word >> 16);
      t[3] = static_cast<uint8_t>(word >> 24);
      rcon = Xtime(rcon);
    }
    for (int j = 0; j < 4; ++j) w[4 * i + j] = w[4 * i - 16 + j] ^ t[j];
  }
  RoundKeys keys;
  for (int r = 0; r < 11; ++r) std::memcpy(&keys.rk[r], w + 16 * r, 16);
  return keys;
}

const AesKernels& PortableAesKernels() {
  static constexpr AesKernels kKernels = {"portable",   &Encrypt,     &Mmo,
                                          &MmoCounter,  &ExpandLevel, &LeafConvert,
                                          &LeafConvertCounter};
  return kKernels;
}

}  // namespace tandem::crypto::internal
