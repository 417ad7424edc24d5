// Confirm for a network's plans (executor/run/network_confirm.h) on a fake
// world of 4 ranks: every candidate of a plans document runs, the layers are
// issued at the shapes the network defines (a convolution's kernels execute
// the layer's published FLOPs), unmeasured layers are scaled, and what cannot
// run is reported as such.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "executor/run/network_confirm.h"
#include "planner/network_request.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

Json PlansFor(const std::string& network, int gpus, int64_t batch) {
  auto job = planner::ParseNetworkJob(
      Json{{"network", network}, {"cluster", "dgx-a100-80gb"}, {"gpus", gpus}, {"global_batch", batch}});
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return Json::parse(planner::PlanNetworkDocument(*job).dump());
}

// Rank 0's report of confirming `plans` on a fake world (and every rank's
// fake, for its log, through `fakes`).
OrderedJson ConfirmOnFake(const backend::FakeConfig& fc, const Json& plans, int top, int layers,
                          std::vector<backend::FakeBackend*>* fakes = nullptr) {
  auto in = NetworkConfirmInputFromPlans(plans, top);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  NetworkConfirmOptions o;
  o.layers = layers;
  o.samples = 3;
  OrderedJson root;
  std::mutex mu;
  testing::RunWorld(fc, [&](backend::Backend& b) {
    auto r = ConfirmNetworkCandidates(b, *in, o, nullptr);
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok() && b.rank() == 0) root = *r;
  }, nullptr, fakes);
  return root;
}

backend::FakeConfig FourRanks() {
  backend::FakeConfig fc;
  fc.world_size = 4;
  return fc;
}

// The fake runs a convolution pass in its latency plus the pass's FLOPs at
// its bf16 rate, so every convolution measured must execute its layer's own
// FLOPs (network.h's count, on the spatial share one GPU holds) at the
// micro-batch: transposed and strided ones included.
void ExpectConvolutionsAtTheirFlops(const OrderedJson& c, const planner::Network& net) {
  const backend::FakeConfig fc = FourRanks();
  const int64_t micro = c["layout"]["micro_batch"].get<int64_t>();
  const int spatial = c["layout"]["spatial"].get<int>();
  int convs = 0;
  for (const OrderedJson& row : c["compute"]["by_layer"]) {
    if (row["op"] != "conv") continue;
    const planner::NetLayer* l = nullptr;
    for (const planner::NetLayer& x : net.layers) {
      if (x.name == row["layer"]) l = &x;
    }
    ASSERT_NE(l, nullptr) << row.dump();
    const double e0 = static_cast<double>(l->extent[0]);
    const double share = std::ceil(e0 / spatial) / e0;
    const double pass = fc.gemm_latency_us * 1e-6 + l->ForwardFlops() * share * micro / (fc.gemm_tflops[2] * 1e12);
    EXPECT_NEAR(row["measured_forward_s"].get<double>(), pass, 1e-9) << row.dump();
    // Backward: the weight gradient, and the data gradient unless nothing needs it.
    EXPECT_NEAR(row["measured_backward_s"].get<double>(), (l->input_grad ? 2 : 1) * pass, 1e-9) << row.dump();
    ++convs;
  }
  EXPECT_GT(convs, 3);
}

TEST(NetworkConfirm, EveryCandidateRunsWithItsLayersAtTheNetworksShapes) {
  for (const auto& [name, batch] : {std::pair<const char*, int64_t>{"resnet-50", 128}, {"unet3d-kits19", 8}}) {
    SCOPED_TRACE(name);
    const OrderedJson r = ConfirmOnFake(FourRanks(), PlansFor(name, 4, batch), 2, 1000);
    ASSERT_EQ(r["schema"], kNetworkRunReportSchema);
    ASSERT_EQ(r["candidates"].size(), 2u);
    auto net = planner::NetworkPreset(name);
    ASSERT_TRUE(net.ok());
    for (size_t i = 0; i < 2; ++i) {
      const OrderedJson& c = r["candidates"][i];
      SCOPED_TRACE(c["layout"].dump());
      ASSERT_EQ(c["status"], "ok") << c.dump();
      EXPECT_EQ(c["rank"], static_cast<int>(i) + 1);
      EXPECT_TRUE(c["memory"]["proved"].get<bool>());
      // Every shape measured: the whole network is covered.
      EXPECT_NEAR(c["compute"]["coverage"].get<double>(), 1.0, 1e-9);
      EXPECT_GT(c["measured_step_s"].get<double>(), 0);
      ExpectConvolutionsAtTheirFlops(c, *net);
      // Data parallelism over the 4 processes is the plan's group: its sync is measured.
      if (c["layout"]["sharding"] != "fsdp" && c["layout"]["data"] == 4) {
        EXPECT_EQ(c["grad_sync"]["used"], "measured");
      }
    }
  }
  // ResNet-50's stem is the paper's 7×7/2 convolution: 118 M multiply-adds a sample.
  auto rn = planner::NetworkPreset("resnet-50");
  ASSERT_TRUE(rn.ok());
  EXPECT_NEAR(rn->layers[0].ForwardFlops(), 2 * 118.0e6, 2e6);
}

