// The start-up rules of each training framework, restated in C++ from the
// framework's own source at a pinned commit (file and lines at each rule;
// docs/frameworks.md lists them). Each *WouldReject reads an emitted file the
// way the framework reads it and returns "" when the framework would start, or
// the rule it breaks. Where the framework splits the model's layers over
// pipeline stages itself, the split it would build is returned too, so a test
// can compare it with the split the plan was priced with.
//
// Snapshots: NVIDIA/Megatron-LM d98e8a6 (Megatron-Core 0.20.0),
// NVIDIA/TransformerEngine d0067d0 (2.20.0.dev0), deepspeedai/DeepSpeed
// edaa722 (0.19.6), deepspeedai/Megatron-DeepSpeed 4efb479, pytorch/torchtitan
// b5bcd76 (0.2.2), axonn-ai/axonn 660a224.
//
// These do not call paratune's own checks: a rule written twice, once from the
// source here and once in the emitter, is what makes the test able to fail.
// Over 800 lines because the five frameworks' mirrors share the argument and
// file readers at the top and are read side by side with their sources.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"

namespace paratune::frameworks_test {

// The job facts an emitted file is checked against (from the plans document).
struct World {
  int64_t gpus = 0;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0, gbs = 0;
  bool tied_embeddings = false, gated_ffn = false, linear_bias = true;
  int64_t experts = 0;  // routed experts per MoE layer (0: dense)
  // Local attention: sliding_layers layers attend to sliding_window keys (0: none).
  int64_t sliding_window = 0, sliding_layers = 0;
  // The Hugging Face model_type the model is built from ("" = not stated).
  std::string hf_model_type;
  // RoPE as the model's config.json states it: rope_theta (0 = no RoPE or not
  // stated) and the Llama 3.x rope_scaling factor (0 = none).
  double rope_theta = 0, rope_llama3_scaling = 0;
  // Norms and activation as the model's config.json states them: the norm
  // epsilon (0 = not stated, the frameworks' 1e-5), Q/K norms ("" none, "head"
  // over each head's width, "full" over all heads' features), learned
  // attention sinks, and the clamp of gpt-oss's gated activation (0 = plain SwiGLU).
  double norm_eps = 0;
  std::string qk_norm;
  bool attention_sinks = false;
  double swiglu_limit = 0;
  int gpu_arch_major = 9;  // compute capability of the cluster's GPU (Hopper 9, Blackwell 10)
  // The save schedule the plan was priced with (its candidate's goodput): a
  // save every save_interval steps (0: the plan priced none), asynchronous
  // when save_async. An emitted file must save as priced.
  int64_t save_interval = 0;
  bool save_async = false;
};

// What the framework would build.
struct Built {
  std::vector<int>
      chunk_layers;  // transformer layers per model chunk (virtual-stage-major), pp > 1
};

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

inline int64_t ToInt(const std::string& s) {
  size_t used = 0;
  const int64_t v = std::stoll(s, &used);
  EXPECT_EQ(used, s.size()) << "not an integer: " << s;
  return v;
}

// ---------------------------------------------------------------- Megatron-LM

// "--flag value" / "--flag" tokens inside the bash arrays of `text`, and the
// `export NAME=value` lines.
struct BashArgs {
  std::map<std::string, std::string> args;
  std::map<std::string, std::string> env;
  bool Has(const std::string& k) const { return args.count(k) > 0; }
  int64_t Int(const std::string& k, int64_t def) const {
    auto it = args.find(k);
    return it == args.end() ? def : ToInt(it->second);
  }
  std::string Str(const std::string& k, const std::string& def = "") const {
    auto it = args.find(k);
    return it == args.end() ? def : it->second;
  }
};

inline BashArgs ParseBash(const std::string& text) {
  BashArgs b;
  bool in_array = false;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("export ", 0) == 0) {
      const auto eq = line.find('=');
      b.env[line.substr(7, eq - 7)] = line.substr(eq + 1);
      continue;
    }
    if (!line.empty() && line[0] != '#' && line.size() >= 2 &&
        line.substr(line.size() - 2) == "=(") {
      in_array = true;
      continue;
    }
    if (line == ")") {
      in_array = false;
      continue;
    }
    if (!in_array) continue;
    std::istringstream words(line);
    std::string flag, value;
    words >> flag;
    if (flag.rfind("--", 0) != 0) continue;
    words >> value;
    // nargs "+" flags (--recompute-modules a b) keep every value, space-separated.
    for (std::string more; words >> more;) value += " " + more;
    EXPECT_EQ(b.args.count(flag), 0u) << flag << " given twice";
    b.args[flag] = value;
  }
  return b;
}

// The flags Megatron-LM's parser defines that paratune writes: explicit
// add_argument calls in megatron/training/arguments.py, or fields of the
// config dataclasses its ArgumentGroupFactory turns into flags
// (arguments.py:2373 TransformerConfig, 3092 DistributedInitConfig, 2863
// TrainingConfig, ...). argparse refuses any other.
inline const std::set<std::string>& MegatronFlags() {
  static const std::set<std::string> k = {
      "--num-layers",
      "--hidden-size",
      "--ffn-hidden-size",
      "--num-attention-heads",
      "--group-query-attention",  // arguments.py:2382
      "--num-query-groups",
      "--seq-length",
      "--max-position-embeddings",
      "--position-embedding-type",
      "--rotary-base",
      "--use-rope-scaling",
      "--rope-scaling-factor",
      "--normalization",
      "--swiglu",
      "--kv-channels",                  // transformer_config.py:184 (kv_channels)
      "--norm-epsilon",                 // transformer_config.py:201-204 (layernorm_epsilon)
      "--qk-layernorm",                 // transformer_config.py:259
      "--softmax-type",                 // transformer_config.py:170
      "--quick-geglu",                  // arguments.py:2452
      "--glu-linear-offset",            // transformer_config.py:231
      "--activation-func-clamp-value",  // transformer_config.py:235
      "--window-size",            // arguments.py:2384
      "--window-attn-skip-freq",  // arguments.py:2387
      "--no-rope-freq",           // arguments.py:2428
      "--untie-embeddings-and-output-weights",
      "--disable-bias-linear",
      "--attention-dropout",
      "--hidden-dropout",
      "--attention-backend",
      "--micro-batch-size",
      "--global-batch-size",
      "--bf16",
      "--fp16",
      "--fp8-format",                         // transformer_config.py:587-589
      "--fp8-recipe",                         // transformer_config.py:594-596
      "--fp4-format",                         // transformer_config.py:673-675
      "--fp4-recipe",                         // transformer_config.py:679
      "--use-megatron-fsdp",                  // common_config.py:92
      "--data-parallel-sharding-strategy",    // arguments.py:3190-3192
      "--fsdp-double-buffer",                 // arguments.py:3202
      "--ddp-bucket-size",                    // arguments.py:3125
      "--ckpt-format",                        // training_config.py:486
      "--cpu-offloading-num-layers",          // model_parallel_config.py:461
      "--cuda-graph-impl",                    // transformer_config.py:1075
      "--no-check-for-nan-in-loss-and-grad",  // arguments.py:2872
      "--recompute-granularity",
      "--recompute-modules",  // transformer_config.py:560, a TransformerConfig field (arguments.py:2373)
      "--recompute-method",
      "--recompute-num-layers",
      "--use-distributed-optimizer",
      "--overlap-grad-reduce",
      "--overlap-param-gather",
      "--tensor-model-parallel-size",
      "--pipeline-model-parallel-size",
      "--decoder-first-pipeline-num-layers",        // arguments.py:3095
      "--decoder-last-pipeline-num-layers",         // arguments.py:3099
      "--account-for-embedding-in-pipeline-split",  // transformer_config.py:137
      "--account-for-loss-in-pipeline-split",       // transformer_config.py:141
      "--pipeline-model-parallel-layout",           // arguments.py:3103
      "--num-layers-per-virtual-pipeline-stage",    // arguments.py:3114
      "--num-virtual-stages-per-pipeline-rank",     // arguments.py:3116
      "--no-overlap-p2p-communication",             // arguments.py:3118
      "--context-parallel-size",
      "--cp-comm-type",
      "--sequence-parallel",
      "--tp-comm-overlap",
      "--use-tp-pp-dp-mapping",
      "--save",                         // training_config.py:395 (CheckpointConfig)
      "--load",                         // training_config.py:430
      "--save-interval",                // training_config.py:398
      "--async-save",                   // training_config.py:516
      "--async-strategy",               // training_config.py:519
      "--use-persistent-ckpt-worker"};  // training_config.py:522
  return k;
}

