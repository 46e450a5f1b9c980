#include "ml/kernels/distill/gld.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

namespace tandem::ml::kernels::distill {
namespace {

// Above this k the insertion scan (O(V k)) gives way to partial_sort.
constexpr int64_t kInsertionMaxK = 64;

// Top-k of one row: ids by (value desc, id asc).
void RowTop(const float* z, int64_t v, int64_t k, int64_t* ids) {
  if (k <= kInsertionMaxK) {
    int64_t filled = 0;
    for (int64_t j = 0; j < v; ++j) {
      if (filled == k && !(z[j] > z[ids[k - 1]])) continue;
      int64_t pos = filled < k ? filled++ : k - 1;
      while (pos > 0 && z[j] > z[ids[pos - 1]]) {
        ids[pos] = ids[pos - 1];
        --pos;
      }
      ids[pos] = j;
    }
    return;
  }
  std::vector<int64_t> all(static_cast<size_t>(v));
  std::iota(all.begin(), all.end(), 0);
  std::partial_sort(all.begin(), all.begin() + k, all.end(), [z](int64_t a, int64_t b) {
    return z[a] > z[b] || (z[a] == z[b] && a < b);
  });
  std::copy(all.begin(), all.begin() + k, ids);
}

absl::Status ValidateOptions(const Tensor& logits, const GldOptions& o, const char* what) {
  TANDEM_RETURN_IF_ERROR(CheckRank(logits, 2, what));
  if (o.top_k < 1 || o.top_k > logits.dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat("GLD top_k must be in [1, V = ", logits.dim(1),
                                                   "], got ", o.top_k));
  }
  if (!(o.temperature >= 1e-3 && o.temperature <= 1e3)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GLD temperature must be in [1e-3, 1e3], got ", o.temperature));
  }
  return absl::OkStatus();
}

// Per-position sparsified softmax of one model: top ids, their
// probabilities, s_t, and the softmax max/normaliser for the backward pass.
struct SparseRows {
  int64_t t = 0, v = 0, k = 0;
  std::vector<int64_t> ids;   // (T, k)
  std::vector<double> probs;  // (T, k)
  std::vector<double> mass;   // s_t
  std::vector<double> max, sum;
};

SparseRows Sparsify(const Tensor& logits, const GldOptions& o) {
  SparseRows s;
  s.t = logits.dim(0);
  s.v = logits.dim(1);
  s.k = o.top_k;
  s.ids.resize(static_cast<size_t>(s.t * s.k));
  s.probs.resize(s.ids.size());
  s.mass.resize(static_cast<size_t>(s.t));
  s.max.resize(s.mass.size());
  s.sum.resize(s.mass.size());
  const double inv_tau = 1.0 / o.temperature;
  tbb::parallel_for(int64_t{0}, s.t, [&](int64_t r) {
    const float* z = logits.ptr() + r * s.v;
    int64_t* ids = s.ids.data() + r * s.k;
    RowTop(z, s.v, s.k, ids);
    const double m = z[ids[0]];
    double sum = 0;
    for (int64_t j = 0; j < s.v; ++j) sum += std::exp((z[j] - m) * inv_tau);
    double mass = 0;
    for (int64_t j = 0; j < s.k; ++j) {
      const double p = std::exp((z[ids[j]] - m) * inv_tau) / sum;
      s.probs[r * s.k + j] = p;
      mass += p;
    }
    s.mass[r] = mass;
    s.max[r] = m;
    s.sum[r] = sum;
  });
  return s;
}

// Dense strengths over the vocabulary (0 for inactive ids) and the sorted
// (strength desc, id asc) list of active ids.
struct Strengths {
  std::vector<double> by_id;
  std::vector<int64_t> order;
};

Strengths StrengthsOf(const SparseRows& s) {
  Strengths out;
  out.by_id.assign(static_cast<size_t>(s.v), 0.0);
  std::vector<char> active(static_cast<size_t>(s.v), 0);
  for (int64_t r = 0; r < s.t; ++r) {
    for (int64_t j = 0; j < s.k; ++j) {
      const int64_t id = s.ids[r * s.k + j];
      out.by_id[id] += s.probs[r * s.k + j] * s.mass[r];
      if (!active[id]) {
        active[id] = 1;
        out.order.push_back(id);
      }
    }
  }
  std::sort(out.order.begin(), out.order.end(), [&](int64_t a, int64_t b) {
    return out.by_id[a] > out.by_id[b] || (out.by_id[a] == out.by_id[b] && a < b);
  });
  return out;
}

}  // namespace

