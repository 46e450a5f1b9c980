// TrajMamba encoder (Liu et al., NeurIPS 2025, arXiv 2510.17545;
// kernels_research.md section 15): trajectory embeddings from two Mamba-2
// branches over the same points.
//
//   GPS branch   hidden_0 = [x_km, y_km, speed, accel, turn] W_gps + b_gps,
//                SSM inputs (B, C, dt) from the high-order features
//                a_t = (speed, accel, turn)                      [F PTrajM]
//   Road branch  hidden_0 = E[road_id],
//                SSM inputs from cyclic time (sin/cos time of day, sin/cos
//                day of week)                                  [F summaries]
//   Each branch: layers x residual Mamba-2 block
//     u = RMSNorm(h) g;  [z, x] = u W_in;  x = SiLU(causal_conv_K(x));
//     [B, C, dt]_l = split(a W_aux + b_aux)   (one aux map for all layers, [F])
//     y = SelectiveScan(x, dt, A = -exp(a_log), B, C, D);
//     h += RMSNorm(y * SiLU(z)) g_y W_out
//   point_t   = RMSNorm(h_gps_t) g_g + RMSNorm(h_road_t) g_r
//   embedding = mean of point_t over the valid points
// Design choices where the sources are silent [I]: the branches are fused
// by a sum after their own final norms (no cross-branch exchange inside a
// block); GPS points are projected to a local equirectangular frame (km)
// around the first point; speed is in units of 10 m/s, acceleration in
// m/s^2, turning angle in units of pi (wrapped to (-1, 1]); the first point
// has zero speed, acceleration and turn; times are Unix seconds (UTC, day
// of week with Monday = 0, 1970-01-01 a Thursday). Padding beyond a trajectory's length
// is never read, so embeddings do not depend on it.
//
// Thread safety: pure functions; weights are read-only during a call.
#ifndef TANDEM_ML_KERNELS_SEARCH_TRAJMAMBA_H_
#define TANDEM_ML_KERNELS_SEARCH_TRAJMAMBA_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::search {

inline constexpr int64_t kGpsFeatures = 5;  // x_km, y_km, speed, accel, turn
inline constexpr int64_t kGpsAux = 3;       // speed, accel, turn
inline constexpr int64_t kRoadAux = 4;      // sin/cos time of day, sin/cos day of week

struct TrajMambaConfig {
  int64_t d_model = 32;   // D
  int64_t d_state = 16;   // N (PTrajM: 128)
  int64_t head_dim = 16;  // P (PTrajM: 64); heads H = expand * D / P
  int64_t expand = 2;     // E = expand * D
  int64_t d_conv = 4;     // K
  int64_t layers = 2;     // per branch (PTrajM: 4)
  int64_t road_vocab = 1024;
  int64_t chunk = 64;     // SSD chunk of the scan (0 = naive recurrence)

  int64_t d_inner() const { return expand * d_model; }
  int64_t heads() const { return d_inner() / head_dim; }
  int64_t aux_width() const { return 2 * d_state + heads(); }  // B, C, dt per layer
};

// INVALID_ARGUMENT unless every size is in [1, 4096] (vocab in [1, 2^24],
// layers <= 16, chunk in [0, 4096]) and head_dim divides expand * d_model.
absl::Status ValidateConfig(const TrajMambaConfig& c);

struct MambaLayerWeights {
  Tensor norm;               // (D) pre-norm gain
  Tensor w_in;               // (D, 2E): [z | x]
  Tensor conv_w, conv_b;     // (E, K), (E)
  Tensor a_log, dt_bias, d;  // (H)
  Tensor gate_norm;          // (E)
  Tensor w_out;              // (E, D)
};

struct BranchWeights {
  Tensor w_aux, b_aux;  // (n_aux, layers * aux_width), (layers * aux_width)
  std::vector<MambaLayerWeights> layers;
  Tensor final_norm;    // (D)
};

struct TrajMambaWeights {
  TrajMambaConfig config;
  Tensor w_gps, b_gps;   // (kGpsFeatures, D), (D)
  Tensor road_embedding; // (road_vocab, D)
  BranchWeights gps;     // n_aux = kGpsAux
  BranchWeights road;    // n_aux = kRoadAux

  // Gaussian matrices with std 1/sqrt(fan_in), unit gains, A in [-16, -1]
  // (a_log = log U[1, 16]), dt_bias = softplus^-1 of a log-uniform dt in
  // [1e-3, 0.1], D = 1 (PTrajM's init ranges), from mt19937_64(seed).
  // INVALID_ARGUMENT as ValidateConfig.
  static absl::StatusOr<TrajMambaWeights> Random(const TrajMambaConfig& config, uint64_t seed);
};

// INVALID_ARGUMENT naming the first tensor whose shape disagrees with config.
absl::Status ValidateTrajMambaWeights(const TrajMambaWeights& w);

struct PointFeatures {
  Tensor gps;       // (len, kGpsFeatures)
  Tensor road_aux;  // (len, kRoadAux)
};

// Features of one trajectory: lonlat has 2 * len values (lon, lat degrees),
// times len values (seconds, non-decreasing). Time steps shorter than 1 ms
// count as 1 ms. INVALID_ARGUMENT on sizes, len < 1, |lat| > 90, |lon| > 180
// or decreasing / non-finite times.
absl::StatusOr<PointFeatures> ComputePointFeatures(absl::Span<const float> lonlat,
                                                   absl::Span<const float> times, int64_t len);

// One residual Mamba-2 block over one sequence: hidden (len, D), aux_proj
// (len, aux_width) = this layer's slice of a W_aux + b_aux. Returns the new
// hidden (len, D). INVALID_ARGUMENT on shapes.
absl::StatusOr<Tensor> MambaBlockForward(const Tensor& hidden, const Tensor& aux_proj,
                                         const MambaLayerWeights& layer,
                                         const TrajMambaConfig& config);

struct TrajBatch {
  Tensor gps;    // (batch, L, 2) lon, lat
  Tensor times;  // (batch, L)
  Tensor roads;  // (batch, L) integral road ids in [0, road_vocab)
  std::vector<int64_t> lengths;  // (batch), each in [1, L]
};

struct TrajEncoding {
  Tensor embeddings;  // (batch, D)
  Tensor points;      // (batch, L, D) fused per-point states, zero past each length
};

// Encodes every trajectory of the batch. INVALID_ARGUMENT on shapes,
// lengths, road ids, features (as ComputePointFeatures) or weights.
absl::StatusOr<TrajEncoding> TrajMambaEncode(const TrajMambaWeights& w, const TrajBatch& batch);

// FLOPs of encoding `points` points in total (both branches, all layers):
// in/out projections, conv, aux map, scan and norms.
double TrajMambaFlops(const TrajMambaConfig& c, int64_t points);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_TRAJMAMBA_H_
