#include "ml/kernels/adakv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/attention.h"
#include "ml/kernels/internal/attention_core.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Positions of row `s` (length l) sorted by score descending, ties by position.
std::vector<int64_t> SortedPositions(const float* s, int64_t l) {
  std::vector<int64_t> idx(l);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [s](int64_t a, int64_t b) { return s[a] > s[b]; });
  return idx;
}

absl::Status CheckBudget(const AdaKvOptions& opt) {
  if (opt.budget < opt.snap.window) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget ", opt.budget, " is smaller than the window ", opt.snap.window));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> SnapKvScores(const Tensor& q, const Tensor& k, const SnapKvOptions& opt) {
  TANDEM_RETURN_IF_ERROR(ValidateAttentionShapes(q, k, k, /*causal=*/false));
  const int64_t n = k.dim(1), d = k.dim(2);
  return SnapKvScoresOfRuns(
      q, k.dim(0), n, d,
      [&](int64_t kv, KvRunFn fn) {
        fn(k.ptr() + kv * n * d, nullptr, 0, n);  // one run: the whole head
        return absl::OkStatus();
      },
      opt);
}

absl::StatusOr<Tensor> SnapKvScoresOfRuns(const Tensor& q, int64_t hkv, int64_t n, int64_t d,
                                          KvRuns keys, const SnapKvOptions& opt) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 3, "q"));
  if (hkv < 1 || d < 1 || q.dim(2) != d || q.dim(0) % hkv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("q ", q.ShapeString(), " does not fit ", hkv, " KV heads of head dim ", d));
  }
  const int64_t h = q.dim(0), g = h / hkv;
  const int64_t w = opt.window;
  if (w < 1 || w >= n) {
    return absl::InvalidArgumentError(absl::StrCat("window ", w, " must be in [1, N = ", n, ")"));
  }
  if (q.dim(1) != n && q.dim(1) != w) {
    return absl::InvalidArgumentError(
        absl::StrCat("q has ", q.dim(1), " rows: N = ", n, " or the window's ", w));
  }
  if (opt.kernel < 1 || opt.kernel % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("pooling kernel ", opt.kernel,
                                                   " must be odd and positive"));
  }
  const int64_t l = n - w, nq = q.dim(1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Per query head: mean attention of the window onto the first L keys.
  std::vector<float> per_head(static_cast<size_t>(h * l));
  std::vector<absl::Status> failed(static_cast<size_t>(h));
  // Per query head, two passes over the keys in blocks, holding w x
  // kKvBlock scores at a time, never w x N (64 MiB at N = 512K, mapped
  // and page-faulted in afresh for every head): the first keeps each window
  // row's running max m_i and its rescaled sum Z_i of exp(s_ij - m_i) (the
  // online softmax), the second recomputes the block and adds
  // exp(s_ij - m_i) / Z_i into key j's score. Twice the q k^T products (of
  // a 32 x 32 x 512 shape a GEMM runs well), in exchange for no large buffer.
  tbb::parallel_for(int64_t{0}, h, [&](int64_t hh) {
    Eigen::Map<const RowMat> qw(q.ptr() + (hh * nq + nq - w) * d, w, d);
    RowMat blk(w, kKvBlock);
    KvBlockScratch straddle;
    // The block of keys [b0, b0 + count): scores, the causal mask inside the
    // window (row i sees keys <= L + i). Rows are then read one at a time
    // as contiguous arrays, so that exp runs vectorised.
    using RowArray = Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic>>;
    auto score = [&](const float* rows, int64_t b0, int64_t count) {
      Eigen::Map<const RowMat> kr(rows, count, d);
      blk.leftCols(count).noalias() = (qw * kr.transpose()) * scale;
      for (int64_t i = 0; i < w; ++i) {
        for (int64_t j = std::max(b0, l + i + 1); j < b0 + count; ++j) {
          blk(i, j - b0) = -std::numeric_limits<float>::infinity();
        }
      }
    };
    std::vector<float> m(static_cast<size_t>(w), -std::numeric_limits<float>::infinity());
    std::vector<float> z(static_cast<size_t>(w), 0.0f);
    absl::Status visited =
        VisitKvBlocks(keys, hh / g, n, d, /*with_values=*/false, 0, n, &straddle,
                      [&](const float* rows, const float*, int64_t b0, int64_t c) {
                        score(rows, b0, c);
                        for (int64_t i = 0; i < w; ++i) {
                          RowArray row(blk.data() + i * kKvBlock, c);
                          // Key 0 is never masked, so m_i is finite after the first block.
                          const float m_new = std::max(m[i], row.maxCoeff());
                          z[i] = z[i] * std::exp(m[i] - m_new) + (row - m_new).exp().sum();
                          m[i] = m_new;
                        }
                      });
    float* out = per_head.data() + hh * l;
    Eigen::Array<float, 1, Eigen::Dynamic> acc(kKvBlock);
    if (visited.ok()) {
      // Only the blocks holding keys < L: the window's own are always kept.
      visited = VisitKvBlocks(keys, hh / g, n, d, /*with_values=*/false, 0, l, &straddle,
                              [&](const float* rows, const float*, int64_t b0, int64_t c) {
                                score(rows, b0, c);
                                const int64_t cols = std::min(c, l - b0);
                                auto sum = acc.leftCols(cols);
                                sum.setZero();
                                for (int64_t i = 0; i < w; ++i) {
                                  RowArray row(blk.data() + i * kKvBlock, cols);
                                  sum += (row - m[i]).exp() * (1.0f / z[i]);
                                }
                                RowArray(out + b0, cols) = sum / static_cast<float>(w);
                              });
    }
    if (!visited.ok()) failed[static_cast<size_t>(hh)] = std::move(visited);
  });
  for (absl::Status& st : failed) TANDEM_RETURN_IF_ERROR(st);
  TANDEM_ASSIGN_OR_RETURN(Tensor scores, Tensor::Zeros({hkv, l}));
  const int64_t half = opt.kernel / 2;
  tbb::parallel_for(int64_t{0}, hkv, [&](int64_t kv) {
    std::vector<float> red(l);
    for (int64_t j = 0; j < l; ++j) {
      float acc = opt.gqa == GqaReduce::kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (int64_t gg = 0; gg < g; ++gg) {
        const float x = per_head[(kv * g + gg) * l + j];
        acc = opt.gqa == GqaReduce::kMax ? std::max(acc, x) : acc + x;
      }
      red[j] = opt.gqa == GqaReduce::kMax ? acc : acc / static_cast<float>(g);
    }
    float* out = scores.mutable_ptr() + kv * l;
    for (int64_t j = 0; j < l; ++j) {
      const int64_t lo = std::max<int64_t>(0, j - half), hi = std::min(l - 1, j + half);
      if (opt.pool == PoolKind::kMax) {
        float m = red[lo];
        for (int64_t t = lo + 1; t <= hi; ++t) m = std::max(m, red[t]);
        out[j] = m;
      } else {
        float acc = 0;
        for (int64_t t = lo; t <= hi; ++t) acc += red[t];
        out[j] = acc / static_cast<float>(opt.kernel);
      }
    }
  });
  return scores;
}

