// The calibration fit: it recovers known factors from synthetic reports,
// divides out the corrections the reports were predicted with, leaves alone
// what no measurement informs, stays inside the range the cluster parser
// accepts, and on the fake backend turns a cluster description that is 2×
// too optimistic about compute into one that predicts fresh configs.
#include "executor/run/calibrate.h"

#include <gtest/gtest.h>

#include "executor/run/runner.h"
#include "planner/cost_model.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

using testing::FakeLikeCluster;
using testing::Gpt;
using testing::MakeJob;

// A candidate whose base (uncorrected) predictions are `base` per term, made
// with corrections `prev`, measured on hardware whose true factors are `truth`.
CandidateReport Candidate(int rank, std::array<double, kNumTerms> base,
                          const std::array<double, 3>& prev, const std::array<double, 3>& truth,
                          Source comm_source = Source::kMeasured) {
  CandidateReport c;
  c.rank = rank;
  c.status = Outcome::kOk;
  double pred = 0, meas = 0;
  for (int i = 0; i < kNumTerms; ++i) {
    const Term t = static_cast<Term>(i);
    int f = 1;  // communication
    if (t == Term::kCompute || t == Term::kRecompute) f = 0;
    if (t == Term::kOptimizer) f = 2;
    if (t == Term::kBubble || t == Term::kOffload) base[static_cast<size_t>(i)] = 0;
    TermTimes& tt = c.breakdown[static_cast<size_t>(i)];
    tt.predicted_s = base[static_cast<size_t>(i)] * prev[static_cast<size_t>(f)];
    tt.measured_s = base[static_cast<size_t>(i)] * truth[static_cast<size_t>(f)];
    tt.source = f == 1 ? comm_source : Source::kMeasured;
    if (t == Term::kRecompute) continue;  // part of compute
    pred += tt.predicted_s;
    meas += tt.measured_s;
  }
  c.predicted_s = pred;
  c.measured_s = meas;
  c.error = (pred - meas) / meas;
  return c;
}

RunReport Report(const std::array<double, 3>& prev, const std::array<double, 3>& truth,
                 Source comm_source = Source::kMeasured) {
  RunReport r;
  r.corrections.compute = prev[0];
  r.corrections.communication = prev[1];
  r.corrections.memory_bound = prev[2];
  //                 compute recomp  x     y     z     cp    data  pp    bubble opt   offload
  r.candidates.push_back(Candidate(1, {1.0, 0.0, 0.0, 0.30, 0.0, 0.0, 0.10, 0.05, 0, 0.02, 0}, prev,
                                   truth, comm_source));
  r.candidates.push_back(Candidate(2, {0.8, 0.0, 0.2, 0.10, 0.1, 0.0, 0.05, 0.00, 0, 0.05, 0}, prev,
                                   truth, comm_source));
  r.candidates.push_back(Candidate(3, {1.2, 0.1, 0.0, 0.00, 0.0, 0.2, 0.20, 0.10, 0, 0.01, 0}, prev,
                                   truth, comm_source));
  return r;
}

TEST(Calibration, RecoversKnownFactors) {
  auto fit = FitCalibration({Report({1, 1, 1}, {1.5, 0.8, 2.0})});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->factors.compute, 1.5, 1e-9);
  EXPECT_NEAR(fit->factors.communication, 0.8, 1e-9);
  EXPECT_NEAR(fit->factors.memory_bound, 2.0, 1e-9);
  EXPECT_EQ(fit->candidates, 3);
  EXPECT_GT(fit->residual_before, 0.05);
  EXPECT_LT(fit->residual_after, 1e-9);
  EXPECT_GT(fit->iteration_error_before, 0.1);
  EXPECT_LT(fit->iteration_error_after, 1e-9);
  EXPECT_TRUE(fit->fixed.empty());
}

TEST(Calibration, DividesOutTheCorrectionsThePredictionsUsed) {
  // Predicted with (2, 1, 0.5) on hardware that is (3, 1, 1): the absolute
  // factors come back, not the ratios.
  auto fit = FitCalibration({Report({2, 1, 0.5}, {3, 1, 1})});
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->factors.compute, 3.0, 1e-9);
  EXPECT_NEAR(fit->factors.communication, 1.0, 1e-9);
  EXPECT_NEAR(fit->factors.memory_bound, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(fit->previous.compute, 2.0);
}

TEST(Calibration, ModelledTermsInformNothing) {
  // Collectives priced by the model (a one-GPU confirm) leave communication as it was.
  auto fit = FitCalibration({Report({1, 1.7, 1}, {1.5, 0.8, 2.0}, Source::kModelled)});
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->factors.compute, 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(fit->factors.communication, 1.7);
  EXPECT_EQ(fit->fixed, (std::vector<std::string>{"communication"}));
}

TEST(Calibration, StaysInsideTheRangeTheClusterParserAccepts) {
  auto fit = FitCalibration({Report({1, 1, 1}, {100.0, 1.0, 1.0})});
  ASSERT_TRUE(fit.ok());
  EXPECT_DOUBLE_EQ(fit->factors.compute, kMaxCorrection);
  EXPECT_EQ(fit->at_bound, (std::vector<std::string>{"compute"}));
  // Other factors are re-fitted given the bound, still non-negative.
  EXPECT_GT(fit->factors.communication, 0.05);
}

