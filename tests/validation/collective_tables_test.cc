// The collective model against shared/calibration/nccl_tables.json
// (validation/collective_tables.h): every table is predicted or set aside
// with its reason, no row is dropped silently, and the bounds are the errors
// the model reaches today plus about two points (docs/model.md "Collective
// validation"), so a change that makes collectives worse fails here. They are
// not the goals (10 % in-sample), which the model does not reach yet.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"
#include "common/median.h"
#include "validation/collective_tables.h"

namespace paratune::planner {
namespace {

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
  std::vector<double> all, bandwidth;
  for (const CollectiveTable& t : tables->tables) {
    accounted += t.rows.size();
    for (const CollectiveRow& row : t.rows) {
      const CollectiveRowCheck c = CheckCollectiveRow(t, row);
      ASSERT_GT(c.predicted_us, 0) << t.id << " " << row.size_bytes;
      all.push_back(std::abs(c.error));
      if (row.size_bytes >= 256.0 * (1 << 20)) bandwidth.push_back(std::abs(c.error));
      // A table that forced NVLS ran it wherever the system has it.
      if (t.allowed == (topology::MaskOf(topology::Algorithm::kNvls) |
                        topology::MaskOf(topology::Algorithm::kNvlsTree))) {
        EXPECT_EQ(c.algorithm, topology::Algorithm::kNvls) << t.id;
      }
    }
  }
  EXPECT_EQ(accounted, file_rows);
  EXPECT_GE(all.size(), 600u);
  // Today: 21.0 % over every row, 9.7 % where bandwidth decides (>= 256 MiB).
  EXPECT_LT(Median(all), 0.23);
  EXPECT_LT(Median(bandwidth), 0.12);
}

TEST(CollectiveTables, RejectsOtherDocuments) {
  EXPECT_FALSE(IsCollectiveTablesDocument(Json::object()));
  EXPECT_FALSE(IsCollectiveTablesDocument(Json::array({Json{{"id", "x"}}})));
  EXPECT_FALSE(CollectiveTablesFromCalibration(Json::array()).ok());
}

}  // namespace
}  // namespace paratune::planner
