#include "crypto/dense/dense_sharing.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto {
namespace {

constexpr absl::string_view kPrgName = "tandem.dense.prg.v1";
constexpr absl::string_view kDigestDomain = "tandem.dense.round.v1";
// Blocks of the PRG expanded per step (8 KiB on the stack).
constexpr size_t kChunkBlocks = 512;

uint64_t Mask(int value_bits) {
  return value_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << value_bits) - 1;
}

}  // namespace

absl::StatusOr<DenseSharing> DenseSharing::Create(uint64_t dimension, int value_bits) {
  if (dimension < 1 || dimension > kMaxDenseDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense dimension ", dimension, " is outside [1, 2^28]"));
  }
  if (value_bits != 32 && value_bits != 64) {
    return absl::InvalidArgumentError("dense value_bits must be 32 or 64");
  }
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash prg, FixedKeyHash::FromName(kPrgName, BestAesPath()));
  TANDEM_ASSIGN_OR_RETURN(internal::Sha256 sha, internal::Sha256::Create());
  TANDEM_RETURN_IF_ERROR(sha.Update(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(kDigestDomain.data()), kDigestDomain.size())));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(dimension));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(value_bits)));
  TANDEM_ASSIGN_OR_RETURN(ProofDigest digest, sha.Finish());
  return DenseSharing(dimension, value_bits, prg, digest);
}

template <typename Fn>
void DenseSharing::ForEachPadChunk(Block seed, Fn fn) const {
  const uint64_t lanes = 128 / static_cast<uint64_t>(value_bits_);
  const uint64_t total_blocks = (dimension_ + lanes - 1) / lanes;
  std::array<Block, kChunkBlocks> chunk;
  for (uint64_t first = 0; first < total_blocks; first += kChunkBlocks) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBlocks, total_blocks - first));
    prg_.HashCounter(seed, first, absl::MakeSpan(chunk.data(), n));
    fn(first * lanes, std::min<uint64_t>(dimension_, (first + n) * lanes),
       reinterpret_cast<const uint8_t*>(chunk.data()));
  }
}

absl::StatusOr<std::pair<proto::DenseShare, proto::DenseShare>> DenseSharing::Share(
    absl::Span<const uint64_t> values, SecureRandom* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng is required");
  std::string seed(kDenseSeedBytes, '\0');
  TANDEM_RETURN_IF_ERROR(
      rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(seed.data()), seed.size())));
  return ShareWithSeed(values, seed);
}

absl::StatusOr<std::pair<proto::DenseShare, proto::DenseShare>> DenseSharing::ShareWithSeed(
    absl::Span<const uint64_t> values, absl::string_view helper_seed) const {
  if (values.size() != dimension_) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense sharing takes ", dimension_, " values, got ", values.size()));
  }
  if (helper_seed.size() != kDenseSeedBytes) {
    return absl::InvalidArgumentError("the helper seed must be 16 bytes");
  }
  const uint64_t mask = Mask(value_bits_);
  for (uint64_t v : values) {
    if ((v & ~mask) != 0) return absl::InvalidArgumentError("a value is >= 2^value_bits");
  }
  std::pair<proto::DenseShare, proto::DenseShare> out;
  proto::DenseShare& helper = out.second;
  helper.set_party(1);
  helper.set_seed(std::string(helper_seed));
  // Leader: x - G(s), written chunk by chunk into its packed buffer from
  // the AES output (no D-sized pad buffer).
  proto::DenseShare& leader = out.first;
  leader.set_party(0);
  std::string* bytes = leader.mutable_values();
  bytes->resize(leader_value_bytes());
  auto* dst = reinterpret_cast<uint8_t*>(bytes->data());
  ForEachPadChunk(BlockFromBytes(helper_seed.data()),
                  [&](uint64_t begin, uint64_t end, const uint8_t* pad) {
                    if (value_bits_ == 64) {
                      for (uint64_t j = begin; j < end; ++j) {
                        uint64_t r;
                        std::memcpy(&r, pad + (j - begin) * 8, 8);  // little-endian target
                        const uint64_t v = values[j] - r;
                        std::memcpy(dst + j * 8, &v, 8);
                      }
                    } else {
                      for (uint64_t j = begin; j < end; ++j) {
                        uint32_t r;
                        std::memcpy(&r, pad + (j - begin) * 4, 4);
                        const uint32_t v = static_cast<uint32_t>(values[j]) - r;
                        std::memcpy(dst + j * 4, &v, 4);
                      }
                    }
                  });
  return out;
}

