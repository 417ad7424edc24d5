// The samplers over the fake backend: group layouts like NCCL_TESTS_SPLIT,
// nccl-tests timing protocol (warm-up, gate, events, max over ranks, median),
// and fits that recover exactly the α-β and GEMM rates the fake was given.
#include "profiler/sampler.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "backend/fake.h"
#include "backend/fault.h"
#include "profiler/nccl_import.h"
#include "profiler/profile.h"
#include "profiler/report.h"

namespace paratune::profiler {
namespace {

using topology::Collective;
using topology::Tier;

TEST(GroupLayout, SlotsInterleaveGroupsLikeAxonnPlacement) {
  // 16 ranks, groups of 2 at stride 8: rank r pairs with r ± 8 (one GPU per node).
  EXPECT_EQ(SlotFor({2, 8}, 16, 3).color, 3);
  EXPECT_EQ(SlotFor({2, 8}, 16, 3).key, 0);
  EXPECT_EQ(SlotFor({2, 8}, 16, 11).color, 3);
  EXPECT_EQ(SlotFor({2, 8}, 16, 11).key, 1);
  // Stride 1: consecutive blocks; leftovers idle.
  EXPECT_EQ(SlotFor({4, 1}, 10, 5).color, 1);
  EXPECT_EQ(SlotFor({4, 1}, 10, 9).color, -1);
}

TEST(GroupLayout, DefaultShapesCoverNodesAndTheNetwork) {
  auto shapes = DefaultGroupShapes(16, 8, false);
  std::vector<std::pair<int, int>> got;
  for (const auto& s : shapes) got.push_back({s.group_size, s.stride});
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{2, 1}, {4, 1}, {8, 1}, {2, 8}, {16, 1}}));
  got.clear();
  for (const auto& s : DefaultGroupShapes(16, 8, true)) got.push_back({s.group_size, s.stride});
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{2, 1}, {8, 1}, {2, 8}, {16, 1}}));
  EXPECT_TRUE(DefaultGroupShapes(1, 1, false).empty());
}

struct MeasureRun {
  Status status;
  Measurements m;
  std::vector<std::unique_ptr<backend::FakeBackend>> ranks;
};

MeasureRun Measure(const backend::FakeConfig& config, const MeasurementPlan& plan) {
  MeasureRun run;
  auto world = backend::FakeWorld::Create(config);
  std::mutex mu;
  run.status = world->RunRanks(
      [&](backend::Backend& b) -> Status {
        PT_ASSIGN_OR_RETURN(Measurements m, RunMeasurements(b, plan, nullptr));
        if (b.rank() == 0) {
          std::lock_guard<std::mutex> lock(mu);
          run.m = std::move(m);
        }
        return Status::Ok();
      },
      &run.ranks);
  return run;
}

backend::FakeConfig TwoDgxNodes() {
  backend::FakeConfig c;
  c.world_size = 16;
  c.ranks_per_node = 8;
  c.intra_node = {8.0, 230.0};
  c.inter_node = {12.0, 24.0};
  c.gemm_tflops = {19.5, 156.0, 312.0, 312.0, 0.0};  // A100 dense peaks; no fp8
  c.gemm_latency_us = 6.0;
  c.copy_GBps = 1600.0;
  return c;
}

