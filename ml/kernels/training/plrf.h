// Power-law random features (PLRF) and the DANA scaling experiment
// (Ferbach, Everett, Gidel, E. Paquette & C. Paquette, "Dimension-adapted
// Momentum Outscales SGD", arXiv 2505.16098; kernels_research.md section 5).
//
// Model [F]: x in R^v, x_j = j^-alpha z_j, z ~ N(0, I); target <x, b> with
// b_j = j^-beta; features W^T x with W (v x d), W_jk ~ N(0, 1/d). Risk
//   P(theta) = 1/2 E(<W^T x, theta> - <x, b>)^2
//            = 1/2 sum_j j^-2alpha ((W theta)_j - j^-beta)^2      (closed form)
// and the minibatch gradient g = (1/B) sum_b f_b (f_b^T theta - x_b^T b),
// f_b = W^T x_b, an unbiased estimate of grad P = W^T D (W theta - b),
// D = diag(j^-2alpha).
//
// The optimizers are ml/optim's (one implementation of the update rule):
// DANA-decaying, DANA-constant (CreateDana) and SGD with heavy-ball momentum
// (CreateSgd), with the authors' hyperparameters (DanaHyperparameters).
//
//   TANDEM_ASSIGN_OR_RETURN(auto p, PlrfProblem::Create({.alpha = 1, .beta = 0.3}));
//   TANDEM_ASSIGN_OR_RETURN(PlrfCurve c, RunPlrf(*p, PlrfOptimizer::kDanaDecaying, run));
//
// Thread safety: a PlrfProblem is immutable after Create and may be shared;
// RunPlrf is a pure function of its arguments (own RNG, seeded).
#ifndef TANDEM_ML_KERNELS_TRAINING_PLRF_H_
#define TANDEM_ML_KERNELS_TRAINING_PLRF_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ml/optim/optimizer.h"

namespace tandem::ml::kernels::training {

struct PlrfOptions {
  double alpha = 1.0;  // data power law, > 0
  double beta = 0.3;   // target power law, finite
  int64_t v = 2000;    // hidden (data) dimension
  int64_t d = 500;     // feature (parameter) dimension; the paper takes v/d -> r > 1
  uint64_t seed = 1;   // draws W
};

// Upper bound on v * d (W is held in float): 2^26 entries, 256 MiB.
inline constexpr int64_t kMaxPlrfEntries = int64_t{1} << 26;

class PlrfProblem {
 public:
  // INVALID_ARGUMENT unless alpha > 0, beta finite, v >= 1, d >= 1 and
  // v * d <= kMaxPlrfEntries. v < d is accepted (the over-parameterised
  // regime) although the paper's phases assume v > d.
  static absl::StatusOr<std::unique_ptr<PlrfProblem>> Create(const PlrfOptions& options);

  const PlrfOptions& options() const { return options_; }
  int64_t v() const { return options_.v; }
  int64_t d() const { return options_.d; }
  // W (v x d), row-major.
  absl::Span<const float> w() const { return w_; }

  // Closed-form risk P(theta), in double. INVALID_ARGUMENT unless
  // theta.size() == d.
  absl::StatusOr<double> Risk(absl::Span<const float> theta) const;
  // Exact gradient W^T D (W theta - b). INVALID_ARGUMENT as Risk.
  absl::StatusOr<std::vector<double>> RiskGradient(absl::Span<const float> theta) const;
  // Minibatch gradient from `batch` fresh samples drawn from `gen` (the
  // sampling stream; B * v normals per call). INVALID_ARGUMENT unless
  // theta.size() == d, grad.size() == d and batch >= 1.
  absl::Status SampleGradient(absl::Span<const float> theta, int64_t batch,
                              std::mt19937_64& gen, absl::Span<float> grad) const;
  // P(0) = 1/2 sum_j j^(-2 alpha - 2 beta).
  double InitialRisk() const;
  // min_theta P: solves (W^T D W) theta* = W^T D b (LDL^T, double).
  // Returns the optimum; `risk` (if non-null) receives P(theta*).
  // INTERNAL if the normal equations are numerically singular.
  absl::StatusOr<std::vector<double>> Optimum(double* risk) const;
  // Tr K ~= sum_{j <= v} j^-2alpha, the authors' trace estimate.
  double TraceEstimate() const;

