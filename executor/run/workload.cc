// The workload builder. Shapes and byte counts are the cost model's
// (planner/cost/, docs/model.md): where a comment names a term, that is the
// term the op measures. docs/executor.md lists the ops per config. The rank
// geometry (groups, representatives) is groups.cc.
// Over 800 lines because one class, Builder, walks a rank's iteration in the
// order the framework runs it (pipeline hand-off, embedding, each layer
// forward, logits and loss, each layer backward with its recompute, the
// optimizer step), and every step shares the layers' overlap windows and
// prefetch state.
#include "executor/run/workload.h"

#include <algorithm>
#include <cmath>

#include "planner/cost_model.h"
#include "planner/moe.h"

namespace paratune::executor {
namespace {

using backend::DataType;
using backend::OpKind;
using planner::Dim;
using planner::ParallelConfig;

// Causal attention: fused kernels skip the masked half of the score matrix
// (the cost model's kCausalFraction).
constexpr int64_t kCausalDivisor = 2;
// Adam with fp32 master weights: master, exp_avg, exp_avg_sq read + written and
// the fp32 gradient read, per parameter it updates (the cost model's kAdamStateBytesRW).
constexpr double kAdamStateBytesRW = 24.0 + 4.0;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t Whole(double x) { return std::max<int64_t>(1, std::llround(x)); }

// An op's identity: what it is, where its time is counted, how often it runs,
// and its name.
WorkOp NewOp(OpType type, Category category, Scope scope, Phase phase, int layer,
             const std::string& name) {
  WorkOp op;
  op.type = type;
  op.category = category;
  op.scope = scope;
  op.phase = phase;
  op.layer = layer;
  op.name = name;
  return op;
}

// The layer's four linears (cost-model.md §3): k inputs, n outputs; odd ones are
// AxoNN's transposed layers (inputs over Y, outputs over X).
enum Linear { kQkv = 0, kProj, kFc1, kFc2 };
constexpr const char* kLinearName[4] = {"qkv", "proj", "fc1", "fc2"};

class Builder {
 public:
  Builder(const planner::Job& job, const ParallelConfig& c, const WorkloadOptions& o,
          const planner::CostModel::ComputeTerms& terms, Workload* w)
      : job_(job), m_(job.model), c_(c), o_(o), w_(*w) {
    const planner::TrainingSpec& t = job.training;
    w_.precision = PrecisionsOf(t);
    e_ = backend::DataTypeBytes(w_.precision.activation);
    pb_ = backend::DataTypeBytes(w_.precision.param);
    gb_ = backend::DataTypeBytes(w_.precision.grad);
    s_ = t.seq_len;
    ulysses_ = c.cp > 1 && c.cp_kind != planner::CpKind::kRing;
    ring_ = c.cp > 1 && !ulysses_;
    tokens_ = int64_t{c.mbs} * s_ / c.cp;
    const int64_t h = m_.hidden, f = m_.ffn_hidden, g = m_.gated_ffn ? 2 : 1;
    kn_[kQkv][0] = h, kn_[kQkv][1] = m_.qkv_out();
    kn_[kProj][0] = h, kn_[kProj][1] = h;
    kn_[kFc1][0] = h, kn_[kFc1][1] = f * g;
    kn_[kFc2][0] = f, kn_[kFc2][1] = h;
    psi_ = terms.psi;
    expert_psi_ = terms.expert_psi;
    nd_ = c.gdata * c.cp;
    const double norm_params = 2.0 * static_cast<double>(m_.NormParams());
    layer_shard_ =
        ((static_cast<double>(m_.ParamsPerLayer()) - norm_params) / c.tensor() + norm_params) /
        c.gz;
    // Element-wise traffic per layer forward (the cost model's elem_fwd): two
    // norms and two bias-dropout-residual adds over the tokens this rank holds
    // (split over Y with sp, h over X), and the activation function over FC1's
    // output; the backward moves twice as much.
    const double T = static_cast<double>(tokens_), scale = e_ / 2.0;
    const double tok_rep = c.sp ? T / c.gy : T;
    norm_res_ = tok_rep * (static_cast<double>(h) / c.gx) *
                (8.0 + 2.0 * (6.0 + (m_.dropout ? 1.0 : 0.0))) * scale;
    act_fn_ = T * (static_cast<double>(f) / c.gy) * (m_.gated_ffn ? 6.0 : 4.0) * scale;
    // The training framework's element-wise and loss traffic (its preset: an
    // eager stack moves more bytes than Transformer Engine's fused kernels).
    const planner::FrameworkSpec& fw = planner::FrameworkPreset(job.training.framework);
    rc_modules_ = planner::SelectiveModules(c, fw.support);
    const bool compiled = job.training.compile && fw.support.compile;
    const double elem =
        compiled ? fw.costs.elementwise_traffic_compiled : fw.costs.elementwise_traffic;
    norm_res_ *= elem;
    act_fn_ *= elem;
    elem_ = elem;
    // Mixture of experts: the cost model's layer shape (MoeCompute: under
    // sequence parallelism each tensor rank routes its shard of the tokens).
    if (m_.is_moe()) {
      moe_tokens_ = c.sp ? T / c.gy : T;
      moe_ = planner::MoeShape(m_, moe_tokens_, c.ep, c.etp, std::max(1.0, t.moe_skew));
    }
    loss_bytes_ = compiled ? fw.costs.loss_bytes_per_logit_compiled : fw.costs.loss_bytes_per_logit;
    // ... and in as many kernels as the stack launches (docs/executor.md §1,
    // "Frameworks"): of a layer's kernels_per_layer (forward + backward) a
    // third run in the forward, four of them the linears' GEMMs and one the
    // attention kernel; the rest are its memory-bound kernels, shared by the
    // norm/residual and activation sections by bytes (the backward launches
    // twice as many, moving twice the bytes).
    const double kpl = compiled ? fw.costs.kernels_per_layer_compiled : fw.costs.kernels_per_layer;
    const double ew = std::clamp(std::round(kpl / 3.0) - 5.0, 3.0, 40.0);
    const double total = norm_res_ + act_fn_;
    const double norm_share = total > 0 ? norm_res_ / total : 0.5;
    norm_kernels_ = std::max(1, static_cast<int>(std::lround(ew * norm_share / 2.0)));
    act_kernels_ = std::max(1, static_cast<int>(std::lround(ew * (1.0 - norm_share))));
    LossPasses();
  }

  // The loss as the stack runs it, in its precision: the preset's
  // loss_bytes_per_logit B split into the passes over the T × V/tp logits
  // that move them (docs/executor.md, "Frameworks"; a = activation bytes).
  // B ≥ 2(a + 4) (Megatron's vocab-parallel cross entropy, 12; Hugging Face /
  // torchtitan eager, 30): the stack materializes fp32 logits. The forward
  // upcasts them (reads a, writes 4 per logit: `logits.float()`), the backward
  // casts the gradient back for the logits GEMM (reads 4, writes a), and the
  // rest R = B − 2(a + 4) is fp32 passes each reading and writing a logits
  // tensor (8 bytes), floor(R / 8) of them (log-softmax forward, its gradient
  // backward). Otherwise the logits stay in the activation type with fp32
  // math in registers (flash-attn's fused cross entropy, torch.compile): a
  // forward reduction reads them once (a: the log-sum-exp), the backward reads
  // them again and writes the gradient (the rest, B − a).
  void LossPasses() {
    const double a = static_cast<double>(e_), B = loss_bytes_;
    loss_passes_.clear();
    if (a < 4.0 && B >= 2.0 * (a + 4.0)) {
      const double rest = B - 2.0 * (a + 4.0);
      const int n = static_cast<int>(std::floor(rest / 8.0 + 1e-9));
      // A remainder too small for an fp32 pass of its own rides on the casts.
      const double cast = (a + 4.0) + (n == 0 ? rest / 2.0 : 0.0);
      loss_passes_.push_back({"upcast", Phase::kForward, cast, DataType::kFloat32});
      for (int i = 0; i < n; ++i) {
        const bool fwd = i < (n + 1) / 2;
        loss_passes_.push_back({fwd ? "log_softmax" : "log_softmax_grad",
                                fwd ? Phase::kForward : Phase::kBackward, rest / n,
                                DataType::kFloat32});
      }
      loss_passes_.push_back({"downcast", Phase::kBackward, cast, DataType::kFloat32});
    } else if (B > a) {
      loss_passes_.push_back({"logsumexp", Phase::kForward, a, w_.precision.activation});
      loss_passes_.push_back({"gradient", Phase::kBackward, B - a, w_.precision.activation});
    } else {
      loss_passes_.push_back({"fused", Phase::kForward, B, w_.precision.activation});
    }
  }

