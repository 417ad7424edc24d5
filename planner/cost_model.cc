// The cost model. Every term is described, with its source, in docs/model.md;
// comments here say why a term has its shape, not what the arithmetic does.
#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/memory.h"

namespace paratune::planner {
namespace {

using topology::Collective;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Causal attention: a fused kernel skips the masked upper triangle, so it
// executes about half of the 4·s²·h score FLOPs (FlashAttention-2 §3.1).
constexpr double kCausalFraction = 0.5;
// Fused attention backward executes 2.5× the forward FLOPs (5 GEMMs vs 2;
// FlashAttention-2 §3.1, "the backward pass ... 2.5 times the forward").
constexpr double kFlashBwdFlopRatio = 2.5;
// DeepSpeed's default reduce bucket (reduce_bucket_size = 5e8 elements,
// deepspeed/runtime/zero/config.py).
constexpr double kDeepSpeedBucketElems = 5e8;
// Adam with fp32 master weights touches, per parameter it updates: master,
// exp_avg, exp_avg_sq read + written (24 bytes) and the fp32 gradient read (4)
// (Apex/TE fused Adam); then the master is read (4) to write the low-precision
// copy (Megatron's _copy_main_params_to_model_params).
constexpr double kAdamStateBytesRW = 24.0 + 4.0;
// A collective hidden behind compute still occupies SMs (NCCL runs one CTA per
// channel: an all-gather took 24 of an H100's 132 SMs while overlapping a GEMM,
// NVIDIA developer forum "Compute-Communication Overlap Causes Severe GEMM
// Performance Degradation", 2025): charge that share of the hidden time.
constexpr double kOverlapSmShare = 24.0 / 132.0;

// Fused attention's shape dependence (GPU preset: flash_head_dim_half,
// flash_seq_half; 0 disables): FlashAttention-2 (Dao 2023, Fig. 4-5, A100 and
// H100 benchmarks) runs head dimension 64 at about 0.85 of 128 and 512-token
// sequences at about 0.7 of 8K: d/(d + 32) and s/(s + 256), relative to d =
// 128, s = 4096, capped at 1.1.
double FlashShapeFactor(const topology::GpuSpec& g, double head_dim, double s_q) {
  double f = 1.0;
  if (g.flash_head_dim_half > 0) {
    f *= (head_dim / (head_dim + g.flash_head_dim_half)) / (128.0 / (128.0 + g.flash_head_dim_half));
  }
  if (g.flash_seq_half > 0) f *= (s_q / (s_q + g.flash_seq_half)) / (4096.0 / (4096.0 + g.flash_seq_half));
  return std::min(1.1, f);
}

// Exposed seconds of a host<->GPU copy of `copy` seconds of which a fraction
// `eta` runs beside `window` seconds of compute. Pinned-memory copies run on
// the GPU's DMA copy engines (CUDA programming guide, "asynchronous
// concurrent execution"), so unlike a collective they take no SMs.
double HiddenByCopyEngine(double copy, double window, double eta) {
  return copy - eta * std::min(copy, window);
}

// Exposed seconds of `comm` overlapped with `window` seconds of compute.
double Overlapped(double comm, double window) {
  return std::max(0.0, comm - window) + kOverlapSmShare * std::min(comm, window);
}
// Exposed seconds of a collective of `comm` seconds that follows a GEMM of
// `gemm` seconds, both cut into `chunks` pieces of the micro-batch: piece i's
// collective runs while piece i+1's GEMM computes, so every piece but the last
// hides behind a GEMM piece (AxoNN's batch-split forward all-reduce).
double Pipelined(double comm, double gemm, double chunks) {
  if (chunks <= 1.0) return comm;
  const double c = comm / chunks, g = gemm / chunks;
  return c + (chunks - 1.0) * Overlapped(c, g);
}
// The same when only a fraction `eta` of the overlap a framework promises is
// realised (prefetch depth, a single communication stream): the rest of the
// hideable time stays exposed.
double OverlappedPartly(double comm, double window, double eta) {
  const double hidden = eta * std::min(comm, window);
  return comm - hidden * (1.0 - kOverlapSmShare);
}

// The group over which weights are replicated and gradients reduced: the data
// ranks and the context-parallel ranks (they hold the same weights; Megatron's
// dp-cp group, DeepSpeed's sequence-data-parallel group). Its stride is the
// inner of the two dimensions' strides.
struct SyncGroup {
  int size;
  int stride;
};
SyncGroup WeightReplicas(const ParallelConfig& c) {
  if (c.cp == 1) return {c.gdata, c.Stride(Dim::kData)};
  if (c.gdata == 1) return {c.cp, c.Stride(Dim::kCp)};
  return {c.gdata * c.cp, std::min(c.Stride(Dim::kData), c.Stride(Dim::kCp))};
}

}  // namespace

const char* AttentionName(Attention a) { return a == Attention::kFlash ? "flash" : "unfused"; }

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kOk: return "ok";
    case Reason::kBadDegree: return "bad_degree";
    case Reason::kWorldMismatch: return "world_mismatch";
    case Reason::kHeadsNotDivisible: return "heads_not_divisible";
    case Reason::kKvHeadsNotDivisible: return "kv_heads_not_divisible";
    case Reason::kHiddenNotDivisible: return "hidden_not_divisible";
    case Reason::kFfnNotDivisible: return "ffn_not_divisible";
    case Reason::kLayersNotDivisible: return "layers_not_divisible";
    case Reason::kBatchNotDivisible: return "batch_not_divisible";
    case Reason::kMicroBatchesVsPp: return "micro_batches_vs_pp";
    case Reason::kSeqNotDivisible: return "seq_not_divisible";
    case Reason::kZShardNotDivisible: return "z_shard_not_divisible";
    case Reason::kSpNeedsTensor: return "sp_needs_tensor";
    case Reason::kZeroConflict: return "zero_conflict";
    case Reason::kOutOfMemory: return "out_of_memory";
    case Reason::kFrameworkUnsupported: return "framework_unsupported";
    case Reason::kOutOfHostMemory:
      return "out_of_host_memory";
  }
  return "unknown";
}

const char* ReasonField(Reason r) {
  switch (r) {
    case Reason::kOk: return "";
    case Reason::kBadDegree: return "/config";
    case Reason::kWorldMismatch: return "/gpus";
    case Reason::kHeadsNotDivisible: return "/config/tp";
    case Reason::kKvHeadsNotDivisible: return "/config/tp";
    case Reason::kHiddenNotDivisible: return "/config/tp";
    case Reason::kFfnNotDivisible: return "/config/tp";
    case Reason::kLayersNotDivisible: return "/config/pp";
    case Reason::kBatchNotDivisible: return "/config/mbs";
    case Reason::kMicroBatchesVsPp: return "/config/vpp";
    case Reason::kSeqNotDivisible: return "/config/cp";
    case Reason::kZShardNotDivisible: return "/config/gz";
    case Reason::kSpNeedsTensor: return "/config/sp";
    case Reason::kZeroConflict: return "/config/zero";
    case Reason::kOutOfMemory: return "/config";
    case Reason::kFrameworkUnsupported: return "/training/framework";
    case Reason::kOutOfHostMemory:
      return "/cluster/host_memory_GiB";
  }
  return "";
}

// Per micro-batch, per GPU, one transformer block; seconds.
struct CostModel::LayerTimes {
  double fwd_compute = 0;       // forward math
  double bwd_compute = 0;       // backward math (excluding recompute)
  double recompute = 0;         // forward math redone in the backward
  double comm_x = 0, comm_y = 0, comm_z = 0, comm_cp = 0;  // exposed
  double offload = 0;           // FPDT host traffic not hidden
  double act_bytes = 0;         // activation bytes kept for the backward
};

CostModel::CostModel(const ModelSpec& model, const TrainingSpec& training,
                     const topology::ClusterSpec& cluster, int gpus)
    : CostModel(model, training, cluster, gpus, FrameworkPreset(training.framework)) {}

