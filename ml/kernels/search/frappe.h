// FraPPE: preference-based pure exploration for vector-valued bandits
// (Das, Shukla, Basu, arXiv 2508.16487; lower bound of Shukla & Basu,
// arXiv 2412.02988; kernels_research.md section 6).
//
// K arms with mean vectors M_k in R^L, Gaussian noise N(0, sigma^2 I), and a
// polyhedral preference cone C = {x : A x >= 0} (A is m x L, C pointed with
// a non-empty interior). Arm j dominates arm i when M_j - M_i in C \ {0}; the
// Pareto set P(M) holds the arms no other arm dominates. The optimal
// allocation solves [F]
//   T*(M)^-1 = max_{w in simplex} inf_{L in Alt(M)} sum_k w_k |M_k - L_k|^2 / (2 sigma^2).
//
// Reduced inner minimisation [F: "three structural properties"; the pairwise
// form below is our reconstruction, I]: the closest alternative changes one
// relation between two arms and moves only those two, so with the harmonic
// weight h(w_i, w_j) = w_i w_j / (w_i + w_j),
//   (a) i in P becomes dominated by j != i:
//         c_ij = dist^2(M_j - M_i, C) / (2 sigma^2)   (exact: projection on C)
//   (b) i not in P stops being dominated:
//         c_ij = dist^2(M_j - M_i, R^L \ C) / (2 sigma^2)
//              = min_r (a_r . (M_j - M_i))^2 / |a_r|^2 / (2 sigma^2)
//         for each Pareto arm j dominating i; all of them must be broken, so
//         we take the largest such term, a lower bound of the true cost
//         (exact when one Pareto arm dominates i, e.g. always when L = 1).
//   f(w) = min over the pieces of c_ij h(w_i, w_j).
// The costs c_ij depend on M only, so they are computed once per mean
// matrix (O(K^2) cone projections); a Frank-Wolfe step then costs O(|pieces|)
// = O(K |P|), within the paper's O(K L^2) per step for |P| <= L^2.
//
// Frank-Wolfe on the outer maximisation [I, FWS-style]: supergradient g of
// the active piece, k* = argmax_k g_k, w <- (1 - gamma_t) w + gamma_t e_k*,
// gamma_t = 1 / (t + 2) (an average of vertices, so iterates stay in the
// simplex). With the 1/(t+2) step this is fictitious play against the
// minimising piece. Plain FW on a non-smooth min has no general guarantee
// (FWS uses r-subdifferentials); our tests check it reaches the optimum:
// L = 1, K = 2 gives w* = (1/2, 1/2), T* = 8 sigma^2 / gap^2, and for
// L = 1, K = 4 it comes within 0.5% of a grid-searched max.
//
// Thread safety: value types and pure functions.
#ifndef TANDEM_ML_KERNELS_SEARCH_FRAPPE_H_
#define TANDEM_ML_KERNELS_SEARCH_FRAPPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml::kernels::search {

// A polyhedral cone {x : A x >= 0}. Immutable after Create.
class PreferenceCone {
 public:
  // a is m x dim row-major. INVALID_ARGUMENT unless 1 <= dim <= 64,
  // 1 <= m <= 256, a.size() == m * dim, entries finite and no zero row.
  static absl::StatusOr<PreferenceCone> Create(int64_t dim, std::vector<double> a);
  // The positive orthant R_+^dim (A = I): Pareto dominance.
  static absl::StatusOr<PreferenceCone> Orthant(int64_t dim);

  int64_t dim() const { return dim_; }
  int64_t constraints() const { return m_; }
  const std::vector<double>& matrix() const { return a_; }

  // x in C (with tolerance tol on each a_r . x >= -tol). REQUIRES: x.size() == dim().
  bool Contains(absl::Span<const double> x, double tol = 0) const;
  // Squared Euclidean distance from x to C (0 inside). Exact for the orthant
  // (sum of min(x_l, 0)^2); otherwise Dykstra's alternating projections
  // onto the half-spaces, to 1e-12 in the iterate or 10^5 sweeps.
  double DistanceSquaredTo(absl::Span<const double> x) const;
  // Squared distance from x in C to the complement: min_r (a_r.x)^2/|a_r|^2
  // (0 when x is outside C).
  double DistanceSquaredToComplement(absl::Span<const double> x) const;

 private:
  PreferenceCone(int64_t dim, int64_t m, std::vector<double> a, bool orthant)
      : dim_(dim), m_(m), a_(std::move(a)), orthant_(orthant) {}
  int64_t dim_ = 0;
  int64_t m_ = 0;
  std::vector<double> a_;
  bool orthant_ = false;
};

// Means: K x L row-major. Returns the sorted indices of the arms no other
// arm dominates (j dominates i iff M_j - M_i in C and M_j != M_i).
// INVALID_ARGUMENT when means.size() != K * cone.dim() or K < 1.
absl::StatusOr<std::vector<int64_t>> ParetoSet(absl::Span<const double> means, int64_t k,
                                               const PreferenceCone& cone);

// The reduced inner problem of one mean matrix (see header). Immutable.
class FrappeObjective {
 public:
  // INVALID_ARGUMENT as ParetoSet, or sigma <= 0, or K < 2.
  static absl::StatusOr<FrappeObjective> Create(absl::Span<const double> means, int64_t k,
                                                const PreferenceCone& cone, double sigma);

  struct Piece {
    int64_t i = 0, j = 0;
    double cost = 0;  // c_ij, already divided by 2 sigma^2
  };

  int64_t arms() const { return k_; }
  const std::vector<int64_t>& pareto() const { return pareto_; }
  const std::vector<Piece>& pieces() const { return pieces_; }

  // f(w) = min_pieces c_ij h(w_i, w_j); 0 when w has a zero weight on an
  // arm of the active piece. REQUIRES: w.size() == arms(). If active is
  // non-null, it receives the index of the minimising piece.
  double Value(absl::Span<const double> w, int64_t* active = nullptr) const;

 private:
  FrappeObjective(int64_t k, std::vector<int64_t> pareto, std::vector<Piece> pieces)
      : k_(k), pareto_(std::move(pareto)), pieces_(std::move(pieces)) {}
  int64_t k_ = 0;
  std::vector<int64_t> pareto_;
  std::vector<Piece> pieces_;
};

struct FrankWolfeResult {
  std::vector<double> w;  // final iterate, in the simplex
  double value = 0;       // f(w) = T*^-1 estimate
};

// `iterations` Frank-Wolfe steps from w0 (uniform when empty), step
// 1/(t + 2 + offset) where offset is the number of steps already taken
// (for warm starts). INVALID_ARGUMENT when w0 is not in the simplex or
// iterations outside [0, 10^8].
absl::StatusOr<FrankWolfeResult> FrankWolfe(const FrappeObjective& f, int64_t iterations,
                                            std::vector<double> w0 = {}, int64_t offset = 0);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_FRAPPE_H_
