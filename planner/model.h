// planner/model.h: a transformer's architecture as the cost model sees it.
// Presets (planner/presets/models/*.json, each with a `source`) cover the GPT-3
// family, the Megatron 2021 weak-scaling family, AxoNN's GPT family, Llama 2/3/3.1,
// phi-3-mini, Mistral 7B and the mixture-of-experts families (Mixtral, DeepSeek-V2/V3,
// Qwen3-MoE, gpt-oss, Llama 4, OLMoE). GQA, gated FFNs, untied embeddings, an
// explicit head dimension, multi-head latent attention (MLA), routed and shared
// experts, dense-first layers, interleaved MoE layers, multi-token prediction (MTP)
// and sliding-window layers are first-class. A Hugging Face config.json loads as a
// model too.
//
// Parameter accounting (ParamCount): every block has its attention (standard:
// Q h·(a·d), K and V h·(kv·d) each, output (a·d)·h, Q/K norm weights (2·d per
// head-wise norm, a·d + kv·d for full-width ones) and one sink logit per head
// where the model has them; MLA: see MlaParams), its MLP
// (dense: (gated ? 3 : 2)·h·f; MoE: the router h·E, E routed experts of
// (gated ? 3 : 2)·h·f_e each and the shared experts' (gated ? 3 : 2)·h·f_s), biases
// when linear_bias (attention qkv_out + h; each MLP matrix its output width; the
// router E) and two norms (h each for RMSNorm, 2·h for LayerNorm weight + bias).
// Outside the blocks: the token embedding V·h (twice when untied), the final norm,
// learned absolute positions max_seq_len·h when the model has them, and each MTP
// module (DeepSeek-V3 §2.2: two RMSNorms, the 2h×h projection, one transformer block
// like the last layer, and its output norm; the embedding and output head are shared).
// The spec carries no position-encoding field, so learned positions are inferred: a
// LayerNorm model with a known max_seq_len (GPT-2/GPT-3/Megatron GPT) has them, an
// RMSNorm model (Llama, Mistral, Phi-3: RoPE) does not. A LayerNorm model with rotary
// positions (GPT-NeoX, Phi-2) is over-counted by max_seq_len·h (0.06 % of
// GPT-NeoX-20B, 0.2 % of Phi-2).
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
  int ffn_hidden = 0;  // intermediate width f of the dense MLP (per matrix for gated FFNs)
  int vocab = 0;
  bool gated_ffn = false;  // SwiGLU-style: 3 FFN matrices (gate, up, down) instead of 2
  bool tied_embeddings = true;
  bool dropout = false;      // attention + hidden dropout active in training (GPT-3/Megatron: yes)
  bool linear_bias = false;  // biases on the linear layers (and on the experts and router)
  std::string norm = "layernorm";  // "layernorm" | "rmsnorm"
  int max_seq_len = 0;             // 0 = unknown
  // The published pretraining run's sequence length (tokens) and global batch
  // (sequences per step), where the model's source states them (0 = not
  // stated): a request that names no seq_len or global_batch takes them
  // (planner/request.h, DefaultGlobalBatch). A batch needs its length.
  int pretrain_seq_len = 0;
  int64_t pretrain_global_batch = 0;
  // Per-head width d when it is not hidden / heads (Qwen3: 128 with h 4096 and 64
  // heads; gpt-oss: 64 with h 2880). 0 = hidden / heads. Megatron's --kv-channels.
  int head_dim_override = 0;
  // Rotary position embeddings: the base θ of the frequencies (Hugging Face
  // rope_theta; Llama 3: 500000) and the Llama 3.x frequency scaling factor
  // (rope_scaling {rope_type "llama3", factor}; Llama 3.1: 8). 0 = not stated
  // (no RoPE, or the source does not give it) / no such scaling. Other scaling
  // schemes (YaRN) are not carried.
  double rope_theta = 0;
  double rope_llama3_scaling = 0;
  // Normalisation epsilon as the model's config.json states it (rms_norm_eps or
  // layer_norm_eps; Qwen3 and DeepSeek: 1e-6). 0 = not stated: the frameworks'
  // default, 1e-5, applies.
  double norm_eps = 0;
  // Normalisation of the queries and keys before attention: "" none; "head" an
  // RMSNorm over each head's head_dim, one weight shared by the heads (Qwen3's
  // q_norm and k_norm, Megatron's --qk-layernorm); "full" one RMSNorm over all
  // query features and one over all key features (OLMoE: q_norm of heads·d,
  // k_norm of kv_heads·d).
  std::string qk_norm{};
  // A learned sink logit per head in every attention softmax (gpt-oss;
  // Megatron's --softmax-type learnable).
  bool attention_sinks = false;
  // gpt-oss's gated activation: (up + 1)·gate·σ(1.702·gate), the gate clamped
  // to at most `swiglu_limit` and up to ±swiglu_limit (config.json swiglu_limit
  // 7.0). 0 = plain SwiGLU (silu(gate)·up) when gated_ffn.
  double swiglu_limit = 0;

  // Mixture of experts (0 experts = a dense model; every field below is then 0/default).
  int experts = 0;             // routed experts per MoE layer (Megatron --num-experts)
  int top_k = 0;               // experts each token is routed to (--moe-router-topk)
  int moe_ffn_hidden = 0;      // intermediate width of one routed expert (--moe-ffn-hidden-size)
  int shared_ffn_hidden = 0;   // total width of the shared experts, 0 = none
                               // (--moe-shared-expert-intermediate-size; DeepSeek n_shared·f_e)
  int first_dense_layers = 0;  // the first k layers keep the dense MLP (DeepSeek first_k_dense)
  // Of the layers after the dense-first ones, layer i (0-based in the model) is MoE
  // when (i + 1) % moe_layer_step == 0: 1 = every layer, 2 = every second (Llama 4
  // Maverick's interleave_moe_layer_step, Qwen's decoder_sparse_step).
  int moe_layer_step = 1;
  std::string router = "softmax";  // "softmax" | "sigmoid" (DeepSeek-V3, Llama 4) scoring
  // Group-limited routing: the experts in `router_groups` equal groups, each token
  // routed within the `router_group_topk` groups of highest score (DeepSeek-V3: 8
  // and 4, its node-limited routing; Hugging Face n_group / topk_group; Megatron
  // --moe-router-num-groups / --moe-router-group-topk). 0 = every expert open.
  int router_groups = 0, router_group_topk = 0;
  // Expert capacity factor: 0 = dropless (every routed token is computed); c > 0 =
  // each expert takes at most c·tokens·top_k/experts tokens, the rest are dropped.
  double capacity_factor = 0;

  // Multi-head latent attention (DeepSeek-V2 §2.1). kv_lora_rank 0 = standard attention.
  int q_lora_rank = 0;   // 0 = queries projected directly (DeepSeek-V2-Lite)
  int kv_lora_rank = 0;  // d_c, the compressed KV width
  int qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;

  int mtp_layers = 0;  // multi-token prediction modules trained with the model (DeepSeek-V3: 1)
  // Local attention: `sliding_layers` of the layers attend to at most `sliding_window`
  // keys. A sliding window (gpt-oss: 128 on every second layer) lets each query see
  // the `sliding_window` keys before it; chunked attention (`chunked_attention`,
  // Llama 4: 8192-token chunks on three layers in four) lets it see only the keys of
  // its own chunk. 0 = full attention everywhere.
  int sliding_window = 0, sliding_layers = 0;
  bool chunked_attention = false;
  std::string source{};

  // Field-wise equality (name and source included).
  bool operator==(const ModelSpec&) const = default;

  int head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }
  bool is_moe() const { return experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  // True for the plain dense transformer every cost term before MoE was written for:
  // no experts, no MLA, no MTP, no sliding window, head_dim = hidden / heads.
  bool plain_dense() const {
    return !is_moe() && !is_mla() && mtp_layers == 0 && sliding_layers == 0 &&
           (head_dim_override == 0 || int64_t{head_dim_override} * heads == hidden);
  }
  // Whether layer i (0-based) has the MoE MLP.
  bool is_moe_layer(int i) const {
    return is_moe() && i >= first_dense_layers && (i + 1) % moe_layer_step == 0;
  }
  int moe_layer_count() const;  // layers with the MoE MLP
  int dense_layer_count() const { return layers - moe_layer_count(); }
  // Query output width a·d (= hidden unless head_dim_override says otherwise).
  int64_t q_out() const { return int64_t{heads} * head_dim(); }
  // Output features of the fused QKV projection: a·d + 2·kv_heads·d.
  int64_t qkv_out() const { return q_out() + 2LL * kv_heads * head_dim(); }
  // Attention parameters of one layer (projections and their biases; MLA's
  // down/up projections and their two RMSNorms).
  int64_t AttentionParams() const;
  // MLA only: Q (q_lora ? h·q_lora + q_lora + q_lora·a·(nope+rope) : h·a·(nope+rope)),
  // KV down h·(kv_lora + rope) + kv_lora, KV up kv_lora·a·(nope + v), output a·v·h
  // (DeepSeek-V2 §2.1 Eq. 9-19; Megatron-Core MLASelfAttention).
  int64_t MlaParams() const;
  // Dense MLP of one layer ((gated ? 3 : 2)·h·f, plus biases).
  int64_t DenseMlpParams() const;
  // One routed expert ((gated ? 3 : 2)·h·f_e, plus biases).
  int64_t ExpertParams() const;
  // The shared experts of one MoE layer, and its router (h·E, plus E biases).
  int64_t SharedExpertParams() const;
  int64_t RouterParams() const;
  // One MoE layer's parameters besides its routed experts and norms: attention,
  // shared experts and router (split over the tensor ranks like a dense block).
  int64_t MoeLayerDenseParams() const {
    return AttentionParams() + SharedExpertParams() + RouterParams();
  }
  // MoE MLP of one layer: router + experts·ExpertParams + shared; active: top_k experts.
  int64_t MoeMlpParams() const;
  int64_t MoeMlpActiveParams() const;
  // Parameters of one dense transformer block (attention, dense MLP, norms, biases).
  int64_t ParamsPerLayer() const;
  // Parameters of layer i (its MLP dense or MoE). REQUIRES: 0 <= i < layers.
  int64_t ParamsOfLayer(int i) const;
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
  // Parameters of one MTP module (0 when mtp_layers == 0): 3 norms, the 2h×h
  // projection and a block like the last layer (DeepSeek-V3 §2.2, Figure 3).
  int64_t MtpModuleParams() const;
  // Total parameter count Ψ = Σ layers + EmbeddingParams + PositionParams + MTP.
  // REQUIRES: the spec passed ValidateModel (no overflow then).
  int64_t ParamCount() const;
  // Parameters one token passes through: every layer with top_k routed experts
  // instead of all, the embedding tables (input and output), norms; MTP excluded
  // (the published "activated" figures exclude it: DeepSeek-V3 README 37B of 671B).
  int64_t ActiveParamCount() const;
  // Forward FLOPs per token; model FLOPs per iteration = 3 × this × tokens.
  // Plain dense models: the dense math (linears + attention scores over `seq_len`
  // keys + logits), the Korthikanti Eq. 7 accounting generalised to GQA and gated
  // FFNs: per layer 2·(h·qkv_out + a·d·h + (gated ? 3 : 2)·h·f) + 4·seq_len·h, plus
  // 2·h·V for the logits; biases, norms and softmax are not counted (as in Eq. 7).
  // Every other model (MoE, MLA, MTP, sliding window, explicit head_dim): Megatron-Core's
  // num_floating_point_operations (megatron/training/training.py, transformer_flops, at
  // NVIDIA/Megatron-LM d98e8a64) divided by 3: the active linears (top_k routed + shared
  // experts; the router is not counted), the causal attention core at seq/2
  // (2·seq·(a·(d_qk + d_v))/2 per token, sliding layers at min(seq, window)), each MTP
  // module's block, 2h² projection and logits. It is the convention of the published
  // MoE throughput tables this planner calibrates against (Megatron-Bridge, see docs/model.md).
  // REQUIRES: seq_len >= 0.
  double ForwardFlopsPerToken(int seq_len) const;
  // The forward FLOPs per token of the attention core alone (Q·Kᵀ and
  // attention·V, every layer and MTP module): over the causal triangle
  // (`causal`: s/2 keys per query on average, sliding and chunked layers
  // their window's) or over the full s×s square, as an unfused kernel computes
  // it before masking. A plain dense model's core is 2·s·h (causal) or 4·s·h
  // per layer, as Eq. 7 writes it. REQUIRES: seq_len >= 0.
  double AttentionCoreFlopsPerToken(int seq_len, bool causal) const;
  // The convention ForwardFlopsPerToken counts the attention core by:
  // "full-square" (Korthikanti Eq. 7, a plain dense model) or "causal"
  // (Megatron-Core's transformer_flops, every other model).
  const char* FlopsConvention() const { return plain_dense() ? "full-square" : "causal"; }
};