  void SetZCachedLayers(int n) { z_cached_layers_ = n; }
  // The slice's last n layers carry the MoE MLP (n = the stage's MoE share of
  // the slice: dense-first models put their dense layers at the front).
  void SetMoeLayers(int n) { moe_slice_layers_ = n; }
  bool MoeLayer(int l) const { return l >= w_.slice_layers - moe_slice_layers_; }
  bool ZCached(int layer) const { return layer < z_cached_layers_; }

  void Build() {
    const int S = w_.slice_layers;
    windows_.resize(static_cast<size_t>(S));
    z_fwd_.assign(static_cast<size_t>(S), {-1, -1, -1, -1});
    z_bwd_.assign(static_cast<size_t>(S), {});
    data_fwd_.assign(static_cast<size_t>(S), -1);
    data_bwd_.assign(static_cast<size_t>(S), {});
    // Every layer's windows exist before any op: prefetches name the next layer's.
    for (int l = 0; l < S; ++l) OpenLayerWindows(l);
    const bool first = w_.stage == 0, last = w_.stage == w_.stages - 1;

    if (c_.pp > 1) PipelineHandOff(Phase::kForward);
    if (first) {
      // Embedding lookup and its gradient scatter (memory-bound; the cost
      // model's `embed`: 3·T·(h/gx)·e bytes).
      AddMemory("stage.embedding", Scope::kStage, Phase::kForward, -1,
                3 * tokens_ * (m_.hidden / c_.gx) * e_);
    }
    for (int l = 0; l < S; ++l) Forward(l, Phase::kForward);
    if (last) Logits();
    for (int l = S - 1; l >= 0; --l) Backward(l);
    if (c_.pp > 1) PipelineHandOff(Phase::kBackward);
    Step();
  }

 private:
  struct LayerWindows {
    int fwd_z = -1, fwd_data = -1, fwd_tp = -1;
    int bwd_z_ag = -1, bwd_z_rs = -1, bwd_data_ag = -1, bwd_data_rs = -1;
  };

  // ---- Ops ---------------------------------------------------------------------

  int Push(WorkOp op) {
    if (op.stream == StreamRole::kCompute) {
      op.after.insert(op.after.end(), pending_.begin(), pending_.end());
      pending_.clear();
      last_compute_ = static_cast<int>(w_.ops.size());
    }
    w_.ops.push_back(std::move(op));
    const int idx = static_cast<int>(w_.ops.size()) - 1;
    if (w_.ops.back().type != OpType::kCollective) {
      for (int win : open_windows_) w_.windows[static_cast<size_t>(win)].compute_ops.push_back(idx);
    }
    return idx;
  }

  int AddGemm(const std::string& name, Scope scope, Phase phase, int layer, int64_t m, int64_t n,
              int64_t k, int calls = 1) {
    WorkOp op = NewOp(OpType::kGemm, Category::kCompute, scope, phase, layer, name);
    op.m = std::max<int64_t>(1, m);
    op.n = std::max<int64_t>(1, n);
    op.k = std::max<int64_t>(1, k);
    op.calls = calls;
    op.precision = w_.precision.gemm;
    return Push(std::move(op));
  }

  // A memory-bound kernel moving `traffic` bytes (read + written), issued as
  // device copies of at most max_call_bytes each (a copy of N bytes moves 2N).
  // `kernels`: the stack runs this traffic as that many separate kernels
  // (each its own call), at least.
  int AddMemory(const std::string& name, Scope scope, Phase phase, int layer, int64_t traffic,
                Category category = Category::kCompute, int kernels = 1) {
    WorkOp op = NewOp(OpType::kMemoryBound, category, scope, phase, layer, name);
    op.dtype = w_.precision.activation;
    traffic = std::max<int64_t>(2, traffic);
    op.calls = std::max<int>(std::max(1, kernels),
                             static_cast<int>(CeilDiv(traffic, 2 * o_.max_call_bytes)));
    op.calls = static_cast<int>(std::min<int64_t>(op.calls, traffic / 2));
    op.traffic_bytes = CeilDiv(CeilDiv(traffic, op.calls), 2) * 2;
    return Push(std::move(op));
  }

  int GroupSize(GroupKind g) const {
    switch (g) {
      case GroupKind::kX:
        return c_.gx;
      case GroupKind::kY:
        return c_.gy;
      case GroupKind::kZ:
        return c_.gz;
      case GroupKind::kCp:
        return c_.cp;
      case GroupKind::kPp:
        return c_.pp;
      case GroupKind::kData:
        return nd_;
      case GroupKind::kDataNode:
      case GroupKind::kExpertData: {
        const Group* grp = w_.FindGroup(g);
        return grp ? static_cast<int>(grp->ranks.size()) : 1;
      }
    }
    return 1;
  }

  // A collective of `bytes` (nccl-tests size) on `group`; split into calls of
  // at most max_call_bytes, each a whole number of elements per rank. Returns
  // the op index, or -1 when the group has one member (nothing to move).
  int AddCollective(const std::string& name, Category cat, Scope scope, Phase phase, int layer,
                    OpKind kind, GroupKind group, double bytes, DataType dtype,
                    StreamRole stream = StreamRole::kCompute, int window = -1,
                    Peers peers = Peers::kNone) {
    const int p = GroupSize(group);
    if (p < 2) return -1;
    WorkOp op = NewOp(OpType::kCollective, cat, scope, phase, layer, name);
    op.collective = kind;
    op.group = group;
    op.dtype = dtype;
    op.peers = peers;
    op.stream = stream;
    op.window = window;
    const int64_t esize = backend::DataTypeBytes(dtype);
    const int64_t total = Whole(bytes);
    op.calls = static_cast<int>(CeilDiv(total, o_.max_call_bytes));
    int64_t elems = CeilDiv(CeilDiv(total, op.calls), esize);
    const bool blocked =
        kind == OpKind::kAllGather || kind == OpKind::kReduceScatter || kind == OpKind::kAllToAll;
    if (blocked) elems = CeilDiv(elems, p) * p;
    op.bytes = elems * esize;
    if (stream != StreamRole::kCompute && last_compute_ >= 0) op.after.push_back(last_compute_);
    return Push(std::move(op));
  }

  // ---- Windows -------------------------------------------------------------------

  int NewWindow(const std::string& name) {
    w_.windows.push_back(OverlapWindow{name, {}});
    return static_cast<int>(w_.windows.size()) - 1;
  }
  void AddToWindow(int win, int op) {
    if (win >= 0 && op >= 0) w_.windows[static_cast<size_t>(win)].compute_ops.push_back(op);
  }

  // ---- Layers -------------------------------------------------------------------

