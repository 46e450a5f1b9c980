// Splitting a data set across federated clients: IID, Dirichlet label skew
// (Hsu et al. 2019, as used by FedLUAR with alpha = 0.1), natural groups.
// Pure functions; every draw comes from a std::mt19937_64 seeded with the
// given seed, so a (seed, input) pair always yields the same partition.
#ifndef TANDEM_ML_DATA_PARTITION_H_
#define TANDEM_ML_DATA_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml {

// partition[k] = the sample indices of client k (each index exactly once).
using Partition = std::vector<std::vector<int64_t>>;

// Shuffled equal split (sizes differ by at most one). INVALID_ARGUMENT when
// num_clients < 1 or n < num_clients.
absl::StatusOr<Partition> PartitionIid(int64_t n, int num_clients, uint64_t seed);

// For each class, draws client proportions p ~ Dirichlet(alpha * 1) and
// deals that class's shuffled samples out accordingly. Redraws (up to 1000
// times) until every client has at least `min_per_client` samples.
// INVALID_ARGUMENT for alpha <= 0, num_clients < 1, or labels outside
// [0, num_classes); FAILED_PRECONDITION when min_per_client cannot be met.
absl::StatusOr<Partition> PartitionDirichlet(absl::Span<const int> labels, int num_classes,
                                             int num_clients, double alpha, uint64_t seed,
                                             int64_t min_per_client = 1);

// One client per distinct group id, clients ordered by ascending group id.
// INVALID_ARGUMENT when groups is empty or has a negative id.
absl::StatusOr<Partition> PartitionByGroup(absl::Span<const int> groups);

// Label-skew measure: the mean over clients of the total-variation distance
// between the client's label histogram and the global one (0 = IID, close
// to 1 = each client holds classes nobody else has).
double MeanLabelTotalVariation(const Partition& partition, absl::Span<const int> labels,
                               int num_classes);

}  // namespace tandem::ml

#endif  // TANDEM_ML_DATA_PARTITION_H_
