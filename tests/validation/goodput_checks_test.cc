// Published effective-training figures and checkpoint sizes
// (validation/data/goodput_runs.json) reproduced by the goodput model within
// their stated precision, as `paratune validate --goodput` reports them
// (validation/goodput_checks.h; docs/model.md, "Time to train").
#include "validation/goodput_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "planner/model.h"

namespace paratune::planner {
namespace {

Json Published() {
  std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/validation/data/goodput_runs.json");
  EXPECT_TRUE(in.good());
  return Json::parse(in);
}

std::map<std::string, GoodputCheck> ById(const std::vector<GoodputCheck>& checks) {
  std::map<std::string, GoodputCheck> out;
  for (const GoodputCheck& c : checks) out[c.id] = c;
  return out;
}

TEST(GoodputChecks, EveryPublishedFigureIsReproduced) {
  auto checks = CheckGoodputRuns(Published());
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  ASSERT_EQ(checks->size(), 4u);
  for (const GoodputCheck& c : *checks) {
    EXPECT_TRUE(c.within) << c.id << ": published " << c.published << ", paratune " << c.paratune;
    EXPECT_FALSE(c.assumed.empty()) << c.id;
    EXPECT_FALSE(c.source.empty()) << c.id;
  }
}

// Llama 3 405B (arXiv 2407.21783 §3.3.4): "higher than 90% effective training
// time" from 466 interruptions in 54 days on 16,384 H100s; checkpoints of
// "1 MB to 4 GB per GPU" (§3.3.1).
TEST(GoodputChecks, Llama3EffectiveTrainingTimeAbove90Percent) {
  const Json doc = Published();
  const Json& row = doc["runs"][0];
  auto checks = CheckGoodputRuns(doc);
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  const auto by = ById(*checks);
  const GoodputCheck& eff = by.at("llama3-405b/effective_training");
  EXPECT_GT(eff.value, row["effective_training_fraction_min"].get<double>());
  EXPECT_LT(eff.value, 1.0);
  const GoodputCheck& size = by.at("llama3-405b/checkpoint_per_gpu");
  EXPECT_GE(size.value, row["checkpoint_per_gpu_bytes_min"].get<double>());
  EXPECT_LE(size.value, row["checkpoint_per_gpu_bytes_max"].get<double>());

  // The check can fail: twice the interruptions in the same 54 days would
  // leave the run under 90 %.
  Json twice = doc;
  twice["runs"][0]["interruptions"] = 2 * row["interruptions"].get<int>();
  auto worse = CheckGoodputRuns(twice);
  ASSERT_TRUE(worse.ok());
  const auto worse_by = ById(*worse);  // kept: `w` refers into it
  const GoodputCheck& w = worse_by.at("llama3-405b/effective_training");
  EXPECT_LT(w.value, eff.value);
  EXPECT_FALSE(w.within) << w.paratune;
}

// BLOOM 176B (BigScience's 176B model page): "only the bf16 weights are 329GB,
// the full checkpoint with optimizer states is 2.3TB", read as binary units
// rounded up (as `du -h` prints them): 2 + 12 bytes per parameter.
TEST(GoodputChecks, BloomCheckpointSizesAsPrinted) {
  const Json doc = Published();
  const Json& row = doc["checkpoints"][0];
  // The shape gives the published parameter count to 0.01 % (BLOOM also
  // norms its embedding: 2·h more).
  Json spec = row["model"];
  spec["name"] = "bloom-176b";
  auto m = ParseModelSpec(spec, "/model");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const double published = row["params_published"].get<double>();
  EXPECT_NEAR(static_cast<double>(m->ParamCount()), published, 1e-4 * published);

  auto checks = CheckGoodputRuns(doc);
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  const auto by = ById(*checks);
  const double GiB = std::pow(2.0, 30), TiB = std::pow(2.0, 40);
  EXPECT_EQ(std::ceil(by.at("bloom-176b/weights").value / GiB),
            row["weights_GiB_rounded_up"].get<double>());
  EXPECT_DOUBLE_EQ(std::ceil(10 * by.at("bloom-176b/full_checkpoint").value / TiB) / 10,
                   row["full_TiB_rounded_up"].get<double>());
  // In decimal units the weights alone would be 352 GB, not 329.
  EXPECT_GT(by.at("bloom-176b/weights").value / 1e9, 350);
}

TEST(GoodputChecks, MalformedRowsNameTheirPointer) {
  Json doc = Published();
  doc["runs"][0].erase("days");
  auto r = CheckGoodputRuns(doc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/runs/0/days"), std::string::npos) << r.status().ToString();
  Json bad = Published();
  bad["checkpoints"][0]["config"]["tp"] = 0;
  r = CheckGoodputRuns(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/checkpoints/0/config/tp"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace paratune::planner
