// Worker kernels of Ada-KV (Feng et al., arXiv 2407.11550) over SnapKV
// scores: adakv.scores, adakv.compress and adakv.decode (kernels in
// ml/kernels/adakv.h). With a KV cache named (KernelRequest.kv_cache) k and
// v stay in the cache: the keys are scored in place in its pages
// (KvCacheStore::ScanRows) and only the kept rows are gathered
// (GatherRows), so a call copies no whole prefix; q may then be the
// observation window alone, (H, w, d). Thread-safe (pure functions of the
// call; the cache store locks itself).
#include "ml/worker/adakv_kernels.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/adakv.h"
#include "ml/worker/kernel_spec_helpers.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {
namespace {

using kernels::Tensor;
using Outputs = std::vector<proto::Tensor>;
constexpr proto::DType kF32 = proto::DTYPE_FLOAT32;

// The scores' scratch (w x N per query head in flight) and FLOPs, N the
// keys scored: k's length, or the cache's tokens.
absl::Status SnapBudget(const KernelCall& c, double n) {
  const Tensor& q = c.f32(0);
  const double w = static_cast<double>(c.int_param("window"));
  TANDEM_RETURN_IF_ERROR(Budget(w * n, kMaxScratch, "SnapKV window scores"));
  return Budget(2 * Dim(q, 0) * w * n * Dim(q, 2), kMaxWork, "SnapKV FLOPs");
}

// The keys a request scores: k's length, or the tokens of the cache it names.
double KeysOf(const KernelCall& c) {
  return c.cache != nullptr ? static_cast<double>(c.cache_tokens) : Dim(c.f32(1), 1);
}

// SnapKV scores of the keys sent or, with a cache named, of its keys in
// place (KvCacheStore::ScanRows, no copy); pages the host cannot read (a
// CUDA worker's) are copied out first.
absl::StatusOr<Tensor> SnapScores(const KernelCall& c, const kernels::SnapKvOptions& o) {
  if (c.cache == nullptr) return kernels::SnapKvScores(c.f32(0), c.f32(1), o);
  TANDEM_ASSIGN_OR_RETURN(const KvCacheSummary info, c.cache->Find(c.cache_key));
  const int64_t n = c.cache_tokens;
  absl::StatusOr<Tensor> scores = kernels::SnapKvScoresOfRuns(
      c.f32(0), info.shape.heads, n, info.shape.head_dim,
      [&](int64_t kv, kernels::KvRunFn fn) {
        return c.cache->ScanRows(c.cache_key, static_cast<int>(kv), n, fn).status();
      },
      o);
  if (!absl::IsUnimplemented(scores.status())) return scores;
  TANDEM_ASSIGN_OR_RETURN(Tensor k, c.cache->ReadFloats(c.cache_key, KvPart::kKeys, n));
  return kernels::SnapKvScores(c.f32(0), k, o);
}

kernels::SnapKvOptions SnapFrom(const KernelCall& c) {
  kernels::SnapKvOptions o;
  o.window = c.int_param("window");
  o.kernel = c.int_param("kernel");
  o.gqa = c.int_param("gqa_max") ? kernels::GqaReduce::kMax : kernels::GqaReduce::kMean;
  o.pool = c.int_param("pool_avg") ? kernels::PoolKind::kAvg : kernels::PoolKind::kMax;
  return o;
}

// The kept rows (one list of positions per KV head) of the cache
// a call names, gathered into a CompactKv: every other token stays in the
// cache's pages. Errors as KvCacheStore::GatherRows.
absl::StatusOr<kernels::CompactKv> GatherKept(const KernelCall& c, int64_t d,
                                              std::vector<std::vector<int64_t>> lists) {
  std::vector<int64_t> flat, cu = {0};
  for (const std::vector<int64_t>& h : lists) {
    flat.insert(flat.end(), h.begin(), h.end());
    cu.push_back(static_cast<int64_t>(flat.size()));
  }
  const int64_t total = static_cast<int64_t>(flat.size());
  kernels::CompactKv compact;
  TANDEM_ASSIGN_OR_RETURN(compact.keys, Tensor::Zeros({total, d}));
  TANDEM_ASSIGN_OR_RETURN(compact.values, Tensor::Zeros({total, d}));
  for (auto [part, t] :
       {std::pair{KvPart::kKeys, &compact.keys}, std::pair{KvPart::kValues, &compact.values}}) {
    TANDEM_RETURN_IF_ERROR(
        c.cache
            ->GatherRows(c.cache_key, part, c.cache_tokens, flat, cu,
                         absl::MakeSpan(t->mutable_ptr(), static_cast<size_t>(total * d)))
            .status());
  }
  compact.cu_seqlens = std::move(cu);
  compact.kept = std::move(lists);
  return compact;
}

// adakv.decode: q (H, d); k, v (H_kv, N, d); kept and cu_seqlens as
// adakv.compress returns them (cu_seqlens: the H_kv + 1 offsets 0 = c_0 <
// c_1 < ... < c_H_kv = len(kept), head h's positions kept[c_h, c_h+1)).
// Every check before the gather; then CompactKvCache and
// CompactDecodeAttention.
absl::StatusOr<Outputs> AdaKvDecode(const KernelCall& c) {
  const Tensor &q = c.f32(0), &k = c.f32(1), &v = c.f32(2);
  int64_t hkv, n, d;
  if (c.cache != nullptr) {  // k and v stay in the cache: the kept rows are gathered below
    TANDEM_ASSIGN_OR_RETURN(const KvCacheSummary info, c.cache->Find(c.cache_key));
    hkv = info.shape.heads, n = c.cache_tokens, d = info.shape.head_dim;
  } else {
    if (k.rank() != 3 || v.shape() != k.shape() || k.dim(0) < 1 || k.dim(2) < 1) {
      return absl::InvalidArgumentError(absl::StrCat("k ", k.ShapeString(), " and v ",
                                                     v.ShapeString(),
                                                     " must both be (H_kv >= 1, N, d >= 1)"));
    }
    hkv = k.dim(0), n = k.dim(1), d = k.dim(2);
  }
  const int64_t h = q.dim(0);
  if (q.dim(1) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("q is (H, d) with d = ", q.dim(1), ", k and v have d = ", d));
  }
  if (h < 1 || h % hkv != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "q has H = ", h, " heads, not a positive multiple of H_kv = ", hkv, " KV heads"));
  }
  std::vector<int64_t> kept = RawValues<int64_t>(c.inputs[3]);
  std::vector<int64_t> cu = RawValues<int64_t>(c.inputs[4]);
  if (static_cast<int64_t>(cu.size()) != hkv + 1 || cu[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cu_seqlens must be the H_kv + 1 = ", hkv + 1,
                     " offsets adakv.compress returns, from 0; got ", cu.size(), " entries",
                     cu.empty() ? "" : absl::StrCat(", starting at ", cu[0])));
  }
  for (int64_t hh = 0; hh < hkv; ++hh) {
    if (cu[hh + 1] <= cu[hh]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cu_seqlens must increase: KV head ", hh, " would keep no entries (cu_seqlens[", hh,
          "] = ", cu[hh], ", [", hh + 1, "] = ", cu[hh + 1], ")"));
    }
  }
  const int64_t total = static_cast<int64_t>(kept.size());
  if (cu[hkv] != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("cu_seqlens ends at ", cu[hkv], ", kept has ", total, " positions"));
  }
  const double td = static_cast<double>(total) * static_cast<double>(d);
  TANDEM_RETURN_IF_ERROR(Budget(2 * td, kMaxScratch, "gathered KV floats"));
  TANDEM_RETURN_IF_ERROR(
      Budget(4 * static_cast<double>(h / hkv) * td, kMaxWork, "compact decode FLOPs"));
  std::vector<std::vector<int64_t>> lists(static_cast<size_t>(hkv));
  for (int64_t hh = 0; hh < hkv; ++hh) {
    for (int64_t i = cu[hh]; i < cu[hh + 1]; ++i) {
      if (kept[i] < 0 || kept[i] >= n) {
        return absl::InvalidArgumentError(absl::StrCat("kept[", i, "] = ", kept[i], " (KV head ",
                                                       hh, ") is outside [0, N = ", n, ")"));
      }
    }
    lists[hh].assign(kept.begin() + cu[hh], kept.begin() + cu[hh + 1]);
  }
  kernels::CompactKv compact;
  if (c.cache != nullptr) {  // only the kept rows leave the cache's pages
    TANDEM_ASSIGN_OR_RETURN(compact, GatherKept(c, d, std::move(lists)));
  } else {
    TANDEM_ASSIGN_OR_RETURN(compact, kernels::CompactKvCache(k, v, std::move(lists)));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out, kernels::CompactDecodeAttention(q, compact));
  return MoveOutputs(EncodeFloat("out", out));
}

