#include "executor/run/network_confirm.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/median.h"
#include "executor/run/owned_buffers.h"
#include "planner/network_cost.h"
#include "topology/gpu.h"

namespace paratune::executor {

using backend::Backend;
using backend::Buffer;
using backend::ConvArgs;
using backend::ConvPass;
using backend::GemmArgs;
using backend::GemmPrecision;
using backend::StreamId;
using planner::LayerOp;
using planner::NetLayer;
using planner::PricedLayer;

namespace {

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;
// The largest patch workspace or attention score tile one call uses: the
// samples run in chunks that fit (convolutions), heads in bundles (attention).
constexpr int64_t kWorkspaceBytes = int64_t{256} << 20;
constexpr int64_t kScoreTileBytes = int64_t{64} << 20;

GemmPrecision GemmOf(topology::Precision p) {
  switch (p) {
    case topology::Precision::kFp32: return GemmPrecision::kFp32;
    case topology::Precision::kTf32: return GemmPrecision::kTf32;
    case topology::Precision::kFp16: return GemmPrecision::kFp16;
    default: return GemmPrecision::kBf16;
  }
}

using Kernel = std::function<Status()>;

// One layer's kernels, forward and backward, with their buffers.
struct LayerKernels {
  std::vector<Kernel> forward, backward;
};

class KernelBuilder {
 public:
  KernelBuilder(Backend& b, OwnedBuffers& s, GemmPrecision p, const planner::NetworkTraining& t, int64_t micro,
                StreamId stream)
      : b_(b), s_(s), precision_(p), training_(t), micro_(micro), stream_(stream) {}

  // The layer's kernels; a recomputed layer runs its forward's again ahead
  // of its backward's.
  Result<LayerKernels> Build(const PricedLayer& pl) {
    PT_ASSIGN_OR_RETURN(LayerKernels k, Passes(pl));
    if (pl.recomputed) k.backward.insert(k.backward.begin(), k.forward.begin(), k.forward.end());
    return k;
  }

 private:
  Result<LayerKernels> Passes(const PricedLayer& pl) {
    const NetLayer& l = pl.layer;
    switch (l.op) {
      case LayerOp::kConv: return Conv(pl);
      case LayerOp::kLinear: return Linear(l);
      case LayerOp::kAttention: return Attention(l);
      case LayerOp::kNorm: return training_.fused_norm ? Stream(pl, 0, 3) : Stream(pl, 3, 5);
      case LayerOp::kElementwise: return Stream(pl, l.tensors + 1, l.tensors + 1);
      case LayerOp::kResample: return Stream(pl, 1, 1);
    }
    return Status::Internal("unknown layer op");
  }

  int64_t ElemBytes() const { return backend::GemmInputBytes(precision_); }
  bool Backward(const NetLayer& l) const { return !l.frozen; }

  // The layer as ConvArgs: a transposed convolution is the data-gradient
  // geometry of the convolution it inverts (its forward is that one's dgrad).
  ConvArgs ConvOf(const PricedLayer& pl) const {
    const NetLayer& l = pl.layer;
    ConvArgs a;
    a.dims = l.dims;
    a.n = micro_;
    a.kernel = l.kernel;
    a.groups = l.groups;
    a.precision = precision_;
    a.stream = stream_;
    a.extent = l.extent;
    a.extent[0] = std::max<int64_t>(1, std::llround(static_cast<double>(l.extent[0]) * pl.share));
    a.stride = l.stride;
    if (l.transposed) {
      // Its output (the input × stride) is the inverted convolution's input.
      a.c = l.out_channels, a.k = l.in_channels;
      for (int d = 0; d < l.dims; ++d) a.extent[static_cast<size_t>(d)] *= l.stride;
    } else {
      a.c = l.in_channels, a.k = l.out_channels;
    }
    return a;
  }

