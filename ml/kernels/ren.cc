#include "ml/kernels/ren.h"

#include <cmath>
#include <numbers>
#include <random>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/attention_core.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Shape = std::vector<int64_t>;
constexpr float kLnEps = 1e-5f;

ConstMap AsMat(const Tensor& t, int64_t rows, int64_t cols) { return ConstMap(t.ptr(), rows, cols); }

Tensor ToTensor(const RowMat& m) {
  std::vector<float> data(m.data(), m.data() + m.size());
  return *Tensor::FromData({m.rows(), m.cols()}, std::move(data));
}

// Row-wise LayerNorm; gamma/beta may be null (no affine).
RowMat LayerNorm(const RowMat& x, const float* gamma, const float* beta) {
  RowMat y(x.rows(), x.cols());
  const int64_t d = x.cols();
  for (int64_t i = 0; i < x.rows(); ++i) {
    const float mean = x.row(i).mean();
    const float var = (x.row(i).array() - mean).square().mean();
    const float inv = 1.0f / std::sqrt(var + kLnEps);
    for (int64_t c = 0; c < d; ++c) {
      float v = (x(i, c) - mean) * inv;
      if (gamma != nullptr) v = v * gamma[c] + beta[c];
      y(i, c) = v;
    }
  }
  return y;
}