absl::StatusOr<RowTopK> TopKLogits(const Tensor& logits, int64_t k) {
  TANDEM_RETURN_IF_ERROR(CheckRank(logits, 2, "GLD logits"));
  if (k < 1 || k > logits.dim(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k needs 1 <= k <= V = ", logits.dim(1), ", got ", k));
  }
  RowTopK out;
  out.rows = logits.dim(0);
  out.k = k;
  out.indices.resize(static_cast<size_t>(out.rows * k));
  out.values.resize(out.indices.size());
  const int64_t v = logits.dim(1);
  tbb::parallel_for(int64_t{0}, out.rows, [&](int64_t r) {
    RowTop(logits.ptr() + r * v, v, k, out.indices.data() + r * k);
    for (int64_t j = 0; j < k; ++j) out.values[r * k + j] = logits.ptr()[r * v + out.indices[r * k + j]];
  });
  return out;
}

absl::StatusOr<CoActivationGraph> BuildCoActivationGraph(const Tensor& logits,
                                                         const GldOptions& options) {
  TANDEM_RETURN_IF_ERROR(ValidateOptions(logits, options, "GLD logits"));
  const SparseRows s = Sparsify(logits, options);
  std::vector<int64_t> index(static_cast<size_t>(s.v), -1);
  CoActivationGraph g;
  for (int64_t id : s.ids) {
    if (index[id] < 0) {
      index[id] = 0;
      g.nodes.push_back(id);
    }
  }
  std::sort(g.nodes.begin(), g.nodes.end());
  const int64_t n = static_cast<int64_t>(g.nodes.size());
  if (n > kMaxGraphNodes) {
    return absl::InvalidArgumentError(absl::StrCat("GLD graph has ", n, " active nodes, above the ",
                                                   kMaxGraphNodes, " that are formed densely"));
  }
  for (int64_t i = 0; i < n; ++i) index[g.nodes[i]] = i;
  g.adjacency.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t r = 0; r < s.t; ++r) {
    for (int64_t a = 0; a < s.k; ++a) {
      const int64_t ia = index[s.ids[r * s.k + a]];
      const double pa = s.probs[r * s.k + a];
      for (int64_t b = 0; b < s.k; ++b) {
        g.adjacency[ia * n + index[s.ids[r * s.k + b]]] += pa * s.probs[r * s.k + b];
      }
    }
  }
  g.strengths.assign(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) g.strengths[i] += g.adjacency[i * n + j];
  }
  return g;
}

double SortedStrengthDistance(std::vector<double> a, std::vector<double> b) {
  const size_t n = std::max(a.size(), b.size());
  if (n == 0) return 0;
  std::sort(a.begin(), a.end(), std::greater<>());
  std::sort(b.begin(), b.end(), std::greater<>());
  a.resize(n, 0.0);
  b.resize(n, 0.0);
  double s = 0;
  for (size_t r = 0; r < n; ++r) s += (a[r] - b[r]) * (a[r] - b[r]);
  return s / static_cast<double>(n);
}

