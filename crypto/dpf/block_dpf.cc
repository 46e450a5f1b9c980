#include "crypto/dpf/block_dpf.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto {
namespace {

// Subtrees of 2^kChunkLog leaves are expanded breadth-first in scratch that
// stays in L1/L2 (2^10 seeds = 16 KiB per buffer).
constexpr int kChunkLog = 10;
// Leaf expansion works on batches of at most this many AES blocks.
constexpr size_t kConvBatchBlocks = 1024;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Two's-complement negation when mask is all ones, identity when zero.
inline uint64_t CondNeg(uint64_t v, uint64_t mask) { return (v ^ mask) - mask; }

// Applies (-1)^party (G(s) + t*VC) to `n` elements of one leaf. kFixedB > 0
// fixes the element count at compile time (the early-termination case).
template <typename T, bool kAdd, int kBits, int kFixedB>
inline void CorrectLeaf(const uint8_t* conv, uint64_t t_mask, uint64_t sign_mask,
                        uint64_t value_mask, const uint64_t* vc, int runtime_n, T* out) {
  const int n = kFixedB > 0 ? kFixedB : runtime_n;
  for (int j = 0; j < n; ++j) {
    const uint64_t x = kBits == 64 ? Load64(conv + 8 * j) : Load32(conv + 4 * j);
    const uint64_t v = CondNeg(x + (t_mask & vc[j]), sign_mask);
    if constexpr (kAdd) {
      out[j] = static_cast<T>((static_cast<uint64_t>(out[j]) + v) & value_mask);
    } else {
      out[j] = static_cast<T>(v & value_mask);
    }
  }
}

}  // namespace

BlockDpf::BlockDpf(int log_num_blocks, int block_size, int value_bits, FixedKeyHash node_hash,
                   FixedKeyHash leaf_hash, std::array<FixedKeyHash, kProofBlocks> proof_hash)
    : log_num_blocks_(log_num_blocks),
      block_size_(block_size),
      value_bits_(value_bits),
      value_mask_(value_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << value_bits) - 1),
      node_hash_(node_hash),
      leaf_hash_(leaf_hash),
      proof_hash_(proof_hash) {}

