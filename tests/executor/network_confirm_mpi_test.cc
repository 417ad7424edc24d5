// The MPI tier for a network's plans (run under `mpirun -np 4`): a small CNN
// planned on 4 GPUs is confirmed on four real processes: its convolutions run
// through the mpi-cpu backend's lowered convolution (Eigen), its gradients'
// all-reduce over the 4 processes, which are the plan's data-parallel group,
// so the sync is measured rather than modelled. Rank 0 asserts; every rank
// runs (the measurements are collective).
#include <gtest/gtest.h>

#include <cstdio>

#include "executor/run/network_confirm.h"
#include "planner/network_request.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

// Confirms the first plan of `plans` on the four mpi-cpu processes (every
// rank runs; the measurements are collective); rank 0's candidate report,
// null on the other ranks.
OrderedJson ConfirmFirstPlan(backend::Backend& b, const Json& plans) {
  auto in = NetworkConfirmInputFromPlans(plans, 1);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  if (!in.ok()) return nullptr;
  NetworkConfirmOptions o;
  o.samples = 2;
  o.comm_iters = 2;
  o.touch_memory = false;
  auto r = ConfirmNetworkCandidates(b, *in, o, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || b.rank() != 0) return nullptr;
  return (*r)["candidates"][0];
}

TEST(NetworkConfirmMpi, ASmallCnnRunsItsConvolutionsAndItsGradientSync) {
  backend::Backend& b = testing::MpiCpuBackend();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  const Json net = Json::parse(R"({"name": "small-cnn", "source": "a test network", "layers": [
      {"op": "conv", "name": "c1", "in": [3, 32, 32], "out_channels": 16, "kernel": 3, "input_grad": false},
      {"op": "norm", "name": "n1", "in": [16, 32, 32]},
      {"op": "conv", "name": "c2", "in": [16, 32, 32], "out_channels": 32, "kernel": 3, "stride": 2},
      {"op": "conv", "name": "c3", "in": [32, 16, 16], "out_channels": 32, "kernel": 3, "repeat": 3},
      {"op": "linear", "name": "fc", "tokens": 1, "in_features": 8192, "out_features": 10}]})");
  auto job = planner::ParseNetworkJob(Json{{"network", net},
                                           {"cluster", "dgx-a100-80gb"},
                                           {"gpus", 4},
                                           {"global_batch", 16},
                                           {"training", {{"precision", "fp32"}}}});  // the CPU's GEMMs
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const OrderedJson c = ConfirmFirstPlan(b, Json::parse(planner::PlanNetworkDocument(*job).dump()));
  if (b.rank() != 0) return;
  ASSERT_EQ(c["status"], "ok") << c.dump(2);
  EXPECT_NEAR(c["compute"]["coverage"].get<double>(), 1.0, 1e-9);
  for (const OrderedJson& row : c["compute"]["by_layer"]) {
    EXPECT_GT(row["measured_forward_s"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["measured_backward_s"].get<double>(), 0) << row.dump();
  }
  if (c["layout"]["sharding"] != "fsdp" && c["layout"]["data"] == 4) {
    EXPECT_EQ(c["grad_sync"]["used"], "measured");
    EXPECT_GT(c["grad_sync"]["measured_s"].get<double>(), 0);
  }
  std::printf("  %s: predicted %.6f s, measured %.6f s on 4 mpi-cpu processes\n",
              c["layout"].dump().c_str(), c["predicted"]["step_s"].get<double>(),
              c["measured_step_s"].get<double>());
}

// A small transformer split 4 ways by sequence on four real processes: its
// Ulysses all-to-all runs through the mpi-cpu backend over the whole group.
TEST(NetworkConfirmMpi, ASequenceSplitMeasuresItsAllToAll) {
  backend::Backend& b = testing::MpiCpuBackend();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  const Json net = Json::parse(R"({"name": "small-transformer", "source": "a test network", "layers": [
      {"op": "linear", "name": "embed", "tokens": 64, "in_features": 16, "out_features": 64, "input_grad": false},
      {"op": "norm", "name": "ln", "in": [64, 64], "repeat": 2, "checkpoint": true},
      {"op": "linear", "name": "qkv", "tokens": 64, "in_features": 64, "out_features": 192, "repeat": 2},
      {"op": "attention", "name": "attn", "tokens": 64, "heads": 4, "head_dim": 16, "repeat": 2},
      {"op": "linear", "name": "out", "tokens": 64, "in_features": 64, "out_features": 64, "repeat": 2}]})");
  auto job = planner::ParseNetworkJob(Json{{"network", net},
                                           {"cluster", "dgx-a100-80gb"},
                                           {"gpus", 4},
                                           {"global_batch", 2},
                                           {"training", {{"precision", "fp32"}}}});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  Json plans = Json::parse(planner::PlanNetworkDocument(*job).dump());
  ASSERT_FALSE(plans["plans"].empty());
  plans["plans"][0]["layout"] = Json{{"sequence", 4}, {"micro_batch", 2}, {"sharding", "ddp"}};
  const OrderedJson c = ConfirmFirstPlan(b, plans);
  if (b.rank() != 0) return;
  ASSERT_EQ(c["status"], "ok") << c.dump(2);
  EXPECT_EQ(c["sequence_exchange"]["used"], "measured");
  // 2 samples x 64 tokens x one head each of 16, fp32.
  EXPECT_DOUBLE_EQ(c["sequence_exchange"]["bytes"].get<double>(), 2.0 * 64 * 1 * 16 * 4);
  EXPECT_GT(c["sequence_exchange"]["measured_s"].get<double>(), 0);
}

}  // namespace
}  // namespace paratune::executor
