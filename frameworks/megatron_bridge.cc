// frameworks/megatron_bridge.cc: a plan as a Megatron-Bridge training script.
//
// Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge @ 067f987, 0.7.0 on main,
// pinning Megatron-LM 2a75ac1 as 3rdparty/Megatron-LM) trains from a
// ConfigContainer (src/megatron/bridge/training/config.py:961) that a recipe
// returns and the user overrides in Python before calling
// pretrain(cfg, forward_step): the form its README's training quickstart
// (README.md:148-178) and docs/recipe-usage.md ("Overriding configuration",
// Python) document. The script this room writes does exactly that: it starts
// from the recipe for the planned model where Bridge has one (its H100 bf16
// pretraining recipe; the model comes from the Hugging Face config the recipe
// names) and checks that the recipe builds the planned shapes, or builds a
// GPTModelProvider from the model's architecture when Bridge has none; then it
// sets every field the plan decides.
//
// Bridge runs Megatron-Core, so a plan it can start is a plan Megatron-LM can
// start: the checks are Megatron-LM's (frameworks/megatron.cc) plus Bridge's
// own (Megatron-FSDP without --use-tp-pp-dp-mapping, config.py:1124; MLA
// only through a recipe's provider). The fields are the plan's Megatron-LM
// arguments (MegatronEmitter's writer, with frameworks/moe_args.cc) restated
// one by one as ConfigContainer fields (kFlags below): Megatron-LM's parser
// builds its flags from the same Megatron-Core dataclasses Bridge's configs
// extend, so each flag has its field. A flag without a row here is refused,
// so a new Megatron argument cannot be dropped silently.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <sstream>

#include "common/strings.h"
#include "frameworks/emit_internal.h"
#include "planner/ddp_buckets.h"
#include "planner/model.h"

namespace paratune::planner::emit_internal {
namespace {

constexpr EmitFormat kF = EmitFormat::kMegatronBridge;

// A Megatron-Bridge recipe: the function returning the ConfigContainer for a
// model paratune has a preset of (its H100 bf16 pretraining recipe, the
// canonical name, docs/recipe-usage.md "Choosing a recipe"), where it is
// defined at 067f987.
struct Recipe {
  const char* model;     // paratune preset name (planner/presets/models)
  const char* module;    // Python module under megatron.bridge.recipes
  const char* function;  // the recipe
  const char* source;    // file:line of its definition
};

constexpr Recipe kRecipes[] = {
    {"llama3.2-1b", "llama.h100.llama3", "llama32_1b_pretrain_1gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:44"},
    {"llama3.2-3b", "llama.h100.llama3", "llama32_3b_pretrain_1gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:145"},
    {"llama3-8b", "llama.h100.llama3", "llama3_8b_pretrain_2gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:235"},
    {"llama3-70b", "llama.h100.llama3", "llama3_70b_pretrain_32gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:717"},
    {"llama3.1-8b", "llama.h100.llama3", "llama31_8b_pretrain_2gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:1020"},
    {"llama3.1-70b", "llama.h100.llama3", "llama31_70b_pretrain_32gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:1107"},
    {"llama3.1-405b", "llama.h100.llama3", "llama31_405b_pretrain_256gpu_h100_bf16_config",
     "recipes/llama/h100/llama3.py:1200"},
    {"llama2-7b", "llama.h100.llama2", "llama2_7b_pretrain_2gpu_h100_bf16_config",
     "recipes/llama/h100/llama2.py:25"},
    {"qwen3-30b-a3b", "qwen.h100.qwen3_moe", "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config",
     "recipes/qwen/h100/qwen3_moe.py:32"},
    {"qwen3-235b-a22b", "qwen.h100.qwen3_moe", "qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config",
     "recipes/qwen/h100/qwen3_moe.py:228"},
    {"deepseek-v2-lite", "deepseek.h100.deepseek_v2",
     "deepseek_v2_lite_pretrain_8gpu_h100_bf16_config", "recipes/deepseek/h100/deepseek_v2.py:25"},
    {"deepseek-v3", "deepseek.h100.deepseek_v3", "deepseek_v3_pretrain_1024gpu_h100_bf16_config",
     "recipes/deepseek/h100/deepseek_v3.py:105"},
    {"gpt-oss-20b", "gpt_oss.h100.gpt_oss", "gpt_oss_20b_pretrain_16gpu_h100_bf16_config",
     "recipes/gpt_oss/h100/gpt_oss.py:37"},
    {"gpt-oss-120b", "gpt_oss.h100.gpt_oss", "gpt_oss_120b_pretrain_64gpu_h100_bf16_config",
     "recipes/gpt_oss/h100/gpt_oss.py:162"},
    {"kimi-k2", "kimi.h100.kimi_k2", "kimi_k2_pretrain_512gpu_h100_bf16_config",
     "recipes/kimi/h100/kimi_k2.py:91"},
    {"olmoe-1b-7b", "olmoe.h100.olmoe_7b", "olmoe_7b_pretrain_8gpu_h100_bf16_config",
     "recipes/olmoe/h100/olmoe_7b.py:49"},
};

const Recipe* RecipeFor(const ModelSpec& m) {
  for (const Recipe& r : kRecipes) {
    if (m.name == r.model) return &r;
  }
  return nullptr;
}

// The plan's Megatron-LM arguments, read back from the bash arrays
// MegatronEmitter writes: flag -> value ("" for a switch), with the quotes
// around a layout string or a layer pattern removed.
std::map<std::string, std::string> MegatronArgsOf(const Plan& p) {
  std::map<std::string, std::string> args;
  std::istringstream in(MegatronEmitter().write(p));
  std::string line;
  bool in_array = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#' && line.size() > 2 &&
        line.substr(line.size() - 2) == "=(") {
      in_array = true;
      continue;
    }
    if (line == ")") in_array = false;
    const size_t start = line.find("--");
    if (!in_array || start == std::string::npos) continue;
    const size_t space = line.find(' ', start);
    std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    args[line.substr(start, space == std::string::npos ? std::string::npos : space - start)] =
        value;
  }
  return args;
}

