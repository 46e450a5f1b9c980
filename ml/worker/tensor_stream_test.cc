#include "ml/worker/tensor_stream.h"

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::testing::StatusIs;

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
  resp.add_outputs()->set_data(std::string(100, 'z'));
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

}  // namespace
}  // namespace tandem::ml::worker
