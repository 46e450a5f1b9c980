#include "ml/kernels/internal/few_rows.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace tandem::ml::kernels::internal {
namespace {

// Lane count: one register of floats, 16 where the build may use AVX-512
// (zmm), 8 with AVX (ymm), else 4 (xmm). GCC vector extensions keep one
// source for all; the lane count fixes the arithmetic of a build, and every
// caller of a build runs the same one.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef int IVec __attribute__((vector_size(kLanes * sizeof(int))));

inline Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// One level of the reduction tree: x and y hold groups of 2H partial sums
// (one group per key, in key order); the result holds groups of H, x's
// keys then y's, each the sum of its group's two halves. The shuffles pick
// the indices i of the concatenation (x, y) with (i / H) even (lo) and odd
// (hi): output lane o takes i = (o / H) 2H + o % H, plus H for hi.
template <int H, int kHi, int... O>
inline Vec Pick(Vec x, Vec y, std::integer_sequence<int, O...>) {
#if defined(__clang__)
  return __builtin_shufflevector(x, y, ((O / H) * 2 * H + O % H + kHi * H)...);
#else
  return __builtin_shuffle(x, y, IVec{((O / H) * 2 * H + O % H + kHi * H)...});
#endif
}
template <int H>
inline Vec Level(Vec x, Vec y) {
  constexpr auto lanes = std::make_integer_sequence<int, kLanes>{};
  return Pick<H, 0>(x, y, lanes) + Pick<H, 1>(x, y, lanes);
}
// Folds the 2H vectors at a into H (in place), down to one.
template <int H>
inline void Fold(Vec* a) {
  for (int i = 0; i < H; ++i) a[i] = Level<H>(a[2 * i], a[2 * i + 1]);
  if constexpr (H > 1) Fold<H / 2>(a);
}
// Lane j of the result = the sum of u[j]'s lanes, for kLanes vectors u
// (overwritten).
inline Vec ReduceLanes(Vec* u) {
  Fold<kLanes / 2>(u);
  return u[0];
}

// out[j] = scale * <q, k_j> for the kLanes keys at k (rows of d floats),
// d = kChunks * kLanes when kChunks > 0 (the loops fully unrolled), any
// multiple of kLanes when kChunks == 0. Inlined with constant trip counts,
// so u stays in registers through the reduction.
template <int kChunks>
__attribute__((always_inline)) inline Vec ScoreGroup(const float* q, const float* k, int64_t d,
                                                     float scale) {
  Vec u[kLanes];
#pragma GCC unroll 16
  for (int j = 0; j < kLanes; ++j) u[j] = Vec{} + 0.0f;
  const int64_t chunks = kChunks > 0 ? kChunks : d / kLanes;
#pragma GCC unroll 8
  for (int64_t c = 0; c < chunks; ++c) {
    const Vec qv = Load(q + c * kLanes);
#pragma GCC unroll 16
    for (int j = 0; j < kLanes; ++j) u[j] += qv * Load(k + j * d + c * kLanes);
  }
  return ReduceLanes(u) * scale;
}

// ScoreFewRows for d % kLanes == 0 (see there).
template <int kChunks>
void ScoreGroups(const float* q, int64_t rows, const float* k, int64_t n, int64_t d, float scale,
                 float* s, int64_t s_stride) {
  // Key groups outer, rows inner: a group's kLanes rows of k stay in L1
  // while every query row reads them. A last, partial group is scored from
  // a zero-padded copy, with the same arithmetic.
  const int64_t full = n - n % kLanes;
  for (int64_t j0 = 0; j0 < full; j0 += kLanes) {
    for (int64_t i = 0; i < rows; ++i) {
      Store(s + i * s_stride + j0, ScoreGroup<kChunks>(q + i * d, k + j0 * d, d, scale));
    }
  }
  if (full == n) return;
  std::vector<float> tail(static_cast<size_t>(kLanes * d), 0.0f);
  std::copy(k + full * d, k + n * d, tail.begin());
  for (int64_t i = 0; i < rows; ++i) {
    float lanes[kLanes];
    Store(lanes, ScoreGroup<kChunks>(q + i * d, tail.data(), d, scale));
    std::copy(lanes, lanes + (n - full), s + i * s_stride + full);
  }
}

// R rows x C vectors of acc (R <= 4, C <= 2: at most 8 accumulators, held in
// registers over the whole pass through v).
template <int R, int C>
void AccumulateTile(const float* p, int64_t p_stride, const float* v, int64_t n, int64_t d,
                    float* acc) {
  Vec a[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) a[r][c] = Load(acc + r * d + c * kLanes);
  }
  for (int64_t j = 0; j < n; ++j) {
    Vec vv[C];
    for (int c = 0; c < C; ++c) vv[c] = Load(v + j * d + c * kLanes);
    for (int r = 0; r < R; ++r) {
      const float pr = p[r * p_stride + j];
      for (int c = 0; c < C; ++c) a[r][c] += vv[c] * pr;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) Store(acc + r * d + c * kLanes, a[r][c]);
  }
}

template <int R>
void AccumulateRows(const float* p, int64_t p_stride, const float* v, int64_t n, int64_t d,
                    float* acc) {
  for (int64_t c0 = 0; c0 < d; c0 += 2 * kLanes) {
    if (d - c0 >= 2 * kLanes) {
      AccumulateTile<R, 2>(p, p_stride, v + c0, n, d, acc + c0);
    } else {
      AccumulateTile<R, 1>(p, p_stride, v + c0, n, d, acc + c0);
    }
  }
}

}  // namespace

void ScoreFewRows(const float* q, int64_t rows, const float* k, int64_t n, int64_t d, float scale,
                  float* s, int64_t s_stride) {
  if (d % kLanes != 0) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < rows; ++i) {
        float dot = 0.0f;
        for (int64_t t = 0; t < d; ++t) dot += q[i * d + t] * k[j * d + t];
        s[i * s_stride + j] = dot * scale;
      }
    }
    return;
  }
  switch (d / kLanes) {
    case 1:
      return ScoreGroups<1>(q, rows, k, n, d, scale, s, s_stride);
    case 2:
      return ScoreGroups<2>(q, rows, k, n, d, scale, s, s_stride);
    case 4:
      return ScoreGroups<4>(q, rows, k, n, d, scale, s, s_stride);
    case 8:
      return ScoreGroups<8>(q, rows, k, n, d, scale, s, s_stride);
    default:
      return ScoreGroups<0>(q, rows, k, n, d, scale, s, s_stride);
  }
}

void AccumulateFewRows(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t n,
                       int64_t d, float* acc) {
  if (d % kLanes != 0) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const float pij = p[i * p_stride + j];
        for (int64_t t = 0; t < d; ++t) acc[i * d + t] += pij * v[j * d + t];
      }
    }
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) AccumulateRows<4>(p + i * p_stride, p_stride, v, n, d, acc + i * d);
  switch (rows - i) {
    case 3:
      AccumulateRows<3>(p + i * p_stride, p_stride, v, n, d, acc + i * d);
      break;
    case 2:
      AccumulateRows<2>(p + i * p_stride, p_stride, v, n, d, acc + i * d);
      break;
    case 1:
      AccumulateRows<1>(p + i * p_stride, p_stride, v, n, d, acc + i * d);
      break;
    default:
      break;
  }
}

}  // namespace tandem::ml::kernels::internal