  Result<LayerKernels> Conv(const PricedLayer& pl) {
    ConvArgs a = ConvOf(pl);
    const int64_t e = ElemBytes(), per_sample = backend::ConvPatchBytesPerSample(a);
    PT_ASSIGN_OR_RETURN(a.x, s_.Get(backend::ConvInputElems(a) * e));
    PT_ASSIGN_OR_RETURN(a.w, s_.Get(backend::ConvFilterElems(a) * e));
    PT_ASSIGN_OR_RETURN(a.y, s_.Get(backend::ConvOutputElems(a) * e));
    PT_ASSIGN_OR_RETURN(a.workspace,
                        s_.Get(per_sample * std::clamp<int64_t>(kWorkspaceBytes / per_sample, 1, a.n)));
    const NetLayer& l = pl.layer;
    const ConvPass fwd = l.transposed ? ConvPass::kDataGrad : ConvPass::kForward;
    const ConvPass dgrad = l.transposed ? ConvPass::kForward : ConvPass::kDataGrad;
    auto pass = [this, a](ConvPass p) {
      ConvArgs x = a;
      x.pass = p;
      return Kernel([this, x] { return b_.Conv(x); });
    };
    LayerKernels k;
    k.forward.push_back(pass(fwd));
    if (Backward(l)) {
      k.backward.push_back(pass(ConvPass::kWeightGrad));
      if (l.input_grad) k.backward.push_back(pass(dgrad));
    }
    return k;
  }

  // A GEMM C(m×n) = Aᵀ·B on buffers large enough for every shape of the layer.
  Kernel Gemm(int64_t m, int64_t n, int64_t k, const Buffer& a, const Buffer& bb, const Buffer& c) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.precision = precision_, g.a = a, g.b = bb, g.c = c, g.stream = stream_;
    return [this, g] { return b_.Gemm(g); };
  }

  Result<std::array<Buffer, 3>> GemmBuffers(int64_t elems) {
    std::array<Buffer, 3> out;
    for (Buffer& x : out) {
      PT_ASSIGN_OR_RETURN(x, s_.Get(elems * 4));
    }
    return out;
  }

  // Forward, weight gradient and data gradient (nn.Linear's three GEMMs).
  Result<LayerKernels> Linear(const NetLayer& l) {
    const int64_t rows = micro_ * l.tokens, in = l.in_channels, out = l.out_channels;
    PT_ASSIGN_OR_RETURN(auto buf, GemmBuffers(std::max({in * out, rows * in, rows * out})));
    LayerKernels k;
    k.forward.push_back(Gemm(out, rows, in, buf[0], buf[1], buf[2]));
    if (Backward(l)) {
      k.backward.push_back(Gemm(in, out, rows, buf[0], buf[1], buf[2]));
      if (l.input_grad) k.backward.push_back(Gemm(in, rows, out, buf[0], buf[1], buf[2]));
    }
    return k;
  }

  // Fused attention as the GEMMs of the same FLOPs (FlashAttention-2's
  // count: the forward's QKᵀ and PV per head, the backward's five), heads and
  // samples bundled into calls whose score tile stays under kScoreTileBytes.
  Result<LayerKernels> Attention(const NetLayer& l) {
    const int64_t t = l.tokens, kv = l.kv_tokens, hd = l.head_dim, heads = micro_ * l.heads;
    const int64_t bundle = std::clamp<int64_t>(kScoreTileBytes / std::max<int64_t>(1, t * kv * 4), 1, heads);
    const int64_t m = t * bundle;
    PT_ASSIGN_OR_RETURN(auto buf, GemmBuffers(std::max({m * kv, m * hd, kv * hd})));
    LayerKernels k;
    auto add = [&](std::vector<Kernel>* to, int64_t rows, int qk, int pv) {
      for (int i = 0; i < qk; ++i) to->push_back(Gemm(rows, kv, hd, buf[0], buf[1], buf[2]));
      for (int i = 0; i < pv; ++i) to->push_back(Gemm(rows, hd, kv, buf[0], buf[1], buf[2]));
    };
    const bool bwd = Backward(l) && l.input_grad;
    for (int64_t done = 0; done < heads; done += bundle) {
      const int64_t rows = t * std::min(bundle, heads - done);
      add(&k.forward, rows, 1, 1);
      if (bwd) add(&k.backward, rows, 3, 2);
    }
    return k;
  }