absl::StatusOr<BudgetAllocation> AllocateBudgets(const Tensor& scores, int64_t budget_prime,
                                                 double alpha) {
  TANDEM_RETURN_IF_ERROR(CheckRank(scores, 2, "scores"));
  if (budget_prime < 0) return absl::InvalidArgumentError("budget_prime must be >= 0");
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha ", alpha, " outside [0, 1]"));
  }
  const int64_t hkv = scores.dim(0), l = scores.dim(1);
  for (float s : scores.data()) {
    if (std::isnan(s)) return absl::InvalidArgumentError("scores contain NaN");
  }
  BudgetAllocation out;
  if (budget_prime >= l) {
    out.counts.assign(hkv, l);
    out.caps.assign(hkv, l);
    return out;
  }
  // Global top-(H_kv B') over all heads; ties towards lower (head, position).
  std::vector<int64_t> flat(static_cast<size_t>(hkv * l));
  std::iota(flat.begin(), flat.end(), 0);
  const float* s = scores.ptr();
  const int64_t total = hkv * budget_prime;
  auto before = [s](int64_t a, int64_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
  if (total > 0) std::nth_element(flat.begin(), flat.begin() + (total - 1), flat.end(), before);
  out.counts.assign(hkv, 0);
  for (int64_t i = 0; i < total; ++i) ++out.counts[flat[i] / l];
  const double floor_tokens = std::floor(static_cast<double>(budget_prime) * alpha);
  out.caps.resize(hkv);
  for (int64_t hh = 0; hh < hkv; ++hh) {
    const double cap = std::nearbyint(static_cast<double>(out.counts[hh]) * (1.0 - alpha) +
                                      floor_tokens);
    out.caps[hh] = std::clamp<int64_t>(static_cast<int64_t>(cap), 0, l);
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> SelectKept(const Tensor& scores,
                                                             const std::vector<int64_t>& caps,
                                                             int64_t window) {
  TANDEM_RETURN_IF_ERROR(CheckRank(scores, 2, "scores"));
  const int64_t hkv = scores.dim(0), l = scores.dim(1);
  if (static_cast<int64_t>(caps.size()) != hkv) {
    return absl::InvalidArgumentError(
        absl::StrCat("caps has ", caps.size(), " entries for ", hkv, " heads"));
  }
  if (window < 0) return absl::InvalidArgumentError("window must be >= 0");
  std::vector<std::vector<int64_t>> kept(hkv);
  for (int64_t hh = 0; hh < hkv; ++hh) {
    if (caps[hh] < 0 || caps[hh] > l) {
      return absl::InvalidArgumentError(
          absl::StrCat("cap ", caps[hh], " of head ", hh, " outside [0, ", l, "]"));
    }
    std::vector<int64_t> order = SortedPositions(scores.ptr() + hh * l, l);
    order.resize(caps[hh]);
    std::sort(order.begin(), order.end());
    for (int64_t t = 0; t < window; ++t) order.push_back(l + t);
    kept[hh] = std::move(order);
  }
  return kept;
}

absl::StatusOr<CompactKv> CompactKvCache(const Tensor& k, const Tensor& v,
                                         std::vector<std::vector<int64_t>> kept) {
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 3, "k"));
  if (v.shape() != k.shape()) return absl::InvalidArgumentError("k and v shapes differ");
  const int64_t hkv = k.dim(0), n = k.dim(1), d = k.dim(2);
  if (static_cast<int64_t>(kept.size()) != hkv) {
    return absl::InvalidArgumentError(
        absl::StrCat("kept has ", kept.size(), " lists for ", hkv, " KV heads"));
  }
  CompactKv out;
  out.cu_seqlens.assign(hkv + 1, 0);
  for (int64_t hh = 0; hh < hkv; ++hh) {
    for (int64_t p : kept[hh]) {
      if (p < 0 || p >= n) {
        return absl::InvalidArgumentError(absl::StrCat("kept position ", p, " outside [0, ", n, ")"));
      }
    }
    out.cu_seqlens[hh + 1] = out.cu_seqlens[hh] + static_cast<int64_t>(kept[hh].size());
  }
  const int64_t total = out.cu_seqlens[hkv];
  TANDEM_ASSIGN_OR_RETURN(out.keys, Tensor::Zeros({total, d}));
  TANDEM_ASSIGN_OR_RETURN(out.values, Tensor::Zeros({total, d}));
  tbb::parallel_for(int64_t{0}, hkv, [&](int64_t hh) {
    int64_t row = out.cu_seqlens[hh];
    for (int64_t p : kept[hh]) {
      std::copy_n(k.ptr() + (hh * n + p) * d, d, out.keys.mutable_ptr() + row * d);
      std::copy_n(v.ptr() + (hh * n + p) * d, d, out.values.mutable_ptr() + row * d);
      ++row;
    }
  });
  out.kept = std::move(kept);
  return out;
}

