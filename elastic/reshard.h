// elastic/reshard.h: the reshard map between two parallel configurations of one
// model (docs/replan.md). Universal Checkpointing's idea (Lian et al. 2024,
// arXiv 2406.18820): describe every piece of training state in the coordinates
// of the consolidated (unsharded) tensor, so any layout can be mapped to any
// other. Here a layout is a ParallelConfig: tensor sharding over gx, gy (Megatron
// TP = gy: column-parallel QKV and FC1 split their output rows, row-parallel
// projection and FC2 their input columns; AxoNN's X splits the other axis), the
// flat Z split of each weight block (AxoNN), pipeline stages and virtual chunks
// (SplitLayers), and ZeRO / distributed-optimizer partitions over the data×cp
// group. For each tensor and each state (parameters, fp32 master weights, Adam
// m and v, optionally gradients) the map lists which old ranks hold each
// fragment and which new ranks need it, as [row, col) rectangles of the
// consolidated tensor, the bytes each new rank must read, and a predicted load
// time from a consolidated checkpoint versus peer-to-peer from surviving ranks.
//
// Pure: no I/O, clocks or threads. Everything is deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/model.h"
#include "topology/cluster.h"

namespace paratune::planner {

// ---------------------------------------------------------------------------
// Pipeline: which layers each stage holds.

// Splits `layers` consecutive layers over `parts` chunks, returning each chunk's
// layer count (sum = layers). Even split; when layers % parts != 0 the first
// layers % parts chunks get one layer more (DeepSpeed's PipelineModule
// "uniform" partition, deepspeed/runtime/utils.py partition_uniform). With
// first > 0 and/or last > 0 (Megatron's --decoder-first-pipeline-num-layers /
// --decoder-last-pipeline-num-layers) the first/last chunk gets exactly that
// many layers and the rest are split over the middle chunks by the same rule.
// Chunks may get 0 layers when layers < parts.
// Errors (kInvalidArgument): parts < 1, layers < 0, first/last < 0, first + last
// > layers, first/last given with parts < 2, or middle chunks left with layers
// but no chunk to hold them.
Result<std::vector<int>> SplitLayers(int layers, int parts, int first = 0, int last = 0);

// The pipeline layout of a config: pp·vpp model chunks; chunk c holds the layers
// [chunk_first_layer[c], chunk_first_layer[c] + chunk_layers[c]) and lives on
// stage c % pp (Megatron's interleaved assignment; vpp = 1: chunk = stage).
struct PipelineLayout {
  int pp = 1, vpp = 1;
  std::vector<int> chunk_layers;
  std::vector<int> chunk_first_layer;
  int StageOfChunk(int chunk) const { return chunk % pp; }
  // The chunk holding `layer`. REQUIRES: 0 <= layer < total layers.
  int ChunkOfLayer(int layer) const;
};
// REQUIRES: SplitLayers(layers, pp·vpp, first, last) succeeds (else the error).
Result<PipelineLayout> MakePipelineLayout(int layers, int pp, int vpp, int first = 0, int last = 0);

// ---------------------------------------------------------------------------
// The tensors of a model, in consolidated coordinates.

enum class TensorClass : uint8_t {
  kQkv = 0, kProj, kFc1, kFc2, kNorm, kEmbedding, kPosition, kOutput, kFinalNorm, kRouter
};
inline constexpr int kNumTensorClasses = 10;
// "qkv" | "proj" | "fc1" | "fc2" | "norm" | "embedding" | "position" | "output" |
// "final_norm" | "router"
const char* TensorClassName(TensorClass c);

// Which tensor-parallel axis splits a dimension of a tensor.
enum class TpAxis : uint8_t { kNone = 0, kX, kY, kXY };

struct TensorDesc {
  std::string name;   // "layers.3.qkv.weight", "embedding.weight", ...
  TensorClass cls = TensorClass::kQkv;
  int layer = -1;     // transformer block index; -1 outside the blocks
  int64_t rows = 0;   // consolidated shape [rows, cols]; 1-D tensors have cols = 1
  int64_t cols = 1;
  // Gated FC1 holds [gate; up] stacked along rows (Universal Checkpointing's
  // "2 sub-params concatenated on dim 0"): each half is split separately, so a
  // tensor rank holds one row block of each. 1 otherwise.
  int row_groups = 1;
  TpAxis row_axis = TpAxis::kNone;  // the axis that splits rows (output features)
  TpAxis col_axis = TpAxis::kNone;  // the axis that splits cols (input features)
  // Rows padded as Megatron pads the vocabulary (to a multiple of 128·t) before
  // splitting; padded rows are not part of the consolidated tensor.
  bool vocab_padded = false;
  int64_t numel() const { return rows * cols; }
};

// Every tensor of `m` in a fixed order (the order of the flat ZeRO buffers):
// embedding, position (learned positions only), then per block: input norm
// (weight, bias for LayerNorm), qkv weight (+bias), proj weight (+bias; h ×
// heads·head_dim), post norm, fc1 weight (+bias), fc2 weight (+bias); then the
// final norm and, when untied, the output projection. MLA blocks carry
// Megatron-Core's q_down, q_norm, q_up (or q without a q LoRA), kv_down,
// kv_norm, kv_up and proj instead of qkv and proj, the down projections and
// norms replicated over the tensor group. MoE blocks carry the router
// (replicated) and the shared experts' shared_fc1/shared_fc2 instead of fc1
// and fc2; their routed experts are not in the catalog (PlanExpertReshard lays
// them out), nor are multi-token-prediction modules. So the catalog holds
// ParamCount() less the routed experts and the MTP modules. Sharding (Megatron / AxoNN): QKV and FC1 are
// "normal" layers (rows = output features split by Y, cols = input features by
// X), projection and FC2 "transposed" (rows by X, cols by Y); biases follow
// their layer's output rows; embedding/output rows (vocabulary) split over the
// whole tensor group (index x + gx·y) with Megatron's padding; norms and
// positions are replicated over the tensor group. Shapes are PyTorch's
// [out, in]. REQUIRES: m validated.
std::vector<TensorDesc> TensorCatalog(const ModelSpec& m);

// ---------------------------------------------------------------------------
// States and layouts.

enum class State : uint8_t { kParam = 0, kMaster, kExpAvg, kExpAvgSq, kGrad };
inline constexpr int kNumStates = 5;
const char* StateName(State s);  // "param" | "master" | "exp_avg" | "exp_avg_sq" | "grad"

// How a state is split over the data×cp group.
enum class Partition : uint8_t {
  kReplicated = 0,  // every data×cp rank holds the whole (tensor- and Z-) shard
  kPerTensor,       // ZeRO-3: each tensor's shard padded and split in d equal slices (DeepSpeed stage 3)
  kFlatBuffer,      // ZeRO-1/2, Megatron distributed optimizer: the rank's concatenated
                    // shards (one buffer per model chunk, catalog order), padded to a
                    // multiple of d, split in d contiguous slices (DeepSpeed stage 1/2)
};

// A rectangle [r0, r1) × [c0, c1) of a consolidated tensor.
struct Rect {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  int64_t numel() const { return (r1 - r0) * (c1 - c0); }
  bool empty() const { return r1 <= r0 || c1 <= c0; }
  bool operator==(const Rect&) const = default;
};

// Rank coordinates in a config (Placement order, innermost first).
struct RankCoords {
  int x = 0, y = 0, z = 0, cp = 0, data = 0, stage = 0;
  int dcp = 0;  // index in the data×cp group (ordered by rank)
};

// One configuration's layout of a model's training state: which rank holds
// which part of every tensor in every state. Built once (O(tensors × tensor
// ranks)); queries allocate only their results. Thread-safe for concurrent
// const calls.
class Layout {
 public:
  // REQUIRES: m validated; c's degrees >= 1 (rules not required: any config
  // that can be laid out works). Errors: the pipeline split fails.
  static Result<Layout> Make(const ModelSpec& m, const ParallelConfig& c,
                             topology::Precision precision, bool main_grads_fp32,
                             int first_stage_layers = 0, int last_stage_layers = 0);

