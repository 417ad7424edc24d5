// planner/memory.h: the memory formulas the cost model uses, as pure functions
// so each can be checked against its published numbers (cost-model.md §4).
#pragma once

#include <array>

#include "planner/config.h"
#include "planner/model.h"

namespace paratune::planner {


// Bytes of model state per GPU for `psi` parameters held before data-parallel
// sharding, with mixed-precision Adam. param_bytes / grad_bytes: 2 or 4.
//   replicated: params·pb + grads·gb + optimizer (fp32 master when pb < 4, plus
//   two fp32 moments; Megatron's distributed optimizer with 16-bit grads also
//   keeps an fp32 gradient copy) — the ZeRO paper's K = 12.
//   ZeRO-1 (or Megatron's distributed optimizer) shards the optimizer over
//   `data_degree`, ZeRO-2 also the gradients, ZeRO-3 also the parameters.
// ZeRO check (Rajbhandari 2020, Fig. 1): Ψ = 7.5e9, Nd = 64, pb = gb = 2 →
// 120, 31.4, 16.6, 1.9 GB. Megatron (docs, distributed optimizer): bf16 params
// + fp32 grads 18 B/param, or 6 + 12/d when distributed.
// step_bytes: the part of optimizer_bytes that exists only while the optimizer
// steps, so never beside the activations: the distributed optimizer's fp32
// copy of its 16-bit gradient shard (NVIDIA/Megatron-LM@d98e8a6
// megatron/core/optimizer/distrib_optimizer.py:2792, shard_main_param.grad =
// shard_model_grad.float()); 4/d bytes per parameter.
struct ModelStates {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double step_bytes = 0;
  double total() const { return params_bytes + grads_bytes + optimizer_bytes; }
};
ModelStates ModelStateBytes(double psi, int data_degree, int zero, bool distributed_optimizer,
                            double param_bytes, double grad_bytes);

// ZeRO-Offload (Ren et al., USENIX ATC 2021, §4) and ZeRO-Infinity's CPU
// offload (Rajbhandari et al., SC 2021): where the model states of one GPU
// live when DeepSpeed's offload_optimizer / offload_param (device "cpu") are
// on. `states` is ModelStateBytes(psi, data_degree, zero, false, pb, gb).
//   offload_optimizer (zero >= 1): the optimizer states (fp32 master and two
//   moments) and the rank's gradient partition go to host memory. Under
//   ZeRO-2/3 the GPU keeps only the reduce buckets (costed as buffers), so its
//   optimizer and gradient bytes are 0; under ZeRO-1 the full gradients stay
//   on the GPU until the accumulation boundary (DeepSpeed stage_1_and_2.py
//   partitions them only then). DeepSpeed keeps that partition's gradients in fp32
//   on the host (stage_1_and_2.py / stage3.py: the fp32 partition's .grad):
//   4 bytes per parameter of the partition.
//   offload_param (zero = 3): the parameter partition too (pb per parameter).
// Check (Ren et al. 2021, abstract and §6): 13B parameters train on one 32 GB
// V100 with ZeRO-Offload: 2 bytes per parameter left on the GPU (26 GB), and
// the 16 bytes per parameter of optimizer + gradients on the DGX-2's host.
struct OffloadedStates {
  ModelStates gpu;        // what stays in GPU memory
  double host_bytes = 0;  // what this rank keeps in host memory
};
OffloadedStates OffloadStateBytes(const ModelStates& states, double psi, int data_degree, int zero,
                                  bool offload_optimizer, bool offload_param);

// DeepSpeed's CPU Adam (csrc/adam, AVX-512/AVX2 + OpenMP) is bound by the
// host's DRAM bandwidth: per parameter it reads the fp32 master, gradient and
// both moments and writes master, moments and the 16-bit copy (30 bytes).
// Seconds for one step over `params_per_node` parameters updated at once by
// the node's ranks, on a node of `host_memory_GBps` peak DRAM bandwidth.
// REQUIRES: host_memory_GBps > 0.
inline constexpr double kCpuAdamBytesPerParam = 4.0 * 4.0 + 3.0 * 4.0 + 2.0;
// The achieved fraction of peak DRAM bandwidth, from ZeRO-Offload's CPU-Adam
// measurement (Ren et al. 2021, Table 3: 10B parameters in 2.57 s on a DGX-2's
// two Xeon Platinum 8168, 6 × DDR4-2666 each = 256 GB/s peak; the table's
// figure as recalled, not re-read from the paper here, see docs/model.md):
// 10e9 × 30 B / 2.57 s / 256e9 B/s = 0.456.
inline constexpr double kCpuAdamDramEfficiency = 10e9 * kCpuAdamBytesPerParam / 2.57 / 256e9;
double CpuAdamSeconds(double params_per_node, double host_memory_GBps);

// Bytes one transformer layer keeps for its backward, per GPU, per micro-batch
// (Korthikanti et al. 2022 §4, generalised to GQA, gated FFNs, dropout on/off,
// fused attention, AxoNN's X/Y split and context parallelism). Q, K, V and the
// attention output at their own widths: a·d, kv·d, kv·d, a·d (MLA: the
// up-projected a·(nope + rope) twice and a·v, plus the normed latents the
// up-projections keep, which the down-projections, replicated over the tensor
// group, hold whole: 2·q_lora + 2·kv_lora + rope per token). act_bytes is the
// activation element width (2 for bf16/fp16). With GPT shapes (f = 4h, MHA,
// dropout, unfused attention) it reproduces the paper's terms exactly:
// sbh(34 + 5as/h); TP: sbh(10 + 24/t + 5as/(ht)); TP+SP: sbh/t·(34 + 5as/h);
// selective: 34sbh/t; full recompute: 2sbh (2sbh/t with SP).
// fp8_inputs: Transformer Engine FP8 saves the four linear layers' inputs for
// the backward as FP8 (1 byte) instead of act_bytes.
double LayerActivationBytes(const ModelSpec& m, bool flash_attention, double act_bytes,
                            int seq_len, const ParallelConfig& c, bool fp8_inputs = false);
// The same without any recompute (the working set of a recomputed layer).
double LayerActivationBytesNoRecompute(const ModelSpec& m, bool flash_attention, double act_bytes,
                                       int seq_len, const ParallelConfig& c, bool fp8_inputs = false);
// The MLP block's share of LayerActivationBytes (no or selective recompute):
// the FC1 input, the FC1 output(s) and the FC2 input, each at the width the
// layer keeps it (FP8 inputs at 1 byte). An MoE layer keeps its routed rows
// instead of these.
double DenseMlpActivationBytes(const ModelSpec& m, double act_bytes, int seq_len,
                               const ParallelConfig& c, bool fp8_inputs = false);

// What selective recompute of each module (RecomputeModule, indexed by its
// bit) takes off one dense layer's kept activations, per GPU per micro-batch,
// under Megatron-Core's Transformer Engine layer spec
// (NVIDIA/Megatron-LM@d98e8a6; TE 4329ff84, the commit it pins):
//   core_attn    the attention kernel's fp32 softmax statistics (flash) or
//                the score matrices (unfused); Q, K, V stay as the checkpoint's
//                inputs and O as linear_proj's (attention.py:495).
//   layernorm    the output of a norm that is its own module: MLA's input norm
//                (gpt_layer_specs.py:296); the dense spec fuses both norms into
//                TELayerNormColumnParallelLinear (:324, :336), so nothing there
//                (transformer_layer.py:475-477, 523-527 skip IdentityOp).
//   mlp          FC1's norm output, FC1's output(s), FC2's input; the MLP's
//                input stays as the checkpoint's (transformer_layer.py:1006-1010).
//   mla_up_proj  MLA's Q, K and V after the up-projections and RoPE
//                (multi_latent_attention.py:983-988, freed at :455-457).
// The MoE modules (moe_act, moe, shared_experts) act on MoE layers only
// (planner/cost/moe.cc).
std::array<double, kNumRecomputeModules> DenseRecomputeSavings(const ModelSpec& m, bool flash_attention,
                                                               double act_bytes, int seq_len,
                                                               const ParallelConfig& c,
                                                               bool fp8_inputs = false);

// Bytes one transformer layer keeps for its backward under per-op selective
// activation checkpointing (torchtitan's selective_ac_option "op",
// pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py:214-262;
// the same policy at b5bcd76 torchtitan/distributed/activation_checkpoint.py:185-289).
// Inside a checkpointed block the policy saves the outputs of the ops on its
// save list (aten.mm, the SDPA flash/efficient kernels, the reduce-scatter of
// sequence parallelism, abs/max scalars), except every second mm counted in
// forward order; everything else is recomputed from the block's input, which
// the checkpoint keeps. A Llama block's mms run wq, wk, wv, wo, w1, w3, w2
// (gated FFN; GeLU: wq, wk, wv, wo, w1, w2), so the 1st, 3rd, 5th and 7th are
// saved. Per GPU with T = mbs·s/cp tokens, tensor degree t and element width e:
//   input e·T·h/(t if SP)            the checkpoint's input
//   wq    e·T·q/t, wv e·T·kv/t       column-parallel outputs
//   SDPA  e·T·q/t + 4·b·(a/t)·s/cp   its output and fp32 log-sum-exp
//   w1    e·T·f/t
//   w2    e·T·h (row-parallel: the partial sum before its reduction, full h)
//   with SP, the two reduce-scatters' outputs e·T·h/t each.
// Check (Llama-3.1-8B, b = 2, s = 8192, t = 1, bf16): T = 16384,
// 2·T·(4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4·2·32·8192 = 1.042e9 bytes,
// 45.6 % of Korthikanti's selective set for the same layer.
double PerOpSacActivationBytes(const ModelSpec& m, double act_bytes, int seq_len,
                               const ParallelConfig& c);

}  // namespace paratune::planner
