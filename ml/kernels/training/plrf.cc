#include "ml/kernels/training/plrf.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels::training {
namespace {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMatF = Eigen::Map<const MatF>;
using MapVecF = Eigen::Map<const Eigen::VectorXf>;

absl::Status CheckSize(absl::Span<const float> x, int64_t d, const char* what) {
  if (static_cast<int64_t>(x.size()) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("plrf: ", what, " has ", x.size(), " entries, expected d = ", d));
  }
  return absl::OkStatus();
}

}  // namespace

PlrfProblem::PlrfProblem(const PlrfOptions& options, std::vector<float> w)
    : options_(options), w_(std::move(w)) {
  data_scale_.resize(static_cast<size_t>(options.v));
  target_.resize(static_cast<size_t>(options.v));
  for (int64_t j = 0; j < options.v; ++j) {
    data_scale_[j] = static_cast<float>(std::pow(j + 1.0, -options.alpha));
    target_[j] = static_cast<float>(std::pow(j + 1.0, -options.beta));
  }
}

absl::StatusOr<std::unique_ptr<PlrfProblem>> PlrfProblem::Create(const PlrfOptions& o) {
  if (!(o.alpha > 0) || !std::isfinite(o.alpha) || !std::isfinite(o.beta) || o.v < 1 ||
      o.d < 1 || o.v > kMaxPlrfEntries / o.d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plrf: need alpha > 0, finite beta, v, d >= 1 and v * d <= ", kMaxPlrfEntries,
        "; got alpha=", o.alpha, " beta=", o.beta, " v=", o.v, " d=", o.d));
  }
  std::vector<float> w(static_cast<size_t>(o.v * o.d));
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(static_cast<double>(o.d)));
  for (float& x : w) x = static_cast<float>(normal(gen));
  return std::unique_ptr<PlrfProblem>(new PlrfProblem(o, std::move(w)));
}

absl::StatusOr<double> PlrfProblem::Risk(absl::Span<const float> theta) const {
  TANDEM_RETURN_IF_ERROR(CheckSize(theta, d(), "theta"));
  const MapMatF w(w_.data(), v(), d());
  const Eigen::VectorXd th = MapVecF(theta.data(), d()).cast<double>();
  double risk = 0;
  for (int64_t j = 0; j < v(); ++j) {
    const double diff = w.row(j).cast<double>().dot(th.transpose()) - target_[j];
    risk += 0.5 * static_cast<double>(data_scale_[j]) * data_scale_[j] * diff * diff;
  }
  return risk;
}

absl::StatusOr<std::vector<double>> PlrfProblem::RiskGradient(
    absl::Span<const float> theta) const {
  TANDEM_RETURN_IF_ERROR(CheckSize(theta, d(), "theta"));
  const MapMatF w(w_.data(), v(), d());
  const Eigen::VectorXd th = MapVecF(theta.data(), d()).cast<double>();
  Eigen::VectorXd g = Eigen::VectorXd::Zero(d());
  for (int64_t j = 0; j < v(); ++j) {
    const Eigen::VectorXd row = w.row(j).cast<double>().transpose();
    const double s2 = static_cast<double>(data_scale_[j]) * data_scale_[j];
    g += s2 * (row.dot(th) - target_[j]) * row;
  }
  return std::vector<double>(g.data(), g.data() + g.size());
}

absl::Status PlrfProblem::SampleGradient(absl::Span<const float> theta, int64_t batch,
                                         std::mt19937_64& gen, absl::Span<float> grad) const {
  TANDEM_RETURN_IF_ERROR(CheckSize(theta, d(), "theta"));
  TANDEM_RETURN_IF_ERROR(CheckSize(grad, d(), "grad"));
  if (batch < 1) return absl::InvalidArgumentError("plrf: batch must be >= 1");
  std::normal_distribution<float> normal(0.0f, 1.0f);
  MatF x(batch, v());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < v(); ++j) x(b, j) = data_scale_[j] * normal(gen);
  }
  const MapMatF w(w_.data(), v(), d());
  const MatF f = x * w;                                             // (B, d)
  const Eigen::VectorXf y = x * MapVecF(target_.data(), v());       // <x_b, b>
  const Eigen::VectorXf r = f * MapVecF(theta.data(), d()) - y;     // residuals
  Eigen::Map<Eigen::VectorXf>(grad.data(), d()) =
      (f.transpose() * r) * (1.0f / static_cast<float>(batch));
  return absl::OkStatus();
}

double PlrfProblem::InitialRisk() const {
  double p0 = 0;
  for (int64_t j = 1; j <= v(); ++j) p0 += 0.5 * std::pow(j, -2 * options_.alpha - 2 * options_.beta);
  return p0;
}

absl::StatusOr<std::vector<double>> PlrfProblem::Optimum(double* risk) const {
  const MapMatF w(w_.data(), v(), d());
  Eigen::VectorXd dvec(v()), b(v());
  for (int64_t j = 0; j < v(); ++j) {
    dvec[j] = static_cast<double>(data_scale_[j]) * data_scale_[j];
    b[j] = target_[j];
  }
  const Eigen::MatrixXd wd = w.cast<double>();
  const Eigen::MatrixXd normal = wd.transpose() * dvec.asDiagonal() * wd;
  const Eigen::VectorXd rhs = wd.transpose() * (dvec.asDiagonal() * b);
  Eigen::LDLT<Eigen::MatrixXd> ldlt(normal);
  if (ldlt.info() != Eigen::Success || ldlt.rcond() < 1e-14) {
    return absl::InternalError(
        absl::StrCat("plrf: normal equations are singular (rcond ", ldlt.rcond(), ")"));
  }
  const Eigen::VectorXd theta = ldlt.solve(rhs);
  if (risk != nullptr) {
    const Eigen::VectorXd diff = wd * theta - b;
    *risk = 0.5 * diff.dot(dvec.asDiagonal() * diff);
  }
  return std::vector<double>(theta.data(), theta.data() + theta.size());
}

