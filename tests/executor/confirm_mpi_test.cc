// The MPI tier (run under `mpirun -np 4` on loopback): the whole loop on real
// processes. Profile the mpi-cpu backend, plan a small model on the cluster
// that profile describes, confirm the top 3 candidates for real, calibrate on
// them, then confirm a FRESH set of configs (another global batch, not the
// calibration ones) and check that the calibrated model predicts them better
// than the uncalibrated one did. Rank 0 asserts; every rank runs every step
// (the measurements are collective).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "backend/mpi_cpu.h"
#include "executor/run/calibrate.h"
#include "executor/run/runner.h"
#include "planner/cost_model.h"
#include "planner/search.h"
#include "profiler/discovery.h"
#include "profiler/profile.h"
#include "profiler/sampler.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

backend::Backend& B() { return testing::MpiCpuBackend(); }

planner::ModelSpec Tiny() {
  planner::ModelSpec m =
      planner::testing::GptLike(4, 256, 8, 2048, /*dropout=*/false, /*max_seq_len=*/128);
  m.name = "tiny-gpt";
  return m;
}

// Degrees only: two configs with the same layout differ in mbs, flags or placement.
std::array<int, 6> Layout(const planner::ParallelConfig& c) {
  return {c.gx, c.gy, c.gz, c.gdata, c.pp, c.cp};
}

// The best `n` configs of a Megatron-space search on `job` with distinct
// parallel layouts, skipping the layouts in `exclude`.
std::vector<planner::ParallelConfig> Top(const planner::Job& job, size_t n,
                                         const std::vector<planner::ParallelConfig>& exclude = {}) {
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  planner::SearchOptions o;
  o.top_k = 500;
  o.max_mbs = 2;  // keeps the CPU slices short
  o.family = planner::Family::kMegatron;
  o.fixed = {{"placement", "x-y-cp-z-data-pp"}};
  const planner::SearchResult r = planner::Search(cm, o).RunAll();
  std::set<std::array<int, 6>> seen;
  for (const planner::ParallelConfig& c : exclude) seen.insert(Layout(c));
  std::vector<planner::ParallelConfig> out;
  for (const planner::Candidate& c : r.top) {
    if (out.size() < n && seen.insert(Layout(c.config)).second) out.push_back(c.config);
  }
  return out;
}

