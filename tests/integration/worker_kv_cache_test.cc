// KV caches as resources over the wire: starts the real tandem-worker on
// loopback (port 0) with a 1 MiB cache budget (--max_gpu_mb=1; host memory
// on this build) and 1 MiB messages, then over gRPC creates a cache,
// appends tokens in several streamed appends (each in many chunks), runs
// spotlight.topk, attention.dense and adakv.compress naming the cache, and
// checks every answer equals the same kernel run with the tensors sent in
// the request; then adakv.compress's kept + cu_seqlens fed back to
// adakv.decode on the cache, against a CPU reference computed here from
// the same keys and values. KvCacheAdversarialTest (label adversarial) sends what a
// hostile or broken client would: appends to a dropped cache, past the
// budget (RESOURCE_EXHAUSTED, nothing appended), with a wrong head_dim or
// dtype (INVALID_ARGUMENT), kernels naming an unknown cache (NOT_FOUND),
// while the worker keeps serving.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ml/kernels/adakv.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/worker/tensor_codec.h"
#include "ml/worker/tensor_stream.h"
#include "proto/worker.grpc.pb.h"
#include "tests/integration/worker_process.h"

namespace tandem {
namespace {

using ml::kernels::Tensor;
using ml::kernels::testing::RandomTensor;
using ml::worker::EncodeBytes;
using ml::worker::EncodeFloat;
using ml::worker::EncodeInt64;
using ::tandem::testing::WorkerProcess;
using Code = grpc::StatusCode;

constexpr size_t kChunkBytes = 4096;                   // many chunks per append
constexpr int kHeads = 2, kDim = 32, kCodeBytes = 16;  // 128-bit codes

// (heads, n, width) rows [from, from + n) of a (heads, total, width) block.
std::string Slice(const std::string& all, int64_t total, int64_t width, int64_t from, int64_t n) {
  std::string out;
  for (int h = 0; h < kHeads; ++h) out += all.substr((h * total + from) * width, n * width);
  return out;
}
std::string Floats(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.ptr()), t.size() * sizeof(float));
}
std::vector<int64_t> Int64s(const proto::Tensor& t) {
  std::vector<int64_t> v(t.data().size() / sizeof(int64_t));
  std::memcpy(v.data(), t.data().data(), v.size() * sizeof(int64_t));
  return v;
}
std::vector<float> FloatValues(const proto::Tensor& t) {
  std::vector<float> v(t.data().size() / sizeof(float));
  std::memcpy(v.data(), t.data().data(), v.size() * sizeof(float));
  return v;
}

class KvCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    process_ = new WorkerProcess;
    if (!process_->Start(TANDEM_WORKER_BINARY, {"--listen=127.0.0.1:0", "--max_concurrency=2",
                                                "--max_gpu_mb=1", "--max_message_mb=1"})) {
      return;
    }
    stub_ = proto::Worker::NewStub(
                grpc::CreateChannel(process_->address(), grpc::InsecureChannelCredentials()))
                .release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    stub_ = nullptr;
    if (process_ != nullptr && process_->Alive()) {
      EXPECT_EQ(process_->Stop(), 0);  // clean exit on SIGTERM
    }
    delete process_;
    process_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(stub_, nullptr) << "tandem-worker did not start"; }

  static void Deadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  static grpc::Status Create(const std::string& name, int head_dim, bool replace = false,
                             proto::KvCacheInfo* info = nullptr) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::CreateKvCacheRequest req;
    req.mutable_spec()->set_name(name);
    req.mutable_spec()->set_heads(kHeads);
    req.mutable_spec()->set_head_dim(head_dim);
    req.mutable_spec()->set_code_bits(kCodeBytes * 8);
    req.mutable_spec()->set_replace(replace);
    proto::KvCacheInfo ignored;
    return stub_->CreateKvCache(&ctx, req, info != nullptr ? info : &ignored);
  }

  // AppendKvCache of whole tensors, split into chunks of kChunkBytes.
  static grpc::Status Append(const std::string& name, const std::vector<proto::Tensor>& tensors,
                             proto::KvCacheInfo* info = nullptr) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::KvCacheInfo ignored;
    auto writer = stub_->AppendKvCache(&ctx, info != nullptr ? info : &ignored);
    proto::KvCacheAppend append;
    append.set_name(name);
    for (const proto::Tensor& t : tensors) *append.add_tensors() = t;
    for (const auto& c : ml::worker::SplitKvAppend(append, kChunkBytes)) {
      if (!writer->Write(c)) break;  // the worker answered early
    }
    writer->WritesDone();
    return writer->Finish();
  }
  static grpc::Status Append(const std::string& name, const Tensor& k, const Tensor& v,
                             const std::string& codes, proto::KvCacheInfo* info = nullptr) {
    return Append(name,
                  {EncodeFloat("keys", k), EncodeFloat("values", v),
                   EncodeBytes("codes", {k.dim(0), k.dim(1), kCodeBytes}, codes)},
                  info);
  }

  static grpc::Status Drop(const std::string& name, int64_t* freed = nullptr) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::DropKvCacheRequest req;
    req.set_name(name);
    proto::DropKvCacheResponse resp;
    grpc::Status s = stub_->DropKvCache(&ctx, req, &resp);
    if (freed != nullptr) *freed = resp.freed_bytes();
    return s;
  }

  static proto::ListKvCachesResponse List() {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::ListKvCachesResponse resp;
    EXPECT_TRUE(stub_->ListKvCaches(&ctx, {}, &resp).ok());
    return resp;
  }

  static grpc::Status Run(const proto::KernelRequest& req, proto::KernelResponse* resp) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub_->Run(&ctx, req, resp);
  }

  static void ExpectSameOutputs(const proto::KernelResponse& a, const proto::KernelResponse& b) {
    ASSERT_EQ(a.outputs_size(), b.outputs_size());
    for (int i = 0; i < a.outputs_size(); ++i) {
      EXPECT_EQ(a.outputs(i).data(), b.outputs(i).data()) << "output " << i;
    }
  }

  static WorkerProcess* process_;
  static proto::Worker::Stub* stub_;
};

WorkerProcess* KvCacheTest::process_ = nullptr;
proto::Worker::Stub* KvCacheTest::stub_ = nullptr;

