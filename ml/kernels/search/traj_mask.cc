#include "ml/kernels/search/traj_mask.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels::search {
namespace {

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

absl::Status CheckWeights(const MaskGeneratorWeights& w, int64_t d) {
  if (w.w1.rank() != 2 || w.w1.dim(0) != d || w.b1.shape() != std::vector<int64_t>{w.w1.dim(1)} ||
      w.w2.shape() != std::vector<int64_t>{w.w1.dim(1)} || w.b2.shape() != std::vector<int64_t>{1}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mask generator weights w1 ", w.w1.ShapeString(), ", b1 ", w.b1.ShapeString(), ", w2 ",
        w.w2.ShapeString(), ", b2 ", w.b2.ShapeString(), " do not fit points of width ", d));
  }
  return absl::OkStatus();
}

absl::Status CheckRho(double rho) {
  if (!(rho > 0 && rho <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("keep_ratio must be in (0, 1], got ", rho));
  }
  return absl::OkStatus();
}

// Forward pass: u = p W1 + b1 (len, hidden), a = SiLU(u), m = sigmoid(a w2 + b2).
struct Forward {
  std::vector<double> u, a, m;
};

Forward Run(const MaskGeneratorWeights& w, const Tensor& points) {
  const int64_t len = points.dim(0), d = points.dim(1), hd = w.w1.dim(1);
  Forward f;
  f.u.assign(len * hd, 0.0);
  f.a.resize(len * hd);
  f.m.resize(len);
  for (int64_t t = 0; t < len; ++t) {
    double s = w.b2.data()[0];
    for (int64_t j = 0; j < hd; ++j) {
      double u = w.b1.data()[j];
      for (int64_t i = 0; i < d; ++i) u += double{points.data()[t * d + i]} * w.w1.data()[i * hd + j];
      f.u[t * hd + j] = u;
      f.a[t * hd + j] = u * Sigmoid(u);
      s += f.a[t * hd + j] * w.w2.data()[j];
    }
    f.m[t] = Sigmoid(s);
  }
  return f;
}

}  // namespace

absl::StatusOr<MaskGeneratorWeights> MaskGeneratorWeights::Random(int64_t d, int64_t hidden,
                                                                  uint64_t seed) {
  if (d < 1 || d > 4096 || hidden < 1 || hidden > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask generator sizes must be in [1, 4096], got D=", d, " hidden=", hidden));
  }
  std::mt19937_64 gen(seed);
  auto gauss = [&](std::vector<int64_t> shape, double stddev) {
    Tensor t = *Tensor::Zeros(std::move(shape));
    std::normal_distribution<float> n(0.0f, static_cast<float>(stddev));
    for (float& v : t.mutable_data()) v = n(gen);
    return t;
  };
  MaskGeneratorWeights w;
  w.w1 = gauss({d, hidden}, 1.0 / std::sqrt(double(d)));
  w.b1 = *Tensor::Zeros({hidden});
  w.w2 = gauss({hidden}, 1.0 / std::sqrt(double(hidden)));
  w.b2 = *Tensor::Zeros({1});
  return w;
}

absl::StatusOr<Tensor> MaskScores(const MaskGeneratorWeights& w, const Tensor& points) {
  TANDEM_RETURN_IF_ERROR(CheckRank(points, 2, "mask generator points (len, D)"));
  TANDEM_RETURN_IF_ERROR(CheckWeights(w, points.dim(1)));
  const Forward f = Run(w, points);
  return Tensor::FromData({points.dim(0)}, std::vector<float>(f.m.begin(), f.m.end()));
}

absl::StatusOr<MaskLoss> MaskGeneratorLoss(const MaskGeneratorWeights& w, const Tensor& points,
                                           const Tensor& teacher, const MaskLossOptions& o) {
  TANDEM_RETURN_IF_ERROR(CheckRank(points, 2, "mask generator points (len, D)"));
  const int64_t len = points.dim(0), d = points.dim(1), hd = w.w1.rank() == 2 ? w.w1.dim(1) : 0;
  TANDEM_RETURN_IF_ERROR(CheckWeights(w, d));
  if (teacher.shape() != std::vector<int64_t>{d}) {
    return absl::InvalidArgumentError(absl::StrCat("teacher embedding has shape ",
                                                   teacher.ShapeString(), ", expected [", d, "]"));
  }
  TANDEM_RETURN_IF_ERROR(CheckRho(o.keep_ratio));
  if (!(o.lambda >= 0)) return absl::InvalidArgumentError("lambda must be >= 0");
  const Forward f = Run(w, points);
  const double msum = std::accumulate(f.m.begin(), f.m.end(), 0.0);
  std::vector<double> e(d, 0.0), r(d);
  for (int64_t t = 0; t < len; ++t)
    for (int64_t i = 0; i < d; ++i) e[i] += f.m[t] * points.data()[t * d + i] / msum;
  MaskLoss out;
  for (int64_t i = 0; i < d; ++i) {
    r[i] = e[i] - teacher.data()[i];
    out.distill += r[i] * r[i] / d;
  }
  out.mean_keep = msum / len;
  const double gap = out.mean_keep - o.keep_ratio;
  out.loss = out.distill + o.lambda * gap * gap;
  out.grad = MaskGeneratorWeights{*Tensor::Zeros({d, hd}), *Tensor::Zeros({hd}),
                                  *Tensor::Zeros({hd}), *Tensor::Zeros({1})};
  std::vector<double> gw1(d * hd, 0.0), gb1(hd, 0.0), gw2(hd, 0.0);
  double gb2 = 0;
  for (int64_t t = 0; t < len; ++t) {
    // d loss / d m_t, then through the sigmoid.
    double gm = 2.0 * o.lambda * gap / len;
    for (int64_t i = 0; i < d; ++i) gm += 2.0 / d * r[i] * (points.data()[t * d + i] - e[i]) / msum;
    const double gs = gm * f.m[t] * (1 - f.m[t]);
    gb2 += gs;
    for (int64_t j = 0; j < hd; ++j) {
      const double u = f.u[t * hd + j], sg = Sigmoid(u);
      gw2[j] += gs * f.a[t * hd + j];
      const double gu = gs * w.w2.data()[j] * sg * (1 + u * (1 - sg));
      gb1[j] += gu;
      for (int64_t i = 0; i < d; ++i) gw1[i * hd + j] += gu * points.data()[t * d + i];
    }
  }
  auto store = [](Tensor& t, const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) t.mutable_data()[i] = static_cast<float>(v[i]);
  };
  store(out.grad.w1, gw1);
  store(out.grad.b1, gb1);
  store(out.grad.w2, gw2);
  out.grad.b2.mutable_data()[0] = static_cast<float>(gb2);
  return out;
}

