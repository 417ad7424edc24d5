// `paratune emit`: one plan of a plans document as a framework config. Thin:
// parse flags, load the document, call planner::EmitConfig, print.
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "common/strings.h"
#include "frameworks/emit.h"
#include "frameworks/network_emit.h"
#include "planner/network_request.h"

namespace paratune::cli {
namespace {

constexpr const char* kEmitHelp =
    R"HELP(usage: paratune emit --plans FILE [--rank N] [--sidecar FILE]
                     [--format megatron|megatron-bridge|megatron-deepspeed|deepspeed|
                               axonn|torchtitan|env|json]

Writes one plan of a plans document (`paratune plan --format json`) the way
your training framework takes it, ready to paste or source. Every text format
starts with comments saying what the plan assumes: its prediction (time, MFU,
memory), the framework commit whose rules it follows, the layers per pipeline
rank, the settings to keep (environment variables) and a launcher line.

  megatron            bash arrays as Megatron-LM's examples use them:
                      GPT_MODEL_ARGS, TRAINING_ARGS, MODEL_PARALLEL_ARGS (TP, PP,
                      uneven stages: --decoder-first/last-pipeline-num-layers or
                      --account-for-embedding/loss-in-pipeline-split, virtual
                      stages, CP and its comm type, sequence parallel,
                      distributed optimizer, overlaps, recompute), after
                      `export CUDA_DEVICE_MAX_CONNECTIONS=1`; a MoE plan adds
                      MOE_ARGS (--num-experts, --moe-router-topk, expert width,
                      layer pattern, group-limited routing, MLA, dispatcher,
                      --expert-model-parallel-size = ep,
                      --expert-tensor-parallel-size = etp, a2a overlap)
  megatron-bridge     Python (save as paratune_bridge.py; run with torchrun):
                      Megatron-Bridge's recipe for the model (Llama 2/3/3.1/3.2,
                      Qwen3 MoE, DeepSeek-V2-Lite/V3, gpt-oss, Kimi K2, OLMoE),
                      checked to build the planned shapes, or a GPTModelProvider
                      of the model's architecture; then the plan's Megatron-LM
                      arguments as ConfigContainer fields (parallelism,
                      pipeline_model_parallel_layout or uneven stages,
                      recompute_granularity/recompute_modules, cuda_graph_impl,
                      the mixed-precision recipe for fp8/mxfp8/nvfp4, the MoE
                      dispatcher, expert parallel sizes, batch, DDP and
                      optimizer sharding, CommOverlapConfig) and
                      pretrain(cfg, forward_step)
  megatron-deepspeed  bash: ds_config.json written by a heredoc, then
                      MEGATRON_DEEPSPEED_ARGS (TP, PP or --no-pipeline-parallel,
                      --zero-stage, Ulysses --ds-sequence-parallel-size, FPDT
                      --ds-sequence-parallel-fpdt with its chunk size and
                      offloading, --cpu-optimizer with ZeRO-Offload, the RoPE
                      base); MoE: --num-experts, --topk,
                      --expert-interval, --moe-expert-parallel-size = ep
  deepspeed           a complete ds_config.json for a Hugging Face model (no
                      Megatron TP or pipeline stages): train_batch_size =
                      train_micro_batch_size_per_gpu x gradient_accumulation_steps
                      x DP, the ZeRO stage with its buckets, ZeRO++, host offload
                      with an AdamW optimizer block (DeepSpeedCPUAdam),
                      sequence_parallel_size, activation checkpointing, AutoEP's
                      expert_parallel for ep > 1 (JSON has no comments:
                      --sidecar says what it assumes)
  axonn               Python: ax.init(G_inter, G_data, G_intra_r, G_intra_c,
                      G_intra_d), batch constants and optimize_communication(...)
  torchtitan          Python: paratune_plan() returning torchtitan's
                      Trainer.Config (save as paratune_plan.py; run with
                      --module paratune_plan --config paratune_plan): batch in
                      tokens, FSDP shard = gz, HSDP replicate = dp, TP, CP, PP
                      with its schedule and stage split, activation
                      checkpointing, compile, async TP, float8, MoE
                      expert_parallel_degree = ep; its base_config() is
                      torchtitan's own flavour of the model where it has one
                      (Llama 3 / 3.2, Qwen3 MoE, DeepSeek-V3, gpt-oss)
  env                 export lines only: TP PP CP DP SP VP MBS GBS ZERO_STAGE
                      RECOMPUTE GX GY GZ; for an fsdp or torchtitan plan also
                      DP_SHARD (= GZ) DP_REPLICATE (= DP), and ZERO_STAGE 3
                      when it shards
  json                the plan's canonical config object (paratune predict
                      --request's `config`)

Each framework's start-up rules are applied first, as its source at the
commit named in the output states them (docs/frameworks.md). A plan the
framework would reject, or cannot express (AxoNN's 3D grid in Megatron, ZeRO-3
in torchtitan, ring attention in DeepSpeed, FPDT or Megatron TP in a bare
ds_config.json, a sliding window in Megatron-DeepSpeed), is
refused with the rule and the values: exit 2, nothing on stdout. The default
format is the one of the framework the plan was made for, which accepts every
plan paratune ranks for it.