absl::StatusOr<BlockDpf> BlockDpf::Create(int log_num_blocks, int block_size, int value_bits,
                                          AesPath path) {
  if (log_num_blocks < 0 || log_num_blocks > kMaxLogNumBlocks) {
    return absl::InvalidArgumentError(absl::StrCat("log_num_blocks must be in [0, ",
                                                   kMaxLogNumBlocks, "], got ", log_num_blocks));
  }
  if (block_size < 1 || block_size > kMaxBlockSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be in [1, ", kMaxBlockSize, "], got ", block_size));
  }
  if (value_bits != 32 && value_bits != 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("value_bits must be 32 or 64, got ", value_bits));
  }
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash node, FixedKeyHash::FromName("tandem.dpf.node.v1", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash leaf, FixedKeyHash::FromName("tandem.dpf.leaf.v1", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash p0, FixedKeyHash::FromName("tandem.vdpf.proof0.v1", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash p1, FixedKeyHash::FromName("tandem.vdpf.proof1.v1", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash p2, FixedKeyHash::FromName("tandem.vdpf.proof2.v1", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash p3, FixedKeyHash::FromName("tandem.vdpf.proof3.v1", path));
  return BlockDpf(log_num_blocks, block_size, value_bits, node, leaf, {p0, p1, p2, p3});
}

size_t BlockDpf::BlocksPerLeaf() const {
  return (static_cast<size_t>(block_size_) * value_bits_ + 127) / 128;
}

void BlockDpf::ExpandLeaves(absl::Span<const Block> seeds, Block* conv) const {
  const size_t nblk = BlocksPerLeaf();
  if (nblk == 1) {
    leaf_hash_.Hash(seeds, absl::MakeSpan(conv, seeds.size()));
    return;
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    leaf_hash_.HashCounter(seeds[i], 0, absl::MakeSpan(conv + i * nblk, nblk));
  }
}

void BlockDpf::ProofHashes(absl::Span<const Block> seeds, uint64_t first,
                           BlockDpfScratch* scratch, Block* out) const {
  const size_t n = seeds.size();
  scratch->proof_in.resize(n);
  scratch->proof_out.resize(n);
  for (size_t i = 0; i < n; ++i) scratch->proof_in[i] = seeds[i] ^ Block{0, first + i};
  for (int j = 0; j < kProofBlocks; ++j) {
    proof_hash_[j].Hash(scratch->proof_in, absl::MakeSpan(scratch->proof_out));
    for (size_t i = 0; i < n; ++i) out[kProofBlocks * i + j] = scratch->proof_out[i];
  }
}

Block BlockDpf::Step(Block seed, Block cw, uint64_t bit) const {
  Block h;
  node_hash_.Hash(absl::MakeConstSpan(&seed, 1), absl::MakeSpan(&h, 1));
  const Block left = h ^ (cw & MaskFromBit(Lsb(seed)));
  return left ^ (MaskFromBit(bit) & seed);  // right = left ^ seed
}

absl::StatusOr<std::pair<BlockDpfKey, BlockDpfKey>> BlockDpf::GenerateKeys(
    uint64_t block_index, absl::Span<const uint64_t> block_value, SecureRandom* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng must not be null");
  if (block_index >= num_blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_index ", block_index, " out of range [0, ", num_blocks(), ")"));
  }
  if (block_value.size() != static_cast<size_t>(block_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("block_value has ", block_value.size(),
                                                   " elements, expected ", block_size_));
  }
  Block rand[2];
  TANDEM_RETURN_IF_ERROR(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(rand), 32)));
  Block delta = rand[1];
  delta.lo |= 1;  // lsb(Delta) = 1: on-path control bits always differ
  Block s[2] = {rand[0], rand[0] ^ delta};

  std::pair<BlockDpfKey, BlockDpfKey> keys;
  keys.first.party = 0;
  keys.second.party = 1;
  keys.first.seed = s[0];
  keys.second.seed = s[1];
  std::vector<Block> cws(log_num_blocks_);
  for (int i = 0; i < log_num_blocks_; ++i) {
    const uint64_t a = (block_index >> (log_num_blocks_ - 1 - i)) & 1;
    Block h[2];
    node_hash_.Hash(s, h);
    const Block cw = h[0] ^ h[1] ^ (delta & MaskFromBit(1 - a));
    for (int b = 0; b < 2; ++b) {
      const Block left = h[b] ^ (cw & MaskFromBit(Lsb(s[b])));
      s[b] = left ^ (MaskFromBit(a) & s[b]);  // right = left ^ s
    }
    cws[i] = cw;
  }
  const uint64_t t1_mask = 0 - Lsb(s[1]);

  const size_t nblk = BlocksPerLeaf();
  std::vector<Block> conv(2 * nblk);
  ExpandLeaves(absl::MakeConstSpan(s, 2), conv.data());
  const uint8_t* c0 = reinterpret_cast<const uint8_t*>(conv.data());
  const uint8_t* c1 = reinterpret_cast<const uint8_t*>(conv.data() + nblk);
  std::vector<uint64_t> vc(block_size_);
  for (int j = 0; j < block_size_; ++j) {
    const uint64_t e0 = value_bits_ == 64 ? Load64(c0 + 8 * j) : Load32(c0 + 4 * j);
    const uint64_t e1 = value_bits_ == 64 ? Load64(c1 + 8 * j) : Load32(c1 + 4 * j);
    vc[j] = CondNeg(block_value[j] - e0 + e1, t1_mask) & value_mask_;
  }

  BlockDpfScratch scratch;
  Block proof[2 * kProofBlocks];
  ProofHashes(absl::MakeConstSpan(&s[0], 1), block_index, &scratch, proof);
  ProofHashes(absl::MakeConstSpan(&s[1], 1), block_index, &scratch, proof + kProofBlocks);
  for (int j = 0; j < kProofBlocks; ++j) {
    keys.first.proof_correction[j] = proof[j] ^ proof[kProofBlocks + j];
  }
  keys.second.proof_correction = keys.first.proof_correction;
  keys.first.correction_words = cws;
  keys.second.correction_words = std::move(cws);
  keys.first.value_correction = vc;
  keys.second.value_correction = std::move(vc);
  return keys;
}

absl::Status BlockDpf::ValidateKey(const BlockDpfKey& key) const {
  if (key.party != 0 && key.party != 1) {
    return absl::InvalidArgumentError(absl::StrCat("party must be 0 or 1, got ", key.party));
  }
  if (key.correction_words.size() != static_cast<size_t>(log_num_blocks_)) {
    return absl::InvalidArgumentError(absl::StrCat("key has ", key.correction_words.size(),
                                                   " correction words, expected ",
                                                   log_num_blocks_));
  }
  if (key.value_correction.size() != static_cast<size_t>(block_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("key has ", key.value_correction.size(),
                                                   " value corrections, expected ",
                                                   block_size_));
  }
  // One OR over all of them, then one test: a branch per value kept this
  // loop scalar, 3 % of the pair's ingest CPU at D = 2^17 (issue 36).
  const uint64_t high = ~value_mask_;
  if (high != 0) {
    uint64_t any = 0;
    for (uint64_t v : key.value_correction) any |= v & high;
    if (any != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("value correction exceeds ", value_bits_, " bits"));
    }
  }
  return absl::OkStatus();
}

