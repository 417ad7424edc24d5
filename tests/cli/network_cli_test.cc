// `--network` in predict, plan, presets and validate (docs/networks.md):
// the documented keys, a user's own network file, and the refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/json.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

TEST(NetworkCli, PredictPrintsTheStepAndItsParts) {
  const Outcome t = Call(RunPredict, {"--network", "sd2-unet", "--cluster", "dgx-h100", "--gpus", "8",
                                      "--global-batch", "512", "--format", "table"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  for (const char* s : {"sd2-unet on 8 × h100-sxm", "ddp, data 8, spatial 1, tensor 1, micro-batch 64", "samples/s",
                        "MFU", "gradient sync", "fits", "slowest layers"}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  }
  const Outcome j = Call(RunPredict, {"--network", "unet3d-kits19", "--cluster", "dgx-h100", "--gpus", "16",
                                      "--global-batch", "8", "--spatial", "2", "--micro-batch", "1"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema"], "paratune.network_prediction/v1");
  EXPECT_EQ(doc["prediction"]["layout"]["spatial"], 2);
  EXPECT_EQ(doc["prediction"]["layout"]["data"], 8);
  for (const char* k : {"step_s", "samples_per_s", "forward_s", "backward_s", "halo_s", "tensor_comm_s",
                        "grad_sync_exposed_s",
                        "optimizer_s", "mfu", "memory_GiB", "fits", "slowest_layers"}) {
    EXPECT_TRUE(doc["prediction"].contains(k)) << k;
  }
  EXPECT_GT(doc["prediction"]["halo_s"].get<double>(), 0);
  // FLUX split four ways inside an NVL72 rack.
  const Outcome tp = Call(RunPredict, {"--network", "flux1-schnell", "--cluster", "gb200-nvl72", "--gpus", "16",
                                       "--global-batch", "64", "--tensor", "4", "--sharding", "zero1"});
  ASSERT_EQ(tp.code, kExitOk) << tp.err;
  const Json split = Json::parse(tp.out);
  EXPECT_EQ(split["prediction"]["layout"]["tensor"], 4);
  EXPECT_EQ(split["prediction"]["layout"]["data"], 4);
  EXPECT_GT(split["prediction"]["tensor_comm_s"].get<double>(), 0);
}

TEST(NetworkCli, ReadsAUsersNetworkFile) {
  const std::string path = ::testing::TempDir() + "/paratune_tiny_net.json";
  std::ofstream(path) << R"({"name": "tiny-cnn", "source": "a test's own network", "layers": [
      {"op": "conv", "in": [3, 64, 64], "out_channels": 64, "kernel": 3, "input_grad": false},
      {"op": "norm", "in": [64, 64, 64]},
      {"op": "conv", "in": [64, 64, 64], "out_channels": 64, "kernel": 3, "repeat": 8},
      {"op": "linear", "tokens": 1, "in_features": 262144, "out_features": 10}]})";
  const Outcome t = Call(RunPlan, {"--network", path, "--cluster", "dgx-a100-80gb", "--gpus", "8",
                                   "--global-batch", "256", "--format", "json", "--top", "3"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  const Json doc = Json::parse(t.out);
  EXPECT_EQ(doc["schema"], "paratune.network_plans/v1");
  EXPECT_EQ(doc["job"]["network"], "tiny-cnn");
  ASSERT_FALSE(doc["plans"].empty());
  EXPECT_LE(doc["plans"].size(), 3u);
  for (size_t i = 1; i < doc["plans"].size(); ++i) {
    EXPECT_LE(doc["plans"][i - 1]["step_s"].get<double>(), doc["plans"][i]["step_s"].get<double>());
  }
}

TEST(NetworkCli, RefusesWhatDoesNotApply) {
  const Args base = {"--network", "resnet-50", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "256"};
  auto with = [&](std::initializer_list<std::string> extra) {
    Args a = base;
    a.insert(a.end(), extra);
    return a;
  };
  EXPECT_EQ(Call(RunPredict, with({"--model", "gpt3-175b"})).code, 2);
  EXPECT_EQ(Call(RunPredict, with({"--sharding", "zero3"})).code, 2);
  EXPECT_EQ(Call(RunPredict, with({"--micro-batch", "3"})).code, 2);  // 8 × 3 does not divide 256
  EXPECT_EQ(Call(RunPredict, with({"--grad-bytes", "3"})).code, 2);
  EXPECT_EQ(Call(RunPredict, with({"--precision", "fp8"})).code, 2);
  EXPECT_EQ(Call(RunPlan, with({"--space", "megatron"})).code, 2);
  EXPECT_EQ(Call(RunPredict, {"--network", "resnet50", "--cluster", "dgx-h100", "--gpus", "8",
                              "--global-batch", "8"}).code, 2);
  // The network flags belong to --network.
  EXPECT_EQ(Call(RunPredict, {"--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "8", "--spatial", "2"})
                .code, 2);
  const Outcome missing = Call(RunPredict, {"--network", "resnet-50", "--cluster", "dgx-h100", "--gpus", "8"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--global-batch"), std::string::npos) << missing.err;
}

TEST(NetworkCli, CapacityNamesTheLargestInput) {
  const Outcome t = Call(RunCapacity, {"--network", "unet3d-kits19", "--cluster", "dgx-h100", "--gpus", "8"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("the largest patch that fits"), std::string::npos) << t.out;
  const Outcome j = Call(RunCapacity, {"--network", "cosmoflow", "--cluster", "dgx-a100-80gb", "--gpus", "4",
                                       "--format", "json", "--max-size", "512"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema"], "paratune.network_capacity/v1");
  EXPECT_EQ(doc["size"]["key"], "volume");
  EXPECT_EQ(doc["size"]["step"], 32);
  EXPECT_TRUE(doc["layout_prediction"]["fits"].get<bool>());
  // Nothing fits: exit 3, as capacity of a model.
  EXPECT_EQ(Call(RunCapacity, {"--network", "flux1-schnell", "--cluster", "dgx-h100", "--gpus", "1"}).code, 3);
  EXPECT_EQ(Call(RunCapacity, {"--network", "resnet-50", "--cluster", "dgx-h100", "--gpus", "1", "--seq", "8"}).code,
            2);
}

// A network's plans are refused by emit and replan with what to do instead,
// never read as a transformer's.
TEST(NetworkCli, EmitAndReplanRefuseNetworkPlans) {
  const Outcome plan = Call(RunPlan, {"--network", "resnet-50", "--cluster", "dgx-h100", "--gpus", "8",
                                      "--global-batch", "256", "--format", "json", "--top", "1"});
  ASSERT_EQ(plan.code, kExitOk) << plan.err;
  const std::string path = ::testing::TempDir() + "/paratune_network_plans.json";
  std::ofstream(path) << plan.out;
  const Outcome emit = Call(RunEmit, {"--plans", path});
  EXPECT_EQ(emit.code, 2);
  EXPECT_NE(emit.err.find("not emitted"), std::string::npos) << emit.err;
  const Outcome replan = Call(RunReplan, {"--from", path, "--lost-nodes", "1"});
  EXPECT_EQ(replan.code, 2);
  EXPECT_NE(replan.err.find("not emitted"), std::string::npos) << replan.err;
}

TEST(NetworkCli, PresetsListAndShowNetworks) {
  const Outcome t = Call(RunPresets, {"networks"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  for (const char* n : {"resnet-50", "sd2-unet", "flux1-schnell", "unet3d-kits19", "cosmoflow"}) {
    EXPECT_NE(t.out.find(n), std::string::npos) << n;
  }
  const Outcome s = Call(RunPresets, {"show", "resnet-50"});
  ASSERT_EQ(s.code, kExitOk) << s.err;
  EXPECT_TRUE(Json::parse(s.out)["layers"].is_array());
}

std::string BeyondFile() { return std::string(PARATUNE_SHARED_DIR) + "/calibration/beyond_runs.json"; }

TEST(NetworkCli, ValidateBeyondReportsEveryGroup) {
  if (!ReadFileToString(BeyondFile()).ok()) GTEST_SKIP() << "no beyond_runs.json";
  const Outcome t = Call(RunValidate, {"--beyond", BeyondFile()});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  for (const char* s : {"By benchmark", "By source", "By GPU generation", "By GPU-count decade", "all rows",
                        "Left out", "no network preset for benchmark 'deepcam'"}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s;
  }
  // The same file given as the only --runs.
  const Outcome r = Call(RunValidate, {"--runs", BeyondFile(), "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["schema"], "paratune.beyond_validation/v1");
  for (const char* k : {"runs", "by_benchmark", "by_source", "by_generation", "by_gpu_decade", "by_framework", "all",
                        "fitted_constants", "left_out"}) {
    EXPECT_TRUE(doc.contains(k)) << k;
  }
  EXPECT_TRUE(doc["fitted_constants"].empty());
  // With transformer runs it is refused: the two are priced by different models.
  const std::string pub = std::string(PARATUNE_SHARED_DIR) + "/calibration/public_runs.json";
  EXPECT_EQ(Call(RunValidate, {"--runs", pub, "--runs", BeyondFile()}).code, 2);
}

}  // namespace
}  // namespace paratune::cli