TEST_F(KvCacheTest, KernelsOnTheCacheEqualTensorsSent) {
  constexpr int64_t kTokens = 300;
  const Tensor keys = RandomTensor({kHeads, kTokens, kDim}, 1);
  const Tensor values = RandomTensor({kHeads, kTokens, kDim}, 2);
  std::string codes(kHeads * kTokens * kCodeBytes, '\0');
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<char>((i * 197 + 3) % 253);

  proto::KvCacheInfo info;
  ASSERT_TRUE(Create("seq", kDim, false, &info).ok());
  EXPECT_EQ(info.tokens(), 0);
  EXPECT_EQ(info.backend(), "cpu");
  // Three appends of 17, 83 and 200 tokens, each streamed in many chunks.
  int64_t from = 0;
  for (int64_t n : {17, 83, 200}) {
    const std::string k = Slice(Floats(keys), kTokens, kDim * 4, from, n);
    const std::string v = Slice(Floats(values), kTokens, kDim * 4, from, n);
    std::vector<float> kf(k.size() / 4), vf(v.size() / 4);
    std::memcpy(kf.data(), k.data(), k.size());
    std::memcpy(vf.data(), v.data(), v.size());
    grpc::Status s = Append("seq", *Tensor::FromData({kHeads, n, kDim}, kf),
                            *Tensor::FromData({kHeads, n, kDim}, vf),
                            Slice(codes, kTokens, kCodeBytes, from, n), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    from += n;
    EXPECT_EQ(info.tokens(), from);
  }
  const proto::ListKvCachesResponse list = List();
  ASSERT_EQ(list.caches_size(), 1);
  EXPECT_EQ(list.caches(0).tokens(), kTokens);
  EXPECT_EQ(list.used_bytes(), list.caches(0).bytes());
  EXPECT_EQ(list.max_bytes(), 1 << 20);
  EXPECT_EQ(list.backend(), "cpu");

  // spotlight.topk on each head's cached codes vs the codes sent.
  const proto::Tensor query = EncodeBytes("query_codes", {4, kCodeBytes}, std::string(64, '\x3c'));
  for (int h = 0; h < kHeads; ++h) {
    proto::KernelRequest direct;
    direct.set_kernel("spotlight.topk");
    direct.set_backend("cpu");
    *direct.add_inputs() = query;
    *direct.add_inputs() =
        EncodeBytes("key_codes", {kTokens, kCodeBytes},
                    codes.substr(h * kTokens * kCodeBytes, kTokens * kCodeBytes));
    (*direct.mutable_params())["k"] = 16;
    proto::KernelRequest cached = direct;
    cached.mutable_inputs()->RemoveLast();
    cached.mutable_kv_cache()->set_name("seq");
    cached.mutable_kv_cache()->set_head(h);
    proto::KernelResponse want, got;
    ASSERT_TRUE(Run(direct, &want).ok());
    grpc::Status s = Run(cached, &got);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(got.outputs(0).shape(0), 16);
    ExpectSameOutputs(got, want);
  }
  // Attention and Ada-KV compaction over the cached keys and values.
  const Tensor q = RandomTensor({4, kTokens, kDim}, 3);
  for (const char* kernel : {"attention.dense", "adakv.compress"}) {
    proto::KernelRequest direct;
    direct.set_kernel(kernel);
    *direct.add_inputs() = EncodeFloat("q", q);
    *direct.add_inputs() = EncodeFloat("k", keys);
    *direct.add_inputs() = EncodeFloat("v", values);
    if (std::string(kernel) == "adakv.compress") (*direct.mutable_params())["budget"] = 64;
    proto::KernelRequest cached = direct;
    cached.mutable_inputs()->DeleteSubrange(1, 2);
    cached.mutable_kv_cache()->set_name("seq");
    proto::KernelResponse want, got;
    grpc::Status ref = Run(direct, &want);
    ASSERT_TRUE(ref.ok()) << kernel << ": " << ref.error_message();
    grpc::Status s = Run(cached, &got);
    ASSERT_TRUE(s.ok()) << kernel << ": " << s.error_message();
    ExpectSameOutputs(got, want);
  }
  // Capabilities name the kernels that take a cache.
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    proto::CapabilitiesResponse caps;
    ASSERT_TRUE(stub_->Capabilities(&ctx, {}, &caps).ok());
    int accepting = 0;
    for (const proto::KernelInfo& k : caps.kernels()) accepting += k.accepts_kv_cache();
    EXPECT_EQ(accepting, 5);
  }
  int64_t freed = 0;
  ASSERT_TRUE(Drop("seq", &freed).ok());
  EXPECT_EQ(freed, info.bytes());
  EXPECT_EQ(List().used_bytes(), 0);
  EXPECT_EQ(List().caches_size(), 0);
}

