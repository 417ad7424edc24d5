// The cost model: its compiled inputs and the prediction that adds the terms
// up. Each term lives in its own file under planner/cost/ (compute,
// communication, pipeline schedule, memory, offload, rules); docs/model.md
// describes every term and its source; comments say why a term has its
// shape, not what the arithmetic does.
#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "planner/cost/internal.h"
#include "planner/memory.h"
#include "planner/moe.h"

namespace paratune::planner {

using cost::kAdamStateBytesRW;
using cost::SyncGroup;
using cost::WeightReplicas;
using topology::Collective;

const char* AttentionName(Attention a) { return a == Attention::kFlash ? "flash" : "unfused"; }

CostModel::CostModel(const ModelSpec& model, const TrainingSpec& training,
                     const topology::ClusterSpec& cluster, int gpus)
    : CostModel(model, training, cluster, gpus, FrameworkPreset(training.framework)) {}

CostModel::CostModel(const ModelSpec& model, const TrainingSpec& training,
                     const topology::ClusterSpec& cluster, int gpus, FrameworkSpec framework)
    : model_(ModelAtSequence(model, training.seq_len)),
      training_(training),
      fw_(std::move(framework)),
      cluster_(ClusterForFramework(cluster, training.framework)),
      gpus_(gpus),
      comm_(cluster_, gpus) {
  using topology::Precision;
  const bool compiled = training.compile && fw_.support.compile;
  const FrameworkCosts& fc = fw_.costs;
  elem_traffic_ = compiled ? fc.elementwise_traffic_compiled : fc.elementwise_traffic;
  const bool loss_compiled = compiled && training.compile_loss;
  loss_bytes_ = loss_compiled ? fc.loss_bytes_per_logit_compiled : fc.loss_bytes_per_logit;
  loss_live_bytes_ =
      loss_compiled ? fc.loss_live_bytes_per_logit_compiled : fc.loss_live_bytes_per_logit;
  kernels_per_layer_ = compiled ? fc.kernels_per_layer_compiled : fc.kernels_per_layer;
  host_s_per_layer_ = 1e-6 * (compiled ? fc.host_us_per_layer_compiled : fc.host_us_per_layer);
  moe_host_s_per_local_expert_ = 1e-6 * fc.moe_host_us_per_local_expert;
  SetGemmWorkspaces();
  const Precision p = training.precision;
  const bool recipe = p == Precision::kFp8;
  peak_flops_ =
      (recipe ? cluster.gpu.RecipePeakTflops(training.recipe) : cluster.gpu.PeakTflops(p)) * 1e12;
  recipe_factor_ = recipe ? cluster.gpu.recipe_gemm_factor[static_cast<int>(training.recipe)] : 1.0;
  // Measured GEMM ceilings: the precision's (an fp4 recipe has none measured),
  // and bf16's for the GEMMs a recipe keeps in high precision.
  gemm_ceiling_ = recipe && training.recipe == topology::Recipe::kNvfp4
                      ? 1.0
                      : cluster.gpu.GemmCeilingAt(recipe ? Precision::kFp8 : p);
  hp_gemm_ceiling_ = cluster.gpu.GemmCeilingAt(Precision::kBf16);
  stream_Bps_ = cluster.gpu.hbm_GBps * 1e9 * cluster.gpu.hbm_efficiency;
  const bool wide = topology::TrainsInFp32(p);
  act_bytes_ = wide ? 4.0 : 2.0;    // fp8 recipes keep activations in bf16 between GEMMs
  param_bytes_ = wide ? 4.0 : 2.0;  // fp8 recipes keep bf16 weights (TE)
  // Megatron-Bridge's fp8 recipes gather parameters in fp8 (fp8_param_gather:
  // current/delayed scaling and MXFP8; blockwise does not), NVFP4 in fp4 with
  // an E4M3 scale per 16 values (fp4_param_gather): mixed_precision.py.
  gather_bytes_ = param_bytes_;
  if (recipe) {
    switch (training.recipe) {
      case topology::Recipe::kFp8Delayed:
      case topology::Recipe::kFp8Current:
      case topology::Recipe::kMxfp8:
        gather_bytes_ = 1.0;
        break;
      case topology::Recipe::kNvfp4:
        gather_bytes_ = 0.5 + 1.0 / 16.0;
        break;
      case topology::Recipe::kFp8Blockwise:
        break;
    }
  }
  grad_bytes_ = (wide || training.main_grads_fp32) ? 4.0 : 2.0;
  model_flops_ = 3.0 * model.ForwardFlopsPerToken(training.seq_len) *
                 static_cast<double>(training.global_batch) * training.seq_len;
  ceiling_mfu_scale_ = ExecutedShare(training.seq_len) /
                       ExecutedShare(std::min(training.seq_len, kCeilingSeqLen));
  CountExecutedFlops();
  layer_params_ = static_cast<double>(model.ParamsPerLayer());
  // The attention's two GEMM groups: QKV (k = h) and the output projection
  // (n = h). MLA's down/up projections are priced as one k = h GEMM of the same
  // FLOPs; the core runs at the mean of its query-key and value head dims.
  if (model.is_mla()) {
    const double out = static_cast<double>(model.heads) * model.v_head_dim;
    attn_proj_k_ = out;
    attn_qkv_n_ = (static_cast<double>(model.MlaParams()) - out * model.hidden) / model.hidden;
    attn_head_dim_ =
        (static_cast<double>(model.qk_nope_head_dim) + model.qk_rope_head_dim + model.v_head_dim) /
        2.0;
  } else {
    attn_qkv_n_ = static_cast<double>(model.qkv_out());
    attn_proj_k_ = static_cast<double>(model.q_out());
    attn_head_dim_ = model.head_dim();
  }
  norm_params_ = (model.norm == "rmsnorm" ? 2.0 : 4.0) * model.hidden;
  // The curve GpuSpec::GemmEfficiency uses for this precision.
  const auto& curves = cluster.gpu.gemm_efficiency;
  const std::vector<topology::EfficiencyPoint>* curve =
      recipe ? &cluster.gpu.RecipeGemmCurve(training.recipe) : &cluster.gpu.EffectiveGemmCurve(p);
  mds_model_gap_ = MegatronDeepSpeedModelGap(model, training.seq_len);
  autoep_gap_ = DeepSpeedAutoEpGap(model);
  mcore_model_gap_ = MegatronModelGap(model, training.seq_len);
  hp_peak_flops_ = cluster.gpu.PeakTflops(Precision::kBf16) * 1e12;
  if (!(hp_peak_flops_ > 0)) hp_peak_flops_ = peak_flops_;
  for (const topology::EfficiencyPoint& pt : cluster.gpu.EffectiveGemmCurve(Precision::kBf16)) {
    hp_curve_log2_size_.push_back(std::log2(pt.size));
    hp_curve_eff_.push_back(pt.efficiency);
  }
  for (const topology::EfficiencyPoint& pt : *curve) {
    curve_log2_size_.push_back(std::log2(pt.size));
    curve_eff_.push_back(pt.efficiency);
  }
  curve_peak_ratio_ = 1.0;
  const bool own_curve = recipe && training.recipe == topology::Recipe::kNvfp4
                             ? !cluster.gpu.fp4_gemm_efficiency.empty()
                             : curve == &curves[static_cast<int>(p)];
  if (!own_curve) {
    const double bf16 = cluster.gpu.PeakTflops(Precision::kBf16);
    if (bf16 > 0) curve_peak_ratio_ = std::max(1.0, peak_flops_ / 1e12 / bf16);
  }
  // The band before distance: the framework × GPU residual and a calibrated
  // profile's own. A framework without evidence regions has no calibration
  // rows at all, which its default band already states.
  base_band_ = std::hypot(fw_.Uncertainty(cluster_.gpu.name), cluster_.corrections.residual);
  dedup_band_ = model.is_moe() && fw_.dedup_across_domains_uncertainty > 0;
  evidence_steps_ =
      fw_.evidence.empty()
          ? 0.0
          : EvidenceSteps(fw_.evidence, cluster_.gpu.name, topology::PrecisionName(p), gpus,
                          static_cast<double>(model.ParamCount()) / 1e9, ModelFamily(model));
}

const char* ModelFamily(const ModelSpec& m) { return m.gated_ffn ? "llama" : "gpt"; }

Prediction CostModel::Predict(const ParallelConfig& c) const { return PredictWith(c, Compute(c)); }

double CostModel::Uncertainty() const {
  return std::hypot(base_band_, kBandPerEvidenceStep * evidence_steps_);
}

Prediction CostModel::PredictWith(const ParallelConfig& c, const ComputeTerms& terms,
                                  const MemoryBreakdown* mem) const {
  const ModelSpec& m = model_;
  Prediction p;
  const double e = act_bytes_;
  const double h = m.hidden, s = training_.seq_len;
  const int64_t n_mb = cost::MicroBatches(training_.global_batch, c);
  p.micro_batches = n_mb;
  const StageLayers st = Stages(c);
  const double T = static_cast<double>(c.mbs) * s / c.cp;

  p.memory = mem ? *mem : MemoryWith(c, terms);
  LayerTimes lt;
  const double stage_layers = std::max(1, st.max);
  LayerCost(c, terms, std::min(1.0, p.memory.z_cached_layers / stage_layers), &lt);

  // --- ZeRO-3 over the data group: the per-layer gather/scatter pattern of Z,
  // on the block the GPU still holds after tensor and Z sharding.
  const SyncGroup sync = WeightReplicas(c, fw_);
  const int sd = sync.stride, nd = sync.size;
  const int shards = cost::FsdpGroup(c, fw_).size;
  const double layer_shard = ((layer_params_ - norm_params_) / c.tensor() + norm_params_) / shards;
  const double zero3_layer = Zero3LayerSeconds(c, lt, layer_shard, sd, nd);

  // ZeRO-Infinity: each gather first fetches this rank's partition from host memory.
  if (c.offload_param) lt.offload += OffloadLayerSeconds(c, lt, layer_shard * param_bytes_, nd);
  // The logits need the final hidden states gathered over Y, forward and backward.
  const double logits_comm =
      c.gy > 1 ? 2.0 * comm_.Seconds(c.sp ? Collective::kAllGather : Collective::kAllReduce,
                                     c.Stride(Dim::kY), c.gy, T * h * e)
               : 0.0;
  const Schedule sched = PipelineSchedule(c, terms, lt, zero3_layer, st, n_mb, T, logits_comm);
  const double layer_compute = sched.layer_compute, host_stall = sched.host_stall;
  const double L_s = sched.critical_layers, crit_extra = sched.critical_extra;
  const bool last_crit = sched.last_critical;
  const double pipeline = sched.pipeline, comm_pp = sched.comm_pp;

  // --- Data-parallel synchronisation, once per iteration (ZeRO-2 reduces per
  // micro-batch; ZeRO-3 was costed per layer above).
  const double psi = terms.psi;
  const double zero3_in_pipeline = L_s * zero3_layer * n_mb;
  // The embedding's gradients close the first stage's backward.
  const double embedding = static_cast<double>(m.vocab) * h / c.tensor() / shards;
  double comm_data = DataSyncSeconds(c, lt, psi, embedding, L_s, n_mb, sd, nd, zero3_in_pipeline);
  // Expert gradients synchronise over the expert-data group: ranks etp·ep apart
  // inside the stage (Megatron-Core's expert rank order etp-ep-edp).
  // Under FSDP2 they were reduce-scattered per layer over efsdp (the schedule);
  // the shards then all-reduce over the data-parallel replicas (HSDP).
  const int edp = c.expert_data();
  const int efsdp = ExpertFsdpShards(c);
  const double expert_psi = terms.expert_psi;
  if (expert_psi > 0 && efsdp > 1) {
    comm_data = DataSyncSeconds(c, lt, expert_psi / efsdp, 0.0, L_s, n_mb, c.Stride(Dim::kData),
                                c.gdata, comm_data);
  } else if (expert_psi > 0) {
    comm_data = DataSyncSeconds(c, lt, expert_psi, 0.0, L_s, n_mb, c.ep * c.etp, edp, comm_data);
  }

  // --- Optimizer step (memory-bound): sharded over data with ZeRO ≥ 1 or the
  // distributed optimizer; the local gradients are read for the norm and zeroed.
  const double opt_shard = (c.zero >= 1 || c.distributed_optimizer) ? nd : 1.0;
  const double copy_b = param_bytes_ < 4.0 ? 4.0 + param_bytes_ : 0.0;
  double opt_s =
      cluster_.corrections.memory_bound * fw_.costs.optimizer_traffic *
      StreamSeconds(psi / opt_shard * (kAdamStateBytesRW + copy_b) + psi * 2.0 * grad_bytes_);
  if (expert_psi > 0) {
    // The expert states shard over the expert-data group (under FSDP2 every
    // expert state is an efsdp shard, as the dense part's are gz shards).
    const double held = expert_psi / efsdp;
    const double e_shard =
        efsdp == 1 && (c.zero >= 1 || c.distributed_optimizer) ? std::max(1, edp) : 1.0;
    opt_s += cluster_.corrections.memory_bound * fw_.costs.optimizer_traffic *
             StreamSeconds(held / e_shard * (kAdamStateBytesRW + copy_b) +
                           held * 2.0 * grad_bytes_);
  }

  // ZeRO-Offload: the Adam step runs on the host's CPUs instead.
  OffloadStep offload_step;
  if (c.offload_optimizer) {
    offload_step = OffloadStepSeconds(c, psi, nd, n_mb, L_s * (lt.bwd_compute + lt.recompute));
    opt_s = offload_step.cpu_adam_s;
  }

  // CPU activation offloading: per micro-batch, the offloaded layers'
  // activations go to the host behind the forward of the layers after them
  // and come back behind the backward, on the copy engines; what the link
  // cannot move in that time is exposed.
  double act_offload_s = 0;
  if (c.offload_activation_layers > 0) {
    const double n = std::min(c.offload_activation_layers, m.layers);
    const double link = cluster_.HostLinkGBps() * 1e9;
    const double copy = n * lt.act_bytes / link;
    act_offload_s =
        n_mb * (std::max(0.0, copy - (m.layers - 1.0) * lt.fwd_compute) +
                std::max(0.0, copy - (m.layers - 1.0) * (lt.bwd_compute + lt.recompute)));
  }

  p.reason = p.memory.Verdict();
  p.fits = p.reason == Reason::kOk;
  p.evidence_steps = evidence_steps_;
  p.uncertainty = Uncertainty();
  // DeepEP/HybridEP across NVLink domains: the calibration rows that run it
  // are predicted worse than the rest, so its band is theirs.
  if (dedup_band_ && terms.ep_domains > 1 &&
      (c.moe_dispatcher == MoeDispatcher::kDeepEp ||
       c.moe_dispatcher == MoeDispatcher::kHybridEp)) {
    p.feature_band = fw_.dedup_across_domains_uncertainty;
    p.uncertainty = std::sqrt(p.uncertainty * p.uncertainty + p.feature_band * p.feature_band);
  }

  // --- Time and breakdown: the critical stage's per-micro-batch terms × n_mb;
  // the rest of the pipeline is bubble.
  TimeBreakdown& br = p.breakdown;
  const int M_s = sched.critical_moe_layers;
  if (M_s > 0 || (last_crit && m.mtp_layers > 0)) {
    // Mixture of experts: the critical stage's dense and MoE layers apart; the
    // MTP modules are in crit_extra (their time counted as compute).
    const double D_s = L_s - M_s;
    const double moe_stall =
        sched.moe_time - (sched.moe_compute + sched.moe_layer_comm + sched.moe_comm);
    br.compute_s = n_mb * (D_s * layer_compute + M_s * sched.moe_compute + crit_extra);
    br.recompute_s = n_mb * (D_s * lt.recompute + M_s * sched.moe_recompute);
    br.comm_ep_s = n_mb * M_s * sched.moe_comm;
    br.host_s = n_mb * (D_s * host_stall + M_s * moe_stall);
  } else {
    br.compute_s = n_mb * (L_s * layer_compute + crit_extra);
    br.recompute_s = n_mb * L_s * lt.recompute;
    br.host_s = n_mb * L_s * host_stall;
  }
  // MoE layers without shared experts keep the attention block's TP collectives only.
  const double tp_layers = L_s - M_s * (1.0 - sched.moe_tp_share);
  br.comm_x_s = n_mb * tp_layers * lt.comm_x;
  br.comm_y_s = n_mb * (tp_layers * lt.comm_y + (last_crit ? logits_comm : 0.0));
  br.comm_z_s = n_mb * ((L_s - M_s) * lt.comm_z + M_s * sched.moe_comm_z);
  br.comm_cp_s = n_mb * L_s * lt.comm_cp;
  br.offload_s = n_mb * L_s * lt.offload;
  br.comm_data_s = comm_data;
  br.comm_pp_s = comm_pp;
  br.optimizer_s = opt_s;
  const double accounted = br.compute_s + br.comm_x_s + br.comm_y_s + br.comm_z_s + br.comm_cp_s +
                           br.offload_s + br.host_s + zero3_in_pipeline + br.comm_ep_s;
  br.bubble_s = std::max(0.0, pipeline - accounted);
  br.offload_s += offload_step.copies_s + act_offload_s;
  p.iteration_time_s = pipeline + comm_pp + (comm_data - zero3_in_pipeline) + opt_s +
                       offload_step.copies_s + act_offload_s;

  const double tokens = static_cast<double>(training_.global_batch) * s;
  // Hardware FLOPs in the model's convention: the counted core again for
  // selective recompute, every counted forward but the logits for full.
  double hw_flops = model_flops_;
  if (c.recompute == Recompute::kSelective) {
    hw_flops += ExecutedFlopsPerIteration(c) - executed_flops_[static_cast<int>(Recompute::kNone)];
    if (SelectiveModules(c) & kRcCoreAttn) {
      // The core in the model's convention, not the executed triangle.
      const bool fused = training_.attention == Attention::kFlash;
      hw_flops += tokens * (m.AttentionCoreFlopsPerToken(training_.seq_len, !m.plain_dense()) -
                            m.AttentionCoreFlopsPerToken(training_.seq_len, /*causal=*/fused));
    }
  }
  if (c.recompute == Recompute::kFull) hw_flops += model_flops_ / 3.0 - 2.0 * h * m.vocab * tokens;
  const double per_gpu_s = p.iteration_time_s * gpus_ * 1e12;
  p.tokens_per_s = tokens / p.iteration_time_s;
  p.model_tflops_per_gpu = model_flops_ / per_gpu_s;
  p.hardware_tflops_per_gpu = hw_flops / per_gpu_s;
  p.executed_tflops_per_gpu = ExecutedFlopsPerIteration(c) / per_gpu_s;
  p.mfu = p.model_tflops_per_gpu * 1e12 / peak_flops_;
  p.hfu = p.executed_tflops_per_gpu * 1e12 / peak_flops_;
  p.flops_convention = m.FlopsConvention();
  // Ranked by the pessimistic edge; above the best published MFU for this
  // GPU and precision the prediction is flagged and ranked as if at it.
  p.published_mfu_ceiling = cluster_.gpu.PublishedMfuCeiling(training_.precision);
  p.mfu_vs_ceiling = p.mfu * ceiling_mfu_scale_;
  p.above_published_mfu =
      p.published_mfu_ceiling > 0 && p.mfu_vs_ceiling > p.published_mfu_ceiling;
  p.pessimistic_time_s = p.iteration_time_s * (1.0 + p.uncertainty);
  if (p.above_published_mfu) {
    p.pessimistic_time_s = std::max(p.pessimistic_time_s, p.iteration_time_s * p.mfu_vs_ceiling /
                                                              p.published_mfu_ceiling);
  }
  return p;
}

void CostModel::CountExecutedFlops() {
  const ModelSpec& m = model_;
  const int s = training_.seq_len;
  const bool fused = training_.attention == Attention::kFlash;
  const double tokens = static_cast<double>(training_.global_batch) * s;
  const double core = m.AttentionCoreFlopsPerToken(s, /*causal=*/fused);
  const double linear = m.ForwardFlopsPerToken(s) - m.AttentionCoreFlopsPerToken(s, !m.plain_dense());
  const double logits = 2.0 * m.hidden * static_cast<double>(m.vocab) * (1.0 + m.mtp_layers);
  const double core_bwd = fused ? cost::kFlashBwdFlopRatio : 2.0;
  const double none = tokens * (3.0 * linear + (1.0 + core_bwd) * core);
  executed_flops_[static_cast<int>(Recompute::kNone)] = none;
  executed_flops_[static_cast<int>(Recompute::kSelective)] = none + tokens * core;
  executed_flops_[static_cast<int>(Recompute::kFull)] = none + tokens * (linear - logits + core);
}

uint8_t CostModel::SelectiveModules(const ParallelConfig& c) const {
  return planner::SelectiveModules(c, fw_.support);
}

double CostModel::ExecutedFlopsPerIteration(const ParallelConfig& c) const {
  if (c.recompute != Recompute::kSelective) return ExecutedFlopsPerIteration(c.recompute);
  const ModelSpec& m = model_;
  const unsigned modules = SelectiveModules(c);
  const double tokens = static_cast<double>(training_.global_batch) * training_.seq_len;
  const bool fused = training_.attention == Attention::kFlash;
  // Forward FLOPs per token of what the modules rerun, summed over the layers.
  double per_token = 0;
  if (modules & kRcCoreAttn) per_token += m.AttentionCoreFlopsPerToken(training_.seq_len, fused);
  if (modules & kRcMlp) per_token += 2.0 * m.DenseMlpParams() * m.dense_layer_count();
  if ((modules & kRcMlaUpProj) && m.is_mla()) {
    const double a = m.heads, q_in = m.q_lora_rank > 0 ? m.q_lora_rank : m.hidden;
    per_token += 2.0 * m.layers *
                 (q_in * a * (m.qk_nope_head_dim + m.qk_rope_head_dim) +
                  static_cast<double>(m.kv_lora_rank) * a * (m.qk_nope_head_dim + m.v_head_dim));
  }
  if (m.is_moe()) {
    const double routed = 2.0 * m.top_k * static_cast<double>(m.ExpertParams());
    const double shared = 2.0 * static_cast<double>(m.SharedExpertParams());
    if (modules & kRcMoe) {
      per_token += (routed + shared) * m.moe_layer_count();
    } else if (modules & kRcSharedExperts) {
      per_token += shared * m.moe_layer_count();
    }
  }
  return executed_flops_[static_cast<int>(Recompute::kNone)] + tokens * per_token;
}

double CostModel::ExecutedShare(int seq_len) const {
  if (!model_.plain_dense() || training_.attention != Attention::kFlash) return 1.0;
  const double counted = model_.ForwardFlopsPerToken(seq_len);
  // The counted core covers both halves of the causal mask.
  const double skipped = model_.AttentionCoreFlopsPerToken(seq_len, /*causal=*/false) -
                         model_.AttentionCoreFlopsPerToken(seq_len, /*causal=*/true);
  return counted > 0 ? (counted - skipped) / counted : 1.0;
}

}  // namespace paratune::planner