CostModel::CostModel(const ModelSpec& model, const TrainingSpec& training,
                     const topology::ClusterSpec& cluster, int gpus, FrameworkSpec framework)
    : model_(model),
      training_(training),
      fw_(std::move(framework)),
      cluster_(ClusterForFramework(cluster, training.framework)),
      gpus_(gpus),
      comm_(cluster_, gpus) {
  using topology::Precision;
  const bool compiled = training.compile && fw_.support.compile;
  const FrameworkCosts& fc = fw_.costs;
  elem_traffic_ = compiled ? fc.elementwise_traffic_compiled : fc.elementwise_traffic;
  loss_bytes_ = compiled ? fc.loss_bytes_per_logit_compiled : fc.loss_bytes_per_logit;
  loss_live_bytes_ = compiled ? fc.loss_live_bytes_per_logit_compiled : fc.loss_live_bytes_per_logit;
  kernels_per_layer_ = compiled ? fc.kernels_per_layer_compiled : fc.kernels_per_layer;
  host_s_per_layer_ = 1e-6 * (compiled ? fc.host_us_per_layer_compiled : fc.host_us_per_layer);
  const Precision p = training.precision;
  peak_flops_ = cluster.gpu.PeakTflops(p) * 1e12;
  stream_Bps_ = cluster.gpu.hbm_GBps * 1e9 * cluster.gpu.hbm_efficiency;
  const bool wide = (p == Precision::kFp32 || p == Precision::kTf32);
  act_bytes_ = wide ? 4.0 : 2.0;    // fp8 recipes keep activations in bf16 between GEMMs
  param_bytes_ = wide ? 4.0 : 2.0;  // fp8 recipes keep bf16 weights (TE)
  grad_bytes_ = (wide || training.main_grads_fp32) ? 4.0 : 2.0;
  model_flops_ = 3.0 * model.ForwardFlopsPerToken(training.seq_len) *
                 static_cast<double>(training.global_batch) * training.seq_len;
  layer_params_ = static_cast<double>(model.ParamsPerLayer());
  norm_params_ = (model.norm == "rmsnorm" ? 2.0 : 4.0) * model.hidden;
  // The curve GpuSpec::GemmEfficiency uses for this precision.
  const auto& curves = cluster.gpu.gemm_efficiency;
  const std::vector<topology::EfficiencyPoint>* curve = &cluster.gpu.EffectiveGemmCurve(p);
  for (const topology::EfficiencyPoint& pt : *curve) {
    curve_log2_size_.push_back(std::log2(pt.size));
    curve_eff_.push_back(pt.efficiency);
  }
  curve_peak_ratio_ = 1.0;
  if (curve != &curves[static_cast<int>(p)]) {
    const double bf16 = cluster.gpu.PeakTflops(Precision::kBf16);
    if (bf16 > 0) curve_peak_ratio_ = std::max(1.0, cluster.gpu.PeakTflops(p) / bf16);
  }
}

double CostModel::GemmEfficiency(double m, double n, double k) const {
  const size_t np = curve_eff_.size();
  if (np == 0) return 1.0;  // no curve: the ideal (peak) model, as GpuSpec does
  // A GEMM's fixed costs (launch, prologue/epilogue, the last wave) take the
  // same time at any precision while the math gets faster, so a GEMM at a
  // precision with a measured curve of its own is read as is; one borrowing the
  // bf16 curve at r× the bf16 peak reaches the efficiency a bf16 GEMM of 1/r
  // the FLOPs reaches (size scaled by r^(-1/3)).
  const double x = std::log2(m * n * k / curve_peak_ratio_) / 3.0;
  if (x <= curve_log2_size_[0]) return curve_eff_[0];
  for (size_t i = 1; i < np; ++i) {
    if (x <= curve_log2_size_[i]) {
      const double t = (x - curve_log2_size_[i - 1]) / (curve_log2_size_[i] - curve_log2_size_[i - 1]);
      return curve_eff_[i - 1] + t * (curve_eff_[i] - curve_eff_[i - 1]);
    }
  }
  return curve_eff_[np - 1];
}

double CostModel::StreamSeconds(double bytes) const { return bytes / stream_Bps_; }

// A GEMM of (m×k)·(k×n): compute-bound time at the shape's efficiency, or the
// time to stream its operands if that is longer (roofline).
double CostModel::GemmSeconds(double m, double n, double k) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2.0 * m * n * k;
  // The curve is read at the cube-root size and was measured on square
  // shapes; a short inner dimension amortises each output tile's prologue and
  // epilogue over fewer MMA steps (CUTLASS's mainloop/epilogue split), so its
  // efficiency scales by k/(k + k0) relative to a square GEMM of that size
  // (k0: the GPU preset's gemm_k0, fitted to the small-model public runs).
  const double k0 = cluster_.gpu.gemm_k0;
  const double x = std::cbrt(m * n * k);
  const double k_factor = k0 > 0 ? std::min(1.0, (k / (k + k0)) / (x / (x + k0))) : 1.0;
  // The curve is a short-run (benchmark, profile) figure: a training run
  // sustains the GPU preset's gemm_sustained_fraction of it.
  const double eff = GemmEfficiency(m, n, k) * k_factor * cluster_.gpu.gemm_sustained_fraction;
  const double t_compute = flops / (peak_flops_ * eff);
  const double t_memory = StreamSeconds(act_bytes_ * (m * k + k * n + m * n));
  return std::max(t_compute, t_memory);
}

Reason CostModel::CheckRules(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  if (c.gx < 1 || c.gy < 1 || c.gz < 1 || c.gdata < 1 || c.pp < 1 || c.vpp < 1 || c.cp < 1 ||
      c.mbs < 1 || (c.vpp > 1 && c.pp < 2)) {
    return Reason::kBadDegree;
  }
  if (c.world() != gpus_) return Reason::kWorldMismatch;
  const bool ulysses = c.cp > 1 && c.cp_kind != CpKind::kRing;
  const int head_split = c.gy * (ulysses ? c.cp : 1);
  if (m.heads % head_split != 0) return Reason::kHeadsNotDivisible;
  if (m.kv_heads % c.gy != 0) return Reason::kKvHeadsNotDivisible;
  if (ulysses && m.kv_heads % head_split != 0 && head_split % m.kv_heads != 0) {
    return Reason::kKvHeadsNotDivisible;  // Ulysses replicates KV heads only when u is a multiple
  }
  if (m.hidden % c.gx != 0 || m.hidden % c.gy != 0) return Reason::kHiddenNotDivisible;
  if (m.ffn_hidden % c.gx != 0 || m.ffn_hidden % c.gy != 0) return Reason::kFfnNotDivisible;
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0) {
    // Megatron's uneven stages: both stages exist (pp > 1), each keeps at least
    // one layer, and the stages in between share the rest evenly, in vpp chunks.
    if (c.pp < 2 || !fw_.support.uneven_pp) return Reason::kLayersNotDivisible;
    const int explicit_stages = (c.first_stage_layers > 0) + (c.last_stage_layers > 0);
    const int rest_stages = c.pp - explicit_stages;
    const int rest = m.layers - c.first_stage_layers - c.last_stage_layers;
    if (rest < 0 || (rest_stages == 0 && rest != 0) ||
        (rest_stages > 0 && (rest <= 0 || rest % (rest_stages * c.vpp) != 0)) ||
        c.first_stage_layers % c.vpp != 0 || c.last_stage_layers % c.vpp != 0) {
      return Reason::kLayersNotDivisible;
    }
  } else if (m.layers % (c.pp * c.vpp) != 0) {
    // As evenly as possible (DeepSpeed, torchtitan) without interleaving;
    // Megatron needs the first/last stage counts stated.
    const bool automatic = fw_.support.uneven_pp && c.vpp == 1 && m.layers >= c.pp &&
                           training_.framework != Framework::kMegatron;
    if (!automatic) return Reason::kLayersNotDivisible;
  }
  const int64_t per_step = int64_t{c.mbs} * c.gz * c.gdata;
  if (training_.global_batch % per_step != 0) return Reason::kBatchNotDivisible;
  const int64_t n_mb = training_.global_batch / per_step;
  if (c.vpp > 1 && n_mb % c.pp != 0) return Reason::kMicroBatchesVsPp;
  if (c.cp > 1) {
    const int need = c.cp_kind == CpKind::kRing ? 2 * c.cp : c.cp;
    if (training_.seq_len % need != 0) return Reason::kSeqNotDivisible;
    // FPDT: the sequence splits into whole chunks (DeepSpeed's FPDT_InputConstruct
    // asserts global_seq_len % ds_sequence_parallel_fpdt_chunk_size == 0).
    if (c.cp_kind == CpKind::kFpdt && training_.seq_len > training_.fpdt_chunk_tokens &&
        training_.seq_len % training_.fpdt_chunk_tokens != 0) {
      return Reason::kSeqNotDivisible;
    }
  }
  if (c.gz > 1) {
    const int64_t h = m.hidden, f = m.ffn_hidden * (m.gated_ffn ? 2 : 1);
    const int64_t t = c.tensor();
    for (int64_t kn : {h * m.qkv_out(), h * h, h * f, int64_t{m.ffn_hidden} * h}) {
      if ((kn / t) % c.gz != 0) return Reason::kZShardNotDivisible;
    }
  }
  if (c.sp && (c.gy < 2 || c.gx != 1)) return Reason::kSpNeedsTensor;
  if (c.zero < 0 || c.zero > 3 || (c.distributed_optimizer && c.zero > 0) ||
      ((c.qwz || c.hpz || c.qgz) && c.zero != 3) || (c.offload_optimizer && c.zero < 1) ||
      (c.offload_param && c.zero != 3)) {
    return Reason::kZeroConflict;
  }
  if (!Supports(c)) return Reason::kFrameworkUnsupported;
  return Reason::kOk;
}

