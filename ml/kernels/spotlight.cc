#include "ml/kernels/spotlight.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#if defined(__AVX512VPOPCNTDQ__)
#include <immintrin.h>
#endif

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/kernels/internal/attention_core.h"
#include "ml/kernels/internal/spotlight_mlp.h"
#include "tbb/parallel_for.h"

#ifdef TANDEM_HAVE_CUDA
#include "ml/kernels/cuda/cuda_kernels.h"
#endif

namespace tandem::ml::kernels {
namespace {

absl::Status ValidateCodes(const PackedCodes& c, const char* what) {
  if (c.rows < 1 || c.words < 1 ||
      static_cast<int64_t>(c.bits.size()) != c.rows * c.words) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", c.rows, " x ", c.words,
                                                   " codes need as many words, got ",
                                                   c.bits.size()));
  }
  return absl::OkStatus();
}

// ScoreKeys' scalar path in units of U (32 or 64 bits; queries.words * 4
// must be a multiple of sizeof(U)), keys [begin, end).
template <typename U>
void ScoreUnits(const PackedCodes& queries, const uint32_t* key_bits, int64_t begin, int64_t end,
                int32_t* scores) {
  const int64_t words = queries.words, g = queries.rows;
  const int64_t units = words * 4 / static_cast<int64_t>(sizeof(U));
  for (int64_t j = begin; j < end; ++j) {
    const uint32_t* kj = key_bits + j * words;
    int32_t s = 0;
    for (int64_t qi = 0; qi < g; ++qi) {
      const uint32_t* qg = queries.bits.data() + qi * words;
      for (int64_t u = 0; u < units; ++u) {
        U a, b;
        std::memcpy(&a, reinterpret_cast<const char*>(qg) + u * sizeof(U), sizeof(U));
        std::memcpy(&b, reinterpret_cast<const char*>(kj) + u * sizeof(U), sizeof(U));
        s += std::popcount(static_cast<U>(~(a ^ b)));
      }
    }
    scores[j] = s;
  }
}

// score_j = sum_q sum_w popcount(~(q_w ^ k_jw)) for keys [begin, end).
// The sum does not depend on how the bits are grouped, so an even word
// count is scored 64 bits at a time; 128-bit codes (Spotlight's) four keys
// per 512-bit vector where the CPU counts bits in vector lanes.
void ScoreKeys(const PackedCodes& queries, const uint32_t* key_bits, int64_t begin, int64_t end,
               int32_t* scores) {
  const int64_t words = queries.words;
  int64_t j = begin;
#if defined(__AVX512VPOPCNTDQ__)
  if (words == 4) {
    const int64_t g = queries.rows;
    const uint32_t* q = queries.bits.data();
    for (; j + 4 <= end; j += 4) {
      const __m512i k = _mm512_loadu_si512(key_bits + j * 4);
      __m512i acc = _mm512_setzero_si512();
      for (int64_t qi = 0; qi < g; ++qi) {
        const __m512i qv =
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + qi * 4)));
        // The differing bits; the score counts the equal ones.
        acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_xor_si512(k, qv)));
      }
      // Lanes 2i and 2i + 1 belong to key j + i: add the pairs, keep the
      // even lanes, narrow to 32 bits: score = 128 g - differing bits.
      const __m512i diff = _mm512_add_epi64(acc, _mm512_shuffle_epi32(acc, _MM_PERM_BADC));
      const __m512i pairs = _mm512_sub_epi64(_mm512_set1_epi64(128 * g), diff);
      const __m512i even = _mm512_maskz_compress_epi64(0x55, pairs);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(scores + j),
                       _mm256_castsi256_si128(_mm512_cvtepi64_epi32(even)));
    }
  }
#endif
  if (words % 2 == 0) {
    ScoreUnits<uint64_t>(queries, key_bits, j, end, scores);
  } else {
    ScoreUnits<uint32_t>(queries, key_bits, j, end, scores);
  }
}

// Every key's score, the keys split over the cores. REQUIRES: validated
// queries, `rows` key codes of queries.words words at `keys`, `out` of
// `rows` entries (HammingScores and HammingScoresInto check them once).
void ScoreAll(const PackedCodes& queries, const uint32_t* keys, int64_t rows, int32_t* out) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 4096),
                    [&](const auto& r) { ScoreKeys(queries, keys, r.begin(), r.end(), out); });
}

}  // namespace

absl::StatusOr<SpotlightHashWeights> SpotlightHashWeights::Random(int64_t d, uint64_t seed,
                                                                  float scale) {
  if (d < 32 || d % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hash dim ", d, " must be a multiple of 32"));
  }
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> wdist(0.0f, scale / std::sqrt(static_cast<float>(d)));
  std::normal_distribution<float> bdist(0.0f, 0.01f);
  SpotlightHashWeights w;
  TANDEM_ASSIGN_OR_RETURN(w.w1, Tensor::Zeros({d, d}));
  TANDEM_ASSIGN_OR_RETURN(w.b1, Tensor::Zeros({d}));
  TANDEM_ASSIGN_OR_RETURN(w.w2, Tensor::Zeros({d, d}));
  TANDEM_ASSIGN_OR_RETURN(w.b2, Tensor::Zeros({d}));
  for (float& x : w.w1.mutable_data()) x = wdist(gen);
  for (float& x : w.b1.mutable_data()) x = bdist(gen);
  for (float& x : w.w2.mutable_data()) x = wdist(gen);
  for (float& x : w.b2.mutable_data()) x = bdist(gen);
  return w;
}

