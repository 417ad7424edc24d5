#include "planner/network_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "planner/cost/internal.h"

namespace paratune::planner {

using topology::Collective;

const char* WeightShardingName(WeightSharding s) {
  switch (s) {
    case WeightSharding::kReplicated: return "ddp";
    case WeightSharding::kOptimizer: return "zero1";
    case WeightSharding::kFull: return "fsdp";
  }
  return "?";
}

Result<WeightSharding> ParseWeightSharding(const std::string& name) {
  for (WeightSharding s : {WeightSharding::kReplicated, WeightSharding::kOptimizer, WeightSharding::kFull}) {
    if (name == WeightShardingName(s)) return s;
  }
  return Status::InvalidArgument("'" + name + "' is not a weight sharding (ddp, zero1, fsdp)");
}

bool NetworkSpace::Allows(const NetworkLayout& l) const {
  if (l.spatial > 1 && !spatial) return false;
  if (l.recompute && !recompute) return false;
  if (l.sequence > 1 && !sequence) return false;
  if (l.tensor > 1 && !tensor) return false;
  if (l.sharding == WeightSharding::kReplicated) return replicated;
  if (l.sharding == WeightSharding::kOptimizer) return optimizer;
  return true;
}

int64_t NetworkLayout::Accumulation() const {
  const int64_t per_step = static_cast<int64_t>(Data()) * micro_batch;
  if (per_step <= 0 || global_batch % per_step != 0) return 0;
  return global_batch / per_step;
}

namespace {

// PyTorch DDP's default gradient bucket (bucket_cap_mb = 25,
// torch/nn/parallel/distributed.py): the last bucket's all-reduce starts when
// the backward ends, so it is never hidden.
constexpr double kDdpBucketBytes = 25.0 * 1024 * 1024;
// FSDP gathers and reduces per wrapped module; layers smaller than this are
// taken as wrapped with their neighbours (one collective for all of them).
constexpr double kFsdpUnitParams = 1e6;
// The layout search keeps, per spatial split and sharding, the largest
// micro-batches that fit, this many.
constexpr size_t kMicroBatchesKept = 4;

// The layer one GPU runs: its tensor rank's part, then its sequence rank's.
NetLayer GpuShard(const NetLayer& l, const NetworkLayout& layout) {
  return SequenceShard(TensorShard(l, layout.tensor), layout.sequence);
}

// The layers a layout recomputes (RecomputedLayers; empty without
// recomputation), found once per prediction. InvalidArgument when the layout
// recomputes a network with nothing to recompute.
Result<std::vector<bool>> RecomputedUnder(const Network& net, const NetworkLayout& layout) {
  if (!layout.recompute) return std::vector<bool>{};
  std::vector<bool> out = RecomputedLayers(net);
  if (out.empty()) {
    return Status::InvalidArgument("network '" + net.name +
                                   "' has no stack of repeated blocks with a checkpoint layer to recompute");
  }
  return out;
}

// Recomputation off, and on where the space allows it and the network has
// repeated blocks to recompute.
std::vector<bool> NetworkRecomputeChoices(const Network& net, const NetworkSpace& space) {
  if (space.recompute && !RecomputedLayers(net).empty()) return {false, true};
  return {false};
}

// The (tensor, sequence) groups `net` splits evenly whose product divides
// `gpus` and stays inside one NVLink domain (Megatron's rule of thumb for
// tensor groups, and DeepSpeed-Ulysses' for its all-to-alls: past it every
// one crosses the NICs); (1, 1) first.
std::vector<std::pair<int, int>> TokenGroups(const Network& net, const topology::ClusterSpec& cluster, int gpus,
                                             const NetworkSpace& space) {
  std::vector<std::pair<int, int>> out;
  const int domain = std::min(gpus, cluster.DomainGpus());
  for (int t = 1; t <= domain; ++t) {
    if (gpus % t != 0 || !CheckTensorSplit(net, t).ok()) continue;
    for (int s = 1; t * s <= domain; ++s) {
      if (gpus % (t * s) != 0) continue;
      if (s > 1 && (!space.sequence || !CheckSequenceSplit(net, s, t).ok())) continue;
      out.emplace_back(t, s);
    }
  }
  return out;
}

// Every weight sharding with every recomputation choice.
std::vector<std::pair<WeightSharding, bool>> ShardingsAndRecompute(const std::vector<bool>& recomputes) {
  std::vector<std::pair<WeightSharding, bool>> out;
  for (WeightSharding s : {WeightSharding::kReplicated, WeightSharding::kOptimizer, WeightSharding::kFull}) {
    for (bool r : recomputes) out.emplace_back(s, r);
  }
  return out;
}

// The finest useful spatial split of `net`: no GPU of a group left without a
// plane of the smallest convolution input (1 without spatial convolutions).
int64_t MaxSpatial(const Network& net) {
  int64_t m = 1;
  for (const NetLayer& l : net.layers) {
    if (l.op != LayerOp::kConv || l.dims == 0) continue;
    m = m == 1 ? l.extent[0] : std::min(m, l.extent[0]);
  }
  return m;
}

class LayerPricer {
 public:
  LayerPricer(const topology::ClusterSpec& c, const NetworkLayout& layout, const NetworkTraining& t)
      : gpu_(c.gpu),
        layout_(layout),
        precision_(t.precision),
        act_bytes_(topology::TrainsInFp32(t.precision) ? 4.0 : 2.0),
        peak_(c.gpu.PeakTflops(t.precision) * 1e12),
        stream_Bps_(c.gpu.hbm_GBps * 1e9 * c.gpu.hbm_efficiency),
        overhead_s_(c.gpu.kernel_overhead_us * 1e-6),
        fused_norm_(t.fused_norm) {
    // The groups every layer's collectives run on, placed once (GroupCost
    // weighs NCCL's algorithms; a layer only reads the fastest for its bytes).
    if (layout.tensor > 1) tensor_ar_ = topology::GroupCost(c, Collective::kAllReduce, 1, layout.tensor);
    if (layout.sequence > 1) {
      sequence_a2a_ = topology::GroupCost(c, Collective::kAllToAll, layout.tensor, layout.sequence);
    }
    if (layout.spatial > 1) {
      const int stride = layout.tensor * layout.sequence;
      spatial_ar_ = topology::GroupCost(c, Collective::kAllReduce, stride, layout.spatial);
      halo_ = topology::GroupCost(c, Collective::kSendRecv, stride, layout.spatial);
    }
  }

