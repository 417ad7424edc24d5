// The memory term of the cost model: model states, activations, buffers and
// host memory per GPU (CostModel::MemoryWith), from the pure formulas of
// planner/memory.h. docs/model.md describes every term and its source.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/strings.h"

#include "planner/cost/internal.h"
#include "planner/megatron_fsdp.h"
#include "planner/memory.h"
#include "planner/pipeline.h"
#include "topology/collective_algorithms.h"

namespace paratune::planner {

using cost::kGiB;
using cost::SyncGroup;
using cost::WeightReplicas;

namespace {

// The micro-batches of a stage's layers in flight on the last pipeline rank:
// 1 under 1F1B; under Megatron's interleaved schedule the last rank warms up
// (vpp − 1)·pp model-chunk micro-batches before its first backward
// (NVIDIA/Megatron-LM@d98e8a6 megatron/core/pipeline_parallel/schedules.py:964-965,
// microbatch_group_size_per_vp_stage = pp), each a 1/vpp share of its layers,
// plus the one in its forward: ((vpp − 1)·pp + 1)/vpp stage-equivalents, at
// most every chunk of the iteration's micro-batches.
double LastRankInFlight(const ParallelConfig& c, double n_mb) {
  if (c.vpp <= 1 || VShaped(c.pp_schedule)) return 1.0;
  const double chunks = std::min((c.vpp - 1.0) * c.pp + 1.0, n_mb * c.vpp);
  return chunks / c.vpp;
}

// Z weight caching: as many layers' gathered blocks (`block_GiB` each) as the
// room left under the usable memory holds, up to the stage's `layers` (what a
// user sets AxoNN's caching layer count to).
void CacheZWeights(double block_GiB, double fragmentation, int layers, MemoryBreakdown* mem) {
  if (!(mem->reserved_GiB < mem->usable_GiB)) return;
  const double per_layer = block_GiB * (1.0 + fragmentation);
  const int n = std::min(layers, static_cast<int>((mem->usable_GiB - mem->reserved_GiB) / per_layer));
  if (n <= 0) return;
  const double bytes = n * block_GiB;
  mem->z_cached_layers = n;
  mem->buffers_GiB += bytes;
  mem->total_GiB += bytes;
  mem->peak_allocated_GiB += bytes;
  mem->first_stage_allocated_GiB += bytes;
  mem->last_stage_allocated_GiB += bytes;
  mem->reserved_GiB += n * per_layer;
}

// The GEMM libraries' workspaces, which PyTorch and Transformer Engine take
// from PyTorch's caching allocator, so they count in max_memory_allocated
// (unlike the CUDA context and NCCL's buffers, runtime_reserved_GiB). Bytes
// per GPU:
//  - PyTorch's cuBLAS workspace for the compute stream: 32 MiB on sm90
//    (Hopper), else 2 x 4 MiB + 8 x 16 KiB, and the separate cuBLASLt
//    workspace of 1 MiB; on ROCm 128 MiB for gfx94x/gfx95x (MI300 onward),
//    else 32 MiB, and hipBLASLt's 76 MiB (pytorch/pytorch@26a39059
//    aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize,
//    parseCUDABlasLtWorkspaceSize, getNewWorkspace: CUDACachingAllocator).
//  - Transformer Engine's, where the framework runs its GEMMs through it
//    (Megatron-Core's default transformer_impl, NVIDIA/Megatron-LM@d98e8a6
//    megatron/core/transformer/transformer_config.py:1314-1316): 32 MiB +
//    1 KiB from compute capability 9, else 4 MiB, one for plain GEMMs and
//    three more for the userbuffers streams of TP communication overlap
//    (NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/
//    cpp_extensions/gemm.py:37-67, torch.empty). NVIDIA GPUs only: ROCm's
//    fork of Transformer Engine is not modelled.
struct GemmWorkspaces {
  double base = 0;  // every configuration's
  double ub = 0;    // added by the userbuffers streams under TP communication overlap
};
GemmWorkspaces GemmWorkspacesOf(const std::string& gpu, Framework framework) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (topology::RunsRccl(gpu)) {
    const bool gfx94_or_later = gpu.rfind("mi250", 0) != 0;
    return {(gfx94_or_later ? 128 : 32) * kMiB + 76 * kMiB, 0.0};
  }
  const topology::NcclArch arch = topology::NcclArchOf(gpu);
  const double torch_cublas =
      arch == topology::NcclArch::kHopper ? 32 * kMiB : 8 * kMiB + 128 * 1024.0;
  GemmWorkspaces w{torch_cublas + 1 * kMiB, 0.0};
  if (framework == Framework::kMegatron) {
    const bool cc9 = arch == topology::NcclArch::kHopper || arch == topology::NcclArch::kBlackwell;
    const double te = cc9 ? 32 * kMiB + 1024.0 : 4 * kMiB;
    w.base += te;
    w.ub = 3 * te;
  }
  return w;
}

}  // namespace