// Megatron-LM's checkpoint flags against the plan's save schedule: --save
// needs --save-interval > 0 (arguments.py:1361-1363); --async-save without
// --use-persistent-ckpt-worker is turned off with a warning, a run that saves
// synchronously where the plan priced an async save (arguments.py:1814-1820);
// the default "nvrx" strategy raises at start-up without nvidia-resiliency-ext
// (core/dist_checkpointing/strategies/torch.py:1043-1082); the legacy "torch"
// format raises at the first async save (checkpointing.py:763-767).
inline std::string MegatronCheckpointGap(const BashArgs& a, const World& w) {
  if (a.Has("--save") && a.Int("--save-interval", 0) <= 0) return "--save without --save-interval";
  if (w.save_interval <= 0) return a.Has("--save") ? "saves the plan did not price" : "";
  if (!a.Has("--save") || !a.Has("--load")) return "the plan's checkpoints are not saved and resumed";
  if (a.Int("--save-interval", 0) != w.save_interval) return "save interval";
  const bool async = a.Has("--async-save") && a.Has("--use-persistent-ckpt-worker");
  if (async != w.save_async) return w.save_async ? "async save off (no persistent worker?)" : "async save";
  if (async && a.Str("--async-strategy", "nvrx") != "mcore") return "async strategy nvrx needs nvidia-resiliency-ext";
  if (async && a.Str("--ckpt-format", "torch_dist") == "torch") return "async save in the legacy format";
  return "";
}

// Megatron-Core's get_num_layers_to_build (megatron/core/transformer/
// transformer_block.py:76-203) for every chunk, virtual-stage-major.
inline std::string MegatronChunks(const World& w, int64_t pp, int64_t vpp, int64_t first,
                                  int64_t last, bool emb, bool loss, std::vector<int>* out) {
  out->clear();
  for (int64_t v = 0; v < vpp; ++v) {
    for (int64_t r = 0; r < pp; ++r) {
      int64_t per_rank = 0;
      if (first >= 0 || last >= 0) {
        // transformer_block.py:103-147.
        if (emb || loss) return "uneven stages with embedding/loss accounting";
        int64_t left = w.layers, stages = pp;
        if (first >= 0) left -= first, --stages;
        if (last >= 0) left -= last, --stages;
        if (stages > 0) {
          if (left % stages != 0) return "left-over layers % left-over stages";
          per_rank = left / stages;
        }
        if (r == 0 && first >= 0) per_rank = first;
        if (r == pp - 1 && last >= 0) per_rank = last;
      } else {
        // transformer_block.py:148-160.
        const int64_t n = w.layers + emb + loss;
        if (n % pp != 0) return "num_layers % pp";
        per_rank = n / pp;
      }
      int64_t build = per_rank;
      if (vpp > 1) {
        // transformer_block.py:162-181.
        if (per_rank % vpp != 0) return "num_layers_per_pipeline_rank % vp_size";
        build = per_rank / vpp;
      }
      // transformer_block.py:187-201.
      if (emb && v == 0 && r == 0) build -= 1;
      if (loss && v == vpp - 1 && r == pp - 1) build -= 1;
      if (build < 0) return "not enough layers in the first/last virtual stage";
      out->push_back(static_cast<int>(build));
    }
  }
  return "";
}

// Megatron-Core's layout string as PipelineParallelLayerLayout.parse_str_to_list
// reads it (pipeline_parallel_layer_layout.py:283-330): commas dropped, then
// re.sub of r'\(([^)]+)\)\*(\d+)' and of r'(.)\*(\d+)', then '|' between chunks.
inline std::vector<std::string> MegatronLayoutChunks(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  for (const char* pattern : {R"(\(([^)]+)\)\*(\d+))", R"((.)\*(\d+))"}) {
    const std::regex re(pattern);
    std::string out;
    auto begin = std::sregex_iterator(s.begin(), s.end(), re);
    size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      out += s.substr(last, it->position() - last);
      for (int64_t k = 0; k < ToInt((*it)[2]); ++k) out += (*it)[1].str();
      last = it->position() + it->length();
    }
    s = out + s.substr(last);
  }
  std::vector<std::string> chunks(1);
  for (char ch : s) {
    if (ch == '|') {
      chunks.emplace_back();
    } else {
      chunks.back() += ch;
    }
  }
  return chunks;
}

// The model Megatron builds from the arguments, against the model's own
// norms, attention softmax and activation (TransformerConfig @ d98e8a6):
// layernorm_epsilon (--norm-epsilon, default 1e-5: transformer_config.py:201-204);
// qk_layernorm (:259) builds q_layernorm and k_layernorm of kv_channels, one
// norm per head's width (attention.py:1734-1751), nothing over all heads;
// softmax_type "learnable" (:170) is a learned offset per head
// (dot_product_attention.py:119-138), the attention sink; --swiglu is
// silu(gate)·up (argument_utils.py:314-317), --quick-geglu gate·sigmoid(1.702·gate)
// (argument_utils.py:323-326, fused_bias_geglu.py:185-187) times
// (up + glu_linear_offset), both halves clamped by activation_func_clamp_value
// (mlp.py:323-333).
inline std::string MegatronArchitectureGap(const BashArgs& a, const World& w) {
  const double eps = std::stod(a.Str("--norm-epsilon", "1e-5"));
  if (eps != (w.norm_eps > 0 ? w.norm_eps : 1e-5)) return "norm epsilon";
  if (w.qk_norm == "full") return "no Q/K norm over all heads' features";
  if (a.Has("--qk-layernorm") != (w.qk_norm == "head") && !a.Has("--multi-latent-attention"))
    return "Q/K norm";
  // utils.py:43-50 (get_sliding_window_causal_mask): a window (left, right)
  // admits keys i - left through i + right, so w keys with the query's own is (w - 1, 0).
  if (a.Has("--window-size") &&
      a.Str("--window-size") != std::to_string(w.sliding_window - 1) + ",0")
    return "sliding window size";
  if ((a.Str("--softmax-type", "vanilla") == "learnable") != w.attention_sinks)
    return "attention sinks";
  if (!w.gated_ffn) {
    if (a.Has("--swiglu") || a.Has("--quick-geglu")) return "gated MLP on a GeLU model";
  } else if (w.swiglu_limit > 0) {
    if (!a.Has("--quick-geglu") || a.Has("--swiglu")) return "gpt-oss activation needs --quick-geglu";
    if (std::stod(a.Str("--glu-linear-offset", "0")) != 1.0) return "glu linear offset";
    if (std::stod(a.Str("--activation-func-clamp-value", "0")) != w.swiglu_limit)
      return "activation clamp";
  } else {
    if (!a.Has("--swiglu") || a.Has("--quick-geglu") || a.Has("--activation-func-clamp-value"))
      return "SwiGLU";
  }
  return "";
}

