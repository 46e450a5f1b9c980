// A minimal PNG decoder for tests that look at screenshots: 8-bit
// non-interlaced grey, grey+alpha, RGB or RGBA images (what Chromium's
// --screenshot writes), inflated with zlib and unfiltered as the PNG
// specification says. Test-only; not hardened against hostile files beyond
// bounds checks. Thread-safe (no state).
#ifndef TANDEM_TESTS_DASHBOARD_PNG_DECODE_H_
#define TANDEM_TESTS_DASHBOARD_PNG_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::testing {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

struct Image {
  int width = 0;
  int height = 0;
  std::vector<Rgb> pixels;  // row-major, alpha dropped
  const Rgb& at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

// INVALID_ARGUMENT for a file that is not a well-formed PNG, UNIMPLEMENTED
// for bit depths, colour types or interlacing outside the above.
absl::StatusOr<Image> DecodePng(const std::string& bytes);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_DASHBOARD_PNG_DECODE_H_