  // A memory-bound layer as device copies moving the bytes the model streams
  // (a copy reads and writes: half the passes' bytes each).
  Result<LayerKernels> Stream(const PricedLayer& pl, double fwd_passes, double bwd_passes) {
    const NetLayer& l = pl.layer;
    const double elems = static_cast<double>(micro_) * pl.share * std::max(l.InElems(), l.OutElems());
    const double act = topology::TrainsInFp32(training_.precision) ? 4.0 : 2.0;
    const auto bytes = [&](double passes) { return static_cast<int64_t>(std::llround(passes * elems * act / 2)); };
    const int64_t most = std::max(bytes(fwd_passes), bytes(bwd_passes));
    PT_ASSIGN_OR_RETURN(Buffer src, s_.Get(most));
    PT_ASSIGN_OR_RETURN(Buffer dst, s_.Get(most));
    auto copy = [this, src, dst](int64_t n) { return Kernel([=, this] { return b_.Copy(dst, src, n, stream_); }); };
    LayerKernels k;
    if (bytes(fwd_passes) > 0) k.forward.push_back(copy(bytes(fwd_passes)));
    if (Backward(l) && l.input_grad && bytes(bwd_passes) > 0) k.backward.push_back(copy(bytes(bwd_passes)));
    return k;
  }

  Backend& b_;
  OwnedBuffers& s_;
  GemmPrecision precision_;
  const planner::NetworkTraining& training_;
  int64_t micro_;
  StreamId stream_;
};

struct Timed {
  double forward_s = 0, backward_s = 0;
};

// Warm-up, then the median of `samples` runs of the forward and of the
// backward, each between two events on `stream`.
Result<Timed> TimeLayer(Backend& b, StreamId stream, const LayerKernels& k, int warmup, int samples) {
  PT_ASSIGN_OR_RETURN(backend::EventId e0, b.CreateEvent());
  PT_ASSIGN_OR_RETURN(backend::EventId e1, b.CreateEvent());
  PT_ASSIGN_OR_RETURN(backend::EventId e2, b.CreateEvent());
  std::vector<double> fwd, bwd;
  for (int i = 0; i < warmup + samples; ++i) {
    PT_RETURN_IF_ERROR(b.RecordEvent(e0, stream));
    for (const Kernel& f : k.forward) PT_RETURN_IF_ERROR(f());
    PT_RETURN_IF_ERROR(b.RecordEvent(e1, stream));
    for (const Kernel& f : k.backward) PT_RETURN_IF_ERROR(f());
    PT_RETURN_IF_ERROR(b.RecordEvent(e2, stream));
    PT_RETURN_IF_ERROR(b.Synchronize(stream));
    if (i < warmup) continue;
    PT_ASSIGN_OR_RETURN(double f, b.ElapsedSeconds(e0, e1));
    PT_ASSIGN_OR_RETURN(double w, b.ElapsedSeconds(e1, e2));
    fwd.push_back(f);
    bwd.push_back(w);
  }
  return Timed{Median(fwd), Median(bwd)};
}

// Layers of one shape: measured once, counted for every member.
struct ShapeGroup {
  std::vector<size_t> members;  // indices into the priced layers
  double predicted_s = 0;       // forward + backward, times repeat, over the members
};

// What makes two layers run the same kernels.
std::string ShapeKey(const PricedLayer& p) {
  const NetLayer& l = p.layer;
  std::string k = std::to_string(static_cast<int>(l.op));
  for (double v : {double(l.dims), double(l.extent[0]), double(l.extent[1]), double(l.extent[2]),
                   double(l.in_channels), double(l.out_channels), double(l.kernel), double(l.stride),
                   double(l.upsample), double(l.groups), double(l.transposed), double(l.tokens),
                   double(l.kv_tokens), double(l.heads), double(l.head_dim), l.tensors, double(l.input_grad),
                   double(l.frozen), p.share, double(p.recomputed)}) {
    k += "|" + std::to_string(v);
  }
  return k;
}

// The distinct shapes worth measuring: the slowest predicted (forward +
// backward, times repeat, over every layer of that shape) first, at most `n`.
std::vector<ShapeGroup> ShapesToMeasure(const std::vector<PricedLayer>& layers, int n) {
  std::map<std::string, size_t> index;
  std::vector<ShapeGroup> groups;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto [it, fresh] = index.emplace(ShapeKey(layers[i]), groups.size());
    if (fresh) groups.emplace_back();
    ShapeGroup& g = groups[it->second];
    g.members.push_back(i);
    g.predicted_s += static_cast<double>(layers[i].layer.repeat) * (layers[i].forward_s + layers[i].backward_s);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const ShapeGroup& a, const ShapeGroup& b) { return a.predicted_s > b.predicted_s; });
  if (groups.size() > static_cast<size_t>(n)) groups.resize(static_cast<size_t>(n));
  return groups;
}

