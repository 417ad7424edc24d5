// planner/config.h: one parallel configuration (cost-model.md §1). A single
// small value type covers every family: AxoNN's 3D tensor grid (gx, gy, gz) +
// gdata, Megatron TP/PP/SP (tp ≡ gy with gx = 1), context parallelism (ring,
// Ulysses, FPDT), ZeRO 0-3 and ZeRO++, recompute, micro-batch, overlaps and the
// placement order of the dimensions on ranks. It is trivially copyable so the
// search can hold millions of them without allocation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

enum class CpKind : uint8_t { kRing = 0, kUlysses, kFpdt };
// How a mixture-of-experts layer moves tokens to their experts (planner/moe.h
// describes each; Megatron-Core --moe-token-dispatcher-type alltoall | allgather,
// flex with --moe-flex-dispatcher-backend deepep | hybridep).
enum class MoeDispatcher : uint8_t { kAllToAll = 0, kAllGather, kDeepEp, kHybridEp };
inline constexpr int kNumMoeDispatchers = 4;
enum class Recompute : uint8_t { kNone = 0, kSelective, kFull };
// What selective recompute recomputes: Megatron-Core's --recompute-modules
// (NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/transformer_config.py,
// recompute_modules), a set of bits. Each module's tensors are dropped after the
// forward and rebuilt before the backward (planner/memory.h RecomputeSavings
// says which tensors and what each costs). Megatron's default list is
// core_attn alone.
enum RecomputeModule : uint8_t {
  kRcCoreAttn = 1 << 0,       // the attention core (softmax statistics)
  kRcLayerNorm = 1 << 1,      // the norms that are separate modules (their outputs)
  kRcMlp = 1 << 2,            // the dense MLP (its FC1 input and outputs)
  kRcMoeAct = 1 << 3,         // the experts' activation function (the FC2 input)
  kRcMoe = 1 << 4,            // the whole MoE layer (router, dispatch, experts)
  kRcSharedExperts = 1 << 5,  // the shared experts
  kRcMlaUpProj = 1 << 6,      // MLA's up-projections (Q, K, V from the latents)
};
inline constexpr int kNumRecomputeModules = 7;
inline constexpr uint8_t kDefaultRecomputeModules = kRcCoreAttn;
// Megatron's names joined by '+' in bit order: "core_attn+moe_act".
std::string RecomputeModulesName(uint8_t modules);
// Megatron's names, one each, separated by '+', ',' or spaces ("core_attn+mlp");
// at least one.
Result<uint8_t> ParseRecomputeModules(const std::string& s);
// The module's name by bit (kRcMlp → "mlp").
const char* RecomputeModuleName(RecomputeModule m);
// The pipeline schedule (planner/pipeline.h prices each): Megatron's 1F1B,
// interleaved when vpp > 1 (Narayanan et al. 2021); zero-bubble ZB-H1/ZB1P,
// the backward split into an input-gradient pass B and a weight-gradient pass W
// that fills the bubble (Qi et al. 2023), looped over vpp stages per rank;
// ZB-V, two stages per rank in a V (Qi et al. 2023 §6); DualPipeV, DeepSeek's
// DualPipe cut in half onto a V (DeepSeek-V3 report §3.2.1, deepseek-ai/DualPipe).
enum class PpSchedule : uint8_t { k1F1B = 0, kZbH1, kZbV, kDualPipeV };
inline constexpr int kNumPpSchedules = 4;

const char* CpKindName(CpKind k);        // "ring" | "ulysses" | "fpdt"
const char* MoeDispatcherName(MoeDispatcher d);  // "alltoall" | "allgather" | "deepep" | "hybridep"
Result<MoeDispatcher> ParseMoeDispatcher(const std::string& s);
const char* RecomputeName(Recompute r);  // "none" | "selective" | "full"
// "1f1b" | "zb-h1" | "zb-v" | "dualpipev"; k1F1B with vpp > 1 is "interleaved".
const char* PpScheduleName(PpSchedule s, int vpp = 1);
// Accepts the names above and "interleaved" (k1F1B).
Result<PpSchedule> ParsePpSchedule(const std::string& s);
Result<CpKind> ParseCpKind(const std::string& s);
Result<Recompute> ParseRecompute(const std::string& s);

// The parallel dimensions that are laid on ranks. Placement lists them
// innermost (fastest-varying rank index, inside a node first) to outermost.
enum class Dim : uint8_t { kX = 0, kY, kCp, kZ, kData, kPp };
inline constexpr int kNumDims = 6;
const char* DimName(Dim d);  // "x" | "y" | "cp" | "z" | "data" | "pp"