absl::StatusOr<SpotlightHashWeights> SpotlightHashWeights::Zeros(int64_t d) {
  TANDEM_ASSIGN_OR_RETURN(SpotlightHashWeights w, Random(d, 0));
  for (Tensor* t : {&w.w1, &w.b1, &w.w2, &w.b2}) std::fill_n(t->mutable_ptr(), t->size(), 0.0f);
  return w;
}

absl::Status ValidateHashWeights(const SpotlightHashWeights& w) {
  const int64_t d = w.dim();
  if (d < 32 || d % 32 != 0 || w.w1.shape() != std::vector<int64_t>{d, d} ||
      w.w2.shape() != std::vector<int64_t>{d, d} || w.b1.shape() != std::vector<int64_t>{d} ||
      w.b2.shape() != std::vector<int64_t>{d}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hash weights must be (d,d),(d),(d,d),(d) with d % 32 == 0; got w1 ", w.w1.ShapeString(),
        " b1 ", w.b1.ShapeString(), " w2 ", w.w2.ShapeString(), " b2 ", w.b2.ShapeString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SpotlightHash(const Tensor& x, const SpotlightHashWeights& w) {
  TANDEM_RETURN_IF_ERROR(ValidateHashWeights(w));
  TANDEM_RETURN_IF_ERROR(CheckRank(x, 2, "x"));
  if (x.dim(1) != w.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("x ", x.ShapeString(), " does not match hash dim ", w.dim()));
  }
  internal::MlpActivations act = internal::MlpForward(x, w);
  TANDEM_ASSIGN_OR_RETURN(Tensor h, Tensor::Zeros(x.shape()));
  std::copy(act.h.data(), act.h.data() + act.h.size(), h.mutable_ptr());
  return h;
}

absl::StatusOr<PackedCodes> PackSignBits(const Tensor& h) {
  TANDEM_RETURN_IF_ERROR(CheckRank(h, 2, "h"));
  if (h.dim(1) % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("code dim ", h.dim(1), " not a multiple of 32"));
  }
  PackedCodes c;
  c.rows = h.dim(0);
  c.words = h.dim(1) / 32;
  c.bits.assign(static_cast<size_t>(c.rows * c.words), 0u);
  tbb::parallel_for(int64_t{0}, c.rows, [&](int64_t r) {
    const float* row = h.ptr() + r * h.dim(1);
    for (int64_t w = 0; w < c.words; ++w) {
      uint32_t word = 0;
      for (int b = 0; b < 32; ++b) word |= static_cast<uint32_t>(row[w * 32 + b] > 0.0f) << b;
      c.bits[r * c.words + w] = word;
    }
  });
  return c;
}

absl::StatusOr<Tensor> UnpackSigns(const PackedCodes& codes) {
  TANDEM_RETURN_IF_ERROR(ValidateCodes(codes, "codes"));
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({codes.rows, codes.words * 32}));
  for (int64_t i = 0; i < codes.rows * codes.words; ++i) {
    for (int b = 0; b < 32; ++b) {
      t.mutable_ptr()[i * 32 + b] = ((codes.bits[i] >> b) & 1u) ? 1.0f : -1.0f;
    }
  }
  return t;
}

absl::StatusOr<std::vector<int32_t>> HammingScores(const PackedCodes& queries,
                                                   const PackedCodes& keys, Backend backend) {
  TANDEM_RETURN_IF_ERROR(ValidateCodes(queries, "queries"));
  TANDEM_RETURN_IF_ERROR(ValidateCodes(keys, "keys"));
  if (queries.words != keys.words) {
    return absl::InvalidArgumentError(absl::StrCat("query codes have ", queries.words,
                                                   " words, key codes ", keys.words));
  }
  std::vector<int32_t> scores(static_cast<size_t>(keys.rows));
  if (backend == Backend::kCuda) {
    if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device present");
#ifdef TANDEM_HAVE_CUDA
    const int64_t words = keys.words, g = queries.rows;
    if (g * words > 4096) {
      return absl::InvalidArgumentError("CUDA Hamming scoring supports at most 4096 query words");
    }
    const int rc = cuda::HammingScores(queries.bits.data(), g, keys.bits.data(), keys.rows, words,
                                       scores.data());
    if (rc != 0) return absl::InternalError(absl::StrCat("CUDA Hamming scores failed: ", rc));
    return scores;
#endif
  }
  ScoreAll(queries, keys.bits.data(), keys.rows, scores.data());
  return scores;
}

