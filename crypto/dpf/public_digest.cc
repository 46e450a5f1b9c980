#include "crypto/dpf/public_digest.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto {
namespace {

constexpr absl::string_view kPublicDomain = "tandem.vdpf.public.v1";

absl::Status UpdateBytes(internal::Sha256& sha, const void* data, size_t size) {
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(size)));
  return sha.Update(absl::MakeConstSpan(static_cast<const uint8_t*>(data), size));
}

}  // namespace

absl::StatusOr<ProofDigest> PublicPartsDigest(const proto::SparseKeySet& keys) {
  // One context per thread, reset per call: EVP context creation costs
  // more than hashing a small key set.
  thread_local absl::StatusOr<internal::Sha256> context = internal::Sha256::Create();
  if (!context.ok()) return context.status();
  internal::Sha256& sha = *context;
  TANDEM_RETURN_IF_ERROR(sha.Reset());
  TANDEM_RETURN_IF_ERROR(UpdateBytes(sha, kPublicDomain.data(), kPublicDomain.size()));
  const proto::BlockDpfParameters& p = keys.group_parameters();
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(p.log_num_blocks()));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(p.block_size()));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(p.value_bits()));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(keys.num_groups()));
  TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(keys.keys_size())));
  for (int g = 0; g < keys.keys_size(); ++g) {
    const proto::BlockDpfKey& key = keys.keys(g);
    TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(g)));
    TANDEM_RETURN_IF_ERROR(sha.UpdateU64(static_cast<uint64_t>(key.correction_words_size())));
    for (const proto::CorrectionWord& cw : key.correction_words()) {
      TANDEM_RETURN_IF_ERROR(UpdateBytes(sha, cw.seed().data(), cw.seed().size()));
    }
    // The repeated fixed64 field's array is its wire bytes on a
    // little-endian machine (the only kind tandem builds for).
    static_assert(std::endian::native == std::endian::little);
    TANDEM_RETURN_IF_ERROR(UpdateBytes(sha, key.value_correction().data(),
                                       8 * static_cast<size_t>(key.value_correction_size())));
    TANDEM_RETURN_IF_ERROR(UpdateBytes(sha, key.value_correction_packed().data(),
                                       key.value_correction_packed().size()));
    TANDEM_RETURN_IF_ERROR(
        UpdateBytes(sha, key.proof_correction().data(), key.proof_correction().size()));
  }
  return sha.Finish();
}

bool SamePublicParts(const proto::SparseKeySet& a, const proto::SparseKeySet& b) {
  if (a.group_parameters().SerializeAsString() != b.group_parameters().SerializeAsString() ||
      a.num_groups() != b.num_groups() || a.keys_size() != b.keys_size()) {
    return false;
  }
  for (int g = 0; g < a.keys_size(); ++g) {
    const proto::BlockDpfKey& x = a.keys(g);
    const proto::BlockDpfKey& y = b.keys(g);
    if (x.correction_words_size() != y.correction_words_size() ||
        x.value_correction_size() != y.value_correction_size() ||
        x.value_correction_packed() != y.value_correction_packed() ||
        x.proof_correction() != y.proof_correction() ||
        !std::equal(x.value_correction().begin(), x.value_correction().end(),
                    y.value_correction().begin())) {
      return false;
    }
    for (int i = 0; i < x.correction_words_size(); ++i) {
      if (x.correction_words(i).seed() != y.correction_words(i).seed()) return false;
    }
  }
  return true;
}

}  // namespace tandem::crypto