std::string PyStr(const std::string& s) { return "\"" + s + "\""; }
std::string PyBool(bool b) { return b ? "True" : "False"; }

// The script's content before it is written out.
struct Script {
  // GPTModelProvider keyword arguments from the model's architecture (the
  // provider paratune builds when Bridge has no recipe for the model).
  std::vector<std::pair<std::string, std::string>> arch;
  // The shapes a recipe's model must have: (field, Python expression of the
  // recipe's value, planned value).
  std::vector<std::array<std::string, 3>> shapes;
  // "section.field" -> Python value, in the order first set.
  std::vector<std::pair<std::string, std::string>> sets;
  // CommOverlapConfig keyword arguments (training/comm_overlap.py:377).
  std::vector<std::pair<std::string, std::string>> comm;
  std::string mixed_precision;  // a Python expression
  std::set<std::string> imports;
  std::set<std::string> arch_imports;  // what the explicit provider's arguments need

  void Set(const std::string& field, const std::string& value) {
    for (auto& kv : sets) {
      if (kv.first == field) {
        kv.second = value;
        return;
      }
    }
    sets.push_back({field, value});
  }
  void Arch(const std::string& field, const std::string& value) { arch.push_back({field, value}); }
  void Shape(const std::string& field, const std::string& built, const std::string& planned) {
    shapes.push_back({field, built, planned});
  }
};

// One Megatron-LM flag as ConfigContainer fields. Field names are those of
// the dataclasses at Bridge 067f987 / Megatron-LM 2a75ac1 (listed with their
// lines in tests/frameworks/data/bridge_fields.txt).
struct FlagRow {
  const char* flag;
  void (*apply)(const std::string& value, Script* s);
};

void Int(Script* s, const char* field, const std::string& v) { s->Set(field, v); }

// Architecture flags: keyword arguments of the explicit provider; shapes are
// also checked against a recipe's model.
void ArchShape(Script* s, const char* field, const std::string& v) {
  s->Arch(field, v);
  s->Shape(field, std::string("cfg.model.") + field, v);
}
// An Optional[int] architecture field a recipe may leave None for "none".
void ArchShapeOr0(Script* s, const char* field, const std::string& v) {
  s->Arch(field, v);
  s->Shape(field, std::string("(cfg.model.") + field + " or 0)", v);
}

