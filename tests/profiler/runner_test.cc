// RunProfile and ImportProfile from end to end on the fake backend: the
// cache is used, refreshed and locked as documented, faults fail the run with
// their reason and leave nothing in the cache, and imports become profiles
// the planner loads.
#include "profiler/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "profiler/cache.h"
#include "test_util.h"

namespace paratune::profiler {
namespace {

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ScratchDir("runner");
    o_.backend.name = "fake";
    o_.out_path = dir_ + "/profile.json";
    o_.report_path = dir_ + "/report.txt";
    o_.measurements_path = dir_ + "/measurements.json";
    o_.cluster_out_path = dir_ + "/cluster.json";
    o_.cache_dir = dir_ + "/cache";
    o_.tool = "paratune test";
    o_.argv = {"paratune", "profile", "--backend", "fake"};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  ProfileRunOptions o_;
};

TEST_F(RunnerTest, MeasuresFitsCachesAndWritesEverything) {
  std::vector<std::string> progress;
  auto r = RunProfile(
      o_, [&](const std::string& l) { progress.push_back(l); }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->from_cache);
  EXPECT_FALSE(progress.empty());
  auto p = LoadProfile(o_.out_path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // One rank: collectives waived, GEMMs fitted, the environment recorded.
  EXPECT_TRUE(p->collectives.empty());
  ASSERT_FALSE(p->gemm.empty());
  EXPECT_EQ(p->environment.backend, "fake");
  EXPECT_EQ(p->environment.argv, o_.argv);
  EXPECT_EQ(p->environment.world_size, 1);
  ASSERT_TRUE(p->cluster.has_value());
  EXPECT_EQ(p->cluster_fingerprint, topology::Fingerprint(*p->cluster));
  EXPECT_TRUE(std::filesystem::exists(r->cache_path));
  for (const std::string& f : {o_.report_path, o_.measurements_path, o_.cluster_out_path}) {
    EXPECT_TRUE(std::filesystem::exists(f)) << f;
  }
  // The planner side: the profile applies to the cluster it was measured on.
  topology::ClusterSpec c = *p->cluster;
  ASSERT_TRUE(ApplyProfile(*p, &c).ok());
  EXPECT_EQ(c.profile_fingerprint, ProfileFingerprint(*p));
}

TEST_F(RunnerTest, TheSecondRunUsesTheCacheUnlessRefreshed) {
  auto first = RunProfile(o_, nullptr, nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::filesystem::remove(o_.out_path);
  std::filesystem::remove(o_.cluster_out_path);
  auto second = RunProfile(o_, nullptr, nullptr);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(ProfileFingerprint(second->profile), ProfileFingerprint(first->profile));
  EXPECT_TRUE(std::filesystem::exists(o_.out_path));
  // --cluster-out is written from the cache too (README: measure → plan, run twice),
  // and it is the cluster the cached profile is tied to.
  auto text = ReadFileToString(o_.cluster_out_path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto cluster = topology::ResolveCluster(Json::parse(*text), "");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(topology::Fingerprint(*cluster), second->profile.cluster_fingerprint);
  o_.refresh = true;
  auto third = RunProfile(o_, nullptr, nullptr);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->from_cache);
}

TEST_F(RunnerTest, ALockedCacheRefusesAndWritesNothing) {
  auto probe = RunProfile(
      [this] {
        ProfileRunOptions o = o_;
        o.use_cache = false;
        return o;
      }(),
      nullptr, nullptr);
  ASSERT_TRUE(probe.ok());
  std::filesystem::remove(o_.out_path);
  auto lock = CacheLock::TryAcquire(SyntheticCacheDir(o_.cache_dir),
                                   probe->profile.cluster_fingerprint);
  ASSERT_TRUE(lock.ok());
  auto r = RunProfile(o_, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(o_.out_path));
  EXPECT_FALSE(
      std::filesystem::exists(CachedProfilePath(o_.cache_dir, probe->profile.cluster_fingerprint)));
}

TEST_F(RunnerTest, ADyingRankFailsTheRunAndLeavesTheCacheEmpty) {
  for (const char* fault : {"rank_dies@3", "rank_dies@40"}) {
    auto plan = backend::ParseFaultPlan(fault);
    ASSERT_TRUE(plan.ok());
    o_.backend.fault = *plan;
    auto r = RunProfile(o_, nullptr, nullptr);
    ASSERT_FALSE(r.ok()) << fault;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable)
        << fault << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("rank 0 died"), std::string::npos) << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(o_.out_path)) << fault;
    const bool cached = std::filesystem::exists(o_.cache_dir + "/profiles") &&
                        std::any_of(std::filesystem::directory_iterator(o_.cache_dir + "/profiles"),
                                    std::filesystem::directory_iterator(),
                                    [](const auto& e) { return e.path().extension() == ".json"; });
    EXPECT_FALSE(cached) << fault;
  }
  // The lock died with the run: a clean run goes through afterwards.
  o_.backend.fault.reset();
  EXPECT_TRUE(RunProfile(o_, nullptr, nullptr).ok());
}

TEST_F(RunnerTest, AShapeThatDoesNotFitIsWaivedNotFatal) {
  o_.backend.fault = backend::FaultPlan{backend::FaultKind::kOutOfMemory, 3, -1};
  auto r = RunProfile(o_, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  bool waived = false;
  for (const Waived& w : r->profile.waived) {
    waived = waived || w.reason.find("does not fit") != std::string::npos;
  }
  EXPECT_TRUE(waived);
}

TEST_F(RunnerTest, ASingleRankWorldCannotProfileCollectivesAndSaysSo) {
  auto r = RunProfile(o_, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  bool waived = false;
  for (const Waived& w : r->profile.waived) waived = waived || w.what == "collectives";
  EXPECT_TRUE(waived);
}

TEST(ImportProfile, LogsBecomeAProfileTiedToTheGivenCluster) {
  const std::string dir = testing::ScratchDir("import");
  ImportRunOptions o;
  o.logs = {testing::DataPath("all_reduce_8xA100.log"),
            testing::DataPath("reduce_scatter_8xA100_old.log")};
  o.out_path = dir + "/a100.json";
  o.tool = "paratune test";
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  o.cluster = *cluster;
  std::vector<std::string> warnings;
  auto p = ImportProfile(o, &warnings);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->collectives.size(), 2u);
  EXPECT_EQ(p->cluster_fingerprint, topology::Fingerprint(*cluster));
  EXPECT_EQ(p->environment.backend, "nccl-tests");
  EXPECT_EQ(p->environment.sources.size(), 2u);
  EXPECT_EQ(p->environment.device, "NVIDIA A100-SXM4-80GB");
  auto loaded = LoadProfile(o.out_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  topology::ClusterSpec c = *cluster;
  ASSERT_TRUE(ApplyProfile(*loaded, &c).ok());
  EXPECT_EQ(c.fits.size(), 2u);
  o.logs = {testing::DataPath("malformed_row.log")};
  auto bad = ImportProfile(o, &warnings);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":25"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paratune::profiler
