#include "ml/worker/tensor_stream.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

proto::KernelRequest Request() {
  proto::KernelRequest r;
  r.set_kernel("k");
  (*r.mutable_params())["p"] = 2;
  for (int i = 0; i < 3; ++i) {
    proto::Tensor* t = r.add_inputs();
    t->set_name("in" + std::to_string(i));
    t->add_shape(10 + i);
    t->set_dtype(proto::DTYPE_FLOAT32);
    t->set_data(std::string(4 * (10 + i), static_cast<char>('a' + i)));
  }
  return r;
}

TEST(TensorStream, SplitThenAssembleIsIdentity) {
  const proto::KernelRequest r = Request();
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<proto::KernelRequestChunk> chunks = SplitRequest(r, chunk);
    EXPECT_TRUE(chunks[0].has_header());
    for (size_t i = 1; i < chunks.size(); ++i) {
      EXPECT_FALSE(chunks[i].has_header());
      EXPECT_LE(chunks[i].data().size(), chunk);
    }
    RequestAssembler a(1 << 20);
    for (auto& c : chunks) TANDEM_ASSERT_OK(a.Add(c));
    TANDEM_ASSERT_OK_AND_ASSIGN(proto::KernelRequest back, a.Finish());
    EXPECT_EQ(back.SerializeAsString(), r.SerializeAsString()) << chunk;
  }
  proto::KernelResponse resp;
  resp.set_backend("cpu");
  // Every tensor declares its size (shape and dtype) in the header.
  *resp.add_outputs() = EncodeBytes("z", {100}, std::string(100, 'z'));
  ResponseAssembler ra(1 << 20);
  for (auto& c : SplitResponse(resp, 9)) TANDEM_ASSERT_OK(ra.Add(c));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::KernelResponse rb, ra.Finish());
  EXPECT_EQ(rb.SerializeAsString(), resp.SerializeAsString());
}

