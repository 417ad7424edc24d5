// planner/framework.h: the training stack as an input of the cost model
// (docs/model.md). The same parallel configuration runs at different speeds in
// Megatron-Core with Transformer Engine, in an eager PyTorch FSDP trainer and
// in torchtitan: they fuse different element-wise kernels, compute the loss
// differently, spend different host time per layer, overlap sharded-parameter
// traffic differently and can express different families. Each framework is a
// preset file (planner/presets/frameworks/*.json) that states those figures,
// each with a source; docs/frameworks.md explains them. Pure data: parsing and
// lookup only, thread-safe after the first call.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "planner/model.h"
#include "planner/pipeline.h"
#include "topology/cluster.h"

namespace paratune::planner {

enum class Framework : uint8_t {
  kMegatron = 0,       // Megatron-LM / Megatron-Core / NeMo with Transformer Engine (default)
  kMegatronDeepSpeed,  // Megatron-DeepSpeed: Megatron's model code on the DeepSpeed engine
  kDeepSpeed,          // the DeepSpeed engine on an eager PyTorch model (HF Transformers)
  kFsdp,               // PyTorch FSDP1 trainers (llm-foundry/Composer, HF Trainer/Accelerate)
  kTorchtitan,         // torchtitan: FSDP2 (per-parameter DTensor sharding), TP, PP, CP
  kAxonn,              // AxoNN (Megatron-AxoNN): 3D tensor parallelism + data
};
inline constexpr int kNumFrameworks = 6;
const char* FrameworkName(Framework f);  // "megatron" | "megatron-deepspeed" | "deepspeed" | ...
Result<Framework> ParseFramework(const std::string& name);
// Every framework, in enum order.
std::array<Framework, kNumFrameworks> AllFrameworks();

// What a framework can express: the configuration families it supports
// (ecosystem.md §2). The search never offers a configuration outside them.
struct FrameworkSupport {
  bool tp = false;         // Megatron-style tensor parallelism (gy with gx = 1)
  bool sp = false;         // sequence parallelism over the tensor group
  bool tp_without_sp = true;  // TP may run without SP
  bool axonn_xy = false;   // AxoNN's X and Y (gx, gy; gx > 1 allowed)
  bool shard_z = false;    // parameter sharding as its own dimension (AxoNN Z, FSDP shard group)
  bool pp = false;         // pipeline parallelism
  bool vpp = false;        // interleaved (virtual) pipeline stages
  int vpp_min_pp = 2;      // interleaving needs pp >= this (Megatron-LM 2023 asserted pp > 2)
  bool uneven_pp = false;  // ranks holding different layer counts
  // Pipeline schedules it runs ("pp_schedules": 1f1b (with interleaved where
  // vpp), zb-h1, zb-v, dualpipev; default 1F1B only), by PpSchedule.
  std::array<bool, kNumPpSchedules> pp_schedules{true, false, false, false};
  // How the framework splits layers over pipeline stages ("pp_split":
  // megatron | torchtitan | balanced; planner/pipeline.h).
  PpSplit pp_split = PpSplit::kBalanced;
  bool cp_ring = false, cp_ulysses = false, cp_fpdt = false;
  std::array<bool, 4> zero{true, false, false, false};  // ZeRO stages 0..3 over the data group
  bool distributed_optimizer = false;  // Megatron's optimizer-state sharding
  bool zeropp = false;                  // qwZ / hpZ / qgZ
  // ZeRO-Offload / ZeRO-Infinity to host memory ("offload": ["optimizer", "param"]).
  bool offload_optimizer = false, offload_param = false;
  // Layer-wise CPU activation offloading ("offload": [..., "activations"];
  // Megatron-Core --cpu-offloading-num-layers) and full-iteration CUDA graphs.
  bool offload_activations = false;
  bool cuda_graphs = false;
  bool pp_with_zero2 = true;            // DeepSpeed's pipeline engine refuses ZeRO-2/3
  bool cp_with_tp_pp = true;            // DeepSpeed Ulysses runs without Megatron TP/PP
  std::array<bool, 3> recompute{true, true, true};  // none, selective, full
  // Selective recompute chosen per module ("recompute": [..., "modules"];
  // Megatron-Core --recompute-modules); without it selective is the
  // framework's own set (core_attn, or per-op SAC with selective_per_op).
  bool recompute_modules = false;
  bool compile = false;                 // torch.compile applies to the model
  std::vector<std::string> placements;  // rank orders, innermost first ("x-y-cp-z-data-pp")
  // Overlaps the framework turns on (config keys: oar, ors, oag,
  // overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, overlap_p2p).
  // "overlap_param_gather" and "tp_comm_overlap" apply where meaningful
  // (distributed optimizer / ZeRO-3; sp), "overlap_p2p" with vpp > 1.
  std::vector<std::string> overlaps;
  // overlap_grad_reduce also with pipeline stages (Megatron-LM of 2023
  // asserted pipeline_model_parallel_size == 1 for it).
  bool overlap_grad_reduce_with_pp = true;
  // FSDP shards over the data-shard and context-parallel ranks together
  // (torchtitan's fsdp mesh, dp_shard × cp) and is applied whenever either is
  // above 1; each shard is replicated over the data replicas only. Without
  // it FSDP shards over gz and every shard is replicated over data × cp.
  bool fsdp_over_cp = false;
  // Whether c shards its weights with FSDP under these rules (gz > 1, or
  // cp > 1 with fsdp_over_cp).
  bool Fsdp(const ParallelConfig& c) const { return c.gz > 1 || (fsdp_over_cp && c.cp > 1); }
};

// The modules c's selective recompute runs: c.recompute_modules where the
// framework recomputes per module (Megatron-Core), else its own set (the
// attention core, and in MoE layers the experts' activation); 0 without
// selective recompute.
uint8_t SelectiveModules(const ParallelConfig& c, const FrameworkSupport& f);

// How fast the framework's kernels and host code are, relative to the cost
// model's fused baseline (Megatron-Core + TE). Each value "eager" applies
// without torch.compile, "compiled" with it (for frameworks that support it).
struct FrameworkCosts {
  // Multiplier on the element-wise (norm, activation, residual, dropout) HBM
  // bytes of the fused baseline: separate kernels each read and write their tensors.
  double elementwise_traffic = 1.0;
  double elementwise_traffic_compiled = 1.0;
  // Bytes moved per logit element by the loss, forward and backward (the
  // logits' upcast, softmax, its gradient and the downcast).
  double loss_bytes_per_logit = 12.0;
  double loss_bytes_per_logit_compiled = 12.0;
  // Bytes per logit element held at the loss's peak (the logits themselves,
  // an fp32 copy, the saved softmax): the last stage's largest transient.
  double loss_live_bytes_per_logit = 6.0;
  double loss_live_bytes_per_logit_compiled = 6.0;
  // GPU kernels per transformer layer for one micro-batch, forward + backward
  // (each costs the GPU's fixed per-kernel time), and host (CPU) time to issue
  // one layer's forward + backward: the layer cannot run faster than its host
  // issues it (eager PyTorch dispatch, autograd, hooks).
  double kernels_per_layer = 35;
  double kernels_per_layer_compiled = 35;
  double host_us_per_layer = 250;
  double host_us_per_layer_compiled = 250;
  // Host time to issue one local expert's kernels in a mixture-of-experts
  // layer, forward + backward, where the framework runs a GEMM (and its FP8
  // casts) per expert: FC1 and FC2, their input and weight gradients. The
  // dispatch before them blocks the host until the token counts arrive, so
  // the host cannot issue this section ahead of the GPU (planner/cost/
  // pipeline.cc). 0 = one grouped kernel for all local experts.
  double moe_host_us_per_local_expert = 0;
  // The fraction of a GPU's NIC bandwidth that the node-deduplicating
  // dispatchers (DeepEP, HybridEP) reach on the bytes they send across nodes,
  // by the number of nodes the EP group spans (ascending; linear in log2(nodes)
  // between points, the end values beyond). Empty: the cluster's all-to-all
  // efficiency, as for the all-to-all dispatcher.
  struct NicFraction {
    int nodes = 0;
    double fraction = 0;
  };
  std::vector<NicFraction> dedup_nic_fraction;
  // Multiplier on the GPU preset's fused-attention efficiencies: the
  // framework's attention kernel (cuDNN/TE fused attention, FlashAttention-2,
  // Triton flash attention with ALiBi biases, ...).
  double attention_efficiency = 1.0;
  // Fraction of the sharded-parameter traffic (FSDP / ZeRO-3 / AxoNN Z
  // gathers and reduce-scatters) that the framework can hide behind compute
  // when its overlap is on; the rest is exposed.
  double shard_overlap = 1.0;
  // Fraction of the data-parallel gradient reduction hidden when overlapped.
  double grad_reduce_overlap = 1.0;
  // Multiplier on the optimizer step's HBM bytes (fused multi-tensor Adam = 1).
  double optimizer_traffic = 1.0;
  // Caching-allocator fragmentation: reserved = peak allocated × (1 + this),
  // with expandable segments (TrainingSpec::expandable_segments) ...
  double allocator_fragmentation = 0.05;
  // ... and with fixed-size segments, PyTorch's default.
  double allocator_fragmentation_fixed = 0.36;
  // Gathered-parameter buffers held at once by sharded (FSDP/ZeRO-3/Z)
  // execution, in layers (the layer in use plus prefetched ones).
  double gathered_layers = 2.0;
  // The forward tensor all-reduce (X/Y) is pipelined over this many chunks of
  // the micro-batch: a chunk's all-reduce runs while the next chunk's GEMM
  // computes, so only the last chunk's waits in full (1 = not pipelined).
  double forward_allreduce_chunks = 1.0;
  // 1: gathered Z weight blocks are kept from the forward to the backward
  // (and the recompute) for as many layers as GPU memory leaves room for, so
  // those layers gather once per micro-batch instead of two or three times.
  double z_weight_cache = 0.0;
  // 1: the Z weights are gathered and their gradients reduce-scattered per
  // linear layer, each Linear its own collective (AxoNN's Linear,
  // axonn-notes §1.3); 0: one all-gather and one reduce-scatter per
  // transformer block (FSDP's unit: each block is its own fully_shard /
  // FSDP-wrapped module, torchtitan fsdp.py:267-366 @b5bcd76).
  double z_per_linear = 0.0;
  // ZeRO-3's issue schedule (DeepSpeed): the prefetch gathers parameters in
  // calls that take them, in module order, until a call holds at least
  // `zero3_gather_bucket_elements` (stage3_prefetch_bucket_size); gradients
  // are reduce-scattered from a bucket flushed before it would pass
  // `zero3_reduce_bucket_elements` (reduce_bucket_size). 0: one all-gather
  // and one reduce-scatter per transformer layer.
  double zero3_gather_bucket_elements = 0.0;
  double zero3_reduce_bucket_elements = 0.0;
  // Megatron's DDP buckets (overlap_grad_reduce): gradients are reduced in
  // buckets of max(`ddp_bucket_min_elements`, `ddp_bucket_elements_per_rank`
  // x data-parallel ranks) elements, each a collective launched as soon as
  // its gradients are complete; the bucket holding the embedding closes
  // last, after the backward, and is gathered first before the forward.
  // 0: the gradients reduce as one collective hidden behind the backward.
  double ddp_bucket_min_elements = 0.0;
  double ddp_bucket_elements_per_rank = 0.0;
  // 1: the Z reduce-scatter moves weight gradients in the parameter dtype
  // (bf16 weight.grad, accumulated into fp32 main gradients after it); 0: in
  // the main-gradient dtype (FSDP's reduce_dtype = fp32).
  double z_reduce_in_param_dtype = 0.0;
  // 1: sharded parameters are kept in fp32 and are the optimizer's master
  // copy; the 16-bit copy exists only while a shard is gathered (PyTorch
  // FSDP's mixed precision: FlatParamHandle keeps _local_shard in full
  // precision and frees the low-precision _mp_shard after the all-gather;
  // FSDP2 casts its fp32 DTensor shards at the all-gather). Sharded model
  // states then cost 4 (params) + 8 (Adam moments) bytes, not 2 + 12.
  double sharded_params_are_master = 0.0;
  // 1: "selective" recompute is per-op selective activation checkpointing
  // (torchtitan's SAC, selective_ac_option "op"): a block keeps its input,
  // the outputs of every other matmul and the attention kernel's output and
  // log-sum-exp, and recomputes everything else (planner/memory.h,
  // PerOpSacActivationBytes). 0: Korthikanti's selective recompute of the
  // attention core (Megatron's --recompute-granularity selective).
  double selective_per_op = 0.0;
  // 1: under pipeline parallelism the sharded (FSDP2) blocks keep their
  // gathered parameters and their unsharded gradients, in the reduce dtype,
  // from the first micro-batch to the last (torchtitan's
  // reshard_after_forward = not pp_enabled; PyTorch's pipelining stage turns
  // gradient sync off until the last backward).
  double pp_keeps_unsharded = 0.0;
  // 1: in bf16 with fp32 gradient accumulation, under ZeRO-1 or pipeline
  // parallelism without ZeRO, the engine runs DeepSpeed's BF16_Optimizer,
  // which keeps an fp32 gradient buffer the size of the rank's whole model
  // (not a partition) beside the bf16 parameters.
  double bf16_optimizer_fp32_grads = 0.0;
};

// A region of the job space where calibration rows of this framework exist:
// the GPU (preset name prefix), precision, GPU count, model size and model
// family they cover. A prediction's distance from the nearest region widens
// its uncertainty band (docs/model.md, "Ranking people can trust").
struct Evidence {
  std::string gpu;        // GPU preset prefix: "a100", "h100"
  std::string precision;  // "bf16", "fp8"
  int gpus_min = 1, gpus_max = 1;
  double params_b_min = 0, params_b_max = 0;  // billions of parameters
  std::vector<std::string> families;          // "gpt", "llama" (planner::ModelFamily)
  std::string source;                         // the calibration rows
};

// FrameworkCosts::dedup_nic_fraction at an EP group spanning `nodes` nodes:
// linear in log2(nodes) between the table's points, its end values beyond; 0
// when the table is empty.
double DedupNicFraction(const FrameworkCosts& c, int nodes);

// torchtitan carves expert parallelism out of its shard mesh: ep divides
// dp_shard·cp·tp (pytorch/torchtitan b5bcd76c parallel_dims.py:187-192; the
// rule kEpInShardMesh).
inline bool EpInShardMesh(int64_t dp_shard, int cp, int tp, int ep) {
  return ep > 0 && (dp_shard * cp * tp) % ep == 0;
}

// How far a job lies from the evidence: 0 inside a region; one step for a
// precision or model family the region lacks, one per factor of 4 in GPU
// count or model size outside it (log4 distance), and kNoEvidenceSteps where
// no region names the GPU. The nearest region counts.
inline constexpr double kNoEvidenceSteps = 3.0;
double EvidenceSteps(const std::vector<Evidence>& evidence, const std::string& gpu_name,
                     const std::string& precision, int gpus, double params_b,
                     const std::string& family);

// Start-up rules beyond the families a framework expresses: a configuration
// that breaks one crashes the framework at start-up. The preset lists the
// rules that apply (`rules`: [{"rule": name, "source": "file:line @commit"}]);
// the search never ranks a configuration that breaks one (it may name the
// fastest such one as what the framework would allow otherwise).
enum class FrameworkRule : uint8_t {
  // Transformer Engine's all-to-all context parallelism (Megatron --cp-comm-type
  // a2a): Q heads per TP rank and KV heads per TP rank, max(1, kv/tp), both
  // divisible by cp.
  kCpA2aLocalHeads = 0,
  // Megatron-DeepSpeed's Ulysses asserts the query projection equals the KV
  // projection: no GQA/MQA.
  kUlyssesNoGqa,
  // FPDT all-to-alls K/V heads over the sequence group: kv_heads % cp == 0;
  // its FFN is the GeLU MLP with biases; its chunk splits the sequence, each
  // rank's share and the FFN's half chunks evenly.
  kFpdtShapes,
  // torchtitan pipelines only untied embeddings.
  kPpUntiedEmbeddings,
  // torchtitan: tokens per micro-batch divisible by (tp with SP) · (2·cp when cp > 1).
  kTokensOverTpCp,
  // DeepSpeed's hpZ groups are runs of consecutive global ranks: with Megatron
  // tensor parallelism inside, those hold different tensor shards.
  kHpzWithoutTp,
  // Megatron-Core: a MoE model with linear biases keeps its experts whole (etp 1).
  kMoeBiasEtp1,
  // torchtitan: expert parallelism borrows from the dp_shard·cp·tp ranks (ep
  // divides them) and the experts are never tensor-split (etp 1).
  kEpInShardMesh,
  // Megatron-DeepSpeed builds the model only when its flags express it: MoE
  // experts that are the dense MLP under softmax gating on an --expert-interval
  // pattern, full causal attention, RoPE without Llama 3.x scaling
  // (MegatronDeepSpeedModelGap).
  kMdsModel,
  // Megatron-Core builds the model only when its flags express it: local
  // attention as a sliding window on every layer or on all but every N-th
  // (--window-size, --window-attn-skip-freq), no chunked attention, Q/K norms
  // per head (MegatronModelGap).
  kMcoreModel,
  // DeepSpeed's Hugging Face flow splits experts only through AutoEP, which
  // knows the MoE models of its presets (DeepSpeedAutoEpPreset): ep > 1 needs one.
  kDsAutoEpModel,
};
inline constexpr int kNumFrameworkRules = 11;
const char* FrameworkRuleName(FrameworkRule r);  // "cp_a2a_local_heads", ...
Result<FrameworkRule> ParseFrameworkRule(const std::string& s);

struct FrameworkRuleRef {
  FrameworkRule rule;
  std::string source;  // file:line @commit and the condition, as the preset states it
};

// The facts of a job a rule reads.
struct RuleJob {
  int heads = 1, kv_heads = 1;
  bool tied_embeddings = false, gated_ffn = false, linear_bias = true;
  bool moe = false;  // the model has routed experts
  // Why Megatron-DeepSpeed cannot build the model ("" = it can), computed
  // once per cost model (MegatronDeepSpeedModelGap).
  const std::string* mds_model_gap = nullptr;
  // Why DeepSpeed's AutoEP cannot split the model's experts ("" = it can),
  // computed once per cost model (DeepSpeedAutoEpGap).
  const std::string* autoep_gap = nullptr;
  // Why Megatron-Core cannot build the model at this sequence length ("" =
  // it can), computed once per cost model (MegatronModelGap).
  const std::string* mcore_model_gap = nullptr;
  int64_t seq_len = 0;
  int64_t fpdt_chunk_tokens = 65536;
};

// Why Megatron-Core cannot build `m`'s local attention at `seq_len` ("" = it
// can). It has a sliding window of (w, 0) on the layers whose 1-based number
// is not a multiple of --window-attn-skip-freq N (transformer/utils.py:532-546
// @d98e8a6) and no chunked attention; chunks of w equal full causal attention
// up to seq w, with RoPE left out of every N-th layer (--no-rope-freq N,
// transformer_config.py:3138-3150), as Llama 4 lays them out.
std::string MegatronLocalAttentionGap(const ModelSpec& m, int64_t seq_len);
// Why Megatron-Core's flags cannot build `m` at `seq_len` ("" = they can): its
// local attention (MegatronLocalAttentionGap), and Q/K norms only per head
// (--qk-layernorm builds q_layernorm and k_layernorm of kv_channels,
// megatron/core/transformer/attention.py:1734-1751 @d98e8a6), not over all
// heads' features (OLMoE).
std::string MegatronModelGap(const ModelSpec& m, int64_t seq_len);
// Why Megatron-DeepSpeed's flags (deepspeedai/Megatron-DeepSpeed @4efb479,
// megatron/arguments.py) cannot build `m` at `seq_len` ("" = they can): the
// MoE layer's limits (MegatronDeepSpeedMoeGap); no sliding-window or chunked
// attention beyond the window (no flag for it); rotary embeddings with a base
// only (--rotary-position-embeddings-theta, arguments.py:635-637), so no
// Llama 3.x frequency scaling; no Q/K norms, attention sinks or clamped
// activation (its parser has no flag for them).
std::string MegatronDeepSpeedModelGap(const ModelSpec& m, int64_t seq_len);
// The local-attention pattern's N: layers / (layers - sliding_layers) when it
// divides, 1 when every layer is local, 0 when no N expresses it.
int LocalAttentionPeriod(const ModelSpec& m);

// Whether c breaks `rule` for `job`; if so and `why` is given, *why says
// what breaks it, with the values.
bool FrameworkRuleBroken(FrameworkRule rule, const RuleJob& job, const ParallelConfig& c,
                         std::string* why = nullptr);
struct FrameworkSpec;
// The first rule of `fw` that c breaks (nullptr: none), and why in *why.
const FrameworkRuleRef* BrokenRule(const FrameworkSpec& fw, const RuleJob& job, const ParallelConfig& c,
                                   std::string* why = nullptr);

struct FrameworkSpec {
  std::string name;          // preset key, e.g. "fsdp"
  std::string display_name;  // "PyTorch FSDP1 (llm-foundry, HF Trainer)"
  FrameworkSupport support;
  FrameworkCosts costs;
  // Relative 1-sigma prediction error of iteration time, by GPU preset name
  // prefix ("a100", "h100", ...; "default" for the rest): the residuals of
  // `paratune validate` on public runs of this framework (docs/model.md).
  std::map<std::string, double> uncertainty;
  // Relative 1-sigma error of the configurations with a feature that the
  // calibration rows predict worse than the rest (preset key
  // `feature_uncertainty`), added in quadrature to the band of a prediction
  // with it. `dedup_dispatch_across_domains`: DeepEP/HybridEP dispatch whose EP
  // group spans NVLink domains; the RMS log error of `paratune validate` on
  // the MoE rows that run it.
  double dedup_across_domains_uncertainty = 0;
  // Where this framework's calibration rows lie (preset key `evidence`).
  std::vector<Evidence> evidence;

