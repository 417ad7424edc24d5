#include "frameworks/network_emit.h"

#include <cmath>
#include <map>
#include <sstream>

#include "common/strings.h"
#include "planner/network_request.h"

namespace paratune::planner {

namespace {

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;

// Replaces every {{KEY}} of `text` with its value.
std::string Fill(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [k, v] : values) {
    const std::string key = "{{" + k + "}}";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + v.size())) {
      text.replace(at, key.size(), v);
    }
  }
  return text;
}

// The lines every output starts with: what was planned and what it promises.
std::string Header(const NetworkJob& job, const NetworkPrediction& p, int rank, const std::string& what) {
  const NetworkLayout& l = job.layout;
  std::ostringstream os;
  os << "# paratune: " << what << " for plan " << rank << " of " << job.network.name << " ("
     << FormatFixed(job.network.Params() / 1e6, 1) << "M parameters) on " << job.gpus << " GPUs of "
     << job.cluster.name << "\n";
  os << "#   layout: " << WeightShardingName(l.sharding) << ", data " << l.Data() << ", micro-batch " << l.micro_batch
     << ", accumulation " << l.Accumulation() << ", global batch " << l.global_batch << ", "
     << topology::PrecisionName(job.training.precision) << "\n";
  os << "#   predicted: step " << FormatFixed(p.step_s, 4) << " s, " << FormatFixed(p.samples_per_s, 1)
     << " samples/s, MFU " << FormatFixed(100 * p.mfu, 1) << " %, " << FormatFixed(p.memory_GiB, 1)
     << " GiB per GPU (activations " << FormatFixed(p.activations_GiB, 1) << " GiB, "
     << (l.recompute ? "repeated blocks recomputed" : "no recomputation") << ")\n";
  return os.str();
}

Status RefuseNetwork(const std::string& format, const std::string& why) {
  return Status::InvalidArgument("--format " + format + ": " + why);
}

// What PyTorch has no built-in parallelism for.
Status CheckPyTorchExpresses(const NetworkLayout& l, const std::string& format) {
  if (l.spatial > 1) {
    return RefuseNetwork(
        format,
        "spatial parallelism (" + std::to_string(l.spatial) +
            " GPUs per sample) has no PyTorch module: LBANN's DistConv or NVIDIA PhysicsNeMo's "
            "ShardTensor split a convolution's planes with halo exchange; set that layout by hand "
            "(docs/networks.md), or plan without --spatial");
  }
  if (l.sequence > 1) {
    return RefuseNetwork(
        format,
        "sequence parallelism (" + std::to_string(l.sequence) +
            " GPUs per sample, DeepSpeed-Ulysses' all-to-alls around attention) has no module "
            "in PyTorch itself (DeepSpeed's DistributedAttention, xDiT or the model's own "
            "attention carry it); set it by hand, or plan without --sequence");
  }
  if (l.tensor > 1) {
    return RefuseNetwork(
        format,
        "tensor parallelism (" + std::to_string(l.tensor) +
            " GPUs) needs the network's linear pairs named in "
            "torch.distributed.tensor.parallel.parallelize_module, which a layer list does not "
            "name; set it by hand, or plan a layout without it");
  }
  return Status::Ok();
}

constexpr const char* kPyTorchScript = R"PY(#   follows: PyTorch 2.5+ (torch.nn.parallel.DistributedDataParallel with bucket_cap_mb=25,
#   torch.distributed.optim.ZeroRedundancyOptimizer, torch.distributed.fsdp.fully_shard with
#   MixedPrecisionPolicy), as the plan priced them.
{{NOTE}}#
# The network is yours: PARATUNE_MODEL names a module that defines
#   build_model() -> torch.nn.Module                 the planned network ({{SAMPLE}})
#   micro_batch_loss(model, batch_size) -> Tensor    one micro-batch's loss, its data read there
{{BLOCKS}}# and the script checks the model has the planned {{PARAMS}} parameters before it trains.
# launch (one process per GPU):
#   PARATUNE_MODEL=my_network torchrun --nnodes {{NODES}} --nproc-per-node {{PER_NODE}} paratune_train.py
import importlib
import os

import torch
import torch.distributed as dist

