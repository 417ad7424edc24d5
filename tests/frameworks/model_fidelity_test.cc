// The model Megatron-LM builds from the emitted arguments is the model paratune
// planned: for every preset, the parameters Megatron-Core would construct from
// the GPT_MODEL_ARGS and MOE_ARGS of `emit --format megatron` equal
// ModelSpec::ParamCount().
//
// The count below is written from Megatron-Core's model construction at
// NVIDIA/Megatron-LM d98e8a6 (file and lines at each term), reading only the
// emitted flags, never paratune's model: a flag left out (an untied output
// layer, a Q/K norm, a bias, a shared expert, the MoE layer pattern, MLA's
// ranks, MTP) changes the count and fails the test. The vocabulary comes from
// the tokenizer, not the arguments: it is the model's own, unpadded
// (--make-vocab-size-divisible-by pads the tables with rows no token uses).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/json.h"
#include "framework_rules.h"
#include "frameworks/emit.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "planner/plans.h"
#include "test_world.h"

namespace paratune::planner {
namespace {

using frameworks_test::BashArgs;

// Megatron's moe_freq_type value as Python evaluates it (arguments.py:327-350):
// a list expression of [0/1, ...] lists joined by + and repeated by *, parsed
// here by recursive descent. Returns false on anything else.
class ListExpr {
 public:
  explicit ListExpr(std::string s) : s_(std::move(s)) {}
  bool Parse(std::vector<int>* out) {
    if (!Sum(out)) return false;
    return pos_ == s_.size();
  }

