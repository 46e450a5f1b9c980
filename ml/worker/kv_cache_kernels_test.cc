// Kernels reading a KV cache through the registry (KernelRequest.kv_cache),
// in process: the same answers as with the tensors sent in the request, and
// the codes of a request naming a cache wrongly.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using kernels::testing::RandomTensor;

constexpr KvCacheShape kShape = {.heads = 2, .head_dim = 16, .code_bits = 64};

// Head h's rows of a (heads, n, width) uint8 block as a (n, width) tensor.
proto::Tensor CodesOfHead(const std::string& codes, int64_t n, int64_t width, int h) {
  return EncodeBytes("key_codes", {n, width}, codes.substr(h * n * width, n * width));
}

class KvCacheKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(RegisterBuiltinKernels(&registry_).ok());
    store_ =
        *KvCacheStore::Create({.max_bytes = 16 << 20, .min_page_tokens = 8, .max_page_tokens = 32},
                              std::make_unique<HostKvAllocator>());
    ASSERT_TRUE(store_->CreateCache("seq", kShape, false).ok());
    // Two appends of 40 and 60 tokens: the request-side tensors are their
    // concatenation.
    keys_ = RandomTensor({2, 100, 16}, 1);
    values_ = RandomTensor({2, 100, 16}, 2);
    codes_.resize(2 * 100 * 8);
    for (size_t i = 0; i < codes_.size(); ++i) codes_[i] = static_cast<char>((i * 131 + 7) % 251);
    for (auto [from, n] : {std::pair<int64_t, int64_t>{0, 40}, {40, 60}}) {
      std::vector<float> k, v;
      std::string c;
      for (int h = 0; h < 2; ++h) {
        const int64_t at = (h * 100 + from) * 16;
        k.insert(k.end(), keys_.ptr() + at, keys_.ptr() + at + n * 16);
        v.insert(v.end(), values_.ptr() + at, values_.ptr() + at + n * 16);
        c += codes_.substr((h * 100 + from) * 8, n * 8);
      }
      ASSERT_TRUE(
          store_
              ->Append("seq", *Tensor::FromData({2, n, 16}, k), *Tensor::FromData({2, n, 16}, v), c)
              .ok());
    }
  }
  // codes_ is (heads, 100, 8) laid out head-major.
  KernelRegistry registry_;
  std::unique_ptr<KvCacheStore> store_;
  Tensor keys_, values_;
  std::string codes_;
};

void ExpectSameOutputs(const std::vector<proto::Tensor>& a, const std::vector<proto::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].shape_size(), b[i].shape_size());
    EXPECT_EQ(a[i].data(), b[i].data()) << "output " << i;
  }
}

TEST_F(KvCacheKernelsTest, SpotlightTopKFromCacheEqualsCodesSent) {
  const proto::Tensor query = EncodeBytes("query_codes", {4, 8}, std::string(32, '\x5a'));
  for (int h = 0; h < 2; ++h) {
    proto::KernelRequest direct;
    direct.set_kernel("spotlight.topk");
    *direct.add_inputs() = query;
    *direct.add_inputs() = CodesOfHead(codes_, 100, 8, h);
    (*direct.mutable_params())["k"] = 10;
    proto::KernelRequest cached = direct;
    cached.mutable_inputs()->RemoveLast();
    cached.mutable_kv_cache()->set_name("seq");
    cached.mutable_kv_cache()->set_head(h);
    auto want = registry_.Run(direct);
    auto got = registry_.Run(cached, nullptr, store_.get());
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    ExpectSameOutputs(*got, *want);
  }
  // A prefix of the cache equals the first tokens sent.
  proto::KernelRequest direct;
  direct.set_kernel("spotlight.topk");
  *direct.add_inputs() = query;
  *direct.add_inputs() = EncodeBytes("key_codes", {50, 8}, codes_.substr(0, 400));
  proto::KernelRequest cached = direct;
  cached.mutable_inputs()->RemoveLast();
  cached.mutable_kv_cache()->set_name("seq");
  cached.mutable_kv_cache()->set_tokens(50);
  ExpectSameOutputs(*registry_.Run(cached, nullptr, store_.get()), *registry_.Run(direct));
}

