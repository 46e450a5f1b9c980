#include "aggregator/core/expansion.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>

namespace tandem::aggregator {

void RunOnEveryCore(size_t n, absl::FunctionRef<void(size_t)> body) {
  tbb::this_task_arena::isolate(
      [&] { tbb::parallel_for(size_t{0}, n, [&](size_t i) { body(i); }); });
}
namespace {

absl::Status FirstError(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

uint64_t ValueMask(int value_bits) {
  return value_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << value_bits) - 1;
}

}  // namespace

absl::Status ForEachIntoAccumulator(size_t n, uint64_t dimension, int value_bits,
                                    absl::Span<uint64_t> accumulator, IntoAccumulator visit) {
  if (accumulator.size() != dimension) {
    return absl::InvalidArgumentError("accumulator size differs from the DPF dimension");
  }
  // Part 0 expands straight into the accumulator; every other part (one per
  // worker thread) into its own buffer, added in afterwards in parallel
  // chunks. A single report therefore costs one expansion, no extra pass.
  const size_t dim = accumulator.size();
  const size_t parts = std::min<size_t>(
      n, static_cast<size_t>(std::max(1, tbb::this_task_arena::max_concurrency())));
  if (parts == 0) return absl::OkStatus();
  std::vector<std::vector<uint64_t>> buffers(parts - 1);
  std::vector<absl::Status> statuses(parts);
  tbb::parallel_for(size_t{0}, parts, [&](size_t p) {
    crypto::SparseDpfScratch scratch;
    absl::Span<uint64_t> target = accumulator;
    if (p > 0) {
      buffers[p - 1].assign(dim, 0);
      target = absl::MakeSpan(buffers[p - 1]);
    }
    for (size_t i = p; i < n; i += parts) {
      absl::Status s = visit(i, target, &scratch);
      if (!s.ok()) {
        statuses[p] = s;
        return;
      }
    }
  });
  if (absl::Status s = FirstError(statuses); !s.ok()) return s;
  for (const std::vector<uint64_t>& buffer : buffers) {
    if (absl::Status s = AddAccumulator(accumulator, buffer, value_bits); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AddAccumulator(absl::Span<uint64_t> into, absl::Span<const uint64_t> from,
                            int value_bits) {
  if (into.size() != from.size()) {
    return absl::InvalidArgumentError("accumulators of different sizes");
  }
  const uint64_t mask = ValueMask(value_bits);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, into.size(), size_t{1} << 14),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t j = r.begin(); j < r.end(); ++j) {
                        into[j] = (into[j] + from[j]) & mask;
                      }
                    });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<crypto::ProofDigest>> ComputeDigests(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares,
    absl::Span<uint64_t> accumulator, absl::Span<const crypto::ProofDigest* const> public_digests) {
  if (!public_digests.empty() && public_digests.size() != shares.size()) {
    return absl::InvalidArgumentError("public_digests: one per share or none");
  }
  const auto public_digest = [&](size_t i) {
    return public_digests.empty() ? nullptr : public_digests[i];
  };
  std::vector<crypto::ProofDigest> digests(shares.size());
  if (!accumulator.empty()) {
    absl::Status s =
        ForEachIntoAccumulator(shares.size(), dpf.dimension(), dpf.value_bits(), accumulator,
                               [&](size_t i, absl::Span<uint64_t> target,
                                   crypto::SparseDpfScratch* scratch) -> absl::Status {
                                 absl::StatusOr<crypto::ProofDigest> d = dpf.EvaluateAndAccumulate(
                                     *shares[i], target, scratch, public_digest(i));
                                 if (!d.ok()) return d.status();
                                 digests[i] = *d;
                                 return absl::OkStatus();
                               });
    if (!s.ok()) return s;
    return digests;
  }
  std::vector<absl::Status> statuses(shares.size());
  tbb::enumerable_thread_specific<crypto::SparseDpfScratch> scratch;
  tbb::parallel_for(size_t{0}, shares.size(), [&](size_t i) {
    absl::StatusOr<crypto::ProofDigest> d =
        dpf.ComputeProofDigest(*shares[i], &scratch.local(), public_digest(i));
    if (d.ok()) {
      digests[i] = *d;
    } else {
      statuses[i] = d.status();
    }
  });
  if (absl::Status s = FirstError(statuses); !s.ok()) return s;
  return digests;
}

absl::Status AccumulateShares(const crypto::SparseDpf& dpf,
                              absl::Span<const proto::SparseKeySet* const> shares,
                              absl::Span<uint64_t> accumulator) {
  return ForEachIntoAccumulator(
      shares.size(), dpf.dimension(), dpf.value_bits(), accumulator,
      [&](size_t i, absl::Span<uint64_t> target, crypto::SparseDpfScratch* scratch) {
        return dpf.Accumulate(*shares[i], target, scratch);
      });
}

absl::Status SubtractShares(const crypto::SparseDpf& dpf,
                            absl::Span<const proto::SparseKeySet* const> shares,
                            absl::Span<uint64_t> accumulator) {
  if (accumulator.size() != dpf.dimension()) {
    return absl::InvalidArgumentError("accumulator size differs from the DPF dimension");
  }
  if (shares.empty()) return absl::OkStatus();
  std::vector<uint64_t> undo(accumulator.size(), 0);
  if (absl::Status s = AccumulateShares(dpf, shares, absl::MakeSpan(undo)); !s.ok()) return s;
  const uint64_t mask = ValueMask(dpf.value_bits());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, undo.size(), size_t{1} << 14),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t j = r.begin(); j < r.end(); ++j) {
                        accumulator[j] = (accumulator[j] - undo[j]) & mask;
                      }
                    });
  return absl::OkStatus();
}

}  // namespace tandem::aggregator