 private:
  bool Sum(std::vector<int>* out) {
    if (!Term(out)) return false;
    while (Eat('+')) {
      std::vector<int> more;
      if (!Term(&more)) return false;
      out->insert(out->end(), more.begin(), more.end());
    }
    return true;
  }
  bool Term(std::vector<int>* out) {
    std::vector<int> atom;
    if (Eat('(')) {
      if (!Sum(&atom) || !Eat(')')) return false;
    } else if (Eat('[')) {
      int v = 0;
      while (Int(&v)) {
        atom.push_back(v);
        if (!Eat(',')) break;
      }
      if (!Eat(']')) return false;
    } else {
      return false;
    }
    int times = 1;
    if (Eat('*') && !Int(&times)) return false;
    for (int k = 0; k < times; ++k) out->insert(out->end(), atom.begin(), atom.end());
    return true;
  }
  bool Int(int* v) {
    size_t end = pos_;
    while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
    if (end == pos_) return false;
    *v = std::stoi(s_.substr(pos_, end - pos_));
    pos_ = end;
    return true;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string s_;
  size_t pos_ = 0;
};

// Which layers get the MoE MLP: none without --num-experts; --moe-layer-freq N
// (default 1) makes layer i (0-based) MoE when i % N == 0
// (gpt_layer_specs.py:647-650); a list expression gives one 0/1 per layer.
std::vector<bool> MoeLayers(const BashArgs& a, int64_t layers) {
  std::vector<bool> moe(layers, false);
  if (!a.Has("--num-experts")) return moe;
  std::string freq = a.Str("--moe-layer-freq", "1");
  if (freq.size() >= 2 && freq.front() == '\'' && freq.back() == '\'')
    freq = freq.substr(1, freq.size() - 2);
  if (freq.find('[') == std::string::npos) {
    const int64_t n = std::stoll(freq);
    for (int64_t i = 0; i < layers; ++i) moe[i] = i % n == 0;
    return moe;
  }
  std::vector<int> pattern;
  EXPECT_TRUE(ListExpr(freq).Parse(&pattern)) << freq;
  EXPECT_EQ(static_cast<int64_t>(pattern.size()), layers) << freq;
  for (size_t i = 0; i < pattern.size() && static_cast<int64_t>(i) < layers; ++i)
    moe[i] = pattern[i] != 0;
  return moe;
}

// Megatron-Core's parameters for the arguments `a` and a vocabulary of `vocab`.
int64_t MegatronParams(const BashArgs& a, int64_t vocab) {
  const int64_t h = a.Int("--hidden-size", 0), layers = a.Int("--num-layers", 0);
  const int64_t heads = a.Int("--num-attention-heads", 0);
  const int64_t groups = a.Has("--group-query-attention") ? a.Int("--num-query-groups", 1) : heads;
  // kv_channels defaults to hidden / heads (arguments.py:1331-1333).
  const int64_t d = a.Int("--kv-channels", h / heads);
  const int64_t ffn = a.Int("--ffn-hidden-size", 4 * h);
  const bool bias = !a.Has("--disable-bias-linear");  // add_bias_linear (transformer_config.py:212)
  const bool gated = a.Has("--swiglu") || a.Has("--quick-geglu");  // argument_utils.py:314-326
  // TENorm: RMSNorm a weight, LayerNorm (the default) a weight and a bias.
  const int64_t norm = a.Str("--normalization", "LayerNorm") == "RMSNorm" ? h : 2 * h;

  int64_t attention;
  if (a.Has("--multi-latent-attention")) {
    // multi_latent_attention.py:505-630: Q directly (510-517) or through the
    // q_lora rank (537-564), KV down to kv_lora + the RoPE width (584-590) and
    // up to every head's K and V (604-611), no biases; with --qk-layernorm the
    // up-projections carry a norm of their input width (gpt_layer_specs.py:104-130).
    const int64_t qk = a.Int("--qk-head-dim", 128), rope = a.Int("--qk-pos-emb-head-dim", 64);
    const int64_t v = a.Int("--v-head-dim", 128), q_lora = a.Int("--q-lora-rank", 0);
    const int64_t kv_lora = a.Int("--kv-lora-rank", 0);
    const bool norms = a.Has("--qk-layernorm");
    attention = q_lora > 0 ? h * q_lora + q_lora * heads * (qk + rope) + (norms ? q_lora : 0)
                           : h * heads * (qk + rope);
    attention += h * (kv_lora + rope) + kv_lora * heads * (qk + v) + (norms ? kv_lora : 0);
    attention += heads * v * h + (bias ? h : 0);  // linear_proj (multi_latent_attention.py:221-226)
  } else {
    // attention.py:1689-1698: linear_qkv of a·d + 2·g·d outputs, biased with
    // add_bias_linear; :413-418 linear_proj of a·d inputs.
    const int64_t qkv = heads * d + 2 * groups * d;
    attention = h * qkv + (bias ? qkv : 0) + heads * d * h + (bias ? h : 0);
    // attention.py:1734-1751: q_layernorm and k_layernorm of kv_channels.
    if (a.Has("--qk-layernorm")) attention += 2 * (norm / h) * d;
  }
  // dot_product_attention.py:119-138: softmax_type "learnable" adds one offset per head.
  if (a.Str("--softmax-type", "vanilla") == "learnable") attention += heads;

  // mlp.py:199-247: fc1 of ffn (twice for a gated unit), fc2 back to h, biased
  // with add_bias_linear.
  auto mlp = [&](int64_t f) {
    const int64_t fc1 = gated ? 2 * f : f;
    return h * fc1 + f * h + (bias ? fc1 + h : 0);
  };
  int64_t moe_mlp = 0;
  if (a.Has("--num-experts")) {
    const int64_t experts = a.Int("--num-experts", 0);
    // router.py:64-72: a weight of experts × h, and a bias with add_bias_linear;
    // experts.py:183-246: every expert an MLP of --moe-ffn-hidden-size;
    // shared_experts.py:124: the shared experts have no biases.
    moe_mlp = experts * h + (bias ? experts : 0) + experts * mlp(a.Int("--moe-ffn-hidden-size", ffn));
    const int64_t shared = a.Int("--moe-shared-expert-intermediate-size", 0);
    if (shared > 0) moe_mlp += h * (gated ? 2 * shared : shared) + shared * h;
  }
  // transformer_layer.py: input_layernorm (fused into linear_qkv) and
  // pre_mlp_layernorm (fused into fc1, or the MoE layer's own) per layer.
  const std::vector<bool> moe = MoeLayers(a, layers);
  auto layer = [&](bool is_moe) { return attention + (is_moe ? moe_mlp : mlp(ffn)) + 2 * norm; };
  int64_t total = 0;
  for (int64_t i = 0; i < layers; ++i) total += layer(moe[i]);
  // language_model_embedding.py:47-71: the word table, and a position table of
  // --max-position-embeddings rows for learned_absolute (the default type);
  // gpt_model.py:277-286: an unbiased output layer unless the embeddings are
  // shared; transformer_block.py: the final norm.
  total += vocab * h + norm;
  if (a.Str("--position-embedding-type", "learned_absolute") == "learned_absolute")
    total += a.Int("--max-position-embeddings", 0) * h;
  if (a.Has("--untie-embeddings-and-output-weights")) total += vocab * h;
  // multi_token_prediction.py:1157-1247: each MTP module has enorm, hnorm, the
  // unbiased 2h×h eh_proj, a transformer layer like the decoder's last, and
  // its final_layernorm.
  const int64_t mtp = a.Int("--mtp-num-layers", 0);
  total += mtp * (3 * norm + 2 * h * h + layer(!moe.empty() && moe.back()));
  return total;
}

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

}  // namespace
}  // namespace paratune::planner
