// nccl-tests semantics: size syntax and sweep, byte accounting per collective,
// busbw factors, and the exact text of a row.
#include "profiler/nccl_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"

namespace paratune::profiler {
namespace {

using topology::Collective;

TEST(NcclFormat, SweepUsesNcclTestsSizeSyntax) {
  auto s = ParseSweep(SizeSweep{}, "8", "8G", "2", "");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto sizes = SweepSizes(*s);
  ASSERT_TRUE(sizes.ok());
  ASSERT_EQ(sizes->size(), 31u);  // 2^3 … 2^33: what `-b 8 -e 8G -f 2` visits
  EXPECT_EQ(sizes->front(), 8);
  EXPECT_EQ(sizes->back(), int64_t{8} << 30);
  auto lin = ParseSweep(SizeSweep{}, "1M", "4M", "", "1M");
  ASSERT_TRUE(lin.ok());
  EXPECT_EQ(*SweepSizes(*lin), (std::vector<int64_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  EXPECT_FALSE(ParseSweep(SizeSweep{}, "1G", "1M", "2", "").ok());
  EXPECT_FALSE(ParseSweep(SizeSweep{}, "1K", "1M", "1", "").ok());
  EXPECT_FALSE(ParseSweep(SizeSweep{}, "1X", "", "", "").ok());
}

TEST(NcclFormat, CountsFollowGetCollByteCount) {
  // 8 ranks, floats, 8 KiB: all_reduce counts the whole buffer, all_gather,
  // reduce_scatter and alltoall the per-rank (per-peer) chunk.
  EXPECT_EQ(CountsFor(Collective::kAllReduce, 8192, 4, 8).count, 2048);
  EXPECT_EQ(CountsFor(Collective::kAllGather, 8192, 4, 8).count, 256);
  EXPECT_EQ(CountsFor(Collective::kAllGather, 8192, 4, 8).send_bytes, 1024);
  EXPECT_EQ(CountsFor(Collective::kReduceScatter, 8192, 4, 8).recv_bytes, 1024);
  EXPECT_EQ(CountsFor(Collective::kAllToAll, 8192, 4, 8).count, 256);
  EXPECT_EQ(CountsFor(Collective::kSendRecv, 8192, 4, 8).count, 2048);
  // Sizes round down to whole elements per rank: 100 B over 8 float ranks.
  auto r = CountsFor(Collective::kAllGather, 100, 4, 8);
  EXPECT_EQ(r.count, 3);
  EXPECT_EQ(r.size_bytes, 96);
  EXPECT_EQ(CountsFor(Collective::kAllGather, 16, 4, 8).count, 0);
}

TEST(NcclFormat, BusBandwidthFactorsAreNcclTests) {
  // doc/PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather/reduce_scatter/alltoall (n-1)/n,
  // sendrecv 1.
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kAllReduce, 8, 100), 175);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kAllGather, 8, 100), 87.5);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kReduceScatter, 16, 160), 150);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kAllToAll, 4, 100), 75);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kSendRecv, 2, 42), 42);
  EXPECT_DOUBLE_EQ(AlgBwGBps(8589934592, 64422.8), 8589934592.0 / 64422.8 / 1e3);
}

TEST(NcclFormat, FloatStrDropsDecimalsLikeGetFloatStr) {
  EXPECT_EQ(FloatStr(27.76, 7), "  27.76");
  EXPECT_EQ(FloatStr(1048.19, 7), "1048.19");
  EXPECT_EQ(FloatStr(16353.83, 7), "16353.8");
  EXPECT_EQ(FloatStr(164422.8, 7), " 164423");
  EXPECT_EQ(FloatStr(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(FloatStr(233.344, 6), "233.34");
  EXPECT_EQ(FloatStr(1233.44, 6), "1233.4");
  EXPECT_EQ(FloatStr(0.001, 6), "  0.00");
}

TEST(NcclFormat, RowTextMatchesAnNcclTestsLogLine) {
  // The out-of-place half of the 8 GiB row of tests/profiler/data/all_reduce_8xA100.log.
  std::ifstream in(testing::DataPath("all_reduce_8xA100.log"));
  std::string line, want;
  while (std::getline(in, line)) {
    if (line.rfind("  8589934592", 0) == 0) want = line;
  }
  ASSERT_FALSE(want.empty());
  ReportRow row{.size_bytes = 8589934592,
                .count = 2147483648,
                .time_us = 64422.8,
                .algbw_GBps = 133.34,
                .busbw_GBps = 233.34,
                .wrong = 0};
  const std::string got = FormatRow(row);
  EXPECT_EQ(got.substr(0, got.size() - 1), want.substr(0, got.size() - 1));
  row.wrong = -1;
  EXPECT_NE(FormatRow(row).find("    N/A"), std::string::npos);
  EXPECT_NE(FormatTableHeader().find("#wrong"), std::string::npos);
}

}  // namespace
}  // namespace paratune::profiler