// What every rank agrees on after a phase: the first reason any rank gave.
Result<std::string> AgreeOnFailure(Backend& b, const std::string& mine) {
  PT_ASSIGN_OR_RETURN(std::vector<std::string> all, b.HostAllGather(mine));
  for (const std::string& r : all) {
    if (!r.empty()) return r;
  }
  return std::string();
}

// A collective measured on the processes there are, beside the model's
// figure for it on as many GPUs.
struct CommMeasure {
  int ranks = 0;          // processes the collective ran on
  double bytes = 0;       // its bytes per GPU
  double measured_s = 0;  // one call, the slowest member's median
  double modelled_s = 0;  // the model's figure for the same call on `ranks` GPUs
};

// The call `prepare` makes (allocating its buffers in the given scratch) run
// `comm_iters` times between two events per sample on the first `ranks`
// processes, on a communicator of their own; every rank agrees on the
// outcome and on the slowest member's median seconds per call.
Result<double> TimeOnFirstRanks(
    Backend& b, int ranks, const NetworkConfirmOptions& o, StreamId stream,
    const std::function<Result<Kernel>(backend::CommId, OwnedBuffers&)>& prepare) {
  const bool member = b.rank() < ranks;
  PT_ASSIGN_OR_RETURN(backend::CommId comm, b.SplitComm(backend::kWorldComm, member ? 0 : -1, b.rank()));
  auto time = [&]() -> Result<std::vector<double>> {
    OwnedBuffers s(b);
    PT_ASSIGN_OR_RETURN(Kernel once, prepare(comm, s));
    PT_ASSIGN_OR_RETURN(backend::EventId e0, b.CreateEvent());
    PT_ASSIGN_OR_RETURN(backend::EventId e1, b.CreateEvent());
    std::vector<double> per_call;
    for (int i = 0; i < o.warmup + o.samples; ++i) {
      PT_RETURN_IF_ERROR(b.RecordEvent(e0, stream));
      for (int c = 0; c < o.comm_iters; ++c) PT_RETURN_IF_ERROR(once());
      PT_RETURN_IF_ERROR(b.RecordEvent(e1, stream));
      PT_RETURN_IF_ERROR(b.Synchronize(stream));
      if (i < o.warmup) continue;
      PT_ASSIGN_OR_RETURN(double dt, b.ElapsedSeconds(e0, e1));
      per_call.push_back(dt / o.comm_iters);
    }
    return per_call;
  };
  Result<std::vector<double>> per_call = member ? time() : std::vector<double>();
  PT_ASSIGN_OR_RETURN(std::string failed, AgreeOnFailure(b, per_call.ok() ? "" : per_call.status().message()));
  if (comm != backend::kNoComm) PT_RETURN_IF_ERROR(b.DestroyComm(comm));
  if (!failed.empty()) return Status::Unavailable(failed);
  std::vector<double> v{member ? Median(*per_call) : 0.0};
  PT_RETURN_IF_ERROR(b.HostAllReduceMax(&v));
  return v[0];
}

