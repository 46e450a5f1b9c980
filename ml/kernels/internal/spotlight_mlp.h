// Spotlight hash MLP forward/backward on Eigen matrices. Internal.
#ifndef TANDEM_ML_KERNELS_INTERNAL_SPOTLIGHT_MLP_H_
#define TANDEM_ML_KERNELS_INTERNAL_SPOTLIGHT_MLP_H_

#include "Eigen/Core"
#include "ml/kernels/spotlight.h"

namespace tandem::ml::kernels::internal {

using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct MlpActivations {
  RowMatF u;  // x W1 + b1
  RowMatF a;  // SiLU(u) + x
  RowMatF h;  // a W2 + b2 + a
};

struct MlpGrads {
  RowMatF w1, w2;
  Eigen::RowVectorXf b1, b2;
};

// REQUIRES: ValidateHashWeights(w) ok and x is (n, d).
MlpActivations MlpForward(const Tensor& x, const SpotlightHashWeights& w);
// Accumulates into grads the gradient of a scalar loss given dL/dh = dh.
void MlpBackward(const Tensor& x, const SpotlightHashWeights& w, const MlpActivations& act,
                 const RowMatF& dh, MlpGrads* grads);

}  // namespace tandem::ml::kernels::internal

#endif  // TANDEM_ML_KERNELS_INTERNAL_SPOTLIGHT_MLP_H_
