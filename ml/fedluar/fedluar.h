// FedLUAR: layer-wise update aggregation with recycling (Kim, Kang & Lee,
// NeurIPS 2025, arXiv 2503.11146; mechanics from shared/specs/fl_research.md
// section 1, all [F] unless marked).
//
//   score_l = ||mean update of tensor l|| / (||tensor l at round start|| + 1e-6)
//   R tensors are drawn WITHOUT replacement with probability proportional to
//   1/score_l (successive sampling, like numpy.random.choice(replace=False,
//   p=w)); only multi-dimensional weight tensors are candidates, biases and
//   normalisation parameters are always aggregated.
//   A recycled tensor is not uploaded; the server re-applies the last
//   aggregated update it received for it, and that tensor's stored update
//   and score stay as they were. Round 1 recycles nothing.
// [I] The reference draws with an unseeded np.random.choice on rank 0 and
// broadcasts; here the draw is a pure function of (scores, R, shared seed,
// round) so the coordinator, both aggregators and every client derive the
// same set from the public aggregate. A zero score (which would make 1/score
// blow up in the reference) is clamped to 1e-12.
//
// This header depends on nothing but the standard library, Abseil and base/,
// so server-side code can use it without Eigen or the training library.
#ifndef TANDEM_ML_FEDLUAR_FEDLUAR_H_
#define TANDEM_ML_FEDLUAR_FEDLUAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml {

// One tensor of the flat model vector.
struct TensorSlice {
  std::string name;
  int64_t offset = 0;
  int64_t size = 0;
  bool recyclable = false;  // multi-dimensional weight tensor
};

// Scores of every tensor (aligned with `tensors`); non-recyclable tensors
// get -1. INVALID_ARGUMENT when the spans differ in size, a slice is out of
// range, or a value is not finite.
absl::StatusOr<std::vector<double>> LayerScores(const std::vector<TensorSlice>& tensors,
                                                absl::Span<const float> weights,
                                                absl::Span<const float> mean_update);

// Draws `num_recycled` distinct indices of recyclable tensors with
// probability proportional to 1/score, deterministically from (seed, round).
// Returned sorted ascending. INVALID_ARGUMENT when scores.size() differs from
// tensors.size(), a recyclable score is negative or NaN, or num_recycled
// exceeds the number of recyclable tensors.
absl::StatusOr<std::vector<size_t>> DrawRecycledTensors(const std::vector<TensorSlice>& tensors,
                                                        absl::Span<const double> scores,
                                                        int num_recycled, uint64_t seed,
                                                        uint64_t round);

// A full update without the `recycled` tensors (sorted, distinct indices):
// what a client uploads in a FedLUAR round. Stateless form of
// FedLuarState::PackUpdate for clients that only know the round's recycled
// set. INVALID_ARGUMENT for a size mismatch or a bad index list.
absl::StatusOr<std::vector<float>> PackTensors(const std::vector<TensorSlice>& tensors,
                                               absl::Span<const size_t> recycled,
                                               absl::Span<const float> full);

struct FedLuarOptions {
  int num_recycled = 0;  // R, tensors recycled per round (from round 2 on)
  uint64_t seed = 0;     // shared by every party of the federation
};

// Per-federation FedLUAR state, mirrored identically by the coordinator and
// (for packing) by clients. One instance for the whole training run;
// thread-compatible.
//
//   round t:  recycled() -> clients PackUpdate() -> aggregate packed means
//             -> server FinishRound() -> full update for the global model,
//                scores refreshed, recycled() for round t+1 drawn.
class FedLuarState {
 public:
  // INVALID_ARGUMENT for overlapping/out-of-order slices, num_recycled < 0,
  // or num_recycled >= the number of recyclable tensors (when > 0): at least
  // one weight tensor must stay fresh each round.
  static absl::StatusOr<std::unique_ptr<FedLuarState>> Create(std::vector<TensorSlice> tensors,
                                                              int64_t total_size,
                                                              const FedLuarOptions& options);

  uint64_t round() const { return round_; }  // 1-based round now open
  const std::vector<TensorSlice>& tensors() const { return tensors_; }
  // Tensor indices recycled in the current round (sorted).
  const std::vector<size_t>& recycled() const { return recycled_; }
  bool IsRecycled(size_t tensor) const { return recycled_mask_[tensor]; }
  const std::vector<double>& scores() const { return scores_; }

  // Floats a client uploads this round.
  int64_t packed_size() const;
  // Drops recycled tensors. INVALID_ARGUMENT when full.size() != total size.
  absl::StatusOr<std::vector<float>> PackUpdate(absl::Span<const float> full) const;
  // Inverse of PackUpdate with zeros for recycled tensors. INVALID_ARGUMENT
  // when packed.size() != packed_size().
  absl::StatusOr<std::vector<float>> UnpackUpdate(absl::Span<const float> packed) const;

  // Server side, once per round. `weights` = global model at round start,
  // `aggregate` = mean of the clients' packed updates (packed_size()).
  // Returns the full update to apply: the aggregate for fresh tensors, the
  // stored last update for recycled ones. Then refreshes stored updates and
  // scores of the fresh tensors, advances the round and draws the next
  // recycled set. INVALID_ARGUMENT on size mismatches or non-finite input.
  absl::StatusOr<std::vector<float>> FinishRound(absl::Span<const float> weights,
                                                 absl::Span<const float> aggregate);

  // Everything FinishRound accumulates, for checkpoints. Restore returns
  // INVALID_ARGUMENT for a snapshot of another model (sizes, indices) and
  // leaves the state unchanged then.
  struct Snapshot {
    uint64_t round = 1;
    std::vector<size_t> recycled;
    std::vector<double> scores;
    std::vector<float> last_update;
  };
  Snapshot Save() const { return {round_, recycled_, scores_, last_update_}; }
  absl::Status Restore(Snapshot snapshot);

 private:
  FedLuarState(std::vector<TensorSlice> tensors, int64_t total, FedLuarOptions options);
  void SetRecycled(std::vector<size_t> recycled);

  std::vector<TensorSlice> tensors_;
  int64_t total_;
  FedLuarOptions options_;
  uint64_t round_ = 1;
  std::vector<size_t> recycled_;
  std::vector<bool> recycled_mask_;
  std::vector<double> scores_;      // last computed score per tensor (-1 = none)
  std::vector<float> last_update_;  // last aggregated update per coordinate
};

}  // namespace tandem::ml

#endif  // TANDEM_ML_FEDLUAR_FEDLUAR_H_
