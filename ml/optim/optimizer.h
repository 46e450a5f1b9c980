// First-order optimizers over a flat parameter vector: SGD with momentum,
// Adam, and DANA (dimension-adapted Nesterov acceleration).
//
// Lifecycle: one instance per training run; the state (momentum, moments)
// is sized on the first Step() and must stay the same size afterwards.
// Thread-compatible: one Step() at a time. All three updates are
// element-wise, so one Step() may split the vector into ranges that run
// concurrently (the RangeRunner overload; GradientEngine::ApplyStep runs them
// on its oneTBB arena); the result does not depend on the split.
//
// Denormal results are flushed to zero during an update (x86: MXCSR FTZ/DAZ
// set for the update and restored after it): a moment that decays towards
// zero (Adam's m and v of a parameter whose gradient stays 0, e.g. behind a
// dead ReLU) would otherwise spend ~150 steps as denormals, each operation
// on them ~100x slower.
#ifndef TANDEM_ML_OPTIM_OPTIMIZER_H_
#define TANDEM_ML_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml {

// Calls body(begin, end) for disjoint ranges that cover [0, n), possibly
// concurrently, and returns once all of them ran.
using RangeBody = absl::FunctionRef<void(size_t begin, size_t end)>;
using RangeRunner = absl::FunctionRef<void(size_t n, RangeBody body)>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Applies one update in place. Returns INVALID_ARGUMENT when the spans
  // differ in size or the size changed since the first step.
  absl::Status Step(absl::Span<float> params, absl::Span<const float> grads);
  // Same, with the element ranges run by `runner` (e.g. on several threads).
  absl::Status Step(absl::Span<float> params, absl::Span<const float> grads, RangeRunner runner);
  // Forgets all state (step count, buffers).
  void Reset();
  int64_t steps() const { return steps_; }
  double learning_rate() const { return lr_; }
  void set_learning_rate(double lr) { lr_ = lr; }

  // The whole state (step count and buffers), for checkpoints: a restored
  // optimizer continues bit-identically. RestoreState returns
  // INVALID_ARGUMENT when the snapshot does not match this optimizer's
  // buffers (other kind, other size).
  struct State {
    int64_t steps = 0;
    size_t size = 0;  // parameter count (0 before the first step)
    std::vector<std::vector<float>> buffers;
  };
  State SaveState();  // non-const: reads the buffers through Buffers()
  absl::Status RestoreState(const State& state);

 protected:
  explicit Optimizer(double lr) : lr_(lr) {}
  // Updates elements [begin, end) of `params` (and of the state buffers);
  // `params`/`grads` are the whole vectors. `t` is the 0-based step index;
  // buffers are already sized. Must touch no element outside the range:
  // disjoint ranges of one step run concurrently.
  virtual void Apply(int64_t t, size_t begin, size_t end, absl::Span<float> params,
                     absl::Span<const float> grads) = 0;
  virtual void ResizeState(size_t n) = 0;
  // The optimizer's buffers, in a fixed order (SaveState/RestoreState).
  virtual std::vector<std::vector<float>*> Buffers() = 0;

 private:
  double lr_;
  int64_t steps_ = 0;
  size_t size_ = 0;
};

struct SgdOptions {
  double learning_rate = 0.01;
  double momentum = 0.0;      // heavy-ball coefficient, [0, 1)
  double weight_decay = 0.0;  // L2 added to the gradient
  bool nesterov = false;
};
// v = momentum * v + (g + wd * p); p -= lr * v (or lr * (g + momentum * v)
// with Nesterov), the PyTorch convention.
// Create returns INVALID_ARGUMENT for lr <= 0, momentum outside [0, 1),
// wd < 0, or Nesterov without momentum.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateSgd(const SgdOptions& options);

struct AdamOptions {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};
// Kingma & Ba 2015 with bias correction. INVALID_ARGUMENT for lr <= 0,
// betas outside [0, 1) or epsilon <= 0.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdam(const AdamOptions& options);

enum class DanaSchedule { kConstant, kDecaying };

// DANA (Ferbach, Everett, Gidel, Paquette & Paquette, "Dimension-adapted
// Momentum Outscales SGD", arXiv 2505.16098), generalised momentum SGD:
//   y_t     = (1 - Delta(t)) y_{t-1} + gamma1 g_t,   Delta(t) = (1 + t/delta)^-1
//   theta  -= gamma2 g_t + gamma3(t) y_t
// DANA-constant: gamma3 = 0.5 gamma2 / d (d = dimension);
// DANA-decaying: gamma3(t) = 0.5 gamma2 (1 + t)^(-1/(2 alpha)).
// gamma3 == 0 is plain SGD with step gamma2.
struct DanaOptions {
  double gamma1 = 1.0;
  double gamma2 = 0.01;   // the SGD step (learning_rate())
  double gamma3 = -1.0;   // constant schedule: < 0 means 0.5 * gamma2 / d
  double delta = 6.0;     // authors: 4 + 2(alpha + beta) / (2 alpha)
  double alpha = 1.0;     // data power-law exponent (decaying schedule)
  int64_t dimension = 0;  // d; 0 = the parameter count at the first step
  DanaSchedule schedule = DanaSchedule::kConstant;
};
// INVALID_ARGUMENT for gamma2 <= 0, delta <= 0, alpha <= 0, dimension < 0,
// gamma1 < 0.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateDana(const DanaOptions& options);

}  // namespace tandem::ml

#endif  // TANDEM_ML_OPTIM_OPTIMIZER_H_