absl::Status Expect(const Tensor& t, const Shape& shape, const char* what) {
  if (t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat("REN weight ", what, " has shape ",
                                                   t.ShapeString(), ", expected rank ",
                                                   shape.size(), " [", shape[0], "...]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLayer(const RenLayerWeights& l, int64_t d) {
  for (const auto& [t, what] :
       {std::pair{&l.ln_q_gamma, "ln_q_gamma"}, {&l.ln_q_beta, "ln_q_beta"},
        {&l.ln_in_gamma, "ln_in_gamma"}, {&l.ln_in_beta, "ln_in_beta"}, {&l.b2, "b2"},
        {&l.ln_out_gamma, "ln_out_gamma"}, {&l.ln_out_beta, "ln_out_beta"}}) {
    TANDEM_RETURN_IF_ERROR(Expect(*t, {d}, what));
  }
  for (const auto& [t, what] : {std::pair{&l.w_q, "w_q"}, {&l.w_k, "w_k"}, {&l.w_v, "w_v"},
                                {&l.w_o, "w_o"}}) {
    TANDEM_RETURN_IF_ERROR(Expect(*t, {d, d}, what));
  }
  TANDEM_RETURN_IF_ERROR(Expect(l.w1, {d, 2 * d}, "w1"));
  TANDEM_RETURN_IF_ERROR(Expect(l.b1, {2 * d}, "b1"));
  return Expect(l.w2, {2 * d, d}, "w2");
}

}  // namespace

absl::StatusOr<RenWeights> RenWeights::Random(int64_t dim, int64_t heads, int64_t num_layers,
                                              uint64_t seed) {
  if (dim < 2 || dim % 2 != 0 || heads < 1 || dim % heads != 0 || num_layers < 1 ||
      dim > 4096 || num_layers > 64) {
    return absl::InvalidArgumentError(absl::StrCat("REN dims D=", dim, " H=", heads, " L=",
                                                   num_layers, " invalid"));
  }
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto make = [&](Shape shape, float std, float mean) -> absl::StatusOr<Tensor> {
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(std::move(shape)));
    for (float& x : t.mutable_data()) x = mean + std * normal(gen);
    return t;
  };
  const float s = 1.0f / std::sqrt(static_cast<float>(dim));
  const float s2 = 1.0f / std::sqrt(static_cast<float>(2 * dim));
  RenWeights w;
  w.dim = dim;
  w.heads = heads;
  TANDEM_ASSIGN_OR_RETURN(w.fourier, make({2, dim / 2}, 1.0f, 0.0f));
  TANDEM_ASSIGN_OR_RETURN(w.w_p, make({dim, dim}, s, 0.0f));
  TANDEM_ASSIGN_OR_RETURN(w.b_p, make({dim}, 0.1f, 0.0f));
  for (int64_t l = 0; l < num_layers; ++l) {
    RenLayerWeights lw;
    TANDEM_ASSIGN_OR_RETURN(lw.ln_q_gamma, make({dim}, 0.1f, 1.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.ln_q_beta, make({dim}, 0.1f, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w_q, make({dim, dim}, s, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w_k, make({dim, dim}, s, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w_v, make({dim, dim}, s, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w_o, make({dim, dim}, s, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.ln_in_gamma, make({dim}, 0.1f, 1.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.ln_in_beta, make({dim}, 0.1f, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w1, make({dim, 2 * dim}, s, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.b1, make({2 * dim}, 0.1f, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.w2, make({2 * dim, dim}, s2, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.b2, make({dim}, 0.1f, 0.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.ln_out_gamma, make({dim}, 0.1f, 1.0f));
    TANDEM_ASSIGN_OR_RETURN(lw.ln_out_beta, make({dim}, 0.1f, 0.0f));
    w.layers.push_back(std::move(lw));
  }
  TANDEM_ASSIGN_OR_RETURN(w.ln_f_gamma, make({dim}, 0.1f, 1.0f));
  TANDEM_ASSIGN_OR_RETURN(w.ln_f_beta, make({dim}, 0.1f, 0.0f));
  TANDEM_ASSIGN_OR_RETURN(w.w_out, make({dim, dim}, s, 0.0f));
  return w;
}

absl::Status ValidateRenWeights(const RenWeights& w) {
  const int64_t d = w.dim;
  if (d < 2 || d % 2 != 0 || w.heads < 1 || d % w.heads != 0 || w.layers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("REN needs even D >= 2 divisible by H >= 1 and >= 1 layer; got D=", d,
                     " H=", w.heads, " layers=", w.layers.size()));
  }
  TANDEM_RETURN_IF_ERROR(Expect(w.fourier, {2, d / 2}, "fourier"));
  TANDEM_RETURN_IF_ERROR(Expect(w.w_p, {d, d}, "w_p"));
  TANDEM_RETURN_IF_ERROR(Expect(w.b_p, {d}, "b_p"));
  for (const RenLayerWeights& l : w.layers) TANDEM_RETURN_IF_ERROR(ValidateLayer(l, d));
  TANDEM_RETURN_IF_ERROR(Expect(w.ln_f_gamma, {d}, "ln_f_gamma"));
  TANDEM_RETURN_IF_ERROR(Expect(w.ln_f_beta, {d}, "ln_f_beta"));
  return Expect(w.w_out, {d, d}, "w_out");
}

absl::StatusOr<Tensor> FourierEncode(const Tensor& p, const Tensor& fourier) {
  TANDEM_RETURN_IF_ERROR(CheckRank(p, 2, "points"));
  TANDEM_RETURN_IF_ERROR(CheckRank(fourier, 2, "fourier"));
  if (p.dim(1) != 2 || fourier.dim(0) != 2) {
    return absl::InvalidArgumentError("points must be (n, 2) and fourier (2, D/2)");
  }
  const int64_t n = p.dim(0), half = fourier.dim(1);
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({n, 2 * half}));
  const float two_pi = 2.0f * std::numbers::pi_v<float>;
  for (int64_t i = 0; i < n; ++i) {
    const float x = 2.0f * p.ptr()[2 * i] - 1.0f, y = 2.0f * p.ptr()[2 * i + 1] - 1.0f;
    for (int64_t c = 0; c < half; ++c) {
      const float a = two_pi * (x * fourier.ptr()[c] + y * fourier.ptr()[half + c]);
      out.mutable_ptr()[i * 2 * half + c] = std::sin(a);
      out.mutable_ptr()[i * 2 * half + half + c] = std::cos(a);
    }
  }
  return out;
}

absl::StatusOr<RenAttentionOutput> RenAttention(const Tensor& x, const Tensor& kv,
                                                const RenLayerWeights& layer, int64_t heads,
                                                bool project) {
  TANDEM_RETURN_IF_ERROR(CheckRank(x, 2, "x"));
  TANDEM_RETURN_IF_ERROR(CheckRank(kv, 2, "kv"));
  const int64_t np = x.dim(0), d = x.dim(1), nk = kv.dim(0);
  if (kv.dim(1) != d || heads < 1 || d % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("x ", x.ShapeString(), ", kv ",
                                                   kv.ShapeString(), ", heads ", heads,
                                                   " do not fit"));
  }
  TANDEM_RETURN_IF_ERROR(ValidateLayer(layer, d));
  const int64_t dh = d / heads;
  const RowMat qp = AsMat(x, np, d) * AsMat(layer.w_q, d, d);
  const RowMat kp = AsMat(kv, nk, d) * AsMat(layer.w_k, d, d);
  const RowMat vp = project ? RowMat(AsMat(kv, nk, d) * AsMat(layer.w_v, d, d))
                            : RowMat(AsMat(kv, nk, d));
  RowMat o(np, d);
  TANDEM_ASSIGN_OR_RETURN(Tensor maps, Tensor::Zeros({heads, np, nk}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  tbb::parallel_for(int64_t{0}, heads, [&](int64_t h) {
    const RowMat qh = LayerNorm(qp.middleCols(h * dh, dh), nullptr, nullptr);
    const RowMat kh = LayerNorm(kp.middleCols(h * dh, dh), nullptr, nullptr);
    Eigen::Map<RowMat> s(maps.mutable_ptr() + h * np * nk, np, nk);
    s.noalias() = (qh * kh.transpose()) * scale;
    for (int64_t i = 0; i < np; ++i) internal::SoftmaxInPlace(s.data() + i * nk, nk);
    o.middleCols(h * dh, dh).noalias() = s * vp.middleCols(h * dh, dh);
  });
  RenAttentionOutput out;
  out.out = ToTensor(project ? RowMat(o * AsMat(layer.w_o, d, d)) : o);
  out.maps = std::move(maps);
  return out;
}

absl::StatusOr<RenAttentionOutput> RenBlock(const Tensor& q, const Tensor& kv,
                                            const RenLayerWeights& layer, int64_t heads,
                                            bool last) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "q"));
  const int64_t np = q.dim(0), d = q.dim(1);
  TANDEM_RETURN_IF_ERROR(ValidateLayer(layer, d));
  const RowMat qm = AsMat(q, np, d);
  const Tensor x = ToTensor(LayerNorm(qm, layer.ln_q_gamma.ptr(), layer.ln_q_beta.ptr()));
  TANDEM_ASSIGN_OR_RETURN(RenAttentionOutput a, RenAttention(x, kv, layer, heads, !last));
  const RowMat x2 = AsMat(a.out, np, d) + qm;
  RowMat hid = LayerNorm(x2, layer.ln_in_gamma.ptr(), layer.ln_in_beta.ptr()) *
               AsMat(layer.w1, d, 2 * d);
  hid.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(layer.b1.ptr(), 2 * d);
  hid = hid.unaryExpr([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678f)); });
  RowMat mlp = hid * AsMat(layer.w2, 2 * d, d);
  mlp.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(layer.b2.ptr(), d);
  a.out = ToTensor(LayerNorm(mlp, layer.ln_out_gamma.ptr(), layer.ln_out_beta.ptr()) + x2);
  return a;
}

absl::StatusOr<RenOutput> RenForward(const Tensor& features, const Tensor& points,
                                     double image_size, const RenWeights& w) {
  TANDEM_RETURN_IF_ERROR(ValidateRenWeights(w));
  TANDEM_RETURN_IF_ERROR(CheckRank(features, 3, "features"));
  TANDEM_RETURN_IF_ERROR(CheckRank(points, 2, "points"));
  const int64_t d = w.dim, hp = features.dim(1), wp = features.dim(2), nk = hp * wp;
  if (features.dim(0) != d || points.dim(1) != 2) {
    return absl::InvalidArgumentError(absl::StrCat("features ", features.ShapeString(),
                                                   " must be (", d, ", Hp, Wp) and points ",
                                                   points.ShapeString(), " (n_p, 2)"));
  }
  if (!(image_size > 0) || !std::isfinite(image_size)) {
    return absl::InvalidArgumentError("image_size must be positive");
  }
  for (float v : points.data()) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("points must be finite");
  }
  const int64_t np = points.dim(0);
  // Patch centres in [0, 1]^2 as (x, y), row-major over (Hp, Wp).
  TANDEM_ASSIGN_OR_RETURN(Tensor centres, Tensor::Zeros({nk, 2}));
  for (int64_t r = 0; r < hp; ++r) {
    for (int64_t c = 0; c < wp; ++c) {
      centres.mutable_ptr()[2 * (r * wp + c)] = (static_cast<float>(c) + 0.5f) / wp;
      centres.mutable_ptr()[2 * (r * wp + c) + 1] = (static_cast<float>(r) + 0.5f) / hp;
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor pe_kv, FourierEncode(centres, w.fourier));
  RowMat kvm = AsMat(features, d, nk).transpose();
  kvm += AsMat(pe_kv, nk, d);
  const Tensor kv = ToTensor(kvm);
  TANDEM_ASSIGN_OR_RETURN(Tensor pn, Tensor::FromData(points.shape(), std::vector<float>(
                                                          points.data().begin(), points.data().end())));
  for (float& v : pn.mutable_data()) v = static_cast<float>(v / image_size);
  TANDEM_ASSIGN_OR_RETURN(Tensor e, FourierEncode(pn, w.fourier));
  const ConstMap em = AsMat(e, np, d);
  RowMat q = em * AsMat(w.w_p, d, d);
  q.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(w.b_p.ptr(), d);
  RenOutput out;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    q += em;
    TANDEM_ASSIGN_OR_RETURN(RenAttentionOutput b, RenBlock(ToTensor(q), kv, w.layers[l], w.heads,
                                                           l + 1 == w.layers.size()));
    q = AsMat(b.out, np, d);
    out.maps = std::move(b.maps);
  }
  out.tokens = ToTensor(LayerNorm(q, w.ln_f_gamma.ptr(), w.ln_f_beta.ptr()) *
                        AsMat(w.w_out, d, d));
  return out;
}

absl::StatusOr<Tensor> MergeRegionTokens(const Tensor& tokens, double threshold) {
  TANDEM_RETURN_IF_ERROR(CheckRank(tokens, 2, "tokens"));
  if (!(threshold >= -1.0 && threshold <= 1.0)) {
    return absl::InvalidArgumentError("threshold must be in [-1, 1]");
  }
  const int64_t n = tokens.dim(0), d = tokens.dim(1);
  const ConstMap t = AsMat(tokens, n, d);
  Eigen::VectorXf norms = t.rowwise().norm();
  std::vector<int64_t> group(n, -1);
  std::vector<std::vector<int64_t>> groups;
  for (int64_t i = 0; i < n; ++i) {
    if (group[i] >= 0) continue;
    group[i] = static_cast<int64_t>(groups.size());
    groups.push_back({i});
    for (int64_t j = i + 1; j < n; ++j) {
      if (group[j] >= 0) continue;
      const float den = norms[i] * norms[j];
      const double cos = den > 0 ? t.row(i).dot(t.row(j)) / den : (i == j ? 1.0 : 0.0);
      if (cos >= threshold) {
        group[j] = group[i];
        groups.back().push_back(j);
      }
    }
  }
  RowMat out = RowMat::Zero(static_cast<int64_t>(groups.size()), d);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int64_t i : groups[g]) out.row(g) += t.row(i);
    out.row(g) /= static_cast<float>(groups[g].size());
  }
  return ToTensor(out);
}

double RenBlockFlops(int64_t n_p, int64_t n_k, int64_t d) {
  const double np = static_cast<double>(n_p), nk = static_cast<double>(n_k), dd = d;
  return 4 * np * nk * dd + 4 * (np + nk) * dd * dd + 8 * np * dd * dd;
}

}  // namespace tandem::ml::kernels