inline std::string MegatronWouldReject(const std::string& text, const World& w, Built* built) {
  const BashArgs a = ParseBash(text);
  for (const auto& [flag, value] : a.args) {
    if (!MegatronFlags().count(flag)) return "unknown flag " + flag;
  }
  const int64_t tp = a.Int("--tensor-model-parallel-size", 1);
  const int64_t pp = a.Int("--pipeline-model-parallel-size", 1);
  const int64_t cp = a.Int("--context-parallel-size", 1);
  const int64_t mbs = a.Int("--micro-batch-size", -1);
  const int64_t gbs = a.Int("--global-batch-size", -1);
  const int64_t layers = a.Int("--num-layers", -1);
  const int64_t heads = a.Int("--num-attention-heads", -1);
  const int64_t hidden = a.Int("--hidden-size", -1);
  const int64_t groups = a.Int("--num-query-groups", heads);
  const int64_t seq = a.Int("--seq-length", -1);
  if (layers != w.layers || heads != w.heads || hidden != w.hidden || seq != w.seq)
    return "model shape";
  if (groups != w.kv_heads) return "query groups";
  // RoPE as the model has it: --rotary-base (int, default 10000: arguments.py:2418)
  // and Llama 3.x scaling, --use-rope-scaling with --rope-scaling-factor (default
  // 8.0: arguments.py:2424-2427).
  if (a.Str("--position-embedding-type") == "rope") {
    if (w.rope_theta > 0 && a.Int("--rotary-base", 10000) != static_cast<int64_t>(w.rope_theta))
      return "RoPE base";
    if (a.Has("--use-rope-scaling") != (w.rope_llama3_scaling > 0)) return "RoPE scaling";
    if (w.rope_llama3_scaling > 0 &&
        std::stod(a.Str("--rope-scaling-factor", "8.0")) != w.rope_llama3_scaling)
      return "RoPE scaling factor";
  }
  if (const std::string why = MegatronArchitectureGap(a, w); !why.empty()) return why;
  if (const std::string why = MegatronCheckpointGap(a, w); !why.empty()) return why;
  // arguments.py:424-448 (validate_args): world % (TP·PP·CP), DP = world / (TP·PP·CP).
  if (w.gpus % (tp * pp * cp) != 0) return "world % (TP*PP*CP)";
  const int64_t dp = w.gpus / (tp * pp * cp);
  if (mbs < 1) return "micro-batch-size";
  // megatron/core/num_microbatches_calculator.py:381-384.
  if (gbs % (mbs * dp) != 0) return "GBS % (MBS*DP)";
  // arguments.py:1330-1332: hidden % heads when kv_channels is not given.
  if (hidden % heads != 0) return "hidden % heads";
  // transformer_config.py:1446-1450.
  if (heads % tp != 0) return "heads % TP";
  // transformer_config.py:1461-1467.
  if (groups % tp != 0 && tp % groups != 0) return "query groups vs TP";

  // Pipeline layout. arguments.py:928-939: at most one virtual-pipeline option.
  const bool lpv = a.Has("--num-layers-per-virtual-pipeline-stage");
  const bool nvs = a.Has("--num-virtual-stages-per-pipeline-rank");
  const bool layout = a.Has("--pipeline-model-parallel-layout");
  if (lpv + nvs + layout > 1) return "two VP options";
  int64_t layout_vpp = 0;
  if (layout) {
    std::string str = a.Str("--pipeline-model-parallel-layout");
    if (str.size() < 2 || str.front() != '"' || str.back() != '"') return "unquoted layout";
    const std::vector<std::string> chunks = MegatronLayoutChunks(str.substr(1, str.size() - 2));
    // arguments.py:941-952: the chunk count divides by PP and sets VP.
    if (static_cast<int64_t>(chunks.size()) % pp != 0) return "layout chunks % pp";
    layout_vpp = static_cast<int64_t>(chunks.size()) / pp;
    // The layout replaces the other split arguments (transformer_config.py:2242-2259).
    if (a.Has("--decoder-first-pipeline-num-layers") || a.Has("--decoder-last-pipeline-num-layers") ||
        a.Has("--account-for-embedding-in-pipeline-split") ||
        a.Has("--account-for-loss-in-pipeline-split")) {
      return "layout with other split arguments";
    }
    // pipeline_parallel_layer_layout.py:86-130 validate_layer_layout.
    std::string flat;
    for (const std::string& c : chunks) flat += c;
    if (flat.find_first_not_of("Etm L") != std::string::npos) return "layout character";
    if (flat.empty() || flat.front() != 'E' || std::count(flat.begin(), flat.end(), 'E') != 1)
      return "layout embedding";
    if (flat.back() != 'L' || std::count(flat.begin(), flat.end(), 'L') != 1) return "layout loss";
    if (std::count(flat.begin(), flat.end(), 't') != w.layers) return "layout decoder count";
    if (a.Int("--mtp-num-layers", 0) != std::count(flat.begin(), flat.end(), 'm'))
      return "layout MTP count";
    if (flat.find('m') != std::string::npos && flat.find('t', flat.find('m')) != std::string::npos)
      return "layout decoder after MTP";
    built->chunk_layers.clear();
    for (const std::string& c : chunks) {
      built->chunk_layers.push_back(static_cast<int>(std::count(c.begin(), c.end(), 't')));
    }
  }
  const int64_t first = a.Int("--decoder-first-pipeline-num-layers", -1);
  const int64_t last = a.Int("--decoder-last-pipeline-num-layers", -1);
  const bool emb = a.Has("--account-for-embedding-in-pipeline-split");
  const bool loss = a.Has("--account-for-loss-in-pipeline-split");
  int64_t vpp = 1;
  if (layout) {
    vpp = layout_vpp;
  } else if (lpv) {
    // arguments.py:954-956: not with uneven first/last stages.
    if (first >= 0 || last >= 0)
      return "--num-layers-per-virtual-pipeline-stage with uneven stages";
    // arguments.py:958-977.
    const int64_t n = layers + emb + loss;
    if (n % pp != 0) return "num_layers % pp (VP)";
    const int64_t per = a.Int("--num-layers-per-virtual-pipeline-stage", 1);
    if ((n / pp) % per != 0) return "layers per stage % layers per virtual stage";
    vpp = (n / pp) / per;
  } else if (nvs) {
    vpp = a.Int("--num-virtual-stages-per-pipeline-rank", 1);  // arguments.py:978-979
  } else if (first < 0 && last < 0) {
    // arguments.py:985-997.
    if ((layers + emb + loss) % pp != 0) return "num_layers % pp";
  }
  // arguments.py:999-1008.
  if (vpp > 1) {
    const bool overlap_p2p = !a.Has("--no-overlap-p2p-communication");
    if (overlap_p2p ? pp <= 1 : pp <= 2) return "interleaving needs PP";
  }
  // transformer_config.py:2229-2239: first/last exclude the account_for flags.
  if ((first >= 0 || last >= 0) && (emb || loss)) return "first/last with account_for";
  if (first >= 0 || last >= 0) {
    // transformer_config.py:2292-2365.
    int64_t left = layers, stages = pp;
    for (int64_t n : {first, last}) {
      if (n < 0) continue;
      if (n <= 0) return "first/last stage layers must be > 0";
      if (vpp > 1 && n % vpp != 0) return "first/last stage layers % vpp";
      left -= n;
      --stages;
    }
    if ((left != 0) != (stages != 0)) return "middle layers vs middle stages";
    if (stages > 0 && left % stages != 0) return "middle layers % middle stages";
    if (stages > 0 && vpp > 1 && (left / stages) % vpp != 0) return "middle stage layers % vpp";
  } else if (emb || loss) {
    // transformer_config.py:2366-2415.
    const int64_t n = layers + emb + loss;
    if (n % pp != 0) return "layers + embedding/loss % pp";
    if (vpp > 1 && (n / pp) % vpp != 0) return "layers per rank % vpp (account_for)";
  }
  if (pp > 1 && !layout) {
    const std::string why =
        MegatronChunks(w, pp, vpp, first, last, emb, loss, &built->chunk_layers);
    if (!why.empty()) return why;
  }
  if (vpp > 1) {
    // model_parallel_config.py:567-568 (group of PP micro-batches per virtual stage) and
    // schedules.py:1160-1180 (M >= group, M % group == 0 or >= PP).
    const int64_t m = gbs / (mbs * dp);
    if (m < pp || m % pp != 0) return "micro-batches vs PP groups";
  }
  // arguments.py:1024-1028.
  if (a.Has("--overlap-param-gather") &&
      !(a.Has("--use-distributed-optimizer") && a.Has("--overlap-grad-reduce"))) {
    return "overlap-param-gather";
  }
  // arguments.py:1335-1337.
  if (cp > 1 && seq % (cp * 2) != 0) return "seq % 2CP";
  // arguments.py:1433-1442: SP off at TP 1; --tp-comm-overlap needs SP.
  const bool sp = a.Has("--sequence-parallel") && tp > 1;
  if (a.Has("--tp-comm-overlap") && !sp) return "tp-comm-overlap needs SP";
  const bool fsdp = a.Has("--use-megatron-fsdp");
  if (fsdp) {
    // arguments.py:1165-1170: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1 and
    // the fsdp_dtensor checkpoint format; 3190-3192: the sharding strategies.
    auto it = a.env.find("CUDA_DEVICE_MAX_CONNECTIONS");
    if (it != a.env.end() && it->second == "1")
      return "Megatron-FSDP with CUDA_DEVICE_MAX_CONNECTIONS=1";
    if (a.Str("--ckpt-format") != "fsdp_dtensor")
      return "Megatron-FSDP needs --ckpt-format fsdp_dtensor";
    static const std::set<std::string> kStrategies = {"no_shard", "optim", "optim_grads",
                                                      "optim_grads_params"};
    if (a.Has("--data-parallel-sharding-strategy") &&
        !kStrategies.count(a.Str("--data-parallel-sharding-strategy"))) {
      return "data-parallel-sharding-strategy";
    }
  } else if (a.Has("--ckpt-format") && a.Str("--ckpt-format") == "fsdp_dtensor") {
    return "fsdp_dtensor without Megatron-FSDP";  // arguments.py:1675-1676
  }
  // transformer_config.py:1884-1899: CPU offloading below the layer count, PP 1, no recompute.
  const int64_t offload = a.Int("--cpu-offloading-num-layers", 0);
  if (offload > 0) {
    if (offload >= layers) return "cpu-offloading-num-layers >= num_layers";
    if (pp > 1) return "CPU offloading with PP";
    if (a.Has("--recompute-granularity")) return "CPU offloading with recompute";
  }
  if (a.Has("--cuda-graph-impl")) {
    static const std::set<std::string> kImpls = {"none", "local", "transformer_engine",
                                                 "full_iteration"};
    const std::string impl = a.Str("--cuda-graph-impl");
    if (!kImpls.count(impl)) return "cuda-graph-impl";
    // arguments.py:1235-1237.
    if (impl == "full_iteration" && !a.Has("--no-check-for-nan-in-loss-and-grad"))
      return "full_iteration CUDA graph with the NaN check";
    // transformer_config.py:2800-2801.
    if (impl != "none" && impl != "full_iteration" && offload > 0)
      return "per-layer CUDA graphs with CPU offloading";
  }
  // arguments.py:1100-1101 and transformer_config.py:594, 679: the recipes.
  if (a.Has("--fp8-format") && a.Has("--fp4-format")) return "fp8 and fp4 formats together";
  if (a.Has("--fp8-recipe")) {
    static const std::set<std::string> kRecipes = {"tensorwise", "delayed", "mxfp8", "blockwise"};
    if (!kRecipes.count(a.Str("--fp8-recipe"))) return "fp8-recipe";
  }
  if (a.Has("--fp4-format") && a.Str("--fp4-format") != "e2m1") return "fp4-format";
  // arguments.py:1453-1479: TP or CP before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1
  // (Megatron-FSDP only warns).
  if ((tp > 1 || cp > 1) && w.gpu_arch_major < 10 && !fsdp) {
    auto it = a.env.find("CUDA_DEVICE_MAX_CONNECTIONS");
    if (it == a.env.end() || it->second != "1") return "CUDA_DEVICE_MAX_CONNECTIONS must be 1";
  }
  // transformer_config.py:1908-1925: full recompute needs a method (uniform|block) and a layer
  // count.
  if (a.Has("--recompute-granularity")) {
    const std::string g = a.Str("--recompute-granularity");
    if (g != "full" && g != "selective") return "recompute granularity";
    if (g == "full") {
      const std::string m = a.Str("--recompute-method");
      if (m != "uniform" && m != "block") return "recompute method";
      const int64_t n = a.Int("--recompute-num-layers", 0);
      if (n < 1) return "recompute-num-layers";
    } else if (a.Has("--recompute-method")) {
      return "selective + method";  // arguments.py:1425-1428
    }
  }
  // transformer_config.py:1944-1973: the module names, moe_act only with
  // grouped GEMMs, mla_up_proj only with MLA; the list only with selective
  // (full granularity takes a method and a layer count instead).
  if (a.Has("--recompute-modules")) {
    if (a.Str("--recompute-granularity") != "selective") return "recompute modules without selective";
    static const std::set<std::string> kModules = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                   "mlp", "moe", "shared_experts"};
    std::istringstream names(a.Str("--recompute-modules"));
    for (std::string name; names >> name;) {
      if (kModules.count(name) == 0) return "recompute module " + name;
      if (name == "moe_act" && !a.Has("--moe-grouped-gemm")) return "moe_act without grouped GEMM";
      if (name == "mla_up_proj" && !a.Has("--multi-latent-attention")) return "mla_up_proj without MLA";
    }
  }
  // transformer_config.py:1030-1034 (cp_comm_type values).
  std::string comm = a.Str("--cp-comm-type", "p2p");
  if (comm != "p2p" && comm != "a2a" && comm != "allgather" && comm != "a2a+p2p")
    return "cp-comm-type";
  if (cp > 1 && comm == "a2a") {
    // TransformerEngine context_parallel.py:4246-4249 @d0067d0: local Q and K heads % cp,
    // with Megatron's heads per TP rank (attention.py:353-364 @d98e8a6).
    const int64_t q = heads / tp, k = groups < tp ? 1 : groups / tp;
    if (q % cp != 0 || k % cp != 0) return "a2a CP: heads per TP rank % CP";
  }
  // megatron/core/transformer/enums.py (AttnBackend).
  if (a.Has("--attention-backend")) {
    const std::string b = a.Str("--attention-backend");
    if (b != "flash" && b != "fused" && b != "unfused" && b != "local" && b != "auto")
      return "attention-backend";
  }
  return "";
}