const char* CostModel::UnsupportedWhy(const ParallelConfig& c) const {
  const FrameworkSupport& f = fw_.support;
  if (c.gx > 1 && !f.axonn_xy) return "no AxoNN X dimension (gx > 1)";
  if (c.gy > 1 && !f.tp && !f.axonn_xy) return "no tensor parallelism (tp/gy > 1)";
  if (c.gy > 1 && c.gx == 1 && !c.sp && !f.tp_without_sp && f.tp) return "tensor parallelism only with sequence parallelism (sp)";
  if (c.sp && !f.sp) return "no sequence parallelism (sp)";
  if (c.gz > 1 && !f.shard_z) return "no sharded-parameter dimension (gz > 1)";
  if (c.pp > 1 && !f.pp) return "no pipeline parallelism (pp > 1)";
  if (c.vpp > 1 && !f.vpp) return "no interleaved pipeline (vpp > 1)";
  if (c.vpp > 1 && c.pp < f.vpp_min_pp) return "interleaved pipeline (vpp > 1) needs more pipeline stages (pp)";
  if (c.overlap_grad_reduce && c.pp > 1 && !f.overlap_grad_reduce_with_pp)
    return "overlap_grad_reduce only without pipeline parallelism (pp = 1)";
  if (c.cp > 1) {
    if (c.cp_kind == CpKind::kRing && !f.cp_ring) return "no ring context parallelism (cp_kind ring)";
    if (c.cp_kind == CpKind::kUlysses && !f.cp_ulysses) return "no Ulysses (cp_kind ulysses)";
    if (c.cp_kind == CpKind::kFpdt && !f.cp_fpdt) return "no FPDT (cp_kind fpdt)";
    if (!f.cp_with_tp_pp && (c.gy > 1 || c.pp > 1)) return "sequence parallelism (cp) without tp or pp only";
  }
  if (!f.zero[c.zero]) return "this ZeRO stage is not offered (zero)";
  if (c.distributed_optimizer && !f.distributed_optimizer) return "no Megatron distributed optimizer";
  if ((c.qwz || c.hpz || c.qgz) && !f.zeropp) return "no ZeRO++ (qwz, hpz, qgz)";
  if (c.offload_optimizer && !f.offload_optimizer)
    return "no optimizer offload (offload_optimizer)";
  if (c.offload_param && !f.offload_param) return "no parameter offload (offload_param)";
  if (c.pp > 1 && c.zero >= 2 && !f.pp_with_zero2) return "its pipeline engine refuses ZeRO-2/3";
  if (!f.recompute[static_cast<int>(c.recompute)]) return "this recompute granularity is not offered";
  return "";
}

bool CostModel::Supports(const ParallelConfig& c) const { return UnsupportedWhy(c)[0] == '\0'; }

std::string CostModel::Explain(Reason r, const ParallelConfig& c) const {
  std::ostringstream os;
  const ModelSpec& m = model_;
  const int64_t per_step = int64_t{c.mbs} * c.gz * c.gdata;
  switch (r) {
    case Reason::kOk: return "feasible";
    case Reason::kBadDegree:
      return "every degree must be >= 1, and vpp > 1 needs pp > 1";
    case Reason::kWorldMismatch:
      os << "the product of degrees gx·gy·gz·gdata·pp·cp = " << c.world() << " must equal gpus = "
         << gpus_;
      break;
    case Reason::kHeadsNotDivisible:
      os << "attention heads (" << m.heads << ") must be divisible by the tensor degree gy/tp ("
         << c.gy << ")" << (c.cp > 1 && c.cp_kind != CpKind::kRing ? " times the Ulysses degree cp" : "");
      break;
    case Reason::kKvHeadsNotDivisible:
      os << "key/value heads (" << m.kv_heads << ") must be divisible by the tensor degree gy/tp ("
         << c.gy << ")";
      break;
    case Reason::kHiddenNotDivisible:
      os << "hidden size (" << m.hidden << ") must be divisible by gx (" << c.gx << ") and gy/tp ("
         << c.gy << ")";
      break;
    case Reason::kFfnNotDivisible:
      os << "ffn_hidden (" << m.ffn_hidden << ") must be divisible by gx (" << c.gx
         << ") and gy/tp (" << c.gy << ")";
      break;
    case Reason::kLayersNotDivisible:
      if (c.first_stage_layers > 0 || c.last_stage_layers > 0) {
        os << "first_stage_layers (" << c.first_stage_layers << ") and last_stage_layers ("
           << c.last_stage_layers << ") need pp > 1, a framework with uneven stages, and the other "
           << "stages sharing the remaining layers evenly in chunks of vpp (" << c.vpp
           << "), as Megatron's --decoder-first/last-pipeline-num-layers require";
      } else if (training_.framework == Framework::kMegatron && fw_.support.uneven_pp && c.vpp == 1) {
        os << "layers (" << m.layers << ") are not divisible by pp (" << c.pp
           << "): Megatron needs first_stage_layers / last_stage_layers for uneven stages";
      } else {
        os << "layers (" << m.layers << ") must be divisible by pp·vpp (" << c.pp * c.vpp << ")";
      }
      break;
    case Reason::kBatchNotDivisible:
      os << "global_batch (" << training_.global_batch << ") must be divisible by mbs·gz·gdata ("
         << per_step << ")";
      break;
    case Reason::kMicroBatchesVsPp:
      os << "the interleaved schedule needs the micro-batch count ("
         << (per_step > 0 ? training_.global_batch / per_step : 0) << ") to be a multiple of pp ("
         << c.pp << ")";
      break;
    case Reason::kSeqNotDivisible:
      os << "seq_len (" << training_.seq_len << ") must be divisible by "
         << (c.cp_kind == CpKind::kRing ? "2·cp (causal load balance)" : "cp") << " = "
         << (c.cp_kind == CpKind::kRing ? 2 * c.cp : c.cp);
      if (c.cp_kind == CpKind::kFpdt && training_.seq_len > training_.fpdt_chunk_tokens) {
        os << ", and by FPDT's chunk (fpdt_chunk_tokens = " << training_.fpdt_chunk_tokens << ")";
      }
      break;
    case Reason::kZShardNotDivisible:
      os << "every weight block k·n/(gx·gy) must split evenly over gz (" << c.gz << ")";
      break;
    case Reason::kSpNeedsTensor:
      return "sequence parallelism (sp) needs Megatron tensor parallelism: tp/gy > 1 and gx = 1";
    case Reason::kZeroConflict:
      return "zero must be 0-3; distributed_optimizer excludes zero > 0; qwz/hpz/qgz need zero = "
             "3; "
             "offload_optimizer needs zero >= 1 and offload_param zero = 3";
    case Reason::kOutOfMemory: return "needs more memory per GPU than is usable";
    case Reason::kOutOfHostMemory:
      if (!(cluster_.host_memory_GiB > 0 && cluster_.host_memory_GBps > 0)) {
        return "offloads to host memory, but the cluster states no host_memory_GiB / "
               "host_memory_GBps";
      }
      os << "needs more host memory per node than is usable ("
         << cluster_.host_memory_GiB * (1.0 - training_.headroom) << " GiB)";
      break;
    case Reason::kFrameworkUnsupported:
      os << FrameworkName(training_.framework) << " cannot run this configuration: "
         << UnsupportedWhy(c);
      break;
  }
  return os.str();
}

