// Tests for the mixture-of-experts side of planner/model.h: the presets against the
// parameter counts their authors publish, the model FLOPs per token against the
// published Megatron-Bridge throughput tables, and the Hugging Face config.json files
// of each family loading as they are published (tests/planner/data/hf/README.md
// names where each file was copied from).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "planner/model.h"
#include "planner/request.h"
#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

using testing::MustParse;
using testing::Preset;

Json ReadHfFile(const std::string& name) {
  std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/tests/planner/data/hf/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return MustParse(ss.str());
}

// Everything but name, source, the pretraining run a config.json does not
// describe, and (where a revision differs) max_seq_len and the RoPE base that
// stretches to it (Qwen3-235B-A22B-2507: 262144 positions, rope_theta 5000000).
void ExpectSameArchitecture(ModelSpec a, ModelSpec b, bool same_positions = true) {
  a.name = b.name = "";
  a.source = b.source = "";
  a.pretrain_seq_len = b.pretrain_seq_len = 0;
  a.pretrain_global_batch = b.pretrain_global_batch = 0;
  if (!same_positions) {
    a.max_seq_len = b.max_seq_len = 0;
    a.rope_theta = b.rope_theta = 0;
  }
  EXPECT_EQ(ModelSpecToJson(a).dump(), ModelSpecToJson(b).dump());
  EXPECT_TRUE(a == b);
}

double Billions(int64_t n) { return static_cast<double>(n) / 1e9; }

// Totals and active ("activated") counts as each model's authors publish them, to
// the precision printed (half a unit of the last digit) unless noted.
TEST(MoeParams, MatchPublishedTotalsAndActiveCounts) {
  const struct {
    const char* name;
    double total, total_tol, active, active_tol;
    bool active_excludes_input_embedding;  // the publisher's convention
  } kRows[] = {
      // DeepSeek-V3 README: 671B total (without the MTP module), 37B activated.
      {"deepseek-v3", 671, 0.5, 37, 0.6, false},
      // DeepSeek-V2 paper Appendix B (V2-Lite): 15.7B total, 2.4B activated.
      {"deepseek-v2-lite", 15.7, 0.05, 2.4, 0.06, true},
      // Qwen3 Technical Report Table 2: 30.5B / 3.3B and 235B / 22B.
      {"qwen3-30b-a3b", 30.5, 0.05, 3.3, 0.06, false},
      {"qwen3-235b-a22b", 235, 0.5, 22, 0.5, false},
      // Mixtral paper: 46.7B total, 12.9B active ("13B").
      {"mixtral-8x7b", 46.7, 0.05, 12.9, 0.05, false},
      // Mistral AI: 141B total, 39B active.
      {"mixtral-8x22b", 141, 0.5, 39, 0.5, false},
      // gpt-oss model card Table 1: totals 116.83B / 20.91B; active 5.13B / 3.61B per
      // token, counting the unembedding but not the embedding.
      {"gpt-oss-120b", 116.83, 0.005, 5.13, 0.005, true},
      {"gpt-oss-20b", 20.91, 0.005, 3.61, 0.005, true},
      // Meta Llama 4 model card: Scout 109B total including its ~0.9B vision encoder
      // (the text model is counted here, hence 1.5B of tolerance), 17B active;
      // Maverick 400B / 17B.
      {"llama4-scout", 109, 1.5, 17, 0.5, false},
      {"llama4-maverick", 400, 1.0, 17, 0.5, false},
      // OLMoE paper Table 1: 6.9B total, 1.3B active.
      {"olmoe-1b-7b", 6.9, 0.05, 1.3, 0.05, false},
      // Kimi K2 README section 2: "1T" total, "32B" activated, rounded without a
      // stated convention: 1026.4B by this count; 32.9B active with both
      // embedding tables, 31.7B without the input one (hence 1B of tolerance).
      {"kimi-k2", 1000, 50, 32, 1.0, false},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.name);
    const ModelSpec m = Preset(row.name);
    ASSERT_TRUE(m.is_moe());
    const int64_t total = m.ParamCount() - int64_t{m.mtp_layers} * m.MtpModuleParams();
    EXPECT_NEAR(Billions(total), row.total, row.total_tol);
    int64_t active = m.ActiveParamCount();
    if (row.active_excludes_input_embedding) active -= int64_t{m.vocab} * m.hidden;
    EXPECT_NEAR(Billions(active), row.active, row.active_tol);
    EXPECT_LT(m.ActiveParamCount(), m.ParamCount());
  }
  // DeepSeek-V3 README_WEIGHTS.md: the Hugging Face checkpoint holds 685B, of which
  // the MTP module is 14B with its own copies of the embedding and output head
  // (2·V·h = 1.85B), shared here: 684.5B and 13.5B by this count (the README
  // rounds to 685B and 14B).
  const ModelSpec v3 = Preset("deepseek-v3");
  EXPECT_NEAR(Billions(v3.ParamCount()) + 2.0 * v3.vocab * v3.hidden / 1e9, 685, 0.6);
  EXPECT_NEAR(Billions(v3.MtpModuleParams()) + 2.0 * v3.vocab * v3.hidden / 1e9, 14, 0.6);
}

