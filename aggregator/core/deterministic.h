// Deterministic protobuf serialization (map order fixed): what both servers
// store and hash, so that equal messages give equal bytes. Thread-safe.
#ifndef TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_
#define TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message_lite.h"

namespace tandem::aggregator {

inline std::string SerializeDeterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_