CostModel::ComputeTerms CostModel::Compute(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  ComputeTerms t;
  const double e = act_bytes_;
  const double h = m.hidden, a = m.heads, d = m.head_dim();
  const double f = m.ffn_hidden, g = m.gated_ffn ? 2.0 : 1.0;
  const double s = training_.seq_len, b = c.mbs;
  const double gx = c.gx, gy = c.gy;
  const bool ulysses = c.cp > 1 && c.cp_kind != CpKind::kRing;
  const double T = b * s / c.cp;  // tokens this GPU holds in the linear layers
  // Attention runs in bf16 even in FP8 recipes (FlashAttention / cuDNN fused
  // attention; Transformer Engine keeps it out of FP8 by default).
  const double attn_peak = training_.precision == topology::Precision::kFp8
                               ? cluster_.gpu.PeakTflops(topology::Precision::kBf16) * 1e12
                               : peak_flops_;

  // Linear layers: AxoNN's alternating normal/transposed pair (Megatron TP is
  // the gx = 1 case). Normal: inputs split over X, outputs over Y; transposed:
  // the reverse. The backward runs dgrad and wgrad GEMMs of the same size.
  const double kn[4][2] = {{h, static_cast<double>(m.qkv_out())}, {h, h}, {h, f * g}, {f, h}};
  const bool fp8 = training_.precision == topology::Precision::kFp8;
  double fp8_cast_bytes = 0;
  for (int i = 0; i < 4; ++i) {
    const bool transposed = (i % 2) == 1;
    const double k_loc = kn[i][0] / (transposed ? gy : gx);
    const double n_loc = kn[i][1] / (transposed ? gx : gy);
    t.linear_fwd[i] = GemmSeconds(T, n_loc, k_loc);
    t.gemm_fwd += t.linear_fwd[i];
    if (!transposed) t.normal_fwd += t.linear_fwd[i];
    if (fp8) {
      // Transformer Engine FP8 (delayed scaling): forward, the input is read for
      // its amax and cast from bf16 (read 2 + 2, write 1 byte) and the weight
      // cast; backward, the output gradient likewise, and the input and gradient
      // transposed for the wgrad GEMM (FP8 GEMMs take TN layouts only: cuBLASLt
      // documentation). Weights are cast once per step (TE's fp8 weight cache),
      // here once per micro-batch: an upper bound that matters only for small T.
      fp8_cast_bytes += 5.0 * T * k_loc + 3.0 * k_loc * n_loc + 5.0 * T * n_loc +
                        2.0 * (T * k_loc + T * n_loc);
    }
  }

  // Attention core. Heads split over Y (and over the Ulysses group), the query
  // sequence over a ring-CP group; replicated across X.
  const double heads_loc = a / gy / (ulysses ? c.cp : 1);
  const double s_q = ulysses ? s : s / c.cp;
  const double scores = b * heads_loc * s_q * s;  // score elements per GPU
  if (training_.attention == Attention::kFlash) {
    const double exec = kCausalFraction * 4.0 * scores * d;
    const double shape = FlashShapeFactor(cluster_.gpu, d, s_q) * fw_.costs.attention_efficiency;
    t.attn_fwd = exec / (attn_peak * cluster_.gpu.flash_fwd_efficiency * shape);
    t.attn_bwd = kFlashBwdFlopRatio * exec / (attn_peak * cluster_.gpu.flash_bwd_efficiency * shape);
  } else {
    // Batched GEMMs QKᵀ (s_q×d·d×s) and PV (s_q×s·s×d) per head over the full
    // square (the mask is applied afterwards), plus softmax and dropout as
    // memory-bound kernels: forward reads+writes 2+2 bytes per score, dropout
    // 2+2+1 (mask); backward 2+2+2 and 2+1+2.
    const double per_head = GemmSeconds(s_q, s, d) + GemmSeconds(s_q, d, s);
    const double gemm = per_head * b * heads_loc;
    const double drop = m.dropout ? 5.0 : 0.0;
    t.attn_fwd = gemm + StreamSeconds(scores * (4.0 + drop));
    t.attn_bwd = 2 * gemm + StreamSeconds(scores * (6.0 + drop));
  }

  // Element-wise kernels (memory-bound). Per token, forward: two norms read and
  // write h each (8h bytes at 2 B/element); two bias-dropout-residual adds read
  // 2 tensors and write 1, plus a 1-byte mask with dropout: 2·(6h + h); the
  // activation reads FC1's output and writes FC2's input (GeLU 2f+2f, SwiGLU
  // 4f+2f). With sp the norm/residual tokens split over Y; AxoNN splits h over X.
  const double scale = e / 2.0;
  const double tok_rep = c.sp ? T / gy : T;
  const double norm_res = tok_rep * (h / gx) * (8.0 + 2.0 * (6.0 + (m.dropout ? 1.0 : 0.0))) * scale;
  const double act_fn = T * (f / gy) * (m.gated_ffn ? 6.0 : 4.0) * scale;
  // The backward is charged 2 × elem_fwd, so a third of the FP8 cast traffic
  // (forward + backward) goes here and the rest lands in the backward.
  // The framework's preset scales the fused baseline (eager stacks run each
  // element-wise op as its own kernel).
  t.elem_fwd = StreamSeconds(elem_traffic_ * (norm_res + act_fn) + fp8_cast_bytes / 3.0);

  // Last stage: logits GEMM (vocabulary split over the tensor ranks) forward and
  // its two backward GEMMs, and the fp32 cross-entropy (logits written, read and
  // their gradient written: 3 × 4 bytes). First stage: the embedding lookup and
  // its gradient scatter (memory-bound).
  const double V = m.vocab;
  t.logits_compute = 3.0 * GemmSeconds(T, V / c.tensor(), h / gx) +
                     StreamSeconds(T * (V / c.tensor()) * loss_bytes_);
  // Fixed costs of one layer's kernels (forward + backward) and the host time
  // to issue them (framework preset); the layer runs no faster than either allows.
  t.kernel_fixed = kernels_per_layer_ * cluster_.gpu.kernel_overhead_us * 1e-6;
  t.host = host_s_per_layer_;
  t.embed = StreamSeconds(3.0 * T * (h / gx) * e);

  // Activation memory kept for the backward (planner/memory.h).
  const bool flash = training_.attention == Attention::kFlash;
  ParallelConfig rc = c;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    rc.recompute = r;
    t.act_bytes[static_cast<int>(r)] = LayerActivationBytes(m, flash, e, training_.seq_len, rc, fp8);
  }
  t.act_bytes_full = t.act_bytes[0];
  t.psi = ParamsBeforeData(c);
  // Calibration (paratune calibrate): measured runs rescale the compute side.
  const double fc = cluster_.corrections.compute, fm = cluster_.corrections.memory_bound;
  for (double& x : t.linear_fwd) x *= fc;
  t.gemm_fwd *= fc;
  t.normal_fwd *= fc;
  t.attn_fwd *= fc;
  t.attn_bwd *= fc;
  t.elem_fwd *= fc;
  t.logits_compute *= fc;
  t.kernel_fixed *= fc;
  t.embed *= fm;
  return t;
}

