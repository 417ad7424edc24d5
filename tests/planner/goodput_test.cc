// The goodput model (planner/goodput.h): Young's and Daly's intervals and
// Daly's expected wall time as properties, checkpoint sizes from the
// frameworks' layouts, and the default failure rate from Llama 3's published
// counts (validation/data/goodput_runs.json). The published effective-training
// figures and checkpoint sizes are checked in tests/validation/
// goodput_checks_test.cc, as `paratune validate --goodput` reports them.
#include "planner/goodput.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "common/json.h"
#include "planner/goodput_request.h"
#include "planner/plans.h"
#include "tests/planner/test_jobs.h"

namespace paratune::planner {
namespace {

using testing::MakeJob;

// Llama 3 70B's layout on 64 GPUs in these tests: tp 8, pp 2, dp 4 with the
// distributed optimizer.
ParallelConfig Tp8Pp2Dp4() {
  ParallelConfig c;
  c.gy = 8;
  c.pp = 2;
  c.gdata = 4;
  c.distributed_optimizer = true;
  return c;
}

Json PublishedRun(const std::string& id) {
  std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/validation/data/goodput_runs.json");
  EXPECT_TRUE(in.good());
  const Json doc = Json::parse(in);
  for (const Json& r : doc["runs"]) {
    if (r["id"] == id) return r;
  }
  ADD_FAILURE() << "no run " << id;
  return Json();
}

TEST(Goodput, TokenBudgetsReadAsPublished) {
  // Budgets are quoted in powers of ten: Llama 3's "15.6T tokens".
  EXPECT_DOUBLE_EQ(*ParseTokenBudget("15.6T", "t"), 15.6e12);
  EXPECT_DOUBLE_EQ(*ParseTokenBudget("300B", "t"), 3e11);
  EXPECT_DOUBLE_EQ(*ParseTokenBudget("300G", "t"), 3e11);
  EXPECT_DOUBLE_EQ(*ParseTokenBudget("8k", "t"), 8e3);
  EXPECT_DOUBLE_EQ(*ParseTokenBudget("2e12", "t"), 2e12);
  for (const char* bad : {"", "T", "0", "-1T", "15TB", "2^40", "1e19"}) {
    EXPECT_FALSE(ParseTokenBudget(bad, "t").ok()) << bad;
  }
  auto g = ParseGoodputRequest(Json::parse(R"({"tokens": "1T", "restart_s": 300})"), "/goodput");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_DOUBLE_EQ(g->tokens, 1e12);
  EXPECT_DOUBLE_EQ(g->restart_s, 300);
  EXPECT_DOUBLE_EQ(g->failures_per_gpu_hour, kDefaultFailuresPerGpuHour);
  EXPECT_FALSE(ParseGoodputRequest(Json::parse(R"({"restart_s": 300})"), "/goodput").ok());
}

TEST(Goodput, DalyApproachesYoungWhenSavesAreCheap) {
  // δ/M → 0: Daly's correction terms vanish and its optimum is Young's.
  const double M = 3600 * 24;
  EXPECT_NEAR(DalyInterval(1, M) / YoungInterval(1, M), 1.0, 1e-2);
  // A dearer save relative to M moves Daly's optimum away from Young's.
  EXPECT_GT(std::abs(DalyInterval(600, 3600) / YoungInterval(600, 3600) - 1), 0.02);
  // δ ≥ 2M: Daly's rule is to save every M.
  EXPECT_DOUBLE_EQ(DalyInterval(8000, 3600), 3600);
}

TEST(Goodput, DalyIntervalMaximisesTheEffectiveFraction) {
  // Daly's interval is an approximation of the optimum of his own wall-time
  // expression: nearby intervals must not do better by more than a trace.
  for (double delta : {5.0, 60.0, 600.0}) {
    for (double M : {3600.0, 11000.0, 86400.0}) {
      const double tau = DalyInterval(delta, M);
      const double best = EffectiveFraction(tau, delta, 300, M);
      for (double f : {0.5, 0.8, 1.25, 2.0}) {
        EXPECT_GE(best + 1e-4, EffectiveFraction(tau * f, delta, 300, M))
            << "delta " << delta << " M " << M << " factor " << f;
      }
    }
  }
}

TEST(Goodput, EffectiveFractionFallsWithEveryCost) {
  const double base = EffectiveFraction(600, 10, 300, 10000);
  EXPECT_GT(base, 0);
  EXPECT_LT(base, 1);
  EXPECT_LT(EffectiveFraction(600, 20, 300, 10000), base);  // dearer save
  EXPECT_LT(EffectiveFraction(600, 10, 600, 10000), base);  // dearer restart
  EXPECT_LT(EffectiveFraction(600, 10, 300, 5000), base);   // more failures
  // No failures: only the saves cost time.
  EXPECT_NEAR(EffectiveFraction(600, 10, 300, 1e12), 600.0 / 610.0, 1e-6);
}

TEST(Goodput, CheckpointBytesFollowTheFrameworksLayouts) {
  // Mixed-precision Adam: Megatron dist-ckpt and DeepSpeed ZeRO-1/2 write
  // 16-bit weights (2 B) and the fp32 master copy and moments (12 B); torch
  // DCP's FSDP shards are the fp32 master (4 B) plus the moments (8 B); ZeRO-3
  // writes no 16-bit weights.
  Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096);
  const ParallelConfig c = Tp8Pp2Dp4();
  const GoodputOptions o;
  const double params = static_cast<double>(job.model.ParamCount());
  const CheckpointEstimate mg = EstimateCheckpoint(job, Framework::kMegatron, c, o);
  EXPECT_DOUBLE_EQ(mg.total_bytes, 14 * params);
  EXPECT_DOUBLE_EQ(mg.weights_bytes, 2 * params);
  // Fully parallel save: every rank writes its share.
  EXPECT_NEAR(mg.max_rank_bytes, 14 * params / 64, 1);

