// GPU tier: `paratune profile --backend cuda --quick` on this machine's GPU(s),
// skipped where there is no usable device. It prints the bf16 GEMM rate at
// large shapes, the HBM copy bandwidth and a single-GPU NCCL sanity row.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "backend/cuda_nccl.h"
#include "profiler/profile.h"
#include "profiler/runner.h"

namespace paratune::profiler {
namespace {

TEST(ProfileGpu, QuickProfileOfThisGpu) {
  auto n = backend::CudaDeviceCount();
  if (!n.ok()) GTEST_SKIP() << n.status().message();
  const auto dir = std::filesystem::temp_directory_path() / "paratune_gpu_test";
  std::filesystem::create_directories(dir);
  ProfileRunOptions o;
  o.backend.name = "cuda";
  o.backend.cuda_use_mpi = false;
  o.quick = true;
  o.out_path = (dir / "gpu_profile.json").string();
  o.report_path = (dir / "gpu_report.txt").string();
  o.use_cache = false;
  o.tool = "paratune test";
  auto r = RunProfile(
      o, [](const std::string& l) { std::fprintf(stderr, "[profile] %s\n", l.c_str()); }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Profile& p = r->profile;
  ASSERT_FALSE(p.gemm.empty());
  double best = 0;
  for (const GemmSample& s : p.gemm[0].samples) best = std::max(best, s.tflops);
  EXPECT_GT(best, 50.0);
  ASSERT_TRUE(p.copy.has_value());
  EXPECT_GT(p.copy->GBps, 100.0);
  std::printf("bf16 GEMM best %.1f TFLOP/s; device copy %.1f GB/s (read + written)\n", best,
              p.copy->GBps);
  std::printf("%s\n", r->report.c_str());
  ASSERT_TRUE(p.cluster.has_value());
  topology::ClusterSpec c = *p.cluster;
  EXPECT_TRUE(ApplyProfile(p, &c).ok());
}

}  // namespace
}  // namespace paratune::profiler