template <typename T, BlockDpf::Mode kMode, int kBits>
void BlockDpf::ConvertChunk(const BlockDpfKey& key, absl::Span<const Block> seeds,
                            uint64_t first_leaf, T* out, BlockDpfScratch* scratch) const {
  constexpr bool kSum = kMode == Mode::kSum;
  constexpr bool kAdd = kMode == Mode::kAdd || kSum;  // kSum adds every leaf into `out`
  constexpr int kEarly = 128 / kBits;  // elements per block with early termination
  const size_t bsz = static_cast<size_t>(block_size_);
  // Where leaf i of this chunk goes (kSum: all into the same outputs).
  auto leaf_out = [&](size_t i) -> T* { return kSum ? out : out + (first_leaf + i) * bsz; };
  if (sizeof(T) * 8 == kBits && bsz == kEarly) {
    // One AES block per leaf and the output's element width is the lane
    // width: fused hash + correction + store/add in the AES kernel.
    Block vc;
    if constexpr (kBits == 64) {
      vc = {key.value_correction[0], key.value_correction[1]};
    } else {
      vc = {key.value_correction[0] | key.value_correction[1] << 32,
            key.value_correction[2] | key.value_correction[3] << 32};
    }
    if constexpr (kSum) {
      // The kernel writes consecutive leaves: convert into scratch, then add
      // (T is as wide as the values, so the sum wraps mod 2^value_bits).
      scratch->leaf_buf.resize((seeds.size() * bsz * sizeof(T) + 7) / 8);
      T* buf = reinterpret_cast<T*>(scratch->leaf_buf.data());
      leaf_hash_.LeafConvert(seeds, vc, key.party == 1, kBits, /*add=*/false,
                             absl::MakeSpan(reinterpret_cast<Block*>(buf), seeds.size()));
      for (size_t i = 0; i < seeds.size(); ++i) {
        for (size_t j = 0; j < bsz; ++j) out[j] += buf[i * bsz + j];
      }
    } else {
      leaf_hash_.LeafConvert(seeds, vc, key.party == 1, kBits, kAdd,
                             absl::MakeSpan(reinterpret_cast<Block*>(leaf_out(0)), seeds.size()));
    }
    return;
  }
  const size_t nblk = BlocksPerLeaf();
  if (sizeof(T) * 8 == kBits && (bsz * kBits) % 128 == 0) {
    // Whole blocks of lanes of the output's width: fused PRG + correction +
    // store/add per leaf, in the AES kernel.
    const Block* vc_blocks;
    if constexpr (kBits == 64) {
      vc_blocks = reinterpret_cast<const Block*>(key.value_correction.data());
    } else {
      scratch->vc_packed.resize(nblk);
      for (size_t i = 0; i < nblk; ++i) {
        const uint64_t* v = key.value_correction.data() + 4 * i;
        scratch->vc_packed[i] = {v[0] | v[1] << 32, v[2] | v[3] << 32};
      }
      vc_blocks = scratch->vc_packed.data();
    }
    for (size_t i = 0; i < seeds.size(); ++i) {
      Block* o = reinterpret_cast<Block*>(leaf_out(i));
      if constexpr (kMode == Mode::kAdd) {
        if (i + 1 < seeds.size()) {  // fetch the next leaf's accumulator lines
          const char* next = reinterpret_cast<const char*>(o + nblk);
          for (size_t off = 0; off < nblk * 16; off += 64) __builtin_prefetch(next + off, 1, 3);
        }
      }
      leaf_hash_.LeafConvertCounter(seeds[i], 0, absl::MakeConstSpan(vc_blocks, nblk),
                                    key.party == 1, kBits, kAdd, absl::MakeSpan(o, nblk));
    }
    return;
  }
  const size_t leaves_per_batch = std::max<size_t>(1, kConvBatchBlocks / nblk);
  scratch->conv.resize(leaves_per_batch * nblk);
  const uint64_t sign_mask = key.party == 1 ? ~uint64_t{0} : 0;  // party is public
  const uint64_t* vc = key.value_correction.data();
  for (size_t i0 = 0; i0 < seeds.size(); i0 += leaves_per_batch) {
    const size_t n = std::min(leaves_per_batch, seeds.size() - i0);
    if constexpr (kMode == Mode::kAdd) {
      // The accumulator is usually beyond L2: start fetching this batch's
      // lines so the loads overlap the AES work below.
      const char* first = reinterpret_cast<const char*>(out + (first_leaf + i0) * bsz);
      const size_t bytes = n * bsz * sizeof(T);
      for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(first + off, 1, 3);
    }
    ExpandLeaves(seeds.subspan(i0, n), scratch->conv.data());
    for (size_t i = 0; i < n; ++i) {
      const uint64_t t_mask = 0 - Lsb(seeds[i0 + i]);
      const uint8_t* conv = reinterpret_cast<const uint8_t*>(scratch->conv.data() + i * nblk);
      T* o = leaf_out(i0 + i);
      if (bsz == kEarly) {
        CorrectLeaf<T, kAdd, kBits, kEarly>(conv, t_mask, sign_mask, value_mask_, vc, 0, o);
      } else {
        CorrectLeaf<T, kAdd, kBits, 0>(conv, t_mask, sign_mask, value_mask_, vc, block_size_, o);
      }
    }
  }
}