  struct Times {
    double fwd = 0, bwd = 0, halo = 0, tensor = 0;
    double sequence = 0, sequence_fwd = 0;  // all-to-alls: all, the forward's
    bool memory_bound = false;
  };

  // One occurrence of `l` (already the tensor group's shard: TensorShard)
  // for one micro-batch on one GPU.
  Times Price(const NetLayer& l) const {
    const double b = static_cast<double>(layout_.micro_batch) * Share(l);
    Times t;
    switch (l.op) {
      case LayerOp::kConv: t = Conv(l, b); break;
      case LayerOp::kLinear: t = Linear(l, b); break;
      case LayerOp::kAttention: t = Attention(l, b); break;
      case LayerOp::kNorm: t = fused_norm_ ? Stream(l, b, 0, 3) : Stream(l, b, 3, 5); break;
      case LayerOp::kElementwise: t = Stream(l, b, l.tensors + 1, l.tensors + 1); break;
      case LayerOp::kResample: t = Stream(l, b, 1, 1); break;
    }
    t.tensor = TensorComm(l, b);
    SequenceComm(l, b, &t);
    return t;
  }

  // A recomputed layer's forward runs again before its backward, with the
  // forward's halo exchange and (a row layer's) tensor-parallel all-reduce.
  static void Recompute(const NetLayer& l, Times* t) {
    t->bwd += t->fwd;
    t->sequence += t->sequence_fwd;
    t->halo += t->halo / (l.input_grad && !l.frozen ? 2.0 : 1.0);
    if (l.tensor == TensorSplit::kRow) t->tensor *= 2;
  }

  // Elements per sample a layer keeps for its backward.
  static double SavedElems(const NetLayer& l) {
    if (l.frozen) return 0;
    switch (l.op) {
      case LayerOp::kConv:
      case LayerOp::kLinear:
      case LayerOp::kNorm: return l.InElems();
      case LayerOp::kAttention:
        // Q, K, V and the output (the softmax statistics are per row: small).
        return 2.0 * (static_cast<double>(l.tokens) + static_cast<double>(l.kv_tokens)) * l.heads * l.head_dim;
      case LayerOp::kElementwise: return l.tensors == 2 ? 0 : std::max(1.0, l.tensors - 1) * l.InElems();
      case LayerOp::kResample: return l.stride > 1 ? l.InElems() : 0;
    }
    return 0;
  }

  // The share of a sample's spatial layer one GPU of a spatial group works on.
  double Share(const NetLayer& l) const {
    if (l.dims == 0 || layout_.spatial <= 1 || l.op == LayerOp::kLinear || l.op == LayerOp::kAttention) return 1.0;
    const double e0 = static_cast<double>(l.extent[0]);
    return std::ceil(e0 / layout_.spatial) / e0;
  }

  double act_bytes() const { return act_bytes_; }

 private:
  // A GEMM of m×k by k×n executing `flops`, at its shape's efficiency (the
  // GPU's curve, the short-k penalty, the sustained fraction, the measured
  // ceiling; × kConvGemmFactor for an implicit-GEMM convolution), or the time
  // to move `bytes` if that is longer.
  std::pair<double, bool> Gemm(double flops, double m, double n, double k, double bytes, bool conv) const {
    if (flops <= 0) return {0, false};
    double eff = gpu_.GemmEfficiency(precision_, m, n, k);
    const double k0 = gpu_.gemm_k0, x = std::cbrt(m * n * k);
    if (k0 > 0) eff *= std::min(1.0, (k / (k + k0)) / (x / (x + k0)));
    eff = std::min(eff * gpu_.gemm_sustained_fraction, gpu_.GemmCeilingAt(precision_));
    if (conv) eff *= kConvGemmFactor;
    const double math = flops / (peak_ * eff), memory = bytes / stream_Bps_;
    return {std::max(math, memory) + overhead_s_, memory > math};
  }

