#include "crypto/dpf/sparse_dpf.h"

#include <bit>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto {
namespace {

constexpr absl::string_view kDigestDomain = "tandem.vdpf.digest.v2";

// Value corrections travel packed at 4 bytes at value_bits 32 (proto/dpf.proto).
void KeyToProto(const BlockDpfKey& key, int value_bits, proto::BlockDpfKey* out) {
  out->set_party(static_cast<uint32_t>(key.party));
  out->set_seed(reinterpret_cast<const char*>(&key.seed), 16);
  for (const Block& cw : key.correction_words) {
    out->add_correction_words()->set_seed(reinterpret_cast<const char*>(&cw), 16);
  }
  if (value_bits == 32) {
    std::string* packed = out->mutable_value_correction_packed();
    packed->resize(4 * key.value_correction.size());
    for (size_t j = 0; j < key.value_correction.size(); ++j) {
      const uint32_t v = static_cast<uint32_t>(key.value_correction[j]);  // < 2^32
      std::memcpy(packed->data() + 4 * j, &v, 4);                         // LE target
    }
  } else {
    out->mutable_value_correction()->Assign(key.value_correction.begin(),
                                            key.value_correction.end());
  }
  out->set_proof_correction(reinterpret_cast<const char*>(key.proof_correction.data()),
                            16 * kProofBlocks);
}

// REQUIRES: `in` passed ValidateSparseKeySet. Reuses out's capacity.
void KeyFromProto(const proto::BlockDpfKey& in, BlockDpfKey* out) {
  out->party = static_cast<int>(in.party());
  out->seed = BlockFromBytes(in.seed().data());
  out->correction_words.resize(in.correction_words_size());
  for (int i = 0; i < in.correction_words_size(); ++i) {
    out->correction_words[i] = BlockFromBytes(in.correction_words(i).seed().data());
  }
  if (!in.value_correction_packed().empty()) {
    const std::string& packed = in.value_correction_packed();
    out->value_correction.resize(packed.size() / 4);
    for (size_t j = 0; j < out->value_correction.size(); ++j) {
      uint32_t v;
      std::memcpy(&v, packed.data() + 4 * j, 4);  // LE target
      out->value_correction[j] = v;
    }
  } else {
    out->value_correction.assign(in.value_correction().begin(), in.value_correction().end());
  }
  std::memcpy(out->proof_correction.data(), in.proof_correction().data(), 16 * kProofBlocks);
}

}  // namespace

struct SparseDpfScratch::Impl {
  BlockDpfScratch block;
  BlockDpfKey key;
  std::optional<internal::Sha256> sha;
};

SparseDpfScratch::SparseDpfScratch() : impl_(std::make_unique<Impl>()) {}
SparseDpfScratch::~SparseDpfScratch() = default;
SparseDpfScratch::SparseDpfScratch(SparseDpfScratch&&) noexcept = default;
SparseDpfScratch& SparseDpfScratch::operator=(SparseDpfScratch&&) noexcept = default;