const FlagRow kFlags[] = {
    // GPT_MODEL_ARGS: the architecture (transformer_config.py and gpt_provider.py fields).
    {"--num-layers", [](const std::string& v, Script* s) { ArchShape(s, "num_layers", v); }},
    {"--hidden-size", [](const std::string& v, Script* s) { ArchShape(s, "hidden_size", v); }},
    {"--ffn-hidden-size", [](const std::string& v, Script* s) { s->Arch("ffn_hidden_size", v); }},
    {"--num-attention-heads",
     [](const std::string& v, Script* s) { ArchShape(s, "num_attention_heads", v); }},
    {"--kv-channels", [](const std::string& v, Script* s) { s->Arch("kv_channels", v); }},
    // GQA is stated by the group count alone in Megatron-Core.
    {"--group-query-attention", [](const std::string&, Script*) {}},
    {"--num-query-groups", [](const std::string& v, Script* s) { s->Arch("num_query_groups", v); }},
    {"--seq-length",
     [](const std::string& v, Script* s) {
       s->Set("model.seq_length", v);
       s->Set("dataset.seq_length", v);  // config.py:1644-1648 asserts the two equal
     }},
    // Bridge's GPTModel sizes learned positions by seq_length
    // (gpt_provider.py:298, max_sequence_length=self.seq_length); RoPE has no table.
    {"--max-position-embeddings", [](const std::string&, Script*) {}},
    {"--position-embedding-type",
     [](const std::string& v, Script* s) { s->Arch("position_embedding_type", PyStr(v)); }},
    {"--rotary-base", [](const std::string& v, Script* s) { s->Arch("rotary_base", v); }},
    {"--use-rope-scaling", [](const std::string&, Script* s) { s->Arch("rope_scaling", "True"); }},
    {"--rope-scaling-factor",
     [](const std::string& v, Script* s) { s->Arch("rope_scaling_factor", v); }},
    {"--normalization", [](const std::string& v, Script* s) { s->Arch("normalization", PyStr(v)); }},
    {"--swiglu",
     [](const std::string&, Script* s) {
       // Megatron-LM's --swiglu: a gated unit with SiLU (arguments.py, args.swiglu).
       s->Arch("gated_linear_unit", "True");
       s->Arch("activation_func", "F.silu");
       s->arch_imports.insert("import torch.nn.functional as F");
     }},
    // Megatron-LM's --norm-epsilon is TransformerConfig.layernorm_epsilon
    // (transformer_config.py:201-203 @d98e8a6: argparse_meta arg_names).
    {"--norm-epsilon", [](const std::string& v, Script* s) { s->Arch("layernorm_epsilon", v); }},
    {"--qk-layernorm", [](const std::string&, Script* s) { s->Arch("qk_layernorm", "True"); }},
    {"--softmax-type", [](const std::string& v, Script* s) { s->Arch("softmax_type", PyStr(v)); }},
    {"--quick-geglu",
     [](const std::string&, Script* s) {
       // Megatron-LM's --quick-geglu: a gated unit with quick_gelu
       // (argument_utils.py:323-326 @2a75ac1, fused_bias_geglu.py:185).
       s->Arch("gated_linear_unit", "True");
       s->Arch("activation_func", "quick_gelu");
       s->arch_imports.insert("from megatron.core.fusions.fused_bias_geglu import quick_gelu");
     }},
    {"--glu-linear-offset", [](const std::string& v, Script* s) { s->Arch("glu_linear_offset", v); }},
    {"--activation-func-clamp-value",
     [](const std::string& v, Script* s) { s->Arch("activation_func_clamp_value", v); }},
    {"--untie-embeddings-and-output-weights",
     [](const std::string&, Script* s) { s->Arch("share_embeddings_and_output_weights", "False"); }},
    {"--disable-bias-linear", [](const std::string&, Script* s) { s->Arch("add_bias_linear", "False"); }},
    {"--attention-dropout", [](const std::string& v, Script* s) { s->Set("model.attention_dropout", v); }},
    {"--hidden-dropout", [](const std::string& v, Script* s) { s->Set("model.hidden_dropout", v); }},
    {"--attention-backend",
     [](const std::string& v, Script* s) {
       s->Set("model.attention_backend", "AttnBackend." + v);
       s->imports.insert("from megatron.core.transformer.enums import AttnBackend");
     }},
    {"--window-size",
     [](const std::string& v, Script* s) { s->Arch("window_size", "(" + v + ")"); }},
    {"--window-attn-skip-freq",
     [](const std::string& v, Script* s) { s->Arch("window_attn_skip_freq", v); }},
    {"--no-rope-freq", [](const std::string& v, Script* s) { s->Arch("no_rope_freq", v); }},
    // TRAINING_ARGS.
    {"--micro-batch-size", [](const std::string& v, Script* s) { Int(s, "train.micro_batch_size", v); }},
    {"--global-batch-size",
     [](const std::string& v, Script* s) { Int(s, "train.global_batch_size", v); }},
    // Precision flags are read together (MixedPrecisionOf).
    {"--bf16", [](const std::string&, Script*) {}},
    {"--fp16", [](const std::string&, Script*) {}},
    {"--fp8-format", [](const std::string&, Script*) {}},
    {"--fp8-recipe", [](const std::string&, Script*) {}},
    {"--fp4-format", [](const std::string&, Script*) {}},
    {"--fp4-recipe", [](const std::string&, Script*) {}},
    {"--recompute-granularity",
     [](const std::string& v, Script* s) {
       s->Set("model.recompute_granularity", PyStr(v));
       // Selective recompute of the core attention: Megatron-Core's default
       // module list (transformer_config.py:553-557), stated so that a
       // recipe's own list does not apply.
       if (v == "selective") s->Set("model.recompute_modules", "[\"core_attn\"]");
     }},
    {"--recompute-modules",
     [](const std::string& v, Script* s) {
       // The plan's modules replace the default written above.
       std::string list;
       for (const std::string& name : Split(v, ' ')) list += (list.empty() ? "" : ", ") + PyStr(name);
       s->Set("model.recompute_modules", "[" + list + "]");
     }},
    {"--recompute-method",
     [](const std::string& v, Script* s) { s->Set("model.recompute_method", PyStr(v)); }},
    {"--recompute-num-layers",
     [](const std::string& v, Script* s) { s->Set("model.recompute_num_layers", v); }},
    {"--use-distributed-optimizer",
     [](const std::string&, Script* s) {
       // config.py:2101-2138 keeps the two in step.
       s->Set("ddp.use_distributed_optimizer", "True");
       s->Set("optimizer.use_distributed_optimizer", "True");
     }},
    {"--use-megatron-fsdp",
     [](const std::string&, Script* s) {
       s->Set("ddp.use_megatron_fsdp", "True");
       s->Set("dist.use_megatron_fsdp", "True");
     }},
    {"--data-parallel-sharding-strategy",
     [](const std::string& v, Script* s) { s->Set("ddp.data_parallel_sharding_strategy", PyStr(v)); }},
    {"--fsdp-double-buffer",
     [](const std::string&, Script* s) { s->Set("ddp.fsdp_double_buffer", "True"); }},
    {"--ckpt-format", [](const std::string& v, Script* s) { s->Set("checkpoint.ckpt_format", PyStr(v)); }},
    {"--ddp-bucket-size", [](const std::string& v, Script* s) { s->Set("ddp.bucket_size", v); }},
    // The save schedule the plan was priced with (CheckpointConfig,
    // training/config.py:497 @ 067f987, on Megatron-LM 2a75ac1's fields):
    // finalize() asserts checkpoint.save and the persistent worker under
    // async_save (config.py:601-603; the worker defaults on here, :516) and
    // validate() a torch_dist or fsdp_dtensor format (:1535-1539).
    {"--save",
     [](const std::string&, Script* s) {
       s->imports.insert("import os");
       s->Set("checkpoint.save", kCheckpointDirPython);
     }},
    {"--load", [](const std::string&, Script* s) { s->Set("checkpoint.load", kCheckpointDirPython); }},
    {"--save-interval",
     [](const std::string& v, Script* s) { s->Set("checkpoint.save_interval", v); }},
    {"--async-save", [](const std::string&, Script* s) { s->Set("checkpoint.async_save", "True"); }},
    {"--use-persistent-ckpt-worker",
     [](const std::string&, Script* s) { s->Set("checkpoint.use_persistent_ckpt_worker", "True"); }},
    {"--async-strategy",
     [](const std::string& v, Script* s) { s->Set("checkpoint.async_strategy", PyStr(v)); }},
    {"--cpu-offloading-num-layers",
     [](const std::string& v, Script* s) {
       s->Set("model.cpu_offloading", "True");
       s->Set("model.cpu_offloading_num_layers", v);
     }},
    {"--cuda-graph-impl",
     [](const std::string& v, Script* s) { s->Set("model.cuda_graph_impl", PyStr(v)); }},
    {"--no-check-for-nan-in-loss-and-grad",
     [](const std::string&, Script* s) {
       // Megatron-LM's one flag is two fields here; validate() asserts the
       // loss check off with a full-iteration graph (config.py:1508-1513).
       s->Set("rerun_state_machine.check_for_nan_in_loss", "False");
       s->Set("ddp.check_for_nan_in_grad", "False");
     }},
    {"--use-transformer-engine-op-fuser",
     [](const std::string&, Script* s) { s->Set("model.use_transformer_engine_op_fuser", "True"); }},
    {"--moe-expert-rank-capacity-factor",
     [](const std::string& v, Script* s) { s->Set("model.moe_expert_rank_capacity_factor", v); }},
    {"--moe-paged-stash", [](const std::string&, Script* s) { s->Set("model.moe_paged_stash", "True"); }},
    {"--overlap-grad-reduce",
     [](const std::string&, Script* s) { s->Set("ddp.overlap_grad_reduce", "True"); }},
    {"--overlap-param-gather",
     [](const std::string&, Script* s) {
       s->Set("ddp.overlap_param_gather", "True");
       s->Set("optimizer.overlap_param_gather", "True");
     }},
    // MODEL_PARALLEL_ARGS.
    {"--tensor-model-parallel-size",
     [](const std::string& v, Script* s) { Int(s, "model.tensor_model_parallel_size", v); }},
    {"--pipeline-model-parallel-size",
     [](const std::string& v, Script* s) { Int(s, "model.pipeline_model_parallel_size", v); }},
    {"--pipeline-model-parallel-layout",
     [](const std::string& v, Script* s) { s->Set("model.pipeline_model_parallel_layout", PyStr(v)); }},
    {"--decoder-first-pipeline-num-layers",
     [](const std::string& v, Script* s) { Int(s, "model.num_layers_in_first_pipeline_stage", v); }},
    {"--decoder-last-pipeline-num-layers",
     [](const std::string& v, Script* s) { Int(s, "model.num_layers_in_last_pipeline_stage", v); }},
    {"--account-for-embedding-in-pipeline-split",
     [](const std::string&, Script* s) {
       s->Set("model.account_for_embedding_in_pipeline_split", "True");
     }},
    {"--account-for-loss-in-pipeline-split",
     [](const std::string&, Script* s) { s->Set("model.account_for_loss_in_pipeline_split", "True"); }},
    // The virtual stage count is written from the plan (PlanFields); these
    // are Megatron-LM's two ways of stating it.
    {"--num-layers-per-virtual-pipeline-stage", [](const std::string&, Script*) {}},
    {"--num-virtual-stages-per-pipeline-rank", [](const std::string&, Script*) {}},
    {"--no-overlap-p2p-communication", [](const std::string&, Script*) {}},
    {"--context-parallel-size",
     [](const std::string& v, Script* s) { Int(s, "model.context_parallel_size", v); }},
    {"--cp-comm-type", [](const std::string& v, Script* s) { s->Set("model.cp_comm_type", PyStr(v)); }},
    {"--sequence-parallel", [](const std::string&, Script* s) { s->Set("model.sequence_parallel", "True"); }},
    {"--tp-comm-overlap", [](const std::string&, Script*) {}},  // CommOverlapConfig (PlanFields)
    {"--use-tp-pp-dp-mapping",
     [](const std::string&, Script* s) { s->Set("dist.use_tp_pp_dp_mapping", "True"); }},
    // MOE_ARGS (frameworks/moe_args.cc).
    {"--num-experts", [](const std::string& v, Script* s) { ArchShapeOr0(s, "num_moe_experts", v); }},
    {"--moe-ffn-hidden-size",
     [](const std::string& v, Script* s) { ArchShape(s, "moe_ffn_hidden_size", v); }},
    {"--moe-router-topk", [](const std::string& v, Script* s) { ArchShape(s, "moe_router_topk", v); }},
    {"--moe-shared-expert-intermediate-size",
     [](const std::string& v, Script* s) {
       ArchShapeOr0(s, "moe_shared_expert_intermediate_size", v);
     }},
    {"--moe-layer-freq", [](const std::string& v, Script* s) { s->Arch("moe_layer_freq", v); }},
    {"--moe-router-score-function",
     [](const std::string& v, Script* s) { s->Arch("moe_router_score_function", PyStr(v)); }},
    {"--moe-router-num-groups",
     [](const std::string& v, Script* s) { s->Arch("moe_router_num_groups", v); }},
    {"--moe-router-group-topk",
     [](const std::string& v, Script* s) { s->Arch("moe_router_group_topk", v); }},
    {"--moe-expert-capacity-factor",
     [](const std::string& v, Script* s) { s->Set("model.moe_expert_capacity_factor", v); }},
    {"--mtp-num-layers", [](const std::string&, Script*) {}},  // a shape (ShapeDefaults)
    {"--multi-latent-attention",
     [](const std::string&, Script* s) { s->Arch("multi_latent_attention", "True"); }},
    {"--q-lora-rank", [](const std::string& v, Script* s) { ArchShapeOr0(s, "q_lora_rank", v); }},
    {"--kv-lora-rank", [](const std::string& v, Script* s) { ArchShape(s, "kv_lora_rank", v); }},
    {"--qk-head-dim", [](const std::string& v, Script* s) { ArchShape(s, "qk_head_dim", v); }},
    {"--qk-pos-emb-head-dim",
     [](const std::string& v, Script* s) { ArchShape(s, "qk_pos_emb_head_dim", v); }},
    {"--v-head-dim", [](const std::string& v, Script* s) { ArchShape(s, "v_head_dim", v); }},
    {"--moe-grouped-gemm", [](const std::string&, Script* s) { s->Set("model.moe_grouped_gemm", "True"); }},
    {"--moe-permute-fusion",
     [](const std::string&, Script* s) { s->Set("model.moe_permute_fusion", "True"); }},
    {"--moe-token-dispatcher-type",
     [](const std::string& v, Script* s) { s->Set("model.moe_token_dispatcher_type", PyStr(v)); }},
    {"--moe-flex-dispatcher-backend",
     [](const std::string& v, Script* s) {
       // What Bridge's apply_flex_dispatcher_backend sets
       // (training/flex_dispatcher_backend.py:83-85), without its silent
       // fall-back to all-to-all: validate() refuses an unsupported GPU (88-109).
       s->Set("model.moe_flex_dispatcher_backend", PyStr(v));
       s->Set("model.moe_shared_expert_overlap", "False");
     }},
    {"--expert-model-parallel-size",
     [](const std::string& v, Script* s) { Int(s, "model.expert_model_parallel_size", v); }},
    {"--expert-tensor-parallel-size",
     [](const std::string& v, Script* s) { Int(s, "model.expert_tensor_parallel_size", v); }},
    {"--overlap-moe-expert-parallel-comm",
     [](const std::string&, Script* s) {
       // comm_overlap.py:513-515 asserts the shared-expert overlap off with it.
       s->Set("model.moe_shared_expert_overlap", "False");
     }},
};

