// frameworks/megatron.cc: Megatron-LM / Megatron-Core's start-up rules and its
// arguments.
//
// Rules from NVIDIA/Megatron-LM @ d98e8a6 (Megatron-Core 0.20.0) and
// NVIDIA/TransformerEngine @ d0067d0, restated with their lines in
// tests/frameworks/framework_rules.h: world % (TP·PP·CP) == 0; GBS % (MBS·DP)
// == 0; heads % TP == 0; query groups a multiple or divisor of TP; the
// pipeline layout (planner/pipeline.h, rule "megatron": even, first/last
// stage counts, or embedding/loss counted as layers; the interleaved schedule
// with PP > 1, > 2 without p2p overlap, and whole groups of PP micro-batches);
// seq % (2·CP) == 0; TE's all-to-all CP needs local Q and KV heads divisible
// by CP; --overlap-param-gather needs the distributed optimizer and
// --overlap-grad-reduce; --tp-comm-overlap needs --sequence-parallel; full
// recompute needs a method and a layer count; TP or CP before Blackwell needs
// CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-FSDP needs it unset); ZeRO-2 and
// ZeRO-3 are Megatron-FSDP's optim_grads and optim_grads_params; CPU
// activation offloading needs PP = 1 and no recompute; the fp8 recipe and
// NVFP4 are written as --fp8-recipe / --fp4-format.
// Mixture-of-experts plans add the expert rules of frameworks/moe_args.h
// (experts % EP, world % (ETP·EP·PP), the expert width over ETP, the a2a
// overlap's conditions) and, with --use-tp-pp-dp-mapping and PP > 1, expert
// DP == DP (parallel_state.py:898-902).
#include <algorithm>
#include <sstream>

#include "common/enum_names.h"
#include "frameworks/emit_internal.h"
#include "planner/model.h"
#include "planner/moe.h"

