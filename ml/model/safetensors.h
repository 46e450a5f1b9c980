// safetensors: the tensor file format PyTorch and Hugging Face users exchange
// (format facts from its public specification; tandem's own reader and
// writer, Debian 12 packages no implementation):
//
//   8 bytes   N, unsigned little-endian: the header's length
//   N bytes   UTF-8 JSON object: for each tensor name
//               {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//             and optionally "__metadata__": {string: string}; may end in
//             spaces (0x20), which pad the data to an 8-byte boundary
//   the rest  the byte buffer: every tensor's data, row-major little-endian,
//             at [begin, end) relative to the buffer's start
//
// Reading checks everything before a byte is used: header length within the
// file and at most kMaxHeaderBytes, a JSON object, known dtypes, shapes
// whose element count times the dtype's size is the extent of its offsets,
// offsets within the buffer, the tensors covering the buffer exactly without
// overlap (no holes, as the specification requires), unique names. Values
// are not checked (NaN is a valid F32): AsFloat32 refuses non-finite ones.
//
// Thread safety: pure functions over values. Errors: INVALID_ARGUMENT for a
// malformed file or tensor (the message names the tensor and the rule),
// NOT_FOUND / INTERNAL for files that cannot be read or written.
#ifndef TANDEM_ML_MODEL_SAFETENSORS_H_
#define TANDEM_ML_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem::ml {

// Largest header accepted (the format's reference reader uses 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

struct SafeTensor {
  std::string name;
  std::string dtype;  // "F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::vector<int64_t> shape;  // row-major; {} = a scalar
  std::string data;            // raw little-endian bytes, elements x DtypeSize(dtype)
};

struct SafetensorsFile {
  std::vector<SafeTensor> tensors;              // in buffer order
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Bytes per element of a dtype name, or 0 for an unknown one.
int DtypeSize(absl::string_view dtype);

// The file's bytes. Tensors are laid out in the given order, the header
// padded with spaces to a multiple of 8 bytes. INVALID_ARGUMENT for an
// empty or duplicate name, "__metadata__" as a name, an unknown dtype, a
// negative dimension, or data of the wrong size.
absl::StatusOr<std::string> EncodeSafetensors(const SafetensorsFile& file);
// Parses and validates `bytes` (see the file comment).
absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes);

// Whole files: written to a temporary file in the same directory, fsynced
// and renamed, so a reader sees the old file or the new one, never a part.
absl::Status WriteSafetensorsFile(const std::string& path, const SafetensorsFile& file);
// INVALID_ARGUMENT for a file larger than max_bytes.
absl::StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path,
                                                    uint64_t max_bytes = uint64_t{4} << 30);

// An F32 tensor of `values` (shape's element count must match).
absl::StatusOr<SafeTensor> Float32Tensor(std::string name, std::vector<int64_t> shape,
                                         absl::Span<const float> values);
// The values of an F32 tensor; INVALID_ARGUMENT for another dtype or a
// NaN/infinite value (a model never carries one).
absl::StatusOr<std::vector<float>> AsFloat32(const SafeTensor& tensor);
// Elements of `shape` (1 for a scalar); -1 for a negative dimension or an
// overflow.
int64_t ElementCount(absl::Span<const int64_t> shape);

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_SAFETENSORS_H_
