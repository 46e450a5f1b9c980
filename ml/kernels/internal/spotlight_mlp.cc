#include "ml/kernels/internal/spotlight_mlp.h"

#include <cmath>

namespace tandem::ml::kernels::internal {
namespace {

using ConstMap = Eigen::Map<const RowMatF>;
using ConstVec = Eigen::Map<const Eigen::RowVectorXf>;

inline float Sigmoid(float u) { return 1.0f / (1.0f + std::exp(-u)); }

}  // namespace

MlpActivations MlpForward(const Tensor& x, const SpotlightHashWeights& w) {
  const int64_t n = x.dim(0), d = w.dim();
  ConstMap xm(x.ptr(), n, d), w1(w.w1.ptr(), d, d), w2(w.w2.ptr(), d, d);
  ConstVec b1(w.b1.ptr(), d), b2(w.b2.ptr(), d);
  MlpActivations act;
  act.u = xm * w1;
  act.u.rowwise() += b1;
  act.a = act.u.unaryExpr([](float u) { return u * Sigmoid(u); }) + xm;
  act.h = act.a * w2;
  act.h.rowwise() += b2;
  act.h += act.a;
  return act;
}

void MlpBackward(const Tensor& x, const SpotlightHashWeights& w, const MlpActivations& act,
                 const RowMatF& dh, MlpGrads* grads) {
  const int64_t n = x.dim(0), d = w.dim();
  ConstMap xm(x.ptr(), n, d), w2(w.w2.ptr(), d, d);
  grads->w2.noalias() += act.a.transpose() * dh;
  grads->b2 += dh.colwise().sum();
  RowMatF da = dh * w2.transpose() + dh;  // residual of L2
  // SiLU'(u) = s (1 + u (1 - s)), s = sigmoid(u).
  RowMatF du = da.binaryExpr(act.u, [](float g, float u) {
    const float s = Sigmoid(u);
    return g * s * (1.0f + u * (1.0f - s));
  });
  grads->w1.noalias() += xm.transpose() * du;
  grads->b1 += du.colwise().sum();
}

}  // namespace tandem::ml::kernels::internal