const FlagRow* RowOf(const std::string& flag) {
  for (const FlagRow& r : kFlags) {
    if (flag == r.flag) return &r;
  }
  return nullptr;
}

// The run settings a recipe may have set differently, at the value Megatron-LM
// takes when the plan's arguments leave the flag out; the flags then override
// them. Megatron-LM defaults from arguments.py / transformer_config.py @
// 2a75ac1 (the same dataclass defaults Bridge's configs inherit).
void RunDefaults(const Plan& p, Script* s) {
  s->Set("model.tensor_model_parallel_size", "1");
  s->Set("model.pipeline_model_parallel_size", "1");
  s->Set("model.virtual_pipeline_model_parallel_size",
         p.c.vpp > 1 ? Str(p.c.vpp) : std::string("None"));
  s->Set("model.pipeline_model_parallel_layout", "None");
  s->Set("model.num_layers_in_first_pipeline_stage", "None");
  s->Set("model.num_layers_in_last_pipeline_stage", "None");
  s->Set("model.account_for_embedding_in_pipeline_split", "False");
  s->Set("model.account_for_loss_in_pipeline_split", "False");
  s->Set("model.context_parallel_size", "1");
  s->Set("model.cp_comm_type", "None");
  s->Set("model.sequence_parallel", "False");
  s->Set("dist.use_tp_pp_dp_mapping", "False");
  s->Set("model.recompute_granularity", "None");
  s->Set("model.recompute_method", "None");
  s->Set("model.recompute_num_layers", "None");
  s->Set("model.recompute_modules", "None");
  // A full-iteration graph when the plan has one, else none; the module
  // list must be empty with full_iteration (transformer_config.py:1055-1073)
  // and the deprecated scope a recipe may set is cleared.
  s->Set("model.cuda_graph_impl", PyStr("none"));
  s->Set("model.cuda_graph_modules", "[]");
  s->Set("model.cuda_graph_scope", "None");
  s->Set("model.use_transformer_engine_op_fuser", "False");
  s->Set("model.cpu_offloading", "False");
  s->Set("model.cpu_offloading_num_layers", "0");
  s->Set("ddp.use_distributed_optimizer", "False");
  s->Set("optimizer.use_distributed_optimizer", "False");
  s->Set("ddp.overlap_grad_reduce", "False");
  s->Set("ddp.overlap_param_gather", "False");
  s->Set("optimizer.overlap_param_gather", "False");
  s->Set("ddp.use_megatron_fsdp", "False");
  s->Set("dist.use_megatron_fsdp", "False");
  s->Set("ddp.data_parallel_sharding_strategy", PyStr("no_shard"));
  s->Set("checkpoint.ckpt_format", PyStr("torch_dist"));
  // A plan priced with a save schedule saves as priced, not as a recipe
  // that turns async_save on after building its config would.
  if (p.checkpoint_interval_steps > 0) s->Set("checkpoint.async_save", "False");
  if (p.job.model.is_moe()) {
    s->Set("model.moe_token_dispatcher_type", PyStr("alltoall"));
    s->Set("model.moe_flex_dispatcher_backend", "None");
    s->Set("model.moe_grouped_gemm", "False");
    s->Set("model.moe_permute_fusion", "False");
    s->Set("model.moe_expert_capacity_factor", "None");
    s->Set("model.moe_expert_rank_capacity_factor", "None");
    s->Set("model.moe_paged_stash", "False");
  }
}

