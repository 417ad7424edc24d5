// One MoE layer on one GPU (cuda backend, skipped without a device): all of
// Qwen3-30B-A3B's 128 experts on the device (EP 1), 4096 tokens x top-8, the
// per-expert GEMMs at 256 rows each. The experts' achieved rate stays under the
// GPU's published dense bf16 peak, and the single-rank all-to-all is a copy.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cuda_nccl.h"
#include "executor/run/moe_layer.h"
#include "planner/model.h"
#include "tests/executor/test_util.h"
#include "topology/cluster.h"

namespace paratune::executor {
namespace {

class MoeLayerGpu : public testing::OneGpuTest {};

TEST_F(MoeLayerGpu, Qwen3ExpertsOnOneGpuStayUnderThePeak) {
  auto model = planner::ModelPreset("qwen3-30b-a3b");
  ASSERT_TRUE(model.ok());
  auto shape = MoeLayerShapeOf(*model, 4096, 1, 1);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->rows_per_expert, 256);  // 4096 x 8 / 128
  backend::Backend& b = *backend_;
  auto comms = SplitMoeComms(b, 1, 1);
  ASSERT_TRUE(comms.ok()) << comms.status().ToString();
  auto t = RunMoeLayer(b, *comms, *shape, backend::GemmPrecision::kBf16, 2, 5);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // FC1 2·rows·h·(2·f_e) and FC2 2·rows·f_e·h per expert.
  const double flops = 128.0 * 2 * 256 * 2048 * (2 * 768 + 768);
  const double tflops = flops / t->experts_s / 1e12;
  const double peak = cluster_.gpu.peak_tflops[static_cast<int>(topology::Precision::kBf16)];
  std::printf("qwen3-30b-a3b experts on %s: %.3f ms, %.0f TFLOP/s of %.0f peak; dispatch %.3f ms\n",
              device_.name.c_str(), t->experts_s * 1e3, tflops, peak, t->dispatch_s * 1e3);
  EXPECT_GT(tflops, 0);
  EXPECT_LT(tflops, peak);
  ASSERT_TRUE(b.DestroyComm(comms->ep).ok());
}

}  // namespace
}  // namespace paratune::executor
