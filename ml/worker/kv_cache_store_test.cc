#include "ml/worker/kv_cache_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/kv_allocator_testing.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using kernels::testing::RandomTensor;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr KvCacheShape kShape = {.heads = 2, .head_dim = 8, .code_bits = 64};

std::unique_ptr<KvCacheStore> MakeStore(int64_t max_bytes, int64_t min_page = 4,
                                        int64_t max_page = 16) {
  return *KvCacheStore::Create(
      {.max_bytes = max_bytes, .min_page_tokens = min_page, .max_page_tokens = max_page},
      std::make_unique<HostKvAllocator>());
}

// n tokens: keys, values (heads, n, d) and codes (heads, n, code_bytes).
struct Tokens {
  Tensor keys, values;
  std::string codes;
};

Tokens MakeTokens(const KvCacheShape& s, int64_t n, uint64_t seed) {
  Tokens t{RandomTensor({s.heads, n, s.head_dim}, seed),
           RandomTensor({s.heads, n, s.head_dim}, seed + 1000),
           {}};
  t.codes.resize(static_cast<size_t>(s.heads * n * s.code_bytes()));
  for (size_t i = 0; i < t.codes.size(); ++i)
    t.codes[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return t;
}

// Tokens [from, from + n) of head h of `t` (heads, N, d) as a flat vector.
std::vector<float> Rows(const Tensor& t, int64_t h, int64_t from, int64_t n) {
  const int64_t big_n = t.dim(1), d = t.dim(2);
  const float* p = t.ptr() + (h * big_n + from) * d;
  return std::vector<float>(p, p + n * d);
}

TEST(KvCacheStoreTest, CreateRefusesBadArguments) {
  EXPECT_TRUE(absl::IsInvalidArgument(KvCacheStore::Create({.max_bytes = 1}, nullptr).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      KvCacheStore::Create({.max_bytes = -1}, std::make_unique<HostKvAllocator>()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      KvCacheStore::Create({.max_bytes = 1, .min_page_tokens = 8, .max_page_tokens = 4},
                           std::make_unique<HostKvAllocator>())
          .status()));
  auto store = MakeStore(kMiB);
  EXPECT_TRUE(absl::IsInvalidArgument(store->CreateCache("", kShape, false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->CreateCache("a/b", kShape, false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->CreateCache("x", {0, 8, 0}, false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->CreateCache("x", {1, 0, 0}, false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->CreateCache("x", {1, 8, 48}, false).status()));
  ASSERT_TRUE(store->CreateCache("x", kShape, false).ok());
  absl::Status twice = store->CreateCache("x", kShape, false).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(twice)) << twice;
  EXPECT_TRUE(store->CreateCache("x", {1, 4, 0}, true).ok());
  EXPECT_EQ(store->Find("x")->shape.heads, 1);
}

TEST(KvCacheStoreTest, AppendsInChunksReadBackInOrder) {
  auto store = MakeStore(kMiB);
  ASSERT_TRUE(store->CreateCache("seq", kShape, false).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store->ReadFloats("seq", KvPart::kKeys, 0).status()));
  // 3 + 10 + 1 + 20 tokens across pages of 4..16 tokens.
  const std::vector<int64_t> sizes = {3, 10, 1, 20};
  std::vector<Tokens> parts;
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    parts.push_back(MakeTokens(kShape, sizes[i], 10 * i + 1));
    auto s = store->Append("seq", parts.back().keys, parts.back().values, parts.back().codes);
    ASSERT_TRUE(s.ok()) << s.status();
    total += sizes[i];
    EXPECT_EQ(s->tokens, total);
    EXPECT_GE(s->capacity_tokens, total);
    EXPECT_EQ(s->bytes, s->capacity_tokens * kShape.token_bytes());
    EXPECT_EQ(s->backend, "cpu");
  }
  // Capacity grows by pages, never more than twice what is needed (+ a page).
  const KvCacheSummary info = *store->Find("seq");
  EXPECT_LE(info.capacity_tokens, 2 * total + 16);
  EXPECT_EQ(store->used_bytes(), info.bytes);

  auto keys = store->ReadFloats("seq", KvPart::kKeys, 0);
  auto values = store->ReadFloats("seq", KvPart::kValues, 0);
  ASSERT_TRUE(keys.ok() && values.ok());
  EXPECT_EQ(keys->shape(), (std::vector<int64_t>{2, total, 8}));
  for (int h = 0; h < 2; ++h) {
    auto codes = store->ReadCodes("seq", h, 0);
    ASSERT_TRUE(codes.ok());
    ASSERT_EQ(codes->size(), static_cast<size_t>(total * 8));
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(Rows(*keys, h, at, sizes[i]), Rows(parts[i].keys, h, 0, sizes[i]));
      EXPECT_EQ(Rows(*values, h, at, sizes[i]), Rows(parts[i].values, h, 0, sizes[i]));
      EXPECT_EQ(codes->substr(at * 8, sizes[i] * 8),
                parts[i].codes.substr(h * sizes[i] * 8, sizes[i] * 8));
      at += sizes[i];
    }
  }
  // A prefix, and more than held.
  auto prefix = store->ReadFloats("seq", KvPart::kValues, 5);
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(Rows(*prefix, 1, 0, 5), Rows(*values, 1, 0, 5));
  EXPECT_TRUE(absl::IsFailedPrecondition(store->ReadCodes("seq", 0, total + 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store->ReadCodes("seq", 2, 0).status()));
}

// GatherRows copies exactly the rows ReadFloats would hold at those
// positions, across page boundaries, in the order asked (repeats too), and
// refuses what it cannot serve before writing anything it returns.
TEST(KvCacheStoreTest, GatherRowsMatchesTheFullReadAcrossPages) {
  auto store = MakeStore(kMiB);
  ASSERT_TRUE(store->CreateCache("seq", kShape, false).ok());
  for (int64_t n : {5, 9, 17}) {  // pages of 4..16 tokens: several boundaries
    Tokens t = MakeTokens(kShape, n, static_cast<uint64_t>(n));
    ASSERT_TRUE(store->Append("seq", t.keys, t.values, t.codes).ok());
  }
  const int64_t total = 31;
  // Head 0: 4 positions out of order with a repeat; head 1: 3.
  const std::vector<int64_t> positions = {30, 0, 16, 16, 4, 5, 29};
  const std::vector<int64_t> cu = {0, 4, 7};
  for (KvPart part : {KvPart::kKeys, KvPart::kValues}) {
    const Tensor full = *store->ReadFloats("seq", part, 0);
    std::vector<float> out(positions.size() * 8, -1.0f);
    auto n = store->GatherRows("seq", part, 0, positions, cu, absl::MakeSpan(out));
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, total);
    for (int h = 0; h < 2; ++h) {
      for (int64_t i = cu[h]; i < cu[h + 1]; ++i) {
        EXPECT_EQ(std::vector<float>(out.begin() + i * 8, out.begin() + (i + 1) * 8),
                  Rows(full, h, positions[i], 1))
            << "head " << h << " position " << positions[i];
      }
    }
  }
  std::vector<float> out(positions.size() * 8);
  const auto gather = [&](int64_t tokens, std::vector<int64_t> pos, std::vector<int64_t> offsets) {
    out.assign(pos.size() * 8, 0.0f);
    return store->GatherRows("seq", KvPart::kKeys, tokens, pos, offsets, absl::MakeSpan(out))
        .status();
  };
  // A position past the prefix read (the cache holds it), or past the end.
  EXPECT_THAT(gather(10, {3, 10}, {0, 1, 2}).message(), HasSubstr("outside the 10 tokens"));
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {31}, {0, 1, 1})));
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {-1}, {0, 0, 1})));
  // Offsets of the wrong length, not from 0, decreasing, or not ending at
  // the positions' count.
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {1}, {0, 1})));
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {1}, {1, 1, 1})));
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {1, 2}, {0, 2, 1})));
  EXPECT_TRUE(absl::IsInvalidArgument(gather(0, {1, 2}, {0, 1, 1})));
  // More tokens than held, an unknown cache, an output of the wrong size.
  EXPECT_TRUE(absl::IsFailedPrecondition(gather(total + 1, {1}, {0, 1, 1})));
  EXPECT_TRUE(absl::IsNotFound(
      store->GatherRows("other", KvPart::kKeys, 0, {1}, {0, 1, 1}, absl::MakeSpan(out)).status()));
  std::vector<float> short_out(7);
  EXPECT_TRUE(absl::IsInvalidArgument(
      store->GatherRows("seq", KvPart::kKeys, 0, {1}, {0, 1, 1}, absl::MakeSpan(short_out))
          .status()));
}

