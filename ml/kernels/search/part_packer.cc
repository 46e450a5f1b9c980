#include "ml/kernels/search/part_packer.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::ml::kernels::search {
namespace {

absl::Status ValidateGraph(const ContactGraph& g) {
  if (g.nodes < 0 || g.nodes > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("graph node count ", g.nodes, " out of range"));
  }
  for (const ContactEdge& e : g.edges) {
    if (e.a < 0 || e.b < 0 || e.a >= g.nodes || e.b >= g.nodes || e.a == e.b || !(e.weight > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bad contact edge (", e.a, ", ", e.b, ", w=",
                                                     e.weight, ") for ", g.nodes, " nodes"));
    }
  }
  return absl::OkStatus();
}

struct Adjacency {
  std::vector<std::vector<std::pair<int64_t, double>>> next;  // sorted by neighbour
};

Adjacency Build(const ContactGraph& g) {
  Adjacency adj;
  adj.next.resize(g.nodes);
  for (const ContactEdge& e : g.edges) {
    adj.next[e.a].push_back({e.b, e.weight});
    adj.next[e.b].push_back({e.a, e.weight});
  }
  for (auto& n : adj.next) std::sort(n.begin(), n.end());
  return adj;
}

int64_t Find(std::vector<int64_t>& parent, int64_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// Quotient of g under the union-find partition; group ids by smallest member.
Contraction Quotient(const ContactGraph& g, std::vector<int64_t>& parent) {
  Contraction c;
  c.group.assign(g.nodes, -1);
  std::vector<int64_t> id_of_root(g.nodes, -1);
  for (int64_t i = 0; i < g.nodes; ++i) {
    const int64_t r = Find(parent, i);
    if (id_of_root[r] < 0) id_of_root[r] = c.groups++;
    c.group[i] = id_of_root[r];
  }
  std::map<std::pair<int64_t, int64_t>, double> merged;
  for (const ContactEdge& e : g.edges) {
    int64_t a = c.group[e.a], b = c.group[e.b];
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    merged[{a, b}] += e.weight;
  }
  c.quotient.nodes = c.groups;
  for (const auto& [ab, w] : merged) c.quotient.edges.push_back({ab.first, ab.second, w});
  return c;
}

// BFS 2-colouring. Returns the first conflict edge (u, v) or (-1, -1);
// parent/depth describe the BFS forest.
std::pair<int64_t, int64_t> Bfs(const Adjacency& adj, const std::vector<int64_t>& seeds,
                                std::vector<int>& colour, std::vector<int64_t>& parent,
                                std::vector<int64_t>& depth, int64_t* conflicts) {
  const int64_t n = static_cast<int64_t>(adj.next.size());
  colour.assign(n, -1);
  parent.assign(n, -1);
  depth.assign(n, 0);
  std::pair<int64_t, int64_t> first{-1, -1};
  int prev_seed_colour = 1;
  for (int64_t s : seeds) {
    if (colour[s] >= 0) continue;
    colour[s] = 1 - prev_seed_colour;
    prev_seed_colour = colour[s];
    std::deque<int64_t> queue{s};
    while (!queue.empty()) {
      const int64_t u = queue.front();
      queue.pop_front();
      for (const auto& [v, w] : adj.next[u]) {
        if (colour[v] < 0) {
          colour[v] = 1 - colour[u];
          parent[v] = u;
          depth[v] = depth[u] + 1;
          queue.push_back(v);
        } else if (colour[v] == colour[u] && u < v) {
          if (conflicts != nullptr) ++*conflicts;
          if (first.first < 0) first = {u, v};
        }
      }
    }
  }
  return first;
}

}  // namespace

