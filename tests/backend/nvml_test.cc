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

// The CUDA module finds its device's NVML entry (clocks) by PCI bus id: CUDA
// spells the domain with 4 digits ("0000:07:00.0"), NVML with 8
// ("00000000:07:00.0"), in either case.
TEST(Nvml, FindsAGpuByEitherSpellingOfItsBusId) {
  NvmlTopology t;
  NvmlGpu a, b;
  a.pci_bus_id = "00000000:07:00.0";
  a.sm_clock_max_MHz = 1980;  // H100 SXM's maximum SM clock (NVIDIA H100 datasheet: 1.98 GHz)
  b.pci_bus_id = "00000000:0F:00.0";
  t.gpus = {a, b};
  const NvmlGpu* g = FindNvmlGpu(t, "0000:07:00.0");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->sm_clock_max_MHz, 1980);
  EXPECT_EQ(FindNvmlGpu(t, "0000:0f:00.0"), &t.gpus[1]);
  EXPECT_EQ(FindNvmlGpu(t, "0000:08:00.0"), nullptr);
}

}  // namespace
}  // namespace paratune::backend
