// NCCL's tuner on placed groups (topology/collective_algorithms.h): the
// latencies NCCL's own tables give (tuning.cc at v2.28.9-1, the worked
// examples in docs/model.md "Collectives"), which algorithm runs where, and
// published nccl-tests figures the placement bandwidths must meet.
#include "topology/collective_algorithms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "topology/cluster.h"

namespace paratune::topology {
namespace {

const AlgoOption* Find(const AlgoOptions& o, Algorithm a, Protocol p) {
  for (int i = 0; i < o.count; ++i) {
    if (o.items[i].algorithm == a && o.items[i].protocol == p) return &o.items[i];
  }
  return nullptr;
}

GroupShape Hopper(int ranks, int nodes) {
  GroupShape g;
  g.ranks = ranks;
  g.nodes = nodes;
  g.arch = NcclArch::kHopper;
  g.ring_GBps = 360;
  g.intra_GBps = 360;
  g.node_nic_GBps = 376;
  return g;
}

// One node of 8 GPUs: ring LL = baseLat 6.6 + 14 steps × 0.6 µs; LL128 =
// 14 + 14 × 1.9; Simple = 8.4 + 14 × 3.4 (tuning.cc:143-168, 370-380).
TEST(NcclTuner, SingleNodeRingLatenciesAreNcclsTables) {
  const AlgoOptions o = NcclOptions(Collective::kAllReduce, Hopper(8, 1));
  ASSERT_NE(Find(o, Algorithm::kRing, Protocol::kLL), nullptr);
  EXPECT_NEAR(Find(o, Algorithm::kRing, Protocol::kLL)->latency_us, 15.0, 1e-3);
  EXPECT_NEAR(Find(o, Algorithm::kRing, Protocol::kLL128)->latency_us, 40.6, 1e-3);
  EXPECT_NEAR(Find(o, Algorithm::kRing, Protocol::kSimple)->latency_us, 56.0, 1e-3);
  // No tree inside one node, no NVLS without the switch's SHARP.
  EXPECT_EQ(Find(o, Algorithm::kTree, Protocol::kSimple), nullptr);
  EXPECT_EQ(Find(o, Algorithm::kNvls, Protocol::kSimple), nullptr);
}

// 16 nodes of 8: ring Simple 8.4 + 224 × 3.4 + 30 × 14 = 1190 µs; tree
// Simple 8.4 + 2 (7 × 4 + 4 × 14) = 176.4, LL 6.8 + 2 (7 × 0.6 + 4 × 5) =
// 55.2, LL128 14 + 2 (7 × 1.25 + 4 × 8.5) = 99.5 (tuning.cc:370-385).
TEST(NcclTuner, MultiNodeRingAndTreeLatencies) {
  const AlgoOptions o = NcclOptions(Collective::kAllReduce, Hopper(128, 16));
  EXPECT_NEAR(Find(o, Algorithm::kRing, Protocol::kSimple)->latency_us, 1190.0, 1e-2);
  EXPECT_NEAR(Find(o, Algorithm::kTree, Protocol::kSimple)->latency_us, 176.4, 1e-2);
  EXPECT_NEAR(Find(o, Algorithm::kTree, Protocol::kLL)->latency_us, 55.2, 1e-2);
  EXPECT_NEAR(Find(o, Algorithm::kTree, Protocol::kLL128)->latency_us, 99.5, 1e-2);
  // A small all-reduce takes the tree: its latency grows with log2(nodes),
  // not with the rank count.
  const AlgoOption* chosen = nullptr;
  FastestSeconds(o, 8, kAnyAlgorithm, &chosen);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->algorithm, Algorithm::kTree);
  const double t32 = FastestSeconds(NcclOptions(Collective::kAllReduce, Hopper(256, 32)), 8);
  const double t64 = FastestSeconds(NcclOptions(Collective::kAllReduce, Hopper(512, 64)), 8);
  EXPECT_NEAR((t64 - t32) * 1e6, 2 * 5.0, 0.01);  // one more tree level: 2 × NET tree LL
}

TEST(NcclTuner, NvlsOnlyWithTheSwitchAndPatOnlyWithOneGpuPerNode) {
  GroupShape g = Hopper(8, 1);
  g.nvls_GBps = 480;
  const AlgoOptions single = NcclOptions(Collective::kAllReduce, g);
  const AlgoOption* chosen = nullptr;
  FastestSeconds(single, 8, kAnyAlgorithm, &chosen);
  EXPECT_EQ(chosen->algorithm, Algorithm::kRing);  // LL for a few bytes
  EXPECT_EQ(chosen->protocol, Protocol::kLL);
  FastestSeconds(single, 1 << 30, kAnyAlgorithm, &chosen);
  EXPECT_EQ(chosen->algorithm, Algorithm::kNvls);  // the switch for a large buffer
  g.nodes = 2;
  g.ranks = 16;
  const AlgoOptions two_nodes = NcclOptions(Collective::kAllReduce, g);  // `chosen` points into it
  FastestSeconds(two_nodes, 1 << 30, kAnyAlgorithm, &chosen);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->algorithm, Algorithm::kNvlsTree);
  // PAT: all-gather with one GPU per node only (tuning.cc:201-209).
  const GroupShape one_per_node = Hopper(64, 64);
  EXPECT_NE(Find(NcclOptions(Collective::kAllGather, one_per_node), Algorithm::kPat,
                 Protocol::kSimple),
            nullptr);
  EXPECT_EQ(Find(NcclOptions(Collective::kAllGather, Hopper(64, 8)), Algorithm::kPat,
                 Protocol::kSimple),
            nullptr);
  // LL128 needs NVLink inside the node.
  GroupShape pcie = Hopper(8, 1);
  pcie.pcie = true;
  EXPECT_EQ(Find(NcclOptions(Collective::kAllReduce, pcie), Algorithm::kRing, Protocol::kLL128),
            nullptr);
}