void CostModel::SetGemmWorkspaces() {
  const GemmWorkspaces w = GemmWorkspacesOf(cluster_.gpu.name, training_.framework);
  gemm_workspace_bytes_ = w.base;
  ub_workspace_bytes_ = w.ub;
}

double CostModel::GemmWorkspaceBytes(const ParallelConfig& c) const {
  return gemm_workspace_bytes_ + (c.tp_comm_overlap && c.tensor() > 1 ? ub_workspace_bytes_ : 0.0);
}

CostModel::StageActivations CostModel::ActivationsPerStage(const ParallelConfig& c,
                                                           const ComputeTerms& t) const {
  const ModelSpec& m = model_;
  StageActivations a;
  const double e = act_bytes_;
  const double h = m.hidden, V = m.vocab;
  const double T = static_cast<double>(c.mbs) * training_.seq_len / c.cp;
  const StageLayers& st = t.stages;
  const int64_t n_mb = cost::MicroBatches(training_.global_batch, c);
  // The first stage holds min(pp, n_mb) micro-batches of its layers in flight
  // (1F1B), × (1 + (pp−1)/(pp·vpp)) when interleaved (Korthikanti §4.2.3).
  double layer_act = LayerActivation(c, t, /*moe_layer=*/false);
  double chunk_share = 1.0;           // FPDT: the share of a layer's chunks on the GPU
  double working = t.act_bytes_full;  // the layer being recomputed
  // The loss's tensors on the last stage: Korthikanti §4.3 counts the fp32
  // logits (4 bytes); the framework preset gives what its loss really holds.
  double logits_act = loss_live_bytes_ * T * V / c.tensor();
  if (training_.loss_chunks > 1) {
    // One chunk's logits at a time, and the fp32 gradient of the hidden
    // states they came from (loss.py:383-402, GradAccumulator).
    logits_act = logits_act / training_.loss_chunks + 4.0 * T * h;
  }
  double fpdt_host = 0;  // FPDT's offloaded chunks, per layer
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    // FPDT keeps two sequence chunks on the GPU (the rest in host memory) and
    // computes the layers, and the loss, chunk by chunk.
    const double chunks = std::max(1.0, static_cast<double>(training_.seq_len) / training_.fpdt_chunk_tokens);
    if (chunks > 2.0) {
      fpdt_host = layer_act * (1.0 - 2.0 / chunks);
      chunk_share = 2.0 / chunks;
      layer_act *= chunk_share;
      working *= 2.0 / chunks;
      // FPDT's chunked loss: one chunk's logits at a time (Yao et al. 2024:
      // the logits of the whole sequence never exist at once).
      logits_act *= 1.0 / chunks;
    }
  }
  // Micro-batches of a rank's layers held at its peak: the schedule's
  // activations relative to 1F1B's (planner/pipeline.h), and never more than
  // the iteration has (Megatron's interleaved warm-up covers every chunk when
  // the micro-batches are few: schedules.py:964-965 @d98e8a6).
  const double mbs_held = static_cast<double>(n_mb);
  const double first_held =
      std::min(std::min<double>(c.pp, mbs_held) * ActivationFactor(c), mbs_held);
  const double middle_held =
      std::min(std::min<double>(c.pp - 1, mbs_held) * ActivationFactor(c), mbs_held);
  const double embed_act = T * (h / c.gx) * (e + (m.dropout ? 1.0 : 0.0)) / (c.sp ? c.gy : 1.0);
  // MoE layers keep their own activations (routed copies after top-k expansion)
  // instead of the dense MLP's; MTP modules run on the last stage.
  a.moe = StageMoe{t.moe_layers_first, t.moe_layers_middle, t.moe_layers_last};
  const StageMoe& sm = a.moe;
  const double moe_act = m.is_moe() ? LayerActivation(c, t, /*moe_layer=*/true) * chunk_share : 0.0;
  auto stage_act = [&](int layers, int moe_layers) {
    return moe_layers > 0 ? (layers - moe_layers) * layer_act + moe_layers * moe_act
                          : layers * layer_act;
  };
  const double mtp_act =
      m.mtp_layers > 0 ? m.mtp_layers * (m.is_moe_layer(m.layers - 1) ? moe_act : layer_act) : 0.0;
  // V schedules run the last stage, and so the loss, on the first rank.
  const bool vshape = c.pp > 1 && VShaped(c.pp_schedule);
  const double loss_act = mtp_act + logits_act;
  a.first = (stage_act(st.first, sm.first) + embed_act) * first_held +
            (vshape || c.pp == 1 ? loss_act : 0.0);
  a.first_loss = vshape || c.pp == 1 ? loss_act : 0.0;
  a.last_loss = c.pp == 1 ? a.first_loss : (vshape ? 0.0 : loss_act);
  a.first_held = first_held;
  a.middle_held = c.pp > 2 ? middle_held : 0.0;
  a.last_held = c.pp == 1 ? first_held : LastRankInFlight(c, n_mb);
  a.last = c.pp == 1 ? a.first
                     : stage_act(st.last, sm.last) * LastRankInFlight(c, n_mb) +
                           (vshape ? 0.0 : loss_act);
  // The second stage holds one micro-batch fewer than the first (1F1B), with
  // the middle stages' layer count: it is the peak when uneven stages give the
  // first stage fewer layers.
  a.middle = c.pp > 2
                 ? stage_act(st.middle, sm.middle) * middle_held
                 : 0.0;
  // CPU activation offloading (pp = 1), Transformer Engine's (Megatron's
  // get_cpu_offload_context, extensions/transformer_engine.py:3452-3462
  // @d98e8a6): the first N layers' activations are copied out during the
  // forward, each freed once its copy is done and before layer L - N + i
  // allocates, and reloaded one layer ahead in the backward, so the peak holds
  // L - N layers (TransformerEngine d0067d0 pytorch/cpu_offload.py:616-647,
  // 749-751: "activation memory usage is equal to (num_layers -
  // num_offloaded_layers) * T").
  double offload_saving = 0, offloaded = 0;
  if (c.offload_activation_layers > 0) {
    const double n = std::min(c.offload_activation_layers, m.layers);
    offload_saving = n * layer_act;
    offloaded = n * layer_act;
  }
  a.extra = (c.recompute == Recompute::kFull ? working : 0.0) - offload_saving;
  a.host_bytes = fpdt_host * st.first * first_held + offloaded;
  return a;
}

