// planner/memory.h: the memory formulas the cost model uses, as pure functions
// so each can be checked against its published numbers (cost-model.md §4).
#pragma once

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
struct ModelStates {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double total() const { return params_bytes + grads_bytes + optimizer_bytes; }
};
ModelStates ModelStateBytes(double psi, int data_degree, int zero, bool distributed_optimizer,
                            double param_bytes, double grad_bytes);

// Bytes one transformer layer keeps for its backward, per GPU, per micro-batch
// (Korthikanti et al. 2022 §4, generalised to GQA, gated FFNs, dropout on/off,
// fused attention, AxoNN's X/Y split and context parallelism). act_bytes is the
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

}  // namespace paratune::planner
