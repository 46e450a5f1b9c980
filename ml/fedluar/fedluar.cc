#include "ml/fedluar/fedluar.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform double in [0, 1) from the top 53 bits (portable, unlike
// std::uniform_real_distribution whose algorithm is unspecified).
double Uniform01(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

absl::Status CheckSlices(const std::vector<TensorSlice>& tensors, size_t total) {
  int64_t end = 0;
  for (const TensorSlice& t : tensors) {
    if (t.offset < end || t.size < 0 || t.offset + t.size > static_cast<int64_t>(total)) {
      return absl::InvalidArgumentError(absl::StrCat("fedluar: tensor '", t.name,
                                                     "' overlaps or lies outside the vector of ",
                                                     total));
    }
    end = t.offset + t.size;
  }
  return absl::OkStatus();
}

double Norm(absl::Span<const float> v) {
  double s = 0;
  for (float x : v) s += double{x} * x;
  return std::sqrt(s);
}

}  // namespace

absl::StatusOr<std::vector<double>> LayerScores(const std::vector<TensorSlice>& tensors,
                                                absl::Span<const float> weights,
                                                absl::Span<const float> mean_update) {
  if (weights.size() != mean_update.size()) {
    return absl::InvalidArgumentError(absl::StrCat("fedluar: ", weights.size(), " weights but ",
                                                   mean_update.size(), " update values"));
  }
  TANDEM_RETURN_IF_ERROR(CheckSlices(tensors, weights.size()));
  std::vector<double> scores(tensors.size(), -1.0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].recyclable) continue;
    const size_t off = static_cast<size_t>(tensors[i].offset), n = static_cast<size_t>(tensors[i].size);
    const double du = Norm(mean_update.subspan(off, n)), w = Norm(weights.subspan(off, n));
    if (!std::isfinite(du) || !std::isfinite(w)) {
      return absl::InvalidArgumentError(absl::StrCat("fedluar: tensor '", tensors[i].name,
                                                     "' has non-finite values"));
    }
    scores[i] = du / (w + 1e-6);
  }
  return scores;
}

absl::StatusOr<std::vector<size_t>> DrawRecycledTensors(const std::vector<TensorSlice>& tensors,
                                                        absl::Span<const double> scores,
                                                        int num_recycled, uint64_t seed,
                                                        uint64_t round) {
  if (scores.size() != tensors.size()) {
    return absl::InvalidArgumentError("fedluar: one score per tensor expected");
  }
  std::vector<size_t> candidates;
  std::vector<double> weight;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].recyclable) continue;
    if (!(scores[i] >= 0) || std::isinf(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("fedluar: invalid score ", scores[i],
                                                     " for tensor '", tensors[i].name, "'"));
    }
    candidates.push_back(i);
    weight.push_back(1.0 / std::max(scores[i], 1e-12));
  }
  if (num_recycled < 0 || static_cast<size_t>(num_recycled) > candidates.size()) {
    return absl::InvalidArgumentError(absl::StrCat("fedluar: cannot recycle ", num_recycled,
                                                   " of ", candidates.size(), " tensors"));
  }
  std::mt19937_64 gen(SplitMix64(seed ^ SplitMix64(round)));
  std::vector<size_t> out;
  for (int r = 0; r < num_recycled; ++r) {
    double total = 0;
    for (double w : weight) total += w;
    const double u = Uniform01(gen) * total;
    double cum = 0;
    size_t pick = weight.size();
    for (size_t j = 0; j < weight.size(); ++j) {
      if (weight[j] == 0) continue;
      cum += weight[j];
      pick = j;  // the last positive weight absorbs rounding at the top end
      if (u < cum) break;
    }
    out.push_back(candidates[pick]);
    weight[pick] = 0;
  }
  std::sort(out.begin(), out.end());
  return out;
}

FedLuarState::FedLuarState(std::vector<TensorSlice> tensors, int64_t total, FedLuarOptions o)
    : tensors_(std::move(tensors)),
      total_(total),
      options_(o),
      recycled_mask_(tensors_.size(), false),
      scores_(tensors_.size(), -1.0),
      last_update_(static_cast<size_t>(total), 0.0f) {}

absl::StatusOr<std::unique_ptr<FedLuarState>> FedLuarState::Create(
    std::vector<TensorSlice> tensors, int64_t total_size, const FedLuarOptions& options) {
  if (total_size < 0) return absl::InvalidArgumentError("fedluar: negative model size");
  TANDEM_RETURN_IF_ERROR(CheckSlices(tensors, static_cast<size_t>(total_size)));
  const int64_t recyclable =
      std::count_if(tensors.begin(), tensors.end(), [](const TensorSlice& t) { return t.recyclable; });
  if (options.num_recycled < 0 || (options.num_recycled > 0 && options.num_recycled >= recyclable)) {
    return absl::InvalidArgumentError(absl::StrCat("fedluar: num_recycled ", options.num_recycled,
                                                   " must be in [0, ", recyclable,
                                                   ") recyclable tensors"));
  }
  return std::unique_ptr<FedLuarState>(new FedLuarState(std::move(tensors), total_size, options));
}

