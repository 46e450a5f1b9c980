#include "ml/worker/tensor_stream.h"

#include <algorithm>

namespace tandem::ml::worker {
namespace {

// Shared by both directions: Message has a repeated Tensor field `tensors`
// reachable through `get`; Chunk has header/index/data.
template <typename Chunk, typename Message, typename Tensors>
std::vector<Chunk> Split(const Message& whole, size_t chunk_bytes, Tensors tensors_of,
                         const google::protobuf::RepeatedPtrField<proto::Tensor>& (
                             Message::*tensors_in)() const,
                         void (Chunk::*set_index)(uint32_t)) {
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  std::vector<Chunk> out(1);
  Message header = whole;
  auto* header_tensors = tensors_of(header);
  for (auto& t : *header_tensors) t.clear_data();
  *out[0].mutable_header() = std::move(header);
  const auto& tensors = (whole.*tensors_in)();
  for (int i = 0; i < tensors.size(); ++i) {
    const std::string& data = tensors.Get(i).data();
    for (size_t off = 0; off < data.size(); off += chunk_bytes) {
      Chunk c;
      (c.*set_index)(static_cast<uint32_t>(i));
      c.set_data(data.substr(off, chunk_bytes));
      out.push_back(std::move(c));
    }
  }
  return out;
}

template <typename Chunk, typename Message, typename Tensors>
absl::Status AddChunk(Chunk chunk, uint32_t index, bool* started, size_t* total, size_t max_total,
                      Message* whole, Tensors tensors_of) {
  if (!*started) {
    if (!chunk.has_header()) {
      return absl::InvalidArgumentError("the first chunk must carry the header");
    }
    *whole = std::move(*chunk.mutable_header());
    *started = true;
    for (const auto& t : *tensors_of(*whole)) *total += t.data().size();
  } else if (chunk.has_header()) {
    return absl::InvalidArgumentError("only the first chunk may carry a header");
  }
  if (chunk.data().empty()) return *total > max_total ? absl::InvalidArgumentError("too large")
                                                      : absl::OkStatus();
  auto* tensors = tensors_of(*whole);
  if (index >= static_cast<uint32_t>(tensors->size())) {
    return absl::InvalidArgumentError("chunk names a tensor that does not exist");
  }
  *total += chunk.data().size();
  if (*total > max_total) {
    return absl::InvalidArgumentError("streamed tensors exceed the size limit");
  }
  tensors->Mutable(static_cast<int>(index))->mutable_data()->append(chunk.data());
  return absl::OkStatus();
}

auto RequestTensors = [](proto::KernelRequest& r) { return r.mutable_inputs(); };
auto ResponseTensors = [](proto::KernelResponse& r) { return r.mutable_outputs(); };
auto ModelTensors = [](proto::ModelHeader& r) { return r.mutable_tensors(); };

}  // namespace

std::vector<proto::KernelRequestChunk> SplitRequest(const proto::KernelRequest& request,
                                                    size_t chunk_bytes) {
  return Split<proto::KernelRequestChunk>(request, chunk_bytes, RequestTensors,
                                          &proto::KernelRequest::inputs,
                                          &proto::KernelRequestChunk::set_input_index);
}

std::vector<proto::KernelResponseChunk> SplitResponse(const proto::KernelResponse& response,
                                                      size_t chunk_bytes) {
  return Split<proto::KernelResponseChunk>(response, chunk_bytes, ResponseTensors,
                                           &proto::KernelResponse::outputs,
                                           &proto::KernelResponseChunk::set_output_index);
}

absl::Status RequestAssembler::Add(proto::KernelRequestChunk chunk) {
  const uint32_t index = chunk.input_index();
  return AddChunk(std::move(chunk), index, &started_, &total_, max_total_, &request_,
                  RequestTensors);
}

absl::StatusOr<proto::KernelRequest> RequestAssembler::Finish() {
  if (!started_) return absl::FailedPreconditionError("no chunk received");
  return std::move(request_);
}

absl::Status ResponseAssembler::Add(proto::KernelResponseChunk chunk) {
  const uint32_t index = chunk.output_index();
  return AddChunk(std::move(chunk), index, &started_, &total_, max_total_, &response_,
                  ResponseTensors);
}

absl::StatusOr<proto::KernelResponse> ResponseAssembler::Finish() {
  if (!started_) return absl::FailedPreconditionError("no chunk received");
  return std::move(response_);
}

std::vector<proto::WorkerModelChunk> SplitModel(const proto::ModelHeader& model,
                                                size_t chunk_bytes) {
  return Split<proto::WorkerModelChunk>(model, chunk_bytes, ModelTensors,
                                        &proto::ModelHeader::tensors,
                                        &proto::WorkerModelChunk::set_tensor_index);
}

absl::Status ModelAssembler::Add(proto::WorkerModelChunk chunk) {
  const uint32_t index = chunk.tensor_index();
  return AddChunk(std::move(chunk), index, &started_, &total_, max_total_, &model_, ModelTensors);
}

absl::StatusOr<proto::ModelHeader> ModelAssembler::Finish() {
  if (!started_) return absl::FailedPreconditionError("no chunk received");
  return std::move(model_);
}

}  // namespace tandem::ml::worker
