// frameworks/moe_args.h: the mixture-of-experts part of each framework's
// launch configuration, checked against that framework's own start-up rules:
// Megatron-Core's MoE arguments, torchtitan's expert-parallel degree and
// DeepSpeed-MoE's MoE layer arguments. The emitters append these to what they
// write for the dense part of the model.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "planner/model.h"
#include "topology/gpu.h"

namespace paratune::planner {

// The expert layout of a plan and what the MoE rules depend on.
struct MoeLaunch {
  int ep = 1;   // expert parallel
  int etp = 1;  // expert tensor parallel
  // "alltoall" | "allgather" | "deepep" | "hybridep" (the last two: Megatron's
  // flex dispatcher with that backend).
  std::string dispatcher = "alltoall";
  bool a2a_overlap = false;  // overlap the dispatch/combine all-to-all with compute
  int world = 1, tp = 1, pp = 1, vpp = 1, cp = 1;
  bool full_recompute = false;
  topology::Precision precision = topology::Precision::kBf16;
};

// Megatron-Core arguments (NVIDIA/Megatron-LM d98e8a64) of a MoE model: the
// architecture (--num-experts, --moe-ffn-hidden-size, --moe-router-topk,
// --moe-shared-expert-intermediate-size, --moe-layer-freq, router score
// function, capacity factor, --mtp-num-layers, MLA's ranks and head dims), the
// expert layout (--expert-model-parallel-size, --expert-tensor-parallel-size),
// the dispatcher, --moe-grouped-gemm and --moe-permute-fusion, and the a2a
// overlap. kInvalidArgument naming the rule (file:line) when Megatron would
// refuse the launch; for a dense model, an empty list.
Result<std::vector<std::string>> MegatronMoeArgs(const ModelSpec& m, const MoeLaunch& l);

// torchtitan (pytorch/torchtitan b5bcd76c) [parallelism] lines:
// expert_parallel_degree. torchtitan lays the experts on the mesh
// (pp, dp_replicate, efsdp, ep) with efsdp = dp_shard·cp·tp / ep, so EP borrows
// from the data, context and tensor ranks and the experts are never TP-split:
// etp > 1 cannot be expressed, nor the allgather dispatcher (its dispatchers
// are all-to-all, DeepEP and HybridEP) nor the a2a overlap. `dp_shard` is the
// FSDP degree.
Result<std::vector<std::string>> TorchtitanMoeLines(const ModelSpec& m, const MoeLaunch& l,
                                                    int dp_shard);

// The DeepSpeed-MoE layer call (deepspeedai/DeepSpeed edaa7221,
// deepspeed/moe/layer.py MoE.__init__) a model builds its MoE MLPs with:
// `deepspeed.moe.layer.MoE(hidden_size=..., expert=..., num_experts=...,
// ep_size=..., k=..., capacity_factor=..., drop_tokens=...,
// enable_expert_tensor_parallelism=...)`, as Python source text.
Result<std::string> DeepSpeedMoeLayerCall(const ModelSpec& m, const MoeLaunch& l);

}  // namespace paratune::planner