absl::Status HammingScoresInto(const PackedCodes& queries, const uint32_t* keys, int64_t rows,
                               absl::Span<int32_t> out) {
  TANDEM_RETURN_IF_ERROR(ValidateCodes(queries, "queries"));
  if (rows < 1 || keys == nullptr || static_cast<int64_t>(out.size()) != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hamming scores of ", rows, " keys into ", out.size(), " outputs"));
  }
  ScoreAll(queries, keys, rows, out.data());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> HammingTopK(const PackedCodes& queries,
                                                 const PackedCodes& keys, int64_t k,
                                                 Backend backend) {
#ifdef TANDEM_HAVE_CUDA
  // Device top-k (only the k positions come back); any argument the CUDA
  // kernel does not take falls through to the path below, which reports
  // the same errors as the CPU backend.
  if (backend == Backend::kCuda && CudaDeviceAvailable() && ValidateCodes(queries, "").ok() &&
      ValidateCodes(keys, "").ok() && queries.words == keys.words &&
      queries.rows * queries.words <= 4096 && k >= 1 && k <= keys.rows) {
    std::vector<int64_t> top(static_cast<size_t>(k));
    const int rc = cuda::HammingTopK(queries.bits.data(), queries.rows, keys.bits.data(),
                                     keys.rows, keys.words, k, top.data());
    if (rc == 0) return top;
    if (rc > 0) return absl::InternalError(absl::StrCat("CUDA Hamming top-k failed: ", rc));
  }
#endif
  TANDEM_ASSIGN_OR_RETURN(std::vector<int32_t> scores, HammingScores(queries, keys, backend));
  return TopKOfScores(queries, scores, k);
}

absl::StatusOr<std::vector<int64_t>> TopKOfScores(const PackedCodes& queries,
                                                  absl::Span<const int32_t> scores, int64_t k) {
  const int64_t n = static_cast<int64_t>(scores.size());
  if (k < 1 || k > n) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", k, " outside [1, ", n, "]"));
  }
  // Scores are small integers (<= 32 G words): a counting pass finds the
  // threshold in O(N), then one scan collects the winners in position order.
  const int32_t max_score = static_cast<int32_t>(32 * queries.words * queries.rows);
  std::vector<int64_t> hist(max_score + 1, 0);
  for (int32_t s : scores) {
    if (s < 0 || s > max_score) {
      return absl::InvalidArgumentError(
          absl::StrCat("score ", s, " outside [0, ", max_score, "] for these queries"));
    }
    ++hist[s];
  }
  int32_t threshold = max_score;
  int64_t above = 0;  // count with score > threshold
  while (above + hist[threshold] < k) above += hist[threshold--];
  int64_t ties_left = k - above;
  // Counting sort of the winners: each score's slots start after those of
  // every higher score, and a scan in position order fills them, so ties
  // stay in position order (best first, then lower position).
  std::vector<int64_t> next(static_cast<size_t>(max_score) + 1, 0);
  for (int64_t at = 0, sc = max_score; sc >= threshold; --sc) {
    next[sc] = at;
    at += hist[sc];
  }
  std::vector<int64_t> out(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    const int32_t sc = scores[j];
    if (sc > threshold || (sc == threshold && ties_left-- > 0)) out[next[sc]++] = j;
  }
  return out;
}

int64_t SpotlightDefaultTopK(int64_t n) {
  return std::max(std::min<int64_t>(n, 20), n - static_cast<int64_t>(0.98 * static_cast<double>(n)));
}

absl::StatusOr<Tensor> SelectedAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const std::vector<int64_t>& selected) {
  TANDEM_RETURN_IF_ERROR(CheckRank(q, 2, "q"));
  TANDEM_RETURN_IF_ERROR(CheckRank(k, 2, "k"));
  if (v.shape() != k.shape() || q.dim(1) != k.dim(1)) {
    return absl::InvalidArgumentError("q (G, d), k and v (N, d) do not fit");
  }
  if (selected.empty()) return absl::InvalidArgumentError("no selected positions");
  const int64_t d = k.dim(1), m = static_cast<int64_t>(selected.size());
  std::vector<float> ks(m * d), vs(m * d);
  for (int64_t i = 0; i < m; ++i) {
    if (selected[i] < 0 || selected[i] >= k.dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat("selected position ", selected[i],
                                                     " outside [0, ", k.dim(0), ")"));
    }
    std::copy_n(k.ptr() + selected[i] * d, d, ks.data() + i * d);
    std::copy_n(v.ptr() + selected[i] * d, d, vs.data() + i * d);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(q.shape()));
  internal::AttendRows(q.ptr(), d, q.dim(0), ks.data(), d, vs.data(), d, m, d,
                       internal::kNoCausalMask, 1.0f / std::sqrt(static_cast<float>(d)),
                       out.mutable_ptr(), d);
  return out;
}

}  // namespace tandem::ml::kernels