GPUS = {{GPUS}}
SHARDING = "{{SHARDING}}"  # ddp | zero1 | fsdp
MICRO_BATCH = {{MICRO}}  # samples per GPU per micro-step
ACCUMULATION = {{ACCUMULATION}}  # micro-steps per optimizer step
GLOBAL_BATCH = {{GLOBAL}}  # = MICRO_BATCH x ACCUMULATION x GPUS
PLANNED_PARAMETERS = {{PARAMS}}
COMPUTE_DTYPE = {{DTYPE}}
REDUCE_DTYPE = {{REDUCE_DTYPE}}  # the gradients as the data-parallel collective moves them
FSDP_UNIT_PARAMETERS = 1_000_000  # modules below this are gathered with their neighbours
RECOMPUTE = {{RECOMPUTE}}  # activation checkpointing of the repeated blocks, as the plan priced it
STEPS = int(os.environ.get("PARATUNE_STEPS", "100"))


def user_module():
    name = os.environ.get("PARATUNE_MODEL")
    if not name:
        raise SystemExit("set PARATUNE_MODEL to the module defining build_model() and micro_batch_loss()")
    return importlib.import_module(name)


def parameters(module):
    return sum(p.numel() for p in module.parameters())


def fsdp_units(model):
    """The modules FSDP2 wraps: the smallest holding FSDP_UNIT_PARAMETERS or more."""
    units = []

    def visit(module):
        big = [c for c in module.children() if parameters(c) >= FSDP_UNIT_PARAMETERS]
        for child in big:
            if not visit(child):
                units.append(child)
        return bool(big)

    visit(model)
    return units


def checkpoint_blocks(model, user):
    """Wraps every module user.is_block(module) names in torch's checkpoint wrapper."""
    if not hasattr(user, "is_block"):
        raise SystemExit("the plan recomputes the repeated blocks: define is_block(module) -> bool in PARATUNE_MODEL")
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

    apply_activation_checkpointing(model, check_fn=user.is_block)


def wrap(model, device):
    if SHARDING == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=COMPUTE_DTYPE, reduce_dtype=REDUCE_DTYPE)
        for unit in fsdp_units(model):
            fully_shard(unit, mp_policy=policy)
        return fully_shard(model, mp_policy=policy)
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(model, device_ids=[device], bucket_cap_mb=25)
    if REDUCE_DTYPE != torch.float32:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    return model


def optimizer(model):
    if SHARDING == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    return torch.optim.AdamW(model.parameters(), lr=1e-4)


def main():
    dist.init_process_group("nccl")
    if dist.get_world_size() != GPUS:
        raise SystemExit(f"the plan is for {GPUS} GPUs; this job has {dist.get_world_size()} processes")
    device = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(device)
    user = user_module()
    model = user.build_model().cuda()
    found = parameters(model)
    if abs(found - PLANNED_PARAMETERS) > 0.005 * PLANNED_PARAMETERS:
        raise SystemExit(f"build_model() has {found:,} parameters; the plan was made for {PLANNED_PARAMETERS:,}")
    if RECOMPUTE:
        checkpoint_blocks(model, user)
    model = wrap(model, device)
    opt = optimizer(model)
    for step in range(STEPS):
        for micro in range(ACCUMULATION):
            last = micro == ACCUMULATION - 1
            if SHARDING == "fsdp":
                model.set_requires_gradient_sync(last)
                sync = torch.enable_grad()
            else:
                sync = torch.enable_grad() if last else model.no_sync()
            with sync, torch.autocast("cuda", dtype=COMPUTE_DTYPE, enabled=COMPUTE_DTYPE != torch.float32):
                loss = user.micro_batch_loss(model, MICRO_BATCH) / ACCUMULATION
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if dist.get_rank() == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item() * ACCUMULATION:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
)PY";

const char* TorchDtype(topology::Precision p) {
  switch (p) {
    case topology::Precision::kFp32:
    case topology::Precision::kTf32: return "torch.float32";
    case topology::Precision::kFp16: return "torch.float16";
    default: return "torch.bfloat16";
  }
}