  Times Conv(const NetLayer& l, double b) const {
    if (l.groups > 1 && l.in_channels == l.groups && l.out_channels == l.groups) return Depthwise(l, b);
    const double g = l.groups, kv = std::pow(static_cast<double>(l.kernel), l.dims);
    const double in_pos = b * l.InElems() / l.in_channels, out_pos = b * l.OutElems() / l.out_channels;
    const double flops = l.ForwardFlops() * b, cin = l.in_channels / g, cout = l.out_channels / g;
    const double bytes = act_bytes_ * (b * (l.InElems() + l.OutElems()) + l.in_channels * cout * kv);
    // Forward, data gradient and weight gradient as the implicit GEMMs cuDNN
    // and CUTLASS run (per group): rows are output (or, for dgrad, input)
    // positions, columns output (input) channels, the reduction the other
    // side's channels times the kernel window; wgrad reduces over positions.
    const double fwd_m = l.transposed ? in_pos : out_pos;
    const double fwd_n = l.transposed ? cout * kv : cout, fwd_k = l.transposed ? cin : cin * kv;
    // The groups of a grouped convolution run as one kernel of g GEMMs of
    // the group's shape.
    auto grouped = [&](double m, double n, double k) {
      auto [s, mem] = Gemm(flops / g, m, n, k, bytes / g, true);
      return std::pair{g * (s - overhead_s_) + overhead_s_, mem};
    };
    Times t;
    std::tie(t.fwd, t.memory_bound) = grouped(fwd_m, fwd_n, fwd_k);
    if (!l.frozen) {
      t.bwd = grouped(cout, cin * kv, l.transposed ? in_pos : out_pos).first;
      if (l.input_grad) t.bwd += grouped(l.transposed ? out_pos : in_pos, cin, cout * kv).first;
    }
    t.halo = Halo(l, b);
    return t;
  }

  // A depthwise convolution (one input and one output channel per group)
  // does k^d multiply-adds per output element: 2·9 FLOPs for 4 bytes moved
  // at 3×3 in half precision, below every GPU's FLOP-to-byte ratio, and no
  // tensor-core GEMM shape (n = 1). It is priced as the traffic of its
  // tensors: the forward reads the input and writes the output, the backward
  // does so for the data gradient and again for the weight gradient.
  Times Depthwise(const NetLayer& l, double b) const {
    const double bytes = act_bytes_ * b * (l.InElems() + l.OutElems());
    Times t;
    t.fwd = bytes / stream_Bps_ + overhead_s_;
    t.memory_bound = true;
    if (!l.frozen) t.bwd = (l.input_grad ? 2 : 1) * bytes / stream_Bps_ + (l.input_grad ? 2 : 1) * overhead_s_;
    t.halo = Halo(l, b);
    return t;
  }

  Times Linear(const NetLayer& l, double b) const {
    const double rows = b * static_cast<double>(l.tokens);
    const double in = l.in_channels, out = l.out_channels;
    const double flops = 2.0 * rows * in * out;
    const double bytes = act_bytes_ * (rows * (in + out) + in * out);
    Times t;
    auto [f, fm] = Gemm(flops, rows, out, in, bytes, false);
    t.fwd = f;
    t.memory_bound = fm;
    if (!l.frozen) {
      t.bwd = Gemm(flops, in, out, rows, bytes, false).first;
      if (l.input_grad) t.bwd += Gemm(flops, rows, in, out, bytes, false).first;
    }
    return t;
  }

  // Fused attention at the GPU's flash efficiency and its shape factor; the
  // backward executes 2.5× the forward's FLOPs (FlashAttention-2 §3.1).
  Times Attention(const NetLayer& l, double b) const {
    const double flops = l.ForwardFlops() * b;
    const double shape = cost::FlashShapeFactor(gpu_, static_cast<double>(l.head_dim), static_cast<double>(l.tokens));
    const double bytes = act_bytes_ * b * 2.0 * (static_cast<double>(l.tokens) + l.kv_tokens) * l.heads * l.head_dim;
    Times t;
    const double fwd_math = flops / (peak_ * gpu_.flash_fwd_efficiency * shape);
    t.fwd = std::max(fwd_math, bytes / stream_Bps_) + overhead_s_;
    t.memory_bound = bytes / stream_Bps_ > fwd_math;
    if (!l.frozen && l.input_grad) {
      const double bwd_math = cost::kFlashBwdFlopRatio * flops / (peak_ * gpu_.flash_bwd_efficiency * shape);
      t.bwd = std::max(bwd_math, 2.0 * bytes / stream_Bps_) + overhead_s_;
    }
    return t;
  }

