// The compute term of the cost model: GEMMs on the GPU's efficiency curve,
// attention, memory-bound element-wise kernels, the logits and the embedding
// per micro-batch (CostModel::Compute), and the parameters a GPU holds.
// docs/model.md describes every term and its source.
#include <algorithm>
#include <cmath>

#include "planner/cost/internal.h"
#include "planner/memory.h"

namespace paratune::planner {

double cost::FlashShapeFactor(const topology::GpuSpec& g, double head_dim, double s_q) {
  double f = 1.0;
  if (g.flash_head_dim_half > 0) {
    f *= (head_dim / (head_dim + g.flash_head_dim_half)) / (128.0 / (128.0 + g.flash_head_dim_half));
  }
  if (g.flash_seq_half > 0) f *= (s_q / (s_q + g.flash_seq_half)) / (4096.0 / (4096.0 + g.flash_seq_half));
  return std::min(1.1, f);
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
double CostModel::GemmSeconds(double m, double n, double k, bool high_precision) const {
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
  double curve_eff = 0, peak = peak_flops_, ceiling = gemm_ceiling_;
  if (high_precision && training_.precision == topology::Precision::kFp8) {
    // The bf16 curve at the bf16 peak (linear interpolation in log2 size).
    peak = hp_peak_flops_;
    ceiling = hp_gemm_ceiling_;
    const size_t np = hp_curve_eff_.size();
    const double lx = std::log2(m * n * k) / 3.0;
    curve_eff = np == 0 ? 1.0 : hp_curve_eff_[np - 1];
    if (np > 0 && lx <= hp_curve_log2_size_[0]) curve_eff = hp_curve_eff_[0];
    for (size_t i = 1; i < np && lx > hp_curve_log2_size_[0]; ++i) {
      if (lx <= hp_curve_log2_size_[i]) {
        const double w = (lx - hp_curve_log2_size_[i - 1]) /
                         (hp_curve_log2_size_[i] - hp_curve_log2_size_[i - 1]);
        curve_eff = hp_curve_eff_[i - 1] + w * (hp_curve_eff_[i] - hp_curve_eff_[i - 1]);
        break;
      }
    }
  } else {
    curve_eff = GemmEfficiency(m, n, k) * recipe_factor_;
  }
  // Never above the best measured GEMM of this GPU and precision (GpuSpec::
  // gemm_ceilings): the curve and its sustained fraction are fitted, that is
  // measured.
  const double eff =
      std::min(curve_eff * k_factor * cluster_.gpu.gemm_sustained_fraction, ceiling);
  const double t_compute = flops / (peak * eff);
  const double t_memory = StreamSeconds(act_bytes_ * (m * k + k * n + m * n));
  return std::max(t_compute, t_memory);
}

// Bytes a recipe's quantisation kernels move for one linear layer per
// micro-batch, forward and backward: `in` input elements (T·k), `grad` output
// gradient elements (T·n), `w` weight elements (k·n). Per-tensor and
// blockwise FP8 (Transformer Engine): the input is read for its scale and
// cast (2 + 2 read, 1 written) and transposed for the wgrad GEMM (1 + 1, FP8
// GEMMs take TN layouts: cuBLASLt documentation), likewise the gradient; the
// weight cast (2 read, 1 written) is charged per micro-batch, an upper bound.
// MXFP8: one pass writes the row- and column-wise copies with their E8M0
// scales (2 read, 1 + 1 written; no transpose: TE's MXFP8 quantize kernel),
// weights arrive quantised (fp8_param_gather). NVFP4: the row-wise copy (2
// read, 0.5 written) and the Hadamard-transformed column-wise copy for the
// wgrad GEMM (2 read, 0.5 written; NVIDIA's NVFP4 pretraining recipe), the
// weights 2D-block quantised (2 read, 0.5 written).
double cost::RecipeCastBytes(topology::Recipe r, double in, double grad, double w) {
  switch (r) {
    case topology::Recipe::kMxfp8:
      return 4.0 * (in + grad);
    case topology::Recipe::kNvfp4:
      return 5.0 * (in + grad) + 2.5 * w;
    default:
      return 7.0 * (in + grad) + 3.0 * w;
  }
}

CostModel::ComputeTerms CostModel::Compute(const ParallelConfig& c) const {
  ComputeTerms t = DenseCompute(c);
  CompleteCompute(c, &t);
  return t;
}

CostModel::ComputeTerms CostModel::DenseCompute(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  ComputeTerms t;
  const double e = act_bytes_;
  const double h = m.hidden, a = m.heads, d = attn_head_dim_;
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
  const double kn[4][2] = {{h, attn_qkv_n_}, {attn_proj_k_, h}, {h, f * g}, {f, h}};
  const bool fp8 = training_.precision == topology::Precision::kFp8;
  double fp8_cast_bytes = 0, mlp_cast_bytes = 0;
  for (int i = 0; i < 4; ++i) {
    const bool transposed = (i % 2) == 1;
    const double k_loc = kn[i][0] / (transposed ? gy : gx);
    const double n_loc = kn[i][1] / (transposed ? gx : gy);
    t.linear_fwd[i] = GemmSeconds(T, n_loc, k_loc);
    t.gemm_fwd += t.linear_fwd[i];
    if (!transposed) t.normal_fwd += t.linear_fwd[i];
    if (fp8) {
      // Quantisation traffic (RecipeCastBytes): the GEMM inputs and output
      // gradients cast from bf16 in the recipe's format, and its weights.
      const double cast =
          cost::RecipeCastBytes(training_.recipe, T * k_loc, T * n_loc, k_loc * n_loc);
      fp8_cast_bytes += cast;
      if (i >= 2) mlp_cast_bytes += cast;
    }
  }

  // Attention core. Heads split over Y (and over the Ulysses group), the query
  // sequence over a ring-CP group; replicated across X.
  const double heads_loc = a / gy / (ulysses ? c.cp : 1);
  const double s_q = ulysses ? s : s / c.cp;
  const double scores = b * heads_loc * s_q * s;  // score elements per GPU
  if (training_.attention == Attention::kFlash) {
    const double exec = cost::kCausalFraction * 4.0 * scores * d;
    const double shape = cost::FlashShapeFactor(cluster_.gpu, d, s_q) * fw_.costs.attention_efficiency;
    t.attn_fwd = exec / (attn_peak * cluster_.gpu.flash_fwd_efficiency * shape);
    t.attn_bwd = cost::kFlashBwdFlopRatio * exec / (attn_peak * cluster_.gpu.flash_bwd_efficiency * shape);
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
  // Of which the dense MLP's (its activation and FC1/FC2 casts): an MoE layer
  // runs its experts' instead (planner/cost/moe.cc).
  t.mlp_elem_fwd = StreamSeconds(elem_traffic_ * act_fn + mlp_cast_bytes / 3.0);

  // Last stage: logits GEMM (vocabulary split over the tensor ranks) forward and
  // its two backward GEMMs, and the fp32 cross-entropy (logits written, read and
  // their gradient written: 3 × 4 bytes). First stage: the embedding lookup and
  // its gradient scatter (memory-bound).
  const double V = m.vocab;
  t.logits_compute = 3.0 * GemmSeconds(T, V / c.tensor(), h / gx, /*high_precision=*/true) +
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
  // Per-op selective checkpointing (framework preset selective_per_op) keeps
  // what its op policy saves instead of Korthikanti's selective set.
  if (fw_.costs.selective_per_op > 0) {
    t.act_bytes[static_cast<int>(Recompute::kSelective)] =
        PerOpSacActivationBytes(m, e, training_.seq_len, c);
  }
  t.act_bytes_full = t.act_bytes[0];
  // Selective recompute by module: what each takes off a dense layer (an MoE
  // layer's attention half is the same; MoeCompute adds its own modules).
  const auto saved = DenseRecomputeSavings(m, flash, e, training_.seq_len, c, fp8);
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    t.rc_module[i].dense_bytes = t.rc_module[i].moe_bytes = saved[i];
  }
  cost::ModuleTerms(&t, kRcMlp).moe_bytes = 0;  // MoE layers have no dense MLP
  return t;
}

void CostModel::CompleteCompute(const ParallelConfig& c, ComputeTerms* t) const {
  if (model_.is_moe()) MoeCompute(c, t);  // applies the compute correction itself
  ApplyLayout(c, t);
  // Calibration (paratune calibrate): measured runs rescale the compute side.
  const double fc = cluster_.corrections.compute, fm = cluster_.corrections.memory_bound;
  for (double& x : t->linear_fwd) x *= fc;
  t->gemm_fwd *= fc;
  t->normal_fwd *= fc;
  t->attn_fwd *= fc;
  t->attn_bwd *= fc;
  t->elem_fwd *= fc;
  t->mlp_elem_fwd *= fc;
  t->logits_compute *= fc;
  t->kernel_fixed *= fc;
  t->embed *= fm;
  ModuleRecomputeSeconds(c, t);
}

void CostModel::ModuleRecomputeSeconds(const ParallelConfig& c, ComputeTerms* t) const {
  const ModelSpec& m = model_;
  const double e = act_bytes_, h = m.hidden;
  const double T = static_cast<double>(c.mbs) * training_.seq_len / c.cp;
  const double tok_rep = c.sp ? T / c.gy : T;
  auto at = [t](RecomputeModule mod) -> ComputeTerms::ModuleRecompute& {
    return cost::ModuleTerms(t, mod);
  };
  // The attention half is the same in dense and MoE layers.
  at(kRcCoreAttn).dense_s = at(kRcCoreAttn).moe_s = t->attn_fwd;
  // A norm reads its input and writes its output; MLA's input norm is its own
  // module, and an MoE layer's pre-MLP norm (the router's input).
  const double norm = StreamSeconds(2.0 * e * tok_rep * h / c.gx) * cluster_.corrections.compute;
  at(kRcLayerNorm).dense_s = m.is_mla() ? norm : 0.0;
  at(kRcLayerNorm).moe_s = at(kRcLayerNorm).dense_s + norm;
  at(kRcMlp).dense_s = t->linear_fwd[2] + t->linear_fwd[3] + t->mlp_elem_fwd;
  if (m.is_mla()) {
    // The up-projections from the latents (from the hidden state when queries
    // have no latent).
    const double a = m.heads, gy = c.gy;
    const double q_in = m.q_lora_rank > 0 ? m.q_lora_rank : h;
    const double up = GemmSeconds(T, a * (m.qk_nope_head_dim + m.qk_rope_head_dim) / gy, q_in) +
                      GemmSeconds(T, a * (m.qk_nope_head_dim + m.v_head_dim) / gy, m.kv_lora_rank);
    at(kRcMlaUpProj).dense_s = at(kRcMlaUpProj).moe_s = up * cluster_.corrections.compute;
  }
}

double CostModel::SelectiveRecomputeSeconds(const ParallelConfig& c, const ComputeTerms& t,
                                            bool moe_layer) const {
  unsigned modules = SelectiveModules(c);
  if (moe_layer && (modules & kRcMoe)) modules &= ~unsigned{kRcMoeAct | kRcSharedExperts};
  double s = 0;
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if (modules & (1u << i)) s += moe_layer ? t.rc_module[i].moe_s : t.rc_module[i].dense_s;
  }
  return s;
}

void CostModel::DenseLayerMath(const ParallelConfig& c, const ComputeTerms& t,
                               LayerTimes* out) const {
  // A third of a layer's kernels run in the forward, two thirds in the backward.
  out->fwd_compute = t.gemm_fwd + t.attn_fwd + t.elem_fwd + t.kernel_fixed / 3.0;
  out->bwd_compute = 2.0 * t.gemm_fwd + t.attn_bwd + 2.0 * t.elem_fwd + 2.0 * t.kernel_fixed / 3.0;
  out->recompute = c.recompute == Recompute::kFull
                       ? out->fwd_compute
                       : SelectiveRecomputeSeconds(c, t, /*moe_layer=*/false);
}

CostModel::MoeMath CostModel::MoeLayerMath(const ParallelConfig& c, const ComputeTerms& t,
                                           const LayerTimes& dense) const {
  const double dense_mlp = t.linear_fwd[2] + t.linear_fwd[3] + t.mlp_elem_fwd;
  MoeMath moe;
  moe.recompute = c.recompute == Recompute::kSelective
                      ? SelectiveRecomputeSeconds(c, t, /*moe_layer=*/true)
                      : dense.recompute;
  if (c.recompute == Recompute::kFull) moe.recompute += t.moe_fwd - dense_mlp;
  moe.compute =
      dense.fwd_compute + dense.bwd_compute - 3.0 * dense_mlp + 3.0 * t.moe_fwd + moe.recompute;
  return moe;
}

double CostModel::ComputeFloorPerMicroBatch(const ParallelConfig& c, const ComputeTerms& t) const {
  const ModelSpec& m = model_;
  LayerTimes dense;
  DenseLayerMath(c, t, &dense);
  const double layer = dense.fwd_compute + dense.bwd_compute + dense.recompute;
  const int moe_layers = m.is_moe() ? m.moe_layer_count() : 0;
  double moe = 0;
  if (moe_layers > 0) {
    // An MoE layer's math and its exposed dispatch and combine, at the least
    // of with and without the EP all-to-all overlap (the search sets it later).
    const double math = MoeLayerMath(c, t, dense).compute;
    ParallelConfig overlapped = c;
    overlapped.moe_a2a_overlap = !c.moe_a2a_overlap;
    moe = math + std::min(MoeCommSeconds(c, t, math), MoeCommSeconds(overlapped, t, math));
  }
  // PipelineSchedule's stages: every layer, the logits on the stage with the
  // loss, each MTP module's block (the last layer's kind) and logits beside it.
  const bool last_moe = m.is_moe() && m.is_moe_layer(m.layers - 1);
  const double total = (m.layers - moe_layers) * layer + moe_layers * moe +
                       (1.0 + m.mtp_layers) * t.logits_compute +
                       m.mtp_layers * (last_moe ? moe : layer);
  return total / c.pp;
}

CostModel::LayoutTerms CostModel::LayoutTermsOf(const ParallelConfig& c) const {
  LayoutTerms l;
  l.psi = ParamsBeforeData(c);
  l.stages = Stages(c);
  if (!model_.is_moe()) return l;
  l.expert_psi = ExpertParamsHeld(c);
  const StageMoe sm = MoeLayersPerStage(c);
  l.moe_layers_first = sm.first;
  l.moe_layers_middle = sm.middle;
  l.moe_layers_last = sm.last;
  return l;
}

void CostModel::ApplyLayout(const LayoutTerms& l, ComputeTerms* t) const {
  t->psi = l.psi;
  t->stages = l.stages;
  if (!model_.is_moe()) return;
  t->expert_psi = l.expert_psi;
  t->moe_layers_first = l.moe_layers_first;
  t->moe_layers_middle = l.moe_layers_middle;
  t->moe_layers_last = l.moe_layers_last;
}

cost::NonLayerParams cost::NonLayerParamsOf(const ModelSpec& m, const ParallelConfig& c) {
  const double t = c.tensor();
  const double emb = static_cast<double>(m.vocab) * m.hidden / t;
  const double pos = static_cast<double>(m.PositionParams()) / c.gx;
  NonLayerParams p;
  p.first = emb + pos;
  p.last = (!m.tied_embeddings || c.pp > 1 ? emb : 0.0) + static_cast<double>(m.NormParams());
  return p;
}

CostModel::StageParams CostModel::ParamsPerStage(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  const double t = c.tensor();
  const double h = m.hidden;
  const StageLayers st = Stages(c);
  const double shards = cost::FsdpGroup(c, fw_).size;
  const double layer_shard = ((layer_params_ - norm_params_) / t + norm_params_) / shards;
  const cost::NonLayerParams outside = cost::NonLayerParamsOf(m, c);
  const double first_extra = outside.first, last_extra = outside.last;
  // MoE layers hold, besides their experts (ExpertParamsHeld), the attention, the
  // shared experts and the router, split over the tensor ranks like a dense block.
  double moe_delta = 0, mtp_extra = 0;
  StageMoe sm;
  if (m.is_moe()) {
    const double moe_dense = static_cast<double>(m.MoeLayerDenseParams() + 2 * m.NormParams());
    moe_delta = ((moe_dense - norm_params_) / t + norm_params_) / shards - layer_shard;
    sm = MoeLayersPerStage(c);
    // The MTP modules sit on the last stage: a block like the last layer, the 2h×h
    // projection and three norms (their experts are in ExpertParamsHeld).
    if (m.mtp_layers > 0) {
      const bool last_moe = m.is_moe_layer(m.layers - 1);
      mtp_extra = m.mtp_layers * ((last_moe ? layer_shard + moe_delta : layer_shard) +
                                  (2.0 * h * h / t + 3.0 * m.NormParams()) / shards);
    }
  }
  auto stage = [&](int layers, int moe_layers) {
    return layers * layer_shard + moe_layers * moe_delta;
  };
  StageParams p;
  if (c.pp == 1) {
    p.first = stage(m.layers, sm.first) + (first_extra + last_extra) / shards + mtp_extra;
    p.middle = p.last = p.first;
    return p;
  }
  p.first = stage(st.first, sm.first) + first_extra / shards;
  p.last = stage(st.last, sm.last) + last_extra / shards + mtp_extra;
  p.middle = stage(st.middle, sm.middle);
  return p;
}

double CostModel::ParamsBeforeData(const ParallelConfig& c) const {
  const StageParams p = ParamsPerStage(c);
  return std::max({p.first, p.last, p.middle});
}

}  // namespace paratune::planner
