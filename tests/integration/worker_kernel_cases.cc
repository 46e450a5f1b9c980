#include "tests/integration/worker_kernel_cases.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "ml/kernels/search/traj_mask.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/tensor.h"
#include "ml/kernels/testing/random_tensor.h"
#include "ml/model/model_zoo.h"
#include "ml/worker/model_kinds.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::testing {
namespace {

using ml::kernels::Tensor;
using ml::kernels::testing::RandomTensor;
using ml::worker::EncodeBytes;
using ml::worker::EncodeFloat;
using ml::worker::EncodeInt32;
using ml::worker::EncodeInt64;

KernelCase Case(const std::string& kernel, std::vector<proto::Tensor> inputs,
                const std::map<std::string, double>& params) {
  KernelCase c;
  c.request.set_kernel(kernel);
  c.request.set_backend("cpu");
  for (proto::Tensor& t : inputs) *c.request.add_inputs() = std::move(t);
  for (const auto& [k, v] : params) (*c.request.mutable_params())[k] = v;
  return c;
}

proto::Tensor F(const char* name, std::vector<int64_t> shape, uint64_t seed, float scale = 1.0f) {
  return EncodeFloat(name, RandomTensor(std::move(shape), seed, scale));
}

proto::Tensor Literal(const char* name, std::vector<int64_t> shape, std::vector<float> values) {
  return EncodeFloat(name, *Tensor::FromData(std::move(shape), std::move(values)));
}

// `rows` x `bytes` uniformly random bytes from mt19937_64(seed).
proto::Tensor RandomBytes(const char* name, int64_t rows, int64_t bytes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::string data(static_cast<size_t>(rows * bytes), '\0');
  for (char& b : data) b = static_cast<char>(gen() & 0xff);
  return EncodeBytes(name, {rows, bytes}, std::move(data));
}

// The four Spotlight hash weight tensors for d = 128 (seed 5).
std::vector<proto::Tensor> HashWeights() {
  const auto w = *ml::kernels::SpotlightHashWeights::Random(128, 5);
  return {EncodeFloat("w1", w.w1), EncodeFloat("b1", w.b1), EncodeFloat("w2", w.w2),
          EncodeFloat("b2", w.b2)};
}

std::vector<proto::Tensor> Concat(std::vector<proto::Tensor> a, std::vector<proto::Tensor> b) {
  for (proto::Tensor& t : b) a.push_back(std::move(t));
  return a;
}

// Points on the Lorentz hyperboloid <x,x>_L = -k: x = (sqrt(k + |v|^2), v).
proto::Tensor HyperboloidPoints(int64_t n, int64_t d, double k, uint64_t seed) {
  const Tensor v = RandomTensor({n, d}, seed, 0.5f);
  std::vector<float> x;
  for (int64_t r = 0; r < n; ++r) {
    double norm2 = 0;
    for (int64_t j = 0; j < d; ++j) norm2 += double{v.data()[r * d + j]} * v.data()[r * d + j];
    x.push_back(static_cast<float>(std::sqrt(k + norm2)));
    for (int64_t j = 0; j < d; ++j) x.push_back(v.data()[r * d + j]);
  }
  return Literal("points", {n, d + 1}, std::move(x));
}

// Two bandit objectives, three arms; the identity cone.
std::vector<proto::Tensor> Bandit() {
  return {Literal("means", {3, 2}, {1, 0, 0, 1, 0.3f, 0.3f}),
          Literal("cone", {2, 2}, {1, 0, 0, 1})};
}

std::vector<KernelCase> Attention() {
  std::vector<KernelCase> v;
  v.push_back(Case("tensor.copy", {F("x", {37}, 90)}, {}));
  v.push_back(Case("attention.dense",
                   {F("q", {4, 16, 8}, 1), F("k", {2, 16, 8}, 2), F("v", {2, 16, 8}, 3)},
                   {{"causal", 1}}));
  v.push_back(Case("dusa.forward",
                   {F("q", {1, 2, 32, 8}, 4), F("k", {1, 2, 32, 8}, 5), F("v", {1, 2, 32, 8}, 6)},
                   {{"block_size", 8}}));
  v.push_back(Case("cat.mix", {F("z_logits", {2, 2, 24}, 7), F("v", {2, 24, 8}, 8)}, {}));
  v.push_back(Case(
      "cat.forward",
      {F("x", {1, 16, 8}, 9), F("w_a", {8, 2}, 10), F("w_v", {8, 8}, 11), F("w_o", {8, 8}, 12)},
      {{"gather", 1}}));
  v.push_back(Case("adakv.scores", {F("q", {4, 40, 8}, 13), F("k", {2, 40, 8}, 14)},
                   {{"window", 8}, {"kernel", 5}}));
  v.push_back(Case("adakv.compress",
                   {F("q", {4, 40, 8}, 13), F("k", {2, 40, 8}, 14), F("v", {2, 40, 8}, 15)},
                   {{"window", 8}, {"kernel", 5}, {"budget", 16}, {"alpha", 0.2}}));
  // One decode step over a compacted cache: KV head 0 keeps 5 positions,
  // head 1 keeps 3 (kept and cu_seqlens as adakv.compress returns them).
  v.push_back(Case("adakv.decode",
                   {F("q", {4, 8}, 13), F("k", {2, 40, 8}, 14), F("v", {2, 40, 8}, 15),
                    EncodeInt64("kept", {8}, {0, 3, 17, 38, 39, 5, 21, 39}),
                    EncodeInt64("cu_seqlens", {3}, {0, 5, 8})},
                   {}));
  v.push_back(Case("spotlight.hash", Concat({F("x", {40, 128}, 16)}, HashWeights()), {}));
  v.push_back(Case("spotlight.topk",
                   {RandomBytes("query_codes", 4, 16, 17), RandomBytes("key_codes", 60, 16, 18)},
                   {{"k", 10}}));
  v.push_back(Case("spotlight.ranking_loss",
                   Concat({F("q", {8, 128}, 19), F("k", {32, 128}, 20)}, HashWeights()),
                   {{"gamma", 8}, {"top_fraction", 0.1}}));
  // Stateless here (no model): one AdamW step from zero moments.
  v.push_back(Case("spotlight.train_step",
                   Concat({F("q", {8, 128}, 19), F("k", {32, 128}, 20)}, HashWeights()),
                   {{"gamma", 8}, {"top_fraction", 0.1}, {"lr", 1e-2}}));
  v.push_back(
      Case("ren.forward",
           {F("features", {32, 6, 6}, 21), Literal("points", {3, 2}, {5, 5, 40, 12, 60, 80})},
           {{"image_size", 84}, {"heads", 4}, {"layers", 2}, {"weight_seed", 7}}));
  // Rows 0 and 3 nearly parallel, so at least one merge happens.
  Tensor tokens = RandomTensor({6, 16}, 22);
  for (int j = 0; j < 16; ++j) tokens.mutable_data()[3 * 16 + j] = 1.01f * tokens.data()[j];
  v.push_back(Case("ren.merge", {EncodeFloat("tokens", tokens)}, {{"threshold", 0.9}}));
  return v;
}

std::vector<KernelCase> Training() {
  std::vector<KernelCase> v;
  v.push_back(Case("dana.plrf_curve", {},
                   {{"v", 200}, {"d", 50}, {"steps", 300}, {"optimizer", 0}, {"log_points", 8}}));
  v.push_back(Case("crossspectra.forward", {F("coefficients", {2, 10}, 30)},
                   {{"layers", 4},
                    {"d_out", 6},
                    {"d_in", 8},
                    {"transform", 0},
                    {"scale", 0.5},
                    {"location_seed", 9}}));
  v.push_back(Case(
      "crossspectra.adjoint", {F("grad_delta", {4, 3, 6, 8}, 31)},
      {{"kappa1", 10}, {"kappa2", 2}, {"transform", 1}, {"scale", 0.5}, {"location_seed", 9}}));
  v.push_back(
      Case("prune.reweighted_gradient",
           {EncodeBytes("masks", {2, 4}, std::string("\x01\x00\x01\x00\x00\x01\x01\x01", 8)),
            Literal("losses", {2}, {1.5f, 0.5f}), Literal("scores", {4}, {0.4f, 0.5f, 0.6f, 0.7f}),
            Literal("old_scores", {4}, {0.5f, 0.45f, 0.5f, 0.6f})},
           {{"clip", 2}, {"clip_value", 0.3}}));
  v.push_back(Case("prune.project", {Literal("x", {6}, {0.9f, 0.8f, 0.1f, 0.95f, -0.3f, 1.7f})},
                   {{"keep", 3}}));
  v.push_back(Case("prune.layer_mask", {F("x", {32, 8}, 32), F("w", {8, 4}, 33)},
                   {{"steps", 40}, {"seed", 3}}));
  return v;
}

std::vector<KernelCase> Distill() {
  std::vector<KernelCase> v;
  v.push_back(Case("hdd.expmap0", {F("features", {5, 7}, 40, 0.5f)}, {{"k", 2.4}}));
  v.push_back(Case("hdd.logmap0", {HyperboloidPoints(5, 7, 2.4, 41)}, {{"k", 2.4}}));
  v.push_back(Case("hdd.loss", {F("real", {20, 7}, 42), F("synthetic", {4, 7}, 43)},
                   {{"k", 2.4}, {"lambda", 100}}));
  v.push_back(Case("hdd.distill_step",
                   {F("real", {2, 10, 6}, 44), F("synthetic", {2, 3, 6}, 45),
                    F("velocity", {2, 3, 6}, 46, 0.1f)},
                   {{"lr", 0.1}, {"embed_dim", 4}, {"embed_seed", 3}}));
  v.push_back(Case("gld.graph", {F("logits", {6, 30}, 47, 2.0f)}, {{"top_k", 3}}));
  v.push_back(Case("gld.loss", {F("teacher", {6, 30}, 47, 2.0f), F("student", {6, 30}, 48, 2.0f)},
                   {{"top_k", 3}, {"temperature", 2}}));
  v.push_back(Case("sdpgo.feature_weights", {F("feature_grad", {3, 4}, 49)}, {{"lambda", 0.1}}));
  std::vector<float> q(15, 0.2f);
  v.push_back(Case("sdpgo.step",
                   {F("logits", {3, 5}, 50), EncodeInt64("labels", {3}, {0, 4, 2}),
                    F("features", {3, 4}, 51), F("feature_grad", {3, 4}, 52),
                    F("prev_features", {3, 4}, 53, 0.5f), Literal("q_hist", {3, 5}, q)},
                   {{"lambda", 0.1}, {"temperature", 2}}));
  v.push_back(Case(
      "sled.energy_loss",
      {F("samples", {4, 3, 8}, 54), F("target", {4, 8}, 55), Literal("mask", {4}, {1, 1, 0, 1})},
      {{"beta", 1.5}}));
  return v;
}

std::vector<KernelCase> Search() {
  std::vector<KernelCase> v;
  v.push_back(Case("trajmamba.scan",
                   {F("x", {1, 20, 2, 4}, 60), F("dt", {1, 20, 2}, 61, 0.5f),
                    Literal("a", {2}, {-1.0f, -5.0f}), F("b", {1, 20, 8}, 62),
                    F("c", {1, 20, 8}, 63), F("d", {2}, 64), F("dt_bias", {2}, 65, 0.1f)},
                   {{"chunk", 4}}));
  const int64_t batch = 2, len = 12;
  Tensor gps = *Tensor::Zeros({batch, len, 2}), times = *Tensor::Zeros({batch, len}),
         roads = *Tensor::Zeros({batch, len});
  for (int64_t i = 0; i < batch * len; ++i) {
    gps.mutable_data()[2 * i] = 104.0f + 0.001f * static_cast<float>(i);
    gps.mutable_data()[2 * i + 1] = 30.0f + 0.0005f * static_cast<float>(i % 5);
    times.mutable_data()[i] = 15.0f * static_cast<float>(i % len);
    roads.mutable_data()[i] = static_cast<float>(i % 7);
  }
  v.push_back(Case("trajmamba.encode",
                   {EncodeFloat("gps", gps), EncodeFloat("times", times),
                    EncodeFloat("roads", roads), EncodeInt64("lengths", {batch}, {12, 9})},
                   {{"d_model", 16}, {"road_vocab", 10}}));
  v.push_back(Case("trajmamba.mask", {F("points", {12, 16}, 66)}, {{"keep_ratio", 0.25}}));
  const auto mask = *ml::kernels::search::MaskGeneratorWeights::Random(16, 8, 3);
  v.push_back(Case("trajmamba.mask_train_step",
                   {F("points", {12, 16}, 67), F("teacher", {16}, 68), EncodeFloat("w1", mask.w1),
                    EncodeFloat("b1", mask.b1), EncodeFloat("w2", mask.w2),
                    EncodeFloat("b2", mask.b2)},
                   {{"keep_ratio", 0.25}, {"lr", 0.05}}));
  v.push_back(Case("frappe.allocation", Bandit(), {{"iterations", 2000}}));
  v.push_back(Case("frappe.simulate", Bandit(), {{"runs", 3}, {"max_samples", 20000}}));
  std::vector<int32_t> labels(4 * 2 * 2);  // four one-voxel slabs along x
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i / 4);
  labels[5] = -1;  // one empty voxel
  v.push_back(Case("partpacker.pack", {EncodeInt32("labels", {4, 2, 2}, labels)}, {}));
  return v;
}