TEST(Sampler, MeasuresTheFakesModelAndTheFitsRecoverIt) {
  MeasurementPlan plan;
  plan.collectives = {Collective::kAllReduce, Collective::kAllGather};
  plan.groups = {{8, 1}, {2, 8}};
  plan.sweep = {1024, int64_t{1} << 30, 4, 0};
  plan.warmup_iters = 1;
  plan.iters = 3;
  plan.samples = 3;
  plan.gemm_precisions = {topology::Precision::kBf16, topology::Precision::kFp8};
  for (int64_t s = 256; s <= 8192; s *= 2) plan.gemm_shapes.push_back({s, s, s});
  plan.copy_bytes = int64_t{1} << 28;
  const MeasureRun run = Measure(TwoDgxNodes(), plan);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  const Measurements& m = run.m;
  EXPECT_EQ(m.env.world_size, 16);
  EXPECT_EQ(m.env.nodes, 2);
  EXPECT_EQ(m.env.ranks_per_node, 8);
  ASSERT_EQ(m.collectives.size(), 4u);
  // Shape (8, 1): two intra-node groups; shape (2, 8): eight inter-node pairs per node.
  const CollectiveSeries& intra = m.collectives[0];
  EXPECT_EQ(intra.tier, Tier::kIntraNode);
  EXPECT_EQ(intra.groups, 2);
  const CollectiveSeries& inter = m.collectives[2];
  EXPECT_EQ(inter.collective, Collective::kAllReduce);
  EXPECT_EQ(inter.tier, Tier::kInterNode);
  EXPECT_EQ(inter.groups, 8);
  EXPECT_EQ(inter.concurrent_groups, 8);
  // Every row is exactly the model time; the fake holds no data, so #wrong is N/A.
  for (const SeriesRow& r : intra.rows) {
    const double want = 8.0 * 8 + 1.75 * r.size_bytes / 230e3;
    EXPECT_NEAR(r.time_us, want, 1e-9 * want) << r.size_bytes;
    EXPECT_NEAR(r.busbw_GBps, r.size_bytes / want / 1e3 * 1.75, 1e-9);
    EXPECT_EQ(r.wrong, -1);
    EXPECT_EQ(r.sample_time_us.size(), 3u);
  }
  // The fits give back the fake's parameters.
  std::vector<std::string> warnings;
  auto p =
      BuildProfile(m, std::nullopt, PeakTable{{19.5, 156.0, 312.0, 312.0, 0.0}, "fake"}, &warnings);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (const CollectiveEntry& e : p->collectives) {
    const bool is_inter = e.tier == Tier::kInterNode;
    EXPECT_NEAR(e.alpha_us, is_inter ? 12.0 : 8.0, 1e-6);
    EXPECT_NEAR(e.beta_GBps, is_inter ? 24.0 : 230.0, 1e-6);
  }
  // GEMMs: bf16 measured and fitted; fp8 waived with the backend's reason.
  ASSERT_EQ(m.gemm.size(), 1u);
  EXPECT_NEAR(m.gemm[0].rows.back().tflops,
              2.0 * 8192.0 * 8192 * 8192 / (6e-6 + 2.0 * 8192.0 * 8192 * 8192 / 312e12) / 1e12,
              1e-6);
  ASSERT_EQ(p->gemm.size(), 1u);
  EXPECT_GT(p->gemm[0].curve.back().efficiency, 0.98);
  ASSERT_EQ(m.waived.size(), 1u);
  EXPECT_NE(m.waived[0].reason.find("fp8"), std::string::npos);
  ASSERT_TRUE(m.copy.has_value());
  EXPECT_NEAR(m.copy->GBps, 1600.0, 1e-6);
}

TEST(Sampler, TimesEachSampleBetweenGatedEvents) {
  MeasurementPlan plan;
  plan.collectives = {Collective::kSendRecv};
  plan.groups = {{2, 1}};
  plan.sweep = {1 << 20, 1 << 20, 2, 0};
  plan.warmup_iters = 2;
  plan.iters = 4;
  plan.samples = 2;
  backend::FakeConfig c = TwoDgxNodes();
  c.world_size = 2;
  const MeasureRun run = Measure(c, plan);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  // On rank 0: split, 2 warm-up sendrecvs, then per sample hold → record →
  // 4 sendrecvs → record → release. (The correctness check issues nothing on
  // a backend that holds no data.)
  std::vector<backend::OpKind> kinds;
  for (const auto& op : run.ranks[0]->ops()) {
    if (op.kind != backend::OpKind::kSynchronize && op.kind != backend::OpKind::kAllocate) {
      kinds.push_back(op.kind);
    }
  }
  using K = backend::OpKind;
  const std::vector<K> sample = {K::kHoldStreams, K::kRecordEvent,   K::kSendRecv,
                                 K::kSendRecv,    K::kSendRecv,      K::kSendRecv,
                                 K::kRecordEvent, K::kReleaseStreams};
  std::vector<K> want = {K::kSplitComm, K::kSendRecv, K::kSendRecv};
  want.insert(want.end(), sample.begin(), sample.end());
  want.insert(want.end(), sample.begin(), sample.end());
  want.push_back(K::kDestroyComm);
  want.push_back(K::kFree);
  want.push_back(K::kFree);
  EXPECT_EQ(kinds, want);
}