  int64_t KLocal(int i) const { return kn_[i][0] / ((i % 2) ? c_.gy : c_.gx); }
  int64_t NLocal(int i) const { return kn_[i][1] / ((i % 2) ? c_.gx : c_.gy); }
  // Weight block of linear i before Z sharding, bytes (the Z all-gather buffer).
  double WeightBlockBytes(int i) const {
    return static_cast<double>(kn_[i][0]) * static_cast<double>(kn_[i][1]) / c_.tensor() * pb_;
  }
  std::string L(int l, const char* phase, const std::string& what) const {
    return "L" + std::to_string(l) + "." + phase + "." + what;
  }

  // The Z all-gathers of layer l for `phase` (one per linear), on the depth
  // stream when OAG prefetches them, into `out`.
  void IssueZGathers(int l, Phase phase, std::array<int, 4>* out) {
    const bool fwd = phase == Phase::kForward;
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    for (int i = 0; i < 4; ++i) {
      (*out)[static_cast<size_t>(i)] = AddCollective(
          L(l, PhaseName(phase), std::string(kLinearName[i]) + ".z_all_gather"), Category::kCommZ,
          Scope::kLayer, phase, l, OpKind::kAllGather, GroupKind::kZ, WeightBlockBytes(i),
          w_.precision.param, StreamRole::kDepthComm, fwd ? lw.fwd_z : lw.bwd_z_ag);
    }
  }

  // ZeRO-3 over the data group: the layer's parameter shard gathered before
  // use, forward (qwZ: int8, half the bytes) and again for the recompute and
  // the backward (hpZ: from the secondary copy inside the node; nothing to
  // gather when the node holds one replica). -1 when nothing is gathered.
  int IssueDataGather(int l, Phase phase, StreamRole stream) {
    if (!(c_.zero == 3 && nd_ > 1)) return -1;
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    const double bytes = layer_shard_ * pb_;
    if (phase == Phase::kForward) {
      return AddCollective(L(l, "fwd", "zero3_all_gather"), Category::kCommData, Scope::kLayer,
                           phase, l, OpKind::kAllGather, GroupKind::kData,
                           c_.qwz ? 0.5 * bytes : bytes,
                           c_.qwz ? DataType::kInt8 : w_.precision.param, stream, lw.fwd_data);
    }
    GroupKind group = GroupKind::kData;
    if (c_.hpz) {
      const int local = NodeMembers();
      if (local <= 1) return -1;
      if (local < nd_) group = GroupKind::kDataNode;
    }
    return AddCollective(L(l, PhaseName(phase), "zero3_all_gather"), Category::kCommData,
                         Scope::kLayer, phase, l, OpKind::kAllGather, group, bytes,
                         w_.precision.param, stream, lw.bwd_data_ag);
  }

  // Members of this rank's data group on its node.
  int NodeMembers() const {
    const int gpn = std::max(1, job_.cluster.gpus_per_node);
    const std::vector<int> data = GroupRanks(c_, GroupKind::kData, w_.plan_rank, gpn);
    int n = 0;
    for (int r : data) n += (r / gpn) == (w_.plan_rank / gpn);
    return n;
  }

  void OpenLayerWindows(int l) {
    LayerWindows& lw = windows_[static_cast<size_t>(l)];
    if (c_.gz > 1 && c_.oag) {
      lw.fwd_z = NewWindow(L(l, "fwd", "compute/z_all_gather"));
      lw.bwd_z_ag = NewWindow(L(l, "bwd", "compute/z_all_gather"));
    }
    if (c_.gz > 1 && c_.ors) lw.bwd_z_rs = NewWindow(L(l, "bwd", "compute/z_reduce_scatter"));
    if (c_.zero == 3 && nd_ > 1 && c_.overlap_param_gather) {
      lw.fwd_data = NewWindow(L(l, "fwd", "compute/zero3_all_gather"));
      lw.bwd_data_ag = NewWindow(L(l, "bwd", "compute/zero3_all_gather"));
    }
    if (c_.zero == 3 && nd_ > 1 && c_.overlap_grad_reduce) {
      lw.bwd_data_rs = NewWindow(L(l, "bwd", "compute/zero3_reduce_scatter"));
    }
    if (c_.tp_comm_overlap && c_.tensor() > 1) lw.fwd_tp = NewWindow(L(l, "fwd", "compute/tp"));
  }

  // A tensor-parallel forward collective: exposed on the compute stream, or on
  // the tensor stream beside the GEMMs with TP comm overlap (joined at the end
  // of the layer's forward).
  void TpForward(int l, Phase phase, const std::string& what, OpKind kind, GroupKind group,
                 double bytes) {
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    const bool overlap = c_.tp_comm_overlap && phase == Phase::kForward;
    const Category cat = group == GroupKind::kX ? Category::kCommX : Category::kCommY;
    const int op = AddCollective(L(l, PhaseName(phase), what), cat, Scope::kLayer, phase, l, kind,
                                 group, bytes, w_.precision.activation,
                                 overlap ? StreamRole::kTensorComm : StreamRole::kCompute,
                                 overlap ? lw.fwd_tp : -1);
    if (overlap && op >= 0) tp_join_.push_back(op);
  }

  // The attention core, forward, as FLOP-equivalent GEMMs over (batch × head)
  // rows: S = Q·Kᵀ and O = P·V per head, keys halved for causal fused kernels
  // (cost model: 0.5·4·b·heads·s_q·s·d FLOPs); unfused adds softmax/dropout.
  void AttentionForward(int l, Phase phase) {
    const int64_t d = m_.head_dim(), rows = AttentionRows(), s_q = QueryLen();
    const bool flash = job_.training.attention == planner::Attention::kFlash;
    const int64_t keys = flash ? std::max<int64_t>(1, s_ / kCausalDivisor) : s_;
    AddTiledGemm(L(l, PhaseName(phase), "attention.scores"), phase, l, rows * s_q, keys, d);
    AddTiledGemm(L(l, PhaseName(phase), "attention.context"), phase, l, rows * s_q, d, keys);
    if (!flash) {
      // Softmax (read + write 2 + 2 bytes per score) and dropout (2 + 2 + 1 mask).
      AddMemory(L(l, PhaseName(phase), "attention.softmax"), Scope::kLayer, phase, l,
                rows * s_q * s_ * (4 + (m_.dropout ? 5 : 0)));
    }
  }

  // Backward: fused kernels recompute S and run dV, dP, dQ, dK (5 GEMMs, 2.5×
  // the forward, FlashAttention-2 §3.1); unfused keeps S and runs 4.
  void AttentionBackward(int l) {
    const int64_t d = m_.head_dim(), rows = AttentionRows(), s_q = QueryLen();
    const bool flash = job_.training.attention == planner::Attention::kFlash;
    const int64_t keys = flash ? std::max<int64_t>(1, s_ / kCausalDivisor) : s_;
    if (flash)
      AddTiledGemm(L(l, "bwd", "attention.scores"), Phase::kBackward, l, rows * s_q, keys, d);
    AddTiledGemm(L(l, "bwd", "attention.dv"), Phase::kBackward, l, rows * keys, d, s_q);
    AddTiledGemm(L(l, "bwd", "attention.dp"), Phase::kBackward, l, rows * s_q, keys, d);
    AddTiledGemm(L(l, "bwd", "attention.dq"), Phase::kBackward, l, rows * s_q, d, keys);
    AddTiledGemm(L(l, "bwd", "attention.dk"), Phase::kBackward, l, rows * keys, d, s_q);
    if (!flash) {
      AddMemory(L(l, "bwd", "attention.softmax"), Scope::kLayer, Phase::kBackward, l,
                rows * s_q * s_ * (6 + (m_.dropout ? 5 : 0)));
    }
  }

