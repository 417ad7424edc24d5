// `paratune profile` as a user meets it: help, flag errors, exit codes
// (0, 2, 4, 75), progress on stderr and payload on stdout, import of logs.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "backend/factory.h"
#include "cli/commands.h"
#include "profiler/cache.h"
#include "profiler/profile.h"
#include "test_util.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

Outcome Profile(const Args& args, bool progress = true) {
  return Call(RunProfile, args, "", progress);
}

class CmdProfileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = profiler::testing::ScratchDir("cmd"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  Args Fake(std::initializer_list<std::string> extra = {}) {
    Args a = {"--backend",      "fake",        "--quick",      "--out",
              dir_ + "/p.json", "--cache-dir", dir_ + "/cache"};
    a.insert(a.end(), extra);
    return a;
  }
  std::string dir_;
};

TEST_F(CmdProfileTest, HelpTeachesTheSizeSyntaxAndExitCodes) {
  Outcome r = Profile({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("-b, --minbytes"), std::string::npos);
  EXPECT_NE(r.out.find("8G"), std::string::npos);
  EXPECT_NE(r.out.find("75"), std::string::npos);
  EXPECT_NE(r.out.find("paratune profile import"), std::string::npos);
}

TEST_F(CmdProfileTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(Profile({"--out", "x.json"}).code, kExitUsage);  // no backend
  EXPECT_EQ(Profile({"--backend", "tpu", "--out", "x"}).code, kExitUsage);
  EXPECT_EQ(Profile({"--backend", "fake"}).code, kExitUsage);  // no --out
  Outcome r = Profile(Fake({"-b", "1G", "-e", "1M"}));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--minbytes"), std::string::npos);
  EXPECT_EQ(Profile(Fake({"--collectives", "all_reduce,broadcast"})).code, kExitUsage);
  EXPECT_EQ(Profile(Fake({"--frobnicate"})).code, kExitUsage);
  EXPECT_EQ(Profile(Fake({"--inject-fault", "meteor@1"})).code, kExitUsage);
}

TEST_F(CmdProfileTest, ProfilesWithProgressOnStderrAndFitsOnStdout) {
  Outcome r = Profile(Fake({"--report", "-", "--json", dir_ + "/m.json"}));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("[profile] backend fake"), std::string::npos) << r.err;
  // stderr not a terminal: no progress, only what was written.
  Outcome quiet = Profile(Fake({"--refresh"}), /*progress=*/false);
  ASSERT_EQ(quiet.code, kExitOk) << quiet.err;
  EXPECT_EQ(quiet.err.find("[profile] backend"), std::string::npos) << quiet.err;
  EXPECT_NE(quiet.err.find("[profile] wrote"), std::string::npos) << quiet.err;
  EXPECT_NE(r.out.find("# GEMM bf16"), std::string::npos);
  EXPECT_NE(r.out.find("WAIVED"), std::string::npos);  // report: one rank, no collectives
  EXPECT_TRUE(profiler::LoadProfile(dir_ + "/p.json").ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/m.json"));
  Outcome again = Profile(Fake());
  EXPECT_EQ(again.code, kExitOk);
  EXPECT_NE(again.err.find("cached"), std::string::npos);
  // Never where plans read profiles: a fake profile would change them.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cache/profiles"));
}

TEST_F(CmdProfileTest, ALockedCacheExits75) {
  ASSERT_EQ(Profile(Fake({"--no-cache"})).code, kExitOk);
  auto p = profiler::LoadProfile(dir_ + "/p.json");
  ASSERT_TRUE(p.ok());
  // The fake backend caches and locks apart from measured profiles.
  auto lock = profiler::CacheLock::TryAcquire(profiler::SyntheticCacheDir(dir_ + "/cache"),
                                              p->cluster_fingerprint);
  ASSERT_TRUE(lock.ok());
  Outcome r = Profile(Fake());
  EXPECT_EQ(r.code, kExitTempFail);
  EXPECT_NE(r.err.find("locked"), std::string::npos);
}

TEST_F(CmdProfileTest, AFailedMeasurementExits4) {
  Outcome r = Profile(Fake({"--inject-fault", "rank_dies@3", "--no-cache"}));
  EXPECT_EQ(r.code, kExitMeasureFailed);
  EXPECT_NE(r.err.find("died"), std::string::npos);
  backend::BackendOptions o;
  o.name = "cuda";
  o.cuda_use_mpi = false;
  if (backend::CreateBackend(o).ok()) GTEST_SKIP() << "this machine has a GPU";
  Outcome gpu = Profile({"--backend", "cuda", "--out", dir_ + "/g.json", "--no-cache"});
  EXPECT_EQ(gpu.code, kExitMeasureFailed);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/g.json"));
}

TEST_F(CmdProfileTest, ImportsLogsAndNamesAMalformedLine) {
  Outcome r =
      Profile({"import", profiler::testing::DataPath("all_reduce_8xA100.log"),
               profiler::testing::DataPath("all_gather_2x8xH100.json"), "--out", dir_ + "/i.json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("all_reduce"), std::string::npos);
  EXPECT_NE(r.out.find("all_gather"), std::string::npos);
  EXPECT_TRUE(profiler::LoadProfile(dir_ + "/i.json").ok());
  Outcome bad = Profile(
      {"import", profiler::testing::DataPath("malformed_row.log"), "--out", dir_ + "/b.json"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_NE(bad.err.find("malformed_row.log:25"), std::string::npos) << bad.err;
  EXPECT_EQ(Profile({"import", "--out", dir_ + "/n.json"}).code, kExitUsage);
}

}  // namespace
}  // namespace paratune::cli