namespace paratune::planner::emit_internal {
namespace {

constexpr EmitFormat kF = EmitFormat::kMegatron;

Status CheckFleetFeatures(const Plan& p);
void PrecisionArgs(const TrainingSpec& t, std::vector<std::string>* out);
void FleetFeatureArgs(const Plan& p, std::vector<std::string>* out);

Status Check(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  if (c.gx != 1 || c.gz != 1) {
    return Refuse(kF, ShardingGridWords(p) + ": Megatron-LM's tensor parallelism is gx = gz = 1");
  }
  if (c.qwz || c.hpz || c.qgz) {
    return Refuse(kF, "ZeRO stage " + Str(c.zero) +
                          " with ZeRO++ is not a Megatron-LM option (its distributed optimizer is "
                          "ZeRO-1, Megatron-FSDP ZeRO-2 and ZeRO-3); use --format deepspeed");
  }
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    return Refuse(kF,
                  "FPDT is a DeepSpeed sequence-parallel mode; Megatron-LM's --cp-comm-type "
                  "offers p2p (ring) and a2a (Ulysses)");
  }
  if (c.offload_optimizer || c.offload_param) {
    return Refuse(kF,
                  "the plan offloads the optimizer or parameters to host memory the way "
                  "DeepSpeed's ZeRO-Offload does (offload_optimizer / offload_param); "
                  "use --format deepspeed");
  }
  const int64_t model_size = int64_t{c.gy} * c.pp * c.cp;
  if (p.job.gpus % model_size != 0) {
    return Refuse(kF, "world size " + Str(p.job.gpus) + " is not divisible by TP·PP·CP = " +
                          Str(model_size) + " (arguments.py:424-434)");
  }
  const int64_t dp = p.job.gpus / model_size;
  if (dp != c.gdata) {
    return Refuse(kF, "Megatron derives DP = world/(TP·PP·CP) = " + Str(dp) +
                          ", but the plan has dp = " + Str(c.gdata));
  }
  if (p.Gbs() % (int64_t{c.mbs} * dp) != 0) {
    return Refuse(kF, "global batch " + Str(p.Gbs()) + " is not divisible by micro-batch × DP = " +
                          Str(int64_t{c.mbs} * dp) + " (num_microbatches_calculator.py:381-384)");
  }
  if (m.hidden % m.heads != 0) {
    return Refuse(kF,
                  "hidden size " + Str(m.hidden) + " is not divisible by heads " + Str(m.heads));
  }
  if (m.heads % c.gy != 0) {
    return Refuse(kF, "attention heads " + Str(m.heads) + " are not divisible by TP " + Str(c.gy) +
                          " (transformer_config.py:1446-1450)");
  }
  if (m.kv_heads % c.gy != 0 && c.gy % m.kv_heads != 0) {
    return Refuse(kF, "query groups " + Str(m.kv_heads) +
                          " are neither a multiple nor a divisor of TP " + Str(c.gy) +
                          " (transformer_config.py:1461-1467)");
  }
  const std::string layout = PipelineLayoutError(m.layers, c, PpSplit::kMegatron);
  if (!layout.empty()) return Refuse(kF, layout);
  PT_RETURN_IF_ERROR(CheckSameSplit(p, kF, PpSplit::kMegatron));
  if (c.vpp > 1) {
    if (c.pp < 2 || (!c.overlap_p2p && c.pp < 3)) {
      return Refuse(kF,
                    "the interleaved schedule needs PP > 1 (PP > 2 without p2p overlap); PP = " +
                        Str(c.pp) + " (arguments.py:999-1008)");
    }
    // Micro-batches run in groups of PP per virtual stage; a partial group is an error.
    const int64_t micro = p.Gbs() / (int64_t{c.mbs} * dp);
    if (micro < c.pp || micro % c.pp != 0) {
      return Refuse(kF, "the interleaved schedule needs the micro-batch count (" + Str(micro) +
                            ") to be a multiple of PP (" + Str(c.pp) +
                            ") (schedules.py:1160-1180)");
    }
  }
  if (c.cp > 1 && p.job.training.seq_len % (2 * c.cp) != 0) {
    return Refuse(kF, "seq-length " + Str(p.job.training.seq_len) +
                          " is not a multiple of 2·CP = " + Str(2 * c.cp) +
                          " (arguments.py:1335-1337)");
  }
  PT_RETURN_IF_ERROR(CheckFleetFeatures(p));
  if (const std::string gap = MegatronModelGap(m, p.job.training.seq_len); !gap.empty()) {
    return Refuse(kF, gap);
  }
  const bool dist_opt = c.distributed_optimizer || c.zero >= 1;
  if (c.overlap_param_gather && !(dist_opt && c.overlap_grad_reduce)) {
    return Refuse(
        kF,
        "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce "
        "(arguments.py:1024-1028)");
  }
  if (c.tp_comm_overlap && !(c.sp && c.gy > 1)) {
    return Refuse(
        kF, "--tp-comm-overlap needs --sequence-parallel with TP > 1 (arguments.py:1433-1442)");
  }
  const bool tp_dp_pp = OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp});
  const bool tp_pp_dp = OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kPp, Dim::kData});
  if (!tp_dp_pp && !tp_pp_dp) {
    return Refuse(
        kF, "rank order " + OrderString(c) +
                " is neither Megatron's tp-cp-dp-pp nor tp-cp-pp-dp (--use-tp-pp-dp-mapping)");
  }
  if (p.job.training.precision == topology::Precision::kTf32) {
    return Refuse(
        kF,
        "tf32 is not a Megatron-LM precision flag (fp32 training uses TF32 GEMMs by default); "
        "plan with --precision fp32");
  }
  if (m.is_moe() || c.ep > 1) {
    auto moe = MegatronMoeArgs(m, MoeLaunchOf(p));
    if (!moe.ok()) return RefuseMoe(kF, moe.status());
    // The expert ranks follow Megatron's order with ep in place of cp:
    // tp-ep-dp-pp, or tp-ep-pp-dp under --use-tp-pp-dp-mapping, which does
    // not end in pp and then needs expert DP == DP with PP > 1
    // (parallel_state.py:898-902).
    const int64_t edp = p.job.gpus / (int64_t{c.etp} * c.ep * c.pp);
    if (!tp_dp_pp && c.pp > 1 && edp != dp) {
      return Refuse(kF, "with --use-tp-pp-dp-mapping and PP " + Str(c.pp) +
                            " Megatron needs the expert data-parallel size " + Str(edp) +
                            " to equal DP " + Str(dp) + " (parallel_state.py:898-902)");
    }
  }
  return CheckPresetRules(p, kF, Framework::kMegatron);
}