// The weight replicas' collectives of one step on min(world, replicas)
// processes as one call (DDP: the gradients' all-reduce; ZeRO-1: their
// reduce-scatter and the updated weights' bf16 all-gather), and the model's
// figure for the same collectives on as many GPUs.
Result<CommMeasure> MeasureGradientSync(Backend& b, const planner::NetworkJob& job, const planner::NetworkLayout& l,
                                        double local_params, const NetworkConfirmOptions& o, StreamId stream) {
  CommMeasure m;
  m.ranks = std::min(b.world_size(), l.Replicas());
  m.bytes = local_params * job.training.grad_bytes;
  if (m.ranks < 2 || l.sharding == planner::WeightSharding::kFull) return m;
  const backend::DataType grad_t = job.training.grad_bytes == 4 ? backend::DataType::kFloat32
                                                                 : backend::DataType::kBFloat16;
  const int64_t count = static_cast<int64_t>(local_params) / m.ranks * m.ranks;
  const int ranks = m.ranks;
  const bool zero1 = l.sharding == planner::WeightSharding::kOptimizer;
  auto prepare = [&](backend::CommId comm, OwnedBuffers& s) -> Result<Kernel> {
    const int64_t bytes = count * backend::DataTypeBytes(grad_t);
    PT_ASSIGN_OR_RETURN(Buffer send, s.Get(bytes));
    PT_ASSIGN_OR_RETURN(Buffer recv, s.Get(bytes));
    return Kernel([&b, comm, send, recv, count, ranks, grad_t, zero1, stream]() -> Status {
      if (!zero1) return b.AllReduce(comm, send, recv, count, grad_t, backend::ReduceOp::kSum, stream);
      PT_RETURN_IF_ERROR(b.ReduceScatter(comm, send, recv, count / ranks, grad_t, backend::ReduceOp::kSum, stream));
      // The updated weights in bf16: each rank's shard from the reduce-scatter's buffer.
      return b.AllGather(comm, recv, send, count / ranks, backend::DataType::kBFloat16, stream);
    });
  };
  PT_ASSIGN_OR_RETURN(m.measured_s, TimeOnFirstRanks(b, m.ranks, o, stream, prepare));
  const double g = static_cast<double>(count * backend::DataTypeBytes(grad_t));
  m.modelled_s = zero1 ? topology::CollectiveSeconds(job.cluster, topology::Collective::kReduceScatter, 1, m.ranks, g) +
                             topology::CollectiveSeconds(job.cluster, topology::Collective::kAllGather, 1, m.ranks,
                                                         local_params * 2.0)
                       : topology::CollectiveSeconds(job.cluster, topology::Collective::kAllReduce, 1, m.ranks, g);
  return m;
}

// One Ulysses all-to-all of the plan's largest self-attention (one GPU's
// tokens / s × its tensor rank's heads, as network_cost.cc's SequenceComm
// moves them) on min(world, sequence) processes, and the model's figure for
// it on as many GPUs.
Result<CommMeasure> MeasureSequenceExchange(Backend& b, const planner::NetworkJob& job,
                                            const planner::NetworkLayout& l, const std::vector<PricedLayer>& layers,
                                            const NetworkConfirmOptions& o, StreamId stream) {
  CommMeasure m;
  if (l.sequence <= 1) return m;
  const bool fp32 = topology::TrainsInFp32(job.training.precision);
  const double elem = fp32 ? 4.0 : 2.0;
  for (const PricedLayer& p : layers) {
    if (!planner::IsSelfAttention(p.layer)) continue;
    const double elems = static_cast<double>(l.micro_batch) * p.layer.tokens * p.layer.heads * p.layer.head_dim;
    m.bytes = std::max(m.bytes, elems * elem);
  }
  m.ranks = std::min(b.world_size(), l.sequence);
  if (m.ranks < 2 || m.bytes <= 0) return m;
  const backend::DataType t = fp32 ? backend::DataType::kFloat32 : backend::DataType::kBFloat16;
  const int64_t per_peer = std::max<int64_t>(1, static_cast<int64_t>(m.bytes / elem) / m.ranks);
  m.bytes = static_cast<double>(per_peer * m.ranks) * elem;
  auto prepare = [&](backend::CommId comm, OwnedBuffers& s) -> Result<Kernel> {
    PT_ASSIGN_OR_RETURN(Buffer send, s.Get(static_cast<int64_t>(m.bytes)));
    PT_ASSIGN_OR_RETURN(Buffer recv, s.Get(static_cast<int64_t>(m.bytes)));
    return Kernel([&b, comm, send, recv, per_peer, t, stream] {
      return b.AllToAll(comm, send, recv, per_peer, t, stream);
    });
  };
  PT_ASSIGN_OR_RETURN(m.measured_s, TimeOnFirstRanks(b, m.ranks, o, stream, prepare));
  m.modelled_s = topology::CollectiveSeconds(job.cluster, topology::Collective::kAllToAll, 1, m.ranks, m.bytes);
  return m;
}

// Allocates (and writes) the predicted per-GPU memory, then frees it.
// "" when it fits, the reason when not.
Result<std::string> ProveMemory(Backend& b, double gib, bool touch) {
  const auto bytes = static_cast<int64_t>(std::llround(gib * kGiBytes));
  auto buf = b.Allocate(bytes);
  if (!buf.ok()) {
    if (backend::IsOutOfMemory(buf.status())) return buf.status().message();
    return buf.status();
  }
  Status st = touch ? b.Fill(*buf, backend::DataType::kInt8, 0) : Status::Ok();
  if (st.ok()) st = b.SynchronizeAll();
  PT_RETURN_IF_ERROR(b.Free(*buf));
  PT_RETURN_IF_ERROR(st);
  return std::string();
}

