// `--network` in predict, plan, presets and validate (docs/networks.md):
// the documented keys, a user's own network file, and the refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <tuple>
#include <vector>

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
  EXPECT_NE(t.out.find("the largest patch value that fits"), std::string::npos) << t.out;
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

std::string WritePlans(const std::vector<std::string>& plan_args, const std::string& name) {
  std::vector<std::string> args = plan_args;
  for (const char* a : {"--format", "json"}) args.push_back(a);
  const Outcome plan = Call(RunPlan, args);
  EXPECT_EQ(plan.code, kExitOk) << plan.err;
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << plan.out;
  return path;
}

// The value of `NAME = value` in an emitted script.
std::string Assigned(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " = ");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 4;
  return text.substr(from, text.find_first_of(" \n", from) - from);
}

// emit writes a network's plan as PyTorch runs it (the layout, batch and the
// planned parameter count the script checks), FLUX's fsdp plans for
// torchtitan's own FLUX, and refuses what neither can run, with the reason.
TEST(NetworkCli, EmitWritesWhatPyTorchAndTorchtitanRunAndRefusesTheRest) {
  const std::string sd = WritePlans({"--network", "sd2-unet", "--cluster", "dgx-h100", "--gpus", "64",
                                     "--global-batch", "512"}, "paratune_sd_plans.json");
  const Json plans = Json::parse(std::ifstream(sd));
  const Json& best = plans["plans"][0]["layout"];
  const Outcome py = Call(RunEmit, {"--plans", sd});
  ASSERT_EQ(py.code, kExitOk) << py.err;
  EXPECT_EQ(Assigned(py.out, "SHARDING"), "\"" + best["sharding"].get<std::string>() + "\"");
  EXPECT_EQ(Assigned(py.out, "MICRO_BATCH"), std::to_string(best["micro_batch"].get<int64_t>()));
  EXPECT_EQ(Assigned(py.out, "ACCUMULATION"), std::to_string(best["accumulation"].get<int64_t>()));
  EXPECT_EQ(Assigned(py.out, "GLOBAL_BATCH"), "512");
  EXPECT_EQ(Assigned(py.out, "GPUS"), "64");
  // The script refuses a model other than the one planned: 865.9M parameters
  // (the SD 2 U-Net's published 865M).
  const std::string params = Assigned(py.out, "PLANNED_PARAMETERS");
  ASSERT_FALSE(params.empty());
  EXPECT_NEAR(std::stod(params), 865e6, 2e6);
  EXPECT_NE(py.out.find("fully_shard"), std::string::npos);
  EXPECT_NE(py.out.find("bucket_cap_mb=25"), std::string::npos);
  for (const char* f : {"torchtitan", "megatron", "deepspeed", "axonn"}) {
    const Outcome r = Call(RunEmit, {"--plans", sd, "--format", f});
    EXPECT_EQ(r.code, 2) << f;
    EXPECT_TRUE(r.out.empty()) << f;
    EXPECT_NE(r.err.find("--format " + std::string(f)), std::string::npos) << r.err;
  }

  // The top 40: FSDP layouts rank from 30th, behind the ZeRO-1 ones.
  const std::string flux = WritePlans({"--network", "flux1-schnell", "--cluster", "dgx-h100", "--gpus", "64",
                                       "--global-batch", "256", "--top", "40"}, "paratune_flux_plans.json");
  const Json fp = Json::parse(std::ifstream(flux));
  int fsdp = 0, tensor = 0;
  for (size_t i = 0; i < fp["plans"].size(); ++i) {
    const Json& l = fp["plans"][i]["layout"];
    const std::string rank = std::to_string(i + 1);
    const Outcome t = Call(RunEmit, {"--plans", flux, "--rank", rank, "--format", "torchtitan"});
    if (l["sharding"] == "fsdp" && l["tensor"] == 1 && l["sequence"] == 1) {
      ++fsdp;
      ASSERT_EQ(t.code, kExitOk) << t.err;
      EXPECT_EQ(Assigned(t.out, "DATA_PARALLEL_SHARD"), std::to_string(l["data"].get<int>()));
      EXPECT_EQ(Assigned(t.out, "MICRO_BATCH"), std::to_string(l["micro_batch"].get<int64_t>()));
      // torchtitan's flux_schnell checkpoints every block (FullAC); a plan
      // that saves every activation turns it off, one that recomputes keeps it.
      const bool none = t.out.find("config.activation_checkpoint = None") != std::string::npos;
      EXPECT_EQ(none, !l["recompute"].get<bool>()) << l.dump();
    } else {
      EXPECT_EQ(t.code, 2) << l.dump();
    }
    if (l["tensor"].get<int>() > 1 || l["sequence"].get<int>() > 1) {
      ++tensor;
      const Outcome p = Call(RunEmit, {"--plans", flux, "--rank", rank, "--format", "pytorch"});
      EXPECT_EQ(p.code, 2);
      const char* split = l["sequence"].get<int>() > 1 ? "sequence parallelism" : "tensor parallelism";
      EXPECT_NE(p.err.find(split), std::string::npos) << p.err;
    }
  }
  EXPECT_GT(fsdp, 0);
  EXPECT_GT(tensor, 0);

  // Wan2.1-14B's plans split each clip's tokens over a sequence group, which
  // neither PyTorch's own modules nor torchtitan's FLUX express: refused with
  // the reason, and --framework pytorch ranks layouts without it.
  const std::string wan = WritePlans({"--network", "wan2.1-t2v-14b", "--cluster", "dgx-h100", "--gpus", "256",
                                      "--global-batch", "256", "--top", "20"}, "paratune_wan_plans.json");
  const Json wp = Json::parse(std::ifstream(wan));
  int sequence = 0;
  for (size_t i = 0; i < wp["plans"].size(); ++i) {
    if (wp["plans"][i]["layout"]["sequence"].get<int>() <= 1) continue;
    ++sequence;
    const Outcome p = Call(RunEmit, {"--plans", wan, "--rank", std::to_string(i + 1), "--format", "pytorch"});
    EXPECT_EQ(p.code, 2);
    EXPECT_NE(p.err.find("sequence parallelism"), std::string::npos) << p.err;
  }
  EXPECT_GT(sequence, 0);
}