  // A memory-bound layer: `fwd_passes` and `bwd_passes` reads or writes of its
  // larger tensor per element.
  Times Stream(const NetLayer& l, double b, double fwd_passes, double bwd_passes) const {
    const double elems = b * std::max(l.InElems(), l.OutElems());
    Times t;
    if (fwd_passes > 0) t.fwd = fwd_passes * elems * act_bytes_ / stream_Bps_ + overhead_s_;
    t.memory_bound = true;
    if (!l.frozen && l.input_grad) t.bwd = bwd_passes * elems * act_bytes_ / stream_Bps_ + overhead_s_;
    // A spatially split norm all-reduces its statistics within the group.
    if (l.op == LayerOp::kNorm && Share(l) < 1.0) {
      const double stats = 2.0 * 4.0 * l.in_channels * layout_.micro_batch;
      t.halo = 2.0 * topology::LinkSeconds(spatial_ar_, layout_.spatial, stats);
    }
    return t;
  }

  // Megatron's tensor-parallel all-reduces: a row layer's output in the
  // forward, a column layer's input gradient in the backward (full widths).
  double TensorComm(const NetLayer& l, double b) const {
    if (layout_.tensor <= 1 || l.frozen) return 0;
    const double rows = b * static_cast<double>(l.tokens);
    double bytes = 0;
    if (l.tensor == TensorSplit::kRow) bytes = rows * l.out_channels * act_bytes_;
    if (l.tensor == TensorSplit::kColumn && l.input_grad) bytes = rows * l.in_channels * act_bytes_;
    return bytes > 0 ? topology::LinkSeconds(tensor_ar_, layout_.tensor, bytes) : 0;
  }

  // Ulysses' all-to-alls around a self-attention layer (already its sequence
  // shard: every token, heads / s): Q, K and V to head-split before it, the
  // output back to token-split after it; the backward moves their gradients
  // the same way. Each moves one GPU's tokens / s × every head of its tensor
  // rank.
  void SequenceComm(const NetLayer& l, double b, Times* t) const {
    if (layout_.sequence <= 1 || !IsSelfAttention(l)) return;
    const double bytes = b * static_cast<double>(l.tokens) * l.heads * l.head_dim * act_bytes_;
    const double one = topology::LinkSeconds(sequence_a2a_, layout_.sequence, bytes);
    t->sequence_fwd = 4 * one;
    t->sequence = t->sequence_fwd + (!l.frozen && l.input_grad ? 4 * one : 0);
  }

  // A spatially split convolution exchanges (kernel − 1)/2 planes of its input
  // with each neighbour in the forward, and as many gradient planes in the
  // backward.
  double Halo(const NetLayer& l, double b) const {
    if (Share(l) >= 1.0 || l.kernel <= 1 || l.transposed) return 0;
    const double plane = static_cast<double>(l.in_channels) * l.extent[1] * l.extent[2];
    const double bytes = (l.kernel - 1) / 2 * plane * (b / Share(l)) * act_bytes_;
    const double one = topology::LinkSeconds(halo_, layout_.spatial, bytes);
    return 2.0 * one * (l.input_grad && !l.frozen ? 2.0 : 1.0);
  }