double CostModel::LayerActivation(const ParallelConfig& c, const ComputeTerms& t,
                                  bool moe_layer) const {
  const double* kept = moe_layer ? t.moe_act_bytes : t.act_bytes;
  if (c.recompute != Recompute::kSelective || !fw_.support.recompute_modules) {
    return kept[static_cast<int>(c.recompute)];
  }
  // Megatron-Core: the layer's whole set less what each module's recompute
  // drops; inside a checkpointed MoE layer its experts' modules drop nothing more.
  unsigned modules = c.recompute_modules;
  if (moe_layer && (modules & kRcMoe)) modules &= ~unsigned{kRcMoeAct | kRcSharedExperts};
  double bytes = kept[static_cast<int>(Recompute::kNone)];
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if (modules & (1u << i)) bytes -= moe_layer ? t.rc_module[i].moe_bytes : t.rc_module[i].dense_bytes;
  }
  return std::max(bytes, kept[static_cast<int>(Recompute::kFull)]);
}

double CostModel::StateGradBytes(const ParallelConfig& c) const {
  // DeepSpeed's BF16_Optimizer (bf16, fp32 gradient accumulation, ZeRO-1 or a
  // pipeline without ZeRO) keeps the whole rank's gradients in fp32.
  const bool bf16_optimizer = fw_.costs.bf16_optimizer_fp32_grads > 0 && param_bytes_ < 4.0 &&
                              training_.main_grads_fp32 &&
                              (c.zero == 1 || (c.zero == 0 && c.pp > 1));
  // DeepSpeed ZeRO keeps gradients in the parameter dtype; Megatron fp32 main grads.
  return bf16_optimizer ? 4.0 : c.zero >= 1 ? param_bytes_ : grad_bytes_;
}

