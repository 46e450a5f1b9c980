#include "ml/data/scalable_partition.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {

absl::Status CheckSizes(int64_t n, int num_clients, const ClientSizes& s) {
  if (num_clients < 1 || s.min_per_client < 0 || !(s.size_sigma >= 0) || !(s.fill > 0) ||
      s.fill > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition: need clients >= 1, min_per_client >= 0, size_sigma >= 0 and fill in (0, 1];"
        " got clients=", num_clients, " min=", s.min_per_client, " sigma=", s.size_sigma,
        " fill=", s.fill));
  }
  if (n < static_cast<int64_t>(num_clients) * s.min_per_client) {
    return absl::FailedPreconditionError(absl::StrCat("partition: ", n, " samples cannot give ",
                                                      num_clients, " clients ",
                                                      s.min_per_client, " each"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> DrawClientSizes(int64_t n, int num_clients,
                                                     const ClientSizes& sizes, uint64_t seed) {
  if (absl::Status s = CheckSizes(n, num_clients, sizes); !s.ok()) return s;
  const int64_t k = num_clients;
  const int64_t total =
      std::max(k * sizes.min_per_client, static_cast<int64_t>(std::floor(sizes.fill * n)));
  const int64_t spare = total - k * sizes.min_per_client;
  std::mt19937_64 gen(seed);
  std::lognormal_distribution<double> lognormal(0.0, sizes.size_sigma);
  std::vector<double> w(static_cast<size_t>(k));
  double sum = 0;
  for (double& x : w) sum += (x = sizes.size_sigma > 0 ? lognormal(gen) : 1.0);
  // Largest-remainder rounding: the shares add up to `spare` exactly.
  std::vector<int64_t> out(static_cast<size_t>(k), sizes.min_per_client);
  std::vector<std::pair<double, int64_t>> remainders(static_cast<size_t>(k));
  int64_t dealt = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double exact = static_cast<double>(spare) * w[i] / sum;
    const int64_t whole = static_cast<int64_t>(std::floor(exact));
    out[i] += whole;
    dealt += whole;
    remainders[i] = {exact - static_cast<double>(whole), i};
  }
  std::sort(remainders.begin(), remainders.end(),
            [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  for (int64_t j = 0; j < spare - dealt; ++j) ++out[remainders[j % k].second];
  return out;
}

absl::StatusOr<Partition> PartitionDirichletMixture(absl::Span<const int> labels,
                                                    int num_classes, int num_clients,
                                                    double alpha, const ClientSizes& sizes,
                                                    uint64_t seed) {
  if (!(alpha > 0) || num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dirichlet mixture: need alpha > 0 and classes >= 1, got alpha=", alpha));
  }
  std::vector<std::vector<int64_t>> pools(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("dirichlet mixture: label ", labels[i],
                                                     " of sample ", i, " outside [0, ",
                                                     num_classes, ")"));
    }
    pools[labels[i]].push_back(static_cast<int64_t>(i));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  absl::StatusOr<std::vector<int64_t>> count = DrawClientSizes(n, num_clients, sizes, seed);
  if (!count.ok()) return count.status();
  std::mt19937_64 gen(seed ^ 0x5d1c3f1e2b7a9c4dULL);
  for (auto& pool : pools) std::shuffle(pool.begin(), pool.end(), gen);
  std::vector<double> prior(static_cast<size_t>(num_classes));
  for (int c = 0; c < num_classes; ++c) {
    prior[c] = static_cast<double>(pools[c].size()) / static_cast<double>(std::max<int64_t>(n, 1));
  }
  std::vector<int> order(static_cast<size_t>(num_clients));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);
  Partition out(static_cast<size_t>(num_clients));
  std::vector<double> q(static_cast<size_t>(num_classes));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int client : order) {
    double sum = 0;
    for (int c = 0; c < num_classes; ++c) {
      // Dirichlet(alpha * p) as normalized Gamma(alpha * p_c) draws.
      q[c] = prior[c] > 0 ? std::gamma_distribution<double>(alpha * prior[c], 1.0)(gen) : 0.0;
      sum += q[c];
    }
    if (!(sum > 0)) {  // every draw underflowed (tiny alpha): the prior itself
      q = prior;
    }
    std::vector<int64_t>& mine = out[client];
    mine.reserve(static_cast<size_t>((*count)[client]));
    for (int64_t taken = 0; taken < (*count)[client]; ++taken) {
      // The client's mixture over classes that still have samples; if its
      // support is exhausted, the remaining samples' own proportions.
      double mass = 0;
      for (int c = 0; c < num_classes; ++c) mass += pools[c].empty() ? 0.0 : q[c];
      const bool fallback = !(mass > 0);
      if (fallback) {
        for (int c = 0; c < num_classes; ++c) mass += static_cast<double>(pools[c].size());
      }
      double u = unit(gen) * mass;
      int pick = -1;
      for (int c = 0; c < num_classes; ++c) {
        if (pools[c].empty()) continue;
        pick = c;  // the last non-empty class absorbs rounding
        u -= fallback ? static_cast<double>(pools[c].size()) : q[c];
        if (u < 0) break;
      }
      mine.push_back(pools[pick].back());
      pools[pick].pop_back();
    }
    std::sort(mine.begin(), mine.end());
  }
  return out;
}

absl::StatusOr<Partition> PartitionQuantitySkew(int64_t n, int num_clients,
                                                const ClientSizes& sizes, uint64_t seed) {
  absl::StatusOr<std::vector<int64_t>> count = DrawClientSizes(n, num_clients, sizes, seed);
  if (!count.ok()) return count.status();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937_64 gen(seed ^ 0x2545f4914f6cdd1dULL);
  std::shuffle(idx.begin(), idx.end(), gen);
  Partition out(static_cast<size_t>(num_clients));
  size_t next = 0;
  for (int i = 0; i < num_clients; ++i) {
    out[i].assign(idx.begin() + next, idx.begin() + next + (*count)[i]);
    next += static_cast<size_t>((*count)[i]);
    std::sort(out[i].begin(), out[i].end());
  }
  return out;
}

}  // namespace tandem::ml