template <int kBits>
void BlockDpf::AddSumChunk(const BlockDpfKey& key, absl::Span<const Block> seeds,
                           uint64_t first_leaf, uint64_t* out, uint64_t* sums,
                           BlockDpfScratch* scratch) const {
  const size_t bsz = static_cast<size_t>(block_size_);
  // Leaves are converted a few at a time into an L1-sized buffer (32 KiB),
  // then each share is read once: added into the accumulator and into its
  // block sum. Sums wrap mod 2^64 and are reduced at the end (2^value_bits
  // divides 2^64).
  const size_t per_batch = std::max<size_t>(1, 4096 / bsz);
  scratch->chunk_buf.resize(std::min(per_batch, seeds.size()) * bsz);
  uint64_t* buf = scratch->chunk_buf.data();
  for (size_t i0 = 0; i0 < seeds.size(); i0 += per_batch) {
    const size_t n = std::min(per_batch, seeds.size() - i0);
    ConvertChunk<uint64_t, Mode::kWrite, kBits>(key, seeds.subspan(i0, n), 0, buf, scratch);
    uint64_t* acc = out + (first_leaf + i0) * bsz;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t* leaf = buf + i * bsz;
      uint64_t* a = acc + i * bsz;
      for (size_t j = 0; j < bsz; ++j) {
        a[j] = (a[j] + leaf[j]) & value_mask_;
        sums[j] += leaf[j];
      }
    }
  }
}