CostModel::StageLedgers CostModel::StatesPerStage(const ParallelConfig& c,
                                                  const StageMoe& sm) const {
  const ModelSpec& m = model_;
  StageLedgers out;
  const SyncGroup sync = WeightReplicas(c, fw_);
  const int shards = cost::FsdpGroup(c, fw_).size;
  // Frameworks whose sharded parameters are the fp32 master (PyTorch FSDP's
  // mixed precision) hold 4-byte shards and no separate master copy.
  const bool sharded = shards > 1 || c.zero >= 3;
  const double state_param_bytes =
      sharded && fw_.costs.sharded_params_are_master > 0 ? 4.0 : param_bytes_;
  const double state_grad_bytes = StateGradBytes(c);
  const int efsdp = ExpertFsdpShards(c);
  // FSDP2 under pipeline parallelism keeps each stage's blocks gathered and
  // their unsharded gradients (reduce dtype) across the micro-batches.
  const bool pp_unsharded = fw_.costs.pp_keeps_unsharded > 0 && c.pp > 1 && shards > 1;
  const double expert_layer = m.is_moe() ? LocalExpertParamsPerLayer(c) : 0.0;
  // A stage holding `psi` dense parameters and `moe_layers` layers of experts.
  auto ledger = [&](double psi, int moe_layers) {
    StageLedgers::Stage l;
    const double expert_psi = expert_layer * moe_layers;
    const ModelStates all = ModelStateBytes(psi, sync.size, c.zero, c.distributed_optimizer,
                                            state_param_bytes, state_grad_bytes);
    // ZeRO-Offload / Infinity: the offloaded states live in host memory.
    OffloadedStates placed{all, 0.0};
    if (c.offload_optimizer || c.offload_param) {
      placed = OffloadStateBytes(all, psi, sync.size, c.zero, c.offload_optimizer, c.offload_param);
    }
    out.host_bytes = std::max(out.host_bytes, placed.host_bytes);
    l.states = placed.gpu;
    if (expert_psi > 0) {
      // Expert weights, gradients and optimizer states: replicated over the
      // expert-data group, which the distributed optimizer / ZeRO shards them over;
      // under FSDP2 sharded over efsdp (as the dense part over gz) and replicated
      // over the data-parallel replicas.
      const ModelStates experts =
          efsdp > 1 ? ModelStateBytes(expert_psi / efsdp, c.gdata, 0, false, state_param_bytes,
                                      grad_bytes_)
                    : ModelStateBytes(expert_psi, std::max(1, c.expert_data()), c.zero,
                                      c.distributed_optimizer, state_param_bytes, state_grad_bytes);
      l.states.params_bytes += experts.params_bytes;
      l.states.grads_bytes += experts.grads_bytes;
      l.states.optimizer_bytes += experts.optimizer_bytes;
      l.states.step_bytes += experts.step_bytes;
    }
    if (pp_unsharded) l.unsharded = (psi + expert_psi) * shards * (param_bytes_ + grad_bytes_);
    return l;
  };
  // Every stage's ledger: its parameters (the embedding on the first, the
  // output layer on the last) and its experts.
  const StageParams held = ParamsPerStage(c);
  const int last_mtp_moe = m.is_moe() && m.is_moe_layer(m.layers - 1) ? m.mtp_layers : 0;
  out.first = ledger(held.first, sm.first);
  out.last = c.pp == 1 ? out.first : ledger(held.last, sm.last + last_mtp_moe);
  if (c.pp > 2) out.middle = ledger(held.middle, sm.middle);
  if (MegatronFsdp(training_.framework, c.zero) && c.zero >= 3) {
    // Megatron-FSDP under ZeRO-3 never releases its non-unit parameters once
    // gathered (AddActivations says which and why).
    const cost::NonLayerParams outside = cost::NonLayerParamsOf(m, c);
    if (c.pp == 1) {
      out.first.unsharded += (outside.first + outside.last) * param_bytes_;
      out.last = out.first;
    } else {
      out.first.unsharded += outside.first * param_bytes_;
      out.last.unsharded += outside.last * param_bytes_;
    }
  }
  return out;
}

