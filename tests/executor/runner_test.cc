// The runner on the fake backend. With a cluster description that says what
// the fake does, measured and predicted must agree term by term (the
// extrapolation is the cost model's composition); with fewer processes than
// the plan needs the report says what was measured and what was modelled;
// faults end one candidate, never the run.
#include "executor/run/runner.h"

#include <gtest/gtest.h>

#include "executor/run/report.h"
#include "planner/cost_model.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

using planner::ParallelConfig;
using testing::ConfirmOnFakeWorld;
using testing::FakeLikeCluster;
using testing::Gpt;
using testing::MakeJob;
using testing::MegatronSp;

constexpr int64_t kS = 2048;

ConfirmOptions Quick() {
  ConfirmOptions o;
  o.warmup = 1;
  o.samples = 2;
  o.comm_iters = 2;
  return o;
}

backend::FakeConfig Fake(int world) {
  backend::FakeConfig fc;
  fc.world_size = world;
  fc.gemm_latency_us = 0;  // the cost model has no per-call latency
  fc.host_timeout_s = 0.5;
  return fc;
}

// Confirms MegatronSp() for a 4-layer GPT on 8 GPUs of the fake-like cluster,
// on `processes` fake ranks.
RunReport ConfirmMegatronSpOfGpt(int processes) {
  const planner::Job job = MakeJob(Gpt(4, 1024, 16, 32000), FakeLikeCluster(), 8, kS, 8);
  return ConfirmOnFakeWorld(Fake(processes), testing::InputFor(job, {MegatronSp()}), Quick());
}

const TermTimes& TermOf(const CandidateReport& c, Term t) {
  return c.breakdown[static_cast<size_t>(t)];
}

