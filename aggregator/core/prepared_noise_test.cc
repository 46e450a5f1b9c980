#include "aggregator/core/prepared_noise.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

using ::tandem::testing::StatusIs;

constexpr dp::Rational kSigma2{uint64_t{1} << 20, 1};  // sigma = 1024

// The noise drawn ahead is the noise a release draws from the same
// randomness: the stream keyed from `random` noises a share of zeros as
// dp::AddDiscreteGaussianNoise does, and it lands on the share modulo 2^64.
TEST(PreparedNoiseTest, AddsTheDrawOfItsStreamModulo2To64) {
  constexpr size_t kDimension = 20000;  // three chunks of the sampler
  auto random = DeterministicRandom::FromSeed(5);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto noise,
                              PreparedNoise::Start(3, kSigma2, kDimension, random.get()));
  // The same stream by hand: key and counter are the first 32 bytes drawn.
  auto again = DeterministicRandom::FromSeed(5);
  std::array<uint8_t, 32> seed;
  TANDEM_ASSERT_OK(again->Fill(absl::MakeSpan(seed)));
  std::array<uint8_t, 16> key, counter;
  std::copy(seed.begin(), seed.begin() + 16, key.begin());
  std::copy(seed.begin() + 16, seed.end(), counter.begin());
  TANDEM_ASSERT_OK_AND_ASSIGN(auto stream, DeterministicRandom::FromKeyAndCounter(key, counter));
  std::vector<uint64_t> expected(kDimension, uint64_t{0} - 5);  // wraps past zero
  TANDEM_ASSERT_OK(dp::AddDiscreteGaussianNoise(kSigma2, absl::MakeSpan(expected), stream.get()));

  std::vector<uint64_t> share(kDimension, uint64_t{0} - 5);
  EXPECT_TRUE(noise->Matches(3, kSigma2, kDimension));
  TANDEM_ASSERT_OK(noise->AddTo(absl::MakeSpan(share)));
  EXPECT_EQ(share, expected);
  // Noise, not zeros: a discrete Gaussian of sigma 1024.
  double sum2 = 0;
  for (uint64_t v : share) {
    const double x = static_cast<double>(static_cast<int64_t>(v + 5));
    sum2 += x * x;
  }
  EXPECT_NEAR(std::sqrt(sum2 / kDimension), 1024.0, 40.0);
}

// One release at most: taken once, then refused; a share of another size,
// another round or another variance is refused and left as it was.
TEST(PreparedNoiseTest, IsTakenOnceAndOnlyByItsRound) {
  auto random = DeterministicRandom::FromSeed(6);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto noise, PreparedNoise::Start(7, kSigma2, 100, random.get()));
  EXPECT_FALSE(noise->Matches(8, kSigma2, 100));
  EXPECT_FALSE(noise->Matches(7, {uint64_t{1} << 21, 1}, 100));
  EXPECT_FALSE(noise->Matches(7, kSigma2, 101));
  std::vector<uint64_t> wrong(101, 9);
  EXPECT_THAT(noise->AddTo(absl::MakeSpan(wrong)), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(wrong, std::vector<uint64_t>(101, 9));
  std::vector<uint64_t> share(100, 0);
  TANDEM_ASSERT_OK(noise->AddTo(absl::MakeSpan(share)));
  EXPECT_NE(share, std::vector<uint64_t>(100, 0));
  EXPECT_FALSE(noise->Matches(7, kSigma2, 100));
  std::vector<uint64_t> second(100, 0);
  EXPECT_THAT(noise->AddTo(absl::MakeSpan(second)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(second, std::vector<uint64_t>(100, 0));
}

TEST(PreparedNoiseTest, InvalidArgumentsAreRefusedBeforeAnyDraw) {
  auto random = DeterministicRandom::FromSeed(1);
  EXPECT_THAT(PreparedNoise::Start(1, kSigma2, 0, random.get()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PreparedNoise::Start(1, {0, 1}, 10, random.get()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PreparedNoise::Start(1, {1, 0}, 10, random.get()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PreparedNoise::Start(1, kSigma2, 10, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing was drawn from `random` by the refusals.
  auto fresh = DeterministicRandom::FromSeed(1);
  uint64_t a, b;
  TANDEM_ASSERT_OK(random->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(&a), 8)));
  TANDEM_ASSERT_OK(fresh->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(&b), 8)));
  EXPECT_EQ(a, b);
}

// Dropped before it is taken (an abandoned round, a daemon stopping): the
// destructor waits for the draw rather than leave a thread writing freed
// memory (ASan and TSan would report it).
TEST(PreparedNoiseTest, DroppedWhileDrawing) {
  auto random = DeterministicRandom::FromSeed(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto noise, PreparedNoise::Start(1, kSigma2, 1 << 16, random.get()));
  noise.reset();
}

}  // namespace
}  // namespace tandem::aggregator