// ------------------------------------------------------------------ DeepSpeed

// ds_config.json (deepspeed/runtime/config.py @ edaa722), launched with
// tensor, pipeline and sequence degrees tp, pp, sp from the launch flags.
inline std::string DeepSpeedConfigWouldReject(const Json& j, const World& w, int64_t tp, int64_t pp,
                                              bool pipeline_engine) {
  // runtime/config.py:710-724: the DP world size; with Megatron's mpu it is
  // mpu.get_data_parallel_world_size() = world / (TP·PP·SP) (and world / SP via
  // sequence_parallel_size for the mpu-less flow, lines 721-722).
  const int64_t sp = j.value("sequence_parallel_size", int64_t{1});
  if (w.gpus % (tp * pp * sp) != 0) return "world vs TP*PP*SP";
  const int64_t dp = w.gpus / (tp * pp * sp);
  if (!j.contains("train_batch_size") || !j.contains("train_micro_batch_size_per_gpu") ||
      !j.contains("gradient_accumulation_steps")) {
    return "batch keys";
  }
  const int64_t train = j["train_batch_size"], micro = j["train_micro_batch_size_per_gpu"],
                gas = j["gradient_accumulation_steps"];
  // runtime/config.py:925-940 (_batch_assertion).
  if (train <= 0 || micro <= 0 || gas <= 0) return "batch > 0";
  if (train != micro * gas * dp) return "train_batch_size == micro * gas * dp";
  const Json& z = j["zero_optimization"];
  // runtime/zero/config.py (DeepSpeedZeroConfig fields and their stage3_* aliases) with
  // extra="forbid" (runtime/config_utils.py): an unknown key is an error.
  static const std::set<std::string> kZeroKeys = {"stage",
                                                  "contiguous_gradients",
                                                  "reduce_scatter",
                                                  "reduce_bucket_size",
                                                  "allgather_partitions",
                                                  "allgather_bucket_size",
                                                  "overlap_comm",
                                                  "offload_param",
                                                  "offload_optimizer",
                                                  "sub_group_size",
                                                  "stage3_prefetch_bucket_size",
                                                  "stage3_param_persistence_threshold",
                                                  "stage3_max_live_parameters",
                                                  "stage3_max_reuse_distance",
                                                  "stage3_gather_16bit_weights_on_model_save",
                                                  "zero_hpz_partition_size",
                                                  "zero_quantized_weights",
                                                  "zero_quantized_gradients",
                                                  "mics_shard_size"};
  for (auto& [k, v] : z.items()) {
    if (!kZeroKeys.count(k)) return "unknown zero_optimization key " + k;
  }
  const int stage = z["stage"];
  if (stage < 0 || stage > 3) return "stage";
  // runtime/pipe/engine.py:75-76: the pipeline engine refuses ZeRO-2/3 (even with one stage).
  if (pipeline_engine && stage >= 2) return "ZeRO-2/3 with the pipeline engine";
  // runtime/zero/config.py: zero_hpz_partition_size >= 0; utils/groups.py: min(hpz, world)
  // divides the world, over consecutive global ranks.
  const int64_t hpz = z.value("zero_hpz_partition_size", int64_t{1});
  if (hpz < 0) return "hpz >= 0";
  if (hpz > 1) {
    if (w.gpus % std::min(hpz, w.gpus) != 0) return "hpz divides world";
    // zero/stage3.py: the hpZ group is made of consecutive global ranks, which with
    // Megatron TP inside hold different shards.
    if (tp != 1) return "hpz groups would cross tensor ranks";
  }
  // runtime/zero/offload_config.py: offload_param only with stage 3.
  if (z.contains("offload_param") && z["offload_param"].value("device", "none") != "none" &&
      stage != 3) {
    return "offload_param needs stage 3";
  }
  // deepspeed/sequence/layer.py:40,56: heads % sp; and the sequence splits over sp.
  if (sp > 1 && w.heads % sp != 0) return "heads % SP";
  if (sp > 1 && w.seq % sp != 0) return "seq % SP";
  if (j.contains("bf16") && j.contains("fp16")) return "bf16 and fp16";
  // The checkpoint writer (runtime/model_checkpointing/config.py:35-58 @
  // edaa722: type and data_parallel upper-cased and checked). A decoupled
  // save is committed by DeepSpeedEngine.step() (engine.py:3452-3453), which
  // the pipeline engine never calls (pipe/engine.py:1244-1252).
  const Json writer = j.value("checkpoint", Json::object()).value("writer", Json());
  bool decoupled = false;
  if (!writer.is_null()) {
    std::string type = writer.value("type", std::string("fast"));
    std::transform(type.begin(), type.end(), type.begin(), ::toupper);
    if (type != "MOCK" && type != "PYTHON" && type != "FAST") return "checkpoint writer type";
    decoupled = writer.value("decoupled", false);
    if (decoupled && pipeline_engine) return "a decoupled save under the pipeline engine";
  }
  if (decoupled != w.save_async) return "async save";
  return "";
}

