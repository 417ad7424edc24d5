#include "frameworks/emit.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "common/strings.h"
#include "planner/config.h"
#include "planner/plans.h"

namespace paratune::planner {
namespace {

// One candidate of a plans document with everything the emitters need.
struct Plan {
  Job job;
  ParallelConfig c;
  int rank = 1;
  std::string config_string;
  double iteration_time_s = -1;  // < 0: the document has no prediction
  double mfu = -1;
  bool compile = false;  // job.training.compile (torch.compile / TE graphs)
};

int64_t Gbs(const Plan& p) { return p.job.training.global_batch; }

// Micro-batches per iteration per pipeline: GBS / (mbs · gz · gdata).
int64_t MicroBatches(const Plan& p) {
  return Gbs(p) / (int64_t{p.c.mbs} * p.c.gz * p.c.gdata);
}

Status Refuse(EmitFormat f, const std::string& why) {
  return Status::InvalidArgument(std::string("--format ") + EmitFormatName(f) +
                                 " cannot express this plan: " + why);
}

std::string Str(int64_t v) { return std::to_string(v); }

// The dimensions with degree > 1, innermost first, in the plan's placement.
std::vector<Dim> ActiveOrder(const ParallelConfig& c) {
  std::vector<Dim> out;
  for (Dim d : c.placement.order) {
    if (c.Degree(d) > 1) out.push_back(d);
  }
  return out;
}

// True when the plan's active dimensions appear in the same relative order as
// in `framework_order` (innermost first). Dimensions of degree 1 take no rank
// stride, so only the active ones matter.
bool OrderMatches(const ParallelConfig& c, std::initializer_list<Dim> framework_order) {
  std::vector<Dim> want;
  for (Dim d : framework_order) {
    if (c.Degree(d) > 1) want.push_back(d);
  }
  return ActiveOrder(c) == want;
}

std::string OrderString(const ParallelConfig& c) {
  std::string s;
  for (Dim d : ActiveOrder(c)) s += (s.empty() ? "" : "-") + std::string(DimName(d));
  return s.empty() ? "(no parallel dimension)" : s;
}

std::string Header(const Plan& p, const char* comment, const char* what) {
  std::ostringstream os;
  os << comment << " " << what << " from paratune plan rank " << p.rank << ": " << p.config_string << "\n";
  os << comment << " " << p.job.model.name << ", " << p.job.gpus << " GPUs of " << p.job.cluster.name
     << ", seq " << p.job.training.seq_len << ", global batch " << Gbs(p);
  if (p.iteration_time_s >= 0) {
    os << ": predicted " << FormatFixed(p.iteration_time_s, 3) << " s/iteration";
    if (p.mfu >= 0) os << ", MFU " << FormatFixed(100 * p.mfu, 1) << " %";
  }
  os << "\n";
  return os.str();
}

// ---------------------------------------------------------------- Megatron-LM
//
// Rules from NVIDIA/Megatron-LM @ d98e8a6 (tests/frameworks/emit_test.cc cites the
// lines): world % (TP·PP·CP) == 0; GBS % (MBS·DP) == 0; heads % TP == 0;
// query groups a multiple or divisor of TP; layers % PP == 0 and, with the
// interleaved schedule, (layers/PP) % layers-per-virtual-stage == 0 and PP > 1
// (> 2 without p2p overlap) and a micro-batch count that is a multiple of PP;
// seq % (2·CP) == 0; --overlap-param-gather needs
// the distributed optimizer and --overlap-grad-reduce; --tp-comm-overlap needs
// --sequence-parallel; full recompute needs a method and a layer count.

Status CheckMegatron(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const EmitFormat f = EmitFormat::kMegatron;
  if (c.gx != 1 || c.gz != 1) {
    return Refuse(f, "AxoNN's 3D tensor grid (gx = " + Str(c.gx) + ", gz = " + Str(c.gz) +
                         ") has no Megatron-LM flag; Megatron tensor parallelism is gx = gz = 1 "
                         "(use --format axonn)");
  }
  if (c.zero >= 2 || c.qwz || c.hpz || c.qgz) {
    return Refuse(f, "ZeRO stage " + Str(c.zero) +
                         (c.qwz || c.hpz || c.qgz ? " with ZeRO++" : std::string()) +
                         " is not a Megatron-LM option (its distributed optimizer is ZeRO-1); "
                         "use --format deepspeed");
  }
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    return Refuse(f, "FPDT is a DeepSpeed sequence-parallel mode; Megatron-LM's --cp-comm-type "
                     "offers p2p (ring) and a2a (Ulysses)");
  }
  if (c.offload_optimizer || c.offload_param) {
    return Refuse(f,
                  "the plan offloads the optimizer or parameters to host memory the way "
                  "DeepSpeed's ZeRO-Offload does (offload_optimizer / offload_param); "
                  "use --format deepspeed");
  }
  const int64_t model_size = int64_t{c.gy} * c.pp * c.cp;
  if (p.job.gpus % model_size != 0) {
    return Refuse(f, "world size " + Str(p.job.gpus) + " is not divisible by TP·PP·CP = " +
                         Str(model_size) + " (validate_args)");
  }
  const int64_t dp = p.job.gpus / model_size;
  if (dp != c.gdata) {
    return Refuse(f, "Megatron derives DP = world/(TP·PP·CP) = " + Str(dp) + ", but the plan has dp = " +
                         Str(c.gdata));
  }
  if (Gbs(p) % (int64_t{c.mbs} * dp) != 0) {
    return Refuse(f, "global batch " + Str(Gbs(p)) + " is not divisible by micro-batch × DP = " +
                         Str(int64_t{c.mbs} * dp) + " (num_microbatches_calculator)");
  }
  if (m.hidden % m.heads != 0) {
    return Refuse(f, "hidden size " + Str(m.hidden) + " is not divisible by heads " + Str(m.heads));
  }
  if (m.heads % c.gy != 0) {
    return Refuse(f, "attention heads " + Str(m.heads) + " are not divisible by TP " + Str(c.gy) +
                         " (TransformerConfig)");
  }
  if (m.kv_heads % c.gy != 0 && c.gy % m.kv_heads != 0) {
    return Refuse(f, "query groups " + Str(m.kv_heads) + " are neither a multiple nor a divisor of TP " +
                         Str(c.gy) + " (TransformerConfig)");
  }
  if (m.layers % c.pp != 0) {
    return Refuse(f, "layers " + Str(m.layers) + " are not divisible by PP " + Str(c.pp));
  }
  if (c.vpp > 1) {
    if (m.layers % (c.pp * c.vpp) != 0) {
      return Refuse(f, "layers per stage " + Str(m.layers / c.pp) + " are not divisible into " +
                           Str(c.vpp) + " virtual stages");
    }
    if (c.pp < 2 || (!c.overlap_p2p && c.pp < 3)) {
      return Refuse(f, "the interleaved schedule needs PP > 1 (PP > 2 without p2p overlap); PP = " +
                           Str(c.pp));
    }
    // Micro-batches run in groups of PP per virtual stage; a partial group is an error.
    const int64_t micro = Gbs(p) / (int64_t{c.mbs} * dp);
    if (micro < c.pp || micro % c.pp != 0) {
      return Refuse(f, "the interleaved schedule needs the micro-batch count (" + Str(micro) +
                           ") to be a multiple of PP (" + Str(c.pp) + ")");
    }
  }
  if (c.cp > 1 && p.job.training.seq_len % (2 * c.cp) != 0) {
    return Refuse(f, "seq-length " + Str(p.job.training.seq_len) + " is not a multiple of 2·CP = " +
                         Str(2 * c.cp));
  }
  const bool dist_opt = c.distributed_optimizer || c.zero == 1;
  if (c.overlap_param_gather && !(dist_opt && c.overlap_grad_reduce)) {
    return Refuse(f, "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce");
  }
  if (c.tp_comm_overlap && !(c.sp && c.gy > 1)) {
    return Refuse(f, "--tp-comm-overlap needs --sequence-parallel with TP > 1");
  }
  const bool tp_dp_pp = OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp});
  const bool tp_pp_dp = OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kPp, Dim::kData});
  if (!tp_dp_pp && !tp_pp_dp) {
    return Refuse(f, "rank order " + OrderString(c) +
                         " is neither Megatron's tp-cp-dp-pp nor tp-cp-pp-dp (--use-tp-pp-dp-mapping)");
  }
  if (p.job.training.precision == topology::Precision::kTf32) {
    return Refuse(f, "tf32 is not a Megatron-LM precision flag (fp32 training uses TF32 GEMMs by default); "
                     "plan with --precision fp32");
  }
  return Status::Ok();
}

