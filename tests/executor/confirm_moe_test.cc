// `paratune confirm` on a mixture-of-experts plan, on the fake backend: every
// candidate of an MoE model also runs one MoE layer (dispatch all-to-all, the
// local experts' GEMMs, combine all-to-all) on the expert-parallel
// communicators, and the run report carries it measured beside the cost
// model's figures. The fake charges GEMMs at its FLOP rate and collectives on
// its α-β links, so the figures here follow from the fake's definition and the
// model's published shape (OLMoE-1B-7B: hidden 2048, 64 experts of width
// 1024, top-8, SwiGLU; Muennighoff et al. 2024, Table 1).
#include <gtest/gtest.h>

#include "executor/run/report.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

constexpr int kSeq = 1024;

backend::FakeConfig MoeFake(int world) {
  backend::FakeConfig fc;
  fc.world_size = world;
  fc.gemm_latency_us = 0;
  fc.host_timeout_s = 5;
  return fc;
}

// OLMoE's shapes with head-wise Q/K norms: Megatron (the framework these
// hand-built plans run in) has no norm over all heads' features, so it
// refuses OLMoE itself; the norms' width does not change the MoE layer.
planner::Job OlmoeJob(int gpus) {
  auto m = planner::ModelPreset("olmoe-1b-7b");
  EXPECT_TRUE(m.ok()) << m.status().message();
  m->qk_norm = "head";
  return testing::MakeJob(*m, testing::FakeLikeCluster(), gpus, kSeq, gpus);
}

// Runs confirm on every rank of a fake world, each rank's run a success;
// rank 0's report and every rank's backend (for the logs).
RunReport ConfirmOnFake(const backend::FakeConfig& fc, const ConfirmInput& in,
                        std::vector<backend::FakeBackend*>* fakes) {
  ConfirmOptions o;
  o.workload.slice_layers = 1;
  o.warmup = 1;
  o.samples = 2;
  o.comm_iters = 2;
  std::vector<Status> statuses;
  const RunReport root = testing::ConfirmOnFakeWorld(fc, in, o, nullptr, &statuses, fakes);
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  return root;
}

// Data parallel 8 with the experts over EP 8; and TP 2 (sequence parallel)
// with the experts' width split over ETP 2 and EP 4.
std::vector<planner::ParallelConfig> MoeConfigs() {
  planner::ParallelConfig ep8;
  ep8.gdata = 8;
  ep8.ep = 8;
  ep8.distributed_optimizer = true;
  planner::ParallelConfig etp2;
  etp2.gy = 2;
  etp2.sp = true;
  etp2.gdata = 4;
  etp2.ep = 4;
  etp2.etp = 2;
  etp2.distributed_optimizer = true;
  return {ep8, etp2};
}

