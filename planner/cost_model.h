// planner/cost_model.h: the analytical model of one training iteration
// (cost-model.md §2-5; docs/model.md explains every term and its source).
// Given a model, a training job, a cluster and one ParallelConfig it predicts
// the iteration time with a readable breakdown and the memory each GPU needs.
// A CostModel compiles its inputs into tables once (GroupCostTable, per-model
// constants) so that Predict() allocates nothing: the search calls it millions
// of times. Pure: no clocks, threads, I/O or printing. Thread-safe for
// concurrent const calls.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/config.h"
#include "planner/framework.h"
#include "planner/memory.h"
#include "planner/model.h"
#include "topology/cluster.h"

namespace paratune::planner {

enum class Attention : uint8_t { kFlash = 0, kUnfused };
const char* AttentionName(Attention a);  // "flash" | "unfused"

struct TrainingSpec {
  int seq_len = 2048;
  int64_t global_batch = 0;  // sequences per iteration
  topology::Precision precision = topology::Precision::kBf16;
  // With precision fp8: the low-precision recipe (topology/gpu.h), which sets
  // the GEMM format and rate, the quantisation traffic and what is gathered.
  // nvfp4 is precision fp8 with recipe nvfp4: everything outside the linear
  // layers' GEMMs stays as in the fp8 recipes. `recipe_stated`: the request
  // named the recipe (false: "fp8", the GPU's fp8_default_recipe).
  topology::Recipe recipe = topology::Recipe::kFp8Current;
  bool recipe_stated = false;
  // "flash": fused attention that never stores the s×s scores and skips causally
  // masked blocks (FlashAttention, cuDNN/TE fused attention; the default since
  // 2023). "unfused": scores materialised, softmax + dropout as separate
  // memory-bound kernels (Megatron-LM 2021-22, the Korthikanti runs).
  Attention attention = Attention::kFlash;
  // Gradients kept and data-parallel reduced in fp32 ("main grads": Megatron's
  // default for bf16). Default: true unless precision is fp16.
  bool main_grads_fp32 = true;
  // The data-parallel gradient bucket in elements, where the job states one
  // (Megatron's --ddp-bucket-size); 0: the framework's own rule
  // (FrameworkCosts::ddp_bucket_min_elements).
  double ddp_bucket_elements = 0;
  // PyTorch's caching allocator maps memory in expandable segments
  // (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which every emitted
  // launch exports): reserved memory stays near the allocated peak
  // (FrameworkCosts::allocator_fragmentation). false: fixed-size segments,
  // whose split blocks strand free memory between allocations
  // (FrameworkCosts::allocator_fragmentation_fixed).
  bool expandable_segments = true;
  // Fraction of GPU memory kept free beyond the predicted reserved memory for
  // a "fits" verdict: the margin for the memory model's error. One default
  // for every entry point (docs/model.md, "What the allocator reports").
  double headroom = 0.05;
  int fpdt_chunk_tokens = 65536;  // FPDT sequence chunk (DeepSpeed's default)
  // The training stack (planner/framework.h): what it fuses, overlaps and allows.
  Framework framework = Framework::kMegatron;
  bool compile = false;  // torch.compile (frameworks whose preset supports it)
  // Under compile, the loss is compiled too (torchtitan's compile.components
  // default ["model", "loss"], pytorch/torchtitan@b5bcd76
  // torchtitan/config/configs.py:302); false: the model's blocks only and the
  // loss eager, as torchtitan ran until it could compile the loss
  // (pytorch/torchtitan@9dec370 train.py:136-138).
  bool compile_loss = true;
  // Mixture of experts: the most loaded EP rank's routed tokens / the mean (>= 1).
  // 1 = balanced, as the published benchmarks run (Megatron-Bridge forces load
  // balance: moe_router_force_load_balancing); real routing with an auxiliary
  // loss runs above it (docs/model.md "Load imbalance").
  double moe_skew = 1.0;
  // The loss over this many sequence chunks, each chunk's logits computed,
  // reduced and back-propagated before the next (torchtitan's
  // ChunkedLossWrapper, pytorch/torchtitan@b5bcd76
  // torchtitan/components/loss.py:501-544, 8 chunks in its llama3 configs,
  // models/llama3/config_registry.py:42); the hidden states' fp32 gradient
  // accumulates meanwhile. 0: the whole micro-batch's logits at once.
  int loss_chunks = 0;
};

// What the framework rules (planner/framework.h) read of model `m` trained as
// `t`. The gaps a cost model computes once (mds_model_gap, autoep_gap, mcore_model_gap)
// are left null.
RuleJob RuleJobOf(const ModelSpec& m, const TrainingSpec& t);

// Why a configuration cannot run, cheapest checks first. kOk = feasible.
enum class Reason : uint8_t {
  kOk = 0,
  kBadDegree,            // a degree < 1, or vpp > 1 without pp > 1
  kWorldMismatch,        // product of degrees != GPUs
  kHeadsNotDivisible,    // attention heads % (gy · Ulysses degree)
  kKvHeadsNotDivisible,  // key/value heads % gy (Megatron: num_query_groups % TP)
  kHiddenNotDivisible,   // hidden % gx or % gy
  kFfnNotDivisible,      // ffn_hidden % gx or % gy
  kLayersNotDivisible,   // layers % (pp · vpp)
  kBatchNotDivisible,    // global_batch % (mbs · gz · gdata)
  kMicroBatchesVsPp,     // interleaved schedule needs micro-batches % pp == 0
  kSeqNotDivisible,      // ring CP: seq % (2·cp); Ulysses/FPDT: seq % cp
  kZShardNotDivisible,   // AxoNN: (k·n/(gx·gy)) % gz for some linear
  kSpNeedsTensor,        // sp needs Megatron TP: gy > 1 and gx == 1
  kZeroConflict,  // zero stage out of range, dist-opt with zero > 0, or ZeRO++ without zero 3
  kOutOfMemory,   // valid, but needs more memory than the GPU has (minus headroom)
  kFrameworkUnsupported,  // the training framework cannot express this configuration
  kOutOfHostMemory,       // fits the GPU, but what it keeps in host memory (offloaded optimizer,
                          // parameters, FPDT chunks) exceeds the node's usable host memory, or
                          // it offloads on a cluster that states no host memory
  kExpertsNotDivisible,   // MoE: experts % ep, moe_ffn_hidden % etp, or ep/etp > 1 on a dense model
  kExpertGroupNotDivisible,  // MoE: the stage's ranks % (ep · etp) (Megatron's expert folding)
};
inline constexpr int kNumReasons = 19;

// Widening of the uncertainty band per step of distance from calibrated
// evidence (docs/model.md, "Ranking people can trust").
inline constexpr double kBandPerEvidenceStep = 0.05;
// The model family the evidence regions name: "llama" (gated FFN) or "gpt".
const char* ModelFamily(const ModelSpec& m);
const char* ReasonName(Reason r);  // stable snake_case key, e.g. "heads_not_divisible"
// The config field a rule is about (JSON pointer relative to the request), e.g. "/config/tp".
const char* ReasonField(Reason r);

struct MemoryBreakdown {   // GiB per GPU, for the most loaded pipeline stage
  double params_GiB = 0;
  double grads_GiB = 0;
  double optimizer_GiB = 0;
  double activations_GiB = 0;
  double buffers_GiB = 0;    // gathered weights, buckets, hpZ copy, runtime reserve,
                             // GEMM workspaces
  // What the optimizer step alone holds (ModelStates::step_bytes): the peak is
  // at the step when it exceeds the activations, which are gone by then.
  double optimizer_step_GiB = 0;
  bool peak_at_optimizer_step = false;
  // params + grads + optimizer + buffers + the peak moment's own term
  // (activations, or optimizer_step at the step).
  double total_GiB = 0;
  // What the allocator reports at the step's peak: total plus the transient
  // buffers (fp32 logits and their gradient, the layer being recomputed, the
  // gathered weights in flight). `reserved` adds the caching allocator's
  // fragmentation (framework preset); `fits` compares it with `usable`.
  double peak_allocated_GiB = 0;
  double reserved_GiB = 0;
  double capacity_GiB = 0;
  double usable_GiB = 0;     // capacity × (1 − headroom)
  // Host (CPU) memory: what this GPU's rank keeps there (offloaded optimizer
  // states, gradient and parameter partitions, FPDT's offloaded chunks), the
  // node's total for the ranks it hosts, and the node's usable host memory
  // (host_memory_GiB × (1 − headroom); 0 = the cluster states none).
  double host_per_gpu_GiB = 0;
  double host_node_GiB = 0;
  double host_usable_GiB = 0;
  bool offloads = false;  // the configuration offloads optimizer or parameters
  // kOk, kOutOfMemory (GPU) or kOutOfHostMemory; GPU memory is checked first.
  // Inline: the search asks it for every candidate.
  Reason Verdict() const {
    if (reserved_GiB > usable_GiB) return Reason::kOutOfMemory;
    return HostFits() ? Reason::kOk : Reason::kOutOfHostMemory;
  }
  // The node's host memory holds what its ranks keep there (an offload needs
  // a cluster that states its host memory).
  bool HostFits() const {
    if (offloads && !(host_usable_GiB > 0)) return false;
    return !(host_usable_GiB > 0 && host_node_GiB > host_usable_GiB);
  }
  // Whether the step's memory can be had at all: the peak allocation within
  // the device's capacity and the host's within its usable memory. Verdict()
  // is stricter by the caching allocator's fragmentation slack and the
  // headroom: under pressure PyTorch's caching allocator frees its unused
  // cached blocks and retries a failed cudaMalloc (pytorch/pytorch@001074d2
  // c10/cuda/CUDACachingAllocator.cpp, the allocator's header comment), which
  // is slower but runs. Validation asks this of runs known to have run.
  bool PeakFits() const { return peak_allocated_GiB <= capacity_GiB && HostFits(); }
  // The resource nearest its limit: "gpu_memory" or "host_memory" (the larger
  // of reserved / usable and host_node / host_usable).
  const char* Binding() const;
  // Layers of the stage whose gathered Z weight block stays cached between the
  // forward and the backward (frameworks with z_weight_cache: AxoNN's
  // --num-layers-for-caching-weights-in-depth-tensor-parallel-all-gather),
  // chosen as many as fit; their memory is in buffers_GiB. A count, not GiB.
  int z_cached_layers = 0;
  // The peak allocation of the first and of the last pipeline stage (both
  // the whole model's when pp = 1): their parameters differ by the embedding
  // and the output layer, their activations by the micro-batches in flight
  // and the loss. peak_allocated_GiB is the largest stage's (a middle one's
  // when it holds more).
  double first_stage_allocated_GiB = 0;
  double last_stage_allocated_GiB = 0;
};

struct TimeBreakdown {     // seconds per iteration; the terms add up to the iteration time
  double compute_s = 0;    // GEMMs, attention, element-wise kernels, incl. recompute
  double recompute_s = 0;  // the part of compute_s spent recomputing (informational)
  double comm_x_s = 0;     // exposed communication of each dimension
  double comm_y_s = 0;
  double comm_z_s = 0;
  double comm_cp_s = 0;
  double comm_ep_s = 0;    // expert-parallel dispatch/combine (and ETP gathers) not hidden
  double comm_data_s = 0;
  double comm_pp_s = 0;
  double bubble_s = 0;     // pipeline fill/drain and stage imbalance
  double optimizer_s = 0;  // the optimizer step (memory-bound)
  // Host traffic not hidden behind compute: FPDT's chunks, ZeRO-Offload's
  // gradient (GPU→host) and updated-parameter (host→GPU) copies, ZeRO-Infinity's
  // per-layer parameter fetches. The CPU Adam step itself is in optimizer_s.
  double offload_s = 0;
  double host_s = 0;       // GPU idle while the host issues kernels (eager dispatch)
};

// The terms of a TimeBreakdown in order: the key of each in a prediction
// document's breakdown_s and its label in `predict --format table`.
struct BreakdownTerm {
  const char* key;
  const char* label;
  double TimeBreakdown::*seconds;
  // Written to documents only when positive (expert parallelism: the documents
  // of dense models do not carry it).
  bool only_when_positive = false;
};
inline constexpr BreakdownTerm kBreakdownTerms[] = {
    {"compute", "compute", &TimeBreakdown::compute_s},
    {"recompute", " (recompute)", &TimeBreakdown::recompute_s},
    {"comm_x", "comm x", &TimeBreakdown::comm_x_s},
    {"comm_y", "comm y/tp", &TimeBreakdown::comm_y_s},
    {"comm_z", "comm z", &TimeBreakdown::comm_z_s},
    {"comm_cp", "comm cp", &TimeBreakdown::comm_cp_s},
    {"comm_ep", "comm ep", &TimeBreakdown::comm_ep_s, true},
    {"comm_data", "comm data", &TimeBreakdown::comm_data_s},
    {"comm_pp", "comm pp", &TimeBreakdown::comm_pp_s},
    {"bubble", "bubble", &TimeBreakdown::bubble_s},
    {"optimizer", "optimizer", &TimeBreakdown::optimizer_s},
    {"offload", "offload", &TimeBreakdown::offload_s},
    {"host", "host", &TimeBreakdown::host_s}};

struct Prediction {
  Reason reason = Reason::kOk;   // kOk or kOutOfMemory (rule violations never get here)
  bool fits = false;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  // Model FLOPs (no recompute) / time / GPUs, counted by `flops_convention`:
  // ModelSpec::FlopsConvention, Korthikanti Eq. 7 or Megatron-Core's formula.
  double model_tflops_per_gpu = 0;
  // The model FLOPs plus the recomputed ones, in the same convention (the
  // "hardware FLOPs" of Narayanan et al. 2021 and of papers that use it).
  double hardware_tflops_per_gpu = 0;
  // FLOPs the kernels execute / time / GPUs (CostModel::ExecutedFlopsPerIteration):
  // a fused causal kernel's half of the attention square, its backward's 2.5×
  // the forward, and what recompute reruns.
  double executed_tflops_per_gpu = 0;
  double mfu = 0;  // model TFLOP/s / dense peak
  double hfu = 0;  // executed TFLOP/s / dense peak
  const char* flops_convention = "";  // ModelSpec::FlopsConvention of model TFLOP/s and MFU
  // Uncertainty band of iteration_time_s: ± this fraction (one sigma of the
  // framework × GPU calibration residuals, widened by a profile's own and by
  // the job's distance from the framework's calibrated evidence).
  double uncertainty = 0;
  // The job's distance from the framework's calibration rows, in steps
  // (planner::EvidenceSteps: 0 inside a calibrated region).
  double evidence_steps = 0;
  // The band a feature of this configuration adds in quadrature (included in
  // `uncertainty`; FrameworkSpec::dedup_across_domains_uncertainty), 0: none.
  double feature_band = 0;
  // The pessimistic edge the search ranks by: iteration_time_s × (1 +
  // uncertainty), and never shorter than the time at which the MFU would
  // equal the GPU's published ceiling for the precision.
  double pessimistic_time_s = 0;
  double published_mfu_ceiling = 0;    // 0: the GPU preset states none
  // The MFU checked against the ceiling: `mfu`, except that beyond the
  // ceilings' longest sequence (kCeilingSeqLen) a fused causal kernel's
  // skipped half of the attention core is not counted as work done.
  double mfu_vs_ceiling = 0;
  bool above_published_mfu = false;    // mfu_vs_ceiling > published_mfu_ceiling
  int64_t micro_batches = 0;           // per pipeline per iteration
  MemoryBreakdown memory;
  TimeBreakdown breakdown;
};

class CostModel {
 public:
  // Compiles inputs for `gpus` ranks. REQUIRES: model validated, gpus >= 1.
  CostModel(const ModelSpec& model, const TrainingSpec& training,
            const topology::ClusterSpec& cluster, int gpus);
  // The same with an explicit framework description instead of the preset of
  // training.framework (an earlier release of a stack: validation/seeds.h).
  CostModel(const ModelSpec& model, const TrainingSpec& training,
            const topology::ClusterSpec& cluster, int gpus, FrameworkSpec framework);

