// frameworks/network_emit.h: one plan of a network's plans document
// (paratune.network_plans/v1: U-Nets, DiTs, CNNs) written for the framework
// that trains it, or refused with the reason (docs/networks.md):
//
//   pytorch     a torchrun script on PyTorch's own data parallelism
//               (PyTorch 2.5+): DistributedDataParallel with its 25 MiB
//               buckets (ddp), the same with ZeroRedundancyOptimizer's
//               sharded AdamW (zero1), or fully_shard (FSDP2) per unit of
//               at least a million parameters with a bf16 MixedPrecisionPolicy
//               (fsdp); micro-batches and gradient accumulation as planned,
//               bf16 autocast. The network is the user's module
//               (PARATUNE_MODEL), checked against the planned parameter count
//               before the first step. Spatial and tensor parallelism are
//               refused: PyTorch has neither for these layers built in.
//   torchtitan  for FLUX.1-schnell: a configuration function over
//               torchtitan's flux_schnell (models/flux/config_registry.py at
//               b5bcd76) with the plan's FSDP degree, batch in tokens and no
//               activation checkpointing (the plan saves every activation).
//               torchtitan's FLUX always shards (models/flux/parallelize.py:
//               63-75): ddp and zero1 plans are refused, as are other
//               networks and tensor or spatial splits.
//   any other   refused: those frameworks train transformer stacks
//               (megatron, megatron-deepspeed, deepspeed's Megatron layers)
//               or, for AxoNN, have no layer for these networks' convolutions
//               (axonn.intra_layer has Conv2d only: no Conv3d, no transposed
//               or grouped convolution; axonn-ai/axonn 660a224).
//
// Pure functions of the document: no I/O.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

// The format a network's plan is emitted in by default: the request's
// framework, else pytorch.
std::string DefaultNetworkEmitFormat(const Json& plans);

// Plan `rank` (1-based) of `plans` in `format` (module comment).
// InvalidArgument with the reason for what cannot be emitted.
Result<std::string> EmitNetworkPlan(const Json& plans, int rank, const std::string& format);

}  // namespace paratune::planner
