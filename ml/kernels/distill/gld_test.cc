#include "ml/kernels/distill/gld.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "ml/kernels/testing/random_tensor.h"

namespace tandem::ml::kernels::distill {
namespace {

using ::tandem::ml::kernels::testing::RandomTensor;
using ::tandem::testing::StatusIs;

// Columns of `t` permuted: out[:, perm[c]] = t[:, c].
Tensor PermuteColumns(const Tensor& t, const std::vector<int64_t>& perm) {
  Tensor out = *Tensor::Zeros(t.shape());
  const int64_t v = t.dim(1);
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (int64_t c = 0; c < v; ++c) out.mutable_ptr()[r * v + perm[c]] = t.ptr()[r * v + c];
  return out;
}

std::vector<int64_t> RandomPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 gen(seed);
  std::shuffle(p.begin(), p.end(), gen);
  return p;
}

// The graph's adjacency embedded in an n x n matrix (isolated zero nodes pad it).
std::vector<double> Padded(const CoActivationGraph& g, int64_t n) {
  const int64_t m = static_cast<int64_t>(g.nodes.size());
  std::vector<double> a(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j) a[i * n + j] = g.adjacency[i * m + j];
  return a;
}

std::vector<double> RowSums(const std::vector<double>& a, int64_t n) {
  std::vector<double> d(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) d[i] += a[i * n + j];
  return d;
}

TEST(GldTopK, MatchesAFullSortIncludingTies) {
  for (int64_t k : {1, 5, 100}) {
    Tensor z = RandomTensor({7, 200}, 3);
    for (float& x : z.mutable_data()) x = std::round(x * 2.0f);  // many ties
    TANDEM_ASSERT_OK_AND_ASSIGN(RowTopK top, TopKLogits(z, k));
    for (int64_t r = 0; r < 7; ++r) {
      std::vector<int64_t> ids(200);
      std::iota(ids.begin(), ids.end(), 0);
      const float* row = z.ptr() + r * 200;
      std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(top.indices[r * k + j], ids[j]) << "k=" << k << " row " << r << " rank " << j;
        EXPECT_EQ(top.values[r * k + j], row[ids[j]]);
      }
    }
  }
}

TEST(GldGraph, StrengthsAreRowSumsOfTheTopKSoftmaxGraph) {
  const Tensor z = RandomTensor({9, 30}, 4, 2.0f);
  const GldOptions o{.top_k = 4, .temperature = 0.7};
  TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph g, BuildCoActivationGraph(z, o));
  const int64_t n = static_cast<int64_t>(g.nodes.size());
  // Independent reference: dense softmax, top-k mask, sum of outer products.
  std::vector<double> dense(30 * 30, 0.0);
  for (int64_t r = 0; r < 9; ++r) {
    std::vector<double> p(30);
    double sum = 0;
    for (int64_t c = 0; c < 30; ++c) sum += p[c] = std::exp(z.ptr()[r * 30 + c] / 0.7);
    std::vector<int64_t> ids(30);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 4; ++b) dense[ids[a] * 30 + ids[b]] += p[ids[a]] * p[ids[b]] / (sum * sum);
  }
  for (int64_t i = 0; i < n; ++i) {
    double row = 0;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(g.adjacency[i * n + j], dense[g.nodes[i] * 30 + g.nodes[j]], 1e-12);
      EXPECT_DOUBLE_EQ(g.adjacency[i * n + j], g.adjacency[j * n + i]);
      row += g.adjacency[i * n + j];
    }
    EXPECT_NEAR(g.strengths[i], row, 1e-12);
  }
  // The loss uses the O(T k) strengths, which must agree with the graph's.
  const Tensor z2 = RandomTensor({9, 30}, 5, 2.0f);
  TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph g2, BuildCoActivationGraph(z2, o));
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult l, GldLoss(z, z2, o));
  EXPECT_NEAR(l.loss, SortedStrengthDistance(g.strengths, g2.strengths), 1e-12);
  EXPECT_EQ(l.nodes, std::max(g.nodes.size(), g2.nodes.size()));
}