  ParallelConfig z1 = c;
  z1.distributed_optimizer = false;
  z1.zero = 1;
  const CheckpointEstimate ds = EstimateCheckpoint(job, Framework::kMegatronDeepSpeed, z1, o);
  EXPECT_DOUBLE_EQ(ds.total_bytes, 14 * params);
  // Data-parallel rank 0 writes the 16-bit weights of its model-parallel
  // shard beside its optimizer partition: the heaviest writer.
  EXPECT_NEAR(ds.max_rank_bytes, 2 * params / 16 + 12 * params / 64, 1);
  EXPECT_GT(ds.max_rank_bytes, mg.max_rank_bytes);

  ParallelConfig z3 = z1;
  z3.zero = 3;
  const CheckpointEstimate ds3 = EstimateCheckpoint(job, Framework::kMegatronDeepSpeed, z3, o);
  EXPECT_DOUBLE_EQ(ds3.total_bytes, 12 * params);
  EXPECT_DOUBLE_EQ(ds3.weights_bytes, 0);

  // AxoNN: the first data-parallel replica's gx·gy·gz ranks write it all.
  ParallelConfig ax;
  ax.gx = 2;
  ax.gy = 2;
  ax.gz = 2;
  ax.gdata = 8;
  const CheckpointEstimate axonn = EstimateCheckpoint(job, Framework::kAxonn, ax, o);
  EXPECT_NEAR(axonn.max_rank_bytes, 14 * params / 8, 1);
  EXPECT_NEAR(axonn.max_node_bytes, 14 * params, 8);  // one node holds the 8 writers

  ParallelConfig fsdp;
  fsdp.gz = 64;
  const CheckpointEstimate dcp = EstimateCheckpoint(job, Framework::kTorchtitan, fsdp, o);
  EXPECT_DOUBLE_EQ(dcp.total_bytes, 12 * params);
  EXPECT_DOUBLE_EQ(dcp.weights_bytes, 4 * params);  // the fp32 shards are the master copy
  EXPECT_NEAR(dcp.held_rank_bytes, 12 * params / 64, 1);
}

TEST(Goodput, SavingIsBoundByTheSlowerOfFilesystemAndNode) {
  Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096);
  const ParallelConfig c = Tp8Pp2Dp4();
  GoodputOptions o;
  o.save = CheckpointSave::kSync;
  o.fs_GBps = 1;  // a slow filesystem binds
  const CheckpointEstimate slow = EstimateCheckpoint(job, Framework::kMegatron, c, o);
  EXPECT_FALSE(slow.write_node_bound);
  EXPECT_NEAR(slow.write_s, slow.total_bytes / 1e9, 1e-6);
  o.fs_GBps = 1e6;
  o.fs_node_GBps = 1;  // a slow node binds
  const CheckpointEstimate node = EstimateCheckpoint(job, Framework::kMegatron, c, o);
  EXPECT_TRUE(node.write_node_bound);
  EXPECT_NEAR(node.write_s, node.max_node_bytes / 1e9, 1e-6);
  // More bandwidth is never slower.
  o.fs_node_GBps = 2;
  EXPECT_LT(EstimateCheckpoint(job, Framework::kMegatron, c, o).write_s, node.write_s);
}