TEST(TensorStream, MalformedSequencesAreRejected) {
  std::vector<proto::KernelRequestChunk> chunks = SplitRequest(Request(), 8);
  {
    RequestAssembler a(1 << 20);  // data before the header
    EXPECT_THAT(a.Add(chunks[1]), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  {
    RequestAssembler a(1 << 20);  // a second header
    TANDEM_ASSERT_OK(a.Add(chunks[0]));
    EXPECT_THAT(a.Add(chunks[0]), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  {
    RequestAssembler a(1 << 20);  // a tensor that does not exist
    TANDEM_ASSERT_OK(a.Add(chunks[0]));
    proto::KernelRequestChunk bad = chunks[1];
    bad.set_input_index(7);
    EXPECT_THAT(a.Add(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  {
    RequestAssembler a(40);  // over the total limit
    absl::Status last = absl::OkStatus();
    for (auto& c : chunks) {
      last = a.Add(c);
      if (!last.ok()) break;
    }
    EXPECT_THAT(last, StatusIs(absl::StatusCode::kInvalidArgument));
  }
  RequestAssembler empty(10);
  EXPECT_THAT(empty.Finish(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Chunks of `r`, all in one vector, for tampering.
std::vector<proto::KernelRequestChunk> Chunks(const proto::KernelRequest& r, size_t bytes) {
  return SplitRequest(r, bytes);
}

absl::Status AddAll(RequestAssembler* a, const std::vector<proto::KernelRequestChunk>& chunks) {
  for (const auto& c : chunks) {
    if (absl::Status s = a->Add(c); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(TensorStream, TheHeaderDeclaresTheDataAndNothingElseIsAccepted) {
  const proto::KernelRequest r = Request();  // inputs of 40, 44 and 48 bytes
  {
    // One byte more than tensor 0 declares.
    std::vector<proto::KernelRequestChunk> chunks = Chunks(r, 1000);
    proto::KernelRequestChunk extra;
    extra.set_input_index(0);
    extra.set_data("x");
    chunks.push_back(extra);
    RequestAssembler a(1 << 20);
    EXPECT_THAT(AddAll(&a, chunks),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("past the declared")));
  }
  {
    // A header carrying more data than its shape declares.
    proto::KernelRequestChunk head;
    *head.mutable_header() = r;
    head.mutable_header()->mutable_inputs(1)->mutable_data()->append("abcd");
    RequestAssembler a(1 << 20);
    EXPECT_THAT(a.Add(head), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  {
    // The stream ends inside tensor 2.
    std::vector<proto::KernelRequestChunk> chunks = Chunks(r, 8);
    chunks.pop_back();
    RequestAssembler a(1 << 20);
    TANDEM_ASSERT_OK(AddAll(&a, chunks));
    EXPECT_THAT(a.Finish(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ended inside input 2")));
  }
  for (auto bad : {+[](proto::Tensor* t) { t->set_dtype(proto::DTYPE_UNSPECIFIED); },
                   +[](proto::Tensor* t) { t->set_dtype(static_cast<proto::DType>(99)); },
                   +[](proto::Tensor* t) { t->set_shape(0, -1); },
                   +[](proto::Tensor* t) {
                     for (int i = 0; i < 9; ++i) t->add_shape(1);
                   },
                   +[](proto::Tensor* t) {
                     t->add_shape(int64_t{1} << 40);  // overflows the element cap
                   }}) {
    proto::KernelRequest h = WithoutData(r);
    bad(h.mutable_inputs(0));
    proto::KernelRequestChunk head;
    *head.mutable_header() = h;
    RequestAssembler a(1 << 20);
    EXPECT_THAT(a.Add(head), StatusIs(absl::StatusCode::kInvalidArgument)) << h.DebugString();
  }
  {
    // A declared total over the limit is refused on the header, before the
    // check hook, any allocation, or any data.
    proto::KernelRequest h;
    proto::Tensor* t = h.add_inputs();
    t->set_dtype(proto::DTYPE_FLOAT64);
    t->add_shape(int64_t{1} << 30);  // 8 GiB declared
    proto::KernelRequestChunk head;
    *head.mutable_header() = h;
    RequestAssembler a(size_t{1} << 30);
    bool checked = false;
    a.OnHeader([&](const proto::KernelRequest&, size_t) {
      checked = true;
      return absl::OkStatus();
    });
    EXPECT_THAT(a.Add(head), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("size limit")));
    EXPECT_FALSE(checked);
  }
}

TEST(TensorStream, OnHeaderSeesTheDeclaredBytesOnceAndCanRefuse) {
  const proto::KernelRequest r = Request();
  std::vector<proto::KernelRequestChunk> chunks = Chunks(r, 16);
  int calls = 0;
  RequestAssembler a(1 << 20);
  a.OnHeader([&](const proto::KernelRequest& h, size_t declared) {
    ++calls;
    EXPECT_EQ(declared, 40u + 44u + 48u);
    EXPECT_EQ(h.inputs(0).data(), "");
    return absl::OkStatus();
  });
  TANDEM_ASSERT_OK(AddAll(&a, chunks));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(a.declared_bytes(), 132u);
  RequestAssembler refusing(1 << 20);
  refusing.OnHeader(
      [](const proto::KernelRequest&, size_t) { return absl::ResourceExhaustedError("budget"); });
  EXPECT_THAT(refusing.Add(chunks[0]), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(refusing.header(), nullptr);
}

TEST(TensorStream, FloatStorageDecodesWithoutLosingABit) {
  const kernels::Tensor x = kernels::testing::RandomTensor({1000}, 3);
  proto::KernelRequest r;
  r.set_kernel("tensor.copy");
  *r.add_inputs() = EncodeFloat("x", x);
  proto::Tensor* ints = r.add_inputs();
  *ints = EncodeInt64("i", {3}, {1, -2, 3});
  RequestAssembler a(1 << 20, /*float_storage=*/true);
  // 7-byte chunks split floats across chunks.
  ASSERT_TRUE(WriteRequestChunks(r, 7, [&](const proto::KernelRequestChunk& c) {
    EXPECT_TRUE(a.Add(c).ok());
    return true;
  }));
  TANDEM_ASSERT_OK_AND_ASSIGN(Streamed<proto::KernelRequest> s, a.FinishStreamed());
  ASSERT_EQ(s.data.size(), 2u);
  EXPECT_TRUE(s.data[0].holds_floats());
  EXPECT_FALSE(s.data[1].holds_floats());
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w0,
                              DecodeTensor(s.header.inputs(0), std::move(s.data[0]), 1 << 20, "x"));
  EXPECT_EQ(std::memcmp(w0.f32.ptr(), x.ptr(), 4000), 0);
  TANDEM_ASSERT_OK_AND_ASSIGN(WireTensor w1,
                              DecodeTensor(s.header.inputs(1), std::move(s.data[1]), 1 << 20, "i"));
  EXPECT_EQ(w1.raw, ints->data());
}

TEST(TensorStream, WritersStopAtAFailedWriteAndMatchTheSplit) {
  const proto::KernelRequest r = Request();
  int written = 0;
  EXPECT_FALSE(
      WriteRequestChunks(r, 8, [&](const proto::KernelRequestChunk&) { return ++written < 3; }));
  EXPECT_EQ(written, 3);
  // Model chunks from views equal those of the whole header.
  proto::ModelHeader m;
  m.set_name("m");
  m.set_kind("tensors");
  (*m.mutable_config())["dim"] = 4;
  m.set_replace(true);
  *m.add_tensors() = EncodeFloat("w", kernels::testing::RandomTensor({5, 3}, 1));
  *m.add_tensors() = EncodeFloat("b", kernels::testing::RandomTensor({3}, 2));
  const std::vector<absl::string_view> views = {m.tensors(0).data(), m.tensors(1).data()};
  std::vector<std::string> a, b;
  ASSERT_TRUE(WriteModelChunks(m, views, 16, [&](const proto::WorkerModelChunk& c) {
    a.push_back(c.SerializeAsString());
    return true;
  }));
  for (const auto& c : SplitModel(m, 16)) b.push_back(c.SerializeAsString());
  EXPECT_EQ(a, b);
  ModelAssembler back(1 << 20);
  for (const auto& c : SplitModel(m, 16)) TANDEM_ASSERT_OK(back.Add(c));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::ModelHeader got, back.Finish());
  EXPECT_EQ(got.SerializeAsString(), m.SerializeAsString());
}

// WithoutData copies fields one by one: a field added to these messages
// must be added there too (then update the counts here).
TEST(TensorStream, WithoutDataKnowsEveryField) {
  EXPECT_EQ(proto::KernelRequest::descriptor()->field_count(), 6);
  EXPECT_EQ(proto::KvCacheAppend::descriptor()->field_count(), 2);
  EXPECT_EQ(proto::KernelResponse::descriptor()->field_count(), 4);
  EXPECT_EQ(proto::ModelHeader::descriptor()->field_count(), 7);
  EXPECT_EQ(proto::Tensor::descriptor()->field_count(), 4);
  proto::KernelResponse resp;
  resp.set_backend("cpu");
  resp.set_elapsed_us(12);
  resp.mutable_model()->set_name("m");
  resp.mutable_model()->set_version(3);
  *resp.add_outputs() = EncodeInt32("o", {2}, {5, 6});
  proto::KernelResponse want = resp;
  want.mutable_outputs(0)->clear_data();
  EXPECT_EQ(WithoutData(resp).SerializeAsString(), want.SerializeAsString());
  proto::KernelRequest req = Request();
  req.set_backend("cpu");
  req.mutable_model()->set_name("m");
  req.mutable_kv_cache()->set_name("c");
  req.mutable_kv_cache()->set_head(1);
  req.mutable_kv_cache()->set_tokens(9);
  proto::KernelRequest want_req = req;
  for (auto& t : *want_req.mutable_inputs()) t.clear_data();
  EXPECT_EQ(WithoutData(req).SerializeAsString(), want_req.SerializeAsString());
  proto::ModelHeader h;
  h.set_name("m");
  h.set_version(2);
  h.set_kind("mlp");
  (*h.mutable_config())["in"] = 3;
  h.set_checkpoint_path("a/b");
  h.set_replace(true);
  *h.add_tensors() = EncodeFloat("w", kernels::testing::RandomTensor({2}, 1));
  proto::ModelHeader want_h = h;
  want_h.mutable_tensors(0)->clear_data();
  EXPECT_EQ(WithoutData(h).SerializeAsString(), want_h.SerializeAsString());
  proto::KvCacheAppend append;
  append.set_name("c");
  *append.add_tensors() = EncodeFloat("keys", kernels::testing::RandomTensor({1, 2, 2}, 2));
  proto::KvCacheAppend want_append = append;
  want_append.mutable_tensors(0)->clear_data();
  EXPECT_EQ(WithoutData(append).SerializeAsString(), want_append.SerializeAsString());
}

}  // namespace
}  // namespace tandem::ml::worker
