// Training throughput (samples/s) of the MLP and the small CNN on 1 and 2
// threads, one mini-batch gradient + Adam step per iteration, on synthetic
// Fashion-MNIST-shaped inputs (28x28, 10 classes).
#include <random>

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
    benchmark::DoNotOptimize(opt->Step(model.mutable_params(), grad));
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      3.0 * ForwardFlopsPerSample(model) * static_cast<double>(state.iterations() * batch) / 1e9,
      benchmark::Counter::kIsRate);
}

void BM_MlpTrain(benchmark::State& state) {
  auto model = *MakeMlp(784, {256, 128}, 10);
  model->InitFromSeed(1);
  RunTraining(state, *model);
}
BENCHMARK(BM_MlpTrain)->ArgsProduct({{1, 2}, {64}})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CnnTrain(benchmark::State& state) {
  auto model = *MakeCnn({1, 28, 28}, 10);
  model->InitFromSeed(1);
  RunTraining(state, *model);
}
BENCHMARK(BM_CnnTrain)->ArgsProduct({{1, 2}, {64}})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::ml
