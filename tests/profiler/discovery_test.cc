// Discovery: NICs from sysfs, the CPU from /proc/cpuinfo, GPU names to
// presets, and cluster descriptions that the strict parser accepts and whose
// fingerprint depends only on the hardware.
#include "profiler/discovery.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace paratune::profiler {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(Discovery, ReadsActiveInfinibandPortsAndTheirRates) {
  const std::string root = testing::ScratchDir("ib");
  Write(root + "/mlx5_0/ports/1/state", "4: ACTIVE\n");
  Write(root + "/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  Write(root + "/mlx5_1/ports/1/state", "1: DOWN\n");
  Write(root + "/mlx5_1/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  Write(root + "/mlx5_2/ports/1/state", "4: ACTIVE\n");
  Write(root + "/mlx5_2/ports/1/rate", "200 Gb/sec (4X HDR)\n");
  auto nics = ReadInfinibandNics(root);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].name, "mlx5_0:1");
  EXPECT_DOUBLE_EQ(nics[0].rate_Gbps, 400);
  EXPECT_DOUBLE_EQ(nics[1].rate_Gbps, 200);
  EXPECT_TRUE(ReadInfinibandNics(root + "/absent").empty());
  std::filesystem::remove_all(root);
}

TEST(Discovery, ReadsTheCpusModelClockAndVectorWidth) {
  const std::string root = testing::ScratchDir("cpu");
  std::string cpuinfo;
  for (int i = 0; i < 4; ++i) {
    cpuinfo += "processor\t: " + std::to_string(i) +
               "\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 3100.000\n"
               "flags\t\t: fpu sse sse2 avx fma avx2 avx512f\n\n";
  }
  Write(root + "/cpuinfo", cpuinfo);
  CpuInfo c = ReadCpuInfo(root + "/cpuinfo", root + "/absent");
  EXPECT_EQ(c.logical_cpus, 4);
  EXPECT_DOUBLE_EQ(c.max_GHz, 2.5);  // the nominal clock, not the momentary MHz
  EXPECT_EQ(c.fp32_flops_per_cycle, 64);
  Write(root + "/max", "3700000\n");
  EXPECT_DOUBLE_EQ(ReadCpuInfo(root + "/cpuinfo", root + "/max").max_GHz, 3.7);
  std::filesystem::remove_all(root);
}

TEST(Discovery, MatchesCudaDeviceNamesToPresets) {
  EXPECT_EQ(*MatchGpuPreset("NVIDIA H100 80GB HBM3", int64_t{80} << 30), "h100-sxm");
  EXPECT_EQ(*MatchGpuPreset("NVIDIA A100-SXM4-40GB", int64_t{40} << 30), "a100-40gb");
  EXPECT_EQ(*MatchGpuPreset("NVIDIA A100 80GB PCIe", int64_t{80} << 30), "a100-80gb");
  EXPECT_EQ(*MatchGpuPreset("NVIDIA H200", int64_t{141} << 30), "h200");
  EXPECT_EQ(*MatchGpuPreset("NVIDIA GH200 480GB", int64_t{96} << 30), "gh200");
  EXPECT_EQ(MatchGpuPreset("Tesla T4", int64_t{16} << 30).status().code(), StatusCode::kNotFound);
}

Discovery DgxH100() {
  Discovery d;
  d.backend = "cuda";
  for (int n = 0; n < 2; ++n) {
    for (int g = 0; g < 8; ++g) d.hosts.push_back("dgx" + std::to_string(n));
  }
  d.nodes = 2;
  d.ranks_per_node = 8;
  d.device.kind = "cuda";
  d.device.name = "NVIDIA H100 80GB HBM3";
  d.device.memory_bytes = 85029158912;  // cudaGetDeviceProperties on an H100 SXM
  d.device.multiprocessors = 132;
  backend::NvmlTopology t;
  for (int g = 0; g < 8; ++g) {
    backend::NvmlGpu gpu;
    gpu.nvlinks_active = gpu.nvlinks_to_switch = 18;
    t.gpus.push_back(gpu);
  }
  t.matrix.assign(8, std::vector<std::string>(8, "NV18"));
  d.nvml = t;
  for (int i = 0; i < 8; ++i) d.nics.push_back({"mlx5_" + std::to_string(i) + ":1", 400});
  return d;
}

TEST(Discovery, DgxH100BecomesAClusterThePlannerAccepts) {
  auto c = ClusterFromDiscovery(DgxH100());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gpu.name, "h100-sxm");
  EXPECT_NEAR(c->gpu.memory_GiB, 79.19, 0.01);
  EXPECT_EQ(c->gpus_per_node, 8);
  EXPECT_EQ(c->max_nodes, 2);
  EXPECT_EQ(c->intra_node_fabric, "nvswitch");
  EXPECT_NEAR(c->intra_node_GBps, 18 * 25 * c->link_efficiency, 1e-9);
  EXPECT_EQ(c->nics_per_node, 8);
  EXPECT_DOUBLE_EQ(c->nic_GBps, 50);
  // Same hardware, same fingerprint: the cache key does not move between runs.
  EXPECT_EQ(topology::Fingerprint(*c), topology::Fingerprint(*ClusterFromDiscovery(DgxH100())));
  Discovery other = DgxH100();
  other.nics.pop_back();
  EXPECT_NE(topology::Fingerprint(*c), topology::Fingerprint(*ClusterFromDiscovery(other)));
}

TEST(Discovery, CpuRanksGetANominalPeakAndAnIdealCurve) {
  Discovery d;
  d.backend = "mpi-cpu";
  d.hosts = {"h", "h", "h", "h"};
  d.nodes = 1;
  d.ranks_per_node = 4;
  d.device.kind = "cpu";
  d.device.name = "AMD EPYC 7763 64-Core Processor";
  d.device.memory_bytes = int64_t{64} << 30;
  d.device.multiprocessors = 2;
  d.cpu.max_GHz = 2.45;
  d.cpu.fp32_flops_per_cycle = 32;
  auto c = ClusterFromDiscovery(d);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->gpu.peak_tflops[static_cast<size_t>(topology::Precision::kFp32)],
              2 * 2.45 * 32 / 1e3, 1e-12);
  EXPECT_EQ(c->intra_node_fabric, "pcie");
  EXPECT_EQ(c->gpus_per_node, 4);
  EXPECT_NE(c->gpu.sources.at("peak_tflops").find("estimate"), std::string::npos);
}

}  // namespace
}  // namespace paratune::profiler