void Array(std::ostringstream& os, const char* name, const std::vector<std::string>& items) {
  os << name << "=(\n";
  for (const std::string& s : items) os << "    " << s << "\n";
  os << ")\n";
}

std::string EmitMegatron(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const TrainingSpec& t = p.job.training;
  std::ostringstream os;
  os << Header(p, "#", "Megatron-LM arguments");
  os << "# torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${GPT_MODEL_ARGS[@]} ${TRAINING_ARGS[@]} \\\n"
        "#     ${MODEL_PARALLEL_ARGS[@]} ${DATA_ARGS[@]} ${EVAL_AND_LOGGING_ARGS[@]}\n";
  os << "export CUDA_DEVICE_MAX_CONNECTIONS=1\n\n";

  std::vector<std::string> model = {
      "--num-layers " + Str(m.layers), "--hidden-size " + Str(m.hidden),
      "--ffn-hidden-size " + Str(m.ffn_hidden), "--num-attention-heads " + Str(m.heads)};
  if (m.kv_heads != m.heads) {
    model.push_back("--group-query-attention");
    model.push_back("--num-query-groups " + Str(m.kv_heads));
  }
  model.push_back("--seq-length " + Str(t.seq_len));
  model.push_back("--max-position-embeddings " + Str(std::max(t.seq_len, m.max_seq_len)));
  if (!m.learned_positions()) model.push_back("--position-embedding-type rope");
  if (m.norm == "rmsnorm") model.push_back("--normalization RMSNorm");
  if (m.gated_ffn) model.push_back("--swiglu");
  if (!m.tied_embeddings) model.push_back("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) model.push_back("--disable-bias-linear");
  if (!m.dropout) {
    model.push_back("--attention-dropout 0.0");
    model.push_back("--hidden-dropout 0.0");
  }
  // "flash" in the plan means a fused kernel that never stores the scores:
  // Megatron's default (auto) picks one where the precision allows it.
  if (t.attention == Attention::kUnfused) model.push_back("--attention-backend unfused");
  Array(os, "GPT_MODEL_ARGS", model);
  os << "\n";

  std::vector<std::string> training = {"--micro-batch-size " + Str(c.mbs),
                                       "--global-batch-size " + Str(Gbs(p))};
  switch (t.precision) {
    case topology::Precision::kBf16: training.push_back("--bf16"); break;
    case topology::Precision::kFp16: training.push_back("--fp16"); break;
    case topology::Precision::kFp8:
      training.push_back("--bf16");
      training.push_back("--fp8-format hybrid");
      break;
    default: break;  // fp32: no flag
  }
  if (c.recompute == Recompute::kFull) {
    // One layer per checkpoint: what the cost model's full recompute prices.
    training.push_back("--recompute-granularity full");
    training.push_back("--recompute-method uniform");
    training.push_back("--recompute-num-layers 1");
  } else if (c.recompute == Recompute::kSelective) {
    training.push_back("--recompute-granularity selective");
  }
  if (c.distributed_optimizer || c.zero == 1) training.push_back("--use-distributed-optimizer");
  if (c.overlap_grad_reduce) training.push_back("--overlap-grad-reduce");
  if (c.overlap_param_gather) training.push_back("--overlap-param-gather");
  Array(os, "TRAINING_ARGS", training);
  os << "\n";

  std::vector<std::string> par = {"--tensor-model-parallel-size " + Str(c.gy),
                                  "--pipeline-model-parallel-size " + Str(c.pp)};
  if (c.vpp > 1) {
    par.push_back("--num-layers-per-virtual-pipeline-stage " + Str(m.layers / (c.pp * c.vpp)));
    if (!c.overlap_p2p) par.push_back("--no-overlap-p2p-communication");
  }
  if (c.cp > 1) {
    par.push_back("--context-parallel-size " + Str(c.cp));
    par.push_back(std::string("--cp-comm-type ") + (c.cp_kind == CpKind::kRing ? "p2p" : "a2a"));
  }
  // Megatron turns sequence parallelism off by itself at TP = 1; say it only where it acts.
  if (c.sp && c.gy > 1) par.push_back("--sequence-parallel");
  if (c.tp_comm_overlap) par.push_back("--tp-comm-overlap");
  if (!OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kData, Dim::kPp})) par.push_back("--use-tp-pp-dp-mapping");
  Array(os, "MODEL_PARALLEL_ARGS", par);
  return os.str();
}

