// SLED: speech language modelling with an energy-distance objective
// (arXiv 2505.13181; kernels_research.md section 16). The generator draws
// m >= 2 samples s_1..s_m of the next continuous latent per step; the loss
// is the sample estimate of the (negative) energy score, a strictly proper
// scoring rule for 0 < beta < 2:
//   l_t = (2/m) sum_i |s_i - y_t|^beta - 1/(m(m-1)) sum_{i != j} |s_i - s_j|^beta
// which for m = 2 is SLED's |s1 - y|^beta + |s2 - y|^beta - |s1 - s2|^beta
// (beta = 1 in the paper) [F]. The total is the mask-weighted mean
// sum_t w_t l_t / sum_t w_t; an all-zero mask gives loss 0 and zero
// gradients (a design choice [I]: a fully padded batch contributes nothing,
// where the reference's masked mean would divide by zero).
// Gradient: d|a|^beta / da = beta |a|^(beta-2) a, taken as 0 at a = 0
// (a subgradient for beta <= 1, the limit for beta > 1).
// The generator network (SimpleMLPAdaLN) and the EOS head are not part of
// this kernel; it takes the samples.
//
// Thread safety: pure function; steps run on the global oneTBB arena.
#ifndef TANDEM_ML_KERNELS_DISTILL_SLED_H_
#define TANDEM_ML_KERNELS_DISTILL_SLED_H_

#include "absl/status/statusor.h"
#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::distill {

struct EnergyLossOptions {
  double beta = 1.0;  // exponent, in (0, 2] (2 is proper but not strictly)
};

struct EnergyLossResult {
  double loss = 0;      // masked mean of l_t
  Tensor grad_samples;  // d loss / d samples, (T, m, D)
};

// samples (T, m, D) with m >= 2, target (T, D), mask (T) of weights >= 0.
// INVALID_ARGUMENT on shape mismatch, m < 2, a negative mask weight or beta
// outside (0, 2].
absl::StatusOr<EnergyLossResult> EnergyDistanceLoss(const Tensor& samples, const Tensor& target,
                                                    const Tensor& mask,
                                                    const EnergyLossOptions& options);

}  // namespace tandem::ml::kernels::distill

#endif  // TANDEM_ML_KERNELS_DISTILL_SLED_H_
