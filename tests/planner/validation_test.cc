// The model against the public measured runs of Korthikanti et al. 2022
// (../shared/calibration/korthikanti2022.json): one set of A100 preset numbers,
// no per-run knobs. The tolerance is the goal, not a fitted value.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/validation.h"

namespace paratune::planner {
namespace {

TEST(Validation, KorthikantiRunsWithinFivePercent) {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/korthikanti2022.json");
  if (!text.ok()) GTEST_SKIP() << "calibration file not found: " << text.status().ToString();
  auto doc = ParseJson(*text, "korthikanti2022.json");
  ASSERT_TRUE(doc.ok());
  auto runs = PublishedRunsFromCalibration(*doc, "dgx-a100-80gb");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int checked = 0;
  for (const auto& run : *runs) {
    if (run.measured_iteration_s <= 0) continue;
    const auto& job = run.request.job;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    ASSERT_EQ(cm.CheckRules(run.request.config), Reason::kOk) << run.id;
    Prediction p = cm.Predict(run.request.config);
    const double err = (p.iteration_time_s - run.measured_iteration_s) / run.measured_iteration_s;
    EXPECT_LT(std::fabs(err), 0.05) << run.id << ": predicted " << p.iteration_time_s
                                    << " s, measured " << run.measured_iteration_s << " s";
    EXPECT_TRUE(p.fits) << run.id << " ran on 80 GB A100s, so it must fit";
    ++checked;
  }
  EXPECT_EQ(checked, 8);  // the eight end-to-end runs with a stated iteration time
}

// Selective recompute beats full recompute in every published pair, by the
// published margin (Korthikanti Table 5: 29-32 % faster) within a few points.
TEST(Validation, SelectiveVersusFullRecomputeSpeedup) {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/korthikanti2022.json");
  if (!text.ok()) GTEST_SKIP() << "calibration file not found";
  auto runs = PublishedRunsFromCalibration(*ParseJson(*text, "k"), "dgx-a100-80gb");
  ASSERT_TRUE(runs.ok());
  for (const auto& sel : *runs) {
    if (sel.id.find("_sp_selective") == std::string::npos || sel.measured_iteration_s <= 0) continue;
    std::string full_id = sel.id.substr(0, sel.id.find("_sp_selective")) + "_full_recompute";
    for (const auto& full : *runs) {
      if (full.id != full_id) continue;
      auto predict = [](const PublishedRun& r) {
        CostModel cm(r.request.job.model, r.request.job.training, r.request.job.cluster, r.request.job.gpus);
        return cm.Predict(r.request.config).iteration_time_s;
      };
      const double measured = full.measured_iteration_s / sel.measured_iteration_s;
      const double predicted = predict(full) / predict(sel);
      EXPECT_NEAR(predicted, measured, 0.05) << sel.id;
    }
  }
}

}  // namespace
}  // namespace paratune::planner
