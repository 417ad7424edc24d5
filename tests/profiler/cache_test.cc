// The profile cache: its location, the flock that serialises profiling runs,
// and atomic stores that never leave a partial file.
#include "profiler/cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "test_util.h"

namespace paratune::profiler {
namespace {

Profile Tiny(const std::string& fingerprint) {
  Profile p;
  p.cluster_fingerprint = fingerprint;
  p.environment.tool = "paratune test";
  p.environment.backend = "nccl-tests";
  p.environment.created_at = "2026-02-11T09:00:00Z";
  CollectiveEntry e;
  e.group_size = 8;
  e.alpha_us = 3.5;
  e.beta_GBps = 232;
  e.samples = {{1024, 28.0, 0.04, 0.06}, {1 << 30, 8086.0, 132.8, 232.4}};
  p.collectives.push_back(e);
  return p;
}

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchDir("cache"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST(CacheDir, FollowsParatuneThenXdgThenHome) {
  const char* keep[] = {std::getenv("PARATUNE_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"),
                        std::getenv("HOME")};
  const std::string saved[] = {keep[0] ? keep[0] : "", keep[1] ? keep[1] : "",
                               keep[2] ? keep[2] : ""};
  setenv("PARATUNE_CACHE_DIR", "/scratch/pt", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultCacheDir(), "/scratch/pt");
  unsetenv("PARATUNE_CACHE_DIR");
  EXPECT_EQ(DefaultCacheDir(), "/xdg/paratune");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultCacheDir(), "/home/u/.cache/paratune");
  const char* names[] = {"PARATUNE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (keep[i])
      setenv(names[i], saved[i].c_str(), 1);
    else
      unsetenv(names[i]);
  }
}

TEST_F(CacheTest, ASecondProfilerIsToldTheCacheIsBusy) {
  auto first = CacheLock::TryAcquire(dir_, "00000000deadbeef");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = CacheLock::TryAcquire(dir_, "00000000deadbeef");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("pid"), std::string::npos) << second.status().message();
  EXPECT_TRUE(CacheLock::TryAcquire(dir_, "0000000000c0ffee").ok());  // other clusters are free
  { CacheLock released = std::move(*first); }
  EXPECT_TRUE(CacheLock::TryAcquire(dir_, "00000000deadbeef").ok());
}

TEST_F(CacheTest, StoresAtomicallyAndLoadsBack) {
  EXPECT_FALSE(LoadCachedProfile(dir_, "00000000deadbeef")->has_value());
  auto lock = CacheLock::TryAcquire(dir_, "00000000deadbeef");
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE(StoreCachedProfile(dir_, Tiny("00000000deadbeef"), *lock).ok());
  auto got = LoadCachedProfile(dir_, "00000000deadbeef");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_DOUBLE_EQ((*got)->collectives[0].beta_GBps, 232);
  // Only the profile and its lock: no temporary file left behind.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/profiles")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"00000000deadbeef.json", "00000000deadbeef.lock"}));
}

TEST_F(CacheTest, AForeignOrBrokenFileIsAnErrorNamingIt) {
  std::filesystem::create_directories(dir_ + "/profiles");
  ASSERT_TRUE(WriteFileAtomic(CachedProfilePath(dir_, "1111111111111111"), "{\"schema\": ").ok());
  auto r = LoadCachedProfile(dir_, "1111111111111111");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("1111111111111111.json"), std::string::npos);
  auto lock = CacheLock::TryAcquire(dir_, "2222222222222222");
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE(
      WriteProfile(Tiny("3333333333333333"), CachedProfilePath(dir_, "2222222222222222")).ok());
  EXPECT_FALSE(LoadCachedProfile(dir_, "2222222222222222").ok());  // filed under the wrong cluster
}


TEST_F(CacheTest, ALockFileLeavesWithItsHolderAndAFakeProfileIsRefused) {
  const std::string lock_file = dir_ + "/profiles/00000000deadbeef.lock";
  {
    auto lock = CacheLock::TryAcquire(dir_, "00000000deadbeef");
    ASSERT_TRUE(lock.ok());
    EXPECT_TRUE(std::filesystem::exists(lock_file));
    Profile fake = Tiny("00000000deadbeef");
    fake.environment.backend = "fake";
    Status s = StoreCachedProfile(dir_, fake, *lock);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("fake backend"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(std::filesystem::exists(lock_file));
  EXPECT_FALSE(std::filesystem::exists(CachedProfilePath(dir_, "00000000deadbeef")));
}

TEST_F(CacheTest, AProfileBehindALinkOrWritableByOthersIsNotRead) {
  {
    auto lock = CacheLock::TryAcquire(dir_, "00000000deadbeef");
    ASSERT_TRUE(lock.ok());
    ASSERT_TRUE(StoreCachedProfile(dir_, Tiny("00000000deadbeef"), *lock).ok());
  }
  const std::string path = CachedProfilePath(dir_, "00000000deadbeef");
  ASSERT_TRUE(LoadCachedProfile(dir_, "00000000deadbeef").ok());
  std::filesystem::permissions(path, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
  auto open_to_all = LoadCachedProfile(dir_, "00000000deadbeef");
  ASSERT_FALSE(open_to_all.ok());
  EXPECT_NE(open_to_all.status().message().find("chmod go-w"), std::string::npos);
  // The same bytes behind a symbolic link: refused, not followed.
  std::filesystem::rename(path, dir_ + "/elsewhere.json");
  std::filesystem::create_symlink(dir_ + "/elsewhere.json", path);
  auto linked = LoadCachedProfile(dir_, "00000000deadbeef");
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos);
}

}  // namespace
}  // namespace paratune::profiler
