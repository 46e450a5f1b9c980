#include "ml/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/attention_core.h"
#include "ml/kernels/internal/few_rows.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels {
namespace {
constexpr int64_t kQueryTile = 128;
// Below this many query tiles the keys are split into spans of kSpanKeys
// (a multiple of kKvBlock), each its own task.
constexpr size_t kFewTiles = 8;
constexpr int64_t kSpanKeys = 64 * kKvBlock;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

absl::Status ValidateAttentionShapes(const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool causal) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 3, "q"));
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 3, "k"));
  TANDEM_RETURN_IF_ERROR(CheckRank(v, 3, "v"));
  if (k.shape() != v.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("k ", k.ShapeString(), " and v ", v.ShapeString(), " must match"));
  }
  if (q.dim(2) != k.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("head dim of q (", q.dim(2),
                                                   ") differs from k (", k.dim(2), ")"));
  }
  if (q.dim(0) % k.dim(0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query heads (", q.dim(0), ") must be a multiple of KV heads (", k.dim(0), ")"));
  }
  if (causal && q.dim(1) > k.dim(1)) {
    return absl::InvalidArgumentError("causal attention needs Nq <= Nk");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DenseAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                      bool causal) {
  TANDEM_RETURN_IF_ERROR(ValidateAttentionShapes(q, k, v, causal));
  const int64_t nk = k.dim(1), d = k.dim(2);
  return DenseAttentionOfRuns(
      q, k.dim(0), nk, d,
      [&](int64_t kv, KvRunFn fn) {
        fn(k.ptr() + kv * nk * d, v.ptr() + kv * nk * d, 0, nk);  // one run: the whole head
        return absl::OkStatus();
      },
      causal);
}

absl::StatusOr<Tensor> DenseAttentionOfRuns(const Tensor& q, int64_t hkv, int64_t nk, int64_t d,
                                            KvRuns kv, bool causal) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 3, "q"));
  if (hkv < 1 || nk < 1 || d < 1 || q.dim(2) != d || q.dim(0) % hkv != 0) {
    return absl::InvalidArgumentError(absl::StrCat("q ", q.ShapeString(), " does not fit ", hkv,
                                                   " KV heads of ", nk, " keys of head dim ", d));
  }
  const int64_t h = q.dim(0), nq = q.dim(1), group = h / hkv;
  if (causal && nq > nk) return absl::InvalidArgumentError("causal attention needs Nq <= Nk");
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, nq, d}));
  if (nq == 0) return out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Tiles of consecutive rows of q seen as (H * Nq, d), row R = query R % Nq
  // of head R / Nq, all of one KV head. Few queries (decode): the G heads of
  // a KV head form one tile, so the keys and values are read once per KV
  // head, not once per query head. Else up to kQueryTile queries of a head.
  struct Tile {
    int64_t first_row, rows, kv;
  };
  std::vector<Tile> tiles;
  if (group * nq <= kQueryTile) {
    for (int64_t kvh = 0; kvh < hkv; ++kvh) tiles.push_back({kvh * group * nq, group * nq, kvh});
  } else {
    for (int64_t hh = 0; hh < h; ++hh) {
      for (int64_t i0 = 0; i0 < nq; i0 += kQueryTile) {
        tiles.push_back({hh * nq + i0, std::min(kQueryTile, nq - i0), hh / group});
      }
    }
  }
  // Few tiles (a decode step): the keys split into spans of kSpanKeys, each
  // a task of its own with its own (m, z, acc), merged in span order after
  // (as flash-decoding does), so every core works on one decode step. The
  // split depends on the shapes only: the same arithmetic on any machine.
  const int64_t spans =
      tiles.size() < kFewTiles ? std::max<int64_t>(1, (nk + kSpanKeys - 1) / kSpanKeys) : 1;
  const int64_t span_keys = spans == 1 ? nk : kSpanKeys;
  const size_t tasks = tiles.size() * static_cast<size_t>(spans);
  struct Partial {
    RowMat acc;
    std::vector<float> m, z;
  };
  std::vector<Partial> partials(tasks);
  std::vector<absl::Status> failed(tasks);
  // Per task: one pass over its keys in blocks of kKvBlock (kv_runs.h), an
  // online softmax (the running row max m and the rescaled sum z of
  // exp(s - m), the output accumulated and rescaled with them), so the
  // scores held are a tile x kKvBlock block, not a tile x Nk row (256 MiB
  // for 128 queries at Nk = 512K).
  tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks), [&](const auto& range) {
    RowMat s(kQueryTile, kKvBlock);
    KvBlockScratch scratch;
    for (size_t task = range.begin(); task < range.end(); ++task) {
      const Tile& tile = tiles[task / static_cast<size_t>(spans)];
      const int64_t lo = static_cast<int64_t>(task % static_cast<size_t>(spans)) * span_keys;
      const int64_t hi = std::min(nk, lo + span_keys);
      const int64_t r0 = tile.first_row, rows = tile.rows;
      Eigen::Map<const RowMat> qt(q.ptr() + r0 * d, rows, d);
      // Row R's query sits at position nk - nq + R % nq and sees keys <= it.
      int64_t last_seen = 0;
      for (int64_t i = 0; i < rows; ++i) last_seen = std::max(last_seen, nk - nq + (r0 + i) % nq);
      Partial& p = partials[task];
      p.acc = RowMat::Zero(rows, d);
      p.m.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
      p.z.assign(static_cast<size_t>(rows), 0.0f);
      // This span's blocks (spans are whole blocks), up to the last key a
      // query of the tile sees.
      failed[task] = VisitKvBlocks(
          kv, tile.kv, nk, d, /*with_values=*/true, lo, causal ? std::min(hi, last_seen + 1) : hi,
          &scratch, [&](const float* keys, const float* values, int64_t b0, int64_t c) {
            // A decode step's few rows read each key once for all rows
            // (internal/few_rows.h); a tile of many rows is a GEMM.
            const bool few = rows <= internal::kFewRows;
            if (few) {
              internal::ScoreFewRows(q.ptr() + r0 * d, rows, keys, c, d, scale, s.data(), kKvBlock);
            } else {
              s.block(0, 0, rows, c).noalias() =
                  (qt * Eigen::Map<const RowMat>(keys, c, d).transpose()) * scale;
            }
            for (int64_t i = 0; i < rows; ++i) {
              Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic>> row(s.data() + i * kKvBlock, c);
              if (causal) {
                const int64_t seen = nk - nq + (r0 + i) % nq;
                for (int64_t j = std::max<int64_t>(0, seen + 1 - b0); j < c; ++j) {
                  row[j] = -std::numeric_limits<float>::infinity();
                }
              }
              const float m_new = std::max(p.m[i], row.maxCoeff());
              if (m_new == -std::numeric_limits<float>::infinity()) {
                row.setZero();  // nothing seen yet in this span: adds nothing
                continue;
              }
              const float alpha = std::exp(p.m[i] - m_new);
              row = (row - m_new).exp();
              p.z[i] = p.z[i] * alpha + row.sum();
              p.acc.row(i) *= alpha;
              p.m[i] = m_new;
            }
            if (few) {
              internal::AccumulateFewRows(s.data(), kKvBlock, rows, values, c, d, p.acc.data());
            } else {
              p.acc.noalias() += s.block(0, 0, rows, c) * Eigen::Map<const RowMat>(values, c, d);
            }
          });
    }
  });
  for (absl::Status& st : failed) TANDEM_RETURN_IF_ERROR(st);
  // Merge each tile's spans in order: m = max m_c, z = sum z_c e^(m_c - m),
  // o = sum acc_c e^(m_c - m) / z. Every row sees key 0, so some span's m_c
  // is finite.
  float* o = out.mutable_ptr();
  for (size_t t = 0; t < tiles.size(); ++t) {
    for (int64_t i = 0; i < tiles[t].rows; ++i) {
      float m = -std::numeric_limits<float>::infinity(), z = 0.0f;
      for (int64_t c = 0; c < spans; ++c) m = std::max(m, partials[t * spans + c].m[i]);
      Eigen::Map<Eigen::RowVectorXf> row(o + (tiles[t].first_row + i) * d, d);
      row.setZero();
      for (int64_t c = 0; c < spans; ++c) {
        const Partial& p = partials[t * spans + c];
        if (p.m[i] == -std::numeric_limits<float>::infinity()) continue;
        const float w = std::exp(p.m[i] - m);
        z += p.z[i] * w;
        row += p.acc.row(i) * w;
      }
      row /= z;
    }
  }
  return out;
}

