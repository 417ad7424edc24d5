// executor/run/workload.h: the workload builder. Given a job, one parallel
// configuration and a rank of the plan, it lists the operations that rank runs
// for one micro-batch of a representative slice of its layers, the way a
// training framework issues them: the sharded GEMMs with the exact per-GPU
// shapes the cost model prices (AxoNN's normal/transposed linears over X and Y;
// Megatron tensor parallelism is gx = 1), attention as FLOP-equivalent GEMMs,
// the memory-bound kernels as device copies of the same bytes, the forward,
// the recompute and the backward (dgrad + wgrad), and every collective on the
// communicator of the dimension it belongs to: tensor-parallel all-reduces or
// sequence-parallel all-gather/reduce-scatter, AxoNN's Z all-gather and
// reduce-scatter, ring send/recv or Ulysses all-to-all, the pipeline hand-off,
// the data-parallel / ZeRO synchronisation and the optimizer step. Streams and
// dependencies follow the config's overlap flags (OAR, ORS, OAG, TP comm
// overlap, ZeRO-3 prefetch), and every collective that may hide behind compute
// names the compute it overlaps, so a runner can either measure the overlap or
// price it with the cost model's rule. docs/executor.md lists every op.
//
// Pure: no backend, clocks or I/O. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/status.h"
#include "planner/config.h"
#include "planner/request.h"