// Megatron-Core features of 2026 training recipes: Megatron-FSDP (zero = 2, 3),
// CPU activation offloading, full-iteration CUDA graphs. Their rules, from
// Megatron-LM @ d98e8a6.
Status CheckFleetFeatures(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  if (c.offload_activation_layers > 0) {
    // transformer_config.py:1884-1899 (__post_init__).
    if (c.offload_activation_layers >= m.layers) {
      return Refuse(kF, "--cpu-offloading-num-layers " + Str(c.offload_activation_layers) +
                            " must be below the model's " + Str(m.layers) +
                            " layers (transformer_config.py:1884-1889)");
    }
    if (c.pp > 1) {
      return Refuse(kF,
                    "CPU activation offloading has no support for pipeline parallelism "
                    "(transformer_config.py:1891-1894)");
    }
    if (c.recompute != Recompute::kNone) {
      return Refuse(kF,
                    "CPU activation offloading does not work with activation recompute "
                    "(transformer_config.py:1896-1899)");
    }
  }
  if (const char* why = MegatronMoeCudaGraphGap(m, c)) return Refuse(kF, why);
  return Status::Ok();
}

// Precision and low-precision recipe flags: --bf16 / --fp16, and for fp8 jobs
// TransformerConfig.fp8 (--fp8-format, transformer_config.py:587-589) with
// fp8_recipe (--fp8-recipe, 594-596; default "delayed", so it is always
// written), or fp4 (--fp4-format e2m1, 673-675) with fp4_recipe nvfp4
// (--fp4-recipe, 679). fp8 and fp4 exclude each other (arguments.py:1100-1101).
// Recipes: fp8_delayed = delayed, fp8_current = tensorwise (per-tensor current
// scaling), fp8_blockwise = blockwise, mxfp8 = mxfp8.
void PrecisionArgs(const TrainingSpec& t, std::vector<std::string>* out) {
  switch (t.precision) {
    case topology::Precision::kBf16:
      out->push_back("--bf16");
      return;
    case topology::Precision::kFp16:
      out->push_back("--fp16");
      return;
    case topology::Precision::kFp8:
      break;
    default:
      return;  // fp32: no flag
  }
  out->push_back("--bf16");
  if (t.recipe == topology::Recipe::kNvfp4) {
    out->push_back("--fp4-format e2m1");
    out->push_back("--fp4-recipe nvfp4");
    return;
  }
  // --fp8-recipe by Recipe, in its declaration order (topology/gpu.h; nvfp4 above).
  constexpr const char* kFp8Recipes[] = {"delayed", "tensorwise", "blockwise", "mxfp8"};
  const char* fp8_recipe = EnumLookup(t.recipe, kFp8Recipes, "tensorwise");
  // hybrid: E4M3 forward, E5M2 gradients (the format of every recipe the cost
  // model prices; MXFP8 and blockwise scaling use E4M3 data either way).
  out->push_back("--fp8-format hybrid");
  out->push_back(std::string("--fp8-recipe ") + fp8_recipe);
}