// AutoEP, the ds_config's expert_parallel block (DeepSpeed edaa722
// runtime/config.py:69, 129-133; module_inject/auto_ep_config.py:41-88 parses
// it, enabled false by default). Its presets and the Hugging Face model types
// each serves (auto_ep_presets/registry.py:19-27; mixtral.py:26, qwen3_moe.py:29,
// qwen3_5_moe.py:40, deepseek_v2.py:35, deepseek_v3.py:35); autoep_size divides
// the stage (world / pp; auto_ep_folding.py:100-115) and the experts
// (auto_ep_config.py:274-290); expert_tensor_parallel_size 1
// (auto_ep_folding.py:214-217).
inline std::string AutoEpWouldReject(const Json& j, const World& w) {
  const Json e = j.value("expert_parallel", Json::object());
  if (!e.value("enabled", false)) return "";
  static const std::map<std::string, std::set<std::string>> kPresets = {
      {"mixtral", {"mixtral"}},
      {"qwen3_moe", {"qwen3_moe", "qwen2_moe"}},
      {"qwen3_5_moe", {"qwen3_5_moe_text"}},
      {"deepseek_v2", {"deepseek_v2"}},
      {"deepseek_v3", {"deepseek_v3"}}};
  const int64_t ep = e.value("autoep_size", int64_t{1});
  if (ep < 1 || w.gpus % ep != 0) return "AutoEP: autoep_size divides the world";
  if (w.experts == 0 || w.experts % ep != 0) return "AutoEP: autoep_size divides the experts";
  if (e.value("expert_tensor_parallel_size", int64_t{1}) != 1) return "AutoEP: etp 1";
  const std::string preset = e.value("preset_model", std::string());
  auto it = kPresets.find(preset);
  if (it == kPresets.end()) return "AutoEP: unknown preset_model " + preset;
  if (!it->second.count(w.hf_model_type))
    return "AutoEP: preset " + preset + " does not build model_type " + w.hf_model_type;
  return "";
}

// The HF flow (framework "deepspeed"): ds_config.json only; Ulysses through
// ALST's UlyssesSPAttentionHF (runtime/sequence_parallel/ulysses_sp.py:145-150):
// heads % sp and kv % sp or sp % kv.
inline std::string DeepSpeedWouldReject(const std::string& text, const World& w) {
  const Json j = Json::parse(text);
  // The HF flow passes no client optimizer: with offload_optimizer on cpu/nvme
  // (runtime/engine.py:1232-1235) DeepSpeed builds DeepSpeedCPUAdam from an
  // "optimizer" of type Adam or AdamW without torch_adam (engine.py:2095-2133;
  // names lower-cased, runtime/config.py:72-73, 840-842); without such a block
  // the script must bring DeepSpeedCPUAdam itself, or engine.py:2040-2044 raises.
  const std::string off =
      j["zero_optimization"].value("offload_optimizer", Json::object()).value("device", "none");
  if (off == "cpu" || off == "nvme") {
    std::string type = j.value("optimizer", Json::object()).value("type", "");
    std::transform(type.begin(), type.end(), type.begin(), ::tolower);
    const bool torch_adam =
        j.value("optimizer", Json::object()).value("params", Json::object()).value("torch_adam",
                                                                                   false);
    if ((type != "adam" && type != "adamw") || torch_adam)
      return "ZeRO-Offload without an optimizer block DeepSpeed makes DeepSpeedCPUAdam of";
  }
  const int64_t sp = j.value("sequence_parallel_size", int64_t{1});
  if (sp > 1 && !(w.kv_heads % sp == 0 || sp % w.kv_heads == 0)) return "ALST: kv heads vs SP";
  if (const std::string why = AutoEpWouldReject(j, w); !why.empty()) return why;
  return DeepSpeedConfigWouldReject(j, w, 1, 1, false);
}