class NetworkCandidateRun {
 public:
  NetworkCandidateRun(Backend& b, const NetworkConfirmInput& in, size_t index, const NetworkConfirmOptions& o,
                      StreamId stream)
      : b_(b), in_(in), layout_(in.candidates[index]), o_(o), stream_(stream) {
    report_["rank"] = in.plan_ranks[index];
    report_["status"] = "";
    report_["reason"] = "";
  }

  Result<OrderedJson> Run() {
    const planner::NetworkJob& job = in_.job;
    auto predicted = planner::PredictNetwork(job.network, job.cluster, layout_, job.training);
    if (!predicted.ok()) return Waived(predicted.status().message());
    prediction_ = *predicted;
    report_["layout"] = planner::NetworkPredictionJson(layout_, prediction_)["layout"];
    report_["predicted"] = Terms(prediction_);
    const GemmPrecision p = GemmOf(job.training.precision);
    if (Status s = b_.CheckGemm(p); !s.ok()) return Waived(s.message());
    PT_ASSIGN_OR_RETURN(std::string oom, AgreeOnFailure(b_, Proved(ProveMemory(b_, prediction_.memory_GiB,
                                                                                 o_.touch_memory))));
    report_["memory"] = {{"predicted_GiB", prediction_.memory_GiB}, {"proved", oom.empty()}};
    if (!oom.empty()) return Outcome("oom", oom);
    PT_ASSIGN_OR_RETURN(auto layers, planner::PriceNetworkLayers(job.network, job.cluster, layout_, job.training));
    PT_ASSIGN_OR_RETURN(std::string failed, MeasureLayers(layers, p));
    if (!failed.empty()) return Outcome("failed", failed);
    auto sync = MeasureGradientSync(b_, job, layout_, LocalParams(layers), o_, stream_);
    if (!sync.ok()) return Outcome("failed", sync.status().message());
    auto exchange = MeasureSequenceExchange(b_, job, layout_, layers, o_, stream_);
    if (!exchange.ok()) return Outcome("failed", exchange.status().message());
    Compose(layers, *sync, *exchange);
    return Outcome("ok", "");
  }

 private:
  static std::string Proved(const Result<std::string>& r) { return r.ok() ? *r : r.status().message(); }

  OrderedJson Terms(const planner::NetworkPrediction& p) const {
    return {{"step_s", p.step_s},           {"forward_s", p.forward_s},
            {"backward_s", p.backward_s},   {"halo_s", p.halo_s},
            {"tensor_comm_s", p.tensor_comm_s}, {"sequence_comm_s", p.sequence_comm_s},
            {"grad_sync_s", p.grad_sync_s},
            {"grad_sync_exposed_s", p.grad_sync_exposed_s}, {"optimizer_s", p.optimizer_s}};
  }

  Result<OrderedJson> Waived(const std::string& why) { return Outcome("waived", why); }
  Result<OrderedJson> Outcome(const std::string& status, const std::string& reason) {
    report_["status"] = status;
    report_["reason"] = reason;
    return report_;
  }

  double LocalParams(const std::vector<PricedLayer>& layers) const {
    planner::Network local;
    for (const PricedLayer& p : layers) local.layers.push_back(p.layer);
    return local.Params();
  }

  // Runs the chosen layers on every rank; "" when all ran, else the reason.
  Result<std::string> MeasureLayers(const std::vector<PricedLayer>& layers, GemmPrecision p) {
    chosen_ = ShapesToMeasure(layers, o_.layers);
    std::vector<double> times(2 * chosen_.size(), 0.0);
    std::string failure;
    for (size_t j = 0; j < chosen_.size() && failure.empty(); ++j) {
      OwnedBuffers s(b_);
      KernelBuilder kb(b_, s, p, in_.job.training, layout_.micro_batch, stream_);
      const PricedLayer& first = layers[chosen_[j].members.front()];
      auto kernels = kb.Build(first);
      auto t = kernels.ok() ? TimeLayer(b_, stream_, *kernels, o_.warmup, o_.samples) : kernels.status();
      if (!t.ok()) {
        failure = "layer " + first.layer.name + ": " + t.status().message();
        continue;
      }
      times[2 * j] = t->forward_s;
      times[2 * j + 1] = t->backward_s;
    }
    PT_ASSIGN_OR_RETURN(std::string agreed, AgreeOnFailure(b_, failure));
    if (!agreed.empty()) return agreed;
    PT_RETURN_IF_ERROR(b_.HostAllReduceMax(&times));
    measured_ = std::move(times);
    return std::string();
  }

