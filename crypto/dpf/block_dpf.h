// Verifiable block DPF: a two-party distributed point function over 2^d
// leaves whose leaf values are blocks of B elements of Z_2^32 or Z_2^64.
//
// Construction (citations are to the algorithms, no code was taken):
//  * Tree: the half-tree DPF of Guo, Yang, Wang, Zhang, Xie, Liu, Zhao,
//    "Half-Tree: Halving the Cost of Tree Expansion in COT and DPF"
//    (Eurocrypt 2023). One fixed-key correlation-robust hash H per node:
//    left = H(s) ^ t*CW, right = left ^ s, control bit t = lsb(s); on the
//    path the parties' seeds differ by a secret Delta with lsb(Delta) = 1,
//    off the path they are equal. CW_i = H(s0) ^ H(s1) ^ (1 - alpha_i)*Delta.
//  * Leaves: as in BGI16 (Boyle, Gilboa, Ishai, CCS'16) with early
//    termination, but each leaf seed is expanded by the PRG
//    G(s) = H_leaf(s ^ 0) || H_leaf(s ^ 1) || ... into B elements, then
//    corrected by the value correction VC = (-1)^t1 (beta - G(s0) + G(s1)),
//    the "block leaf" of PREAMBLE (Asi et al., NeurIPS 2025). Party b
//    outputs (-1)^b (G(s) + t*VC).
//  * Verifiability: the leaf proof of de Castro & Polychroniadou,
//    "Lightweight, maliciously secure verifiable function secret sharing"
//    (Eurocrypt 2022): pi_x = Hp(x, s_x) (4 lambda = 512 bits, four fixed-key
//    MMO hashes), corrected as pi~_x = pi_x ^ t_x*CS with the public
//    CS = Hp(alpha, s0) ^ Hp(alpha, s1). For an honest key pair pi~_x is
//    equal on both servers for every x; a pair whose leaf seeds differ at two
//    or more leaves (so more than one non-zero block) makes them differ
//    except with negligible probability. Servers compare SHA-256 over the
//    whole list (plus the public parts, see sparse_dpf.h).
//
// Constant time: key generation and evaluation never branch or index memory
// on secret bits (alpha's bits, control bits); selections use masks.
//
// BlockDpf is an immutable value type, thread-safe for const use. Keys are
// plain values; BlockDpfScratch is per-thread state reused across calls so the
// hot paths do not allocate after warm-up.
#ifndef TANDEM_CRYPTO_DPF_BLOCK_DPF_H_
#define TANDEM_CRYPTO_DPF_BLOCK_DPF_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/aes/block.h"
#include "crypto/aes/fixed_key_hash.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto {

inline constexpr int kMaxLogNumBlocks = 24;
inline constexpr int kMaxBlockSize = 1 << 20;
inline constexpr int kProofBlocks = 4;  // 4 * 128 = 512-bit leaf proofs

// One party's key. All fields but `seed` are public (identical in both keys).
struct BlockDpfKey {
  int party = 0;                           // 0 or 1
  Block seed;                              // secret root seed
  std::vector<Block> correction_words;     // d entries, root level first
  std::vector<uint64_t> value_correction;  // B entries, each < 2^value_bits
  std::array<Block, kProofBlocks> proof_correction{};  // CS
};

// Reusable evaluation buffers. Not thread-safe; one per thread.
struct BlockDpfScratch {
  std::vector<Block> top_a, top_b, sub_a, sub_b, conv, proof_in, proof_out, vc_packed;
  std::vector<uint8_t> transcript;
  std::vector<uint64_t> leaf_buf;  // leaves of one chunk before a block sum
  std::vector<uint64_t> chunk_buf;  // one chunk's shares (EvaluateAddAndSum)
};

class BlockDpf {
 public:
  // Returns INVALID_ARGUMENT unless 0 <= log_num_blocks <= 24,
  // 1 <= block_size <= 2^20 and value_bits is 32 or 64; FAILED_PRECONDITION
  // when `path` is unsupported by this CPU; INTERNAL on OpenSSL failure.
  static absl::StatusOr<BlockDpf> Create(int log_num_blocks, int block_size, int value_bits,
                                         AesPath path = BestAesPath());

  int log_num_blocks() const { return log_num_blocks_; }
  uint64_t num_blocks() const { return uint64_t{1} << log_num_blocks_; }
  int block_size() const { return block_size_; }
  int value_bits() const { return value_bits_; }
  uint64_t value_mask() const { return value_mask_; }
  // Number of output elements of a full evaluation: num_blocks * block_size.
  uint64_t domain_size() const { return num_blocks() * block_size_; }

  // Keys for the function that is `block_value` on block `block_index` and
  // zero elsewhere. block_value entries are reduced mod 2^value_bits.
  // Returns INVALID_ARGUMENT for an out-of-range index or a block of the
  // wrong length, or the error of `rng`.
  absl::StatusOr<std::pair<BlockDpfKey, BlockDpfKey>> GenerateKeys(
      uint64_t block_index, absl::Span<const uint64_t> block_value, SecureRandom* rng) const;

  // Checks a key's shape against these parameters (INVALID_ARGUMENT).
  absl::Status ValidateKey(const BlockDpfKey& key) const;

