#include "ml/worker/tensor_stream.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::worker {
namespace {

using Tensors = google::protobuf::RepeatedPtrField<proto::Tensor>;

// Per message type: its tensors and its chunk's tensor index.
template <typename Message>
struct Layout;

template <>
struct Layout<proto::KernelRequest> {
  static const Tensors& Of(const proto::KernelRequest& m) { return m.inputs(); }
  static Tensors* MutableOf(proto::KernelRequest* m) { return m->mutable_inputs(); }
  static uint32_t Index(const proto::KernelRequestChunk& c) { return c.input_index(); }
  static void SetIndex(proto::KernelRequestChunk* c, uint32_t i) { c->set_input_index(i); }
  static constexpr const char* kWhat = "input";
};

template <>
struct Layout<proto::KernelResponse> {
  static const Tensors& Of(const proto::KernelResponse& m) { return m.outputs(); }
  static Tensors* MutableOf(proto::KernelResponse* m) { return m->mutable_outputs(); }
  static uint32_t Index(const proto::KernelResponseChunk& c) { return c.output_index(); }
  static void SetIndex(proto::KernelResponseChunk* c, uint32_t i) { c->set_output_index(i); }
  static constexpr const char* kWhat = "output";
};

template <>
struct Layout<proto::ModelHeader> {
  static const Tensors& Of(const proto::ModelHeader& m) { return m.tensors(); }
  static Tensors* MutableOf(proto::ModelHeader* m) { return m->mutable_tensors(); }
  static uint32_t Index(const proto::WorkerModelChunk& c) { return c.tensor_index(); }
  static void SetIndex(proto::WorkerModelChunk* c, uint32_t i) { c->set_tensor_index(i); }
  static constexpr const char* kWhat = "model tensor";
};

template <>
struct Layout<proto::KvCacheAppend> {
  static const Tensors& Of(const proto::KvCacheAppend& m) { return m.tensors(); }
  static Tensors* MutableOf(proto::KvCacheAppend* m) { return m->mutable_tensors(); }
  static uint32_t Index(const proto::KvCacheAppendChunk& c) { return c.tensor_index(); }
  static void SetIndex(proto::KvCacheAppendChunk* c, uint32_t i) { c->set_tensor_index(i); }
  static constexpr const char* kWhat = "KV cache tensor";
};

// Copies name, shape and dtype of every tensor in `from` into `to`.
void CopyLayouts(const Tensors& from, Tensors* to) {
  to->Reserve(from.size());
  for (const proto::Tensor& t : from) {
    proto::Tensor* c = to->Add();
    c->set_name(t.name());
    *c->mutable_shape() = t.shape();
    c->set_dtype(t.dtype());
  }
}

// The header chunk, then each view in chunks of at most chunk_bytes.
template <typename Message, typename Chunk>
bool WriteChunks(Message header, absl::Span<const absl::string_view> data, size_t chunk_bytes,
                 absl::FunctionRef<bool(const Chunk&)> write) {
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  Chunk c;
  *c.mutable_header() = std::move(header);
  if (!write(c)) return false;
  c.clear_header();
  for (size_t i = 0; i < data.size(); ++i) {
    Layout<Message>::SetIndex(&c, static_cast<uint32_t>(i));
    for (size_t off = 0; off < data[i].size(); off += chunk_bytes) {
      // assign() keeps the message's buffer: one allocation for the stream.
      c.mutable_data()->assign(data[i].data() + off, std::min(chunk_bytes, data[i].size() - off));
      if (!write(c)) return false;
    }
  }
  return true;
}

template <typename Message, typename Chunk>
bool WriteWhole(const Message& whole, size_t chunk_bytes,
                absl::FunctionRef<bool(const Chunk&)> write) {
  std::vector<absl::string_view> data;
  for (const proto::Tensor& t : Layout<Message>::Of(whole)) data.push_back(t.data());
  return WriteChunks<Message, Chunk>(WithoutData(whole), data, chunk_bytes, write);
}

template <typename Message, typename Chunk>
std::vector<Chunk> SplitWhole(const Message& whole, size_t chunk_bytes) {
  std::vector<Chunk> out;
  WriteWhole<Message, Chunk>(whole, chunk_bytes, [&](const Chunk& c) {
    out.push_back(c);
    return true;
  });
  return out;
}

}  // namespace

