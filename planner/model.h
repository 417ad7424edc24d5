// planner/model.h: a transformer's architecture as the cost model sees it.
// Presets (planner/presets/models/*.json, each with a `source`) cover the GPT-3
// family, the Megatron 2021 weak-scaling family, AxoNN's GPT family, Llama 2/3/3.1,
// phi-3-mini and Mistral 7B. GQA, gated FFNs and untied embeddings are
// first-class. A Hugging Face config.json loads as a model too.
//
// Parameter accounting (ParamCount): every block has QKV (h·qkv_out), output
// projection (h·h), FFN ((gated ? 3 : 2)·h·f), biases when linear_bias
// (qkv_out + h + (gated ? 2 : 1)·f + h) and two norms (h each for RMSNorm, 2·h for
// LayerNorm weight + bias). Outside the blocks: the token embedding V·h (twice when
// untied), the final norm, and learned absolute positions max_seq_len·h when the
// model has them. The spec carries no position-encoding field, so learned positions
// are inferred: a LayerNorm model with a known max_seq_len (GPT-2/GPT-3/Megatron GPT)
// has them, an RMSNorm model (Llama, Mistral, Phi-3: RoPE) does not. A LayerNorm
// model with rotary positions (GPT-NeoX, Phi-2) is over-counted by max_seq_len·h
// (0.06 % of GPT-NeoX-20B, 0.2 % of Phi-2).
//
// All functions here are pure; ModelPreset/ModelPresetNames read a table parsed
// once (thread-safe static initialisation) from the presets compiled into the binary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;    // = heads for multi-head attention; fewer for GQA/MQA
  int ffn_hidden = 0;  // intermediate width f (per matrix for gated FFNs)
  int vocab = 0;
  bool gated_ffn = false;  // SwiGLU-style: 3 FFN matrices (gate, up, down) instead of 2
  bool tied_embeddings = true;
  bool dropout = false;      // attention + hidden dropout active in training (GPT-3/Megatron: yes)
  bool linear_bias = false;  // biases on the linear layers
  std::string norm = "layernorm";  // "layernorm" | "rmsnorm"
  int max_seq_len = 0;             // 0 = unknown
  std::string source;

  // Field-wise equality (name and source included).
  bool operator==(const ModelSpec&) const = default;

  int head_dim() const { return hidden / heads; }
  // Output features of the fused QKV projection: h + 2·kv_heads·head_dim.
  int64_t qkv_out() const { return hidden + 2LL * kv_heads * head_dim(); }
  // Parameters of one transformer block (all linears, norms, biases).
  int64_t ParamsPerLayer() const;
  // Parameters of one norm layer: h (RMSNorm) or 2·h (LayerNorm weight + bias).
  int64_t NormParams() const;
  // Input embedding (V·h) plus, when untied, the output projection (V·h); plus final norm.
  // Learned positions are not included (see PositionParams).
  int64_t EmbeddingParams() const;
  // True when the model has learned absolute position embeddings: norm == "layernorm"
  // and max_seq_len > 0 (see the file comment for why this is inferred).
  bool learned_positions() const { return norm == "layernorm" && max_seq_len > 0; }
  // max_seq_len·h when learned_positions(), else 0. They live beside the input
  // embedding (first pipeline stage).
  int64_t PositionParams() const;
  // Total parameter count Ψ = layers·ParamsPerLayer + EmbeddingParams + PositionParams.
  // REQUIRES: the spec passed ValidateModel (no overflow then).
  int64_t ParamCount() const;
  // Forward FLOPs per token of the dense math (linears + attention scores over
  // `seq_len` keys + logits), the Korthikanti Eq. 7 accounting generalised to
  // GQA and gated FFNs. Model FLOPs per iteration = 3 × this × tokens.
  // Per layer 2·(h·qkv_out + h·h + (gated ? 3 : 2)·h·f) + 4·seq_len·h, plus 2·h·V for
  // the logits; biases, norms and softmax are not counted (as in Eq. 7).
  // REQUIRES: seq_len >= 0.
  double ForwardFlopsPerToken(int seq_len) const;
};

// Checks the shape rules (positive sizes, heads divide hidden, kv_heads divide
// heads); errors name `pointer`.
// Also: norm is "layernorm" or "rmsnorm", max_seq_len >= 0, and every size within
// the k*Max* bounds below (so parameter counts cannot overflow int64). Errors are
// kInvalidArgument "<pointer>/<field>: <rule>".
inline constexpr int kMaxModelLayers = 1 << 16;
inline constexpr int kMaxModelHidden = 1 << 20;
inline constexpr int kMaxModelFfnHidden = 1 << 22;
inline constexpr int kMaxModelVocab = 1 << 24;
inline constexpr int kMaxModelSeqLen = 1 << 26;
Status ValidateModel(const ModelSpec& m, const std::string& pointer);

// Parses the preset / request form: {name?, layers, hidden, heads, kv_heads?,
// ffn_hidden?, vocab, gated_ffn?, tied_embeddings?, dropout?, linear_bias?, norm?,
// max_seq_len?, source?}. Strict.
// layers, hidden, heads and vocab are required; kv_heads defaults to heads and
// ffn_hidden to 4·hidden; the rest default as in ModelSpec. An unknown key, a wrong
// type or a shape rule (ValidateModel) fails with kInvalidArgument naming the field's
// JSON pointer under `pointer`.
Result<ModelSpec> ParseModelSpec(const Json& j, const std::string& pointer);
// The preset form of `m`, every field written; ParseModelSpec(ModelSpecToJson(m)) == m.
Json ModelSpecToJson(const ModelSpec& m);

// Parses a Hugging Face config.json (num_hidden_layers, hidden_size,
// intermediate_size, num_attention_heads, num_key_value_heads, vocab_size,
// max_position_embeddings, tie_word_embeddings, hidden_act, model_type ...).
// Unknown keys are ignored (HF configs carry many); missing required ones are errors.
// GPT-2 names (n_layer, n_embd, n_head, n_inner, n_positions) are read too. Mapping:
// gated_ffn when hidden_act is silu/swiglu (or another GLU) or model_type is a
// Llama-like family; rmsnorm when rms_norm_eps is present; tie_word_embeddings
// defaults to false for llama/mistral/phi3 and true otherwise; linear_bias from
// attention_bias || mlp_bias (or `bias`), else true for LayerNorm models only;
// dropout when any *dropout / *_pdrop value is > 0. A head_dim other than
// hidden/heads, or a mixture-of-experts config (num_local_experts > 1), is
// kInvalidArgument: this spec cannot represent them. `name` empty = take
// _name_or_path, else model_type.
Result<ModelSpec> ParseHuggingFaceConfig(const Json& j, const std::string& name);

// A preset name, a model object, or an HF config object (recognised by
// "num_hidden_layers" or "n_layer"). An unknown preset name is kNotFound naming
// `pointer` and listing the valid names; errors inside objects name the field's
// pointer under `pointer`.
Result<ModelSpec> ResolveModel(const Json& j, const std::string& pointer);

// Names of the compiled-in model presets, sorted.
std::vector<std::string> ModelPresetNames();
// The preset called `name` (its `name` field); kNotFound listing the valid names.
Result<ModelSpec> ModelPreset(const std::string& name);

}  // namespace paratune::planner