// adakv.compress: scores, budgets and selection, then the kept rows: of
// k and v sent, or gathered from the cache named (no copy of the rest).
absl::StatusOr<Outputs> AdaKvCompress(const KernelCall& c) {
  TANDEM_RETURN_IF_ERROR(SnapBudget(c, KeysOf(c)));
  kernels::AdaKvOptions o;
  o.snap = SnapFrom(c);
  o.budget = c.int_param("budget");
  o.alpha = c.param("alpha");
  kernels::CompactKv kv;
  if (c.cache == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(kv, kernels::AdaKvCompress(c.f32(0), c.f32(1), c.f32(2), o));
  } else {
    TANDEM_ASSIGN_OR_RETURN(Tensor scores, SnapScores(c, o.snap));
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> lists,
                            kernels::AdaKvSelect(scores, o));
    TANDEM_ASSIGN_OR_RETURN(const KvCacheSummary info, c.cache->Find(c.cache_key));
    TANDEM_ASSIGN_OR_RETURN(kv, GatherKept(c, info.shape.head_dim, std::move(lists)));
  }
  std::vector<int64_t> flat;
  for (const auto& h : kv.kept) flat.insert(flat.end(), h.begin(), h.end());
  const int64_t heads = static_cast<int64_t>(kv.cu_seqlens.size());
  const int64_t total = static_cast<int64_t>(flat.size());
  return MoveOutputs(EncodeFloat("keys", kv.keys), EncodeFloat("values", kv.values),
                     EncodeInt64("cu_seqlens", {heads}, kv.cu_seqlens),
                     EncodeInt64("kept", {total}, flat));
}

}  // namespace

