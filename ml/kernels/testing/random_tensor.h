// Seeded random tensors and comparisons for kernel tests and benchmarks.
// Test-only (target tandem_ml_kernels_testing).
#ifndef TANDEM_ML_KERNELS_TESTING_RANDOM_TENSOR_H_
#define TANDEM_ML_KERNELS_TESTING_RANDOM_TENSOR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "ml/kernels/tensor.h"

namespace tandem::ml::kernels::testing {

// n N(0, scale^2) floats from std::mt19937_64(seed).
inline std::vector<float> RandomFloats(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> out(static_cast<size_t>(n));
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (float& x : out) x = dist(gen);
  return out;
}

// A tensor of RandomFloats entries. REQUIRES: a valid shape.
inline Tensor RandomTensor(std::vector<int64_t> shape, uint64_t seed, float scale = 1.0f) {
  Tensor t = *Tensor::Zeros(std::move(shape));
  const std::vector<float> x = RandomFloats(t.size(), seed, scale);
  std::copy(x.begin(), x.end(), t.mutable_data().begin());
  return t;
}

// max_i |a_i - b_i|, or +inf when the shapes differ.
inline double MaxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a.data()[i]) - b.data()[i]));
  }
  return m;
}

}  // namespace tandem::ml::kernels::testing

#endif  // TANDEM_ML_KERNELS_TESTING_RANDOM_TENSOR_H_
