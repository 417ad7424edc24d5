// --format megatron-bridge: every plan the search ranks for Megatron-LM is
// written as a Megatron-Bridge script whose every name exists in Bridge's
// source at the pinned commit and whose values pass the checks Bridge's
// config code makes (bridge_rules.h), with the plan's layout.
//
// The requests are the Megatron ones of start_test.cc (dense, 16 to 16,384
// GPUs, A100 to H200, 2K to 128K), plus mixture-of-experts and Blackwell
// requests for the expert, dispatcher and low-precision fields.
//
// Setting PARATUNE_EMIT_DUMP to a directory also writes every script and its
// sidecar there, for the developer check with Bridge's own config code
// (scripts/fwcheck/check_bridge.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bridge_rules.h"
#include "common/json.h"
#include "frameworks/emit.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

using frameworks_test::BridgePlan;
using frameworks_test::BridgeWouldReject;

struct Request {
  const char* model;
  const char* cluster;
  int gpus;
  int seq;
  int64_t gbs;
  // An fp8 or fp4 recipe to train with (nullopt: the GPU's best precision).
  std::optional<topology::Recipe> low_precision{};
};

const std::vector<Request>& Requests() {
  static const std::vector<Request> r = {
      {"llama3.1-405b", "dgx-h100", 16384, 8192, 2048},
      {"llama3-70b", "dgx-h100", 256, 131072, 32},
      {"llama3-8b", "dgx-h100", 64, 131072, 32},
      {"llama3-8b", "dgx-h100", 32, 32768, 64},
      {"gpt3-175b", "dgx-a100-80gb", 1024, 2048, 1536},
      {"gpt3-13b", "dgx-a100-80gb", 64, 2048, 512},
      {"llama2-70b", "dgx-h100", 256, 4096, 512},
      {"mistral-7b", "dgx-h100", 16, 32768, 32},
      {"axonn-20b", "perlmutter", 256, 2048, 1024},
      {"llama3.1-70b", "dgx-h200", 1024, 8192, 1024},
      // Experts: a recipe (Qwen3 MoE), a provider (Mixtral), MLA through its
      // recipe (DeepSeek-V2-Lite); Blackwell for the fp8 recipes.
      {"qwen3-30b-a3b", "dgx-h100", 64, 4096, 512},
      {"mixtral-8x7b", "dgx-h100", 64, 4096, 256},
      {"deepseek-v2-lite", "dgx-h100", 32, 4096, 256},
      {"llama3-8b", "dgx-b200", 64, 8192, 512, topology::Recipe::kMxfp8},
      {"llama3-70b", "dgx-h100", 64, 8192, 256, topology::Recipe::kFp8Delayed},
      {"gpt3-13b", "dgx-h100", 32, 2048, 256, topology::Recipe::kFp8Current},
      {"qwen3-30b-a3b", "gb200-nvl72", 64, 4096, 512, topology::Recipe::kMxfp8},
  };
  return r;
}

Job MakeJob(const Request& q) {
  Job j{*ModelPreset(q.model), *topology::ClusterPreset(q.cluster), q.gpus, {}};
  j.training.seq_len = q.seq;
  j.training.global_batch = q.gbs;
  j.training.framework = Framework::kMegatron;
  j.training.precision = BestTrainingPrecision(j.cluster.gpu);
  if (q.low_precision) {
    j.training.precision = topology::Precision::kFp8;
    j.training.recipe = *q.low_precision;
    j.training.recipe_stated = true;
  }
  return j;
}

// `saves`: 0 no token budget (no checkpoints priced), 1 asynchronous saves,
// 2 synchronous ones.
Json PlansOf(const Job& job, int top, int saves) {
  CostModel cm(job.model, job.training, job.cluster, job.gpus);
  SearchOptions opt;
  opt.top_k = top;
  opt.family = Family::kMegatron;
  if (saves > 0) {
    opt.goodput.tokens = 1e12;
    opt.goodput.save = saves == 1 ? CheckpointSave::kAuto : CheckpointSave::kSync;
  }
  const SearchResult r = Search(cm, opt).RunAll();
  PlanSection section{job, r, 0.0, {}};
  return Json::parse(PlansToJson({section}, opt).dump());
}