TEST(ConfirmMoe, ReportsTheMoeLayerMeasuredBesidePredicted) {
  const planner::Job job = OlmoeJob(8);
  const planner::ModelSpec& m = job.model;
  const std::vector<planner::ParallelConfig> configs = MoeConfigs();
  std::vector<backend::FakeBackend*> fakes;
  const RunReport rep = ConfirmOnFake(MoeFake(8), testing::InputFor(job, configs), &fakes);
  ASSERT_EQ(rep.candidates.size(), configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    const planner::ParallelConfig& c = configs[i];
    const CandidateReport& cand = rep.candidates[i];
    SCOPED_TRACE(planner::ConfigToString(c));
    // bf16 tokens: 2 bytes each.
    ASSERT_NO_FATAL_FAILURE(testing::ExpectMoeLayerAsPlanned(cand, c, m, kSeq, 2));
    const MoeLayerReport& ml = *cand.moe_layer;
    const int64_t tokens = testing::MoeTokensPerRank(c, kSeq);
    EXPECT_EQ(ml.rows_per_expert, tokens * m.top_k * c.ep * c.etp / m.experts);
    // The fake runs bf16 GEMMs at 312 TFLOP/s with no per-call cost: the
    // experts take their FLOPs at that rate (SwiGLU FC1 is 2·f_e/etp wide).
    const double f = static_cast<double>(m.moe_ffn_hidden) / c.etp;
    const double flops =
        2.0 * ml.local_experts * static_cast<double>(ml.rows_per_expert) * m.hidden * (2.0 * f + f);
    EXPECT_NEAR(ml.experts.measured_s, flops / 312e12, 1e-6 * flops / 312e12);
    // The cluster describes the fake, so the model prices those GEMMs alike.
    EXPECT_NEAR(ml.experts.predicted_s / ml.experts.measured_s, 1.0, 0.05);
    bool said = false;
    for (const std::string& p : cand.measured_parts) said = said || p.rfind("moe layer:", 0) == 0;
    EXPECT_TRUE(said);
  }
  // Every rank's dispatch and combine are all-to-alls on a communicator of ep
  // ranks whose buffer holds the rank's tokens × top_k × hidden bf16 elements.
  ASSERT_EQ(fakes.size(), 8u);
  for (const planner::ParallelConfig& c : configs) {
    const int64_t tokens = testing::MoeTokensPerRank(c, kSeq);
    const int64_t buffer = tokens * m.top_k * m.hidden * 2;
    int seen = 0;
    for (const backend::OpRecord& op : fakes[3]->ops()) {
      if (op.kind == backend::OpKind::kAllToAll && op.comm_size == c.ep && op.bytes == buffer)
        ++seen;
    }
    // Warm-up and samples, a dispatch and a combine each.
    EXPECT_EQ(seen, 2 * (1 + 2)) << planner::ConfigToString(c);
  }
}

TEST(ConfirmMoe, TheStepRunsTheExpertsNotADenseMlp) {
  // OLMoE has no dense MLP: every layer routes to 8 of 64 experts of width
  // 1024. The slice's MoE layers run the router, the permutation and the
  // local experts' GEMMs, and the step adds the cost model's exposed
  // dispatch/combine as a modelled comm_ep term. With the cluster describing
  // the fake, the measured step then agrees with the prediction, term by term;
  // selective recompute also recomputes the experts' activation (moe_act).
  const planner::Job job = OlmoeJob(8);
  std::vector<planner::ParallelConfig> configs = MoeConfigs();
  planner::ParallelConfig selective = configs[0];
  selective.recompute = planner::Recompute::kSelective;
  configs.push_back(selective);
  const RunReport rep = ConfirmOnFake(MoeFake(8), testing::InputFor(job, configs), nullptr);
  ASSERT_EQ(rep.candidates.size(), configs.size());
  for (const CandidateReport& c : rep.candidates) {
    SCOPED_TRACE(planner::ConfigToString(c.config));
    ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
    ASSERT_TRUE(c.measured_s && c.error);
    const TermTimes& compute = c.breakdown[static_cast<size_t>(Term::kCompute)];
    EXPECT_NEAR(compute.measured_s / compute.predicted_s, 1.0, 0.05);
    if (c.config.recompute == planner::Recompute::kSelective) {
      const TermTimes& re = c.breakdown[static_cast<size_t>(Term::kRecompute)];
      EXPECT_NEAR(re.measured_s / re.predicted_s, 1.0, 0.05);
    }
    const TermTimes& ep = c.breakdown[static_cast<size_t>(Term::kCommEp)];
    EXPECT_GT(ep.predicted_s, 0);
    EXPECT_EQ(ep.measured_s, ep.predicted_s);
    EXPECT_EQ(ep.source, Source::kModelled);
    EXPECT_NEAR(*c.error, 0.0, 0.05) << "measured " << *c.measured_s << " predicted "
                                      << c.predicted_s;
    bool said = false;
    for (const std::string& p : c.modelled_parts) said = said || p.find("comm_ep") != std::string::npos;
    EXPECT_TRUE(said);
  }
}

