// Chunking of kernel requests and responses for Worker.RunStream, and of
// models for LoadModel / ReadModel, so that tensors larger than one gRPC
// message (WorkerOptions::max_message_bytes) can be sent, at memory speed.
//
// The chunk sequence (proto/worker.proto): the first chunk carries the
// header message, whose tensors give names, shapes and dtypes and possibly
// a prefix of their data; every later chunk appends raw little-endian bytes
// to one tensor (index, data). The header declares each tensor's byte size
// (product(shape) * sizeof(dtype)), so the receiver checks the total
// against its limit and allocates each tensor once, at its declared size,
// before any data arrives, and appends every chunk in place. Malformed
// sequences are refused with INVALID_ARGUMENT as they arrive: no header
// first, a second header, an unsupported dtype or bad shape, a declared
// total over the limit, an index naming no tensor, data past a tensor's
// declared size; and at Finish, a tensor shorter than declared.
//
// Thread safety: the functions are pure (thread-safe); an assembler has one
// owner (not thread-safe).
#ifndef TANDEM_ML_WORKER_TENSOR_STREAM_H_
#define TANDEM_ML_WORKER_TENSOR_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ml/worker/tensor_codec.h"
#include "proto/worker.pb.h"

namespace tandem::ml::worker {

// Tensor bytes per chunk the worker sends (capped at half its message
// limit) and clients should send: large enough that per-message costs
// vanish, small enough that no protobuf parse or copy handles more at once
// than stays in cache.
inline constexpr size_t kStreamChunkBytes = size_t{1} << 20;

// The message without its tensors' data (names, shapes, dtypes and every
// other field kept).
proto::KernelRequest WithoutData(const proto::KernelRequest& request);
proto::KernelResponse WithoutData(const proto::KernelResponse& response);
proto::ModelHeader WithoutData(const proto::ModelHeader& model);
proto::KvCacheAppend WithoutData(const proto::KvCacheAppend& append);

// Streaming split: calls write() with the header chunk (no data), then with
// chunks of at most chunk_bytes (>= 1) of each tensor's data in order,
// reusing one message. Stops at the first write() that returns false and
// returns false then; true when every chunk was written.
bool WriteRequestChunks(const proto::KernelRequest& request, size_t chunk_bytes,
                        absl::FunctionRef<bool(const proto::KernelRequestChunk&)> write);
bool WriteResponseChunks(const proto::KernelResponse& response, size_t chunk_bytes,
                         absl::FunctionRef<bool(const proto::KernelResponseChunk&)> write);
bool WriteModelChunks(const proto::ModelHeader& model, size_t chunk_bytes,
                      absl::FunctionRef<bool(const proto::WorkerModelChunk&)> write);
// The same with the header's data held elsewhere: `header` (its tensors'
// data ignored) first, then data[i] as the data of header.tensors(i).
// REQUIRES data.size() == header.tensors_size(); the views are not owned.
bool WriteModelChunks(const proto::ModelHeader& header, absl::Span<const absl::string_view> data,
                      size_t chunk_bytes,
                      absl::FunctionRef<bool(const proto::WorkerModelChunk&)> write);

// AppendKvCache: `header` (its tensors' data ignored), then data[i] as the
// data of header.tensors(i). REQUIRES data.size() == header.tensors_size().
bool WriteKvAppendChunks(const proto::KvCacheAppend& header,
                         absl::Span<const absl::string_view> data, size_t chunk_bytes,
                         absl::FunctionRef<bool(const proto::KvCacheAppendChunk&)> write);

// The chunks as a vector (tests and small messages; copies every byte).
std::vector<proto::KernelRequestChunk> SplitRequest(const proto::KernelRequest& request,
                                                    size_t chunk_bytes);
std::vector<proto::KernelResponseChunk> SplitResponse(const proto::KernelResponse& response,
                                                      size_t chunk_bytes);
std::vector<proto::WorkerModelChunk> SplitModel(const proto::ModelHeader& model,
                                                size_t chunk_bytes);
std::vector<proto::KvCacheAppendChunk> SplitKvAppend(const proto::KvCacheAppend& append,
                                                     size_t chunk_bytes);

// A message reassembled from chunks, its data apart: `header` without
// tensor data, data[i] the bytes of header's tensor i (complete).
template <typename Message>
struct Streamed {
  Message header;
  std::vector<TensorBytes> data;
};

// Incremental reassembly of one chunk sequence (codes in the file comment).
// `max_total_bytes` bounds the tensors' declared bytes together.
// `float_storage`: keep float32 tensors as floats for DecodeTensor (the
// worker's receiving side, FinishStreamed); else every tensor is kept as
// bytes, which Finish() moves into the message without a copy.
template <typename Message, typename Chunk>
class ChunkAssembler {
 public:
  explicit ChunkAssembler(size_t max_total_bytes, bool float_storage = false)
      : max_total_(max_total_bytes), float_storage_(float_storage) {}

