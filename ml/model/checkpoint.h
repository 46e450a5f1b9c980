// Binary model checkpoints.
//
// Layout (all integers little-endian):
//   "TNDMCKPT"                 8-byte magic
//   u32 version (= 1)
//   u32 fingerprint length, fingerprint bytes (Model::Fingerprint())
//   u64 parameter count, then that many IEEE-754 float32 values
//   u32 CRC-32 (zlib) of every preceding byte
// Loading checks magic, version, lengths, the checksum, that the fingerprint
// matches the target model and that every value is finite. Stateless
// functions; thread-compatible.
#ifndef TANDEM_ML_MODEL_CHECKPOINT_H_
#define TANDEM_ML_MODEL_CHECKPOINT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ml/model/model.h"

namespace tandem::ml {

// Serialises the model's parameters and fingerprint.
std::string SerializeCheckpoint(const Model& model);

// Restores parameters into `model`. Returns INVALID_ARGUMENT for a truncated
// or malformed buffer, a wrong magic/version, an architecture mismatch or
// non-finite values, and DATA_LOSS when the checksum does not match. `model`
// is unchanged on error.
absl::Status DeserializeCheckpoint(absl::string_view bytes, Model* model);

// File wrappers. Save returns INTERNAL when the file cannot be written; Load
// returns NOT_FOUND when it cannot be opened, then as DeserializeCheckpoint.
absl::Status SaveCheckpoint(const Model& model, const std::string& path);
absl::Status LoadCheckpoint(const std::string& path, Model* model);

}  // namespace tandem::ml

#endif  // TANDEM_ML_MODEL_CHECKPOINT_H_
