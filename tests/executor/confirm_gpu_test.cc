// The GPU tier: compiled wherever the cuda backend is, skipped without a
// device. On one GPU it confirms the top candidates of an 8-GPU plan for a
// real model (the fewer-processes path: each distinct rank's compute and
// memory on the device, collectives priced by the cluster's α-β) and prints
// measured against predicted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/cuda_nccl.h"
#include "executor/run/runner.h"
#include "planner/model.h"
#include "planner/search.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

class ConfirmGpu : public testing::OneGpuTest {};

TEST_F(ConfirmGpu, TopCandidatesOfAnEightGpuPlanOnOneGpu) {
  planner::Job job;
  auto model = planner::ModelPreset("gpt3-1.3b");
  ASSERT_TRUE(model.ok());
  job.model = *model;
  job.cluster = cluster_;
  job.gpus = 8;
  job.training.seq_len = 2048;
  job.training.global_batch = 64;
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  planner::SearchOptions so;
  so.top_k = 3;
  so.family = planner::Family::kMegatron;
  const planner::SearchResult plan = planner::Search(cm, so).RunAll();
  ASSERT_FALSE(plan.top.empty());
  ConfirmInput in;
  in.job = job;
  for (size_t i = 0; i < plan.top.size(); ++i) {
    in.candidates.push_back(plan.top[i].config);
    in.plan_ranks.push_back(static_cast<int>(i) + 1);
  }
  ConfirmOptions o;
  o.workload.slice_layers = 2;
  auto rep = ConfirmCandidates(
      *backend_, in, o, [](const std::string& l) { std::printf("%s\n", l.c_str()); }, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  for (const CandidateReport& c : rep->candidates) {
    ASSERT_EQ(c.status, Outcome::kOk) << c.reason;
    ASSERT_TRUE(c.measured_s && std::isfinite(*c.measured_s) && *c.measured_s > 0);
    std::printf("%s: %s  predicted %.4f s  measured %.4f s  error %+.1f %%\n", device_.name.c_str(),
                planner::ConfigToString(c.config).c_str(), c.predicted_s, *c.measured_s,
                100 * *c.error);
    for (int t = 0; t < kNumTerms; ++t) {
      const TermTimes& tt = c.breakdown[static_cast<size_t>(t)];
      if (tt.predicted_s > 0 || tt.measured_s > 0) {
        std::printf("    %-10s measured %.5f  predicted %.5f  (%s)\n",
                    TermName(static_cast<Term>(t)), tt.measured_s, tt.predicted_s,
                    SourceName(tt.source));
      }
    }
  }
}

}  // namespace
}  // namespace paratune::executor
