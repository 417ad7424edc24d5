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
#include <cmath>
#include <map>
#include <set>
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
  // Today: 8.9 % over every row, 12.8 % at 64 KiB - 256 MiB, 5.2 % where
  // bandwidth decides (>= 256 MiB). With neither the pipeline fill nor the
  // network hop latencies: 21.1, 31.2, 9.7.
  EXPECT_LT(Median(all), 0.10);
  EXPECT_LT(Median(mid), 0.14);
  EXPECT_LT(Median(bandwidth), 0.06);
}

// The constants in the code are the ones these tables choose, and every
// system held out gets constants near them: no term is carried by one
// publisher.
TEST(CollectiveTables, FittedConstantsAreTheFitAndHoldWithEachSystemOut) {
  auto tables = LoadTables();
  if (!tables.ok()) GTEST_SKIP() << tables.status().ToString();
  const CollectiveConstants compiled, fit = FitCollectiveConstants(*tables);
  EXPECT_NEAR(fit.pipeline_fill, compiled.pipeline_fill, 0.0125);
  ASSERT_EQ(fit.net_latency_us.size(), 2u);
  for (const auto& [fabric, us] : compiled.net_latency_us) {
    EXPECT_NEAR(fit.net_latency_us.at(fabric), us, 1.0) << fabric;
  }
  // Systems with tables across each fabric: the latency is not one publisher's.
  std::map<std::string, std::set<std::string>> systems_on;
  for (const CollectiveTable& t : tables->tables) {
    if (!NetFabricOf(t).empty()) systems_on[NetFabricOf(t)].insert(t.system);
  }
  EXPECT_GE(systems_on["efa"].size(), 4u);
  EXPECT_GE(systems_on["verbs"].size(), 6u);
  CollectiveConstants none;
  none.pipeline_fill = 0;
  for (auto& [fabric, us] : none.net_latency_us) us = 0;
  const std::vector<HeldOutSystem> held = LeaveOneSystemOut(*tables);
  ASSERT_GE(held.size(), 15u);
  std::vector<double> held_out, without;
  for (const HeldOutSystem& h : held) {
    EXPECT_GE(h.refit.pipeline_fill, 0.25) << h.system;
    EXPECT_LE(h.refit.pipeline_fill, 0.45) << h.system;
    for (const auto& [fabric, us] : compiled.net_latency_us) {
      EXPECT_NEAR(h.refit.net_latency_us.at(fabric), us, 3.0) << h.system << " " << fabric;
    }
    for (double e : h.errors) held_out.push_back(std::abs(e));
  }
  for (const CollectiveTable& t : tables->tables) {
    for (const CollectiveRow& row : t.rows) {
      without.push_back(std::abs(CheckCollectiveRow(t, row, none).error));
    }
  }
  // Held out 10.7 %, against 21.1 % with none of the three.
  EXPECT_EQ(held_out.size(), without.size());
  EXPECT_LT(Median(held_out), 0.12);
  EXPECT_LT(Median(held_out), Median(without) - 0.08);
}

// Published EFA floors (aws-samples/awsome-distributed-training, nccl-tests
// on two instances): 8-byte all-reduce in 163 us on p4de, where aws-ofi-nccl
// forces the Simple protocol, and in 69 us on p5, where LL runs; 8 MiB on
// p4de in 761 us. Without EFA's hop the model gave 25 us for both floors.
TEST(CollectiveTables, EfaFloorsAndProtocols) {
  auto tables = LoadTables();
  if (!tables.ok()) GTEST_SKIP() << tables.status().ToString();
  const CollectiveTable *p4de = nullptr, *p5 = nullptr;
  for (const CollectiveTable& t : tables->tables) {
    if (t.id == "aws-p4de-2node-ar") p4de = &t;
    if (t.id == "aws-p5-2node-ar") p5 = &t;
  }
  ASSERT_NE(p4de, nullptr);
  ASSERT_NE(p5, nullptr);
  EXPECT_EQ(p4de->cluster.net_transport, "efa-sendrecv");
  EXPECT_EQ(p5->cluster.net_transport, "efa");
  const CollectiveRowCheck floor4 = CheckCollectiveRow(*p4de, {8, 163.3, "test"});
  EXPECT_EQ(floor4.protocol, topology::Protocol::kSimple);
  EXPECT_NEAR(floor4.predicted_us / 163.3, 1.0, 0.15);
  // Mid sizes move with it but stay fast: 8 MiB 29 % fast, 44 % without the hop.
  CollectiveConstants no_hop;
  for (auto& [fabric, us] : no_hop.net_latency_us) us = 0;
  const CollectiveRow mid{8388608, 760.7, "test"};
  EXPECT_GT(CheckCollectiveRow(*p4de, mid).predicted_us / mid.measured_us, 0.65);
  EXPECT_LT(CheckCollectiveRow(*p4de, mid, no_hop).predicted_us / mid.measured_us, 0.6);
  const CollectiveRowCheck floor5 = CheckCollectiveRow(*p5, {8, 69.1, "test"});
  EXPECT_EQ(floor5.protocol, topology::Protocol::kLL);
  EXPECT_NEAR(floor5.predicted_us / 69.1, 1.0, 0.15);
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
    EXPECT_NEAR(c.predicted_us / measured_us, 1.0, 0.12) << bytes;
    CollectiveConstants no_fill;
    no_fill.pipeline_fill = 0;
    EXPECT_LT(CheckCollectiveRow(*azure, {bytes, measured_us, "test"}, no_fill).predicted_us /
                  measured_us,
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
