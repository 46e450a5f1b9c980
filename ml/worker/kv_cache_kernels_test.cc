// Kernels reading a KV cache through the registry (KernelRequest.kv_cache),
// in process: the same answers as with the tensors sent in the request, and
// the codes of a request naming a cache wrongly. adakv.decode over the
// output of adakv.compress equals kernels::CompactDecodeAttention.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_allocator_testing.h"
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

// spotlight.topk of each head's codes from `store`'s cache "seq" against
// the same codes sent.
void ExpectTopKOfEachHeadEqualsCodesSent(const KernelRegistry& registry, const KvCacheStore& store,
                                         const std::string& codes, char query_byte, int64_t k) {
  const proto::Tensor query = EncodeBytes("query_codes", {4, 8}, std::string(32, query_byte));
  for (int h = 0; h < 2; ++h) {
    proto::KernelRequest direct;
    direct.set_kernel("spotlight.topk");
    *direct.add_inputs() = query;
    *direct.add_inputs() = CodesOfHead(codes, 100, 8, h);
    (*direct.mutable_params())["k"] = static_cast<double>(k);
    proto::KernelRequest cached = direct;
    cached.mutable_inputs()->RemoveLast();
    cached.mutable_kv_cache()->set_name("seq");
    cached.mutable_kv_cache()->set_head(h);
    auto want = registry.Run(direct);
    auto got = registry.Run(cached, nullptr, &store);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    ExpectSameOutputs(*got, *want);
  }
}

// With selected_scores the response carries the k scores of the indices,
// in their order, and the same indices: from the cache and from codes sent.
TEST_F(KvCacheKernelsTest, SpotlightSelectedScoresAreTheIndicesScores) {
  proto::KernelRequest all;
  all.set_kernel("spotlight.topk");
  *all.add_inputs() = EncodeBytes("query_codes", {4, 8}, std::string(32, '\x33'));
  *all.add_inputs() = CodesOfHead(codes_, 100, 8, 1);
  (*all.mutable_params())["k"] = 7;
  proto::KernelRequest cached = all;
  cached.mutable_inputs()->RemoveLast();
  cached.mutable_kv_cache()->set_name("seq");
  cached.mutable_kv_cache()->set_head(1);
  auto every = registry_.Run(all);
  ASSERT_TRUE(every.ok()) << every.status();
  const auto* indices = reinterpret_cast<const int64_t*>((*every)[0].data().data());
  const auto* scores = reinterpret_cast<const int32_t*>((*every)[1].data().data());
  ASSERT_EQ((*every)[1].data().size(), 100 * sizeof(int32_t));
  std::vector<int32_t> want(7);
  for (int i = 0; i < 7; ++i) want[static_cast<size_t>(i)] = scores[indices[i]];
  for (proto::KernelRequest* r : {&all, &cached}) {
    (*r->mutable_params())["selected_scores"] = 1;
    auto got = r == &all ? registry_.Run(*r) : registry_.Run(*r, nullptr, store_.get());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].data(), (*every)[0].data());
    ASSERT_EQ((*got)[1].shape_size(), 1);
    EXPECT_EQ((*got)[1].shape(0), 7);
    ASSERT_EQ((*got)[1].data().size(), 7 * sizeof(int32_t));
    std::vector<int32_t> picked(7);
    std::memcpy(picked.data(), (*got)[1].data().data(), 7 * sizeof(int32_t));
    EXPECT_EQ(picked, want);
  }
}