// The planned shapes Megatron-LM's arguments leave at a default, stated for
// the recipe check: query groups (= heads), the head width (hidden / heads),
// the dense FFN width where the model has dense layers, MTP depth.
void ShapeDefaults(const ModelSpec& m, const std::map<std::string, std::string>& a, Script* s) {
  if (!m.is_mla()) {
    const auto g = a.find("--num-query-groups");
    s->Shape("num_query_groups", "(cfg.model.num_query_groups or cfg.model.num_attention_heads)",
             g == a.end() ? Str(m.heads) : g->second);
    const auto kv = a.find("--kv-channels");
    s->Shape("kv_channels",
             "(cfg.model.kv_channels or cfg.model.hidden_size // cfg.model.num_attention_heads)",
             kv == a.end() ? Str(m.hidden / m.heads) : kv->second);
  }
  if (m.dense_layer_count() > 0)
    s->Shape("ffn_hidden_size", "cfg.model.ffn_hidden_size", Str(m.ffn_hidden));
  if (m.is_moe() && !a.count("--moe-shared-expert-intermediate-size")) {
    s->Shape("moe_shared_expert_intermediate_size",
             "(cfg.model.moe_shared_expert_intermediate_size or 0)", "0");
  }
  if (m.is_mla() && !a.count("--q-lora-rank"))
    s->Shape("q_lora_rank", "(cfg.model.q_lora_rank or 0)", "0");
  const auto mtp = a.find("--mtp-num-layers");
  s->Shape("mtp_num_layers", "(cfg.model.mtp_num_layers or 0)", mtp == a.end() ? "0" : mtp->second);
}

