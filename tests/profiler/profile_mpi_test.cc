// MPI tier: `paratune profile --backend mpi-cpu` from end to end on real
// processes (run under mpirun -np 4 on loopback). Every rank measures; rank 0
// writes the profile; the planner-side loader then accepts it and the fits
// land in the cluster description. Rank 0 prints what it measured.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "profiler/profile.h"
#include "profiler/report.h"
#include "profiler/runner.h"
#include "topology/cluster.h"

namespace paratune::profiler {
namespace {

std::string OutDir() {
  const char* d = std::getenv("PARATUNE_TEST_OUT");
  return d ? d : (std::filesystem::temp_directory_path() / "paratune_mpi_test").string();
}

TEST(ProfileMpi, CpuBackendProfileIsAcceptedByThePlanner) {
  const std::string dir = OutDir();
  ProfileRunOptions o;
  o.backend.name = "mpi-cpu";
  o.quick = true;
  o.sweep = SizeSweep{4096, 4 << 20, 4, 0};  // 4 KiB … 4 MiB
  o.iters = 3;
  o.samples = 3;
  o.out_path = dir + "/cpu_profile.json";
  o.report_path = dir + "/cpu_report.txt";
  o.cache_dir = dir + "/cache";
  o.refresh = true;
  o.tool = "paratune test";
  o.argv = {"paratune", "profile", "--backend", "mpi-cpu", "--quick"};
  auto r = RunProfile(
      o, [](const std::string& l) { std::fprintf(stderr, "[profile] %s\n", l.c_str()); }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->world_size, 4) << "run under mpirun -np 4";
  if (r->rank != 0) return;  // rank 0 writes and checks

  auto p = LoadProfile(o.out_path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->environment.backend, "mpi-cpu");
  EXPECT_EQ(p->environment.world_size, 4);
  EXPECT_EQ(p->environment.hosts.size(), 4u);
  EXPECT_FALSE(p->environment.versions.at("mpi").empty());
  // Quick on 4 ranks of one host: groups of 2 and 4, five collectives each.
  EXPECT_EQ(p->collectives.size(), 10u) << FormatFits(*p);
  for (const CollectiveEntry& e : p->collectives) {
    EXPECT_EQ(e.tier, topology::Tier::kIntraNode);
    EXPECT_GT(e.beta_GBps, 0);
    EXPECT_GE(e.residual, 0.0);  // kept (loopback on shared cores is noisy: no bound asserted)
  }
  ASSERT_EQ(p->gemm.size(), 1u);
  EXPECT_EQ(p->gemm[0].precision, topology::Precision::kFp32);
  ASSERT_TRUE(p->copy.has_value());
  ASSERT_TRUE(p->p2p.has_value());

  // The planner's loader: apply to the cluster it was measured on.
  ASSERT_TRUE(p->cluster.has_value());
  topology::ClusterSpec c = *p->cluster;
  ASSERT_TRUE(ApplyProfile(*p, &c).ok());
  EXPECT_EQ(c.profile_fingerprint, ProfileFingerprint(*p));
  EXPECT_EQ(c.fits.size(), 10u);
  const auto cost = topology::GroupCost(c, topology::Collective::kAllReduce, 1, 4);
  double beta4 = 0;
  for (const CollectiveEntry& e : p->collectives) {
    if (e.collective == topology::Collective::kAllReduce && e.group_size == 4) beta4 = e.beta_GBps;
  }
  EXPECT_DOUBLE_EQ(cost.busbw_GBps, beta4);
  // The measured fp32 curve replaced the discovered placeholder ({1.0 at size 1}):
  // it spans the measured shapes, 64³ upwards.
  const auto& curve = c.gpu.gemm_efficiency[static_cast<size_t>(topology::Precision::kFp32)];
  ASSERT_GE(curve.size(), 2u);
  EXPECT_EQ(curve.front().size, 64);

  std::printf("\n== measured on this machine (mpi-cpu, 4 ranks) ==\n%s", FormatFits(*p).c_str());
  std::printf("device copy %.2f GB/s (bytes read + written)\n", p->copy->GBps);
}

}  // namespace
}  // namespace paratune::profiler