// ScanCodes hands out the codes ReadCodes copies, page run by page run, in
// token order; it refuses what ReadCodes refuses, and says UNIMPLEMENTED
// where the pages are not host memory.
TEST(KvCacheStoreTest, ScanCodesSeesWhatReadCodesCopies) {
  auto store = MakeStore(kMiB);
  ASSERT_TRUE(store->CreateCache("seq", kShape, false).ok());
  for (int64_t n : {5, 9, 17}) {
    Tokens t = MakeTokens(kShape, n, static_cast<uint64_t>(n));
    ASSERT_TRUE(store->Append("seq", t.keys, t.values, t.codes).ok());
  }
  const int64_t words = kShape.code_bits / 32;
  for (int head : {0, 1}) {
    for (int64_t tokens : {int64_t{0}, int64_t{12}}) {
      const std::string copied = *store->ReadCodes("seq", head, tokens);
      std::string seen;
      int64_t runs = 0, next = 0;
      auto n = store->ScanCodes("seq", head, tokens,
                                [&](const uint32_t* codes, int64_t first, int64_t count) {
                                  EXPECT_EQ(first, next);
                                  next += count;
                                  ++runs;
                                  seen.append(reinterpret_cast<const char*>(codes),
                                              static_cast<size_t>(count * words * 4));
                                });
      ASSERT_TRUE(n.ok()) << n.status();
      EXPECT_EQ(*n, tokens == 0 ? 31 : tokens);
      EXPECT_EQ(next, *n);
      EXPECT_GT(runs, 1);  // pages of at most 16 tokens
      EXPECT_EQ(seen, copied) << "head " << head << " tokens " << tokens;
    }
  }
  const auto none = [](const uint32_t*, int64_t, int64_t) { ADD_FAILURE() << "called"; };
  EXPECT_TRUE(absl::IsInvalidArgument(store->ScanCodes("seq", 2, 0, none).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store->ScanCodes("seq", 0, 32, none).status()));
  EXPECT_TRUE(absl::IsNotFound(store->ScanCodes("other", 0, 0, none).status()));
  ASSERT_TRUE(store->CreateCache("plain", {2, 8, 0}, false).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(store->ScanCodes("plain", 0, 0, none).status()));

  auto opaque = *KvCacheStore::Create({.max_bytes = kMiB}, std::make_unique<OpaqueKvAllocator>());
  ASSERT_TRUE(opaque->CreateCache("seq", kShape, false).ok());
  Tokens t = MakeTokens(kShape, 4, 1);
  ASSERT_TRUE(opaque->Append("seq", t.keys, t.values, t.codes).ok());
  EXPECT_TRUE(absl::IsUnimplemented(opaque->ScanCodes("seq", 0, 0, none).status()));
  EXPECT_TRUE(opaque->ReadCodes("seq", 0, 0).ok());
}