TEST_F(KvCacheKernelsTest, SpotlightTopKFromCacheEqualsCodesSent) {
  ExpectTopKOfEachHeadEqualsCodesSent(registry_, *store_, codes_, '\x5a', 10);
  const proto::Tensor query = EncodeBytes("query_codes", {4, 8}, std::string(32, '\x5a'));
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

// A kernel that gathers (KernelSpec::gathers_from_cache) gets the cache,
// its key and the token count instead of copies of every token; the others
// still get the tensors.
TEST_F(KvCacheKernelsTest, GatheringKernelsGetTheCacheNotItsTokens) {
  for (bool gathers : {true, false}) {
    KernelRegistry registry;
    KernelSpec spec{
        "probe", "", false, {{"q", proto::DTYPE_FLOAT32, 1}, {"k", proto::DTYPE_FLOAT32, 3}}};
    spec.inputs[1].from_cache = "keys";
    spec.gathers_from_cache = gathers;
    spec.run = [&](const KernelCall& c) -> absl::StatusOr<std::vector<proto::Tensor>> {
      EXPECT_EQ(c.cache != nullptr, gathers);
      EXPECT_EQ(c.f32(1).size() == 0, gathers);  // no copy when gathering
      if (gathers) {
        EXPECT_EQ(c.cache_key, KvCacheStore::Key("", "seq"));
        EXPECT_EQ(c.cache_tokens, 60);
        std::vector<float> row(16);
        const std::vector<int64_t> positions = {59}, cu = {0, 1, 1};
        EXPECT_TRUE(c.cache
                        ->GatherRows(c.cache_key, KvPart::kKeys, c.cache_tokens, positions, cu,
                                     absl::MakeSpan(row))
                        .ok());
        EXPECT_EQ(row, std::vector<float>(keys_.ptr() + 59 * 16, keys_.ptr() + 60 * 16));
      }
      return std::vector<proto::Tensor>{};
    };
    ASSERT_TRUE(registry.Register(std::move(spec)).ok());
    proto::KernelRequest req;
    req.set_kernel("probe");
    *req.add_inputs() = EncodeFloat("q", RandomTensor({3}, 5));
    req.mutable_kv_cache()->set_name("seq");
    req.mutable_kv_cache()->set_tokens(60);
    ASSERT_TRUE(registry.Run(req, nullptr, store_.get()).ok()) << gathers;
  }
}

// Where the pages are not host memory (a CUDA worker's), spotlight.topk
// reads the codes through a copy: the same answers as the codes sent.
TEST_F(KvCacheKernelsTest, SpotlightTopKOnPagesTheHostCannotReadCopiesThem) {
  auto opaque =
      *KvCacheStore::Create({.max_bytes = 16 << 20}, std::make_unique<OpaqueKvAllocator>());
  ASSERT_TRUE(opaque->CreateCache("seq", kShape, false).ok());
  ASSERT_TRUE(opaque->Append("seq", keys_, values_, codes_).ok());
  ExpectTopKOfEachHeadEqualsCodesSent(registry_, *opaque, codes_, '\x3c', 9);
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
                        k.name() == "adakv.scores" || k.name() == "adakv.compress" ||
                        k.name() == "adakv.decode";
    EXPECT_EQ(k.accepts_kv_cache(), cached) << k.name();
    if (k.name() == "spotlight.topk") EXPECT_EQ(k.inputs(1).from_cache(), "codes");
    if (k.name() == "adakv.compress") {
      EXPECT_EQ(k.inputs(1).from_cache(), "keys");
      EXPECT_EQ(k.inputs(2).from_cache(), "values");
    }
    if (k.name() == "adakv.decode") {
      ASSERT_EQ(k.inputs_size(), 5);
      EXPECT_EQ(k.inputs(0).from_cache(), "");
      EXPECT_EQ(k.inputs(1).from_cache(), "keys");
      EXPECT_EQ(k.inputs(2).from_cache(), "values");
      EXPECT_EQ(k.inputs(3).from_cache(), "");
      EXPECT_EQ(k.inputs(4).from_cache(), "");
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

std::vector<int64_t> Int64s(const proto::Tensor& t) {
  std::vector<int64_t> v(t.data().size() / sizeof(int64_t));
  std::memcpy(v.data(), t.data().data(), v.size() * sizeof(int64_t));
  return v;
}

// adakv.decode of q over (kept, cu_seqlens), on the cache "seq" (k and v
// left out) or, with k and v given, sent inline.
proto::KernelRequest DecodeRequest(const Tensor& q, const std::vector<int64_t>& kept,
                                   const std::vector<int64_t>& cu, const Tensor* k = nullptr,
                                   const Tensor* v = nullptr) {
  proto::KernelRequest r;
  r.set_kernel("adakv.decode");
  *r.add_inputs() = EncodeFloat("q", q);
  if (k != nullptr) {
    *r.add_inputs() = EncodeFloat("k", *k);
    *r.add_inputs() = EncodeFloat("v", *v);
  } else {
    r.mutable_kv_cache()->set_name("seq");
  }
  *r.add_inputs() = EncodeInt64("kept", {static_cast<int64_t>(kept.size())}, kept);
  *r.add_inputs() = EncodeInt64("cu_seqlens", {static_cast<int64_t>(cu.size())}, cu);
  return r;
}

// The direct computation: CompactDecodeAttention(q, CompactKvCache(k, v,
// kept split by cu_seqlens)).
proto::Tensor ReferenceDecode(const Tensor& q, const Tensor& k, const Tensor& v,
                              const std::vector<int64_t>& kept, const std::vector<int64_t>& cu) {
  std::vector<std::vector<int64_t>> lists;
  for (size_t h = 0; h + 1 < cu.size(); ++h) {
    lists.emplace_back(kept.begin() + cu[h], kept.begin() + cu[h + 1]);
  }
  absl::StatusOr<kernels::CompactKv> compact = kernels::CompactKvCache(k, v, lists);
  EXPECT_TRUE(compact.ok()) << compact.status();
  absl::StatusOr<Tensor> out = kernels::CompactDecodeAttention(q, *compact);
  EXPECT_TRUE(out.ok()) << out.status();
  return EncodeFloat("out", *out);
}

TEST_F(KvCacheKernelsTest, AdaKvDecodeOverCompressOutputEqualsCompactDecodeAttention) {
  // adakv.compress on the cache, budget 40 of 100 tokens (window 8).
  proto::KernelRequest compress;
  compress.set_kernel("adakv.compress");
  *compress.add_inputs() = EncodeFloat("q", RandomTensor({4, 100, 16}, 3));
  compress.mutable_kv_cache()->set_name("seq");
  (*compress.mutable_params())["window"] = 8;
  (*compress.mutable_params())["budget"] = 40;
  auto compressed = registry_.Run(compress, nullptr, store_.get());
  ASSERT_TRUE(compressed.ok()) << compressed.status();
  ASSERT_EQ(compressed->size(), 4u);
  const std::vector<int64_t> cu = Int64s((*compressed)[2]);
  const std::vector<int64_t> kept = Int64s((*compressed)[3]);
  ASSERT_EQ(cu.size(), 3u);      // H_kv + 1 offsets
  ASSERT_LT(kept.size(), 200u);  // a real compaction, not every token
  ASSERT_GT(kept.size(), 0u);

  // G = 2 and G = 1 query heads per KV head.
  for (int64_t heads : {4, 2}) {
    SCOPED_TRACE(heads);
    const Tensor q = RandomTensor({heads, 16}, 10 + heads);
    auto cached = registry_.Run(DecodeRequest(q, kept, cu), nullptr, store_.get());
    ASSERT_TRUE(cached.ok()) << cached.status();
    ASSERT_EQ(cached->size(), 1u);
    EXPECT_EQ((*cached)[0].name(), "out");
    ASSERT_EQ((*cached)[0].shape_size(), 2);
    EXPECT_EQ((*cached)[0].shape(0), heads);
    EXPECT_EQ((*cached)[0].shape(1), 16);
    EXPECT_EQ((*cached)[0].data(), ReferenceDecode(q, keys_, values_, kept, cu).data());
    auto inline_kv = registry_.Run(DecodeRequest(q, kept, cu, &keys_, &values_));
    ASSERT_TRUE(inline_kv.ok()) << inline_kv.status();
    ExpectSameOutputs(*cached, *inline_kv);
    // Another selection gives another answer: kept is really read.
    std::vector<int64_t> shifted = kept;
    for (int64_t& p : shifted) p = (p + 1) % 100;
    auto other = registry_.Run(DecodeRequest(q, shifted, cu), nullptr, store_.get());
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_NE((*other)[0].data(), (*cached)[0].data());
  }
  // Uneven hand-picked heads (3 and 5 entries, unsorted, a repeat) on a
  // 50-token prefix of the cache.
  const std::vector<int64_t> mine = {49, 0, 7, 3, 3, 48, 20, 11};
  const std::vector<int64_t> mine_cu = {0, 3, 8};
  const Tensor q = RandomTensor({2, 16}, 30);
  proto::KernelRequest prefix = DecodeRequest(q, mine, mine_cu);
  prefix.mutable_kv_cache()->set_tokens(50);
  auto got = registry_.Run(prefix, nullptr, store_.get());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].data(), ReferenceDecode(q, keys_, values_, mine, mine_cu).data());
  // Position 50 is past that prefix (N = 50).
  prefix = DecodeRequest(q, {49, 0, 50, 3, 3, 48, 20, 11}, mine_cu);
  prefix.mutable_kv_cache()->set_tokens(50);
  auto past = registry_.Run(prefix, nullptr, store_.get());
  EXPECT_TRUE(absl::IsInvalidArgument(past.status())) << past.status();
  EXPECT_THAT(past.status().message(), ::testing::HasSubstr("outside [0, N = 50)"));
}

TEST_F(KvCacheKernelsTest, AdaKvDecodeRejectsInconsistentSelections) {
  const Tensor q = RandomTensor({4, 16}, 40);
  const std::vector<int64_t> kept = {1, 5, 9, 0, 99};
  const std::vector<int64_t> cu = {0, 3, 5};
  ASSERT_TRUE(registry_.Run(DecodeRequest(q, kept, cu), nullptr, store_.get()).ok());
  struct Bad {
    const char* reason;
    proto::KernelRequest request;
  };
  const std::vector<Bad> bad = {
      {"outside [0, N = 100)", DecodeRequest(q, {1, 5, 9, 0, 100}, cu)},
      {"outside [0, N = 100)", DecodeRequest(q, {1, -1, 9, 0, 99}, cu)},
      {"cu_seqlens ends at 5, kept has 4", DecodeRequest(q, {1, 5, 9, 0}, cu)},
      {"cu_seqlens ends at 4, kept has 5", DecodeRequest(q, kept, {0, 3, 4})},
      {"H_kv + 1 = 3 offsets", DecodeRequest(q, kept, {3, 5})},
      {"H_kv + 1 = 3 offsets", DecodeRequest(q, kept, {0, 3, 5, 5})},
      {"H_kv + 1 = 3 offsets", DecodeRequest(q, kept, {})},
      {"starting at 1", DecodeRequest(q, kept, {1, 3, 5})},
      {"KV head 1 would keep no entries", DecodeRequest(q, {1, 5, 9, 0, 99}, {0, 5, 5})},
      {"KV head 0 would keep no entries", DecodeRequest(q, kept, {0, 0, 5})},
      {"not a positive multiple of H_kv = 2", DecodeRequest(RandomTensor({3, 16}, 41), kept, cu)},
      {"q is (H, d) with d = 8", DecodeRequest(RandomTensor({4, 8}, 42), kept, cu)},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.reason);
    absl::StatusOr<std::vector<proto::Tensor>> r = registry_.Run(b.request, nullptr, store_.get());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(b.reason));
  }
  // The same checks with k and v sent inline, and k, v of other shapes.
  auto inline_bad = registry_.Run(DecodeRequest(q, {1, 5, 9, 0, 100}, cu, &keys_, &values_));
  EXPECT_TRUE(absl::IsInvalidArgument(inline_bad.status())) << inline_bad.status();
  const Tensor v_short = RandomTensor({2, 99, 16}, 43);
  auto mismatch = registry_.Run(DecodeRequest(q, kept, cu, &keys_, &v_short));
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch.status())) << mismatch.status();
  // Wrong dtype for kept (float32 positions): refused by the registry.
  proto::KernelRequest as_float = DecodeRequest(q, kept, cu);
  *as_float.mutable_inputs(1) = EncodeFloat("kept", RandomTensor({5}, 44));
  EXPECT_TRUE(absl::IsInvalidArgument(registry_.Run(as_float, nullptr, store_.get()).status()));
}

}  // namespace
}  // namespace tandem::ml::worker