struct Placement {
  // Megatron's default order tp-cp-dp-pp with AxoNN's X→Y→Z inside it.
  std::array<Dim, kNumDims> order = {Dim::kX, Dim::kY, Dim::kCp, Dim::kZ, Dim::kData, Dim::kPp};
  bool operator==(const Placement&) const = default;
};
// "x-y-cp-z-data-pp" (also accepts "tp" for y and "dp" for data; every dim once).
std::string PlacementToString(const Placement& p);
Result<Placement> ParsePlacement(const std::string& s);

// Transformer layers per pipeline rank (planner/pipeline.h SplitLayers).
struct StageLayers {
  int first = 0, middle = 0, last = 0;  // middle: the most loaded rank between (0 when pp <= 2)
  int max = 0;                          // the most loaded rank
  bool even = true;                     // every rank holds the same count
};

struct ParallelConfig {
  // Degrees. Megatron tensor parallelism t is gy = t with gx = 1 (column- then
  // row-parallel layers = AxoNN's normal/transposed pair).
  int gx = 1, gy = 1, gz = 1, gdata = 1;
  int pp = 1, vpp = 1;  // pipeline stages, virtual stages per device (interleaved 1F1B)
  // The schedule over the pp·vpp stages (config key pp_schedule). ZB-V and
  // DualPipeV place stage s and 2pp−1−s on rank s (vpp = 2).
  PpSchedule pp_schedule = PpSchedule::k1F1B;
  // Uneven pipeline stages (Megatron's --decoder-first/last-pipeline-num-layers):
  // layers on the first and last stage; 0 = automatic (layers split as evenly as
  // possible, the first stages taking the remainder: DeepSpeed, torchtitan).
  int first_stage_layers = 0, last_stage_layers = 0;
  // The embedding and the loss counted as this many transformer layers when
  // the framework splits layers over stages (planner/pipeline.h): Megatron's
  // --account-for-embedding/loss-in-pipeline-split (0 or 1), torchtitan's
  // pipeline_parallel_first/last_stage_less_layers. 0 = not counted.
  int pp_embedding_layers = 0, pp_loss_layers = 0;
  int cp = 1;           // context/sequence-parallel degree
  CpKind cp_kind = CpKind::kRing;
  bool sp = false;      // Megatron sequence parallelism over the Y (tensor) group
  int zero = 0;         // ZeRO stage 0-3 over the data group
  bool distributed_optimizer = false;  // Megatron's optimizer-state sharding over data
  bool qwz = false, hpz = false, qgz = false;  // ZeRO++ (with zero = 3)
  // ZeRO-Offload / ZeRO-Infinity (host memory, docs/model.md "Host memory and
  // offload"): the optimizer states and gradient partition live in host memory
  // and the Adam step runs on the CPU (zero >= 1); under zero = 3 the parameter
  // partition too (DeepSpeed's offload_optimizer / offload_param, device "cpu").
  bool offload_optimizer = false, offload_param = false;
  // Megatron-Core's CPU activation offloading (--cpu-offloading-num-layers):
  // the activations of this many transformer layers go to host memory in the
  // forward and come back for the backward, on the copy engines (0 = off).
  int offload_activation_layers = 0;
  // Full-iteration CUDA graphs (Megatron-Core cuda_graph_impl local/
  // transformer_engine with scope full_iteration): the forward-backward is
  // replayed as one graph, so the host issues no kernels in the step.
  bool cuda_graphs = false;
  int mbs = 1;          // micro-batch: sequences per GPU per micro-batch
  Recompute recompute = Recompute::kNone;
  // With recompute selective, the modules recomputed (RecomputeModule bits);
  // kept at the default otherwise, so equal plans compare equal.
  uint8_t recompute_modules = kDefaultRecomputeModules;
  // Overlaps (all off unless set).
  bool oar = false;     // backward input-grad all-reduce hidden behind the weight-grad GEMM
                        // (AxoNN OAR; Megatron's async tensor-parallel all-reduce)
  bool ors = false;     // Z reduce-scatter hidden behind the rest of the backward (AxoNN ORS)
  bool oag = false;     // Z all-gather prefetched one layer ahead (AxoNN OAG)
  bool overlap_grad_reduce = false;   // data-parallel gradient reduce overlapped with backward
  bool overlap_param_gather = false;  // ZeRO/dist-opt parameter all-gather overlapped with forward
  bool tp_comm_overlap = false;       // TP all-gather/reduce-scatter overlapped with GEMMs (TE)
  bool overlap_p2p = false;           // pipeline send/recv overlapped with compute
  // Mixture of experts, Megatron-Core's "MoE parallel folding": the experts of a
  // pipeline stage are laid over its tensor·cp·data ranks again as
  // etp × ep × expert-data (innermost first), independent of attention's TP × CP × DP.
  // Expert-data parallel = ranks per stage / (ep · etp) (expert_data()).
  int ep = 1;   // expert parallel: experts split over ep ranks (--expert-model-parallel-size)
  int etp = 1;  // expert tensor parallel: each expert's width split (--expert-tensor-parallel-size)
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Dispatch/combine all-to-all of one micro-batch overlapped with another's compute
  // (Megatron-Core --overlap-moe-expert-parallel-comm, the DualPipe-style 1F1B overlap).
  bool moe_a2a_overlap = false;
  Placement placement{};

