#include "ml/worker/builtin_kernels.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/cat.h"
#include "ml/kernels/dusa.h"
#include "ml/kernels/ren.h"
#include "ml/kernels/spotlight.h"
#include "ml/kernels/spotlight_train.h"
#include "ml/worker/adakv_kernels.h"
#include "ml/worker/distill_kernels.h"
#include "ml/worker/eco_kernels.h"
#include "ml/worker/kernel_spec_helpers.h"
#include "ml/worker/model_kernels.h"
#include "ml/worker/search_kernels.h"
#include "ml/worker/spotlight_params.h"
#include "ml/worker/training_kernels.h"
#include "ml/worker/zoo_kernels.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;



// Packed codes from a (rows, bytes) uint8 tensor, bytes a multiple of 4.
absl::StatusOr<kernels::PackedCodes> CodesFrom(const WireTensor& w, const char* what) {
  if (w.shape[0] < 1 || w.shape[1] < 4 || w.shape[1] % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be (rows >= 1, bytes) with bytes a positive multiple of 4"));
  }
  kernels::PackedCodes c;
  c.rows = w.shape[0];
  c.words = w.shape[1] / 4;
  c.bits.resize(static_cast<size_t>(c.rows * c.words));
  if (w.raw.size() != 0) {  // an empty input may come with null pointers
    std::memcpy(c.bits.data(), w.raw.data(), w.raw.size());
  }
  return c;
}

std::string CodeBytes(const kernels::PackedCodes& c) {
  return std::string(reinterpret_cast<const char*>(c.bits.data()), c.bits.size() * 4);
}

// The hash weights: the referenced model's (no copy), else inputs first ..
// first + 3 copied into *storage.
absl::StatusOr<const kernels::SpotlightHashWeights*> HashWeightsFrom(
    const KernelCall& c, size_t first, kernels::SpotlightHashWeights* storage) {
  if (c.model != nullptr) {
    return &std::get<kernels::SpotlightHashWeights>(c.model->model().weights);
  }
  *storage = {c.f32(first), c.f32(first + 1), c.f32(first + 2), c.f32(first + 3)};
  TANDEM_RETURN_IF_ERROR(kernels::ValidateHashWeights(*storage));
  return storage;
}

// attention.dense. With a cache named, its keys and values are read in
// place in the pages (KvCacheStore::ScanRows, no copy of the prefix) where
// the host can read them; else copied out (ReadFloats), as a CUDA worker's.
absl::StatusOr<Outputs> AttentionDense(const KernelCall& c) {
  const Tensor& q = c.f32(0);
  const bool causal = c.int_param("causal") != 0;
  const double nk = c.cache != nullptr ? static_cast<double>(c.cache_tokens) : Dim(c.f32(1), 1);
  TANDEM_RETURN_IF_ERROR(
      Budget(4 * Dim(q, 0) * Dim(q, 1) * nk * Dim(q, 2), kMaxWork, "attention FLOPs"));
  if (c.cache == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(Tensor o, kernels::DenseAttention(q, c.f32(1), c.f32(2), causal));
    return MoveOutputs(EncodeFloat("o", o));
  }
  TANDEM_ASSIGN_OR_RETURN(const KvCacheSummary info, c.cache->Find(c.cache_key));
  absl::StatusOr<Tensor> o = kernels::DenseAttentionOfRuns(
      q, info.shape.heads, c.cache_tokens, info.shape.head_dim,
      [&](int64_t kv, kernels::KvRunFn fn) {
        return c.cache->ScanRows(c.cache_key, static_cast<int>(kv), c.cache_tokens, fn).status();
      },
      causal);
  if (absl::IsUnimplemented(o.status())) {
    TANDEM_ASSIGN_OR_RETURN(Tensor k,
                            c.cache->ReadFloats(c.cache_key, KvPart::kKeys, c.cache_tokens));
    TANDEM_ASSIGN_OR_RETURN(Tensor v,
                            c.cache->ReadFloats(c.cache_key, KvPart::kValues, c.cache_tokens));
    o = kernels::DenseAttention(q, k, v, causal);
  }
  if (!o.ok()) return o.status();
  return MoveOutputs(EncodeFloat("o", *o));
}

