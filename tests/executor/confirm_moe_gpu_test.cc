// The GPU tier for mixture-of-experts plans (cuda backend, skipped without a
// device): confirming an 8-GPU OLMoE-1B-7B candidate with EP 8 on one GPU runs
// its MoE layer on the one process there is (EP 1: all 64 experts on the
// device, the all-to-all a copy) and the report carries the experts' GEMMs
// measured beside the cost model's price for them.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda_nccl.h"
#include "executor/run/runner.h"
#include "planner/model.h"
#include "tests/executor/test_util.h"
#include "topology/cluster.h"

namespace paratune::executor {
namespace {

class ConfirmMoeGpu : public testing::OneGpuTest {};

TEST_F(ConfirmMoeGpu, MoeCandidateOnOneGpuReportsItsExpertsMeasured) {
  backend::Backend& b = *backend_;
  ConfirmInput in;
  auto model = planner::ModelPreset("olmoe-1b-7b");
  ASSERT_TRUE(model.ok());
  in.job.model = *model;
  in.job.cluster = cluster_;
  in.job.gpus = 8;
  in.job.training.seq_len = 4096;
  in.job.training.global_batch = 8;
  planner::ParallelConfig c;
  c.gdata = 8;
  c.ep = 8;
  c.distributed_optimizer = true;
  in.candidates = {c};
  in.plan_ranks = {1};
  ConfirmOptions o;
  o.workload.slice_layers = 1;
  auto rep = ConfirmCandidates(
      b, in, o, [](const std::string& l) { std::printf("%s\n", l.c_str()); }, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_EQ(rep->candidates.size(), 1u);
  const CandidateReport& cand = rep->candidates[0];
  ASSERT_EQ(cand.status, Outcome::kOk) << cand.reason;
  ASSERT_TRUE(cand.moe_layer.has_value());
  const MoeLayerReport& ml = *cand.moe_layer;
  // One process: EP 1, every expert local, nothing leaves the rank.
  EXPECT_EQ(ml.ep, 1);
  EXPECT_FALSE(ml.as_planned);
  EXPECT_EQ(ml.local_experts, in.job.model.experts);
  EXPECT_EQ(ml.tokens, 4096);
  EXPECT_EQ(ml.rows_per_expert, int64_t{4096} * in.job.model.top_k / in.job.model.experts);
  EXPECT_EQ(ml.a2a_bytes_per_rank, 0);
  EXPECT_GT(ml.experts.measured_s, 0);
  EXPECT_GT(ml.experts.predicted_s, 0);
  // FC1 (SwiGLU: 2·f_e wide) and FC2 per expert, under the GPU's dense bf16 peak.
  const double f = in.job.model.moe_ffn_hidden, h = in.job.model.hidden;
  const double flops =
      2.0 * ml.local_experts * static_cast<double>(ml.rows_per_expert) * h * 3.0 * f;
  const double peak = in.job.cluster.gpu.peak_tflops[static_cast<int>(topology::Precision::kBf16)];
  std::printf(
      "olmoe-1b-7b moe layer on %s: experts %.3f ms measured / %.3f ms predicted (%.0f of %.0f "
      "TFLOP/s), a2a %.3f ms\n",
      device_.name.c_str(), ml.experts.measured_s * 1e3, ml.experts.predicted_s * 1e3,
      flops / ml.experts.measured_s / 1e12, peak, ml.a2a.measured_s * 1e3);
  EXPECT_LT(flops / ml.experts.measured_s / 1e12, peak);
}

}  // namespace
}  // namespace paratune::executor