void CostModel::LayerCost(const ParallelConfig& c, const ComputeTerms& t, double z_cached,
                          LayerTimes* out) const {
  const ModelSpec& m = model_;
  const double e = act_bytes_;
  const double h = m.hidden, a = m.heads, kv = m.kv_heads;
  const double f = m.ffn_hidden, g = m.gated_ffn ? 2.0 : 1.0;
  const double s = training_.seq_len, b = c.mbs;
  const double gx = c.gx, gy = c.gy;
  const double T = b * s / c.cp;
  const int sx = c.Stride(Dim::kX), sy = c.Stride(Dim::kY), sz = c.Stride(Dim::kZ);
  // Transformer Engine's userbuffers overlap needs the tensor group inside one
  // NVLink domain (CUDA IPC buffers): across nodes the option buys nothing.
  const bool tp_overlap = c.tp_comm_overlap && int64_t{sy} * c.gy * c.gx <= cluster_.gpus_per_node;

  // --- Tensor-parallel communication per linear layer: the forward all-reduce
  // of the output over the group that split k, the backward all-reduce of the
  // input gradient over the group that split n (AxoNN §1.3; Megatron TP = the
  // gx = 1 case: 2 all-reduces of b·s·h forward and 2 backward per layer).
  const double kn[4][2] = {{h, static_cast<double>(m.qkv_out())}, {h, h}, {h, f * g}, {f, h}};
  double comm_x = 0, comm_y = 0, fwd_x = 0, fwd_y = 0, z_ag = 0, z_rs = 0;
  for (int i = 0; i < 4; ++i) {
    const bool transposed = (i % 2) == 1;
    const double k = kn[i][0], n = kn[i][1];
    if (!c.sp && c.tensor() > 1) {
      // The forward all-reduce, pipelined over batch chunks where the
      // framework does so (1 chunk: fully exposed).
      const double chunks = c.oar ? fw_.costs.forward_allreduce_chunks : 1.0;
      if (transposed) {
        fwd_y += Pipelined(comm_.Seconds(Collective::kAllReduce, sy, c.gy, T * (n / gx) * e),
                           t.linear_fwd[i], chunks);
        const double bwd = comm_.Seconds(Collective::kAllReduce, sx, c.gx, T * (k / gy) * e);
        comm_x += c.oar ? Overlapped(bwd, t.linear_fwd[i]) : bwd;
      } else {
        fwd_x += Pipelined(comm_.Seconds(Collective::kAllReduce, sx, c.gx, T * (n / gy) * e),
                           t.linear_fwd[i], chunks);
        const double bwd = comm_.Seconds(Collective::kAllReduce, sy, c.gy, T * (k / gx) * e);
        // OAR: a layer's input-gradient all-reduce runs while its weight-gradient GEMM computes.
        comm_y += c.oar ? Overlapped(bwd, t.linear_fwd[i]) : bwd;
      }
    }
    if (c.gz > 1) {
      // Weights are gathered in the compute dtype; gradients reduce-scattered in
      // the main-gradient dtype (FSDP's reduce_dtype) or, where the framework
      // reduces weight.grad before accumulating (AxoNN), the parameter dtype.
      const double w = k * n / c.tensor();
      z_ag += comm_.Seconds(Collective::kAllGather, sz, c.gz, w * param_bytes_);
      const double rs_bytes = fw_.costs.z_reduce_in_param_dtype > 0 ? param_bytes_ : grad_bytes_;
      z_rs += comm_.Seconds(Collective::kReduceScatter, sz, c.gz, w * rs_bytes);
    }
  }
  // Megatron sequence parallelism: each all-reduce becomes an all-gather of the
  // layer input (before QKV, FC1) and a reduce-scatter of the output (after
  // proj, FC2); the backward mirrors them and re-gathers the inputs for the
  // weight gradients behind the dgrad GEMMs (Korthikanti 2022 §4.2.2).
  if (c.sp) {
    const double buf = T * h * e;
    const double ag = comm_.Seconds(Collective::kAllGather, sy, c.gy, buf);
    const double rs = comm_.Seconds(Collective::kReduceScatter, sy, c.gy, buf);
    fwd_y += 2 * ag + 2 * rs;
    comm_y += 2 * ag + (c.oar ? Overlapped(2 * rs, t.normal_fwd) : 2 * rs) +
              (c.oar ? Overlapped(2 * ag, t.normal_fwd) : 2 * ag);
  }
  if (tp_overlap) {
    // Transformer Engine userbuffers pipeline the collective through the GEMM.
    fwd_x = Overlapped(fwd_x, t.gemm_fwd);
    fwd_y = Overlapped(fwd_y, t.gemm_fwd);
  }
  comm_x += fwd_x;
  comm_y += fwd_y;

  // A third of a layer's kernels run in the forward, two thirds in the backward.
  out->fwd_compute = t.gemm_fwd + t.attn_fwd + t.elem_fwd + t.kernel_fixed / 3.0;
  out->bwd_compute = 2.0 * t.gemm_fwd + t.attn_bwd + 2.0 * t.elem_fwd + 2.0 * t.kernel_fixed / 3.0;
  out->recompute = 0;
  if (c.recompute == Recompute::kSelective) out->recompute = t.attn_fwd;
  if (c.recompute == Recompute::kFull) {
    out->recompute = out->fwd_compute;
    comm_x += fwd_x;  // the forward collectives run again
    comm_y += fwd_y;
  }
  out->act_bytes = t.act_bytes[static_cast<int>(c.recompute)];

  // --- Z (AxoNN depth / FSDP inside the tensor block): per micro-batch gather
  // the weights forward and again backward (again for recompute), reduce-scatter
  // the gradients. OAG prefetches one layer ahead; ORS defers the reduce-scatter.
  out->comm_z = 0;
  if (c.gz > 1) {
    const double fwd_w = out->fwd_compute, bwd_w = out->bwd_compute + out->recompute;
    // Cached layers keep the forward's gathered block for the recompute and
    // the backward: they gather once per micro-batch.
    const double n_ag_b = (c.recompute == Recompute::kFull ? 2.0 : 1.0) * (1.0 - z_cached);
    const double eta = fw_.costs.shard_overlap;
    out->comm_z = (c.oag ? OverlappedPartly(z_ag, fwd_w, eta) : z_ag) +
                  (c.oag ? OverlappedPartly(n_ag_b * z_ag, bwd_w, eta) : n_ag_b * z_ag) +
                  (c.ors ? OverlappedPartly(z_rs, bwd_w, eta) : z_rs);
  }

  // --- Context parallelism.
  out->comm_cp = 0;
  if (c.cp > 1) {
    const int scp = c.Stride(Dim::kCp);
    if (c.cp_kind == CpKind::kRing) {
      // Each step passes this rank's K and V block to the next while the current
      // block's attention computes: cp − 1 steps forward, twice that backward.
      const double kv_block = 2.0 * b * (s / c.cp) * (h * kv / a) / gy * e;
      const double step = comm_.Seconds(Collective::kSendRecv, scp, 2, kv_block);
      out->comm_cp = Overlapped((c.cp - 1) * step, t.attn_fwd) +
                     Overlapped(2.0 * (c.cp - 1) * step, t.attn_bwd);
    } else {
      // Ulysses / FPDT: all-to-all of Q, K, V in and of the output back, forward and backward.
      const double qkv = T * (static_cast<double>(m.qkv_out()) / gy) * e;
      const double fwd = comm_.Seconds(Collective::kAllToAll, scp, c.cp, qkv) +
                         comm_.Seconds(Collective::kAllToAll, scp, c.cp, T * (h / gy) * e);
      out->comm_cp = 2.0 * fwd + (c.recompute == Recompute::kFull ? fwd : 0.0);
    }
  }
  out->comm_x = comm_x;
  out->comm_y = comm_y;

  // --- FPDT: the sequence in chunks; only two stay on the GPU, the others go to
  // host memory and back, hidden behind the layer's compute when the link allows.
  out->offload = 0;
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    const double chunks = std::max(1.0, s / training_.fpdt_chunk_tokens);
    if (chunks > 2.0) {
      const double off = out->act_bytes * (1.0 - 2.0 / chunks);
      const double t_host = 2.0 * off / (cluster_.HostLinkGBps() * 1e9);
      out->act_bytes *= 2.0 / chunks;
      out->offload = std::max(0.0, t_host - (out->fwd_compute + out->bwd_compute));
    }
  }
}