proto::KernelRequest WithoutData(const proto::KernelRequest& request) {
  proto::KernelRequest h;
  h.set_kernel(request.kernel());
  CopyLayouts(request.inputs(), h.mutable_inputs());
  *h.mutable_params() = request.params();
  h.set_backend(request.backend());
  if (request.has_model()) *h.mutable_model() = request.model();
  if (request.has_kv_cache()) *h.mutable_kv_cache() = request.kv_cache();
  return h;
}

proto::KernelResponse WithoutData(const proto::KernelResponse& response) {
  proto::KernelResponse h;
  CopyLayouts(response.outputs(), h.mutable_outputs());
  h.set_backend(response.backend());
  h.set_elapsed_us(response.elapsed_us());
  if (response.has_model()) *h.mutable_model() = response.model();
  return h;
}

proto::ModelHeader WithoutData(const proto::ModelHeader& model) {
  proto::ModelHeader h;
  h.set_name(model.name());
  h.set_version(model.version());
  h.set_kind(model.kind());
  *h.mutable_config() = model.config();
  CopyLayouts(model.tensors(), h.mutable_tensors());
  h.set_checkpoint_path(model.checkpoint_path());
  h.set_replace(model.replace());
  return h;
}

proto::KvCacheAppend WithoutData(const proto::KvCacheAppend& append) {
  proto::KvCacheAppend h;
  h.set_name(append.name());
  CopyLayouts(append.tensors(), h.mutable_tensors());
  return h;
}

bool WriteKvAppendChunks(const proto::KvCacheAppend& header,
                         absl::Span<const absl::string_view> data, size_t chunk_bytes,
                         absl::FunctionRef<bool(const proto::KvCacheAppendChunk&)> write) {
  return WriteChunks<proto::KvCacheAppend, proto::KvCacheAppendChunk>(WithoutData(header), data,
                                                                      chunk_bytes, write);
}

std::vector<proto::KvCacheAppendChunk> SplitKvAppend(const proto::KvCacheAppend& append,
                                                     size_t chunk_bytes) {
  return SplitWhole<proto::KvCacheAppend, proto::KvCacheAppendChunk>(append, chunk_bytes);
}

bool WriteRequestChunks(const proto::KernelRequest& request, size_t chunk_bytes,
                        absl::FunctionRef<bool(const proto::KernelRequestChunk&)> write) {
  return WriteWhole<proto::KernelRequest, proto::KernelRequestChunk>(request, chunk_bytes, write);
}

bool WriteResponseChunks(const proto::KernelResponse& response, size_t chunk_bytes,
                         absl::FunctionRef<bool(const proto::KernelResponseChunk&)> write) {
  return WriteWhole<proto::KernelResponse, proto::KernelResponseChunk>(response, chunk_bytes,
                                                                       write);
}

bool WriteModelChunks(const proto::ModelHeader& model, size_t chunk_bytes,
                      absl::FunctionRef<bool(const proto::WorkerModelChunk&)> write) {
  return WriteWhole<proto::ModelHeader, proto::WorkerModelChunk>(model, chunk_bytes, write);
}

bool WriteModelChunks(const proto::ModelHeader& header, absl::Span<const absl::string_view> data,
                      size_t chunk_bytes,
                      absl::FunctionRef<bool(const proto::WorkerModelChunk&)> write) {
  return WriteChunks<proto::ModelHeader, proto::WorkerModelChunk>(WithoutData(header), data,
                                                                  chunk_bytes, write);
}

std::vector<proto::KernelRequestChunk> SplitRequest(const proto::KernelRequest& request,
                                                    size_t chunk_bytes) {
  return SplitWhole<proto::KernelRequest, proto::KernelRequestChunk>(request, chunk_bytes);
}

std::vector<proto::KernelResponseChunk> SplitResponse(const proto::KernelResponse& response,
                                                      size_t chunk_bytes) {
  return SplitWhole<proto::KernelResponse, proto::KernelResponseChunk>(response, chunk_bytes);
}

