// Import of real-format nccl-tests logs (tests/profiler/data): text from
// several releases and -J JSON yield the numbers the logs state, with group
// size, tier and sharing read from the device lines; malformed input is
// refused with the file and line named.
#include "profiler/nccl_import.h"

#include <gtest/gtest.h>

#include <cmath>

#include "profiler/fit.h"
#include "profiler/report.h"
#include "test_util.h"

namespace paratune::profiler {
namespace {

using testing::DataPath;
using topology::Collective;
using topology::Tier;

const SeriesRow* RowOf(const CollectiveSeries& s, int64_t size) {
  for (const SeriesRow& r : s.rows) {
    if (r.size_bytes == size) return &r;
  }
  return nullptr;
}

TEST(NcclImport, A100AllReduceLogYieldsTheBusbwItStates) {
  auto r = ImportNcclTestsFile(DataPath("all_reduce_8xA100.log"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->series.size(), 1u);
  const CollectiveSeries& s = r->series[0];
  EXPECT_EQ(s.collective, Collective::kAllReduce);
  EXPECT_EQ(s.group_size, 8);
  EXPECT_EQ(s.tier, Tier::kIntraNode);
  EXPECT_EQ(s.stride, 1);
  EXPECT_EQ(s.concurrent_groups, 1);
  EXPECT_EQ(s.dtype, "float");
  EXPECT_EQ(s.rows.size(), 31u);
  EXPECT_EQ(r->device, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(r->nccl_tests_version, "2.13.9");
  EXPECT_EQ(r->hosts, std::vector<std::string>(8, "dgx-a100-01"));
  // The rows the log prints (out-of-place), decimals dropped at large times.
  const SeriesRow* big = RowOf(s, 8589934592);
  ASSERT_NE(big, nullptr);
  EXPECT_DOUBLE_EQ(big->time_us, 64422.8);
  EXPECT_DOUBLE_EQ(big->algbw_GBps, 133.34);
  EXPECT_DOUBLE_EQ(big->busbw_GBps, 233.34);
  EXPECT_EQ(big->wrong, 0);
  EXPECT_DOUBLE_EQ(RowOf(s, 2147483648)->time_us, 16353.8);
  // busbw = size/time × 2(n-1)/n, as nccl-tests computes it (to the printed digits).
  for (const SeriesRow& row : s.rows) {
    if (row.size_bytes < (1 << 20)) continue;
    const double expected = row.size_bytes / row.time_us / 1e3 * 1.75;
    EXPECT_NEAR(row.busbw_GBps, expected, 0.006 * expected + 0.01) << row.size_bytes;
  }
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
  // The log's "# Avg bus bandwidth" averages both column groups.
  auto in_place = ImportNcclTestsFile(DataPath("all_reduce_8xA100.log"), {true, ""});
  ASSERT_TRUE(in_place.ok());
  double sum = 0;
  const CollectiveSeries& in_series = in_place->series[0];
  for (const CollectiveSeries* series : {&s, &in_series}) {
    for (const SeriesRow& row : series->rows) sum += row.busbw_GBps;
  }
  EXPECT_NEAR(sum / 62, 87.3081, 0.01);
  EXPECT_DOUBLE_EQ(s.stated_avg_busbw_GBps, 87.3081);
  EXPECT_DOUBLE_EQ(RowOf(in_place->series[0], 8589934592)->busbw_GBps, 232.58);
}

// alltoall_4xH100.log is written in the exact layout nccl-tests prints (the
// printf formats of src/util.cu and alltoall.cu at NVIDIA/nccl-tests a0b82b2,
// the header of the 4 x H100 alltoall_perf output published in NVIDIA/nccl
// issue 2169); its timings are illustrative, not a measurement. What the
// import must get right is what nccl-tests defines: the count column is the
// per-peer element count (alltoall.cu AlltoAllGetCollByteCount: count/nranks),
// busbw = algbw x (n-1)/n (doc/PERFORMANCE.md "AlltoAll: (n-1)/n"), redop
// "none", and the in-place #wrong column reads N/A (in-place is not checked).
TEST(NcclImport, AllToAllLogUsesThePerPeerCountAndTheThreeQuartersBusFactor) {
  auto r = ImportNcclTestsFile(DataPath("alltoall_4xH100.log"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->series.size(), 1u);
  const CollectiveSeries& s = r->series[0];
  EXPECT_EQ(s.collective, Collective::kAllToAll);
  EXPECT_EQ(s.group_size, 4);
  EXPECT_EQ(s.tier, Tier::kIntraNode);
  EXPECT_EQ(s.redop, "none");
  EXPECT_EQ(r->nccl_tests_version, "2.19.6");
  EXPECT_EQ(r->device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.rows.size(), 6u);  // 1 MiB ... 1 GiB by 4
  for (const SeriesRow& row : s.rows) {
    EXPECT_EQ(row.count * 4 * 4, row.size_bytes);  // float, 4 peers
    EXPECT_EQ(row.wrong, 0);
    // To the printed digits: two decimals, and a time of 7 significant characters.
    EXPECT_NEAR(row.busbw_GBps, row.algbw_GBps * 3 / 4, 0.006) << row.size_bytes;
    EXPECT_NEAR(row.algbw_GBps, row.size_bytes / row.time_us / 1e3, 1e-4 * row.algbw_GBps + 0.006)
        << row.size_bytes;
  }
  const SeriesRow* big = RowOf(s, 1073741824);
  ASSERT_NE(big, nullptr);
  EXPECT_DOUBLE_EQ(big->busbw_GBps, 268.02);
  EXPECT_DOUBLE_EQ(s.stated_avg_busbw_GBps, 155.451);
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
  // In-place rows are read too, with their unchecked #wrong.
  auto in_place = ImportNcclTestsFile(DataPath("alltoall_4xH100.log"), {true, ""});
  ASSERT_TRUE(in_place.ok()) << in_place.status().ToString();
  EXPECT_EQ(in_place->series.at(0).rows.front().wrong, -1);
  // The alpha-beta fit over the bandwidth-bound rows (64 MiB and up) prices the
  // series with the (n-1)/n factor: its beta is the bus bandwidth those rows
  // state, and it reproduces the largest row.
  std::vector<TimedSize> points;
  for (const SeriesRow& row : s.rows) {
    if (row.size_bytes >= (int64_t{64} << 20)) points.push_back({row.size_bytes, row.time_us});
  }
  auto fit = FitAlphaBeta(points, Collective::kAllToAll, 4);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(PredictUs(*fit, Collective::kAllToAll, 4, 1073741824), big->time_us,
              0.02 * big->time_us);
  EXPECT_NEAR(fit->beta_GBps, big->busbw_GBps, 0.05 * big->busbw_GBps);
}

TEST(NcclImport, OlderReleaseWithoutTestNameAndUncheckedRows) {
  // nccl-tests 2.11: no "Collective test starting" line, no Group column,
  // `-c 0` so #wrong reads N/A. The collective comes from the file name.
  auto r = ImportNcclTestsFile(DataPath("reduce_scatter_8xA100_old.log"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CollectiveSeries& s = r->series.at(0);
  EXPECT_EQ(s.collective, Collective::kReduceScatter);
  EXPECT_EQ(s.group_size, 8);
  EXPECT_EQ(s.rows.front().wrong, -1);
  EXPECT_EQ(s.rows.size(), 21u);  // 1 KiB … 1 GiB
  EXPECT_EQ(r->hosts.front(), "gpu-st-p4d-24xlarge-1");
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings.front().find("file name"), std::string::npos);
  // Under a name that says nothing, the columns do: a reduction (sum) whose
  // busbw/algbw is 7/8 < 1 can only be reduce_scatter.
  auto text = ReadFileToString(DataPath("reduce_scatter_8xA100_old.log"));
  ASSERT_TRUE(text.ok());
  auto anonymous = ParseNcclTestsText(*text, "job-81234.out", {});
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().ToString();
  EXPECT_EQ(anonymous->series.at(0).collective, Collective::kReduceScatter);
  bool said = false;
  for (const std::string& w : anonymous->warnings) {
    said = said || w.find("reduce_scatter read from the redop and busbw/algbw columns") !=
                       std::string::npos;
  }
  EXPECT_TRUE(said);
  EXPECT_TRUE(ParseNcclTestsText(*text, "job-81234.out", {false, "reduce_scatter"}).ok());
}

TEST(NcclImport, SplitGroupsAcrossNodesShareTheNics) {
  // NCCL_TESTS_SPLIT="MOD 8" on 2 nodes × 8 H100: 8 concurrent groups of 2,
  // one GPU per node each — a pure inter-node test whose 8 groups share NICs.
  auto r = ImportNcclTestsFile(DataPath("all_reduce_split_mod8_2x8xH100.log"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CollectiveSeries& s = r->series.at(0);
  EXPECT_EQ(s.group_size, 2);
  EXPECT_EQ(s.groups, 8);
  EXPECT_EQ(s.stride, 8);
  EXPECT_EQ(s.tier, Tier::kInterNode);
  EXPECT_EQ(s.concurrent_groups, 8);
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
}

TEST(NcclImport, JsonOutputIsReadLikeText) {
  auto r = ImportNcclTestsFile(DataPath("all_gather_2x8xH100.json"), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CollectiveSeries& s = r->series.at(0);
  EXPECT_EQ(s.collective, Collective::kAllGather);
  EXPECT_EQ(s.group_size, 16);
  EXPECT_EQ(s.tier, Tier::kInterNode);
  EXPECT_EQ(s.dtype, "bfloat16");
  EXPECT_EQ(s.rows.size(), 7u);  // 1M … 4G by 4
  EXPECT_EQ(r->nccl_version, "22703");
  EXPECT_EQ(r->device, "NVIDIA H100 80GB HBM3");
  // Every row's busbw is algbw × 15/16, as the file states it.
  for (const SeriesRow& row : s.rows) {
    EXPECT_NEAR(row.busbw_GBps, row.algbw_GBps * 15 / 16, 1e-5) << row.size_bytes;
    EXPECT_NEAR(row.algbw_GBps, row.size_bytes / row.time_us / 1e3, 1e-5 * row.algbw_GBps + 1e-6);
  }
  EXPECT_GT(s.stated_avg_busbw_GBps, 0);
}

TEST(NcclImport, MalformedRowIsNamedByFileAndLine) {
  auto r = ImportNcclTestsFile(DataPath("malformed_row.log"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("malformed_row.log:25"), std::string::npos)
      << r.status().message();
}

TEST(NcclImport, TestFailureAndEmptyLogsAreErrors) {
  const std::string failed =
      "# Collective test starting: all_reduce_perf\n"
      " dgx-a100-01 pid 41532: Test NCCL failure common.cu:1005 'unhandled system error'\n";
  auto r = ParseNcclTestsText(failed, "run.log", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("run.log:2"), std::string::npos);
  EXPECT_FALSE(ParseNcclTestsText("# nothing here\nNCCL INFO hello\n", "x.log", {}).ok());
  EXPECT_EQ(ParseNcclTestsJson("{\"version\": 2", "trunc.json", {}).status().code(),
            StatusCode::kParseError);
}

TEST(NcclImport, PerIterationColumnsAndTimestampsAreUnderstood) {
  // `-I 1 -S 1`: i_min i_max i_p99 i_cv% after each group, a timestamp at the end.
  const std::string log =
      "# Collective test starting: sendrecv_perf\n"
      "#  Rank  0 Group  0 Pid 1 on n1 device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid 1 on n1 device  1 [0000:0f:00] NVIDIA H100 80GB HBM3\n"
      "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows\n"
      "     1048576        262144     float    none      -1    15.10   69.44   69.44       0"
      "    14.90    15.40    15.40     1.20    15.00   69.91   69.91       0    14.80    15.30"
      "    15.30     1.10  2026-02-11 09:14:05\n"
      "    16777216       4194304     float    none      -1    90.00  186.41  186.41       0"
      "    89.00    91.00    91.00     0.50    90.50  185.38  185.38       0    89.50    91.50"
      "    91.50     0.40  2026-02-11 09:14:06\n";
  auto r = ParseNcclTestsText(log, "iter.log", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CollectiveSeries& s = r->series.at(0);
  EXPECT_EQ(s.collective, Collective::kSendRecv);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(s.rows[1].busbw_GBps, 186.41);
  auto in = ParseNcclTestsText(log, "iter.log", {true, ""});
  ASSERT_TRUE(in.ok());
  EXPECT_DOUBLE_EQ(in->series[0].rows[1].busbw_GBps, 185.38);
}

TEST(NcclImport, RowsWithWrongResultsAreSkippedWithAWarning) {
  const std::string log =
      "# Collective test starting: all_reduce_perf\n"
      "#  Rank  0 Group  0 Pid 1 on n1 device  0 [0] GPU\n"
      "#  Rank  1 Group  0 Pid 1 on n1 device  1 [0] GPU\n"
      "        1024           256     float     sum      -1    10.00    0.10    0.10       0"
      "    10.00    0.10    0.10       0\n"
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       3"
      "    20.00   52.43   52.43       3\n";
  auto r = ParseNcclTestsText(log, "w.log", {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->series[0].rows.size(), 1u);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("3 wrong"), std::string::npos);
}

TEST(NcclImport, CollectiveNamesIncludeMpiBuildsAndPaths) {
  EXPECT_EQ(*CollectiveFromTestName("./build/all_gather_perf_mpi"), Collective::kAllGather);
  EXPECT_EQ(*CollectiveFromTestName("alltoall_perf"), Collective::kAllToAll);
  EXPECT_FALSE(CollectiveFromTestName("broadcast_perf").ok());
}

// A fragment pasted from one rank's terminal (rows of all_reduce_8xA100.log, one
// "#  Rank" line, no header). The group size follows from busbw/algbw.
const std::string kAllReduceFragment =
    "#  Rank  0 Group  0 Pid  41532 on dgx-a100-01 device  0 [0000:07:00] NVIDIA A100-SXM4-80GB\n"
    "     1048576        262144     float     sum      -1    35.63   29.43   51.51       0"
    "    36.07   29.07   50.88       0\n"
    "    16777216       4194304     float     sum      -1   155.46  107.92  188.86       0"
    "   154.41  108.65  190.15       0\n"
    "   268435456      67108864     float     sum      -1  2041.71  131.48  230.08       0"
    "  2035.72  131.86  230.76       0\n";

TEST(NcclImport, FragmentWithOneRankLineTakesTheGroupSizeFromTheColumns) {
  auto r = ParseNcclTestsText(kAllReduceFragment, "pasted.txt", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CollectiveSeries& s = r->series.at(0);
  EXPECT_EQ(s.collective, Collective::kAllReduce);  // sum, busbw/algbw = 1.75 > 1
  EXPECT_EQ(s.group_size, 8);                       // 2(n-1)/n = 1.75
  EXPECT_EQ(s.rows.size(), 3u);
  bool said = false;
  for (const std::string& w : r->warnings) said = said || w.find("group size 8") != std::string::npos;
  EXPECT_TRUE(said);
  // --ranks wins where the rank lines do not tell.
  ImportOptions o;
  o.ranks = 4;
  auto forced = ParseNcclTestsText(kAllReduceFragment, "pasted.txt", o);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->series[0].group_size, 4);
}

TEST(NcclImport, FragmentCollectiveFromColumnsOnlyWhereUnambiguous) {
  // Rows of reduce_scatter_8xA100_old.log: a reduction with busbw/algbw = 7/8.
  const std::string rs =
      "    16777216        524288     float     sum      -1    86.58  193.77  169.55    N/A"
      "    86.89  193.08  168.95    N/A\n"
      "   268435456       8388608     float     sum      -1  1062.52  252.64  221.06    N/A"
      "  1062.35  252.68  221.10    N/A\n";
  auto r = ParseNcclTestsText(rs, "paste.txt", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->series[0].collective, Collective::kReduceScatter);
  EXPECT_EQ(r->series[0].group_size, 8);
  // The same ratio without a reduction is all_gather or alltoall: ask.
  std::string gather = rs;
  for (size_t at; (at = gather.find(" sum ")) != std::string::npos;) gather.replace(at, 5, " none ");
  auto amb = ParseNcclTestsText(gather, "paste.txt", {});
  ASSERT_FALSE(amb.ok());
  EXPECT_EQ(amb.status().code(), StatusCode::kParseError);
  EXPECT_NE(amb.status().message().find("--collective all_gather or --collective alltoall"),
            std::string::npos)
      << amb.status().message();
  ImportOptions o;
  o.collective = "alltoall";
  auto told = ParseNcclTestsText(gather, "paste.txt", o);
  ASSERT_TRUE(told.ok()) << told.status().ToString();
  EXPECT_EQ(told->series[0].collective, Collective::kAllToAll);
  // The file name decides before the columns are asked.
  auto named = ParseNcclTestsText(gather, "logs/all_gather_2n.txt", {});
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->series[0].collective, Collective::kAllGather);
}

TEST(NcclImport, SendrecvFragmentNeedsRanks) {
  const std::string sr =
      "    16777216       4194304     float    none      -1    90.00  186.41  186.41       0"
      "    90.50  185.38  185.38       0\n";
  auto r = ParseNcclTestsText(sr, "paste.txt", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pass --ranks N"), std::string::npos)
      << r.status().message();
  ImportOptions o;
  o.ranks = 2;
  auto told = ParseNcclTestsText(sr, "paste.txt", o);
  ASSERT_TRUE(told.ok()) << told.status().ToString();
  EXPECT_EQ(told->series[0].collective, Collective::kSendRecv);
  EXPECT_EQ(told->series[0].group_size, 2);
}

}  // namespace
}  // namespace paratune::profiler