Result<std::string> PyTorchScript(const NetworkJob& job, const NetworkPrediction& p, int rank) {
  const NetworkLayout& l = job.layout;
  PT_RETURN_IF_ERROR(CheckPyTorchExpresses(l, "pytorch"));
  std::string note;
  if (l.sharding == WeightSharding::kOptimizer) {
    // ZeroRedundancyOptimizer shards the states but, under autocast, keeps
    // the fp32 weights whole: 2 bytes a parameter above a distributed
    // optimizer's ZeRO-1 ledger, unless the plan was priced for PyTorch.
    const double extra = job.training.zero1_whole_weights ? 0.0 : 2.0 * job.network.Params() / kGiBytes;
    const double cap = job.cluster.gpu.memory_GiB * (1 - job.headroom);
    if (p.memory_GiB + extra > cap) {
      return RefuseNetwork(
          "pytorch",
          "zero1 as PyTorch runs it (ZeroRedundancyOptimizer under autocast keeps fp32 "
          "weights whole) needs " +
              FormatFixed(p.memory_GiB + extra, 1) + " GiB, over the " + FormatFixed(cap, 1) +
              " GiB the plan keeps under; emit a ddp or fsdp plan");
    }
    if (extra > 0) {
      note = "#   zero1: ZeroRedundancyOptimizer keeps fp32 weights whole under autocast: " + FormatFixed(extra, 2) +
             " GiB per GPU above the plan's ZeRO-1 ledger (" + FormatFixed(p.memory_GiB + extra, 1) +
             " GiB in all, within the GPU's " + FormatFixed(job.cluster.gpu.memory_GiB, 0) +
             " GiB); plan with --framework pytorch to price it so.\n";
    }
  }
  const int per_node = std::max(1, std::min(job.gpus, job.cluster.gpus_per_node));
  const std::string text = Fill(kPyTorchScript, {
      {"NOTE", note},
      {"SAMPLE", job.network.sample.empty() ? job.network.name : job.network.sample},
      {"PARAMS", std::to_string(static_cast<int64_t>(std::llround(job.network.Params())))},
      {"NODES", std::to_string((job.gpus + per_node - 1) / per_node)},
      {"PER_NODE", std::to_string(per_node)},
      {"GPUS", std::to_string(job.gpus)},
      {"SHARDING", WeightShardingName(l.sharding)},
      {"MICRO", std::to_string(l.micro_batch)},
      {"ACCUMULATION", std::to_string(l.Accumulation())},
      {"GLOBAL", std::to_string(l.global_batch)},
      {"DTYPE", TorchDtype(job.training.precision)},
      {"REDUCE_DTYPE", job.training.grad_bytes == 4 ? "torch.float32" : TorchDtype(job.training.precision)},
      {"RECOMPUTE", l.recompute ? "True" : "False"},
      {"BLOCKS", l.recompute ? "#   is_block(module) -> bool                         the repeated blocks to recompute (each\n"
                               "#                                                    transformer block; torch's checkpoint wraps them)\n"
                             : ""},
  });
  return Header(job, p, rank, "PyTorch training script") + text;
}

// torchtitan's FLUX at the commit paratune's torchtitan rules follow.
constexpr const char* kTorchtitanFlux = R"PY(#   follows: pytorch/torchtitan b5bcd76 (models/flux/config_registry.py flux_schnell: 256x256 images,
#   256 T5 tokens, so max_context_length 512 = the plan's 256 latent + 256 text tokens per sample).
#   torchtitan's FLUX shards with FSDP2 over the data-parallel ranks (models/flux/parallelize.py:63-75)
#   and checkpoints every double and single block unless activation_checkpoint is None
#   (parallelize.py:52, apply_ac :170-185); {{AC_WHY}}
# Save as paratune_plan.py on PYTHONPATH; run:
#   torchrun --nnodes {{NODES}} --nproc-per-node {{PER_NODE}} -m torchtitan.train --module paratune_plan --config paratune_plan
from torchtitan.models.flux.config_registry import flux_schnell

DATA_PARALLEL_SHARD = {{DATA}}
MICRO_BATCH = {{MICRO}}  # samples per GPU per micro-step
GLOBAL_BATCH = {{GLOBAL}}  # samples per optimizer step ({{ACCUMULATION}} micro-steps)


