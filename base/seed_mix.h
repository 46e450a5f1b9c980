// Seed mixing for reproducible streams: SplitMix64's output function and
// the seed of one stream of a round. Pure; thread-safe; never for secrets.
#ifndef TANDEM_BASE_SEED_MIX_H_
#define TANDEM_BASE_SEED_MIX_H_

#include <cstdint>

namespace tandem {

// SplitMix64's output function (Steele, Lea & Flood, OOPSLA 2014): a
// bijective 64-bit mix, unrelated outputs for nearby inputs. For seeding
// reproducible streams, never for secrets. Pure; thread-safe.
inline constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The seed of stream `index` of `round` under `seed` (one simulated
// client's generator or report randomness): a function of the three alone,
// so work split over any number of threads draws the same numbers.
inline constexpr uint64_t StreamSeed(uint64_t seed, uint64_t round, uint64_t index) {
  return SplitMix64(SplitMix64(seed) ^ round) ^ SplitMix64(index);
}

}  // namespace tandem

#endif  // TANDEM_BASE_SEED_MIX_H_
