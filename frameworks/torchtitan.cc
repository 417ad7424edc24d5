// frameworks/torchtitan.cc: torchtitan's rules and its configuration form.
//
// torchtitan takes a Python function returning Trainer.Config, named with
// --module / --config (torchtitan/config/README.md; TOML job files were
// removed in pytorch/torchtitan#2386). Rules from pytorch/torchtitan @ b5bcd76
// (0.2.2), each restated with its lines in tests/frameworks/framework_rules.h:
//  - dp_replicate·dp_shard·cp·tp·pp == world (distributed/parallel_dims.py:166-192)
//  - TP divides n_heads and n_kv_heads (models/common/decoder.py:185-199)
//  - tokens per micro-batch % ((tp with SP) · (2·cp when cp > 1)) == 0 (trainer.py:296-308)
//  - num_tokens_per_train_step % (tokens per micro-batch · num_pp_microbatches · dp) == 0
//    (trainer.py:409-428)
//  - CUDA graphs (on unless training.disable_cuda_graphs) refuse PP and expert
//    parallelism over a dispatcher that synchronises with the host
//    (Trainer.Config._validate_cuda_graphs, trainer.py:168-199, run at 352):
//    every dispatcher paratune writes does (ExpertParallelSyncsHost)
//  - PP needs untied embeddings (models/common/decoder.py:168-171)
//  - the stage split of distributed/pipeline_parallel.py:217-263 and 357-467
//    (planner/pipeline.h, rule "torchtitan"): the plan's split must be the one
//    torchtitan makes from the emitted fields
//  - CP needs the spmd_types backend (distributed/context_parallel/api.py:24-33)
//    and FlexAttention (decoder.py:173-183; llama3 model_registry's default)
//  - float8 through Float8LinearConverter on SM89+ (components/quantization/float8.py:85-97)
//  - MoE: expert_parallel_degree divides dp_shard·cp·tp (parallel_dims.py:187-192),
//    no expert TP (parallel_dims.py:282,328), the model's comm_backend
//    standard | deepep | hybridep (models/common/config_utils.py:360-425)
#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

#include "common/enum_names.h"
#include "frameworks/emit_internal.h"
#include "planner/model.h"