  const ParallelConfig& config() const { return config_; }
  const std::vector<TensorDesc>& tensors() const { return tensors_; }
  const PipelineLayout& pipeline() const { return pipe_; }
  int world() const { return static_cast<int>(config_.world()); }
  int dcp_size() const { return config_.gdata * config_.cp; }

  RankCoords Coords(int rank) const;
  // The rank with these coordinates (dcp decides data and cp).
  int RankOf(int x, int y, int z, int dcp, int stage) const;
  // Model chunks holding tensor t: one, or two for a tied embedding with pp > 1
  // (Megatron keeps the word embedding on the first and the last stage).
  const std::vector<int>& ChunksOf(int t) const { return chunks_of_[t]; }
  // Whether the state exists (master only below fp32 params).
  bool HasState(State s) const;
  Partition PartitionOf(State s) const;
  // Bytes per element of a state.
  int BytesPerElement(State s) const;

  // The consolidated rectangles a rank holds of tensor t in state s (empty when
  // it holds none). Disjoint.
  std::vector<Rect> Held(int rank, int t, State s) const;

  // One rank class's piece of a tensor: a flat range [a, b) of its
  // tensor-parallel block (x, y) in row-major order.
  struct Piece {
    int x = 0, y = 0, z = 0;  // x or y = -1: replicated over that tensor axis
    int dcp = -1;   // -1: held by every data×cp rank
    int copy = -1;  // index into ChunksOf(t); -1: held by every chunk copy
    int64_t a = 0, b = 0;
  };
  // Tilings of tensor t in state s: one, except for a flat-buffer partition of a
  // tensor held by two chunks (tied embedding, pp > 1), whose copies sit at
  // different buffer offsets and so are split differently: one tiling per copy.
  int NumTilings(int t, State s) const;
  // The distinct pieces of one tiling; together they cover the tensor once.
  // REQUIRES: 0 <= tiling < NumTilings(t, s).
  std::vector<Piece> Pieces(int t, State s, int tiling = 0) const;
  // The consolidated rectangles of a piece.
  std::vector<Rect> PieceRects(int t, const Piece& p) const;
  // Whether `rank` holds piece p of tensor t (p came from Pieces).
  bool Holds(int rank, int t, const Piece& p) const;
  // Calls fn(rank) for every rank holding piece p of tensor t, in rank-class order.
  template <typename Fn>
  void ForEachHolder(int t, const Piece& p, Fn&& fn) const {
    const auto& chs = chunks_of_[t];
    for (size_t i = 0; i < chs.size(); ++i) {
      if (p.copy >= 0 && static_cast<int>(i) != p.copy) continue;
      const int stage = pipe_.StageOfChunk(chs[i]);
      const int k0 = p.dcp >= 0 ? p.dcp : 0, k1 = p.dcp >= 0 ? p.dcp + 1 : dcp_size();
      const int x0 = p.x >= 0 ? p.x : 0, x1 = p.x >= 0 ? p.x + 1 : config_.gx;
      const int y0 = p.y >= 0 ? p.y : 0, y1 = p.y >= 0 ? p.y + 1 : config_.gy;
      for (int k = k0; k < k1; ++k) {
        for (int x = x0; x < x1; ++x) {
          for (int y = y0; y < y1; ++y) fn(RankOf(x, y, p.z, k, stage));
        }
      }
    }
  }

