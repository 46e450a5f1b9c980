// CoIDO data selection (Yan et al., NeurIPS 2025, arXiv 2510.17847), adapted
// to a federated client's local data. Markers follow
// shared/specs/fl_research.md section 2: [F] = as in the paper/reference
// code, [I] = our adaptation.
//
//   1. [F] A lightweight scorer (MLP with LayerNorm + GELU) is trained on a
//      random 20% sample of the data; every other sample is only scored.
//   2. [I] Scorer input per sample: the task model's own penultimate
//      embedding (L2-normalised) concatenated with its z-scored per-sample
//      loss. (The paper uses CLIP embeddings + three quality scores.)
//   3. [F] Per batch, weights w = softmax(raw scores over the batch).
//      Importance loss L_I = sum_i w_i * loss_i ([I] the task model is held
//      fixed, so its per-sample cross-entropy replaces the jointly trained
//      MLLM's token NLL). Diversity loss L_D = std over the batch's clusters
//      of the mean weight per cluster (sqrt(var + 1e-8), unbiased variance as
//      torch.std; 1e-6 when < 2 clusters are present).
//   4. [F] Clusters: [I] one global k-means over the local embeddings (the
//      reference clustered 5000-sample chunks independently).
//   5. [F] Homoscedastic uncertainty weighting (Kendall, Gal & Cipolla, CVPR
//      2018), learnable log-variances s_i = log sigma_i, initialised to 0:
//        L = L_I / (2 sigma_1^2) + L_D / (2 sigma_2^2) + log sigma_1 + log sigma_2.
//      (The reference HEAD uses L_I / sigma_1^2 for the first term.)
//   6. [F] Selection: difficulty = -raw score; keep the top `select_fraction`
//      with per-group quotas proportional to group size (the reference's
//      per-source quotas; [I] groups = class labels here).
//      [I] Direction::kEasiest keeps the highest-weight samples instead,
//      which filters label noise (see coido_test.cc).
#ifndef TANDEM_ML_COIDO_COIDO_H_
#define TANDEM_ML_COIDO_COIDO_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/model/layer.h"

namespace tandem::ml {

struct CoidoOptions {
  double train_fraction = 0.2;   // [F] scorer trained on a random 20%
  double select_fraction = 0.2;  // [F] keep 20%
  int num_clusters = 10;         // [F] reference: k = 20
  int hidden = 64;               // scorer width (two hidden layers: hidden, hidden/2)
  int epochs = 10;               // passes over the 20% sample
  int64_t batch_size = 64;
  double learning_rate = 1e-3;   // Adam, scorer and log-variances
  bool use_diversity = true;     // false: importance term only (ablation)
  bool per_class_quota = true;
  enum class Direction { kHardest, kEasiest };
  Direction direction = Direction::kHardest;  // [F] paper: hardest (difficulty = -weight)
  uint64_t seed = 1;
};

struct CoidoResult {
  std::vector<int64_t> selected;  // sorted indices of the kept samples
  std::vector<float> difficulty;  // -raw score, every sample
  std::vector<int> clusters;      // k-means cluster of every sample
  std::vector<int64_t> scorer_train_indices;  // the random training sample
  double log_sigma_importance = 0;  // learned s_1
  double log_sigma_diversity = 0;   // learned s_2
  std::vector<double> epoch_loss;   // total objective per epoch
};

// Runs CoIDO on one client's data. `embeddings` n x e, `losses` and
// `labels` of size n, labels in [0, num_classes). Returns INVALID_ARGUMENT
// for mismatched sizes, non-finite inputs, fractions outside (0, 1],
// num_clusters outside [1, n], or too little data (fewer than 2 training
// samples).
absl::StatusOr<CoidoResult> CoidoSelect(const Matrix& embeddings, absl::Span<const float> losses,
                                        absl::Span<const int> labels, int num_classes,
                                        const CoidoOptions& options);

}  // namespace tandem::ml

#endif  // TANDEM_ML_COIDO_COIDO_H_