// Megatron-DeepSpeed's launch (megatron/arguments.py @ 4efb479) with the
// ds_config.json written by the heredoc.
inline std::string MegatronDeepSpeedWouldReject(const std::string& text, const World& w) {
  const BashArgs a = ParseBash(text);
  // The heredoc between "cat > ds_config.json <<'EOF'" and "EOF".
  const auto start = text.find("<<'EOF'\n");
  const auto end = text.find("\nEOF\n");
  if (start == std::string::npos || end == std::string::npos) return "no ds_config";
  const Json ds = Json::parse(text.substr(start + 8, end - start - 8));
  // Flags Megatron-DeepSpeed's parser defines (megatron/arguments.py: --num-layers 602,
  // --hidden-size 616, --ffn-hidden-size 618, --num-attention-heads 621,
  // --num-key-value-heads 623, --max-position-embeddings 630,
  // --use-rotary-position-embeddings 633, --rotary-position-embeddings-theta 635,
  // --no-position-embedding 640, --normalization 647,
  // --layernorm-epsilon 652, --swiglu 670, --untie-embeddings-and-output-weights 680, --attention-dropout 768,
  // --hidden-dropout 770, --micro-batch-size 801, --global-batch-size 808,
  // --checkpoint-activations 864, --use-flash-attn-v2 930, --disable-bias-linear 937,
  // --no-pipeline-parallel 954, --ds-sequence-parallel-size 974, --ds-sequence-parallel-fpdt
  // 979, -chunk-size 981, -offloading 983, --fp16 1111, --bf16 1113,
  // --tensor-model-parallel-size 1149, --pipeline-model-parallel-size 1154, --seq-length 1278,
  // MoE: --num-experts 608, --topk 612, --expert-interval 614,
  // --disable-moe-token-dropping 910, --moe-train-capacity-factor 913,
  // --create-moe-param-group 921, --enable-expert-tensor-parallelism 1151,
  // --moe-expert-parallel-size 1159;
  // --cpu-optimizer 948, --zero-stage 1487, --deepspeed-activation-checkpointing 1524;
  // --deepspeed and
  // --deepspeed_config from DeepSpeed's add_config_arguments, deepspeed/__init__.py:285-290;
  // the checkpoint flags below).
  static const std::set<std::string> kFlags = {"--num-layers",
                                               "--hidden-size",
                                               "--ffn-hidden-size",
                                               "--num-attention-heads",
                                               "--num-key-value-heads",
                                               "--seq-length",
                                               "--max-position-embeddings",
                                               "--use-rotary-position-embeddings",
                                               "--rotary-position-embeddings-theta",
                                               "--no-position-embedding",
                                               "--normalization",
                                               "--layernorm-epsilon",
                                               "--swiglu",
                                               "--untie-embeddings-and-output-weights",
                                               "--disable-bias-linear",
                                               "--attention-dropout",
                                               "--hidden-dropout",
                                               "--use-flash-attn-v2",
                                               "--micro-batch-size",
                                               "--global-batch-size",
                                               "--bf16",
                                               "--fp16",
                                               "--tensor-model-parallel-size",
                                               "--pipeline-model-parallel-size",
                                               "--no-pipeline-parallel",
                                               "--ds-sequence-parallel-size",
                                               "--ds-sequence-parallel-fpdt",
                                               "--ds-sequence-parallel-fpdt-chunk-size",
                                               "--ds-sequence-parallel-fpdt-offloading",
                                               "--checkpoint-activations",
                                               "--deepspeed-activation-checkpointing",
                                               "--zero-stage",
                                               "--cpu-optimizer",
                                               "--num-experts",
                                               "--topk",
                                               "--expert-interval",
                                               "--disable-moe-token-dropping",
                                               "--moe-train-capacity-factor",
                                               "--create-moe-param-group",
                                               "--enable-expert-tensor-parallelism",
                                               "--moe-expert-parallel-size",
                                               "--deepspeed",
                                               "--deepspeed_config",
                                               "--save",            // arguments.py:1069
                                               "--save-interval",   // arguments.py:1071
                                               "--load"};           // arguments.py:1077
  for (const auto& [flag, value] : a.args) {
    if (!kFlags.count(flag)) return "unknown flag " + flag;
  }
  const int64_t tp = a.Int("--tensor-model-parallel-size", 1);
  const int64_t pp = a.Int("--pipeline-model-parallel-size", 1);
  const int64_t sp = a.Int("--ds-sequence-parallel-size", 1);
  const bool no_pp = a.Has("--no-pipeline-parallel");
  // arguments.py:94-96: --no-pipeline-parallel needs PP 1.
  if (no_pp && pp != 1) return "no-pipeline-parallel with PP > 1";
  // arguments.py:101-107: world % (PP·TP·SP).
  if (w.gpus % (pp * tp * sp) != 0) return "world % (PP*TP*SP)";
  const int64_t heads = a.Int("--num-attention-heads", -1);
  const int64_t kv = a.Int("--num-key-value-heads", heads);
  if (heads != w.heads || kv != w.kv_heads || a.Int("--num-layers", -1) != w.layers)
    return "model shape";
  // No sliding-window attention flag in its parser: local layers would attend to
  // the whole sequence.
  if (w.sliding_layers > 0 && w.seq > w.sliding_window) return "no sliding-window attention";
  // RoPE: a base only (rope_theta, int, default 10000: arguments.py:635-637); no
  // Llama 3.x frequency scaling anywhere in its parser.
  if (a.Has("--use-rotary-position-embeddings")) {
    if (w.rope_theta > 0 &&
        a.Int("--rotary-position-embeddings-theta", 10000) != static_cast<int64_t>(w.rope_theta))
      return "RoPE base";
    if (w.rope_llama3_scaling > 0) return "no Llama 3.x RoPE scaling";
  }
  // Its norms take --layernorm-epsilon (default 1e-5: arguments.py:652-653,
  // model/transformer.py:992-1036); its attention (ParallelAttention) has no
  // query/key norm and a plain softmax, its gated MLP is --swiglu alone
  // (arguments.py:670): no flag in its parser builds a Q/K norm, attention
  // sinks or a clamped activation.
  if (std::stod(a.Str("--layernorm-epsilon", "1e-5")) != (w.norm_eps > 0 ? w.norm_eps : 1e-5))
    return "norm epsilon";
  if (!w.qk_norm.empty()) return "no Q/K norm";
  if (w.attention_sinks) return "no attention sinks";
  if (w.swiglu_limit > 0) return "no clamped activation";
  // arguments.py:446: heads % kv heads.
  if (heads % kv != 0) return "heads % kv heads";
  // model/transformer.py:562-567: heads and kv heads split over TP (core.utils.divide asserts).
  if (heads % tp != 0 || kv % tp != 0) return "heads over TP";
  // The ZeRO stage of the ds_config and of --zero-stage agree (ZeRO-3 init, training.py).
  if (ds["zero_optimization"]["stage"].get<int64_t>() != a.Int("--zero-stage", 1))
    return "zero stage mismatch";
  // ZeRO-Offload (offload_optimizer on cpu or nvme) refuses a client optimizer
  // other than DeepSpeedCPUAdam while zero_force_ds_cpu_optimizer holds (its
  // default): DeepSpeed runtime/engine.py:2040-2044, 1232-1235. Megatron-DeepSpeed
  // passes its own optimizer (training.py:606-620), DeepSpeedCPUAdam only under
  // --cpu-optimizer (megatron/optimizer/__init__.py:83-94).
  const Json& off = ds["zero_optimization"].value("offload_optimizer", Json::object());
  const std::string off_device = off.value("device", "none");
  if ((off_device == "cpu" || off_device == "nvme") && !a.Has("--cpu-optimizer") &&
      ds.value("zero_force_ds_cpu_optimizer", true)) {
    return "ZeRO-Offload with a GPU client optimizer (no --cpu-optimizer)";
  }
  const bool fpdt = a.Has("--ds-sequence-parallel-fpdt");
  if (sp > 1) {
    // model/transformer.py:618 (Ulysses) and :912 (FPDT): heads % sp.
    if (heads % sp != 0) return "heads % SP";
    if (!fpdt) {
      // model/transformer.py:728-729: Ulysses asserts projection_size == kv_projection_size.
      if (kv != heads) return "Ulysses with GQA";
    } else {
      // deepspeed/sequence/fpdt_layer.py:92-96 (FPDT_InputConstruct, pretrain_gpt.py:129-130).
      const int64_t chunk = a.Int("--ds-sequence-parallel-fpdt-chunk-size", 65536);
      if (w.seq % sp != 0 || w.seq % chunk != 0) return "FPDT seq % chunk";
      const int64_t local = w.seq / sp, per_gpu = w.seq / chunk;
      if (local % per_gpu != 0) return "FPDT local seq % chunks";
      // fpdt_layer.py:208-231 via sequence/layer.py single_all_to_all: K/V heads % sp
      // (the uneven-heads path asserts heads > sp and assumes Q's count).
      if (kv % sp != 0) return "FPDT kv heads % SP";
      // model/transformer.py:162-173 and fpdt_layer.py:1131-1150: the GeLU MLP with biases;
      // FFN chunk chunk/sp/2 splits the local sequence.
      if (w.gated_ffn || !w.linear_bias) return "FPDT FFN needs GeLU with biases";
      const int64_t ffn_chunk = chunk / sp / 2;
      if (ffn_chunk < 1 || local % ffn_chunk != 0) return "FPDT FFN chunk";
    }
  } else if (fpdt) {
    return "FPDT without a sequence-parallel group";
  }
  // --save needs --save-interval (arguments.py:320-321 @ 4efb479); the plan's
  // schedule is saved and resumed.
  if (a.Has("--save") && a.Int("--save-interval", 0) <= 0) return "--save without --save-interval";
  if (w.save_interval > 0 && (!a.Has("--save") || !a.Has("--load") ||
                              a.Int("--save-interval", 0) != w.save_interval)) {
    return "the plan's checkpoints are not saved as priced";
  }
  if (w.save_interval <= 0 && a.Has("--save")) return "saves the plan did not price";
  return DeepSpeedConfigWouldReject(ds, w, tp, pp, !no_pp);
}