TEST(GldLoss, ZeroForEqualLogitsAndInvariantToVocabularyRelabelling) {
  const Tensor t = RandomTensor({12, 40}, 6, 2.0f), s = RandomTensor({12, 40}, 7, 2.0f);
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult same, GldLoss(t, t, {}));
  EXPECT_EQ(same.loss, 0.0);
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult base, GldLoss(t, s, {}));
  EXPECT_GT(base.loss, 1e-4);
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult perm,
                              GldLoss(t, PermuteColumns(s, RandomPermutation(40, 8)), {}));
  EXPECT_NEAR(perm.loss, base.loss, 1e-12);
  // An isomorphic student graph: loss and exact permutation GW both vanish.
  const Tensor iso = PermuteColumns(t, RandomPermutation(40, 9));
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult l, GldLoss(t, iso, {.top_k = 2}));
  EXPECT_NEAR(l.loss, 0.0, 1e-24);
  const Tensor t_small = RandomTensor({3, 12}, 10, 2.0f);
  const Tensor iso_small = PermuteColumns(t_small, RandomPermutation(12, 11));
  TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph ga, BuildCoActivationGraph(t_small, {.top_k = 2}));
  TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph gb, BuildCoActivationGraph(iso_small, {.top_k = 2}));
  const int64_t n = static_cast<int64_t>(ga.nodes.size());
  ASSERT_LE(n, 6);
  ASSERT_EQ(gb.nodes.size(), ga.nodes.size());
  EXPECT_NEAR(*ExactPermutationGw(Padded(ga, n), Padded(gb, n), n), 0.0, 1e-24);
}

// Couplings with uniform marginals 1/n: Sinkhorn scaling of a random positive matrix.
std::vector<double> RandomCoupling(int64_t n, std::mt19937_64& gen) {
  std::exponential_distribution<double> e(1.0);
  std::vector<double> pi(static_cast<size_t>(n * n));
  for (double& x : pi) x = std::pow(e(gen), 3.0);  // spread out, some near-permutations
  for (int it = 0; it < 500; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += pi[i * n + j];
      for (int64_t j = 0; j < n; ++j) pi[i * n + j] /= s * n;
    }
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += pi[i * n + j];
      for (int64_t i = 0; i < n; ++i) pi[i * n + j] /= s * n;
    }
  }
  return pi;
}

TEST(GldLoss, LowerBoundsExactGromovWassersteinOnTinyGraphs) {
  std::mt19937_64 gen(12);
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE(trial);
    // Graphs from logits of two "models" (T = 3, V = 7, k = 2: n <= 6).
    const Tensor ta = RandomTensor({3, 7}, 100 + trial, 2.0f), tb = RandomTensor({3, 7}, 200 + trial, 2.0f);
    TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph ga, BuildCoActivationGraph(ta, {.top_k = 2}));
    TANDEM_ASSERT_OK_AND_ASSIGN(CoActivationGraph gb, BuildCoActivationGraph(tb, {.top_k = 2}));
    const int64_t n = static_cast<int64_t>(std::max(ga.nodes.size(), gb.nodes.size()));
    const std::vector<double> a = Padded(ga, n), b = Padded(gb, n);
    TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult l, GldLoss(ta, tb, {.top_k = 2}));
    const double gld = l.loss;
    EXPECT_NEAR(gld, SortedStrengthDistance(RowSums(a, n), RowSums(b, n)), 1e-12);
    TANDEM_ASSERT_OK_AND_ASSIGN(double perm, ExactPermutationGw(a, b, n));
    EXPECT_GE(perm + 1e-12, gld);  // bound (1)
    for (int s = 0; s < 200; ++s) {  // bound (2) holds for every coupling
      const double gw = GwObjective(a, b, RandomCoupling(n, gen), n);
      EXPECT_GE(gw + 1e-12, gld / (n * n));
    }
    EXPECT_GE(perm / (n * n) + 1e-12, gld / (n * n));
  }
}