namespace paratune::executor {

// The time buckets of planner::TimeBreakdown an op's time is charged to.
enum class Category : uint8_t {
  kCompute = 0,  // GEMMs, attention, element-wise kernels, embedding, logits
  kCommX,
  kCommY,
  kCommZ,
  kCommCp,
  kCommData,
  kCommPp,
  kOptimizer,
};
inline constexpr int kNumCategories = 8;
// "compute" | "comm_x" | "comm_y" | "comm_z" | "comm_cp" | "comm_data" | "comm_pp" | "optimizer".
const char* CategoryName(Category c);

// How often an op runs per iteration.
enum class Scope : uint8_t {
  kLayer = 0,  // once per layer per micro-batch: × layers per stage × micro-batches
  kStage,      // once per micro-batch on this stage: embedding, logits, pipeline hand-off
  kStep,       // once per iteration (× WorkOp::per_step): data-parallel sync, optimizer
};
const char* ScopeName(Scope s);  // "layer" | "stage" | "step"

enum class Phase : uint8_t { kForward = 0, kRecompute, kBackward, kStep };
const char* PhaseName(Phase p);  // "fwd" | "recompute" | "bwd" | "step"

// The communicator a collective runs on.
enum class GroupKind : uint8_t {
  kX = 0,     // AxoNN X: splits a normal layer's input features
  kY,         // AxoNN Y / Megatron tensor (and sequence) parallel group
  kZ,         // AxoNN depth group (weights sharded 1/gz, batch split)
  kCp,        // context parallel: ring or Ulysses
  kPp,        // the pipeline: ranks that differ only in their stage
  kData,      // weight replicas: data × cp (Megatron's dp-cp group)
  kDataNode,  // the members of kData on this rank's node (ZeRO++ hpZ)
  // Expert weight replicas: the stage's ranks ep·etp apart (Megatron-Core's
  // expert rank order etp-ep-edp inside the stage), when experts are split.
  kExpertData,
};
inline constexpr int kNumGroupKinds = 8;
// "x" | "y" | "z" | "cp" | "pp" | "data" | "data_node" | "expert_data".
const char* GroupKindName(GroupKind g);

enum class OpType : uint8_t {
  kGemm = 0,     // C (m×n) = A (m×k) · B (k×n), `calls` identical calls
  kMemoryBound,  // streams `traffic_bytes` (read + written) through device memory
  kCollective,   // on the op's group
};

// The stream an op is enqueued on. Ops on kCompute run in list order; the comm
// streams run collectives that overlap compute.
enum class StreamRole : uint8_t {
  kCompute = 0,
  kTensorComm,   // OAR / sequence-parallel async collectives, TP comm overlap
  kDepthComm,    // AxoNN Z prefetch (OAG) and deferred reduce-scatter (ORS)
  kContextComm,  // ring attention's K/V exchange
  kDataComm,     // ZeRO-3 prefetch and overlapped gradient reduce-scatter
};
inline constexpr int kNumStreamRoles = 5;
const char* StreamRoleName(StreamRole r);

// Send/receive partners of a kSendRecv collective, by position in the group.
enum class Peers : uint8_t {
  kNone = 0,
  kNext,  // send to position + 1, receive from position − 1 (pipeline forward)
  kPrev,  // send to position − 1, receive from position + 1 (pipeline backward)
  kRing,  // send to (position + 1) mod size, receive from (position − 1) mod size
};

// A step collective whose overlap window is a whole stage's compute (the
// data-parallel gradient reduce behind the backward, the parameter gather
// behind the forward), priced with the cost model's overlap rule.
enum class StepWindow : uint8_t { kNone = 0, kStageBackward, kStageForward };

struct WorkOp {
  OpType type = OpType::kGemm;
  Category category = Category::kCompute;
  Scope scope = Scope::kLayer;
  Phase phase = Phase::kForward;
  int layer = -1;    // position in the slice for kLayer ops, else -1
  std::string name;  // "L0.fwd.qkv", "L1.bwd.fc1.dgrad", "step.dp.reduce_scatter", ...
  int calls = 1;     // identical back-to-back calls (attention tiles, buckets, ring steps)
  // kGemm: per call, at `precision` (the job's, but bf16 for attention in FP8
  // recipes, as the cost model prices it).
  int64_t m = 0, n = 0, k = 0;
  backend::GemmPrecision precision = backend::GemmPrecision::kBf16;
  // kMemoryBound: bytes read + written per call (the element type it computes
  // in is `dtype`: the activations', or fp32 for a loss the stack upcasts).
  int64_t traffic_bytes = 0;
  // kCollective: per call. `bytes` is the nccl-tests size (the whole buffer:
  // all-gather output, reduce-scatter input, all-reduce buffer, all-to-all
  // buffer, send/recv message); `dtype` the element type moved (kMemoryBound:
  // computed in).
  backend::OpKind collective = backend::OpKind::kAllReduce;
  GroupKind group = GroupKind::kX;
  int64_t bytes = 0;
  backend::DataType dtype = backend::DataType::kBFloat16;
  Peers peers = Peers::kNone;
  // Scheduling.
  StreamRole stream = StreamRole::kCompute;
  // Ops (indices into Workload::ops, all earlier) this op waits for; only
  // waits across streams need an event, same-stream order is implied.
  std::vector<int> after;
  // Index into Workload::windows: the compute this collective may hide behind
  // (-1: it is exposed, or a step op priced with `step_window`).
  int window = -1;
  StepWindow step_window = StepWindow::kNone;
  int64_t per_step = 1;  // kStep ops: runs per iteration (ZeRO-2 reduces every micro-batch)
};

// Compute ops (indices into Workload::ops) a group of collectives may overlap.
struct OverlapWindow {
  std::string name;  // "L0.bwd.qkv.wgrad", "L1.fwd", "L0.attention.fwd"
  std::vector<int> compute_ops;
};

// A communicator this rank belongs to, in plan ranks.
struct Group {
  GroupKind kind = GroupKind::kX;
  std::vector<int> ranks;  // plan ranks by position (ncclCommSplit key order)
  int position = 0;        // this rank's position in `ranks`
  int stride = 1;          // rank distance the cost model prices it with
};

struct WorkloadOptions {
  int slice_layers = 2;  // layers of the stage run for real (clipped to layers per stage)
  // Largest buffer one collective or copy call moves; bigger ones are issued as
  // several calls (gradient buckets, chunked optimizer sweep), bytes.
  int64_t max_call_bytes = int64_t{256} << 20;
  // Largest score tile one attention GEMM call writes; the FLOP-equivalent
  // attention GEMMs are cut into calls over (batch × head × query) rows, bytes.
  int64_t attention_tile_bytes = int64_t{64} << 20;
};

// Element types and sizes of one job, as the cost model counts them.
struct Precisions {
  backend::GemmPrecision gemm = backend::GemmPrecision::kBf16;
  backend::DataType gemm_input = backend::DataType::kBFloat16;
  backend::DataType activation = backend::DataType::kBFloat16;  // between kernels, in collectives
  backend::DataType param = backend::DataType::kBFloat16;       // weights in compute precision
  backend::DataType grad = backend::DataType::kFloat32;         // main gradients
};
Precisions PrecisionsOf(const planner::TrainingSpec& t);

struct Workload {
  int plan_rank = 0;
  std::array<int, planner::kNumDims> coords{};  // by planner::Dim
  int stage = 0;                                // pipeline stage (coords[kPp])
  int stages = 1;
  int slice_layers = 1;       // layers in the slice (ops with layer 0 .. slice_layers − 1)
  int layers_per_stage = 1;   // L / pp
  int64_t micro_batches = 1;  // per pipeline per iteration
  int vpp = 1;
  Precisions precision;
  std::vector<WorkOp> ops;  // in enqueue order
  std::vector<OverlapWindow> windows;
  std::vector<Group> groups;  // the groups of size ≥ 2 this rank's config has, by kind order
  // The group of `kind`, or nullptr when the config has none (size 1).
  const Group* FindGroup(GroupKind kind) const;
};

// The slot of dimension `d` in a coordinates array.
inline size_t DimSlot(planner::Dim d) { return static_cast<size_t>(d); }

// Coordinates of plan rank `rank` in every dimension: the placement lays the
// dimensions on ranks innermost first, coordinate(d) = rank / Stride(d) mod Degree(d).
// REQUIRES: 0 ≤ rank < c.world().
std::array<int, planner::kNumDims> Coordinates(const planner::ParallelConfig& c, int rank);
// The inverse. REQUIRES: every coordinate within its degree.
int RankOf(const planner::ParallelConfig& c, const std::array<int, planner::kNumDims>& coords);

// The plan ranks of `rank`'s group of `kind`, by position: one dimension's
// group varies that coordinate only; kData varies data and cp (the inner of
// the two fastest); kDataNode keeps the kData members on rank's node (node =
// rank / gpus_per_node). Size 1 when the config does not split that way.
// REQUIRES: 0 ≤ rank < c.world(), gpus_per_node ≥ 1.
std::vector<int> GroupRanks(const planner::ParallelConfig& c, GroupKind kind, int rank,
                            int gpus_per_node);
// The stride the cost model prices a group of `kind` with (kData, kDataNode:
// the smaller of the data and cp strides).
int GroupStride(const planner::ParallelConfig& c, GroupKind kind);
// The group kinds this config has with ≥ 2 members, in kind order (every rank
// of the plan has the same list).
std::vector<GroupKind> GroupKindsOf(const planner::ParallelConfig& c, int gpus_per_node);

// Builds the workload of plan rank `rank`. The config must pass the cost
// model's rules (planner::CostModel::CheckRules == kOk); violations are
// kInvalidArgument naming the rule. REQUIRES: job.gpus == c.world().
Result<Workload> BuildWorkload(const planner::Job& job, const planner::ParallelConfig& c, int rank,
                               const WorkloadOptions& options);

// Plan ranks whose workloads differ, one per kind of pipeline stage: the
// stage-0 rank, a middle stage (when pp ≥ 3) and the last stage, each with
// every other coordinate 0. With pp = 1 just rank 0.
std::vector<int> RepresentativeRanks(const planner::ParallelConfig& c);

}  // namespace paratune::executor