 private:
  struct Block {  // a tensor rank's block of one tensor
    int64_t row_start = 0, row_len = 0;  // per row group
    int64_t col_start = 0, col_len = 0;
    int64_t numel() const;
    int row_groups = 1;
    int64_t group_rows = 0;  // consolidated rows per group
  };
  Block BlockOf(int t, int x, int y) const;
  // The Z slice [a, b) of block (x, y) of tensor t.
  std::pair<int64_t, int64_t> ZRange(int t, int x, int y, int z) const;
  int BufferIndex(int chunk, int x, int y, int z) const;

  ModelSpec model_;
  ParallelConfig config_;
  std::array<int, kNumDims> stride_{}, degree_{};  // by Dim, cached from config_
  PipelineLayout pipe_;
  std::vector<TensorDesc> tensors_;
  std::vector<std::vector<int>> chunks_of_;
  int param_bytes_ = 2, grad_bytes_ = 4;
  // Flat buffers (kFlatBuffer): offset of tensor t's Z slice in the buffer of
  // (chunk, x, y, z), and each buffer's total length.
  std::vector<std::vector<int64_t>> buffer_offset_;  // [buffer][t], -1 = not in it
  std::vector<int64_t> buffer_total_;
};

// ---------------------------------------------------------------------------
// Where the ranks run, for the peer-to-peer estimate.

// Physical GPU of each rank: node = gpu / gpus_per_node. Old rank r runs on GPU r.
// New rank r runs on new_gpus[r]; a GPU id < old world that appears there
// survived. Old ranks whose GPU is not in `surviving` are gone.
struct Allocation {
  int gpus_per_node = 8;
  std::vector<int> new_gpus;   // physical GPU of each new rank (size >= new world)
  std::vector<int> surviving;  // old GPU ids still available (sorted)
};

// ---------------------------------------------------------------------------
// The map.

enum class Route : uint8_t { kLocal = 0, kIntraNode, kInterNode, kCheckpoint };
const char* RouteName(Route r);  // "local" | "intra_node" | "inter_node" | "checkpoint"

struct Fragment {
  int new_rank = 0;
  int tensor = 0;
  State state = State::kParam;
  Rect rect;
  int old_rank = -1;             // the peer it comes from; -1 = no surviving holder
  Route route = Route::kCheckpoint;
  int64_t bytes = 0;             // in the state's own width
};

struct ReshardOptions {
  bool include_gradients = false;  // gradients are zeroed after each step and not saved
  // Keep fragment records for this new rank (all ranks when keep_all). Counts
  // and bytes always cover every rank.
  int keep_rank = 0;
  bool keep_all = false;
  // Aggregate parallel-filesystem read bandwidth available to the job, GB/s.
  double fs_GBps = 500;
};

struct LoadEstimate {
  // (a) every new rank reads its state from a consolidated checkpoint (fp32
  // atoms as Universal Checkpointing stores them: 4 bytes per element of each
  // parameter it holds, 4 + 4 for Adam m and v of its optimizer slice).
  double checkpoint_bytes = 0;
  double checkpoint_s = 0;
  std::string checkpoint_bottleneck;  // "filesystem" | "node_injection"
  // (b) peer-to-peer from surviving ranks; what no survivor holds comes from the
  // checkpoint.
  double local_bytes = 0, intra_node_bytes = 0, inter_node_bytes = 0, fallback_checkpoint_bytes = 0;
  double peer_s = 0;
  std::string peer_bottleneck;  // "intra_node" | "inter_node" | "filesystem" | "none"
};

struct ReshardMap {
  std::vector<TensorDesc> tensors;
  std::vector<int64_t> bytes_per_rank;             // state bytes each new rank must receive
  std::vector<int64_t> checkpoint_bytes_per_rank;  // what it would read from a checkpoint
  // bytes by [tensor class][state], summed over new ranks
  std::array<std::array<int64_t, kNumStates>, kNumTensorClasses> bytes_by_class{};
  int64_t total_bytes = 0;
  int64_t fragment_count = 0;
  std::vector<Fragment> fragments;  // the kept ones (ReshardOptions)
  LoadEstimate load;
};

// Computes the map from `from` to `to` (same model). `cluster` supplies the
// bandwidths for the estimate (intra-node send/recv, node injection).
// REQUIRES: layouts of the same model; alloc.new_gpus.size() >= to.world().
ReshardMap ComputeReshard(const Layout& from, const Layout& to, const Allocation& alloc,
                          const topology::ClusterSpec& cluster, const ReshardOptions& options);

// The document part ("reshard" object of paratune.replan/v1).
OrderedJson ReshardToJson(const ReshardMap& map, const Layout& from, const Layout& to,
                          const ReshardOptions& options);

}  // namespace paratune::planner