  // Divisibility and framework rules only (no memory, no time). Cheap. With
  // framework_rules false, the framework's start-up rules (preset `rules`,
  // BrokenRule) are left out: the search applies them itself.
  Reason CheckRules(const ParallelConfig& c, bool framework_rules = true) const;
  // The first start-up rule of the framework's preset that c breaks (nullptr:
  // none) and, in *why, what breaks it with the values.
  const FrameworkRuleRef* BrokenRule(const ParallelConfig& c, std::string* why = nullptr) const;
  // c's layers per pipeline rank, split the framework's way (pipeline.h).
  StageLayers Stages(const ParallelConfig& c) const { return SplitLayers(model_.layers, c, fw_.support.pp_split); }

  // The compute side of one micro-batch on one GPU: everything that depends
  // only on gx, gy, gz, pp, the stage split, cp, cp_kind, mbs, sp and the
  // expert fields ep, etp, moe_dispatcher (seconds, bytes). The search
  // computes these once and reuses them across the configurations that share
  // those fields; Predict(c) == PredictWith(c, Compute(c)).
  struct ComputeTerms {
    double linear_fwd[4] = {};  // QKV, proj, FC1, FC2 forward GEMMs
    double gemm_fwd = 0;        // their sum
    double normal_fwd = 0;      // QKV + FC1 (the layers whose backward all-reduce OAR hides)
    double attn_fwd = 0, attn_bwd = 0;  // attention core
    double elem_fwd = 0;        // memory-bound element-wise kernels, forward
    double mlp_elem_fwd = 0;    // of which the dense MLP's activation and FP8 casts
    double logits_compute = 0;  // last stage: logits GEMMs fwd+bwd and the fp32 loss
    double embed = 0;           // first stage: embedding lookup and its gradient
    double kernel_fixed = 0;    // per layer, fwd + bwd: fixed GPU time of its kernels
    double host = 0;            // per layer, fwd + bwd: host time to issue it
    // Per layer kept for the backward, by Recompute; selective is the
    // framework's own set (Megatron's core_attn; per-op SAC where the preset
    // says selective_per_op). LayerActivation reads it with the modules.
    double act_bytes[3] = {};
    double act_bytes_full = 0;  // without recompute (working set of a recomputed layer)
    double psi = 0;             // parameters held before data sharding (needs gx, gy, gz, pp too)
    // Mixture of experts (0 for dense models): one MoE layer's MLP on this GPU per
    // micro-batch, replacing the dense FC1/FC2 (linear_fwd[2], [3]) in MoE layers.
    double moe_fwd = 0;          // router, permutation, grouped expert GEMMs, shared experts
    double moe_act_fn_fwd = 0;   // of which the experts' activation function (recomputed by moe_act)
    double moe_experts_fwd = 0;  // of which the local experts' GEMMs, activation and FP8 casts
    double moe_expert_host = 0;  // fwd + bwd: host time to issue the local experts' kernels
    double moe_a2a_fwd = 0;      // dispatch + combine forward (the backward moves the same)
    int ep_domains = 1;          // NVLink domains one EP group spans (EpRanksPerDomain)
    double moe_act_bytes[3] = {};  // an MoE layer's activation bytes, by Recompute
    // Selective recompute by module (index: the RecomputeModule's bit): what
    // recomputing it takes off a dense and an MoE layer's kept activations
    // (bytes) and adds to their forward (seconds). planner/memory.h
    // RecomputeSavings for the tensors; recompute_modules in the config.
    struct ModuleRecompute {
      double dense_bytes = 0, moe_bytes = 0;
      double dense_s = 0, moe_s = 0;
    };
    std::array<ModuleRecompute, kNumRecomputeModules> rc_module{};
    double moe_buffer_bytes = 0;   // dispatch send/receive buffers in flight
    double expert_psi = 0;       // expert parameters this GPU holds (synced over expert-data)
    int moe_layers_first = 0, moe_layers_middle = 0, moe_layers_last = 0;  // MoeLayersPerStage
    StageLayers stages;                                                    // Stages(c)
  };
  ComputeTerms Compute(const ParallelConfig& c) const;
  // Compute in two steps: the terms that read neither the expert fields (ep,
  // etp, moe_dispatcher) nor the layout, then the experts' terms, the
  // layout, the calibration's corrections and the modules' recompute times.
  // Compute(c) is DenseCompute(c) completed by CompleteCompute(c, ·); the
  // search computes DenseCompute once for every expert layout.
  ComputeTerms DenseCompute(const ParallelConfig& c) const;
  void CompleteCompute(const ParallelConfig& c, ComputeTerms* t) const;
  // One layer's kept activations (bytes) under c's recompute and modules; a
  // dense layer's or, with moe_layer, an MoE layer's.
  double LayerActivation(const ParallelConfig& c, const ComputeTerms& t, bool moe_layer) const;
  // The forward time one layer runs again under c's recompute (seconds):
  // selective, the modules' forwards; full, none here (the layer's forward,
  // which callers hold). moe_layer: an MoE layer's modules.
  double SelectiveRecomputeSeconds(const ParallelConfig& c, const ComputeTerms& t,
                                   bool moe_layer) const;
  // The fields of ComputeTerms that depend on c's pipeline layout (its layers
  // per stage, which stage holds the most parameters: psi, expert_psi and the
  // MoE layers per stage).
  // They read the layout and the tensor and expert degrees, not the
  // micro-batch, sequence parallelism or context kind: the search computes a
  // micro-batch's terms once, and each layout's LayoutTerms once for all of
  // them, and applies the second to the first with ApplyLayout.
  struct LayoutTerms {
    double psi = 0, expert_psi = 0;
    int moe_layers_first = 0, moe_layers_middle = 0, moe_layers_last = 0;
    StageLayers stages;
  };
  LayoutTerms LayoutTermsOf(const ParallelConfig& c) const;
  void ApplyLayout(const LayoutTerms& l, ComputeTerms* t) const;
  void ApplyLayout(const ParallelConfig& c, ComputeTerms* t) const {
    ApplyLayout(LayoutTermsOf(c), t);
  }
  // The time every micro-batch costs the slowest pipeline stage at least
  // (seconds): every layer's forward, backward and what c's recompute runs
  // again, each MoE layer's exposed expert-parallel dispatch and combine, the
  // output layer's logits and the MTP modules' blocks and logits, spread
  // evenly over the pp stages (the slowest holds no less than the mean). So
  // MicroBatches × this <= PredictWith(c, t).iteration_time_s: the search
  // prunes on it. It reads the recompute choice and the micro-batch's terms,
  // not the layout, ZeRO choice, EP all-to-all overlap or placement.
  double ComputeFloorPerMicroBatch(const ParallelConfig& c, const ComputeTerms& t) const;
  // Memory only, cheap. REQUIRES: CheckRules(c) == kOk, t == Compute(c).
  MemoryBreakdown MemoryWith(const ParallelConfig& c, const ComputeTerms& t) const;
  // MemoryWith over the ZeRO × recompute choices of one configuration (the
  // search's inner loops), each half computed once (CostModel::MemoryGrid).
  class MemoryGrid;
  // `mem`, when given, must be MemoryWith(c, t) (the search has it already).
  Prediction PredictWith(const ParallelConfig& c, const ComputeTerms& t,
                         const MemoryBreakdown* mem = nullptr) const;
  // Memory per GPU. REQUIRES: CheckRules(c) == kOk.
  MemoryBreakdown Memory(const ParallelConfig& c) const;
  // The caching allocator's slack over what it hands out: the framework's
  // fragmentation with the job's segment kind (TrainingSpec::expandable_segments).
  double AllocatorFragmentation() const;
  // What the device holds when `allocated_GiB` (the runtime reserve included)
  // is allocated: the CUDA context and library workspaces outside the caching
  // allocator, the rest with its fragmentation.
  double ReservedGiB(double allocated_GiB) const;
  // The memory ledger of c, stage by stage (`predict --explain memory`): each
  // term's GiB at the stage's peak and where its rule comes from.
  // REQUIRES: CheckRules(c) == kOk.
  struct LedgerRow {
    std::string stage;  // "first", "middle", "last"; "every" without pipelining
    std::string term;
    double GiB = 0;
    std::string source;
  };
  std::vector<LedgerRow> MemoryLedger(const ParallelConfig& c) const;
  // The full prediction. REQUIRES: CheckRules(c) == kOk. An out-of-memory config
  // still gets its times, with fits = false and reason = kOutOfMemory.
  Prediction Predict(const ParallelConfig& c) const;

