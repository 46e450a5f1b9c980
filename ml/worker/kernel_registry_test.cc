#include "ml/worker/kernel_registry.h"

#include <set>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"

namespace tandem::ml::worker {
namespace {

using ::tandem::testing::StatusIs;

KernelRegistry Builtins() {
  KernelRegistry r;
  EXPECT_TRUE(RegisterBuiltinKernels(&r).ok());
  return r;
}

proto::KernelRequest DenseRequest() {
  proto::KernelRequest req;
  req.set_kernel("attention.dense");
  for (uint64_t s = 1; s <= 3; ++s) {
    *req.add_inputs() = EncodeFloat("t", kernels::testing::RandomTensor({2, 4, 8}, s));
  }
  return req;
}

TEST(KernelRegistry, BuiltinsAreDescribedSorted) {
  KernelRegistry r = Builtins();
  const auto infos = r.Describe();
  // Every family registers its kernels; spot-check one name of each.
  std::set<std::string> names;
  for (const auto& k : infos) names.insert(k.name());
  for (const char* n : {"attention.dense", "dusa.forward", "cat.mix", "adakv.compress",
                        "spotlight.topk", "ren.forward"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(names.size(), infos.size());  // no duplicates
  for (size_t i = 1; i < infos.size(); ++i) EXPECT_LT(infos[i - 1].name(), infos[i].name());
  EXPECT_EQ(infos[0].name(), "adakv.compress");
  EXPECT_EQ(infos[0].inputs_size(), 3);
  EXPECT_THAT(RegisterBuiltinKernels(&r), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KernelRegistry, ValidRequestFillsDefaults) {
  KernelRegistry r = Builtins();
  TANDEM_ASSERT_OK_AND_ASSIGN(KernelCall call, r.Validate(DenseRequest()));
  EXPECT_EQ(call.inputs.size(), 3u);
  EXPECT_EQ(call.param("causal"), 0.0);
  EXPECT_EQ(call.backend, kernels::Backend::kCpu);
}

TEST(KernelRegistry, RejectsEachKindOfMalformedRequest) {
  KernelRegistry r = Builtins();
  proto::KernelRequest unknown = DenseRequest();
  unknown.set_kernel("nope");
  EXPECT_THAT(r.Validate(unknown), StatusIs(absl::StatusCode::kUnimplemented));
  proto::KernelRequest missing = DenseRequest();
  missing.mutable_inputs()->RemoveLast();
  EXPECT_THAT(r.Validate(missing), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest rank = DenseRequest();
  rank.mutable_inputs(0)->add_shape(1);
  EXPECT_THAT(r.Validate(rank), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest dtype = DenseRequest();
  dtype.mutable_inputs(1)->set_dtype(proto::DTYPE_INT32);
  EXPECT_THAT(r.Validate(dtype), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest param = DenseRequest();
  (*param.mutable_params())["bogus"] = 1;
  EXPECT_THAT(r.Validate(param), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest range = DenseRequest();
  (*range.mutable_params())["causal"] = 0.5;
  EXPECT_THAT(r.Validate(range), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest backend = DenseRequest();
  backend.set_backend("tpu");
  EXPECT_THAT(r.Validate(backend), StatusIs(absl::StatusCode::kInvalidArgument));
  proto::KernelRequest cuda = DenseRequest();
  cuda.set_backend("cuda");  // attention.dense has no CUDA version
  EXPECT_THAT(r.Validate(cuda), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(KernelRegistry, ElementCapApplies) {
  KernelRegistry r({.max_tensor_elements = 10});
  ASSERT_TRUE(RegisterBuiltinKernels(&r).ok());
  EXPECT_THAT(r.Validate(DenseRequest()), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KernelRegistry, RegisterValidatesSpecs) {
  KernelRegistry r;
  EXPECT_THAT(r.Register({}), StatusIs(absl::StatusCode::kInvalidArgument));
  KernelSpec bad_default{"x", "", false, {}, {{"p", 5, 0, 1, false}}, {},
                         [](const KernelCall&) -> absl::StatusOr<std::vector<proto::Tensor>> {
                           return std::vector<proto::Tensor>{};
                         }};
  EXPECT_THAT(r.Register(bad_default), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::worker