TEST(Goodput, AsyncSaveCostsTheStepOnlyTheCopyToHost) {
  Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096);
  const ParallelConfig c = Tp8Pp2Dp4();
  GoodputOptions o;
  o.fs_GBps = 10;
  const CheckpointEstimate async = EstimateCheckpoint(job, Framework::kMegatron, c, o);
  ASSERT_TRUE(async.async);
  EXPECT_NEAR(async.blocking_s, async.max_rank_bytes / (job.cluster.HostLinkGBps() * 1e9), 1e-9);
  EXPECT_LT(async.blocking_s, async.write_s);
  o.save = CheckpointSave::kSync;
  EXPECT_DOUBLE_EQ(EstimateCheckpoint(job, Framework::kMegatron, c, o).blocking_s, async.write_s);
  // FSDP1 trainers save synchronously whatever is asked.
  EXPECT_FALSE(OffersAsyncSave(Framework::kFsdp, ParallelConfig{}));
  Job fsdp_job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096, Framework::kFsdp);
  ParallelConfig fsdp;
  fsdp.gz = 64;
  o.save = CheckpointSave::kAuto;
  const CheckpointEstimate f = EstimateCheckpoint(fsdp_job, Framework::kFsdp, fsdp, o);
  EXPECT_FALSE(f.async);
  EXPECT_DOUBLE_EQ(f.blocking_s, f.write_s);
}

// DeepSpeed's decoupled writer is committed at the next DeepSpeedEngine.step()
// (engine.py:3452-3453 @ edaa722), which waits for the write: the save
// overlaps one step, and the step after it stalls for the rest. Under
// Megatron-DeepSpeed's pipeline engine step() is never called
// (pipe/engine.py:1244-1252), so pp > 1 saves synchronously.
TEST(Goodput, DeepSpeedsDecoupledSaveOverlapsOneStep) {
  Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096, Framework::kMegatronDeepSpeed);
  ParallelConfig flat;
  flat.gy = 8;
  flat.gdata = 8;
  flat.zero = 1;
  GoodputOptions o;
  o.tokens = 1e12;
  o.fs_GBps = 10;
  const CheckpointEstimate e = EstimateCheckpoint(job, Framework::kMegatronDeepSpeed, flat, o);
  ASSERT_TRUE(e.async);
  EXPECT_TRUE(e.async_one_step);
  Prediction p;
  p.fits = true;
  for (double step : {e.write_s / 4, e.write_s * 2}) {
    p.iteration_time_s = p.pessimistic_time_s = step;
    const Goodput g = GoodputOf(job, Framework::kMegatronDeepSpeed, flat, p, o);
    EXPECT_DOUBLE_EQ(g.checkpoint.blocking_s, std::max(0.0, e.write_s - step)) << step;
  }
  ParallelConfig staged = flat;
  staged.pp = 2;
  staged.gdata = 4;
  EXPECT_FALSE(EstimateCheckpoint(job, Framework::kMegatronDeepSpeed, staged, o).async);
  EXPECT_TRUE(EstimateCheckpoint(job, Framework::kMegatron, staged, o).async);
}

// A cheap async save would, by Daly's optimum alone, be written back to back;
// the shortest interval (kDefaultMinCheckpointIntervalS unless set) keeps
// saves apart, and without it the write itself is the floor (a save waits for
// the previous one). Each result names the floor that set it.
TEST(Goodput, TheShortestIntervalKeepsCheapSavesApart) {
  const Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096);
  const ParallelConfig c = Tp8Pp2Dp4();
  GoodputOptions o;
  o.tokens = 1e12;
  o.failures_per_gpu_hour = 1e-3;  // a job MTBF of 15.6 h
  Prediction p;
  p.fits = true;
  p.iteration_time_s = p.pessimistic_time_s = 5;
  const Goodput g = GoodputOf(job, Framework::kMegatron, c, p, o);
  ASSERT_TRUE(g.checkpoint.async);
  ASSERT_LT(DalyInterval(g.checkpoint.blocking_s, g.job_mtbf_s), kDefaultMinCheckpointIntervalS);
  EXPECT_DOUBLE_EQ(g.interval_s, kDefaultMinCheckpointIntervalS);
  EXPECT_STREQ(g.interval_bound, "min_interval");
  EXPECT_DOUBLE_EQ(g.interval_steps, kDefaultMinCheckpointIntervalS / 5);
  o.min_interval_s = 0;
  o.fs_GBps = 1;  // a slow filesystem: the write outlasts Daly's optimum
  const Goodput w = GoodputOf(job, Framework::kMegatron, c, p, o);
  EXPECT_DOUBLE_EQ(w.interval_s, w.checkpoint.write_s);
  EXPECT_STREQ(w.interval_bound, "write");
  // Synchronous saves at the same filesystem: Daly's optimum, far above the floor.
  o.save = CheckpointSave::kSync;
  const Goodput s = GoodputOf(job, Framework::kMegatron, c, p, o);
  EXPECT_STREQ(s.interval_bound, "daly");
  EXPECT_DOUBLE_EQ(s.interval_s, DalyInterval(s.checkpoint.blocking_s, s.job_mtbf_s));
}

