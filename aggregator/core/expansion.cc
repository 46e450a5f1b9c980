#include "aggregator/core/expansion.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <optional>

namespace tandem::aggregator {
namespace {

absl::Status FirstError(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<crypto::ProofDigest>> ComputeDigests(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares) {
  std::vector<crypto::ProofDigest> digests(shares.size());
  std::vector<absl::Status> statuses(shares.size());
  tbb::enumerable_thread_specific<crypto::SparseDpfScratch> scratch;
  tbb::parallel_for(size_t{0}, shares.size(), [&](size_t i) {
    absl::StatusOr<crypto::ProofDigest> d = dpf.ComputeProofDigest(*shares[i], &scratch.local());
    if (d.ok()) {
      digests[i] = *d;
    } else {
      statuses[i] = d.status();
    }
  });
  if (absl::Status s = FirstError(statuses); !s.ok()) return s;
  return digests;
}

absl::StatusOr<std::vector<crypto::ProofDigest>> AccumulateShares(
    const crypto::SparseDpf& dpf, absl::Span<const proto::SparseKeySet* const> shares,
    absl::Span<uint64_t> accumulator) {
  if (accumulator.size() != dpf.dimension()) {
    return absl::InvalidArgumentError("accumulator size differs from the DPF dimension");
  }
  struct Local {
    std::vector<uint64_t> sum;
    crypto::SparseDpfScratch scratch;
  };
  const size_t dim = accumulator.size();
  tbb::enumerable_thread_specific<Local> locals;
  std::vector<crypto::ProofDigest> digests(shares.size());
  std::vector<absl::Status> statuses(shares.size());
  tbb::parallel_for(size_t{0}, shares.size(), [&](size_t i) {
    Local& local = locals.local();
    if (local.sum.size() != dim) local.sum.assign(dim, 0);
    absl::StatusOr<crypto::ProofDigest> d =
        dpf.EvaluateAndAccumulate(*shares[i], absl::MakeSpan(local.sum), &local.scratch);
    if (d.ok()) {
      digests[i] = *d;
    } else {
      statuses[i] = d.status();
    }
  });
  if (absl::Status s = FirstError(statuses); !s.ok()) return s;

  const uint64_t mask = dpf.value_bits() == 64 ? ~uint64_t{0} : (uint64_t{1} << 32) - 1;
  for (Local& local : locals) {
    if (local.sum.size() != dim) continue;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, dim, size_t{1} << 14),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t j = r.begin(); j < r.end(); ++j) {
                          accumulator[j] = (accumulator[j] + local.sum[j]) & mask;
                        }
                      });
  }
  return digests;
}

}  // namespace tandem::aggregator
