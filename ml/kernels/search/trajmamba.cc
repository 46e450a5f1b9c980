#include "ml/kernels/search/trajmamba.h"

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/search/ssm_scan.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::search {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Shape = std::vector<int64_t>;
constexpr float kRmsEps = 1e-5f;
constexpr double kEarthRadiusKm = 6371.0088;

ConstMap AsMat(const Tensor& t, int64_t rows, int64_t cols) { return ConstMap(t.ptr(), rows, cols); }

Tensor ToTensor(const RowMat& m) {
  return *Tensor::FromData({m.rows(), m.cols()}, std::vector<float>(m.data(), m.data() + m.size()));
}

float Silu(float v) { return v / (1.0f + std::exp(-v)); }

// Row-wise x / rms(x) * gain.
void RmsNormRows(RowMat& x, const float* gain) {
  for (int64_t i = 0; i < x.rows(); ++i) {
    const float inv = 1.0f / std::sqrt(x.row(i).squaredNorm() / x.cols() + kRmsEps);
    for (int64_t c = 0; c < x.cols(); ++c) x(i, c) *= inv * gain[c];
  }
}

absl::Status Expect(const Tensor& t, const Shape& shape, const std::string& what) {
  if (t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat("TrajMamba weight ", what, " has shape ",
                                                   t.ShapeString(), ", expected ",
                                                   Tensor::Zeros(shape)->ShapeString()));
  }
  return absl::OkStatus();
}

absl::Status ValidateBranch(const BranchWeights& b, int64_t n_aux, const TrajMambaConfig& c,
                            const std::string& name) {
  const int64_t d = c.d_model, e = c.d_inner(), h = c.heads();
  TANDEM_RETURN_IF_ERROR(Expect(b.w_aux, {n_aux, c.layers * c.aux_width()}, name + ".w_aux"));
  TANDEM_RETURN_IF_ERROR(Expect(b.b_aux, {c.layers * c.aux_width()}, name + ".b_aux"));
  TANDEM_RETURN_IF_ERROR(Expect(b.final_norm, {d}, name + ".final_norm"));
  if (static_cast<int64_t>(b.layers.size()) != c.layers) {
    return absl::InvalidArgumentError(absl::StrCat("TrajMamba ", name, " has ", b.layers.size(),
                                                   " layers, config says ", c.layers));
  }
  for (size_t l = 0; l < b.layers.size(); ++l) {
    const MambaLayerWeights& w = b.layers[l];
    const std::string p = absl::StrCat(name, ".layers[", l, "].");
    TANDEM_RETURN_IF_ERROR(Expect(w.norm, {d}, p + "norm"));
    TANDEM_RETURN_IF_ERROR(Expect(w.w_in, {d, 2 * e}, p + "w_in"));
    TANDEM_RETURN_IF_ERROR(Expect(w.conv_w, {e, c.d_conv}, p + "conv_w"));
    TANDEM_RETURN_IF_ERROR(Expect(w.conv_b, {e}, p + "conv_b"));
    TANDEM_RETURN_IF_ERROR(Expect(w.a_log, {h}, p + "a_log"));
    TANDEM_RETURN_IF_ERROR(Expect(w.dt_bias, {h}, p + "dt_bias"));
    TANDEM_RETURN_IF_ERROR(Expect(w.d, {h}, p + "d"));
    TANDEM_RETURN_IF_ERROR(Expect(w.gate_norm, {e}, p + "gate_norm"));
    TANDEM_RETURN_IF_ERROR(Expect(w.w_out, {e, d}, p + "w_out"));
  }
  return absl::OkStatus();
}

class Init {
 public:
  explicit Init(uint64_t seed) : gen_(seed) {}
  Tensor Gauss(Shape shape, float stddev) {
    Tensor t = *Tensor::Zeros(std::move(shape));
    std::normal_distribution<float> n(0.0f, stddev);
    for (float& v : t.mutable_data()) v = n(gen_);
    return t;
  }
  Tensor Fill(Shape shape, float value) {
    Tensor t = *Tensor::Zeros(std::move(shape));
    for (float& v : t.mutable_data()) v = value;
    return t;
  }
  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }

 private:
  std::mt19937_64 gen_;
};