TEST(Calibration, NeedsAnOkCandidate) {
  RunReport r = Report({1, 1, 1}, {1, 1, 1});
  for (auto& c : r.candidates) c.status = Outcome::kFailed;
  auto fit = FitCalibration({r});
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), StatusCode::kInvalidArgument);
}

TEST(Calibration, ProfileSectionRoundTripsAndSetsTheClusterCorrections) {
  auto fit = FitCalibration({Report({1, 1, 1}, {1.5, 0.8, 2.0})});
  ASSERT_TRUE(fit.ok());
  OrderedJson profile = {{"schema", "paratune.profile/v1"}, {"cluster_fingerprint", ""}};
  const OrderedJson out = WithCalibration(profile, CalibrationToJson(*fit, {"run.json"}));
  EXPECT_EQ(out.begin().key(), "schema");  // the profile's own order is kept
  const Json j = Json::parse(out.dump());
  EXPECT_EQ(j["calibration"]["points"], fit->points);
  EXPECT_EQ(j["calibration"]["reports"][0], "run.json");
  EXPECT_FALSE(WithoutCalibration(j).contains("calibration"));
  topology::ClusterSpec c = FakeLikeCluster();
  ASSERT_TRUE(ApplyCalibration(j, &c).ok());
  EXPECT_NEAR(c.corrections.compute, 1.5, 1e-9);
  EXPECT_NEAR(c.corrections.memory_bound, 2.0, 1e-9);
  // The cluster description carries them and its parser takes them back.
  auto parsed = topology::ParseClusterSpec(topology::ClusterSpecToJson(c), "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->corrections, c.corrections);
  Json bad = j;
  bad["calibration"]["compute"] = 40;
  EXPECT_FALSE(ApplyCalibration(bad, &c).ok());
  bad = j;
  bad["calibration"]["fudge"] = 1;
  EXPECT_FALSE(CorrectionsFromProfile(bad).ok());
  topology::ClusterSpec untouched = FakeLikeCluster();
  ASSERT_TRUE(ApplyCalibration(WithoutCalibration(j), &untouched).ok());
  EXPECT_EQ(untouched.corrections, topology::ClusterSpec::Corrections{});
}

// The whole loop on the fake: a description 2× too fast at compute and
// memory streaming predicts half the compute; calibrating on three configs
// fixes the prediction of three others.
TEST(Calibration, FixesPredictionsOfFreshConfigsOnTheFake) {
  topology::ClusterSpec optimistic = FakeLikeCluster();
  optimistic.gpu.peak_tflops[static_cast<size_t>(topology::Precision::kBf16)] = 624.0;
  optimistic.gpu.hbm_GBps = 3200.0;
  const planner::Job job = MakeJob(Gpt(4, 1024, 16, 32000), optimistic, 8, 2048, 16);
  auto config = [](int gy, int pp, int dp, int mbs, bool sp) {
    return planner::ParallelConfig{.gy = gy, .gdata = dp, .pp = pp, .sp = sp, .mbs = mbs};
  };
  const std::vector<planner::ParallelConfig> calib = {
      config(2, 2, 2, 1, true), config(8, 1, 1, 1, false), config(1, 1, 8, 2, false)};
  const std::vector<planner::ParallelConfig> fresh = {
      config(4, 2, 1, 2, true), config(2, 1, 4, 1, false), config(1, 2, 4, 1, false)};
  backend::FakeConfig fc;
  fc.world_size = 8;
  fc.gemm_latency_us = 0;
  ConfirmOptions o;
  o.samples = 1;
  o.comm_iters = 1;
  auto run = [&](const std::vector<planner::ParallelConfig>& configs) {
    return testing::ConfirmOnFakeWorld(fc, testing::InputFor(job, configs), o);
  };
  const RunReport before = run(calib);
  for (const CandidateReport& c : before.candidates) ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
  auto fit = FitCalibration({before});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  // Within 2 %: the fake's overlapped slice does not follow the model's
  // structure exactly, and the fit's noise prior pulls toward the previous
  // factors in proportion to that residual.
  EXPECT_NEAR(fit->factors.compute, 2.0, 0.02);
  EXPECT_NEAR(fit->factors.communication, 1.0, 0.02);
  EXPECT_NEAR(fit->factors.memory_bound, 2.0, 0.02);

  topology::ClusterSpec calibrated = optimistic;
  calibrated.corrections = fit->factors;
  const planner::CostModel cm(job.model, job.training, calibrated, job.gpus);
  const RunReport check = run(fresh);
  double err_before = 0, err_after = 0;
  for (size_t i = 0; i < fresh.size(); ++i) {
    const CandidateReport& c = check.candidates[i];
    ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
    const double after = cm.Predict(fresh[i]).iteration_time_s;
    err_before += std::fabs(c.predicted_s - *c.measured_s) / *c.measured_s;
    err_after += std::fabs(after - *c.measured_s) / *c.measured_s;
  }
  EXPECT_GT(err_before / 3, 0.25);
  EXPECT_LT(err_after / 3, 0.01);
}

}  // namespace
}  // namespace paratune::executor
