// frameworks/deepspeed.cc: DeepSpeed's and Megatron-DeepSpeed's start-up rules,
// the ds_config.json they read and Megatron-DeepSpeed's launch arguments.
//
// Rules from deepspeedai/DeepSpeed @ edaa722 (0.19.6) and
// deepspeedai/Megatron-DeepSpeed @ 4efb479, restated with their lines in
// tests/frameworks/framework_rules.h: train_batch_size = micro × accumulation
// × DP world (runtime/config.py:925-940) with DP = world/(TP·PP·SP); the
// pipeline engine refuses ZeRO-2/3 (runtime/pipe/engine.py:75-76), so without
// pipeline stages Megatron-DeepSpeed runs --no-pipeline-parallel; Ulysses
// needs heads % sp == 0 (sequence/layer.py:40,56); in Megatron-DeepSpeed it
// cannot run GQA (megatron/model/transformer.py:728-729); FPDT is switched on
// by launch flags (--ds-sequence-parallel-fpdt, -chunk-size, -offloading,
// megatron/arguments.py:979-984), needs seq % chunk == 0 and whole chunks per
// rank (sequence/fpdt_layer.py:92-96), K/V heads % sp == 0, and runs the GeLU
// MLP with biases only (transformer.py:162-173, fpdt_layer.py:1131-1150); hpZ
// groups are consecutive global ranks and must divide the world
// (utils/groups.py); zero_optimization refuses unknown keys (pydantic, extra
// forbid). MoE: DeepSpeed-MoE's group rules (frameworks/moe_args.h); in
// Megatron-DeepSpeed every expert is the dense MLP (ParallelMLP of
// ffn_hidden_size, megatron/model/transformer.py:1066-1083), MoE on layer
// numbers (1-based) divisible by --expert-interval (transformer.py:1650-1660),
// softmax top-k gating over all-to-all (no shared experts, MLA, MTP, sigmoid
// router, other dispatchers or a2a overlap); nor sliding windows, Llama 3.x
// RoPE scaling, Q/K norms, attention sinks or a clamped activation
// (MegatronDeepSpeedModelGap). ZeRO-Offload needs DeepSpeed's CPU
// Adam (runtime/engine.py:2040-2044): --cpu-optimizer in Megatron-DeepSpeed,
// an AdamW optimizer block in the HF flow's ds_config, which runs no Megatron
// TP or pipeline stages and splits experts through AutoEP's expert_parallel
// (runtime/config.py:69, 129-133) for the models of its presets.
#include <algorithm>
#include <sstream>

#include "frameworks/emit_internal.h"
#include "planner/model.h"
#include "planner/moe.h"