BranchWeights RandomBranch(Init& init, int64_t n_aux, const TrajMambaConfig& c) {
  const int64_t d = c.d_model, e = c.d_inner(), h = c.heads();
  BranchWeights b;
  b.w_aux = init.Gauss({n_aux, c.layers * c.aux_width()}, 1.0f / std::sqrt(float(n_aux)));
  b.b_aux = init.Fill({c.layers * c.aux_width()}, 0.0f);
  b.final_norm = init.Fill({d}, 1.0f);
  for (int64_t l = 0; l < c.layers; ++l) {
    MambaLayerWeights w;
    w.norm = init.Fill({d}, 1.0f);
    w.w_in = init.Gauss({d, 2 * e}, 1.0f / std::sqrt(float(d)));
    w.conv_w = init.Gauss({e, c.d_conv}, 1.0f / std::sqrt(float(c.d_conv)));
    w.conv_b = init.Fill({e}, 0.0f);
    w.a_log = init.Fill({h}, 0.0f);
    w.dt_bias = init.Fill({h}, 0.0f);
    for (int64_t i = 0; i < h; ++i) {
      w.a_log.mutable_data()[i] = static_cast<float>(std::log(init.Uniform(1.0, 16.0)));
      const double dt = std::exp(init.Uniform(std::log(1e-3), std::log(0.1)));
      w.dt_bias.mutable_data()[i] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
    w.d = init.Fill({h}, 1.0f);
    w.gate_norm = init.Fill({e}, 1.0f);
    w.w_out = init.Gauss({e, d}, 1.0f / std::sqrt(float(e)));
    b.layers.push_back(std::move(w));
  }
  return b;
}

// Runs one branch over one sequence from its input hidden state.
absl::StatusOr<RowMat> RunBranch(RowMat hidden, const Tensor& aux, const BranchWeights& b,
                                 const TrajMambaConfig& c) {
  const int64_t len = hidden.rows(), width = c.aux_width();
  const RowMat proj = (AsMat(aux, len, aux.dim(1)) * AsMat(b.w_aux, aux.dim(1), c.layers * width))
                          .rowwise() +
                      Eigen::Map<const Eigen::RowVectorXf>(b.b_aux.ptr(), c.layers * width);
  for (int64_t l = 0; l < c.layers; ++l) {
    const RowMat slice = proj.middleCols(l * width, width);
    TANDEM_ASSIGN_OR_RETURN(Tensor next, MambaBlockForward(ToTensor(hidden), ToTensor(slice),
                                                           b.layers[l], c));
    hidden = AsMat(next, len, c.d_model);
  }
  RmsNormRows(hidden, b.final_norm.ptr());
  return hidden;
}

}  // namespace