// Layer layout: DeepSeek-V3's first 3 dense layers, Maverick's every second layer.
TEST(MoeParams, LayerLayouts) {
  const ModelSpec v3 = Preset("deepseek-v3");
  EXPECT_EQ(v3.moe_layer_count(), 58);
  EXPECT_FALSE(v3.is_moe_layer(2));
  EXPECT_TRUE(v3.is_moe_layer(3));
  EXPECT_EQ(v3.ParamsOfLayer(0), v3.ParamsPerLayer());
  const ModelSpec mav = Preset("llama4-maverick");
  EXPECT_EQ(mav.moe_layer_count(), 24);
  EXPECT_FALSE(mav.is_moe_layer(0));
  EXPECT_TRUE(mav.is_moe_layer(1));
  EXPECT_EQ(Preset("llama4-scout").moe_layer_count(), 48);
  EXPECT_EQ(Preset("qwen3-235b-a22b").dense_layer_count(), 0);
  // DeepSeek-V2 §2.1: MLA caches (d_c + d_h^R) = 512 + 64 elements per token and
  // layer; its projections hold h·(d_c + d_h^R) for the joint KV down-projection.
  const ModelSpec lite = Preset("deepseek-v2-lite");
  EXPECT_TRUE(lite.is_mla());
  EXPECT_EQ(lite.MlaParams(), int64_t{2048} * 16 * 192 + int64_t{2048} * (512 + 64) + 512 +
                                  int64_t{512} * 16 * (128 + 128) + int64_t{16} * 128 * 2048);
}

// Megatron-Bridge's published tables give Model TFLOP/s per GPU and tokens/s per GPU;
// their ratio is the model FLOPs per token of Megatron-Core's formula. Rows of
// ../shared calibration moe_runs.json (Megatron-Bridge docs/performance-summary*.md @
// 067f987d), seq 4096; the TFLOP/s are printed as integers, so the ratio is good
// to ~0.3 %.
TEST(MoeFlops, MatchPublishedMegatronBridgeRatios) {
  const struct {
    const char* model;
    const char* row;
    double tflops, tokens;
  } kRows[] = {
      {"qwen3-30b-a3b", "mb-26.06-h100-qwen3_30b_a3b-fp8-16g", 203, 8826},
      {"qwen3-235b-a22b", "mb-26.04.01-h100-qwen3_235b_a22b-fp8-256g", 253, 1712},
      {"deepseek-v3", "mb-25.09-h100-deepseek_v3-fp8-1024g", 338, 1297},
      {"deepseek-v3", "mb-26.06.01-gb300-deepseek_v3-mxfp8-256g", 1640, 6304},
  };
  for (const auto& row : kRows) {
    SCOPED_TRACE(row.row);
    const double published = row.tflops * 1e12 / row.tokens;
    const double ours = 3.0 * Preset(row.model).ForwardFlopsPerToken(4096);
    EXPECT_NEAR(ours / published, 1.0, 0.006);
  }
}

