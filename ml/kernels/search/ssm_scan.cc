#include "ml/kernels/search/ssm_scan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tbb/parallel_for.h"

#ifdef TANDEM_HAVE_CUDA
#include "ml/kernels/search/cuda/search_cuda.h"
#endif

namespace tandem::ml::kernels::search {
namespace {

template <typename T>
T Softplus(T v) {
  return v > T(20) ? v : std::log1p(std::exp(v));
}

absl::Status CheckSize(size_t got, int64_t want, const char* what) {
  if (static_cast<int64_t>(got) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("selective scan: ", what, " has ", got, " elements, expected ", want));
  }
  return absl::OkStatus();
}

// Naive recurrence for one (batch, head). h is the P x N state, in/out.
template <typename T>
void NaiveHead(const ScanDims& s, const ScanArgs<T>& in, int64_t bi, int64_t hi, T* h, T* y) {
  const int64_t H = s.heads, P = s.head_dim, N = s.state_dim;
  const T a = in.a[hi], dskip = in.d[hi], bias = in.dt_bias[hi];
  for (int64_t t = 0; t < s.length; ++t) {
    const int64_t row = bi * s.length + t;
    const T delta = Softplus(in.dt[row * H + hi] + bias);
    const T decay = std::exp(delta * a);
    const T* bt = &in.b[row * N];
    const T* ct = &in.c[row * N];
    const T* xt = &in.x[(row * H + hi) * P];
    T* yt = y + (row * H + hi) * P;
    for (int64_t p = 0; p < P; ++p) {
      const T dx = delta * xt[p];
      T acc = 0;
      T* hp = h + p * N;
      for (int64_t n = 0; n < N; ++n) {
        hp[n] = decay * hp[n] + dx * bt[n];
        acc += hp[n] * ct[n];
      }
      yt[p] = acc + dskip * xt[p];
    }
  }
}

// Chunked SSD. Pass 1 (parallel over batch, head, chunk): intra-chunk output
// and the chunk's own end state from a zero start. Pass 2 (parallel over
// batch, head; sequential over chunks): states entering each chunk. Pass 3
// (parallel again): the carried-state contribution diag(exp(a_t)) C H^T.
template <typename T>
void Chunked(const ScanDims& s, const ScanArgs<T>& in, int64_t chunk, T* y, T* h_out) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using Strided = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using MutStrided = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  const int64_t L = s.length, H = s.heads, P = s.head_dim, N = s.state_dim;
  const int64_t nc = (L + chunk - 1) / chunk;
  const int64_t pn = P * N;
  // Per (batch, head, chunk): own end state S_c and log decay a_end.
  std::vector<T> own(static_cast<size_t>(s.batch * H * nc * pn));
  std::vector<T> log_end(static_cast<size_t>(s.batch * H * nc));
  // cumulative log decay a_t within its chunk, (batch, head, L)
  std::vector<T> cum(static_cast<size_t>(s.batch * H * L));

  auto chunk_task = [&](int64_t task, bool carry_pass) {
    const int64_t ci = task % nc, hi = (task / nc) % H, bi = task / (nc * H);
    const int64_t t0 = ci * chunk, q = std::min(chunk, L - t0);
    const int64_t row0 = bi * L + t0;
    const Strided x(&in.x[(row0 * H + hi) * P], q, P, Eigen::OuterStride<>(H * P));
    const Strided bm(&in.b[row0 * N], q, N, Eigen::OuterStride<>(N));
    const Strided cm(&in.c[row0 * N], q, N, Eigen::OuterStride<>(N));
    MutStrided ym(y + (row0 * H + hi) * P, q, P, Eigen::OuterStride<>(H * P));
    T* a_cum = &cum[(bi * H + hi) * L + t0];
    if (carry_pass) {
      if (ci == 0 && in.h0.empty()) return;
      const int64_t idx = (bi * H + hi) * nc + ci;
      const Eigen::Map<const Mat> hprev(&own[idx * pn], P, N);  // holds H_{c-1} after pass 2
      Vec e(q);
      for (int64_t t = 0; t < q; ++t) e[t] = std::exp(a_cum[t]);
      ym.noalias() += e.asDiagonal() * (cm * hprev.transpose());
      return;
    }
    Vec delta(q);
    T acc = 0;
    for (int64_t t = 0; t < q; ++t) {
      delta[t] = Softplus(in.dt[(row0 + t) * H + hi] + in.dt_bias[hi]);
      acc += delta[t] * in.a[hi];
      a_cum[t] = acc;
    }
    Mat w = cm * bm.transpose();  // G[t][s] = C_t . B_s
    for (int64_t t = 0; t < q; ++t) {
      for (int64_t u = 0; u < q; ++u) {
        w(t, u) = u <= t ? w(t, u) * std::exp(a_cum[t] - a_cum[u]) * delta[u] : T(0);
      }
    }
    ym.noalias() = w * x + in.d[hi] * x;
    Vec wend(q);
    for (int64_t u = 0; u < q; ++u) wend[u] = std::exp(acc - a_cum[u]) * delta[u];
    const int64_t idx = (bi * H + hi) * nc + ci;
    Eigen::Map<Mat> sc(&own[idx * pn], P, N);
    sc.noalias() = x.transpose() * wend.asDiagonal() * bm;
    log_end[idx] = acc;
  };

