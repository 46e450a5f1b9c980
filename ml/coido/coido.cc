#include "ml/coido/coido.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/coido/kmeans.h"
#include "ml/model/basic_layers.h"
#include "ml/model/model.h"
#include "ml/optim/optimizer.h"

namespace tandem::ml {
namespace {

// dense(in->h) LN GELU dense(h->h/2) GELU dense(->1): a small version of the
// reference's LayerNorm+GELU MLP tower.
absl::StatusOr<std::unique_ptr<Model>> MakeScorer(int64_t in, int64_t hidden) {
  std::vector<std::unique_ptr<Layer>> l;
  const int64_t h2 = std::max<int64_t>(2, hidden / 2);
  TANDEM_ASSIGN_OR_RETURN(auto fc1, DenseLayer::Create("fc1", in, hidden));
  l.push_back(std::move(fc1));
  TANDEM_ASSIGN_OR_RETURN(auto ln1, LayerNormLayer::Create("ln1", hidden));
  l.push_back(std::move(ln1));
  TANDEM_ASSIGN_OR_RETURN(auto g1, ActivationLayer::Create("gelu1", Activation::kGelu, hidden));
  l.push_back(std::move(g1));
  TANDEM_ASSIGN_OR_RETURN(auto fc2, DenseLayer::Create("fc2", hidden, h2));
  l.push_back(std::move(fc2));
  TANDEM_ASSIGN_OR_RETURN(auto g2, ActivationLayer::Create("gelu2", Activation::kGelu, h2));
  l.push_back(std::move(g2));
  TANDEM_ASSIGN_OR_RETURN(auto out, DenseLayer::Create("score", h2, 1));
  l.push_back(std::move(out));
  return Model::Create(std::move(l));
}

// Objective of one batch and its gradient w.r.t. the raw scores.
struct BatchObjective {
  double l_importance = 0, l_diversity = 0;
  std::vector<double> d_importance, d_diversity;  // dL_I/draw, dL_D/draw
};

BatchObjective EvaluateBatch(absl::Span<const float> raw, absl::Span<const float> loss,
                             absl::Span<const int> cluster) {
  const size_t b = raw.size();
  BatchObjective o;
  const float mx = *std::max_element(raw.begin(), raw.end());
  std::vector<double> w(b);
  double z = 0;
  for (size_t i = 0; i < b; ++i) z += (w[i] = std::exp(double{raw[i]} - mx));
  for (double& x : w) x /= z;
  // Importance: L_I = sum w_i l_i; dL/dw_i = l_i.
  std::vector<double> g_imp(b), g_div(b, 0.0);
  for (size_t i = 0; i < b; ++i) {
    o.l_importance += w[i] * loss[i];
    g_imp[i] = loss[i];
  }
  // Diversity: std of per-cluster mean weights.
  std::map<int, std::pair<double, int>> per;  // cluster -> (sum w, count)
  for (size_t i = 0; i < b; ++i) {
    per[cluster[i]].first += w[i];
    ++per[cluster[i]].second;
  }
  const size_t c = per.size();
  if (c < 2) {
    o.l_diversity = 1e-6;
  } else {
    double mean = 0;
    for (auto& [k, v] : per) mean += v.first / v.second;
    mean /= static_cast<double>(c);
    double var = 0;
    for (auto& [k, v] : per) var += std::pow(v.first / v.second - mean, 2);
    var /= static_cast<double>(c - 1);
    o.l_diversity = std::sqrt(var + 1e-8);
    // dL_D/dm_k = (m_k - mean) / ((c-1) L_D); dm_k/dw_i = 1/|k|.
    for (size_t i = 0; i < b; ++i) {
      const auto& v = per[cluster[i]];
      g_div[i] = (v.first / v.second - mean) / (static_cast<double>(c - 1) * o.l_diversity) / v.second;
    }
  }
  // Through the softmax: dL/draw_j = w_j (g_j - sum_i w_i g_i).
  auto through_softmax = [&](const std::vector<double>& g) {
    double dot = 0;
    for (size_t i = 0; i < b; ++i) dot += w[i] * g[i];
    std::vector<double> d(b);
    for (size_t j = 0; j < b; ++j) d[j] = w[j] * (g[j] - dot);
    return d;
  };
  o.d_importance = through_softmax(g_imp);
  o.d_diversity = through_softmax(g_div);
  return o;
}

}  // namespace

absl::StatusOr<CoidoResult> CoidoSelect(const Matrix& emb, absl::Span<const float> losses,
                                        absl::Span<const int> labels, int num_classes,
                                        const CoidoOptions& o) {
  const int64_t n = emb.rows();
  if (static_cast<int64_t>(losses.size()) != n || static_cast<int64_t>(labels.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("coido: ", n, " embeddings, ", losses.size(),
                                                   " losses, ", labels.size(), " labels"));
  }
  if (!(o.train_fraction > 0 && o.train_fraction <= 1) ||
      !(o.select_fraction > 0 && o.select_fraction <= 1) || o.num_clusters < 1 ||
      o.num_clusters > n || o.hidden < 2 || o.epochs < 1 || o.batch_size < 2 ||
      !(o.learning_rate > 0) || num_classes < 1) {
    return absl::InvalidArgumentError("coido: invalid options (fractions in (0,1], 1 <= clusters <= n, ...)");
  }
  if (!emb.allFinite()) return absl::InvalidArgumentError("coido: non-finite embedding");
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!std::isfinite(losses[i]) || labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("coido: bad loss or label at sample ", i));
    }
  }
  const int64_t n_train = static_cast<int64_t>(std::llround(o.train_fraction * n));
  if (n_train < 2) return absl::InvalidArgumentError("coido: fewer than 2 scorer training samples");

  CoidoResult r;
  // [I] Features: L2-normalised embedding ++ z-scored loss.
  Matrix feat(n, emb.cols() + 1);
  double lmean = 0, lvar = 0;
  for (float l : losses) lmean += l;
  lmean /= static_cast<double>(n);
  for (float l : losses) lvar += (l - lmean) * (l - lmean);
  const double lsd = std::sqrt(lvar / static_cast<double>(n)) + 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    const float norm = emb.row(i).norm();
    feat.row(i).head(emb.cols()) = emb.row(i) / std::max(norm, 1e-6f);
    feat(i, emb.cols()) = static_cast<float>((losses[i] - lmean) / lsd);
  }
  TANDEM_ASSIGN_OR_RETURN(KMeansResult km,
                          KMeans(feat.leftCols(emb.cols()), o.num_clusters, 25, o.seed));
  r.clusters = km.assignment;

  std::mt19937_64 gen(o.seed ^ 0xC01D0ull);
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), gen);
  r.scorer_train_indices.assign(all.begin(), all.begin() + n_train);

  TANDEM_ASSIGN_OR_RETURN(auto scorer, MakeScorer(feat.cols(), o.hidden));
  scorer->Init(gen);
  AdamOptions ao;
  ao.learning_rate = o.learning_rate;
  TANDEM_ASSIGN_OR_RETURN(auto opt, CreateAdam(ao));
  TANDEM_ASSIGN_OR_RETURN(auto sigma_opt, CreateAdam(ao));
  std::vector<float> log_sigma = {0.0f, 0.0f};  // s_1 (importance), s_2 (diversity)

  std::vector<int64_t> order = r.scorer_train_indices;
  std::vector<float> grad(static_cast<size_t>(scorer->num_params()));
  Activations acts;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), gen);
    double epoch_total = 0;
    for (size_t b = 0; b + 1 < order.size(); b += static_cast<size_t>(o.batch_size)) {
      const size_t e = std::min(order.size(), b + static_cast<size_t>(o.batch_size));
      const size_t bs = e - b;
      Matrix x(static_cast<Eigen::Index>(bs), feat.cols());
      std::vector<float> bl(bs);
      std::vector<int> bc(bs);
      for (size_t i = 0; i < bs; ++i) {
        x.row(static_cast<Eigen::Index>(i)) = feat.row(order[b + i]);
        bl[i] = losses[order[b + i]];
        bc[i] = r.clusters[order[b + i]];
      }
      TANDEM_RETURN_IF_ERROR(scorer->Forward(x, &acts));
      std::vector<float> raw(acts.logits().data(), acts.logits().data() + bs);
      BatchObjective obj = EvaluateBatch(raw, bl, bc);
      // Kendall weighting: L = L_I e^{-2 s1} / 2 + L_D e^{-2 s2} / 2 + s1 + s2.
      const double c1 = 0.5 * std::exp(-2.0 * log_sigma[0]);
      const double c2 = o.use_diversity ? 0.5 * std::exp(-2.0 * log_sigma[1]) : 0.0;
      epoch_total += c1 * obj.l_importance + c2 * obj.l_diversity + log_sigma[0] +
                     (o.use_diversity ? log_sigma[1] : 0.0);
      Matrix graw(static_cast<Eigen::Index>(bs), 1);
      for (size_t i = 0; i < bs; ++i) {
        graw(static_cast<Eigen::Index>(i), 0) =
            static_cast<float>(c1 * obj.d_importance[i] + c2 * obj.d_diversity[i]);
      }
      std::fill(grad.begin(), grad.end(), 0.0f);
      TANDEM_RETURN_IF_ERROR(scorer->Backward(acts, graw, absl::MakeSpan(grad)));
      TANDEM_RETURN_IF_ERROR(opt->Step(scorer->mutable_params(), grad));
      // dL/ds = -2 c L + 1.
      std::vector<float> gs = {static_cast<float>(-2.0 * c1 * obj.l_importance + 1.0),
                               o.use_diversity ? static_cast<float>(-2.0 * c2 * obj.l_diversity + 1.0)
                                               : 0.0f};
      TANDEM_RETURN_IF_ERROR(sigma_opt->Step(absl::MakeSpan(log_sigma), gs));
    }
    r.epoch_loss.push_back(epoch_total);
  }
  r.log_sigma_importance = log_sigma[0];
  r.log_sigma_diversity = log_sigma[1];

  // Score every sample (stage 2: scorer only).
  TANDEM_ASSIGN_OR_RETURN(Matrix raw_all, scorer->Predict(feat));
  r.difficulty.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r.difficulty[i] = -raw_all(i, 0);
  const bool hardest = o.direction == CoidoOptions::Direction::kHardest;
  auto better = [&](int64_t a, int64_t b) {
    const float ka = hardest ? r.difficulty[a] : -r.difficulty[a];
    const float kb = hardest ? r.difficulty[b] : -r.difficulty[b];
    return ka != kb ? ka > kb : a < b;
  };
  const int64_t keep = std::max<int64_t>(1, std::llround(o.select_fraction * n));
  std::vector<std::vector<int64_t>> groups(o.per_class_quota ? num_classes : 1);
  for (int64_t i = 0; i < n; ++i) groups[o.per_class_quota ? labels[i] : 0].push_back(i);
  // Quotas proportional to group size; largest remainders get the leftovers.
  std::vector<int64_t> quota(groups.size());
  std::vector<std::pair<double, size_t>> rem;
  int64_t assigned = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const double exact = static_cast<double>(keep) * groups[g].size() / static_cast<double>(n);
    quota[g] = static_cast<int64_t>(std::floor(exact));
    assigned += quota[g];
    rem.push_back({exact - quota[g], g});
  }
  std::sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; assigned < keep && i < rem.size(); ++i, ++assigned) ++quota[rem[i].second];
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& idx = groups[g];
    const int64_t q = std::min<int64_t>(quota[g], static_cast<int64_t>(idx.size()));
    std::partial_sort(idx.begin(), idx.begin() + q, idx.end(), better);
    r.selected.insert(r.selected.end(), idx.begin(), idx.begin() + q);
  }
  std::sort(r.selected.begin(), r.selected.end());
  return r;
}

}  // namespace tandem::ml