TEST(KvCacheStoreTest, BadShapesChangeNothing) {
  auto store = MakeStore(kMiB);
  ASSERT_TRUE(store->CreateCache("seq", kShape, false).ok());
  const Tokens ok = MakeTokens(kShape, 4, 1);
  ASSERT_TRUE(store->Append("seq", ok.keys, ok.values, ok.codes).ok());
  const KvCacheSummary before = *store->Find("seq");

  const Tokens wrong_dim = MakeTokens({2, 16, 64}, 4, 2);
  absl::Status s = store->Append("seq", wrong_dim.keys, wrong_dim.values, ok.codes).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("head_dim = 8"));
  const Tokens wrong_heads = MakeTokens({3, 8, 64}, 4, 3);
  EXPECT_TRUE(absl::IsInvalidArgument(
      store->Append("seq", wrong_heads.keys, wrong_heads.values, ok.codes).status()));
  const Tokens other_n = MakeTokens(kShape, 5, 4);
  EXPECT_TRUE(
      absl::IsInvalidArgument(store->Append("seq", ok.keys, other_n.values, ok.codes).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      store->Append("seq", ok.keys, ok.values, ok.codes.substr(1)).status()));
  Tensor nan = ok.keys;
  nan.mutable_data()[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(absl::IsInvalidArgument(store->Append("seq", nan, ok.values, ok.codes).status()));
  const Tensor empty = *Tensor::Zeros({2, 0, 8});
  EXPECT_TRUE(absl::IsInvalidArgument(store->Append("seq", empty, empty, "").status()));

  const KvCacheSummary after = *store->Find("seq");
  EXPECT_EQ(after.tokens, before.tokens);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_TRUE(absl::IsNotFound(store->Append("other", ok.keys, ok.values, ok.codes).status()));
}