  const int64_t tasks = s.batch * H * nc;
  tbb::parallel_for(int64_t{0}, tasks, [&](int64_t i) { chunk_task(i, false); });
  // Pass 2: replace each own[c] by the state entering chunk c, and write
  // the final state. H_in(0) = h0; H_in(c+1) = exp(a_end_c) H_in(c) + S_c.
  tbb::parallel_for(int64_t{0}, s.batch * H, [&](int64_t bh) {
    std::vector<T> state(static_cast<size_t>(pn), T(0));
    if (!in.h0.empty()) std::copy_n(&in.h0[bh * pn], pn, state.begin());
    for (int64_t ci = 0; ci < nc; ++ci) {
      T* sc = &own[(bh * nc + ci) * pn];
      const T decay = std::exp(log_end[bh * nc + ci]);
      for (int64_t k = 0; k < pn; ++k) {
        const T next = decay * state[k] + sc[k];
        sc[k] = state[k];
        state[k] = next;
      }
    }
    std::copy(state.begin(), state.end(), h_out + bh * pn);
  });
  tbb::parallel_for(int64_t{0}, tasks, [&](int64_t i) { chunk_task(i, true); });
}

absl::Status CheckFinite(const Tensor& t, const char* what) {
  for (float v : t.data()) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat("selective scan: ", what, " is not finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectShape(const Tensor& t, std::vector<int64_t> shape, const char* what) {
  if (t.shape() != shape) {
    Tensor want = *Tensor::Zeros(shape);
    return absl::InvalidArgumentError(absl::StrCat("selective scan: ", what, " has shape ",
                                                   t.ShapeString(), ", expected ",
                                                   want.ShapeString()));
  }
  return CheckFinite(t, what);
}

}  // namespace

template <typename T>
absl::Status SelectiveScanRaw(const ScanDims& s, const ScanArgs<T>& in, int64_t chunk,
                              absl::Span<T> y, absl::Span<T> h_out) {
  for (int64_t v : {s.batch, s.length, s.heads, s.head_dim, s.state_dim}) {
    if (v < 1 || v > kMaxScanDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("selective scan: every dimension must be in [1, ", kMaxScanDim,
                       "], got B=", s.batch, " L=", s.length, " H=", s.heads,
                       " P=", s.head_dim, " N=", s.state_dim));
    }
  }
  if (chunk < 0 || chunk > kMaxScanChunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("selective scan: chunk must be in [0, ", kMaxScanChunk, "], got ", chunk));
  }
  const int64_t rows = s.batch * s.length;
  TANDEM_RETURN_IF_ERROR(CheckSize(in.x.size(), rows * s.heads * s.head_dim, "x"));
  TANDEM_RETURN_IF_ERROR(CheckSize(in.dt.size(), rows * s.heads, "dt"));
  TANDEM_RETURN_IF_ERROR(CheckSize(in.b.size(), rows * s.state_dim, "B"));
  TANDEM_RETURN_IF_ERROR(CheckSize(in.c.size(), rows * s.state_dim, "C"));
  for (const auto& [span, what] : {std::pair{in.a, "A"}, {in.d, "D"}, {in.dt_bias, "dt_bias"}}) {
    TANDEM_RETURN_IF_ERROR(CheckSize(span.size(), s.heads, what));
  }
  const int64_t state = s.batch * s.heads * s.head_dim * s.state_dim;
  if (!in.h0.empty()) TANDEM_RETURN_IF_ERROR(CheckSize(in.h0.size(), state, "initial state"));
  TANDEM_RETURN_IF_ERROR(CheckSize(y.size(), rows * s.heads * s.head_dim, "y"));
  TANDEM_RETURN_IF_ERROR(CheckSize(h_out.size(), state, "final state"));
  for (T a : in.a) {
    if (!(a < T(0))) {
      return absl::InvalidArgumentError(
          absl::StrCat("selective scan: A must be negative (A = -exp(a_log)), got ", a));
    }
  }
  if (chunk == 0) {
    const int64_t pn = s.head_dim * s.state_dim;
    tbb::parallel_for(int64_t{0}, s.batch * s.heads, [&](int64_t bh) {
      T* h = h_out.data() + bh * pn;
      if (in.h0.empty()) {
        std::fill_n(h, pn, T(0));
      } else {
        std::copy_n(&in.h0[bh * pn], pn, h);
      }
      NaiveHead(s, in, bh / s.heads, bh % s.heads, h, y.data());
    });
  } else {
    Chunked(s, in, chunk, y.data(), h_out.data());
  }
  return absl::OkStatus();
}