void CostModel::AddActivations(const ParallelConfig& c, const StageActivations& a,
                               StageLedgers* out) const {
  out->first.act = std::max(0.0, a.first + a.extra);
  out->last.act = std::max(0.0, (c.pp == 1 ? a.first : a.last) + a.extra);
  if (c.pp > 2) out->middle.act = std::max(0.0, a.middle + a.extra);
  if (MegatronFsdp(training_.framework, c.zero)) {
    // Megatron-FSDP's FSDP units are the transformer layers
    // (mcore_fsdp_adapter.py:170-171 @d98e8a6); its non-unit parameters
    // (embedding, output layer, final norm) share one bucket
    // (megatron_fsdp/param_and_grad_buffer.py:1807-1822, unsplit:
    // bucket_size is None, megatron_fsdp.py:391). Under
    // ZeRO-3, once gathered they are never released (no post-forward release
    // hook for non-unit modules, megatron_fsdp.py:1089-1111; PRESERVED,
    // param_and_grad_buffer.py:4367): StatesPerStage holds them. The bucket's
    // unsharded gradient, in the gradient dtype, is fetched when its first
    // gradient arrives and reduce-scattered once its last has:
    // - on the stage with the output layer, from the output layer's backward,
    //   when the loss has freed its fp32 tensors and holds the logits'
    //   gradient in the activation dtype: the peak grows only by what the
    //   bucket and that gradient exceed the loss's tensors by;
    // - on a first stage without it, at the embedding's backward, the
    //   micro-batch's last: it takes the place of that micro-batch's
    //   activations.
    const cost::NonLayerParams outside = cost::NonLayerParamsOf(model_, c);
    const double state_grad_bytes = StateGradBytes(c);
    auto non_unit = [&](StageLedgers::Stage* s, double params, double loss, double act_per_mb) {
      const double grad_logits = loss_live_bytes_ > 0 ? loss * act_bytes_ / loss_live_bytes_ : 0.0;
      const double moment =
          params * state_grad_bytes + (loss > 0 ? grad_logits - loss : -act_per_mb);
      s->backward += std::max(0.0, moment);
    };
    if (c.pp == 1) {
      non_unit(&out->first, outside.first + outside.last, a.first_loss, 0.0);
    } else {
      const double first_mb = a.first_held > 0 ? (a.first - a.first_loss) / a.first_held : 0.0;
      non_unit(&out->first, outside.first, a.first_loss, first_mb);
      non_unit(&out->last, outside.last, a.last_loss, 0.0);
    }
  }
  if (c.pp == 1) out->last = out->first;
}

CostModel::StageLedgers CostModel::LedgersPerStage(const ParallelConfig& c,
                                                   const StageActivations& a) const {
  StageLedgers out = StatesPerStage(c, a.moe);
  AddActivations(c, a, &out);
  return out;
}