TEST(KvCacheStoreTest, BudgetRefusesAndChangesNothing) {
  // Room for 32 tokens: two pages of 16.
  const int64_t budget = 32 * kShape.token_bytes();
  auto store = MakeStore(budget, 16, 16);
  ASSERT_TRUE(store->CreateCache("a", kShape, false).ok());
  const Tokens t20 = MakeTokens(kShape, 20, 1);
  ASSERT_TRUE(store->Append("a", t20.keys, t20.values, t20.codes).ok());
  EXPECT_EQ(store->used_bytes(), budget);
  // 12 more fit the second page's free tail; 13 would need a third page.
  EXPECT_TRUE(store->CheckAppendFits("a", 12).ok());
  const Tokens t13 = MakeTokens(kShape, 13, 2);
  absl::Status s = store->Append("a", t13.keys, t13.values, t13.codes).status();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of memory"));
  EXPECT_TRUE(absl::IsResourceExhausted(store->CheckAppendFits("a", 13)));
  EXPECT_EQ(store->Find("a")->tokens, 20);
  EXPECT_EQ(store->used_bytes(), budget);
  // Another cache cannot take memory either, until "a" is dropped.
  ASSERT_TRUE(store->CreateCache("b", kShape, false).ok());
  EXPECT_TRUE(
      absl::IsResourceExhausted(store->Append("b", t13.keys, t13.values, t13.codes).status()));
  auto freed = store->Drop("a");
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, budget);
  EXPECT_EQ(store->used_bytes(), 0);
  EXPECT_TRUE(store->Append("b", t13.keys, t13.values, t13.codes).ok());
  EXPECT_TRUE(absl::IsNotFound(store->Drop("a").status()));
  EXPECT_TRUE(absl::IsNotFound(store->Append("a", t13.keys, t13.values, t13.codes).status()));
  // Replacing frees the old pages from the budget.
  ASSERT_TRUE(store->CreateCache("b", kShape, true).ok());
  EXPECT_EQ(store->used_bytes(), 0);
}

