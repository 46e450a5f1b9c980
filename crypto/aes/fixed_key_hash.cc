#include "crypto/aes/fixed_key_hash.h"

#include <openssl/sha.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"

namespace tandem::crypto {

absl::string_view AesPathName(AesPath path) {
  switch (path) {
    case AesPath::kPortable:
      return "portable";
    case AesPath::kAesNi:
      return "aesni";
    case AesPath::kVaes:
      return "vaes";
    case AesPath::kVaes256:
      return "vaes256";
  }
  return "unknown";
}

bool AesPathSupported(AesPath path) {
  switch (path) {
    case AesPath::kPortable:
      return true;
    case AesPath::kAesNi:
      return __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
    case AesPath::kVaes:
      return __builtin_cpu_supports("aes") && __builtin_cpu_supports("vaes") &&
             __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    case AesPath::kVaes256:
      // __builtin_cpu_supports("avx2") already requires the OS to save ymm
      // state (XGETBV), so no separate OS check is needed.
      return __builtin_cpu_supports("aes") && __builtin_cpu_supports("vaes") &&
             __builtin_cpu_supports("avx2");
  }
  return false;
}

absl::StatusOr<AesPath> AesPathFromName(absl::string_view name) {
  for (AesPath p : {AesPath::kPortable, AesPath::kAesNi, AesPath::kVaes, AesPath::kVaes256}) {
    if (name == AesPathName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown AES path '", name, "' (portable, aesni, vaes256 or vaes)"));
}

AesPath BestAesPath() {
  static const AesPath best = [] {
    if (const char* forced = std::getenv("TANDEM_AES_PATH"); forced != nullptr && *forced) {
      absl::StatusOr<AesPath> p = AesPathFromName(forced);
      if (p.ok() && AesPathSupported(*p)) return *p;
      TANDEM_LOG(WARNING) << "TANDEM_AES_PATH=" << forced << " ignored: "
                          << (p.ok() ? "not supported by this CPU" : p.status().ToString());
    }
    if (AesPathSupported(AesPath::kVaes)) return AesPath::kVaes;
    if (AesPathSupported(AesPath::kVaes256)) return AesPath::kVaes256;
    if (AesPathSupported(AesPath::kAesNi)) return AesPath::kAesNi;
    return AesPath::kPortable;
  }();
  return best;
}

std::vector<AesPath> SupportedAesPaths() {
  std::vector<AesPath> out;
  for (AesPath p : {AesPath::kPortable, AesPath::kAesNi, AesPath::kVaes256, AesPath::kVaes}) {
    if (AesPathSupported(p)) out.push_back(p);
  }
  return out;
}

absl::StatusOr<FixedKeyHash> FixedKeyHash::Create(absl::Span<const uint8_t> key, AesPath path) {
  if (key.size() != 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("AES-128 key must be 16 bytes, got ", key.size()));
  }
  if (!AesPathSupported(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("AES path ", AesPathName(path), " is not supported by this CPU"));
  }
  const internal::AesKernels* kernels = &internal::PortableAesKernels();
  if (path == AesPath::kAesNi) kernels = &internal::AesNiKernels();
  if (path == AesPath::kVaes256) kernels = &internal::Vaes256Kernels();
  if (path == AesPath::kVaes) kernels = &internal::VaesKernels();
  return FixedKeyHash(internal::ExpandAes128Key(key.data()), kernels, path);
}

absl::StatusOr<FixedKeyHash> FixedKeyHash::FromName(absl::string_view name, AesPath path) {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  if (SHA256(reinterpret_cast<const uint8_t*>(name.data()), name.size(), digest) == nullptr) {
    return absl::InternalError("SHA256 failed");
  }
  return Create(absl::MakeConstSpan(digest, 16), path);
}

void FixedKeyHash::Encrypt(absl::Span<const Block> in, absl::Span<Block> out) const {
  TANDEM_CHECK(in.size() == out.size());
  kernels_->encrypt(keys_, in.data(), out.data(), in.size());
}

void FixedKeyHash::Hash(absl::Span<const Block> in, absl::Span<Block> out) const {
  TANDEM_CHECK(in.size() == out.size());
  kernels_->mmo(keys_, in.data(), out.data(), in.size());
}

void FixedKeyHash::HashCounter(Block seed, uint64_t first, absl::Span<Block> out) const {
  kernels_->mmo_counter(keys_, seed, first, out.data(), out.size());
}

void FixedKeyHash::ExpandLevel(absl::Span<const Block> parents, Block cw,
                               absl::Span<Block> children) const {
  TANDEM_CHECK(children.size() == 2 * parents.size());
  kernels_->expand_level(keys_, parents.data(), parents.size(), cw, children.data());
}

void FixedKeyHash::LeafConvert(absl::Span<const Block> seeds, Block vc, bool negate,
                               int lane_bits, bool add, absl::Span<Block> out) const {
  TANDEM_CHECK(out.size() == seeds.size());
  TANDEM_CHECK(lane_bits == 32 || lane_bits == 64);
  kernels_->leaf_convert(keys_, seeds.data(), seeds.size(), vc, negate, lane_bits, add,
                         out.data());
}

void FixedKeyHash::LeafConvertCounter(Block seed, uint64_t first, absl::Span<const Block> vc,
                                      bool negate, int lane_bits, bool add,
                                      absl::Span<Block> out) const {
  TANDEM_CHECK(out.size() == vc.size());
  TANDEM_CHECK(lane_bits == 32 || lane_bits == 64);
  kernels_->leaf_convert_counter(keys_, seed, first, out.size(), vc.data(), negate, lane_bits,
                                 add, out.data());
}

}  // namespace tandem::crypto
