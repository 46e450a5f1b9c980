// Internal: incremental SHA-256 over OpenSSL's EVP interface, used for the
// VDPF transcript digest. Move-only; not thread-safe.
#ifndef TANDEM_CRYPTO_DPF_INTERNAL_SHA256_H_
#define TANDEM_CRYPTO_DPF_INTERNAL_SHA256_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

struct evp_md_ctx_st;

namespace tandem::crypto::internal {

class Sha256 {
 public:
  // Returns INTERNAL when OpenSSL cannot allocate or initialise the context.
  static absl::StatusOr<Sha256> Create();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();

  // Restarts the hash. Returns INTERNAL on OpenSSL failure.
  absl::Status Reset();
  // Returns INTERNAL on OpenSSL failure.
  absl::Status Update(absl::Span<const uint8_t> data);
  absl::Status UpdateU64(uint64_t v);
  // Writes the digest; the object must be Reset() before reuse.
  absl::StatusOr<std::array<uint8_t, 32>> Finish();

 private:
  struct Deleter {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  explicit Sha256(evp_md_ctx_st* ctx) : ctx_(ctx) {}
  std::unique_ptr<evp_md_ctx_st, Deleter> ctx_;
};

}  // namespace tandem::crypto::internal

#endif  // TANDEM_CRYPTO_DPF_INTERNAL_SHA256_H_