  // Transformer Engine FP8 (the cost model's fp8 cast traffic): forward, the
  // input read for its amax and cast (2 + 2 + 1 bytes per element) and the
  // weight cast (2 + 1); backward, the output gradient likewise and the input
  // and gradient transposed for wgrad (1 + 1 each).
  void Fp8Cast(int l, Phase phase, int i) {
    if (w_.precision.gemm != backend::GemmPrecision::kFp8) return;
    AddMemory(L(l, PhaseName(phase), std::string(kLinearName[i]) + ".fp8_cast"), Scope::kLayer,
              phase, l, Fp8CastBytes(phase, tokens_, KLocal(i), NLocal(i)));
  }
  // The cast bytes of one (T × k)·(k × n) linear in `phase`.
  static int64_t Fp8CastBytes(Phase phase, int64_t T, int64_t k, int64_t n) {
    return phase == Phase::kBackward ? 5 * T * n + 2 * (T * k + T * n) : 5 * T * k + 3 * k * n;
  }

  int64_t AttentionRows() const {
    return int64_t{c_.mbs} * (m_.heads / c_.gy / (ulysses_ ? c_.cp : 1));
  }
  int64_t QueryLen() const { return ulysses_ ? s_ : s_ / c_.cp; }

  // Cuts an (m×n) GEMM into calls over rows whose output tile fits
  // attention_tile_bytes (flash kernels never hold the whole score matrix).
  int AddTiledGemm(const std::string& name, Phase phase, int l, int64_t m, int64_t n, int64_t k) {
    const int64_t out = backend::GemmOutputBytes(backend::GemmPrecision::kBf16);
    const int64_t rows_per_call = std::max<int64_t>(
        1, std::min<int64_t>(m, o_.attention_tile_bytes / std::max<int64_t>(1, n * out)));
    const int64_t calls = CeilDiv(m, rows_per_call);
    const int op =
        AddGemm(name, Scope::kLayer, phase, l, CeilDiv(m, calls), n, k, static_cast<int>(calls));
    // Attention stays in bf16 in FP8 recipes (fused attention; TE keeps it out of FP8).
    KeepHighPrecision(op);
    return op;
  }

  // A GEMM FP8 recipes leave in bf16: attention's, and the output layer's
  // (Megatron-Core builds it as a plain ColumnParallelLinear, not a TE module),
  // as the cost model prices them (GemmSeconds' high_precision).
  void KeepHighPrecision(int op) {
    if (w_.precision.gemm == backend::GemmPrecision::kFp8) {
      w_.ops[static_cast<size_t>(op)].precision = backend::GemmPrecision::kBf16;
    }
  }

  // Ring attention's K/V exchange: `steps` send/recv of this rank's K and V
  // block (2·T·(h·kv/a)/gy·e bytes) to the next rank of the ring, on the
  // context stream beside the attention it feeds.
  int RingSteps(int l, Phase phase, int steps, int window) {
    if (!ring_ || steps < 1) return -1;
    const double kv_block =
        2.0 * tokens_ * (static_cast<double>(m_.kv_heads) * m_.head_dim()) / c_.gy * e_;
    const int op =
        AddCollective(L(l, PhaseName(phase), "ring_kv"), Category::kCommCp, Scope::kLayer, phase, l,
                      OpKind::kSendRecv, GroupKind::kCp, kv_block, w_.precision.activation,
                      StreamRole::kContextComm, window, Peers::kRing);
    w_.ops[static_cast<size_t>(op)].calls *= steps;
    return op;
  }

  // One layer's forward, or its full recompute (phase kRecompute: the same
  // ops again, forward collectives included, inside the backward).
  void Forward(int l, Phase phase) {
    const bool recompute = phase == Phase::kRecompute;
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    const char* ph = PhaseName(phase);
    open_windows_.clear();
    for (int win : recompute
                       ? std::vector<int>{lw.bwd_z_ag, lw.bwd_z_rs, lw.bwd_data_ag, lw.bwd_data_rs}
                       : std::vector<int>{lw.fwd_z, lw.fwd_data, lw.fwd_tp}) {
      if (win >= 0) open_windows_.push_back(win);
    }
    const int64_t h = m_.hidden;
    const double T = static_cast<double>(tokens_);

    // Weights. AxoNN Z: OAG prefetches one layer ahead on the depth stream (the
    // recompute's gathers were issued with the backward's); ZeRO-3 likewise
    // with overlap_param_gather.
    std::array<int, 4>& zf =
        recompute ? z_bwd_[static_cast<size_t>(l)].recompute : z_fwd_[static_cast<size_t>(l)];
    if (c_.gz > 1 && c_.oag && !recompute) {
      if (l == 0) IssueZGathers(0, Phase::kForward, &z_fwd_[0]);
      if (l + 1 < w_.slice_layers) {
        IssueZGathers(l + 1, Phase::kForward, &z_fwd_[static_cast<size_t>(l) + 1]);
      }
    }
    if (c_.zero == 3 && nd_ > 1) {
      int gather = -1;
      if (recompute) {
        gather = data_bwd_[static_cast<size_t>(l)].recompute;
        if (!c_.overlap_param_gather) gather = IssueDataGather(l, phase, StreamRole::kCompute);
      } else if (c_.overlap_param_gather) {
        if (l == 0) data_fwd_[0] = IssueDataGather(0, phase, StreamRole::kDataComm);
        if (l + 1 < w_.slice_layers) {
          data_fwd_[static_cast<size_t>(l) + 1] =
              IssueDataGather(l + 1, phase, StreamRole::kDataComm);
        }
        gather = data_fwd_[static_cast<size_t>(l)];
      } else {
        gather = IssueDataGather(l, phase, StreamRole::kCompute);
      }
      if (gather >= 0 && c_.overlap_param_gather) pending_.push_back(gather);
    }
    // Linear i: its Z gather (already in flight with OAG, else now, exposed), then the GEMM.
    auto gemm = [&](int i) {
      if (c_.gz > 1 && !(recompute && ZCached(l))) {
        if (c_.oag) {
          pending_.push_back(zf[static_cast<size_t>(i)]);
        } else {
          zf[static_cast<size_t>(i)] =
              AddCollective(L(l, ph, std::string(kLinearName[i]) + ".z_all_gather"),
                            Category::kCommZ, Scope::kLayer, phase, l, OpKind::kAllGather,
                            GroupKind::kZ, WeightBlockBytes(i), w_.precision.param);
        }
      }
      Fp8Cast(l, phase, i);
      return AddGemm(L(l, ph, kLinearName[i]), Scope::kLayer, phase, l, tokens_, NLocal(i),
                     KLocal(i));
    };
    // Tensor-parallel forward collectives (cost-model.md §3): without sp, the
    // normal layers' outputs all-reduced over X and the transposed layers' over
    // Y (Megatron TP: proj and FC2 over Y); with sp an all-gather of the layer
    // input before QKV/FC1 and a reduce-scatter after proj/FC2 over Y.
    const bool tp_ar = !c_.sp && c_.tensor() > 1;
    // Linear i with those collectives; `block` ("attention", "mlp") names the
    // sp ones.
    auto tp_linear = [&](int i, const std::string& block) {
      const bool transposed = (i % 2) == 1;
      if (c_.sp && !transposed) {
        TpForward(l, phase, "sp_all_gather." + block, OpKind::kAllGather, GroupKind::kY,
                  T * h * e_);
      }
      gemm(i);
      if (tp_ar) {
        TpForward(l, phase, std::string(kLinearName[i]) + ".all_reduce", OpKind::kAllReduce,
                  transposed ? GroupKind::kY : GroupKind::kX, T * NLocal(i) * e_);
      }
      if (c_.sp && transposed) {
        TpForward(l, phase, "sp_reduce_scatter." + block, OpKind::kReduceScatter, GroupKind::kY,
                  T * h * e_);
      }
    };

    AddMemory(L(l, ph, "norm_residual.attention"), Scope::kLayer, phase, l, Whole(norm_res_ / 2),
              Category::kCompute, norm_kernels_);
    tp_linear(kQkv, "attention");
    if (ulysses_) {
      AddCollective(L(l, ph, "ulysses_all_to_all.qkv"), Category::kCommCp, Scope::kLayer, phase, l,
                    OpKind::kAllToAll, GroupKind::kCp,
                    T * (static_cast<double>(m_.qkv_out()) / c_.gy) * e_, w_.precision.activation);
    }
    if (ring_) {
      const int win = NewWindow(L(l, ph, "attention"));
      const int ring = RingSteps(l, phase, c_.cp - 1, win);
      const size_t before = w_.ops.size();
      AttentionForward(l, phase);
      for (size_t i = before; i < w_.ops.size(); ++i) AddToWindow(win, static_cast<int>(i));
      pending_.push_back(ring);
    } else {
      AttentionForward(l, phase);
    }
    if (ulysses_) {
      AddCollective(L(l, ph, "ulysses_all_to_all.context"), Category::kCommCp, Scope::kLayer, phase,
                    l, OpKind::kAllToAll, GroupKind::kCp, T * (static_cast<double>(h) / c_.gy) * e_,
                    w_.precision.activation);
    }
    tp_linear(kProj, "attention");
    AddMemory(L(l, ph, "norm_residual.mlp"), Scope::kLayer, phase, l, Whole(norm_res_ / 2),
              Category::kCompute, norm_kernels_);
    if (MoeLayer(l)) {
      MoeMlp(l, phase);
    } else {
      tp_linear(kFc1, "mlp");
      AddMemory(L(l, ph, "activation"), Scope::kLayer, phase, l, Whole(act_fn_),
                Category::kCompute, act_kernels_);
      tp_linear(kFc2, "mlp");
    }
    // TP comm overlap: the next compute waits for this layer's forward collectives.
    pending_.insert(pending_.end(), tp_join_.begin(), tp_join_.end());
    tp_join_.clear();
    open_windows_.clear();
  }

