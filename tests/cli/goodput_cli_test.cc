// `paratune plan --tokens` and `--objective time-to-train` (docs/cli.md,
// Plans; docs/model.md, Time to train): the flags' rules, the documented
// keys, the ranking by the pessimistic time to train, and the arithmetic that
// joins the keys (time = compute / effective fraction, GPU-hours, cost).
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/json.h"
#include "planner/goodput_options.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);

const Args kJob = {"--model",   "llama3-70b", "--cluster",      "dgx-h100", "--gpus", "256",
                   "--seq",     "8192",       "--global-batch", "512",      "--top",  "8",
                   "--threads", "2"};

Args With(Args a, std::initializer_list<const char*> more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(PlanGoodput, TimeToTrainNeedsTokens) {
  const Outcome r = Call(RunPlan, With(kJob, {"--objective", "time-to-train"}));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--tokens"), std::string::npos) << r.err;
  // A goodput input without a budget would change nothing: refused too.
  const Outcome f = Call(RunPlan, With(kJob, {"--fs-GBps", "100"}));
  EXPECT_EQ(f.code, kExitUsage);
  EXPECT_NE(f.err.find("--tokens"), std::string::npos) << f.err;
  const Outcome m = Call(RunPlan, With(kJob, {"--checkpoint-min-interval-min", "30"}));
  EXPECT_EQ(m.code, kExitUsage);
  EXPECT_NE(m.err.find("--tokens"), std::string::npos) << m.err;
  const Outcome neg =
      Call(RunPlan, With(kJob, {"--tokens", "1T", "--checkpoint-min-interval-min", "-1"}));
  EXPECT_EQ(neg.code, kExitUsage);
  EXPECT_NE(neg.err.find("--checkpoint-min-interval-min"), std::string::npos) << neg.err;
}

TEST(PlanGoodput, TuneRefusesTimeToTrain) {
  // tune takes no token budget: refused rather than ranked by step time.
  const Outcome r = Call(RunTune, {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                   "--global-batch", "64", "--objective", "time-to-train"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--tokens"), std::string::npos) << r.err;
}

TEST(PlanGoodput, TokenBudgetsAreDecimal) {
  const Outcome r =
      Call(RunPlan, With(kJob, {"--tokens", "1.5T", "--top", "1", "--format", "json"}));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_DOUBLE_EQ(Json::parse(r.out)["goodput_inputs"]["tokens"].get<double>(), 1.5e12);
  for (const char* bad : {"15Q", "-3T", "T", "1e400"}) {
    const Outcome b = Call(RunPlan, With(kJob, {"--tokens", bad}));
    EXPECT_EQ(b.code, kExitUsage) << bad;
  }
}

TEST(PlanGoodput, RanksByThePessimisticTimeToTrain) {
  const Outcome r = Call(RunPlan, With(kJob, {"--objective", "time-to-train", "--tokens", "2T",
                                              "--gpu-hour-price", "2.5", "--format", "json"}));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["objective"], "time-to-train");
  EXPECT_NE(doc["ranked_by"].get<std::string>().find("time to train"), std::string::npos);
  const Json& in = doc["goodput_inputs"];
  EXPECT_TRUE(in["failures_default"].get<bool>());
  EXPECT_DOUBLE_EQ(in["failures_per_gpu_hour"].get<double>(), planner::kDefaultFailuresPerGpuHour);
  EXPECT_TRUE(in["restart_assumed"].get<bool>());
  EXPECT_DOUBLE_EQ(in["min_interval_s"].get<double>(), planner::kDefaultMinCheckpointIntervalS);
  EXPECT_TRUE(in["min_interval_assumed"].get<bool>());
  const Json& cands = doc["candidates"];
  ASSERT_GE(cands.size(), 2u);
  double best_pessimistic = std::numeric_limits<double>::infinity();
  for (const Json& c : cands) {
    best_pessimistic =
        std::min(best_pessimistic, c["goodput"]["pessimistic_time_to_train_days"].get<double>());
  }
  double previous_edge = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    SCOPED_TRACE("#" + std::to_string(i + 1));
    const Json& g = cands[i]["goodput"];
    for (const char* k :
         {"checkpoint", "job_mtbf_h", "restart_s", "interval_young_s", "interval_s",
          "interval_bound", "interval_steps", "effective_fraction", "steps", "compute_days", "time_to_train_days",
          "pessimistic_time_to_train_days", "gpu_hours", "cost"}) {
      EXPECT_TRUE(g.contains(k)) << k;
    }
    const double fraction = g["effective_fraction"];
    EXPECT_GT(fraction, 0.5);
    EXPECT_LT(fraction, 1.0);
    const double days = g["time_to_train_days"];
    EXPECT_NEAR(days, g["compute_days"].get<double>() / fraction, 1e-9 * days);
    // The failure-free run is the steps at the predicted step time.
    EXPECT_NEAR(g["compute_days"].get<double>() * 86400,
                2e12 / (512.0 * 8192) * cands[i]["prediction"]["iteration_time_s"].get<double>(),
                1e-6 * days * 86400);
    EXPECT_NEAR(g["gpu_hours"].get<double>(), days * 24 * 256, 1e-9 * days * 24 * 256);
    EXPECT_NEAR(g["cost"].get<double>(), 2.5 * g["gpu_hours"].get<double>(),
                1e-9 * g["gpu_hours"].get<double>());
    // Job MTBF from the default rate: 1 / (rate × GPUs).
    EXPECT_NEAR(g["job_mtbf_h"].get<double>(), 1 / (planner::kDefaultFailuresPerGpuHour * 256),
                1e-6);
    // Leaders lie under the best pessimistic time to train; the rest follow
    // by their pessimistic time to train.
    if (cands[i]["within_band"].get<bool>()) {
      EXPECT_LE(days, best_pessimistic * (1 + 1e-12));
    } else {
      const double edge = g["pessimistic_time_to_train_days"];
      EXPECT_GE(edge, previous_edge);
      previous_edge = edge;
    }
  }
}

TEST(PlanGoodput, SyncSavesAndSlowFilesystemsCostTime) {
  const Args base =
      With(kJob, {"--tokens", "2T", "--top", "1", "--format", "json", "--fix", "tp=8,pp=4"});
  auto first = [](const Outcome& o) { return Json::parse(o.out)["candidates"][0]["goodput"]; };
  const Outcome fast =
      Call(RunPlan, With(base, {"--checkpoint-save", "sync", "--fs-GBps", "1000"}));
  const Outcome slow = Call(RunPlan, With(base, {"--checkpoint-save", "sync", "--fs-GBps", "5"}));
  ASSERT_EQ(fast.code, kExitOk) << fast.err;
  ASSERT_EQ(slow.code, kExitOk) << slow.err;
  const Json f = first(fast), s = first(slow);
  ASSERT_EQ(Json::parse(fast.out)["candidates"][0]["config_string"],
            Json::parse(slow.out)["candidates"][0]["config_string"]);
  EXPECT_GT(s["checkpoint"]["blocking_s"].get<double>(),
            f["checkpoint"]["blocking_s"].get<double>());
  EXPECT_LT(s["effective_fraction"].get<double>(), f["effective_fraction"].get<double>());
  // A dearer save is taken less often (Young/Daly: the interval grows as √δ).
  EXPECT_GT(s["interval_s"].get<double>(), f["interval_s"].get<double>());
}

// When memory sends the search to more GPUs, the count it names says what
// the run to the budget takes there.
TEST(PlanGoodput, FewestGpusThatFitCarriesItsRun) {
  const Outcome r = Call(RunPlan, {"--model",        "llama3.1-70b",
                                   "--cluster",      "dgx-h100",
                                   "--gpus",         "2",
                                   "--seq",          "8192",
                                   "--global-batch", "64",
                                   "--space",        "megatron",
                                   "--top",          "1",
                                   "--threads",      "2",
                                   "--tokens",       "1T",
                                   "--format",       "json"});
  ASSERT_EQ(r.code, kExitNoFeasible) << r.err;
  const Json f = Json::parse(r.out)["fewest_gpus_that_fit"];
  ASSERT_TRUE(f.is_object()) << r.out;
  const Json& g = f["goodput"];
  ASSERT_TRUE(g.is_object()) << f.dump();
  const double days = g["time_to_train_days"];
  EXPECT_NEAR(g["gpu_hours"].get<double>(), days * 24 * f["gpus"].get<int>(),
              1e-9 * days * 24 * f["gpus"].get<int>());
  EXPECT_NEAR(g["job_mtbf_h"].get<double>(),
              1 / (planner::kDefaultFailuresPerGpuHour * f["gpus"].get<int>()), 1e-6);
}

// `validate --goodput`: every published figure beside the model's, with the
// assumptions (docs/cli.md, Validation).
TEST(PlanGoodput, ValidateReportsThePublishedFigures) {
  const std::string file = std::string(PARATUNE_SOURCE_DIR) + "/validation/data/goodput_runs.json";
  const Outcome t = Call(RunValidate, {"--goodput", file});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("== llama3-405b/effective_training  [reproduced]"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("assumed:   restart 10 min (MegaScale's detection and diagnosis"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("8 of 8 published goodput figures reproduced"), std::string::npos) << t.out;
  const Outcome j = Call(RunValidate, {"--goodput", file, "--format", "json"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema"], "paratune.goodput_checks/v1");
  EXPECT_EQ(doc["within"], doc["of"]);
  for (const Json& c : doc["checks"]) {
    for (const char* k : {"id", "source", "published", "paratune", "value", "within", "assumed"}) {
      EXPECT_TRUE(c.contains(k)) << k;
    }
  }
  EXPECT_EQ(Call(RunValidate, {"--goodput", file, "--runs", file}).code, kExitUsage);
}

TEST(PlanGoodput, TableShowsTheRunAndItsAssumptions) {
  const Outcome r = Call(RunPlan, With(kJob, {"--objective", "time-to-train", "--tokens", "2T"}));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("time to train 2.000T tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Llama 3 405B's 419 unexpected interruptions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(MegaScale's; --restart-min)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ranked by the pessimistic time to train"), std::string::npos) << r.out;
}

// With a budget, rank 1's failures are priced three ways; replan prices the
// failure it answers the same way, to the plan's budget.
TEST(PlanGoodput, FailurePoliciesForRankOneAndForAReplan) {
  const Outcome r = Call(RunPlan, With(kJob, {"--tokens", "2T", "--top", "1", "--repair-h", "2",
                                              "--format", "json"}));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json doc = Json::parse(r.out);
  const Json& f = doc["failure_policies"];
  EXPECT_DOUBLE_EQ(f["repair_s"].get<double>(), 7200);
  EXPECT_FALSE(f["repair_assumed"].get<bool>());
  EXPECT_DOUBLE_EQ(doc["goodput_inputs"]["repair_s"].get<double>(), 7200);
  ASSERT_EQ(f["policies"].size(), 3u);
  const Json &spare = f["policies"][0], &wait = f["policies"][1], &shrink = f["policies"][2];
  EXPECT_EQ(spare["name"], "spare");
  EXPECT_NEAR(wait["per_failure_min"].get<double>(), spare["per_failure_min"].get<double>() + 120,
              1e-9);
  EXPECT_LT(f["shrink_to"]["gpus"].get<int>(), 256);
  EXPECT_GT(shrink["per_failure_min"].get<double>(), spare["per_failure_min"].get<double>());
  // The spare policy's run is the plan's own.
  EXPECT_NEAR(spare["time_to_train_days"].get<double>(),
              doc["candidates"][0]["goodput"]["time_to_train_days"].get<double>(), 1e-9);
  // No budget, no policies; a negative repair time is refused.
  const Outcome plain = Call(RunPlan, With(kJob, {"--top", "1", "--format", "json"}));
  ASSERT_EQ(plain.code, kExitOk);
  EXPECT_FALSE(Json::parse(plain.out).contains("failure_policies"));
  EXPECT_EQ(Call(RunPlan, With(kJob, {"--tokens", "2T", "--repair-h", "-1"})).code, kExitUsage);

  const Outcome re = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--top", "2", "--repair-h", "1",
                                      "--format", "json"},
                          r.out);
  ASSERT_EQ(re.code, kExitOk) << re.err;
  const Json c = Json::parse(re.out)["continue_or_wait"];
  EXPECT_DOUBLE_EQ(c["repair_s"].get<double>(), 3600);
  EXPECT_TRUE(c["policies"][0].contains("time_to_train_days"));  // the plan's budget
  const Outcome table = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--top", "2"}, r.out);
  EXPECT_NE(table.out.find("continue or wait"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace paratune::cli
