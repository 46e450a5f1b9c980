#include "ml/data/partition.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace tandem::ml {

absl::StatusOr<Partition> PartitionIid(int64_t n, int num_clients, uint64_t seed) {
  if (num_clients < 1 || n < num_clients) {
    return absl::InvalidArgumentError(absl::StrCat("iid partition: cannot split ", n,
                                                   " samples over ", num_clients, " clients"));
  }
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937_64 gen(seed);
  std::shuffle(idx.begin(), idx.end(), gen);
  Partition out(static_cast<size_t>(num_clients));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i % num_clients)].push_back(idx[i]);
  return out;
}

absl::StatusOr<Partition> PartitionDirichlet(absl::Span<const int> labels, int num_classes,
                                             int num_clients, double alpha, uint64_t seed,
                                             int64_t min_per_client) {
  if (!(alpha > 0) || num_clients < 1 || num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("dirichlet partition: need alpha > 0 and ",
                                                   "positive counts; got alpha=", alpha,
                                                   " clients=", num_clients));
  }
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("dirichlet partition: label ", labels[i],
                                                     " of sample ", i, " outside [0, ",
                                                     num_classes, ")"));
    }
    by_class[labels[i]].push_back(static_cast<int64_t>(i));
  }
  if (static_cast<int64_t>(labels.size()) < min_per_client * num_clients) {
    return absl::FailedPreconditionError("dirichlet partition: too few samples for min_per_client");
  }
  std::mt19937_64 gen(seed);
  std::gamma_distribution<double> gamma(alpha, 1.0);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    Partition out(static_cast<size_t>(num_clients));
    for (auto& cls : by_class) {
      std::vector<int64_t> shuffled = cls;
      std::shuffle(shuffled.begin(), shuffled.end(), gen);
      std::vector<double> p(static_cast<size_t>(num_clients));
      double sum = 0;
      for (double& x : p) sum += (x = gamma(gen));
      if (!(sum > 0)) {  // every draw underflowed (tiny alpha): one random owner
        std::fill(p.begin(), p.end(), 0.0);
        p[std::uniform_int_distribution<int>(0, num_clients - 1)(gen)] = sum = 1.0;
      }
      // Cut points at rounded cumulative proportions.
      double cum = 0;
      size_t start = 0;
      for (int k = 0; k < num_clients; ++k) {
        cum += p[k] / sum;
        const size_t end = k == num_clients - 1
                               ? shuffled.size()
                               : std::min(shuffled.size(),
                                          static_cast<size_t>(std::llround(cum * shuffled.size())));
        for (size_t j = start; j < end; ++j) out[k].push_back(shuffled[j]);
        start = std::max(start, end);
      }
    }
    bool ok = true;
    for (const auto& c : out) ok = ok && static_cast<int64_t>(c.size()) >= min_per_client;
    if (ok) {
      for (auto& c : out) std::sort(c.begin(), c.end());
      return out;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "dirichlet partition: no draw in 1000 gave every client >= ", min_per_client, " samples"));
}

absl::StatusOr<Partition> PartitionByGroup(absl::Span<const int> groups) {
  if (groups.empty()) return absl::InvalidArgumentError("group partition: no group ids");
  std::map<int, std::vector<int64_t>> by_group;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("group partition: negative group id ",
                                                     groups[i], " at sample ", i));
    }
    by_group[groups[i]].push_back(static_cast<int64_t>(i));
  }
  Partition out;
  for (auto& [g, idx] : by_group) out.push_back(std::move(idx));
  return out;
}

double MeanLabelTotalVariation(const Partition& partition, absl::Span<const int> labels,
                               int num_classes) {
  std::vector<double> global(static_cast<size_t>(num_classes), 0.0);
  for (int l : labels) global[l] += 1.0 / static_cast<double>(labels.size());
  double total = 0;
  int clients = 0;
  for (const auto& c : partition) {
    if (c.empty()) continue;
    std::vector<double> h(static_cast<size_t>(num_classes), 0.0);
    for (int64_t i : c) h[labels[i]] += 1.0 / static_cast<double>(c.size());
    double tv = 0;
    for (int k = 0; k < num_classes; ++k) tv += std::abs(h[k] - global[k]);
    total += 0.5 * tv;
    ++clients;
  }
  return clients > 0 ? total / clients : 0.0;
}

}  // namespace tandem::ml
