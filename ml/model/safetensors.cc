#include "ml/model/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::ml {
namespace {

constexpr char kMetadataKey[] = "__metadata__";

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", what));
}

// Printable ASCII: what this writer emits (JSON escaping never throws).
bool PrintableAscii(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void StoreLe64(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A JSON non-negative integer that fits in int64.
bool AsIndex(const nlohmann::json& v, int64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t u = v.get<uint64_t>();
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = static_cast<int64_t>(u);
  return true;
}

struct Extent {
  int64_t begin = 0;
  int64_t end = 0;
  size_t index = 0;  // into the tensors
};

// One header entry -> tensor (without data) and its extent.
absl::Status ParseEntry(const std::string& name, const nlohmann::json& entry, SafeTensor* t,
                        Extent* extent) {
  const std::string where = absl::StrCat("tensor '", name, "': ");
  if (!entry.is_object()) return Invalid(where + "entry is not an object");
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Invalid(absl::StrCat(where, "unknown field '", key, "'"));
    }
  }
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return Invalid(where + "dtype missing");
  t->name = name;
  t->dtype = dtype->get<std::string>();
  const int size = DtypeSize(t->dtype);
  if (size == 0) return Invalid(absl::StrCat(where, "unknown dtype '", t->dtype, "'"));
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return Invalid(where + "shape missing");
  for (const nlohmann::json& d : *shape) {
    int64_t dim;
    if (!AsIndex(d, &dim)) return Invalid(where + "shape must hold non-negative integers");
    t->shape.push_back(dim);
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !AsIndex((*offsets)[0], &extent->begin) || !AsIndex((*offsets)[1], &extent->end) ||
      extent->end < extent->begin) {
    return Invalid(where + "data_offsets must be [begin, end] with begin <= end");
  }
  const int64_t count = ElementCount(t->shape);
  if (count < 0 || count > std::numeric_limits<int64_t>::max() / size ||
      count * size != extent->end - extent->begin) {
    return Invalid(absl::StrCat(where, "shape holds ", count, " elements of ", size,
                                " bytes, data_offsets span ", extent->end - extent->begin));
  }
  return absl::OkStatus();
}

}  // namespace

int DtypeSize(absl::string_view dtype) {
  static const std::pair<const char*, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

int64_t ElementCount(absl::Span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return -1;
    count *= d;
  }
  return count;
}

absl::StatusOr<std::string> EncodeSafetensors(const SafetensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : file.metadata) {
      if (!PrintableAscii(k) || !PrintableAscii(v)) {
        return Invalid("metadata must be printable ASCII");
      }
      meta[k] = v;
    }
    header[kMetadataKey] = std::move(meta);
  }
  absl::flat_hash_set<std::string> names;
  int64_t offset = 0;
  for (const SafeTensor& t : file.tensors) {
    if (t.name.empty() || !PrintableAscii(t.name) || t.name == kMetadataKey) {
      return Invalid(absl::StrCat("tensor name '", t.name, "' must be printable ASCII, not empty"));
    }
    if (!names.insert(t.name).second)
      return Invalid(absl::StrCat("duplicate tensor '", t.name, "'"));
    const int size = DtypeSize(t.dtype);
    if (size == 0)
      return Invalid(absl::StrCat("tensor '", t.name, "': unknown dtype '", t.dtype, "'"));
    const int64_t count = ElementCount(t.shape);
    if (count < 0 || count > std::numeric_limits<int64_t>::max() / size ||
        static_cast<uint64_t>(count * size) != t.data.size()) {
      return Invalid(absl::StrCat("tensor '", t.name, "': ", t.data.size(),
                                  " bytes of data for its shape and dtype"));
    }
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + static_cast<int64_t>(t.data.size())}}};
    offset += static_cast<int64_t>(t.data.size());
  }
  std::string json = header.dump();
  json.append((8 - (json.size() % 8)) % 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  StoreLe64(json.size(), out.data());
  out.reserve(8 + json.size() + static_cast<size_t>(offset));
  out += json;
  for (const SafeTensor& t : file.tensors) out += t.data;
  return out;
}

absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes) {
  if (bytes.size() < 8) return Invalid("shorter than its 8-byte header length");
  const uint64_t n = LoadLe64(bytes.data());
  if (n > kMaxSafetensorsHeaderBytes || n > bytes.size() - 8) {
    return Invalid(absl::StrCat("header length ", n, " exceeds the file (", bytes.size(),
                                " bytes) or the limit"));
  }
  const absl::string_view text = bytes.substr(8, n);
  if (text.empty() || text[0] != '{') return Invalid("header is not a JSON object");
  const nlohmann::json header =
      nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Invalid("header is not valid JSON");
  const absl::string_view buffer = bytes.substr(8 + n);

  SafetensorsFile file;
  std::vector<Extent> extents;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return Invalid("__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) return Invalid(absl::StrCat("metadata '", k, "' is not a string"));
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    SafeTensor t;
    Extent e;
    TANDEM_RETURN_IF_ERROR(ParseEntry(key, value, &t, &e));
    e.index = file.tensors.size();
    file.tensors.push_back(std::move(t));
    extents.push_back(e);
  }
  // The tensors tile the buffer: no hole, no overlap, nothing after.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  int64_t at = 0;
  std::vector<SafeTensor> ordered;
  ordered.reserve(extents.size());
  for (const Extent& e : extents) {
    SafeTensor& t = file.tensors[e.index];
    if (e.begin != at) {
      return Invalid(
          absl::StrCat("tensor '", t.name, "' starts at ", e.begin,
                       e.begin < at ? ", overlapping the previous one" : ", leaving a hole",
                       " (expected ", at, ")"));
    }
    if (static_cast<uint64_t>(e.end) > buffer.size()) {
      return Invalid(absl::StrCat("tensor '", t.name, "' ends at ", e.end, ", past the data (",
                                  buffer.size(), " bytes)"));
    }
    t.data = std::string(buffer.substr(e.begin, e.end - e.begin));
    at = e.end;
    ordered.push_back(std::move(t));
  }
  if (static_cast<uint64_t>(at) != buffer.size()) {
    return Invalid(absl::StrCat(buffer.size() - at, " bytes of data belong to no tensor"));
  }
  file.tensors = std::move(ordered);
  return file;
}

absl::Status WriteSafetensorsFile(const std::string& path, const SafetensorsFile& file) {
  TANDEM_ASSIGN_OR_RETURN(const std::string bytes, EncodeSafetensors(file));
  return WriteFileAtomically(path, bytes, 0644);
}

absl::StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", ec.message()));
  if (size > max_bytes) {
    return Invalid(absl::StrCat(path, " has ", size, " bytes, above the limit ", max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(bytes);
  if (!file.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

absl::StatusOr<SafeTensor> Float32Tensor(std::string name, std::vector<int64_t> shape,
                                         absl::Span<const float> values) {
  const int64_t count = ElementCount(shape);
  if (count < 0 || static_cast<uint64_t>(count) != values.size()) {
    return Invalid(
        absl::StrCat("tensor '", name, "': shape holds ", count, " elements, got ", values.size()));
  }
  SafeTensor t;
  t.name = std::move(name);
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;  // x86-64 and aarch64 Linux: little endian, as the format
}

absl::StatusOr<std::vector<float>> AsFloat32(const SafeTensor& tensor) {
  if (tensor.dtype != "F32") {
    return Invalid(absl::StrCat("tensor '", tensor.name, "' is ", tensor.dtype, ", not F32"));
  }
  std::vector<float> values(tensor.data.size() / sizeof(float));
  std::memcpy(values.data(), tensor.data.data(), values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return Invalid(absl::StrCat("tensor '", tensor.name, "' holds a non-finite value at ", i));
    }
  }
  return values;
}

}  // namespace tandem::ml