  int tensor() const { return gx * gy; }
  // Ranks of one pipeline stage: gx·gy·gz·gdata·cp.
  int64_t stage_ranks() const { return int64_t{gx} * gy * gz * gdata * cp; }
  // Expert-data-parallel degree: stage_ranks / (ep · etp) (0 when it does not divide).
  int expert_data() const {
    const int64_t e = int64_t{ep} * etp;
    return e > 0 && stage_ranks() % e == 0 ? static_cast<int>(stage_ranks() / e) : 0;
  }
  // Ranks that split the batch: gz · gdata.
  int batch_split() const { return gz * gdata; }
  // Product of every degree; must equal the GPU count.
  int64_t world() const { return int64_t{gx} * gy * gz * gdata * pp * cp; }
  int Degree(Dim d) const;
  // Rank distance between consecutive members of dimension d's groups.
  int Stride(Dim d) const;
  bool operator==(const ParallelConfig&) const = default;
};

// The overlap switches of a configuration by their config key (as in --config,
// --fix and a framework preset's "overlaps").
struct OverlapSwitch {
  const char* key;
  bool ParallelConfig::*field;
};
inline constexpr OverlapSwitch kOverlapSwitches[] = {
    {"oar", &ParallelConfig::oar},
    {"ors", &ParallelConfig::ors},
    {"oag", &ParallelConfig::oag},
    {"overlap_grad_reduce", &ParallelConfig::overlap_grad_reduce},
    {"overlap_param_gather", &ParallelConfig::overlap_param_gather},
    {"tp_comm_overlap", &ParallelConfig::tp_comm_overlap},
    {"overlap_p2p", &ParallelConfig::overlap_p2p}};

// Parses a config object (request `config`). Keys: tp, pp, vpp, pp_schedule, dp, cp,
// cp_kind, sp, gx, gy, gz, gdata, zero, distributed_optimizer, qwz, hpz, qgz,
// offload_optimizer, offload_param, offload_activation_layers, cuda_graphs,
// mbs, recompute, recompute_modules (with recompute selective: an array of
// Megatron's module names or one "core_attn+mlp" string), first_stage_layers, last_stage_layers, pp_embedding_layers, pp_loss_layers, oar,
// ors, oag, overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, overlap_p2p, placement,
// ep, etp, moe_dispatcher, moe_a2a_overlap (expert-data parallel is derived). tp
// is an alias of gy (only with gx = 1), dp of gdata. When neither dp nor gdata is given, gdata is
// derived from `gpus` (0 = do not derive). Strict; errors name JSON pointers.
Result<ParallelConfig> ParseConfig(const Json& j, const std::string& pointer, int64_t gpus);
// Reads a configuration as people write it into key=value pairs of the config
// object's keys: the flag form "tp=8,pp=16,mbs=1,recompute=full" and the form
// the plans table prints (ConfigToString, ConfigText), separated by commas or
// spaces: bare switches (sp, distopt, qwz, hpz, qgz, cudagraph, a2a-overlap),
// a dispatcher or schedule by name (deepep, zb-h1, interleaved), "cp=2(ring)",
// "emb/loss_layers=1/1", "stages=3/../5", "offload=opt+param",
// "offload_act=4", "rc=full", "rc=selective(core_attn+mlp)", "place=...". A trailing "(+N same)" of the table
// is ignored. Errors name the piece and the accepted forms.
Result<std::vector<std::pair<std::string, std::string>>> ConfigTextToPairs(std::string_view text);
// Parses either form (ConfigTextToPairs) into the config object ParseConfig reads.
Result<Json> ConfigStringToJson(const std::string& text);
// Canonical JSON: every field, Megatron names where they apply (tp when gx = 1);
// ep, etp, moe_dispatcher, moe_a2a_overlap (and the derived "edp") only when
// ep · etp > 1 or they differ from their defaults, so a dense plan's document is
// unchanged by them; pp_schedule only when it is not (interleaved) 1F1B;
// recompute_modules only when recompute is selective with other than the default.
OrderedJson ConfigToJson(const ParallelConfig& c);
// Compact human form: "tp=8 pp=16 vpp=3 sp mbs=1 rc=selective"; modules other
// than the default in brackets: "rc=selective(core_attn+moe_act)".
std::string ConfigToString(const ParallelConfig& c);

}  // namespace paratune::planner