// Flags of the features CheckFleetFeatures admits.
void FleetFeatureArgs(const Plan& p, std::vector<std::string>* out) {
  const ParallelConfig& c = p.c;
  if (c.zero >= 2) {
    // Megatron-FSDP (common_config.py:92, --use-megatron-fsdp) sharding
    // optimizer states and gradients (ZeRO-2: optim_grads) or parameters too
    // (ZeRO-3: optim_grads_params) (arguments.py:3190-3192; the buffers each
    // shards, megatron_fsdp/param_and_grad_buffer.py:2330-2345); it asserts
    // the fsdp_dtensor checkpoint format (arguments.py:1169-1170). The double
    // buffer (arguments.py:3202) bounds its communication memory to the two
    // units the plan is priced with (param_and_grad_buffer.py:2526,
    // 3956-3978); without it the reduce-scatter queue and the prefetch hold
    // up to 1e9 elements (megatron_fsdp.py:432-444).
    out->push_back("--use-megatron-fsdp");
    out->push_back(std::string("--data-parallel-sharding-strategy ") +
                   (c.zero == 2 ? "optim_grads" : "optim_grads_params"));
    out->push_back("--fsdp-double-buffer");
    out->push_back("--ckpt-format fsdp_dtensor");
  }
  if (c.offload_activation_layers > 0) {
    // model_parallel_config.py:461; validate_args sets cpu_offloading from it
    // (arguments.py:1950-1951).
    out->push_back("--cpu-offloading-num-layers " + Str(c.offload_activation_layers));
  }
  if (c.cuda_graphs) {
    // One graph of the forward-backward (transformer_config.py:1075-1088),
    // which asserts the NaN check off (arguments.py:1235-1237).
    out->push_back("--cuda-graph-impl full_iteration");
    out->push_back("--no-check-for-nan-in-loss-and-grad");
    if (p.job.model.is_moe()) {
      // Static dispatch shapes for the capture, as Megatron-Bridge's MXFP8
      // recipes set them (perf_recipes/qwen/common.py:36-60 @v0.6.0): HybridEP
      // with a per-rank budget of 1.5x the balanced load (tokens beyond it are
      // dropped, transformer_config.py:1019-1025), which needs TE's op fuser
      // (1868-1882), and the paged stash of the experts' activations.
      out->push_back("--use-transformer-engine-op-fuser");
      out->push_back("--moe-expert-rank-capacity-factor 1.5");
      out->push_back("--moe-paged-stash");
    }
  }
}

std::vector<Keep> KeepOf(const Plan& p) {
  std::vector<Keep> k;
  // The name Megatron's own checks read (arguments.py:1961-1968,
  // distributed_data_parallel_config.py:262-267).
  KeepAllocator(p, "PYTORCH_CUDA_ALLOC_CONF", &k);
  // Megatron-FSDP asserts the variable is not 1 (arguments.py:1165-1166); with
  // TP or CP before Blackwell it only warns (arguments.py:1453-1465).
  if (p.c.zero >= 2) return k;
  k.push_back({"CUDA_DEVICE_MAX_CONNECTIONS", "1",
               p.c.gy > 1 || p.c.cp > 1
                   ? "validate_args asserts it with TP or CP on GPUs before Blackwell "
                     "(arguments.py:1453-1479)"
                   : "orders the communication kernels behind the compute they overlap "
                     "(megatron/core/tensor_parallel/layers.py:909-921)"});
  return k;
}

std::string Launcher(const Plan& p) {
  std::ostringstream os;
  os << "torchrun --nnodes " << p.Nodes() << " --nproc-per-node " << p.GpusPerNode()
     << " --node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port 6000 pretrain_gpt.py "
        "${GPT_MODEL_ARGS[@]} ${TRAINING_ARGS[@]} ${MODEL_PARALLEL_ARGS[@]} ${DATA_ARGS[@]} "
        "${EVAL_AND_LOGGING_ARGS[@]}";
  if (p.job.model.is_moe()) os << " ${MOE_ARGS[@]}";
  if (p.checkpoint_interval_steps > 0) os << " ${CHECKPOINT_ARGS[@]}";
  return os.str();
}

// Rotary embeddings as the model states them: the base (--rotary-base, an
// int defaulting to 10000: arguments.py:2418) and Llama 3.x frequency scaling
// (--use-rope-scaling with --rope-scaling-factor, default 8: arguments.py:2424-2427;
// the low/high frequency factors 1 and 4 over 8192 positions are Megatron's
// fixed ones, rotary_pos_embedding.py:92-99, which Llama 3.1 and 3.2 use).
void RopeArgs(const ModelSpec& m, std::vector<std::string>* out) {
  out->push_back("--position-embedding-type rope");
  if (m.rope_theta > 0) out->push_back("--rotary-base " + Str(static_cast<int64_t>(m.rope_theta)));
  if (m.rope_llama3_scaling > 0) {
    std::ostringstream factor;
    factor << m.rope_llama3_scaling;
    out->push_back("--use-rope-scaling");
    out->push_back("--rope-scaling-factor " + factor.str());
  }
}

