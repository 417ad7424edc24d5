// planner/moe.h: the mixture-of-experts terms of the cost model as pure functions,
// so each can be checked against its source (docs/model.md "Mixture of experts").
// The cost model composes them per MoE layer; the executor's all-to-all and the
// framework emitters read the same shapes.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "planner/config.h"
#include "planner/model.h"

namespace paratune::planner {

// The dispatchers (ParallelConfig::moe_dispatcher, planner/config.h):
//   alltoall: all-to-all over the EP group of every routed token copy;
//   allgather: every EP rank gathers all tokens of the group and keeps its own;
//   deepep, hybridep: Megatron-Core's "flex" dispatcher with the DeepEP / HybridEP
//     kernels, which send a token once per destination node over RDMA and fan it
//     out over NVLink inside the node (DeepSeek-V3 §3.2.2; github.com/deepseek-ai/DeepEP).

// One MoE layer's work on one GPU for one micro-batch.
struct MoeLayerShape {
  double tokens = 0;      // tokens entering the layer on this GPU
  double copies = 0;      // token copies it dispatches: tokens × top_k
  int local_experts = 0;  // experts held here: experts / ep
  double ffn_local = 0;   // expert width held here: moe_ffn_hidden / etp
  // Rows of each local expert's GEMMs: balanced, and on the most loaded rank
  // (× skew, clamped at the capacity factor when tokens are dropped).
  double rows_mean = 0, rows_max = 0;
  double dropped_fraction = 0;  // share of routed copies a capacity factor drops
};
// `tokens`: tokens this GPU routes (micro-batch tokens / (cp · tp) under Megatron's
// sequence-parallel MoE). `skew`: the most loaded EP rank's tokens / the mean (>= 1;
// 1 = balanced, as forced-balance benchmarks run). With ETP the expert's rows are
// gathered over the ETP group, each rank computing 1/etp of the width.
// REQUIRES: m.is_moe(), ep >= 1, etp >= 1, skew >= 1.
MoeLayerShape MoeShape(const ModelSpec& m, double tokens, int ep, int etp, double skew);

// Expected number of distinct nodes a token's top_k experts lie on, when the EP
// group spans `nodes` nodes each holding experts / nodes of them and routing is
// uniform (forced balance): nodes · (1 − C(E − E/nodes, k) / C(E, k)).
// Group-limited routing (`groups` > 1: the experts in `groups` equal groups, each
// token routed within `group_topk` of them; Megatron-Core's
// moe_router_num_groups / moe_router_group_topk, moe_utils.py:676-727
// @d98e8a64; DeepSeek-V3's 8 groups, top-4, "each token will be sent to at
// most M = 4 nodes", §2.1.2) reaches at most the nodes its groups lie on: with
// whole groups per node, nodes · (1 − C(G − G/nodes, g) / C(G, g)). REQUIRES:
// nodes >= 1.
double ExpectedNodesPerToken(int experts, int top_k, int nodes, int groups, int group_topk);

// Bytes one GPU sends in the dispatch of one MoE layer forward (the combine sends
// the same back; the backward repeats both), and the part of it that leaves the
// node. elem_bytes: the dispatched element width (2 for bf16, 1 for FP8 dispatch).
// alltoall: copies·h·elem_bytes, of which the share bound for other GPUs is
// (ep − 1)/ep and for other nodes 1 − ep_per_node/ep.
// deepep/hybridep: inside the node as alltoall; across nodes each token goes once
// per remote destination node: tokens·h·elem_bytes·E[remote nodes].
// allgather: every rank gathers the group's tokens: tokens·h·elem_bytes·(ep − 1).
struct DispatchVolume {
  double bytes = 0;             // total bytes this GPU sends per dispatch
  double inter_node_bytes = 0;  // of which to GPUs on other nodes
};
// `ep_per_node`: EP ranks of one group on one node (min(ep, gpus_per_node / stride)).
// Group-limited routing comes from the model (ModelSpec::router_groups).
DispatchVolume DispatchBytes(const ModelSpec& m, MoeDispatcher d, double tokens, int ep,
                             int ep_per_node, double elem_bytes);

// EP ranks of one group inside one NVLink domain: the largest divisor of `ep`
// that fits `domain_gpus / stride` (an EP group of 128 on NVL72 racks: two
// parts of 64; of 16 on 8-GPU nodes at stride 1: 8). The group spans
// ep / EpRanksPerDomain(...) domains. REQUIRES: ep >= 1.
int EpRanksPerDomain(int ep, int stride, int domain_gpus);

// "" when Megatron-DeepSpeed's MoE layer builds `m` (a dense model always),
// else why not: its experts are the dense MLP of --ffn-hidden-size (ParallelMLP,
// megatron/model/transformer.py:1066-1083 @4efb479) under softmax top-k gating,
// with no shared experts, MLA, multi-token prediction or sigmoid router, on the
// layer numbers (1-based) --expert-interval divides (transformer.py:1650-1660).
std::string MegatronDeepSpeedMoeGap(const ModelSpec& m);

// The AutoEP preset (deepspeedai/DeepSpeed edaa722,
// deepspeed/module_inject/auto_ep_presets/registry.py:19-27) whose Hugging Face
// modules `m` is built from, by the shape of the models of that family:
// "mixtral" (mixtral.py:9, 26: Mixtral 8x7B and 8x22B), "qwen3_moe"
// (qwen3_moe.py:9, 29: Qwen3-30B-A3B, Qwen3-235B-A22B), "deepseek_v2"
// (deepseek_v2.py:14, 35: DeepSeek-V2-Lite), "deepseek_v3" (deepseek_v3.py:13,
// 35: DeepSeek-V3); nullptr for any other model.
const char* DeepSpeedAutoEpPreset(const ModelSpec& m);
// "" when DeepSpeed's AutoEP splits `m`'s experts (a dense model: nothing to
// split), else why not.
std::string DeepSpeedAutoEpGap(const ModelSpec& m);

// nullptr when Megatron-Core can capture `c` of `m` in a full-iteration CUDA
// graph as far as its MoE layers go, else why not: a dropless dispatch has
// dynamic shapes, and only HybridEP with a per-rank token budget makes them
// static (docs/user-guide/features/cuda_graph.md:159-181,
// transformer_config.py:1868-1882 @d98e8a64). The search rule and the emitter
// both ask this.
const char* MegatronMoeCudaGraphGap(const ModelSpec& m, const ParallelConfig& c);

}  // namespace paratune::planner
