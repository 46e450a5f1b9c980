#include "ml/kernels/search/part_packer.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::ml::kernels::search {
namespace {

using ::tandem::testing::StatusIs;

ContactGraph Graph(int64_t n, std::vector<ContactEdge> edges) { return {n, std::move(edges)}; }

TEST(PartPacker, SpecColouringVector) {
  // Path 0-1-2 plus 0-3, isolated 4 (farthest from the centre) -> [0,1,0,1,1].
  const ContactGraph g = Graph(5, {{0, 1, 1}, {0, 3, 1}, {1, 2, 1}});
  TANDEM_ASSERT_OK_AND_ASSIGN(Colouring c, TwoColour(g, std::vector<double>{0.1, 0.5, 0.9, 0.4, 3}));
  EXPECT_EQ(c.colour, (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(c.conflicts, 0);
}

TEST(PartPacker, TriangleIsContractedAtItsHeaviestEdge) {
  const ContactGraph g = Graph(3, {{0, 1, 1}, {0, 2, 2}, {1, 2, 5}});
  TANDEM_ASSERT_OK_AND_ASSIGN(Colouring raw, TwoColour(g, std::vector<double>{0, 1, 2}));
  EXPECT_EQ(raw.conflicts, 1);
  TANDEM_ASSERT_OK_AND_ASSIGN(Contraction c, ContractOddCycles(g));
  EXPECT_EQ(c.contractions, 1);
  EXPECT_EQ(c.groups, 2);
  EXPECT_EQ(c.group, (std::vector<int64_t>{0, 1, 1}));  // 1 and 2 merged
  ASSERT_EQ(c.quotient.edges.size(), 1u);
  EXPECT_EQ(c.quotient.edges[0].weight, 3);  // 1 + 2 summed
  TANDEM_ASSERT_OK_AND_ASSIGN(Colouring q, TwoColour(c.quotient, std::vector<double>{0, 1}));
  EXPECT_EQ(q.conflicts, 0);
}

TEST(PartPacker, RandomGraphsBecomeBipartiteThroughConnectedMerges) {
  std::mt19937_64 gen(17);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = 5 + gen() % 25;
    ContactGraph g{n, {}};
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = a + 1; b < n; ++b)
        if (gen() % 100 < 15) g.edges.push_back({a, b, 1.0 + gen() % 10});
    TANDEM_ASSERT_OK_AND_ASSIGN(Contraction c, ContractOddCycles(g));
    EXPECT_EQ(c.groups + c.contractions, n);
    TANDEM_ASSERT_OK_AND_ASSIGN(Colouring col,
                                TwoColour(c.quotient, std::vector<double>(c.groups, 0.0)));
    EXPECT_EQ(col.conflicts, 0);
    // Every group is connected through original edges inside it.
    for (int64_t grp = 0; grp < c.groups; ++grp) {
      std::vector<int64_t> members;
      for (int64_t i = 0; i < n; ++i)
        if (c.group[i] == grp) members.push_back(i);
      std::vector<bool> seen(n, false);
      std::vector<int64_t> stack{members[0]};
      seen[members[0]] = true;
      int64_t reached = 0;
      while (!stack.empty()) {
        const int64_t u = stack.back();
        stack.pop_back();
        ++reached;
        for (const ContactEdge& e : g.edges) {
          const int64_t w = e.a == u ? e.b : (e.b == u ? e.a : -1);
          if (w >= 0 && !seen[w] && c.group[w] == grp) {
            seen[w] = true;
            stack.push_back(w);
          }
        }
      }
      EXPECT_EQ(reached, static_cast<int64_t>(members.size())) << "group " << grp;
    }
  }
}

TEST(PartPacker, ContactWeightsCountVoxelPairs) {
  // A at x = 0, B at x = 1, both y in {0, 1}: with radius 1 every A voxel sees
  // both B voxels -> 4 pairs; C at x = 3 is 2 away from B: no contact.
  VoxelParts v{4, 2, 1, 3, std::vector<int32_t>(8, -1)};
  v.labels = {0, 0, 1, 1, -1, -1, 2, 2};
  TANDEM_ASSERT_OK_AND_ASSIGN(ContactGraph g, ContactGraphFromVoxels(v, 1));
  ASSERT_EQ(g.edges.size(), 1u);
  EXPECT_EQ(g.edges[0].a, 0);
  EXPECT_EQ(g.edges[0].b, 1);
  EXPECT_EQ(g.edges[0].weight, 4);
  TANDEM_ASSERT_OK_AND_ASSIGN(ContactGraph g2, ContactGraphFromVoxels(v, 2));
  EXPECT_EQ(g2.edges.size(), 2u);  // B-C now within reach (4 pairs at distance 2)
}

// Random "object": a ball of radius 10 in a 24^3 grid cut into Voronoi cells
// around `parts` random seeds.
VoxelParts RandomObject(int64_t parts, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(2, 22);
  std::vector<double> s(3 * parts);
  for (double& x : s) x = u(gen);
  VoxelParts v{24, 24, 24, parts, std::vector<int32_t>(24 * 24 * 24, -1)};
  for (int64_t x = 0; x < 24; ++x)
    for (int64_t y = 0; y < 24; ++y)
      for (int64_t z = 0; z < 24; ++z) {
        if (std::hypot(x - 11.5, y - 11.5, z - 11.5) > 10) continue;
        int64_t best = 0;
        double bd = 1e300;
        for (int64_t p = 0; p < parts; ++p) {
          const double d = std::hypot(x - s[3 * p], y - s[3 * p + 1], z - s[3 * p + 2]);
          if (d < bd) bd = d, best = p;
        }
        v.labels[(x * 24 + y) * 24 + z] = static_cast<int32_t>(best);
      }
  return v;
}

TEST(PartPacker, PackedVolumesReassembleWithoutInternalContacts) {
  for (uint64_t seed : {1, 2, 3}) {
    const VoxelParts obj = RandomObject(12, seed);
    TANDEM_ASSERT_OK_AND_ASSIGN(Packing p, PackDualVolumes(obj, 1));
    EXPECT_EQ(p.conflicts, 0);
    EXPECT_GT(p.contact_edges, 11);  // Voronoi cells of a ball touch a lot
    TANDEM_ASSERT_OK_AND_ASSIGN(ReassemblyReport r, CheckReassembly(obj, p, 1));
    EXPECT_TRUE(r.ok()) << r.missing << " " << r.duplicated << " " << r.touching_pairs;
    // Break it: move one voxel of volume 0 into volume 1 as well.
    Packing broken = p;
    for (size_t i = 0; i < obj.labels.size(); ++i) {
      if (broken.volume[0].labels[i] >= 0) {
        broken.volume[1].labels[i] = broken.volume[0].labels[i];
        break;
      }
    }
    TANDEM_ASSERT_OK_AND_ASSIGN(ReassemblyReport rb, CheckReassembly(obj, broken, 1));
    EXPECT_EQ(rb.duplicated, 1);
    EXPECT_FALSE(rb.ok());
  }
}

TEST(PartPacker, StackedSlabsAlternate) {
  // Five 2-voxel slabs along x touch only their neighbours: a path, no merges.
  VoxelParts v{10, 3, 3, 5, std::vector<int32_t>(90)};
  for (int64_t x = 0; x < 10; ++x)
    for (int64_t i = 0; i < 9; ++i) v.labels[x * 9 + i] = static_cast<int32_t>(x / 2);
  TANDEM_ASSERT_OK_AND_ASSIGN(Packing p, PackDualVolumes(v, 1));
  EXPECT_EQ(p.contractions, 0);
  EXPECT_EQ(p.part_volume, (std::vector<int>{0, 1, 0, 1, 0}));  // the middle slab seeds colour 0
}

TEST(PartPacker, RejectsBadInput) {
  VoxelParts v{2, 2, 2, 2, std::vector<int32_t>(8, 0)};
  v.labels[3] = 2;
  EXPECT_THAT(PackDualVolumes(v, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  v.labels[3] = 1;
  EXPECT_THAT(PackDualVolumes(v, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  v.labels.pop_back();
  EXPECT_THAT(PackDualVolumes(v, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ContractOddCycles(Graph(2, {{0, 0, 1}})), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TwoColour(Graph(2, {{0, 1, 1}}), std::vector<double>{0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::ml::kernels::search