  // Whether the training framework can express `c`, and if not, why (a phrase).
  bool Supports(const ParallelConfig& c) const;
  const char* UnsupportedWhy(const ParallelConfig& c) const;
  // Why Megatron-Core refuses c's recompute modules for this model and
  // training (nullptr: it takes them); part of UnsupportedWhy.
  const char* RecomputeModulesWhy(const ParallelConfig& c) const;
  // The part of it that reads the model alone: `modules` name parts `m` does
  // not have (nullptr: it has them all). A pinned --fix recompute_modules is
  // refused by it before any search (CheckFixedForModel).
  static const char* RecomputeModulesModelGap(const ModelSpec& m, uint8_t modules);
  // The framework's rules that read the rank order (c.placement), checked with
  // its start-up rules (CheckRules with framework_rules): "" when c passes.
  const char* PlacementUnsupportedWhy(const ParallelConfig& c) const;
  // A sentence explaining a rule violation with the numbers involved.
  std::string Explain(Reason r, const ParallelConfig& c) const;

  const ModelSpec& model() const { return model_; }
  const TrainingSpec& training() const { return training_; }
  const topology::ClusterSpec& cluster() const { return cluster_; }
  const FrameworkSpec& framework() const { return fw_; }
  int gpus() const { return gpus_; }
  // The relative band of every prediction of this model (Prediction::uncertainty):
  // the framework × GPU residual, widened by a calibrated profile's own and by
  // the job's distance from the framework's calibrated evidence.
  double Uncertainty() const;
  // Model FLOPs per iteration (3 × forward, Korthikanti Eq. 7 generalised).
  double ModelFlopsPerIteration() const { return model_flops_; }
  // The FLOPs the kernels execute per iteration under recompute `r`: the
  // linear layers and logits 3× their forward; the attention core at the
  // triangle a fused causal kernel runs (the full square unfused), its
  // backward 2.5× the forward fused (FlashAttention-2 §3.1: the scores are
  // recomputed) or 2× unfused; selective recompute reruns the core's forward,
  // full recompute every forward but the logits.
  double ExecutedFlopsPerIteration(Recompute r) const {
    return executed_flops_[static_cast<int>(r)];
  }
  // The same for c's recompute, selective counted by its modules: the core's
  // forward for core_attn, the GEMMs of mlp, mla_up_proj, moe and
  // shared_experts (element-wise modules add no FLOPs).
  double ExecutedFlopsPerIteration(const ParallelConfig& c) const;
  // planner::SelectiveModules for this job's framework.
  uint8_t SelectiveModules(const ParallelConfig& c) const;
  // The longest sequence of the published MFU ceilings' runs (GpuSpec::
  // published_mfu_ceilings: 512-8192 tokens).
  static constexpr int kCeilingSeqLen = 8192;
  // The share of the counted model FLOPs at `seq_len` that the kernels execute:
  // a plain dense model counts the causal attention core in full (Eq. 7), of
  // which a fused causal kernel runs half; 1 for unfused attention (it computes
  // the masked half) and for models counted as Megatron-Core does (core at s/2).
  double ExecutedShare(int seq_len) const;