// A plan that recomputes runs each recomputed layer's forward kernels again
// ahead of its backward: DeepCAM's middle flow (the repeated blocks) measures
// three passes behind its forward, a convolution outside it two.
TEST(NetworkConfirm, RecomputedLayersRunTheirForwardAgainInTheBackward) {
  Json plans = PlansFor("deepcam", 4, 8);
  ASSERT_FALSE(plans["plans"].empty());
  plans["plans"][0]["layout"]["recompute"] = true;
  const OrderedJson r = ConfirmOnFake(FourRanks(), plans, 1, 1000);
  ASSERT_EQ(r["candidates"].size(), 1u);
  const OrderedJson& c = r["candidates"][0];
  ASSERT_EQ(c["status"], "ok") << c.dump();
  EXPECT_TRUE(c["layout"]["recompute"].get<bool>());
  int middle = 0, outside = 0;
  for (const OrderedJson& row : c["compute"]["by_layer"]) {
    const std::string name = row["layer"];
    if (row["op"] != "conv" || name.find("pointwise") == std::string::npos) continue;
    const double ratio = row["measured_backward_s"].get<double>() / row["measured_forward_s"].get<double>();
    if (name.rfind("middle.", 0) == 0) {
      EXPECT_NEAR(ratio, 3.0, 1e-9) << name;
      ++middle;
    } else {
      EXPECT_NEAR(ratio, 2.0, 1e-9) << name;
      ++outside;
    }
  }
  EXPECT_GT(middle, 0);
  EXPECT_GT(outside, 0);
}

// A sequence-parallel plan measures one Ulysses all-to-all of its largest
// self-attention on the 4 processes, its whole sequence group: DiT-XL/2's 256
// tokens at 16 heads of 72 over 4 GPUs move 256 x 4 x 72 bf16 values per
// sample per GPU, and the step takes the sequence traffic at the measured
// one's ratio to the model.
TEST(NetworkConfirm, ASequenceGroupMeasuresItsAllToAll) {
  Json plans = PlansFor("dit-xl2", 4, 8);
  ASSERT_FALSE(plans["plans"].empty());
  plans["plans"][0]["layout"]["sequence"] = 4;
  plans["plans"][0]["layout"]["tensor"] = 1;
  plans["plans"][0]["layout"]["micro_batch"] = 8;
  const OrderedJson r = ConfirmOnFake(FourRanks(), plans, 1, 1000);
  ASSERT_EQ(r["candidates"].size(), 1u);
  const OrderedJson& c = r["candidates"][0];
  ASSERT_EQ(c["status"], "ok") << c.dump();
  EXPECT_EQ(c["layout"]["sequence"], 4);
  const OrderedJson& x = c["sequence_exchange"];
  EXPECT_EQ(x["ranks"], 4);
  EXPECT_EQ(x["used"], "measured");
  EXPECT_DOUBLE_EQ(x["bytes"].get<double>(), 8.0 * 256 * 4 * 72 * 2);
  EXPECT_GT(x["measured_s"].get<double>(), 0);
  EXPECT_GT(c["predicted"]["sequence_comm_s"].get<double>(), 0);
}

