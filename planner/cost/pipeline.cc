// The pipeline-schedule term of the cost model: stage times (uneven stages
// included), the critical stage, the schedule's fill and drain (the bubble:
// 1F1B, interleaved, ZB-H1, ZB-V, DualPipeV) and the pipeline send/recv.
// docs/model.md describes every term and its source.
#include <algorithm>

#include "planner/cost/internal.h"
#include "planner/pipeline.h"

namespace paratune::planner {

using cost::Overlapped;
using topology::Collective;

// One micro-batch through this rank's layers, the critical stage and the
// 1F1B schedule of the iteration, given the layer's exposed times `lt`, its
// ZeRO-3 traffic, the stage split `st` and the logits' gather `logits_comm`.
CostModel::Schedule CostModel::PipelineSchedule(const ParallelConfig& c, const ComputeTerms& terms,
                                                const LayerTimes& lt, double zero3_layer,
                                                const StageLayers& st, int64_t n_mb, double T,
                                                double logits_comm) const {
  const ModelSpec& m = model_;
  const double e = act_bytes_;
  const double h = m.hidden;
  const double layer_compute = lt.fwd_compute + lt.bwd_compute + lt.recompute;
  const double layer_comm = lt.comm_x + lt.comm_y + lt.comm_z + lt.comm_cp + zero3_layer + lt.offload;
  // The host issues the layer's kernels while the GPU runs earlier ones; when
  // issuing takes longer (eager dispatch, small layers) the GPU waits. Full
  // recompute issues the forward again (a third of the kernels).
  // A full-iteration CUDA graph replays the step: the host issues nothing.
  const double host =
      c.cuda_graphs ? 0.0 : terms.host * (c.recompute == Recompute::kFull ? 4.0 / 3.0 : 1.0);
  const double layer_time = std::max(layer_compute + layer_comm, host);
  const double host_stall = layer_time - (layer_compute + layer_comm);
  // Mixture of experts: an MoE layer runs the same attention half, its MoE MLP
  // instead of the dense FC1/FC2, and the expert-parallel dispatch and combine
  // (planner/cost/moe.cc). Its compute: forward, backward (2× the GEMMs), and the
  // recompute of what the recompute choice drops.
  const StageMoe sm{terms.moe_layers_first, terms.moe_layers_middle, terms.moe_layers_last};
  double moe_compute = 0, moe_recompute = 0, moe_comm = 0, moe_time = 0;
  double moe_layer_comm = layer_comm, moe_tp_share = 1, moe_comm_z = lt.comm_z;
  if (m.is_moe()) {
    const double dense_mlp = terms.linear_fwd[2] + terms.linear_fwd[3] + terms.mlp_elem_fwd;
    const MoeMath moe = MoeLayerMath(c, terms, lt);
    moe_recompute = moe.recompute;
    moe_compute = moe.compute;
    moe_comm = MoeCommSeconds(c, terms, moe_compute);
    // The dropless dispatchers block the host until the token counts arrive,
    // once per MoE layer (Megatron-Core token_dispatcher.py:956-958 all-to-all,
    // fused_a2a.py:107-108 DeepEP, 415-417 and 559-562 HybridEP @d98e8a64), and
    // Transformer Engine's grouped linear takes the per-expert split sizes as a
    // host list (experts.py:915-916): the GPU's queue has drained when the host
    // starts issuing the experts' per-expert kernels, so that section takes the
    // longer of its GPU time and its issue time. Megatron's MoE README names
    // this regime (moe/README.md:254-263: kernel gaps the CPU cannot fill; more
    // micro-batch or CUDA graphs). A full-iteration graph issues nothing.
    const double experts_gpu = 3.0 * terms.moe_experts_fwd;
    const double experts_host = c.cuda_graphs ? 0.0 : terms.moe_expert_host;
    // The routed experts run no attention-TP collectives: the dispatcher moves
    // tokens over the expert groups (token_dispatcher.py:85-89, its tp group is
    // expt_tp @d98e8a64). Only shared experts gather the sequence-parallel
    // input and reduce-scatter their output over the attention's TP group, as
    // a dense MLP does (shared_experts.py:572-586). Without them an MoE layer
    // keeps the attention block's half of the layer's TP/SP collectives (the
    // two blocks move the same T·h bytes).
    moe_tp_share = m.shared_ffn_hidden > 0 ? 1.0 : 0.5;
    moe_layer_comm = layer_comm - (1.0 - moe_tp_share) * (lt.comm_x + lt.comm_y);
    if (const int efsdp = ExpertFsdpShards(c); efsdp > 1) {
      // FSDP2 (torchtitan): an MoE layer gathers its attention, router and
      // shared experts over dp_shard (gz) and its local experts over efsdp
      // (the experts' mesh, ep innermost), forward and again backward, and
      // reduce-scatters their gradients, in place of a dense layer's Z traffic.
      const double dense_w = static_cast<double>(m.MoeLayerDenseParams()) / c.tensor();
      const double expert_w = LocalExpertParamsPerLayer(c);
      const cost::SyncGroup fsdp = cost::FsdpGroup(c, fw_);
      const int sz = fsdp.stride, nz = fsdp.size, se = c.ep * c.etp;
      const double rs_bytes = fw_.costs.z_reduce_in_param_dtype > 0 ? param_bytes_ : grad_bytes_;
      const double ag = comm_.Seconds(Collective::kAllGather, sz, nz, dense_w * gather_bytes_) +
                        comm_.Seconds(Collective::kAllGather, se, efsdp, expert_w * gather_bytes_);
      const double rs = comm_.Seconds(Collective::kReduceScatter, sz, nz, dense_w * rs_bytes) +
                        comm_.Seconds(Collective::kReduceScatter, se, efsdp, expert_w * rs_bytes);
      const double fwd_w = lt.fwd_compute - dense_mlp + terms.moe_fwd;
      const double bwd_w = std::max(0.0, moe_compute - fwd_w);
      const double n_ag_b = c.recompute == Recompute::kFull ? 2.0 : 1.0;
      const double eta = fw_.costs.shard_overlap;
      // Under pipeline parallelism FSDP2 gathers once per step and reduces
      // after the last backward (as LayerCost's Z term).
      const bool per_step = fw_.costs.pp_keeps_unsharded > 0 && c.pp > 1;
      const double moe_z =
          per_step ? cost::ShardedTrafficExposed(ag, 0.0, 0.0, rs, fwd_w, bwd_w, c.oag,
                                                 /*defer_rs=*/false, eta) /
                         static_cast<double>(std::max<int64_t>(1, n_mb))
                   : cost::ShardedTrafficExposed(ag, ag, n_ag_b, rs, fwd_w, bwd_w, c.oag, c.ors, eta);
      moe_layer_comm += moe_z - lt.comm_z;
      moe_comm_z = moe_z;
    }
    moe_time = std::max(moe_compute + moe_layer_comm + moe_comm, host) +
               std::max(0.0, experts_host - experts_gpu);
  }
  // The MTP modules (last stage): a block like the last layer, the 2h×h projection
  // (fwd + bwd) and another logits pass.
  double mtp_time = 0;
  if (m.mtp_layers > 0) {
    const bool last_moe = m.is_moe_layer(m.layers - 1);
    mtp_time = m.mtp_layers *
               ((last_moe ? moe_time : layer_time) +
                3.0 * GemmSeconds(T, h / c.tensor(), 2.0 * h) * cluster_.corrections.compute +
                terms.logits_compute + logits_comm);
  }
  auto stage_time = [&](int layers, int moe_layers) {
    return moe_layers > 0 ? (layers - moe_layers) * layer_time + moe_layers * moe_time
                          : layers * layer_time;
  };
  // Stages may hold different layer counts (uneven pipelines): the slowest
  // stage sets the pace of the steady state. V schedules (ZB-V, DualPipeV) run
  // the first and the last stage on rank 0: it computes the embedding and the
  // loss, and the last rank neither.
  const bool vshape = VShaped(c.pp_schedule) && c.pp > 1;
  const double loss_work = terms.logits_compute + logits_comm + mtp_time;
  const double last = stage_time(st.last, sm.last) + (vshape ? 0.0 : loss_work);
  const double first = stage_time(st.first, sm.first) + terms.embed + (vshape ? loss_work : 0.0);
  const double middle = c.pp > 2 ? stage_time(st.middle, sm.middle) : 0.0;
  double stage_max = c.pp == 1 ? last + terms.embed : std::max({first, last, middle});
  const double stage_avg = (stage_time(m.layers, m.moe_layer_count()) + terms.logits_compute +
                            logits_comm + terms.embed + mtp_time) /
                           c.pp;
  // Layers of the critical stage and the extra work it carries.
  double L_s = st.last;
  int M_s = sm.last;  // of which MoE layers
  double crit_extra = terms.logits_compute + mtp_time;
  bool last_crit = true;
  if (c.pp == 1) {
    crit_extra = terms.logits_compute + terms.embed + mtp_time;
  } else if (vshape && first >= last && first >= middle) {
    L_s = st.first;
    M_s = sm.first;
    crit_extra = terms.logits_compute + terms.embed + mtp_time;
  } else if (vshape && middle >= last) {
    L_s = st.middle;
    M_s = sm.middle;
    crit_extra = 0;
    last_crit = false;
  } else if (vshape) {
    crit_extra = 0;
    last_crit = false;
  } else if (first > last && first >= middle) {
    L_s = st.first;
    M_s = sm.first;
    crit_extra = terms.embed;
    last_crit = false;
  } else if (middle > last) {
    L_s = st.middle;
    M_s = sm.middle;
    crit_extra = 0;
    last_crit = false;
  }

  // n_mb slots at the slowest stage plus the fill and drain: (pp − 1)/vpp
  // slots for 1F1B (Narayanan 2021 §2.2; interleaving divides the bubble by
  // vpp); the zero-bubble schedules fill part of it with the weight-gradient
  // passes, by the ratio of their published bubble to 1F1B's
  // (planner/pipeline.h PipelineBubble) for this layer's forward, input-
  // gradient (with recompute) and weight-gradient (the weight GEMMs, as many
  // FLOPs as the forward GEMMs) times.
  double bubble = (c.pp - 1) * stage_avg / c.vpp;
  if (c.pp_schedule != PpSchedule::k1F1B) {
    const double w = terms.gemm_fwd;
    const double b = std::max(0.0, lt.bwd_compute - w) + lt.recompute;
    bubble = (c.pp - 1) * stage_avg *
             BubbleRelativeTo1F1B(c.pp_schedule, c.pp, c.vpp, lt.fwd_compute, b, w);
  }
  const double pipeline = n_mb * stage_max + bubble;

  // Pipeline send/recv: activations forward, gradients backward, vpp times per
  // micro-batch with interleaving; scatter/gather over the tensor group. With
  // overlap_p2p the transfers run beside compute (still holding SMs).
  double comm_pp = 0;
  if (c.pp > 1) {
    const double one = comm_.Seconds(Collective::kSendRecv, c.Stride(Dim::kPp), 2, T * h * e / c.gy);
    const double total = 2.0 * c.vpp * n_mb * one;
    comm_pp = c.overlap_p2p ? Overlapped(total, n_mb * L_s * layer_compute) : total;
  }

  return Schedule{.layer_compute = layer_compute,
                  .host_stall = host_stall,
                  .critical_layers = L_s,
                  .critical_extra = crit_extra,
                  .last_critical = last_crit,
                  .pipeline = pipeline,
                  .comm_pp = comm_pp,
                  .critical_moe_layers = M_s,
                  .moe_compute = moe_compute,
                  .moe_recompute = moe_recompute,
                  .moe_comm = moe_comm,
                  .moe_time = moe_time,
                  .layer_comm = layer_comm,
                  .moe_layer_comm = moe_layer_comm,
                  .moe_tp_share = moe_tp_share,
                  .moe_comm_z = moe_comm_z};
}

}  // namespace paratune::planner
