#include "crypto/proof/field_vector.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/aes/block.h"
#include "crypto/aes/fixed_key_hash.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto::proof {

void BatchInverse(absl::Span<const uint64_t> in, absl::Span<uint64_t> out) {
  if (in.empty()) return;
  // out[i] = in[0] * ... * in[i] first, then unwound from the back.
  uint64_t running = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    running = gl::Mul(running, in[i]);
    out[i] = running;
  }
  uint64_t inv = gl::Inverse(running);
  for (size_t i = in.size(); i-- > 1;) {
    const uint64_t prefix = out[i - 1];
    out[i] = gl::Mul(inv, prefix);
    inv = gl::Mul(inv, in[i]);
  }
  out[0] = inv;
}

size_t TakeFieldWords(absl::Span<const uint64_t> words, absl::Span<uint64_t> out, bool nonzero) {
  const uint64_t low = nonzero ? 1 : 0;
  size_t filled = 0;
  for (const uint64_t w : words) {
    if (filled == out.size()) break;  // public: the count of accepted words
    out[filled] = w;
    filled += static_cast<size_t>(w < gl::kP) & static_cast<size_t>(w >= low);
  }
  return filled;
}

absl::Status ExpandField(absl::Span<const uint8_t> seed, absl::string_view label,
                         absl::Span<uint64_t> out, bool nonzero) {
  static const absl::StatusOr<FixedKeyHash>* const kHash = new absl::StatusOr<FixedKeyHash>(
      FixedKeyHash::FromName("tandem.proof.xof.v4", BestAesPath()));
  if (!kHash->ok()) return kHash->status();
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<uint8_t> digest,
      HashParts({label, absl::string_view(reinterpret_cast<const char*>(seed.data()),
                                          seed.size())}));
  const Block s = BlockFromBytes(digest.data());
  constexpr size_t kBatch = 256;
  Block blocks[kBatch];
  uint64_t words[2 * kBatch];
  size_t filled = 0;
  for (uint64_t counter = 0; filled < out.size();) {
    // Two words per block; more blocks follow only after a rejection.
    const size_t n = std::min(kBatch, (out.size() - filled + 1) / 2);
    (*kHash)->HashCounter(s, counter, absl::MakeSpan(blocks, n));
    counter += n;
    for (size_t i = 0; i < n; ++i) {
      words[2 * i] = blocks[i].lo;
      words[2 * i + 1] = blocks[i].hi;
    }
    filled += TakeFieldWords(absl::MakeConstSpan(words, 2 * n), out.subspan(filled), nonzero);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> HashParts(std::initializer_list<absl::string_view> parts) {
  TANDEM_ASSIGN_OR_RETURN(internal::Sha256 sha, internal::Sha256::Create());
  for (absl::string_view part : parts) {
    TANDEM_RETURN_IF_ERROR(sha.UpdateU64(part.size()));
    TANDEM_RETURN_IF_ERROR(
        sha.Update(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(part.data()), part.size())));
  }
  TANDEM_ASSIGN_OR_RETURN(auto d, sha.Finish());
  return std::vector<uint8_t>(d.begin(), d.end());
}

}  // namespace tandem::crypto::proof
