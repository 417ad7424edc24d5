// Pipeline schedules (ParallelConfig::pp_schedule, planner/pipeline.h): the
// bubble and activation formulas against the published figures, the V-shaped
// stage placement torchtitan builds, the config key, and which frameworks the
// search offers them for.
//
// Published figures:
//  - Qi et al. 2023, "Zero Bubble Pipeline Parallelism" (arXiv 2401.10241) and
//    its authors' summary table (Sea AI Lab, "Comparison assuming
//    T_F = T_B = T_W"): bubble rate 1F1B (p−1)/m, ZB1P (= ZB-H1) (p−1)/(3m),
//    ZB-V 0; activation memory 1F1B, ZB1P and ZB-V 1×.
//  - Narayanan et al. 2021 §2.2: the interleaved schedule's bubble is 1F1B's / v.
//  - DeepSeek-V3 report Table 2 and deepseek-ai/DualPipe README @3da1bbe (PP
//    stages; F, B = full backward, W per chunk): 1F1B (PP−1)(F+B); ZB1P
//    (PP−1)(F+B−2W); DualPipeV on PP/2 devices (PP/2−1)(F&B+B−3W) with PP+1
//    activations per device against 1F1B's PP.
#include <gtest/gtest.h>

#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/pipeline.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "tests/planner/test_jobs.h"

namespace paratune::planner {
namespace {

// Bubble rate: the bubble over the m micro-batches' useful time m·(F+B+W).
double Rate(PpSchedule s, int pp, int vpp, int m, double f, double b, double w) {
  return PipelineBubble(s, pp, vpp, f, b, w) / (m * (f + b + w));
}

TEST(Schedules, BubbleRatesAtEqualPassTimes) {
  for (int p : {2, 4, 8, 16}) {
    for (int m : {p, 2 * p, 64}) {
      EXPECT_DOUBLE_EQ(Rate(PpSchedule::k1F1B, p, 1, m, 1, 1, 1), (p - 1.0) / m);
      EXPECT_DOUBLE_EQ(Rate(PpSchedule::kZbH1, p, 1, m, 1, 1, 1), (p - 1.0) / (3.0 * m));
      EXPECT_DOUBLE_EQ(Rate(PpSchedule::kZbV, p, 2, m, 1, 1, 1), 0.0);
      for (int v : {2, 4}) {
        EXPECT_DOUBLE_EQ(Rate(PpSchedule::k1F1B, p, v, m, 1, 1, 1), (p - 1.0) / (v * m));
      }
    }
  }
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::kZbH1, 1, 1, 1, 1, 1), 0.0);
  EXPECT_DOUBLE_EQ(BubbleRelativeTo1F1B(PpSchedule::k1F1B, 1, 1, 1, 1, 1), 0.0);
}

TEST(Schedules, ZeroBubbleWithUnequalPasses) {
  // Qi et al. Table 2: 1F1B (p−1)(T_F+T_B+T_W), ZB-H1 (p−1)(T_F+T_B−T_W).
  const double tf = 1.0, tb = 1.4, tw = 0.8;
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::k1F1B, 8, 1, tf, tb, tw), 7 * (tf + tb + tw));
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::kZbH1, 8, 1, tf, tb, tw), 7 * (tf + tb - tw));
  // The same in DeepSeek's notation, B the full backward (tb + tw): ZB1P (PP−1)(F+B−2W).
  const double full = tb + tw;
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::kZbH1, 8, 1, tf, tb, tw), 7 * (tf + full - 2 * tw));
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::k1F1B, 8, 1, tf, tb, tw), 7 * (tf + full));
}

TEST(Schedules, DualPipeVAsTheDualPipeReadmeStatesIt) {
  // PP = 8 stages on 4 devices, per stage (chunk): F = 2, full backward B = 3.5,
  // W = 1.5; F&B, a forward and a backward chunk overlapped, computes F + B.
  const double F = 2, B = 3.5, W = 1.5;
  const double expected = (8 / 2 - 1) * ((F + B) + B - 3 * W);  // 13.5
  // A device runs two stages: its forward 2F, input-gradient 2(B − W), weights 2W.
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::kDualPipeV, 4, 2, 2 * F, 2 * (B - W), 2 * W),
                   expected);
  // Against the README's 1F1B with the same stages: (PP−1)(F+B) on 8 devices.
  EXPECT_DOUBLE_EQ(PipelineBubble(PpSchedule::k1F1B, 8, 1, F, B - W, W), 7 * (F + B));
  // At F = B_input = W the DualPipeV bubble is a third of 1F1B's on the same devices.
  EXPECT_DOUBLE_EQ(BubbleRelativeTo1F1B(PpSchedule::kDualPipeV, 4, 2, 1, 1, 1), 1.0 / 3.0);
}