BridgePlan PlanFacts(const Job& job, const ParallelConfig& c) {
  BridgePlan p;
  p.gpus = job.gpus;
  p.tp = c.gy;
  p.pp = c.pp;
  p.vpp = c.vpp;
  p.cp = c.cp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.mbs = c.mbs;
  p.gbs = job.training.global_batch;
  p.seq = job.training.seq_len;
  p.layers = job.model.layers;
  p.hidden = job.model.hidden;
  p.heads = job.model.heads;
  p.vocab = job.model.vocab;
  p.sp = c.sp;
  p.moe = job.model.is_moe();
  p.distributed_optimizer = c.distributed_optimizer || c.zero >= 1;
  p.recompute = RecomputeName(c.recompute);
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if (!(c.recompute_modules & (1 << i))) continue;
    p.recompute_modules += std::string(p.recompute_modules.empty() ? "[" : ", ") + "\"" +
                           RecomputeModuleName(static_cast<RecomputeModule>(1 << i)) + "\"";
  }
  p.recompute_modules += "]";
  return p;
}

TEST(MegatronBridge, EveryRankedMegatronPlanIsABridgeScript) {
  const char* dump = std::getenv("PARATUNE_EMIT_DUMP");
  if (dump) std::filesystem::create_directories(dump);
  std::map<std::string, int> seen;
  int request_index = 0;
  for (const Request& q : Requests()) {
    SCOPED_TRACE(std::string(q.model) + " on " + std::to_string(q.gpus) + " " + q.cluster);
    const Job job = MakeJob(q);
    const int saves = request_index++ % 3;
    const Json plans = PlansOf(job, 10, saves);
    const int n = static_cast<int>(plans["candidates"].size());
    ASSERT_GT(n, 0);
    for (int rank = 1; rank <= n; ++rank) {
      const ParallelConfig c = *ParseConfig(plans["candidates"][rank - 1]["config"], "", job.gpus);
      // What Megatron-LM starts, Bridge (Megatron-Core underneath) starts.
      ASSERT_TRUE(EmitConfig(plans, rank, EmitFormat::kMegatron).ok());
      auto text = EmitConfig(plans, rank, EmitFormat::kMegatronBridge);
      ASSERT_TRUE(text.ok()) << "rank " << rank << ": " << text.status().ToString();
      frameworks_test::BridgePlan facts = PlanFacts(job, c);
      if (saves > 0) {
        const Json& g = plans["candidates"][rank - 1]["goodput"];
        facts.save_interval = static_cast<int64_t>(g["interval_steps"].get<double>());
        facts.save_async = g["checkpoint"]["async"].get<bool>();
        seen[facts.save_async ? "async saves" : "sync saves"]++;
      }
      EXPECT_EQ(BridgeWouldReject(*text, facts), "")
          << "rank " << rank << " " << ConfigToString(c) << ":\n"
          << *text;
      auto sidecar = EmitSidecar(plans, rank, EmitFormat::kMegatronBridge);
      ASSERT_TRUE(sidecar.ok());
      EXPECT_EQ((*sidecar)["follows"]["repository"], "NVIDIA-NeMo/Megatron-Bridge");
      if (dump) {
        const std::string base = std::string(dump) + "/" + q.model + "-" + std::to_string(q.gpus) +
                                 "-" + q.cluster + "-" + std::to_string(q.seq) + ".rank" +
                                 std::to_string(rank);
        ASSERT_TRUE(WriteFileAtomic(base + ".megatron-bridge.py", *text).ok());
        ASSERT_TRUE(WriteFileAtomic(base + ".sidecar.json", sidecar->dump(2) + "\n").ok());
      }
      const auto s = frameworks_test::ParseBridgeScript(*text);
      ++seen[s.recipe_called ? "recipe" : "provider"];
      seen["pipeline layout"] += s.Get("model.pipeline_model_parallel_layout", "None") != "None";
      seen["virtual stages"] += c.vpp > 1;
      seen["context parallel"] += c.cp > 1;
      seen["expert parallel"] += c.ep > 1;
      seen["flex dispatcher"] += s.Get("model.moe_token_dispatcher_type") == "\"flex\"";
      seen["fp8 or fp4 recipe"] += s.mixed_precision != "\"bf16_mixed\"";
      seen["recompute"] += c.recompute != Recompute::kNone;
      seen["tp comm overlap"] +=
          s.comm.count("tp_comm_overlap") && s.comm.at("tp_comm_overlap") == "True";
    }
  }
  // Not vacuous: the fields the plans decide were written in every form.
  for (const char* k : {"recipe", "provider", "virtual stages", "context parallel",
                        "expert parallel", "fp8 or fp4 recipe", "recompute", "async saves",
                        "sync saves"}) {
    EXPECT_GT(seen[k], 0) << k;
  }
  std::cout << "[ bridge ]";
  for (const auto& [k, v] : seen) std::cout << " " << k << " " << v << ";";
  std::cout << "\n";
}

