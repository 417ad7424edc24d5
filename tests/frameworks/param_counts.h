// The parameters Megatron-LM and Megatron-DeepSpeed build from emitted
// arguments, written from each framework's model construction at the pinned
// commits (NVIDIA/Megatron-LM d98e8a6, deepspeedai/Megatron-DeepSpeed 4efb479;
// file and lines at each term). They read only the emitted flags, never
// paratune's model: a flag left out (an untied output layer, a Q/K norm, a
// bias, a shared expert, the MoE layer pattern, MLA's ranks, MTP) changes the
// count. The vocabulary comes from the tokenizer, not the arguments: it is the
// model's own, unpadded (--make-vocab-size-divisible-by pads the tables with
// rows no token uses).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "framework_rules.h"

namespace paratune::frameworks_test {

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
inline std::vector<bool> MoeLayers(const BashArgs& a, int64_t layers) {
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
inline int64_t MegatronParams(const BashArgs& a, int64_t vocab) {
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
    moe_mlp =
        experts * h + (bias ? experts : 0) + experts * mlp(a.Int("--moe-ffn-hidden-size", ffn));
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

// Megatron-DeepSpeed's parameters (deepspeedai/Megatron-DeepSpeed @4efb479)
// for the arguments `a` and a vocabulary of `vocab`. Its flags are Megatron's
// older ones: --num-key-value-heads, --normalization layernorm|rmsnorm, and
// DeepSpeed-MoE's --num-experts / --expert-interval.
inline int64_t MegatronDeepSpeedParams(const BashArgs& a, int64_t vocab) {
  const int64_t h = a.Int("--hidden-size", 0), layers = a.Int("--num-layers", 0);
  const int64_t heads = a.Int("--num-attention-heads", 0);
  // arguments.py:445: K/V heads default to the heads; :300 kv_channels to h / heads.
  const int64_t kv_heads = a.Int("--num-key-value-heads", heads);
  const int64_t d = a.Int("--kv-channels", h / heads);
  const int64_t ffn = a.Int("--ffn-hidden-size", 4 * h);
  const bool bias = !a.Has("--disable-bias-linear");  // add_bias_linear (arguments.py:939)
  // MixedFusedLayerNorm a weight and a bias (fused_layer_norm.py:65-68), RMSNorm a weight.
  const int64_t norm = a.Str("--normalization", "layernorm") == "rmsnorm" ? h : 2 * h;
  // transformer.py:580-586, 632-638: query_key_value of (a + 2·kv)·d outputs and
  // dense back to h, both biased with add_bias_linear.
  const int64_t qkv = (heads + 2 * kv_heads) * d;
  const int64_t attention = h * qkv + (bias ? qkv : 0) + heads * d * h + (bias ? h : 0);
  // transformer.py:111-158 (ParallelMLP): dense_h_to_4h of ffn (doubled under
  // --swiglu), dense_4h_to_h back to h.
  const int64_t fc1 = a.Has("--swiglu") ? 2 * ffn : ffn;
  const int64_t mlp = h * fc1 + ffn * h + (bias ? fc1 + h : 0);
  // transformer.py:1064-1083: DeepSpeed's MoE of num_experts ParallelMLPs,
  // routed by TopKGate's unbiased h × experts wg (sharded_moe.py:560 @edaa722);
  // MoE on the layers whose 1-based number divides --expert-interval (:1650-1660).
  const int64_t experts = a.Int("--num-experts", 1), interval = a.Int("--expert-interval", 1);
  const int64_t moe_mlp = experts * mlp + h * experts;
  int64_t total = 0;
  for (int64_t i = 1; i <= layers; ++i) {
    const bool is_moe = experts > 1 && i % interval == 0;
    total += attention + (is_moe ? moe_mlp : mlp) + 2 * norm;  // input + post-attention norms
  }
  // language_model.py:158-175: the word table and, unless rotary embeddings
  // turn it off (arguments.py:314-317) or --no-position-embedding, a position
  // table of --max-position-embeddings rows; :476-481 an unbiased output layer
  // when untied; transformer.py:1870-1882 the final norm.
  total += vocab * h + norm;
  if (!a.Has("--use-rotary-position-embeddings") && !a.Has("--no-position-embedding"))
    total += a.Int("--max-position-embeddings", 0) * h;
  if (a.Has("--untie-embeddings-and-output-weights")) total += vocab * h;
  return total;
}

}  // namespace paratune::frameworks_test