// The product flow: adakv.compress once on the cache, then each decode step
// sends q + kept + cu_seqlens only. The answer equals softmax(q k^T /
// sqrt d) v over each KV head's kept rows, computed here in double from the
// keys and values appended, and kernels::CompactDecodeAttention.
TEST_F(KvCacheTest, CompressThenDecodeOnTheCache) {
  constexpr int64_t kTokens = 256, kQueryHeads = 4, kGroup = kQueryHeads / kHeads;
  const Tensor keys = RandomTensor({kHeads, kTokens, kDim}, 11);
  const Tensor values = RandomTensor({kHeads, kTokens, kDim}, 12);
  ASSERT_TRUE(Create("decode", kDim).ok());
  for (auto [from, n] : {std::pair<int64_t, int64_t>{0, 100}, {100, 156}}) {
    std::vector<float> kf, vf;
    for (int h = 0; h < kHeads; ++h) {
      const int64_t at = (h * kTokens + from) * kDim;
      kf.insert(kf.end(), keys.ptr() + at, keys.ptr() + at + n * kDim);
      vf.insert(vf.end(), values.ptr() + at, values.ptr() + at + n * kDim);
    }
    grpc::Status s =
        Append("decode", *Tensor::FromData({kHeads, n, kDim}, kf),
               *Tensor::FromData({kHeads, n, kDim}, vf), std::string(kHeads * n * kCodeBytes, 'c'));
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  proto::KernelRequest compress;
  compress.set_kernel("adakv.compress");
  *compress.add_inputs() = EncodeFloat("q", RandomTensor({kQueryHeads, kTokens, kDim}, 13));
  compress.mutable_kv_cache()->set_name("decode");
  (*compress.mutable_params())["window"] = 16;
  (*compress.mutable_params())["budget"] = 48;
  proto::KernelResponse compressed;
  grpc::Status s = Run(compress, &compressed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(compressed.outputs_size(), 4);
  const proto::Tensor& cu_t = compressed.outputs(2);
  const proto::Tensor& kept_t = compressed.outputs(3);
  const std::vector<int64_t> cu = Int64s(cu_t), kept = Int64s(kept_t);
  ASSERT_EQ(cu.size(), static_cast<size_t>(kHeads + 1));
  ASSERT_EQ(cu.back(), static_cast<int64_t>(kept.size()));
  ASSERT_LT(kept.size(), static_cast<size_t>(kHeads * kTokens));  // really compacted

  std::vector<std::vector<int64_t>> lists;
  for (int h = 0; h < kHeads; ++h)
    lists.emplace_back(kept.begin() + cu[h], kept.begin() + cu[h + 1]);
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const Tensor q = RandomTensor({kQueryHeads, kDim}, 20 + step);
    proto::KernelRequest decode;
    decode.set_kernel("adakv.decode");
    decode.set_backend("cpu");
    *decode.add_inputs() = EncodeFloat("q", q);
    *decode.add_inputs() = kept_t;
    *decode.add_inputs() = cu_t;
    decode.mutable_kv_cache()->set_name("decode");
    proto::KernelResponse got;
    s = Run(decode, &got);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(got.outputs_size(), 1);
    ASSERT_EQ(got.outputs(0).shape_size(), 2);
    EXPECT_EQ(got.outputs(0).shape(0), kQueryHeads);
    EXPECT_EQ(got.outputs(0).shape(1), kDim);
    const std::vector<float> out = FloatValues(got.outputs(0));
    ASSERT_EQ(out.size(), static_cast<size_t>(kQueryHeads * kDim));
    // Naive reference, double precision.
    for (int64_t h = 0; h < kQueryHeads; ++h) {
      const int64_t kv = h / kGroup;
      std::vector<double> w;
      double top = -INFINITY, sum = 0;
      for (int64_t p : lists[kv]) {
        double dot = 0;
        for (int64_t j = 0; j < kDim; ++j) {
          dot += static_cast<double>(q.ptr()[h * kDim + j]) *
                 keys.ptr()[(kv * kTokens + p) * kDim + j];
        }
        w.push_back(dot / std::sqrt(static_cast<double>(kDim)));
        top = std::max(top, w.back());
      }
      for (double& x : w) sum += (x = std::exp(x - top));
      for (int64_t j = 0; j < kDim; ++j) {
        double o = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          o += w[i] / sum * values.ptr()[(kv * kTokens + lists[kv][i]) * kDim + j];
        }
        EXPECT_NEAR(out[h * kDim + j], o, 1e-5) << "head " << h << " dim " << j;
      }
    }
    // The library path on the same host tensors.
    auto compact = ml::kernels::CompactKvCache(keys, values, lists);
    ASSERT_TRUE(compact.ok());
    auto want = ml::kernels::CompactDecodeAttention(q, *compact);
    ASSERT_TRUE(want.ok());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want->ptr()[i], 1e-6) << i;
  }
  // A position past the cache is refused, and the worker keeps serving.
  proto::KernelRequest bad;
  bad.set_kernel("adakv.decode");
  *bad.add_inputs() = EncodeFloat("q", RandomTensor({kQueryHeads, kDim}, 30));
  std::vector<int64_t> past = kept;
  past.back() = kTokens;
  *bad.add_inputs() = EncodeInt64("kept", {static_cast<int64_t>(past.size())}, past);
  *bad.add_inputs() = cu_t;
  bad.mutable_kv_cache()->set_name("decode");
  proto::KernelResponse ignored;
  s = Run(bad, &ignored);
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("outside [0, N = 256)"), std::string::npos) << s.error_message();
  ASSERT_TRUE(Drop("decode").ok());
  EXPECT_EQ(List().caches_size(), 0);
}