def paratune_plan():
    config = flux_schnell()
    tokens = config.training.max_context_length  # per sample
    config.training.num_tokens_per_microbatch_per_dp_rank = MICRO_BATCH * tokens
    config.training.num_tokens_per_train_step = GLOBAL_BATCH * tokens
    config.training.mixed_precision_param = "bfloat16"
    config.training.mixed_precision_reduce = "float32"
    config.parallelism.data_parallel_shard_degree = DATA_PARALLEL_SHARD
    config.parallelism.data_parallel_replicate_degree = 1
    config.parallelism.tensor_parallel_degree = 1
    config.parallelism.context_parallel_degree = 1
    config.parallelism.pipeline_parallel_degree = 1
{{AC_LINE}}    return config
)PY";

Result<std::string> TorchtitanFlux(const NetworkJob& job, const NetworkPrediction& p, int rank) {
  const NetworkLayout& l = job.layout;
  const std::string name = job.request.contains("network") && job.request["network"].is_string()
                               ? job.request["network"].get<std::string>()
                               : std::string();
  if (name != "flux1-schnell") {
    return RefuseNetwork("torchtitan",
                         "torchtitan trains its own FLUX flavours (flux-schnell, flux-dev: "
                         "models/flux/config_registry.py @ b5bcd76); '" +
                             job.network.name +
                             "' is not the flux1-schnell preset: use --format pytorch");
  }
  if (l.spatial > 1 || l.tensor > 1 || l.sequence > 1) {
    return RefuseNetwork(
        "torchtitan",
        "torchtitan's FLUX has no tensor, spatial or Ulysses sequence parallelism (its "
        "parallelize_flux applies activation checkpointing, compile and FSDP only: "
        "models/flux/parallelize.py:42-80 @ b5bcd76; its context parallelism is ring "
        "attention, which the plan did not price)");
  }
  if (l.sharding != WeightSharding::kFull) {
    return RefuseNetwork(
        "torchtitan", std::string("torchtitan's FLUX always shards with FSDP2 "
                                  "(models/flux/parallelize.py:63-75 @ b5bcd76): a ") +
                          WeightShardingName(l.sharding) +
                          " plan is not what it runs; emit an fsdp plan, or use --format pytorch");
  }
  const int per_node = std::max(1, std::min(job.gpus, job.cluster.gpus_per_node));
  return Header(job, p, rank, "torchtitan configuration") +
         Fill(kTorchtitanFlux, {{"NODES", std::to_string((job.gpus + per_node - 1) / per_node)},
                                {"PER_NODE", std::to_string(per_node)},
                                {"DATA", std::to_string(l.Data())},
                                {"MICRO", std::to_string(l.micro_batch)},
                                {"GLOBAL", std::to_string(l.global_batch)},
                                {"ACCUMULATION", std::to_string(l.Accumulation())},
                                {"AC_WHY", l.recompute ? "the plan recomputes them, so flux_schnell's FullAC stays "
                                                         "(config_registry.py:90)."
                                                       : "the plan saves every activation, so it is None here."},
                                {"AC_LINE", l.recompute ? "" : "    config.activation_checkpoint = None\n"}});
}

}  // namespace

std::string DefaultNetworkEmitFormat(const Json& plans) {
  if (IsNetworkPlans(plans) && plans.contains("request") && plans["request"].is_object()) {
    const Json& r = plans["request"];
    if (r.contains("framework") && r["framework"].is_string()) return r["framework"].get<std::string>();
  }
  return "pytorch";
}

Result<std::string> EmitNetworkPlan(const Json& plans, int rank, const std::string& format) {
  PT_ASSIGN_OR_RETURN(NetworkJob job, NetworkJobOfPlan(plans, rank));
  PT_ASSIGN_OR_RETURN(NetworkPrediction p, PredictNetwork(job.network, job.cluster, job.layout, job.training));
  if (format == "pytorch") return PyTorchScript(job, p, rank);
  if (format == "torchtitan") return TorchtitanFlux(job, p, rank);
  if (format == "axonn") {
    return RefuseNetwork(
        format,
        "AxoNN's tensor-parallel layers are Linear and Conv2d only (axonn/intra_layer at "
        "axonn-ai/axonn 660a224: no Conv3d, no transposed or grouped convolution), and "
        "paratune does not rank AxoNN grids for networks yet: use --format pytorch");
  }
  return RefuseNetwork(format,
                       "a network's plans are emitted as pytorch (DDP, ZeRO-1 or FSDP2) or, for "
                       "FLUX.1-schnell, torchtitan; " +
                           format + " trains transformer stacks");
}

}  // namespace paratune::planner
