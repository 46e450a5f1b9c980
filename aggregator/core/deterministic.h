// Deterministic protobuf serialization (map order fixed): what both servers
// store and hash, so that equal messages give equal bytes. Thread-safe.
#ifndef TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_
#define TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message_lite.h"

namespace tandem::aggregator {

// Sized first and written in place (a key share is ~134 KB: growing a
// string through StringOutputStream copied it several times).
inline std::string SerializeDeterministic(const google::protobuf::MessageLite& m) {
  const size_t size = m.ByteSizeLong();  // caches the sizes used below
  std::string out(size, '\0');
  google::protobuf::io::ArrayOutputStream stream(out.data(), static_cast<int>(size));
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeWithCachedSizes(&coded);
  return out;
}

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_DETERMINISTIC_H_