// Properties of the active-FLOP convention: MoE FLOPs grow with top_k, not with the
// number of experts, and a sliding window cuts the attention core.
TEST(MoeFlops, CountActiveExpertsAndWindows) {
  ModelSpec m = Preset("qwen3-30b-a3b");
  const double base = m.ForwardFlopsPerToken(4096);
  ModelSpec more_experts = m;
  more_experts.experts *= 2;
  EXPECT_DOUBLE_EQ(more_experts.ForwardFlopsPerToken(4096), base);
  ModelSpec more_k = m;
  more_k.top_k += 1;
  // One more expert: 2 (fwd FMA) · 3 (gated) · h · f_e per layer.
  EXPECT_DOUBLE_EQ(more_k.ForwardFlopsPerToken(4096) - base, 2.0 * 3.0 * 2048 * 768 * 48);
  const ModelSpec oss = Preset("gpt-oss-120b");
  ModelSpec no_window = oss;
  no_window.sliding_window = no_window.sliding_layers = 0;
  EXPECT_LT(oss.ForwardFlopsPerToken(8192), no_window.ForwardFlopsPerToken(8192));
  EXPECT_DOUBLE_EQ(oss.ForwardFlopsPerToken(64), no_window.ForwardFlopsPerToken(64));
}

TEST(MoeHuggingFace, PublishedQwen3ConfigsLoadLikeThePresets) {
  Result<ModelSpec> q30 = ParseHuggingFaceConfig(ReadHfFile("qwen3-30b-a3b.config.json"), "");
  ASSERT_TRUE(q30.ok()) << q30.status().ToString();
  ExpectSameArchitecture(*q30, Preset("qwen3-30b-a3b"));
  EXPECT_EQ(q30->head_dim(), 128);
  Result<ModelSpec> q235 = ResolveModel(ReadHfFile("qwen3-235b-a22b-2507.config.json"), "/model");
  ASSERT_TRUE(q235.ok()) << q235.status().ToString();
  ExpectSameArchitecture(*q235, Preset("qwen3-235b-a22b"), /*same_positions=*/false);
  EXPECT_EQ(q235->max_seq_len, 262144);
}

TEST(MoeHuggingFace, PublishedGptOssAndMixtralConfigsLoadLikeThePresets) {
  Result<ModelSpec> oss = ParseHuggingFaceConfig(ReadHfFile("gpt-oss-20b.config.json"), "");
  ASSERT_TRUE(oss.ok()) << oss.status().ToString();
  ExpectSameArchitecture(*oss, Preset("gpt-oss-20b"));
  EXPECT_EQ(oss->sliding_layers, 12);
  EXPECT_TRUE(oss->linear_bias);
  Result<ModelSpec> mix = ParseHuggingFaceConfig(ReadHfFile("mixtral-8x7b.config.json"), "");
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  ExpectSameArchitecture(*mix, Preset("mixtral-8x7b"));
}

// The architecture keys of deepseek-ai/DeepSeek-V3's config.json, as published (the
// same values as its inference/configs/config_671B.json).
constexpr char kDeepSeekV3Keys[] = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false,
  "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280
})";

TEST(MoeHuggingFace, DeepSeekConfigsLoadLikeThePresets) {
  Result<ModelSpec> v3 = ParseHuggingFaceConfig(MustParse(kDeepSeekV3Keys), "");
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  ExpectSameArchitecture(*v3, Preset("deepseek-v3"));

  // deepseek-ai/DeepSeek-V2-Lite config.json: no query compression (q_lora_rank null).
  Json lite = MustParse(R"({
    "model_type": "deepseek_v2", "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_routed_experts": 64,
    "n_shared_experts": 2, "first_k_dense_replace": 1, "num_attention_heads": 16,
    "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
    "q_lora_rank": null, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "rope_theta": 10000, "scoring_func": "softmax",
    "tie_word_embeddings": false, "v_head_dim": 128, "vocab_size": 102400, "attention_bias": false
  })");
  Result<ModelSpec> m = ParseHuggingFaceConfig(lite, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectSameArchitecture(*m, Preset("deepseek-v2-lite"));

  Json freq = MustParse(kDeepSeekV3Keys);
  freq["moe_layer_freq"] = 2;
  m = ParseHuggingFaceConfig(freq, "");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/moe_layer_freq"), std::string::npos);
}