  // Backward of linear i: (sp) gather the output gradient, dgrad, its
  // all-reduce (or sp reduce-scatter) — async behind wgrad with OAR — then
  // wgrad and the Z reduce-scatter of the weight gradient (ORS: deferred).
  void LinearBackward(int l, int i) {
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    const double T = static_cast<double>(tokens_);
    const int64_t h = m_.hidden;
    const std::string name = kLinearName[i];
    const bool transposed = (i % 2) == 1;
    // Sequence parallelism: the transposed layers' reduce-scatter becomes an
    // all-gather of the output gradient; the normal layers' input all-gather
    // becomes a reduce-scatter of the input gradient, and their input is
    // gathered again for wgrad (Korthikanti 2022 §4.2.2).
    if (c_.sp && transposed) {
      AddCollective(L(l, "bwd", name + ".sp_all_gather"), Category::kCommY, Scope::kLayer,
                    Phase::kBackward, l, OpKind::kAllGather, GroupKind::kY, T * h * e_,
                    w_.precision.activation);
    }
    int regather = -1;
    int regather_window = -1;
    if (c_.sp && !transposed) {
      if (c_.oar) regather_window = NewWindow(L(l, "bwd", name + ".dgrad"));
      regather = AddCollective(
          L(l, "bwd", name + ".sp_regather"), Category::kCommY, Scope::kLayer, Phase::kBackward, l,
          OpKind::kAllGather, GroupKind::kY, T * h * e_, w_.precision.activation,
          c_.oar ? StreamRole::kTensorComm : StreamRole::kCompute, regather_window);
    }
    if (c_.gz > 1 && !ZCached(l)) {
      std::array<int, 4>& zb = z_bwd_[static_cast<size_t>(l)].backward;
      if (c_.oag) {
        pending_.push_back(zb[static_cast<size_t>(i)]);
      } else {
        zb[static_cast<size_t>(i)] = AddCollective(
            L(l, "bwd", name + ".z_all_gather"), Category::kCommZ, Scope::kLayer, Phase::kBackward,
            l, OpKind::kAllGather, GroupKind::kZ, WeightBlockBytes(i), w_.precision.param);
      }
    }
    Fp8Cast(l, Phase::kBackward, i);
    const int dgrad = AddGemm(L(l, "bwd", name + ".dgrad"), Scope::kLayer, Phase::kBackward, l,
                              tokens_, KLocal(i), NLocal(i));
    AddToWindow(regather_window, dgrad);
    // The input-gradient collective: over the group that split this layer's outputs.
    int wgrad_window = -1;
    int grad_coll = -1;
    if (c_.sp && !transposed) {
      if (c_.oar) wgrad_window = NewWindow(L(l, "bwd", name + ".wgrad"));
      grad_coll =
          AddCollective(L(l, "bwd", name + ".sp_reduce_scatter"), Category::kCommY, Scope::kLayer,
                        Phase::kBackward, l, OpKind::kReduceScatter, GroupKind::kY, T * h * e_,
                        w_.precision.activation,
                        c_.oar ? StreamRole::kTensorComm : StreamRole::kCompute, wgrad_window);
    } else if (!c_.sp && c_.tensor() > 1) {
      const GroupKind g = transposed ? GroupKind::kX : GroupKind::kY;
      if (GroupSize(g) > 1 && c_.oar) wgrad_window = NewWindow(L(l, "bwd", name + ".wgrad"));
      grad_coll = AddCollective(
          L(l, "bwd", name + ".all_reduce"), transposed ? Category::kCommX : Category::kCommY,
          Scope::kLayer, Phase::kBackward, l, OpKind::kAllReduce, g, T * KLocal(i) * e_,
          w_.precision.activation, c_.oar ? StreamRole::kTensorComm : StreamRole::kCompute,
          wgrad_window);
    }
    if (regather >= 0 && c_.oar) pending_.push_back(regather);
    const int wgrad = AddGemm(L(l, "bwd", name + ".wgrad"), Scope::kLayer, Phase::kBackward, l,
                              NLocal(i), KLocal(i), tokens_);
    AddToWindow(wgrad_window, wgrad);
    // OAR: the layer waits for its input-gradient all-reduce before returning.
    if (grad_coll >= 0 && c_.oar) pending_.push_back(grad_coll);
    if (c_.gz > 1) {
      AddCollective(L(l, "bwd", name + ".z_reduce_scatter"), Category::kCommZ, Scope::kLayer,
                    Phase::kBackward, l, OpKind::kReduceScatter, GroupKind::kZ, WeightBlockBytes(i),
                    w_.precision.param, c_.ors ? StreamRole::kDepthComm : StreamRole::kCompute,
                    c_.ors ? lw.bwd_z_rs : -1);
    }
  }

  // The MoE MLP in place of the dense one, as the cost model prices it
  // (CostModel::MoeCompute, planner/cost/moe.cc): the router GEMM and its fp32
  // scores, the permutation into expert order and back, each local expert's
  // FC1 and FC2 at the most loaded rank's rows (one GEMM call per expert, as a
  // grouped GEMM issues them), their activation function, the shared experts
  // (tensor-parallel, every token) and, in FP8 recipes, the experts' casts.
  // The backward runs each GEMM's dgrad and wgrad and moves twice the
  // element-wise bytes (the model's backward = 2 × forward). The dispatch and
  // combine all-to-all are not issued here: the step adds the cost model's
  // exposed expert-parallel time (comm_ep, modelled; docs/executor.md).
  // The experts' activation function over their rows (SwiGLU reads 2f, writes f).
  double MoeActivationBytes() const {
    const double g = m_.gated_ffn ? 2.0 : 1.0;
    return elem_ * moe_.local_experts * static_cast<double>(Whole(moe_.rows_max)) *
           static_cast<double>(Whole(moe_.ffn_local)) * (g + 1.0) * static_cast<double>(e_);
  }