double PlrfProblem::TraceEstimate() const {
  double t = 0;
  for (int64_t j = 1; j <= v(); ++j) t += std::pow(j, -2 * options_.alpha);
  return t;
}

ml::DanaOptions DanaHyperparameters(const PlrfProblem& problem, int64_t batch,
                                    ml::DanaSchedule schedule) {
  const double alpha = problem.options().alpha, beta = problem.options().beta;
  ml::DanaOptions o;
  o.gamma1 = 1.0;
  o.gamma2 = 0.5 * std::min(1.0, static_cast<double>(batch) / problem.TraceEstimate());
  o.delta = 4.0 + 2.0 * (alpha + beta) / (2.0 * alpha);
  o.alpha = alpha;
  o.dimension = problem.d();
  o.gamma3 = 0.5 * o.gamma2 / static_cast<double>(problem.d());  // used by kConstant only
  o.schedule = schedule;
  return o;
}

absl::string_view PlrfOptimizerName(PlrfOptimizer kind) {
  switch (kind) {
    case PlrfOptimizer::kDanaDecaying: return "dana_decaying";
    case PlrfOptimizer::kDanaConstant: return "dana_constant";
    case PlrfOptimizer::kSgdMomentum: return "sgd_momentum";
    case PlrfOptimizer::kSgd: return "sgd";
  }
  return "unknown";
}

absl::StatusOr<PlrfOptimizer> ParsePlrfOptimizer(absl::string_view name) {
  for (PlrfOptimizer k : {PlrfOptimizer::kDanaDecaying, PlrfOptimizer::kDanaConstant,
                          PlrfOptimizer::kSgdMomentum, PlrfOptimizer::kSgd}) {
    if (name == PlrfOptimizerName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown PLRF optimizer '", name, "' (dana_decaying|dana_constant|sgd_momentum|sgd)"));
}

absl::StatusOr<std::unique_ptr<ml::Optimizer>> MakePlrfOptimizer(const PlrfProblem& problem,
                                                                PlrfOptimizer kind,
                                                                int64_t batch, double momentum) {
  if (batch < 1) return absl::InvalidArgumentError("plrf: batch must be >= 1");
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("plrf: momentum must be in [0, 1), got ",
                                                   momentum));
  }
  switch (kind) {
    case PlrfOptimizer::kDanaDecaying:
      return ml::CreateDana(DanaHyperparameters(problem, batch, ml::DanaSchedule::kDecaying));
    case PlrfOptimizer::kDanaConstant:
      return ml::CreateDana(DanaHyperparameters(problem, batch, ml::DanaSchedule::kConstant));
    case PlrfOptimizer::kSgd: {
      ml::DanaOptions o = DanaHyperparameters(problem, batch, ml::DanaSchedule::kConstant);
      o.gamma3 = 0.0;
      return ml::CreateDana(o);
    }
    case PlrfOptimizer::kSgdMomentum: {
      const double gamma2 =
          DanaHyperparameters(problem, batch, ml::DanaSchedule::kConstant).gamma2;
      if (momentum == 0) return ml::CreateSgd({.learning_rate = gamma2});
      return ml::CreateSgd({.learning_rate = gamma2 * (1.0 - momentum), .momentum = momentum});
    }
  }
  return absl::InvalidArgumentError("plrf: unknown optimizer kind");
}

std::vector<int64_t> LogSpacedSteps(int64_t steps, int64_t log_points) {
  std::vector<int64_t> out = {0, steps};
  const double log_max = std::log(static_cast<double>(steps));
  for (int64_t i = 0; i < log_points; ++i) {
    const double e = log_points == 1 ? log_max : log_max * i / (log_points - 1.0);
    out.push_back(std::clamp<int64_t>(std::llround(std::exp(e)), 1, steps));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<PlrfCurve> RunPlrf(const PlrfProblem& problem, PlrfOptimizer kind,
                                  const PlrfRunOptions& run) {
  if (run.steps < 1 || run.batch < 1 || run.log_points < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plrf: need steps, batch, log_points >= 1; got ", run.steps, ", ", run.batch, ", ",
        run.log_points));
  }
  const double work = static_cast<double>(run.steps) * run.batch * problem.v() * problem.d();
  if (work > 1e13) {
    return absl::InvalidArgumentError(
        absl::StrCat("plrf: steps * batch * v * d = ", work, " exceeds 1e13"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ml::Optimizer> opt,
                          MakePlrfOptimizer(problem, kind, run.batch, run.momentum));
  std::mt19937_64 gen(run.sample_seed);
  std::vector<float> theta(static_cast<size_t>(problem.d()), 0.0f), grad(theta.size());
  PlrfCurve curve;
  curve.steps = LogSpacedSteps(run.steps, run.log_points);
  size_t next = 0;
  for (int64_t t = 0; t <= run.steps; ++t) {
    if (next < curve.steps.size() && curve.steps[next] == t) {
      TANDEM_ASSIGN_OR_RETURN(double r, problem.Risk(theta));
      curve.risk.push_back(r);
      ++next;
    }
    if (t == run.steps) break;
    TANDEM_RETURN_IF_ERROR(problem.SampleGradient(theta, run.batch, gen, absl::MakeSpan(grad)));
    TANDEM_RETURN_IF_ERROR(opt->Step(absl::MakeSpan(theta), grad));
  }
  return curve;
}

}  // namespace tandem::ml::kernels::training