absl::StatusOr<Tensor> MaskedAttentionNaive(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const std::function<bool(int64_t, int64_t)>& allowed) {
  TANDEM_RETURN_IF_ERROR(ValidateAttentionShapes(q, k, v, /*causal=*/false));
  const int64_t h = q.dim(0), nq = q.dim(1), d = q.dim(2), hkv = k.dim(0), nk = k.dim(1);
  const int64_t group = h / hkv;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({h, nq, d}));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(nk);
  for (int64_t hh = 0; hh < h; ++hh) {
    const float* qh = q.ptr() + hh * nq * d;
    const float* kh = k.ptr() + (hh / group) * nk * d;
    const float* vh = v.ptr() + (hh / group) * nk * d;
    for (int64_t i = 0; i < nq; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < nk; ++j) {
        if (!allowed(i, j)) {
          s[j] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double{qh[i * d + c]} * kh[j * d + c];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      if (m == -std::numeric_limits<double>::infinity()) {
        return absl::InvalidArgumentError(absl::StrCat("query ", i, " has no allowed key"));
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) sum += (s[j] = std::exp(s[j] - m));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < nk; ++j) acc += s[j] * vh[j * d + c];
        out.mutable_ptr()[(hh * nq + i) * d + c] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace tandem::ml::kernels