  // This party's share of block `block_index` into `out` (block_size
  // elements). Returns INVALID_ARGUMENT on a bad index, size or key.
  template <typename T>
  absl::Status EvaluateBlock(const BlockDpfKey& key, uint64_t block_index,
                             absl::Span<T> out) const;

  // Full-domain evaluation: out[i] = share of coordinate i (out.size() ==
  // domain_size()). T is uint64_t, or uint32_t when value_bits == 32.
  // With `transcript` non-null, also feeds the VDPF leaf proofs (pi~_x, leaf
  // order) into it. Returns INVALID_ARGUMENT on size or key mismatch.
  template <typename T>
  absl::Status EvaluateFullDomain(const BlockDpfKey& key, absl::Span<T> out,
                                  BlockDpfScratch* scratch,
                                  internal::Sha256* transcript = nullptr) const;
  // As EvaluateFullDomain but adds the shares into `accumulator` (mod
  // 2^value_bits per element).
  template <typename T>
  absl::Status EvaluateAndAdd(const BlockDpfKey& key, absl::Span<T> accumulator,
                              BlockDpfScratch* scratch,
                              internal::Sha256* transcript = nullptr) const;
  // The sum over all blocks of this party's shares: out[j] = sum over leaves
  // x of the share of coordinate (x, j), mod 2^value_bits (out.size() ==
  // block_size(), overwritten). Each leaf is added into `out` as the AES
  // kernel produces it, so no domain-sized buffer is written: what the norm
  // proof derives its input shares from (crypto/proof/norm_circuit.h).
  // Same transcript as EvaluateFullDomain. INVALID_ARGUMENT on size or key
  // mismatch.
  absl::Status EvaluateBlockSum(const BlockDpfKey& key, absl::Span<uint64_t> out,
                                BlockDpfScratch* scratch,
                                internal::Sha256* transcript = nullptr) const;
  // EvaluateAndAdd and EvaluateBlockSum from ONE evaluation: each chunk's
  // shares are converted once (into L2-resident scratch), then added into
  // `accumulator` (domain_size() elements) and summed into `sums`
  // (block_size() elements, overwritten), both mod 2^value_bits. What a
  // norm-bound round's server runs so that verification and accumulation
  // share the expansion. Same transcript as EvaluateFullDomain.
  // INVALID_ARGUMENT on size or key mismatch (nothing added).
  absl::Status EvaluateAddAndSum(const BlockDpfKey& key, absl::Span<uint64_t> accumulator,
                                 absl::Span<uint64_t> sums, BlockDpfScratch* scratch,
                                 internal::Sha256* transcript = nullptr) const;
  // Only the VDPF leaf proofs (tree expansion, no leaf expansion): the cheap
  // check servers run before accumulating.
  absl::Status FeedProof(const BlockDpfKey& key, BlockDpfScratch* scratch,
                         internal::Sha256* transcript) const;

 private:
  enum class Mode { kWrite, kAdd, kSum, kAddSum, kProofOnly };

  BlockDpf(int log_num_blocks, int block_size, int value_bits, FixedKeyHash node_hash,
           FixedKeyHash leaf_hash, std::array<FixedKeyHash, kProofBlocks> proof_hash);

  // Leaf conversion blocks per leaf: ceil(block_size * value_bits / 128).
  size_t BlocksPerLeaf() const;
  // G(seed) into conv (BlocksPerLeaf() blocks per seed).
  void ExpandLeaves(absl::Span<const Block> seeds, Block* conv) const;
  // Hp(x, s) for leaves first..first+n-1 into out (n * 4 blocks, leaf-major).
  void ProofHashes(absl::Span<const Block> seeds, uint64_t first, BlockDpfScratch* scratch,
                   Block* out) const;
  // One tree step for a single node, branch-free on `bit`.
  Block Step(Block seed, Block cw, uint64_t bit) const;

  // `sums`: the block sums of kAddSum (empty otherwise).
  template <typename T, Mode kMode>
  absl::Status Evaluate(const BlockDpfKey& key, absl::Span<T> out, BlockDpfScratch* scratch,
                        internal::Sha256* transcript,
                        absl::Span<uint64_t> sums = absl::Span<uint64_t>()) const;
  // kAddSum for one chunk: convert, then add into out and sums.
  template <int kBits>
  void AddSumChunk(const BlockDpfKey& key, absl::Span<const Block> seeds, uint64_t first_leaf,
                   uint64_t* out, uint64_t* sums, BlockDpfScratch* scratch) const;
  // kSum: every leaf is added into the same block_size outputs at `out`.
  template <typename T, Mode kMode, int kBits>
  void ConvertChunk(const BlockDpfKey& key, absl::Span<const Block> seeds, uint64_t first_leaf,
                    T* out, BlockDpfScratch* scratch) const;

  int log_num_blocks_;
  int block_size_;
  int value_bits_;
  uint64_t value_mask_;
  FixedKeyHash node_hash_;
  FixedKeyHash leaf_hash_;
  std::array<FixedKeyHash, kProofBlocks> proof_hash_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_BLOCK_DPF_H_
