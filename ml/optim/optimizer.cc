#include "ml/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {

// Sets flush-to-zero and denormals-are-zero on this thread for its lifetime
// (restores the previous MXCSR). No-op off x86.
class ScopedFlushDenormals {
 public:
#if defined(__SSE__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

}  // namespace

absl::Status Optimizer::Step(absl::Span<float> params, absl::Span<const float> grads) {
  return Step(params, grads, [](size_t n, RangeBody body) { body(0, n); });
}

absl::Status Optimizer::Step(absl::Span<float> params, absl::Span<const float> grads,
                             RangeRunner runner) {
  if (params.size() != grads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": ", params.size(), " parameters but ", grads.size(), " gradients"));
  }
  if (steps_ == 0) {
    size_ = params.size();
    ResizeState(size_);
  } else if (params.size() != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": parameter count changed from ", size_, " to ", params.size()));
  }
  const int64_t t = steps_;
  runner(params.size(), [&](size_t begin, size_t end) {
    ScopedFlushDenormals ftz;
    Apply(t, begin, end, params, grads);
  });
  ++steps_;
  return absl::OkStatus();
}

void Optimizer::Reset() {
  steps_ = 0;
  size_ = 0;
  ResizeState(0);
}

Optimizer::State Optimizer::SaveState() {
  State state;
  state.steps = steps_;
  state.size = size_;
  for (std::vector<float>* b : Buffers()) state.buffers.push_back(*b);
  return state;
}

absl::Status Optimizer::RestoreState(const State& state) {
  if (state.steps < 0 || (state.steps == 0) != (state.size == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": inconsistent step count and size"));
  }
  std::vector<std::vector<float>*> buffers = Buffers();
  if (state.buffers.size() != buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": state has ", state.buffers.size(),
                                                   " buffers, expected ", buffers.size()));
  }
  // Sizes the buffers (and derived constants such as DANA's d) as a first
  // step would, then checks each snapshot buffer against them.
  std::vector<std::vector<float>> saved;
  for (std::vector<float>* b : buffers) saved.push_back(*b);
  ResizeState(state.size);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (state.buffers[i].size() != buffers[i]->size()) {
      ResizeState(size_);  // roll back: nothing changes on error
      for (size_t j = 0; j < buffers.size(); ++j) *buffers[j] = saved[j];
      return absl::InvalidArgumentError(absl::StrCat(name(), ": buffer ", i, " has ",
                                                     state.buffers[i].size(), " values, expected ",
                                                     buffers[i]->size()));
    }
  }
  for (size_t i = 0; i < buffers.size(); ++i) *buffers[i] = state.buffers[i];
  steps_ = state.steps;
  size_ = state.size;
  return absl::OkStatus();
}

namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const SgdOptions& o) : Optimizer(o.learning_rate), o_(o) {}
  std::string name() const override { return "sgd"; }

 private:
  void ResizeState(size_t n) override { v_.assign(o_.momentum > 0 ? n : 0, 0.0f); }
  std::vector<std::vector<float>*> Buffers() override { return {&v_}; }
  void Apply(int64_t t, size_t begin, size_t end, absl::Span<float> p,
             absl::Span<const float> g) override {
    const float lr = static_cast<float>(learning_rate());
    const float mu = static_cast<float>(o_.momentum);
    const float wd = static_cast<float>(o_.weight_decay);
    // One branch-free loop per case on __restrict pointers (absl::Span's
    // checked operator[] and the per-element option tests kept this scalar:
    // 6.7 % of a private tandem-sim run's samples). Element-wise only, and
    // -ffp-contract=off (ml/CMakeLists.txt): the same floats as the scalar
    // loop, bit for bit.
    float* __restrict x = p.data();
    const float* __restrict gr = g.data();
    if (mu <= 0.0f) {
      if (wd == 0.0f) {
        for (size_t i = begin; i < end; ++i) x[i] -= lr * gr[i];
      } else {
        for (size_t i = begin; i < end; ++i) x[i] -= lr * (gr[i] + wd * x[i]);
      }
      return;
    }
    float* __restrict v = v_.data();
    const bool first = t == 0;
    const bool nesterov = o_.nesterov;
    for (size_t i = begin; i < end; ++i) {
      const float gi = wd != 0.0f ? gr[i] + wd * x[i] : gr[i];
      const float vi = first ? gi : mu * v[i] + gi;
      v[i] = vi;
      x[i] -= lr * (nesterov ? gi + mu * vi : vi);
    }
  }
  SgdOptions o_;
  std::vector<float> v_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(const AdamOptions& o) : Optimizer(o.learning_rate), o_(o) {}
  std::string name() const override { return "adam"; }

 private:
  void ResizeState(size_t n) override {
    m_.assign(n, 0.0f);
    v_.assign(n, 0.0f);
  }
  std::vector<std::vector<float>*> Buffers() override { return {&m_, &v_}; }
  void Apply(int64_t t, size_t begin, size_t end, absl::Span<float> p,
             absl::Span<const float> g) override {
    const double step = static_cast<double>(t + 1);
    const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(o_.beta1, step)));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(o_.beta2, step)));
    const float lr = static_cast<float>(learning_rate());
    const float eps = static_cast<float>(o_.epsilon);
    // One pass; -fno-math-errno (ml/CMakeLists.txt) lets the compiler
    // vectorise the sqrt, -ffp-contract=off keeps the vector body and the
    // scalar remainder rounding alike.
    float* __restrict m = m_.data();
    float* __restrict v = v_.data();
    float* __restrict x = p.data();
    const float* __restrict gi = g.data();
    for (size_t i = begin; i < end; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * gi[i];
      v[i] = b2 * v[i] + (1.0f - b2) * gi[i] * gi[i];
      x[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
  AdamOptions o_;
  std::vector<float> m_, v_;
};

class Dana : public Optimizer {
 public:
  explicit Dana(const DanaOptions& o) : Optimizer(o.gamma2), o_(o) {}
  std::string name() const override { return "dana"; }

 private:
  void ResizeState(size_t n) override {
    y_.assign(n, 0.0f);
    d_ = o_.dimension > 0 ? static_cast<double>(o_.dimension) : static_cast<double>(n);
  }
  std::vector<std::vector<float>*> Buffers() override { return {&y_}; }
  void Apply(int64_t t, size_t begin, size_t end, absl::Span<float> p,
             absl::Span<const float> g) override {
    const double gamma2 = learning_rate();
    double gamma3;
    if (o_.schedule == DanaSchedule::kConstant) {
      gamma3 = o_.gamma3 >= 0.0 ? o_.gamma3 : 0.5 * gamma2 / std::max(d_, 1.0);
    } else {
      gamma3 = 0.5 * gamma2 * std::pow(1.0 + static_cast<double>(t), -1.0 / (2.0 * o_.alpha));
    }
    const float keep = static_cast<float>(1.0 - 1.0 / (1.0 + static_cast<double>(t) / o_.delta));
    const float g1 = static_cast<float>(o_.gamma1);
    const float g2 = static_cast<float>(gamma2), g3 = static_cast<float>(gamma3);
    float* __restrict y = y_.data();
    float* __restrict x = p.data();
    const float* __restrict gr = g.data();
    for (size_t i = begin; i < end; ++i) {
      y[i] = keep * y[i] + g1 * gr[i];
      // Written as (p - g2 g) - g3 y so that gamma3 = 0 is bit-identical to SGD.
      x[i] = (x[i] - g2 * gr[i]) - g3 * y[i];
    }
  }
  DanaOptions o_;
  double d_ = 1.0;
  std::vector<float> y_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateSgd(const SgdOptions& o) {
  if (!(o.learning_rate > 0) || !(o.momentum >= 0 && o.momentum < 1) || !(o.weight_decay >= 0) ||
      (o.nesterov && o.momentum == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sgd: need lr > 0, momentum in [0,1), weight_decay >= 0, nesterov only with "
                     "momentum; got lr=",
                     o.learning_rate, " momentum=", o.momentum, " wd=", o.weight_decay));
  }
  return std::unique_ptr<Optimizer>(new Sgd(o));
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdam(const AdamOptions& o) {
  if (!(o.learning_rate > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) ||
      !(o.epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam: need lr > 0, betas in [0,1), eps > 0; got lr=", o.learning_rate,
                     " b1=", o.beta1, " b2=", o.beta2, " eps=", o.epsilon));
  }
  return std::unique_ptr<Optimizer>(new Adam(o));
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateDana(const DanaOptions& o) {
  if (!(o.gamma2 > 0) || !(o.delta > 0) || !(o.alpha > 0) || o.dimension < 0 || !(o.gamma1 >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dana: need gamma2 > 0, delta > 0, alpha > 0, gamma1 >= 0, dimension >= 0; got gamma2=",
        o.gamma2, " delta=", o.delta, " alpha=", o.alpha));
  }
  return std::unique_ptr<Optimizer>(new Dana(o));
}

}  // namespace tandem::ml