  // The step from the measured layers and sync, the rest the model's.
  void Compose(const std::vector<PricedLayer>& layers, const CommMeasure& sync, const CommMeasure& exchange) {
    double pf = 0, pb = 0, mf = 0, mb = 0, all_f = 0, all_b = 0;
    OrderedJson rows = OrderedJson::array();
    for (size_t j = 0; j < chosen_.size(); ++j) {
      const PricedLayer& l = layers[chosen_[j].members.front()];
      double n = 0;
      for (size_t i : chosen_[j].members) n += static_cast<double>(layers[i].layer.repeat);
      pf += n * l.forward_s, pb += n * l.backward_s;
      mf += n * measured_[2 * j], mb += n * measured_[2 * j + 1];
      rows.push_back({{"layer", l.layer.name.empty() ? std::string(planner::LayerOpName(l.layer.op)) : l.layer.name},
                      {"op", planner::LayerOpName(l.layer.op)},
                      {"occurrences", n},
                      {"predicted_forward_s", l.forward_s},
                      {"measured_forward_s", measured_[2 * j]},
                      {"predicted_backward_s", l.backward_s},
                      {"measured_backward_s", measured_[2 * j + 1]}});
    }
    for (const PricedLayer& l : layers) {
      all_f += l.layer.repeat * l.forward_s;
      all_b += l.layer.repeat * l.backward_s;
    }
    // Layers not measured run at the measured ones' ratio to the model.
    const double rf = pf > 0 ? mf / pf : 1.0, rb = pb > 0 ? mb / pb : 1.0;
    const double fwd = mf + rf * (all_f - pf), bwd = mb + rb * (all_b - pb);
    const planner::NetworkPrediction& p = prediction_;
    const bool whole_group = sync.ranks == layout_.Replicas() && sync.ranks > 1 && sync.measured_s > 0;
    const double exposed = whole_group && p.grad_sync_s > 0
                               ? sync.measured_s * p.grad_sync_exposed_s / p.grad_sync_s
                               : p.grad_sync_exposed_s;
    // The sequence group's all-to-alls at the measured one's ratio to the
    // model, when the processes are the whole group.
    const bool whole_sequence = exchange.ranks == layout_.sequence && exchange.ranks > 1 &&
                                exchange.measured_s > 0 && exchange.modelled_s > 0;
    const double sequence =
        whole_sequence ? p.sequence_comm_s * exchange.measured_s / exchange.modelled_s : p.sequence_comm_s;
    const double step = static_cast<double>(layout_.Accumulation()) *
                            (fwd + bwd + p.halo_s + p.tensor_comm_s + sequence) +
                        exposed + p.optimizer_s;
    report_["compute"] = {{"shapes_measured", chosen_.size()},
                          {"layers", layers.size()},
                          {"coverage", (all_f + all_b) > 0 ? (pf + pb) / (all_f + all_b) : 0.0},
                          {"forward_s", fwd},
                          {"backward_s", bwd},
                          {"measured_over_predicted", (pf + pb) > 0 ? (mf + mb) / (pf + pb) : 0.0},
                          {"by_layer", rows}};
    report_["grad_sync"] = {{"ranks", sync.ranks},
                            {"plan_ranks", layout_.Replicas()},
                            {"bytes", sync.bytes},
                            {"measured_s", sync.measured_s > 0 ? OrderedJson(sync.measured_s) : OrderedJson(nullptr)},
                            {"modelled_same_ranks_s",
                             sync.measured_s > 0 ? OrderedJson(sync.modelled_s) : OrderedJson(nullptr)},
                            {"used", whole_group ? "measured" : "model"}};
    if (layout_.sequence > 1) {
      const bool ran = exchange.measured_s > 0;
      report_["sequence_exchange"] = {{"ranks", exchange.ranks},
                                      {"plan_ranks", layout_.sequence},
                                      {"bytes", exchange.bytes},
                                      {"measured_s", ran ? OrderedJson(exchange.measured_s) : OrderedJson(nullptr)},
                                      {"modelled_same_ranks_s",
                                       ran ? OrderedJson(exchange.modelled_s) : OrderedJson(nullptr)},
                                      {"sequence_comm_s", sequence},
                                      {"used", whole_sequence ? "measured" : "model"}};
    }
    report_["measured_step_s"] = step;
    report_["measured_samples_per_s"] = static_cast<double>(layout_.global_batch) / step;
    report_["error"] = p.step_s / step - 1.0;
  }