namespace paratune::planner::emit_internal {
namespace {

// The hpZ secondary partition: the ranks of ZeRO's group inside one node.
// ZeRO-3 partitions over the data-parallel ranks, and with Ulysses over the
// sequence-data-parallel group (dp · sp, consecutive ranks when tp = 1); hpZ
// groups are consecutive global ranks (utils/groups.py
// _create_zero_param_parallel_group, via zero/stage3.py
// _set_zero_group_parallelism), so they stay inside that group.
int HpzPartitionSize(const Plan& p) {
  const int gpn = std::max(1, p.job.cluster.gpus_per_node);
  return std::max(1, std::min(p.c.gdata * p.c.cp, gpn));
}

// FPDT's chunk as emitted: the plan's chunk, or the whole sequence when it is
// shorter (FPDT_InputConstruct asserts seq % chunk == 0 either way).
int64_t FpdtChunk(const Plan& p) {
  return std::min<int64_t>(p.job.training.fpdt_chunk_tokens, p.job.training.seq_len);
}

// FPDT offloads the chunks it is not computing when the sequence has more
// than two of them: what the cost model prices (host memory for the rest).
bool FpdtOffloads(const Plan& p) { return p.job.training.seq_len > 2 * FpdtChunk(p); }

// Checks shared by both formats: ds_config's own rules.
Status CheckConfig(const Plan& p, EmitFormat f) {
  const ParallelConfig& c = p.c;
  if (c.gx != 1 || c.gz != 1) {
    return Refuse(f, ShardingGridWords(p) + ": DeepSpeed shards with ZeRO stages instead");
  }
  // The pipeline engine never calls DeepSpeedEngine.step(), which commits a
  // decoupled save (pipe/engine.py:1244-1252, engine.py:3452-3453 @ edaa722):
  // the save would not be durable until the job ended.
  if (p.checkpoint_async && c.pp > 1) {
    return Refuse(f,
                  "an asynchronous save with pipeline stages: DeepSpeed's pipeline engine never "
                  "commits a decoupled save (pipe/engine.py:1244-1252); plan with "
                  "--checkpoint-save sync");
  }
  if (c.cp > 1 && c.cp_kind == CpKind::kRing) {
    return Refuse(f,
                  "ring context parallelism is not a DeepSpeed option (DeepSpeed's sequence "
                  "parallelism is Ulysses all-to-all or FPDT); use --format megatron");
  }
  if (c.vpp > 1)
    return Refuse(f, "DeepSpeed's pipeline engine has no interleaved (virtual) stages");
  if (c.pp > 1 && c.zero >= 2) {
    return Refuse(f, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (PP = " +
                         Str(c.pp) + ", stage " + Str(c.zero) + "; runtime/pipe/engine.py:75-76)");
  }
  if (c.cp > 1 && p.job.model.heads % c.cp != 0) {
    return Refuse(f, "attention heads " + Str(p.job.model.heads) +
                         " are not divisible by the sequence-parallel size " + Str(c.cp) +
                         " (sequence/layer.py:40)");
  }
  if (c.cp > 1 && p.job.training.seq_len % c.cp != 0) {
    return Refuse(f, "seq_len " + Str(p.job.training.seq_len) +
                         " is not divisible by the sequence-parallel size " + Str(c.cp));
  }
  const int64_t dp = p.job.gpus / (int64_t{c.gy} * c.pp * c.cp);
  if (p.job.gpus % (int64_t{c.gy} * c.pp * c.cp) != 0 || dp != c.gdata) {
    return Refuse(f, "the data-parallel world world/(tp·pp·sp) = " + Str(p.job.gpus) + "/" +
                         Str(int64_t{c.gy} * c.pp * c.cp) + " does not equal the plan's dp " +
                         Str(c.gdata));
  }
  if (p.Gbs() % (int64_t{c.mbs} * dp) != 0) {
    return Refuse(f, "train_batch_size " + Str(p.Gbs()) +
                         " is not train_micro_batch_size_per_gpu × gradient_accumulation_steps × " +
                         "DP world for any whole number of steps (mbs " + Str(c.mbs) + ", DP " +
                         Str(dp) + "; runtime/config.py:925-940)");
  }
  if ((c.qwz || c.hpz || c.qgz) && c.zero != 3) {
    return Refuse(f,
                  "ZeRO++ (qwZ, hpZ, qgZ) extends ZeRO stage 3; the plan has stage " + Str(c.zero));
  }
  if (c.offload_optimizer && c.zero < 1) {
    return Refuse(
        f, "offload_optimizer (ZeRO-Offload) needs ZeRO stage 1, 2 or 3; the plan has stage " +
               Str(c.zero));
  }
  if (c.offload_param && c.zero != 3) {
    return Refuse(
        f, "offload_param (ZeRO-Infinity) needs ZeRO stage 3; the plan has stage " + Str(c.zero));
  }
  if (c.hpz) {
    if (c.tensor() > 1) {
      return Refuse(f, "hpZ partitions consecutive global ranks, but with TP = " + Str(c.tensor()) +
                           " consecutive ranks hold different tensor shards");
    }
    const int hp = HpzPartitionSize(p);
    if (p.job.gpus % hp != 0) {
      return Refuse(f, "zero_hpz_partition_size " + Str(hp) + " does not divide the world " +
                           Str(p.job.gpus));
    }
  }
  if (!OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp})) {
    return Refuse(f, "rank order " + OrderString(c) +
                         " is not Megatron-DeepSpeed's tensor, sequence, data, pipeline order");
  }
  if (c.recompute == Recompute::kSelective) {
    return Refuse(f,
                  "DeepSpeed activation checkpointing is full-layer; selective recompute is a "
                  "Megatron-LM / torchtitan option");
  }
  if (p.job.training.precision == topology::Precision::kFp8 ||
      p.job.training.precision == topology::Precision::kTf32) {
    return Refuse(f, std::string("ds_config has no ") +
                         topology::PrecisionName(p.job.training.precision) +
                         " switch (bf16, fp16 or fp32 only)");
  }
  if (c.pp > 1) PT_RETURN_IF_ERROR(CheckSameSplit(p, f, PpSplit::kBalanced));
  return Status::Ok();
}

// DeepSpeed-MoE's rules for a MoE plan, in both formats.
Status CheckMoe(const Plan& p, EmitFormat f) {
  const ModelSpec& m = p.job.model;
  if (!m.is_moe() && p.c.ep <= 1) return Status::Ok();
  auto call = DeepSpeedMoeLayerCall(m, MoeLaunchOf(p));
  if (!call.ok()) return RefuseMoe(f, call.status());
  if (p.c.moe_dispatcher != MoeDispatcher::kAllToAll || p.c.moe_a2a_overlap) {
    return Refuse(f,
                  std::string("DeepSpeed-MoE dispatches with its own all-to-all "
                              "(deepspeed/moe/sharded_moe.py:97 _AllToAll); the plan's ") +
                      MoeDispatcherName(p.c.moe_dispatcher) +
                      (p.c.moe_a2a_overlap ? " dispatcher with the a2a overlap" : " dispatcher") +
                      " is Megatron-Core's");
  }
  return Status::Ok();
}

// The model Megatron-DeepSpeed's flags can build (the search's mds_model rule
// reads the same check).
Status CheckMdsModel(const Plan& p, EmitFormat f) {
  const std::string gap = MegatronDeepSpeedModelGap(p.job.model, p.job.training.seq_len);
  return gap.empty() ? Status::Ok() : Refuse(f, gap);
}

// The HF flow runs the model as Hugging Face builds it, under deepspeed.initialize
// without an mpu: no Megatron tensor parallelism, and no pipeline engine (that
// needs a PipelineModule, runtime/pipe/engine.py). Its data-parallel world is
// world / sequence_parallel_size (runtime/config.py:710-724).
Status CheckHfModelParallelism(const Plan& p) {
  if (p.c.gy > 1 || p.c.pp > 1) {
    return Refuse(EmitFormat::kDeepSpeed,
                  "the plan has tensor parallelism " + Str(p.c.gy) + " and pipeline parallelism " +
                      Str(p.c.pp) +
                      ", which a Hugging Face model under DeepSpeed does not run (its ds_config "
                      "would count world / sequence_parallel_size as data-parallel ranks); use "
                      "--format megatron-deepspeed");
  }
  return Status::Ok();
}

// Expert parallelism of a Hugging Face model is DeepSpeed's AutoEP (the
// ds_config's expert_parallel block, runtime/config.py:69, 129-133): it needs
// a preset for the model's MoE modules (planner/moe.h DeepSpeedAutoEpPreset),
// autoep_size dividing the world and the experts
// (module_inject/auto_ep_folding.py:110-115, auto_ep_config.py:274-290).
Status CheckAutoEp(const Plan& p) {
  if (!p.job.model.is_moe() || p.c.ep <= 1) return Status::Ok();
  const std::string gap = DeepSpeedAutoEpGap(p.job.model);
  if (!gap.empty()) return Refuse(EmitFormat::kDeepSpeed, gap);
  if (p.job.gpus % p.c.ep != 0) {
    return Refuse(EmitFormat::kDeepSpeed, "AutoEP's autoep_size " + Str(p.c.ep) +
                                              " must divide the world " + Str(p.job.gpus) +
                                              " (module_inject/auto_ep_folding.py:110-115)");
  }
  return Status::Ok();
}

Status CheckDeepSpeedConfig(const Plan& p) {
  PT_RETURN_IF_ERROR(CheckHfModelParallelism(p));
  PT_RETURN_IF_ERROR(CheckConfig(p, EmitFormat::kDeepSpeed));
  PT_RETURN_IF_ERROR(CheckMoe(p, EmitFormat::kDeepSpeed));
  PT_RETURN_IF_ERROR(CheckAutoEp(p));
  if (p.c.cp > 1 && p.c.cp_kind == CpKind::kFpdt) {
    return Refuse(
        EmitFormat::kDeepSpeed,
        "FPDT is switched on by Megatron-DeepSpeed's launch flags (--ds-sequence-parallel-fpdt, "
        "--ds-sequence-parallel-fpdt-chunk-size, --ds-sequence-parallel-fpdt-offloading), "
        "which ds_config.json cannot carry: use --format megatron-deepspeed");
  }
  return Status::Ok();
}

Status CheckMegatronDeepSpeed(const Plan& p) {
  const EmitFormat f = EmitFormat::kMegatronDeepSpeed;
  PT_RETURN_IF_ERROR(CheckConfig(p, f));
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  if (c.cp > 1 && (c.gy > 1 || c.pp > 1)) {
    return Refuse(f,
                  "DeepSpeed's sequence parallelism runs without Megatron TP and PP in "
                  "Megatron-DeepSpeed (its DeepSpeed configurations)");
  }
  if (c.sp && c.gy > 1) {
    return Refuse(
        f, "Megatron's --sequence-parallel is not what the plan priced for Megatron-DeepSpeed");
  }
  if (c.distributed_optimizer) {
    return Refuse(f, "Megatron's distributed optimizer is ZeRO-1 here: plan with zero = 1");
  }
  if (m.heads % c.gy != 0 || m.kv_heads % c.gy != 0) {
    return Refuse(f, "attention heads " + Str(m.heads) + " and KV heads " + Str(m.kv_heads) +
                         " must divide over TP " + Str(c.gy) +
                         " (megatron/model/transformer.py:562-567)");
  }
  PT_RETURN_IF_ERROR(CheckMoe(p, f));
  PT_RETURN_IF_ERROR(CheckMdsModel(p, f));
  return CheckPresetRules(p, f, Framework::kMegatronDeepSpeed);
}

OrderedJson DsConfig(const Plan& p) {
  const ParallelConfig& c = p.c;
  const int64_t dp = c.gdata;
  const int stage = c.zero > 0 ? c.zero : (c.distributed_optimizer ? 1 : 0);
  OrderedJson j;
  j["train_batch_size"] = p.Gbs();
  j["train_micro_batch_size_per_gpu"] = c.mbs;
  j["gradient_accumulation_steps"] = p.Gbs() / (int64_t{c.mbs} * dp);
  j["gradient_clipping"] = 1.0;
  switch (p.job.training.precision) {
    case topology::Precision::kBf16:
      j["bf16"] = {{"enabled", true}};
      break;
    case topology::Precision::kFp16:
      j["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
      break;
    default:
      break;  // fp32
  }
  OrderedJson z;
  z["stage"] = stage;
  z["overlap_comm"] = c.overlap_grad_reduce || c.overlap_param_gather;
  z["contiguous_gradients"] = true;
  z["reduce_scatter"] = true;
  // The buckets the cost model prices ZeRO-3's calls by (the preset's
  // zero3_*_bucket_elements: DeepSpeed's defaults).
  const planner::FrameworkCosts& buckets =
      planner::FrameworkPreset(planner::Framework::kDeepSpeed).costs;
  z["reduce_bucket_size"] = static_cast<int64_t>(buckets.zero3_reduce_bucket_elements);
  z["allgather_bucket_size"] = 500000000;
  if (stage == 3) {
    z["stage3_prefetch_bucket_size"] = static_cast<int64_t>(buckets.zero3_gather_bucket_elements);
    z["stage3_param_persistence_threshold"] = 100000;
    z["stage3_max_live_parameters"] = 1000000000;
    z["stage3_max_reuse_distance"] = 1000000000;
    z["stage3_gather_16bit_weights_on_model_save"] = true;
    z["sub_group_size"] = 1000000000;
    z["zero_quantized_weights"] = c.qwz;
    z["zero_hpz_partition_size"] = c.hpz ? HpzPartitionSize(p) : 1;
    z["zero_quantized_gradients"] = c.qgz;
    // ZeRO-Infinity's CPU parameter offload (DeepSpeed docs, "Parameter offloading").
    if (c.offload_param) {
      z["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
    } else {
      z["offload_param"] = {{"device", "none"}};
    }
  }
  // ZeRO-Offload: optimizer states and the CPU Adam step on the host (DeepSpeed
  // docs, "Optimizer offloading"; pinned buffers for the copy engines).
  if (c.offload_optimizer) {
    z["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  } else {
    z["offload_optimizer"] = {{"device", "none"}};
  }
  j["zero_optimization"] = z;
  if (c.recompute == Recompute::kFull) {
    OrderedJson ac;
    ac["partition_activations"] = false;
    ac["cpu_checkpointing"] = false;
    ac["contiguous_memory_optimization"] = false;
    ac["number_checkpoints"] = nullptr;
    ac["synchronize_checkpoint_boundary"] = false;
    ac["profile"] = false;
    j["activation_checkpointing"] = ac;
  }
  if (c.cp > 1) j["sequence_parallel_size"] = c.cp;
  // An asynchronous save where the plan priced one: the decoupled writer
  // (model_checkpointing/constants.py:43-85 @ edaa722; a "writer" key selects
  // it, checkpoint_engine/utils.py:17-27). Its "python" writer needs no
  // compiled op (the default "fast" one builds async_io over libaio,
  // writer_factory.py:31-36, 77-104). The plan priced the save to overlap
  // the step after it only: the engine's next step() waits for the write
  // (engine.py:3452-3453).
  if (p.checkpoint_async) {
    OrderedJson writer;
    writer["type"] = "python";
    writer["decoupled"] = true;
    j["checkpoint"] = {{"writer", writer}};
  }
  j["wall_clock_breakdown"] = false;
  return j;
}

// AutoEP over the plan's ep ranks with the model's preset
// (module_inject/auto_ep_config.py:41-88 reads these keys; CheckAutoEp
// admitted the model).
OrderedJson AutoEpBlock(const Plan& p) {
  OrderedJson e;
  e["enabled"] = true;
  e["autoep_size"] = p.c.ep;
  e["preset_model"] = DeepSpeedAutoEpPreset(p.job.model);
  return e;
}

// The HF flow's ds_config: DsConfig, and with ZeRO-Offload the optimizer
// DeepSpeed builds itself. DeepSpeed refuses a client optimizer other than
// its CPU Adam under offload (zero_force_ds_cpu_optimizer, default true:
// runtime/engine.py:2040-2044); with no client optimizer, type "AdamW" with
// offload_optimizer on the CPU becomes DeepSpeedCPUAdam in AdamW mode
// (runtime/engine.py:2095-2133, runtime/config.py:73). The block carries no
// hyperparameters: DeepSpeedCPUAdam's defaults hold until the user adds
// "params" (lr, betas, eps, weight_decay).
std::string WriteDsConfig(const Plan& p) {
  OrderedJson j = DsConfig(p);
  if (p.c.offload_optimizer) j["optimizer"] = {{"type", "AdamW"}};
  if (p.job.model.is_moe() && p.c.ep > 1) j["expert_parallel"] = AutoEpBlock(p);
  return j.dump(2) + "\n";
}

std::vector<Keep> KeepDs(const Plan& p) {
  std::vector<Keep> k;
  KeepAllocator(p, "PYTORCH_CUDA_ALLOC_CONF", &k);
  return k;
}

std::vector<Keep> KeepMds(const Plan& p) {
  std::vector<Keep> k = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1",
                          p.c.gy > 1 ? "Megatron's tensor-parallel layers order their all-reduce "
                                       "behind the GEMM with it"
                                     : "as Megatron-DeepSpeed's examples launch"}};
  KeepAllocator(p, "PYTORCH_CUDA_ALLOC_CONF", &k);
  return k;
}

// The deepspeed launcher over the job's nodes, running `script` with its arguments.
std::string DeepSpeedLaunch(const Plan& p, const char* script) {
  return "deepspeed --num_nodes " + Str(p.Nodes()) + " --num_gpus " + Str(p.GpusPerNode()) +
         " --hostfile hostfile " + script;
}

std::string LauncherDs(const Plan& p) {
  return DeepSpeedLaunch(p, "train.py --deepspeed --deepspeed_config ds_config.json");
}

std::string LauncherMds(const Plan& p) {
  return DeepSpeedLaunch(p, "pretrain_gpt.py ${MEGATRON_DEEPSPEED_ARGS[@]} ${DATA_ARGS[@]}");
}

std::string WriteMegatronDeepSpeed(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const TrainingSpec& t = p.job.training;
  std::ostringstream os;
  os << ShellHeader(p, MegatronDeepSpeedEmitter(), "Megatron-DeepSpeed launch");
  os << "\ncat > ds_config.json <<'EOF'\n" << DsConfig(p).dump(2) << "\nEOF\n\n";
  std::vector<std::string> a = {"--num-layers " + Str(m.layers), "--hidden-size " + Str(m.hidden),
                                "--ffn-hidden-size " + Str(m.ffn_hidden),
                                "--num-attention-heads " + Str(m.heads)};
  if (m.kv_heads != m.heads) a.push_back("--num-key-value-heads " + Str(m.kv_heads));
  a.push_back("--seq-length " + Str(t.seq_len));
  a.push_back("--max-position-embeddings " + Str(std::max(t.seq_len, m.max_seq_len)));
  if (!m.learned_positions()) {
    a.push_back("--use-rotary-position-embeddings");
    a.push_back("--no-position-embedding");
    // The base, an int defaulting to 10000 (megatron/arguments.py:635-637).
    if (m.rope_theta > 0) {
      a.push_back("--rotary-position-embeddings-theta " +
                  Str(static_cast<int64_t>(m.rope_theta)));
    }
  }
  if (m.norm == "rmsnorm") a.push_back("--normalization rmsnorm");
  // Both norms take --layernorm-epsilon, default 1e-5 (megatron/arguments.py:652-653,
  // megatron/model/transformer.py:992-1036).
  if (m.norm_eps > 0) a.push_back("--layernorm-epsilon " + Num(m.norm_eps));
  if (m.gated_ffn) a.push_back("--swiglu");
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a.push_back("--disable-bias-linear");
  if (!m.dropout) {
    a.push_back("--attention-dropout 0.0");
    a.push_back("--hidden-dropout 0.0");
  }
  a.push_back("--use-flash-attn-v2");
  a.push_back("--micro-batch-size " + Str(c.mbs));
  a.push_back("--global-batch-size " + Str(p.Gbs()));
  if (t.precision == topology::Precision::kBf16) a.push_back("--bf16");
  if (t.precision == topology::Precision::kFp16) a.push_back("--fp16");
  a.push_back("--tensor-model-parallel-size " + Str(c.gy));
  if (c.pp > 1) {
    a.push_back("--pipeline-model-parallel-size " + Str(c.pp));
  } else {
    // Without stages the model is not a PipelineModule, so ZeRO-2/3 run.
    a.push_back("--pipeline-model-parallel-size 1");
    a.push_back("--no-pipeline-parallel");
  }
  if (c.cp > 1) {
    a.push_back("--ds-sequence-parallel-size " + Str(c.cp));
    if (c.cp_kind == CpKind::kFpdt) {
      a.push_back("--ds-sequence-parallel-fpdt");
      a.push_back("--ds-sequence-parallel-fpdt-chunk-size " + Str(FpdtChunk(p)));
      if (FpdtOffloads(p)) a.push_back("--ds-sequence-parallel-fpdt-offloading");
    }
  }
  if (c.recompute == Recompute::kFull) {
    a.push_back("--checkpoint-activations");
    a.push_back("--deepspeed-activation-checkpointing");
  }
  // ZeRO-Offload steps the optimizer on the host: DeepSpeed refuses any client
  // optimizer but its CPU Adam there (zero_force_ds_cpu_optimizer, on by
  // default: DeepSpeed runtime/engine.py:2040-2044), and Megatron-DeepSpeed
  // hands it DeepSpeedCPUAdam only under --cpu-optimizer
  // (megatron/optimizer/__init__.py:83-94, megatron/arguments.py:948).
  if (c.offload_optimizer) a.push_back("--cpu-optimizer");
  const int stage = c.zero > 0 ? c.zero : 0;
  if (m.is_moe()) {
    // megatron/arguments.py:608-615, 910-925, 1151, 1159 at 4efb479.
    a.push_back("--num-experts " + Str(m.experts));
    a.push_back("--topk " + Str(m.top_k));
    a.push_back("--expert-interval " + Str(m.moe_layer_step));
    a.push_back("--moe-expert-parallel-size " + Str(c.ep));
    if (c.etp > 1) a.push_back("--enable-expert-tensor-parallelism");
    if (m.capacity_factor > 0) {
      std::ostringstream cf;
      cf << m.capacity_factor;
      a.push_back("--moe-train-capacity-factor " + cf.str());
    } else {
      a.push_back("--disable-moe-token-dropping");  // dropless, as the plan priced it
    }
    // Expert parameters in their own optimizer groups, which ZeRO needs
    // (--create-moe-param-group, arguments.py:921-923).
    if (stage > 0) a.push_back("--create-moe-param-group");
  }
  a.push_back("--zero-stage " + Str(stage));
  a.push_back("--deepspeed");
  a.push_back("--deepspeed_config ds_config.json");
  // The save schedule the plan was priced with: --save requires
  // --save-interval (megatron/arguments.py:320-321 @ 4efb479); saves go
  // through the DeepSpeed engine (megatron/checkpointing.py:288-303), whose
  // ds_config carries the decoupled writer when the save is asynchronous.
  if (p.checkpoint_interval_steps > 0) {
    a.push_back(std::string("--save ") + kCheckpointDirShell);
    a.push_back(std::string("--load ") + kCheckpointDirShell);
    a.push_back("--save-interval " + Str(p.checkpoint_interval_steps));
  }
  os << "MEGATRON_DEEPSPEED_ARGS=(\n";
  for (const std::string& s : a) os << "    " << s << "\n";
  os << ")\n";
  return os.str();
}

}  // namespace

const FrameworkEmitter& DeepSpeedEmitter() {
  static const FrameworkEmitter e{EmitFormat::kDeepSpeed,
                                  {"deepspeedai/DeepSpeed", "edaa722", "0.19.6",
                                   "deepspeed/runtime/config.py, deepspeed/runtime/zero/config.py, "
                                   "deepspeed/runtime/pipe/engine.py, "
                                   "deepspeed/runtime/sequence_parallel/ulysses_sp.py"},
                                  CheckDeepSpeedConfig,
                                  WriteDsConfig,
                                  KeepDs,
                                  LauncherDs};
  return e;
}

const FrameworkEmitter& MegatronDeepSpeedEmitter() {
  static const FrameworkEmitter e{
      EmitFormat::kMegatronDeepSpeed,
      {"deepspeedai/Megatron-DeepSpeed", "4efb479", "DeepSpeed 0.19.6 (edaa722)",
       "megatron/arguments.py, megatron/model/transformer.py, pretrain_gpt.py; DeepSpeed "
       "deepspeed/sequence/layer.py, deepspeed/sequence/fpdt_layer.py, "
       "deepspeed/runtime/config.py"},
      CheckMegatronDeepSpeed,
      WriteMegatronDeepSpeed,
      KeepMds,
      LauncherMds};
  return e;
}

}  // namespace paratune::planner::emit_internal
