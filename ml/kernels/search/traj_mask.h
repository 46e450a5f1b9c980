// TrajMamba's learnable mask generator (arXiv 2510.17545, kernels_research
// section 15): a per-point keep score m_t in (0, 1) over the encoder's fused
// point states, trained so that the mask-pooled embedding of the kept points
// stays close to the full (teacher) embedding while keeping about a fraction
// rho of the points; the hard selection keeps the top-scored points and the
// compressed trajectory is re-encoded.
//
//   m_t  = sigmoid(w2 . SiLU(p_t W1 + b1) + b2)                     [I: MLP]
//   e_m  = sum_t m_t p_t / sum_t m_t                 (soft compressed embedding)
//   loss = |e_m - e_teacher|^2 / D + lambda (mean_t m_t - rho)^2
// The source describes the mask generator and the distillation of the
// compressed embedding to the frozen teacher only in words [F abstract]; the
// soft pooling surrogate above (differentiable, no Gumbel noise) and the
// quadratic keep-ratio penalty are our design [I]. Hard selection [I]:
// k = clamp(round(rho len), min(2, len), len) highest scores, the first and
// last points always kept (a trajectory keeps its endpoints), in time order.
//
// Thread safety: pure functions; MaskSgdStep mutates only its argument.
#ifndef TANDEM_ML_KERNELS_SEARCH_TRAJ_MASK_H_
#define TANDEM_ML_KERNELS_SEARCH_TRAJ_MASK_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ml/kernels/search/trajmamba.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::search {

struct MaskGeneratorWeights {
  Tensor w1;  // (D, hidden)
  Tensor b1;  // (hidden)
  Tensor w2;  // (hidden)
  Tensor b2;  // (1)
  // Gaussian w1, w2 with std 1/sqrt(fan_in), zero biases. INVALID_ARGUMENT
  // unless 1 <= d, hidden <= 4096.
  static absl::StatusOr<MaskGeneratorWeights> Random(int64_t d, int64_t hidden, uint64_t seed);
};

// m (len) for points (len, D). INVALID_ARGUMENT on shapes.
absl::StatusOr<Tensor> MaskScores(const MaskGeneratorWeights& w, const Tensor& points);

struct MaskLossOptions {
  double keep_ratio = 0.5;  // rho in (0, 1]
  double lambda = 1.0;      // weight of the keep-ratio penalty, >= 0
};

struct MaskLoss {
  double loss = 0;
  double distill = 0;    // |e_m - e_teacher|^2 / D
  double mean_keep = 0;  // mean_t m_t
  MaskGeneratorWeights grad;  // d loss / d weights, same shapes
};

// Loss and gradient for one trajectory: points (len, D), teacher (D).
// INVALID_ARGUMENT on shapes, rho outside (0, 1] or lambda < 0.
absl::StatusOr<MaskLoss> MaskGeneratorLoss(const MaskGeneratorWeights& w, const Tensor& points,
                                           const Tensor& teacher, const MaskLossOptions& o);

// One SGD step w -= lr grad (lr in (0, 1e3]); returns the loss before the
// step. REQUIRES: w non-null (not owned). Errors as MaskGeneratorLoss.
absl::StatusOr<double> MaskSgdStep(MaskGeneratorWeights* w, const Tensor& points,
                                   const Tensor& teacher, const MaskLossOptions& o, double lr);

// Hard key-point selection from scores (len): sorted indices, see header.
// INVALID_ARGUMENT when scores is empty / not rank 1 or rho outside (0, 1].
absl::StatusOr<std::vector<int64_t>> SelectKeyPoints(const Tensor& scores, double keep_ratio);

// The batch restricted to keep[b] (sorted, distinct, in [0, lengths[b])),
// left-aligned and padded to the longest kept length. INVALID_ARGUMENT on
// bad indices or a keep list per trajectory missing.
absl::StatusOr<TrajBatch> CompressBatch(const TrajBatch& batch,
                                        const std::vector<std::vector<int64_t>>& keep);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_TRAJ_MASK_H_
