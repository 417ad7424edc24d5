// The collective model against shared/calibration/nccl_tables.json
// (validation/collective_tables.h): every table is predicted or set aside
// with its reason, no row is dropped silently, and the bounds are the errors
// the model reaches today plus about two points (docs/model.md "Collective
// validation"), so a change that makes collectives worse fails here. They are
// not the goals (10 % in-sample), which the model does not reach yet.
// The pipeline-fill share is the one constant fitted to the file; its tests
// hold it to the fit and every system to its held-out prediction.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/median.h"
#include "validation/collective_tables.h"

namespace paratune::planner {
namespace {

Result<CollectiveTables> LoadTables() {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/nccl_tables.json");
  if (!text.ok()) return text.status();
  auto doc = ParseJson(*text, "nccl_tables.json");
  if (!doc.ok()) return doc.status();
  return CollectiveTablesFromCalibration(*doc);
}

TEST(CollectiveTables, EveryTablePredictedOrSetAsideWithItsReason) {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/nccl_tables.json");
  if (!text.ok()) GTEST_SKIP() << "calibration file not found: " << text.status().ToString();
  auto doc = ParseJson(*text, "nccl_tables.json");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(IsCollectiveTablesDocument(*doc));
  auto tables = CollectiveTablesFromCalibration(*doc);
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  size_t file_rows = 0;
  for (const Json& t : *doc) file_rows += t["rows"].size();
  size_t accounted = 0;
  for (const SkippedCollectives& s : tables->skipped) {
    EXPECT_FALSE(s.why.empty()) << s.id;
    accounted += static_cast<size_t>(s.rows);
  }
  std::vector<double> all, mid, bandwidth;
  for (const CollectiveTable& t : tables->tables) {
    accounted += t.rows.size();
    for (const CollectiveRow& row : t.rows) {
      const CollectiveRowCheck c = CheckCollectiveRow(t, row);
      ASSERT_GT(c.predicted_us, 0) << t.id << " " << row.size_bytes;
      all.push_back(std::abs(c.error));
      if (row.size_bytes >= 256.0 * (1 << 20)) {
        bandwidth.push_back(std::abs(c.error));
      } else if (row.size_bytes >= 65536) {
        mid.push_back(std::abs(c.error));
      }
      // A table that forced NVLS ran it wherever the system has it.
      if (t.allowed == (topology::MaskOf(topology::Algorithm::kNvls) |
                        topology::MaskOf(topology::Algorithm::kNvlsTree))) {
        EXPECT_EQ(c.algorithm, topology::Algorithm::kNvls) << t.id;
      }
    }
  }
  EXPECT_EQ(accounted, file_rows);
  EXPECT_GE(all.size(), 600u);
  // Today: 14.5 % over every row, 18.9 % at 64 KiB - 256 MiB, 5.3 % where
  // bandwidth decides (>= 256 MiB). Without the pipeline fill: 21.1, 31.2, 9.7.
  EXPECT_LT(Median(all), 0.165);
  EXPECT_LT(Median(mid), 0.21);
  EXPECT_LT(Median(bandwidth), 0.075);
}

// The share in the code is the one these tables choose, and every system held
// out gets a share near it: the term is not carried by one publisher.
TEST(CollectiveTables, PipelineFillIsTheFitAndHoldsWithEachSystemOut) {
  auto tables = LoadTables();
  if (!tables.ok()) GTEST_SKIP() << tables.status().ToString();
  EXPECT_NEAR(FitPipelineFill(*tables), topology::kNcclPipelineFill, 0.0125);
  std::vector<std::string> systems;
  for (const CollectiveTable& t : tables->tables) {
    if (std::find(systems.begin(), systems.end(), t.system) == systems.end()) systems.push_back(t.system);
  }
  ASSERT_GE(systems.size(), 15u);
  std::vector<double> held_out, without_fill;
  for (const std::string& system : systems) {
    const double fill = FitPipelineFill(*tables, system);
    EXPECT_GE(fill, 0.3) << system;
    EXPECT_LE(fill, 0.6) << system;
    for (const CollectiveTable& t : tables->tables) {
      if (t.system != system) continue;
      for (const CollectiveRow& row : t.rows) {
        held_out.push_back(std::abs(CheckCollectiveRow(t, row, fill).error));
        without_fill.push_back(std::abs(CheckCollectiveRow(t, row, 0.0).error));
      }
    }
  }
  // Held out 15.1 %, against 21.1 % with no fill at all.
  EXPECT_LT(Median(held_out), 0.165);
  EXPECT_LT(Median(held_out), Median(without_fill) - 0.04);
}

// Published mid-size rows the fill brings in: Azure ND H100 v5, 8 GPUs with
// NVLS forced (nccl_tables.json azure-ndv5-h100-1node-ar-nvls, in-place bus
// bandwidth 234.45 and 361.78 GB/s): 16 MiB in 125 µs, 64 MiB in 325 µs,
// where latency plus transfer alone gives 86 and 270.
TEST(CollectiveTables, MidSizeNvlsRowsOfAzureH100) {
  auto tables = LoadTables();
  if (!tables.ok()) GTEST_SKIP() << tables.status().ToString();
  const CollectiveTable* azure = nullptr;
  for (const CollectiveTable& t : tables->tables) {
    if (t.id == "azure-ndv5-h100-1node-ar-nvls") azure = &t;
  }
  ASSERT_NE(azure, nullptr);
  for (const auto& [bytes, measured_us] : {std::pair{16777216.0, 125.0}, {67108864.0, 325.0}}) {
    const CollectiveRowCheck c = CheckCollectiveRow(*azure, {bytes, measured_us, "test"});
    EXPECT_EQ(c.algorithm, topology::Algorithm::kNvls);
    EXPECT_NEAR(c.predicted_us / measured_us, 1.0, 0.08) << bytes;
    EXPECT_LT(CheckCollectiveRow(*azure, {bytes, measured_us, "test"}, 0.0).predicted_us / measured_us,
              0.85)
        << bytes;
  }
}

TEST(CollectiveTables, RejectsOtherDocuments) {
  EXPECT_FALSE(IsCollectiveTablesDocument(Json::object()));
  EXPECT_FALSE(IsCollectiveTablesDocument(Json::array({Json{{"id", "x"}}})));
  EXPECT_FALSE(CollectiveTablesFromCalibration(Json::array()).ok());
}

}  // namespace
}  // namespace paratune::planner