// Bridge's named mixed-precision recipe for the plan's precision flags
// (training/mixed_precision.py @ 067f987): bf16_mixed (185), fp16_mixed (201),
// fp8 delayed scaling (217), per-tensor current scaling = Megatron's
// tensorwise (285), blockwise = Bridge's subchannel scaling (373), MXFP8 (255),
// NVFP4 (405). fp32 has no named recipe: a MixedPrecisionConfig with fp32
// set and neither half type.
std::string MixedPrecisionOf(const std::map<std::string, std::string>& a, Script* s) {
  const auto fp8 = a.find("--fp8-recipe");
  if (fp8 != a.end()) {
    if (fp8->second == "delayed") return PyStr("bf16_with_fp8_delayed_scaling_mixed");
    if (fp8->second == "tensorwise") return PyStr("bf16_with_fp8_current_scaling_mixed");
    if (fp8->second == "blockwise") return PyStr("bf16_with_fp8_subchannel_scaling_mixed");
    if (fp8->second == "mxfp8") return PyStr("bf16_with_mxfp8_mixed");
    return "";
  }
  if (a.count("--fp4-recipe"))
    return a.at("--fp4-recipe") == "nvfp4" ? PyStr("bf16_with_nvfp4_mixed") : "";
  if (a.count("--bf16")) return PyStr("bf16_mixed");
  if (a.count("--fp16")) return PyStr("fp16_mixed");
  s->imports.insert("from megatron.bridge.training.mixed_precision import MixedPrecisionConfig");
  return "MixedPrecisionConfig(fp32=True, params_dtype=torch.float32, "
         "pipeline_dtype=torch.float32)";
}