std::vector<proto::WorkerModelChunk> SplitModel(const proto::ModelHeader& model,
                                                size_t chunk_bytes) {
  return SplitWhole<proto::ModelHeader, proto::WorkerModelChunk>(model, chunk_bytes);
}

template <typename Message, typename Chunk>
absl::Status ChunkAssembler<Message, Chunk>::Start(const Message& header) {
  const Tensors& tensors = Layout<Message>::Of(header);
  // Every declared size is checked, and the total bounded, before any
  // buffer is allocated.
  std::vector<size_t> sizes;
  size_t total = 0;
  for (int i = 0; i < tensors.size(); ++i) {
    const proto::Tensor& t = tensors.Get(i);
    TANDEM_ASSIGN_OR_RETURN(
        const size_t bytes,
        DeclaredBytes(t, absl::StrCat(Layout<Message>::kWhat, " ", i, " (", t.name(), ")")));
    if (bytes > max_total_ - total) {
      return absl::InvalidArgumentError(
          absl::StrCat("streamed tensors exceed the size limit of ", max_total_, " bytes"));
    }
    total += bytes;
    sizes.push_back(bytes);
  }
  Message stripped = WithoutData(header);
  if (on_header_) TANDEM_RETURN_IF_ERROR(on_header_(stripped, total));
  declared_ = total;
  data_.reserve(sizes.size());
  for (int i = 0; i < tensors.size(); ++i) {
    const proto::Tensor& t = tensors.Get(i);
    data_.emplace_back(t.dtype(), sizes[static_cast<size_t>(i)], float_storage_);
    // A prefix of the data may come with the header.
    if (absl::Status s = data_.back().Append(t.data()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Layout<Message>::kWhat, " ", i, " (", t.name(), "): ", s.message()));
    }
  }
  header_ = std::move(stripped);
  started_ = true;
  return absl::OkStatus();
}

template <typename Message, typename Chunk>
absl::Status ChunkAssembler<Message, Chunk>::Add(const Chunk& chunk) {
  if (!started_) {
    if (!chunk.has_header()) {
      return absl::InvalidArgumentError("the first chunk must carry the header");
    }
    TANDEM_RETURN_IF_ERROR(Start(chunk.header()));
  } else if (chunk.has_header()) {
    return absl::InvalidArgumentError("only the first chunk may carry a header");
  } else {
    const uint32_t index = Layout<Message>::Index(chunk);
    if (index >= data_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk names ", Layout<Message>::kWhat, " ", index, " of ", data_.size()));
    }
    if (absl::Status s = data_[index].Append(chunk.data()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Layout<Message>::kWhat, " ", index, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

template <typename Message, typename Chunk>
absl::StatusOr<Streamed<Message>> ChunkAssembler<Message, Chunk>::FinishStreamed() {
  if (!started_) return absl::FailedPreconditionError("no chunk received");
  for (size_t i = 0; i < data_.size(); ++i) {
    if (!data_[i].complete()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the stream ended inside ", Layout<Message>::kWhat, " ", i, ": ",
          data_[i].received_bytes(), " of ", data_[i].declared_bytes(), " declared bytes"));
    }
  }
  started_ = false;
  return Streamed<Message>{std::move(header_), std::move(data_)};
}

template <typename Message, typename Chunk>
absl::StatusOr<Message> ChunkAssembler<Message, Chunk>::Finish() {
  TANDEM_ASSIGN_OR_RETURN(Streamed<Message> s, FinishStreamed());
  Tensors* tensors = Layout<Message>::MutableOf(&s.header);
  for (int i = 0; i < tensors->size(); ++i) {
    *tensors->Mutable(i)->mutable_data() = s.data[static_cast<size_t>(i)].TakeString();
  }
  return std::move(s.header);
}

template class ChunkAssembler<proto::KernelRequest, proto::KernelRequestChunk>;
template class ChunkAssembler<proto::KernelResponse, proto::KernelResponseChunk>;
template class ChunkAssembler<proto::ModelHeader, proto::WorkerModelChunk>;
template class ChunkAssembler<proto::KvCacheAppend, proto::KvCacheAppendChunk>;

}  // namespace tandem::ml::worker