TEST(GldLoss, ExactCouplingGwOfTwoNodesLiesBetweenTheBounds) {
  // n = 2: couplings are [[a, 1/2 - a], [1/2 - a, a]], a in [0, 1/2]; grid search.
  std::mt19937_64 gen(13);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const double x = u(gen), y = u(gen);
    const std::vector<double> a = {u(gen), x, x, u(gen)}, b = {u(gen), y, y, u(gen)};
    double gw = INFINITY;
    for (int s = 0; s <= 5000; ++s) {
      const double p = 0.5 * s / 5000;
      gw = std::min(gw, GwObjective(a, b, {p, 0.5 - p, 0.5 - p, p}, 2));
    }
    const double lb = SortedStrengthDistance(RowSums(a, 2), RowSums(b, 2)) / 4;
    EXPECT_GE(gw + 1e-12, lb);
    EXPECT_LE(gw, *ExactPermutationGw(a, b, 2) / 4 + 1e-12);
  }
}

TEST(GldLoss, GradientMatchesFiniteDifferences) {
  const Tensor t = RandomTensor({6, 20}, 14, 2.0f), s = RandomTensor({6, 20}, 15, 2.0f);
  const GldOptions o{.top_k = 3, .temperature = 1.5};
  TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult l, GldLoss(t, s, o));
  double gmax = 0;
  for (float g : l.grad_student.data()) gmax = std::max(gmax, double{std::fabs(g)});
  ASSERT_GT(gmax, 1e-4);
  const float h = 1e-3f;
  for (int64_t i = 0; i < s.size(); ++i) {
    Tensor p = s, m = s;
    p.mutable_ptr()[i] += h;
    m.mutable_ptr()[i] -= h;
    const double fd = (GldLoss(t, p, o)->loss - GldLoss(t, m, o)->loss) /
                      (double{p.ptr()[i]} - double{m.ptr()[i]});
    EXPECT_NEAR(l.grad_student.data()[i], fd, 2e-3 * gmax) << "element " << i;
  }
}

TEST(GldLoss, GradientDescentOnTheStudentReducesTheLoss) {
  const Tensor t = RandomTensor({16, 50}, 16, 2.0f);
  Tensor s = RandomTensor({16, 50}, 17, 2.0f);
  double prev = GldLoss(t, s, {})->loss;
  const double first = prev;
  for (int step = 0; step < 30; ++step) {
    TANDEM_ASSERT_OK_AND_ASSIGN(GldLossResult l, GldLoss(t, s, {}));
    for (int64_t i = 0; i < s.size(); ++i) s.mutable_ptr()[i] -= 20.0f * l.grad_student.data()[i];
    const double now = GldLoss(t, s, {})->loss;
    EXPECT_LE(now, prev * (1 + 1e-9)) << "step " << step;
    prev = now;
  }
  EXPECT_LT(prev, 0.5 * first);
}

TEST(GldLoss, RejectsBadInput) {
  const Tensor z = RandomTensor({4, 10}, 1);
  EXPECT_THAT(GldLoss(z, RandomTensor({4, 11}, 2), {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GldLoss(z, z, {.top_k = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GldLoss(z, z, {.top_k = 11}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GldLoss(z, z, {.temperature = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TopKLogits(RandomTensor({10}, 1), 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ExactPermutationGw({1.0}, {1.0, 2.0}, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ExactPermutationGw(std::vector<double>(100), std::vector<double>(100), 10),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // 513 rows with disjoint top-8 sets: 4104 active nodes > kMaxGraphNodes.
  Tensor big = *Tensor::Zeros({513, 4104});
  for (int64_t r = 0; r < 513; ++r)
    for (int64_t j = 0; j < 8; ++j) big.mutable_ptr()[r * 4104 + 8 * r + j] = 5.0f;
  EXPECT_THAT(BuildCoActivationGraph(big, {.top_k = 8}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::distill