// What the plan decides that is not one Megatron-LM flag: the communication
// overlaps, which Bridge applies through CommOverlapConfig.setup over the
// model and DDP fields (comm_overlap.py:604-645; its defaults would turn on
// what the plan leaves off), and the environment the run must keep.
void PlanFields(const Plan& p, const std::map<std::string, std::string>& a, Script* s) {
  const ParallelConfig& c = p.c;
  const bool p2p_overlap = c.pp > 1 && c.vpp > 1 && !a.count("--no-overlap-p2p-communication");
  const bool tp_overlap = a.count("--tp-comm-overlap") > 0;
  const bool ep_overlap = a.count("--overlap-moe-expert-parallel-comm") > 0;
  s->Set("model.tp_comm_overlap", PyBool(tp_overlap));
  s->Set("model.overlap_p2p_comm", PyBool(p2p_overlap));
  s->Set("model.batch_p2p_comm", PyBool(c.pp > 1 && !p2p_overlap));
  // A recipe's user-buffer shapes are its own TP and sequence; TE's default
  // configuration serves any (comm_overlap.py:620-625).
  s->comm.push_back({"tp_comm_overlap", PyBool(tp_overlap)});
  s->comm.push_back({"tp_comm_overlap_cfg", "None"});
  s->comm.push_back({"overlap_p2p_comm", PyBool(p2p_overlap)});
  s->comm.push_back({"batch_p2p_comm", PyBool(c.pp > 1 && !p2p_overlap)});
  s->comm.push_back({"overlap_grad_reduce", PyBool(a.count("--overlap-grad-reduce") > 0)});
  s->comm.push_back({"overlap_param_gather", PyBool(a.count("--overlap-param-gather") > 0)});
  // Bridge's own bucket with the distributed optimizer is 128 Mi elements
  // (comm_overlap.py:576-577); the plan is priced with the job's stated
  // bucket or Megatron-LM's max(4e7, 1e6 x dp x cp) (training.py:2189
  // @d98e8a6), so that one is stated.
  const planner::FrameworkCosts& fc = planner::FrameworkPreset(planner::Framework::kMegatron).costs;
  const bool buckets = a.count("--overlap-grad-reduce") > 0 && c.zero == 0;
  const double bucket =
      planner::DdpBucketElements(fc, p.job.training.ddp_bucket_elements, c.gdata * c.cp);
  s->comm.push_back(
      {"bucket_size", buckets ? std::to_string(static_cast<int64_t>(bucket)) : "None"});
  s->comm.push_back({"overlap_moe_expert_parallel_comm", PyBool(ep_overlap)});
  s->comm.push_back({"delay_wgrad_compute", "False"});
  if (p.job.model.is_moe()) s->Set("model.overlap_moe_expert_parallel_comm", PyBool(ep_overlap));
}

// The script's fields from the plan, or the Megatron-LM flag it has no field for.
Result<Script> ScriptOf(const Plan& p) {
  const std::map<std::string, std::string> a = MegatronArgsOf(p);
  Script s;
  RunDefaults(p, &s);
  for (const auto& [flag, value] : a) {
    const FlagRow* row = RowOf(flag);
    if (!row) return Refuse(kF, "Megatron-LM's " + flag + " has no ConfigContainer field here");
    row->apply(value, &s);
  }
  ShapeDefaults(p.job.model, a, &s);
  s.mixed_precision = MixedPrecisionOf(a, &s);
  if (s.mixed_precision.empty()) {
    return Refuse(kF,
                  "the plan's low-precision recipe has no Megatron-Bridge mixed-precision recipe");
  }
  PlanFields(p, a, &s);
  // The vocabulary the plan priced: an explicit model vocab_size at least the
  // tokenizer's is kept unpadded (training/setup.py:741-781); the recipes'
  // tokenizer would otherwise set it (use_tokenizer_vocab_size,
  // recipes/common.py:111-115). A NullTokenizer of that size stands in for the
  // user's tokenizer.
  const std::string vocab = Str(p.job.model.vocab);
  s.Set("model.vocab_size", vocab);
  s.Set("tokenizer.tokenizer_type", PyStr("NullTokenizer"));
  s.Set("tokenizer.tokenizer_model", "None");
  s.Set("tokenizer.vocab_size", vocab);
  s.Set("tokenizer.use_tokenizer_vocab_size", "False");
  return s;
}

Status Check(const Plan& p) {
  if (Status st = MegatronEmitter().check(p); !st.ok()) {
    // Megatron-LM's refusal, said as this format's.
    const std::string prefix = std::string("--format ") + EmitFormatName(EmitFormat::kMegatron) +
                               " cannot express this plan: ";
    std::string why = st.message();
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    return Refuse(kF, why);
  }
  if (p.c.zero >= 2 && !OrderMatches(p.c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp})) {
    return Refuse(kF,
                  "Megatron-FSDP with the tp-cp-pp-dp rank order: Bridge asserts "
                  "use_tp_pp_dp_mapping off with Megatron-FSDP (training/config.py:1124)");
  }
  if (p.job.model.is_mla() && !RecipeFor(p.job.model)) {
    return Refuse(kF,
                  "multi-latent attention is built by a model's own provider (its "
                  "MLATransformerConfig, models/mla_provider.py) and Megatron-Bridge has no "
                  "recipe for " +
                      p.job.model.name);
  }
  auto s = ScriptOf(p);
  return s.ok() ? Status::Ok() : s.status();
}