  void MoeMlp(int l, Phase phase) {
    const bool bwd = phase == Phase::kBackward;
    const char* ph = PhaseName(phase);
    const int64_t h = m_.hidden, g = m_.gated_ffn ? 2 : 1;
    const int64_t tokens = Whole(moe_tokens_), rows = Whole(moe_.rows_max);
    const int64_t fl = Whole(moe_.ffn_local);
    const int experts = moe_.local_experts;
    const double mult = bwd ? 2.0 : 1.0;
    const double e = static_cast<double>(e_);
    auto gemm = [&](const std::string& what, int64_t m, int64_t n, int64_t k, int calls) {
      if (!bwd) {
        AddGemm(L(l, ph, what), Scope::kLayer, phase, l, m, n, k, calls);
        return;
      }
      AddGemm(L(l, ph, what + ".dgrad"), Scope::kLayer, phase, l, m, k, n, calls);
      AddGemm(L(l, ph, what + ".wgrad"), Scope::kLayer, phase, l, n, k, m, calls);
    };
    auto memory = [&](const std::string& what, double bytes) {
      AddMemory(L(l, ph, what), Scope::kLayer, phase, l, Whole(mult * bytes));
    };
    // FP8: each expert's casts as a dense linear's (Fp8CastBytes).
    auto casts = [&](int64_t k, int64_t n, int64_t m, int calls) {
      if (w_.precision.gemm != backend::GemmPrecision::kFp8) return;
      AddMemory(L(l, ph, "moe.fp8_cast"), Scope::kLayer, phase, l,
                calls * Fp8CastBytes(phase, m, k, n));
    };
    gemm("moe.router", tokens, m_.experts, h, 1);
    memory("moe.router_scores", static_cast<double>(tokens) * m_.experts * 16.0);
    // Two passes each way for the all-to-all dispatcher with several local
    // experts (rank order, then expert order), one for DeepEP/HybridEP.
    const double passes =
        c_.moe_dispatcher == planner::MoeDispatcher::kAllToAll && experts > 1 ? 2.0 : 1.0;
    const double permute = passes * 2.0 * moe_.copies * static_cast<double>(h) * e;
    memory("moe.permute", permute);
    casts(h, g * fl, rows, experts);
    gemm("moe.experts.fc1", rows, g * fl, h, experts);
    memory("moe.experts.activation", MoeActivationBytes());
    casts(fl, h, rows, experts);
    gemm("moe.experts.fc2", rows, h, fl, experts);
    memory("moe.unpermute", permute);
    if (m_.shared_ffn_hidden > 0) {
      const int64_t fs = std::max<int64_t>(1, m_.shared_ffn_hidden / c_.tensor());
      casts(h, g * fs, tokens_, 1);
      gemm("moe.shared.fc1", tokens_, g * fs, h, 1);
      memory("moe.shared.activation",
             elem_ * static_cast<double>(tokens_) * static_cast<double>(fs) * (g + 1.0) * e);
      casts(fs, h, tokens_, 1);
      gemm("moe.shared.fc2", tokens_, h, fs, 1);
    }
  }

  // One layer's backward (with its recompute first), linears in reverse order.
  void Backward(int l) {
    const LayerWindows& lw = windows_[static_cast<size_t>(l)];
    const int S = w_.slice_layers;
    const bool full = c_.recompute == planner::Recompute::kFull;
    // Prefetches in the backward: the first backward layer's gathers, then one
    // layer ahead (OAG for Z; overlap_param_gather for ZeRO-3).
    auto prefetch = [&](int layer) {
      if (c_.gz > 1 && c_.oag && !ZCached(layer)) {
        ZBackward& zb = z_bwd_[static_cast<size_t>(layer)];
        if (full) IssueZGathers(layer, Phase::kRecompute, &zb.recompute);
        IssueZGathers(layer, Phase::kBackward, &zb.backward);
      }
      if (c_.zero == 3 && nd_ > 1 && c_.overlap_param_gather) {
        DataBackward& db = data_bwd_[static_cast<size_t>(layer)];
        if (full) db.recompute = IssueDataGather(layer, Phase::kRecompute, StreamRole::kDataComm);
        db.backward = IssueDataGather(layer, Phase::kBackward, StreamRole::kDataComm);
      }
    };
    if (l == S - 1) prefetch(l);
    if (l - 1 >= 0) prefetch(l - 1);
    if (full) Forward(l, Phase::kRecompute);
    open_windows_.clear();
    for (int win : {lw.bwd_z_ag, lw.bwd_z_rs, lw.bwd_data_ag, lw.bwd_data_rs}) {
      if (win >= 0) open_windows_.push_back(win);
    }
    if (c_.zero == 3 && nd_ > 1) {
      if (c_.overlap_param_gather) {
        const int ag = data_bwd_[static_cast<size_t>(l)].backward;
        if (ag >= 0) pending_.push_back(ag);
      } else {
        IssueDataGather(l, Phase::kBackward, StreamRole::kCompute);
      }
    }
    if (MoeLayer(l)) {
      // Selective recompute drops the experts' activation outputs (Megatron's
      // recompute_modules moe_act) and recomputes them before their backward.
      if (rc_modules_ & planner::kRcMoeAct) {
        AddMemory(L(l, "recompute", "moe.experts.activation"), Scope::kLayer, Phase::kRecompute, l,
                  Whole(MoeActivationBytes()));
      }
      MoeMlp(l, Phase::kBackward);
    } else {
      LinearBackward(l, kFc2);
      AddMemory(L(l, "bwd", "activation"), Scope::kLayer, Phase::kBackward, l, Whole(2 * act_fn_),
                Category::kCompute, 2 * act_kernels_);
      LinearBackward(l, kFc1);
    }
    AddMemory(L(l, "bwd", "norm_residual.mlp"), Scope::kLayer, Phase::kBackward, l,
              Whole(norm_res_), Category::kCompute, 2 * norm_kernels_);
    LinearBackward(l, kProj);
    const double T = static_cast<double>(tokens_);
    if (ulysses_) {
      AddCollective(L(l, "bwd", "ulysses_all_to_all.context"), Category::kCommCp, Scope::kLayer,
                    Phase::kBackward, l, OpKind::kAllToAll, GroupKind::kCp,
                    T * (static_cast<double>(m_.hidden) / c_.gy) * e_, w_.precision.activation);
    }
    // Selective recompute: the attention core's forward again, before its backward.
    if (rc_modules_ & planner::kRcCoreAttn) AttentionForward(l, Phase::kRecompute);
    if (ring_) {
      const int win = NewWindow(L(l, "bwd", "attention"));
      const int ring = RingSteps(l, Phase::kBackward, 2 * (c_.cp - 1), win);
      const size_t before = w_.ops.size();
      AttentionBackward(l);
      for (size_t i = before; i < w_.ops.size(); ++i) AddToWindow(win, static_cast<int>(i));
      pending_.push_back(ring);
    } else {
      AttentionBackward(l);
    }
    if (ulysses_) {
      AddCollective(L(l, "bwd", "ulysses_all_to_all.qkv"), Category::kCommCp, Scope::kLayer,
                    Phase::kBackward, l, OpKind::kAllToAll, GroupKind::kCp,
                    T * (static_cast<double>(m_.qkv_out()) / c_.gy) * e_, w_.precision.activation);
    }
    LinearBackward(l, kQkv);
    AddMemory(L(l, "bwd", "norm_residual.attention"), Scope::kLayer, Phase::kBackward, l,
              Whole(norm_res_), Category::kCompute, 2 * norm_kernels_);
    if (c_.zero == 3 && nd_ > 1) {
      // qgZ: int4 gradients, moved as a quarter of the bytes.
      AddCollective(
          L(l, "bwd", "zero3_reduce_scatter"), Category::kCommData, Scope::kLayer, Phase::kBackward,
          l, OpKind::kReduceScatter, GroupKind::kData, layer_shard_ * pb_ * (c_.qgz ? 0.25 : 1.0),
          c_.qgz ? DataType::kInt8 : w_.precision.param,
          c_.overlap_grad_reduce ? StreamRole::kDataComm : StreamRole::kCompute, lw.bwd_data_rs);
    }
    open_windows_.clear();
  }