absl::StatusOr<double> MaskSgdStep(MaskGeneratorWeights* w, const Tensor& points,
                                   const Tensor& teacher, const MaskLossOptions& o, double lr) {
  if (!(lr > 0 && lr <= 1e3)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be in (0, 1e3], got ", lr));
  }
  TANDEM_ASSIGN_OR_RETURN(MaskLoss l, MaskGeneratorLoss(*w, points, teacher, o));
  for (auto [p, g] : {std::pair{&w->w1, &l.grad.w1}, {&w->b1, &l.grad.b1}, {&w->w2, &l.grad.w2},
                      {&w->b2, &l.grad.b2}}) {
    for (int64_t i = 0; i < p->size(); ++i) {
      p->mutable_data()[i] -= static_cast<float>(lr * g->data()[i]);
    }
  }
  return l.loss;
}

absl::StatusOr<std::vector<int64_t>> SelectKeyPoints(const Tensor& scores, double keep_ratio) {
  TANDEM_RETURN_IF_ERROR(CheckRank(scores, 1, "mask scores (len)"));
  TANDEM_RETURN_IF_ERROR(CheckRho(keep_ratio));
  const int64_t len = scores.dim(0);
  const int64_t k = std::clamp<int64_t>(std::llround(keep_ratio * len), std::min<int64_t>(2, len), len);
  std::vector<int64_t> order(len);
  std::iota(order.begin(), order.end(), 0);
  // Endpoints first, then by descending score (ties: earlier point first).
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const bool ea = a == 0 || a == len - 1, eb = b == 0 || b == len - 1;
    if (ea != eb) return ea;
    return scores.data()[a] > scores.data()[b];
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

absl::StatusOr<TrajBatch> CompressBatch(const TrajBatch& in,
                                        const std::vector<std::vector<int64_t>>& keep) {
  TANDEM_RETURN_IF_ERROR(CheckRank(in.gps, 3, "TrajMamba gps (batch, L, 2)"));
  const int64_t batch = in.gps.dim(0), lmax = in.gps.dim(1);
  if (static_cast<int64_t>(keep.size()) != batch ||
      static_cast<int64_t>(in.lengths.size()) != batch ||
      in.times.shape() != std::vector<int64_t>{batch, lmax} || in.roads.shape() != in.times.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compress: need one keep list and length per trajectory (", batch, ")"));
  }
  int64_t longest = 1;
  for (int64_t b = 0; b < batch; ++b) {
    const auto& k = keep[b];
    if (k.empty()) return absl::InvalidArgumentError(absl::StrCat("compress: keep[", b, "] empty"));
    for (size_t i = 0; i < k.size(); ++i) {
      if (k[i] < 0 || k[i] >= in.lengths[b] || (i > 0 && k[i] <= k[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "compress: keep[", b, "] must be increasing indices in [0, ", in.lengths[b], ")"));
      }
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(k.size()));
  }
  TrajBatch out;
  TANDEM_ASSIGN_OR_RETURN(out.gps, Tensor::Zeros({batch, longest, 2}));
  TANDEM_ASSIGN_OR_RETURN(out.times, Tensor::Zeros({batch, longest}));
  TANDEM_ASSIGN_OR_RETURN(out.roads, Tensor::Zeros({batch, longest}));
  for (int64_t b = 0; b < batch; ++b) {
    const auto& k = keep[b];
    for (size_t i = 0; i < k.size(); ++i) {
      const int64_t src = b * lmax + k[i], dst = b * longest + static_cast<int64_t>(i);
      out.gps.mutable_data()[2 * dst] = in.gps.data()[2 * src];
      out.gps.mutable_data()[2 * dst + 1] = in.gps.data()[2 * src + 1];
      out.times.mutable_data()[dst] = in.times.data()[src];
      out.roads.mutable_data()[dst] = in.roads.data()[src];
    }
    // Pad with the last kept point (never read by the encoder).
    for (int64_t i = static_cast<int64_t>(k.size()); i < longest; ++i) {
      const int64_t dst = b * longest + i, last = b * longest + static_cast<int64_t>(k.size()) - 1;
      out.gps.mutable_data()[2 * dst] = out.gps.data()[2 * last];
      out.gps.mutable_data()[2 * dst + 1] = out.gps.data()[2 * last + 1];
      out.times.mutable_data()[dst] = out.times.data()[last];
      out.roads.mutable_data()[dst] = out.roads.data()[last];
    }
    out.lengths.push_back(static_cast<int64_t>(k.size()));
  }
  return out;
}

}  // namespace tandem::ml::kernels::search