TEST(ConfirmMoe, FewerProcessesThanTheExpertGroupRunSmallerGroups) {
  // A 16-GPU plan with EP 16 on 4 processes: the layer runs on EP groups of
  // 4 (the largest divisor of 16 that tiles the processes) and says so.
  const planner::Job job = OlmoeJob(16);
  planner::ParallelConfig c;
  c.gdata = 16;
  c.ep = 16;
  c.distributed_optimizer = true;
  const RunReport rep = ConfirmOnFake(MoeFake(4), testing::InputFor(job, {c}), nullptr);
  ASSERT_EQ(rep.candidates.size(), 1u);
  const CandidateReport& cand = rep.candidates[0];
  ASSERT_EQ(cand.status, Outcome::kOk) << cand.reason;
  ASSERT_TRUE(cand.moe_layer.has_value());
  EXPECT_EQ(cand.moe_layer->ep, 4);
  EXPECT_FALSE(cand.moe_layer->as_planned);
  EXPECT_EQ(cand.moe_layer->local_experts, job.model.experts / 4);
}

TEST(ConfirmMoe, DenseCandidatesHaveNoMoeLayer) {
  const planner::Job job =
      testing::MakeJob(testing::Gpt(4, 1024, 16, 32000), testing::FakeLikeCluster(), 8, kSeq, 8);
  const RunReport rep =
      ConfirmOnFake(MoeFake(8), testing::InputFor(job, {testing::MegatronSp()}), nullptr);
  ASSERT_EQ(rep.candidates.size(), 1u);
  ASSERT_EQ(rep.candidates[0].status, Outcome::kOk) << rep.candidates[0].reason;
  EXPECT_FALSE(rep.candidates[0].moe_layer.has_value());
}

TEST(ConfirmMoe, ReportKeepsTheMoeLayerThroughJson) {
  RunReport r;
  r.model = "olmoe-1b-7b";
  r.cluster = "fake-like";
  r.cluster_fingerprint = "f";
  r.gpus = 8;
  r.complete = true;
  CandidateReport c;
  c.rank = 1;
  c.config = MoeConfigs()[0];
  c.measured_s = 1.0;
  c.error = 0.0;
  const MoeLayerReport ml{.ep = 8,
                          .tokens = 1024,
                          .local_experts = 8,
                          .rows_per_expert = 1024,
                          .a2a_bytes_per_rank = 29360128,
                          .a2a = {0.002, 0.0018, Source::kMeasured},
                          .experts = {0.003, 0.0031, Source::kMeasured},
                          .layer_measured_s = 0.0052};
  c.moe_layer = ml;
  r.candidates.push_back(c);
  const OrderedJson j = RunReportToJson(r);
  EXPECT_EQ(j["schema"], "paratune.run_report/v2");
  auto back = ParseRunReport(Json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->candidates[0].moe_layer.has_value());
  const MoeLayerReport& b = *back->candidates[0].moe_layer;
  EXPECT_EQ(b.a2a_bytes_per_rank, ml.a2a_bytes_per_rank);
  EXPECT_DOUBLE_EQ(b.a2a.predicted_s, ml.a2a.predicted_s);
  EXPECT_DOUBLE_EQ(b.experts.measured_s, ml.experts.measured_s);
  // A v1 report (no moe_layer) still parses; an unknown key inside moe_layer does not.
  Json v1 = Json::parse(j.dump());
  v1["schema"] = "paratune.run_report/v1";
  v1["candidates"][0].erase("moe_layer");
  EXPECT_TRUE(ParseRunReport(v1).ok());
  Json bad = Json::parse(j.dump());
  bad["candidates"][0]["moe_layer"]["a2a"]["bytes"] = 1;
  testing::ExpectRunReportRefusedAt(bad, "/candidates/0/moe_layer/a2a");
}

}  // namespace
}  // namespace paratune::executor