absl::StatusOr<CompactKv> AdaKvCompress(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const AdaKvOptions& opt) {
  TANDEM_RETURN_IF_ERROR(CheckBudget(opt));
  if (v.shape() != k.shape()) return absl::InvalidArgumentError("k and v shapes differ");
  TANDEM_ASSIGN_OR_RETURN(Tensor scores, SnapKvScores(q, k, opt.snap));
  TANDEM_ASSIGN_OR_RETURN(auto kept, AdaKvSelect(scores, opt));
  return CompactKvCache(k, v, std::move(kept));
}

absl::StatusOr<std::vector<std::vector<int64_t>>> AdaKvSelect(const Tensor& scores,
                                                              const AdaKvOptions& opt) {
  TANDEM_RETURN_IF_ERROR(CheckBudget(opt));
  TANDEM_ASSIGN_OR_RETURN(BudgetAllocation alloc,
                          AllocateBudgets(scores, opt.budget - opt.snap.window, opt.alpha));
  return SelectKept(scores, alloc.caps, opt.snap.window);
}

absl::StatusOr<Tensor> CompactDecodeAttention(const Tensor& q, const CompactKv& cache) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "q"));
  const int64_t hkv = static_cast<int64_t>(cache.cu_seqlens.size()) - 1;
  if (hkv < 1 || q.dim(0) % hkv != 0 || cache.keys.rank() != 2 ||
      cache.keys.dim(1) != q.dim(1) || cache.values.shape() != cache.keys.shape() ||
      cache.cu_seqlens.back() != cache.keys.dim(0)) {
    return absl::InvalidArgumentError("q (H, d) does not fit the compacted cache");
  }
  const int64_t h = q.dim(0), d = q.dim(1), g = h / hkv;
  for (int64_t hh = 0; hh < hkv; ++hh) {
    if (cache.cu_seqlens[hh + 1] <= cache.cu_seqlens[hh]) {
      return absl::InvalidArgumentError(absl::StrCat("KV head ", hh, " keeps no entries"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, d}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  tbb::parallel_for(int64_t{0}, hkv, [&](int64_t kv) {
    const int64_t off = cache.cu_seqlens[kv], len = cache.cu_seqlens[kv + 1] - off;
    // The G query heads of a KV head read its entries once, as one (G, d) block.
    internal::AttendRows(q.ptr() + kv * g * d, d, g, cache.keys.ptr() + off * d, d,
                         cache.values.ptr() + off * d, d, len, d, internal::kNoCausalMask, scale,
                         out.mutable_ptr() + kv * g * d, d);
  });
  return out;
}

}  // namespace tandem::ml::kernels