  // Start-up rules the search applies (preset `rules`), each with its source.
  std::vector<FrameworkRuleRef> rules;
  std::string source;
  std::map<std::string, std::string> sources;  // per-field provenance

  // The relative band for a GPU preset name (e.g. "h100-sxm" → the "h100" entry).
  double Uncertainty(const std::string& gpu_name) const;
};

Result<FrameworkSpec> ParseFrameworkSpec(const Json& j, const std::string& pointer);
// Turns on in `c` every overlap the framework offers where it applies
// (FrameworkSupport::overlaps): the policy the search and validation share.
// Overlaps it does not offer are left as they are.
void ApplyFrameworkOverlaps(const FrameworkSupport& fr, ParallelConfig* c);

// Whether framework `f` overlaps the expert-parallel all-to-all with compute
// in `c`: Megatron-Core does where its rules allow it (ep > 1, a dispatcher
// other than all-gather, no full recompute, no pipeline or an interleaved one;
// transformer_config.py:3002-3046 @d98e8a64); never slower in the model.
bool MoeA2aOverlapApplies(Framework f, const ParallelConfig& c);

// The knobs a configuration leaves to its framework, as the search sets them
// and as `predict` resolves a configuration that does not state them: the
// overlap switches (kOverlapSwitches, ApplyFrameworkOverlaps on all-off) and
// the expert all-to-all overlap (MoeA2aOverlapApplies). The degrees, ZeRO and
// recompute choices of `c` are kept.
ParallelConfig WithFrameworkPolicy(Framework f, ParallelConfig c);

// ConfigToString(c) followed by every policy knob (WithFrameworkPolicy) where
// `c` differs from framework `f`'s policy, as "key=true|false": the text
// `predict --config`, `plan --fix`, the REST config and the page's pins
// accept, and which prices as the configuration does.
std::string ConfigText(Framework f, const ParallelConfig& c);

// The compiled-in preset of `f` (planner/presets/frameworks/<name>.json).
const FrameworkSpec& FrameworkPreset(Framework f);

// `cluster` as a cost model of framework `f` sees it: when
// cluster.framework_corrections has an entry for FrameworkName(f) and
// cluster.gpu.name, its factors replace cluster.corrections (calibration from
// training logs, frameworks/logs.h, is per framework x GPU); otherwise the
// cluster unchanged. The entries are kept. Pure; thread-safe.
topology::ClusterSpec ClusterForFramework(const topology::ClusterSpec& cluster, Framework f);

}  // namespace paratune::planner