template absl::Status SelectiveScanRaw<float>(const ScanDims&, const ScanArgs<float>&, int64_t,
                                              absl::Span<float>, absl::Span<float>);
template absl::Status SelectiveScanRaw<double>(const ScanDims&, const ScanArgs<double>&, int64_t,
                                               absl::Span<double>, absl::Span<double>);

absl::StatusOr<ScanOutput> SelectiveScan(const Tensor& x, const Tensor& dt, const Tensor& a,
                                         const Tensor& b, const Tensor& c, const Tensor& d,
                                         const Tensor& dt_bias, const ScanOptions& o) {
  TANDEM_RETURN_IF_ERROR(CheckRank(x, 4, "selective scan x (batch, L, H, P)"));
  TANDEM_RETURN_IF_ERROR(CheckRank(b, 3, "selective scan B (batch, L, N)"));
  const ScanDims s{x.dim(0), x.dim(1), x.dim(2), x.dim(3), b.dim(2)};
  TANDEM_RETURN_IF_ERROR(CheckFinite(x, "x"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(dt, {s.batch, s.length, s.heads}, "dt"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(b, {s.batch, s.length, s.state_dim}, "B"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(c, {s.batch, s.length, s.state_dim}, "C"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(a, {s.heads}, "A"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(d, {s.heads}, "D"));
  TANDEM_RETURN_IF_ERROR(ExpectShape(dt_bias, {s.heads}, "dt_bias"));
  absl::Span<const float> h0;
  if (o.initial_state != nullptr) {
    TANDEM_RETURN_IF_ERROR(ExpectShape(*o.initial_state,
                                       {s.batch, s.heads, s.head_dim, s.state_dim},
                                       "initial state"));
    h0 = o.initial_state->data();
  }
  ScanOutput out;
  TANDEM_ASSIGN_OR_RETURN(out.y, Tensor::Zeros({s.batch, s.length, s.heads, s.head_dim}));
  TANDEM_ASSIGN_OR_RETURN(out.state, Tensor::Zeros({s.batch, s.heads, s.head_dim, s.state_dim}));
  const ScanArgs<float> args{x.data(), dt.data(), a.data(), b.data(), c.data(), d.data(),
                             dt_bias.data(), h0};
  if (o.backend == Backend::kCuda) {
#ifdef TANDEM_HAVE_CUDA
    if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device present");
    // Validate sizes and A < 0 on the CPU path's rules before launching.
    for (float av : a.data()) {
      if (!(av < 0)) return absl::InvalidArgumentError("selective scan: A must be negative");
    }
    if (s.state_dim > cuda::kMaxScanStateDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CUDA selective scan supports N <= ", cuda::kMaxScanStateDim, ", got ", s.state_dim));
    }
    const int rc = cuda::SelectiveScan(x.ptr(), dt.ptr(), a.ptr(), b.ptr(), c.ptr(), d.ptr(),
                                       dt_bias.ptr(), h0.empty() ? nullptr : h0.data(), s.batch,
                                       s.length, s.heads, s.head_dim, s.state_dim,
                                       out.y.mutable_ptr(), out.state.mutable_ptr());
    if (rc != 0) return absl::InternalError(absl::StrCat("CUDA selective scan failed: ", rc));
    return out;
#else
    return absl::UnavailableError("built without CUDA");
#endif
  }
  TANDEM_RETURN_IF_ERROR(
      SelectiveScanRaw<float>(s, args, o.chunk, out.y.mutable_data(), out.state.mutable_data()));
  return out;
}

double SelectiveScanFlops(const ScanDims& s) {
  return 6.0 * s.batch * s.length * s.heads * s.head_dim * s.state_dim;
}

double SelectiveScanBytes(const ScanDims& s) {
  const double rows = static_cast<double>(s.batch) * s.length;
  return 4.0 * (2 * rows * s.heads * s.head_dim + rows * s.heads + 2 * rows * s.state_dim +
                static_cast<double>(s.batch) * s.heads * s.head_dim * s.state_dim);
}

}  // namespace tandem::ml::kernels::search