// ------------------------------------------------------------------ DeepSpeed
//
// Rules from deepspeedai/DeepSpeed @ edaa722: train_batch_size ==
// micro_batch × gradient_accumulation × DP world (runtime/config.py
// _batch_assertion, DP = world / sequence_parallel_size with Ulysses); the
// pipeline engine refuses ZeRO-2/3 (runtime/pipe/engine.py); Ulysses needs
// heads % sp == 0 (sequence/layer.py); hpZ groups are consecutive global ranks
// and must divide the world (utils/groups.py _create_zero_param_parallel_group).

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

Status CheckDeepSpeed(const Plan& p) {
  const ParallelConfig& c = p.c;
  const EmitFormat f = EmitFormat::kDeepSpeed;
  if (c.gx != 1 || c.gz != 1) {
    return Refuse(f, "AxoNN's 3D tensor grid (gx = " + Str(c.gx) + ", gz = " + Str(c.gz) +
                         ") is not a DeepSpeed option (use --format axonn)");
  }
  if (c.cp > 1 && c.cp_kind == CpKind::kRing) {
    return Refuse(f, "ring context parallelism is not a DeepSpeed option (DeepSpeed's sequence "
                     "parallelism is Ulysses all-to-all or FPDT); use --format megatron");
  }
  if (c.vpp > 1) return Refuse(f, "DeepSpeed's pipeline engine has no interleaved (virtual) stages");
  // Megatron sequence parallelism (sp) is a Megatron-DeepSpeed launch flag
  // (--sequence-parallel, SP=1 in the env format), not a ds_config key.
  if (c.pp > 1 && c.zero >= 2) {
    return Refuse(f, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (PP = " + Str(c.pp) +
                         ", stage " + Str(c.zero) + ")");
  }
  if (c.cp > 1 && p.job.model.heads % c.cp != 0) {
    return Refuse(f, "attention heads " + Str(p.job.model.heads) +
                         " are not divisible by the sequence-parallel size " + Str(c.cp));
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
  if (Gbs(p) % (int64_t{c.mbs} * dp) != 0) {
    return Refuse(f, "train_batch_size " + Str(Gbs(p)) +
                         " is not train_micro_batch_size_per_gpu × gradient_accumulation_steps × " +
                         "DP world for any whole number of steps (mbs " + Str(c.mbs) + ", DP " +
                         Str(dp) + ")");
  }
  if ((c.qwz || c.hpz || c.qgz) && c.zero != 3) {
    return Refuse(f, "ZeRO++ (qwZ, hpZ, qgZ) extends ZeRO stage 3; the plan has stage " + Str(c.zero));
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
    return Refuse(f, "DeepSpeed activation checkpointing is full-layer; selective recompute is a "
                     "Megatron-LM / torchtitan option");
  }
  if (p.job.training.precision == topology::Precision::kFp8 ||
      p.job.training.precision == topology::Precision::kTf32) {
    return Refuse(f, std::string("ds_config has no ") +
                         topology::PrecisionName(p.job.training.precision) +
                         " switch (bf16, fp16 or fp32 only)");
  }
  return Status::Ok();
}

std::string EmitDeepSpeed(const Plan& p) {
  const ParallelConfig& c = p.c;
  const int64_t dp = c.gdata;
  const int stage = c.zero > 0 ? c.zero : (c.distributed_optimizer ? 1 : 0);
  OrderedJson j;
  j["train_batch_size"] = Gbs(p);
  j["train_micro_batch_size_per_gpu"] = c.mbs;
  j["gradient_accumulation_steps"] = Gbs(p) / (int64_t{c.mbs} * dp);
  j["gradient_clipping"] = 1.0;
  switch (p.job.training.precision) {
    case topology::Precision::kBf16: j["bf16"] = {{"enabled", true}}; break;
    case topology::Precision::kFp16:
      j["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
      break;
    default: break;  // fp32
  }
  OrderedJson z;
  z["stage"] = stage;
  z["overlap_comm"] = c.overlap_grad_reduce || c.overlap_param_gather;
  z["contiguous_gradients"] = true;
  z["reduce_scatter"] = true;
  z["reduce_bucket_size"] = 500000000;
  z["allgather_bucket_size"] = 500000000;
  if (stage == 3) {
    z["stage3_prefetch_bucket_size"] = 50000000;
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
  j["wall_clock_breakdown"] = false;
  return j.dump(2) + "\n";
}

// ---------------------------------------------------------------------- AxoNN
//
// Rules from axonn-ai/axonn @ 660a224: G_inter·G_data·G_intra_r·G_intra_c·
// G_intra_d == world (communication.py); global batch % (G_data·micro) == 0
// (axonn.py create_dataloader); auto_parallelize keeps a linear sequential
// unless out % G_r == 0, in % G_c == 0 and (in·out/(G_r·G_c)) % G_d == 0
// (intra_layer/automatic_parallelism.py), which would silently undo the plan,
// so every transformer linear must pass. Rank order: c, r, d, inter, data.

Status CheckAxonn(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const EmitFormat f = EmitFormat::kAxonn;
  if (c.cp > 1) return Refuse(f, "AxoNN has no context/sequence parallelism (cp = " + Str(c.cp) + ")");
  if (c.sp) return Refuse(f, "Megatron sequence parallelism (sp) is not an AxoNN option");
  if (c.pp > 1 || c.vpp > 1) {
    return Refuse(f, "paratune models AxoNN's tensor + data parallelism (G_inter = 1); this plan "
                     "pipelines over pp = " + Str(c.pp) + " stages");
  }
  if (c.zero > 0 || c.distributed_optimizer || c.qwz || c.hpz || c.qgz) {
    return Refuse(f, "AxoNN shards weights and optimizer state over its depth group G_intra_d (gz), "
                     "not with ZeRO over G_data; this plan uses ZeRO stage " +
                         Str(std::max(c.zero, c.distributed_optimizer ? 1 : 0)));
  }
  if (c.world() != p.job.gpus) {
    return Refuse(f, "G_inter·G_data·G_intra_r·G_intra_c·G_intra_d = " + Str(c.world()) +
                         " is not the world size " + Str(p.job.gpus));
  }
  if (Gbs(p) % (int64_t{c.mbs} * c.gz * c.gdata) != 0) {
    return Refuse(f, "global batch " + Str(Gbs(p)) + " is not divisible by micro-batch × G_data × "
                     "G_intra_d = " + Str(int64_t{c.mbs} * c.gz * c.gdata));
  }
  const int64_t h = m.hidden, f_ = m.ffn_hidden, kv = int64_t{m.kv_heads} * m.head_dim();
  const std::pair<int64_t, int64_t> linears[] = {{h, m.qkv_out()}, {h, h}, {h, kv}, {h, f_}, {f_, h}};
  for (const auto& [in, out] : linears) {
    if (out % c.gy != 0 || in % c.gx != 0 || (in * out / (int64_t{c.gy} * c.gx)) % c.gz != 0) {
      return Refuse(f, "auto_parallelize would keep the " + Str(in) + "→" + Str(out) +
                           " linear sequential (needs out % G_intra_r(" + Str(c.gy) + ") == 0, in % "
                           "G_intra_c(" + Str(c.gx) + ") == 0 and in·out/(G_intra_r·G_intra_c) % "
                           "G_intra_d(" + Str(c.gz) + ") == 0)");
    }
  }
  if (p.job.training.precision == topology::Precision::kFp8) {
    return Refuse(f, "AxoNN's tensor-parallel layers run torch matmuls, with no FP8 path");
  }
  if (!OrderMatches(c, {Dim::kX, Dim::kY, Dim::kZ, Dim::kPp, Dim::kData})) {
    return Refuse(f, "rank order " + OrderString(c) +
                         " is not AxoNN's fixed layout x (G_intra_c), y (G_intra_r), z (G_intra_d), "
                         "inter, data");
  }
  return Status::Ok();
}

const char* PyBool(bool b) { return b ? "True" : "False"; }

std::string EmitAxonn(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  std::ostringstream os;
  os << Header(p, "#", "AxoNN setup");
  os << "# Start one process per GPU (srun / mpirun) with CUDA_DEVICE_MAX_CONNECTIONS=1.\n";
  os << "# build_model(), dataset and optimizer are yours.\n";
  os << "from axonn import axonn as ax\n";
  os << "from axonn.intra_layer import auto_parallelize, optimize_communication, sync_gradients\n\n";
  os << "ax.init(\n";
  os << "    G_inter=1,\n";
  os << "    G_data=" << c.gdata << ",\n";
  os << "    G_intra_r=" << c.gy << ",  # Y: splits output features; backward all-reduce\n";
  os << "    G_intra_c=" << c.gx << ",  # X: splits input features; forward all-reduce; innermost ranks\n";
  os << "    G_intra_d=" << c.gz << ",  # Z: shards each weight block and the batch (FSDP-like)\n";
  os << ")\n\n";
  os << "GLOBAL_BATCH_SIZE = " << Gbs(p) << "  # sequences per iteration\n";
  os << "MICRO_BATCH_SIZE = " << c.mbs << "  # sequences per GPU per micro-batch\n";
  os << "GRADIENT_ACCUMULATION_STEPS = " << MicroBatches(p)
     << "  # GLOBAL_BATCH_SIZE / (MICRO_BATCH_SIZE * G_data * G_intra_d)\n";
  os << "SEQ_LEN = " << p.job.training.seq_len << "\n";
  switch (p.job.training.precision) {
    case topology::Precision::kBf16:
      os << "PRECISION = \"bf16\"  # forward under torch.autocast(\"cuda\", dtype=torch.bfloat16)\n";
      break;
    case topology::Precision::kFp16:
      os << "PRECISION = \"fp16\"  # torch.autocast(\"cuda\", dtype=torch.float16) with a GradScaler\n";
      break;
    default:
      os << "PRECISION = \"" << topology::PrecisionName(p.job.training.precision) << "\"\n";
      break;
  }
  os << "ACTIVATION_CHECKPOINTING = \"" << RecomputeName(c.recompute) << "\"";
  if (c.recompute == Recompute::kFull) os << "  # torch.utils.checkpoint around each transformer block";
  if (c.recompute == Recompute::kSelective) os << "  # checkpoint the attention core only";
  os << "\n";
  if (m.vocab % c.gy != 0) {
    os << "# Note: the output layer (" << m.hidden << "->" << m.vocab
       << ") stays sequential: vocab is not divisible by G_intra_r; pad the vocabulary to parallelize it.\n";
  }
  if (c.gz > 1) {
    // The plan's time assumes the gathered Z weights of as many layers as fit
    // stay cached from the forward to the backward (framework preset
    // z_weight_cache; docs/frameworks.md).
    TrainingSpec t = p.job.training;
    t.framework = Framework::kAxonn;
    const CostModel cm(m, t, p.job.cluster, p.job.gpus);
    const int cached = cm.Memory(c).z_cached_layers;
    if (cached > 0) {
      os << "# The plan caches the gathered weights of " << cached << " of " << m.layers
         << " layers between forward and backward: in Megatron-AxoNN,\n"
         << "#   --num-layers-for-caching-weights-in-depth-tensor-parallel-all-gather " << cached
         << " --layer-caching-level 2\n";
    }
  }
  os << "\nwith auto_parallelize():\n";
  os << "    model = build_model()  # every divisible nn.Linear becomes an AxoNN tensor-parallel Linear\n\n";
  os << "loader = ax.create_dataloader(dataset, global_batch_size=GLOBAL_BATCH_SIZE,\n";
  os << "                              micro_batch_size=MICRO_BATCH_SIZE)\n\n";
  os << "def train_step(micro_batches):  # GRADIENT_ACCUMULATION_STEPS batches from loader\n";
  os << "    for batch in micro_batches:\n";
  os << "        with optimize_communication(\n";
  os << "            overlap_all_reduce=" << PyBool(c.oar) << ",\n";
  os << "            overlap_reduce_scatter=" << PyBool(c.ors) << ",\n";
  os << "            overlap_all_gather=" << PyBool(c.oag) << ",\n";
  os << "            model_object_for_overlapping_allgathers=" << (c.oag ? "model" : "None") << ",\n";
  os << "        ):\n";
  os << "            loss = model(batch).loss / GRADIENT_ACCUMULATION_STEPS\n";
  os << "            loss.backward()\n";
  os << "    sync_gradients(model)\n";
  os << "    optimizer.step()  # outside the optimize_communication context\n";
  os << "    optimizer.zero_grad()\n";
  return os.str();
}

// ----------------------------------------------------------------- torchtitan
//
// Rules from pytorch/torchtitan @ 238fa99 (the last TOML-config commit):
// dp_replicate·dp_shard·cp·tp·pp == world (distributed/parallel_dims.py
// _validate); global batch % (local_batch_size · dp_replicate·dp_shard) == 0
// (train.py); with PP, local_batch_size % pipeline_parallel_microbatch_size ==
// 0, the virtual stages divide over PP ranks, single-stage schedules have one
// stage per rank and looped ones at least two (distributed/pipeline_parallel.py).

Status CheckTorchtitan(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const EmitFormat f = EmitFormat::kTorchtitan;
  if (c.gx != 1) {
    return Refuse(f, "AxoNN's 2D tensor grid (gx = " + Str(c.gx) + ") is not a torchtitan option");
  }
  if (c.zero > 0 || c.distributed_optimizer || c.qwz || c.hpz || c.qgz) {
    return Refuse(f, "torchtitan shards with FSDP2 over data_parallel_shard_degree (gz), not with "
                     "ZeRO stages over the replicas; this plan uses ZeRO stage " +
                         Str(std::max(c.zero, c.distributed_optimizer ? 1 : 0)));
  }
  if (c.cp > 1 && c.cp_kind != CpKind::kRing) {
    return Refuse(f, std::string("torchtitan's context parallelism is ring attention; ") +
                         CpKindName(c.cp_kind) + " is not");
  }
  if (c.gy > 1 && !c.sp) {
    return Refuse(f, "torchtitan's tensor parallelism always shards norms and activations over the "
                     "sequence (SequenceParallel); this plan has TP without sp");
  }
  if (c.world() != p.job.gpus) {
    return Refuse(f, "dp_replicate·dp_shard·cp·tp·pp = " + Str(c.world()) + " is not the world size " +
                         Str(p.job.gpus));
  }
  if (Gbs(p) % (int64_t{c.mbs} * c.gz * c.gdata) != 0) {
    return Refuse(f, "global batch " + Str(Gbs(p)) + " is not divisible by local batch × DP degree = " +
                         Str(int64_t{c.mbs} * c.gz * c.gdata));
  }
  if (c.cp > 1 && p.job.training.seq_len % (2 * c.cp) != 0) {
    return Refuse(f, "seq_len " + Str(p.job.training.seq_len) + " does not split into 2·cp = " + Str(2 * c.cp) +
                         " load-balanced (head-tail) chunks");
  }
  if (c.pp > 1 && m.layers % (c.pp * c.vpp) != 0) {
    return Refuse(f, "layers " + Str(m.layers) + " do not split into " + Str(c.pp * c.vpp) +
                         " equal pipeline stages");
  }
  if (c.vpp > 1 && c.pp < 2) return Refuse(f, "interleaved stages need pipeline_parallel_degree > 1");
  if (!OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kZ, Dim::kData, Dim::kPp})) {
    return Refuse(f, "rank order " + OrderString(c) +
                         " is not torchtitan's mesh order (innermost first) tp, cp, dp_shard, "
                         "dp_replicate, pp");
  }
  const auto prec = p.job.training.precision;
  if (prec != topology::Precision::kBf16 && prec != topology::Precision::kFp32) {
    return Refuse(f, std::string("training.mixed_precision_param takes bfloat16 or float32, not ") +
                         topology::PrecisionName(prec));
  }
  return Status::Ok();
}

std::string EmitTorchtitan(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  std::ostringstream os;
  os << Header(p, "#", "torchtitan job config (TOML)");
  os << "# Merge into your train_configs/*.toml; these keys replace the ones there.\n";
  // Without PP every micro-batch is a gradient-accumulation step; with PP the
  // local batch is one step, cut into pipeline micro-batches of mbs.
  const int64_t local = c.pp > 1 ? int64_t{c.mbs} * MicroBatches(p) : c.mbs;
  os << "[training]\n";
  os << "local_batch_size = " << local << "\n";
  os << "global_batch_size = " << Gbs(p) << "\n";
  os << "seq_len = " << p.job.training.seq_len << "\n";
  os << "mixed_precision_param = \""
     << (p.job.training.precision == topology::Precision::kFp32 ? "float32" : "bfloat16") << "\"\n\n";
  os << "[parallelism]\n";
  os << "data_parallel_replicate_degree = " << c.gdata << "\n";
  os << "data_parallel_shard_degree = " << c.gz << "\n";
  os << "tensor_parallel_degree = " << c.gy << "\n";
  os << "pipeline_parallel_degree = " << c.pp << "\n";
  os << "context_parallel_degree = " << c.cp << "\n";
  if (c.pp > 1) {
    os << "pipeline_parallel_schedule = \"" << (c.vpp > 1 ? "Interleaved1F1B" : "1F1B") << "\"\n";
    os << "pipeline_parallel_microbatch_size = " << c.mbs << "\n";
    os << "pipeline_parallel_layers_per_stage = " << m.layers / (c.pp * c.vpp) << "\n";
    os << "pipeline_parallel_first_stage_less_layers = 0\n";
    os << "pipeline_parallel_last_stage_less_layers = 0\n";
  }
  if (p.compile && c.gy > 1) os << "enable_async_tensor_parallel = true\n";
  os << "\n[activation_checkpoint]\n";
  os << "mode = \"" << RecomputeName(c.recompute) << "\"\n";
  if (c.recompute == Recompute::kSelective) os << "selective_ac_option = \"op\"\n";
  if (p.compile) os << "\n[compile]\nenable = true\n";
  // torchtitan after the 2026 switch to Python configs (checked at b5bcd76,
  // torchtitan/config/configs.py TrainingConfig and ParallelismConfig) still
  // takes --section.option overrides; batches are counted in tokens there.
  os << "\n# Python-config torchtitan (after 238fa99): the same plan as command-line overrides\n";
  os << "#   --parallelism.data_parallel_replicate_degree " << c.gdata
     << " --parallelism.data_parallel_shard_degree " << c.gz << "\n";
  os << "#   --parallelism.tensor_parallel_degree " << c.gy << " --parallelism.pipeline_parallel_degree "
     << c.pp << " --parallelism.context_parallel_degree " << c.cp << "\n";
  if (c.pp > 1) {
    os << "#   --parallelism.pipeline_parallel_schedule " << (c.vpp > 1 ? "Interleaved1F1B" : "1F1B")
       << " --parallelism.num_pp_microbatches " << MicroBatches(p) << "\n";
    os << "#   --parallelism.pipeline_parallel_layers_per_stage " << m.layers / (c.pp * c.vpp)
       << " --parallelism.pipeline_parallel_first_stage_less_layers 0"
       << " --parallelism.pipeline_parallel_last_stage_less_layers 0\n";
  }
  const int64_t seq = p.job.training.seq_len;
  os << "#   --training.num_tokens_per_microbatch_per_dp_rank " << int64_t{c.mbs} * seq
     << " --training.num_tokens_per_train_step " << Gbs(p) * seq << "\n";
  os << "#   --training.max_context_length " << seq << "\n";
  return os.str();
}

// ------------------------------------------------------------------ env, json

std::string EmitEnv(const Plan& p) {
  const ParallelConfig& c = p.c;
  const std::pair<const char*, std::string> vars[] = {
      {"TP", Str(c.tensor())},
      {"PP", Str(c.pp)},
      {"CP", Str(c.cp)},
      {"DP", Str(c.gdata)},
      {"SP", c.sp ? "1" : "0"},
      {"VP", Str(c.vpp)},
      {"MBS", Str(c.mbs)},
      {"GBS", Str(Gbs(p))},
      {"ZERO_STAGE", Str(c.zero > 0 ? c.zero : (c.distributed_optimizer ? 1 : 0))},
      {"RECOMPUTE", RecomputeName(c.recompute)},
      {"GX", Str(c.gx)},
      {"GY", Str(c.gy)},
      {"GZ", Str(c.gz)},
  };
  std::string out;
  for (const auto& [k, v] : vars) out += std::string("export ") + k + "=" + v + "\n";
  return out;
}

Result<Plan> LoadPlan(const Json& plans, int rank) {
  Plan p;
  PT_ASSIGN_OR_RETURN(p.job, JobFromPlans(plans));
  if (!plans.contains("candidates") || !plans["candidates"].is_array()) {
    return Status::InvalidArgument("/candidates: must be an array");
  }
  const Json& cands = plans["candidates"];
  if (cands.empty()) {
    return Status::InvalidArgument("/candidates: the plans document has no candidate (nothing fit)");
  }
  if (rank < 1 || rank > static_cast<int>(cands.size())) {
    return Status::InvalidArgument("--rank " + std::to_string(rank) + ": the plans document has " +
                                   std::to_string(cands.size()) + " candidate(s), ranks 1-" +
                                   std::to_string(cands.size()));
  }
  const Json& cand = cands[rank - 1];
  const std::string ptr = "/candidates/" + std::to_string(rank - 1);
  if (!cand.is_object() || !cand.contains("config")) {
    return Status::InvalidArgument(ptr + "/config: is required");
  }
  PT_ASSIGN_OR_RETURN(p.c, ParseConfig(cand["config"], ptr + "/config", p.job.gpus));
  if (p.c.world() != p.job.gpus) {
    return Status::InvalidArgument(ptr + "/config: the degrees multiply to " + Str(p.c.world()) +
                                   ", not the plan's " + Str(p.job.gpus) + " GPUs");
  }
  if (p.c.mbs < 1 || Gbs(p) % (int64_t{p.c.mbs} * p.c.gz * p.c.gdata) != 0) {
    return Status::InvalidArgument(ptr + "/config: global batch " + Str(Gbs(p)) +
                                   " is not divisible by mbs·gz·dp");
  }
  p.rank = rank;
  p.config_string = ConfigToString(p.c);
  if (cand.contains("prediction") && cand["prediction"].is_object()) {
    const Json& pr = cand["prediction"];
    if (pr.contains("iteration_time_s") && pr["iteration_time_s"].is_number()) {
      p.iteration_time_s = pr["iteration_time_s"].get<double>();
    }
    if (pr.contains("mfu") && pr["mfu"].is_number()) p.mfu = pr["mfu"].get<double>();
  }
  const Json& tr = plans["job"]["training"];
  if (tr.contains("compile") && tr["compile"].is_boolean()) p.compile = tr["compile"].get<bool>();
  return p;
}

Result<std::string> EmitChecked(const Json& plans, int rank, EmitFormat format);

}  // namespace

Result<EmitFormat> ParseEmitFormat(const std::string& name) {
  for (EmitFormat f : {EmitFormat::kMegatron, EmitFormat::kDeepSpeed, EmitFormat::kAxonn,
                       EmitFormat::kTorchtitan, EmitFormat::kEnv, EmitFormat::kJson}) {
    if (name == EmitFormatName(f)) return f;
  }
  return Status::InvalidArgument("--format '" + name +
                                 "' is not one of megatron, deepspeed, axonn, torchtitan, env, json");
}

const char* EmitFormatName(EmitFormat f) {
  switch (f) {
    case EmitFormat::kMegatron: return "megatron";
    case EmitFormat::kDeepSpeed: return "deepspeed";
    case EmitFormat::kAxonn: return "axonn";
    case EmitFormat::kTorchtitan: return "torchtitan";
    case EmitFormat::kEnv: return "env";
    case EmitFormat::kJson: return "json";
  }
  return "json";
}

Result<std::string> EmitConfig(const Json& plans, int rank, EmitFormat format) {
  // Documents come from users (CLI, REST): a JSON type surprise is bad input, not a crash.
  try {
    return EmitChecked(plans, rank, format);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("not a valid plans document: ") + e.what());
  }
}