  // Last stage: the logits GEMM (vocabulary split over the tensor ranks), its
  // two backward GEMMs and the loss in the stack's passes and precision
  // (LossPasses); the final hidden states are gathered over Y
  // forward and their gradient backward (the cost model's logits terms).
  void Logits() {
    const int64_t v_loc = CeilDiv(m_.vocab, c_.tensor());
    const int64_t h_loc = m_.hidden / c_.gx;
    const double T = static_cast<double>(tokens_);
    AddCollective("stage.logits.fwd_gather", Category::kCommY, Scope::kStage, Phase::kForward, -1,
                  c_.sp ? OpKind::kAllGather : OpKind::kAllReduce, GroupKind::kY,
                  T * m_.hidden * e_, w_.precision.activation);
    KeepHighPrecision(
        AddGemm("stage.logits.fwd", Scope::kStage, Phase::kForward, -1, tokens_, v_loc, h_loc));
    // The loss, one kernel per pass, in the stack's precision (LossPasses):
    // its forward passes here, its backward ones before the logits' dgrad.
    const double logits = static_cast<double>(tokens_ * v_loc);
    auto loss = [&](Phase phase) {
      for (const LossPass& p : loss_passes_) {
        if (p.phase != phase) continue;
        const int op = AddMemory(std::string("stage.loss.") + p.name, Scope::kStage, phase, -1,
                                 static_cast<int64_t>(logits * p.bytes_per_logit));
        w_.ops[static_cast<size_t>(op)].dtype = p.dtype;
      }
    };
    loss(Phase::kForward);
    loss(Phase::kBackward);
    KeepHighPrecision(
        AddGemm("stage.logits.dgrad", Scope::kStage, Phase::kBackward, -1, tokens_, h_loc, v_loc));
    KeepHighPrecision(
        AddGemm("stage.logits.wgrad", Scope::kStage, Phase::kBackward, -1, v_loc, h_loc, tokens_));
    AddCollective("stage.logits.bwd_reduce", Category::kCommY, Scope::kStage, Phase::kBackward, -1,
                  c_.sp ? OpKind::kReduceScatter : OpKind::kAllReduce, GroupKind::kY,
                  T * m_.hidden * e_, w_.precision.activation);
  }

  // Pipeline hand-off of one micro-batch: activations to the next stage
  // (forward), gradients to the previous one (backward), T·h·e/gy bytes (the
  // scatter/gather over the tensor group).
  void PipelineHandOff(Phase phase) {
    const bool fwd = phase == Phase::kForward;
    AddCollective(fwd ? "stage.pp.send_forward" : "stage.pp.send_backward", Category::kCommPp,
                  Scope::kStage, phase, -1, OpKind::kSendRecv, GroupKind::kPp,
                  static_cast<double>(tokens_) * (m_.hidden / c_.gy) * e_, w_.precision.activation,
                  StreamRole::kCompute, -1, fwd ? Peers::kNext : Peers::kPrev);
  }

  // Once per iteration: the data-parallel gradient synchronisation (ZeRO < 3)
  // and the optimizer step over this rank's shard.
  void Step() {
    if (nd_ > 1 && c_.zero < 3) {
      const bool ds = c_.zero > 0;  // DeepSpeed reduces in the parameter dtype
      const DataType gtype = ds ? w_.precision.param : w_.precision.grad;
      const double g_bytes = psi_ * backend::DataTypeBytes(gtype);
      if (c_.zero == 0 && !c_.distributed_optimizer) {
        const int op =
            AddCollective("step.dp.all_reduce", Category::kCommData, Scope::kStep, Phase::kStep, -1,
                          OpKind::kAllReduce, GroupKind::kData, g_bytes, gtype);
        if (c_.overlap_grad_reduce)
          w_.ops[static_cast<size_t>(op)].step_window = StepWindow::kStageBackward;
      } else {
        const int rs =
            AddCollective("step.dp.reduce_scatter", Category::kCommData, Scope::kStep, Phase::kStep,
                          -1, OpKind::kReduceScatter, GroupKind::kData, g_bytes, gtype);
        WorkOp& r = w_.ops[static_cast<size_t>(rs)];
        if (c_.overlap_grad_reduce) r.step_window = StepWindow::kStageBackward;
        if (c_.zero == 2) r.per_step = w_.micro_batches;  // ZeRO-2 reduces every micro-batch
        const int ag =
            AddCollective("step.dp.all_gather", Category::kCommData, Scope::kStep, Phase::kStep, -1,
                          OpKind::kAllGather, GroupKind::kData, psi_ * pb_, w_.precision.param);
        if (c_.overlap_param_gather)
          w_.ops[static_cast<size_t>(ag)].step_window = StepWindow::kStageForward;
      }
    }
    // Expert gradients synchronise over the expert-data group, as the dense
    // ones over the data group (the cost model's DataSyncSeconds for expert_psi).
    const int edp = c_.expert_data();
    if (expert_psi_ > 0 && GroupSize(GroupKind::kExpertData) > 1) {
      const DataType gtype = w_.precision.grad;
      const double g_bytes = expert_psi_ * backend::DataTypeBytes(gtype);
      if (c_.zero == 0 && !c_.distributed_optimizer) {
        const int op = AddCollective("step.expert_dp.all_reduce", Category::kCommData,
                                     Scope::kStep, Phase::kStep, -1, OpKind::kAllReduce,
                                     GroupKind::kExpertData, g_bytes, gtype);
        if (c_.overlap_grad_reduce)
          w_.ops[static_cast<size_t>(op)].step_window = StepWindow::kStageBackward;
      } else {
        const int rs = AddCollective("step.expert_dp.reduce_scatter", Category::kCommData,
                                     Scope::kStep, Phase::kStep, -1, OpKind::kReduceScatter,
                                     GroupKind::kExpertData, g_bytes, gtype);
        if (c_.overlap_grad_reduce)
          w_.ops[static_cast<size_t>(rs)].step_window = StepWindow::kStageBackward;
        const int ag = AddCollective("step.expert_dp.all_gather", Category::kCommData,
                                     Scope::kStep, Phase::kStep, -1, OpKind::kAllGather,
                                     GroupKind::kExpertData, expert_psi_ * pb_, w_.precision.param);
        if (c_.overlap_param_gather)
          w_.ops[static_cast<size_t>(ag)].step_window = StepWindow::kStageForward;
      }
    }
    // Adam over the shard (the cost model's optimizer term): fp32 states read +
    // written, the low-precision copy written, the local gradients read for
    // the norm and zeroed; the expert states shard over the expert-data group.
    const double opt_shard = (c_.zero >= 1 || c_.distributed_optimizer) ? nd_ : 1.0;
    const double e_shard = (c_.zero >= 1 || c_.distributed_optimizer) ? std::max(1, edp) : 1.0;
    const double copy_b = pb_ < 4 ? 4.0 + pb_ : 0.0;
    const double traffic = psi_ / opt_shard * (kAdamStateBytesRW + copy_b) + psi_ * 2.0 * gb_ +
                           expert_psi_ / e_shard * (kAdamStateBytesRW + copy_b) +
                           expert_psi_ * 2.0 * gb_;
    AddMemory("step.optimizer", Scope::kStep, Phase::kStep, -1, Whole(traffic),
              Category::kOptimizer);
  }