absl::StatusOr<GldLossResult> GldLoss(const Tensor& teacher, const Tensor& student,
                                      const GldOptions& options) {
  TANDEM_RETURN_IF_ERROR(ValidateOptions(teacher, options, "GLD teacher logits"));
  TANDEM_RETURN_IF_ERROR(ValidateOptions(student, options, "GLD student logits"));
  if (teacher.shape() != student.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("GLD teacher ", teacher.ShapeString(),
                                                   " and student ", student.ShapeString(),
                                                   " logits differ in shape (align vocabularies first)"));
  }
  const SparseRows ts = Sparsify(teacher, options), ss = Sparsify(student, options);
  const Strengths td = StrengthsOf(ts), sd = StrengthsOf(ss);
  const int64_t nt = static_cast<int64_t>(td.order.size());
  const int64_t ns = static_cast<int64_t>(sd.order.size());
  const int64_t n = std::max(nt, ns);
  GldLossResult out;
  out.nodes = n;
  // g_d[id] = d loss / d strength of student id.
  std::vector<double> g_d(static_cast<size_t>(ss.v), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const double a = r < ns ? sd.by_id[sd.order[r]] : 0.0;
    const double b = r < nt ? td.by_id[td.order[r]] : 0.0;
    out.loss += (a - b) * (a - b);
    if (r < ns) g_d[sd.order[r]] = 2.0 * (a - b) / static_cast<double>(n);
  }
  out.loss /= static_cast<double>(n);

  TANDEM_ASSIGN_OR_RETURN(out.grad_student, Tensor::Zeros(student.shape()));
  const double inv_tau = 1.0 / options.temperature;
  const int64_t k = ss.k, v = ss.v;
  tbb::parallel_for(int64_t{0}, ss.t, [&](int64_t r) {
    // d_i = sum_t p~_ti s_t: d d_i / d p_tj = [i = j] s_t + p~_ti for i, j in top_t.
    const int64_t* ids = ss.ids.data() + r * k;
    const double* p = ss.probs.data() + r * k;
    double cross = 0;
    for (int64_t i = 0; i < k; ++i) cross += g_d[ids[i]] * p[i];
    std::vector<double> g_p(static_cast<size_t>(k));
    double dot = 0;  // <g_p, p>
    for (int64_t j = 0; j < k; ++j) {
      g_p[j] = g_d[ids[j]] * ss.mass[r] + cross;
      dot += g_p[j] * p[j];
    }
    // Softmax backward: g_z = (1/tau) p (g_p - <g_p, p>), g_p = 0 off the top set.
    const float* z = student.ptr() + r * v;
    float* gz = out.grad_student.mutable_ptr() + r * v;
    const double m = ss.max[r], sum = ss.sum[r];
    for (int64_t c = 0; c < v; ++c) gz[c] = static_cast<float>(-inv_tau * std::exp((z[c] - m) * inv_tau) / sum * dot);
    for (int64_t j = 0; j < k; ++j) gz[ids[j]] = static_cast<float>(inv_tau * p[j] * (g_p[j] - dot));
  });
  return out;
}

double GwObjective(absl::Span<const double> a, absl::Span<const double> b,
                   absl::Span<const double> pi, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t l = 0; l < n; ++l) {
          const double d = a[i * n + k] - b[j * n + l];
          s += d * d * pi[i * n + j] * pi[k * n + l];
        }
  return s;
}

absl::StatusOr<double> ExactPermutationGw(absl::Span<const double> a, absl::Span<const double> b,
                                          int64_t n) {
  if (n < 1 || n > 9 || a.size() != static_cast<size_t>(n * n) ||
      b.size() != static_cast<size_t>(n * n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact permutation GW needs 1 <= n <= 9 and two n x n matrices, got n=", n));
  }
  std::vector<int64_t> sigma(static_cast<size_t>(n));
  std::iota(sigma.begin(), sigma.end(), 0);
  double best = INFINITY;
  do {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < n; ++k) {
        const double d = a[i * n + k] - b[sigma[i] * n + sigma[k]];
        s += d * d;
      }
    best = std::min(best, s);
  } while (std::next_permutation(sigma.begin(), sigma.end()));
  return best;
}

}  // namespace tandem::ml::kernels::distill