absl::StatusOr<SparseDpf> SparseDpf::Create(uint64_t dimension, int block_size, int num_groups,
                                            int value_bits, AesPath path) {
  if (block_size < 1 || block_size > kMaxBlockSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be in [1, ", kMaxBlockSize, "], got ", block_size));
  }
  if (num_groups < 1 || num_groups > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be in [1, 4096], got ", num_groups));
  }
  const uint64_t unit = static_cast<uint64_t>(block_size) * static_cast<uint64_t>(num_groups);
  if (dimension == 0 || dimension % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension ", dimension, " is not a multiple of block_size * num_groups = ", unit));
  }
  const uint64_t blocks = dimension / unit;
  if ((blocks & (blocks - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension / (block_size * num_groups) = ", blocks, " is not a power of two"));
  }
  const int d = std::countr_zero(blocks);
  TANDEM_ASSIGN_OR_RETURN(BlockDpf block, BlockDpf::Create(d, block_size, value_bits, path));
  return SparseDpf(dimension, num_groups, std::move(block));
}

ExpectedKeySetShape SparseDpf::Shape(int party) const {
  ExpectedKeySetShape s;
  s.log_num_blocks = static_cast<uint32_t>(block_dpf_.log_num_blocks());
  s.block_size = static_cast<uint32_t>(block_size());
  s.value_bits = static_cast<uint32_t>(value_bits());
  s.num_groups = static_cast<uint32_t>(num_groups_);
  s.party = party;
  return s;
}

absl::StatusOr<std::pair<proto::SparseKeySet, proto::SparseKeySet>> SparseDpf::GenerateKeys(
    absl::Span<const uint32_t> block_index_per_group, absl::Span<const uint64_t> block_values,
    SecureRandom* rng) const {
  const size_t k = static_cast<size_t>(num_groups_);
  const size_t b = static_cast<size_t>(block_size());
  if (block_index_per_group.size() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        block_index_per_group.size(), " block indices given, expected one per group (", k, ")"));
  }
  if (block_values.size() != k * b) {
    return absl::InvalidArgumentError(absl::StrCat(block_values.size(),
                                                   " block values given, expected k*B = ", k * b));
  }
  std::pair<proto::SparseKeySet, proto::SparseKeySet> out;
  for (proto::SparseKeySet* set : {&out.first, &out.second}) {
    proto::BlockDpfParameters* p = set->mutable_group_parameters();
    p->set_log_num_blocks(static_cast<uint32_t>(block_dpf_.log_num_blocks()));
    p->set_block_size(static_cast<uint32_t>(b));
    p->set_value_bits(static_cast<uint32_t>(value_bits()));
    set->set_num_groups(static_cast<uint32_t>(k));
  }
  for (size_t g = 0; g < k; ++g) {
    TANDEM_ASSIGN_OR_RETURN(auto keys,
                            block_dpf_.GenerateKeys(block_index_per_group[g],
                                                    block_values.subspan(g * b, b), rng));
    KeyToProto(keys.first, value_bits(), out.first.add_keys());
    KeyToProto(keys.second, value_bits(), out.second.add_keys());
  }
  return out;
}

absl::StatusOr<ProofDigest> SparseDpf::ComputeProofDigest(const proto::SparseKeySet& keys,
                                                          SparseDpfScratch* scratch,
                                                          const ProofDigest* public_digest) const {
  return Run(keys, {}, {}, Output::kNone, /*digest=*/true, scratch, public_digest);
}

absl::StatusOr<ProofDigest> SparseDpf::EvaluateAndAccumulate(
    const proto::SparseKeySet& keys, absl::Span<uint64_t> accumulator, SparseDpfScratch* scratch,
    const ProofDigest* public_digest) const {
  if (accumulator.size() != dimension_) {
    return absl::InvalidArgumentError(absl::StrCat("accumulator has ", accumulator.size(),
                                                   " entries, expected ", dimension_));
  }
  return Run(keys, accumulator, {}, Output::kAccumulate, /*digest=*/true, scratch, public_digest);
}

absl::StatusOr<ProofDigest> SparseDpf::EvaluateBlockSums(const proto::SparseKeySet& keys,
                                                         absl::Span<uint64_t> block_sums,
                                                         SparseDpfScratch* scratch,
                                                         const ProofDigest* public_digest) const {
  if (block_sums.size() != static_cast<size_t>(num_groups_) * block_size()) {
    return absl::InvalidArgumentError(absl::StrCat("block_sums has ", block_sums.size(),
                                                   " entries, expected k*B = ",
                                                   uint64_t(num_groups_) * block_size()));
  }
  return Run(keys, block_sums, {}, Output::kBlockSums, /*digest=*/true, scratch, public_digest);
}

