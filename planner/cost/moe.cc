// The mixture-of-experts terms of the cost model (docs/model.md "Mixture of
// experts" gives each term and its source). The shapes come from planner/moe.h.
#include "planner/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/cost/internal.h"
#include "planner/memory.h"

namespace paratune::planner {
namespace {

using cost::kOverlapSmShare;
using topology::Collective;

// MoE layers among model layers [begin, end), in closed form (the search
// asks per configuration): layer i is MoE when i >= first_dense_layers and
// step divides i + 1 (ModelSpec::is_moe_layer), so the count is the
// multiples of step in [lo + 1, hi].
int MoeLayersIn(const ModelSpec& m, int begin, int end) {
  if (!m.is_moe()) return 0;
  const int lo = std::max({0, begin, m.first_dense_layers}), hi = std::min(end, m.layers);
  if (hi <= lo) return 0;
  const int step = std::max(1, m.moe_layer_step);
  return hi / step - lo / step;
}

}  // namespace

CostModel::StageMoe CostModel::MoeLayersPerStage(const ParallelConfig& c) const {
  StageMoe s;
  const ModelSpec& m = model_;
  if (!m.is_moe()) return s;
  // The memory check asks per configuration, for a handful of layouts in a
  // row: one entry per thread, keyed by everything the count reads (the
  // model's layer pattern, the split rule and the pipeline fields).
  struct Key {
    int layers, first_dense, step, mtp, pp, vpp, first, last, embedding, loss;
    PpSplit split;
    PpSchedule schedule;
    bool operator==(const Key&) const = default;
  };
  thread_local Key last_key{-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, PpSplit::kMegatron, PpSchedule::k1F1B};
  thread_local StageMoe last_moe;
  const Key key{m.layers, m.first_dense_layers, m.moe_layer_step, m.mtp_layers, c.pp, c.vpp,
                c.first_stage_layers, c.last_stage_layers, c.pp_embedding_layers, c.pp_loss_layers,
                fw_.support.pp_split, c.pp_schedule};
  if (key == last_key) return last_moe;
  const StageLayers st = Stages(c);
  if (c.pp <= 1) {
    s.first = s.last = m.moe_layer_count();
  } else {
    s.first = MoeLayersIn(m, 0, st.first);
    s.last = MoeLayersIn(m, m.layers - st.last, m.layers);
    // The middle stages: the most MoE layers any of them holds.
    for (int k = 1; k + 1 < c.pp; ++k) {
      const int begin = st.first + (k - 1) * st.middle;
      s.middle = std::max(s.middle, MoeLayersIn(m, begin, begin + st.middle));
    }
  }
  last_key = key;
  last_moe = s;
  return s;
}

double CostModel::ExpertParamsHeld(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  if (!m.is_moe()) return 0;
  const StageMoe s = MoeLayersPerStage(c);
  // The MTP module's MoE block lives on the last stage (Megatron-Core places MTP
  // after the decoder's last layer).
  const int last_is_moe = m.is_moe_layer(m.layers - 1) ? 1 : 0;
  const int last = s.last + last_is_moe * m.mtp_layers;
  const int most = std::max({s.first, s.middle, last});
  const double local = static_cast<double>(m.experts) / c.ep;
  return most * local * static_cast<double>(m.ExpertParams()) / c.etp;
}

double CostModel::LocalExpertParamsPerLayer(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  if (!m.is_moe()) return 0;
  return static_cast<double>(m.experts) / c.ep * static_cast<double>(m.ExpertParams()) / c.etp;
}

int CostModel::ExpertFsdpShards(const ParallelConfig& c) const {
  if (!model_.is_moe() || cost::FsdpGroup(c, fw_).size <= 1 ||
      training_.framework != Framework::kTorchtitan) {
    return 1;
  }
  return std::max(1, c.expert_data() / std::max(1, c.gdata));
}

Reason CostModel::CheckMoeRules(const ParallelConfig& c) const {
  const ModelSpec& m = model_;
  if (!m.is_moe()) {
    return (c.ep > 1 || c.etp > 1) ? Reason::kExpertsNotDivisible : Reason::kOk;
  }
  // Megatron-Core: num_experts % EP == 0 (arguments.py:1655-1658 @d98e8a64); the
  // expert width splits over ETP like a TP-split FC1/FC2.
  if (m.experts % c.ep != 0 || m.moe_ffn_hidden % c.etp != 0) return Reason::kExpertsNotDivisible;
  if (m.shared_ffn_hidden % c.tensor() != 0) return Reason::kFfnNotDivisible;
  // world % (ETP·EP·PP) == 0 (parallel_state.py:874-884): the stage's ranks fold
  // into etp × ep × expert-data.
  if (c.expert_data() == 0) return Reason::kExpertGroupNotDivisible;
  return Reason::kOk;
}

void CostModel::MoeCompute(const ParallelConfig& c, ComputeTerms* t) const {
  const ModelSpec& m = model_;
  const double e = act_bytes_;
  const double h = m.hidden, g = m.gated_ffn ? 2.0 : 1.0;
  const double T = static_cast<double>(c.mbs) * training_.seq_len / c.cp;
  // Megatron-Core routes the sequence-parallel shard of each tensor rank; without
  // sequence parallelism every tensor rank routes the whole micro-batch.
  const double tokens = c.sp ? T / c.gy : T;
  const MoeLayerShape s = MoeShape(m, tokens, c.ep, c.etp, std::max(1.0, training_.moe_skew));
  const double fc = cluster_.corrections.compute;

  // Router: a (tokens × h)·(h × E) GEMM and its fp32 softmax/sigmoid and top-k
  // (read and write the fp32 scores: 8 bytes per score, a few passes).
  const double E = m.experts;
  const double router = GemmSeconds(tokens, E, h) + StreamSeconds(tokens * E * 4.0 * 4.0);
  // Permutation before the dispatch and its inverse after the combine: each
  // reads and writes every routed copy (Megatron's moe_permute_fusion kernels).
  // The all-to-all dispatcher permutes twice each way when a rank holds more
  // than one expert: into the all-to-all's rank order, then the received rows
  // by local expert, and back (token_dispatcher.py:660-679, 753-790, 803-822,
  // 890-900 @d98e8a64). DeepEP and HybridEP write the received rows in expert
  // order inside the dispatch kernel, one pass each way (:1001-1013,
  // :1225-1246).
  const double passes =
      c.moe_dispatcher == MoeDispatcher::kAllToAll && s.local_experts > 1 ? 2.0 : 1.0;
  const double permute = StreamSeconds(passes * 2.0 * 2.0 * s.copies * h * e);
  // The grouped GEMMs of the local experts, at the rows the most loaded rank
  // receives: FC1 (gate + up) and FC2 per expert. Small, ragged row counts run
  // at the GEMM curve's efficiency for their size (GpuSpec::gemm_efficiency).
  const double rows = s.rows_max;
  const double fc1 = GemmSeconds(rows, g * s.ffn_local, h);
  const double fc2 = GemmSeconds(rows, h, s.ffn_local);
  const double experts = s.local_experts * (fc1 + fc2);
  // The activation function over the local experts' rows (SwiGLU reads 2f, writes f).
  const double act_fn =
      StreamSeconds(elem_traffic_ * s.local_experts * rows * s.ffn_local * (g + 1.0) * e);
  // Shared experts: a dense MLP of width f_s, tensor-parallel like the attention.
  double shared = 0;
  if (m.shared_ffn_hidden > 0) {
    const double fs = m.shared_ffn_hidden / static_cast<double>(c.tensor());
    shared = GemmSeconds(T, g * fs, h) + GemmSeconds(T, h, fs) +
             StreamSeconds(elem_traffic_ * T * fs * (g + 1.0) * e);
  }
  // FP8 recipes quantise the expert GEMMs' inputs, output gradients and weights
  // as a dense layer's (a third charged to the forward, as in Compute()).
  double casts = 0;
  if (training_.precision == topology::Precision::kFp8) {
    const double rt = s.local_experts * rows, fl = s.ffn_local;
    casts =
        cost::RecipeCastBytes(training_.recipe, rt * h, rt * g * fl, s.local_experts * h * g * fl) +
        cost::RecipeCastBytes(training_.recipe, rt * fl, rt * h, s.local_experts * fl * h);
    if (m.shared_ffn_hidden > 0) {
      const double fs = m.shared_ffn_hidden / static_cast<double>(c.tensor());
      casts += cost::RecipeCastBytes(training_.recipe, T * h, T * g * fs, h * g * fs) +
               cost::RecipeCastBytes(training_.recipe, T * fs, T * h, fs * h);
    }
  }
  const double expert_casts = StreamSeconds(casts / 3.0);
  t->moe_fwd = fc * (router + permute + experts + act_fn + shared + expert_casts);
  t->moe_act_fn_fwd = fc * act_fn;
  t->moe_experts_fwd = fc * (experts + act_fn + expert_casts);
  t->moe_expert_host = s.local_experts * moe_host_s_per_local_expert_;

  // Dispatch and combine, forward.
  t->moe_a2a_fwd = 0;
  if (c.ep > 1) {
    t->ep_domains = c.ep / EpRanksPerDomain(c.ep, c.etp, cluster_.DomainGpus());
    t->moe_a2a_fwd = 2.0 * DispatchSeconds(c, c.moe_dispatcher, tokens, e);  // dispatch + combine
  }
  if (c.etp > 1) {
    // Expert tensor parallelism: the dispatched rows are gathered over the ETP
    // group and the expert outputs reduce-scattered back.
    const double buf = s.local_experts * s.rows_mean * h * e;
    t->moe_a2a_fwd += comm_.Seconds(Collective::kAllGather, 1, c.etp, buf) +
                      comm_.Seconds(Collective::kReduceScatter, 1, c.etp, buf);
  }

  // Activations an MoE layer keeps in place of the dense MLP's (the dense
  // layer's MLP share, DenseMlpActivationBytes, comes off): the router's input
  // in its own dtype, not FP8 (RouterGatingLinearFunction saves it before the
  // cast to the router dtype, moe_utils.py:1382) and fp32 scores; per routed
  // row the FC1 input, the FC1 output(s) that the weighted activation keeps
  // (the routing probabilities are applied there, experts.py:943-971, so the
  // combine's unpermute keeps nothing, token_dispatcher.py:891-899) and the
  // FC2 input; the shared experts' FC1/activation outputs. Under FP8 recipes
  // Transformer Engine's grouped linears keep their inputs as the 1-byte
  // quantised copies: Megatron-Core asks for the original bf16 input only for
  // FC2 under moe_act recompute and for FC1 under its CPU offload
  // (NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/moe/experts.py:273-284,
  // set_save_original_input). Selective recompute (recompute_modules moe_act)
  // drops the FC2 inputs and recomputes them (experts.py:269-272); full
  // recompute keeps only the layer input, as for a dense layer.
  const bool fp8 = training_.precision == topology::Precision::kFp8;
  const double in_b = fp8 ? 1.0 : e;
  const double rows_total = s.local_experts * rows;
  const double fs = m.shared_ffn_hidden / static_cast<double>(c.tensor());
  const double moe_keep = tokens * h * e + tokens * E * 4.0 +
                          rows_total * (in_b * h + e * g * s.ffn_local + in_b * s.ffn_local) +
                          T * (g * fs + fs) * e;
  const double moe_sel = moe_keep - rows_total * s.ffn_local * in_b;
  ParallelConfig rc = c;
  rc.recompute = Recompute::kNone;
  const double dense_mlp = DenseMlpActivationBytes(m, e, training_.seq_len, rc, fp8);
  t->moe_act_bytes[0] = std::max(0.0, t->act_bytes[0] - dense_mlp) + moe_keep;
  t->moe_act_bytes[1] = std::max(0.0, t->act_bytes[1] - dense_mlp) + moe_sel;
  t->moe_act_bytes[2] = t->act_bytes[2];
  // Megatron-Core's MoE recompute modules: moe_act drops the FC2 inputs
  // (experts.py:1019-1030); shared_experts the shared experts' saved tensors
  // (moe_layer.py:527-529); moe everything but the layer's input
  // (moe_layer.py:713-715); layernorm also the pre-MLP norm's output, which
  // the router and the shared experts keep (transformer_layer.py:523-527).
  auto at = [t](RecomputeModule mod) -> ComputeTerms::ModuleRecompute& {
    return cost::ModuleTerms(t, mod);
  };
  const double router_in = tokens * h * e;
  at(kRcMoeAct).moe_bytes = rows_total * s.ffn_local * in_b;
  at(kRcSharedExperts).moe_bytes = T * (g * fs + fs) * e;
  at(kRcMoe).moe_bytes = moe_keep - router_in;
  at(kRcLayerNorm).moe_bytes += router_in;
  at(kRcMoeAct).moe_s = t->moe_act_fn_fwd;
  at(kRcSharedExperts).moe_s = fc * shared;
  at(kRcMoe).moe_s = t->moe_fwd;
  // The dispatcher's send and receive buffers for one layer in flight.
  t->moe_buffer_bytes = c.ep > 1 ? 2.0 * s.copies * h * e : 0.0;
}

double CostModel::DispatchSeconds(const ParallelConfig& c, MoeDispatcher d, double tokens,
                                  double elem_bytes) const {
  if (c.ep <= 1) return 0;
  const ModelSpec& m = model_;
  const double h = m.hidden;
  // An EP group's ranks sit etp apart inside the stage (Megatron's expert rank
  // order etp-ep-edp). Inside one node the all-to-all runs at the NVLink
  // all-to-all bandwidth of the group's placement (GroupCostTable). When the
  // group spans nodes every rank sends the share of its buffer bound for other
  // nodes through its own NIC share at once (unlike a ring, where one link per
  // node crosses): that share over the per-GPU network bandwidth × the
  // cluster's all-to-all efficiency, beside the NVLink part.
  const int stride = c.etp;
  // "Node" here is the NVLink domain: on an NVL72 rack the all-to-all between
  // its trays runs over NVLink (GroupCostTable prices the domain), not the NICs.
  // The group splits into equal domain-local parts: the largest divisor of ep
  // that fits one domain (an EP group of 128 on NVL72 racks: two parts of 64).
  const int per_node = EpRanksPerDomain(c.ep, stride, cluster_.DomainGpus());
  if (d == MoeDispatcher::kAllGather) {
    // Every EP rank gathers the group's tokens; the outputs reduce-scatter back.
    return comm_.Seconds(Collective::kAllGather, stride, c.ep, tokens * h * elem_bytes * c.ep);
  }
  const double buffer =
      tokens * m.top_k * h * elem_bytes;  // the all-to-all's whole buffer per rank
  if (per_node >= c.ep) return comm_.Seconds(Collective::kAllToAll, stride, c.ep, buffer);
  const DispatchVolume v = DispatchBytes(m, d, tokens, c.ep, per_node, elem_bytes);
  const double intra_bytes = v.bytes - v.inter_node_bytes;
  const double intra = per_node > 1
                           ? comm_.Seconds(Collective::kAllToAll, stride, per_node,
                                           intra_bytes * per_node / std::max(1, per_node - 1))
                           : 0.0;
  // The deduplicating dispatchers' RDMA kernels reach their own fraction of
  // the NIC's line rate, by the nodes the group spans
  // (FrameworkCosts::dedup_nic_fraction: DeepEP's README figures over its
  // "~50 GB/s maximum" of a 400 Gb/s NIC), and each rank's GPU posts its
  // writes to every remote node at once (NVSHMEM), one hop's latency. The
  // all-to-all's share crosses at the collective's achievable rate (line rate
  // × nic_efficiency) × alltoall_efficiency, one latency per peer.
  const bool dedup = (d == MoeDispatcher::kDeepEp || d == MoeDispatcher::kHybridEp) &&
                     !fw_.costs.dedup_nic_fraction.empty();
  const double per_gpu_GBps = dedup ? cluster_.nics_per_node * cluster_.nic_GBps /
                                          cluster_.gpus_per_node *
                                          DedupNicFraction(fw_.costs, c.ep / per_node)
                                    : cluster_.InterNodeGBpsPerGpu() * cluster_.alltoall_efficiency;
  const double inter_Bps = per_gpu_GBps * 1e9 / std::max(1e-9, cluster_.corrections.communication);
  const double inter =
      inter_Bps > 0 ? v.inter_node_bytes / inter_Bps : std::numeric_limits<double>::infinity();
  const double latency = cluster_.inter_alpha_us * 1e-6 * (dedup ? 1 : c.ep);
  return std::max(intra, inter) + latency;
}

double CostModel::MoeCommSeconds(const ParallelConfig& c, const ComputeTerms& t,
                                 double window) const {
  if (!(t.moe_a2a_fwd > 0)) return 0;
  // Forward and backward each run a dispatch and a combine; full recompute, or
  // selective recompute of the whole MoE layer, runs the forward's again.
  const bool again = c.recompute == Recompute::kFull || (SelectiveModules(c) & kRcMoe);
  const double n = again ? 3.0 : 2.0;
  const double total = n * t.moe_a2a_fwd;
  if (!c.moe_a2a_overlap) return total;
  // Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm,
  // the DualPipe-style 1F1B schedule: DeepSeek-V3 §3.2.1) runs one
  // micro-batch's forward of a layer beside another's backward, each
  // communication beside one compute block (model_chunk_schedule_plan.py:243-245
  // @d98e8a64): comm stream combine_bwd | dispatch_fwd, dispatch_bwd |
  // combine_fwd against compute pre_dispatch_fwd | mlp_bwd, mlp_fwd |
  // pre_dispatch_bwd. A block shorter than its communication leaves the rest
  // exposed. `window` is the layer's whole compute: the MoE MLP's forward
  // (t.moe_fwd) and backward (2×), the attention half's (the rest) split 1:2.
  const double a = t.moe_a2a_fwd / 2.0;  // one dispatch or combine
  const double mlp = 3.0 * t.moe_fwd;
  const double attn = std::max(0.0, window - mlp), attn_fwd = attn / 3.0;
  const double pair = std::max(a, attn_fwd) + std::max(2.0 * a, mlp) + std::max(a, attn - attn_fwd);
  const double exposed = std::max(0.0, pair - attn - mlp);
  const double overlapped = std::max(0.0, 4.0 * a - exposed);
  // The recompute's extra forward communication runs outside the pairing.
  return exposed + kOverlapSmShare * overlapped + (total - 4.0 * a);
}

}  // namespace paratune::planner