TEST(Sampler, ReportTablesImportBackAsTheSameRows) {
  MeasurementPlan plan;
  plan.collectives = {Collective::kReduceScatter};
  plan.groups = {{4, 2}};
  plan.sweep = {4096, int64_t{1} << 26, 4, 0};
  plan.iters = 2;
  plan.samples = 1;
  backend::FakeConfig c = TwoDgxNodes();
  c.world_size = 8;
  c.ranks_per_node = 4;
  MeasureRun run = Measure(c, plan);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  run.m.env.backend = "fake";
  run.m.env.device = "fake";
  const std::string text = FormatCollectiveTables(run.m);
  auto back = ParseNcclTestsText(text, "report.txt", {});
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  ASSERT_EQ(back->series.size(), 1u);
  const CollectiveSeries& s = back->series[0];
  EXPECT_EQ(s.collective, Collective::kReduceScatter);
  EXPECT_EQ(s.group_size, 4);
  EXPECT_EQ(s.stride, 2);
  EXPECT_EQ(s.tier, Tier::kInterNode);  // 4 ranks at stride 2 span both 4-rank hosts
  ASSERT_EQ(s.rows.size(), run.m.collectives[0].rows.size());
  for (size_t i = 0; i < s.rows.size(); ++i) {
    EXPECT_EQ(s.rows[i].size_bytes, run.m.collectives[0].rows[i].size_bytes);
    EXPECT_NEAR(s.rows[i].busbw_GBps, run.m.collectives[0].rows[i].busbw_GBps, 0.006);
  }
}

// Every rank runs the plan on a fault-wrapped fake; returns each rank's Status.
std::vector<Status> MeasureWithFault(backend::FaultPlan fault) {
  backend::FakeConfig c = TwoDgxNodes();
  c.world_size = 4;
  c.host_timeout_s = 0.5;
  auto world = backend::FakeWorld::Create(c);
  MeasurementPlan plan;
  plan.collectives = {Collective::kAllReduce};
  plan.groups = {{4, 1}};
  plan.sweep = {1024, 1 << 20, 4, 0};
  plan.iters = 2;
  plan.samples = 2;
  std::vector<Status> out(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      backend::FaultBackend b(world->MakeRank(r), fault);
      out[static_cast<size_t>(r)] = RunMeasurements(b, plan, nullptr).status();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(Sampler, AnNcclErrorOnOneRankFailsItNamingTheMeasurementAndPeersTimeOut) {
  auto st = MeasureWithFault({backend::FaultKind::kCollectiveError, 3, 1});
  EXPECT_EQ(st[1].code(), StatusCode::kInternal);
  EXPECT_NE(st[1].message().find("all_reduce of"), std::string::npos) << st[1].message();
  EXPECT_NE(st[1].message().find("NCCL error"), std::string::npos);
  for (int r : {0, 2, 3}) EXPECT_EQ(st[static_cast<size_t>(r)].code(), StatusCode::kTimeout) << r;
}

TEST(Sampler, AHungCollectiveIsATimeout) {
  auto st = MeasureWithFault({backend::FaultKind::kTimeout, 2, 2});
  EXPECT_EQ(st[2].code(), StatusCode::kTimeout);
  EXPECT_NE(st[2].message().find("hung"), std::string::npos) << st[2].message();
}

}  // namespace
}  // namespace paratune::profiler
