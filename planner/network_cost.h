// planner/network_cost.h: the training step of a Network (network.h) on a
// cluster, layer by layer on the same GPU constants as the transformer path
// (GEMM efficiency curve, fused-attention efficiency, HBM bandwidth, kernel
// overhead; topology/gpu.h) and the same collective model (topology/cluster.h).
//
// Per layer and micro-batch: convolutions as implicit GEMMs (forward, data
// gradient, weight gradient, each at its own shape), linears as GEMMs, fused
// attention at the GPU's flash efficiency, norms, element-wise work and
// resampling at HBM bandwidth; each kernel the larger of its math and its
// bytes, plus the GPU's per-kernel overhead. Across GPUs: data parallelism
// with the gradients all-reduced behind the backward (PyTorch DDP's buckets),
// the optimizer's states sharded (ZeRO-1, a distributed optimizer) or every
// weight sharded (FSDP), and spatial parallelism splitting every spatial
// tensor's first dimension with the convolutions' halo planes exchanged with
// the two neighbours (MLPerf's 3D U-Net `-sgs`), and tensor parallelism
// splitting the token layers' widths as Megatron does (a column-parallel
// layer, the work between, a row-parallel layer whose output is all-reduced;
// the column layer's input gradient all-reduced in the backward).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/network.h"
#include "topology/cluster.h"

namespace paratune::planner {

enum class WeightSharding : uint8_t {
  kReplicated,  // DDP: every replica holds weights, gradients and optimizer states
  kOptimizer,   // ZeRO-1 / a distributed optimizer: optimizer states sharded
  kFull,        // FSDP / ZeRO-3: weights, gradients and states sharded, gathered per layer
};
const char* WeightShardingName(WeightSharding s);  // "ddp" | "zero1" | "fsdp"
Result<WeightSharding> ParseWeightSharding(const std::string& name);

// Ranks are laid tensor group innermost, then the spatial group, then data
// parallelism (so a tensor group stays inside an NVLink domain first).
struct NetworkLayout {
  int gpus = 1;              // all GPUs of the job: data × spatial × sequence × tensor
  int spatial = 1;           // GPUs splitting one sample's spatial extent (1 = none)
  int64_t micro_batch = 1;   // samples per spatial × sequence × tensor group per micro-step
  int64_t global_batch = 1;  // samples per optimizer step
  WeightSharding sharding = WeightSharding::kReplicated;
  int tensor = 1;            // GPUs splitting the token layers' widths (Megatron's pairs; 1 = none)
  // Activation recomputation of the repeated blocks (RecomputedLayers): each
  // keeps its input, and its forward runs again in the backward.
  bool recompute = false;
  // GPUs splitting one sample's tokens (DeepSpeed-Ulysses: SequenceShard;
  // 1 = none). Ranks: tensor innermost, then sequence, spatial, data.
  int sequence = 1;