  // `check` runs once, on the header, after its declared sizes passed the
  // checks above and before any buffer is allocated; an error it returns
  // is Add's (the worker reserves its in-flight budget and checks its model
  // budget here). Set it before the first Add.
  void OnHeader(std::function<absl::Status(const Message& header, size_t declared_bytes)> check) {
    on_header_ = std::move(check);
  }

  // The chunk is copied from (a caller may reuse its buffers).
  absl::Status Add(const Chunk& chunk);
  // The header as received (tensors without data); nullptr before it.
  const Message* header() const { return started_ ? &header_ : nullptr; }
  // Bytes the header declares for all tensors; 0 before it.
  size_t declared_bytes() const { return declared_; }
  // FAILED_PRECONDITION when no chunk arrived; INVALID_ARGUMENT when a
  // tensor is shorter than declared. Each leaves the assembler moved from.
  absl::StatusOr<Message> Finish();
  absl::StatusOr<Streamed<Message>> FinishStreamed();

 private:
  absl::Status Start(const Message& header);

  size_t max_total_;
  bool float_storage_;
  std::function<absl::Status(const Message&, size_t)> on_header_;
  bool started_ = false;
  size_t declared_ = 0;
  Message header_;
  std::vector<TensorBytes> data_;
};

using RequestAssembler = ChunkAssembler<proto::KernelRequest, proto::KernelRequestChunk>;
using ResponseAssembler = ChunkAssembler<proto::KernelResponse, proto::KernelResponseChunk>;
using ModelAssembler = ChunkAssembler<proto::ModelHeader, proto::WorkerModelChunk>;
using KvAppendAssembler = ChunkAssembler<proto::KvCacheAppend, proto::KvCacheAppendChunk>;

extern template class ChunkAssembler<proto::KernelRequest, proto::KernelRequestChunk>;
extern template class ChunkAssembler<proto::KernelResponse, proto::KernelResponseChunk>;
extern template class ChunkAssembler<proto::ModelHeader, proto::WorkerModelChunk>;
extern template class ChunkAssembler<proto::KvCacheAppend, proto::KvCacheAppendChunk>;

// Reads every chunk of a gRPC stream `reader` (Read(Chunk*) -> bool) into
// `assembler`, charging the header chunk's encoded size to `budget`
// (Add(int64_t) -> absl::Status; the data is charged by the assembler's
// OnHeader hook at its declared size). The first error: the budget's, or
// the assembler's INVALID_ARGUMENT. One message is reused throughout, so
// its data buffer stays allocated.
template <typename Chunk, typename Reader, typename Message, typename Budget>
absl::Status ReadAllChunks(Reader& reader, ChunkAssembler<Message, Chunk>& assembler,
                           Budget& budget) {
  Chunk chunk;
  while (reader.Read(&chunk)) {
    if (assembler.header() == nullptr) {
      if (absl::Status s = budget.Add(static_cast<int64_t>(chunk.ByteSizeLong())); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = assembler.Add(chunk); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_TENSOR_STREAM_H_