namespace {

Result<std::string> EmitChecked(const Json& plans, int rank, EmitFormat format) {
  PT_ASSIGN_OR_RETURN(Plan p, LoadPlan(plans, rank));
  switch (format) {
    case EmitFormat::kMegatron:
      PT_RETURN_IF_ERROR(CheckMegatron(p));
      return EmitMegatron(p);
    case EmitFormat::kDeepSpeed:
      PT_RETURN_IF_ERROR(CheckDeepSpeed(p));
      return EmitDeepSpeed(p);
    case EmitFormat::kAxonn:
      PT_RETURN_IF_ERROR(CheckAxonn(p));
      return EmitAxonn(p);
    case EmitFormat::kTorchtitan:
      PT_RETURN_IF_ERROR(CheckTorchtitan(p));
      return EmitTorchtitan(p);
    case EmitFormat::kEnv: return EmitEnv(p);
    case EmitFormat::kJson: return ConfigToJson(p.c).dump(2) + "\n";
  }
  return Status::InvalidArgument("unknown format");
}

}  // namespace

EmitFormat DefaultEmitFormat(const Json& plans) {
  std::string framework;
  if (plans.is_object() && plans.contains("job") && plans["job"].is_object() &&
      plans["job"].contains("training") && plans["job"]["training"].is_object()) {
    const Json& t = plans["job"]["training"];
    if (t.contains("framework") && t["framework"].is_string()) framework = t["framework"].get<std::string>();
  }
  if (framework.empty() && plans.is_object() && plans.contains("space") && plans["space"].is_string()) {
    const std::string space = plans["space"].get<std::string>();
    if (space == "deepspeed") framework = "deepspeed";
    if (space == "axonn") framework = "axonn";
    if (space == "fsdp") framework = "fsdp";
  }
  if (framework == "megatron-deepspeed" || framework == "deepspeed") return EmitFormat::kDeepSpeed;
  if (framework == "fsdp" || framework == "torchtitan") return EmitFormat::kTorchtitan;
  if (framework == "axonn") return EmitFormat::kAxonn;
  return EmitFormat::kMegatron;
}

}  // namespace paratune::planner