absl::Status ValidateVoxelParts(const VoxelParts& v) {
  for (int64_t d : {v.nx, v.ny, v.nz}) {
    if (d < 1 || d > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("voxel grid ", v.nx, "x", v.ny, "x", v.nz,
                                                     ": each side must be in [1, 1024]"));
    }
  }
  if (v.nx * v.ny * v.nz > (int64_t{1} << 27) || v.parts < 1 || v.parts > 65536 ||
      static_cast<int64_t>(v.labels.size()) != v.nx * v.ny * v.nz) {
    return absl::InvalidArgumentError(absl::StrCat("voxel grid of ", v.nx * v.ny * v.nz,
                                                   " cells (<= 2^27) with ", v.labels.size(),
                                                   " labels and ", v.parts, " parts (1..65536)"));
  }
  for (int32_t l : v.labels) {
    if (l < -1 || l >= v.parts) {
      return absl::InvalidArgumentError(
          absl::StrCat("voxel label ", l, " outside [-1, ", v.parts, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ContactGraph> ContactGraphFromVoxels(const VoxelParts& v, int64_t radius) {
  TANDEM_RETURN_IF_ERROR(ValidateVoxelParts(v));
  if (radius < 1 || radius > 4) {
    return absl::InvalidArgumentError(absl::StrCat("contact radius must be in [1, 4], got ", radius));
  }
  std::map<std::pair<int64_t, int64_t>, double> pairs;
  for (int64_t x = 0; x < v.nx; ++x)
    for (int64_t y = 0; y < v.ny; ++y)
      for (int64_t z = 0; z < v.nz; ++z) {
        const int32_t a = v.labels[(x * v.ny + y) * v.nz + z];
        if (a < 0) continue;
        for (int64_t i = std::max<int64_t>(0, x - radius); i <= std::min(v.nx - 1, x + radius); ++i)
          for (int64_t j = std::max<int64_t>(0, y - radius); j <= std::min(v.ny - 1, y + radius); ++j)
            for (int64_t k = std::max<int64_t>(0, z - radius); k <= std::min(v.nz - 1, z + radius);
                 ++k) {
              const int32_t b = v.labels[(i * v.ny + j) * v.nz + k];
              if (b > a) pairs[{a, b}] += 1;
            }
      }
  ContactGraph g;
  g.nodes = v.parts;
  for (const auto& [ab, w] : pairs) g.edges.push_back({ab.first, ab.second, w});
  return g;
}

absl::StatusOr<Contraction> ContractOddCycles(const ContactGraph& g) {
  TANDEM_RETURN_IF_ERROR(ValidateGraph(g));
  std::vector<int64_t> uf(g.nodes);
  std::iota(uf.begin(), uf.end(), 0);
  int64_t merges = 0;
  while (true) {
    Contraction c = Quotient(g, uf);
    const Adjacency adj = Build(c.quotient);
    std::vector<int64_t> seeds(c.groups);
    std::iota(seeds.begin(), seeds.end(), 0);
    std::vector<int> colour;
    std::vector<int64_t> parent, depth;
    const auto [u0, v0] = Bfs(adj, seeds, colour, parent, depth, nullptr);
    if (u0 < 0) {
      c.contractions = merges;
      return c;
    }
    // Odd cycle: u0 -> LCA <- v0 plus the edge (u0, v0); find its heaviest edge.
    auto weight = [&](int64_t a, int64_t b) {
      const auto& n = adj.next[a];
      return std::lower_bound(n.begin(), n.end(), std::pair<int64_t, double>{b, -1.0})->second;
    };
    std::pair<int64_t, int64_t> best{u0, v0};
    double best_w = weight(u0, v0);
    auto consider = [&](int64_t a, int64_t b) {
      const double w = weight(a, b);
      if (w > best_w) {
        best_w = w;
        best = {a, b};
      }
    };
    int64_t u = u0, v = v0;
    while (u != v) {
      if (depth[u] >= depth[v]) {
        consider(u, parent[u]);
        u = parent[u];
      } else {
        consider(v, parent[v]);
        v = parent[v];
      }
    }
    // Merge the two groups through any member node of each.
    int64_t na = -1, nb = -1;
    for (int64_t i = 0; i < g.nodes && (na < 0 || nb < 0); ++i) {
      if (c.group[i] == best.first && na < 0) na = i;
      if (c.group[i] == best.second && nb < 0) nb = i;
    }
    uf[Find(uf, na)] = Find(uf, nb);
    ++merges;
  }
}

absl::StatusOr<Colouring> TwoColour(const ContactGraph& g, absl::Span<const double> centrality) {
  TANDEM_RETURN_IF_ERROR(ValidateGraph(g));
  if (static_cast<int64_t>(centrality.size()) != g.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("centrality has ", centrality.size(),
                                                   " entries for ", g.nodes, " nodes"));
  }
  std::vector<int64_t> seeds(g.nodes);
  std::iota(seeds.begin(), seeds.end(), 0);
  std::stable_sort(seeds.begin(), seeds.end(),
                   [&](int64_t a, int64_t b) { return centrality[a] < centrality[b]; });
  Colouring out;
  std::vector<int64_t> parent, depth;
  Bfs(Build(g), seeds, out.colour, parent, depth, &out.conflicts);
  return out;
}

absl::StatusOr<Packing> PackDualVolumes(const VoxelParts& v, int64_t radius) {
  TANDEM_ASSIGN_OR_RETURN(ContactGraph g, ContactGraphFromVoxels(v, radius));
  TANDEM_ASSIGN_OR_RETURN(Contraction c, ContractOddCycles(g));
  // Bounding boxes per group -> distance of the box centre from the grid centre.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> lo(3 * c.groups, kInf), hi(3 * c.groups, -kInf);
  for (int64_t x = 0; x < v.nx; ++x)
    for (int64_t y = 0; y < v.ny; ++y)
      for (int64_t z = 0; z < v.nz; ++z) {
        const int32_t l = v.labels[(x * v.ny + y) * v.nz + z];
        if (l < 0) continue;
        const int64_t gi = c.group[l];
        const double p[3] = {double(x), double(y), double(z)};
        for (int d = 0; d < 3; ++d) {
          lo[3 * gi + d] = std::min(lo[3 * gi + d], p[d]);
          hi[3 * gi + d] = std::max(hi[3 * gi + d], p[d]);
        }
      }
  const double mid[3] = {(v.nx - 1) / 2.0, (v.ny - 1) / 2.0, (v.nz - 1) / 2.0};
  std::vector<double> centrality(c.groups, kInf);
  for (int64_t gi = 0; gi < c.groups; ++gi) {
    if (lo[3 * gi] == kInf) continue;  // parts without voxels go last
    double s = 0;
    for (int d = 0; d < 3; ++d) s += std::pow((lo[3 * gi + d] + hi[3 * gi + d]) / 2 - mid[d], 2);
    centrality[gi] = std::sqrt(s);
  }
  TANDEM_ASSIGN_OR_RETURN(Colouring col, TwoColour(c.quotient, centrality));
  Packing p;
  p.group = c.group;
  p.contractions = c.contractions;
  p.conflicts = col.conflicts;
  p.contact_edges = static_cast<int64_t>(g.edges.size());
  for (int64_t i = 0; i < v.parts; ++i) p.part_volume.push_back(col.colour[c.group[i]]);
  for (int k = 0; k < 2; ++k) {
    p.volume[k] = VoxelParts{v.nx, v.ny, v.nz, v.parts, std::vector<int32_t>(v.labels.size(), -1)};
  }
  for (size_t i = 0; i < v.labels.size(); ++i) {
    if (v.labels[i] >= 0) p.volume[p.part_volume[v.labels[i]]].labels[i] = v.labels[i];
  }
  return p;
}

absl::StatusOr<ReassemblyReport> CheckReassembly(const VoxelParts& original, const Packing& p,
                                                 int64_t radius) {
  TANDEM_RETURN_IF_ERROR(ValidateVoxelParts(original));
  if (static_cast<int64_t>(p.group.size()) != original.parts) {
    return absl::InvalidArgumentError("packing groups do not match the part count");
  }
  for (const VoxelParts& vol : p.volume) {
    TANDEM_RETURN_IF_ERROR(ValidateVoxelParts(vol));
    if (vol.nx != original.nx || vol.ny != original.ny || vol.nz != original.nz ||
        vol.parts != original.parts) {
      return absl::InvalidArgumentError("packed volume shape differs from the original");
    }
  }
  ReassemblyReport r;
  for (size_t i = 0; i < original.labels.size(); ++i) {
    const int32_t a = p.volume[0].labels[i], b = p.volume[1].labels[i];
    if (a >= 0 && b >= 0) ++r.duplicated;
    const int32_t got = a >= 0 ? a : b;
    if (got != original.labels[i]) ++r.missing;
  }
  for (const VoxelParts& vol : p.volume) {
    TANDEM_ASSIGN_OR_RETURN(ContactGraph g, ContactGraphFromVoxels(vol, radius));
    for (const ContactEdge& e : g.edges) r.touching_pairs += p.group[e.a] != p.group[e.b];
  }
  return r;
}

}  // namespace tandem::ml::kernels::search
