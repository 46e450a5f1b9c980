#include "ml/worker/search_kernels.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/search/ssm_scan.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using kernels::testing::MaxAbsDiff;
using kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

KernelRegistry Registry() {
  KernelRegistry r;
  EXPECT_TRUE(RegisterSearchKernels(&r).ok());
  return r;
}

absl::StatusOr<std::vector<proto::Tensor>> Call(const KernelRegistry& r,
                                                const proto::KernelRequest& req) {
  return r.Run(req);
}

template <typename T>
std::vector<T> Values(const proto::Tensor& t) {
  std::vector<T> v(t.data().size() / sizeof(T));
  std::memcpy(v.data(), t.data().data(), t.data().size());
  return v;
}

TEST(SearchKernels, RegistersEachNameOnce) {
  KernelRegistry r = Registry();
  std::vector<std::string> names;
  for (const auto& info : r.Describe()) names.push_back(info.name());
  EXPECT_EQ(names, (std::vector<std::string>{"frappe.allocation", "frappe.simulate",
                                             "partpacker.pack", "trajmamba.encode",
                                             "trajmamba.mask", "trajmamba.scan"}));
  EXPECT_THAT(RegisterSearchKernels(&r), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SearchKernels, ScanMatchesTheLibrary) {
  KernelRegistry r = Registry();
  const Tensor x = RandomTensor({1, 20, 2, 4}, 1), dt = RandomTensor({1, 20, 2}, 2, 0.5f),
               b = RandomTensor({1, 20, 8}, 3), c = RandomTensor({1, 20, 8}, 4),
               d = RandomTensor({2}, 5), bias = RandomTensor({2}, 6, 0.1f);
  const Tensor a = *Tensor::FromData({2}, {-1.0f, -5.0f});
  proto::KernelRequest req;
  req.set_kernel("trajmamba.scan");
  for (const Tensor* t : {&x, &dt, &a, &b, &c, &d, &bias}) *req.add_inputs() = EncodeFloat("t", *t);
  (*req.mutable_params())["chunk"] = 0;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto out, Call(r, req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor y, ToFloatTensor(out[0]));
  TANDEM_ASSERT_OK_AND_ASSIGN(kernels::search::ScanOutput ref,
                              kernels::search::SelectiveScan(x, dt, a, b, c, d, bias, {.chunk = 16}));
  EXPECT_LT(MaxAbsDiff(y, ref.y), 1e-5);
  (*req.mutable_params())["chunk"] = 5000;
  EXPECT_THAT(Call(r, req), StatusIs(absl::StatusCode::kInvalidArgument));
  (*req.mutable_params())["chunk"] = 8;
  *req.mutable_inputs(2) = EncodeFloat("a", *Tensor::FromData({2}, {-1.0f, 1.0f}));
  EXPECT_THAT(Call(r, req), StatusIs(absl::StatusCode::kInvalidArgument));
  if (!kernels::CudaDeviceAvailable()) {
    req.set_backend("cuda");
    EXPECT_THAT(r.Validate(req), StatusIs(absl::StatusCode::kUnavailable));
  }
}

TEST(SearchKernels, EncodeAndMaskProduceShapedOutputs) {
  KernelRegistry r = Registry();
  const int64_t batch = 2, len = 12;
  Tensor gps = *Tensor::Zeros({batch, len, 2}), times = *Tensor::Zeros({batch, len}),
         roads = *Tensor::Zeros({batch, len});
  for (int64_t i = 0; i < batch * len; ++i) {
    gps.mutable_data()[2 * i] = 104.0f + 0.001f * i;
    gps.mutable_data()[2 * i + 1] = 30.0f + 0.0005f * (i % 5);
    times.mutable_data()[i] = 15.0f * (i % len);
    roads.mutable_data()[i] = static_cast<float>(i % 7);
  }
  proto::KernelRequest req;
  req.set_kernel("trajmamba.encode");
  *req.add_inputs() = EncodeFloat("gps", gps);
  *req.add_inputs() = EncodeFloat("times", times);
  *req.add_inputs() = EncodeFloat("roads", roads);
  *req.add_inputs() = EncodeInt64("lengths", {batch}, {12, 9});
  (*req.mutable_params())["d_model"] = 16;
  (*req.mutable_params())["road_vocab"] = 10;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto out, Call(r, req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor emb, ToFloatTensor(out[0]));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor pts, ToFloatTensor(out[1]));
  EXPECT_EQ(emb.shape(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(pts.shape(), (std::vector<int64_t>{2, 12, 16}));
  proto::KernelRequest mask;
  mask.set_kernel("trajmamba.mask");
  *mask.add_inputs() = EncodeFloat("points", *Tensor::FromData(
      {12, 16}, std::vector<float>(pts.data().begin(), pts.data().begin() + 12 * 16)));
  (*mask.mutable_params())["keep_ratio"] = 0.25;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto m, Call(r, mask));
  const std::vector<int64_t> keep = Values<int64_t>(m[1]);
  ASSERT_EQ(keep.size(), 3u);
  EXPECT_EQ(keep.front(), 0);
  EXPECT_EQ(keep.back(), 11);
  *req.mutable_inputs(3) = EncodeInt64("lengths", {batch}, {13, 9});
  EXPECT_THAT(Call(r, req), StatusIs(absl::StatusCode::kInvalidArgument));
}

proto::KernelRequest Bandit(const char* kernel, std::vector<float> means, int64_t k, int64_t l) {
  proto::KernelRequest req;
  req.set_kernel(kernel);
  *req.add_inputs() = EncodeFloat("means", *Tensor::FromData({k, l}, std::move(means)));
  std::vector<float> eye(l * l, 0.0f);
  for (int64_t i = 0; i < l; ++i) eye[i * l + i] = 1;
  *req.add_inputs() = EncodeFloat("cone", *Tensor::FromData({l, l}, eye));
  return req;
}

TEST(SearchKernels, FrappeAllocationAndSimulation) {
  KernelRegistry r = Registry();
  proto::KernelRequest req = Bandit("frappe.allocation", {1.0f, 0.5f}, 2, 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto out, Call(r, req));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor value, ToFloatTensor(out[1]));
  EXPECT_NEAR(value.data()[0], 0.25 / 8, 1e-5);  // gap^2 / 8
  EXPECT_EQ(Values<int64_t>(out[2]), std::vector<int64_t>{0});
  proto::KernelRequest sim = Bandit("frappe.simulate", {1, 0, 0, 1, 0.3f, 0.3f}, 3, 2);
  (*sim.mutable_params())["runs"] = 3;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto s, Call(r, sim));
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor stats, ToFloatTensor(s[0]));
  ASSERT_EQ(stats.size(), 5);
  EXPECT_GT(stats.data()[0], 3);
  EXPECT_EQ(stats.data()[2], 0);
  (*sim.mutable_params())["runs"] = 1000;
  (*sim.mutable_params())["max_samples"] = 10000000;
  EXPECT_THAT(Call(r, sim), StatusIs(absl::StatusCode::kInvalidArgument,
                                    ::testing::HasSubstr("too large")));
  proto::KernelRequest bad = Bandit("frappe.allocation", {1.0f, 0.5f, 0.2f, 0.1f}, 2, 2);
  *bad.mutable_inputs(1) = EncodeFloat("cone", *Tensor::FromData({1, 3}, {1, 1, 1}));
  EXPECT_THAT(Call(r, bad), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SearchKernels, PartPackerPacksSlabs) {
  KernelRegistry r = Registry();
  // Four slabs along x, one voxel thick each, 2 x 2 cross-section.
  std::vector<int32_t> labels(4 * 2 * 2);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i / 4);
  proto::KernelRequest req;
  req.set_kernel("partpacker.pack");
  *req.add_inputs() = EncodeInt32("labels", {4, 2, 2}, labels);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto out, Call(r, req));
  const std::vector<int32_t> pv = Values<int32_t>(out[0]);
  ASSERT_EQ(pv.size(), 4u);
  for (int i = 1; i < 4; ++i) EXPECT_NE(pv[i], pv[i - 1]);
  TANDEM_ASSERT_OK_AND_ASSIGN(Tensor stats, ToFloatTensor(out[4]));
  EXPECT_EQ(stats.data()[0], 3);  // contact edges of the path
  EXPECT_EQ(stats.data()[3], 1);  // reassembly ok
  labels[0] = -7;
  *req.mutable_inputs(0) = EncodeInt32("labels", {4, 2, 2}, labels);
  EXPECT_THAT(Call(r, req), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::worker
