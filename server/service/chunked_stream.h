// Streams a blob (a serialized model, a safetensors file) as chunks of at
// most `chunk_bytes`, in order, the last one carrying the SHA-256 of the
// whole blob, so that no message nears gRPC's 4 MB default limit whatever
// the size. Shared by Coordinator.DownloadModel and TaskAdmin.ExportModel,
// whose chunk messages have the same offset/total_bytes/data/sha256 fields.
// Thread safety: a function; `writer` is the RPC's own.
#ifndef TANDEM_SERVER_SERVICE_CHUNKED_STREAM_H_
#define TANDEM_SERVER_SERVICE_CHUNKED_STREAM_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"

namespace tandem::server {

// Writes `data` through `writer`; `stamp` sets each chunk's version field,
// `sent` is told each chunk's payload size once written. CANCELLED when the
// caller goes away, INTERNAL when SHA-256 fails.
template <typename Chunk>
grpc::Status StreamChunks(const std::string& data, size_t chunk_bytes, grpc::ServerContext* context,
                          grpc::ServerWriter<Chunk>* writer, absl::FunctionRef<void(Chunk*)> stamp,
                          absl::FunctionRef<void(size_t)> sent) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &digest_len, EVP_sha256(), nullptr) != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "SHA-256 failed");
  }
  size_t offset = 0;
  do {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    const size_t n = std::min(chunk_bytes, data.size() - offset);
    Chunk chunk;
    stamp(&chunk);
    chunk.set_offset(offset);
    chunk.set_total_bytes(data.size());
    chunk.set_data(data.substr(offset, n));
    offset += n;
    if (offset == data.size()) chunk.set_sha256(digest, digest_len);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    sent(n);
  } while (offset < data.size());
  return grpc::Status::OK;
}

}  // namespace tandem::server

#endif  // TANDEM_SERVER_SERVICE_CHUNKED_STREAM_H_
