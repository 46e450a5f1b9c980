// Kernels that read a KV cache in place (adakv.scores, adakv.compress,
// attention.dense) on a cache of pages larger than the kernels' 512-key
// blocks (so blocks are read in place and across pages): the same outputs,
// bit for bit, as with q, k and v sent (Ada-KV: q whole or the observation
// window alone; attention: causal or not), and on pages the host cannot
// read (copied out first, as a CUDA worker's).
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_allocator_testing.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using kernels::testing::RandomTensor;

constexpr int64_t kTokens = 1300, kDim = 16, kWindow = 16;

// Tokens [from, from + n) of every head of a (heads, kTokens, d) tensor.
Tensor Slice(const Tensor& t, int64_t from, int64_t n) {
  std::vector<float> out;
  for (int64_t h = 0; h < t.dim(0); ++h) {
    const float* p = t.ptr() + (h * kTokens + from) * kDim;
    out.insert(out.end(), p, p + n * kDim);
  }
  return *Tensor::FromData({t.dim(0), n, kDim}, out);
}

TEST(KvCacheInPlace, AttentionAndAdaKvOnTheCacheEqualTheTensorsSent) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinKernels(&registry).ok());
  const Tensor q = RandomTensor({4, kTokens, kDim}, 21);
  const Tensor keys = RandomTensor({2, kTokens, kDim}, 22),
               values = RandomTensor({2, kTokens, kDim}, 23);
  std::vector<float> last;  // q's observation window: its last kWindow rows per head
  for (int64_t h = 0; h < 4; ++h) {
    const float* p = q.ptr() + (h * kTokens + kTokens - kWindow) * kDim;
    last.insert(last.end(), p, p + kWindow * kDim);
  }
  const Tensor window = *Tensor::FromData({4, kWindow, kDim}, last);
  for (bool host_readable : {true, false}) {
    std::unique_ptr<KvAllocator> allocator;
    if (host_readable) {
      allocator = std::make_unique<HostKvAllocator>();
    } else {
      allocator = std::make_unique<OpaqueKvAllocator>();
    }
    auto store = *KvCacheStore::Create(
        {.max_bytes = 64 << 20, .min_page_tokens = 64, .max_page_tokens = 1024},
        std::move(allocator));
    ASSERT_TRUE(
        store->CreateCache("seq", {.heads = 2, .head_dim = kDim, .code_bits = 0}, false).ok());
    for (auto [from, n] : {std::pair<int64_t, int64_t>{0, 700}, {700, 600}}) {
      ASSERT_TRUE(store->Append("seq", Slice(keys, from, n), Slice(values, from, n), "").ok());
    }
    for (bool causal : {false, true}) {  // 20 queries over the 1,300 tokens
      const Tensor queries = RandomTensor({4, 20, kDim}, 24);
      proto::KernelRequest direct;
      direct.set_kernel("attention.dense");
      (*direct.mutable_params())["causal"] = causal;
      *direct.add_inputs() = EncodeFloat("q", queries);
      *direct.add_inputs() = EncodeFloat("k", keys);
      *direct.add_inputs() = EncodeFloat("v", values);
      proto::KernelRequest cached = direct;
      cached.mutable_inputs()->DeleteSubrange(1, 2);
      cached.mutable_kv_cache()->set_name("seq");
      auto want = registry.Run(direct);
      auto got = registry.Run(cached, nullptr, store.get());
      ASSERT_TRUE(want.ok() && got.ok()) << got.status();
      EXPECT_EQ((*got)[0].data(), (*want)[0].data())
          << "attention.dense causal " << causal << (host_readable ? "" : " (opaque pages)");
    }
    for (const char* kernel : {"adakv.scores", "adakv.compress"}) {
      proto::KernelRequest direct;
      direct.set_kernel(kernel);
      (*direct.mutable_params())["window"] = kWindow;
      (*direct.mutable_params())["budget"] = 64;
      *direct.add_inputs() = EncodeFloat("q", q);
      *direct.add_inputs() = EncodeFloat("k", keys);
      if (std::string(kernel) == "adakv.compress") *direct.add_inputs() = EncodeFloat("v", values);
      if (std::string(kernel) == "adakv.scores") direct.mutable_params()->erase("budget");
      auto want = registry.Run(direct);
      ASSERT_TRUE(want.ok()) << want.status();
      for (const Tensor* query : {&q, &window}) {
        proto::KernelRequest cached;
        cached.set_kernel(kernel);
        *cached.mutable_params() = direct.params();
        *cached.add_inputs() = EncodeFloat("q", *query);
        cached.mutable_kv_cache()->set_name("seq");
        auto got = registry.Run(cached, nullptr, store.get());
        ASSERT_TRUE(got.ok()) << kernel << ": " << got.status();
        ASSERT_EQ(got->size(), want->size());
        for (size_t i = 0; i < got->size(); ++i) {
          EXPECT_EQ((*got)[i].data(), (*want)[i].data())
              << kernel << " output " << i << (host_readable ? "" : " (opaque pages)")
              << (query == &window ? " (window q)" : "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::ml::worker