// ZeRO-1's step sync as the distributed optimizer issues it: the gradients
// reduce-scattered in fp32 and the updated weights all-gathered in bf16, each
// the whole model's bytes (nccl-tests' size) on the 4 data-parallel ranks.
TEST(NetworkConfirm, TheZero1SyncMovesTheModelsGradientsAndWeights) {
  // The best plan, its layout set to ZeRO-1 at 32 samples per GPU.
  Json one = PlansFor("resnet-50", 4, 128);
  one["plans"] = Json::array({one["plans"][0]});
  one["plans"][0]["layout"]["sharding"] = "zero1";
  one["plans"][0]["layout"]["micro_batch"] = 32;
  std::vector<backend::FakeBackend*> fakes;
  const OrderedJson r = ConfirmOnFake(FourRanks(), one, 1, 2, &fakes);
  ASSERT_EQ(r["candidates"][0]["status"], "ok") << r.dump();
  EXPECT_EQ(r["candidates"][0]["grad_sync"]["used"], "measured");
  auto net = planner::NetworkPreset("resnet-50");
  ASSERT_TRUE(net.ok());
  const double params = net->Params();
  int reduce_scatters = 0, all_gathers = 0;
  for (const backend::OpRecord& op : fakes[0]->ops()) {
    if (op.kind == backend::OpKind::kReduceScatter) {
      ++reduce_scatters;
      EXPECT_NEAR(static_cast<double>(op.bytes), 4 * params, 16.0);
    }
    if (op.kind == backend::OpKind::kAllGather) {
      ++all_gathers;
      EXPECT_NEAR(static_cast<double>(op.bytes), 2 * params, 16.0);
    }
  }
  EXPECT_GT(reduce_scatters, 0);
  EXPECT_EQ(reduce_scatters, all_gathers);
}

TEST(NetworkConfirm, LayersNotMeasuredAreScaledByTheMeasuredOnes) {
  const OrderedJson r = ConfirmOnFake(FourRanks(), PlansFor("sd2-unet", 4, 32), 1, 1);
  const OrderedJson& c = r["candidates"][0];
  ASSERT_EQ(c["status"], "ok") << c.dump();
  EXPECT_EQ(c["compute"]["shapes_measured"], 1);
  const double coverage = c["compute"]["coverage"].get<double>();
  EXPECT_GT(coverage, 0.0);
  EXPECT_LT(coverage, 0.5);
  // Forward and backward extrapolated with the measured shape's ratio keep
  // that ratio over the whole network.
  const double ratio = c["compute"]["measured_over_predicted"].get<double>();
  const double predicted = c["predicted"]["forward_s"].get<double>() + c["predicted"]["backward_s"].get<double>();
  const double measured = c["compute"]["forward_s"].get<double>() + c["compute"]["backward_s"].get<double>();
  EXPECT_GT(ratio, 0);
  EXPECT_NEAR(measured / predicted, ratio, 0.25 * ratio);
}

TEST(NetworkConfirm, WhatCannotRunIsReportedAndTheNextCandidateRuns) {
  const Json plans = PlansFor("resnet-50", 4, 128);
  backend::FakeConfig small = FourRanks();
  small.memory_bytes = int64_t{1} << 30;
  OrderedJson r = ConfirmOnFake(small, plans, 2, 4);
  ASSERT_EQ(r["candidates"].size(), 2u);
  for (const OrderedJson& c : r["candidates"]) {
    EXPECT_EQ(c["status"], "oom") << c.dump();
    EXPECT_NE(c["reason"].get<std::string>().find("out of device memory"), std::string::npos);
  }
  backend::FakeConfig no_bf16 = FourRanks();
  no_bf16.gemm_tflops[2] = 0;
  r = ConfirmOnFake(no_bf16, plans, 1, 4);
  EXPECT_EQ(r["candidates"][0]["status"], "waived") << r.dump();
}

TEST(NetworkConfirm, PlansWithoutTheirRequestOrOfAnotherKindAreRefused) {
  Json plans = PlansFor("resnet-50", 4, 128);
  plans.erase("request");
  auto in = NetworkConfirmInputFromPlans(plans, 1);
  ASSERT_FALSE(in.ok());
  EXPECT_NE(in.status().message().find("/request"), std::string::npos);
  for (const Json& other : {Json{{"schema", "paratune.plans/v1"}}, Json{{"schema", 5}}, Json::array()}) {
    in = NetworkConfirmInputFromPlans(other, 1);
    ASSERT_FALSE(in.ok());
    EXPECT_NE(in.status().message().find("/schema"), std::string::npos) << other.dump();
  }
}

}  // namespace
}  // namespace paratune::executor
