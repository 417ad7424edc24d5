// The model Megatron-LM and Megatron-DeepSpeed build from the emitted
// arguments is the model paratune planned: for every preset, the parameters
// they would construct from the arguments of `emit --format megatron` (and
// megatron-deepspeed, where that format can express the model) equal
// ModelSpec::ParamCount(). The counts are in param_counts.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/json.h"
#include "framework_rules.h"
#include "frameworks/emit.h"
#include "param_counts.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "planner/plans.h"
#include "test_world.h"

namespace paratune::planner {
namespace {

using frameworks_test::BashArgs;
using frameworks_test::MegatronDeepSpeedParams;
using frameworks_test::MegatronParams;

// A one-GPU Megatron plan of `m` (no parallelism, so no layout or batch rule
// refuses it) at a sequence no longer than the model's positions.
Json OneGpuPlans(const ModelSpec& m) {
  auto text = ReadFileToString(std::string(PARATUNE_SOURCE_DIR) +
                               "/tests/frameworks/data/emit/gpt3-175b-megatron.plans.json");
  EXPECT_TRUE(text.ok());
  Json plans = Json::parse(*text);
  plans["job"]["model"] = ModelSpecToJson(m);
  plans["job"]["gpus"] = 1;
  plans["gpus"] = 1;
  const int seq = m.max_seq_len > 0 ? std::min(2048, m.max_seq_len) : 2048;
  plans["job"]["training"]["seq_len"] = seq;
  plans["job"]["training"]["global_batch"] = 1;
  plans["candidates"] = Json::array({plans["candidates"][0]});
  plans["candidates"][0]["config"] = {
      {"tp", 1},         {"gz", 1},       {"dp", 1},           {"pp", 1},
      {"vpp", 1},        {"cp", 1},       {"cp_kind", "ring"}, {"sp", false},
      {"zero", 0},       {"mbs", 1},      {"recompute", "none"},
      {"distributed_optimizer", true},    {"overlap_grad_reduce", true},
      {"overlap_param_gather", false},    {"tp_comm_overlap", false},
      {"overlap_p2p", false}};
  return plans;
}

TEST(MegatronParamCount, EveryPresetBuildsThePlannedModel) {
  int counted = 0, refused = 0;
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    const ModelSpec m = *ModelPreset(name);
    const Json plans = OneGpuPlans(m);
    auto text = EmitConfig(plans, 1, EmitFormat::kMegatron);
    const int seq = plans["job"]["training"]["seq_len"].get<int>();
    if (!text.ok()) {
      // Only a model Megatron cannot build may be refused, with that reason.
      const std::string gap = MegatronModelGap(m, seq);
      ASSERT_FALSE(gap.empty()) << text.status().ToString();
      EXPECT_NE(text.status().message().find(gap), std::string::npos)
          << text.status().ToString();
      ++refused;
      continue;
    }
    const BashArgs a = frameworks_test::ParseBash(*text);
    EXPECT_EQ(MegatronParams(a, m.vocab), m.ParamCount()) << *text;
    // The norms, softmax, activation and window Megatron builds are the model's.
    auto job = JobFromPlans(plans);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(frameworks_test::MegatronArchitectureGap(a, frameworks_test::WorldOf(*job)), "")
        << *text;
    ++counted;
  }
  // Not vacuous: the presets are counted, and OLMoE (Q/K norms over all heads)
  // is the model Megatron cannot build at 2048 tokens.
  EXPECT_GT(counted, 40);
  EXPECT_EQ(refused, 1);
}

// The count reads the flags: an emitted file missing one builds another model.
TEST(MegatronParamCount, TheCountSeesEachArchitectureFlag) {
  const ModelSpec qwen = *ModelPreset("qwen3-30b-a3b");
  const std::string text = *EmitConfig(OneGpuPlans(qwen), 1, EmitFormat::kMegatron);
  const BashArgs a = frameworks_test::ParseBash(text);
  const int64_t full = MegatronParams(a, qwen.vocab);
  for (const char* flag : {"--qk-layernorm", "--untie-embeddings-and-output-weights",
                           "--group-query-attention", "--kv-channels", "--swiglu",
                           "--disable-bias-linear", "--num-experts"}) {
    BashArgs without = a;
    ASSERT_TRUE(without.args.erase(flag)) << flag;
    EXPECT_NE(MegatronParams(without, qwen.vocab), full) << flag;
  }
}

// Megatron-DeepSpeed's parser (megatron/arguments.py @4efb479) has no flag
// for a Q/K norm, attention sinks or a clamped activation: a model with any of
// them is refused with the reason (emit exits 2), and the mds_model rule keeps
// the search from ranking it; its norm epsilon is written.
// OneGpuPlans with ZeRO-1 in place of Megatron's distributed optimizer, as
// Megatron-DeepSpeed takes it.
Json OneGpuZero1Plans(const ModelSpec& m) {
  Json plans = OneGpuPlans(m);
  plans["candidates"][0]["config"]["distributed_optimizer"] = false;
  plans["candidates"][0]["config"]["zero"] = 1;
  return plans;
}

TEST(MegatronDeepSpeedModel, RefusesWhatItsFlagsCannotBuild) {
  const ModelSpec llama = *ModelPreset("llama3-8b");
  ASSERT_EQ(MegatronDeepSpeedModelGap(llama, 2048), "");
  struct Case {
    const char* what;
    void (*apply)(ModelSpec*);
    const char* reason;
  };
  const Case cases[] = {
      {"qk_norm", [](ModelSpec* m) { m->qk_norm = "head"; }, "no query/key norm"},
      {"attention_sinks", [](ModelSpec* m) { m->attention_sinks = true; }, "has no sinks"},
      {"swiglu_limit", [](ModelSpec* m) { m->swiglu_limit = 7; }, "clamped"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelSpec m = llama;
    c.apply(&m);
    const std::string gap = MegatronDeepSpeedModelGap(m, 2048);
    EXPECT_NE(gap.find(c.reason), std::string::npos) << gap;
    auto text = EmitConfig(OneGpuZero1Plans(m), 1, EmitFormat::kMegatronDeepSpeed);
    ASSERT_FALSE(text.ok()) << *text;
    EXPECT_NE(text.status().message().find(c.reason), std::string::npos)
        << text.status().ToString();
    // Nor is any configuration of it ranked for Megatron-DeepSpeed.
    std::string why;
    const FrameworkRuleRef* rule =
        BrokenRule(FrameworkPreset(Framework::kMegatronDeepSpeed),
                   [&] {
                     RuleJob j = RuleJobOf(m, TrainingSpec{});
                     j.mds_model_gap = &gap;
                     return j;
                   }(),
                   ParallelConfig{}, &why);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(FrameworkRuleName(rule->rule), std::string("mds_model"));
  }
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b", "olmoe-1b-7b"}) {
    EXPECT_NE(MegatronDeepSpeedModelGap(*ModelPreset(name), 2048), "") << name;
  }
  // The norm epsilon it can express is written (--layernorm-epsilon, arguments.py:652-653).
  ModelSpec eps = llama;
  eps.norm_eps = 1e-6;
  auto text = EmitConfig(OneGpuZero1Plans(eps), 1, EmitFormat::kMegatronDeepSpeed);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(frameworks_test::ParseBash(*text).Str("--layernorm-epsilon"), "1e-06");
}

// The model Megatron-DeepSpeed builds from its emitted arguments is the
// planned one, for every preset it can express (the rest are refused, below).
TEST(MegatronDeepSpeedParamCount, EveryPresetItCanExpressBuildsThePlannedModel) {
  int counted = 0, moe = 0;
  for (const std::string& name : ModelPresetNames()) {
    SCOPED_TRACE(name);
    const ModelSpec m = *ModelPreset(name);
    auto text = EmitConfig(OneGpuZero1Plans(m), 1, EmitFormat::kMegatronDeepSpeed);
    if (!text.ok()) continue;  // refused with the reason: RefusesWhatItsFlagsCannotBuild
    const BashArgs a = frameworks_test::ParseBash(*text);
    EXPECT_EQ(MegatronDeepSpeedParams(a, m.vocab), m.ParamCount()) << *text;
    ++counted;
    moe += m.is_moe();
  }
  EXPECT_GT(counted, 25);
  EXPECT_GT(moe, 0);
  // The count reads the flags: without any one of them, another model.
  const ModelSpec mixtral = *ModelPreset("mixtral-8x7b");
  const BashArgs a = frameworks_test::ParseBash(
      *EmitConfig(OneGpuZero1Plans(mixtral), 1, EmitFormat::kMegatronDeepSpeed));
  for (const char* flag : {"--num-experts", "--swiglu", "--untie-embeddings-and-output-weights",
                           "--num-key-value-heads", "--disable-bias-linear", "--normalization"}) {
    BashArgs without = a;
    ASSERT_TRUE(without.args.erase(flag)) << flag;
    EXPECT_NE(MegatronDeepSpeedParams(without, mixtral.vocab), mixtral.ParamCount()) << flag;
  }
}

}  // namespace
}  // namespace paratune::planner