TEST(Runner, MeasuresWhatTheModelPredictsWhenTheClusterIsTheFake) {
  const RunReport rep = ConfirmMegatronSpOfGpt(8);
  ASSERT_EQ(rep.candidates.size(), 1u);
  const CandidateReport& c = rep.candidates[0];
  ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
  ASSERT_TRUE(c.measured_s && c.error);
  EXPECT_TRUE(rep.complete);
  // Same hardware model on both sides, and the executor composes the step
  // as the cost model does: the two agree to rounding, term by term.
  EXPECT_NEAR(*c.error, 0.0, 1e-3)
      << "measured " << *c.measured_s << " predicted " << c.predicted_s;
  for (Term t : {Term::kCompute, Term::kCommY, Term::kCommData, Term::kCommPp, Term::kBubble,
                 Term::kOptimizer}) {
    const TermTimes& tt = TermOf(c, t);
    EXPECT_GT(tt.predicted_s, 0) << TermName(t);
    EXPECT_NEAR(tt.measured_s / tt.predicted_s, 1.0, 1e-3) << TermName(t);
  }
  EXPECT_EQ(TermOf(c, Term::kCommX).measured_s, 0.0);  // gx = 1: no X group
  EXPECT_EQ(TermOf(c, Term::kCommY).source, Source::kMeasured);
  EXPECT_EQ(TermOf(c, Term::kBubble).source, Source::kDerived);
  EXPECT_EQ(c.plan_ranks_run, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NEAR(c.memory_allocated_GiB, c.memory_predicted_GiB, 1e-6);
  EXPECT_EQ(*c.measured_rank, 1);
  bool overlap_line = false;
  for (const std::string& p : c.measured_parts)
    overlap_line = overlap_line || p.find("overlap") != std::string::npos;
  EXPECT_TRUE(overlap_line);
}

TEST(Runner, Fp8RecipeMatchesTheModelToo) {
  // FP8 linears at twice the bf16 rate, attention in bf16, Transformer
  // Engine's cast and transpose traffic as memory-bound kernels.
  planner::Job job =
      MakeJob(Gpt(4, 1024, 16, 32000), FakeLikeCluster(), 8, kS, 8, topology::Precision::kFp8);
  job.cluster.gpu.peak_tflops[static_cast<size_t>(topology::Precision::kFp8)] = 624.0;
  backend::FakeConfig fc = Fake(8);
  fc.gemm_tflops[static_cast<size_t>(backend::GemmPrecision::kFp8)] = 624.0;
  const RunReport rep = ConfirmOnFakeWorld(fc, testing::InputFor(job, {MegatronSp()}), Quick());
  const CandidateReport& c = rep.candidates[0];
  ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
  // At 624 TFLOP/s the smallest GEMMs are memory-bound in the model's roofline
  // (operands streamed at 1600 GB/s); the fake charges FLOPs only: < 1 %.
  EXPECT_NEAR(*c.error, 0.0, 0.01);
  EXPECT_NEAR(TermOf(c, Term::kCompute).measured_s / TermOf(c, Term::kCompute).predicted_s, 1.0,
              0.01);
}

TEST(Runner, OverlapFlagsHideCommunicationBehindCompute) {
  // AxoNN with OAR/ORS/OAG: measured exposure comes from the overlapped slice
  // on the fake's virtual streams, and must be below the stand-alone time.
  const planner::Job job = MakeJob(Gpt(4, 1024, 16, 32000), FakeLikeCluster(), 8, kS, 8);
  ParallelConfig plain;
  plain.gx = plain.gy = plain.gz = 2;
  ParallelConfig overlapped = plain;
  overlapped.oar = overlapped.ors = overlapped.oag = true;
  const RunReport rep =
      ConfirmOnFakeWorld(Fake(8), testing::InputFor(job, {plain, overlapped}), Quick());
  ASSERT_EQ(rep.candidates.size(), 2u);
  for (const CandidateReport& c : rep.candidates) ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
  const double z_plain = TermOf(rep.candidates[0], Term::kCommZ).measured_s;
  const double z_over = TermOf(rep.candidates[1], Term::kCommZ).measured_s;
  EXPECT_GT(z_plain, 0);
  EXPECT_LT(z_over, 0.5 * z_plain);
  EXPECT_LT(*rep.candidates[1].measured_s, *rep.candidates[0].measured_s);
  // The faster one is re-ranked first.
  EXPECT_EQ(*rep.candidates[1].measured_rank, 1);
}

TEST(Runner, FewerProcessesRunEachDistinctRankAndSayWhatWasModelled) {
  // Two processes for an 8-GPU plan: the first and the last stage run their
  // compute; the 2-rank groups of the plan fit and are measured.
  const RunReport two = ConfirmMegatronSpOfGpt(2);
  ASSERT_EQ(two.candidates.size(), 1u);
  const CandidateReport& c2 = two.candidates[0];
  ASSERT_EQ(c2.status, Outcome::kOk) << c2.reason;
  EXPECT_EQ(c2.plan_ranks_run, (std::vector<int>{0, 4}));
  EXPECT_EQ(TermOf(c2, Term::kCommY).source, Source::kMeasured);
  EXPECT_NEAR(*c2.error, 0.0, 1e-3);
  bool overlap_modelled = false;
  for (const std::string& p : c2.modelled_parts)
    overlap_modelled = overlap_modelled || p.find("step:") == 0;
  EXPECT_TRUE(overlap_modelled);

  // One process: every collective is priced by the cluster's α-β.
  const RunReport one = ConfirmMegatronSpOfGpt(1);
  const CandidateReport& c1 = one.candidates[0];
  ASSERT_EQ(c1.status, Outcome::kOk) << c1.reason;
  EXPECT_EQ(c1.plan_ranks_run, (std::vector<int>{0, 4}));  // two rounds on one process
  for (Term t : {Term::kCommY, Term::kCommData, Term::kCommPp}) {
    EXPECT_EQ(TermOf(c1, t).source, Source::kModelled) << TermName(t);
  }
  EXPECT_EQ(TermOf(c1, Term::kCompute).source, Source::kMeasured);
  int modelled_collectives = 0;
  for (const std::string& p : c1.modelled_parts)
    modelled_collectives += p.find("no second process") != std::string::npos;
  EXPECT_GE(modelled_collectives, 3);
  EXPECT_NEAR(*c1.error, 0.0, 1e-3);
}

TEST(Runner, ScaledCollectivesWhenThePlanGroupIsBiggerThanTheWorld) {
  // dp = 8 on 4 processes: the 8-rank gradient all-reduce is timed on 4 and
  // scaled by the cluster's α-β, and the report says so.
  const planner::Job job = MakeJob(Gpt(2, 512, 8, 8000), FakeLikeCluster(), 8, 1024, 8);
  ParallelConfig c;
  c.gdata = 8;
  const RunReport rep = ConfirmOnFakeWorld(Fake(4), testing::InputFor(job, {c}), Quick());
  const CandidateReport& cr = rep.candidates[0];
  ASSERT_EQ(cr.status, Outcome::kOk) << cr.reason;
  EXPECT_EQ(TermOf(cr, Term::kCommData).source, Source::kScaled);
  bool said = false;
  for (const std::string& p : cr.modelled_parts)
    said = said || p.find("measured on 4 process(es)") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NEAR(TermOf(cr, Term::kCommData).measured_s / TermOf(cr, Term::kCommData).predicted_s, 1.0,
              1e-3);
}

// ---- Faults: one candidate fails, the run goes on -----------------------------------

struct Faults : ::testing::Test {
  planner::Job job = MakeJob(Gpt(2, 512, 8, 8000), FakeLikeCluster(), 4, 1024, 8);
  std::vector<ParallelConfig> configs;
  void SetUp() override {
    for (int mbs : {1, 2, 4}) {
      ParallelConfig c;
      c.gy = 2;
      c.gdata = 2;
      c.mbs = mbs;
      configs.push_back(c);
    }
  }
  int Splits() const { return static_cast<int>(GroupKindsOf(configs[0], 8).size()); }
  // The configs confirmed on 4 fake ranks under `fault`; rank 0's report.
  RunReport ConfirmUnder(const backend::FaultPlan& fault, std::vector<Status>* statuses = nullptr) {
    return ConfirmOnFakeWorld(Fake(4), testing::InputFor(job, configs), Quick(), &fault, statuses);
  }
};

TEST_F(Faults, AnInjectedOutOfMemoryIsReportedAsOom) {
  const backend::FaultPlan fault{backend::FaultKind::kOutOfMemory, 1, 2};
  const RunReport rep = ConfirmUnder(fault);
  ASSERT_EQ(rep.candidates.size(), 3u);
  EXPECT_EQ(rep.candidates[0].status, Outcome::kOom);
  EXPECT_NE(rep.candidates[0].reason.find("rank 2"), std::string::npos) << rep.candidates[0].reason;
  EXPECT_NE(rep.candidates[0].reason.find("out of device memory"), std::string::npos);
  EXPECT_FALSE(rep.candidates[0].measured_s.has_value());
  EXPECT_EQ(rep.candidates[1].status, Outcome::kOk) << rep.candidates[1].reason;
  EXPECT_EQ(rep.candidates[2].status, Outcome::kOk) << rep.candidates[2].reason;
  EXPECT_TRUE(rep.complete);
}

TEST_F(Faults, ACandidateBiggerThanTheDeviceIsOom) {
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const double small = cm.Memory(configs[0]).total_GiB, big = cm.Memory(configs[2]).total_GiB;
  ASSERT_LT(small, big);
  backend::FakeConfig fc = Fake(4);
  fc.memory_bytes = static_cast<int64_t>((small + big) / 2 * (1ull << 30));
  const RunReport rep = ConfirmOnFakeWorld(fc, testing::InputFor(job, configs), Quick());
  EXPECT_EQ(rep.candidates[0].status, Outcome::kOk) << rep.candidates[0].reason;
  EXPECT_EQ(rep.candidates[2].status, Outcome::kOom);
  EXPECT_NE(rep.candidates[2].reason.find("GiB of the model's"), std::string::npos)
      << rep.candidates[2].reason;
}

TEST_F(Faults, ACollectiveErrorFailsItsCandidateOnly) {
  // The first collective after the candidate's communicator splits.
  const backend::FaultPlan fault{backend::FaultKind::kCollectiveError, Splits() + 1, 1};
  const RunReport rep = ConfirmUnder(fault);
  ASSERT_EQ(rep.candidates.size(), 3u);
  EXPECT_EQ(rep.candidates[0].status, Outcome::kFailed);
  EXPECT_NE(rep.candidates[0].reason.find("rank 1"), std::string::npos) << rep.candidates[0].reason;
  EXPECT_NE(rep.candidates[0].reason.find("NCCL error"), std::string::npos);
  EXPECT_EQ(rep.candidates[1].status, Outcome::kOk) << rep.candidates[1].reason;
  EXPECT_EQ(rep.candidates[2].status, Outcome::kOk) << rep.candidates[2].reason;
}

TEST_F(Faults, AHungCollectiveTimesOutItsCandidateOnly) {
  const backend::FaultPlan fault{backend::FaultKind::kTimeout, Splits() + 1, 1};
  const RunReport rep = ConfirmUnder(fault);
  EXPECT_EQ(rep.candidates[0].status, Outcome::kFailed);
  EXPECT_NE(rep.candidates[0].reason.find("hung"), std::string::npos) << rep.candidates[0].reason;
  EXPECT_EQ(rep.candidates[1].status, Outcome::kOk) << rep.candidates[1].reason;
  EXPECT_EQ(rep.candidates[2].status, Outcome::kOk) << rep.candidates[2].reason;
}

TEST_F(Faults, ADeadRankFailsWhatItTouchesAndTheRunStillEnds) {
  const backend::FaultPlan fault{backend::FaultKind::kRankDies, 1, 3};
  std::vector<Status> st;
  const RunReport rep = ConfirmUnder(fault, &st);
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();  // every rank returned a report
  ASSERT_EQ(rep.candidates.size(), 3u);
  for (const CandidateReport& c : rep.candidates) {
    EXPECT_EQ(c.status, Outcome::kFailed);
    EXPECT_NE(c.reason.find("3"), std::string::npos) << c.reason;  // names the missing rank
  }
  EXPECT_TRUE(rep.complete);
}

TEST_F(Faults, AGemmTheBackendCannotRunIsWaived) {
  planner::Job fp8 = job;
  fp8.training.precision = topology::Precision::kFp8;  // the fake has no fp8 rate configured
  fp8.cluster.gpu.peak_tflops[static_cast<size_t>(topology::Precision::kFp8)] = 624;
  const RunReport rep = ConfirmOnFakeWorld(Fake(4), testing::InputFor(fp8, {configs[0]}), Quick());
  EXPECT_EQ(rep.candidates[0].status, Outcome::kWaived);
  EXPECT_NE(rep.candidates[0].reason.find("fp8"), std::string::npos) << rep.candidates[0].reason;
}

TEST(Report, RoundTripsAndIsStrict) {
  const planner::Job job = MakeJob(Gpt(2, 512, 8, 8000), FakeLikeCluster(), 2, 1024, 4);
  ParallelConfig c;
  c.gdata = 2;
  ParallelConfig bad = c;
  bad.mbs = 3;  // 4 sequences do not split into micro-batches of 3 over dp 2
  RunReport rep = ConfirmOnFakeWorld(Fake(2), testing::InputFor(job, {c, bad}), Quick());
  ASSERT_EQ(rep.candidates.size(), 2u);
  EXPECT_EQ(rep.candidates[1].status, Outcome::kFailed);
  const OrderedJson j = RunReportToJson(rep);
  EXPECT_EQ(j["schema"], kRunReportSchema);
  for (const char* key : {"rank", "config", "status", "reason", "predicted_s", "measured_s",
                          "error", "breakdown", "measured_parts", "modelled_parts"}) {
    EXPECT_TRUE(j["candidates"][0].contains(key)) << key;
  }
  EXPECT_TRUE(j["candidates"][1]["measured_s"].is_null());
  auto back = ParseRunReport(Json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->candidates.size(), 2u);
  EXPECT_EQ(back->candidates[0].config, c);
  EXPECT_DOUBLE_EQ(*back->candidates[0].measured_s, *rep.candidates[0].measured_s);
  EXPECT_EQ(back->candidates[0].breakdown[0].source, rep.candidates[0].breakdown[0].source);
  Json extra = Json::parse(j.dump());
  extra["candidates"][0]["breakdown"]["compute"]["guess_s"] = 1;
  testing::ExpectRunReportRefusedAt(extra, "/candidates/0/breakdown/compute");
}

}  // namespace
}  // namespace paratune::executor