TEST(Goodput, DefaultFailureRateIsLlama3sUnexpectedInterruptions) {
  const Json r = PublishedRun("llama3-405b");
  const double gpu_hours = r["gpus"].get<double>() * r["days"].get<double>() * 24;
  EXPECT_DOUBLE_EQ(kDefaultFailuresPerGpuHour,
                   r["unexpected_interruptions"].get<double>() / gpu_hours);
  EXPECT_EQ(r["interruptions"].get<int>(),
            r["planned_interruptions"].get<int>() + r["unexpected_interruptions"].get<int>());
}

// A sweep under --objective time-to-train picks each count's plan by the time
// to train, not by the step: here the layout without the distributed
// optimizer has the shorter step, but every rank reads back 2.4x the state
// after each of the frequent failures (the optimizer unsharded over dp 4), so
// it trains later.
TEST(Goodput, SweepPicksByTimeToTrainUnderThatObjective) {
  const Job job = MakeJob("llama3-70b", "dgx-h100", 64, 512, 4096);
  auto candidate = [](bool distopt, double step_s) {
    Candidate c;
    c.config = Tp8Pp2Dp4();
    c.config.distributed_optimizer = distopt;
    c.prediction.fits = true;
    c.prediction.iteration_time_s = step_s;
    c.prediction.pessimistic_time_s = step_s;  // no band: rank 1 leads alone
    return c;
  };
  PlanSection sec;
  sec.job = job;
  // Ranked by the pessimistic step, as a search leaves its pool.
  sec.result.pool = {candidate(false, 9.8), candidate(true, 10.0)};
  sec.result.top = sec.result.pool;
  SearchOptions o;
  o.goodput.tokens = 1e12;
  o.goodput.fs_GBps = 5;
  o.goodput.save = CheckpointSave::kSync;
  o.goodput.failures_per_gpu_hour = 1e-2;
  const Goodput unsharded = GoodputOf(job, Framework::kMegatron, sec.result.pool[0].config,
                                      sec.result.pool[0].prediction, o.goodput);
  const Goodput sharded = GoodputOf(job, Framework::kMegatron, sec.result.pool[1].config,
                                    sec.result.pool[1].prediction, o.goodput);
  ASSERT_GT(unsharded.checkpoint.load_s, 2 * sharded.checkpoint.load_s);
  ASSERT_GT(unsharded.time_to_train_s, sharded.time_to_train_s);

  o.objective = Objective::kTime;
  auto by_step = PicksAcrossCounts({sec}, o);
  ASSERT_TRUE(by_step[0]);
  EXPECT_FALSE(by_step[0]->best.config.distributed_optimizer);
  o.objective = Objective::kTimeToTrain;
  auto by_goodput = PicksAcrossCounts({sec}, o);
  ASSERT_TRUE(by_goodput[0]);
  EXPECT_TRUE(by_goodput[0]->best.config.distributed_optimizer);
  // The next count's pick, when the previous layout leaves, is explained in
  // days to train, the clock it was ranked by.
  PlanSection twice = sec;
  twice.job.gpus = 128;
  Candidate tp4 = candidate(true, 4.5);  // another layout, 10 % the quicker step
  tp4.config.gy = 4;
  tp4.config.gdata = 16;
  Candidate kept = candidate(true, 5.0);
  kept.config.gdata = 8;
  twice.result.pool = {tp4, kept};
  twice.result.top = twice.result.pool;
  auto sweep = PicksAcrossCounts({sec, twice}, o);
  ASSERT_TRUE(sweep[1]);
  EXPECT_EQ(sweep[1]->best.config.gy, 4);
  EXPECT_NE(sweep[1]->why.find("longer to train here"), std::string::npos) << sweep[1]->why;
  EXPECT_NE(sweep[1]->why.find(" days)"), std::string::npos) << sweep[1]->why;
}

}  // namespace
}  // namespace paratune::planner
