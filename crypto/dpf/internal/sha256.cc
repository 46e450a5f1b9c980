#include "crypto/dpf/internal/sha256.h"

#include <openssl/evp.h>

#include <cstring>

#include "absl/status/status.h"

namespace tandem::crypto::internal {

void Sha256::Deleter::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

absl::StatusOr<Sha256> Sha256::Create() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return absl::InternalError("EVP_MD_CTX_new failed");
  Sha256 out(ctx);
  absl::Status s = out.Reset();
  if (!s.ok()) return s;
  return out;
}

Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

absl::Status Sha256::Reset() {
  if (EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("EVP_DigestInit_ex(sha256) failed");
  }
  return absl::OkStatus();
}

absl::Status Sha256::Update(absl::Span<const uint8_t> data) {
  if (data.empty()) return absl::OkStatus();
  if (EVP_DigestUpdate(ctx_.get(), data.data(), data.size()) != 1) {
    return absl::InternalError("EVP_DigestUpdate failed");
  }
  return absl::OkStatus();
}

absl::Status Sha256::UpdateU64(uint64_t v) {
  uint8_t le[8];
  std::memcpy(le, &v, 8);  // little-endian target (crypto/aes/block.h)
  return Update(le);
}

absl::StatusOr<std::array<uint8_t, 32>> Sha256::Finish() {
  std::array<uint8_t, 32> out;
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_.get(), out.data(), &len) != 1 || len != out.size()) {
    return absl::InternalError("EVP_DigestFinal_ex failed");
  }
  return out;
}

}  // namespace tandem::crypto::internal