// Checks the shape rules (positive sizes, heads divide hidden unless head_dim is
// given, kv_heads divide heads); errors name `pointer`.
// Also: norm is "layernorm" or "rmsnorm", max_seq_len >= 0, every size within
// the k*Max* bounds below and the parameter count below 2^62 (so it cannot overflow
// int64). MoE: experts 0 (dense; then top_k, moe_ffn_hidden, shared_ffn_hidden,
// first_dense_layers, capacity_factor must be 0 and moe_layer_step 1) or in
// [2, kMaxModelExperts] with 1 <= top_k <= experts, moe_ffn_hidden >= 1,
// 0 <= first_dense_layers < layers, moe_layer_step >= 1, capacity_factor 0 or >= 1,
// router "softmax" or "sigmoid". MLA: kv_lora_rank > 0 needs qk_nope_head_dim +
// qk_rope_head_dim > 0 and v_head_dim > 0; q_lora_rank >= 0. 0 <= mtp_layers <=
// kMaxModelMtpLayers; sliding_window >= 0 and 0 <= sliding_layers <= layers, both
// set or both 0; chunked_attention only with them. Errors are kInvalidArgument "<pointer>/<field>:
// <rule>".
inline constexpr int kMaxModelLayers = 1 << 16;
inline constexpr int kMaxModelHidden = 1 << 20;
inline constexpr int kMaxModelFfnHidden = 1 << 22;
inline constexpr int kMaxModelVocab = 1 << 24;
inline constexpr int kMaxModelSeqLen = 1 << 26;
// Sequences per iteration a request (or a model's pretrain_global_batch) may
// name (2^30): caps the search's enumeration of micro-batch sizes (documented
// in docs/cli.md).
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;
inline constexpr int kMaxModelExperts = 1 << 14;
inline constexpr int kMaxModelMtpLayers = 64;
Status ValidateModel(const ModelSpec& m, const std::string& pointer);

