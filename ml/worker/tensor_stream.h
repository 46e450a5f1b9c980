// Chunking of kernel requests and responses for Worker.RunStream, so that
// tensors larger than one gRPC message (WorkerOptions::max_message_bytes)
// can be sent. Pure functions over proto messages; thread-safe.
#ifndef TANDEM_ML_WORKER_TENSOR_STREAM_H_
#define TANDEM_ML_WORKER_TENSOR_STREAM_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"

namespace tandem::ml::worker {

// The request as chunks carrying at most `chunk_bytes` of tensor data each
// (the first chunk also carries the header). chunk_bytes >= 1.
std::vector<proto::KernelRequestChunk> SplitRequest(const proto::KernelRequest& request,
                                                    size_t chunk_bytes);
std::vector<proto::KernelResponseChunk> SplitResponse(const proto::KernelResponse& response,
                                                      size_t chunk_bytes);

// Incremental reassembly. Add() returns INVALID_ARGUMENT for a sequence that
// does not start with a header, has a header later, names a tensor that does
// not exist, or grows the total past `max_total_bytes`.
class RequestAssembler {
 public:
  explicit RequestAssembler(size_t max_total_bytes) : max_total_(max_total_bytes) {}
  absl::Status Add(proto::KernelRequestChunk chunk);
  // FAILED_PRECONDITION when no chunk arrived.
  absl::StatusOr<proto::KernelRequest> Finish();

 private:
  size_t max_total_;
  size_t total_ = 0;
  bool started_ = false;
  proto::KernelRequest request_;
};

class ResponseAssembler {
 public:
  explicit ResponseAssembler(size_t max_total_bytes) : max_total_(max_total_bytes) {}
  absl::Status Add(proto::KernelResponseChunk chunk);
  absl::StatusOr<proto::KernelResponse> Finish();

 private:
  size_t max_total_;
  size_t total_ = 0;
  bool started_ = false;
  proto::KernelResponse response_;
};

// Models (LoadModel / ReadModel) travel the same way: the header with the
// tensors' names, shapes and dtypes first, then data appended to
// tensors[tensor_index].
std::vector<proto::WorkerModelChunk> SplitModel(const proto::ModelHeader& model,
                                                size_t chunk_bytes);

class ModelAssembler {
 public:
  explicit ModelAssembler(size_t max_total_bytes) : max_total_(max_total_bytes) {}
  absl::Status Add(proto::WorkerModelChunk chunk);
  // The header as received so far; nullptr before the first chunk.
  const proto::ModelHeader* header() const { return started_ ? &model_ : nullptr; }
  absl::StatusOr<proto::ModelHeader> Finish();

 private:
  size_t max_total_;
  size_t total_ = 0;
  bool started_ = false;
  proto::ModelHeader model_;
};

}  // namespace tandem::ml::worker

#endif  // TANDEM_ML_WORKER_TENSOR_STREAM_H_