// The norms' epsilon, the Q/K norms, the attention softmax and the MLP's
// activation as the model has them, in TransformerConfig's terms @ d98e8a6:
//  - layernorm_epsilon (--norm-epsilon, default 1e-5: transformer_config.py:201-204);
//  - qk_layernorm (--qk-layernorm, :259): a norm of kv_channels on each head's
//    queries and keys (attention.py:1734-1751); MegatronModelGap refuses norms
//    over all heads' features;
//  - softmax_type "learnable" (--softmax-type, :170): a learned offset per head
//    in the softmax's denominator, gpt-oss's attention sinks;
//  - --swiglu (silu(gate)·up: arguments.py:2450, argument_utils.py:314-317), or
//    for gpt-oss's clamped activation --quick-geglu (gate·sigmoid(1.702·gate):
//    argument_utils.py:323-326, fused_bias_geglu.py:185-187) with
//    glu_linear_offset 1 and activation_func_clamp_value (transformer_config.py:231,
//    235), which mlp.py:323-333 applies as clamp(gate, max=v) and clamp(up, ±v)
//    before activation(gate)·(up + 1).
void NormAndActivationArgs(const ModelSpec& m, std::vector<std::string>* out) {
  if (m.norm_eps > 0) out->push_back("--norm-epsilon " + Num(m.norm_eps));
  if (m.qk_norm == "head") out->push_back("--qk-layernorm");
  if (m.attention_sinks) out->push_back("--softmax-type learnable");
  if (!m.gated_ffn) return;
  if (m.swiglu_limit > 0) {
    out->push_back("--quick-geglu");
    out->push_back("--glu-linear-offset 1.0");
    out->push_back("--activation-func-clamp-value " + Num(m.swiglu_limit));
  } else {
    out->push_back("--swiglu");
  }
}

// The save schedule the plan was priced with. --save requires --save-interval
// (arguments.py:1361-1363 @ d98e8a6). An asynchronous save needs the
// persistent worker, or validate_args turns it off with only a warning
// (arguments.py:1814-1820), and the in-tree "mcore" strategy, since the
// default "nvrx" raises at start-up without nvidia-resiliency-ext
// (training_config.py:519; core/dist_checkpointing/strategies/torch.py:1043-1086);
// the format is torch_dist (the default, training_config.py:486) or the
// fsdp_dtensor Megatron-FSDP asserts, both of which save asynchronously
// (checkpointing.py:763-776).
std::vector<std::string> CheckpointArgs(const Plan& p) {
  std::vector<std::string> a = {std::string("--save ") + kCheckpointDirShell,
                                std::string("--load ") + kCheckpointDirShell,
                                "--save-interval " + Str(p.checkpoint_interval_steps)};
  if (p.checkpoint_async) {
    a.push_back("--async-save");
    a.push_back("--use-persistent-ckpt-worker");
    a.push_back("--async-strategy mcore");
  }
  return a;
}

void Array(std::ostringstream& os, const char* name, const std::vector<std::string>& items) {
  os << name << "=(\n";
  for (const std::string& s : items) os << "    " << s << "\n";
  os << ")\n";
}

