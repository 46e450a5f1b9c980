// Protocol-buffer messages written as YAML documents (issue 33 item 1: task
// documents as a textproto or a YAML file). The YAML is parsed by libyaml
// (Debian libyaml-0-2; YAML 1.1, the C library: no exceptions) into a
// document, then mapped onto the message by reflection: a mapping is a
// message (keys are field names, as in textproto), a sequence a repeated
// field, a scalar an int, float, bool, string, bytes or enum value of the
// field's type. Anything else is INVALID_ARGUMENT naming the field's path
// and the line, e.g. "model.layers[2].kernel (line 14): expected an
// integer, got 'three'"; unknown keys, a second value for one field, two
// members of one oneof and documents over the size bounds are refused.
//
// Thread safety: a pure function.
#ifndef TANDEM_SERVER_CORE_YAML_MESSAGE_H_
#define TANDEM_SERVER_CORE_YAML_MESSAGE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace tandem::server {

// Bounds: at most 4 MiB of YAML and 2^16 nodes visited (aliases count each
// time they are used, so an alias "billion laughs" stops here).
inline constexpr size_t kMaxYamlBytes = size_t{4} << 20;
inline constexpr size_t kMaxYamlNodes = size_t{1} << 16;

// Clears `out`, then fills it from the single YAML document in `yaml`.
absl::Status ParseYamlMessage(absl::string_view yaml, google::protobuf::Message* out);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_YAML_MESSAGE_H_