absl::Status ValidateConfig(const TrajMambaConfig& c) {
  for (int64_t v : {c.d_model, c.d_state, c.head_dim, c.expand, c.d_conv}) {
    if (v < 1 || v > 4096) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TrajMamba sizes must be in [1, 4096]: d_model=", c.d_model, " d_state=", c.d_state,
          " head_dim=", c.head_dim, " expand=", c.expand, " d_conv=", c.d_conv));
    }
  }
  if (c.layers < 1 || c.layers > 16 || c.road_vocab < 1 || c.road_vocab > (1 << 24) ||
      c.chunk < 0 || c.chunk > kMaxScanChunk) {
    return absl::InvalidArgumentError(absl::StrCat("TrajMamba layers=", c.layers, " (1..16), vocab=",
                                                   c.road_vocab, " (1..2^24), chunk=", c.chunk,
                                                   " (0..4096) out of range"));
  }
  if (c.d_inner() % c.head_dim != 0) {
    return absl::InvalidArgumentError(absl::StrCat("TrajMamba head_dim ", c.head_dim,
                                                   " must divide expand * d_model = ", c.d_inner()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrajMambaWeights> TrajMambaWeights::Random(const TrajMambaConfig& config,
                                                          uint64_t seed) {
  TANDEM_RETURN_IF_ERROR(ValidateConfig(config));
  Init init(seed);
  TrajMambaWeights w;
  w.config = config;
  w.w_gps = init.Gauss({kGpsFeatures, config.d_model}, 1.0f / std::sqrt(float(kGpsFeatures)));
  w.b_gps = init.Fill({config.d_model}, 0.0f);
  w.road_embedding = init.Gauss({config.road_vocab, config.d_model}, 1.0f);
  w.gps = RandomBranch(init, kGpsAux, config);
  w.road = RandomBranch(init, kRoadAux, config);
  return w;
}

absl::Status ValidateTrajMambaWeights(const TrajMambaWeights& w) {
  const TrajMambaConfig& c = w.config;
  TANDEM_RETURN_IF_ERROR(ValidateConfig(c));
  TANDEM_RETURN_IF_ERROR(Expect(w.w_gps, {kGpsFeatures, c.d_model}, "w_gps"));
  TANDEM_RETURN_IF_ERROR(Expect(w.b_gps, {c.d_model}, "b_gps"));
  TANDEM_RETURN_IF_ERROR(Expect(w.road_embedding, {c.road_vocab, c.d_model}, "road_embedding"));
  TANDEM_RETURN_IF_ERROR(ValidateBranch(w.gps, kGpsAux, c, "gps"));
  return ValidateBranch(w.road, kRoadAux, c, "road");
}

absl::StatusOr<PointFeatures> ComputePointFeatures(absl::Span<const float> lonlat,
                                                   absl::Span<const float> times, int64_t len) {
  if (len < 1 || static_cast<int64_t>(lonlat.size()) != 2 * len ||
      static_cast<int64_t>(times.size()) != len) {
    return absl::InvalidArgumentError(absl::StrCat("trajectory of length ", len, " needs ", 2 * len,
                                                   " coordinates and ", len, " times, got ",
                                                   lonlat.size(), " and ", times.size()));
  }
  for (int64_t i = 0; i < len; ++i) {
    const float lon = lonlat[2 * i], lat = lonlat[2 * i + 1];
    if (!(std::fabs(lon) <= 180.0f) || !(std::fabs(lat) <= 90.0f) || !std::isfinite(times[i])) {
      return absl::InvalidArgumentError(absl::StrCat("trajectory point ", i, " (", lon, ", ", lat,
                                                     ", t=", times[i], ") is not a valid fix"));
    }
    if (i > 0 && times[i] < times[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat("trajectory times decrease at point ", i));
    }
  }
  PointFeatures f;
  TANDEM_ASSIGN_OR_RETURN(f.gps, Tensor::Zeros({len, kGpsFeatures}));
  TANDEM_ASSIGN_OR_RETURN(f.road_aux, Tensor::Zeros({len, kRoadAux}));
  constexpr double kPi = std::numbers::pi, kDeg = kPi / 180.0;
  const double lon0 = lonlat[0], lat0 = lonlat[1], coslat = std::cos(lat0 * kDeg);
  double prev_x = 0, prev_y = 0, prev_speed = 0, prev_heading = 0;
  for (int64_t i = 0; i < len; ++i) {
    const double x = kEarthRadiusKm * (lonlat[2 * i] - lon0) * kDeg * coslat;
    const double y = kEarthRadiusKm * (lonlat[2 * i + 1] - lat0) * kDeg;
    double speed = 0, accel = 0, turn = 0;
    if (i > 0) {
      const double dt = std::max(1e-3, double{times[i]} - times[i - 1]);
      const double dx = 1000 * (x - prev_x), dy = 1000 * (y - prev_y);  // metres
      speed = std::hypot(dx, dy) / dt;
      accel = i > 1 ? (speed - prev_speed) / dt : 0.0;
      const double heading = std::atan2(dy, dx);
      if (i > 1) {
        turn = std::remainder(heading - prev_heading, 2 * kPi);
        if (turn <= -kPi) turn += 2 * kPi;
      }
      prev_heading = heading;
    }
    float* g = f.gps.mutable_ptr() + i * kGpsFeatures;
    g[0] = static_cast<float>(x);
    g[1] = static_cast<float>(y);
    g[2] = static_cast<float>(speed / 10.0);
    g[3] = static_cast<float>(accel);
    g[4] = static_cast<float>(turn / kPi);
    const double day = std::floor(double{times[i]} / 86400.0);
    const double tod = (double{times[i]} - 86400.0 * day) / 86400.0;
    // Day of week with Monday = 0; Unix day 0 (1970-01-01) was a Thursday (3).
    const double dow = std::fmod(std::fmod(day + 3.0, 7.0) + 7.0, 7.0) / 7.0;
    float* r = f.road_aux.mutable_ptr() + i * kRoadAux;
    r[0] = static_cast<float>(std::sin(2 * kPi * tod));
    r[1] = static_cast<float>(std::cos(2 * kPi * tod));
    r[2] = static_cast<float>(std::sin(2 * kPi * dow));
    r[3] = static_cast<float>(std::cos(2 * kPi * dow));
    prev_x = x;
    prev_y = y;
    prev_speed = speed;
  }
  return f;
}

absl::StatusOr<Tensor> MambaBlockForward(const Tensor& hidden, const Tensor& aux_proj,
                                         const MambaLayerWeights& w, const TrajMambaConfig& c) {
  TANDEM_RETURN_IF_ERROR(CheckRank(hidden, 2, "Mamba block hidden (len, D)"));
  const int64_t len = hidden.dim(0), d = c.d_model, e = c.d_inner(), h = c.heads(),
                n = c.d_state, k = c.d_conv;
  if (hidden.dim(1) != d || aux_proj.shape() != Shape{len, c.aux_width()}) {
    return absl::InvalidArgumentError(absl::StrCat("Mamba block: hidden ", hidden.ShapeString(),
                                                   " and aux ", aux_proj.ShapeString(),
                                                   " do not match D=", d, " aux_width=",
                                                   c.aux_width()));
  }
  RowMat u = AsMat(hidden, len, d);
  RmsNormRows(u, w.norm.ptr());
  const RowMat zx = u * AsMat(w.w_in, d, 2 * e);
  // Causal depthwise conv over time, then SiLU: xc[t] = b + sum_j w[j] x[t-K+1+j].
  RowMat xc(len, e);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t ch = 0; ch < e; ++ch) {
      float acc = w.conv_b.data()[ch];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = t - (k - 1) + j;
        if (src >= 0) acc += w.conv_w.data()[ch * k + j] * zx(src, e + ch);
      }
      xc(t, ch) = Silu(acc);
    }
  }
  const ConstMap aux = AsMat(aux_proj, len, c.aux_width());
  const RowMat bm = aux.leftCols(n), cm = aux.middleCols(n, n), dtm = aux.rightCols(h);
  std::vector<float> a(static_cast<size_t>(h));
  for (int64_t i = 0; i < h; ++i) a[i] = -std::exp(w.a_log.data()[i]);
  std::vector<float> y(static_cast<size_t>(len * e)), state(static_cast<size_t>(e * n));
  const ScanArgs<float> args{absl::MakeConstSpan(xc.data(), xc.size()),
                             absl::MakeConstSpan(dtm.data(), dtm.size()),
                             a,
                             absl::MakeConstSpan(bm.data(), bm.size()),
                             absl::MakeConstSpan(cm.data(), cm.size()),
                             w.d.data(),
                             w.dt_bias.data(),
                             {}};
  TANDEM_RETURN_IF_ERROR(SelectiveScanRaw<float>({1, len, h, c.head_dim, n}, args, c.chunk,
                                                 absl::MakeSpan(y), absl::MakeSpan(state)));
  RowMat g(len, e);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t ch = 0; ch < e; ++ch) g(t, ch) = y[t * e + ch] * Silu(zx(t, ch));
  }
  RmsNormRows(g, w.gate_norm.ptr());
  const RowMat out = AsMat(hidden, len, d) + g * AsMat(w.w_out, e, d);
  return ToTensor(out);
}