void FedLuarState::SetRecycled(std::vector<size_t> recycled) {
  std::fill(recycled_mask_.begin(), recycled_mask_.end(), false);
  for (size_t i : recycled) recycled_mask_[i] = true;
  recycled_ = std::move(recycled);
}

int64_t FedLuarState::packed_size() const {
  int64_t n = total_;
  for (size_t i : recycled_) n -= tensors_[i].size;
  return n;
}

absl::StatusOr<std::vector<float>> PackTensors(const std::vector<TensorSlice>& tensors,
                                               absl::Span<const size_t> recycled,
                                               absl::Span<const float> full) {
  TANDEM_RETURN_IF_ERROR(CheckSlices(tensors, full.size()));
  for (size_t k = 0; k < recycled.size(); ++k) {
    if (recycled[k] >= tensors.size() || (k > 0 && recycled[k] <= recycled[k - 1])) {
      return absl::InvalidArgumentError("fedluar: recycled tensor indices must be sorted, distinct "
                                        "and in range");
    }
  }
  std::vector<float> out;
  out.reserve(full.size());
  int64_t pos = 0;
  for (size_t i : recycled) {
    out.insert(out.end(), full.begin() + pos, full.begin() + tensors[i].offset);
    pos = tensors[i].offset + tensors[i].size;
  }
  out.insert(out.end(), full.begin() + pos, full.end());
  return out;
}

absl::StatusOr<std::vector<float>> FedLuarState::PackUpdate(absl::Span<const float> full) const {
  if (static_cast<int64_t>(full.size()) != total_) {
    return absl::InvalidArgumentError(absl::StrCat("fedluar: update has ", full.size(),
                                                   " values, model has ", total_));
  }
  return PackTensors(tensors_, recycled_, full);
}

absl::StatusOr<std::vector<float>> FedLuarState::UnpackUpdate(absl::Span<const float> packed) const {
  if (static_cast<int64_t>(packed.size()) != packed_size()) {
    return absl::InvalidArgumentError(absl::StrCat("fedluar: packed update has ", packed.size(),
                                                   " values, expected ", packed_size()));
  }
  std::vector<float> out(static_cast<size_t>(total_), 0.0f);
  int64_t pos = 0, src = 0;
  for (size_t i : recycled_) {
    const int64_t n = tensors_[i].offset - pos;
    std::copy(packed.begin() + src, packed.begin() + src + n, out.begin() + pos);
    src += n;
    pos = tensors_[i].offset + tensors_[i].size;
  }
  std::copy(packed.begin() + src, packed.end(), out.begin() + pos);
  return out;
}

absl::StatusOr<std::vector<float>> FedLuarState::FinishRound(absl::Span<const float> weights,
                                                             absl::Span<const float> aggregate) {
  if (static_cast<int64_t>(weights.size()) != total_) {
    return absl::InvalidArgumentError("fedluar: weights do not match the model size");
  }
  for (float a : aggregate) {
    if (!std::isfinite(a)) return absl::InvalidArgumentError("fedluar: non-finite aggregate");
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> full, UnpackUpdate(aggregate));
  for (size_t i : recycled_) {
    const TensorSlice& t = tensors_[i];
    std::copy(last_update_.begin() + t.offset, last_update_.begin() + t.offset + t.size,
              full.begin() + t.offset);
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<double> fresh_scores, LayerScores(tensors_, weights, full));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!recycled_mask_[i]) scores_[i] = fresh_scores[i];
  }
  last_update_ = full;
  ++round_;
  TANDEM_ASSIGN_OR_RETURN(std::vector<size_t> next,
                          DrawRecycledTensors(tensors_, scores_, options_.num_recycled,
                                              options_.seed, round_));
  SetRecycled(std::move(next));
  return full;
}

absl::Status FedLuarState::Restore(Snapshot snapshot) {
  if (snapshot.round < 1 || snapshot.scores.size() != tensors_.size() ||
      static_cast<int64_t>(snapshot.last_update.size()) != total_) {
    return absl::InvalidArgumentError("fedluar: snapshot does not match this model");
  }
  for (size_t k = 0; k < snapshot.recycled.size(); ++k) {
    const size_t i = snapshot.recycled[k];
    if (i >= tensors_.size() || !tensors_[i].recyclable ||
        (k > 0 && i <= snapshot.recycled[k - 1])) {
      return absl::InvalidArgumentError("fedluar: snapshot recycles an invalid tensor set");
    }
  }
  if (static_cast<int>(snapshot.recycled.size()) > options_.num_recycled) {
    return absl::InvalidArgumentError("fedluar: snapshot recycles more tensors than R");
  }
  round_ = snapshot.round;
  scores_ = std::move(snapshot.scores);
  last_update_ = std::move(snapshot.last_update);
  SetRecycled(std::move(snapshot.recycled));
  return absl::OkStatus();
}

}  // namespace tandem::ml