  --plans FILE    a paratune.plans/v1 document ("-" reads stdin)
  --rank N        which candidate, 1 = the best (default 1)
  --format F      default: the framework the plan was made for (the plan's
                  training.framework, else its --space: deepspeed ->
                  megatron-deepspeed, axonn -> axonn, fsdp -> torchtitan;
                  otherwise megatron)
  --sidecar FILE  also write what the output assumes as JSON (schema
                  paratune.emit/v1: framework commit, prediction, pipeline
                  split, environment, launcher)

exit codes: 0 ok; 2 bad flags, not a plans document, no such rank, or a plan
            the format's framework cannot express (the message says why)

examples:
  paratune plan --model llama3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 \
      --space megatron --format json > plans.json
  paratune emit --plans plans.json --format megatron > parallel_args.sh && source parallel_args.sh
  paratune emit --plans plans.json --rank 2 --format deepspeed --sidecar ds.assumes.json > ds_config.json
  paratune emit --plans plans.json --format torchtitan > paratune_plan.py
  paratune emit --plans plans.json --format megatron-bridge > paratune_bridge.py
  eval "$(paratune emit --plans plans.json --format env)"; echo "TP=$TP PP=$PP"

A network's plans (`paratune plan --network ... --format json`, schema
paratune.network_plans/v1) are written as:
  pytorch             (default) a torchrun script on PyTorch's own data
                      parallelism: DistributedDataParallel with 25 MiB buckets
                      (ddp), with ZeroRedundancyOptimizer (zero1), or
                      fully_shard per unit of 1M+ parameters with a bf16
                      MixedPrecisionPolicy (fsdp); micro-batches and gradient
                      accumulation as planned. Your module (PARATUNE_MODEL)
                      builds the network and its loss; the script checks the
                      planned parameter count first
  torchtitan          FLUX.1-schnell only: torchtitan's flux_schnell with the
                      plan's FSDP degree and batch (fsdp plans: torchtitan's
                      FLUX always shards)
Spatial and tensor splits, other networks in torchtitan, AxoNN and the
transformer formats are refused with the reason (exit 2).
  paratune plan --network sd2-unet --cluster dgx-h100 --gpus 64 --global-batch 512 \
      --format json > unet.json
  paratune emit --plans unet.json > paratune_train.py
  PARATUNE_MODEL=my_unet torchrun --nnodes 8 --nproc-per-node 8 paratune_train.py
)HELP";

}  // namespace

int RunEmit(const Args& args, Io io) {
  Flags f({"--plans", "--rank", "--format", "--sidecar"}, {"--help"}, {{"-h", "--help"}});
  if (Status s = f.Parse(args); !s.ok()) return UsageError(io, "emit", s);
  if (f.Has("--help")) {
    io.out << kEmitHelp;
    return kExitOk;
  }
  if (!f.positionals().empty()) {
    return UsageError(io, "emit", Status::InvalidArgument("unexpected argument '" + f.positionals()[0] + "'"));
  }
  const std::string path = f.GetOr("--plans", "");
  if (path.empty()) return UsageError(io, "emit", Status::InvalidArgument("--plans FILE is required"));
  int rank = 1;
  if (auto r = f.Get("--rank")) {
    auto n = ParseInt(*r, "--rank");
    if (!n.ok()) return UsageError(io, "emit", n.status());
    if (*n < 1 || *n > 1000000) {
      return UsageError(io, "emit", Status::InvalidArgument("--rank must be a positive integer"));
    }
    rank = static_cast<int>(*n);
  }
  auto plans = LoadJsonArg(path, "--plans", io.in);
  if (!plans.ok()) return UsageError(io, "emit", plans.status());
  if (planner::IsNetworkPlans(*plans)) {
    if (f.Has("--sidecar")) {
      return UsageError(io, "emit", Status::InvalidArgument("--sidecar: a network's plan states what it assumes "
                                                            "in its own header"));
    }
    auto text = planner::EmitNetworkPlan(*plans, rank, f.GetOr("--format", planner::DefaultNetworkEmitFormat(*plans)));
    if (!text.ok()) return UsageError(io, "emit", text.status().WithContext("--plans " + path));
    io.out << *text;
    return kExitOk;
  }
  planner::EmitFormat format = planner::DefaultEmitFormat(*plans);
  if (auto name = f.Get("--format")) {
    auto parsed = planner::ParseEmitFormat(*name);
    if (!parsed.ok()) return UsageError(io, "emit", parsed.status());
    format = *parsed;
  }
  auto text = planner::EmitConfig(*plans, rank, format);
  if (!text.ok()) return UsageError(io, "emit", text.status().WithContext("--plans " + path));
  if (auto sidecar = f.Get("--sidecar")) {
    auto doc = planner::EmitSidecar(*plans, rank, format);
    if (!doc.ok()) return UsageError(io, "emit", doc.status().WithContext("--plans " + path));
    if (Status s = WriteFileAtomic(*sidecar, doc->dump(2) + "\n"); !s.ok()) {
      return UsageError(io, "emit", s.WithContext("--sidecar"));
    }
  }
  io.out << *text;
  return kExitOk;
}

}  // namespace paratune::cli