double CostModel::ParamsBeforeData(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  const double t = c.tensor();
  const double V = m.vocab, h = m.hidden;
  const StageLayers st = SplitLayers(m.layers, c);
  const double layer_shard = ((layer_params_ - norm_params_) / t + norm_params_) / c.gz;
  const double emb_shard = V * h / t;
  const double pos = (m.norm == "layernorm" && m.max_seq_len > 0) ? double(m.max_seq_len) * h / c.gx : 0;
  const double first_extra = emb_shard + pos;
  const double last_extra = (!m.tied_embeddings || c.pp > 1 ? emb_shard : 0.0) + norm_params_;
  if (c.pp == 1) {
    return m.layers * layer_shard +
           (first_extra + (m.tied_embeddings ? 0.0 : emb_shard) + norm_params_) / c.gz;
  }
  return std::max({st.first * layer_shard + first_extra / c.gz, st.last * layer_shard + last_extra / c.gz,
                   st.middle * layer_shard});
}

double CostModel::OffloadLayerSeconds(const ParallelConfig& c, const LayerTimes& lt,
                                      double layer_bytes, int nd) const {
  if (!c.offload_param || c.zero != 3) return 0.0;
  // This rank's partition of the layer comes from host memory before each
  // all-gather: forward, backward and again for a full recompute. DeepSpeed
  // prefetches it with the gathers (stage3_prefetch_bucket_size) when
  // overlap_param_gather is on, as far as the framework's shard overlap goes.
  const double n_fetch = c.recompute == Recompute::kFull ? 3.0 : 2.0;
  const double fetch = n_fetch * (layer_bytes / std::max(1, nd)) / (cluster_.HostLinkGBps() * 1e9);
  const double eta = c.overlap_param_gather ? fw_.costs.shard_overlap : 0.0;
  return HiddenByCopyEngine(fetch, lt.fwd_compute + lt.bwd_compute + lt.recompute, eta);
}

CostModel::OffloadStep CostModel::OffloadStepSeconds(const ParallelConfig& c, double psi, int nd,
                                                     int64_t n_mb, double bwd_window_s) const {
  OffloadStep o;
  const double partition = psi / std::max(1, nd);
  // Every rank of the node updates its partition at once, sharing the DRAM.
  o.cpu_adam_s = CpuAdamSeconds(partition * RanksPerNode(), cluster_.host_memory_GBps);
  const double link = cluster_.HostLinkGBps() * 1e9;
  // Gradients: the reduced partition goes to the host in the parameter dtype
  // as its buckets fill, every micro-batch under ZeRO-2/3 (accumulated on the
  // host), once after the last backward under ZeRO-1; hidden behind that
  // backward as far as overlap_comm hides the reduction.
  const double rounds = c.zero >= 2 ? static_cast<double>(n_mb) : 1.0;
  const double grads = rounds * partition * param_bytes_ / link;
  const double eta = c.overlap_grad_reduce ? fw_.costs.grad_reduce_overlap : 0.0;
  o.copies_s = HiddenByCopyEngine(grads, rounds * bwd_window_s, eta);
  // The updated 16-bit partition goes back to the GPU after the CPU step
  // (ZeRO-Offload §4.1: nothing overlaps it without the delayed update);
  // under offload_param it stays on the host and is fetched per layer.
  if (!c.offload_param) o.copies_s += partition * param_bytes_ / link;
  return o;
}

MemoryBreakdown CostModel::MemoryWith(const ParallelConfig& c, const ComputeTerms& t) const {
  const ModelSpec& m = model_;
  MemoryBreakdown mem;
  const double psi = t.psi;
  const double e = act_bytes_;
  const double h = m.hidden, V = m.vocab;
  const double T = static_cast<double>(c.mbs) * training_.seq_len / c.cp;
  const StageLayers st = SplitLayers(m.layers, c);
  const int64_t n_mb = training_.global_batch / (int64_t{c.mbs} * c.gz * c.gdata);

  // DeepSpeed ZeRO keeps gradients in the parameter dtype; Megatron fp32 main grads.
  const SyncGroup sync = WeightReplicas(c);
  const ModelStates all_states =
      ModelStateBytes(psi, sync.size, c.zero, c.distributed_optimizer, param_bytes_,
                      c.zero >= 1 ? param_bytes_ : grad_bytes_);
  // ZeRO-Offload / Infinity: the offloaded states live in host memory.
  OffloadedStates placed{all_states, 0.0};
  if (c.offload_optimizer || c.offload_param) {  // off the hot path otherwise
    placed =
        OffloadStateBytes(all_states, psi, sync.size, c.zero, c.offload_optimizer, c.offload_param);
  }
  const ModelStates& states = placed.gpu;
  double host_act = 0;  // FPDT's offloaded chunks, per layer
  // Activations: the first stage holds min(pp, n_mb) micro-batches of its layers
  // in flight (1F1B), × (1 + (pp−1)/(pp·vpp)) when interleaved (Korthikanti §4.2.3).
  double layer_act = t.act_bytes[static_cast<int>(c.recompute)];
  double working = t.act_bytes_full;  // the layer being recomputed
  // The loss's tensors on the last stage: Korthikanti §4.3 counts the fp32
  // logits (4 bytes); the framework preset gives what its loss really holds.
  double logits_act = loss_live_bytes_ * T * V / c.tensor();
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    // FPDT keeps two sequence chunks on the GPU (the rest in host memory) and
    // computes the layers, and the loss, chunk by chunk.
    const double chunks = std::max(1.0, static_cast<double>(training_.seq_len) / training_.fpdt_chunk_tokens);
    if (chunks > 2.0) {
      host_act = layer_act * (1.0 - 2.0 / chunks);
      layer_act *= 2.0 / chunks;
      working *= 2.0 / chunks;
      // FPDT's chunked loss: one chunk's logits at a time (Yao et al. 2024:
      // the logits of the whole sequence never exist at once).
      logits_act *= 1.0 / chunks;
    }
  }
  const double in_flight = std::min<double>(c.pp, static_cast<double>(n_mb));
  const double interleave = c.vpp > 1 ? 1.0 + (c.pp - 1.0) / (c.pp * c.vpp) : 1.0;
  const double embed_act = T * (h / c.gx) * (e + (m.dropout ? 1.0 : 0.0)) / (c.sp ? c.gy : 1.0);
  const double act_first = (st.first * layer_act + embed_act) * in_flight * interleave;
  const double act_last = st.last * layer_act + logits_act;
  // The second stage holds one micro-batch fewer than the first (1F1B), with
  // the middle stages' layer count: it is the peak when uneven stages give the
  // first stage fewer layers.
  const double act_mid = c.pp > 2 ? st.middle * layer_act * std::min<double>(c.pp - 1, n_mb) * interleave : 0.0;
  double act = c.pp == 1 ? act_first + logits_act : std::max({act_first, act_last, act_mid});
  if (c.recompute == Recompute::kFull) act += working;

  double buffers = cluster_.gpu.runtime_reserved_GiB * kGiB;
  // Gathered weights in flight (the layer in use and prefetched ones) and, for
  // the framework's sharded execution, the layer's unsharded gradient before
  // its reduce-scatter.
  const double layer_block = layer_params_ / c.tensor();
  if (c.gz > 1 || c.zero == 3) buffers += fw_.costs.gathered_layers * layer_block * param_bytes_;
  if (c.zero >= 1) buffers += std::min(psi, kDeepSpeedBucketElems) * param_bytes_;
  if (c.hpz && c.zero == 3) {
    const int per_node = std::max(1, cluster_.gpus_per_node / std::min(sync.stride, cluster_.gpus_per_node));
    buffers += psi * param_bytes_ / std::max(1, std::min(sync.size, per_node));
  }
  mem.params_GiB = states.params_bytes / kGiB;
  mem.grads_GiB = states.grads_bytes / kGiB;
  mem.optimizer_GiB = states.optimizer_bytes / kGiB;
  mem.activations_GiB = act / kGiB;
  mem.buffers_GiB = buffers / kGiB;
  mem.total_GiB = mem.params_GiB + mem.grads_GiB + mem.optimizer_GiB + mem.activations_GiB + mem.buffers_GiB;
  // The step's peak adds, under sharded execution, the unsharded gradient of
  // one layer before its reduce-scatter (the loss's tensors are already in
  // the activations at the size the framework holds them).
  double transient = 0;
  if (c.gz > 1 || c.zero == 3) transient += layer_block * grad_bytes_;
  const double runtime = cluster_.gpu.runtime_reserved_GiB;
  mem.peak_allocated_GiB = mem.total_GiB + transient / kGiB;
  // The CUDA context and library workspaces sit outside the caching allocator.
  mem.reserved_GiB = (mem.peak_allocated_GiB - runtime) * (1.0 + fw_.costs.allocator_fragmentation) + runtime;
  mem.capacity_GiB = cluster_.gpu.memory_GiB;
  mem.usable_GiB = mem.capacity_GiB * (1.0 - training_.headroom);
  // Z weight caching: as many layers' gathered blocks as the room left holds
  // (what a user sets AxoNN's caching layer count to).
  if (fw_.costs.z_weight_cache > 0 && c.gz > 1 && mem.reserved_GiB < mem.usable_GiB) {
    const double per_layer = layer_block * param_bytes_ * (1.0 + fw_.costs.allocator_fragmentation) / kGiB;
    const int stage = st.max;
    const int n = std::min(stage, static_cast<int>((mem.usable_GiB - mem.reserved_GiB) / per_layer));
    if (n > 0) {
      const double bytes = n * layer_block * param_bytes_ / kGiB;
      mem.z_cached_layers = n;
      mem.buffers_GiB += bytes;
      mem.total_GiB += bytes;
      mem.peak_allocated_GiB += bytes;
      mem.reserved_GiB += n * per_layer;
    }
  }
  HostMemory(c, placed.host_bytes + host_act * st.first * in_flight * interleave, &mem);
  return mem;
}