// ---------------------------------------------------------------- torchtitan

// `config.section.field = value` assignments of the emitted paratune_plan().
struct PyConfig {
  std::map<std::string, std::string> set;  // "parallelism.tensor_parallel_degree" -> "8"
  std::string ac;                          // "none" | "selective" | "full" | "memory_budget"
  bool flex = true;                        // attn_backend of the model (Flex by default)
  bool float8 = false;
  // The model's token dispatcher: moe_comm_backend of model_registry ("standard"
  // when not given, models/common/config_utils.py:360-425), and whether HybridEP
  // gets a non_blocking_capacity_factor.
  std::string comm_backend = "standard";
  bool non_blocking_capacity = false;
};

inline PyConfig ParsePy(const std::string& text) {
  PyConfig p;
  const std::regex assign(R"(^    config\.([a-z_]+)\.([a-z_0-9]+) = (.+)$)");
  const std::regex ac(R"(^    config\.activation_checkpoint = (.+)$)");
  std::smatch m;
  p.ac = "selective";  // Trainer.Config's default (trainer.py:108-110)
  for (const std::string& line : Lines(text)) {
    std::string l = line.substr(0, line.find("  #"));
    if (std::regex_match(l, m, assign)) {
      std::string v = m[3];
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      p.set[std::string(m[1]) + "." + std::string(m[2])] = v;
    } else if (std::regex_match(l, m, ac)) {
      const std::string v = m[1];
      p.ac = v == "None"                         ? "none"
             : v.rfind("FullAC", 0) == 0         ? "full"
             : v.rfind("SelectiveAC", 0) == 0    ? "selective"
             : v.rfind("MemoryBudgetAC", 0) == 0 ? "memory_budget"
                                                 : "?";
    }
    if (line.find("attn_backend=\"sdpa\"") != std::string::npos) p.flex = false;
    if (line.find("Float8LinearConverter.Config(") != std::string::npos) p.float8 = true;
    const std::regex backend(R"(^\s*moe_comm_backend=\"([a-z_]+)\",?$)");
    if (std::regex_match(line, m, backend)) p.comm_backend = m[1];
    if (line.find("non_blocking_capacity_factor=") != std::string::npos &&
        line.find("non_blocking_capacity_factor=None") == std::string::npos) {
      p.non_blocking_capacity = true;
    }
  }
  return p;
}

// torchtitan's stage split (distributed/pipeline_parallel.py:217-263, 357-467 @ b5bcd76).
inline std::string TorchtitanChunks(int64_t layers, int64_t pp, bool single, int64_t lps,
                                    int64_t in, int64_t out, std::vector<int>* chunks) {
  int64_t stages;
  if (lps > 0) {
    stages = (layers + in + out + lps - 1) / lps;                                        // :221-230
    if (stages % pp != 0) return "stages % PP";                                          // :233
    if (single && stages / pp != 1) return "single-stage schedule with several stages";  // :244
    if (!single && stages / pp < 2) return "looped schedule with one stage per rank";    // :252
  } else {
    stages = pp * (single ? 1 : 2);  // :259-263
  }
  chunks->clear();
  if (stages == 1) {
    chunks->push_back(static_cast<int>(layers));
    return "";
  }
  const int64_t eff = layers + in + out;                 // :387
  if (stages > eff) return "stages > effective layers";  // :392
  const int64_t per = eff / stages, extra = eff % stages;
  if (per == 0) return "empty stages";                                         // :402
  if (in > per || out > per) return "input/output weight > layers per stage";  // :411-418
  int64_t current = 0;
  for (int64_t s = 0; s < stages; ++s) {
    int64_t n = per + (s < extra ? 1 : 0);
    if (s == 0) n -= in;
    if (s == stages - 1) n -= out;
    const int64_t take =
        std::max<int64_t>(0, std::min(n, layers - current));  // `if current_layer < num_layers`
    current += take;
    chunks->push_back(static_cast<int>(take));
  }
  if (current != layers) return "layers left unassigned";
  return "";
}