std::vector<KernelCase> Eco() {
  // MakeCnn(1x8x8, 3 classes, conv1 4, conv2 6, hidden 8): 489 parameters.
  const std::map<std::string, double> arch = {{"channels", 1}, {"height", 8}, {"width", 8},
                                              {"classes", 3},  {"conv1", 4},  {"conv2", 6},
                                              {"hidden", 8}};
  auto with = [&](std::map<std::string, double> more) {
    more.insert(arch.begin(), arch.end());
    return more;
  };
  // Kept units 2 of 4, 3 of 6, 4 of 8: gene = 2 x (9 + 1) + 3 x (2 x 9 + 1) +
  // 4 x (3 x 4 + 1) = 129 values (fc1 takes 4 pooled columns per conv2 channel).
  const std::string masks("\x01\x01\x00\x00"
                          "\x01\x00\x01\x00\x01\x00"
                          "\x01\x01\x00\x00\x01\x00\x00\x01",
                          18);
  std::vector<KernelCase> v;
  v.push_back(Case("eco.extract", {F("weights", {489}, 70, 0.3f)}, with({{"keep_fraction", 0.5}})));
  v.push_back(Case("eco.insert",
                   {F("weights", {489}, 71, 0.3f), EncodeBytes("masks", {18}, masks),
                    F("gene", {129}, 72, 0.3f)},
                   arch));
  v.push_back(Case("eco.generate_step",
                   {EncodeBytes("masks", {18}, masks), F("gene", {129}, 73, 0.3f)},
                   with({{"rate", 0.5}, {"seed", 5}})));
  return v;
}

