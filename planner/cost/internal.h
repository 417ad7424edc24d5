// planner/cost/internal.h: what the cost model's terms share inside planner/
// (the files of planner/cost/ and planner/cost_model.cc); not part of the API.
// The overlap helpers say how much of a transfer stays exposed beside compute;
// LayerTimes and Schedule carry one term's results to the next.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "planner/config.h"
#include "planner/cost_model.h"

namespace paratune::planner {
namespace cost {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The parameters a pipeline stage holds outside its transformer layers, per
// GPU before data-parallel and Z sharding: the embedding (vocabulary-parallel
// over the tensor ranks) and learned positions on the first stage; the output
// layer (unless tied to the embedding on the same stage) and the final norm
// (one norm, ModelSpec::NormParams) on the last. With one stage both are on it.
struct NonLayerParams {
  double first = 0, last = 0;
};
NonLayerParams NonLayerParamsOf(const ModelSpec& m, const ParallelConfig& c);
// The divisors of n, ascending (trial division to sqrt(n)). REQUIRES:
// 1 <= n < 2^31.
inline std::vector<int> Divisors(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      d.push_back(static_cast<int>(i));
      if (i * i != n) d.push_back(static_cast<int>(n / i));
    }
  }
  std::sort(d.begin(), d.end());
  return d;
}
// The terms of one recompute module in ComputeTerms::rc_module (indexed by
// the module's bit).
inline CostModel::ComputeTerms::ModuleRecompute& ModuleTerms(CostModel::ComputeTerms* t,
                                                             RecomputeModule m) {
  return t->rc_module[static_cast<size_t>(std::countr_zero(unsigned{m}))];
}
// Causal attention: a fused kernel skips the masked upper triangle, so it
// executes about half of the 4·s²·h score FLOPs (FlashAttention-2 §3.1).
inline constexpr double kCausalFraction = 0.5;
// Fused attention's shape dependence (GPU preset: flash_head_dim_half,
// flash_seq_half; 0 disables): FlashAttention-2 (Dao 2023, Fig. 4-5, A100 and
// H100 benchmarks) runs head dimension 64 at about 0.85 of 128 and 512-token
// sequences at about 0.7 of 8K: d/(d + 32) and s/(s + 256), relative to d =
// 128, s = 4096, capped at 1.1.
double FlashShapeFactor(const topology::GpuSpec& g, double head_dim, double s_q);
// Fused attention backward executes 2.5× the forward FLOPs (5 GEMMs vs 2;
// FlashAttention-2 §3.1, "the backward pass ... 2.5 times the forward").
inline constexpr double kFlashBwdFlopRatio = 2.5;
// Adam with fp32 master weights touches, per parameter it updates: master,
// exp_avg, exp_avg_sq read + written (24 bytes) and the fp32 gradient read (4)
// (Apex/TE fused Adam); then the master is read (4) to write the low-precision
// copy (Megatron's _copy_main_params_to_model_params).
inline constexpr double kAdamStateBytesRW = 24.0 + 4.0;
// A collective hidden behind compute still occupies SMs (NCCL runs one CTA per
// channel: an all-gather took 24 of an H100's 132 SMs while overlapping a GEMM,
// NVIDIA developer forum "Compute-Communication Overlap Causes Severe GEMM
// Performance Degradation", 2025): charge that share of the hidden time.
inline constexpr double kOverlapSmShare = 24.0 / 132.0;

// Exposed seconds of a host<->GPU copy of `copy` seconds of which a fraction
// `eta` runs beside `window` seconds of compute. Pinned-memory copies run on
// the GPU's DMA copy engines (CUDA programming guide, "asynchronous
// concurrent execution"), so unlike a collective they take no SMs.
inline double HiddenByCopyEngine(double copy, double window, double eta) {
  return copy - eta * std::min(copy, window);
}

// Exposed seconds of `comm` overlapped with `window` seconds of compute.
inline double Overlapped(double comm, double window) {
  return std::max(0.0, comm - window) + kOverlapSmShare * std::min(comm, window);
}
// Exposed seconds of a collective of `comm` seconds that follows a GEMM of
// `gemm` seconds, both cut into `chunks` pieces of the micro-batch: piece i's
// collective runs while piece i+1's GEMM computes, so every piece but the last
// hides behind a GEMM piece (AxoNN's batch-split forward all-reduce).
inline double Pipelined(double comm, double gemm, double chunks) {
  if (chunks <= 1.0) return comm;
  const double c = comm / chunks, g = gemm / chunks;
  return c + (chunks - 1.0) * Overlapped(c, g);
}
// The same when only a fraction `eta` of the overlap a framework promises is
// realised (prefetch depth, a single communication stream): the rest of the
// hideable time stays exposed.
inline double OverlappedPartly(double comm, double window, double eta) {
  const double hidden = eta * std::min(comm, window);
  return comm - hidden * (1.0 - kOverlapSmShare);
}
// Exposed seconds of a sharded layer's weight traffic per micro-batch: the
// forward gather (`ag_fwd`), `n_ag_bwd` gathers again in the backward
// (`ag_bwd` each: two with full recompute) and the gradients' reduce-scatter
// (`rs`). Prefetched gathers hide behind the forward and backward compute,
// a deferred reduce-scatter behind the backward, by the fraction `eta`.
inline double ShardedTrafficExposed(double ag_fwd, double ag_bwd, double n_ag_bwd, double rs,
                                    double fwd_w, double bwd_w, bool prefetch, bool defer_rs,
                                    double eta) {
  return (prefetch ? OverlappedPartly(ag_fwd, fwd_w, eta) : ag_fwd) +
         (prefetch ? OverlappedPartly(n_ag_bwd * ag_bwd, bwd_w, eta) : n_ag_bwd * ag_bwd) +
         (defer_rs ? OverlappedPartly(rs, bwd_w, eta) : rs);
}