  int Data() const { return gpus / (spatial * sequence * tensor); }
  // GPUs holding the same weights: every replica and every GPU of its spatial
  // or sequence group (each computes a partial weight gradient over its part
  // of the sample). Their gradients are summed, and zero1/fsdp shard over them.
  int Replicas() const { return Data() * spatial * sequence; }
  // Micro-steps per optimizer step: global / (data × micro); 0 when it does not divide.
  int64_t Accumulation() const;
};

struct NetworkTraining {
  topology::Precision precision = topology::Precision::kBf16;
  // Bytes per gradient element as the data-parallel collective moves it: 4 for
  // PyTorch AMP (fp32 weights, so fp32 gradients), 2 where the framework
  // reduces in half precision.
  double grad_bytes = 4;
  // Bytes per parameter of optimizer state (Adam's two fp32 moments: 8; SGD
  // with momentum and LARS: 4).
  double optimizer_state_bytes = 8;
  // Norms fused into the convolutions around them (cuDNN's runtime fusion:
  // batch-norm statistics in the convolution's epilogue, the normalisation
  // and activation in the next convolution's operand load), as NVIDIA's MLPerf
  // ResNet networks "resnet-v1b-stats-*" run: no forward pass of their own,
  // one backward kernel (read x and dy, write dx). Unfused: the forward reads
  // x twice (statistics, normalise) and writes y; the backward reads x and dy
  // twice (reductions, then dx) and writes dx.
  bool fused_norm = false;
  // zero1 as PyTorch's ZeroRedundancyOptimizer runs it under autocast: the
  // fp32 weights stay whole on every GPU, only the optimizer states are
  // sharded (false: a distributed optimizer's half-precision weights beside
  // the sharded fp32 master copy, ZeRO's stage 1).
  bool zero1_whole_weights = false;
};

struct NetworkPrediction {
  double step_s = 0;            // one optimizer step
  double samples_per_s = 0;     // the job's
  double forward_s = 0;         // one micro-batch, per GPU
  double backward_s = 0;        // one micro-batch, per GPU
  double halo_s = 0;            // spatial halo exchanges per micro-batch (not hidden)
  double tensor_comm_s = 0;     // tensor-parallel all-reduces per micro-batch (not hidden)
  double sequence_comm_s = 0;   // sequence-parallel all-to-alls per micro-batch (not hidden)
  double grad_sync_s = 0;       // the data-parallel collectives per step, unhidden
  double grad_sync_exposed_s = 0;
  double optimizer_s = 0;
  double memory_GiB = 0;        // weights, gradients, states, saved activations, runtime
  double activations_GiB = 0;
  bool fits = false;
  double model_tflops_per_gpu = 0;  // Network::TrainingFlops over the step
  double mfu = 0;                   // over the dense peak at the training precision
  // The GPU preset's best published MFU at the precision (GpuSpec::
  // PublishedMfuCeiling; 0: it states none), and whether `mfu` is above it:
  // a pick no published run has reached is a bug until shown otherwise.
  double published_mfu_ceiling = 0;
  bool above_published_mfu = false;
  // The layers taking the most time per micro-batch (forward + backward), slowest first.
  struct LayerTime {
    std::string name;
    std::string op;
    double seconds = 0;
    bool memory_bound = false;
  };
  std::vector<LayerTime> slowest;
};

// Implicit-GEMM convolutions reach this share of what the GPU's GEMM curve
// gives at their implicit GEMM's shape: CUTLASS's profiler documentation
// (NVIDIA/cutlass 7107b055, media/docs/cpp/profiler.md line 780) measures a
// 3×3 NHWC fp16 convolution (N 8, 224×224, C = K = 128) at 125.4 TFLOP/s on
// an sm80 GPU, 0.402 of the A100's 312; the a100 preset's curve with its
// short-k factor gives 0.621 at that shape (m = 8·224², n = 128, k = 1152):
// 0.402 / 0.621 = 0.647 (network_test checks the 125.4). One measurement, one
// library.
inline constexpr double kConvGemmFactor = 0.647;

// Checks the layout against the network and the cluster (divisibility, the
// spatial split no finer than the smallest spatial extent, a whole number of
// micro-steps) and prices one step. InvalidArgument names the rule broken.
Result<NetworkPrediction> PredictNetwork(const Network& net, const topology::ClusterSpec& cluster,
                                         const NetworkLayout& layout, const NetworkTraining& training);

// One layer as one GPU runs it under a layout, and its predicted times per
// occurrence and micro-batch: what `paratune confirm` measures layer by layer.
struct PricedLayer {
  NetLayer layer;     // what one GPU runs (TensorShard, then SequenceShard); spatial extents whole
  double share = 1;   // the part of each spatial tensor one GPU of the spatial group holds
  double forward_s = 0, backward_s = 0, halo_s = 0, tensor_comm_s = 0, sequence_comm_s = 0;
  bool memory_bound = false;
  bool recomputed = false;  // its forward runs again before its backward (counted in backward_s)
};
// Every layer of `net` priced as PredictNetwork prices it (the same checks);
// their forward and backward times, times `repeat`, sum to its forward_s and
// backward_s.
Result<std::vector<PricedLayer>> PriceNetworkLayers(const Network& net, const topology::ClusterSpec& cluster,
                                                   const NetworkLayout& layout, const NetworkTraining& training);

// The layouts a framework runs of those the model expresses (what
// frameworks/network_emit.h can write): all of them by default.
struct NetworkSpace {
  bool spatial = true;     // spatial splits
  bool tensor = true;      // tensor groups
  bool replicated = true;  // ddp
  bool optimizer = true;   // zero1 (fsdp is always allowed)
  bool recompute = true;   // activation recomputation of repeated blocks
  bool sequence = true;    // sequence (Ulysses) groups
  bool Allows(const NetworkLayout& l) const;
};

// One candidate layout of a network job and its price.
struct NetworkCandidate {
  NetworkLayout layout;
  NetworkPrediction prediction;
};

// The layouts of `gpus` GPUs and `global_batch` samples the network model
// expresses: spatial groups (divisors of gpus up to the smallest first extent
// of the network's convolution inputs, 1 for networks without spatial
// convolutions) × tensor groups (divisors of gpus within one NVLink domain
// that split the network evenly, 1 for networks without tensor-parallel
// layers) × the three weight shardings × recomputation (for a network with a
// stack of repeated blocks, where some micro-batch does not fit without
// it) × the largest micro-batches
// dividing each replica's share that fit the GPU (memory ≤ capacity × (1 −
// headroom); memory grows with the micro-batch, so the boundary is found by
// bisection and the four largest below it are priced); fastest first, ties
// to the simpler layout (less sharding, no spatial split, a smaller tensor
// group, no recomputation, the larger micro-batch). REQUIRES: gpus ≥ 1,
// global_batch ≥ 1. *refused (when given):
// how many (spatial, sharding, recomputation, micro-batch) layouts do not fit.
// Only layouts `space` allows are priced (a space without ddp shards even
// one replica). `expired`, when given, is asked before each split and
// sharding's bisection; once it answers true the search stops, sets *stopped
// (when given) and ranks what it priced so far.
std::vector<NetworkCandidate> SearchNetworkLayouts(const Network& net, const topology::ClusterSpec& cluster,
                                                   int gpus, int64_t global_batch, const NetworkTraining& training,
                                                   double headroom, int* refused = nullptr,
                                                   const NetworkSpace& space = {},
                                                   const std::function<bool()>& expired = nullptr,
                                                   bool* stopped = nullptr);

// LBANN's tournament (LTFB; Jacobs et al., CLUSTER 2019): `trainers`
// independent trainers of `trainer` layout each train their own model on
// their own data; every `interval` steps they pair up, every rank swaps its
// model replica with the rank at the same place in the partner trainer
// (sendrecv across trainers: fp32 weights), and each trainer scores both
// models on one validation micro-batch and keeps the better. What that costs
// per step, and the throughput of all trainers over one's.
struct TournamentPrediction {
  NetworkPrediction trainer;  // one trainer's step
  double exchange_s = 0;      // one model swap
  double evaluation_s = 0;    // scoring both models: two forward passes
  double overhead_per_step_s = 0;
  double speedup = 0;         // all trainers' samples/s over one trainer's, alone
};
Result<TournamentPrediction> PredictTournament(const Network& net, const topology::ClusterSpec& cluster,
                                               const NetworkLayout& trainer, int trainers, int64_t interval,
                                               const NetworkTraining& training);

// The largest input of a family-built network (network.h: SizeOf) that fits
// on `gpus` GPUs with one sample per data-parallel replica: the largest
// multiple of the size step up to max_size with some spatial split, tensor
// group and sharding under capacity × (1 − headroom), found by bisection
// (memory grows with the input), and that layout's prediction (the fastest
// that fits at that size).
struct NetworkCapacity {
  NetworkSize size;           // key, step, and the largest value that fits (0: none)
  bool found = false;
  std::string binds;          // "gpu_memory" (the next step does not fit) or "max_size"
  NetworkLayout layout;
  NetworkPrediction prediction;
};
Result<NetworkCapacity> CapacityOf(const Network& net, const topology::ClusterSpec& cluster, int gpus,
                                   const NetworkTraining& training, double headroom, int64_t max_size,
                                   const NetworkSpace& space = {});

}  // namespace paratune::planner
