// Training throughput (samples/s) of the MLP, the small CNN and a deeper CNN
// on 1 and 2 threads, one mini-batch gradient + Adam step per iteration, on
// synthetic Fashion-MNIST-shaped inputs (28x28, 10 classes). The PyTorch
// peer is bench/ml_torch_compare.py (same models, batch and step).
#include <random>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "ml/model/model_zoo.h"
#include "ml/optim/optimizer.h"
#include "ml/train/trainer.h"

namespace tandem::ml {
namespace {

Dataset Synthetic(int64_t n) {
  Dataset d;
  d.num_classes = 10;
  d.shape = {1, 28, 28};
  d.features = Matrix::Random(n, 784).cwiseAbs();
  std::mt19937_64 gen(1);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int>(gen() % 10));
  return d;
}

void RunTraining(benchmark::State& state, Model& model) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t batch = state.range(1);
  static const Dataset data = Synthetic(1024);
  auto engine = *GradientEngine::Create(threads);
  auto opt = *CreateAdam({});
  std::vector<int64_t> rows(static_cast<size_t>(batch));
  std::vector<float> grad;
  int64_t offset = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < batch; ++i) rows[i] = (offset + i) % data.size();
    offset += batch;
    auto s = engine->ComputeGradient(model, data, rows, &grad);
    if (!s.ok()) state.SkipWithError(s.status().ToString().c_str());
    benchmark::DoNotOptimize(engine->ApplyStep(*opt, model, grad));
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                   benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      3.0 * ForwardFlopsPerSample(model) * static_cast<double>(state.iterations() * batch) / 1e9,
      benchmark::Counter::kIsRate);
}

void BM_MlpTrain(benchmark::State& state) {
  auto model = *MakeMlp(784, {256, 128}, 10);
  model->InitFromSeed(1);
  RunTraining(state, *model);
}
BENCHMARK(BM_MlpTrain)->ArgsProduct({{1, 2}, {64, 256}})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CnnTrain(benchmark::State& state) {
  auto model = *MakeCnn({1, 28, 28}, 10);
  model->InitFromSeed(1);
  RunTraining(state, *model);
}
BENCHMARK(BM_CnnTrain)->ArgsProduct({{1, 2}, {64}})->UseRealTime()->Unit(benchmark::kMillisecond);

// conv32-conv32-pool-conv64-conv64-pool-fc128-fc10 (3x3, pad 1, ReLU after
// each conv/fc): 6 weight tensors + 6 biases, the deeper Fashion-MNIST CNN
// whose client-side cost the federation pays (issue 23 item 4). Pooled convs
// run conv-maxpool-relu (same function as conv-relu-maxpool, see MakeCnn).
absl::StatusOr<std::unique_ptr<Model>> MakeDeepCnn() {
  std::vector<std::unique_ptr<Layer>> layers;
  ImageShape shape{1, 28, 28};
  int index = 0;
  auto conv = [&](int64_t out, bool pooled) -> absl::Status {
    ++index;
    auto c = Conv2DLayer::Create(absl::StrCat("conv", index), shape, {out, 3, 1, 1});
    if (!c.ok()) return c.status();
    shape = (*c)->out_shape();
    layers.push_back(*std::move(c));
    if (pooled) {
      auto p = Pool2DLayer::Create(absl::StrCat("pool", index), PoolKind::kMax, shape, 2, 2);
      if (!p.ok()) return p.status();
      shape = (*p)->out_shape();
      layers.push_back(*std::move(p));
    }
    auto a = ActivationLayer::Create(absl::StrCat("relu", index), Activation::kRelu, shape.size());
    if (!a.ok()) return a.status();
    layers.push_back(*std::move(a));
    return absl::OkStatus();
  };
  for (auto [out, pooled] : {std::pair{32, false}, {32, true}, {64, false}, {64, true}}) {
    if (absl::Status s = conv(out, pooled); !s.ok()) return s;
  }
  layers.push_back(*DenseLayer::Create("fc1", shape.size(), 128));
  layers.push_back(*ActivationLayer::Create("relu_fc1", Activation::kRelu, 128));
  layers.push_back(*DenseLayer::Create("out", 128, 10));
  return Model::Create(std::move(layers));
}

void BM_DeepCnnTrain(benchmark::State& state) {
  auto model = *MakeDeepCnn();
  model->InitFromSeed(1);
  RunTraining(state, *model);
}
BENCHMARK(BM_DeepCnnTrain)
    ->ArgsProduct({{1, 2}, {64}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The MLP step's two parts timed apart at batch 64 (arg 1: 0 = gradient,
// 1 = Adam step), weights unchanged between iterations so each part runs with
// its working set hot: separates the part that scales with threads (the GEMMs)
// from the one that does not (Adam's sqrt/div and memory traffic); see the
// thread-scaling note in bench/training.md.
void BM_MlpStepParts(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool adam_only = state.range(1) == 1;
  auto model = *MakeMlp(784, {256, 128}, 10);
  model->InitFromSeed(1);
  static const Dataset data = Synthetic(1024);
  auto engine = *GradientEngine::Create(threads);
  auto opt = *CreateAdam({});
  std::vector<int64_t> rows(64);
  for (int64_t i = 0; i < 64; ++i) rows[i] = i;
  std::vector<float> grad;
  if (!engine->ComputeGradient(*model, data, rows, &grad).ok()) state.SkipWithError("gradient");
  state.SetLabel(adam_only ? "adam step" : "gradient");
  for (auto _ : state) {
    if (adam_only) {
      benchmark::DoNotOptimize(engine->ApplyStep(*opt, *model, grad));
    } else {
      benchmark::DoNotOptimize(engine->ComputeGradient(*model, data, rows, &grad));
    }
  }
}
BENCHMARK(BM_MlpStepParts)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::ml