absl::Status RegisterAdaKvKernels(KernelRegistry* registry) {
  std::vector<KernelSpec> s;
  const std::vector<ParamSpec> snap = {Int("window", 32, 1, kMaxInt), Int("kernel", 7, 1, 255),
                                       Flag("gqa_max"), Flag("pool_avg")};
  s.push_back({"adakv.scores",
               "SnapKV observation-window scores, pooled (H_kv, N - w)",
               false,
               {{"q", kF32, 3}, {"k", kF32, 3}},
               snap,
               {{"scores", kF32, 2}},
               [](const KernelCall& c) -> absl::StatusOr<Outputs> {
                 TANDEM_RETURN_IF_ERROR(SnapBudget(c, KeysOf(c)));
                 TANDEM_ASSIGN_OR_RETURN(Tensor sc, SnapScores(c, SnapFrom(c)));
                 return MoveOutputs(EncodeFloat("scores", sc));
               }});
  s.back().gathers_from_cache = true;

  std::vector<ParamSpec> compress = snap;
  compress.push_back(Int("budget", 128, 1, kMaxInt));
  compress.push_back(Real("alpha", 0.2, 0, 1));
  s.push_back({"adakv.compress",
               "Ada-KV (arXiv 2407.11550): head-wise budgets with safeguard, flattened KV",
               false,
               {{"q", kF32, 3}, {"k", kF32, 3}, {"v", kF32, 3}},
               compress,
               {{"keys", kF32, 2},
                {"values", kF32, 2},
                {"cu_seqlens", proto::DTYPE_INT64, 1},
                {"kept", proto::DTYPE_INT64, 1}},
               AdaKvCompress});
  s.back().gathers_from_cache = true;

  // The decode step over adakv.compress's kept positions: with a cache
  // named, only q, kept and cu_seqlens travel; k and v stay in the worker.
  s.push_back({"adakv.decode",
               "one decode step over an Ada-KV compacted cache: kept positions and cu_seqlens "
               "as adakv.compress returns them",
               false,
               {{"q", kF32, 2},
                {"k", kF32, 3},
                {"v", kF32, 3},
                {"kept", proto::DTYPE_INT64, 1},
                {"cu_seqlens", proto::DTYPE_INT64, 1}},
               {},
               {{"out", kF32, 2}},
               AdaKvDecode});
  s.back().gathers_from_cache = true;

  for (KernelSpec& k : s) {
    for (InputSpec& in : k.inputs) {  // what a KV cache supplies
      if (in.name == "k") in.from_cache = "keys";
      if (in.name == "v") in.from_cache = "values";
    }
    TANDEM_RETURN_IF_ERROR(registry->Register(std::move(k)));
  }
  return absl::OkStatus();
}

}  // namespace tandem::ml::worker
