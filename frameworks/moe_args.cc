#include "frameworks/moe_args.h"

#include "frameworks/emit_internal.h"

namespace paratune::planner {
namespace {

using emit_internal::Num;
using emit_internal::Str;

Status FrameworkRefuses(const char* framework, const std::string& why) {
  return Status::InvalidArgument(std::string(framework) + " would refuse this plan: " + why);
}

// Megatron's --moe-layer-freq for the model's pattern. Megatron reads an int N
// as "layer i is MoE when i % N == 0" (megatron/core/models/gpt/gpt_layer_specs.py:647-650)
// and a string with '[' as a Python list expression, one 0/1 per layer
// (megatron/training/arguments.py:327-350, moe_freq_type). The model's form
// (first_dense_layers dense, then MoE when (i + 1) % moe_layer_step == 0) is
// written as a list expression of runs; "" when every layer is MoE (the default 1).
std::string MoeLayerFreq(const ModelSpec& m) {
  if (m.first_dense_layers == 0 && m.moe_layer_step == 1) return "";
  std::vector<std::pair<int, int>> runs;  // (value, length)
  for (int i = 0; i < m.layers; ++i) {
    const int v = m.is_moe_layer(i) ? 1 : 0;
    if (!runs.empty() && runs.back().first == v) {
      ++runs.back().second;
    } else {
      runs.push_back({v, 1});
    }
  }
  // A repeating tail ((step − 1) dense, 1 MoE) after the dense-first layers is
  // written as one repeated group.
  const int rest = m.layers - m.first_dense_layers;
  std::string out = "(";
  if (m.moe_layer_step > 1 && rest % m.moe_layer_step == 0) {
    if (m.first_dense_layers > 0) out += "[0]*" + Str(m.first_dense_layers) + "+";
    // Step 2 as Megatron's own Llama 4 Maverick example writes it, "([0,1]*24)"
    // (examples/post_training/modelopt/conf/meta-llama/Llama-4-Maverick-17B-128E-Instruct.sh:29).
    const std::string group =
        m.moe_layer_step == 2 ? "[0,1]" : "([0]*" + Str(m.moe_layer_step - 1) + "+[1])";
    out += group + "*" + Str(rest / m.moe_layer_step);
  } else {
    for (size_t i = 0; i < runs.size(); ++i) {
      if (i > 0) out += "+";
      out += "[" + Str(runs[i].first) + "]*" + Str(runs[i].second);
    }
  }
  return out + ")";
}

}  // namespace

Result<std::vector<std::string>> MegatronMoeArgs(const ModelSpec& m, const MoeLaunch& l) {
  std::vector<std::string> args;
  if (!m.is_moe()) {
    // arguments.py:1655-1657: "num_experts must be non None to use expert model parallelism".
    if (l.ep > 1)
      return FrameworkRefuses("Megatron-LM",
                              "ep " + Str(l.ep) + " needs a MoE model (arguments.py:1655-1656)");
    return args;
  }
  // arguments.py:1655-1658: num_experts % expert_model_parallel_size == 0.
  if (l.ep < 1 || m.experts % l.ep != 0) {
    return FrameworkRefuses("Megatron-LM", "the " + Str(m.experts) +
                                               " experts are not a multiple of ep " + Str(l.ep) +
                                               " (arguments.py:1657-1658)");
  }
  // parallel_state.py:874-884: world % (etp · ep · pp) == 0; the rest is expert data parallel.
  const int64_t expert_grid = int64_t{l.etp} * l.ep * l.pp;
  if (l.etp < 1 || expert_grid < 1 || l.world % expert_grid != 0) {
    return FrameworkRefuses("Megatron-LM", "world " + Str(l.world) +
                                               " is not divisible by etp·ep·pp = " +
                                               Str(expert_grid) + " (parallel_state.py:874-884)");
  }
  if (m.moe_ffn_hidden % l.etp != 0) {
    return FrameworkRefuses(
        "Megatron-LM", "the expert width " + Str(m.moe_ffn_hidden) + " does not split over etp " +
                           Str(l.etp) +
                           " (the column-parallel FC1 of each expert, experts.py:1442-1450)");
  }
  const bool flex = l.dispatcher == "deepep" || l.dispatcher == "hybridep";
  if (!flex && l.dispatcher != "alltoall" && l.dispatcher != "allgather") {
    return Status::InvalidArgument("moe_dispatcher: '" + l.dispatcher +
                                   "' (valid: alltoall, allgather, deepep, hybridep)");
  }
  if (l.a2a_overlap) {
    // transformer_config.py:3002-3046: the EP all-to-all overlap needs EP > 1,
    // the alltoall or flex dispatcher, VPP when PP > 1, no full recompute, and
    // bf16 or fp16 (and at most one MTP layer).
    if (l.ep < 2)
      return FrameworkRefuses(
          "Megatron-LM",
          "--overlap-moe-expert-parallel-comm needs ep > 1 (transformer_config.py:3002-3046)");
    if (l.dispatcher == "allgather") {
      return FrameworkRefuses(
          "Megatron-LM",
          "--overlap-moe-expert-parallel-comm needs the alltoall or flex dispatcher, not "
          "allgather (transformer_config.py:3002-3046)");
    }
    if (l.pp > 1 && l.vpp < 2) {
      return FrameworkRefuses(
          "Megatron-LM", "--overlap-moe-expert-parallel-comm with pp " + Str(l.pp) +
                             " needs virtual pipeline stages (transformer_config.py:3002-3046)");
    }
    if (l.full_recompute) {
      return FrameworkRefuses("Megatron-LM",
                              "--overlap-moe-expert-parallel-comm excludes full recompute "
                              "(transformer_config.py:3002-3046)");
    }
    if (l.precision != topology::Precision::kBf16 && l.precision != topology::Precision::kFp16 &&
        l.precision != topology::Precision::kFp8) {
      return FrameworkRefuses("Megatron-LM",
                              "--overlap-moe-expert-parallel-comm needs bf16 or fp16 "
                              "(transformer_config.py:3002-3046)");
    }
    if (m.mtp_layers > 1) {
      return FrameworkRefuses("Megatron-LM",
                              "--overlap-moe-expert-parallel-comm allows at most one MTP layer "
                              "(transformer_config.py:3002-3046)");
    }
  }

  args.push_back("--num-experts " + Str(m.experts));
  args.push_back("--moe-ffn-hidden-size " + Str(m.moe_ffn_hidden));
  args.push_back("--moe-router-topk " + Str(m.top_k));
  if (m.shared_ffn_hidden > 0) {
    args.push_back("--moe-shared-expert-intermediate-size " + Str(m.shared_ffn_hidden));
  }
  if (const std::string freq = MoeLayerFreq(m); !freq.empty()) {
    args.push_back("--moe-layer-freq '" + freq + "'");
  }
  if (m.router == "sigmoid") args.push_back("--moe-router-score-function sigmoid");
  // Group-limited routing (transformer_config.py:780-796, checked at :2671-2677).
  if (m.router_groups > 1) {
    args.push_back("--moe-router-num-groups " + Str(m.router_groups));
    args.push_back("--moe-router-group-topk " + Str(m.router_group_topk));
  }
  // Dropless is Megatron's default (moe_expert_capacity_factor None, transformer_config.py:917).
  if (m.capacity_factor > 0)
    args.push_back("--moe-expert-capacity-factor " + Num(m.capacity_factor));
  if (m.mtp_layers > 0) args.push_back("--mtp-num-layers " + Str(m.mtp_layers));
  if (m.is_mla()) {
    // MLA (arguments.py:3548-3557; multi_latent_attention, transformer_config.py:288).
    args.push_back("--multi-latent-attention");
    // The RMSNorms on the compressed query and key-value projections
    // (DeepSeek-V2's q_a_layernorm and kv_a_layernorm): without --qk-layernorm
    // Megatron's MLA spec builds them as IdentityOp (gpt_layer_specs.py:104-130
    // @d98e8a6), with it the up-projections carry the norm
    // (multi_latent_attention.py:619-630).
    args.push_back("--qk-layernorm");
    if (m.q_lora_rank > 0) args.push_back("--q-lora-rank " + Str(m.q_lora_rank));
    args.push_back("--kv-lora-rank " + Str(m.kv_lora_rank));
    args.push_back("--qk-head-dim " + Str(m.qk_nope_head_dim));
    args.push_back("--qk-pos-emb-head-dim " + Str(m.qk_rope_head_dim));
    args.push_back("--v-head-dim " + Str(m.v_head_dim));
  }
  // Grouped GEMM over the local experts and the fused permutation: what the
  // cost model prices (one grouped GEMM per projection, no Python loop).
  args.push_back("--moe-grouped-gemm");
  args.push_back("--moe-permute-fusion");
  if (flex) {
    args.push_back("--moe-token-dispatcher-type flex");
    args.push_back("--moe-flex-dispatcher-backend " + l.dispatcher);
  } else {
    args.push_back("--moe-token-dispatcher-type " + l.dispatcher);
  }
  args.push_back("--expert-model-parallel-size " + Str(l.ep));
  // Without the flag Megatron uses the attention TP for the experts (arguments.py:587-588):
  // always say it, the plan's ETP is decoupled.
  args.push_back("--expert-tensor-parallel-size " + Str(l.etp));
  if (l.a2a_overlap) args.push_back("--overlap-moe-expert-parallel-comm");
  return args;
}

Result<std::vector<std::string>> TorchtitanMoeLines(const ModelSpec& m, const MoeLaunch& l,
                                                    int dp_shard) {
  std::vector<std::string> lines;
  if (!m.is_moe()) {
    if (l.ep > 1)
      return FrameworkRefuses("torchtitan",
                              "expert_parallel_degree " + Str(l.ep) + " needs a MoE model");
    return lines;
  }
  if (l.etp != 1) {
    return FrameworkRefuses(
        "torchtitan", "etp " + Str(l.etp) +
                          ": its experts' mesh (pp, dp_replicate, efsdp, ep) has no expert "
                          "tensor dimension (torchtitan/distributed/parallel_dims.py:282,328)");
  }
  // parallel_dims.py:187-192: "expert_parallel_degree ({ep}) must divide dp_shard * cp * tp".
  const int64_t sparse_region = int64_t{dp_shard} * l.cp * l.tp;
  if (l.ep < 1 || sparse_region % l.ep != 0) {
    return FrameworkRefuses("torchtitan", "expert_parallel_degree " + Str(l.ep) +
                                              " must divide dp_shard·cp·tp = " +
                                              Str(sparse_region) + " (parallel_dims.py:187-192)");
  }
  if (m.experts % l.ep != 0) {
    return FrameworkRefuses("torchtitan",
                            "the " + Str(m.experts) + " experts do not split over ep " + Str(l.ep));
  }
  // The token dispatcher is the model's comm_backend: "standard" (PyTorch
  // all-to-all), "deepep", "hybridep" or "minimal_async_ep"
  // (torchtitan/models/common/config_utils.py:360-425); none gathers every token.
  if (l.dispatcher == "allgather") {
    return FrameworkRefuses(
        "torchtitan",
        "its token dispatchers are all-to-all (standard), deepep and hybridep; the "
        "allgather dispatcher is Megatron-Core's (models/common/config_utils.py:360-425)");
  }
  if (l.a2a_overlap) {
    return FrameworkRefuses(
        "torchtitan",
        "it has no option that overlaps the dispatch all-to-all with another "
        "micro-batch's compute (Megatron-Core's --overlap-moe-expert-parallel-comm)");
  }
  // torchtitan/config/configs.py:282 (ParallelismConfig.expert_parallel_degree).
  lines.push_back("expert_parallel_degree = " + Str(l.ep));
  return lines;
}

Result<std::string> DeepSpeedMoeLayerCall(const ModelSpec& m, const MoeLaunch& l) {
  if (!m.is_moe()) return FrameworkRefuses("DeepSpeed-MoE", "the model has no experts");
  // deepspeed/moe/layer.py:59: num_experts % ep_size == 0.
  if (l.ep < 1 || m.experts % l.ep != 0) {
    return FrameworkRefuses("DeepSpeed-MoE", "Number of experts (" + Str(m.experts) +
                                                 ") should be divisible by expert parallel size (" +
                                                 Str(l.ep) + ") (deepspeed/moe/layer.py:59)");
  }
  // With expert tensor parallelism the experts use the model's TP group
  // (deepspeed/utils/groups.py:557-560): etp is 1 or the TP degree.
  if (l.etp != 1 && l.etp != l.tp) {
    return FrameworkRefuses("DeepSpeed-MoE",
                            "etp " + Str(l.etp) + " must be 1 or the tensor parallel size " +
                                Str(l.tp) + " (deepspeed/utils/groups.py:557-560)");
  }
  const int64_t tp = l.tp < 1 ? 1 : l.tp, pp = l.pp < 1 ? 1 : l.pp;
  if (l.etp > 1) {
    // groups.py:567-568: _ensure_divisibility(dp_world_size, expert_parallel_size_).
    const int64_t dp = l.world / (tp * pp * (l.cp < 1 ? 1 : l.cp));
    if (dp < 1 || dp % l.ep != 0) {
      return FrameworkRefuses("DeepSpeed-MoE", "the data parallel size " + Str(dp) +
                                                   " is not divisible by ep " + Str(l.ep) +
                                                   " (deepspeed/utils/groups.py:567-568)");
    }
  } else if ((l.world / pp) % l.ep != 0) {
    // groups.py:350-351: _ensure_divisibility(world_size // pp_world_size, expert_parallel_size_).
    return FrameworkRefuses("DeepSpeed-MoE", "world / pp = " + Str(l.world / pp) +
                                                 " is not divisible by ep " + Str(l.ep) +
                                                 " (deepspeed/utils/groups.py:350-351)");
  }
  std::ostringstream os;
  os << "deepspeed.moe.layer.MoE(hidden_size=" << m.hidden
     << ", expert=expert_mlp, num_experts=" << m.experts << ", ep_size=" << l.ep
     << ", k=" << m.top_k;
  // drop_tokens=False is infinite capacity (layer.py docstring), i.e. dropless.
  if (m.capacity_factor > 0) {
    os << ", capacity_factor=" << Num(m.capacity_factor) << ", drop_tokens=True";
  } else {
    os << ", drop_tokens=False";
  }
  if (l.etp > 1) os << ", enable_expert_tensor_parallelism=True";
  os << ")";
  return os.str();
}

}  // namespace paratune::planner