// The recipes the emitter starts from exist at the pinned commit, and a model
// with a recipe is checked against the shapes the plan was priced with.
TEST(MegatronBridge, StartsFromTheModelsRecipe) {
  const Job job = MakeJob({"llama3-8b", "dgx-h100", 32, 8192, 256});
  const Json plans = PlansOf(job, 1, 0);
  auto text = EmitConfig(plans, 1, EmitFormat::kMegatronBridge);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto s = frameworks_test::ParseBridgeScript(*text);
  // recipes/llama/h100/llama3.py:235 @067f987.
  EXPECT_TRUE(s.imports.count(
      "megatron.bridge.recipes.llama.h100.llama3.llama3_8b_pretrain_2gpu_h100_bf16_config"));
  EXPECT_TRUE(frameworks_test::BridgeNames().at("recipe").count(
      "megatron.bridge.recipes.llama.h100.llama3.llama3_8b_pretrain_2gpu_h100_bf16_config"));
  // Llama 3 8B: 32 layers, 4096 wide, 32 heads in 8 groups, FFN 14336.
  EXPECT_EQ(s.expects.at("num_layers"), "32");
  EXPECT_EQ(s.expects.at("hidden_size"), "4096");
  EXPECT_EQ(s.expects.at("num_query_groups"), "8");
  EXPECT_EQ(s.expects.at("ffn_hidden_size"), "14336");
  // Its tokenizer would otherwise size the vocabulary (recipes/common.py:111-115).
  EXPECT_EQ(s.Get("model.vocab_size"), "128256");
  EXPECT_NE(text->find("pretrain(paratune_config(), forward_step)"), std::string::npos);
}

// Multi-latent attention needs the model's own provider: without a Bridge
// recipe for the model the format refuses.
TEST(MegatronBridge, RefusesMlaWithoutARecipe) {
  Job job = MakeJob({"deepseek-v2-lite", "dgx-h100", 32, 4096, 256});
  const Json plans = PlansOf(job, 1, 0);
  ASSERT_TRUE(EmitConfig(plans, 1, EmitFormat::kMegatronBridge).ok());
  job.model.name = "my-mla-model";
  const Json renamed = PlansOf(job, 1, 0);
  auto text = EmitConfig(renamed, 1, EmitFormat::kMegatronBridge);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("multi-latent attention"), std::string::npos)
      << text.status().message();
  EXPECT_NE(text.status().message().find("--format megatron-bridge"), std::string::npos);
}

// A plan Megatron-LM refuses, Bridge refuses, in its own words.
TEST(MegatronBridge, RefusesWhatMegatronRefuses) {
  const Job job = MakeJob({"gpt3-13b", "dgx-a100-80gb", 64, 2048, 512});
  Json plans = PlansOf(job, 1, 0);
  // ZeRO++'s quantized gathers: DeepSpeed's, no Megatron-LM option.
  plans["candidates"][0]["config"]["zero"] = 3;
  plans["candidates"][0]["config"]["distributed_optimizer"] = false;
  plans["candidates"][0]["config"]["qwz"] = true;
  auto text = EmitConfig(plans, 1, EmitFormat::kMegatronBridge);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message().rfind("--format megatron-bridge cannot express this plan: ", 0),
            0u)
      << text.status().message();
}

TEST(MegatronBridge, FormatName) {
  EXPECT_EQ(*ParseEmitFormat("megatron-bridge"), EmitFormat::kMegatronBridge);
  EXPECT_STREQ(EmitFormatName(EmitFormat::kMegatronBridge), "megatron-bridge");
}

}  // namespace
}  // namespace paratune::planner