  // Mixture of experts: expert parameters this GPU holds under c (the stage with
  // the most MoE layers; 0 for a dense model). Cheap: the search uses it to skip
  // expert degrees whose experts alone cannot fit.
  double ExpertParamsHeld(const ParallelConfig& c) const;
  // The ranks the experts' weights are sharded over: under torchtitan's FSDP2
  // (over dp_shard × cp, cost::FsdpGroup) its efsdp group, dp_shard·cp·tp /
  // ep (parallel_dims.py:187-192, 282, 328 @b5bcd76c), the expert-data ranks
  // of one data-parallel replica; 1 otherwise (replicated over the
  // expert-data group).
  int ExpertFsdpShards(const ParallelConfig& c) const;
  // The expert parameters of one MoE layer this GPU computes with: its E/ep
  // local experts, each split over etp.
  double LocalExpertParamsPerLayer(const ParallelConfig& c) const;

  // One (m × k)·(k × n) GEMM at the training precision on the efficiency
  // curve, before the cluster's compute correction (the executor prices the
  // GEMMs it runs outside a layout with it). `high_precision`: a GEMM a
  // low-precision recipe keeps in bf16 (the output layer's logits:
  // Megatron-Core's fp8/fp4 context wraps the transformer layers only).
  double GemmSeconds(double m, double n, double k, bool high_precision = false) const;

