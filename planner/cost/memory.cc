// The memory term of the cost model: model states, activations, buffers and
// host memory per GPU (CostModel::MemoryWith), from the pure formulas of
// planner/memory.h. docs/model.md describes every term and its source.
#include <algorithm>

#include "planner/cost/internal.h"
#include "planner/memory.h"
#include "planner/pipeline.h"

namespace paratune::planner {

using cost::kDeepSpeedBucketElems;
using cost::kGiB;
using cost::SyncGroup;
using cost::WeightReplicas;

MemoryBreakdown CostModel::MemoryWith(const ParallelConfig& c, const ComputeTerms& t) const {
  const ModelSpec& m = model_;
  MemoryBreakdown mem;
  const double psi = t.psi;
  const double e = act_bytes_;
  const double h = m.hidden, V = m.vocab;
  const double T = static_cast<double>(c.mbs) * training_.seq_len / c.cp;
  const StageLayers st = Stages(c);
  const int64_t n_mb = training_.global_batch / (int64_t{c.mbs} * c.gz * c.gdata);

  // DeepSpeed ZeRO keeps gradients in the parameter dtype; Megatron fp32 main grads.
  const SyncGroup sync = WeightReplicas(c);
  // Frameworks whose sharded parameters are the fp32 master (PyTorch FSDP's
  // mixed precision) hold 4-byte shards and no separate master copy.
  const bool sharded = c.gz > 1 || c.zero >= 3;
  const double state_param_bytes =
      sharded && fw_.costs.sharded_params_are_master > 0 ? 4.0 : param_bytes_;
  const ModelStates all_states =
      ModelStateBytes(psi, sync.size, c.zero, c.distributed_optimizer, state_param_bytes,
                      c.zero >= 1 ? param_bytes_ : grad_bytes_);
  // ZeRO-Offload / Infinity: the offloaded states live in host memory.
  OffloadedStates placed{all_states, 0.0};
  if (c.offload_optimizer || c.offload_param) {  // off the hot path otherwise
    placed =
        OffloadStateBytes(all_states, psi, sync.size, c.zero, c.offload_optimizer, c.offload_param);
  }
  ModelStates states = placed.gpu;
  const int efsdp = ExpertFsdpShards(c);
  if (t.expert_psi > 0) {
    // Expert weights, gradients and optimizer states: replicated over the
    // expert-data group, which the distributed optimizer / ZeRO shards them over;
    // under FSDP2 sharded over efsdp (as the dense part over gz) and replicated
    // over the data-parallel replicas.
    const ModelStates experts =
        efsdp > 1 ? ModelStateBytes(t.expert_psi / efsdp, c.gdata, 0, false, state_param_bytes,
                                    grad_bytes_)
                  : ModelStateBytes(t.expert_psi, std::max(1, c.expert_data()), c.zero,
                                    c.distributed_optimizer, state_param_bytes,
                                    c.zero >= 1 ? param_bytes_ : grad_bytes_);
    states.params_bytes += experts.params_bytes;
    states.grads_bytes += experts.grads_bytes;
    states.optimizer_bytes += experts.optimizer_bytes;
  }
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
  // The schedule's activations relative to 1F1B's (planner/pipeline.h).
  const double interleave = ActivationFactor(c);
  const double embed_act = T * (h / c.gx) * (e + (m.dropout ? 1.0 : 0.0)) / (c.sp ? c.gy : 1.0);
  // MoE layers keep their own activations (routed copies after top-k expansion)
  // instead of the dense MLP's; MTP modules run on the last stage.
  const StageMoe sm{t.moe_layers_first, t.moe_layers_middle, t.moe_layers_last};
  const int rc = static_cast<int>(c.recompute);
  const double moe_act =
      m.is_moe() ? t.moe_act_bytes[rc] * (layer_act / std::max(1e-30, t.act_bytes[rc])) : 0.0;
  auto stage_act = [&](int layers, int moe_layers) {
    return moe_layers > 0 ? (layers - moe_layers) * layer_act + moe_layers * moe_act
                          : layers * layer_act;
  };
  const double mtp_act =
      m.mtp_layers > 0 ? m.mtp_layers * (m.is_moe_layer(m.layers - 1) ? moe_act : layer_act) : 0.0;
  // V schedules run the last stage, and so the loss, on the first rank.
  const bool vshape = c.pp > 1 && VShaped(c.pp_schedule);
  const double act_first = (stage_act(st.first, sm.first) + embed_act) * in_flight * interleave +
                           (vshape ? mtp_act + logits_act : 0.0);
  const double act_last = stage_act(st.last, sm.last) + (vshape ? 0.0 : mtp_act + logits_act);
  // The second stage holds one micro-batch fewer than the first (1F1B), with
  // the middle stages' layer count: it is the peak when uneven stages give the
  // first stage fewer layers.
  const double act_mid =
      c.pp > 2 ? stage_act(st.middle, sm.middle) * std::min<double>(c.pp - 1, n_mb) * interleave
               : 0.0;
  double act =
      c.pp == 1 ? act_first + logits_act + mtp_act : std::max({act_first, act_last, act_mid});
  // CPU activation offloading (pp = 1): the offloaded layers' activations
  // leave once copied; one layer's stays in flight each way.
  double host_offloaded_act = 0;
  if (c.offload_activation_layers > 0) {
    const double n = std::min(c.offload_activation_layers, m.layers);
    act -= std::max(0.0, n - 1.0) * layer_act;
    host_offloaded_act = n * layer_act;
  }
  if (c.recompute == Recompute::kFull) act += working;

  double buffers = cluster_.gpu.runtime_reserved_GiB * kGiB + t.moe_buffer_bytes;
  // Gathered weights in flight (the layer in use and prefetched ones) and, for
  // the framework's sharded execution, the layer's unsharded gradient before
  // its reduce-scatter.
  // Under FSDP2 an MoE layer's gathered block holds its local experts too.
  const double layer_block = std::max(
      layer_params_ / c.tensor(),
      efsdp > 1 ? static_cast<double>(m.MoeLayerDenseParams()) / c.tensor() +
                      LocalExpertParamsPerLayer(c)
                : 0.0);
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
  mem.first_stage_allocated_GiB = mem.last_stage_allocated_GiB = mem.peak_allocated_GiB;
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
  HostMemory(c,
             placed.host_bytes + host_act * st.first * in_flight * interleave + host_offloaded_act,
             &mem);
  return mem;
}

void CostModel::HostMemory(const ParallelConfig& c, double host_bytes, MemoryBreakdown* mem) const {
  // Every rank of the node keeps its own partitions and chunks in the node's
  // DRAM; the OS, page cache and the ranks' own process memory are left to
  // the headroom. Offloading needs both host figures: capacity to hold the
  // states, DRAM bandwidth to run the CPU Adam step.
  const bool offloads = c.offload_optimizer || c.offload_param || c.offload_activation_layers > 0;
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

}  // namespace paratune::planner