inline std::string TorchtitanWouldReject(const std::string& text, const World& w, Built* built) {
  const PyConfig py = ParsePy(text);
  // Fields of the config dataclasses (slots=True: an unknown attribute raises):
  // torchtitan/config/configs.py TrainingConfig 36-115, ParallelismConfig 121-291
  // (expert_parallel_degree 282),
  // CompileConfig 294-305.
  static const std::set<std::string> kFields = {
      "training.max_context_length",
      "training.num_tokens_per_microbatch_per_dp_rank",
      "training.num_tokens_per_train_step",
      "training.mixed_precision_param",
      "training.enable_cpu_offload",
      "training.disable_cuda_graphs",
      "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree",
      "parallelism.tensor_parallel_degree",
      "parallelism.enable_sequence_parallel",
      "parallelism.context_parallel_degree",
      "parallelism.spmd_backend",
      "parallelism.context_parallel_load_balancer",
      "parallelism.pipeline_parallel_degree",
      "parallelism.expert_parallel_degree",
      "parallelism.pipeline_parallel_schedule",
      "parallelism.num_pp_microbatches",
      "parallelism.module_fqns_per_model_part",
      "parallelism.pipeline_parallel_first_stage_less_layers",
      "parallelism.pipeline_parallel_last_stage_less_layers",
      "parallelism.pipeline_parallel_layers_per_stage",
      "compile.enable",
      "compile.components",
      "compile.enable_async_tensor_parallel",
      // components/checkpointer/base.py:278, 281, 284; dcp.py:137.
      "checkpoint.enable",
      "checkpoint.folder",
      "checkpoint.interval",
      "checkpoint.async_mode"};
  for (const auto& [k, v] : py.set) {
    if (!kFields.count(k)) return "unknown field " + k;
  }
  auto num = [&](const std::string& k, int64_t def) {
    auto it = py.set.find(k);
    return it == py.set.end() || it->second == "None" ? def : ToInt(it->second);
  };
  auto flag = [&](const std::string& k, bool def) {
    auto it = py.set.find(k);
    return it == py.set.end() ? def : it->second == "True";
  };
  // The checkpointer's __post_init__ (base.py:330, dcp.py:139-149) and the
  // plan's save schedule: enable defaults off (base.py:278).
  if (flag("checkpoint.enable", false)) {
    if (num("checkpoint.interval", 500) < 1) return "checkpoint interval < 1";
    static const std::set<std::string> kModes = {"disabled", "async", "async_with_pinned_mem"};
    const auto mode = py.set.find("checkpoint.async_mode");
    const std::string m = mode == py.set.end() ? "disabled" : mode->second;
    if (!kModes.count(m)) return "async_mode " + m;
    if (w.save_interval <= 0) return "saves the plan did not price";
    if (num("checkpoint.interval", 500) != w.save_interval) return "save interval";
    if ((m != "disabled") != w.save_async) return "async mode";
  } else if (w.save_interval > 0) {
    return "the plan's checkpoints are not saved";
  }
  const int64_t rep = num("parallelism.data_parallel_replicate_degree", 1);
  int64_t shard = num("parallelism.data_parallel_shard_degree", -1);
  const int64_t tp = num("parallelism.tensor_parallel_degree", 1);
  const int64_t pp = num("parallelism.pipeline_parallel_degree", 1);
  const int64_t cp = num("parallelism.context_parallel_degree", 1);
  // distributed/parallel_dims.py:166-192 (_validate).
  for (int64_t d : {rep, cp, tp, pp}) {
    if (d < 1) return "degree >= 1";
  }
  if (shard == -1) shard = w.gpus / (rep * cp * tp * pp);
  if (shard < 1 || rep * shard * cp * tp * pp != w.gpus) return "product != world";
  // models/common/decoder.py:185-199: TP divides n_heads and n_kv_heads.
  if (tp > 1 && (w.heads % tp != 0 || w.kv_heads % tp != 0))
    return "TP must divide heads and kv heads";
  // decoder.py:168-171: no PP with tied embeddings.
  if (pp > 1 && w.tied_embeddings) return "PP with tied embeddings";
  if (cp > 1) {
    // distributed/context_parallel/api.py:24-33 (spmd_types, the default, configs.py:172) and
    // decoder.py:173-183 (not SDPA / varlen).
    auto b = py.set.find("parallelism.spmd_backend");
    if (b != py.set.end() && b->second != "spmd_types") return "CP needs spmd_types";
    if (!py.flex) return "CP needs FlexAttention";
  }
  // configs.py:94 (mixed_precision_param values).
  auto mp = py.set.find("training.mixed_precision_param");
  if (mp != py.set.end() && mp->second != "bfloat16" && mp->second != "float32")
    return "mixed_precision_param";
  // configs.py:55-62 (TrainingConfig.__post_init__).
  const int64_t tokens = num("training.num_tokens_per_microbatch_per_dp_rank", 16384);
  const int64_t step = num("training.num_tokens_per_train_step", -1);
  const int64_t ctx = num("training.max_context_length", 2048);
  if (tokens <= 0 || (step != -1 && step <= 0) || ctx <= 0) return "token counts";
  if (ctx != w.seq) return "max_context_length";
  // trainer.py:124-128.
  const int64_t nmb_cfg = num("parallelism.num_pp_microbatches", 1);
  if (nmb_cfg <= 0) return "num_pp_microbatches";
  // trainer.py:168-199 (Trainer.Config._validate_cuda_graphs, run again at 352):
  // CUDA graphs (on unless disabled, configs.py:75) refuse PP, and EP > 1 unless
  // every token dispatcher is MinimalAsyncEP or HybridEP with
  // non_blocking_capacity_factor.
  const bool graphs = !flag("training.disable_cuda_graphs", false);
  if (graphs && pp > 1) return "PP needs training.disable_cuda_graphs";
  const int64_t ep = num("parallelism.expert_parallel_degree", 1);
  const bool graph_safe_dispatch =
      py.comm_backend == "minimal_async_ep" ||
      (py.comm_backend == "hybridep" && py.non_blocking_capacity);
  if (graphs && ep > 1 && !graph_safe_dispatch)
    return "EP with the " + py.comm_backend + " dispatcher needs training.disable_cuda_graphs";
  // trainer.py:159-166: memory-budget AC needs the compiled model.
  if (py.ac == "memory_budget" && !flag("compile.enable", false))
    return "memory budget AC without compile";
  if (py.ac == "?") return "activation checkpoint";
  // trainer.py:296-308.
  const bool sp = flag("parallelism.enable_sequence_parallel", true);
  const int64_t divisor = (sp ? tp : 1) * (cp > 1 ? 2 * cp : 1);
  if (tokens % divisor != 0) return "tokens per micro-batch % (tp*2cp)";
  // trainer.py:409-428.
  const int64_t nmb = pp > 1 ? nmb_cfg : 1;
  const int64_t dp = rep * shard;
  const int64_t total = step < 0 ? tokens * nmb * dp : step;
  if (total % (tokens * nmb * dp) != 0) return "num_tokens_per_train_step % (tokens * nmb * dp)";
  if (total != w.gbs * w.seq) return "tokens per step differ from the plan's batch";
  if (pp > 1) {
    const std::string sched = py.set.count("parallelism.pipeline_parallel_schedule")
                                  ? py.set.at("parallelism.pipeline_parallel_schedule")
                                  : "1F1B";
    // torch.distributed.pipelining.schedules (get_schedule_class): 1F1B and GPipe are
    // PipelineScheduleSingle; Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble and
    // DualPipeV PipelineScheduleMulti (torchtitan pipeline_parallel.py:17-25 imports the
    // last two, :551-566: "v" style, asserting 2 stages per rank).
    static const std::set<std::string> kMulti = {"Interleaved1F1B", "InterleavedZeroBubble",
                                                 "ZBVZeroBubble", "DualPipeV"};
    if (sched != "1F1B" && sched != "GPipe" && !kMulti.count(sched)) return "schedule " + sched;
    const bool single = !kMulti.count(sched);
    const bool v_style = sched == "ZBVZeroBubble" || sched == "DualPipeV";
    const std::string why = TorchtitanChunks(
        w.layers, pp, single, num("parallelism.pipeline_parallel_layers_per_stage", -1),
        num("parallelism.pipeline_parallel_first_stage_less_layers", 1),
        num("parallelism.pipeline_parallel_last_stage_less_layers", 1), &built->chunk_layers);
    if (!why.empty()) return why;
    if (v_style && static_cast<int64_t>(built->chunk_layers.size()) != 2 * pp)
      return "v schedules assume 2 stages per rank";
    // The split backward of the zero-bubble schedules is refused under torch.compile
    // (torch/distributed/pipelining/schedules.py, _check_torch_compile_compatibility).
    if (sched != "1F1B" && sched != "Interleaved1F1B" && flag("compile.enable", false))
      return "zero-bubble schedule with torch.compile";
  }
  // float8 on SM89+ (components/quantization/float8.py:85-97).
  if (py.float8 && w.gpu_arch_major < 9) return "float8 needs SM89+";
  return "";
}

// ---------------------------------------------------------------------- AxoNN

inline std::map<std::string, int64_t> AxonnInit(const std::string& text) {
  std::map<std::string, int64_t> g;
  const std::regex kv(R"(^\s*(G_\w+)=(\d+),)");
  const std::regex constant(R"(^(\w+) = (\d+))");
  std::smatch m;
  for (const std::string& line : Lines(text)) {
    if (std::regex_search(line, m, kv) || std::regex_search(line, m, constant))
      g[m[1]] = std::stoll(m[2]);
  }
  return g;
}

inline std::string AxonnWouldReject(const std::string& text, const World& w) {
  auto g = AxonnInit(text);
  const int64_t r = g["G_intra_r"], c = g["G_intra_c"], d = g["G_intra_d"], data = g["G_data"],
                inter = g["G_inter"];
  // axonn/communication.py:58-62 @660a224.
  if (inter * data * r * c * d != w.gpus) return "product != world";
  // axonn/axonn.py:96-99 (create_dataloader).
  const int64_t gbs = g["GLOBAL_BATCH_SIZE"], mbs = g["MICRO_BATCH_SIZE"];
  if (gbs % (data * mbs) != 0) return "GBS % (G_data*mbs)";
  if (g["GRADIENT_ACCUMULATION_STEPS"] * mbs * data * d != gbs) return "accumulation steps";
  // axonn/intra_layer/automatic_parallelism.py:15-21: every transformer linear
  // must be parallelizable, or auto_parallelize leaves it sequential; so must
  // the output layer, priced split, over the vocabulary padded as the file
  // asks (padding it needs and only then).
  const int64_t h = w.hidden, f = w.ffn, hd = w.hidden / w.heads;
  auto split = [&](int64_t in, int64_t out) {
    return out % r == 0 && in % c == 0 && (out * in / (r * c)) % d == 0;
  };
  std::smatch pad;
  const bool padded =
      std::regex_search(text, pad, std::regex(R"(output layer .* pad it to (\d+))"));
  if (padded && split(h, w.vocab)) return "vocabulary padding AxoNN does not need";
  const int64_t vocab = padded ? std::stoll(pad[1]) : w.vocab;
  const std::pair<int64_t, int64_t> linears[] = {
      {h, h + 2 * w.kv_heads * hd}, {h, h}, {h, w.kv_heads * hd}, {h, f}, {f, h}, {h, vocab}};
  for (auto [in, out] : linears) {
    if (!split(in, out)) return "linear not parallelizable";
  }
  if (text.find("model_object_for_overlapping_allgathers=None") != std::string::npos &&
      text.find("overlap_all_gather=True") != std::string::npos) {
    // axonn/intra_layer/overlap_communication.py:125-150: all-gather overlap needs the model.
    return "all-gather overlap without the model";
  }
  return "";
}

}  // namespace paratune::frameworks_test