void CostModel::HostMemory(const ParallelConfig& c, double host_bytes, MemoryBreakdown* mem) const {
  // Every rank of the node keeps its own partitions and chunks in the node's
  // DRAM; the OS, page cache and the ranks' own process memory are left to
  // the headroom. Offloading needs both host figures: capacity to hold the
  // states, DRAM bandwidth to run the CPU Adam step.
  const bool offloads = c.offload_optimizer || c.offload_param;
  if (offloads) mem->offloads = true;
  mem->host_per_gpu_GiB = host_bytes * (1.0 / kGiB);
  mem->host_node_GiB = mem->host_per_gpu_GiB * RanksPerNode();
  const bool costable = !offloads || cluster_.host_memory_GBps > 0;
  mem->host_usable_GiB = costable ? cluster_.host_memory_GiB * (1.0 - training_.headroom) : 0.0;
}

int CostModel::RanksPerNode() const { return std::max(1, std::min(gpus_, cluster_.gpus_per_node)); }

const char* MemoryBreakdown::Binding() const {
  const double gpu = usable_GiB > 0 ? reserved_GiB / usable_GiB : 0.0;
  const double host = host_usable_GiB > 0 ? host_node_GiB / host_usable_GiB : 0.0;
  return host > gpu ? "host_memory" : "gpu_memory";
}

MemoryBreakdown CostModel::Memory(const ParallelConfig& c) const { return MemoryWith(c, Compute(c)); }

Prediction CostModel::Predict(const ParallelConfig& c) const { return PredictWith(c, Compute(c)); }

double CostModel::Uncertainty() const {
  return std::hypot(fw_.Uncertainty(cluster_.gpu.name), cluster_.corrections.residual);
}