// With --framework, every ranked plan is one that framework runs: each of
// them emits (the default format is the framework's).
TEST(NetworkCli, EveryPlanRankedForAFrameworkEmits) {
  for (const auto& [network, framework, gpus, batch] :
       {std::tuple<const char*, const char*, const char*, const char*>{"unet3d-kits19", "pytorch", "64", "64"},
        {"flux1-schnell", "torchtitan", "64", "256"},
        {"flux1-schnell", "pytorch", "64", "256"}, {"wan2.1-t2v-14b", "pytorch", "256", "256"}}) {
    SCOPED_TRACE(std::string(network) + " " + framework);
    const std::string path = WritePlans({"--network", network, "--cluster", "dgx-h100", "--gpus", gpus,
                                         "--global-batch", batch, "--framework", framework, "--top", "10"},
                                        std::string("paratune_fw_") + framework + ".json");
    const Json plans = Json::parse(std::ifstream(path));
    EXPECT_EQ(plans["job"]["framework"], framework);
    ASSERT_FALSE(plans["plans"].empty());
    for (size_t i = 0; i < plans["plans"].size(); ++i) {
      const Outcome e = Call(RunEmit, {"--plans", path, "--rank", std::to_string(i + 1)});
      EXPECT_EQ(e.code, kExitOk) << plans["plans"][i]["layout"].dump() << "\n" << e.err;
      const bool titan = std::string(framework) == "torchtitan";
      EXPECT_NE(e.out.find(titan ? "flux_schnell()" : "torchrun"), std::string::npos);
    }
  }
  // torchtitan trains none of the other networks: refused by name.
  const Outcome bad = Call(RunPlan, {"--network", "sd2-unet", "--cluster", "dgx-h100", "--gpus", "8",
                                     "--global-batch", "64", "--framework", "torchtitan"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("/framework"), std::string::npos) << bad.err;
}

// replan keeps the global batch and searches every whole-node count down to
// half: SD's 512 samples on the 56 GPUs left of 64 run fastest on 32 GPUs of
// pure data parallelism, not spread over all 56 with spatial splits.
TEST(NetworkCli, ReplanFindsTheFastestCountAndWritesItsPlans) {
  const std::string sd = WritePlans({"--network", "sd2-unet", "--cluster", "dgx-h100", "--gpus", "64",
                                     "--global-batch", "512"}, "paratune_sd_replan.json");
  const Outcome j = Call(RunReplan, {"--from", sd, "--lost-nodes", "1", "--format", "json"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema"], "paratune.network_replan/v1");
  EXPECT_EQ(doc["available_gpus"], 56);
  EXPECT_EQ(doc["counts"].size(), 4u);  // 56, 48, 40, 32
  const Json& next = doc["plans"];
  EXPECT_EQ(next["schema"], "paratune.network_plans/v1");
  EXPECT_EQ(next["job"]["global_batch"], 512);
  EXPECT_LE(next["job"]["gpus"].get<int>(), 56);
  // Of 56, 48, 40 and 32 GPUs only 32 divide 512 samples into whole
  // replicas; the others need spatial splits of a 64x64 latent. An expert
  // runs the 2D U-Net data parallel: the pick is 32 GPUs, unsplit.
  EXPECT_EQ(next["job"]["gpus"], 32);
  EXPECT_EQ(next["plans"][0]["layout"]["spatial"], 1);
  EXPECT_EQ(next["plans"][0]["layout"]["tensor"], 1);
  for (const Json& c : doc["counts"]) {
    if (!c["plan"].is_null()) {
      EXPECT_LE(next["plans"][0]["step_s"].get<double>(), c["plan"]["step_s"].get<double>() + 1e-12);
    }
  }
  // Its plans chain into emit as any plans do.
  const std::string path = ::testing::TempDir() + "/paratune_sd_replanned.json";
  std::ofstream(path) << next.dump();
  EXPECT_EQ(Call(RunEmit, {"--plans", path}).code, kExitOk);
  // The transformer search's flags have no meaning here: refused by name.
  const Outcome bad = Call(RunReplan, {"--from", sd, "--lost-nodes", "1", "--space", "megatron"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--space"), std::string::npos) << bad.err;
  EXPECT_EQ(Call(RunReplan, {"--from", sd, "--lost-nodes", "8"}).code, 2);  // no GPU left
}

// confirm runs a network's plans on a backend and writes the report.
TEST(NetworkCli, ConfirmWritesANetworkRunReport) {
  const std::string rn = WritePlans({"--network", "resnet-50", "--cluster", "dgx-h100", "--gpus", "8",
                                     "--global-batch", "256", "--top", "2"}, "paratune_rn_plans.json");
  const std::string out = ::testing::TempDir() + "/paratune_rn_run.json";
  const Outcome c = Call(RunConfirm, {"--plans", rn, "--backend", "fake", "--fake-gpu", "h100-sxm", "--top", "2",
                                      "--out", out, "--layers", "8"});
  ASSERT_EQ(c.code, kExitOk) << c.err;
  const Json report = Json::parse(std::ifstream(out));
  EXPECT_EQ(report["schema"], "paratune.network_run_report/v1");
  ASSERT_EQ(report["candidates"].size(), 2u);
  EXPECT_EQ(report["candidates"][0]["compute"]["shapes_measured"], 8);
  EXPECT_NE(c.out.find("coverage"), std::string::npos) << c.out;
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
                        "Left out", "no network preset for benchmark 'oc20'"}) {
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