std::vector<Keep> KeepOf(const Plan& p) { return MegatronEmitter().keep(p); }

std::string Launcher(const Plan& p) {
  std::ostringstream os;
  os << "torchrun --nnodes " << p.Nodes() << " --nproc-per-node " << p.GpusPerNode()
     << " --node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port 6000 paratune_bridge.py";
  return os.str();
}

// The model part of paratune_config(): the recipe and its shape check, or the
// explicit provider.
void WriteModel(const Plan& p, const Script& s, std::ostringstream& os) {
  const Recipe* r = RecipeFor(p.job.model);
  if (r) {
    os << "    # Megatron-Bridge's recipe for " << p.job.model.name << " (" << r->source
       << "); its model comes from the Hugging Face config it names.\n";
    os << "    cfg = " << r->function << "()\n";
    os << "    # The recipe must build the model the plan was priced for.\n";
    for (const auto& sh : s.shapes) {
      os << "    _expect(\"" << sh[0] << "\", " << sh[2] << ", " << sh[1] << ")\n";
    }
    return;
  }
  os << "    # Megatron-Bridge has no recipe for " << p.job.model.name
     << ": the common pretraining defaults (recipes/common.py:37) with a\n"
     << "    # GPTModelProvider of the model's architecture (models/gpt_provider.py:129).\n";
  os << "    cfg = _pretrain_common()\n";
  os << "    cfg.model = GPTModelProvider(\n";
  for (const auto& [k, v] : s.arch) os << "        " << k << "=" << v << ",\n";
  os << "    )\n";
}

std::string Write(const Plan& p) {
  auto script = ScriptOf(p);
  if (!script.ok()) return "";  // Check() has refused it
  const Script& s = *script;
  const Recipe* r = RecipeFor(p.job.model);
  std::ostringstream os;
  os << Header(p, MegatronBridgeEmitter(), "#", "Megatron-Bridge training script");
  os << "import torch\n";
  for (const std::string& i : s.imports) os << i << "\n";
  if (!r) {
    for (const std::string& i : s.arch_imports) os << i << "\n";
  }
  if (r) {
    os << "from megatron.bridge.recipes." << r->module << " import " << r->function << "\n";
  } else {
    os << "from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
          "from megatron.bridge.recipes.common import _pretrain_common\n";
  }
  os << "from megatron.bridge.training.comm_overlap import CommOverlapConfig\n"
        "from megatron.bridge.training.gpt_step import forward_step\n"
        "from megatron.bridge.training.pretrain import pretrain\n\n\n";
  os << "def _expect(field, planned, built):\n"
        "    if built != planned:\n"
        "        raise SystemExit(f\"paratune: the recipe's model has {field} = {built}, \"\n"
        "                         f\"the plan was made for {planned}\")\n\n\n";
  os << "def paratune_config():\n";
  WriteModel(p, s, os);
  os << "    # What the plan decides (each field as Megatron-LM's argument of the same plan).\n";
  for (const auto& [field, value] : s.sets) os << "    cfg." << field << " = " << value << "\n";
  os << "    cfg.mixed_precision = " << s.mixed_precision << "\n";
  os << "    cfg.comm_overlap = CommOverlapConfig(\n";
  for (const auto& [k, v] : s.comm) os << "        " << k << "=" << v << ",\n";
  os << "    )\n";
  // The environment: Bridge applies cfg.env_vars before it finalizes the
  // config, the process's own values first (config.py:1971-1989).
  if (p.c.zero >= 2) os << "    cfg.env_vars.pop(\"CUDA_DEVICE_MAX_CONNECTIONS\", None)\n";
  for (const Keep& k : KeepOf(p)) {
    os << "    cfg.env_vars[\"" << k.name << "\"] = \"" << k.value << "\"\n";
  }
  os << "    return cfg\n\n\n";
  os << "if __name__ == \"__main__\":\n"
        "    pretrain(paratune_config(), forward_step)\n";
  return os.str();
}

}  // namespace

// The Megatron-Bridge snapshot whose config code the script follows.
constexpr Follows kFollows{
    "NVIDIA-NeMo/Megatron-Bridge", "067f987", "0.7.0 (main), Megatron-LM 2a75ac1",
    "src/megatron/bridge/training/config.py, training/comm_overlap.py, "
    "training/mixed_precision.py, models/gpt_provider.py, recipes/; Megatron-LM 2a75ac1 "
    "megatron/core/transformer/transformer_config.py, model_parallel_config.py"};

const FrameworkEmitter& MegatronBridgeEmitter() {
  static const FrameworkEmitter e{kF, kFollows, Check, Write, KeepOf, Launcher};
  return e;
}

}  // namespace paratune::planner::emit_internal