std::string Write(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const TrainingSpec& t = p.job.training;
  std::ostringstream os;
  os << ShellHeader(p, MegatronEmitter(), "Megatron-LM arguments");
  os << "\n";

  std::vector<std::string> model = {
      "--num-layers " + Str(m.layers), "--hidden-size " + Str(m.hidden),
      "--ffn-hidden-size " + Str(m.ffn_hidden), "--num-attention-heads " + Str(m.heads)};
  // Attention heads narrower or wider than hidden / heads (Qwen3, gpt-oss):
  // Megatron's kv_channels, hidden / heads by default (arguments.py:1331-1333).
  if (!m.is_mla() && m.head_dim() != m.hidden / m.heads) {
    model.push_back("--kv-channels " + Str(m.head_dim()));
  }
  if (m.kv_heads != m.heads) {
    model.push_back("--group-query-attention");
    model.push_back("--num-query-groups " + Str(m.kv_heads));
  }
  model.push_back("--seq-length " + Str(t.seq_len));
  model.push_back("--max-position-embeddings " + Str(std::max(t.seq_len, m.max_seq_len)));
  if (!m.learned_positions()) RopeArgs(m, &model);
  if (m.norm == "rmsnorm") model.push_back("--normalization RMSNorm");
  NormAndActivationArgs(m, &model);
  if (!m.tied_embeddings) model.push_back("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) model.push_back("--disable-bias-linear");
  if (!m.dropout) {
    model.push_back("--attention-dropout 0.0");
    model.push_back("--hidden-dropout 0.0");
  }
  // "flash" in the plan means a fused kernel that never stores the scores:
  // Megatron's default (auto) picks one where the precision allows it.
  if (t.attention == Attention::kUnfused) model.push_back("--attention-backend unfused");
  // Local attention (MegatronLocalAttentionGap says when these express it): a
  // sliding window of w keys, the query's own among them, is Megatron's window
  // (w - 1, 0), which admits keys i - (w - 1) through i
  // (get_sliding_window_causal_mask, megatron/core/transformer/utils.py:43-50
  // @d98e8a6), as Megatron-Bridge writes gpt-oss's 128: window_size
  // (sliding_window - 1, 0), window_attn_skip_freq 2 (gpt_oss_bridge.py:86-87
  // @067f987; the off-by-one fixed in 5fcab34);
  // chunks no longer than the sequence are full causal attention, and the
  // global layers between them go without RoPE (Megatron-LM's Llama 4 example,
  // examples/post_training/modelopt/conf/meta-llama/Llama-4-Maverick-17B-128E-Instruct.sh:50
  // @d98e8a6: --no-rope-freq 4).
  if (m.sliding_layers > 0) {
    const int period = LocalAttentionPeriod(m);
    if (!m.chunked_attention) {
      model.push_back("--window-size " + Str(m.sliding_window - 1) + ",0");
      if (period > 1) model.push_back("--window-attn-skip-freq " + Str(period));
    } else if (period > 1) {
      model.push_back("--no-rope-freq " + Str(period));
    }
  }
  Array(os, "GPT_MODEL_ARGS", model);
  os << "\n";

  std::vector<std::string> training = {"--micro-batch-size " + Str(c.mbs),
                                       "--global-batch-size " + Str(p.Gbs())};
  PrecisionArgs(t, &training);
  if (c.recompute == Recompute::kFull) {
    // One layer per checkpoint: what the cost model's full recompute prices.
    training.push_back("--recompute-granularity full");
    training.push_back("--recompute-method uniform");
    training.push_back("--recompute-num-layers 1");
  } else if (c.recompute == Recompute::kSelective) {
    training.push_back("--recompute-granularity selective");
    // The modules, space-separated (nargs "+", megatron/training/argument_utils.py:146
    // @ d98e8a6); Megatron's default is core_attn (transformer_config.py:1940-1941).
    if (c.recompute_modules != kDefaultRecomputeModules) {
      std::string names = RecomputeModulesName(c.recompute_modules);
      std::replace(names.begin(), names.end(), '+', ' ');
      training.push_back("--recompute-modules " + names);
    }
  }
  if (c.distributed_optimizer || c.zero >= 1) training.push_back("--use-distributed-optimizer");
  FleetFeatureArgs(p, &training);
  if (c.overlap_grad_reduce) training.push_back("--overlap-grad-reduce");
  // The bucket the job states (arguments.py:3125); without it Megatron-LM's
  // rule, the one the plan is priced with (training.py:2179-2194).
  if (t.ddp_bucket_elements > 0) {
    training.push_back("--ddp-bucket-size " + Str(static_cast<int64_t>(t.ddp_bucket_elements)));
  }
  if (c.overlap_param_gather) training.push_back("--overlap-param-gather");
  Array(os, "TRAINING_ARGS", training);
  os << "\n";

  std::vector<std::string> par = {"--tensor-model-parallel-size " + Str(c.gy),
                                  "--pipeline-model-parallel-size " + Str(c.pp)};
  const bool explicit_stages = c.first_stage_layers > 0 || c.last_stage_layers > 0;
  // An embedding or loss counted as more than one layer takes the layout
  // string, which also sets the interleaving (arguments.py:941-952 @ d98e8a6:
  // vpp = chunks / pp, exclusive with the other virtual-stage arguments).
  const bool layout = NeedsMegatronLayout(c);
  const bool accounted =
      !layout && c.pp > 1 && (c.pp_embedding_layers > 0 || c.pp_loss_layers > 0);
  if (layout) {
    par.push_back("--pipeline-model-parallel-layout \"" +
                  MegatronLayoutString(m.layers, m.mtp_layers, c) + "\"");
  }
  if (c.pp > 1 && c.first_stage_layers > 0) {
    par.push_back("--decoder-first-pipeline-num-layers " + Str(c.first_stage_layers));
  }
  if (c.pp > 1 && c.last_stage_layers > 0) {
    par.push_back("--decoder-last-pipeline-num-layers " + Str(c.last_stage_layers));
  }
  if (accounted && c.pp_embedding_layers > 0)
    par.push_back("--account-for-embedding-in-pipeline-split");
  if (accounted && c.pp_loss_layers > 0) par.push_back("--account-for-loss-in-pipeline-split");
  if (c.vpp > 1) {
    // Uneven stages take the virtual stage count per rank (arguments.py:954-956);
    // a layout string states it by its chunk count.
    if (!layout && (explicit_stages || accounted)) {
      par.push_back("--num-virtual-stages-per-pipeline-rank " + Str(c.vpp));
    } else if (!layout) {
      par.push_back("--num-layers-per-virtual-pipeline-stage " + Str(m.layers / (c.pp * c.vpp)));
    }
    if (!c.overlap_p2p) par.push_back("--no-overlap-p2p-communication");
  }
  if (c.cp > 1) {
    par.push_back("--context-parallel-size " + Str(c.cp));
    par.push_back(std::string("--cp-comm-type ") + (c.cp_kind == CpKind::kRing ? "p2p" : "a2a"));
  }
  // Megatron turns sequence parallelism off by itself at TP = 1; say it only where it acts.
  if (c.sp && c.gy > 1) par.push_back("--sequence-parallel");
  if (c.tp_comm_overlap) par.push_back("--tp-comm-overlap");
  if (!OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp}))
    par.push_back("--use-tp-pp-dp-mapping");
  Array(os, "MODEL_PARALLEL_ARGS", par);
  if (m.is_moe()) {
    // Check() has refused every plan MegatronMoeArgs refuses.
    auto moe = MegatronMoeArgs(m, MoeLaunchOf(p));
    os << "\n";
    Array(os, "MOE_ARGS", moe.ok() ? *moe : std::vector<std::string>{});
  }
  if (p.checkpoint_interval_steps > 0) {
    os << "\n";
    Array(os, "CHECKPOINT_ARGS", CheckpointArgs(p));
  }
  return os.str();
}

}  // namespace

// The Megatron-LM snapshot whose rules Check restates.
constexpr Follows kFollows{
    "NVIDIA/Megatron-LM", "d98e8a6", "Megatron-Core 0.20.0",
    "megatron/training/arguments.py, megatron/core/transformer/transformer_config.py, "
    "megatron/core/transformer/transformer_block.py; TransformerEngine d0067d0 "
    "context_parallel.py"};

const FrameworkEmitter& MegatronEmitter() {
  static const FrameworkEmitter e{kF, kFollows, Check, Write, KeepOf, Launcher};
  return e;
}

}  // namespace paratune::planner::emit_internal