  // One MoE dispatch (or its combine, the same bytes back) of `tokens` tokens
  // per rank over c's EP group, ranks c.etp apart, `elem_bytes` per hidden
  // element, by dispatcher `d` (docs/model.md "Dispatch and combine"): the
  // term an MoE layer's forward charges twice, and what `validate
  // --collectives` asks of DeepEP's and HybridEP's own benchmarks. 0 when ep is 1.
  double DispatchSeconds(const ParallelConfig& c, MoeDispatcher d, double tokens,
                         double elem_bytes) const;

 private:
  // Fills executed_flops_ (ExecutedFlopsPerIteration) for the job.
  void CountExecutedFlops();
  // The terms live in planner/cost/ (one file per term); these structs carry
  // one term's results to the next (planner/cost/internal.h).
  struct LayerTimes;
  struct Schedule;
  // A dense layer's math per micro-batch: sets out's fwd_compute, bwd_compute
  // and recompute (what c's recompute choice runs again).
  void DenseLayerMath(const ParallelConfig& c, const ComputeTerms& t, LayerTimes* out) const;
  // An MoE layer's math per micro-batch from a dense layer's (DenseLayerMath):
  // its MoE MLP in place of the dense FC1/FC2, forward and backward, and what
  // c's recompute choice runs again (`recompute`, part of `compute`).
  struct MoeMath {
    double compute = 0, recompute = 0;
  };
  MoeMath MoeLayerMath(const ParallelConfig& c, const ComputeTerms& t,
                       const LayerTimes& dense) const;
  // `z_cached` in [0, 1]: the fraction of layers whose gathered Z weights stay
  // cached from the forward to the backward (MemoryBreakdown::z_cached_layers).
  void LayerCost(const ParallelConfig& c, const ComputeTerms& t, double z_cached,
                 LayerTimes* out) const;
  // Per layer and micro-batch: ZeRO-3's exposed gathers and reduce-scatter over
  // the weight-replica group (stride `sd`, size `nd`) of `layer_shard` elements.
  double Zero3LayerSeconds(const ParallelConfig& c, const LayerTimes& lt, double layer_shard,
                           int sd, int nd) const;
  // Per iteration: `comm_data` plus the exposed data-parallel gradient
  // reduction and parameter gather (ZeRO < 3), `L_s` layers on the critical stage.
  // `closing` elements of `psi` (the embedding) are the last whose gradients
  // the backward produces and the first the forward needs.
  double DataSyncSeconds(const ParallelConfig& c, const LayerTimes& lt, double psi,
                         double closing, double L_s, int64_t n_mb, int sd, int nd,
                         double comm_data) const;
  // The data-parallel buckets a framework reduces `psi` elements in: `calls`
  // collectives over `body` elements, then the closing one of `closing`.
  struct DdpBuckets {
    double calls = 1, body = 0, closing = 0;
  };
  DdpBuckets Buckets(const ParallelConfig& c, double psi, double closing, int nd) const;
  // The pipeline schedule: stage times, the critical stage, fill and drain,
  // and the pipeline send/recv (planner/cost/pipeline.cc).
  Schedule PipelineSchedule(const ParallelConfig& c, const ComputeTerms& terms,
                            const LayerTimes& lt, double zero3_layer, const StageLayers& st,
                            int64_t n_mb, double T, double logits_comm) const;
  // Parameters one GPU holds before data-parallel sharding (heavier of first/last stage).
  // For MoE models the dense part only; ExpertParamsHeld is the expert part.
  double ParamsBeforeData(const ParallelConfig& c) const;
  // The same per pipeline stage: the first, a middle and the last.
  struct StageParams {
    double first = 0, middle = 0, last = 0;
  };
  StageParams ParamsPerStage(const ParallelConfig& c) const;
  // Mixture of experts (planner/cost/moe.cc). MoE layers of each stage (first,
  // middle, last) under c's split; expert parameters this GPU holds (the most
  // loaded stage); the MoE compute terms of `t` for c.
  struct StageMoe {
    int first = 0, middle = 0, last = 0;
  };
  StageMoe MoeLayersPerStage(const ParallelConfig& c) const;
  void MoeCompute(const ParallelConfig& c, ComputeTerms* t) const;
  // Fills the forward seconds of ComputeTerms::rc_module (after the calibration
  // scaling, which MoeCompute applies to its own).
  void ModuleRecomputeSeconds(const ParallelConfig& c, ComputeTerms* t) const;
  // Exposed seconds of one MoE layer's expert-parallel communication per micro-batch
  // (forward + backward, + the forward again under full recompute) given the
  // compute it may hide behind.
  double MoeCommSeconds(const ParallelConfig& c, const ComputeTerms& t, double window) const;
  Reason CheckMoeRules(const ParallelConfig& c) const;
  // GpuSpec::GemmEfficiency for the training precision, with the curve's log2
  // sizes computed once (the hot loop calls it millions of times).
  double GemmEfficiency(double m, double n, double k) const;
  double StreamSeconds(double bytes) const;
  // ZeRO-Offload/Infinity (docs/model.md "Host memory and offload"). Per layer
  // and micro-batch: exposed seconds of the parameter partition's host→GPU
  // fetches and gradient partition's GPU→host copies under offload_param.
  // `layer_bytes`: one all-gather buffer of the layer (bytes, before data
  // sharding); `nd`: the data-sharding degree.
  double OffloadLayerSeconds(const ParallelConfig& c, const LayerTimes& lt, double layer_bytes,
                             int nd) const;
  // Per iteration: the CPU Adam step over the node's partitions (seconds) and
  // the exposed gradient and updated-parameter copies. REQUIRES: offload_optimizer.
  struct OffloadStep {
    double cpu_adam_s = 0;
    double copies_s = 0;
  };
  OffloadStep OffloadStepSeconds(const ParallelConfig& c, double psi, int nd, int64_t n_mb,
                                 double bwd_window_s) const;
  // The steps of MemoryWith (planner/cost/memory.cc): the activations each
  // pipeline stage keeps at its peak, each stage's ledger (model states,
  // activations, FSDP2's unsharded stage), and the buffers every stage holds
  // beside them.
  //
  // The activations each pipeline stage keeps at its peak (bytes), before
  // `extra`, which every stage adds. The rank that runs the loss (the last; the
  // first under V schedules or without pipelining) holds the loss's tensors.
  struct StageActivations {
    double first = 0, middle = 0, last = 0;
    double first_loss = 0, last_loss = 0;  // of which the loss's tensors (and MTP's)
    double first_held = 0, middle_held = 0, last_held = 0;  // micro-batches of layers held
    double extra = 0;       // full recompute's working layer less the CPU-offload saving
    double host_bytes = 0;  // FPDT's offloaded chunks and CPU-offloaded layers
    StageMoe moe;           // each stage's MoE layers (ComputeTerms' copy)
  };

