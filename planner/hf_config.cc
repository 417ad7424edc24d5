// planner/hf_config.cc: a Hugging Face config.json read into a ModelSpec, as
// transformers builds the model of each model_type (planner/model.h).
#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "common/strings.h"
#include "planner/model.h"

namespace paratune::planner {
namespace {

// model_type values whose HF implementation is Llama-like: RMSNorm, gated FFN
// (gate/up/down), no linear biases unless attention_bias says so, untied embeddings
// by default. The mixture-of-experts families are built the same way around their
// experts (transformers' modeling_mixtral, _qwen3_moe, _deepseek_v3, _gpt_oss,
// _llama4, _olmoe).
bool IsLlamaLikeType(const std::string& model_type) {
  static constexpr std::string_view kTypes[] = {
      "llama",       "mistral",     "phi3",    "mixtral",     "qwen3_moe", "qwen2_moe",
      "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "olmoe"};
  return std::find(std::begin(kTypes), std::end(kTypes), model_type) != std::end(kTypes);
}

// model_type values whose MLP is gated whatever its activation is called (Gemma's
// "gelu_pytorch_tanh" drives a GeGLU).
bool IsGatedType(const std::string& model_type) {
  static constexpr std::string_view kTypes[] = {
      "llama",     "mistral",   "mixtral",     "phi3",        "qwen2",   "gemma",       "gemma2",
      "qwen3_moe", "qwen2_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "olmoe"};
  return std::find(std::begin(kTypes), std::end(kTypes), model_type) != std::end(kTypes);
}

bool IsGatedActivation(const std::string& act) {
  static constexpr std::string_view kGated[] = {"silu",  "swiglu", "swish",
                                                "geglu", "gegelu", "reglu"};
  return std::find(std::begin(kGated), std::end(kGated), act) != std::end(kGated);
}

// Reads the first present, non-null key of `keys` as an int into *out; *found says
// whether one was (HF configs write null for "not used", e.g. DeepSeek-V2-Lite's
// q_lora_rank).
Status FirstInt(ObjectReader& r, std::initializer_list<std::string_view> keys, int* out,
                bool* found) {
  *found = false;
  for (std::string_view key : keys) {
    if (!r.Has(key) || r.Raw(key).is_null()) continue;
    int64_t v = 0;
    PT_RETURN_IF_ERROR(r.Integer(key, &v));
    if (v < 0 || v > INT32_MAX) return r.Error(key, "is out of range");
    *out = static_cast<int>(v);
    *found = true;
    return Status::Ok();
  }
  return Status::Ok();
}

Status RequiredFirstInt(ObjectReader& r, std::initializer_list<std::string_view> keys, int* out) {
  bool found = false;
  PT_RETURN_IF_ERROR(FirstInt(r, keys, out, &found));
  if (!found) return r.Error(*keys.begin(), "is required");
  return Status::Ok();
}

// Counts the entries of the array `key` that satisfy `pred`; *found = the key is an array.
template <typename Pred>
Status CountArray(ObjectReader& r, std::string_view key, Pred pred, int* count, bool* found) {
  *count = 0;
  *found = false;
  if (!r.Has(key) || r.Raw(key).is_null()) return Status::Ok();
  const Json& a = r.Raw(key);
  if (!a.is_array()) return r.Error(key, "must be an array");
  *found = true;
  for (const Json& e : a) *count += pred(e) ? 1 : 0;
  return Status::Ok();
}

// The mixture-of-experts, MLA, MTP and sliding-window fields of an HF config
// (model.h lists the keys per model_type). Leaves a dense config unchanged.
// RoPE's base (rope_theta, or rope_parameters.rope_theta in transformers 5)
// and the Llama 3.x frequency scaling (rope_scaling with rope_type, or the
// older type, "llama3", and its factor). Other scaling types are not carried.
Status ReadHuggingFaceRope(ObjectReader& r, ModelSpec* m) {
  if (r.Has("rope_theta") && r.Raw("rope_theta").is_number()) {
    PT_RETURN_IF_ERROR(r.OptNumber("rope_theta", &m->rope_theta));
  } else if (r.Has("rope_parameters") && r.Raw("rope_parameters").is_object()) {
    const Json& params = r.Raw("rope_parameters");
    if (params.contains("rope_theta") && params["rope_theta"].is_number()) {
      m->rope_theta = params["rope_theta"].get<double>();
    }
  }
  if (!r.Has("rope_scaling") || !r.Raw("rope_scaling").is_object()) return Status::Ok();
  const Json& scaling = r.Raw("rope_scaling");
  const std::string type = scaling.value("rope_type", scaling.value("type", std::string()));
  if (type == "llama3" && scaling.contains("factor") && scaling["factor"].is_number()) {
    m->rope_llama3_scaling = scaling["factor"].get<double>();
  }
  return Status::Ok();
}

// The norm epsilon (rms_norm_eps, or layer_norm_eps / layer_norm_epsilon for
// LayerNorm models), the Q/K norms transformers builds for the model_type
// (Qwen3Attention and Qwen3MoeAttention: q_norm and k_norm of head_dim;
// OlmoeAttention: q_norm of hidden_size, k_norm of kv heads · head_dim) and
// gpt-oss's attention sinks and clamped activation (GptOssAttention.sinks,
// GptOssExperts' swiglu_limit).
Status ReadHuggingFaceNorms(ObjectReader& r, const std::string& model_type, ModelSpec* m) {
  for (const char* key : {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"}) {
    if (!r.Has(key) || !r.Raw(key).is_number()) continue;
    PT_RETURN_IF_ERROR(r.OptNumber(key, &m->norm_eps));
    break;
  }
  if (model_type == "qwen3" || model_type == "qwen3_moe") m->qk_norm = "head";
  if (model_type == "olmoe") m->qk_norm = "full";
  if (model_type == "gpt_oss") {
    m->attention_sinks = true;
    if (r.Has("swiglu_limit") && r.Raw("swiglu_limit").is_number()) {
      PT_RETURN_IF_ERROR(r.OptNumber("swiglu_limit", &m->swiglu_limit));
    }
  }
  return Status::Ok();
}

Status ReadHuggingFaceMoe(ObjectReader& r, const std::string& model_type, ModelSpec* m) {
  const bool deepseek = model_type == "deepseek_v2" || model_type == "deepseek_v3";
  const bool qwen = model_type == "qwen3_moe" || model_type == "qwen2_moe";
  const bool llama4 = model_type == "llama4_text";
  // Families whose experts are intermediate_size wide (no separate moe_intermediate_size).
  const bool expert_is_intermediate =
      model_type == "mixtral" || model_type == "olmoe" || model_type == "gpt_oss" || llama4;
  bool found = false;
  int experts = 0;
  const char* experts_key = "num_local_experts";
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    PT_RETURN_IF_ERROR(FirstInt(r, {key}, &experts, &found));
    if (found) {
      experts_key = key;
      break;
    }
  }
  if (experts > 1) {
    if (experts > kMaxModelExperts) return r.Error(experts_key, "is out of range");
    m->experts = experts;
    PT_RETURN_IF_ERROR(
        FirstInt(r, {"num_experts_per_tok", "experts_per_token"}, &m->top_k, &found));
    if (!found)
      return r.Error("num_experts_per_tok", "is required for a mixture-of-experts config");
    if (expert_is_intermediate) {
      m->moe_ffn_hidden = m->ffn_hidden;
    } else {
      PT_RETURN_IF_ERROR(FirstInt(r, {"moe_intermediate_size"}, &m->moe_ffn_hidden, &found));
      if (!found) {
        return r.Error("moe_intermediate_size", "is required for a " + model_type + " config");
      }
    }
    if (deepseek) {
      int shared = 0;
      PT_RETURN_IF_ERROR(FirstInt(r, {"n_shared_experts"}, &shared, &found));
      m->shared_ffn_hidden = shared * m->moe_ffn_hidden;
      PT_RETURN_IF_ERROR(FirstInt(r, {"first_k_dense_replace"}, &m->first_dense_layers, &found));
      int freq = 1;
      PT_RETURN_IF_ERROR(FirstInt(r, {"moe_layer_freq"}, &freq, &found));
      if (freq != 1) {
        // DeepSeek's layout (layer i >= k is MoE when i % freq == 0) differs from
        // the every-step-th rule this spec holds except at 1, the published value.
        return r.Error("moe_layer_freq", "is " + std::to_string(freq) +
                                             ": only 1 (every layer after the dense ones) is "
                                             "modelled");
      }
      std::string scoring;
      if (r.Has("scoring_func") && r.Raw("scoring_func").is_string()) {
        PT_RETURN_IF_ERROR(r.String("scoring_func", &scoring));
        if (scoring == "sigmoid") m->router = "sigmoid";
      }
      // Group-limited routing (DeepSeek-V2 "group_limited_greedy", V3 "noaux_tc"):
      // n_group groups, topk_group of them per token; 1 = every expert open.
      // Megatron-Bridge maps the pair to moe_router_num_groups / group_topk
      // (models/conversion/model_bridge.py:469-470 @v0.6.0).
      int groups = 0, group_topk = 0;
      PT_RETURN_IF_ERROR(FirstInt(r, {"n_group"}, &groups, &found));
      PT_RETURN_IF_ERROR(FirstInt(r, {"topk_group"}, &group_topk, &found));
      if (groups > 1) {
        m->router_groups = groups;
        m->router_group_topk = group_topk;
      }
    }
    if (qwen) {
      PT_RETURN_IF_ERROR(
          FirstInt(r, {"shared_expert_intermediate_size"}, &m->shared_ffn_hidden, &found));
      PT_RETURN_IF_ERROR(FirstInt(r, {"decoder_sparse_step"}, &m->moe_layer_step, &found));
      if (m->moe_layer_step < 1) m->moe_layer_step = 1;
      if (r.Has("mlp_only_layers") && !r.Raw("mlp_only_layers").is_null()) {
        const Json& dense = r.Raw("mlp_only_layers");
        if (!dense.is_array()) return r.Error("mlp_only_layers", "must be an array");
        // Representable only as the first k layers.
        for (size_t i = 0; i < dense.size(); ++i) {
          if (!dense[i].is_number_integer() || dense[i].get<int64_t>() != static_cast<int64_t>(i)) {
            return r.Error("mlp_only_layers",
                           "must list the first layers in order (0, 1, ...): other dense-layer "
                           "layouts are not modelled");
          }
        }
        m->first_dense_layers = static_cast<int>(dense.size());
      }
    }
    if (llama4) {
      // Every Llama 4 MoE layer has one shared expert as wide as a routed one, and
      // the dense layers between them are intermediate_size_mlp wide
      // (transformers modeling_llama4: Llama4TextMoe.shared_expert, Llama4TextMLP).
      m->shared_ffn_hidden = m->moe_ffn_hidden;
      PT_RETURN_IF_ERROR(FirstInt(r, {"intermediate_size_mlp"}, &m->ffn_hidden, &found));
      PT_RETURN_IF_ERROR(FirstInt(r, {"interleave_moe_layer_step"}, &m->moe_layer_step, &found));
      if (m->moe_layer_step < 1) m->moe_layer_step = 1;
      m->router = "sigmoid";
      if (r.Has("moe_layers") && r.Raw("moe_layers").is_array()) {
        const Json& moe_layers = r.Raw("moe_layers");
        int n = 0;
        for (const Json& e : moe_layers) {
          if (!e.is_number_integer()) return r.Error("moe_layers", "must hold layer indices");
          const int64_t i = e.get<int64_t>();
          if (i < 0 || i >= m->layers || (i + 1) % m->moe_layer_step != 0) {
            return r.Error("moe_layers",
                           "must be every interleave_moe_layer_step-th layer: other "
                           "layouts are not modelled");
          }
          ++n;
        }
        if (n * m->moe_layer_step != m->layers) {
          return r.Error("moe_layers",
                         "must be every interleave_moe_layer_step-th layer: other "
                         "layouts are not modelled");
        }
      }
    }
  }
  // Multi-head latent attention (DeepSeek-V2/V3).
  PT_RETURN_IF_ERROR(FirstInt(r, {"kv_lora_rank"}, &m->kv_lora_rank, &found));
  if (m->kv_lora_rank > 0) {
    PT_RETURN_IF_ERROR(FirstInt(r, {"q_lora_rank"}, &m->q_lora_rank, &found));
    PT_RETURN_IF_ERROR(FirstInt(r, {"qk_nope_head_dim"}, &m->qk_nope_head_dim, &found));
    PT_RETURN_IF_ERROR(FirstInt(r, {"qk_rope_head_dim"}, &m->qk_rope_head_dim, &found));
    PT_RETURN_IF_ERROR(FirstInt(r, {"v_head_dim"}, &m->v_head_dim, &found));
  }
  PT_RETURN_IF_ERROR(FirstInt(r, {"num_nextn_predict_layers"}, &m->mtp_layers, &found));
  if (model_type == "gpt_oss") {
    int sliding = 0;
    PT_RETURN_IF_ERROR(CountArray(
        r, "layer_types",
        [](const Json& e) { return e.is_string() && e.get<std::string>() == "sliding_attention"; },
        &sliding, &found));
    if (sliding > 0) {
      PT_RETURN_IF_ERROR(FirstInt(r, {"sliding_window"}, &m->sliding_window, &found));
      if (found && m->sliding_window > 0) m->sliding_layers = sliding;
    }
  }
  if (llama4) {
    // Chunked attention on the RoPE layers (no_rope_layers[i] == 1), global on the rest.
    int chunk = 0, rope_layers = 0;
    PT_RETURN_IF_ERROR(FirstInt(r, {"attention_chunk_size"}, &chunk, &found));
    PT_RETURN_IF_ERROR(CountArray(
        r, "no_rope_layers", [](const Json& e) { return e.is_number() && e.get<double>() != 0; },
        &rope_layers, &found));
    if (chunk > 0 && rope_layers > 0) {
      m->sliding_window = chunk;
      m->sliding_layers = std::min(rope_layers, m->layers);
      m->chunked_attention = true;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ParseHuggingFaceConfig(const Json& j, const std::string& name,
                                         const std::string& pointer) {
  if (!j.is_object()) {
    return Status::InvalidArgument((pointer.empty() ? std::string("/") : pointer) +
                                   ": must be a JSON object");
  }
  // Not strict: a config.json carries dozens of keys the cost model has no use for.
  ObjectReader r(j, pointer);
  ModelSpec m;
  std::string model_type;
  PT_RETURN_IF_ERROR(r.OptString("model_type", &model_type));
  model_type = AsciiLower(model_type);
  if (model_type == "llama4" && r.Has("text_config") && r.Raw("text_config").is_object()) {
    // The multimodal Llama 4 config nests the language model; its embeddings'
    // tying is stated at the top level.
    Json text = r.Raw("text_config");
    text["model_type"] = "llama4_text";
    if (j.contains("tie_word_embeddings")) text["tie_word_embeddings"] = j["tie_word_embeddings"];
    if (j.contains("_name_or_path") && !text.contains("_name_or_path")) {
      text["_name_or_path"] = j["_name_or_path"];
    }
    return ParseHuggingFaceConfig(text, name, r.PointerOf("text_config"));
  }
  const bool llama_like = IsLlamaLikeType(model_type);

  PT_RETURN_IF_ERROR(RequiredFirstInt(r, {"num_hidden_layers", "n_layer"}, &m.layers));
  PT_RETURN_IF_ERROR(RequiredFirstInt(r, {"hidden_size", "n_embd"}, &m.hidden));
  PT_RETURN_IF_ERROR(RequiredFirstInt(r, {"num_attention_heads", "n_head"}, &m.heads));
  PT_RETURN_IF_ERROR(RequiredFirstInt(r, {"vocab_size"}, &m.vocab));
  bool found = false;
  m.kv_heads = m.heads;
  PT_RETURN_IF_ERROR(FirstInt(r, {"num_key_value_heads"}, &m.kv_heads, &found));
  PT_RETURN_IF_ERROR(
      FirstInt(r, {"max_position_embeddings", "n_positions"}, &m.max_seq_len, &found));
  if (found && (m.max_seq_len < 1 || m.max_seq_len > kMaxModelSeqLen)) {
    return r.Error(r.Has("max_position_embeddings") ? "max_position_embeddings" : "n_positions",
                   "must be in [1, " + std::to_string(kMaxModelSeqLen) + "]");
  }

  std::string act;
  if (r.Has("hidden_act")) {
    PT_RETURN_IF_ERROR(r.String("hidden_act", &act));
  } else if (r.Has("activation_function")) {
    PT_RETURN_IF_ERROR(r.String("activation_function", &act));
  }
  m.gated_ffn = IsGatedActivation(AsciiLower(act)) || IsGatedType(model_type);

  PT_RETURN_IF_ERROR(FirstInt(r, {"intermediate_size", "n_inner"}, &m.ffn_hidden, &found));
  if (!found) {
    // GPT-2's n_inner is null for "4 × n_embd"; a gated FFN has no such convention.
    if (m.gated_ffn) return r.Error("intermediate_size", "is required for a gated FFN");
    if (m.hidden > kMaxModelHidden) return r.Error("hidden_size", "is out of range");
    m.ffn_hidden = 4 * m.hidden;
  }

  m.norm = r.Has("rms_norm_eps") ? "rmsnorm" : "layernorm";

  m.tied_embeddings = !llama_like;
  PT_RETURN_IF_ERROR(r.OptBool("tie_word_embeddings", &m.tied_embeddings));

  bool attention_bias = false, mlp_bias = false, bias = false;
  const bool has_attention_bias = r.Has("attention_bias"), has_mlp_bias = r.Has("mlp_bias");
  PT_RETURN_IF_ERROR(r.OptBool("attention_bias", &attention_bias));
  PT_RETURN_IF_ERROR(r.OptBool("mlp_bias", &mlp_bias));
  if (has_attention_bias || has_mlp_bias) {
    // One switch covers both; a config with only one of them set is over-counted
    // by the other's biases (a few h-sized vectors per layer).
    m.linear_bias = attention_bias || mlp_bias;
  } else if (r.Has("bias")) {
    PT_RETURN_IF_ERROR(r.OptBool("bias", &bias));
    m.linear_bias = bias;
  } else {
    // LayerNorm-era models (GPT-2, GPT-NeoX, OPT, Phi-2) carry biases; RMSNorm ones do not.
    m.linear_bias = m.norm == "layernorm" && !llama_like;
  }

  m.dropout = false;
  for (std::string_view key :
       {"attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
        "hidden_dropout_prob", "attention_probs_dropout_prob", "dropout"}) {
    // Some configs spell dropout as a bool or a string; only numbers count.
    if (!r.Has(key) || !r.Raw(key).is_number()) continue;
    double p = 0;
    PT_RETURN_IF_ERROR(r.OptNumber(key, &p));
    if (p > 0) m.dropout = true;
  }

  if (r.Has("head_dim") && !r.Raw("head_dim").is_null() && m.heads > 0) {
    int64_t head_dim = 0;
    PT_RETURN_IF_ERROR(r.Integer("head_dim", &head_dim));
    if (head_dim < 1 || head_dim > kMaxModelHidden) return r.Error("head_dim", "is out of range");
    // A head_dim equal to hidden / heads is the default and stays implicit.
    if (m.hidden % m.heads != 0 || head_dim != m.hidden / m.heads) {
      m.head_dim_override = static_cast<int>(head_dim);
    }
  }
  PT_RETURN_IF_ERROR(ReadHuggingFaceMoe(r, model_type, &m));
  PT_RETURN_IF_ERROR(ReadHuggingFaceRope(r, &m));
  PT_RETURN_IF_ERROR(ReadHuggingFaceNorms(r, model_type, &m));

  m.name = name;
  std::string name_or_path;
  PT_RETURN_IF_ERROR(r.OptString("_name_or_path", &name_or_path));
  if (m.name.empty()) m.name = name_or_path;
  if (m.name.empty()) m.name = model_type.empty() ? "hf-model" : model_type;
  m.source = "Hugging Face config.json" +
             (model_type.empty() ? std::string() : " (model_type " + model_type + ")");

  PT_RETURN_IF_ERROR(ValidateModel(m, pointer));
  return m;
}

}  // namespace paratune::planner
