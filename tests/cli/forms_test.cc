// Every command in every output form it offers: table and JSON, GPU-count
// sweeps, --pareto, --explain, every emit format. The sanitizer tier runs
// these too, so a dangling reference cannot hide in a form no other test
// prints (the scaling table once read a row through a destroyed vector).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/common.h"
#include "common/json.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);

// Small searches: the point is every printing path, not a large space.
const Args kDense = {"--model", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "256",
                     "--seq", "4096"};
const Args kMoe = {"--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--global-batch", "256",
                   "--seq", "4096"};

Args With(Args base, const Args& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// A JSON answer parses and is not empty; a table answer says something.
void ExpectAnswer(const Outcome& r, bool json, const std::string& what) {
  ASSERT_EQ(r.code, kExitOk) << what << "\n" << r.err;
  ASSERT_FALSE(r.out.empty()) << what;
  if (json) {
    const Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << what << "\n" << r.out.substr(0, 400);
    EXPECT_FALSE(j.empty()) << what;
  }
}

TEST(OutputForms, PlanInEveryForm) {
  (void)kNoCache;
  for (const Args& model : {kDense, kMoe}) {
    for (const std::string format : {"table", "json"}) {
      const Args one = With(model, {"--gpus", "64", "--format", format});
      ExpectAnswer(Call(RunPlan, one), format == "json", "plan " + format);
      ExpectAnswer(Call(RunPlan, With(one, {"--pareto"})), format == "json", "--pareto " + format);
      ExpectAnswer(Call(RunPlan, With(one, {"--explain", "tp=2,pp=2"})), format == "json",
                   "--explain " + format);
      // The sweep: a scaling table (or array) after the per-count sections.
      const Outcome sweep =
          Call(RunPlan, With(model, {"--gpus", "16:64", "--format", format}));
      ExpectAnswer(sweep, format == "json", "sweep " + format);
      if (format == "table") {
        // Every scaling row names a configuration the layout parser accepts.
        const auto at = sweep.out.find("scaling");
        ASSERT_NE(at, std::string::npos) << sweep.out;
        EXPECT_NE(sweep.out.find("tp=", at), std::string::npos) << sweep.out.substr(at);
      }
    }
  }
}

TEST(OutputForms, NothingFitsInEveryForm) {
  for (const std::string format : {"table", "json"}) {
    const Outcome r = Call(RunPlan, {"--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus",
                                     "8", "--global-batch", "64", "--format", format});
    EXPECT_EQ(r.code, kExitNoFeasible) << r.err;
    EXPECT_FALSE(r.out.empty() && r.err.empty());
  }
}

TEST(OutputForms, PredictAndCapacityInEveryForm) {
  for (const std::string format : {"table", "json"}) {
    ExpectAnswer(Call(RunPredict, With(kDense, {"--gpus", "64", "--config", "tp=2,pp=2,mbs=1",
                                               "--format", format})),
                 format == "json", "predict " + format);
    ExpectAnswer(Call(RunCapacity, {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                    "--format", format}),
                 format == "json", "capacity " + format);
  }
}

TEST(OutputForms, PresetsInEveryForm) {
  for (const std::string kind : {"models", "gpus", "clusters", "frameworks"}) {
    for (const std::string format : {"table", "json"}) {
      ExpectAnswer(Call(RunPresets, {kind, "--format", format}), format == "json",
                   "presets " + kind + " " + format);
    }
  }
}

// Emit and replan read a plans document: one per space, each written by plan.
TEST(OutputForms, EmitAndReplanInEveryForm) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> spaces = {
      {"megatron", {"megatron", "env", "json"}},
      {"deepspeed", {"deepspeed", "megatron-deepspeed", "env", "json"}},
      {"fsdp", {"torchtitan", "env", "json"}},
      {"axonn", {"axonn", "env", "json"}},
  };
  for (const auto& [space, formats] : spaces) {
    const Outcome plans =
        Call(RunPlan, With(kDense, {"--gpus", "64", "--space", space, "--top", "3", "--format", "json"}));
    ASSERT_EQ(plans.code, kExitOk) << space << "\n" << plans.err;
    for (const std::string& format : formats) {
      for (const std::string rank : {"1", "3"}) {
        const Outcome r = Call(RunEmit, {"--plans", "-", "--rank", rank, "--format", format}, plans.out);
        // A format may refuse a plan its framework cannot express; then it says why.
        if (r.code == kExitUsage) {
          EXPECT_FALSE(r.err.empty()) << space << " " << format;
          continue;
        }
        ExpectAnswer(r, format == "json", "emit " + space + " " + format + " #" + rank);
      }
    }
    for (const std::string format : {"table", "json"}) {
      ExpectAnswer(Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--allow-global-batch-change",
                                    "--top", "2", "--format", format},
                        plans.out),
                   format == "json", "replan " + space + " " + format);
    }
  }
}

}  // namespace
}  // namespace paratune::cli
