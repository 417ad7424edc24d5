#include <gtest/gtest.h>

#include "common/strings.h"

namespace paratune {
namespace {

TEST(ParseKeyValueList, ParsesConfigFlags) {
  auto kv = ParseKeyValueList(" tp=8, pp=16 ,recompute=full");
  ASSERT_TRUE(kv.ok());
  ASSERT_EQ(kv->size(), 3u);
  EXPECT_EQ((*kv)[0].first, "tp");
  EXPECT_EQ((*kv)[1].second, "16");
  EXPECT_EQ((*kv)[2].second, "full");
  EXPECT_FALSE(ParseKeyValueList("tp8").ok());
  EXPECT_FALSE(ParseKeyValueList("=3").ok());
}

TEST(ParseSizeBytes, FollowsNcclTestsSuffixes) {
  // nccl-tests: K/M/G are powers of 1024.
  EXPECT_EQ(*ParseSizeBytes("8"), 8);
  EXPECT_EQ(*ParseSizeBytes("8K"), 8192);
  EXPECT_EQ(*ParseSizeBytes("128M"), 128LL << 20);
  EXPECT_EQ(*ParseSizeBytes("8G"), 8LL << 30);
  EXPECT_FALSE(ParseSizeBytes("8X").ok());
  EXPECT_FALSE(ParseSizeBytes("").ok());
}

TEST(ParseInt, RejectsTrailingGarbage) {
  EXPECT_EQ(*ParseInt("64", "n"), 64);
  EXPECT_FALSE(ParseInt("64x", "n").ok());
  EXPECT_FALSE(ParseDouble("nan", "x").ok());
}

}  // namespace
}  // namespace paratune