Prediction CostModel::PredictWith(const ParallelConfig& c, const ComputeTerms& terms,
                                  const MemoryBreakdown* mem) const {
  const ModelSpec& m = model_;
  Prediction p;
  const double e = act_bytes_;
  const double h = m.hidden, s = training_.seq_len;
  const int64_t n_mb = training_.global_batch / (int64_t{c.mbs} * c.gz * c.gdata);
  p.micro_batches = n_mb;
  const StageLayers st = SplitLayers(m.layers, c);
  const double T = static_cast<double>(c.mbs) * s / c.cp;

  p.memory = mem ? *mem : MemoryWith(c, terms);
  LayerTimes lt;
  const double stage_layers = std::max(1, st.max);
  LayerCost(c, terms, std::min(1.0, p.memory.z_cached_layers / stage_layers), &lt);

  // --- ZeRO-3 over the data group: the per-layer gather/scatter pattern of Z,
  // on the block the GPU still holds after tensor and Z sharding.
  const SyncGroup sync = WeightReplicas(c);
  const int sd = sync.stride, nd = sync.size;
  const double layer_shard = ((layer_params_ - norm_params_) / c.tensor() + norm_params_) / c.gz;
  double zero3_layer = 0;
  if (c.zero == 3 && nd > 1) {
    const double bytes = layer_shard * param_bytes_;
    int hp_group = nd;
    if (c.hpz) {
      const int per_node = std::max(1, cluster_.gpus_per_node / std::min(sd, cluster_.gpus_per_node));
      hp_group = std::max(1, std::min(nd, per_node));
    }
    const double ag_f = comm_.Seconds(Collective::kAllGather, sd, nd, bytes * (c.qwz ? 0.5 : 1.0));
    const double ag_b = hp_group > 1 ? comm_.Seconds(Collective::kAllGather, sd, hp_group, bytes) : 0.0;
    const double rs = comm_.Seconds(Collective::kReduceScatter, sd, nd, bytes * (c.qgz ? 0.25 : 1.0));
    const double n_ag_b = c.recompute == Recompute::kFull ? 2.0 : 1.0;
    const double fwd_w = lt.fwd_compute, bwd_w = lt.bwd_compute + lt.recompute;
    const double eta = fw_.costs.shard_overlap;
    zero3_layer = (c.overlap_param_gather ? OverlappedPartly(ag_f, fwd_w, eta) : ag_f) +
                  (c.overlap_param_gather ? OverlappedPartly(n_ag_b * ag_b, bwd_w, eta) : n_ag_b * ag_b) +
                  (c.overlap_grad_reduce ? OverlappedPartly(rs, bwd_w, eta) : rs);
    // ZeRO++'s (de)quantization kernels run on the GPU beside the layer's own
    // work (Wang et al. 2023 §4.1, §4.3): qwZ dequantizes every gathered
    // block (read int8, write the parameter dtype); qgZ quantizes the
    // gradient to int4, then dequantizes, reduces and re-quantizes after the
    // intra-node all-to-all and again after the inter-node one (≈ twice
    // (gradient + int4) bytes per element). Memory-bound, not hidden.
    const double block = layer_shard;  // the gathered layer block, elements
    const double n_qw = c.qwz ? (1.0 + (c.hpz ? 0.0 : n_ag_b)) : 0.0;
    zero3_layer += cluster_.corrections.memory_bound *
                   StreamSeconds(n_qw * block * (1.0 + param_bytes_) +
                                 (c.qgz ? 2.0 * block * (param_bytes_ + 0.5) : 0.0));
  }

  // ZeRO-Infinity: each gather first fetches this rank's partition from host memory.
  if (c.offload_param) lt.offload += OffloadLayerSeconds(c, lt, layer_shard * param_bytes_, nd);

  // --- One micro-batch through this rank's layers.
  const double layer_compute = lt.fwd_compute + lt.bwd_compute + lt.recompute;
  const double layer_comm = lt.comm_x + lt.comm_y + lt.comm_z + lt.comm_cp + zero3_layer + lt.offload;
  // The host issues the layer's kernels while the GPU runs earlier ones; when
  // issuing takes longer (eager dispatch, small layers) the GPU waits. Full
  // recompute issues the forward again (a third of the kernels).
  const double host = terms.host * (c.recompute == Recompute::kFull ? 4.0 / 3.0 : 1.0);
  const double layer_time = std::max(layer_compute + layer_comm, host);
  const double host_stall = layer_time - (layer_compute + layer_comm);
  // The logits need the final hidden states gathered over Y, forward and backward.
  const double logits_comm =
      c.gy > 1 ? 2.0 * comm_.Seconds(c.sp ? Collective::kAllGather : Collective::kAllReduce,
                                     c.Stride(Dim::kY), c.gy, T * h * e)
               : 0.0;
  // Stages may hold different layer counts (uneven pipelines): the slowest
  // stage sets the pace of the steady state.
  const double last = st.last * layer_time + terms.logits_compute + logits_comm;
  const double first = st.first * layer_time + terms.embed;
  const double middle = c.pp > 2 ? st.middle * layer_time : 0.0;
  double stage_max = c.pp == 1 ? last + terms.embed : std::max({first, last, middle});
  const double stage_avg = (m.layers * layer_time + terms.logits_compute + logits_comm + terms.embed) / c.pp;
  // Layers of the critical stage and the extra work it carries.
  double L_s = st.last;
  double crit_extra = terms.logits_compute;
  bool last_crit = true;
  if (c.pp == 1) {
    crit_extra = terms.logits_compute + terms.embed;
  } else if (first > last && first >= middle) {
    L_s = st.first;
    crit_extra = terms.embed;
    last_crit = false;
  } else if (middle > last) {
    L_s = st.middle;
    crit_extra = 0;
    last_crit = false;
  }

  // 1F1B: n_mb slots at the slowest stage plus (pp − 1)/vpp slots of fill and
  // drain (Narayanan 2021 §2.2; interleaving divides the bubble by vpp).
  const double pipeline = n_mb * stage_max + (c.pp - 1) * stage_avg / c.vpp;

  // Pipeline send/recv: activations forward, gradients backward, vpp times per
  // micro-batch with interleaving; scatter/gather over the tensor group. With
  // overlap_p2p the transfers run beside compute (still holding SMs).
  double comm_pp = 0;
  if (c.pp > 1) {
    const double one = comm_.Seconds(Collective::kSendRecv, c.Stride(Dim::kPp), 2, T * h * e / c.gy);
    const double total = 2.0 * c.vpp * n_mb * one;
    comm_pp = c.overlap_p2p ? Overlapped(total, n_mb * L_s * layer_compute) : total;
  }

  // --- Data-parallel synchronisation, once per iteration (ZeRO-2 reduces per
  // micro-batch; ZeRO-3 was costed per layer above).
  const double psi = terms.psi;
  const double zero3_in_pipeline = L_s * zero3_layer * n_mb;
  double comm_data = zero3_in_pipeline;
  if (nd > 1 && c.zero < 3) {
    const bool ds = c.zero > 0;  // DeepSpeed reduces in the parameter dtype
    const double g_bytes = psi * (ds ? param_bytes_ : grad_bytes_);
    double reduce, gather = 0;
    if (c.zero == 0 && !c.distributed_optimizer) {
      reduce = comm_.Seconds(Collective::kAllReduce, sd, nd, g_bytes);
    } else {
      reduce = comm_.Seconds(Collective::kReduceScatter, sd, nd, g_bytes);
      gather = comm_.Seconds(Collective::kAllGather, sd, nd, psi * param_bytes_);
    }
    const double bwd_stage = L_s * (lt.bwd_compute + lt.recompute);
    const double fwd_stage = L_s * lt.fwd_compute;
    const double red = c.overlap_grad_reduce
                           ? OverlappedPartly(reduce, bwd_stage, fw_.costs.grad_reduce_overlap)
                           : reduce;
    comm_data += (c.zero == 2 ? n_mb : 1) * red;
    comm_data += c.overlap_param_gather ? Overlapped(gather, fwd_stage) : gather;
  }

  // --- Optimizer step (memory-bound): sharded over data with ZeRO ≥ 1 or the
  // distributed optimizer; the local gradients are read for the norm and zeroed.
  const double opt_shard = (c.zero >= 1 || c.distributed_optimizer) ? nd : 1.0;
  const double copy_b = param_bytes_ < 4.0 ? 4.0 + param_bytes_ : 0.0;
  double opt_s =
      cluster_.corrections.memory_bound * fw_.costs.optimizer_traffic *
      StreamSeconds(psi / opt_shard * (kAdamStateBytesRW + copy_b) + psi * 2.0 * grad_bytes_);

  // ZeRO-Offload: the Adam step runs on the host's CPUs instead.
  OffloadStep offload_step;
  if (c.offload_optimizer) {
    offload_step = OffloadStepSeconds(c, psi, nd, n_mb, L_s * (lt.bwd_compute + lt.recompute));
    opt_s = offload_step.cpu_adam_s;
  }

  p.reason = p.memory.Verdict();
  p.fits = p.reason == Reason::kOk;
  p.uncertainty = Uncertainty();

  // --- Time and breakdown: the critical stage's per-micro-batch terms × n_mb;
  // the rest of the pipeline is bubble.
  TimeBreakdown& br = p.breakdown;
  br.compute_s = n_mb * (L_s * layer_compute + crit_extra);
  br.recompute_s = n_mb * L_s * lt.recompute;
  br.comm_x_s = n_mb * L_s * lt.comm_x;
  br.comm_y_s = n_mb * (L_s * lt.comm_y + (last_crit ? logits_comm : 0.0));
  br.comm_z_s = n_mb * L_s * lt.comm_z;
  br.comm_cp_s = n_mb * L_s * lt.comm_cp;
  br.offload_s = n_mb * L_s * lt.offload;
  br.host_s = n_mb * L_s * host_stall;
  br.comm_data_s = comm_data;
  br.comm_pp_s = comm_pp;
  br.optimizer_s = opt_s;
  const double accounted = br.compute_s + br.comm_x_s + br.comm_y_s + br.comm_z_s + br.comm_cp_s +
                           br.offload_s + br.host_s + zero3_in_pipeline;
  br.bubble_s = std::max(0.0, pipeline - accounted);
  br.offload_s += offload_step.copies_s;
  p.iteration_time_s =
      pipeline + comm_pp + (comm_data - zero3_in_pipeline) + opt_s + offload_step.copies_s;

  const double tokens = static_cast<double>(training_.global_batch) * s;
  double hw_flops = model_flops_;
  if (c.recompute == Recompute::kSelective) hw_flops += 4.0 * s * h * m.layers * tokens;
  if (c.recompute == Recompute::kFull) hw_flops += model_flops_ / 3.0 - 2.0 * h * m.vocab * tokens;
  p.tokens_per_s = tokens / p.iteration_time_s;
  p.model_tflops_per_gpu = model_flops_ / p.iteration_time_s / gpus_ / 1e12;
  p.hardware_tflops_per_gpu = hw_flops / p.iteration_time_s / gpus_ / 1e12;
  p.mfu = p.model_tflops_per_gpu * 1e12 / peak_flops_;
  p.hfu = p.hardware_tflops_per_gpu * 1e12 / peak_flops_;
  return p;
}

}  // namespace paratune::planner