  Backend& b_;
  const NetworkConfirmInput& in_;
  planner::NetworkLayout layout_;
  const NetworkConfirmOptions& o_;
  StreamId stream_;
  OrderedJson report_;
  planner::NetworkPrediction prediction_;
  std::vector<ShapeGroup> chosen_;
  std::vector<double> measured_;
};

OrderedJson Environment(Backend& b) {
  auto dev = b.DescribeDevice();
  OrderedJson env;
  env["backend"] = b.name();
  env["world_size"] = b.world_size();
  env["device"] = dev.ok() ? dev->name : std::string("unknown");
  OrderedJson versions = OrderedJson::object();
  for (const auto& [k, v] : b.Versions()) versions[k] = v;
  env["versions"] = versions;
  return env;
}

}  // namespace

Result<NetworkConfirmInput> NetworkConfirmInputFromPlans(const Json& plans, int top_k) {
  if (top_k < 1) return Status::InvalidArgument("--top must be at least 1");
  NetworkConfirmInput in;
  PT_ASSIGN_OR_RETURN(in.job, planner::NetworkJobOfPlan(plans, 1));
  // Fewer plans than top_k is not an error.
  const int listed = static_cast<int>(plans["plans"].size());
  for (int rank = 1; rank <= std::min(top_k, listed); ++rank) {
    PT_ASSIGN_OR_RETURN(planner::NetworkLayout l, planner::NetworkLayoutOfPlan(in.job, plans, rank));
    in.candidates.push_back(l);
    in.plan_ranks.push_back(rank);
  }
  return in;
}

Status MeasureNetworkOnDevice(NetworkConfirmInput* in, const std::string& gpu_preset) {
  if (gpu_preset.empty() || gpu_preset == in->job.cluster.gpu.name) return Status::Ok();
  PT_ASSIGN_OR_RETURN(topology::GpuSpec gpu, topology::GpuPreset(gpu_preset));
  in->job.cluster.gpu = gpu;
  in->measured_gpu = gpu_preset;
  return Status::Ok();
}

Result<OrderedJson> ConfirmNetworkCandidates(Backend& b, const NetworkConfirmInput& in,
                                             const NetworkConfirmOptions& o,
                                             const std::function<void(const std::string&)>& progress) {
  OrderedJson report;
  report["schema"] = kNetworkRunReportSchema;
  report["tool"] = o.tool;
  report["argv"] = o.argv;
  report["environment"] = Environment(b);
  report["job"] = planner::NetworkJobJson(in.job);
  report["measured_gpu"] = in.measured_gpu.empty() ? OrderedJson(nullptr) : OrderedJson(in.measured_gpu);
  report["how"] =
      "each candidate's slowest predicted layers run on this backend at the micro-batch and shard one GPU holds "
      "(convolutions lowered to GEMMs, attention as its FLOP-equivalent GEMMs, memory-bound layers as copies of "
      "their bytes); other layers scaled by the measured layers' ratio to the model; halo and tensor-parallel "
      "traffic the model's; the gradient sync measured when the processes are the plan's data-parallel group";
  report["candidates"] = OrderedJson::array();
  PT_ASSIGN_OR_RETURN(StreamId stream, b.CreateStream());
  for (size_t i = 0; i < in.candidates.size(); ++i) {
    if (progress && b.rank() == 0) {
      progress("network candidate " + std::to_string(in.plan_ranks[i]) + " of " +
               std::to_string(in.candidates.size()));
    }
    NetworkCandidateRun run(b, in, i, o, stream);
    PT_ASSIGN_OR_RETURN(OrderedJson c, run.Run());
    report["candidates"].push_back(std::move(c));
  }
  return report;
}

}  // namespace paratune::executor