// One owner's caches stay within max_bytes_per_owner, whatever room the
// store has: another owner still gets memory; dropping and replacing give
// the owner's bytes back.
TEST(KvCacheStoreTest, OneOwnerCannotTakeTheWholeBudget) {
  const int64_t page = 16 * kShape.token_bytes();
  auto store = *KvCacheStore::Create({.max_bytes = 4 * page,
                                      .max_bytes_per_owner = 2 * page,
                                      .min_page_tokens = 16,
                                      .max_page_tokens = 16},
                                     std::make_unique<HostKvAllocator>());
  const std::string a1 = KvCacheStore::Key("alice", "s1"), a2 = KvCacheStore::Key("alice", "s2");
  const std::string b1 = KvCacheStore::Key("bob", "s1");
  for (const std::string& k : {a1, a2, b1}) ASSERT_TRUE(store->CreateCache(k, kShape, false).ok());
  const Tokens t20 = MakeTokens(kShape, 20, 1), t4 = MakeTokens(kShape, 4, 2);
  ASSERT_TRUE(store->Append(a1, t20.keys, t20.values, t20.codes).ok());  // two pages: her share
  absl::Status s = store->Append(a2, t4.keys, t4.values, t4.codes).status();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max_gpu_mb_per_caller"));
  EXPECT_TRUE(absl::IsResourceExhausted(store->CheckAppendFits(a2, 4)));
  EXPECT_EQ(store->Find(a2)->tokens, 0);
  // Bob has his own share of the store.
  EXPECT_TRUE(store->Append(b1, t20.keys, t20.values, t20.codes).ok());
  EXPECT_EQ(store->used_bytes(), 4 * page);
  // Alice's bytes come back with a drop (and with a replace).
  ASSERT_TRUE(store->Drop(a1).ok());
  EXPECT_TRUE(store->Append(a2, t20.keys, t20.values, t20.codes).ok());
  ASSERT_TRUE(store->CreateCache(a2, kShape, true).ok());
  EXPECT_TRUE(store->Append(a2, t20.keys, t20.values, t20.codes).ok());
  EXPECT_EQ(store->used_bytes(), 4 * page);
  EXPECT_TRUE(
      absl::IsInvalidArgument(KvCacheStore::Create({.max_bytes = 1, .max_bytes_per_owner = -1},
                                                   std::make_unique<HostKvAllocator>())
                                  .status()));
}

TEST(KvCacheStoreTest, ConcurrentAppendsKeepEveryToken) {
  constexpr KvCacheShape kOne = {.heads = 1, .head_dim = 4, .code_bits = 32};
  auto store = MakeStore(64 * kMiB, 8, 256);
  ASSERT_TRUE(store->CreateCache("seq", kOne, false).ok());
  constexpr int kThreads = 4, kAppends = 50, kTokens = 3;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int a = 0; a < kAppends; ++a) {
        // Token id = (t * kAppends + a) * kTokens + i, in every element.
        std::vector<float> data;
        std::string codes;
        for (int i = 0; i < kTokens; ++i) {
          const int id = (t * kAppends + a) * kTokens + i;
          for (int j = 0; j < 4; ++j) data.push_back(static_cast<float>(id));
          codes.append(reinterpret_cast<const char*>(&id), 4);
        }
        const Tensor kv = *Tensor::FromData({1, kTokens, 4}, data);
        if (!store->Append("seq", kv, kv, codes).ok()) failures.fetch_add(1);
        // Readers alongside the writers.
        if (a % 10 == 0 && !store->ReadCodes("seq", 0, 0).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const int64_t total = kThreads * kAppends * kTokens;
  EXPECT_EQ(store->Find("seq")->tokens, total);
  const Tensor keys = *store->ReadFloats("seq", KvPart::kKeys, 0);
  const std::string codes = *store->ReadCodes("seq", 0, 0);
  std::set<int> seen;
  for (int64_t i = 0; i < total; ++i) {
    int id = 0;
    std::memcpy(&id, codes.data() + 4 * i, 4);
    EXPECT_EQ(keys.data()[4 * i], static_cast<float>(id));  // keys and codes stay aligned
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(total));  // each token exactly once
  // An append's tokens stay together (one lock per append).
  for (int64_t i = 0; i < total; i += kTokens) {
    EXPECT_EQ(static_cast<int>(keys.data()[4 * i]) % kTokens, 0);
  }
}

TEST(KvCacheStoreTest, CacheWithoutCodes) {
  auto store = MakeStore(kMiB);
  ASSERT_TRUE(store->CreateCache("plain", {2, 8, 0}, false).ok());
  const Tokens t = MakeTokens({2, 8, 0}, 5, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(store->Append("plain", t.keys, t.values, "x").status()));
  ASSERT_TRUE(store->Append("plain", t.keys, t.values, "").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(store->ReadCodes("plain", 0, 0).status()));
  EXPECT_EQ(store->List().size(), 1u);
}

}  // namespace
}  // namespace tandem::ml::worker
