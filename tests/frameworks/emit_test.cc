// Emitters (frameworks/emit.h). Three kinds of test:
//  - golden: whole outputs for several plans, written by hand from each
//    framework's documented format (tests/frameworks/data/emit/*.golden);
//  - rules: the start-up checks of each framework, re-implemented here from
//    the framework's source (file and lines cited at each check), applied to
//    every config the emitters produce over a sweep of several thousand
//    configurations: nothing a framework would reject is ever emitted;
//  - refusals: plans a framework cannot express are refused with the reason.
// The frameworks themselves cannot be installed on the build machines, so the
// mirrors below stand in for them; each cites the snapshot it copies
// (ecosystem.md: Megatron-LM d98e8a6, DeepSpeed edaa722 = 0.19.6, AxoNN
// 660a224, torchtitan 238fa99 = the last TOML-config commit).
#include "frameworks/emit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "common/json.h"
#include "framework_rules.h"
#include "planner/config.h"
#include "planner/plans.h"
#include "test_world.h"
#include "topology/gpu.h"

namespace paratune::planner {
namespace {

const std::string kData = std::string(PARATUNE_SOURCE_DIR) + "/tests/frameworks/data/emit/";

Json Load(const std::string& name) {
  auto text = ReadFileToString(kData + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return Json::parse(*text);
}

std::string Golden(const std::string& name) {
  auto text = ReadFileToString(kData + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

// Compares with the golden file; PARATUNE_WRITE_GOLDENS=1 rewrites it instead
// (a developer step: the new golden is then read and checked by hand).
void ExpectGolden(const std::string& actual, const std::string& name) {
  if (std::getenv("PARATUNE_WRITE_GOLDENS")) {
    ASSERT_TRUE(WriteFileAtomic(kData + name, actual).ok());
    return;
  }
  EXPECT_EQ(actual, Golden(name)) << name;
}

// `plans` with candidate 1's config replaced by `config` (a full config object).
Json WithConfig(Json plans, const Json& config) {
  plans["candidates"][0]["config"] = config;
  return plans;
}

// `plans` with candidate 1's config changed in the keys of `patch` (null erases a key).
Json Patched(Json plans, const Json& patch) {
  for (auto& [k, v] : patch.items()) {
    if (v.is_null()) plans["candidates"][0]["config"].erase(k);
    else plans["candidates"][0]["config"][k] = v;
  }
  return plans;
}

std::string Emit(const Json& plans, EmitFormat f, int rank = 1) {
  auto r = EmitConfig(plans, rank, f);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

// Checks that EmitConfig refuses candidate 1 of `plans` in format `f` as an
// invalid argument whose message contains `why`.
void ExpectRefused(const Json& plans, EmitFormat f, const std::string& why) {
  auto r = EmitConfig(plans, 1, f);
  EXPECT_FALSE(r.ok()) << "emitted:\n" << (r.ok() ? *r : "");
  if (r.ok()) return;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
}

// ------------------------------------------------------------------ golden

TEST(EmitGolden, MegatronGpt3_175b) {
  const Json plans = Load("gpt3-175b-megatron.plans.json");
  ExpectGolden(Emit(plans, EmitFormat::kMegatron), "gpt3-175b-megatron.rank1.megatron.golden");
  ExpectGolden(Emit(plans, EmitFormat::kEnv), "gpt3-175b-megatron.rank1.env.golden");
}

TEST(EmitGolden, MegatronLlama3_70bSecondRank) {
  const Json plans = Load("llama3-70b-megatron.plans.json");
  ExpectGolden(Emit(plans, EmitFormat::kMegatron, 2), "llama3-70b-megatron.rank2.megatron.golden");
}

TEST(EmitGolden, DeepSpeedLlama3_8b) {
  const Json plans = Load("llama3-8b-deepspeed.plans.json");
  ExpectGolden(Emit(plans, EmitFormat::kDeepSpeed), "llama3-8b-deepspeed.rank1.ds_config.golden");
  ExpectGolden(Emit(plans, EmitFormat::kEnv), "llama3-8b-deepspeed.rank1.env.golden");
}

TEST(EmitGolden, DeepSpeedZeroPlusPlusAndUlysses) {
  // ZeRO-3 with all of ZeRO++ on 64 GPUs of 8-GPU nodes: hpZ inside a node.
  Json zpp = Patched(Load("llama3-8b-deepspeed.plans.json"),
                     {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 3}, {"qwz", true},
                      {"hpz", true}, {"qgz", true}, {"mbs", 1}, {"recompute", "full"},
                      {"overlap_param_gather", true}, {"overlap_grad_reduce", true}});
  ExpectGolden(Emit(zpp, EmitFormat::kDeepSpeed), "llama3-8b.zeropp.ds_config.golden");
  // Ulysses over 8 ranks, ZeRO-2, no recompute.
  Json uly = Patched(Load("llama3-8b-deepspeed.plans.json"),
                     {{"tp", 1}, {"pp", 1}, {"cp", 8}, {"cp_kind", "ulysses"}, {"dp", 8}, {"zero", 2},
                      {"qwz", false}, {"hpz", false}, {"qgz", false}, {"mbs", 2}, {"recompute", "none"},
                      {"overlap_param_gather", false}, {"overlap_grad_reduce", true}});
  ExpectGolden(Emit(uly, EmitFormat::kDeepSpeed), "llama3-8b.ulysses.ds_config.golden");
}

TEST(EmitGolden, AxonnGpt320bOnAlps) {
  // Rank 3 uses all three tensor axes: gx = 4, gy = 2, gz = 64.
  const Json plans = Load("axonn-320b-axonn.plans.json");
  ExpectGolden(Emit(plans, EmitFormat::kAxonn, 3), "axonn-320b-axonn.rank3.axonn.golden");
  ExpectGolden(Emit(plans, EmitFormat::kEnv, 3), "axonn-320b-axonn.rank3.env.golden");
}

TEST(EmitGolden, TorchtitanLlama3_70b) {
  const Json plans = Load("llama3-70b-fsdp.plans.json");
  ExpectGolden(Emit(plans, EmitFormat::kTorchtitan), "llama3-70b-fsdp.rank1.torchtitan.golden");
  // The same model pipelined and interleaved, with ring CP and HSDP.
  Json pp = Patched(plans, {{"tp", 8}, {"sp", true}, {"pp", 4}, {"vpp", 2}, {"cp", 2},
                            {"cp_kind", "ring"}, {"gz", 2}, {"dp", 1}, {"mbs", 1},
                            {"recompute", "selective"}});
  pp["candidates"][0]["framework"] = "torchtitan";  // priced with torchtitan's split
  ExpectGolden(Emit(pp, EmitFormat::kTorchtitan), "llama3-70b.pp-cp.torchtitan.golden");
}

TEST(EmitGolden, JsonIsTheCanonicalConfig) {
  const Json plans = Load("gpt3-175b-megatron.plans.json");
  const Json out = Json::parse(Emit(plans, EmitFormat::kJson));
  auto c = ParseConfig(out, "", plans["gpus"].get<int64_t>());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto want = ParseConfig(plans["candidates"][0]["config"], "", 0);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(*c, *want);
}

// ------------------------------------------------------------------ mirrors
//
// Each returns "" when the framework would start, else the rule it breaks.

using frameworks_test::Built;
using frameworks_test::World;

World WorldOf(const Json& plans) {
  auto job = JobFromPlans(plans);
  EXPECT_TRUE(job.ok());
  return frameworks_test::WorldOf(*job);
}

// ------------------------------------------------------------------ rules

// Every configuration of a broad sweep is emitted in every framework format;
// whatever is emitted must pass that framework's mirrored start-up checks.
// The sanitizer tier checks memory safety on every fifth grid point (5 is
// prime to every loop's length, so the sample still visits each value of
// each axis); the main tier checks the whole grid.
#ifdef PARATUNE_SANITIZED
constexpr int kGridStride = 5;
#else
constexpr int kGridStride = 1;
#endif

void SweepAndCheck(const std::string& fixture, int* emitted_total, int* refused_total) {
  const Json base = Load(fixture);
  const World w = WorldOf(base);
  std::map<EmitFormat, int> emitted, refused;
  int configs = 0;
  int64_t grid_point = 0;
  for (int gx : {1, 2})
    for (int gy : {1, 2, 4, 8})
      for (int gz : {1, 2, 4})
        for (int pp : {1, 2, 4})
          for (int vpp : {1, 2})
            for (int cp : {1, 2})
              for (const char* kind : {"ring", "ulysses"})
                for (int zero : {0, 1, 3})
                  for (bool sp : {false, true})
                    for (int mbs : {1, 2})
                      for (const char* rc : {"none", "selective", "full"}) {
                        if (cp == 1 && std::string(kind) == "ulysses") continue;
                        const int64_t other = int64_t{gx} * gy * gz * pp * cp;
                        if (w.gpus % other != 0) continue;
                        // The planner's own batch rule (a plan never breaks it).
                        if (w.gbs % (int64_t{mbs} * gz * (w.gpus / other)) != 0) continue;
                        if (grid_point++ % kGridStride != 0) continue;
                        Json c = {{"gx", gx},   {"gy", gy},     {"gz", gz},   {"pp", pp},
                                  {"vpp", vpp}, {"cp", cp},     {"cp_kind", kind},
                                  {"sp", sp},   {"zero", zero}, {"mbs", mbs}, {"recompute", rc},
                                  {"dp", w.gpus / other},
                                  {"hpz", zero == 3}, {"qwz", zero == 3},
                                  {"overlap_grad_reduce", true},
                                  {"overlap_param_gather", zero == 1},
                                  {"distributed_optimizer", false},
                                  {"tp_comm_overlap", sp && gy > 1},
                                  {"overlap_p2p", vpp > 1},
                                  {"oar", true}, {"ors", gz > 1}, {"oag", gz > 1}};
                        const Json plans = WithConfig(base, c);
                        auto parsed = ParseConfig(c, "", 0);
                        ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
                        ++configs;
                        for (EmitFormat f : {EmitFormat::kMegatron, EmitFormat::kMegatronDeepSpeed,
                                             EmitFormat::kDeepSpeed, EmitFormat::kAxonn,
                                             EmitFormat::kTorchtitan}) {
                          auto r = EmitConfig(plans, 1, f);
                          if (!r.ok()) {
                            ++refused[f];
                            EXPECT_NE(r.status().message().find("cannot express"), std::string::npos)
                                << r.status().message();
                            continue;
                          }
                          ++emitted[f];
                          std::string why;
                          Built built;
                          switch (f) {
                            case EmitFormat::kMegatron:
                              why = frameworks_test::MegatronWouldReject(*r, w, &built);
                              break;
                            case EmitFormat::kMegatronDeepSpeed:
                              why = frameworks_test::MegatronDeepSpeedWouldReject(*r, w);
                              break;
                            case EmitFormat::kDeepSpeed:
                              // Read by DeepSpeed under a Hugging Face model (no Megatron
                              // TP or PP: a plan with them must be refused).
                              why = frameworks_test::DeepSpeedWouldReject(*r, w);
                              break;
                            case EmitFormat::kAxonn: why = frameworks_test::AxonnWouldReject(*r, w); break;
                            case EmitFormat::kTorchtitan:
                              why = frameworks_test::TorchtitanWouldReject(*r, w, &built);
                              break;
                            default: break;
                          }
                          ASSERT_EQ(why, "") << EmitFormatName(f) << " would reject "
                                             << ConfigToString(*parsed) << ":\n" << *r;
                        }
                      }
  EXPECT_GT(configs, 1000 / kGridStride) << fixture;
  for (EmitFormat f : {EmitFormat::kMegatron, EmitFormat::kMegatronDeepSpeed, EmitFormat::kDeepSpeed,
                       EmitFormat::kAxonn, EmitFormat::kTorchtitan}) {
    // Not vacuous: each format both emits and refuses parts of the sweep.
    EXPECT_GT(emitted[f], 10 / kGridStride) << EmitFormatName(f) << " on " << fixture;
    EXPECT_GT(refused[f], 20 / kGridStride) << EmitFormatName(f) << " on " << fixture;
    *emitted_total += emitted[f];
    *refused_total += refused[f];
  }
}

// The allocator setting the memory verdict assumes reaches every launch, under
// the variable each stack reads: Megatron's own checks read
// PYTORCH_CUDA_ALLOC_CONF (arguments.py:1961-1968), torchtitan's run_train.sh
// sets PYTORCH_ALLOC_CONF. A job priced with fixed-size segments sets neither.
TEST(EmitRules, AllocatorSettingFollowsTheJob) {
  struct Case {
    const char* plans;
    EmitFormat format;
    int rank;
    const char* line;
  };
  const Case cases[] = {
      {"gpt3-175b-megatron.plans.json", EmitFormat::kMegatron, 1,
       "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"},
      {"llama3-70b-megatron.plans.json", EmitFormat::kMegatronBridge, 1,
       "cfg.env_vars[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\""},
      {"axonn-320b-axonn.plans.json", EmitFormat::kAxonn, 3,
       "keep: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
      {"llama3-70b-fsdp.plans.json", EmitFormat::kTorchtitan, 1,
       "keep: PYTORCH_ALLOC_CONF=expandable_segments:True"},
  };
  for (const Case& c : cases) {
    Json plans = Load(c.plans);
    EXPECT_NE(Emit(plans, c.format, c.rank).find(c.line), std::string::npos)
        << c.plans << " " << EmitFormatName(c.format);
    plans["job"]["training"]["expandable_segments"] = false;
    const std::string fixed = Emit(plans, c.format, c.rank);
    EXPECT_EQ(fixed.find("expandable_segments"), std::string::npos)
        << c.plans << " " << EmitFormatName(c.format) << ":\n"
        << fixed;
  }
}

TEST(EmitRules, NothingAFrameworkRejectsIsEmitted) {
  int emitted = 0, refused = 0;
  // GPT-3 175B: 96 heads, 96 layers, learned positions, biases.
  SweepAndCheck("gpt3-175b-megatron.plans.json", &emitted, &refused);
  // Llama 3 8B: GQA (8 KV heads), 32 layers, SwiGLU, seq 8192, 64 GPUs.
  SweepAndCheck("llama3-8b-deepspeed.plans.json", &emitted, &refused);
  // GPT-3 13B: 40 heads and 40 layers, which TP 8 and PP 8 do not divide.
  SweepAndCheck("gpt3-13b-megatron.plans.json", &emitted, &refused);
  std::cout << "[ emit sweep ] " << emitted << " configs emitted, " << refused << " refused\n";
}

// Plans the mirrors would reject are refused, each with its rule.
TEST(EmitRules, MegatronRefusals) {
  const Json p = Load("gpt3-175b-megatron.plans.json");
  // GPT-3 175B has 96 heads: TP 64 does not divide them (transformer_config.py:1446).
  ExpectRefused(Patched(p, {{"tp", 64}, {"pp", 1}, {"cp", 1}, {"dp", 16}, {"vpp", 1}}),
                EmitFormat::kMegatron, "not divisible by TP 64");
  // 96 layers over PP 64 (arguments.py:990-996).
  ExpectRefused(Patched(p, {{"tp", 1}, {"pp", 64}, {"cp", 1}, {"dp", 16}, {"vpp", 1}}),
                EmitFormat::kMegatron, "(96) are not divisible by pp 64");
  // Interleaving with PP 2 and no p2p overlap (arguments.py:1000-1010).
  ExpectRefused(
      Patched(p, {{"tp", 8}, {"pp", 2}, {"vpp", 2}, {"cp", 1}, {"dp", 64}, {"overlap_p2p", false}}),
      EmitFormat::kMegatron, "PP > 2 without p2p overlap");
  // GBS 1536 with MBS 8 and DP 16 is 12 micro-batches: not whole groups of PP 8 for the
  // interleaved schedule (model_parallel_config.py:567-568, schedules.py:1160-1180).
  ExpectRefused(Patched(p, {{"mbs", 8}}), EmitFormat::kMegatron, "multiple of PP (8)");
  // --overlap-param-gather without the distributed optimizer (arguments.py:1024-1028).
  ExpectRefused(Patched(p, {{"overlap_param_gather", true}, {"distributed_optimizer", false}}),
                EmitFormat::kMegatron, "--overlap-param-gather needs");
  // --tp-comm-overlap without sequence parallelism (arguments.py:1441-1442).
  ExpectRefused(Patched(p, {{"tp_comm_overlap", true}, {"sp", false}}), EmitFormat::kMegatron,
                "--tp-comm-overlap needs --sequence-parallel");
  // What Megatron-LM cannot express at all.
  ExpectRefused(Patched(p, {{"zero", 3}, {"distributed_optimizer", false}, {"hpz", true}}),
                EmitFormat::kMegatron, "with ZeRO++");
  ExpectRefused(Patched(p, {{"tp", nullptr}, {"gx", 2}, {"gy", 2}}), EmitFormat::kMegatron,
                "3D tensor grid");
  ExpectRefused(Patched(p, {{"cp_kind", "fpdt"}}), EmitFormat::kMegatron, "FPDT");
}

// Megatron-Core's 2026 features: Megatron-FSDP (ZeRO-3), CPU activation
// offloading, full-iteration CUDA graphs and the low-precision recipes are
// written with the flags Megatron-LM @ d98e8a6 defines, and pass its rules.
TEST(EmitRules, MegatronFleetFeatures) {
  const Json base = Load("gpt3-175b-megatron.plans.json");
  const World w = WorldOf(base);
  auto emitted = [&](const Json& plans) {
    const std::string text = Emit(plans, EmitFormat::kMegatron);
    Built built;
    EXPECT_EQ(frameworks_test::MegatronWouldReject(text, w, &built), "") << text;
    return text;
  };
  // ZeRO-3 is Megatron-FSDP sharding optimizer states, gradients and parameters
  // (arguments.py:3190), with its checkpoint format and without the
  // CUDA_DEVICE_MAX_CONNECTIONS=1 it asserts against (arguments.py:1165-1170).
  const std::string fsdp = emitted(Patched(base, {{"zero", 3},
                                                  {"distributed_optimizer", false},
                                                  {"overlap_param_gather", true},
                                                  {"overlap_grad_reduce", true}}));
  EXPECT_NE(fsdp.find("--use-megatron-fsdp"), std::string::npos);
  EXPECT_NE(fsdp.find("--data-parallel-sharding-strategy optim_grads_params"), std::string::npos);
  EXPECT_NE(fsdp.find("--ckpt-format fsdp_dtensor"), std::string::npos);
  EXPECT_EQ(fsdp.find("CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos);
  // The double buffer bounds its communication memory to the two units the
  // memory ledger prices (param_and_grad_buffer.py:2526, 3956-3978).
  EXPECT_NE(fsdp.find("--fsdp-double-buffer\n"), std::string::npos);
  // ZeRO-2 is Megatron-FSDP's optim_grads: gradients and optimizer states
  // sharded, the model weights whole (param_and_grad_buffer.py:2338-2341).
  const std::string zero2 = emitted(Patched(
      base, {{"zero", 2}, {"distributed_optimizer", false}, {"overlap_grad_reduce", true}}));
  EXPECT_NE(zero2.find("--data-parallel-sharding-strategy optim_grads\n"), std::string::npos)
      << zero2;
  EXPECT_NE(zero2.find("--use-megatron-fsdp"), std::string::npos);
  EXPECT_NE(zero2.find("--fsdp-double-buffer\n"), std::string::npos);
  EXPECT_EQ(zero2.find("CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos);
  // A stated DDP bucket is Megatron's --ddp-bucket-size (arguments.py:3125);
  // without one Megatron's own rule applies and nothing is written.
  Json bucketed = Patched(base, {{"overlap_grad_reduce", true}});
  EXPECT_EQ(emitted(bucketed).find("--ddp-bucket-size"), std::string::npos);
  bucketed["job"]["training"]["ddp_bucket_elements"] = 52428800;
  EXPECT_NE(emitted(bucketed).find("--ddp-bucket-size 52428800\n"), std::string::npos);
  // CPU activation offloading: PP 1 and no recompute (transformer_config.py:1884-1899).
  const Json pp1 = Patched(base, {{"tp", 8},
                                  {"pp", 1},
                                  {"vpp", 1},
                                  {"cp", 1},
                                  {"dp", 128},
                                  {"mbs", 1},
                                  {"overlap_p2p", false},
                                  {"recompute", "none"}});
  const std::string off = emitted(Patched(pp1, {{"offload_activation_layers", 12}}));
  EXPECT_NE(off.find("--cpu-offloading-num-layers 12"), std::string::npos);
  ExpectRefused(Patched(base, {{"offload_activation_layers", 4}}), EmitFormat::kMegatron,
                "no support for pipeline parallelism");
  ExpectRefused(Patched(pp1, {{"offload_activation_layers", 4}, {"recompute", "full"}}),
                EmitFormat::kMegatron, "activation recompute");
  ExpectRefused(Patched(pp1, {{"offload_activation_layers", 96}}), EmitFormat::kMegatron,
                "must be below the model's 96 layers");
  // Selective recompute of the dense MLP: Megatron-Core's --recompute-modules,
  // its values space-separated (nargs "+", argument_utils.py:146).
  const std::string mlp = emitted(Patched(base, {{"recompute", "selective"},
                                                 {"recompute_modules", "core_attn+mlp"}}));
  EXPECT_NE(mlp.find("--recompute-granularity selective"), std::string::npos);
  EXPECT_NE(mlp.find("--recompute-modules core_attn mlp"), std::string::npos);
  // A full-iteration CUDA graph needs the NaN check off (arguments.py:1235-1237).
  const std::string graphs = emitted(Patched(base, {{"cuda_graphs", true}}));
  EXPECT_NE(graphs.find("--cuda-graph-impl full_iteration"), std::string::npos);
  EXPECT_NE(graphs.find("--no-check-for-nan-in-loss-and-grad"), std::string::npos);
  // Recipes: Transformer Engine's names as Megatron's --fp8-recipe choices
  // (transformer_config.py:594) and NVFP4 as --fp4-format e2m1 (673-679).
  const std::pair<const char*, const char*> recipes[] = {
      {"fp8_delayed", "--fp8-recipe delayed"},
      {"fp8_current", "--fp8-recipe tensorwise"},
      {"fp8_blockwise", "--fp8-recipe blockwise"},
      {"mxfp8", "--fp8-recipe mxfp8"},
      {"nvfp4", "--fp4-recipe nvfp4"}};
  for (const auto& [recipe, flag] : recipes) {
    // On Blackwell (B200 runs every recipe; the base plan's A100 none).
    Json plans = base;
    auto b200 = topology::GpuPreset("b200");
    ASSERT_TRUE(b200.ok());
    plans["job"]["cluster"]["gpu"] = topology::GpuSpecToJson(*b200);
    plans["job"]["training"]["precision"] = recipe;
    auto job = JobFromPlans(plans);
    ASSERT_TRUE(job.ok()) << recipe << ": " << job.status().ToString();
    const std::string text = emitted(plans);
    EXPECT_NE(text.find(flag), std::string::npos) << recipe << ":\n" << text;
    EXPECT_NE(text.find("--bf16"), std::string::npos) << recipe;
    EXPECT_EQ(text.find("--fp8-format") == std::string::npos, std::string(recipe) == "nvfp4")
        << recipe;
  }
}

// An embedding or loss counted as more than one layer: Megatron's
// account-for switches say one, so the split goes out as the layout string
// (arguments.py:3103, parsed by pipeline_parallel_layer_layout.py), which also
// sets the interleaving; the mirror unrolls it as Megatron does and builds the
// chunks from it.
TEST(EmitRules, MegatronLayoutString) {
  const Json base = Load("gpt3-175b-megatron.plans.json");
  const World w = WorldOf(base);
  for (const auto& [pp, vpp, dp] : {std::tuple{8, 1, 16}, std::tuple{4, 2, 32}}) {
    const Json plans = Patched(base, {{"pp", pp},
                                      {"vpp", vpp},
                                      {"dp", dp},
                                      {"pp_embedding_layers", 2},
                                      {"pp_loss_layers", 6}});
    const std::string text = Emit(plans, EmitFormat::kMegatron);
    Built built;
    ASSERT_EQ(frameworks_test::MegatronWouldReject(text, w, &built), "") << text;
    // (96 + 2 + 6) / 8 chunks = 13: the first gives 2 to the embedding, the last 6 to the loss.
    EXPECT_NE(text.find("--pipeline-model-parallel-layout \"Et*11|(t*13|)*6t*7L\""),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("--num-virtual-stages-per-pipeline-rank"), std::string::npos);
    EXPECT_EQ(text.find("--account-for-"), std::string::npos);
    const std::vector<int> want = {11, 13, 13, 13, 13, 13, 13, 7};
    EXPECT_EQ(built.chunk_layers, want);
  }
}

// torchtitan runs the zero-bubble and V schedules torch.distributed.pipelining
// defines; Megatron-LM has none of them (schedules.py get_forward_backward_func).
TEST(EmitRules, PipelineSchedules) {
  Json plans = Load("llama3-70b-fsdp.plans.json");
  plans = Patched(plans, {{"tp", 8}, {"sp", true}, {"pp", 4}, {"vpp", 2}, {"cp", 1}, {"gz", 2},
                          {"dp", 2}, {"mbs", 1}, {"recompute", "selective"},
                          {"pp_embedding_layers", 1}, {"pp_loss_layers", 1}});
  plans["candidates"][0]["framework"] = "torchtitan";
  const World w = WorldOf(plans);
  const std::pair<const char*, const char*> names[] = {{"zb-h1", "\"InterleavedZeroBubble\""},
                                                       {"zb-v", "\"ZBVZeroBubble\""},
                                                       {"dualpipev", "\"DualPipeV\""}};
  for (const auto& [schedule, name] : names) {
    const Json p = Patched(plans, {{"pp_schedule", schedule}});
    const std::string text = Emit(p, EmitFormat::kTorchtitan);
    EXPECT_NE(text.find(std::string("pipeline_parallel_schedule = ") + name), std::string::npos)
        << text;
    // 80 layers + 2 weights over 8 stages: 10 11 10 10 10 10 10 9. Looped, rank r
    // runs stages r and r + 4; in a V, r and 7 − r.
    const bool v = std::string(schedule) != "zb-h1";
    EXPECT_NE(text.find(v ? "layers per rank 19 21 20 20" : "layers per rank 20 21 20 19"),
              std::string::npos)
        << text;
    Built built;
    EXPECT_EQ(frameworks_test::TorchtitanWouldReject(text, w, &built), "") << text;
    const Json megatron = Patched(Load("gpt3-175b-megatron.plans.json"),
                                  {{"vpp", 2}, {"pp_schedule", schedule}});
    ExpectRefused(megatron, EmitFormat::kMegatron, "not a schedule of this framework");
    Json compiled = p;
    compiled["job"]["training"]["compile"] = true;
    ExpectRefused(compiled, EmitFormat::kTorchtitan, "torch.compile");
  }
}

TEST(EmitRules, DeepSpeedRefusals) {
  const Json p = Load("llama3-8b-deepspeed.plans.json");
  // ZeRO-3 with pipeline parallelism (runtime/pipe/engine.py:76-77).
  ExpectRefused(Patched(p, {{"tp", 1}, {"pp", 2}, {"cp", 1}, {"dp", 32}, {"zero", 3}}),
                EmitFormat::kMegatronDeepSpeed, "incompatible with pipeline parallelism");
  // Ring attention is not a DeepSpeed option.
  ExpectRefused(Patched(p, {{"tp", 1}, {"pp", 1}, {"cp", 2}, {"cp_kind", "ring"}, {"dp", 32}}),
                EmitFormat::kDeepSpeed, "ring context parallelism");
  // hpZ groups are consecutive global ranks (utils/groups.py:875-886): not with TP inside.
  ExpectRefused(
      Patched(p, {{"tp", 2}, {"pp", 1}, {"cp", 1}, {"dp", 32}, {"zero", 3}, {"hpz", true}}),
      EmitFormat::kMegatronDeepSpeed, "with TP = 2 consecutive ranks hold different tensor shards");
  // A Hugging Face model under DeepSpeed has no Megatron TP or pipeline engine:
  // a Megatron plan with TP 2 is refused, not given a ds_config whose batch
  // counts world / sp = 64 data-parallel ranks where the plan has 32.
  const Json megatron = Patched(p, {{"tp", 2}, {"pp", 1}, {"cp", 1}, {"dp", 32}, {"zero", 1}});
  ExpectRefused(megatron, EmitFormat::kDeepSpeed, "tensor parallelism 2");
  ExpectRefused(Patched(p, {{"tp", 1}, {"pp", 2}, {"cp", 1}, {"dp", 32}, {"zero", 1}}),
                EmitFormat::kDeepSpeed, "pipeline parallelism 2");
}

// A plan priced with checkpoints (its candidate's goodput) saves as priced:
// every interval_steps steps, asynchronously only where the framework
// commits such a save. A hand-made document that asks for an async save under
// DeepSpeed's pipeline engine is refused: that engine never calls step(), so
// the decoupled save would not be committed (pipe/engine.py:1244-1252 @ edaa722).
TEST(EmitRules, CheckpointsAsPriced) {
  Json p = Load("llama3-8b-deepspeed.plans.json");
  p["candidates"][0]["goodput"] = {{"interval_steps", 40.0}, {"checkpoint", {{"async", true}}}};
  const Json flat = Patched(p, {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 1}});
  const Json ds = Json::parse(Emit(flat, EmitFormat::kDeepSpeed));
  EXPECT_EQ(ds["checkpoint"]["writer"]["decoupled"], true);
  EXPECT_EQ(ds["checkpoint"]["writer"]["type"], "python");  // no compiled async_io op needed
  const std::string mds = Emit(flat, EmitFormat::kMegatronDeepSpeed);
  EXPECT_NE(mds.find("--save-interval 40\n"), std::string::npos) << mds;
  ExpectRefused(Patched(p, {{"tp", 1}, {"pp", 2}, {"cp", 1}, {"dp", 32}, {"zero", 1}}),
                EmitFormat::kMegatronDeepSpeed, "never commits a decoupled save");
  const std::string mg = Emit(flat, EmitFormat::kMegatron);
  for (const char* flag : {"--save-interval 40\n", "--async-save\n", "--use-persistent-ckpt-worker\n",
                           "--async-strategy mcore\n", "${CHECKPOINT_ARGS[@]}"}) {
    EXPECT_NE(mg.find(flag), std::string::npos) << flag << "\n" << mg;
  }
  EXPECT_NE(EmitSidecar(flat, 1, EmitFormat::kMegatron)->dump().find("\"interval_steps\":40"),
            std::string::npos);
  // Synchronous as priced: no async flag; without a goodput, no save at all.
  p["candidates"][0]["goodput"]["checkpoint"]["async"] = false;
  const std::string sync = Emit(Patched(p, {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 1}}),
                                EmitFormat::kMegatron);
  EXPECT_NE(sync.find("--save-interval 40\n"), std::string::npos);
  EXPECT_EQ(sync.find("--async-save"), std::string::npos);
  // A hostile interval is refused by its pointer, not cast.
  for (const Json& bad : {Json(1e300), Json(-3.0), Json(2.5), Json("40")}) {
    Json h = p;
    h["candidates"][0]["goodput"]["interval_steps"] = bad;
    ExpectRefused(Patched(h, {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 1}}),
                  EmitFormat::kMegatron, "/candidates/0/goodput/interval_steps");
  }
  p["candidates"][0].erase("goodput");
  EXPECT_EQ(Emit(Patched(p, {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 1}}),
                 EmitFormat::kMegatron)
                .find("--save"),
            std::string::npos);
}

// ZeRO-Offload / ZeRO-Infinity plans become DeepSpeed's offload keys (docs:
// zero_optimization.offload_optimizer / offload_param, device "cpu"); stages
// that cannot offload and frameworks without it refuse.
TEST(EmitRules, DeepSpeedOffloadKeys) {
  const Json p = Load("llama3-8b-deepspeed.plans.json");
  const Json base = {{"tp", 1},      {"pp", 1},      {"cp", 1},
                     {"dp", 64},     {"qwz", false}, {"hpz", false},
                     {"qgz", false}, {"mbs", 1},     {"recompute", "full"}};
  Json z3 = Patched(Patched(p, base),
                    {{"zero", 3}, {"offload_optimizer", true}, {"offload_param", true}});
  const Json ds3 = Json::parse(Emit(z3, EmitFormat::kDeepSpeed));
  EXPECT_EQ(ds3["zero_optimization"]["stage"], 3);
  EXPECT_EQ(ds3["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(ds3["zero_optimization"]["offload_param"]["device"], "cpu");
  Json z2 = Patched(Patched(p, base),
                    {{"zero", 2}, {"offload_optimizer", true}, {"offload_param", false}});
  const Json ds2 = Json::parse(Emit(z2, EmitFormat::kDeepSpeed));
  EXPECT_EQ(ds2["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_FALSE(ds2["zero_optimization"].contains("offload_param"));
  // Without offload the keys say "none", as before.
  Json plain = Patched(Patched(p, base), {{"zero", 2}, {"offload_optimizer", false}});
  EXPECT_EQ(Json::parse(Emit(
                plain, EmitFormat::kDeepSpeed))["zero_optimization"]["offload_optimizer"]["device"],
            "none");
  // ZeRO-Offload starts only with DeepSpeed's CPU Adam: built from the ds_config
  // in the HF flow, passed by --cpu-optimizer in Megatron-DeepSpeed.
  const World w = WorldOf(p);
  for (const Json& offload : {z3, z2}) {
    EXPECT_EQ(frameworks_test::DeepSpeedWouldReject(Emit(offload, EmitFormat::kDeepSpeed), w), "");
    EXPECT_EQ(frameworks_test::MegatronDeepSpeedWouldReject(
                  Emit(offload, EmitFormat::kMegatronDeepSpeed), w),
              "");
  }
  ExpectRefused(Patched(z2, {{"offload_param", true}}), EmitFormat::kDeepSpeed,
                "needs ZeRO stage 3");
  ExpectRefused(Patched(z2, {{"zero", 0}}), EmitFormat::kDeepSpeed, "needs ZeRO stage 1, 2 or 3");
  const Json m = Load("gpt3-175b-megatron.plans.json");
  ExpectRefused(Patched(m, {{"distributed_optimizer", true}, {"offload_optimizer", true}}),
                EmitFormat::kMegatron, "use --format deepspeed");
}

TEST(EmitRules, AxonnRefusals) {
  const Json p = Load("axonn-20b-axonn.plans.json");
  ExpectRefused(Patched(p, {{"cp", 2}, {"dp", 1}}), EmitFormat::kAxonn, "no context");
  ExpectRefused(Patched(p, {{"zero", 1}}), EmitFormat::kAxonn, "not with ZeRO");
  // AxoNN's rank layout is fixed: x, y, z, inter, data (communication.py).
  ExpectRefused(Patched(p, {{"placement", "data-x-y-cp-z-pp"}}), EmitFormat::kAxonn, "rank order");
}

// The output layer is priced split over AxoNN's tensor grid; auto_parallelize
// splits it only where h·vocab/(G_intra_r·G_intra_c) divides over G_intra_d
// and vocab over G_intra_r (automatic_parallelism.py:15-21 @660a224). A
// vocabulary that does not is written with the padding that makes it split,
// and the file without that note would leave the layer sequential.
TEST(EmitRules, AxonnOutputLayerPaddedToSplit) {
  Json p = Patched(Load("axonn-20b-axonn.plans.json"),
                   {{"tp", nullptr}, {"gx", 1}, {"gy", 2}, {"gz", 128}, {"dp", 1}});
  p["job"]["model"]["vocab"] = 51201;  // odd: G_intra_r = 2 needs an even vocabulary
  const std::string text = Emit(p, EmitFormat::kAxonn);
  EXPECT_NE(text.find("pad it to 51202"), std::string::npos) << text;
  const World w = WorldOf(p);
  EXPECT_EQ(frameworks_test::AxonnWouldReject(text, w), "") << text;
  std::string unnoted;
  for (const std::string& line : frameworks_test::Lines(text)) {
    if (line.find("pad it to") == std::string::npos) unnoted += line + "\n";
  }
  EXPECT_EQ(frameworks_test::AxonnWouldReject(unnoted, w), "linear not parallelizable");
  // The model's own vocabulary splits: no padding is asked for.
  EXPECT_EQ(Emit(Load("axonn-20b-axonn.plans.json"), EmitFormat::kAxonn).find("pad it to"),
            std::string::npos);
}

TEST(EmitRules, TorchtitanRefusals) {
  const Json p = Load("llama3-70b-fsdp.plans.json");
  ExpectRefused(Patched(p, {{"zero", 1}}), EmitFormat::kTorchtitan, "FSDP2");
  ExpectRefused(Patched(p, {{"cp", 2}, {"cp_kind", "ulysses"}, {"gz", 32}}),
                EmitFormat::kTorchtitan, "ring attention");
}

TEST(EmitApi, FormatsRanksAndDefaults) {
  for (const char* n : {"megatron", "megatron-deepspeed", "deepspeed", "axonn", "torchtitan", "env", "json"}) {
    auto f = ParseEmitFormat(n);
    ASSERT_TRUE(f.ok()) << n;
    EXPECT_STREQ(EmitFormatName(*f), n);
  }
  EXPECT_FALSE(ParseEmitFormat("nemo").ok());
  const Json p = Load("gpt3-175b-megatron.plans.json");
  const int n = static_cast<int>(p["candidates"].size());
  EXPECT_FALSE(EmitConfig(p, 0, EmitFormat::kEnv).ok());
  EXPECT_FALSE(EmitConfig(p, n + 1, EmitFormat::kEnv).ok());
  EXPECT_TRUE(EmitConfig(p, n, EmitFormat::kEnv).ok());
  Json not_plans = {{"schema", "paratune.prediction/v1"}};
  EXPECT_EQ(EmitConfig(not_plans, 1, EmitFormat::kEnv).status().code(), StatusCode::kInvalidArgument);
  // Wrong JSON types anywhere are bad input, never an exception.
  for (const char* bad : {R"({"schema": 1})", R"([1, 2])", R"("plans")"}) {
    EXPECT_EQ(EmitConfig(Json::parse(bad), 1, EmitFormat::kEnv).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  Json odd = p;
  odd["candidates"][0]["config"]["tp"] = "four";
  EXPECT_EQ(EmitConfig(odd, 1, EmitFormat::kMegatron).status().code(), StatusCode::kInvalidArgument);
  odd = p;
  odd["candidates"][0] = 7;
  EXPECT_EQ(EmitConfig(odd, 1, EmitFormat::kMegatron).status().code(), StatusCode::kInvalidArgument);
  odd = p;
  odd["candidates"][0]["prediction"] = "fast";
  EXPECT_TRUE(EmitConfig(odd, 1, EmitFormat::kMegatron).ok());  // the header just omits the numbers
  EXPECT_EQ(DefaultEmitFormat(Json::parse("[]")), EmitFormat::kMegatron);
  // Defaults: the framework the plan was made for, else its space.
  EXPECT_EQ(DefaultEmitFormat(p), EmitFormat::kMegatron);
  EXPECT_EQ(DefaultEmitFormat(Load("llama3-8b-deepspeed.plans.json")), EmitFormat::kMegatronDeepSpeed);
  EXPECT_EQ(DefaultEmitFormat(Load("axonn-20b-axonn.plans.json")), EmitFormat::kAxonn);
  EXPECT_EQ(DefaultEmitFormat(Load("llama3-70b-fsdp.plans.json")), EmitFormat::kTorchtitan);
  for (auto [fw, want] : {std::pair{"megatron", EmitFormat::kMegatron},
                          {"megatron-deepspeed", EmitFormat::kMegatronDeepSpeed},
                          {"deepspeed", EmitFormat::kDeepSpeed}, {"fsdp", EmitFormat::kTorchtitan},
                          {"torchtitan", EmitFormat::kTorchtitan}, {"axonn", EmitFormat::kAxonn}}) {
    Json q = Load("llama3-8b-deepspeed.plans.json");
    q["job"]["training"]["framework"] = fw;
    EXPECT_EQ(DefaultEmitFormat(q), want) << fw;
  }
}

}  // namespace
}  // namespace paratune::planner