CostModel::MemoryBuffers CostModel::BuffersOf(const ParallelConfig& c, const ComputeTerms& t) const {
  const ModelSpec& m = model_;
  MemoryBuffers b;
  const SyncGroup sync = WeightReplicas(c, fw_);
  const int shards = cost::FsdpGroup(c, fw_).size;
  b.bytes = cluster_.gpu.runtime_reserved_GiB * kGiB + t.moe_buffer_bytes + GemmWorkspaceBytes(c);
  // Gathered weights in flight (the layer in use and prefetched ones) and, for
  // the framework's sharded execution, the layer's unsharded gradient before
  // its reduce-scatter; not when the whole stage stays gathered (FSDP2 under PP).
  // Under FSDP2 an MoE layer's gathered block holds its local experts too.
  b.layer_block = std::max(layer_params_ / c.tensor(),
                           ExpertFsdpShards(c) > 1
                               ? static_cast<double>(m.MoeLayerDenseParams()) / c.tensor() +
                                     LocalExpertParamsPerLayer(c)
                               : 0.0);
  const bool pp_unsharded = fw_.costs.pp_keeps_unsharded > 0 && c.pp > 1 && shards > 1;
  const bool gathers = (shards > 1 || c.zero == 3) && !pp_unsharded;
  if (gathers) b.bytes += fw_.costs.gathered_layers * b.layer_block * param_bytes_;
  // DeepSpeed's ZeRO (stages 1-3) reduces gradients through a bucket of
  // reduce_bucket_size elements (stage_1_and_2.py:869, stage3.py:1533-1535).
  const double ds_bucket = fw_.costs.zero3_reduce_bucket_elements;
  if (c.zero >= 1 && ds_bucket > 0) b.bytes += std::min(t.psi, ds_bucket) * param_bytes_;
  // Megatron-FSDP with the double buffer emit turns on (--fsdp-double-buffer,
  // arguments.py:3202 @d98e8a6): a persistent pool of two units' unsharded
  // gradients in the gradient dtype, the parameter dtype here
  // (param_and_grad_buffer.py:2526, 3956-3978), besides ZeRO-3's pool of two
  // units' gathered parameters above. A unit's gradient lives in the pool
  // until its reduce-scatter, so no transient beyond it.
  const bool megatron_fsdp = MegatronFsdp(training_.framework, c.zero);
  if (megatron_fsdp) b.bytes += fw_.costs.gathered_layers * b.layer_block * param_bytes_;
  if (c.hpz && c.zero == 3) {
    const int per_node = std::max(1, cluster_.gpus_per_node / std::min(sync.stride, cluster_.gpus_per_node));
    b.bytes += t.psi * param_bytes_ / std::max(1, std::min(sync.size, per_node));
  }
  // The step's peak adds, under sharded execution, the unsharded gradient of
  // one layer before its reduce-scatter (the loss's tensors are already in
  // the activations at the size the framework holds them).
  b.transient = gathers && !megatron_fsdp ? b.layer_block * grad_bytes_ : 0.0;
  return b;
}

CostModel::MemoryStates CostModel::StatesOf(const ParallelConfig& c, const ComputeTerms& t) const {
  return {StatesPerStage(c, StageMoe{t.moe_layers_first, t.moe_layers_middle, t.moe_layers_last}),
          BuffersOf(c, t)};
}

MemoryBreakdown CostModel::MemoryWith(const ParallelConfig& c, const ComputeTerms& t) const {
  const MemoryStates held = StatesOf(c, t);
  return CombineMemory(c, held.ledgers, held.buffers, ActivationsPerStage(c, t));
}

const CostModel::StageLedgers& CostModel::MemoryGrid::Ledgers(const ParallelConfig& c) {
  std::optional<StageLedgers>& ledgers = ledgers_.at(slot_);
  if (!ledgers) ledgers = cm_.StatesPerStage(c, moe_);
  return *ledgers;
}

MemoryBreakdown CostModel::MemoryGrid::Memory(const ParallelConfig& c, size_t slot) {
  const StageLedgers& ledgers = Ledgers(c);
  if (!buffers_) buffers_ = cm_.BuffersOf(c, *t_);
  std::optional<StageActivations>& act = activations_.at(slot);
  if (!act) act = cm_.ActivationsPerStage(c, *t_);
  return cm_.CombineMemory(c, ledgers, *buffers_, *act);
}