// Parses the preset / request form: {name?, layers, hidden, heads, kv_heads?,
// ffn_hidden?, vocab, gated_ffn?, tied_embeddings?, dropout?, linear_bias?, norm?,
// max_seq_len?, head_dim?, experts?, top_k?, moe_ffn_hidden?, shared_ffn_hidden?,
// first_dense_layers?, moe_layer_step?, router?, capacity_factor?, q_lora_rank?,
// kv_lora_rank?, qk_nope_head_dim?, qk_rope_head_dim?, v_head_dim?, mtp_layers?,
// sliding_window?, sliding_layers?, chunked_attention?, source?}. Strict.
// layers, hidden, heads and vocab are required; kv_heads defaults to heads and
// ffn_hidden to 4·hidden; the rest default as in ModelSpec. An unknown key, a wrong
// type or a shape rule (ValidateModel) fails with kInvalidArgument naming the field's
// JSON pointer under `pointer`.
Result<ModelSpec> ParseModelSpec(const Json& j, const std::string& pointer);
// The preset form of `m`; ParseModelSpec(ModelSpecToJson(m)) == m. The fields of
// the dense transformer are always written; head_dim, the MoE, MLA, MTP and
// sliding-window fields only when they differ from their defaults (a dense model's
// document is unchanged by them).
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
// dropout when any *dropout / *_pdrop value is > 0; head_dim as given.
// Mixture-of-experts configs load as published, per model_type:
//   mixtral, olmoe, gpt_oss: num_local_experts / num_experts, num_experts_per_tok
//     (gpt-oss also experts_per_token); the expert width is intermediate_size.
//     gpt-oss: layer_types counts the "sliding_attention" layers of sliding_window.
//   qwen3_moe, qwen2_moe: num_experts, num_experts_per_tok, moe_intermediate_size,
//     shared_expert_intermediate_size, decoder_sparse_step; mlp_only_layers must be
//     the first k layers (then first_dense_layers = k).
//   deepseek_v2, deepseek_v3: n_routed_experts, num_experts_per_tok,
//     moe_intermediate_size, n_shared_experts (× moe_intermediate_size),
//     first_k_dense_replace, moe_layer_freq (1 only), scoring_func, the MLA ranks and
//     head dims (q_lora_rank null = none), num_nextn_predict_layers.
//   llama4 (its text_config), llama4_text: num_local_experts, num_experts_per_tok,
//     intermediate_size (expert and shared-expert width), intermediate_size_mlp
//     (dense layers), interleave_moe_layer_step, attention_chunk_size over the
//     no_rope_layers entries that are 1 (chunked layers); sigmoid router.
// A layout the spec cannot represent (MoE layers not every step-th, dense layers
// not first) is kInvalidArgument naming the key. `name` empty = take
// _name_or_path, else model_type. Errors name keys under `pointer` (the
// document's root when empty). Defined in planner/hf_config.cc.
Result<ModelSpec> ParseHuggingFaceConfig(const Json& j, const std::string& name,
                                         const std::string& pointer = "");

// A preset name, a model object, or an HF config object (recognised by
// "num_hidden_layers" or "n_layer", or model_type with a text_config). An unknown preset name is
// kNotFound naming `pointer` and listing the valid names; errors inside objects name the field's
// pointer under `pointer`.
Result<ModelSpec> ResolveModel(const Json& j, const std::string& pointer);

// The model a job at `seq_len` trains. Learned absolute positions have one row
// per position, so a longer sequence trains the model with its table extended
// to that sequence: Megatron-LM and Megatron-DeepSpeed refuse
// --max-position-embeddings below --seq-length (training/arguments.py:1353-1356
// @d98e8a6; megatron/arguments.py:310-311 @4efb479), and emit writes
// max(seq, positions) rows. Its parameters grow by (seq - max_seq_len)·h; any
// other model is returned as it is.
ModelSpec ModelAtSequence(ModelSpec m, int seq_len);

// Names of the compiled-in model presets, sorted.
std::vector<std::string> ModelPresetNames();
// The preset called `name` (its `name` field); kNotFound listing the valid names.
Result<ModelSpec> ModelPreset(const std::string& name);

}  // namespace paratune::planner