TEST(ConfirmMpi, ProfilePlanConfirmCalibrateImprovesFreshPredictions) {
  backend::Backend& b = B();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  const bool root = b.rank() == 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char* what) {
    if (root) {
      std::printf("[%6.1f s] %s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  what);
    }
  };

  // 1. Profile this machine through the mpi-cpu backend (a short sweep).
  auto disc = profiler::Discover(b);
  ASSERT_TRUE(disc.ok()) << disc.status().ToString();
  auto base = profiler::ClusterFromDiscovery(*disc);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  profiler::MeasurementPlan mp = profiler::DefaultPlan("mpi-cpu", true, 4, disc->ranks_per_node);
  mp.sweep = {16 << 10, 4 << 20, 4, 0};
  mp.warmup_iters = 1;
  mp.iters = 3;
  mp.samples = 3;
  mp.gemm_shapes = {{64, 64, 64},    {128, 128, 128},  {256, 256, 256},
                    {512, 512, 512}, {1024, 256, 256}, {256, 1024, 256}};
  mp.gemm_iters = 2;
  mp.copy_bytes = 16 << 20;
  mp.p2p_bytes = 0;
  auto m = profiler::RunMeasurements(b, mp, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  lap("profiled");
  auto profile = profiler::BuildProfile(*m, *base, profiler::PeaksOf(*base), nullptr);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  topology::ClusterSpec cluster = *base;
  ASSERT_TRUE(profiler::ApplyProfile(*profile, &cluster).ok());

  // 2. Plan a small model on it (fp32: the CPU backend's GEMMs).
  auto job_for = [&](int64_t global_batch) {
    planner::Job job;
    job.model = Tiny();
    job.cluster = cluster;
    job.gpus = 4;
    job.training.seq_len = 128;
    job.training.global_batch = global_batch;
    job.training.precision = topology::Precision::kFp32;
    return job;
  };
  ConfirmInput calib;
  calib.job = job_for(8);
  calib.candidates = Top(calib.job, 3);
  ASSERT_EQ(calib.candidates.size(), 3u);
  calib.plan_ranks = {1, 2, 3};
  calib.profile = cluster.profile_fingerprint;

  // 3. Confirm the top 3 for real.
  // The runner's default samples: four ranks share two cores here, and a
  // median of three let one slow window decide a candidate's time.
  ConfirmOptions o;
  o.samples = 5;
  o.comm_iters = 5;
  o.peers_can_hang = true;
  auto report = ConfirmCandidates(b, calib, o, nullptr, nullptr);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  lap("confirmed the calibration set");

  // 4. A fresh set: another global batch, and the best layouts of its plan
  // that were not in the calibration set.
  ConfirmInput fresh;
  fresh.job = job_for(16);
  fresh.candidates = Top(fresh.job, 3, calib.candidates);
  ASSERT_EQ(fresh.candidates.size(), 3u);
  fresh.plan_ranks = {1, 2, 3};
  auto check = ConfirmCandidates(b, fresh, o, nullptr, nullptr);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  lap("confirmed the fresh set");
  if (!root) return;

  for (const CandidateReport& c : report->candidates) ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
  for (const CandidateReport& c : check->candidates) ASSERT_EQ(c.status, Outcome::kOk) << c.reason;

  // 5. Calibrate on the first run; predict the fresh one with and without.
  auto fit = FitCalibration({*report});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  topology::ClusterSpec calibrated = cluster;
  calibrated.corrections = fit->factors;
  const planner::CostModel after(fresh.job.model, fresh.job.training, calibrated, fresh.job.gpus);
  double err_before = 0, err_after = 0;
  std::printf(
      "calibration: compute %.3f communication %.3f memory_bound %.3f (%d points; "
      "residual %.3f -> %.3f)\n",
      fit->factors.compute, fit->factors.communication, fit->factors.memory_bound, fit->points,
      fit->residual_before, fit->residual_after);
  for (const CandidateReport& c : report->candidates) {
    if (std::getenv("PARATUNE_TEST_VERBOSE")) {
      for (int t = 0; t < kNumTerms; ++t) {
        const TermTimes& tt = c.breakdown[static_cast<size_t>(t)];
        std::printf("      %-10s measured %.4f predicted %.4f (%s)\n",
                    TermName(static_cast<Term>(t)), tt.measured_s, tt.predicted_s,
                    SourceName(tt.source));
      }
    }
    std::printf("  calibration set  %-40s predicted %.4f s measured %.4f s error %+.1f %%\n",
                planner::ConfigToString(c.config).c_str(), c.predicted_s, *c.measured_s,
                100 * *c.error);
  }
  for (size_t i = 0; i < check->candidates.size(); ++i) {
    const CandidateReport& c = check->candidates[i];
    const double predicted_after = after.Predict(fresh.candidates[i]).iteration_time_s;
    const double before = (c.predicted_s - *c.measured_s) / *c.measured_s;
    const double now = (predicted_after - *c.measured_s) / *c.measured_s;
    err_before += std::fabs(before);
    err_after += std::fabs(now);
    std::printf(
        "  fresh set        %-40s measured %.4f s; predicted %.4f s (%+.1f %%) -> "
        "calibrated %.4f s (%+.1f %%)\n",
        planner::ConfigToString(c.config).c_str(), *c.measured_s, c.predicted_s, 100 * before,
        predicted_after, 100 * now);
  }
  err_before /= 3;
  err_after /= 3;
  std::printf("fresh configs: mean |error| %.1f %% before calibration, %.1f %% after\n",
              100 * err_before, 100 * err_after);
  // The two sets are measured seconds apart on a machine other tests share:
  // the same configuration (dp=4 zero=2) measured 1.12 s in one run of this
  // test and 1.33 s in another. Calibration must bring the fresh error down
  // when it starts above that spread, and keep it within the spread when it
  // starts below.
  constexpr double kRunToRunSpread = 0.25;
  EXPECT_LT(err_after, std::max(err_before, kRunToRunSpread));
}

}  // namespace
}  // namespace paratune::executor