// meta-llama/Llama-4-Scout-17B-16E config.json: the language model is its text_config.
TEST(MoeHuggingFace, Llama4ConfigsLoadLikeThePresets) {
  std::string no_rope = "[";
  for (int i = 0; i < 48; ++i) no_rope += std::string(i ? "," : "") + ((i % 4 == 3) ? "0" : "1");
  no_rope += "]";
  const std::string scout_text = R"({
    "attention_bias": false, "attention_chunk_size": 8192, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 1,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "max_position_embeddings": 262144, "model_type": "llama4_text",
    "no_rope_layers": )" + no_rope +
                                 R"(, "num_attention_heads": 40,
    "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
    "num_local_experts": 16, "rms_norm_eps": 1e-05, "use_qk_norm": true,
    "vocab_size": 202048})";
  Json scout = Json::object();
  scout["architectures"] = Json::array({"Llama4ForConditionalGeneration"});
  scout["model_type"] = "llama4";
  scout["tie_word_embeddings"] = false;
  scout["text_config"] = MustParse(scout_text);
  Result<ModelSpec> m = ResolveModel(scout, "/model");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectSameArchitecture(*m, Preset("llama4-scout"));

  // Maverick: interleave_moe_layer_step 2, moe_layers 1, 3, ..., 47.
  Json mav = scout;
  mav["text_config"]["interleave_moe_layer_step"] = 2;
  mav["text_config"]["num_local_experts"] = 128;
  mav["text_config"]["max_position_embeddings"] = 1048576;
  Json layers = Json::array();
  for (int i = 1; i < 48; i += 2) layers.push_back(i);
  mav["text_config"]["moe_layers"] = layers;
  m = ResolveModel(mav, "/model");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectSameArchitecture(*m, Preset("llama4-maverick"));

  mav["text_config"]["moe_layers"] = Json::array({0, 1});
  m = ResolveModel(mav, "/model");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/model/text_config/moe_layers"), std::string::npos)
      << m.status().message();
}

// allenai/OLMoE-1B-7B-0924 config.json's architecture keys.
TEST(MoeHuggingFace, OlmoeAndQwenLayouts) {
  Json olmoe = MustParse(R"({
    "architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "attention_bias": false,
    "attention_dropout": 0.0, "clip_qkv": null, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 1024, "max_position_embeddings": 4096, "norm_topk_prob": false,
    "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8,
    "num_hidden_layers": 16, "num_key_value_heads": 16, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 50304
  })");
  Result<ModelSpec> m = ParseHuggingFaceConfig(olmoe, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectSameArchitecture(*m, Preset("olmoe-1b-7b"));

  // Qwen's mlp_only_layers: the first k layers are representable, others are not.
  Json q = ReadHfFile("qwen3-30b-a3b.config.json");
  q["mlp_only_layers"] = Json::array({0, 1});
  m = ParseHuggingFaceConfig(q, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->first_dense_layers, 2);
  EXPECT_EQ(m->moe_layer_count(), 46);
  q["mlp_only_layers"] = Json::array({5});
  m = ParseHuggingFaceConfig(q, "");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/mlp_only_layers"), std::string::npos);
}

TEST(MoeSpec, ValidationNamesTheField) {
  ModelSpec m = Preset("mixtral-8x7b");
  m.top_k = 9;
  Status st = ValidateModel(m, "/model");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/model/top_k"), std::string::npos) << st.message();

  ModelSpec dense = Preset("llama3-8b");
  dense.top_k = 2;  // MoE fields without experts
  st = ValidateModel(dense, "/model");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/model/top_k"), std::string::npos) << st.message();

  ModelSpec mla = Preset("deepseek-v3");
  mla.v_head_dim = 0;
  st = ValidateModel(mla, "");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/v_head_dim"), std::string::npos);

  ModelSpec huge = Preset("deepseek-v3");
  huge.experts = kMaxModelExperts;
  huge.moe_ffn_hidden = kMaxModelFfnHidden;
  huge.layers = kMaxModelLayers;
  st = ValidateModel(huge, "");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2^62"), std::string::npos) << st.message();

  // Group-limited routing: equal groups of the experts, a top-k among them.
  ModelSpec grouped = Preset("deepseek-v3");
  grouped.router_groups = 7;  // 256 experts do not split into 7 groups
  st = ValidateModel(grouped, "");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/router_groups"), std::string::npos) << st.message();
  grouped.router_groups = 8;
  grouped.router_group_topk = 9;
  st = ValidateModel(grouped, "");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/router_group_topk"), std::string::npos) << st.message();
  grouped.router_groups = 0;
  grouped.router_group_topk = 4;
  EXPECT_FALSE(ValidateModel(grouped, "").ok());

  // A dense document does not gain the new keys; a MoE one round-trips.
  EXPECT_FALSE(ModelSpecToJson(Preset("llama3-8b")).contains("experts"));
  for (const char* name : {"deepseek-v3", "llama4-maverick", "gpt-oss-120b"}) {
    Result<ModelSpec> back = ParseModelSpec(ModelSpecToJson(Preset(name)), "");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(*back == Preset(name)) << name;
  }
}