absl::StatusOr<ProofDigest> SparseDpf::EvaluateAccumulateAndSum(
    const proto::SparseKeySet& keys, absl::Span<uint64_t> accumulator,
    absl::Span<uint64_t> block_sums, SparseDpfScratch* scratch,
    const ProofDigest* public_digest) const {
  if (accumulator.size() != dimension_) {
    return absl::InvalidArgumentError(absl::StrCat("accumulator has ", accumulator.size(),
                                                   " entries, expected ", dimension_));
  }
  if (block_sums.size() != static_cast<size_t>(num_groups_) * block_size()) {
    return absl::InvalidArgumentError(absl::StrCat("block_sums has ", block_sums.size(),
                                                   " entries, expected k*B = ",
                                                   uint64_t(num_groups_) * block_size()));
  }
  return Run(keys, accumulator, block_sums, Output::kAccumulateAndSums, /*digest=*/true, scratch,
             public_digest);
}

absl::Status SparseDpf::Accumulate(const proto::SparseKeySet& keys,
                                   absl::Span<uint64_t> accumulator,
                                   SparseDpfScratch* scratch) const {
  if (accumulator.size() != dimension_) {
    return absl::InvalidArgumentError(absl::StrCat("accumulator has ", accumulator.size(),
                                                   " entries, expected ", dimension_));
  }
  return Run(keys, accumulator, {}, Output::kAccumulate, /*digest=*/false, scratch, nullptr)
      .status();
}

absl::StatusOr<ProofDigest> SparseDpf::Run(const proto::SparseKeySet& keys,
                                           absl::Span<uint64_t> out, absl::Span<uint64_t> sums,
                                           Output output, bool digest, SparseDpfScratch* scratch,
                                           const ProofDigest* public_digest) const {
  if (scratch == nullptr) return absl::InvalidArgumentError("scratch must not be null");
  TANDEM_RETURN_IF_ERROR(ValidateSparseKeySet(keys, Shape()));
  SparseDpfScratch::Impl& s = *scratch->impl_;
  const uint64_t group_dim = group_dimension();
  const size_t b = static_cast<size_t>(block_size());
  // Group g's evaluation, feeding `transcript` when non-null.
  auto evaluate = [&](int g, internal::Sha256* transcript) -> absl::Status {
    switch (output) {
      case Output::kAccumulate:
        return block_dpf_.EvaluateAndAdd<uint64_t>(
            s.key, out.subspan(g * group_dim, group_dim), &s.block, transcript);
      case Output::kBlockSums:
        return block_dpf_.EvaluateBlockSum(s.key, out.subspan(g * b, b), &s.block, transcript);
      case Output::kAccumulateAndSums:
        return block_dpf_.EvaluateAddAndSum(s.key, out.subspan(g * group_dim, group_dim),
                                            sums.subspan(g * b, b), &s.block, transcript);
      case Output::kNone:
        break;
    }
    return transcript == nullptr ? absl::OkStatus()
                                 : block_dpf_.FeedProof(s.key, &s.block, transcript);
  };
  if (!digest) {
    for (int g = 0; g < num_groups_; ++g) {
      KeyFromProto(keys.keys(g), &s.key);
      TANDEM_RETURN_IF_ERROR(evaluate(g, nullptr));
    }
    return ProofDigest{};
  }
  // P first (given, or hashed now from the validated keys), so that servers
  // holding different public parts disagree even where the leaf proofs
  // happen to match.
  ProofDigest public_parts;
  if (public_digest != nullptr) {
    public_parts = *public_digest;
  } else {
    TANDEM_ASSIGN_OR_RETURN(public_parts, PublicPartsDigest(keys));
  }
  if (!s.sha.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(internal::Sha256 sha, internal::Sha256::Create());
    s.sha.emplace(std::move(sha));
  }
  internal::Sha256& sha = *s.sha;
  TANDEM_RETURN_IF_ERROR(sha.Reset());
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(kDigestDomain.size())));
  TANDEM_RETURN_IF_ERROR(sha.Update(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(kDigestDomain.data()), kDigestDomain.size())));
  TANDEM_RETURN_IF_ERROR(sha.Update(public_parts));
  for (int g = 0; g < num_groups_; ++g) {
    KeyFromProto(keys.keys(g), &s.key);
    TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(g)));
    TANDEM_RETURN_IF_ERROR(evaluate(g, &sha));
  }
  return sha.Finish();
}

}  // namespace tandem::crypto