// spotlight.topk. With a cache named, its codes are scored in place
// (KvCacheStore::ScanCodes: no copy of them) where the pages are host
// memory; else, and for the codes sent, from a PackedCodes copy.
absl::StatusOr<Outputs> SpotlightTopK(const KernelCall& c) {
  TANDEM_ASSIGN_OR_RETURN(kernels::PackedCodes q, CodesFrom(c.inputs[0], "query_codes"));
  TANDEM_RETURN_IF_ERROR(Budget(static_cast<double>(q.rows) * q.words, 4096, "query code words"));
  kernels::PackedCodes k;  // the codes, where they are not scored in place
  std::vector<int32_t> scores;
  bool scored = false;
  if (c.cache != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(const KvCacheSummary info, c.cache->Find(c.cache_key));
    const int64_t rows = c.cache_tokens, words = info.shape.code_bits / 32;
    if (info.shape.code_bits != 0 && words != q.words) {  // else ScanCodes says why
      return absl::InvalidArgumentError(
          absl::StrCat("query codes have ", q.words, " words, key codes ", words));
    }
    TANDEM_RETURN_IF_ERROR(
        Budget(static_cast<double>(rows) * q.rows * q.words, kMaxWork, "popcount words"));
    if (c.backend != kernels::Backend::kCuda) {
      scores.resize(static_cast<size_t>(rows));
      absl::Status status;
      absl::StatusOr<int64_t> scanned = c.cache->ScanCodes(
          c.cache_key, c.cache_head, rows, [&](const uint32_t* codes, int64_t first, int64_t n) {
            status.Update(
                kernels::HammingScoresInto(q, codes, n, absl::MakeSpan(scores).subspan(first, n)));
          });
      if (scanned.ok()) {
        TANDEM_RETURN_IF_ERROR(status);
        scored = true;
      } else if (!absl::IsUnimplemented(scanned.status())) {
        return scanned.status();
      }
    }
    if (!scored) {  // device pages, or the CUDA backend: a host copy
      WireTensor w;
      TANDEM_ASSIGN_OR_RETURN(w.raw, c.cache->ReadCodes(c.cache_key, c.cache_head, rows));
      w.shape = {rows, words * 4};
      TANDEM_ASSIGN_OR_RETURN(k, CodesFrom(w, "key_codes"));
    }
  } else {
    TANDEM_ASSIGN_OR_RETURN(k, CodesFrom(c.inputs[1], "key_codes"));
    TANDEM_RETURN_IF_ERROR(
        Budget(static_cast<double>(k.rows) * q.rows * q.words, kMaxWork, "popcount words"));
  }
  if (!scored) {
    TANDEM_ASSIGN_OR_RETURN(scores, kernels::HammingScores(q, k, c.backend));
  }
  const int64_t rows = static_cast<int64_t>(scores.size());
  const int64_t kk = c.int_param("k") == 0 ? kernels::SpotlightDefaultTopK(rows) : c.int_param("k");
  // The CPU selection reads the scores just computed (one pass over the
  // codes, not two); CUDA selects on the device.
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> top, c.backend == kernels::Backend::kCuda && !scored
                                                        ? kernels::HammingTopK(q, k, kk, c.backend)
                                                        : kernels::TopKOfScores(q, scores, kk));
  if (c.int_param("selected_scores") != 0) {  // a serving caller: k scores, not every key's
    std::vector<int32_t> picked(top.size());
    for (size_t i = 0; i < top.size(); ++i) picked[i] = scores[static_cast<size_t>(top[i])];
    return MoveOutputs(EncodeInt64("indices", {kk}, top),
                       EncodeInt32("scores", {static_cast<int64_t>(picked.size())}, picked));
  }
  return MoveOutputs(EncodeInt64("indices", {kk}, top), EncodeInt32("scores", {rows}, scores));
}