  // What each pipeline stage holds at its peak (bytes); host_bytes: the model
  // states offloaded to host memory (the most any stage offloads).
  struct StageLedgers {
    // A stage's memory has two peak moments: the backward, with its saved
    // activations, and the optimizer step, with the step's own copies
    // (ModelStates::step_bytes); the rest is held throughout.
    struct Stage {
      ModelStates states;
      double act = 0;  // saved activations (and the loss's tensors on the last stage)
      // Parameters kept gathered beside their shards: FSDP2 under PP (with the
      // unsharded gradients), Megatron-FSDP's non-unit parameters under ZeRO-3.
      double unsharded = 0;
      // What this stage alone holds through the backward and frees before the
      // step: Megatron-FSDP's non-unit gradient bucket.
      double backward = 0;
      double Held() const { return states.total() - states.step_bytes + unsharded; }
      double total() const { return Held() + std::max(act + backward, states.step_bytes); }
      // Whether the optimizer step, not the backward with its `transient`
      // bytes, is the stage's peak; and that peak with `buffers` beside it.
      bool PeakAtStep(double transient) const {
        return states.step_bytes > act + backward + transient;
      }
      double Peak(double buffers, double transient) const {
        return Held() + buffers + std::max(act + backward + transient, states.step_bytes);
      }
    };
    Stage first, middle, last;
    double host_bytes = 0;
    const Stage& Peak() const {
      const Stage* p = &first;
      if (last.total() > p->total()) p = &last;
      if (middle.total() > p->total()) p = &middle;
      return *p;
    }
  };