using KvCacheAdversarialTest = KvCacheTest;

TEST_F(KvCacheAdversarialTest, RefusalsLeaveTheWorkerServing) {
  const Tensor k4 = RandomTensor({kHeads, 4, kDim}, 5);
  const std::string c4(kHeads * 4 * kCodeBytes, 'c');
  ASSERT_TRUE(Create("victim", kDim).ok());
  ASSERT_TRUE(Append("victim", k4, k4, c4).ok());
  // Created twice without replace.
  EXPECT_EQ(Create("victim", kDim).error_code(), Code::FAILED_PRECONDITION);

  // Past the 1 MiB budget: 2 heads x 2000 tokens x (2 x 32 x 4 + 16) bytes
  // = 1.09 MB. Refused on the header, nothing appended.
  const Tensor big = RandomTensor({kHeads, 2000, kDim}, 6);
  grpc::Status s = Append("victim", big, big, std::string(kHeads * 2000 * kCodeBytes, 'b'));
  EXPECT_EQ(s.error_code(), Code::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("out of memory"), std::string::npos);
  EXPECT_EQ(List().caches(0).tokens(), 4);

  // A head_dim the cache does not have; values of another length; float
  // codes; a missing tensor: INVALID_ARGUMENT, nothing appended.
  const Tensor wide = RandomTensor({kHeads, 4, kDim * 2}, 7);
  s = Append("victim", wide, wide, c4);
  EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("head_dim = 32"), std::string::npos) << s.error_message();
  EXPECT_EQ(Append("victim", k4, RandomTensor({kHeads, 5, kDim}, 8), c4).error_code(),
            Code::INVALID_ARGUMENT);
  EXPECT_EQ(Append("victim", {EncodeFloat("keys", k4), EncodeFloat("values", k4),
                              EncodeFloat("codes", RandomTensor({kHeads, 4, 4}, 9))})
                .error_code(),
            Code::INVALID_ARGUMENT);
  EXPECT_EQ(Append("victim", {EncodeFloat("keys", k4), EncodeFloat("values", k4)}).error_code(),
            Code::INVALID_ARGUMENT);
  EXPECT_EQ(List().caches(0).tokens(), 4);

  // A kernel naming an unknown cache, or reading past what is held.
  proto::KernelRequest r;
  r.set_kernel("spotlight.topk");
  *r.add_inputs() = EncodeBytes("query_codes", {1, kCodeBytes}, std::string(kCodeBytes, 'q'));
  r.mutable_kv_cache()->set_name("nobody");
  proto::KernelResponse resp;
  s = Run(r, &resp);
  EXPECT_EQ(s.error_code(), Code::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nobody"), std::string::npos);
  r.mutable_kv_cache()->set_name("victim");
  r.mutable_kv_cache()->set_tokens(5);
  EXPECT_EQ(Run(r, &resp).error_code(), Code::FAILED_PRECONDITION);
  r.mutable_kv_cache()->set_tokens(0);
  r.mutable_kv_cache()->set_head(kHeads);
  EXPECT_EQ(Run(r, &resp).error_code(), Code::INVALID_ARGUMENT);

  // Append to, drop and run on a dropped cache.
  ASSERT_TRUE(Drop("victim").ok());
  EXPECT_EQ(Append("victim", k4, k4, c4).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(Drop("victim").error_code(), Code::NOT_FOUND);
  r.mutable_kv_cache()->set_head(0);
  EXPECT_EQ(Run(r, &resp).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(List().used_bytes(), 0);

  // Bad specs.
  EXPECT_EQ(Create("bad/name", kDim).error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(Create("zero", 0).error_code(), Code::INVALID_ARGUMENT);

  // Still serving: a fresh cache takes the whole budget's worth.
  ASSERT_TRUE(Create("after", kDim).ok());
  EXPECT_TRUE(Append("after", k4, k4, c4).ok());
  ASSERT_TRUE(Drop("after").ok());
}

}  // namespace
}  // namespace tandem