bool CostModel::MemoryGrid::StatesOverflow(const ParallelConfig& c) {
  // CombineMemory's peak stage holds at least its states (Stage::total with
  // no activations is Held() + step_bytes) and the buffers, which hold at
  // least the runtime's reserve (BuffersOf); activations, transients and the
  // rest of the buffers are never negative, AddActivations only adds, and
  // with pp 1 the last stage is the first. ReservedGiB grows with what is
  // allocated.
  int8_t& known = overflow_.at(slot_);
  if (known >= 0) return known == 1;
  const StageLedgers& l = Ledgers(c);
  auto states = [](const StageLedgers::Stage& s) { return s.states.total() + s.unsharded; };
  const double held =
      std::max({states(l.first), states(l.middle), states(c.pp == 1 ? l.first : l.last)});
  const double floor_GiB = held / kGiB + cm_.cluster().gpu.runtime_reserved_GiB;
  const double usable = cm_.cluster().gpu.memory_GiB * (1.0 - cm_.training().headroom);
  // A relative margin of 1e-12 keeps floating-point reordering from calling
  // a configuration at the boundary out of memory when Memory would not.
  known = cm_.ReservedGiB(floor_GiB) > usable * (1.0 + 1e-12) ? 1 : 0;
  return known == 1;
}

MemoryBreakdown CostModel::CombineMemory(const ParallelConfig& c, const StageLedgers& ledgers,
                                         const MemoryBuffers& buf,
                                         const StageActivations& act) const {
  MemoryBreakdown mem;
  StageLedgers stages = ledgers;
  AddActivations(c, act, &stages);
  const StageLedgers::Stage& peak = stages.Peak();
  mem.params_GiB = (peak.states.params_bytes + peak.unsharded) / kGiB;
  mem.grads_GiB = peak.states.grads_bytes / kGiB;
  mem.optimizer_GiB = (peak.states.optimizer_bytes - peak.states.step_bytes) / kGiB;
  mem.optimizer_step_GiB = peak.states.step_bytes / kGiB;
  mem.activations_GiB = peak.act / kGiB;
  mem.buffers_GiB = buf.bytes / kGiB;
  // The backward's peak adds the transient buffers to the activations; the
  // optimizer step's adds its copies instead.
  mem.peak_at_optimizer_step = peak.PeakAtStep(buf.transient);
  mem.total_GiB = mem.params_GiB + mem.grads_GiB + mem.optimizer_GiB + mem.buffers_GiB +
                  (mem.peak_at_optimizer_step ? mem.optimizer_step_GiB : mem.activations_GiB);
  mem.peak_allocated_GiB = peak.Peak(buf.bytes, buf.transient) / kGiB;
  mem.first_stage_allocated_GiB = stages.first.Peak(buf.bytes, buf.transient) / kGiB;
  mem.last_stage_allocated_GiB = stages.last.Peak(buf.bytes, buf.transient) / kGiB;
  mem.reserved_GiB = ReservedGiB(mem.peak_allocated_GiB);
  mem.capacity_GiB = cluster_.gpu.memory_GiB;
  mem.usable_GiB = mem.capacity_GiB * (1.0 - training_.headroom);
  if (fw_.costs.z_weight_cache > 0 && cost::FsdpGroup(c, fw_).size > 1) {
    CacheZWeights(buf.layer_block * param_bytes_ / kGiB, AllocatorFragmentation(), Stages(c).max,
                  &mem);
  }
  HostMemory(c, stages.host_bytes + act.host_bytes, &mem);
  return mem;
}

double CostModel::AllocatorFragmentation() const {
  return training_.expandable_segments ? fw_.costs.allocator_fragmentation
                                       : fw_.costs.allocator_fragmentation_fixed;
}