// A request that names no length or batch trains as the model's authors
// published: DeepSeek-V3 report §4.2 (4K tokens, batch 15360), Llama 3 paper
// §3.4.1 (8,192 tokens, 16M tokens per batch), Qwen3 report §3.2 (4,096 tokens,
// no batch published: 4M tokens, Llama 2's batch, Touvron et al. 2023 §2.2).
TEST(PretrainDefaults, PublishedLengthsAndBatches) {
  const ModelSpec v3 = Preset("deepseek-v3");
  EXPECT_EQ(DefaultSeqLen(v3), 4096);
  EXPECT_EQ(DefaultGlobalBatch(v3, 4096), 15360);
  EXPECT_EQ(DefaultGlobalBatch(v3, 8192), 7680);  // the same tokens per step

  const ModelSpec l405 = Preset("llama3.1-405b");
  EXPECT_EQ(DefaultSeqLen(l405), 8192);
  EXPECT_EQ(DefaultGlobalBatch(l405, 8192) * 8192, int64_t{16} << 20);

  for (const char* name : {"qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    const ModelSpec q = Preset(name);
    EXPECT_EQ(DefaultSeqLen(q), 4096) << name;
    EXPECT_EQ(DefaultGlobalBatch(q, 4096) * 4096, int64_t{4} << 20) << name;
  }
  // No pretraining length stated: the context length (GPT-3's n_ctx 2048).
  EXPECT_EQ(DefaultSeqLen(Preset("gpt3-175b")), 2048);
  EXPECT_EQ(DefaultGlobalBatch(Preset("gpt3-175b"), 1 << 23), 1);  // never below one sequence
  // A context beyond the longest published pretraining length (Llama 3's 8192,
  // §3.4.1) is a long-context stage's: Llama 3.1 8B's 128K (§3.4.2) and Llama 4
  // Maverick's 1M default to 8192, with the 4M-token batch at that length.
  EXPECT_EQ(kLongestPretrainSeqLen, 8192);
  for (const char* name : {"llama3.1-8b", "llama4-maverick", "gpt-oss-120b", "mixtral-8x22b"}) {
    const ModelSpec m = Preset(name);
    ASSERT_GT(m.max_seq_len, 8192) << name;
    EXPECT_EQ(DefaultSeqLen(m), 8192) << name;
    EXPECT_EQ(DefaultGlobalBatch(m, 8192), 512) << name;
  }
  EXPECT_EQ(DefaultSeqLen(Preset("llama2-7b")), 4096);  // a shorter context stays

  // A request that states them keeps its own.
  Result<TrainingSpec> t =
      ParseTraining(MustParse(R"({"seq_len": 8192, "global_batch": 64})"), "/training", v3);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->seq_len, 8192);
  EXPECT_EQ(t->global_batch, 64);
  t = ParseTraining(MustParse("{}"), "/training", v3);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->seq_len, 4096);
  EXPECT_EQ(t->global_batch, 15360);

  // A batch without its length is refused by name; the keys round-trip.
  ModelSpec bad = Preset("llama3-8b");
  bad.pretrain_global_batch = 512;
  Status st = ValidateModel(bad, "/model");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/model/pretrain_global_batch"), std::string::npos) << st.message();
  Result<ModelSpec> back = ParseModelSpec(ModelSpecToJson(v3), "");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == v3);
  EXPECT_FALSE(ModelSpecToJson(Preset("llama3-8b")).contains("pretrain_seq_len"));
}

// moe_layer_count is the number of layers is_moe_layer marks, for every
// interleave step and leading dense block.
TEST(MoeLayers, CountMatchesIsMoeLayer) {
  ModelSpec m;
  m.experts = 8;
  m.top_k = 2;
  for (int layers : {1, 2, 24, 48, 61, 94}) {
    for (int step : {1, 2, 3, 4}) {
      for (int dense : {0, 1, 3, 5, 61, 100}) {
        m.layers = layers;
        m.moe_layer_step = step;
        m.first_dense_layers = dense;
        int n = 0;
        for (int i = 0; i < layers; ++i) n += m.is_moe_layer(i) ? 1 : 0;
        EXPECT_EQ(m.moe_layer_count(), n)
            << layers << " layers, step " << step << ", " << dense << " dense";
      }
    }
  }
}

}  // namespace
}  // namespace paratune::planner
