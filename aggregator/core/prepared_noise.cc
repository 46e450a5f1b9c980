#include "aggregator/core/prepared_noise.h"

#include <openssl/crypto.h>

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/core/expansion.h"
#include "base/status_macros.h"

namespace tandem::aggregator {

absl::StatusOr<std::unique_ptr<PreparedNoise>> PreparedNoise::Start(int64_t round_id,
                                                                    const dp::Rational& sigma2,
                                                                    size_t dimension,
                                                                    SecureRandom* random) {
  if (dimension == 0) return absl::InvalidArgumentError("prepared noise: zero dimension");
  if (random == nullptr) return absl::InvalidArgumentError("prepared noise: null random");
  // The sampler's own check of the variance, before a thread starts.
  TANDEM_RETURN_IF_ERROR(dp::ValidateSigma2(sigma2));
  std::array<uint8_t, 32> seed;
  TANDEM_RETURN_IF_ERROR(random->Fill(absl::MakeSpan(seed)));
  absl::StatusOr<std::unique_ptr<DeterministicRandom>> stream =
      DeterministicRandom::FromKeyMaterial(seed);
  OPENSSL_cleanse(seed.data(), seed.size());
  TANDEM_RETURN_IF_ERROR(stream.status());
  std::unique_ptr<PreparedNoise> noise(new PreparedNoise(round_id, sigma2, dimension));
  PreparedNoise* self = noise.get();
  noise->thread_ = std::thread([self, stream = *std::move(stream)]() mutable {
    // The noise of zero: the draw alone, added to the share at release.
    self->drawn_ = dp::AddDiscreteGaussianNoise(self->sigma2_, absl::MakeSpan(self->noise_),
                                                stream.get(), RunOnEveryCore);
    self->drawn_flag_.store(true, std::memory_order_release);
  });
  return noise;
}

PreparedNoise::~PreparedNoise() {
  Join();
  Wipe();
}

void PreparedNoise::Join() {
  if (thread_.joinable()) thread_.join();
}

void PreparedNoise::Wipe() {
  if (!noise_.empty()) OPENSSL_cleanse(noise_.data(), noise_.size() * sizeof(uint64_t));
  noise_.clear();
  noise_.shrink_to_fit();
}

bool PreparedNoise::Matches(int64_t round_id, const dp::Rational& sigma2, size_t dimension) const {
  return !taken_ && round_id == round_id_ && sigma2.num == sigma2_.num &&
         sigma2.den == sigma2_.den && dimension == noise_.size();
}

absl::Status PreparedNoise::AddTo(absl::Span<uint64_t> share) {
  if (taken_) return absl::FailedPreconditionError("prepared noise: already taken");
  if (share.size() != noise_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "prepared noise: ", noise_.size(), " coordinates for a share of ", share.size()));
  }
  Join();
  taken_ = true;
  if (!drawn_.ok()) {
    Wipe();
    return drawn_;
  }
  for (size_t i = 0; i < share.size(); ++i) share[i] += noise_[i];  // wraps modulo 2^64
  Wipe();
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