double CostModel::ReservedGiB(double allocated_GiB) const {
  const double runtime = cluster_.gpu.runtime_reserved_GiB;
  return (allocated_GiB - runtime) * (1.0 + AllocatorFragmentation()) + runtime;
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

std::vector<CostModel::LedgerRow> CostModel::MemoryLedger(const ParallelConfig& c) const {
  const ComputeTerms t = Compute(c);
  const StageActivations a = ActivationsPerStage(c, t);
  const StageLedgers l = LedgersPerStage(c, a);
  const MemoryBuffers b = BuffersOf(c, t);
  const double workspaces = GemmWorkspaceBytes(c);
  const StageLayers st = Stages(c);
  const bool megatron_fsdp = MegatronFsdp(training_.framework, c.zero);
  const std::string allocator_source =
      "the peak less the runtime reserve, times 1 + " + FormatFixed(AllocatorFragmentation(), 2) +
      " (framework preset " +
      (training_.expandable_segments ? "allocator_fragmentation"
                                     : "allocator_fragmentation_fixed") +
      "), plus the reserve";
  std::vector<LedgerRow> rows;
  auto stage = [&](const char* name, const StageLedgers::Stage& s, int layers, double held,
                   double loss) {
    auto row = [&](const std::string& term, double bytes, const char* source) {
      if (bytes > 0) rows.push_back({name, term, bytes / kGiB, source});
    };
    const ModelStates& m = s.states;
    row("parameters", m.params_bytes,
        "planner/memory.h ModelStateBytes: the stage's parameters in their dtype, sharded by ZeRO-3/FSDP");
    if (megatron_fsdp) {
      row("embedding and output layer kept gathered (Megatron-FSDP)", s.unsharded,
          "megatron_fsdp/param_and_grad_buffer.py:4367 @d98e8a6: non-unit parameters stay "
          "gathered");
    } else {
      row("parameters gathered (FSDP2 under PP)", s.unsharded,
          "torchtitan b5bcd76 distributed/fsdp.py:112-137: stages keep their blocks gathered");
    }
    row("gradients", m.grads_bytes,
        training_.main_grads_fp32 ? "fp32 main gradients (Megatron arguments.py:1215-1216), ZeRO-2 shards"
                                  : "gradients in the parameter dtype, ZeRO-2 shards");
    row("optimizer states", m.optimizer_bytes - m.step_bytes,
        "fp32 master and two Adam moments, sharded by the distributed optimizer / ZeRO-1");
    row("optimizer step copy (fp32 gradient shard)", m.step_bytes,
        "Megatron distrib_optimizer.py:2792: only while the optimizer steps");
    const std::string held_text = FormatFixed(held, held == std::floor(held) ? 0 : 2);
    row("activations (" + std::to_string(layers) + (layers == 1 ? " layer" : " layers") + " x " +
            held_text + (held == 1.0 ? " micro-batch)" : " micro-batches)"),
        std::max(0.0, s.act - loss),
        "planner/memory.h LayerActivationBytes with the recompute modules; the schedule's micro-batches in flight");
    row(model_.mtp_layers > 0 ? "loss (logits, MTP layers)" : "loss (logits)", loss,
        "framework preset loss_live_bytes_per_logit (Megatron cross_entropy.py:25, 181); chunked: loss.py:383-544");
    row("GEMM workspaces (PyTorch cuBLAS, Transformer Engine)", workspaces,
        "pytorch/pytorch@26a39059 CublasHandlePool.cpp; NVIDIA/TransformerEngine@d0067d0 "
        "pytorch/cpp_extensions/gemm.py:37-67");
    row("buffers (runtime, gathered layers, buckets)", b.bytes - workspaces,
        megatron_fsdp
            ? "GPU preset runtime_reserved_GiB; Megatron-FSDP's double buffer: gathered_layers "
              "units' gradients (and parameters under ZeRO-3)"
            : "GPU preset runtime_reserved_GiB; framework gathered_layers; DeepSpeed reduce "
              "bucket");
    row("non-unit gradient bucket (embedding, output layer)", s.backward,
        "megatron_fsdp/param_and_grad_buffer.py:1807-1822 @d98e8a6: through the backward");
    row("backward transient (a layer's unsharded gradient)", b.transient,
        "sharded execution: one layer's gradient before its reduce-scatter");
    const double peak = s.Peak(b.bytes, b.transient) / kGiB;
    rows.push_back({name, s.PeakAtStep(b.transient) ? "peak (optimizer step)" : "peak (backward)",
                    peak, "the larger of the backward's and the optimizer step's"});
    rows.push_back({name,
                    training_.expandable_segments
                        ? "reserved (caching allocator, expandable segments)"
                        : "reserved (caching allocator, fixed-size segments)",
                    ReservedGiB(peak), allocator_source});
  };
  if (c.pp == 1) {
    stage("every", l.first, st.first, a.first_held, a.first_loss);
  } else {
    stage("first", l.first, st.first, a.first_held, a.first_loss);
    if (c.pp > 2) stage("middle", l.middle, st.middle, a.middle_held, 0.0);
    stage("last", l.last, st.last, a.last_held, a.last_loss);
  }
  return rows;
}

}  // namespace paratune::planner
