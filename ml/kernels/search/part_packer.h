// PartPacker dual volume packing (Tang et al., arXiv 2506.09980; NVlabs
// PartPacker; kernels_research.md section 9): split the parts of an object
// into two complementary volumes so that no two parts inside one volume
// touch, merging parts only where the contact graph forces it.
//
//   1. contact graph: parts i, j touch when a voxel of i lies within
//      Chebyshev distance `radius` of a voxel of j (the reference dilates
//      meshes by 2/512 of the box; radius 1 voxel at 256^3 is that scale).
//      Edge weight = number of such voxel pairs, our stand-in for the
//      reference's penetration depth [I: voxels instead of FCL meshes].
//   2. odd-cycle contraction: while the graph is not bipartite, a BFS
//      2-colouring finds a conflict edge; the odd cycle it closes (tree
//      paths to the lowest common ancestor plus the edge) has its heaviest
//      edge contracted (union-find merge). The reference enumerates all
//      simple cycles (exponential, capped at 100 edges); this BFS form is
//      O(P (P + E)) and has no cap [I, as proposed in the spec].
//   3. 2-colouring: groups sorted by the distance of their bounding-box
//      centre from the grid centre; BFS from the most central uncoloured
//      group with alternating colours; each new component's seed takes the
//      colour opposite to the previous seed [F]. Conflicts are counted (0
//      after step 2).
//   4. reassembly: the two volumes partition the occupied voxels, and no
//      two different groups touch inside one volume.
//
// Thread safety: pure functions.
#ifndef TANDEM_ML_KERNELS_SEARCH_PART_PACKER_H_
#define TANDEM_ML_KERNELS_SEARCH_PART_PACKER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::ml::kernels::search {

struct ContactEdge {
  int64_t a = 0, b = 0;  // a < b
  double weight = 0;     // > 0
};

struct ContactGraph {
  int64_t nodes = 0;
  std::vector<ContactEdge> edges;  // sorted by (a, b), no duplicates
};

// A voxel grid of part labels: labels[(x * ny + y) * nz + z] is -1 (empty)
// or a part id in [0, parts).
struct VoxelParts {
  int64_t nx = 0, ny = 0, nz = 0;
  int64_t parts = 0;
  std::vector<int32_t> labels;
};

// INVALID_ARGUMENT unless every dim is in [1, 1024], nx ny nz <= 2^27,
// labels has nx ny nz entries in [-1, parts) and 1 <= parts <= 65536.
absl::Status ValidateVoxelParts(const VoxelParts& v);

// Step 1. radius in [1, 4]. Errors as ValidateVoxelParts, or radius out of range.
absl::StatusOr<ContactGraph> ContactGraphFromVoxels(const VoxelParts& v, int64_t radius);

struct Contraction {
  std::vector<int64_t> group;  // node -> group in [0, groups), numbered by smallest member
  int64_t groups = 0;
  ContactGraph quotient;       // graph between groups (weights summed)
  int64_t contractions = 0;    // merges performed
};

// Step 2. INVALID_ARGUMENT when an edge has endpoints outside [0, nodes),
// a == b or a non-positive weight.
absl::StatusOr<Contraction> ContractOddCycles(const ContactGraph& g);

struct Colouring {
  std::vector<int> colour;  // per node, 0 or 1
  int64_t conflicts = 0;    // edges with equal colours
};

// Step 3 on any graph; centrality[i] orders the BFS seeds (smaller first,
// ties by index). INVALID_ARGUMENT on sizes or bad edges.
absl::StatusOr<Colouring> TwoColour(const ContactGraph& g, absl::Span<const double> centrality);

struct Packing {
  std::vector<int64_t> group;    // per part
  std::vector<int> part_volume;  // per part, 0 or 1
  int64_t contractions = 0;
  int64_t conflicts = 0;
  int64_t contact_edges = 0;
  VoxelParts volume[2];          // labels of the parts packed into each volume
};

// Steps 1-3 and the two volumes. Errors as ContactGraphFromVoxels.
absl::StatusOr<Packing> PackDualVolumes(const VoxelParts& v, int64_t radius);

struct ReassemblyReport {
  int64_t missing = 0;         // occupied voxels in neither volume (or relabelled)
  int64_t duplicated = 0;      // voxels occupied in both volumes
  int64_t touching_pairs = 0;  // pairs of different groups in contact inside one volume
  bool ok() const { return missing == 0 && duplicated == 0 && touching_pairs == 0; }
};

// Step 4. INVALID_ARGUMENT when the volumes' shapes differ from the input's
// or group has the wrong size.
absl::StatusOr<ReassemblyReport> CheckReassembly(const VoxelParts& original, const Packing& p,
                                                 int64_t radius);

}  // namespace tandem::ml::kernels::search

#endif  // TANDEM_ML_KERNELS_SEARCH_PART_PACKER_H_