  struct ZBackward {
    std::array<int, 4> recompute{-1, -1, -1, -1};
    std::array<int, 4> backward{-1, -1, -1, -1};
  };
  struct DataBackward {
    int recompute = -1, backward = -1;
  };

  const planner::Job& job_;
  const planner::ModelSpec& m_;
  const ParallelConfig& c_;
  const WorkloadOptions& o_;
  Workload& w_;
  int64_t e_ = 2, pb_ = 2, gb_ = 4;
  int64_t s_ = 0;
  int64_t tokens_ = 0;
  bool ulysses_ = false, ring_ = false;
  int64_t kn_[4][2] = {};
  double psi_ = 0, layer_shard_ = 0;
  double expert_psi_ = 0;  // expert parameters this rank holds (the cost model's expert_psi)
  int nd_ = 1;
  double norm_res_ = 0, act_fn_ = 0;
  int norm_kernels_ = 1, act_kernels_ = 1;  // per section, forward
  double elem_ = 1.0;                       // the stack's element-wise traffic factor
  planner::MoeLayerShape moe_;              // the MoE layer's shape on this rank
  double moe_tokens_ = 0;                   // tokens this rank routes
  int moe_slice_layers_ = 0;                // slice layers with the MoE MLP (the last ones)
  // One kernel of the loss: its name, phase, bytes read + written per logit,
  // and the element type it computes in.
  struct LossPass {
    const char* name;
    Phase phase;
    double bytes_per_logit;
    DataType dtype;
  };
  std::vector<LossPass> loss_passes_;
  int z_cached_layers_ = 0;  // slice layers whose Z gathers are not repeated
  double loss_bytes_ = 12;   // bytes per logit the framework's loss moves
  uint8_t rc_modules_ = 0;   // what selective recompute reruns (CostModel::SelectiveModules)
  std::vector<LayerWindows> windows_;
  std::vector<std::array<int, 4>> z_fwd_;
  std::vector<ZBackward> z_bwd_;
  std::vector<int> data_fwd_;
  std::vector<DataBackward> data_bwd_;
  std::vector<int> pending_;  // ops the next compute-stream op waits for
  std::vector<int> tp_join_;
  std::vector<int> open_windows_;  // windows every new compute op joins
  int last_compute_ = -1;
};

}  // namespace

Precisions PrecisionsOf(const planner::TrainingSpec& t) {
  using topology::Precision;
  Precisions p;
  p.gemm = static_cast<backend::GemmPrecision>(t.precision);
  const bool wide = t.precision == Precision::kFp32 || t.precision == Precision::kTf32;
  switch (t.precision) {
    case Precision::kFp32:
    case Precision::kTf32:
      p.gemm_input = DataType::kFloat32;
      break;
    case Precision::kBf16:
      p.gemm_input = DataType::kBFloat16;
      break;
    case Precision::kFp16:
      p.gemm_input = DataType::kFloat16;
      break;
    case Precision::kFp8:
      p.gemm_input = DataType::kFp8E4M3;
      break;
  }
  // fp8 recipes keep activations and weights in bf16 between GEMMs (TE).
  p.activation = wide
                     ? DataType::kFloat32
                     : (t.precision == Precision::kFp16 ? DataType::kFloat16 : DataType::kBFloat16);
  p.param = p.activation;
  p.grad = (wide || t.main_grads_fp32) ? DataType::kFloat32 : p.activation;
  return p;
}

Result<Workload> BuildWorkload(const planner::Job& job, const ParallelConfig& c, int rank,
                               const WorkloadOptions& options) {
  if (job.gpus != c.world()) {
    return Status::InvalidArgument("the config's degrees multiply to " + std::to_string(c.world()) +
                                   " ranks, the job has " + std::to_string(job.gpus));
  }
  if (rank < 0 || rank >= job.gpus) {
    return Status::InvalidArgument("plan rank " + std::to_string(rank) + " outside 0.." +
                                   std::to_string(job.gpus - 1));
  }
  if (options.slice_layers < 1 || options.max_call_bytes < 1 || options.attention_tile_bytes < 1) {
    return Status::InvalidArgument(
        "slice_layers, max_call_bytes and attention_tile_bytes must be >= 1");
  }
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const planner::Reason why = cm.CheckRules(c);
  if (why != planner::Reason::kOk) {
    return Status::InvalidArgument(std::string(planner::ReasonName(why)) + ": " +
                                   cm.Explain(why, c));
  }
  // The slice replays the attention core's and the experts' activation
  // recompute; the other modules' forwards are not replayed yet.
  const uint8_t replayed = planner::kRcCoreAttn | planner::kRcMoeAct;
  if (const uint8_t rest = cm.SelectiveModules(c) & ~replayed; rest != 0) {
    return Status::InvalidArgument("recompute modules " + planner::RecomputeModulesName(rest) +
                                   " are not replayed on the slice (only core_attn and moe_act)");
  }
  Workload w;
  w.plan_rank = rank;
  w.coords = Coordinates(c, rank);
  w.stage = w.coords[DimSlot(Dim::kPp)];
  w.stages = c.pp;
  w.vpp = c.vpp;
  w.layers_per_stage = job.model.layers / c.pp;
  w.slice_layers = std::min(options.slice_layers, w.layers_per_stage);
  w.micro_batches = job.training.global_batch / (int64_t{c.mbs} * c.gz * c.gdata);
  const int gpn = std::max(1, job.cluster.gpus_per_node);
  for (GroupKind kind : GroupKindsOf(c, gpn)) {
    Group g;
    g.kind = kind;
    g.ranks = GroupRanks(c, kind, rank, gpn);
    g.position =
        static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), rank) - g.ranks.begin());
    g.stride = GroupStride(c, kind);
    w.groups.push_back(std::move(g));
  }
  const planner::CostModel::ComputeTerms terms = cm.Compute(c);
  Builder b(job, c, options, terms, &w);
  // AxoNN weight caching (the cost model's MemoryBreakdown::z_cached_layers):
  // the slice's first round(fraction × slice) layers keep their forward
  // gathers for the recompute and the backward.
  if (c.gz > 1) {
    const int stage_layers = std::max(1, cm.Stages(c).max);
    const double fraction = std::min(1.0, cm.Memory(c).z_cached_layers / double(stage_layers));
    b.SetZCachedLayers(static_cast<int>(std::lround(fraction * w.slice_layers)));
  }
  if (job.model.is_moe()) {
    // The stage's MoE share of its layers, over the slice (rounded).
    const planner::StageLayers st = cm.Stages(c);
    int layers = st.middle, moe = terms.moe_layers_middle;
    if (w.stage == 0) {
      layers = st.first, moe = terms.moe_layers_first;
    } else if (w.stage == c.pp - 1) {
      layers = st.last, moe = terms.moe_layers_last;
    }
    const double share = layers > 0 ? std::min(1.0, static_cast<double>(moe) / layers) : 1.0;
    b.SetMoeLayers(static_cast<int>(std::lround(share * w.slice_layers)));
  }
  b.Build();
  return w;
}

}  // namespace paratune::executor