// Micro-batches per step on one rank: the global batch over the sequences the
// sharded (Z) and data ranks take per micro-batch.
inline int64_t MicroBatches(int64_t global_batch, const ParallelConfig& c) {
  return global_batch / (int64_t{c.mbs} * c.gz * c.gdata);
}

// The group over which weights are replicated and gradients reduced: the data
// ranks and the context-parallel ranks (they hold the same weights; Megatron's
// dp-cp group, DeepSpeed's sequence-data-parallel group). Its stride is the
// inner of the two dimensions' strides.
struct SyncGroup {
  int size;
  int stride;
};
// The replicas of each weight shard, the group its gradients synchronise
// over: data × cp, or the data replicas alone where FSDP shards over cp
// (FrameworkSupport::fsdp_over_cp).
inline SyncGroup WeightReplicas(const ParallelConfig& c, const FrameworkSpec& fw) {
  if (c.cp == 1 || fw.support.fsdp_over_cp) return {c.gdata, c.Stride(Dim::kData)};
  if (c.gdata == 1) return {c.cp, c.Stride(Dim::kCp)};
  return {c.gdata * c.cp, std::min(c.Stride(Dim::kData), c.Stride(Dim::kCp))};
}
// The FSDP shard group: the gz ranks, or where the framework shards over cp
// too (FrameworkSupport::fsdp_over_cp: torchtitan's fsdp mesh) the gz × cp
// ranks, strided by the inner of the two dimensions. Size 1: no FSDP.
inline SyncGroup FsdpGroup(const ParallelConfig& c, const FrameworkSpec& fw) {
  if (!fw.support.fsdp_over_cp || c.cp == 1) return {c.gz, c.Stride(Dim::kZ)};
  if (c.gz == 1) return {c.cp, c.Stride(Dim::kCp)};
  return {c.gz * c.cp, std::min(c.Stride(Dim::kZ), c.Stride(Dim::kCp))};
}

// Bytes the FP8 recipe's quantisation moves for one GEMM of `in` input,
// `grad` output-gradient and `w` weight elements (planner/cost/compute.cc).
double RecipeCastBytes(topology::Recipe r, double in, double grad, double w);

}  // namespace cost

// Per micro-batch, per GPU, one transformer block; seconds.
struct CostModel::LayerTimes {
  double fwd_compute = 0;       // forward math
  double bwd_compute = 0;       // backward math (excluding recompute)
  double recompute = 0;         // forward math redone in the backward
  double comm_x = 0, comm_y = 0, comm_z = 0, comm_cp = 0;  // exposed
  double offload = 0;           // FPDT host traffic not hidden
  double act_bytes = 0;         // activation bytes kept for the backward
};

// The pipeline schedule of one iteration (planner/cost/pipeline.cc): the time
// of one micro-batch through a layer, the critical stage and the 1F1B total.
struct CostModel::Schedule {
  double layer_compute = 0;    // one layer's compute, fwd + bwd + recompute
  double host_stall = 0;       // per layer: GPU idle while the host issues kernels
  double critical_layers = 0;  // layers of the critical (slowest) stage
  double critical_extra = 0;   // the logits and/or embedding work it carries
  bool last_critical = true;   // the last stage is the critical one
  double pipeline = 0;         // n_mb slots of the slowest stage plus fill and drain
  double comm_pp = 0;          // exposed pipeline send/recv
  // Mixture of experts (planner/cost/moe.cc): MoE layers of the critical stage
  // and one MoE layer's compute (fwd + bwd + recompute), its recompute share, its
  // exposed expert-parallel communication and its time per micro-batch.
  int critical_moe_layers = 0;
  double moe_compute = 0, moe_recompute = 0, moe_comm = 0, moe_time = 0;
  double layer_comm = 0;       // one dense layer's exposed comm other than EP
  double moe_layer_comm = 0;   // one MoE layer's (no MLP-block TP collectives without shared experts)
  double moe_tp_share = 1;     // the share of a dense layer's TP/SP collectives an MoE layer keeps
  double moe_comm_z = 0;       // one MoE layer's exposed weight gathers/scatters (FSDP2's, else lt.comm_z)
};

}  // namespace paratune::planner
