// Which block of each group a client sends, and the error-feedback memory of
// what it did not send.
//
// A PREAMBLE report (report_builder.h) carries one block of B coordinates
// from each of the k groups of 2^d blocks, so a client sends the fraction
// k * B / D = 1 / 2^d of its update.
//  - RANDOM (the paper's partition variant): the block is uniform in its
//    group; the coordinator multiplies the decoded sum by 2^d, which makes the
//    sparse report an unbiased estimate of the update.
//  - TOP_NORM: the block of largest L2 norm in its group (top-k by norm with
//    one block per group, the only selection the block DPF format allows),
//    sent as is, and the client keeps the residual, everything it did not
//    send, and adds it to its next round's update: error feedback, "sparsified
//    SGD with memory" (Stich, Cordonnier, Jaggi, NeurIPS 2018) and EF-SGD
//    (Karimireddy, Rebjock, Stich, Jaggi, ICML 2019). With memory, the biased
//    top-k compressor converges at the rate of the uncompressed method; the
//    coordinator does not rescale (rescaling a biased selection would
//    multiply its error by 2^d).
//
// Design choice: the residual is the unsent blocks only, exactly
// (update + old residual) - (the selected blocks before clipping). What
// clipping to C removes is not fed back: top-1-of-2^d keeps at least 1/2^d of
// the energy of its input (a contraction, the condition of both papers'
// analyses), so the residual stays bounded; adding back the clipped-off
// part would make the memory grow without bound whenever clipping binds,
// and clipping is the DP mechanism's choice of sensitivity, not a
// compression error.
//
// Privacy: the selection depends on the data, but neither server learns
// which blocks were chosen (each sees one share of a block DPF key, which
// hides the block index; the sparsity and norm checks reveal no position),
// and each aggregator adds its discrete Gaussian noise to every coordinate
// of the whole domain D. The report sent is the clipped selected blocks, so
// its L2 norm is <= C and the norm-bound proof (the bound of a report of
// norm C over the k * B sent values) covers it as it covers a random
// selection. The accountant's epsilon uses only the clients' Poisson
// sampling and the noise, no amplification from the block choice, so it
// holds unchanged. The residual never leaves the client; each round's report
// has sensitivity C whatever the residual holds (client-level DP).
//
// Free functions are pure and thread-safe; ErrorFeedback is a value type,
// thread-compatible.
#ifndef TANDEM_CLIENT_INTERNAL_BLOCK_SELECTION_H_
#define TANDEM_CLIENT_INTERNAL_BLOCK_SELECTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tandem/client/participant.h"

namespace tandem::client {

// The layout of a report's domain: D = num_groups * blocks_per_group *
// block_size; group g holds coordinates [g * blocks_per_group * B, (g + 1) *
// blocks_per_group * B), its block j the B coordinates from j * B within it.
struct BlockGeometry {
  uint32_t num_groups = 0;        // k
  uint64_t blocks_per_group = 0;  // 2^d
  uint32_t block_size = 0;        // B
  uint64_t dimension() const { return uint64_t{num_groups} * blocks_per_group * block_size; }
};

// In each group, the index of the block with the largest L2 norm of `v`
// (ties: the lowest index, so the choice is a function of `v`). `v` has at
// most D entries; missing ones count as zero. INVALID_ARGUMENT for an empty
// geometry or a longer `v`.
absl::StatusOr<std::vector<uint32_t>> SelectTopNormBlocks(absl::Span<const float> v,
                                                          const BlockGeometry& geometry);

// `v` with the blocks `indices` (one per group) set to zero: what a client
// did not send. Same length as `v`. INVALID_ARGUMENT when indices has not
// num_groups entries, an index is out of range, or `v` is longer than D.
absl::StatusOr<std::vector<float>> UnsentResidual(absl::Span<const float> v,
                                                  absl::Span<const uint32_t> indices,
                                                  const BlockGeometry& geometry);

// The residual a client carries between rounds of one task. A residual of
// another task or length (FedLUAR's packing or the model changed) is not
// applied: the next Compensate starts afresh.
class ErrorFeedback {
 public:
  // update + residual when the residual belongs to `task_id` and has
  // update's length, else a copy of update.
  std::vector<float> Compensate(absl::string_view task_id, absl::Span<const float> update) const;
  // Replaces the memory with `residual` (UnsentResidual of the compensated
  // update this task's report was built from).
  void Keep(absl::string_view task_id, std::vector<float> residual);
  void Clear();

  bool empty() const { return residual_.empty(); }
  const std::string& task_id() const { return task_id_; }
  const std::vector<float>& residual() const { return residual_; }

  // A self-delimiting binary form for StateStore (little-endian floats).
  std::string Serialize() const;
  // INVALID_ARGUMENT for bytes that are not a Serialize() output (a torn or
  // foreign file: the caller drops it and starts afresh).
  static absl::StatusOr<ErrorFeedback> Parse(absl::string_view bytes);

 private:
  std::string task_id_;
  std::vector<float> residual_;
};

// StateStore key of the persisted ErrorFeedback (report_delivery.h has the
// pending report's).
inline constexpr char kErrorFeedbackKey[] = "error-feedback";

// The participants' error feedback around one report (round_runner.cc,
// stepwise_runner.cc). `memory` is the runner's copy; with a `store` the
// residual survives a restart: Load reads it (a missing or unreadable entry
// starts afresh), Save writes it. Store errors propagate.
//
// Crash window: the runner saves the new residual before it stores the
// pending report. A crash between the two loses the part of the old
// residual that this report would have sent (the round's report is rebuilt
// from a fresh training run and the new residual): a lost correction, never
// a doubly counted one.
absl::Status LoadErrorFeedback(StateStore* store, ErrorFeedback* memory);
absl::Status SaveErrorFeedback(StateStore* store, const ErrorFeedback& memory);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INTERNAL_BLOCK_SELECTION_H_
