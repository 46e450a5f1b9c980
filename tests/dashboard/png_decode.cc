#include "tests/dashboard/png_decode.h"

#include <zlib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tandem::testing {
namespace {

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

}  // namespace

absl::StatusOr<Image> DecodePng(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || bytes.compare(0, 8, kSignature, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG file");
  }
  Image img;
  int depth = 0, colour = -1, interlace = 0;
  std::string idat;
  for (size_t pos = 8; pos + 12 <= bytes.size();) {
    const uint32_t len = BigEndian32(bytes, pos);
    const std::string type = bytes.substr(pos + 4, 4);
    if (pos + 12 + static_cast<size_t>(len) > bytes.size()) {
      return absl::InvalidArgumentError("truncated PNG chunk " + type);
    }
    const size_t data = pos + 8;
    if (type == "IHDR" && len >= 13) {
      img.width = static_cast<int>(BigEndian32(bytes, data));
      img.height = static_cast<int>(BigEndian32(bytes, data + 4));
      depth = static_cast<uint8_t>(bytes[data + 8]);
      colour = static_cast<uint8_t>(bytes[data + 9]);
      interlace = static_cast<uint8_t>(bytes[data + 12]);
    } else if (type == "IDAT") {
      idat.append(bytes, data, len);
    } else if (type == "IEND") {
      break;
    }
    pos += 12 + len;
  }
  if (img.width <= 0 || img.height <= 0 || img.width > 16384 || img.height > 16384) {
    return absl::InvalidArgumentError("PNG without a sane IHDR");
  }
  int channels = 0;
  switch (colour) {
    case 0:
      channels = 1;
      break;
    case 2:
      channels = 3;
      break;
    case 4:
      channels = 2;
      break;
    case 6:
      channels = 4;
      break;
    default:
      break;
  }
  if (depth != 8 || channels == 0 || interlace != 0) {
    return absl::UnimplementedError(
        absl::StrCat("PNG depth ", depth, " colour type ", colour, " interlace ", interlace));
  }
  const size_t stride = static_cast<size_t>(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size()) {
    return absl::InvalidArgumentError("PNG image data does not inflate to its size");
  }
  std::vector<uint8_t> prev(stride, 0), line(stride);
  img.pixels.resize(static_cast<size_t>(img.width) * img.height);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* in = &raw[y * (stride + 1)];
    const uint8_t filter = in[0];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? line[i - channels] : 0;
      const int b = prev[i];
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4:
          predicted = Paeth(a, b, c);
          break;
        default:
          return absl::InvalidArgumentError(absl::StrCat("PNG filter ", filter));
      }
      line[i] = static_cast<uint8_t>(in[1 + i] + predicted);
    }
    for (int x = 0; x < img.width; ++x) {
      const uint8_t* p = &line[static_cast<size_t>(x) * channels];
      Rgb& out = img.pixels[static_cast<size_t>(y) * img.width + x];
      if (channels <= 2) {
        out = Rgb{p[0], p[0], p[0]};
      } else {
        out = Rgb{p[0], p[1], p[2]};
      }
    }
    prev.swap(line);
  }
  return img;
}

}  // namespace tandem::testing