  // Buffers every stage holds beside its ledger (bytes); `transient`: what the
  // step's peak adds; `layer_block`: one layer's gathered parameters per GPU.
  struct MemoryBuffers {
    double bytes = 0, transient = 0, layer_block = 0;
  };
  // What MemoryWith reads that c's recompute choice does not change: each
  // stage's ledger without its activations, and the buffers.
  struct MemoryStates {
    StageLedgers ledgers;
    MemoryBuffers buffers;
  };
  StageActivations ActivationsPerStage(const ParallelConfig& c, const ComputeTerms& t) const;
  StageLedgers LedgersPerStage(const ParallelConfig& c, const StageActivations& a) const;
  // LedgersPerStage in its two halves: the states (activations 0) and the
  // activations added to them.
  StageLedgers StatesPerStage(const ParallelConfig& c, const StageMoe& sm) const;
  void AddActivations(const ParallelConfig& c, const StageActivations& a, StageLedgers* out) const;
  // The bytes per gradient element the model states keep (ZeRO's parameter
  // dtype, DeepSpeed's fp32 BF16_Optimizer, Megatron's main gradients).
  double StateGradBytes(const ParallelConfig& c) const;
  MemoryBuffers BuffersOf(const ParallelConfig& c, const ComputeTerms& t) const;
  MemoryStates StatesOf(const ParallelConfig& c, const ComputeTerms& t) const;
  // MemoryWith from its halves: StatesOf(c, t) (its ledgers and buffers) and
  // ActivationsPerStage(c, t).
  MemoryBreakdown CombineMemory(const ParallelConfig& c, const StageLedgers& ledgers,
                                const MemoryBuffers& buf, const StageActivations& act) const;
  // Fills mem's host fields from `host_bytes` this rank keeps in host memory
  // (offloaded model states and FPDT chunks).
  void HostMemory(const ParallelConfig& c, double host_bytes, MemoryBreakdown* mem) const;
  // Ranks of this job on one node: min(gpus, gpus_per_node).
  int RanksPerNode() const;