// Time never falls as the buffer grows, for every collective and option.
TEST(NcclTuner, TimeGrowsWithTheBuffer) {
  for (int c = 0; c < kNumCollectives; ++c) {
    for (int nodes : {1, 2, 16}) {
      GroupShape g = Hopper(8 * nodes, nodes);
      g.nvls_GBps = 480;
      const AlgoOptions o = NcclOptions(static_cast<Collective>(c), g);
      ASSERT_GT(o.count, 0);
      double last = 0;
      for (double bytes = 8; bytes < 1e11; bytes *= 2) {
        const double t = FastestSeconds(o, bytes);
        EXPECT_GE(t, last * (1 - 1e-9)) << CollectiveName(static_cast<Collective>(c)) << " "
                                        << nodes << " nodes " << bytes;
        last = t;
      }
    }
  }
}

// The query, which stops at the first option whose latency exceeds the best
// time, gives the time of weighing every option.
TEST(NcclTuner, FastestIsTheMinimumOverEveryOption) {
  for (int c = 0; c < kNumCollectives; ++c) {
    for (int nodes : {1, 2, 3, 16, 64}) {
      GroupShape g = Hopper(8 * nodes, nodes);
      g.nvls_GBps = nodes % 2 ? 480 : 0;
      const AlgoOptions o = NcclOptions(static_cast<Collective>(c), g);
      for (double bytes = 0.5; bytes < 1e16; bytes *= 1.37) {
        double brute = std::numeric_limits<double>::infinity();
        for (int i = 0; i < o.count; ++i) brute = std::min(brute, OptionSeconds(o.items[i], bytes));
        EXPECT_NEAR(FastestSeconds(o, bytes), brute, 1e-12 * brute)
            << CollectiveName(static_cast<Collective>(c)) << " " << nodes << " nodes " << bytes;
      }
    }
  }
}