// The federation's model kind (ml/worker/zoo_kernels.h): a "mlp" 6-5-3
// (seed 9) named `name`, with its weights.
proto::ModelHeader ZooMlp(const std::string& name) {
  auto model = *ml::MakeMlp(6, {5}, 3);
  model->InitFromSeed(9);
  proto::ModelHeader h;
  h.set_name(name);
  h.set_kind("mlp");
  auto& config = *h.mutable_config();
  config["in"] = 6;
  config["classes"] = 3;
  config["hidden_layers"] = 1;
  config["hidden0"] = 5;
  for (const ml::worker::NamedTensor& t : ml::worker::ZooModelTensors(*model)) {
    *h.add_tensors() = EncodeFloat(t.name, t.value);
  }
  return h;
}

std::vector<KernelCase> Zoo() {
  std::vector<float> labels;
  for (int i = 0; i < 40; ++i) labels.push_back(static_cast<float>((i * 7) % 3));
  KernelCase eval =
      Case("model.evaluate", {F("features", {40, 6}, 80), Literal("labels", {40}, labels)}, {});
  eval.model = ZooMlp("cases.evaluate");
  eval.request.mutable_model()->set_name("cases.evaluate");
  KernelCase predict = Case("model.predict", {F("features", {7, 6}, 81)}, {});
  predict.model = ZooMlp("cases.predict");
  predict.request.mutable_model()->set_name("cases.predict");
  std::vector<KernelCase> v;
  v.push_back(std::move(eval));
  v.push_back(std::move(predict));
  return v;
}

}  // namespace

std::vector<KernelCase> AllKernelCases() {
  std::vector<KernelCase> all;
  for (auto family : {Attention, Training, Distill, Search, Eco, Zoo}) {
    for (KernelCase& c : family()) all.push_back(std::move(c));
  }
  return all;
}

}  // namespace tandem::testing