  const topology::GpuSpec& gpu_;
  const NetworkLayout& layout_;
  topology::Precision precision_;
  double act_bytes_, peak_, stream_Bps_, overhead_s_;
  bool fused_norm_;
  topology::LinkCost tensor_ar_, sequence_a2a_, spatial_ar_, halo_;
};

Status CheckLayout(const Network& net, const topology::ClusterSpec& c, const NetworkLayout& l,
                   const NetworkTraining& t) {
  if (net.layers.empty()) return Status::InvalidArgument("network '" + net.name + "' has no layers");
  if (l.gpus < 1 || l.spatial < 1 || l.tensor < 1 || l.sequence < 1 ||
      l.gpus % (l.spatial * l.sequence * l.tensor) != 0) {
    return Status::InvalidArgument("spatial × sequence × tensor (" + std::to_string(l.spatial) + " × " +
                                   std::to_string(l.sequence) + " × " + std::to_string(l.tensor) +
                                   ") must divide gpus (" + std::to_string(l.gpus) + ")");
  }
  if (l.sequence > 1 && l.spatial > 1) {
    return Status::InvalidArgument("a sample is split either spatially or by sequence, not both");
  }
  PT_RETURN_IF_ERROR(CheckTensorSplit(net, l.tensor));
  PT_RETURN_IF_ERROR(CheckSequenceSplit(net, l.sequence, l.tensor));
  if (l.micro_batch < 1 || l.global_batch < 1) {
    return Status::InvalidArgument("micro_batch and global_batch must be positive");
  }
  if (l.Accumulation() == 0) {
    return Status::InvalidArgument("global_batch " + std::to_string(l.global_batch) +
                                   " is not a multiple of data-parallel replicas × micro_batch (" +
                                   std::to_string(l.Data()) + " × " + std::to_string(l.micro_batch) + ")");
  }
  if (c.gpu.PeakTflops(t.precision) <= 0) {
    return Status::InvalidArgument(c.gpu.name + " has no " + topology::PrecisionName(t.precision) + " peak");
  }
  if (l.spatial > 1) {
    const bool any_spatial = std::any_of(net.layers.begin(), net.layers.end(),
                                         [](const NetLayer& x) { return x.op == LayerOp::kConv && x.dims > 0; });
    if (!any_spatial) return Status::InvalidArgument("spatial parallelism needs convolutions to split");
  }
  return Status::Ok();
}

// The weight replicas' collectives of one step (data × spatial GPUs with the
// same tensor rank: NetworkLayout::Replicas) and what of them the compute
// does not hide.
void PriceGradientSync(const Network& net, const topology::ClusterSpec& c, const NetworkLayout& l,
                       const NetworkTraining& t, double fwd, double bwd, NetworkPrediction* p) {
  const int dp = l.Replicas();
  if (dp <= 1) return;
  const double params = net.Params();
  const double grads = params * t.grad_bytes, weights = params * 2.0;
  // Each collective's group placed once; a layer reads the fastest option.
  std::map<Collective, topology::LinkCost> placed;
  auto coll = [&](Collective k, double bytes) {
    auto it = placed.find(k);
    if (it == placed.end()) it = placed.emplace(k, topology::GroupCost(c, k, l.tensor, dp)).first;
    return topology::LinkSeconds(it->second, dp, bytes);
  };
  switch (l.sharding) {
    case WeightSharding::kReplicated: {
      p->grad_sync_s = coll(Collective::kAllReduce, grads);
      const double last_bucket = coll(Collective::kAllReduce, std::min(grads, kDdpBucketBytes));
      p->grad_sync_exposed_s = std::max(cost::Overlapped(p->grad_sync_s, bwd), last_bucket);
      break;
    }
    case WeightSharding::kOptimizer: {
      // Gradients reduce-scattered behind the backward, updated shards
      // all-gathered behind the next forward (Megatron's distributed optimizer
      // with overlap_param_gather).
      const double rs = coll(Collective::kReduceScatter, grads), ag = coll(Collective::kAllGather, weights);
      p->grad_sync_s = rs + ag;
      p->grad_sync_exposed_s = cost::Overlapped(rs, bwd) + cost::Overlapped(ag, fwd);
      break;
    }
    case WeightSharding::kFull: {
      // Per wrapped unit and micro-step: gather for the forward, again for the
      // backward, reduce-scatter the gradients.
      double small = 0, ag = 0, rs = 0;
      for (const NetLayer& x : net.layers) {
        const double n = x.frozen ? 0 : x.Params();
        if (n >= kFsdpUnitParams) {
          ag += x.repeat * coll(Collective::kAllGather, 2.0 * n);
          rs += x.repeat * coll(Collective::kReduceScatter, t.grad_bytes * n);
        } else {
          small += n * x.repeat;
        }
      }
      if (small > 0) {
        ag += coll(Collective::kAllGather, 2.0 * small);
        rs += coll(Collective::kReduceScatter, t.grad_bytes * small);
      }
      const double steps = static_cast<double>(l.Accumulation());
      p->grad_sync_s = steps * (2.0 * ag + rs);
      p->grad_sync_exposed_s = steps * (cost::Overlapped(ag, fwd) + cost::Overlapped(ag + rs, bwd));
      break;
    }
  }
}

// Weights, gradients, optimizer states, frozen weights (half precision),
// saved activations and the runtime's reserve. Replicated (PyTorch AMP):
// fp32 weights, gradients, states. ZeRO-1 (Rajbhandari et al. 2020, §5.1;
// Megatron's distributed optimizer): half-precision weights, gradients, and
// the fp32 master copy with the states sharded. FSDP: fp32 weights,
// gradients and states all sharded, two units gathered in half precision.
void PriceMemory(const Network& net, const topology::ClusterSpec& c, const NetworkLayout& l,
                 const NetworkTraining& t, double saved_bytes, NetworkPrediction* p) {
  double frozen = 0, largest = 0;
  for (const NetLayer& x : net.layers) {
    if (x.frozen) frozen += x.Params() * x.repeat;
    else largest = std::max(largest, x.Params());
  }
  const double params = net.Params(), dp = l.Replicas();
  const double w = params * 4.0, g = params * t.grad_bytes, s = params * t.optimizer_state_bytes;
  double state = 0;
  switch (l.sharding) {
    case WeightSharding::kReplicated: state = w + g + s; break;
    case WeightSharding::kOptimizer:
      state = t.zero1_whole_weights ? w + g + s / dp : params * 2.0 + g + (w + s) / dp;
      break;
    case WeightSharding::kFull: state = (w + g + s) / dp + 2.0 * 2.0 * largest; break;  // two units gathered
  }
  p->activations_GiB = saved_bytes / cost::kGiB;
  p->memory_GiB = (state + 2.0 * frozen + saved_bytes) / cost::kGiB + c.gpu.runtime_reserved_GiB;
  p->fits = p->memory_GiB <= c.gpu.memory_GiB;
}

}  // namespace

Result<NetworkPrediction> PredictNetwork(const Network& full, const topology::ClusterSpec& cluster,
                                         const NetworkLayout& layout, const NetworkTraining& training) {
  PT_RETURN_IF_ERROR(CheckLayout(full, cluster, layout, training));
  PT_ASSIGN_OR_RETURN(const std::vector<bool> recomputed, RecomputedUnder(full, layout));
  // What one GPU of a tensor and sequence group holds and runs (the network
  // itself without either: the search asks for thousands of layouts).
  Network sharded;
  const bool split = layout.tensor > 1 || layout.sequence > 1;
  if (split) {
    sharded.layers.reserve(full.layers.size());
    for (const NetLayer& l : full.layers) sharded.layers.push_back(GpuShard(l, layout));
  }
  const Network& net = split ? sharded : full;
  const LayerPricer pricer(cluster, layout, training);
  NetworkPrediction p;
  // Time per layer name (unnamed layers by their op), the strings made only
  // for the slowest.
  struct LayerAcc {
    double seconds = 0;
    bool memory_bound = false;
    const NetLayer* layer = nullptr;
  };
  std::map<std::string_view, LayerAcc> by_name;
  double saved = 0, block_peak = 0, block = 0;  // the largest stack's one repeat, the current stack's
  for (size_t i = 0; i < net.layers.size(); ++i) {
    const NetLayer& l = net.layers[i];
    LayerPricer::Times t = pricer.Price(l);
    const double n = static_cast<double>(l.repeat);
    const double keeps = LayerPricer::SavedElems(l) * pricer.Share(l);
    if (!recomputed.empty() && recomputed[i]) {
      // The block keeps its input, one repeat's activations alive at a time.
      if (l.checkpoint) saved += n * l.InElems() * pricer.Share(l);
      block = (i > 0 && recomputed[i - 1] ? block : 0) + keeps;
      block_peak = std::max(block_peak, block);
      LayerPricer::Recompute(l, &t);
    } else {
      saved += n * keeps;
    }
    p.forward_s += n * t.fwd;
    p.backward_s += n * t.bwd;
    p.halo_s += n * t.halo;
    p.tensor_comm_s += n * t.tensor;
    p.sequence_comm_s += n * t.sequence;
    LayerAcc& acc = by_name[l.name.empty() ? std::string_view(LayerOpName(l.op)) : std::string_view(l.name)];
    acc.layer = &l;
    acc.seconds += n * (t.fwd + t.bwd + t.halo + t.tensor + t.sequence);
    acc.memory_bound = t.memory_bound;
  }
  saved += block_peak;
  const double accumulation = static_cast<double>(layout.Accumulation());
  const double micro = p.forward_s + p.backward_s + p.halo_s + p.tensor_comm_s + p.sequence_comm_s;
  PriceGradientSync(net, cluster, layout, training, p.forward_s, p.backward_s, &p);
  // The optimizer reads and writes the fp32 weights and its states and reads
  // the gradients, on the shard a GPU owns.
  const double shard = layout.sharding == WeightSharding::kReplicated ? 1.0 : 1.0 / layout.Replicas();
  const double opt_bytes = net.Params() * shard * (2.0 * 4.0 + training.grad_bytes + 2.0 * training.optimizer_state_bytes);
  p.optimizer_s = opt_bytes / (cluster.gpu.hbm_GBps * 1e9 * cluster.gpu.hbm_efficiency);
  p.step_s = accumulation * micro + p.grad_sync_exposed_s + p.optimizer_s;
  p.samples_per_s = static_cast<double>(layout.global_batch) / p.step_s;
  PriceMemory(net, cluster, layout, training, saved * layout.micro_batch * pricer.act_bytes(), &p);
  p.model_tflops_per_gpu = full.TrainingFlops() * p.samples_per_s / layout.gpus / 1e12;
  p.mfu = p.model_tflops_per_gpu / cluster.gpu.PeakTflops(training.precision);
  p.published_mfu_ceiling = cluster.gpu.PublishedMfuCeiling(training.precision);
  p.above_published_mfu = p.published_mfu_ceiling > 0 && p.mfu > p.published_mfu_ceiling;
  std::vector<LayerAcc> slowest;
  slowest.reserve(by_name.size());
  for (const auto& [name, acc] : by_name) slowest.push_back(acc);
  std::sort(slowest.begin(), slowest.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  if (slowest.size() > 8) slowest.resize(8);
  for (const LayerAcc& a : slowest) {
    p.slowest.push_back({a.layer->name, LayerOpName(a.layer->op), a.seconds, a.memory_bound});
  }
  return p;
}

Result<std::vector<PricedLayer>> PriceNetworkLayers(const Network& net, const topology::ClusterSpec& cluster,
                                                   const NetworkLayout& layout, const NetworkTraining& training) {
  PT_RETURN_IF_ERROR(CheckLayout(net, cluster, layout, training));
  PT_ASSIGN_OR_RETURN(const std::vector<bool> recomputed, RecomputedUnder(net, layout));
  const LayerPricer pricer(cluster, layout, training);
  std::vector<PricedLayer> out;
  out.reserve(net.layers.size());
  for (size_t i = 0; i < net.layers.size(); ++i) {
    PricedLayer p;
    p.layer = GpuShard(net.layers[i], layout);
    p.share = pricer.Share(p.layer);
    p.recomputed = !recomputed.empty() && recomputed[i];
    LayerPricer::Times t = pricer.Price(p.layer);
    if (p.recomputed) LayerPricer::Recompute(p.layer, &t);
    p.forward_s = t.fwd;
    p.backward_s = t.bwd;
    p.halo_s = t.halo;
    p.tensor_comm_s = t.tensor;
    p.sequence_comm_s = t.sequence;
    p.memory_bound = t.memory_bound;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<NetworkCandidate> SearchNetworkLayouts(const Network& net, const topology::ClusterSpec& cluster,
                                                   int gpus, int64_t global_batch, const NetworkTraining& training,
                                                   double headroom, int* refused, const NetworkSpace& space,
                                                   const std::function<bool()>& expired, bool* stopped) {
  const int64_t max_spatial = MaxSpatial(net);
  const double capacity = cluster.gpu.memory_GiB * (1.0 - headroom);
  const std::vector<std::pair<WeightSharding, bool>> choices =
      ShardingsAndRecompute(NetworkRecomputeChoices(net, space));
  std::vector<NetworkCandidate> out;
  int not_fit = 0;
  const std::vector<std::pair<int, int>> groups = TokenGroups(net, cluster, gpus, space);
  bool late = false;  // `expired` answered true: rank what was priced
  for (int spatial = 1; !late && spatial <= gpus && spatial <= std::max<int64_t>(1, max_spatial); ++spatial) {
    for (const auto& [tensor, sequence] : groups) {
      if (late) break;
      if (sequence > 1 && spatial > 1) continue;
      if (gpus % (spatial * sequence * tensor) != 0) continue;
      const int64_t dp = gpus / (spatial * sequence * tensor);
      if (global_batch % dp != 0) continue;
      // A replica's share past 2^31 samples is no batch anyone trains.
      if (global_batch / dp > std::numeric_limits<int>::max()) continue;
      const std::vector<int> micro = cost::Divisors(global_batch / dp);
      bool every_micro_fits = false;  // without recomputation, for the sharding just searched
      for (const auto& [s, recompute] : choices) {
        if (!recompute) every_micro_fits = false;  // each sharding comes first without
        // Nothing to shard over, unless the space has no unsharded layout.
        if (dp * spatial * sequence == 1 && s != WeightSharding::kReplicated && space.replicated) continue;
        // Recomputation only buys memory: where every micro-batch fits
        // without it, it is the same layouts, slower.
        if (recompute && every_micro_fits) continue;
        if (expired && expired()) {
          late = true;
          break;
        }
        auto layout = [&](int64_t mb) {
          return NetworkLayout{gpus, spatial, mb, global_batch, s, tensor, recompute, sequence};
        };
        if (!space.Allows(layout(1))) continue;
        // Memory grows with the micro-batch: the largest that fits by
        // bisection, then the few below it (a smaller one is rarely faster:
        // more kernels for the same samples).
        size_t lo = 0, hi = micro.size();  // micro[0, lo) fit, micro[hi, end) do not
        while (lo < hi) {
          const size_t mid = (lo + hi) / 2;
          auto p = PredictNetwork(net, cluster, layout(micro[mid]), training);
          if (p.ok() && p->memory_GiB <= capacity) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        not_fit += static_cast<int>(micro.size() - lo);
        if (!recompute) every_micro_fits = lo == micro.size();
        for (size_t i = lo; i > 0 && lo - i < kMicroBatchesKept; --i) {
          auto p = PredictNetwork(net, cluster, layout(micro[i - 1]), training);
          if (p.ok()) out.push_back({layout(micro[i - 1]), *std::move(p)});
        }
      }
    }
  }
  if (stopped) *stopped = late;
  std::stable_sort(out.begin(), out.end(), [](const NetworkCandidate& a, const NetworkCandidate& b) {
    if (a.prediction.step_s != b.prediction.step_s) return a.prediction.step_s < b.prediction.step_s;
    if (a.layout.sharding != b.layout.sharding) return a.layout.sharding < b.layout.sharding;
    if (a.layout.spatial != b.layout.spatial) return a.layout.spatial < b.layout.spatial;
    if (a.layout.tensor != b.layout.tensor) return a.layout.tensor < b.layout.tensor;
    if (a.layout.sequence != b.layout.sequence) return a.layout.sequence < b.layout.sequence;
    if (a.layout.recompute != b.layout.recompute) return !a.layout.recompute;
    return a.layout.micro_batch > b.layout.micro_batch;
  });
  if (refused) *refused = not_fit;
  return out;
}

namespace {

// The fastest layout of `net` with one sample per replica that fits, if any.
std::optional<NetworkCandidate> FastestFit(const Network& net, const topology::ClusterSpec& cluster, int gpus,
                                           const NetworkTraining& training, double capacity,
                                           const NetworkSpace& space) {
  std::optional<NetworkCandidate> best;
  const std::vector<std::pair<int, int>> groups = TokenGroups(net, cluster, gpus, space);
  const std::vector<std::pair<WeightSharding, bool>> choices =
      ShardingsAndRecompute(NetworkRecomputeChoices(net, space));
  const int64_t max_spatial = MaxSpatial(net);
  for (int64_t spatial : cost::Divisors(gpus)) {
    if (spatial > max_spatial) break;
    for (const auto& [tensor, sequence] : groups) {
      if (sequence > 1 && spatial > 1) continue;
      if (gpus % (spatial * sequence * tensor) != 0) continue;
      const int64_t dp = gpus / (spatial * sequence * tensor);
      for (const auto& [s, recompute] : choices) {
        if (dp * spatial * sequence == 1 && s != WeightSharding::kReplicated && space.replicated) continue;
        const NetworkLayout l{gpus, static_cast<int>(spatial), 1, dp, s, tensor, recompute, sequence};
        if (!space.Allows(l)) continue;
        auto p = PredictNetwork(net, cluster, l, training);
        if (!p.ok() || p->memory_GiB > capacity) continue;
        if (!best || p->step_s < best->prediction.step_s) best = NetworkCandidate{l, *std::move(p)};
      }
    }
  }
  return best;
}

}  // namespace

Result<NetworkCapacity> CapacityOf(const Network& net, const topology::ClusterSpec& cluster, int gpus,
                                   const NetworkTraining& training, double headroom, int64_t max_size,
                                   const NetworkSpace& space) {
  NetworkCapacity out;
  out.size = SizeOf(net);
  if (out.size.key.empty()) {
    return Status::InvalidArgument("network '" + net.name +
                                   "' lists its layers: capacity varies a family's input size (docs/networks.md)");
  }
  const double capacity = cluster.gpu.memory_GiB * (1.0 - headroom);
  auto fits = [&](int64_t k) -> std::optional<NetworkCandidate> {
    auto sized = ResizeNetwork(net, k * out.size.step);
    if (!sized.ok()) return std::nullopt;
    return FastestFit(*sized, cluster, gpus, training, capacity, space);
  };
  // Bisection on k (size = k × step): every k <= lo fits, every k >= hi does not.
  const int64_t max_k = std::max<int64_t>(1, max_size / out.size.step);
  int64_t lo = 0, hi = max_k + 1;
  std::optional<NetworkCandidate> at_lo;
  if (auto top = fits(max_k)) {
    lo = max_k;
    at_lo = top;
  }
  while (lo < max_k && hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (auto c = fits(mid)) {
      lo = mid;
      at_lo = c;
    } else {
      hi = mid;
    }
  }
  out.size.value = lo * out.size.step;
  out.found = at_lo.has_value();
  out.binds = lo == max_k ? "max_size" : "gpu_memory";
  if (out.found) {
    out.layout = at_lo->layout;
    out.prediction = at_lo->prediction;
  }
  return out;
}

Result<TournamentPrediction> PredictTournament(const Network& net, const topology::ClusterSpec& cluster,
                                               const NetworkLayout& trainer, int trainers, int64_t interval,
                                               const NetworkTraining& training) {
  if (trainers < 1 || interval < 1) return Status::InvalidArgument("trainers and interval must be positive");
  TournamentPrediction t;
  PT_ASSIGN_OR_RETURN(t.trainer, PredictNetwork(net, cluster, trainer, training));
  if (trainers == 1) {
    t.speedup = 1;
    return t;
  }
  // The partner rank sits one trainer's GPUs away: across nodes.
  const double model_bytes = net.Params() * 4.0;
  t.exchange_s = topology::CollectiveSeconds(cluster, Collective::kSendRecv, trainer.gpus, 2, model_bytes);
  t.evaluation_s = 2.0 * t.trainer.forward_s;
  t.overhead_per_step_s = (t.exchange_s + t.evaluation_s) / static_cast<double>(interval);
  t.speedup = trainers * t.trainer.step_s / (t.trainer.step_s + t.overhead_per_step_s);
  return t;
}

}  // namespace paratune::planner