TEST_F(KvCacheKernelsTest, AttentionAndAdaKvFromCacheEqualTensorsSent) {
  const Tensor q = RandomTensor({4, 100, 16}, 3);
  for (const char* kernel : {"attention.dense", "adakv.compress", "adakv.scores"}) {
    proto::KernelRequest direct;
    direct.set_kernel(kernel);
    *direct.add_inputs() = EncodeFloat("q", q);
    *direct.add_inputs() = EncodeFloat("k", keys_);
    if (std::string(kernel) != "adakv.scores") *direct.add_inputs() = EncodeFloat("v", values_);
    proto::KernelRequest cached;
    cached.set_kernel(kernel);
    *cached.add_inputs() = EncodeFloat("q", q);
    cached.mutable_kv_cache()->set_name("seq");
    auto want = registry_.Run(direct);
    auto got = registry_.Run(cached, nullptr, store_.get());
    ASSERT_TRUE(want.ok() && got.ok()) << kernel << ": " << got.status();
    ExpectSameOutputs(*got, *want);
  }
}

TEST_F(KvCacheKernelsTest, RefusesWrongCacheRequests) {
  proto::KernelRequest r;
  r.set_kernel("spotlight.topk");
  *r.add_inputs() = EncodeBytes("query_codes", {1, 8}, std::string(8, 'a'));
  r.mutable_kv_cache()->set_name("missing");
  EXPECT_TRUE(absl::IsNotFound(registry_.Run(r, nullptr, store_.get()).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(registry_.Run(r).status()));  // no store
  r.mutable_kv_cache()->set_name("seq");
  r.mutable_kv_cache()->set_head(2);
  EXPECT_TRUE(absl::IsInvalidArgument(registry_.Run(r, nullptr, store_.get()).status()));
  r.mutable_kv_cache()->set_head(0);
  r.mutable_kv_cache()->set_tokens(101);
  EXPECT_TRUE(absl::IsFailedPrecondition(registry_.Run(r, nullptr, store_.get()).status()));
  r.mutable_kv_cache()->set_tokens(0);
  // The key codes sent as well: one input too many.
  *r.add_inputs() = EncodeBytes("key_codes", {1, 8}, std::string(8, 'a'));
  EXPECT_TRUE(absl::IsInvalidArgument(registry_.Run(r, nullptr, store_.get()).status()));
  // A kernel that reads no cache.
  proto::KernelRequest copy;
  copy.set_kernel("tensor.copy");
  *copy.add_inputs() = EncodeFloat("x", RandomTensor({3}, 1));
  copy.mutable_kv_cache()->set_name("seq");
  EXPECT_TRUE(absl::IsInvalidArgument(registry_.Run(copy, nullptr, store_.get()).status()));
  // An empty cache.
  ASSERT_TRUE(store_->CreateCache("empty", kShape, false).ok());
  r.mutable_inputs()->RemoveLast();
  r.mutable_kv_cache()->set_name("empty");
  EXPECT_TRUE(absl::IsFailedPrecondition(registry_.Run(r, nullptr, store_.get()).status()));
}

TEST_F(KvCacheKernelsTest, CapabilitiesAndStreamsCarryTheCache) {
  for (const proto::KernelInfo& k : registry_.Describe()) {
    const bool cached = k.name() == "spotlight.topk" || k.name() == "attention.dense" ||
                        k.name() == "adakv.scores" || k.name() == "adakv.compress";
    EXPECT_EQ(k.accepts_kv_cache(), cached) << k.name();
    if (k.name() == "spotlight.topk") EXPECT_EQ(k.inputs(1).from_cache(), "codes");
    if (k.name() == "adakv.compress") {
      EXPECT_EQ(k.inputs(1).from_cache(), "keys");
      EXPECT_EQ(k.inputs(2).from_cache(), "values");
    }
  }
  // RunStream's header keeps the cache reference.
  proto::KernelRequest r;
  r.set_kernel("spotlight.topk");
  r.mutable_kv_cache()->set_name("seq");
  r.mutable_kv_cache()->set_head(1);
  EXPECT_EQ(WithoutData(r).kv_cache().head(), 1);
  EXPECT_EQ(WithoutData(r).kv_cache().name(), "seq");
}

}  // namespace
}  // namespace tandem::ml::worker