absl::StatusOr<TrajEncoding> TrajMambaEncode(const TrajMambaWeights& w, const TrajBatch& in) {
  TANDEM_RETURN_IF_ERROR(ValidateTrajMambaWeights(w));
  TANDEM_RETURN_IF_ERROR(CheckRank(in.gps, 3, "TrajMamba gps (batch, L, 2)"));
  const int64_t batch = in.gps.dim(0), lmax = in.gps.dim(1), d = w.config.d_model;
  if (in.gps.dim(2) != 2 || in.times.shape() != Shape{batch, lmax} ||
      in.roads.shape() != Shape{batch, lmax} || static_cast<int64_t>(in.lengths.size()) != batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TrajMamba batch: gps ", in.gps.ShapeString(), ", times ", in.times.ShapeString(),
        ", roads ", in.roads.ShapeString(), " and ", in.lengths.size(),
        " lengths must describe (batch, L, 2), (batch, L), (batch, L), (batch)"));
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = in.lengths[b];
    if (len < 1 || len > lmax) {
      return absl::InvalidArgumentError(
          absl::StrCat("TrajMamba length[", b, "] = ", len, " outside [1, ", lmax, "]"));
    }
    for (int64_t t = 0; t < len; ++t) {
      const float id = in.roads.data()[b * lmax + t];
      if (!(id >= 0 && id < static_cast<float>(w.config.road_vocab)) || id != std::floor(id)) {
        return absl::InvalidArgumentError(absl::StrCat("TrajMamba road id ", id, " at (", b, ", ",
                                                       t, ") is not an integer in [0, ",
                                                       w.config.road_vocab, ")"));
      }
    }
  }
  std::vector<PointFeatures> feats(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    TANDEM_ASSIGN_OR_RETURN(
        feats[b], ComputePointFeatures(in.gps.data().subspan(b * lmax * 2, in.lengths[b] * 2),
                                       in.times.data().subspan(b * lmax, in.lengths[b]),
                                       in.lengths[b]));
  }
  TrajEncoding out;
  TANDEM_ASSIGN_OR_RETURN(out.embeddings, Tensor::Zeros({batch, d}));
  TANDEM_ASSIGN_OR_RETURN(out.points, Tensor::Zeros({batch, lmax, d}));
  std::vector<absl::Status> status(static_cast<size_t>(batch));
  tbb::parallel_for(int64_t{0}, batch, [&](int64_t b) {
    const int64_t len = in.lengths[b];
    RowMat gps_h = (AsMat(feats[b].gps, len, kGpsFeatures) * AsMat(w.w_gps, kGpsFeatures, d))
                       .rowwise() +
                   Eigen::Map<const Eigen::RowVectorXf>(w.b_gps.ptr(), d);
    RowMat road_h(len, d);
    for (int64_t t = 0; t < len; ++t) {
      const int64_t id = static_cast<int64_t>(in.roads.data()[b * lmax + t]);
      road_h.row(t) = Eigen::Map<const Eigen::RowVectorXf>(w.road_embedding.ptr() + id * d, d);
    }
    // The GPS branch's SSM inputs come from (speed, accel, turn): columns 2..4.
    Tensor aux = *Tensor::Zeros({len, kGpsAux});
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t j = 0; j < kGpsAux; ++j) {
        aux.mutable_data()[t * kGpsAux + j] = feats[b].gps.data()[t * kGpsFeatures + 2 + j];
      }
    }
    absl::StatusOr<RowMat> g = RunBranch(std::move(gps_h), aux, w.gps, w.config);
    absl::StatusOr<RowMat> r = RunBranch(std::move(road_h), feats[b].road_aux, w.road, w.config);
    if (!g.ok() || !r.ok()) {
      status[b] = !g.ok() ? g.status() : r.status();
      return;
    }
    const RowMat fused = *g + *r;
    float* pts = out.points.mutable_ptr() + b * lmax * d;
    std::copy(fused.data(), fused.data() + fused.size(), pts);
    const Eigen::RowVectorXf mean = fused.colwise().mean();
    std::copy(mean.data(), mean.data() + d, out.embeddings.mutable_ptr() + b * d);
  });
  for (const absl::Status& s : status) TANDEM_RETURN_IF_ERROR(s);
  return out;
}

double TrajMambaFlops(const TrajMambaConfig& c, int64_t points) {
  const double d = c.d_model, e = c.d_inner(), n = c.d_state, k = c.d_conv;
  const double per_layer = 2 * d * 2 * e + 2 * e * k + 6 * e * n + 2 * e * d + 8 * (d + e);
  const double aux = 2.0 * (kGpsAux + kRoadAux) * c.layers * c.aux_width();
  return static_cast<double>(points) * (2 * c.layers * per_layer + aux + 2 * kGpsFeatures * d);
}

}  // namespace tandem::ml::kernels::search