std::vector<KernelSpec> Specs() {
  std::vector<KernelSpec> s;
  // Supplied by a loaded "spotlight.hash" model when the request names one.
  const std::vector<InputSpec> hash_w = {
      {"w1", kF32, 2, true}, {"b1", kF32, 1, true}, {"w2", kF32, 2, true}, {"b2", kF32, 1, true}};

  // The wire's own cost: RunStream / Run throughput with no math, and a
  // liveness probe that checks a tensor makes the round trip intact.
  s.push_back({"tensor.copy",
               "y = x: the float32 input returned unchanged (transfer check)",
               false,
               {{"x", kF32, 1}},
               {},
               {{"y", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 return MoveOutputs(EncodeFloat("y", c.f32(0)));
               }});
  s.push_back({"attention.dense",
               "softmax(q k^T / sqrt d) v, GQA, optional causal mask",
               false,
               {{"q", kF32, 3}, {"k", kF32, 3}, {"v", kF32, 3}},
               {Flag("causal")},
               {{"o", kF32, 3}},
               AttentionDense});
  s.back().gathers_from_cache = true;

  s.push_back({"dusa.forward",
               "DuSA (NeurIPS 2025): intra-block then inter-block attention; stage 0 = both, "
               "1 = intra only, 2 = inter only",
               true, {{"q", kF32, 4}, {"k", kF32, 4}, {"v", kF32, 4}},
               {Int("block_size", 16, 1, kMaxInt), Int("stage", 0, 0, 2)}, {{"o", kF32, 4}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const int64_t b = c.int_param("block_size"), stage = c.int_param("stage");
                 const double n = Dim(c.f32(0), 2), bd = static_cast<double>(b);
                 TANDEM_RETURN_IF_ERROR(
                     Budget(std::max(bd * bd, (n / bd) * (n / bd)), kMaxScratch, "DuSA scores"));
                 TANDEM_RETURN_IF_ERROR(Budget(kernels::DusaFlops(c.f32(0).dim(0) * c.f32(0).dim(1),
                                                                  c.f32(0).dim(2), c.f32(0).dim(3), b),
                                               kMaxWork, "DuSA FLOPs"));
                 absl::StatusOr<Tensor> o =
                     stage == 0 ? kernels::DusaForward(c.f32(0), c.f32(1), c.f32(2), b, c.backend)
                                : kernels::DusaStageForward(
                                      c.f32(0), c.f32(1), c.f32(2), b,
                                      stage == 1 ? kernels::DusaStage::kIntraBlock
                                                 : kernels::DusaStage::kInterBlock,
                                      c.backend);
                 if (!o.ok()) return o.status();
                 return MoveOutputs(EncodeFloat("o", *o));
               }});

  s.push_back({"cat.mix", "CAT (arXiv 2504.06704): y_i = sum_j softmax(z)_{(j-i) mod N} v_j",
               false, {{"z_logits", kF32, 3}, {"v", kF32, 3}}, {Flag("gather")},
               {{"y", kF32, 3}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 if (c.int_param("gather")) {
                   TANDEM_RETURN_IF_ERROR(Budget(2 * Dim(c.f32(1), 0) * Dim(c.f32(1), 1) *
                                                     Dim(c.f32(1), 1) * Dim(c.f32(1), 2),
                                                 kMaxWork, "CAT gather FLOPs"));
                 }
                 TANDEM_ASSIGN_OR_RETURN(
                     Tensor y, kernels::CatMix(c.f32(0), c.f32(1),
                                               c.int_param("gather") ? kernels::CatMethod::kGather
                                                                     : kernels::CatMethod::kFft));
                 return MoveOutputs(EncodeFloat("y", y));
               }});

  s.push_back({"cat.forward", "CAT layer: CatMix(x W_A, x W_V) W_O", false,
               {{"x", kF32, 3}, {"w_a", kF32, 2}, {"w_v", kF32, 2}, {"w_o", kF32, 2}},
               {Flag("gather")}, {{"y", kF32, 3}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& x = c.f32(0);
                 const double rows = Dim(x, 0) * Dim(x, 1), d = Dim(x, 2);
                 TANDEM_RETURN_IF_ERROR(Budget(
                     4 * rows * d * d + (c.int_param("gather") ? 2 * rows * Dim(x, 1) * d : 0),
                     kMaxWork, "CAT layer FLOPs"));
                 TANDEM_ASSIGN_OR_RETURN(
                     Tensor y,
                     kernels::CatForward(c.f32(0), c.f32(1), c.f32(2), c.f32(3),
                                         c.int_param("gather") ? kernels::CatMethod::kGather
                                                               : kernels::CatMethod::kFft));
                 return MoveOutputs(EncodeFloat("y", y));
               }});

  std::vector<InputSpec> hash_in = {{"x", kF32, 2}};
  hash_in.insert(hash_in.end(), hash_w.begin(), hash_w.end());
  s.push_back({"spotlight.hash",
               "Spotlight (arXiv 2508.19740): h = L2(L1(x)) and packed sign codes", false,
               hash_in, {}, {{"h", kF32, 2}, {"codes", proto::DTYPE_UINT8, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_RETURN_IF_ERROR(Budget(4 * Dim(c.f32(0), 0) * Dim(c.f32(0), 1) *
                                                   Dim(c.f32(0), 1),
                                               kMaxWork, "hash FLOPs"));
                 kernels::SpotlightHashWeights storage;
                 TANDEM_ASSIGN_OR_RETURN(const kernels::SpotlightHashWeights* w,
                                         HashWeightsFrom(c, 1, &storage));
                 TANDEM_ASSIGN_OR_RETURN(Tensor h, kernels::SpotlightHash(c.f32(0), *w));
                 TANDEM_ASSIGN_OR_RETURN(kernels::PackedCodes codes, kernels::PackSignBits(h));
                 return MoveOutputs(
                     EncodeFloat("h", h),
                     EncodeBytes("codes", {codes.rows, codes.words * 4}, CodeBytes(codes)));
               }});

  s.push_back({"spotlight.topk",
               "Hamming top-k: score_j = sum_g popcount(~(q_g ^ k_j)); k = 0 uses the default; "
               "scores: every key's, or with selected_scores the k of indices, in their order",
               true,
               {{"query_codes", proto::DTYPE_UINT8, 2}, {"key_codes", proto::DTYPE_UINT8, 2}},
               {Int("k", 0, 0, kMaxInt), Flag("selected_scores")},
               {{"indices", proto::DTYPE_INT64, 1}, {"scores", proto::DTYPE_INT32, 1}},
               SpotlightTopK});
  s.back().gathers_from_cache = true;

  std::vector<InputSpec> loss_in = {{"q", kF32, 2}, {"k", kF32, 2}};
  loss_in.insert(loss_in.end(), hash_w.begin(), hash_w.end());
  s.push_back({"spotlight.ranking_loss",
               "Bradley-Terry ranking loss of the hash and its gradients", false, loss_in,
               SpotlightLossParams(),
               {{"loss", kF32, 0}, {"d_w1", kF32, 2}, {"d_b1", kF32, 1}, {"d_w2", kF32, 2},
                {"d_b2", kF32, 1}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_RETURN_IF_ERROR(SpotlightLossBudget(c));
                 kernels::SpotlightHashWeights storage;
                 TANDEM_ASSIGN_OR_RETURN(const kernels::SpotlightHashWeights* w,
                                         HashWeightsFrom(c, 2, &storage));
                 TANDEM_ASSIGN_OR_RETURN(
                     kernels::SpotlightLossResult r,
                     kernels::SpotlightRankingLoss(c.f32(0), c.f32(1), *w, SpotlightLossFrom(c)));
                 TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                                         Tensor::FromData({}, {static_cast<float>(r.loss)}));
                 return MoveOutputs(EncodeFloat("loss", loss), EncodeFloat("d_w1", r.grads.w1),
                                    EncodeFloat("d_b1", r.grads.b1),
                                    EncodeFloat("d_w2", r.grads.w2),
                                    EncodeFloat("d_b2", r.grads.b2));
               }});

  s.push_back({"ren.forward",
               "REN (arXiv 2505.18153): region tokens by cross-attention from point prompts; "
               "weights of the named \"ren\" model (heads, layers, weight_seed then ignored), "
               "else drawn from weight_seed",
               false, {{"features", kF32, 3}, {"points", kF32, 2}},
               {Real("image_size", 518, 1e-3, 1e6), Int("heads", 8, 1, 64),
                Int("layers", 4, 1, 16), Int("weight_seed", 42, 0, kMaxInt)},
               {{"tokens", kF32, 2}, {"maps", kF32, 3}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 const Tensor& f = c.f32(0);
                 const kernels::RenWeights* loaded =
                     c.model ? &std::get<kernels::RenWeights>(c.model->model().weights) : nullptr;
                 const double d = Dim(f, 0), nk = Dim(f, 1) * Dim(f, 2), np = Dim(c.f32(1), 0);
                 const double layers = static_cast<double>(
                     loaded ? static_cast<int64_t>(loaded->layers.size()) : c.int_param("layers"));
                 const double heads =
                     static_cast<double>(loaded ? loaded->heads : c.int_param("heads"));
                 if (loaded == nullptr) {
                   TANDEM_RETURN_IF_ERROR(Budget(9 * d * d * layers, kMaxScratch, "REN weights"));
                 }
                 TANDEM_RETURN_IF_ERROR(Budget(heads * np * nk, kMaxScratch, "REN attention maps"));
                 TANDEM_RETURN_IF_ERROR(Budget(layers * kernels::RenBlockFlops(
                                                            c.f32(1).dim(0), f.dim(1) * f.dim(2),
                                                            f.dim(0)),
                                               kMaxWork, "REN FLOPs"));
                 kernels::RenWeights seeded;
                 if (loaded == nullptr) {
                   TANDEM_ASSIGN_OR_RETURN(
                       seeded, kernels::RenWeights::Random(
                                   f.dim(0), c.int_param("heads"), c.int_param("layers"),
                                   static_cast<uint64_t>(c.int_param("weight_seed"))));
                 }
                 TANDEM_ASSIGN_OR_RETURN(
                     kernels::RenOutput r,
                     kernels::RenForward(f, c.f32(1), c.param("image_size"),
                                         loaded ? *loaded : seeded));
                 return MoveOutputs(EncodeFloat("tokens", r.tokens), EncodeFloat("maps", r.maps));
               }});

  s.push_back({"ren.merge", "merge region tokens with cosine >= threshold (greedy, averaged)",
               false, {{"tokens", kF32, 2}}, {Real("threshold", 0.975, -1, 1)},
               {{"merged", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_RETURN_IF_ERROR(Budget(Dim(c.f32(0), 0) * Dim(c.f32(0), 0) * Dim(c.f32(0), 1),
                                               kMaxWork, "merge work"));
                 TANDEM_ASSIGN_OR_RETURN(Tensor m,
                                         kernels::MergeRegionTokens(c.f32(0), c.param("threshold")));
                 return MoveOutputs(EncodeFloat("merged", m));
               }});
  for (KernelSpec& k : s) {
    if (k.name == "ren.forward") k.model_kinds = {"ren"};
    if (k.name == "spotlight.hash" || k.name == "spotlight.ranking_loss") {
      k.model_kinds = {"spotlight.hash"};
    }
    // Read from a KV cache (KernelRequest.kv_cache) when the request names
    // one: the cached key codes, keys and values.
    for (InputSpec& in : k.inputs) {
      if (k.name == "spotlight.topk" && in.name == "key_codes") in.from_cache = "codes";
      const bool kv = k.name == "attention.dense";
      if (kv && in.name == "k") in.from_cache = "keys";
      if (kv && in.name == "v") in.from_cache = "values";
    }
  }
  return s;
}

}  // namespace

absl::Status RegisterBuiltinKernels(KernelRegistry* registry) {
  for (KernelSpec& spec : Specs()) TANDEM_RETURN_IF_ERROR(registry->Register(std::move(spec)));
  TANDEM_RETURN_IF_ERROR(RegisterTrainingKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterDistillKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterSearchKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterEcoKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterModelKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterZooKernels(registry));
  TANDEM_RETURN_IF_ERROR(RegisterAdaKvKernels(registry));
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
