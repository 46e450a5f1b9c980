#include "ml/model/checkpoint.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

template <typename T>
void Put(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));  // x86-64 / aarch64: little-endian
  out->append(buf, sizeof(T));
}

template <typename T>
bool Get(absl::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

uint32_t Crc32(absl::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths; feed in chunks.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::string SerializeCheckpoint(const Model& model) {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kVersion);
  const std::string fp = model.Fingerprint();
  Put<uint32_t>(&out, static_cast<uint32_t>(fp.size()));
  out += fp;
  Put<uint64_t>(&out, static_cast<uint64_t>(model.num_params()));
  out.append(reinterpret_cast<const char*>(model.params().data()),
             model.params().size() * sizeof(float));
  Put<uint32_t>(&out, Crc32(out));
  return out;
}

absl::Status DeserializeCheckpoint(absl::string_view bytes, Model* model) {
  constexpr size_t kMinSize = sizeof(kMagic) + 4 + 4 + 8 + 4;
  if (bytes.size() < kMinSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: truncated (", bytes.size(), " bytes)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("checkpoint: bad magic (not a tandem checkpoint)");
  }
  absl::string_view body = bytes.substr(0, bytes.size() - 4);
  absl::string_view tail = bytes.substr(bytes.size() - 4);
  uint32_t stored_crc = 0;
  Get(&tail, &stored_crc);
  absl::string_view in = body.substr(sizeof(kMagic));
  uint32_t version = 0, fp_len = 0;
  Get(&in, &version);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: unsupported version ", version, " (expected ", kVersion, ")"));
  }
  Get(&in, &fp_len);
  if (fp_len > in.size()) {
    return absl::InvalidArgumentError("checkpoint: fingerprint length exceeds the file");
  }
  const absl::string_view fp = in.substr(0, fp_len);
  in.remove_prefix(fp_len);
  uint64_t count = 0;
  if (!Get(&in, &count)) return absl::InvalidArgumentError("checkpoint: truncated header");
  if (count > in.size() / sizeof(float) || in.size() != count * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: header says ", count,
                                                   " parameters but the payload holds ",
                                                   in.size(), " bytes"));
  }
  if (Crc32(body) != stored_crc) {
    return absl::DataLossError("checkpoint: CRC-32 mismatch (file corrupted)");
  }
  if (fp != model->Fingerprint()) {
    return absl::InvalidArgumentError(
        "checkpoint: architecture fingerprint does not match the model");
  }
  std::vector<float> values(count);
  std::memcpy(values.data(), in.data(), count * sizeof(float));
  return model->SetParams(values);
}

absl::Status SaveCheckpoint(const Model& model, const std::string& path) {
  const std::string bytes = SerializeCheckpoint(model);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InternalError(absl::StrCat("checkpoint: cannot open ", path));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("checkpoint: write to ", path, " failed"));
  return absl::OkStatus();
}

absl::Status LoadCheckpoint(const std::string& path, Model* model) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("checkpoint: cannot open ", path));
  std::stringstream buf;
  buf << f.rdbuf();
  return DeserializeCheckpoint(buf.str(), model);
}

}  // namespace tandem::ml