template <typename T, BlockDpf::Mode kMode>
absl::Status BlockDpf::Evaluate(const BlockDpfKey& key, absl::Span<T> out,
                                BlockDpfScratch* scratch, internal::Sha256* transcript,
                                absl::Span<uint64_t> sums) const {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>);
  if (scratch == nullptr) return absl::InvalidArgumentError("scratch must not be null");
  TANDEM_RETURN_IF_ERROR(ValidateKey(key));
  if (sizeof(T) * 8 < static_cast<size_t>(value_bits_)) {
    return absl::InvalidArgumentError("output element type narrower than value_bits");
  }
  if (kMode == Mode::kSum) {
    if (out.size() != static_cast<size_t>(block_size_)) {
      return absl::InvalidArgumentError(absl::StrCat("block sum has ", out.size(),
                                                     " elements, expected ", block_size_));
    }
    std::fill(out.begin(), out.end(), T{0});
  }
  if (kMode == Mode::kAddSum) {
    if (sums.size() != static_cast<size_t>(block_size_)) {
      return absl::InvalidArgumentError(absl::StrCat("block sum has ", sums.size(),
                                                     " elements, expected ", block_size_));
    }
    std::fill(sums.begin(), sums.end(), uint64_t{0});
  }
  if ((kMode == Mode::kWrite || kMode == Mode::kAdd || kMode == Mode::kAddSum) &&
      out.size() != domain_size()) {
    return absl::InvalidArgumentError(absl::StrCat("output has ", out.size(),
                                                   " elements, expected ", domain_size()));
  }
  const int d = log_num_blocks_;
  const int c = std::min(d, kChunkLog);
  const int top_levels = d - c;
  const size_t n_top = size_t{1} << top_levels;
  const size_t n_leaf = size_t{1} << c;
  scratch->top_a.resize(n_top);
  scratch->top_b.resize(n_top);
  scratch->sub_a.resize(n_leaf);
  scratch->sub_b.resize(n_leaf);
  if (transcript != nullptr) scratch->transcript.resize(n_leaf * kProofBlocks * 16);

  Block* cur = scratch->top_a.data();
  Block* nxt = scratch->top_b.data();
  cur[0] = key.seed;
  for (int level = 0; level < top_levels; ++level) {
    const size_t n = size_t{1} << level;
    node_hash_.ExpandLevel(absl::MakeConstSpan(cur, n), key.correction_words[level],
                           absl::MakeSpan(nxt, 2 * n));
    std::swap(cur, nxt);
  }
  const Block* top = cur;
  for (size_t j = 0; j < n_top; ++j) {
    Block* a = scratch->sub_a.data();
    Block* b = scratch->sub_b.data();
    a[0] = top[j];
    for (int level = top_levels; level < d; ++level) {
      const size_t n = size_t{1} << (level - top_levels);
      node_hash_.ExpandLevel(absl::MakeConstSpan(a, n), key.correction_words[level],
                             absl::MakeSpan(b, 2 * n));
      std::swap(a, b);
    }
    const absl::Span<const Block> seeds(a, n_leaf);
    const uint64_t first_leaf = static_cast<uint64_t>(j) << c;
    if (transcript != nullptr) {
      Block* proofs = reinterpret_cast<Block*>(scratch->transcript.data());
      ProofHashes(seeds, first_leaf, scratch, proofs);
      for (size_t i = 0; i < n_leaf; ++i) {
        const Block m = MaskFromBit(Lsb(seeds[i]));
        for (int k = 0; k < kProofBlocks; ++k) {
          proofs[kProofBlocks * i + k] ^= key.proof_correction[k] & m;
        }
      }
      TANDEM_RETURN_IF_ERROR(transcript->Update(scratch->transcript));
    }
    if constexpr (kMode == Mode::kAddSum) {
      if (value_bits_ == 64) {
        AddSumChunk<64>(key, seeds, first_leaf, out.data(), sums.data(), scratch);
      } else {
        AddSumChunk<32>(key, seeds, first_leaf, out.data(), sums.data(), scratch);
      }
    } else if constexpr (kMode != Mode::kProofOnly) {
      if (value_bits_ == 64) {
        if constexpr (sizeof(T) == 8) {
          ConvertChunk<T, kMode, 64>(key, seeds, first_leaf, out.data(), scratch);
        }
      } else {
        ConvertChunk<T, kMode, 32>(key, seeds, first_leaf, out.data(), scratch);
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BlockDpf::EvaluateFullDomain(const BlockDpfKey& key, absl::Span<T> out,
                                          BlockDpfScratch* scratch,
                                          internal::Sha256* transcript) const {
  return Evaluate<T, Mode::kWrite>(key, out, scratch, transcript);
}

template <typename T>
absl::Status BlockDpf::EvaluateAndAdd(const BlockDpfKey& key, absl::Span<T> accumulator,
                                      BlockDpfScratch* scratch,
                                      internal::Sha256* transcript) const {
  return Evaluate<T, Mode::kAdd>(key, accumulator, scratch, transcript);
}

absl::Status BlockDpf::EvaluateBlockSum(const BlockDpfKey& key, absl::Span<uint64_t> out,
                                        BlockDpfScratch* scratch,
                                        internal::Sha256* transcript) const {
  return Evaluate<uint64_t, Mode::kSum>(key, out, scratch, transcript);
}

absl::Status BlockDpf::EvaluateAddAndSum(const BlockDpfKey& key, absl::Span<uint64_t> accumulator,
                                         absl::Span<uint64_t> sums, BlockDpfScratch* scratch,
                                         internal::Sha256* transcript) const {
  absl::Status s = Evaluate<uint64_t, Mode::kAddSum>(key, accumulator, scratch, transcript, sums);
  if (!s.ok()) return s;
  for (uint64_t& v : sums) v &= value_mask_;
  return absl::OkStatus();
}

absl::Status BlockDpf::FeedProof(const BlockDpfKey& key, BlockDpfScratch* scratch,
                                 internal::Sha256* transcript) const {
  if (transcript == nullptr) return absl::InvalidArgumentError("transcript must not be null");
  return Evaluate<uint64_t, Mode::kProofOnly>(key, absl::Span<uint64_t>(), scratch, transcript);
}

template <typename T>
absl::Status BlockDpf::EvaluateBlock(const BlockDpfKey& key, uint64_t block_index,
                                     absl::Span<T> out) const {
  TANDEM_RETURN_IF_ERROR(ValidateKey(key));
  if (sizeof(T) * 8 < static_cast<size_t>(value_bits_)) {
    return absl::InvalidArgumentError("output element type narrower than value_bits");
  }
  if (block_index >= num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("block_index ", block_index, " out of range"));
  }
  if (out.size() != static_cast<size_t>(block_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("output has ", out.size(),
                                                   " elements, expected ", block_size_));
  }
  Block s = key.seed;
  for (int i = 0; i < log_num_blocks_; ++i) {
    s = Step(s, key.correction_words[i], (block_index >> (log_num_blocks_ - 1 - i)) & 1);
  }
  BlockDpfScratch scratch;
  if (value_bits_ == 64) {
    if constexpr (sizeof(T) == 8) {
      ConvertChunk<T, Mode::kWrite, 64>(key, absl::MakeConstSpan(&s, 1), 0, out.data(), &scratch);
    }
  } else {
    ConvertChunk<T, Mode::kWrite, 32>(key, absl::MakeConstSpan(&s, 1), 0, out.data(), &scratch);
  }
  return absl::OkStatus();
}

template absl::Status BlockDpf::EvaluateBlock<uint32_t>(const BlockDpfKey&, uint64_t,
                                                        absl::Span<uint32_t>) const;
template absl::Status BlockDpf::EvaluateBlock<uint64_t>(const BlockDpfKey&, uint64_t,
                                                        absl::Span<uint64_t>) const;
template absl::Status BlockDpf::EvaluateFullDomain<uint32_t>(const BlockDpfKey&,
                                                             absl::Span<uint32_t>,
                                                             BlockDpfScratch*,
                                                             internal::Sha256*) const;
template absl::Status BlockDpf::EvaluateFullDomain<uint64_t>(const BlockDpfKey&,
                                                             absl::Span<uint64_t>,
                                                             BlockDpfScratch*,
                                                             internal::Sha256*) const;
template absl::Status BlockDpf::EvaluateAndAdd<uint32_t>(const BlockDpfKey&, absl::Span<uint32_t>,
                                                         BlockDpfScratch*,
                                                         internal::Sha256*) const;
template absl::Status BlockDpf::EvaluateAndAdd<uint64_t>(const BlockDpfKey&, absl::Span<uint64_t>,
                                                         BlockDpfScratch*,
                                                         internal::Sha256*) const;

}  // namespace tandem::crypto
