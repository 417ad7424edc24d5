#include "topology/graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/topology/test_util.h"

namespace paratune::topology {
namespace {

using testing::MustCluster;

TEST(NodeGraphTest, SwitchNodeShape) {
  const ClusterSpec c = MustCluster("dgx-h100");
  const NodeBandwidths n = AnalyzeNode(c);
  // 8 GPUs + NVSwitch hub + 8 NICs + network; every link both ways.
  EXPECT_EQ(n.num_vertices, 8 + 1 + 8 + 1);
  EXPECT_EQ(n.num_edges, 2 * (8 + 8 + 8));
  EXPECT_DOUBLE_EQ(n.injection_GBps, c.NodeInjectionGBps());
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      EXPECT_DOUBLE_EQ(n.link_GBps[a][b], 0.0);  // no direct GPU-GPU edges on a switch
      EXPECT_DOUBLE_EQ(n.path_GBps[a][b], a == b ? 0.0 : 370.0);
    }
    EXPECT_DOUBLE_EQ(n.to_network_GBps[a], 50 * 0.94);
    EXPECT_EQ(NicOfGpu(c, a), a);
  }
}

TEST(NodeGraphTest, MeshEdgesComeFromTheLinkMatrix) {
  const ClusterSpec c = MustCluster("perlmutter");
  const NodeBandwidths n = AnalyzeNode(c);
  EXPECT_EQ(n.num_vertices, 4 + 4 + 1);
  EXPECT_EQ(n.num_edges, 12 + 2 * 4 + 2 * 4);
  EXPECT_EQ(n.link_GBps, c.link_GBps);
  EXPECT_DOUBLE_EQ(n.injection_GBps, c.NodeInjectionGBps());
}

// Frontier's GCDs that share no Infinity Fabric link reach each other through
// a third GCD at the bottleneck of the two hops.
TEST(NodeGraphTest, FrontierRoutesAroundMissingLinks) {
  const ClusterSpec c = MustCluster("frontier");
  const NodeBandwidths n = AnalyzeNode(c);
  EXPECT_DOUBLE_EQ(n.link_GBps[0][1], 200);
  EXPECT_DOUBLE_EQ(n.path_GBps[0][1], 200);
  EXPECT_DOUBLE_EQ(n.path_GBps[0][6], 100);
  EXPECT_DOUBLE_EQ(n.link_GBps[0][4], 0);
  EXPECT_DOUBLE_EQ(n.path_GBps[0][4], 50);  // 0-6-4 or 0-2-4
  // 0-2 is a single link; every detour (0-6-4-2, 0-1-3-2) also crosses a 50 GB/s link.
  EXPECT_DOUBLE_EQ(n.path_GBps[0][2], 50);
  EXPECT_DOUBLE_EQ(n.injection_GBps, 100);
  // One NIC per MI250X: GCDs 2k and 2k+1 share NIC k.
  for (int g = 0; g < 8; ++g) EXPECT_EQ(NicOfGpu(c, g), g / 2);
}

TEST(NodeGraphTest, PolarisSharesNics) {
  const ClusterSpec c = MustCluster("polaris");
  const NodeBandwidths n = AnalyzeNode(c);
  EXPECT_EQ(NicOfGpu(c, 0), 0);
  EXPECT_EQ(NicOfGpu(c, 1), 0);
  EXPECT_EQ(NicOfGpu(c, 2), 1);
  EXPECT_EQ(NicOfGpu(c, 3), 1);
  EXPECT_EQ(n.num_vertices, 4 + 2 + 1);
  for (double v : n.to_network_GBps) EXPECT_DOUBLE_EQ(v, 25 * 0.96);
  EXPECT_DOUBLE_EQ(n.injection_GBps, c.NodeInjectionGBps());
}

// Two islands of a (hand-built, unvalidated) mesh stay apart even though both
// reach the network: intra-node paths never hairpin through a NIC.
TEST(NodeGraphTest, PathsStayInsideTheNode) {
  ClusterSpec c = MustCluster("polaris");
  c.link_GBps = {{0, 100, 0, 0}, {100, 0, 0, 0}, {0, 0, 0, 100}, {0, 0, 100, 0}};
  const NodeBandwidths n = AnalyzeNode(c);
  EXPECT_DOUBLE_EQ(n.path_GBps[0][1], 100);
  EXPECT_DOUBLE_EQ(n.path_GBps[0][2], 0);
  EXPECT_DOUBLE_EQ(n.path_GBps[3][1], 0);
  EXPECT_GT(n.to_network_GBps[0], 0);
  EXPECT_GT(n.to_network_GBps[2], 0);
}

TEST(NodeGraphTest, InjectionMatchesSpecForEveryPreset) {
  for (const std::string& name : ClusterPresetNames()) {
    const ClusterSpec c = MustCluster(name);
    const NodeBandwidths n = AnalyzeNode(c);
    EXPECT_NEAR(n.injection_GBps, c.NodeInjectionGBps(), 1e-9) << name;
    for (int a = 0; a < c.gpus_per_node; ++a) {
      for (int b = 0; b < c.gpus_per_node; ++b) {
        if (a != b) {
          EXPECT_GT(n.path_GBps[a][b], 0) << name << " " << a << "->" << b;
        }
        EXPECT_DOUBLE_EQ(n.path_GBps[a][b], n.path_GBps[b][a]) << name;  // symmetric links
      }
    }
  }
}

// The domain graph of an NVL72 rack: 72 GPUs on one switch, 18 trays of 4
// with their own NICs. GPUs of different trays reach each other through the
// switch at the port figure, far above what the trays' NICs would give.
TEST(DomainGraphTest, Nvl72RackOfTrays) {
  const ClusterSpec c = MustCluster("gb200-nvl72");
  const DomainBandwidths d = AnalyzeDomain(c);
  EXPECT_EQ(d.gpus, 72);
  EXPECT_EQ(d.nodes, 18);
  // 72 GPUs + 1 switch + 72 NICs + 1 network.
  EXPECT_EQ(d.num_vertices, 72 + 1 + 72 + 1);
  EXPECT_DOUBLE_EQ(d.cross_node_GBps, c.intra_node_GBps);
  EXPECT_GE(d.cross_node_via_network_GBps, d.cross_node_GBps);  // may also route via the switch
  ClusterSpec no_switch = c;
  no_switch.intra_node_GBps = 1e-3;  // a domain whose switches barely carry anything
  EXPECT_NEAR(AnalyzeDomain(no_switch).cross_node_via_network_GBps, 50 * 0.94, 1e-9);
  // Single-node domains have no cross-node path.
  const DomainBandwidths dgx = AnalyzeDomain(MustCluster("dgx-b200"));
  EXPECT_EQ(dgx.nodes, 1);
  EXPECT_DOUBLE_EQ(dgx.cross_node_GBps, 0);
}

}  // namespace
}  // namespace paratune::topology