absl::Status DenseSharing::Validate(const proto::DenseShare& share, int party) const {
  if (!share.GetReflection()->GetUnknownFields(share).empty()) {
    return absl::InvalidArgumentError("dense_share has unknown fields");
  }
  if (party != 0 && party != 1) return absl::InvalidArgumentError("party must be 0 or 1");
  if (share.party() != static_cast<uint32_t>(party)) {
    return absl::InvalidArgumentError(absl::StrCat("dense_share is party ", share.party(),
                                                   "'s share; this server is party ", party));
  }
  if (party == 1) {
    if (share.seed().size() != kDenseSeedBytes || !share.values().empty()) {
      return absl::InvalidArgumentError("the helper's dense_share carries exactly a 16-byte seed");
    }
    return absl::OkStatus();
  }
  if (!share.seed().empty() || share.values().size() != leader_value_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the leader's dense_share needs ", leader_value_bytes(), " bytes of values (D = ",
        dimension_, " at ", value_bits_, " bits) and no seed, got ", share.values().size()));
  }
  return absl::OkStatus();
}

absl::Status DenseSharing::CheckEither(const proto::DenseShare& share) const {
  return Validate(share, share.party() == 1 ? 1 : 0);
}

namespace {

enum class Mode { kAssign, kAdd, kSubtract };

// out[j] (op)= the j-th little-endian word of `width` bytes at src, mod
// 2^(8 width); count words. A template per mode and width so that each loop
// is a plain vectorizable pass.
template <Mode kMode, typename Word>
void ApplyWords(const uint8_t* src, uint64_t* out, uint64_t count) {
  for (uint64_t j = 0; j < count; ++j) {
    Word w;
    std::memcpy(&w, src + j * sizeof(Word), sizeof(Word));  // little-endian target
    const uint64_t v = w;
    if constexpr (kMode == Mode::kAssign) {
      out[j] = v;
    } else if constexpr (kMode == Mode::kAdd) {
      out[j] = static_cast<Word>(out[j] + v);
    } else {
      out[j] = static_cast<Word>(out[j] - v);
    }
  }
}

template <Mode kMode>
void ApplyWidth(int value_bits, const uint8_t* src, uint64_t* out, uint64_t count) {
  if (value_bits == 64) {
    ApplyWords<kMode, uint64_t>(src, out, count);
  } else {
    ApplyWords<kMode, uint32_t>(src, out, count);
  }
}

void ApplyMode(bool add, bool subtract, int value_bits, const uint8_t* src, uint64_t* out,
               uint64_t count) {
  if (!add) {
    ApplyWidth<Mode::kAssign>(value_bits, src, out, count);
  } else if (subtract) {
    ApplyWidth<Mode::kSubtract>(value_bits, src, out, count);
  } else {
    ApplyWidth<Mode::kAdd>(value_bits, src, out, count);
  }
}

}  // namespace

void DenseSharing::Apply(const proto::DenseShare& share, absl::Span<uint64_t> out, bool add,
                         bool subtract) const {
  if (share.party() == 0) {
    ApplyMode(add, subtract, value_bits_, reinterpret_cast<const uint8_t*>(share.values().data()),
              out.data(), dimension_);
    return;
  }
  // The pad's blocks are its values' bytes: each chunk of blocks is applied
  // as words straight from the AES output.
  ForEachPadChunk(BlockFromBytes(share.seed().data()),
                  [&](uint64_t begin, uint64_t end, const uint8_t* pad) {
                    ApplyMode(add, subtract, value_bits_, pad, out.data() + begin, end - begin);
                  });
}

absl::Status DenseSharing::Expand(const proto::DenseShare& share, absl::Span<uint64_t> out) const {
  TANDEM_RETURN_IF_ERROR(CheckEither(share));
  if (out.size() != dimension_) return absl::InvalidArgumentError("Expand: output size != D");
  Apply(share, out, /*add=*/false, /*subtract=*/false);
  return absl::OkStatus();
}

absl::Status DenseSharing::Accumulate(const proto::DenseShare& share,
                                      absl::Span<uint64_t> accumulator, bool subtract) const {
  TANDEM_RETURN_IF_ERROR(CheckEither(share));
  if (accumulator.size() != dimension_) {
    return absl::InvalidArgumentError("Accumulate: accumulator size != D");
  }
  Apply(share, accumulator, /*add=*/true, subtract);
  return absl::OkStatus();
}

absl::Status DenseSharing::AccumulateAndExpand(const proto::DenseShare& share,
                                               absl::Span<uint64_t> accumulator,
                                               absl::Span<uint64_t> values_out) const {
  TANDEM_RETURN_IF_ERROR(CheckEither(share));
  if (accumulator.size() != dimension_ || values_out.size() != dimension_) {
    return absl::InvalidArgumentError("AccumulateAndExpand: buffer size != D");
  }
  Apply(share, values_out, /*add=*/false, /*subtract=*/false);
  const uint64_t mask = Mask(value_bits_);
  for (uint64_t j = 0; j < dimension_; ++j)
    accumulator[j] = (accumulator[j] + values_out[j]) & mask;
  return absl::OkStatus();
}

}  // namespace tandem::crypto
