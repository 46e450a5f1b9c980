#include "ml/worker/model_store.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/search/trajmamba.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

TensorSet RenTensors(int64_t dim = 16, int64_t heads = 2, int64_t layers = 2) {
  return ModelTensors(ModelWeights(*kernels::RenWeights::Random(dim, heads, layers, 3)));
}
const ModelConfig kRen = {{"dim", 16}, {"heads", 2}, {"layers", 2}};

int64_t Bytes(const TensorSet& set) {
  int64_t n = 0;
  for (const NamedTensor& t : set) n += t.value.size() * 4;
  return n;
}

TensorSet Filled(int64_t n, float value) {
  return {{"x", *Tensor::FromData({n}, std::vector<float>(static_cast<size_t>(n), value))}};
}

TEST(ModelStoreTest, LoadListReadUnload) {
  ModelStore store(kMiB);
  const TensorSet tensors = RenTensors();
  absl::StatusOr<ModelSummary> s = store.Load("region", 0, "ren", kRen, tensors, false);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->version, 1u);
  EXPECT_EQ(s->bytes, Bytes(tensors));
  EXPECT_EQ(store.used_bytes(), Bytes(tensors));
  ASSERT_TRUE(store
                  .Load("hash", 7, "spotlight.hash", {{"dim", 32}},
                        ModelTensors(ModelWeights(*kernels::SpotlightHashWeights::Random(32, 1))),
                        false)
                  .ok());

  const std::vector<ModelSummary> list = store.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "hash");
  EXPECT_EQ(list[0].version, 7u);
  EXPECT_EQ(list[0].bytes, 4 * (2 * 32 * 32 + 2 * 32));
  EXPECT_EQ(list[1].name, "region");
  EXPECT_EQ(list[1].tensors.size(), tensors.size());
  EXPECT_EQ(list[1].tensors[0].name, "fourier");
  EXPECT_EQ(list[1].tensors[0].shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(store.used_bytes(), list[0].bytes + list[1].bytes);

  absl::StatusOr<ModelSnapshot> snap = store.Read("region", 1);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(snap->tensors[i].name, tensors[i].name);
    EXPECT_EQ(snap->tensors[i].value.shape(), tensors[i].value.shape());
    EXPECT_TRUE(std::equal(snap->tensors[i].value.data().begin(),
                           snap->tensors[i].value.data().end(), tensors[i].value.data().begin()));
  }

  absl::StatusOr<int64_t> freed = store.Unload("region", 0);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, Bytes(tensors));
  EXPECT_EQ(store.used_bytes(), list[0].bytes);
  EXPECT_EQ(store.Acquire("region", 0, false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Unload("region", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelStoreTest, UnknownNamesAndVersions) {
  ModelStore store(kMiB);
  absl::Status s = store.Acquire("nobody", 0, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'nobody'"));
  EXPECT_EQ(store.Read("nobody", 0).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store.Load("m", 3, "tensors", {}, Filled(4, 1), false).ok());
  s = store.Acquire("m", 2, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("version 3"));
  EXPECT_EQ(store.Unload("m", 4).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store.Acquire("m", 3, false).ok());
  // Loaded twice: refused without replace; with it, version 4 and the old
  // bytes released.
  EXPECT_EQ(store.Load("m", 0, "tensors", {}, Filled(4, 1), false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<ModelSummary> r = store.Load("m", 0, "tensors", {}, Filled(8, 2), true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 4u);
  EXPECT_EQ(store.used_bytes(), 32);
  EXPECT_EQ(store.Load("bad name!", 0, "tensors", {}, Filled(1, 1), false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelStoreTest, BudgetExhaustion) {
  ModelStore store(1000);
  ASSERT_TRUE(store.Load("a", 0, "tensors", {}, Filled(200, 1), false).ok());  // 800 bytes
  absl::Status s = store.Load("b", 0, "tensors", {}, Filled(100, 1), false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("out of memory"));
  EXPECT_EQ(store.used_bytes(), 800);
  EXPECT_EQ(store.List().size(), 1u);
  EXPECT_TRUE(store.Load("b", 0, "tensors", {}, Filled(50, 1), false).ok());
  // Replacing counts the new size against what the old one frees.
  EXPECT_TRUE(store.Load("a", 0, "tensors", {}, Filled(200, 3), true).ok());
  EXPECT_EQ(store.CheckFits(1, "").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store.CheckFits(800, "a").ok());
  // A layout too large for the budget is refused before it is allocated.
  ModelStore tiny(64);
  EXPECT_EQ(tiny.Load("r", 0, "ren", kRen, {}, false).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Optimizer state counts too.
  absl::StatusOr<std::unique_ptr<ModelLease>> lease = store.Acquire("b", 0, true);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)->SetOptimizerBytes(1000).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE((*lease)->SetOptimizerBytes(0).ok());
}

TEST(ModelStoreTest, WrongTensorsForTheKindAreRefused) {
  ModelStore store(kMiB);
  auto load = [&](const std::string& kind, const ModelConfig& c, TensorSet t) {
    return store.Load("m", 0, kind, c, std::move(t), false).status();
  };
  TensorSet t = RenTensors();
  t[1].value = *Tensor::Zeros({16, 15});  // w_p
  absl::Status s = load("ren", kRen, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'w_p'"));
  t = RenTensors();
  t.pop_back();
  EXPECT_THAT(load("ren", kRen, t).message(), HasSubstr("needs tensor 'w_out'"));
  t = RenTensors();
  t.push_back({"extra", *Tensor::Zeros({1})});
  EXPECT_THAT(load("ren", kRen, t).message(), HasSubstr("no tensor 'extra'"));
  t = RenTensors();
  t.push_back(t[0]);
  EXPECT_THAT(load("ren", kRen, t).message(), HasSubstr("sent twice"));
  // Config: missing key, unknown key, sizes the kind refuses, unknown kind.
  EXPECT_THAT(load("ren", {{"dim", 16}, {"heads", 2}}, RenTensors()).message(),
              HasSubstr("needs config 'layers'"));
  EXPECT_THAT(
      load("ren", {{"dim", 16}, {"heads", 2}, {"layers", 2}, {"x", 1}}, RenTensors()).message(),
      HasSubstr("unknown config key 'x'"));
  EXPECT_EQ(load("ren", {{"dim", 16}, {"heads", 3}, {"layers", 2}}, RenTensors()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(load("spotlight.hash", {{"dim", 30}}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(load("gpt", {}, {}).message(), HasSubstr("unknown model kind 'gpt'"));
  EXPECT_TRUE(store.List().empty());
  EXPECT_EQ(store.used_bytes(), 0);
}

TEST(ModelStoreTest, NonFiniteWeightsAreRefused) {
  ModelStore store(kMiB);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    TensorSet t = RenTensors();
    t[5].value.mutable_data()[3] = bad;
    absl::Status s = store.Load("m", 0, "ren", kRen, t, false).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("NaN or infinity"));
    EXPECT_EQ(store.Load("g", 0, "tensors", {}, Filled(3, bad), false).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(store.List().empty());
}

TEST(ModelStoreTest, EveryTypedKindRoundTrips) {
  ModelStore store(64 * kMiB);
  kernels::search::TrajMambaConfig cfg;
  cfg.d_model = 8;
  cfg.d_state = 4;
  cfg.head_dim = 4;
  cfg.layers = 1;
  cfg.road_vocab = 5;
  const TensorSet traj =
      ModelTensors(ModelWeights(*kernels::search::TrajMambaWeights::Random(cfg, 1)));
  const ModelConfig tc = {{"d_model", 8}, {"d_state", 4}, {"head_dim", 4},  {"expand", 2},
                          {"d_conv", 4},  {"layers", 1},  {"road_vocab", 5}};
  ASSERT_TRUE(store.Load("traj", 0, "trajmamba.encoder", tc, traj, false).ok());
  const TensorSet mask =
      ModelTensors(ModelWeights(*kernels::search::MaskGeneratorWeights::Random(8, 4, 2)));
  ASSERT_TRUE(
      store.Load("mask", 0, "trajmamba.mask", {{"dim", 8}, {"hidden", 4}}, mask, false).ok());
  absl::StatusOr<ModelSnapshot> back = store.Read("traj", 0);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->tensors.size(), traj.size());
  for (size_t i = 0; i < traj.size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, traj[i].name);
    EXPECT_TRUE(std::equal(traj[i].value.data().begin(), traj[i].value.data().end(),
                           back->tensors[i].value.data().begin()));
  }
  absl::StatusOr<std::unique_ptr<ModelLease>> lease = store.Acquire("mask", 0, false);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(std::get<kernels::search::MaskGeneratorWeights>((*lease)->model().weights).w1.shape(),
            (std::vector<int64_t>{8, 4}));
  EXPECT_EQ((*lease)->mutable_model(), nullptr);  // shared leases cannot write
}

// Readers share a model while a trainer rewrites it step by step under an
// exclusive lease: a reader must never see a half-written step (all values
// of the model are equal after every step), and the version counts steps.
TEST(ModelStoreTest, ConcurrentReadersAndATrainer) {
  ModelStore store(kMiB);
  constexpr int kValues = 4096, kSteps = 200;
  ASSERT_TRUE(store.Load("m", 0, "tensors", {}, Filled(kValues, 0), false).ok());
  std::atomic<bool> done{false}, torn{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        absl::StatusOr<std::unique_ptr<ModelLease>> lease = store.Acquire("m", 0, false);
        if (!lease.ok()) {
          torn = true;
          return;
        }
        const Tensor& x = std::get<TensorSet>((*lease)->model().weights)[0].value;
        for (float v : x.data()) {
          if (v != x.data()[0]) torn = true;
        }
        ++reads;
      }
    });
  }
  for (int step = 1; step <= kSteps; ++step) {
    absl::StatusOr<std::unique_ptr<ModelLease>> lease = store.Acquire("m", 0, true);
    ASSERT_TRUE(lease.ok());
    Tensor& x = std::get<TensorSet>((*lease)->mutable_model()->weights)[0].value;
    for (float& v : x.mutable_data()) v = static_cast<float>(step);
    (*lease)->FinishStep();
  }
  while (reads.load() < 100) std::this_thread::yield();
  done = true;
  for (std::thread& t : readers) t.join();
  EXPECT_FALSE(torn.load());
  const std::vector<ModelSummary> list = store.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].version, 1u + kSteps);
  EXPECT_EQ(list[0].train_steps, kSteps);
  absl::StatusOr<ModelSnapshot> snap = store.Read("m", 1 + kSteps);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->tensors[0].value.data()[kValues - 1], static_cast<float>(kSteps));
}

// A lease outlives an unload: the kernel holding it finishes on the old
// weights, the name is gone at once and the bytes are released.
TEST(ModelStoreTest, UnloadWhileLeased) {
  ModelStore store(kMiB);
  ASSERT_TRUE(store.Load("m", 0, "tensors", {}, Filled(10, 5), false).ok());
  absl::StatusOr<std::unique_ptr<ModelLease>> lease = store.Acquire("m", 0, false);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(store.Unload("m", 0).ok());
  EXPECT_EQ(store.used_bytes(), 0);
  EXPECT_EQ(std::get<TensorSet>((*lease)->model().weights)[0].value.data()[9], 5.0f);
  EXPECT_EQ(store.Acquire("m", 0, false).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::ml::worker
