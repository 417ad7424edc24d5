// The communication terms of the cost model: per layer, the tensor-parallel
// (X, Y), sharded-weight (Z), context-parallel and FPDT transfers
// (CostModel::LayerCost) and ZeRO-3's gathers; per iteration, the
// data-parallel gradient synchronisation. Each is charged what stays exposed
// beside the compute it can overlap. docs/model.md describes every term.
#include <algorithm>
#include <array>
#include <cmath>

#include "planner/cost/internal.h"
#include "planner/ddp_buckets.h"

namespace paratune::planner {

using cost::Overlapped;
using cost::OverlappedPartly;
using cost::Pipelined;
using topology::Collective;

namespace {

// A linear layer's weight, k × n elements before any sharding.
struct LinearShape {
  double k, n;
};
// The four linear layers of a transformer block in module order: QKV
// (`qkv_n` wide), the attention output projection (`proj_k` wide in), FC1
// (gate and up together when gated) and FC2.
std::array<LinearShape, 4> BlockLinears(const ModelSpec& m, double qkv_n, double proj_k) {
  const double h = m.hidden, f = m.ffn_hidden, g = m.gated_ffn ? 2.0 : 1.0;
  return {{{h, qkv_n}, {proj_k, h}, {h, f * g}, {f, h}}};
}

}  // namespace

void CostModel::LayerCost(const ParallelConfig& c, const ComputeTerms& t, double z_cached,
                          LayerTimes* out) const {
  const ModelSpec& m = model_;
  const double e = act_bytes_;
  const double h = m.hidden, a = m.heads, kv = m.kv_heads;
  const double s = training_.seq_len, b = c.mbs;
  const double gx = c.gx, gy = c.gy;
  const double T = b * s / c.cp;
  const int sx = c.Stride(Dim::kX), sy = c.Stride(Dim::kY);
  // The FSDP (Z) group: gz ranks, or torchtitan's dp_shard × cp.
  const cost::SyncGroup fsdp = cost::FsdpGroup(c, fw_);
  const int sz = fsdp.stride, nz = fsdp.size;
  // Transformer Engine's userbuffers overlap needs the tensor group inside one
  // NVLink domain (CUDA IPC buffers): across nodes the option buys nothing.
  const bool tp_overlap = c.tp_comm_overlap && int64_t{sy} * c.gy * c.gx <= cluster_.DomainGpus();

  // --- Tensor-parallel communication per linear layer: the forward all-reduce
  // of the output over the group that split k, the backward all-reduce of the
  // input gradient over the group that split n (AxoNN §1.3; Megatron TP = the
  // gx = 1 case: 2 all-reduces of b·s·h forward and 2 backward per layer).
  const std::array<LinearShape, 4> kn = BlockLinears(m, attn_qkv_n_, attn_proj_k_);
  double comm_x = 0, comm_y = 0, fwd_x = 0, fwd_y = 0, z_ag = 0, z_rs = 0;
  double z_w[4] = {0, 0, 0, 0};  // Z-sharded weight elements of each linear
  for (int i = 0; i < 4; ++i) {
    const bool transposed = (i % 2) == 1;
    const double k = kn[i].k, n = kn[i].n;
    if (!c.sp && c.tensor() > 1) {
      // The forward all-reduce, pipelined over batch chunks where the
      // framework does so (1 chunk: fully exposed).
      const double chunks = c.oar ? fw_.costs.forward_allreduce_chunks : 1.0;
      if (transposed) {
        fwd_y += Pipelined(comm_.Seconds(Collective::kAllReduce, sy, c.gy, T * (n / gx) * e),
                           t.linear_fwd[i], chunks);
        const double bwd = comm_.Seconds(Collective::kAllReduce, sx, c.gx, T * (k / gy) * e);
        comm_x += c.oar ? Overlapped(bwd, t.linear_fwd[i]) : bwd;
      } else {
        fwd_x += Pipelined(comm_.Seconds(Collective::kAllReduce, sx, c.gx, T * (n / gy) * e),
                           t.linear_fwd[i], chunks);
        const double bwd = comm_.Seconds(Collective::kAllReduce, sy, c.gy, T * (k / gx) * e);
        // OAR: a layer's input-gradient all-reduce runs while its weight-gradient GEMM computes.
        comm_y += c.oar ? Overlapped(bwd, t.linear_fwd[i]) : bwd;
      }
    }
    if (nz > 1) z_w[i] = k * n / c.tensor();
  }
  if (nz > 1) {
    // Weights are gathered in the compute dtype; gradients reduce-scattered in
    // the main-gradient dtype (FSDP's reduce_dtype) or, where the framework
    // reduces weight.grad before accumulating (AxoNN), the parameter dtype.
    // One collective per linear layer (AxoNN) or per block (FSDP's unit).
    const double rs_bytes = fw_.costs.z_reduce_in_param_dtype > 0 ? param_bytes_ : grad_bytes_;
    const bool per_linear = fw_.costs.z_per_linear > 0;
    const double block = z_w[0] + z_w[1] + z_w[2] + z_w[3];
    for (int i = 0; i < (per_linear ? 4 : 1); ++i) {
      const double w = per_linear ? z_w[i] : block;
      z_ag += comm_.Seconds(Collective::kAllGather, sz, nz, w * gather_bytes_);
      z_rs += comm_.Seconds(Collective::kReduceScatter, sz, nz, w * rs_bytes);
    }
  }
  // Megatron sequence parallelism: each all-reduce becomes an all-gather of the
  // layer input (before QKV, FC1) and a reduce-scatter of the output (after
  // proj, FC2); the backward mirrors them and re-gathers the inputs for the
  // weight gradients behind the dgrad GEMMs (Korthikanti 2022 §4.2.2).
  if (c.sp) {
    const double buf = T * h * e;
    const double ag = comm_.Seconds(Collective::kAllGather, sy, c.gy, buf);
    const double rs = comm_.Seconds(Collective::kReduceScatter, sy, c.gy, buf);
    fwd_y += 2 * ag + 2 * rs;
    if (tp_overlap) {
      // Transformer Engine's userbuffers also pipeline the backward's
      // collectives through its GEMMs: the output gradient's all-gather
      // through the dgrad GEMM, the input's re-gather behind it (bulk dgrad
      // overlap) and the input gradient's reduce-scatter behind the wgrad GEMM
      // (ub_ag / ub_bulk_dgrad / ub_bulk_wgrad in TE's Linear modules).
      comm_y += Overlapped(4 * ag + 2 * rs, 2.0 * t.gemm_fwd);
    } else {
      comm_y += 2 * ag + (c.oar ? Overlapped(2 * rs, t.normal_fwd) : 2 * rs) +
                (c.oar ? Overlapped(2 * ag, t.normal_fwd) : 2 * ag);
    }
  }
  if (tp_overlap) {
    // Transformer Engine userbuffers pipeline the collective through the GEMM.
    fwd_x = Overlapped(fwd_x, t.gemm_fwd);
    fwd_y = Overlapped(fwd_y, t.gemm_fwd);
  }
  comm_x += fwd_x;
  comm_y += fwd_y;

  DenseLayerMath(c, t, out);
  // Recomputing the dense MLP runs its forward collectives again: half the
  // layer's (FC1's input gather, FC2's output reduction).
  if (SelectiveModules(c) & kRcMlp) {
    comm_y += fwd_y / 2.0;
    comm_x += fwd_x / 2.0;
  }
  if (c.recompute == Recompute::kFull) {
    comm_x += fwd_x;  // the forward collectives run again
    comm_y += fwd_y;
  }
  out->act_bytes = LayerActivation(c, t, /*moe_layer=*/false);

  // --- Z (AxoNN depth / FSDP inside the tensor block): per micro-batch gather
  // the weights forward and again backward (again for recompute), reduce-scatter
  // the gradients. OAG prefetches one layer ahead; ORS defers the reduce-scatter.
  // FSDP2 under pipeline parallelism keeps the gathered block across the step.
  out->comm_z = 0;
  if (nz > 1) {
    const double fwd_w = out->fwd_compute, bwd_w = out->bwd_compute + out->recompute;
    // Cached layers keep the forward's gathered block for the recompute and
    // the backward: they gather once per micro-batch.
    const double n_ag_b = (c.recompute == Recompute::kFull ? 2.0 : 1.0) * (1.0 - z_cached);
    const double eta = fw_.costs.shard_overlap;
    if (fw_.costs.pp_keeps_unsharded > 0 && c.pp > 1) {
      // FSDP2 under pipeline parallelism (torchtitan): the first micro-batch's
      // forward gathers the block and it stays gathered through the last
      // backward, which reduce-scatters once (reshard_after_forward = not
      // pp_enabled, fsdp.py:112-136 @b5bcd76; PyTorch's pipelining stage turns
      // gradient sync off until the last backward and reduces after every
      // backward has run, not under one). One gather and one reduce-scatter per
      // step, charged here per micro-batch.
      const int64_t n_mb = std::max<int64_t>(1, cost::MicroBatches(training_.global_batch, c));
      out->comm_z = cost::ShardedTrafficExposed(z_ag, 0.0, 0.0, z_rs, fwd_w, bwd_w, c.oag,
                                                /*defer_rs=*/false, eta) /
                    static_cast<double>(n_mb);
    } else {
      out->comm_z =
          cost::ShardedTrafficExposed(z_ag, z_ag, n_ag_b, z_rs, fwd_w, bwd_w, c.oag, c.ors, eta);
    }
  }

  // --- Context parallelism.
  out->comm_cp = 0;
  if (c.cp > 1) {
    const int scp = c.Stride(Dim::kCp);
    if (c.cp_kind == CpKind::kRing) {
      // Each step passes this rank's K and V block to the next while the current
      // block's attention computes: cp − 1 steps forward, twice that backward.
      const double kv_block = 2.0 * b * (s / c.cp) * (h * kv / a) / gy * e;
      const double step = comm_.Seconds(Collective::kSendRecv, scp, 2, kv_block);
      out->comm_cp = Overlapped((c.cp - 1) * step, t.attn_fwd) +
                     Overlapped(2.0 * (c.cp - 1) * step, t.attn_bwd);
    } else {
      // Ulysses / FPDT: all-to-all of Q, K, V in and of the output back, forward and backward.
      const double qkv = T * (static_cast<double>(m.qkv_out()) / gy) * e;
      const double fwd = comm_.Seconds(Collective::kAllToAll, scp, c.cp, qkv) +
                         comm_.Seconds(Collective::kAllToAll, scp, c.cp, T * (h / gy) * e);
      out->comm_cp = 2.0 * fwd + (c.recompute == Recompute::kFull ? fwd : 0.0);
    }
  }
  out->comm_x = comm_x;
  out->comm_y = comm_y;

  // --- FPDT: the sequence in chunks; only two stay on the GPU, the others go to
  // host memory and back, hidden behind the layer's compute when the link allows.
  out->offload = 0;
  if (c.cp > 1 && c.cp_kind == CpKind::kFpdt) {
    const double chunks = std::max(1.0, s / training_.fpdt_chunk_tokens);
    if (chunks > 2.0) {
      const double off = out->act_bytes * (1.0 - 2.0 / chunks);
      const double t_host = 2.0 * off / (cluster_.HostLinkGBps() * 1e9);
      out->act_bytes *= 2.0 / chunks;
      out->offload = std::max(0.0, t_host - (out->fwd_compute + out->bwd_compute));
    }
  }
}

namespace {

// Layers over which Zero3CallsPerLayer follows DeepSpeed's buckets: enough
// for a bucket spanning several small layers to close a few times.
constexpr int kZero3TraceLayers = 16;

// Collectives DeepSpeed's ZeRO-3 issues per layer, in steady state, for a
// layer whose parameters hold `sizes` elements in module order. The gather
// side (`close_at_bucket`) takes parameters into a call until it holds at
// least `bucket` elements: the prefetch loop of
// deepspeed/runtime/zero/partitioned_param_coordinator.py:452-484 (edaa722),
// one all_gather_coalesced per call (:582-613). The reduce side flushes its
// bucket before a gradient that would overflow it (stage3.py:1533-1535) and
// reduce-scatters each flush in one reduce_scatter_coalesced (:1595-1601,
// 1813). A bucket that spans layers counts as the fraction of it each fills.
double Zero3CallsPerLayer(const double (&sizes)[4], double bucket, bool close_at_bucket) {
  double calls = 0, open = 0;
  for (int l = 0; l < kZero3TraceLayers; ++l) {
    for (double s : sizes) {
      if (!(s > 0)) continue;
      if (close_at_bucket) {
        open += s;
        if (open >= bucket) {
          calls += 1;
          open = 0;
        }
      } else {
        if (open > 0 && open + s > bucket) {
          calls += 1;
          open = 0;
        }
        open += s;
      }
    }
  }
  return (calls + open / bucket) / kZero3TraceLayers;
}

}  // namespace

// ZeRO-3 over the data group: the per-layer gather/scatter pattern of Z, on
// the block (`layer_shard` elements) the GPU still holds after tensor and Z
// sharding; `sd`, `nd`: stride and size of the weight-replica group. Where
// the framework states its buckets (DeepSpeed) the layer's traffic goes in
// as many calls as they make, each paying its own latency; otherwise in one
// all-gather and one reduce-scatter per layer.
double CostModel::Zero3LayerSeconds(const ParallelConfig& c, const LayerTimes& lt,
                                    double layer_shard, int sd, int nd) const {
  double zero3_layer = 0;
  if (c.zero == 3 && nd > 1) {
    const double bytes = layer_shard * gather_bytes_;
    int hp_group = nd;
    if (c.hpz) {
      const int per_node = std::max(1, cluster_.gpus_per_node / std::min(sd, cluster_.gpus_per_node));
      hp_group = std::max(1, std::min(nd, per_node));
    }
    // The layer's four weight matrices as the GPU holds them (norms and
    // biases stay resident under stage3_param_persistence_threshold). QKV
    // and gate/up count as one matrix each, as Megatron-DeepSpeed fuses
    // them; a Hugging Face model's separate projections make about one call
    // more a layer where each passes the bucket (Llama-70B: five, not four).
    const double shard = static_cast<double>(c.tensor()) * cost::FsdpGroup(c, fw_).size;
    const std::array<LinearShape, 4> linears = BlockLinears(model_, attn_qkv_n_, attn_proj_k_);
    double weights[4];
    for (int i = 0; i < 4; ++i) weights[i] = linears[i].k * linears[i].n / shard;
    const FrameworkCosts& fc = fw_.costs;
    const double n_ag = fc.zero3_gather_bucket_elements > 0
                            ? Zero3CallsPerLayer(weights, fc.zero3_gather_bucket_elements, true)
                            : 1.0;
    const double n_rs = fc.zero3_reduce_bucket_elements > 0
                            ? Zero3CallsPerLayer(weights, fc.zero3_reduce_bucket_elements, false)
                            : 1.0;
    // `n` calls of the layer's `total` bytes, `total / n` each.
    auto calls = [&](Collective k, int size, double total, double n) {
      if (!(n > 0)) n = 1.0;
      return n * comm_.Seconds(k, sd, size, total / n);
    };
    const double ag_f = calls(Collective::kAllGather, nd, bytes * (c.qwz ? 0.5 : 1.0), n_ag);
    const double ag_b = hp_group > 1 ? calls(Collective::kAllGather, hp_group, bytes, n_ag) : 0.0;
    // Gradients are reduce-scattered in the parameter dtype whatever the gather's.
    const double rs = calls(Collective::kReduceScatter, nd,
                            layer_shard * param_bytes_ * (c.qgz ? 0.25 : 1.0), n_rs);
    const double n_ag_b = c.recompute == Recompute::kFull ? 2.0 : 1.0;
    const double fwd_w = lt.fwd_compute, bwd_w = lt.bwd_compute + lt.recompute;
    const double eta = fw_.costs.shard_overlap;
    zero3_layer = cost::ShardedTrafficExposed(ag_f, ag_b, n_ag_b, rs, fwd_w, bwd_w,
                                              c.overlap_param_gather, c.overlap_grad_reduce, eta);
    // ZeRO++'s (de)quantization kernels run on the GPU beside the layer's own
    // work (Wang et al. 2023 §4.1, §4.3): qwZ dequantizes every gathered
    // block (read int8, write the parameter dtype); qgZ quantizes the
    // gradient to int4, then dequantizes, reduces and re-quantizes after the
    // intra-node all-to-all and again after the inter-node one (≈ twice
    // (gradient + int4) bytes per element). Memory-bound, not hidden.
    const double block = layer_shard;  // the gathered layer block, elements
    const double n_qw = c.qwz ? (1.0 + (c.hpz ? 0.0 : n_ag_b)) : 0.0;
    zero3_layer += cluster_.corrections.memory_bound *
                   StreamSeconds(n_qw * block * (1.0 + param_bytes_) +
                                 (c.qgz ? 2.0 * block * (param_bytes_ + 0.5) : 0.0));
  }
  return zero3_layer;
}

// Data-parallel synchronisation, once per iteration (ZeRO-2 reduces per
// micro-batch; ZeRO-3 is costed per layer by Zero3LayerSeconds, its embedding
// here): returns `comm_data` plus the exposed gradient reduction and
// parameter gather.
double CostModel::DataSyncSeconds(const ParallelConfig& c, const LayerTimes& lt, double psi,
                                  double closing, double L_s, int64_t n_mb, int sd, int nd,
                                  double comm_data) const {
  if (nd > 1 && c.zero < 3) {
    const bool ds = c.zero > 0;  // DeepSpeed reduces in the parameter dtype
    const double g_bytes = ds ? param_bytes_ : grad_bytes_;
    const bool all_reduce = c.zero == 0 && !c.distributed_optimizer;
    const Collective reduce_kind = all_reduce ? Collective::kAllReduce : Collective::kReduceScatter;
    const DdpBuckets buckets = Buckets(c, psi, closing, nd);
    // The buckets' collectives, `calls` of `body / calls` elements each
    // (every call paying its latency), and the closing bucket's.
    auto seconds = [&](Collective k, double bytes_per_element, double* last) {
      *last =
          buckets.closing > 0 ? comm_.Seconds(k, sd, nd, buckets.closing * bytes_per_element) : 0.0;
      const double body =
          buckets.calls > 0
              ? buckets.calls *
                    comm_.Seconds(k, sd, nd, buckets.body / buckets.calls * bytes_per_element)
              : 0.0;
      return body + *last;
    };
    double reduce_last = 0, gather_last = 0;
    const double reduce = seconds(reduce_kind, g_bytes, &reduce_last);
    const double gather =
        all_reduce ? 0.0 : seconds(Collective::kAllGather, gather_bytes_, &gather_last);
    const double bwd_stage = L_s * (lt.bwd_compute + lt.recompute);
    const double fwd_stage = L_s * lt.fwd_compute;
    // The closing bucket's reduction starts after the backward and its
    // gather before the forward: neither hides.
    const double red = c.overlap_grad_reduce ? OverlappedPartly(reduce - reduce_last, bwd_stage,
                                                                fw_.costs.grad_reduce_overlap) +
                                                   reduce_last
                                             : reduce;
    comm_data += (c.zero == 2 ? n_mb : 1) * red;
    comm_data +=
        c.overlap_param_gather ? Overlapped(gather - gather_last, fwd_stage) + gather_last : gather;
  } else if (nd > 1 && c.zero == 3 && closing > 0) {
    // ZeRO-3 shards the embedding as it shards every parameter, outside the
    // transformer layers Zero3LayerSeconds prices: its gradients are the last
    // the backward produces and its weights the first the forward needs, so
    // the step's last reduce-scatter and first gather of it are exposed (the
    // micro-batches between hide theirs behind the layers).
    comm_data += comm_.Seconds(Collective::kReduceScatter, sd, nd, closing * param_bytes_) +
                 comm_.Seconds(Collective::kAllGather, sd, nd, closing * gather_bytes_);
  }
  return comm_data;
}

// Megatron's DDP bucketing (Megatron-LM d98e8a6): with overlap_grad_reduce
// the bucket size is max(4e7, 1e6 x data-and-context-parallel ranks)
// elements (training.py:2179-2194, 2497-2502); parameters are taken in
// reverse (backward) order and a bucket closes once it holds at least that
// many (param_and_grad_buffer.py:980-992), so every bucket but the last is
// about that size and the last holds the embedding with what was left of
// the layers, half a bucket on average. Without overlap the whole buffer is
// one bucket (training.py:2193). A job's stated bucket
// (TrainingSpec::ddp_bucket_elements, --ddp-bucket-size) replaces the rule.
// Frameworks that state no buckets reduce in one call (`closing` = 0): the
// whole reduction may hide.
CostModel::DdpBuckets CostModel::Buckets(const ParallelConfig& c, double psi, double closing,
                                         int nd) const {
  const FrameworkCosts& fc = fw_.costs;
  if (!(fc.ddp_bucket_min_elements > 0) || !c.overlap_grad_reduce || c.zero != 0) {
    return {1.0, psi, 0.0};
  }
  const double size = DdpBucketElements(fc, training_.ddp_bucket_elements, nd);
  const double last = std::min(psi, closing + 0.5 * size);
  const double body = psi - last;
  return {body > 0 ? std::ceil(body / size) : 0.0, body, last};
}

}  // namespace paratune::planner
