// Partitions for cross-device simulations with any number of clients
// (thousands to millions): no retries, a guaranteed minimum size per client,
// per-client label mixtures and heavy-tailed sizes.
//
// Construction (Hsu, Qi & Brown 2019, "Measuring the effects of non-identical
// data distribution", and the LEAF / pfl-research convention of drawing
// client sizes separately from label mixtures): client i gets
//   n_i = min_per_client + its share of the remaining samples, the shares
//         proportional to a log-normal(0, size_sigma) draw (sigma = 0: equal);
//   q_i ~ Dirichlet(alpha * p), p = the global class frequencies,
// and its n_i samples are drawn one by one: a class c ~ q_i, then an unused
// sample of class c. A class that runs out is dropped from q_i (renormalized
// over the classes the client still can draw, else over every class with
// samples left), so every sample is used at most once and every client gets
// exactly n_i samples, whatever alpha. Clients are filled in a random order
// so that exhaustion does not favour low ids. The minimum holds by
// construction: no draw is ever repeated.
//
// Pure functions; deterministic per (inputs, seed) (std::mt19937_64).
#ifndef TANDEM_ML_DATA_SCALABLE_PARTITION_H_
#define TANDEM_ML_DATA_SCALABLE_PARTITION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ml/data/partition.h"

namespace tandem::ml {

struct ClientSizes {
  int64_t min_per_client = 1;
  // Log-normal sigma of the size shares (0 = equal sizes; ~1-2 is the
  // heavy tail of cross-device populations).
  double size_sigma = 0.0;
  // Fraction of the data set dealt out, in (0, 1].
  double fill = 1.0;
};

// Client sizes alone: num_clients sizes, each >= min_per_client, summing to
// floor(fill * n) (at least num_clients * min_per_client). INVALID_ARGUMENT
// for num_clients < 1, min < 0, sigma < 0, fill outside (0, 1];
// FAILED_PRECONDITION when n < num_clients * min_per_client.
absl::StatusOr<std::vector<int64_t>> DrawClientSizes(int64_t n, int num_clients,
                                                     const ClientSizes& sizes, uint64_t seed);

// Label skew by per-client Dirichlet mixtures (see the file comment). Same
// errors as DrawClientSizes, plus INVALID_ARGUMENT for alpha <= 0 or labels
// outside [0, num_classes). Each client's indices are sorted.
absl::StatusOr<Partition> PartitionDirichletMixture(absl::Span<const int> labels,
                                                    int num_classes, int num_clients,
                                                    double alpha, const ClientSizes& sizes,
                                                    uint64_t seed);

// Quantity skew only: IID labels, sizes from DrawClientSizes (size_sigma
// sets the skew). Same errors as DrawClientSizes.
absl::StatusOr<Partition> PartitionQuantitySkew(int64_t n, int num_clients,
                                                const ClientSizes& sizes, uint64_t seed);

}  // namespace tandem::ml

#endif  // TANDEM_ML_DATA_SCALABLE_PARTITION_H_
