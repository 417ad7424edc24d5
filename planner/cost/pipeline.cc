// The pipeline-schedule term of the cost model: stage times (uneven stages
// included), the critical stage, the 1F1B fill and drain (the bubble) and the
// pipeline send/recv. A new schedule adds its stage arithmetic here.
// docs/model.md describes every term and its source.
#include <algorithm>

#include "planner/cost/internal.h"

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

  Schedule out;
  out.layer_compute = layer_compute;
  out.host_stall = host_stall;
  out.critical_layers = L_s;
  out.critical_extra = crit_extra;
  out.last_critical = last_crit;
  out.pipeline = pipeline;
  out.comm_pp = comm_pp;
  return out;
}

}  // namespace paratune::planner