 private:
  PlrfProblem(const PlrfOptions& options, std::vector<float> w);
  PlrfOptions options_;
  std::vector<float> w_;
  std::vector<float> data_scale_;  // j^-alpha
  std::vector<float> target_;      // j^-beta
};

// The authors' hyperparameters for batch B [F: authors' code, spec section 5]:
//   gamma1 = 1, gamma2 = 0.5 min(1, B / Tr K), delta = 4 + 2(alpha + beta)/(2 alpha),
//   DANA-constant gamma3 = 0.5 gamma2 / d, DANA-decaying
//   gamma3(t) = 0.5 gamma2 (1 + t)^(-1/(2 alpha)).
// REQUIRES: batch >= 1.
ml::DanaOptions DanaHyperparameters(const PlrfProblem& problem, int64_t batch,
                                    ml::DanaSchedule schedule);

enum class PlrfOptimizer {
  kDanaDecaying,
  kDanaConstant,
  kSgdMomentum,  // heavy ball, lr = gamma2 (1 - momentum), see MakePlrfOptimizer
  kSgd,          // DANA with gamma3 = 0 (bit-identical to SGD with step gamma2)
};
// "dana_decaying", "dana_constant", "sgd_momentum", "sgd".
absl::string_view PlrfOptimizerName(PlrfOptimizer kind);
// Inverse of PlrfOptimizerName; INVALID_ARGUMENT for any other name.
absl::StatusOr<PlrfOptimizer> ParsePlrfOptimizer(absl::string_view name);

// Builds the optimizer with DanaHyperparameters. SGD-momentum uses PyTorch's
// heavy ball (ml/optim CreateSgd) with lr = gamma2 (1 - momentum): the paper
// gives no SGD-M schedule, and this choice [I] gives SGD-M the same
// stationary effective step gamma2 as SGD and DANA, so that the comparison
// is about the schedule, not a larger step (a larger one diverges at
// gamma2 ~ the stability limit). INVALID_ARGUMENT for momentum outside
// [0, 1) or batch < 1.
absl::StatusOr<std::unique_ptr<ml::Optimizer>> MakePlrfOptimizer(const PlrfProblem& problem,
                                                                PlrfOptimizer kind,
                                                                int64_t batch, double momentum);

struct PlrfRunOptions {
  int64_t steps = 1000;       // >= 1
  int64_t batch = 1;          // >= 1
  double momentum = 0.9;      // SGD-momentum only
  uint64_t sample_seed = 2;   // the sample stream; the same for every optimizer
  int64_t log_points = 50;    // risk evaluated at ~log-spaced steps (plus 0 and steps)
};

struct PlrfCurve {
  std::vector<int64_t> steps;  // increasing, first 0, last = run.steps
  std::vector<double> risk;    // P(theta_t) at those steps
};

// Trains from theta_0 = 0 and records the closed-form risk. INVALID_ARGUMENT
// for steps < 1, batch < 1, log_points < 1, bad momentum, or steps * batch *
// v * d > 1e13 (a work cap, ~1 h of this machine).
absl::StatusOr<PlrfCurve> RunPlrf(const PlrfProblem& problem, PlrfOptimizer kind,
                                  const PlrfRunOptions& run);

// The logged step indices of RunPlrf: 0, steps and ~log_points log-spaced
// steps between, deduplicated and sorted. REQUIRES: steps, log_points >= 1.
std::vector<int64_t> LogSpacedSteps(int64_t steps, int64_t log_points);

}  // namespace tandem::ml::kernels::training

#endif  // TANDEM_ML_KERNELS_TRAINING_PLRF_H_