// NCCL's pipelined algorithms pay a fill that shrinks, relative to the
// transfer, as the buffer grows (2·sqrt(L·W) against W); point-to-point and
// RCCL pay none.
TEST(NcclTuner, PipelineFillFadesWithSizeAndSparesRcclAndPointToPoint) {
  GroupShape g = Hopper(8, 1);
  g.nvls_GBps = 480;
  const AlgoOptions o = NcclOptions(Collective::kAllReduce, g);
  const AlgoOption* nvls = Find(o, Algorithm::kNvls, Protocol::kSimple);
  ASSERT_NE(nvls, nullptr);
  EXPECT_EQ(nvls->pipeline_fill, kNcclPipelineFill);
  AlgoOption bare = *nvls;
  bare.pipeline_fill = 0;
  double last_share = 1e9;
  for (double bytes = 1 << 20; bytes <= 16.0 * (1 << 30); bytes *= 4) {
    const double fill = OptionSeconds(*nvls, bytes) - OptionSeconds(bare, bytes);
    const double transfer = OptionSeconds(bare, bytes) - nvls->latency_us * 1e-6;
    ASSERT_GT(fill, 0) << bytes;
    EXPECT_LT(fill / transfer, last_share) << bytes;
    last_share = fill / transfer;
  }
  EXPECT_LT(last_share, 0.02);  // 16 GiB: within 2 % of the bandwidth
  g.rccl = true;
  const AlgoOptions rccl = NcclOptions(Collective::kAllReduce, g);
  for (int i = 0; i < rccl.count; ++i) EXPECT_EQ(rccl.items[i].pipeline_fill, 0.0);
  const AlgoOptions a2a = NcclOptions(Collective::kAllToAll, Hopper(8, 1));
  ASSERT_EQ(a2a.count, 1);
  EXPECT_EQ(a2a.items[0].pipeline_fill, 0.0);
  EXPECT_TRUE(RunsRccl("mi300x"));
  EXPECT_FALSE(RunsRccl("h100-sxm"));
}

// Beyond the largest latency the share was fitted at (a ring across hundreds
// of nodes), the fill is taken at that latency, not extrapolated.
TEST(NcclTuner, PipelineFillIsNotExtrapolatedPastTheFittedLatencies) {
  const AlgoOptions o = NcclOptions(Collective::kAllGather, Hopper(2048, 256));
  const AlgoOption* ring = Find(o, Algorithm::kRing, Protocol::kSimple);
  ASSERT_NE(ring, nullptr);
  ASSERT_GT(ring->latency_us, 10 * kPipelineFillMaxLatencyUs);
  auto fill = [](AlgoOption a, double latency_us, double bytes) {
    a.latency_us = latency_us;
    AlgoOption bare = a;
    bare.pipeline_fill = 0;
    return OptionSeconds(a, bytes) - OptionSeconds(bare, bytes);
  };
  const double bytes = 1 << 28;
  EXPECT_NEAR(fill(*ring, ring->latency_us, bytes), fill(*ring, kPipelineFillMaxLatencyUs, bytes),
              1e-12);
  EXPECT_GT(fill(*ring, kPipelineFillMaxLatencyUs, bytes), fill(*ring, kPipelineFillMaxLatencyUs / 4, bytes));
}

TEST(NcclTuner, UnreachableGroupHasNoOption) {
  GroupShape g = Hopper(16, 2);
  g.ring_GBps = 0;
  EXPECT_EQ(NcclOptions(Collective::kAllReduce, g).count, 0);
  EXPECT_TRUE(std::isinf(FastestSeconds(NcclOptions(Collective::kAllReduce, g), 1024)));
}

// Published nccl-tests figures the placement bandwidths meet (nccl_tables.json
// rows; the presets were not fitted to them).
TEST(NcclTuner, AllToAllAcrossNodesIsBoundByEachGpusNic) {
  // OCI MI355X, 2 nodes × 8, 8 × 400 Gb/s: alltoall 16 GiB busbw 86.73 GB/s.
  const ClusterSpec mi = *ClusterPreset("mi355x");
  EXPECT_NEAR(GroupCost(mi, Collective::kAllToAll, 1, 16).busbw_GBps / 86.73, 1.0, 0.05);
  // OCI GB200, 32 trays over 2 racks (1 × 400 Gb/s per GPU): 8 GiB busbw 89.7 GB/s;
  // the preset lays 72 GPUs per rack where OCI used 64, so within 20 %.
  const ClusterSpec gb = *ClusterPreset("gb200-nvl72");
  EXPECT_NEAR(GroupCost(gb, Collective::kAllToAll, 1, 128).busbw_GBps / 89.7, 1.0, 0.2);
}

TEST(NcclTuner, RingsAcrossNvlinkDomainsPoolTheDomainsNics) {
  // OCI GB200, 2 racks, 128 ranks: all_reduce 8 GiB 21.3 ms (busbw 799.8 GB/s),
  // close to one rack's 891.6: the NICs of a rack serve the ring together.
  const ClusterSpec gb = *ClusterPreset("gb200-nvl72");
  const double t = CollectiveSeconds(gb, Collective::kAllReduce, 1, 128, 8589934592.0);
  EXPECT_NEAR(t / 21313e-6, 1.0, 0.15);
}

}  // namespace
}  // namespace paratune::topology
