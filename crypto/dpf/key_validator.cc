#include "crypto/dpf/key_validator.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/dpf/block_dpf.h"

namespace tandem::crypto {
namespace {

constexpr uint32_t kMaxGroups = 4096;

bool HasUnknownFields(const google::protobuf::Message& m) {
  return !m.GetReflection()->GetUnknownFields(m).empty();
}

absl::Status Invalid(absl::string_view what, size_t group) {
  return absl::InvalidArgumentError(absl::StrCat("key ", group, ": ", what));
}

}  // namespace

absl::Status ValidateShape(const ExpectedKeySetShape& shape) {
  if (shape.log_num_blocks > static_cast<uint32_t>(kMaxLogNumBlocks)) {
    return absl::InvalidArgumentError(absl::StrCat("log_num_blocks must be <= ", kMaxLogNumBlocks));
  }
  if (shape.block_size < 1 || shape.block_size > static_cast<uint32_t>(kMaxBlockSize)) {
    return absl::InvalidArgumentError(absl::StrCat("block_size must be in [1, ", kMaxBlockSize, "]"));
  }
  if (shape.value_bits != 32 && shape.value_bits != 64) {
    return absl::InvalidArgumentError("value_bits must be 32 or 64");
  }
  if (shape.num_groups < 1 || shape.num_groups > kMaxGroups) {
    return absl::InvalidArgumentError(absl::StrCat("num_groups must be in [1, ", kMaxGroups, "]"));
  }
  if (shape.party < -1 || shape.party > 1) {
    return absl::InvalidArgumentError("expected party must be -1, 0 or 1");
  }
  return absl::OkStatus();
}

uint64_t MaxSerializedKeySetSize(const ExpectedKeySetShape& shape) {
  // Generous per-field bounds: tag + length prefix <= 6 bytes per field.
  const uint64_t per_key = 8 + (6 + 16) + shape.log_num_blocks * (6 + 6 + 16) +
                           (6 + 8ull * shape.block_size) + (6 + 64) + 6;
  return 64 + shape.num_groups * per_key;
}

absl::Status ValidateSparseKeySet(const proto::SparseKeySet& keys,
                                  const ExpectedKeySetShape& shape) {
  TANDEM_RETURN_IF_ERROR(ValidateShape(shape));
  if (HasUnknownFields(keys)) return absl::InvalidArgumentError("key set has unknown fields");
  if (!keys.has_group_parameters()) {
    return absl::InvalidArgumentError("key set lacks group_parameters");
  }
  const proto::BlockDpfParameters& p = keys.group_parameters();
  if (HasUnknownFields(p)) return absl::InvalidArgumentError("group_parameters has unknown fields");
  if (p.log_num_blocks() != shape.log_num_blocks || p.block_size() != shape.block_size ||
      p.value_bits() != shape.value_bits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_parameters (d=", p.log_num_blocks(), ", B=", p.block_size(),
        ", bits=", p.value_bits(), ") differ from the expected (d=", shape.log_num_blocks,
        ", B=", shape.block_size, ", bits=", shape.value_bits, ")"));
  }
  if (keys.num_groups() != shape.num_groups) {
    return absl::InvalidArgumentError(absl::StrCat("num_groups is ", keys.num_groups(),
                                                   ", expected ", shape.num_groups));
  }
  if (keys.keys_size() != static_cast<int>(shape.num_groups)) {
    return absl::InvalidArgumentError(absl::StrCat("key set has ", keys.keys_size(),
                                                   " keys, expected ", shape.num_groups));
  }
  const uint32_t party = keys.keys(0).party();
  for (int g = 0; g < keys.keys_size(); ++g) {
    const proto::BlockDpfKey& key = keys.keys(g);
    if (HasUnknownFields(key)) return Invalid("unknown fields", g);
    if (key.party() > 1) return Invalid(absl::StrCat("party must be 0 or 1, got ", key.party()), g);
    if (key.party() != party) return Invalid("party differs from key 0", g);
    if (shape.party >= 0 && key.party() != static_cast<uint32_t>(shape.party)) {
      return Invalid(absl::StrCat("party ", key.party(), " but this server is party ",
                                  shape.party), g);
    }
    if (key.seed().size() != 16) {
      return Invalid(absl::StrCat("seed has ", key.seed().size(), " bytes, expected 16"), g);
    }
    if (key.correction_words_size() != static_cast<int>(shape.log_num_blocks)) {
      return Invalid(absl::StrCat(key.correction_words_size(), " correction words, expected ",
                                  shape.log_num_blocks), g);
    }
    for (const proto::CorrectionWord& cw : key.correction_words()) {
      if (HasUnknownFields(cw)) return Invalid("correction word has unknown fields", g);
      if (cw.seed().size() != 16) {
        return Invalid(absl::StrCat("correction word seed has ", cw.seed().size(),
                                    " bytes, expected 16"), g);
      }
    }
    if (shape.value_bits == 32) {
      // Packed 4-byte words (proto/dpf.proto): every value fits by form.
      if (key.value_correction_size() != 0 ||
          key.value_correction_packed().size() != 4 * uint64_t{shape.block_size}) {
        return Invalid(absl::StrCat("a 32-bit key carries its ", shape.block_size,
                                    " value corrections packed in ", 4 * uint64_t{shape.block_size},
                                    " bytes, got ", key.value_correction_packed().size(),
                                    " bytes and ", key.value_correction_size(), " fixed64"),
                       g);
      }
    } else if (!key.value_correction_packed().empty() ||
               key.value_correction_size() != static_cast<int>(shape.block_size)) {
      return Invalid(absl::StrCat(key.value_correction_size(), " value corrections, expected ",
                                  shape.block_size, " (unpacked at ", shape.value_bits, " bits)"),
                     g);
    }
    if (key.proof_correction().size() != 16 * kProofBlocks) {
      return Invalid(absl::StrCat("proof correction has ", key.proof_correction().size(),
                                  " bytes, expected ", 16 * kProofBlocks), g);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::SparseKeySet> ParseSparseKeySet(absl::string_view wire,
                                                      const ExpectedKeySetShape& shape) {
  TANDEM_RETURN_IF_ERROR(ValidateShape(shape));
  if (wire.size() > MaxSerializedKeySetSize(shape)) {
    return absl::InvalidArgumentError(absl::StrCat("key set of ", wire.size(),
                                                   " bytes exceeds the maximum ",
                                                   MaxSerializedKeySetSize(shape)));
  }
  proto::SparseKeySet keys;
  if (!keys.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::InvalidArgumentError("key set does not parse as tandem.proto.SparseKeySet");
  }
  TANDEM_RETURN_IF_ERROR(ValidateSparseKeySet(keys, shape));
  return keys;
}

}  // namespace tandem::crypto
