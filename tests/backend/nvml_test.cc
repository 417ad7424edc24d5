// NVML topology: the nvidia-smi vocabulary, the fabric classification, and a
// query that degrades to kUnavailable (with the loader's reason) on machines
// without the driver instead of crashing.
#include <gtest/gtest.h>

#include "backend/nvml_topology.h"

namespace paratune::backend {
namespace {

TEST(Nvml, TopologyLevelsUseTheNvidiaSmiLegend) {
  // nvmlGpuTopologyLevel_t: SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30, NODE 40, SYSTEM 50.
  EXPECT_STREQ(TopologyLevelName(10), "PIX");
  EXPECT_STREQ(TopologyLevelName(20), "PXB");
  EXPECT_STREQ(TopologyLevelName(30), "PHB");
  EXPECT_STREQ(TopologyLevelName(40), "NODE");
  EXPECT_STREQ(TopologyLevelName(50), "SYS");
  EXPECT_STREQ(TopologyLevelName(7), "?");
}

NvmlTopology Topology(int n, int switch_links, const std::string& cell) {
  NvmlTopology t;
  for (int i = 0; i < n; ++i) {
    NvmlGpu g;
    g.nvlinks_to_switch = switch_links;
    g.nvlinks_active = switch_links;
    t.gpus.push_back(g);
  }
  t.matrix.assign(static_cast<size_t>(n), std::vector<std::string>(static_cast<size_t>(n), cell));
  for (int i = 0; i < n; ++i) t.matrix[static_cast<size_t>(i)][static_cast<size_t>(i)] = "X";
  return t;
}

TEST(Nvml, ClassifiesDgxMeshAndPcieNodes) {
  EXPECT_EQ(ClassifyFabric(Topology(8, 18, "NV18")), "nvswitch");  // DGX H100
  EXPECT_EQ(ClassifyFabric(Topology(4, 0, "NV4")), "mesh");        // Perlmutter-like board
  EXPECT_EQ(ClassifyFabric(Topology(4, 0, "SYS")), "pcie");
  EXPECT_EQ(ClassifyFabric(NvmlTopology{}), "pcie");
}

TEST(Nvml, QueryEitherReadsTheGpusOrSaysWhyNot) {
  auto t = QueryNvmlTopology();
  if (t.ok()) {
    ASSERT_FALSE(t->gpus.empty());
    ASSERT_EQ(t->matrix.size(), t->gpus.size());
    EXPECT_EQ(t->matrix[0][0], "X");
  } else {
    EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
    EXPECT_TRUE(t.status().message().find("NVML") != std::string::npos ||
                t.status().message().find("nvml") != std::string::npos)
        << t.status().message();
  }
}

}  // namespace
}  // namespace paratune::backend