TEST(Schedules, ActivationsRelativeTo1F1B) {
  ParallelConfig c;
  c.pp = 8;
  EXPECT_DOUBLE_EQ(ActivationFactor(c), 1.0);
  c.pp_schedule = PpSchedule::kZbH1;  // ZB-H1: no more than 1F1B (Qi et al. §2.1)
  EXPECT_DOUBLE_EQ(ActivationFactor(c), 1.0);
  c.vpp = 2;
  c.pp_schedule = PpSchedule::kZbV;  // ZB-V: 1× (pM_B)
  EXPECT_DOUBLE_EQ(ActivationFactor(c), 1.0);
  c.pp_schedule = PpSchedule::k1F1B;  // Korthikanti §4.2.3: 1 + (p−1)/(p·v)
  EXPECT_DOUBLE_EQ(ActivationFactor(c), 1.0 + 7.0 / 16.0);
  // DualPipeV on 8 devices = 16 stages: PP + 1 = 17 stage activations per
  // device, where 1F1B on the same devices holds 8 micro-batches of 2 stages.
  c.pp_schedule = PpSchedule::kDualPipeV;
  EXPECT_DOUBLE_EQ(ActivationFactor(c), 17.0 / 16.0);
}

TEST(Schedules, VSchedulesPlaceStagesInAV) {
  // torchtitan's stage_v_pairs: zip(range(pp), range(2pp−1, pp−1, −1)).
  ParallelConfig c;
  c.pp = 4;
  c.vpp = 2;
  c.pp_schedule = PpSchedule::kZbV;
  const int v_ranks[] = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(ChunkRank(c, k), v_ranks[k]) << k;
  c.pp_schedule = PpSchedule::kZbH1;
  for (int k = 0; k < 8; ++k) EXPECT_EQ(ChunkRank(c, k), k % 4) << k;
  // 32 layers with torchtitan's default weights (1, 1): 34 effective layers over
  // 8 stages are 5, 5, 4, ..., 4; less the embedding and the output: stages
  // hold 4 5 4 4 4 4 4 3 layers.
  c.pp_embedding_layers = c.pp_loss_layers = 1;
  const StageLayers looped = SplitLayers(32, c, PpSplit::kTorchtitan);
  EXPECT_EQ(looped.first, 4 + 4);
  EXPECT_EQ(looped.last, 4 + 3);
  EXPECT_EQ(looped.max, 5 + 4);
  c.pp_schedule = PpSchedule::kDualPipeV;
  const StageLayers v = SplitLayers(32, c, PpSplit::kTorchtitan);
  EXPECT_EQ(v.first, 4 + 3);  // stages 0 and 7
  EXPECT_EQ(v.last, 4 + 4);   // stages 3 and 4
  EXPECT_EQ(v.max, 5 + 4);    // stages 1 and 6
}

TEST(Schedules, ConfigKey) {
  auto parse = [](const Json& j) { return ParseConfig(j, "/config", 0); };
  auto zbv = parse({{"pp", 4}, {"vpp", 2}, {"pp_schedule", "zb-v"}});
  ASSERT_TRUE(zbv.ok()) << zbv.status().ToString();
  EXPECT_EQ(zbv->pp_schedule, PpSchedule::kZbV);
  EXPECT_EQ(ConfigToJson(*zbv)["pp_schedule"], "zb-v");
  auto back = parse(Json::parse(ConfigToJson(*zbv).dump()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *zbv);
  // 1F1B documents carry no pp_schedule key.
  EXPECT_FALSE(ConfigToJson(ParallelConfig{}).contains("pp_schedule"));
  EXPECT_TRUE(parse({{"pp", 4}, {"vpp", 2}, {"pp_schedule", "interleaved"}}).ok());
  for (const Json& bad : {Json{{"pp", 4}, {"vpp", 1}, {"pp_schedule", "zb-v"}},
                          Json{{"pp", 4}, {"vpp", 3}, {"pp_schedule", "dualpipev"}},
                          Json{{"pp", 1}, {"pp_schedule", "zb-h1"}},
                          Json{{"pp", 4}, {"vpp", 2}, {"pp_schedule", "1f1b"}},
                          Json{{"pp", 4}, {"pp_schedule", "interleaved"}},
                          Json{{"pp", 4}, {"pp_schedule", "gpipe"}}}) {
    auto r = parse(bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find("/config/pp_schedule"), std::string::npos)
        << r.status().message();
  }
  auto s = ConfigStringToJson("pp=4,vpp=2,pp_schedule=dualpipev");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["pp_schedule"], "dualpipev");
}

Job Llama70b(Framework fw, bool compile = false) {
  Job j = testing::MakeJob("llama3-70b", "dgx-h100", 64, 64, 8192, fw);
  j.training.compile = compile;
  return j;
}