namespace paratune::planner::emit_internal {
namespace {

constexpr EmitFormat kF = EmitFormat::kTorchtitan;

// torchtitan's model flavours, by shape (torchtitan/models/<module>/__init__.py,
// the *_configs tables, at b5bcd76): the model_registry flavour and the
// config_registry function whose data, optimizer and loss the plan starts from.
// Where torchtitan has no function for the flavour, a sibling's of the same
// family (same tokenizer) is named and its model_spec replaced.
struct Flavor {
  const char* module;    // torchtitan.models.<module>
  const char* name;      // model_registry flavour
  const char* function;  // config_registry function
  bool own_function;     // false: `function` is a sibling flavour's
  int layers, hidden, heads, kv_heads, vocab;
  int experts, top_k, moe_ffn;  // 0: dense
  bool linear_bias;             // gpt-oss's attention and experts carry biases
  bool moe_comm_backend;        // model_registry takes moe_comm_backend
  bool mtp;                     // model_registry takes num_mtp_layers
};
constexpr Flavor kFlavors[] = {
    // llama3/__init__.py:359-366; config_registry.py:194, 267, 305 (none for 1B and 3B).
    {"llama3", "1B", "llama3_8b", false, 16, 2048, 32, 8, 128256, 0, 0, 0, false, false, false},
    {"llama3", "3B", "llama3_8b", false, 28, 3072, 24, 8, 128256, 0, 0, 0, false, false, false},
    {"llama3", "8B", "llama3_8b", true, 32, 4096, 32, 8, 128256, 0, 0, 0, false, false, false},
    {"llama3", "70B", "llama3_70b", true, 80, 8192, 64, 8, 128256, 0, 0, 0, false, false, false},
    {"llama3", "405B", "llama3_405b", true, 126, 16384, 128, 8, 128256, 0, 0, 0, false, false,
     false},
    // qwen3/__init__.py:597-610; config_registry.py:305 (none for 235B-A22B).
    {"qwen3", "30B-A3B", "qwen3_30b_a3b", true, 48, 2048, 32, 4, 151936, 128, 8, 768, false, true,
     false},
    {"qwen3", "235B-A22B", "qwen3_30b_a3b", false, 94, 4096, 64, 4, 151936, 128, 8, 1536, false,
     true, false},
    // deepseek_v3/__init__.py:608-613 (MLA: every head its own keys and values);
    // config_registry.py:141, 209.
    {"deepseek_v3", "16B", "deepseek_v3_16b", true, 27, 2048, 16, 16, 102400, 64, 6, 1408, false,
     true, true},
    {"deepseek_v3", "671B", "deepseek_v3_671b", true, 61, 7168, 128, 128, 129280, 256, 8, 2048,
     false, true, true},
    // gpt_oss/__init__.py:381-385 (64 heads, 8 KV heads: lines 74-75); config_registry.py:71, 104.
    {"gpt_oss", "20b", "gpt_oss_20b", true, 24, 2880, 64, 8, 201088, 32, 4, 2880, true, true,
     false},
    {"gpt_oss", "120b", "gpt_oss_120b", true, 36, 2880, 64, 8, 201088, 128, 4, 2880, true, true,
     false},
};

const Flavor* FlavorOf(const ModelSpec& m) {
  for (const Flavor& f : kFlavors) {
    if (m.layers == f.layers && m.hidden == f.hidden && m.heads == f.heads &&
        m.kv_heads == f.kv_heads && m.vocab == f.vocab && m.experts == f.experts &&
        m.top_k == f.top_k && m.moe_ffn_hidden == f.moe_ffn && m.linear_bias == f.linear_bias &&
        m.gated_ffn && m.norm == "rmsnorm") {
      return &f;
    }
  }
  return nullptr;
}

bool Llama3(const Flavor* f) { return f && std::string_view(f->module) == "llama3"; }

// torch.distributed.pipelining's schedule names (get_schedule_class), which
// torchtitan takes as parallelism.pipeline_parallel_schedule (config/configs.py:216-222):
// InterleavedZeroBubble is ZB1P (ZB-H1) over >= 2 stages per rank; ZBVZeroBubble
// and DualPipeV run two stages per rank in a V (pipeline_parallel.py:532-569).
const char* Schedule(const ParallelConfig& c) {
  switch (c.pp_schedule) {
    case PpSchedule::kZbH1:
      return "InterleavedZeroBubble";
    case PpSchedule::kZbV:
      return "ZBVZeroBubble";
    case PpSchedule::kDualPipeV:
      return "DualPipeV";
    case PpSchedule::k1F1B:
      break;
  }
  return c.vpp > 1 ? "Interleaved1F1B" : "1F1B";
}

Status Check(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  if (c.gx != 1) {
    return Refuse(kF, "AxoNN's 2D tensor grid (gx = " + Str(c.gx) + ") is not a torchtitan option");
  }
  if (c.zero > 0 || c.distributed_optimizer || c.qwz || c.hpz || c.qgz) {
    return Refuse(kF,
                  "torchtitan shards with FSDP2 over data_parallel_shard_degree (gz), not with "
                  "ZeRO stages over the replicas; this plan uses ZeRO stage " +
                      Str(std::max(c.zero, c.distributed_optimizer ? 1 : 0)));
  }
  if (c.offload_optimizer || c.offload_param) {
    return Refuse(kF,
                  "the plan offloads the way DeepSpeed's ZeRO-Offload does; torchtitan's "
                  "training.enable_cpu_offload is FSDP2's CPUOffload, another scheme");
  }
  if (c.cp > 1 && c.cp_kind != CpKind::kRing) {
    return Refuse(kF, std::string("torchtitan's context parallelism is ring attention; ") +
                          CpKindName(c.cp_kind) + " is not");
  }
  if (c.gy > 1 && !c.sp) {
    return Refuse(
        kF,
        "torchtitan's tensor parallelism shards norms and activations over the "
        "sequence (enable_sequence_parallel, on in every recipe); this plan has TP without sp");
  }
  if (c.world() != p.job.gpus) {
    return Refuse(kF, "dp_replicate·dp_shard·cp·tp·pp = " + Str(c.world()) +
                          " is not the world size " + Str(p.job.gpus) +
                          " (parallel_dims.py:182-185)");
  }
  if (c.gy > 1 && (m.heads % c.gy != 0 || m.kv_heads % c.gy != 0)) {
    return Refuse(kF, "tensor_parallel_degree " + Str(c.gy) + " must divide n_heads " +
                          Str(m.heads) + " and n_kv_heads " + Str(m.kv_heads) +
                          " (decoder.py:185-199)");
  }
  const int64_t tokens = int64_t{c.mbs} * p.job.training.seq_len;
  const int64_t divisor = (c.sp ? c.gy : 1) * (c.cp > 1 ? 2 * c.cp : 1);
  if (tokens % divisor != 0) {
    return Refuse(kF, "tokens per micro-batch " + Str(tokens) + " are not divisible by " +
                          Str(divisor) + " for sequence/context parallelism (trainer.py:296-308)");
  }
  if (c.pp > 1 && m.tied_embeddings) {
    return Refuse(
        kF, "torchtitan refuses pipeline parallelism with tied embeddings (decoder.py:168-171)");
  }
  if (c.vpp > 1 && c.pp < 2)
    return Refuse(kF, "interleaved stages need pipeline_parallel_degree > 1");
  if (c.pp > 1) PT_RETURN_IF_ERROR(CheckSameSplit(p, kF, PpSplit::kTorchtitan));
  if (c.pp_schedule != PpSchedule::k1F1B && p.compile) {
    // PyTorch's zero-bubble schedules split the backward into input and weight
    // passes, which they do not support under torch.compile
    // (torch/distributed/pipelining/schedules.py, ScheduleInterleavedZeroBubble.__init__).
    return Refuse(kF, std::string(PpScheduleName(c.pp_schedule)) +
                          " splits the backward into input- and weight-gradient passes, which "
                          "PyTorch's pipelining schedules do not run under torch.compile");
  }
  if (!OrderMatches(c, {Dim::kY, Dim::kCp, Dim::kZ, Dim::kData, Dim::kPp})) {
    return Refuse(kF, "rank order " + OrderString(c) +
                          " is not torchtitan's mesh order (innermost first) tp, cp, dp_shard, "
                          "dp_replicate, pp (parallel_dims.py:309)");
  }
  const auto prec = p.job.training.precision;
  if (prec != topology::Precision::kBf16 && prec != topology::Precision::kFp32 &&
      prec != topology::Precision::kFp8) {
    return Refuse(kF,
                  std::string("torchtitan trains in bfloat16 or float32 mixed precision, or float8 "
                              "linears; not ") +
                      topology::PrecisionName(prec));
  }
  if (c.tp_comm_overlap && !p.compile) {
    return Refuse(
        kF,
        "async tensor parallelism (tp_comm_overlap) is an Inductor pass: it needs torch.compile "
        "(distributed/compile.py:76-97)");
  }
  if (prec == topology::Precision::kFp8 && !Llama3(FlavorOf(m))) {
    return Refuse(kF,
                  "float8 training is a converter on the model's configuration "
                  "(Float8LinearConverter): paratune writes it for torchtitan's Llama 3 flavours "
                  "only, and " +
                      m.name + " is not one");
  }
  if (m.is_moe() || c.ep > 1) {
    auto moe = TorchtitanMoeLines(m, MoeLaunchOf(p), c.gz);
    if (!moe.ok()) return RefuseMoe(kF, moe.status());
  }
  return CheckPresetRules(p, kF, Framework::kTorchtitan);
}

// torchtitan's comm_backend for the plan's dispatcher, in MoeDispatcher's
// order (config.h): alltoall and allgather (which Check refused) are "standard".
constexpr const char* kCommBackends[] = {"standard", "standard", "deepep", "hybridep"};
static_assert(std::size(kCommBackends) == kNumMoeDispatchers);
const char* CommBackend(MoeDispatcher d) { return EnumLookup(d, kCommBackends, "standard"); }

std::vector<Keep> KeepOf(const Plan& p) {
  // The name torchtitan's run_train.sh sets, as it starts every job.
  std::vector<Keep> k;
  KeepAllocator(p, "PYTORCH_ALLOC_CONF", &k);
  return k;
}

std::string Launcher(const Plan& p) {
  std::ostringstream os;
  os << "torchrun --nnodes " << p.Nodes() << " --nproc_per_node " << p.GpusPerNode()
     << " --rdzv_backend c10d --rdzv_endpoint $HEAD_NODE:29500 -m torchtitan.train --module "
        "paratune_plan "
        "--config paratune_plan";
  return os.str();
}

const char* PyBool(bool b) { return b ? "True" : "False"; }

// Whether the plan's expert parallelism runs a token dispatcher that waits on
// the host, which torchtitan's CUDA graphs refuse (trainer.py:178-199): all
// but MinimalAsyncEP and HybridEP with non_blocking_capacity_factor. paratune
// writes "standard", "deepep" or "hybridep" without that factor
// (make_token_dispatcher_config, models/common/config_utils.py:360-412).
bool ExpertParallelSyncsHost(const Plan& p) { return p.job.model.is_moe() && p.c.ep > 1; }

// The line that turns CUDA graphs off where torchtitan refuses them
// (trainer.py:168-199): with PP, and with a host-synchronising EP dispatcher.
std::string CudaGraphsLine(const Plan& p) {
  if (p.c.pp > 1) {
    return "    config.training.disable_cuda_graphs = True  # CUDA graphs refuse PP "
           "(trainer.py:172-176)\n";
  }
  if (ExpertParallelSyncsHost(p)) {
    return "    config.training.disable_cuda_graphs = True  # CUDA graphs refuse this EP "
           "dispatcher (trainer.py:178-199)\n";
  }
  return "";
}

// The save schedule the plan was priced with: torchtitan's DCP checkpointer
// (components/checkpointer/base.py:275-338, dcp.py:137-149 @ b5bcd76), on
// (enable defaults off), every interval steps (at least 1), asynchronous with
// pinned host staging where priced so (the step waits only for the copy to
// pinned memory, trainer.py:955; each save waits for the previous one,
// dcp.py:427). The fields are set after the config is built, so the values
// are the ones its __post_init__ accepts: async_mode lower-case, one of three.
void WriteCheckpoint(const Plan& p, std::ostringstream& os) {
  if (p.checkpoint_interval_steps <= 0) return;
  os << "    config.checkpoint.enable = True\n";
  os << "    config.checkpoint.folder = " << kCheckpointDirPython << "\n";
  os << "    config.checkpoint.interval = " << p.checkpoint_interval_steps << "\n";
  os << "    config.checkpoint.async_mode = \""
     << (p.checkpoint_async ? "async_with_pinned_mem" : "disabled") << "\"\n";
}

std::string Write(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const int64_t seq = p.job.training.seq_len;
  const Flavor* flavor = FlavorOf(m);
  const bool fp8 = p.job.training.precision == topology::Precision::kFp8;
  std::ostringstream os;
  os << Header(p, TorchtitanEmitter(), "#", "torchtitan configuration");
  os << "# Save as paratune_plan.py on PYTHONPATH; torchtitan imports it with --module "
        "paratune_plan.\n";
  if (p.checkpoint_interval_steps > 0) os << "import os\n\n";
  os << "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n";
  os << "from torchtitan.trainer import Trainer\n";
  if (flavor) {
    os << "from torchtitan.models." << flavor->module << " import model_registry\n";
    os << "from torchtitan.models." << flavor->module << ".config_registry import "
       << flavor->function << "\n";
    if (fp8) os << "from torchtitan.components.quantization import Float8LinearConverter\n";
    os << "\n\ndef base_config() -> Trainer.Config:\n";
    if (flavor->own_function) {
      os << "    \"\"\"torchtitan's " << flavor->function
         << " (the model, data and optimizer): the shape of " << m.name << ".\"\"\"\n";
    } else {
      os << "    \"\"\"torchtitan's " << flavor->name << " flavour on " << flavor->function
         << "'s data and optimizer (torchtitan has\n    no config_registry function for "
         << flavor->name << "): the shape of " << m.name << ".\"\"\"\n";
    }
    os << "    config = " << flavor->function << "()\n";
    os << "    config.model_spec = model_registry(\n";
    os << "        \"" << flavor->name << "\",\n";
    os << "        attn_backend=\"flex\",\n";
    if (flavor->moe_comm_backend) {
      os << "        moe_comm_backend=\"" << CommBackend(c.moe_dispatcher) << "\",\n";
    }
    if (flavor->mtp && m.mtp_layers > 0) {
      os << "        num_mtp_layers=" << m.mtp_layers << ",\n";
    }
    if (fp8) {
      os << "        converters=[\n";
      os << "            Float8LinearConverter.Config(filter_fqns=[\"lm_head\"], "
            "model_compile_enabled="
         << PyBool(p.compile) << "),\n";
      os << "        ],\n";
    }
    os << "    )\n";
    os << "    return config\n";
  } else {
    os << "\n# torchtitan has no configuration of this model's shape (" << m.name
       << "): base_config() is yours and\n# returns its Trainer.Config (model_spec with "
          "FlexAttention, "
       << "data, optimizer).\nfrom my_model_config import base_config  # replace with your "
          "module\n";
  }
  os << "\n\ndef paratune_plan() -> Trainer.Config:\n";
  os << "    config = base_config()\n";
  os << "    # Batch: " << p.Gbs() << " sequences of " << seq << " tokens per step";
  if (c.pp > 1)
    os << ", " << p.MicroBatches() << " pipeline micro-batches of " << c.mbs;
  else
    os << ", " << p.MicroBatches() << " accumulation steps of " << c.mbs;
  os << " per data-parallel rank\n";
  os << "    config.training.max_context_length = " << seq << "\n";
  os << "    config.training.num_tokens_per_microbatch_per_dp_rank = " << int64_t{c.mbs} * seq
     << "\n";
  os << "    config.training.num_tokens_per_train_step = " << p.Gbs() * seq << "\n";
  os << "    config.training.mixed_precision_param = \""
     << (p.job.training.precision == topology::Precision::kFp32 ? "float32" : "bfloat16") << "\"\n";
  os << "    config.training.enable_cpu_offload = False\n";
  os << CudaGraphsLine(p);
  os << "    config.parallelism.data_parallel_replicate_degree = " << c.gdata << "\n";
  os << "    config.parallelism.data_parallel_shard_degree = " << c.gz << "\n";
  os << "    config.parallelism.tensor_parallel_degree = " << c.gy << "\n";
  os << "    config.parallelism.enable_sequence_parallel = True\n";
  os << "    config.parallelism.context_parallel_degree = " << c.cp << "\n";
  if (c.cp > 1) {
    os << "    config.parallelism.spmd_backend = \"spmd_types\"\n";
    os << "    config.parallelism.context_parallel_load_balancer = \"headtail\"\n";
  }
  os << "    config.parallelism.pipeline_parallel_degree = " << c.pp << "\n";
  if (m.is_moe()) {
    auto moe = TorchtitanMoeLines(m, MoeLaunchOf(p), c.gz);
    if (moe.ok()) {
      for (const std::string& line : *moe) os << "    config.parallelism." << line << "\n";
    }
    if (!flavor) {
      os << "    # base_config()'s MoE layers take comm_backend=\"" << CommBackend(c.moe_dispatcher)
         << "\" (make_routed_experts_config, models/common/config_utils.py:360-425)\n";
    }
  }
  if (c.pp > 1) {
    const int lps = TorchtitanLayersPerStage(m.layers, c);
    os << "    config.parallelism.pipeline_parallel_schedule = \"" << Schedule(c) << "\"\n";
    os << "    config.parallelism.num_pp_microbatches = " << p.MicroBatches() << "\n";
    os << "    config.parallelism.module_fqns_per_model_part = None\n";
    os << "    config.parallelism.pipeline_parallel_first_stage_less_layers = "
       << c.pp_embedding_layers << "\n";
    os << "    config.parallelism.pipeline_parallel_last_stage_less_layers = " << c.pp_loss_layers
       << "\n";
    os << "    config.parallelism.pipeline_parallel_layers_per_stage = "
       << (lps > 0 ? Str(lps) : "None") << "\n";
  }
  switch (c.recompute) {
    case Recompute::kNone:
      os << "    config.activation_checkpoint = None\n";
      break;
    case Recompute::kSelective:
      os << "    config.activation_checkpoint = SelectiveAC.Config()\n";
      break;
    case Recompute::kFull:
      os << "    config.activation_checkpoint = FullAC.Config()\n";
      break;
  }
  os << "    config.compile.enable = " << PyBool(p.compile) << "\n";
  if (p.compile) os << "    config.compile.components = [\"model\", \"loss\"]\n";
  // Async TP only where the plan priced its overlap (tp_comm_overlap).
  os << "    config.compile.enable_async_tensor_parallel = "
     << PyBool(p.compile && c.tp_comm_overlap) << "\n";
  WriteCheckpoint(p, os);
  os << "    return config\n";
  return os.str();
}

}  // namespace

// The torchtitan snapshot whose rules Check restates.
constexpr Follows kFollows{"pytorch/torchtitan", "b5bcd76", "0.2.2",
                           "torchtitan/config/configs.py, torchtitan/trainer.py, "
                           "torchtitan/distributed/parallel_dims.py, "
                           "torchtitan/distributed/pipeline_parallel.py"};

const FrameworkEmitter& TorchtitanEmitter() {
  static const FrameworkEmitter e{kF, kFollows, Check, Write, KeepOf, Launcher};
  return e;
}

}  // namespace paratune::planner::emit_internal