  ModelSpec model_;
  TrainingSpec training_;
  FrameworkSpec fw_;
  std::string mds_model_gap_;  // MegatronDeepSpeedModelGap, for the mds_model rule
  std::string autoep_gap_;     // DeepSpeedAutoEpGap(model_), for the ds_autoep_model rule
  std::string mcore_model_gap_;  // MegatronModelGap, for the mcore_model rule
  double evidence_steps_ = 0;  // the job's distance from fw_.evidence
  double base_band_ = 0;       // the band before the evidence distance
  // Whether a configuration can carry the DeepEP-across-domains band: an MoE
  // model and a framework that states the band (checked once, not per config).
  bool dedup_band_ = false;
  double elem_traffic_, loss_bytes_, loss_live_bytes_, kernels_per_layer_, host_s_per_layer_;
  double moe_host_s_per_local_expert_;
  // The GEMM libraries' workspaces in the caching allocator, bytes per GPU
  // (planner/cost/memory.cc GemmWorkspaces): every configuration's, and the
  // userbuffers streams' added under TP communication overlap. Set once per job.
  double gemm_workspace_bytes_ = 0, ub_workspace_bytes_ = 0;
  void SetGemmWorkspaces();
  double GemmWorkspaceBytes(const ParallelConfig& c) const;
  topology::ClusterSpec cluster_;
  int gpus_;
  topology::GroupCostTable comm_;
  double peak_flops_;       // FLOP/s at the training precision
  double stream_Bps_;       // achievable HBM bytes/s
  double act_bytes_;        // bytes per activation element
  double param_bytes_;      // bytes per weight element in compute precision
  double gather_bytes_;     // bytes per weight element in a parameter all-gather
  double grad_bytes_;       // bytes per main-gradient element
  double model_flops_;
  double executed_flops_[3] = {};  // ExecutedFlopsPerIteration by Recompute
  // Prediction::mfu_vs_ceiling / mfu for this job: ExecutedShare at its
  // sequence over that at min(sequence, kCeilingSeqLen).
  double ceiling_mfu_scale_ = 1;
  double layer_params_;     // parameters of one block (a dense block for MoE models)
  double attn_qkv_n_, attn_proj_k_;  // QKV output width and output-projection input width
  double attn_head_dim_;    // head dim the attention core runs at ((d_qk + d_v)/2 for MLA)
  double norm_params_;      // of which norms (replicated across tensor ranks)
  std::vector<double> curve_log2_size_, curve_eff_;  // the precision's GEMM curve
  double curve_peak_ratio_ = 1.0;  // precision peak / the curve's own precision peak
  double recipe_factor_ = 1.0;     // GpuSpec::recipe_gemm_factor of the training recipe
  // GpuSpec::GemmCeilingAt the precision's GEMMs run at (1: none measured):
  // no GEMM is priced above it.
  double gemm_ceiling_ = 1.0;
  // The bf16 path for GEMMs a recipe keeps in high precision, and its ceiling.
  double hp_peak_flops_ = 0;
  double hp_gemm_ceiling_ = 1.0;
  std::vector<double> hp_curve_log2_size_, hp_curve_eff_;
};

// MemoryWith for the search's configurations of one expert layout (ep, etp),
// told of each pipeline layout (NewLayout) and each micro-batch's terms
// (NewTerms):
// the states half splits into the ledgers (CostModel::StatesPerStage), which
// read the pipeline layout and the ZeRO choice (zero, distributed optimizer,
// ZeRO++, offload) and nothing the compute terms carry but the layout's MoE
// layers per stage, and the buffers (BuffersOf), which read the terms of the
// micro-batch; the activations half (ActivationsPerStage) reads the recompute
// choice (recompute, recompute_modules) and the terms. So the ledgers are
// computed once per (pipeline, ZeRO choice) for every micro-batch, sequence
// parallelism and context-parallel kind, the buffers once per ZeRO choice and
// terms, the activations once per recompute choice and terms, and the halves
// combined per configuration. Not for hpZ under ZeRO-3, whose buffers read the
// placement.
class CostModel::MemoryGrid {
 public:
  static constexpr size_t kRecomputeSlots = 8;
  // `ledger_slots`: how many (pipeline, ZeRO choice) pairs NewZeroChoice names.
  MemoryGrid(const CostModel& cm, size_t ledger_slots)
      : cm_(cm), ledgers_(ledger_slots), overflow_(ledger_slots, -1) {}
  // New compute terms (micro-batch, sequence parallelism, context kind), ==
  // cm.Compute(c) with the layout applied for every c asked until the next
  // call, outliving it: forgets the buffers and activations, keeps the ledgers.
  void NewTerms(const ComputeTerms* t) {
    t_ = t;
    Forget();
  }
  // Another pipeline, `layout` its LayoutTermsOf: the ledgers read its MoE
  // layers per stage (and nothing else of the terms, so StatesOverflow needs
  // no terms). Forgets the buffers and activations.
  void NewLayout(const LayoutTerms& layout) {
    moe_ = StageMoe{layout.moe_layers_first, layout.moe_layers_middle, layout.moe_layers_last};
    Forget();
  }
  // A new ZeRO choice: `ledger_slot` (< ledger_slots) names it with its
  // pipeline; forgets the buffers.
  void NewZeroChoice(size_t ledger_slot) {
    slot_ = ledger_slot;
    buffers_.reset();
  }
  // == cm.MemoryWith(c, t); `slot` (< kRecomputeSlots) names c's recompute choice.
  MemoryBreakdown Memory(const ParallelConfig& c, size_t slot);
  // Whether the current ZeRO choice's model states alone (its ledger and the
  // runtime's reserve, with no activations, other buffers or workspaces)
  // already exceed the usable memory:
  // then Memory(c, slot).Verdict() is kOutOfMemory for every slot and every
  // terms until the next NewZeroChoice, since each of those only adds.
  bool StatesOverflow(const ParallelConfig& c);

 private:
  const CostModel& cm_;
  void Forget() {
    buffers_.reset();
    for (auto& a : activations_) a.reset();
  }
  const StageLedgers& Ledgers(const ParallelConfig& c);
  const ComputeTerms* t_ = nullptr;
  StageMoe moe_;
  size_t slot_ = 0;
  std::vector<std::optional<StageLedgers>> ledgers_;
  std::vector<int8_t> overflow_;  // StatesOverflow per ledger slot: 1, 0, -1 not yet asked
  std::optional<MemoryBuffers> buffers_;
  std::array<std::optional<StageActivations>, kRecomputeSlots> activations_;
};

}  // namespace paratune::planner