ParallelConfig Tt(PpSchedule s, int vpp) {
  ParallelConfig c;
  c.gy = 8;
  c.sp = true;
  c.pp = 4;
  c.vpp = vpp;
  c.gdata = 2;
  c.pp_embedding_layers = c.pp_loss_layers = 1;
  c.pp_schedule = s;
  c.placement = *ParsePlacement("x-y-cp-z-data-pp");
  return c;
}

TEST(Schedules, OfferedWhereTheFrameworkRunsThem) {
  const Job tt = Llama70b(Framework::kTorchtitan);
  const CostModel titan = testing::CostModelOf(tt);
  for (PpSchedule s : {PpSchedule::kZbH1, PpSchedule::kZbV, PpSchedule::kDualPipeV}) {
    EXPECT_EQ(titan.CheckRules(Tt(s, 2)), Reason::kOk) << PpScheduleName(s);
  }
  // torchtitan's ZB-H1 is InterleavedZeroBubble: two or more stages per rank.
  EXPECT_NE(titan.CheckRules(Tt(PpSchedule::kZbH1, 1)), Reason::kOk);
  // PyTorch's zero-bubble schedules refuse compiled stages.
  const Job ttc = Llama70b(Framework::kTorchtitan, true);
  const CostModel compiled = testing::CostModelOf(ttc);
  EXPECT_NE(compiled.CheckRules(Tt(PpSchedule::kZbV, 2)), Reason::kOk);
  // Megatron-Core @ d98e8a6 runs 1F1B and interleaved only.
  const Job mg = Llama70b(Framework::kMegatron);
  const CostModel megatron = testing::CostModelOf(mg);
  ParallelConfig c = Tt(PpSchedule::kZbV, 2);
  c.pp_embedding_layers = c.pp_loss_layers = 0;
  EXPECT_NE(megatron.CheckRules(c), Reason::kOk);
  c.pp_schedule = PpSchedule::k1F1B;
  EXPECT_EQ(megatron.CheckRules(c), Reason::kOk);

  SearchOptions o;
  o.top_k = 50;
  o.fixed = {{"pp", "4"}};
  bool zero_bubble = false;
  for (const Candidate& cand : Search(titan, o).RunAll().top) {
    zero_bubble = zero_bubble || cand.config.pp_schedule != PpSchedule::k1F1B;
  }
  EXPECT_TRUE(zero_bubble) << "torchtitan's search offers the zero-bubble schedules";
  for (const Candidate& cand : Search(megatron, o).RunAll().top) {
    EXPECT_EQ(cand.config.pp_schedule, PpSchedule::k1F1B) << ConfigToString(cand.config);
  }
  o.fixed = {{"pp", "4"}, {"pp_schedule", "dualpipev"}};
  const SearchResult pinned = Search(titan, o).RunAll();
  ASSERT_FALSE(pinned.top.empty());
  for (const Candidate& cand : pinned.top) {
    EXPECT_EQ(cand.config.pp_schedule, PpSchedule::kDualPipeV);
    EXPECT_EQ(cand.config.vpp, 2);
  }
}

TEST(Schedules, ZeroBubbleShrinksTheBubbleNotTheWork) {
  const Job tt = Llama70b(Framework::kTorchtitan);
  const CostModel cm = testing::CostModelOf(tt);
  const Prediction base = cm.Predict(Tt(PpSchedule::k1F1B, 2));
  const Prediction zbh1 = cm.Predict(Tt(PpSchedule::kZbH1, 2));
  const Prediction zbv = cm.Predict(Tt(PpSchedule::kZbV, 2));
  ASSERT_GT(base.breakdown.bubble_s, 0);
  // W fills part of the bubble: below interleaved 1F1B's, above zero (F + B > W).
  EXPECT_LT(zbh1.breakdown.bubble_s, base.breakdown.bubble_s);
  EXPECT_GT(zbh1.breakdown.bubble_s, 0);
  EXPECT_LT(zbv.iteration_time_s, base.iteration_time_s);
  EXPECT_DOUBLE_EQ(zbh1.breakdown.compute_s, base.breakdown.compute_s);
  // ZB-V holds 1F1B's activations; interleaving holds (1 + (p−1)/(p·v))×.
  EXPECT_LT(zbv.memory.activations_GiB, base.memory.activations_GiB);
  // DualPipeV, placed like ZB-V, has the larger bubble and activations, so the
  // search prices it only when pinned.
  const Prediction dual = cm.Predict(Tt(PpSchedule::kDualPipeV, 2));
  EXPECT_GE(dual.iteration_time_s, zbv.iteration_time_s);
  EXPECT_GT(dual.memory.activations_GiB, zbv.memory.activations_GiB);
}

}  // namespace
}  // namespace paratune::planner
