// shared/calibration/beyond_runs.json mapped to network predictions
// (validation/beyond_runs.h): which rows are asked, why the others are not,
// and the error where the first-pass goal (15 %) is met.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "common/json.h"
#include "common/median.h"
#include "validation/beyond_runs.h"

namespace paratune::planner {
namespace {

Json Doc() {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/beyond_runs.json");
  if (!text.ok()) return Json();
  return Json::parse(*text);
}

TEST(BeyondRuns, EveryRowIsAskedOrLeftOutWithAReason) {
  const Json doc = Doc();
  if (doc.is_null()) GTEST_SKIP() << "no beyond_runs.json";
  ASSERT_TRUE(IsBeyondRunsDocument(doc));
  auto runs = BeyondRunsFromCalibration(doc);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(runs->runs.size() + runs->skipped.size(), doc.size());
  for (const SkippedBeyondRow& s : runs->skipped) {
    const bool known = s.reason.rfind("no cluster preset for GPU", 0) == 0 ||
                       s.reason.rfind("no network preset for benchmark", 0) == 0 ||
                       s.reason.find("parallelism of a network is not modelled") != std::string::npos;
    EXPECT_EQ(s.reason.find("tensor"), std::string::npos) << s.id << ": tensor parallelism is modelled";
    EXPECT_TRUE(known) << s.id << ": " << s.reason;
  }
  // Every benchmark with a preset on an SXM/NVL72 GPU of a preset is asked.
  std::set<std::string> benchmarks;
  for (const BeyondRun& r : runs->runs) {
    benchmarks.insert(r.benchmark);
    EXPECT_EQ(r.layout.Data() * r.layout.spatial * r.layout.tensor, r.layout.gpus) << r.id;
    EXPECT_FALSE(r.assumed.empty()) << r.id;
  }
  for (const char* b : {"resnet", "retinanet", "stable_diffusion", "flux1", "unet3d", "cosmoflow", "deepcam"}) {
    EXPECT_TRUE(benchmarks.count(b)) << b;
  }
  EXPECT_FALSE(IsBeyondRunsDocument(Json::array({Json::object({{"benchmark", "x"}})})));
  EXPECT_FALSE(BeyondRunsFromCalibration(Json::object()).ok());
}

TEST(BeyondRuns, DiffusionModelsAndResNetWithinTheFirstPassGoal) {
  const Json doc = Doc();
  if (doc.is_null()) GTEST_SKIP() << "no beyond_runs.json";
  auto runs = BeyondRunsFromCalibration(doc);
  ASSERT_TRUE(runs.ok());
  std::map<std::string, std::vector<double>> abs_err;
  for (const BeyondRun& r : runs->runs) {
    auto p = PredictNetwork(r.network, r.cluster, r.layout, r.training);
    ASSERT_TRUE(p.ok()) << r.id << ": " << p.status().ToString();
    EXPECT_GT(p->samples_per_s, 0) << r.id;
    abs_err[r.benchmark].push_back(std::fabs(BeyondError(r, *p)));
  }
  // Nothing is fitted to this file: these are held-out figures.
  for (const char* b : {"flux1", "stable_diffusion", "resnet"}) EXPECT_LT(Median(abs_err[b]), 0.15) << b;
}

}  // namespace
}  // namespace paratune::planner
