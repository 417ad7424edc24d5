#include "elastic/reshard.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "common/enum_names.h"

namespace paratune::planner {
namespace {

// By value, in the order of each enum's declaration (reshard.h).
constexpr const char* kTensorClassNames[] = {"qkv",       "proj",     "fc1",    "fc2",       "norm",
                                             "embedding", "position", "output", "final_norm",
                                             "router"};
static_assert(std::size(kTensorClassNames) == kNumTensorClasses);
constexpr const char* kStateNames[] = {"param", "master", "exp_avg", "exp_avg_sq", "grad"};
static_assert(std::size(kStateNames) == kNumStates);
constexpr const char* kRouteNames[] = {"local", "intra_node", "inter_node", "checkpoint"};
constexpr const char* kPartitionNames[] = {"replicated", "per_tensor", "flat_buffer"};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// [lo, hi) of part i when n items are cut in parts of `chunk`.
std::pair<int64_t, int64_t> ChunkRange(int64_t n, int64_t chunk, int64_t i) {
  return {std::min(n, i * chunk), std::min(n, (i + 1) * chunk)};
}

}  // namespace

// ---------------------------------------------------------------------------
// Pipeline.

Result<std::vector<int>> SplitLayers(int layers, int parts, int first, int last) {
  if (parts < 1) return Status::InvalidArgument("pipeline split: parts must be >= 1");
  if (layers < 0 || first < 0 || last < 0) {
    return Status::InvalidArgument("pipeline split: layer counts must be >= 0");
  }
  if ((first > 0 || last > 0) && parts < 2) {
    return Status::InvalidArgument("pipeline split: first/last stage layers need pp >= 2");
  }
  if (first + last > layers) {
    return Status::InvalidArgument("pipeline split: first + last stage layers (" +
                                   std::to_string(first + last) + ") exceed the layers (" +
                                   std::to_string(layers) + ")");
  }
  std::vector<int> out(parts, 0);
  int lo = 0, hi = parts;  // the chunks split evenly
  int rest = layers;
  if (first > 0) {
    out[0] = first;
    rest -= first;
    lo = 1;
  }
  if (last > 0) {
    out[parts - 1] = last;
    rest -= last;
    hi = parts - 1;
  }
  const int n = hi - lo;
  if (n == 0) {
    if (rest > 0) {
      return Status::InvalidArgument("pipeline split: " + std::to_string(rest) +
                                     " layers left for no middle stage");
    }
    return out;
  }
  // DeepSpeed partition_uniform: chunk = rest / n, the first rest % n parts get one more.
  const int base = rest / n, extra = rest % n;
  for (int i = 0; i < n; ++i) out[lo + i] = base + (i < extra ? 1 : 0);
  return out;
}

int PipelineLayout::ChunkOfLayer(int layer) const {
  for (size_t c = 0; c < chunk_layers.size(); ++c) {
    if (layer < chunk_first_layer[c] + chunk_layers[c]) return static_cast<int>(c);
  }
  PT_CHECK_MSG(false, "layer out of range");
  return -1;
}

Result<PipelineLayout> MakePipelineLayout(int layers, int pp, int vpp, int first, int last) {
  if (pp < 1 || vpp < 1) return Status::InvalidArgument("pipeline split: pp and vpp must be >= 1");
  PipelineLayout p;
  p.pp = pp;
  p.vpp = vpp;
  PT_ASSIGN_OR_RETURN(p.chunk_layers, SplitLayers(layers, pp * vpp, first, last));
  p.chunk_first_layer.resize(p.chunk_layers.size());
  int acc = 0;
  for (size_t c = 0; c < p.chunk_layers.size(); ++c) {
    p.chunk_first_layer[c] = acc;
    acc += p.chunk_layers[c];
  }
  return p;
}

// ---------------------------------------------------------------------------
// Catalog.

const char* TensorClassName(TensorClass c) { return EnumName(c, kTensorClassNames); }

const char* StateName(State s) { return EnumName(s, kStateNames); }

const char* RouteName(Route r) { return EnumName(r, kRouteNames); }

std::vector<TensorDesc> TensorCatalog(const ModelSpec& m) {
  std::vector<TensorDesc> out;
  const int64_t h = m.hidden, V = m.vocab;
  const bool layernorm = m.norm != "rmsnorm";
  auto add = [&](std::string name, TensorClass cls, int layer, int64_t rows, int64_t cols,
                 TpAxis row_axis, TpAxis col_axis, int groups = 1, bool vocab = false) {
    out.push_back(TensorDesc{.name = std::move(name),
                             .cls = cls,
                             .layer = layer,
                             .rows = rows,
                             .cols = cols,
                             .row_groups = groups,
                             .row_axis = row_axis,
                             .col_axis = col_axis,
                             .vocab_padded = vocab});
  };
  add("embedding.weight", TensorClass::kEmbedding, -1, V, h, TpAxis::kXY, TpAxis::kNone, 1, true);
  if (m.learned_positions()) {
    add("position.weight", TensorClass::kPosition, -1, m.max_seq_len, h, TpAxis::kNone, TpAxis::kNone);
  }
  const int groups = m.gated_ffn ? 2 : 1;
  // An MLP of width f: FC1 normal ([gate; up] rows by Y), FC2 transposed.
  auto mlp = [&](const std::string& p, int l, int64_t f) {
    add(p + "fc1.weight", TensorClass::kFc1, l, groups * f, h, TpAxis::kY, TpAxis::kX, groups);
    if (m.linear_bias) add(p + "fc1.bias", TensorClass::kFc1, l, groups * f, 1, TpAxis::kY, TpAxis::kNone, groups);
    add(p + "fc2.weight", TensorClass::kFc2, l, h, f, TpAxis::kX, TpAxis::kY);
    if (m.linear_bias) add(p + "fc2.bias", TensorClass::kFc2, l, h, 1, TpAxis::kX, TpAxis::kNone);
  };
  const int64_t a = m.heads;
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto norm = [&](const std::string& n) {
      add(p + n + ".weight", TensorClass::kNorm, l, h, 1, TpAxis::kNone, TpAxis::kNone);
      if (layernorm) add(p + n + ".bias", TensorClass::kNorm, l, h, 1, TpAxis::kNone, TpAxis::kNone);
    };
    norm("input_norm");
    if (m.is_mla()) {
      // Megatron-Core's MLA (multi_latent_attention.py): the down projections
      // and their norms are duplicated over the tensor group, the up
      // projections column-parallel (heads by Y), the output row-parallel.
      const int64_t qk = int64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim;
      if (m.q_lora_rank > 0) {
        add(p + "q_down.weight", TensorClass::kQkv, l, m.q_lora_rank, h, TpAxis::kNone, TpAxis::kNone);
        add(p + "q_norm.weight", TensorClass::kNorm, l, m.q_lora_rank, 1, TpAxis::kNone, TpAxis::kNone);
        add(p + "q_up.weight", TensorClass::kQkv, l, a * qk, m.q_lora_rank, TpAxis::kY, TpAxis::kNone);
      } else {
        add(p + "q.weight", TensorClass::kQkv, l, a * qk, h, TpAxis::kY, TpAxis::kX);
      }
      add(p + "kv_down.weight", TensorClass::kQkv, l, int64_t{m.kv_lora_rank} + m.qk_rope_head_dim, h,
          TpAxis::kNone, TpAxis::kNone);
      add(p + "kv_norm.weight", TensorClass::kNorm, l, m.kv_lora_rank, 1, TpAxis::kNone, TpAxis::kNone);
      add(p + "kv_up.weight", TensorClass::kQkv, l,
          a * (int64_t{m.qk_nope_head_dim} + m.v_head_dim), m.kv_lora_rank, TpAxis::kY, TpAxis::kNone);
      add(p + "proj.weight", TensorClass::kProj, l, h, a * m.v_head_dim, TpAxis::kX, TpAxis::kY);
    } else {
      // Normal layers: output rows split by Y, input cols by X; transposed: the reverse.
      add(p + "qkv.weight", TensorClass::kQkv, l, m.qkv_out(), h, TpAxis::kY, TpAxis::kX);
      if (m.linear_bias) add(p + "qkv.bias", TensorClass::kQkv, l, m.qkv_out(), 1, TpAxis::kY, TpAxis::kNone);
      // Q/K norms: head-wise ones share one head_dim weight per norm (each
      // tensor rank holds it whole); full-width ones span the heads, split
      // with them. Sinks: one logit per query head, split with the heads.
      const int64_t d = m.head_dim();
      if (m.qk_norm == "head") {
        add(p + "q_norm.weight", TensorClass::kNorm, l, d, 1, TpAxis::kNone, TpAxis::kNone);
        add(p + "k_norm.weight", TensorClass::kNorm, l, d, 1, TpAxis::kNone, TpAxis::kNone);
      } else if (m.qk_norm == "full") {
        add(p + "q_norm.weight", TensorClass::kNorm, l, int64_t{m.heads} * d, 1, TpAxis::kY, TpAxis::kNone);
        add(p + "k_norm.weight", TensorClass::kNorm, l, int64_t{m.kv_heads} * d, 1, TpAxis::kY, TpAxis::kNone);
      }
      if (m.attention_sinks) add(p + "sinks", TensorClass::kQkv, l, m.heads, 1, TpAxis::kY, TpAxis::kNone);
      add(p + "proj.weight", TensorClass::kProj, l, h, m.q_out(), TpAxis::kX, TpAxis::kY);
      if (m.linear_bias) add(p + "proj.bias", TensorClass::kProj, l, h, 1, TpAxis::kX, TpAxis::kNone);
    }
    norm("post_norm");
    if (m.is_moe_layer(l)) {
      // The router is replicated over the tensor group; the routed experts are
      // laid out by ep × etp × edp (elastic/expert_reshard.h), not here; the
      // shared experts are an MLP on the attention's tensor group.
      add(p + "router.weight", TensorClass::kRouter, l, m.experts, h, TpAxis::kNone, TpAxis::kNone);
      if (m.linear_bias) add(p + "router.bias", TensorClass::kRouter, l, m.experts, 1, TpAxis::kNone, TpAxis::kNone);
      if (m.shared_ffn_hidden > 0) mlp(p + "shared_", l, m.shared_ffn_hidden);
    } else {
      mlp(p, l, m.ffn_hidden);
    }
  }
  add("final_norm.weight", TensorClass::kFinalNorm, -1, h, 1, TpAxis::kNone, TpAxis::kNone);
  if (layernorm) add("final_norm.bias", TensorClass::kFinalNorm, -1, h, 1, TpAxis::kNone, TpAxis::kNone);
  if (!m.tied_embeddings) {
    add("output.weight", TensorClass::kOutput, -1, V, h, TpAxis::kXY, TpAxis::kNone, 1, true);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Layout.

Result<Layout> Layout::Make(const ModelSpec& m, const ParallelConfig& c, topology::Precision precision,
                            bool main_grads_fp32, int first_stage_layers, int last_stage_layers) {
  if (c.gx < 1 || c.gy < 1 || c.gz < 1 || c.gdata < 1 || c.pp < 1 || c.vpp < 1 || c.cp < 1) {
    return Status::InvalidArgument("layout: every degree must be >= 1");
  }
  // The configuration's own uneven stages unless the caller states others.
  if (first_stage_layers == 0) first_stage_layers = c.first_stage_layers;
  if (last_stage_layers == 0) last_stage_layers = c.last_stage_layers;
  Layout L;
  L.model_ = m;
  L.config_ = c;
  for (int d = 0; d < kNumDims; ++d) {
    L.stride_[d] = c.Stride(static_cast<Dim>(d));
    L.degree_[d] = c.Degree(static_cast<Dim>(d));
  }
  PT_ASSIGN_OR_RETURN(L.pipe_, MakePipelineLayout(m.layers, c.pp, c.vpp, first_stage_layers, last_stage_layers));
  L.tensors_ = TensorCatalog(m);
  // As the cost model: fp32/tf32 train in fp32 (no master copy); fp8 recipes keep bf16 weights.
  const bool wide = topology::TrainsInFp32(precision);
  L.param_bytes_ = wide ? 4 : 2;
  // ZeRO keeps gradients in the parameter dtype; Megatron fp32 main grads.
  L.grad_bytes_ = (wide || (main_grads_fp32 && c.zero == 0)) ? 4 : 2;
  const int chunks = c.pp * c.vpp;
  L.chunks_of_.resize(L.tensors_.size());
  for (size_t t = 0; t < L.tensors_.size(); ++t) {
    const TensorDesc& d = L.tensors_[t];
    std::vector<int>& ch = L.chunks_of_[t];
    if (d.layer >= 0) {
      ch.push_back(L.pipe_.ChunkOfLayer(d.layer));
    } else if (d.cls == TensorClass::kEmbedding) {
      ch.push_back(0);
      // Tied embeddings: the last stage keeps a copy for the logits (Megatron).
      if (m.tied_embeddings && c.pp > 1) ch.push_back(chunks - 1);
    } else if (d.cls == TensorClass::kPosition) {
      ch.push_back(0);
    } else {
      ch.push_back(chunks - 1);
    }
  }
  // Flat buffers for ZeRO-1/2 and the distributed optimizer: per (chunk, x, y, z).
  const int nbuf = chunks * c.gx * c.gy * c.gz;
  L.buffer_offset_.assign(nbuf, std::vector<int64_t>(L.tensors_.size(), -1));
  L.buffer_total_.assign(nbuf, 0);
  for (int ch = 0; ch < chunks; ++ch) {
    for (int x = 0; x < c.gx; ++x) {
      for (int y = 0; y < c.gy; ++y) {
        for (int z = 0; z < c.gz; ++z) {
          const int b = L.BufferIndex(ch, x, y, z);
          int64_t acc = 0;
          for (size_t t = 0; t < L.tensors_.size(); ++t) {
            const auto& cs = L.chunks_of_[t];
            if (std::find(cs.begin(), cs.end(), ch) == cs.end()) continue;
            auto [a, e] = L.ZRange(static_cast<int>(t), x, y, z);
            L.buffer_offset_[b][t] = acc;
            acc += e - a;
          }
          L.buffer_total_[b] = acc;
        }
      }
    }
  }
  return L;
}

int Layout::BufferIndex(int chunk, int x, int y, int z) const {
  return ((chunk * config_.gx + x) * config_.gy + y) * config_.gz + z;
}

bool Layout::HasState(State s) const {
  if (s == State::kMaster) return param_bytes_ < 4;
  return true;
}

Partition Layout::PartitionOf(State s) const {
  const ParallelConfig& c = config_;
  if (dcp_size() == 1) return Partition::kReplicated;
  switch (s) {
    case State::kParam:
      return c.zero == 3 ? Partition::kPerTensor : Partition::kReplicated;
    case State::kGrad:
      if (c.zero == 3) return Partition::kPerTensor;
      return c.zero == 2 ? Partition::kFlatBuffer : Partition::kReplicated;
    default:  // optimizer states
      if (c.zero == 3) return Partition::kPerTensor;
      return (c.zero >= 1 || c.distributed_optimizer) ? Partition::kFlatBuffer : Partition::kReplicated;
  }
}

int Layout::BytesPerElement(State s) const {
  switch (s) {
    case State::kParam: return param_bytes_;
    case State::kGrad: return grad_bytes_;
    default: return 4;
  }
}

RankCoords Layout::Coords(int rank) const {
  auto coord = [&](Dim d) {
    const int i = static_cast<int>(d);
    return (rank / stride_[i]) % degree_[i];
  };
  RankCoords rc;
  rc.x = coord(Dim::kX);
  rc.y = coord(Dim::kY);
  rc.z = coord(Dim::kZ);
  rc.cp = coord(Dim::kCp);
  rc.data = coord(Dim::kData);
  rc.stage = coord(Dim::kPp);
  // The data×cp group ordered by rank: the dimension with the smaller stride varies fastest.
  const int cp = degree_[static_cast<int>(Dim::kCp)], gdata = degree_[static_cast<int>(Dim::kData)];
  rc.dcp = stride_[static_cast<int>(Dim::kCp)] < stride_[static_cast<int>(Dim::kData)] ? rc.cp + cp * rc.data
                                                                                        : rc.data + gdata * rc.cp;
  return rc;
}

int Layout::RankOf(int x, int y, int z, int dcp, int stage) const {
  auto st = [&](Dim d) { return stride_[static_cast<int>(d)]; };
  const int cp = degree_[static_cast<int>(Dim::kCp)], gdata = degree_[static_cast<int>(Dim::kData)];
  int cpi, data;
  if (st(Dim::kCp) < st(Dim::kData)) {
    cpi = dcp % cp;
    data = dcp / cp;
  } else {
    data = dcp % gdata;
    cpi = dcp / gdata;
  }
  return x * st(Dim::kX) + y * st(Dim::kY) + z * st(Dim::kZ) + cpi * st(Dim::kCp) + data * st(Dim::kData) +
         stage * st(Dim::kPp);
}

int64_t Layout::Block::numel() const { return row_groups * row_len * col_len; }

Layout::Block Layout::BlockOf(int t, int x, int y) const {
  const TensorDesc& d = tensors_[t];
  x = std::max(x, 0);  // -1: replicated over that axis, which then splits nothing
  y = std::max(y, 0);
  const ParallelConfig& c = config_;
  auto split = [&](TpAxis a) -> std::pair<int, int> {  // (degree, index)
    switch (a) {
      case TpAxis::kNone: return {1, 0};
      case TpAxis::kX: return {c.gx, x};
      case TpAxis::kY: return {c.gy, y};
      case TpAxis::kXY: return {c.gx * c.gy, x + c.gx * y};
    }
    return {1, 0};
  };
  Block b;
  b.row_groups = d.row_groups;
  b.group_rows = d.rows / d.row_groups;
  auto [rd, ri] = split(d.row_axis);
  int64_t rchunk;
  if (d.vocab_padded) {
    // Megatron pads the vocabulary to a multiple of 128·t (make-vocab-size-divisible-by 128).
    const int64_t mult = 128LL * rd;
    rchunk = CeilDiv(b.group_rows, mult) * mult / rd;
  } else {
    rchunk = CeilDiv(b.group_rows, rd);
  }
  auto [r0, r1] = ChunkRange(b.group_rows, rchunk, ri);
  b.row_start = r0;
  b.row_len = r1 - r0;
  auto [cd, ci] = split(d.col_axis);
  auto [c0, c1] = ChunkRange(d.cols, CeilDiv(d.cols, cd), ci);
  b.col_start = c0;
  b.col_len = c1 - c0;
  return b;
}

std::pair<int64_t, int64_t> Layout::ZRange(int t, int x, int y, int z) const {
  const int64_t n = BlockOf(t, x, y).numel();
  return ChunkRange(n, CeilDiv(n, config_.gz), z);
}

int Layout::NumTilings(int t, State s) const {
  return PartitionOf(s) == Partition::kFlatBuffer ? static_cast<int>(chunks_of_[t].size()) : 1;
}

std::vector<Layout::Piece> Layout::Pieces(int t, State s, int tiling) const {
  std::vector<Piece> out;
  const ParallelConfig& c = config_;
  const Partition part = PartitionOf(s);
  const int d = dcp_size();
  // A tensor no X (Y) split touches is replicated over X (Y): one piece, x = -1.
  const TensorDesc& desc = tensors_[t];
  auto uses = [&](TpAxis axis) {
    return desc.row_axis == axis || desc.col_axis == axis || desc.row_axis == TpAxis::kXY ||
           desc.col_axis == TpAxis::kXY;
  };
  const bool by_x = uses(TpAxis::kX), by_y = uses(TpAxis::kY);
  for (int xi = 0; xi < (by_x ? c.gx : 1); ++xi) {
    for (int yi = 0; yi < (by_y ? c.gy : 1); ++yi) {
      const int x = by_x ? xi : -1, y = by_y ? yi : -1;
      for (int z = 0; z < c.gz; ++z) {
        auto [za, zb] = ZRange(t, x, y, z);
        if (zb <= za) continue;
        if (part == Partition::kReplicated) {
          out.push_back({x, y, z, -1, -1, za, zb});
        } else if (part == Partition::kPerTensor) {
          const int64_t n = zb - za, cd = CeilDiv(n, d);
          for (int k = 0; k < d; ++k) {
            auto [a, b] = ChunkRange(n, cd, k);
            if (b > a) out.push_back({x, y, z, k, -1, za + a, za + b});
          }
        } else {
          const int copy = static_cast<int>(chunks_of_[t].size()) > 1 ? tiling : -1;
          // Every replica over X/Y has its own buffer with the same layout: use (0, 0)'s.
          const int buf = BufferIndex(chunks_of_[t][tiling], std::max(x, 0), std::max(y, 0), z);
          const int64_t off = buffer_offset_[buf][t], len = zb - za;
          const int64_t slice = CeilDiv(buffer_total_[buf], d);
          // Only the slices that overlap [off, off + len).
          for (int64_t k = off / slice; k < d && k * slice < off + len; ++k) {
            const int64_t lo = std::max(off, k * slice), hi = std::min(off + len, (k + 1) * slice);
            if (hi > lo) out.push_back({x, y, z, static_cast<int>(k), copy, za + (lo - off), za + (hi - off)});
          }
        }
      }
    }
  }
  return out;
}

std::vector<Rect> Layout::PieceRects(int t, const Piece& p) const {
  const Block b = BlockOf(t, p.x, p.y);
  const int64_t lc = b.col_len;
  if (p.b <= p.a || lc == 0) return {};
  std::vector<Rect> local;  // in block coordinates: a partial first row, full rows, a partial last row
  const int64_t ra = p.a / lc, rb = (p.b - 1) / lc;
  if (ra == rb) {
    local.push_back({ra, ra + 1, p.a % lc, (p.b - 1) % lc + 1});
  } else {
    int64_t full0 = ra, full1 = rb + 1;
    if (p.a % lc != 0) {
      local.push_back({ra, ra + 1, p.a % lc, lc});
      full0 = ra + 1;
    }
    if (p.b % lc != 0) full1 = rb;
    if (full1 > full0) local.push_back({full0, full1, 0, lc});
    if (p.b % lc != 0) local.push_back({rb, rb + 1, 0, p.b % lc});
  }
  std::vector<Rect> out;
  for (const Rect& r : local) {
    // Local rows map to consolidated rows group by group ([gate; up] for gated FC1).
    for (int g = 0; g < b.row_groups; ++g) {
      const int64_t g0 = g * b.row_len, g1 = g0 + b.row_len;
      const int64_t lo = std::max(r.r0, g0), hi = std::min(r.r1, g1);
      if (hi <= lo) continue;
      const int64_t base = g * b.group_rows + b.row_start - g0;
      out.push_back({base + lo, base + hi, b.col_start + r.c0, b.col_start + r.c1});
    }
  }
  return out;
}

bool Layout::Holds(int rank, int t, const Piece& p) const {
  const RankCoords rc = Coords(rank);
  if ((p.x >= 0 && rc.x != p.x) || (p.y >= 0 && rc.y != p.y) || rc.z != p.z) return false;
  if (p.dcp >= 0 && rc.dcp != p.dcp) return false;
  const auto& chs = chunks_of_[t];
  for (size_t i = 0; i < chs.size(); ++i) {
    if (p.copy >= 0 && static_cast<int>(i) != p.copy) continue;
    if (pipe_.StageOfChunk(chs[i]) == rc.stage) return true;
  }
  return false;
}

std::vector<Rect> Layout::Held(int rank, int t, State s) const {
  std::vector<Rect> out;
  if (!HasState(s)) return out;
  for (int k = 0; k < NumTilings(t, s); ++k) {
    for (const Piece& p : Pieces(t, s, k)) {
      if (!Holds(rank, t, p)) continue;
      for (const Rect& r : PieceRects(t, p)) out.push_back(r);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The map.

namespace {

struct TaggedRect {
  Rect r;
  int piece;
};

// Every (a, b) pair of rectangles from two tilings of the same region that
// overlap, with their intersection, each pair once. Sweep over row bands: in a
// band the active rectangles of one tiling are disjoint in columns, so a merge
// finds the overlaps; a pair is emitted in the band where both are first active.
template <typename Fn>
void IntersectTilings(std::vector<TaggedRect>& A, std::vector<TaggedRect>& B, Fn&& emit) {
  std::vector<int64_t> bounds;
  bounds.reserve(2 * (A.size() + B.size()));
  for (auto* v : {&A, &B}) {
    for (const auto& t : *v) {
      bounds.push_back(t.r.r0);
      bounds.push_back(t.r.r1);
    }
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  auto by_row = [](const TaggedRect& a, const TaggedRect& b) { return a.r.r0 < b.r.r0; };
  std::sort(A.begin(), A.end(), by_row);
  std::sort(B.begin(), B.end(), by_row);
  std::vector<const TaggedRect*> actA, actB;
  size_t ia = 0, ib = 0;
  auto by_col = [](const TaggedRect* a, const TaggedRect* b) { return a->r.c0 < b->r.c0; };
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    const int64_t y = bounds[k];
    std::erase_if(actA, [&](const TaggedRect* t) { return t->r.r1 <= y; });
    std::erase_if(actB, [&](const TaggedRect* t) { return t->r.r1 <= y; });
    bool added = false;
    while (ia < A.size() && A[ia].r.r0 == y) {
      actA.push_back(&A[ia++]);
      added = true;
    }
    while (ib < B.size() && B[ib].r.r0 == y) {
      actB.push_back(&B[ib++]);
      added = true;
    }
    if (!added) continue;  // no pair can start in this band
    std::sort(actA.begin(), actA.end(), by_col);
    std::sort(actB.begin(), actB.end(), by_col);
    size_t i = 0, j = 0;
    while (i < actA.size() && j < actB.size()) {
      const Rect& a = actA[i]->r;
      const Rect& b = actB[j]->r;
      const int64_t c0 = std::max(a.c0, b.c0), c1 = std::min(a.c1, b.c1);
      if (c1 > c0 && std::max(a.r0, b.r0) == y) {
        emit(actA[i]->piece, actB[j]->piece, Rect{y, std::min(a.r1, b.r1), c0, c1});
      }
      if (a.c1 < b.c1) ++i;
      else ++j;
    }
  }
}

std::vector<TaggedRect> Tag(const Layout& L, int t, const std::vector<Layout::Piece>& pieces) {
  std::vector<TaggedRect> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (const Rect& r : L.PieceRects(t, pieces[i])) out.push_back({r, static_cast<int>(i)});
  }
  return out;
}

}  // namespace

ReshardMap ComputeReshard(const Layout& from, const Layout& to, const Allocation& alloc,
                          const topology::ClusterSpec& cluster, const ReshardOptions& options) {
  PT_CHECK(from.tensors().size() == to.tensors().size());
  PT_CHECK(static_cast<int>(alloc.new_gpus.size()) >= to.world());
  ReshardMap map;
  map.tensors = to.tensors();
  const int new_world = to.world(), old_world = from.world();
  const int gpn = std::max(1, alloc.gpus_per_node);
  map.bytes_per_rank.assign(new_world, 0);
  map.checkpoint_bytes_per_rank.assign(new_world, 0);

  // Physical bookkeeping: old rank r ran on GPU r.
  int max_gpu = old_world;
  for (int g : alloc.new_gpus) max_gpu = std::max(max_gpu, g + 1);
  std::vector<char> alive(old_world, 0);
  for (int g : alloc.surviving) {
    if (g >= 0 && g < old_world) alive[g] = 1;
  }
  const int nodes = (max_gpu + gpn - 1) / gpn;
  std::vector<double> inter_in(nodes, 0), inter_out(nodes, 0), fallback_in(nodes, 0), ckpt_node(nodes, 0);
  std::vector<double> intra_in(max_gpu, 0), intra_out(max_gpu, 0);

  std::vector<State> states = {State::kParam, State::kMaster, State::kExpAvg, State::kExpAvgSq};
  if (options.include_gradients) states.push_back(State::kGrad);

  const int ntensors = static_cast<int>(to.tensors().size());
  for (int t = 0; t < ntensors; ++t) {
    const TensorClass cls = to.tensors()[t].cls;
    for (State s : states) {
      if (!to.HasState(s)) continue;
      // An fp32 run has no master copy: its parameters are the master weights.
      const State src_state = from.HasState(s) ? s : State::kParam;
      const std::vector<Layout::Piece> old_pieces = from.Pieces(t, src_state, 0);
      // Surviving holders of each old piece, found on first use.
      std::vector<std::vector<int>> survivors(old_pieces.size());
      std::vector<char> survivors_known(old_pieces.size(), 0);
      std::vector<size_t> round_robin(old_pieces.size(), 0);
      const int width = to.BytesPerElement(s);
      const int ckpt_width = (s == State::kMaster || s == State::kGrad) ? 0 : 4;
      for (int k = 0; k < to.NumTilings(t, s); ++k) {
        const std::vector<Layout::Piece> new_pieces = to.Pieces(t, s, k);
        std::vector<TaggedRect> A = Tag(from, t, old_pieces);
        std::vector<TaggedRect> B = Tag(to, t, new_pieces);
        IntersectTilings(A, B, [&](int oi, int ni, const Rect& r) {
          const Layout::Piece& op = old_pieces[oi];
          const int64_t elems = r.numel();
          to.ForEachHolder(t, new_pieces[ni], [&](int n) {
            const int gpu = alloc.new_gpus[n];
            const int node = gpu / gpn;
            Fragment f;
            f.new_rank = n;
            f.tensor = t;
            f.state = s;
            f.rect = r;
            f.bytes = elems * width;
            // Source: the same GPU, else a GPU of the same node, else a surviving
            // holder chosen round-robin (spreads the egress), else the checkpoint.
            if (gpu < old_world && alive[gpu] && from.Holds(gpu, t, op)) {
              f.old_rank = gpu;
              f.route = Route::kLocal;
            } else {
              for (int g = node * gpn; g < std::min(old_world, (node + 1) * gpn); ++g) {
                if (alive[g] && from.Holds(g, t, op)) {
                  f.old_rank = g;
                  f.route = Route::kIntraNode;
                  break;
                }
              }
              if (f.old_rank < 0) {
                if (!survivors_known[oi]) {
                  from.ForEachHolder(t, op, [&](int o) {
                    if (alive[o]) survivors[oi].push_back(o);
                  });
                  survivors_known[oi] = 1;
                }
                if (!survivors[oi].empty()) {
                  f.old_rank = survivors[oi][round_robin[oi]++ % survivors[oi].size()];
                  f.route = Route::kInterNode;
                }
              }
            }
            map.bytes_per_rank[n] += f.bytes;
            map.checkpoint_bytes_per_rank[n] += elems * ckpt_width;
            ckpt_node[node] += static_cast<double>(elems) * ckpt_width;
            map.bytes_by_class[static_cast<int>(cls)][static_cast<int>(s)] += f.bytes;
            switch (f.route) {
              case Route::kLocal:
                map.load.local_bytes += f.bytes;
                break;
              case Route::kIntraNode:
                map.load.intra_node_bytes += f.bytes;
                intra_in[gpu] += f.bytes;
                intra_out[f.old_rank] += f.bytes;
                break;
              case Route::kInterNode:
                map.load.inter_node_bytes += f.bytes;
                inter_in[node] += f.bytes;
                inter_out[f.old_rank / gpn] += f.bytes;
                break;
              case Route::kCheckpoint: {
                // Read from the consolidated checkpoint: fp32 atoms.
                const double b = static_cast<double>(elems) * 4;
                map.load.fallback_checkpoint_bytes += b;
                fallback_in[node] += b;
                break;
              }
            }
            ++map.fragment_count;
            if (options.keep_all || n == options.keep_rank) map.fragments.push_back(f);
          });
        });
      }
    }
  }
  for (int64_t b : map.bytes_per_rank) map.total_bytes += b;

  // Load times: bandwidth-bound, every path running at once.
  const double fs = options.fs_GBps * 1e9;
  const double inj = cluster.NodeInjectionGBps() * 1e9;
  const double intra = gpn > 1 ? topology::GroupCost(cluster, topology::Collective::kSendRecv, 1, 2).busbw_GBps * 1e9
                               : 0.0;
  auto seconds = [](double bytes, double Bps) {
    if (bytes <= 0) return 0.0;
    return Bps > 0 ? bytes / Bps : std::numeric_limits<double>::infinity();
  };
  LoadEstimate& L = map.load;
  for (int64_t b : map.checkpoint_bytes_per_rank) L.checkpoint_bytes += static_cast<double>(b);
  const double fs_all = seconds(L.checkpoint_bytes, fs);
  const double fs_node = seconds(*std::max_element(ckpt_node.begin(), ckpt_node.end()), inj);
  L.checkpoint_s = std::max(fs_all, fs_node);
  L.checkpoint_bottleneck = fs_node > fs_all ? "node_injection" : "filesystem";
  std::pair<double, const char*> terms[] = {
      {seconds(*std::max_element(intra_in.begin(), intra_in.end()), intra), "intra_node"},
      {seconds(*std::max_element(intra_out.begin(), intra_out.end()), intra), "intra_node"},
      {0.0, "inter_node"},
      {0.0, "inter_node"},
      {seconds(L.fallback_checkpoint_bytes, fs), "filesystem"},
  };
  double in_max = 0, out_max = 0;
  for (int i = 0; i < nodes; ++i) {
    in_max = std::max(in_max, inter_in[i] + fallback_in[i]);
    out_max = std::max(out_max, inter_out[i]);
  }
  terms[2].first = seconds(in_max, inj);
  terms[3].first = seconds(out_max, inj);
  L.peer_s = 0;
  L.peer_bottleneck = "none";
  for (const auto& [v, name] : terms) {
    if (v > L.peer_s) {
      L.peer_s = v;
      L.peer_bottleneck = name;
    }
  }
  return map;
}

namespace {

const char* PartitionName(Partition p) { return EnumName(p, kPartitionNames); }

OrderedJson Seconds(double s) { return std::isfinite(s) ? OrderedJson(s) : OrderedJson(nullptr); }

OrderedJson LayoutJson(const Layout& L, const std::vector<State>& states) {
  OrderedJson j;
  j["config"] = ConfigToJson(L.config());
  j["world"] = L.world();
  OrderedJson stages = OrderedJson::array();
  for (size_t c = 0; c < L.pipeline().chunk_layers.size(); ++c) {
    OrderedJson ch;
    ch["chunk"] = c;
    ch["stage"] = L.pipeline().StageOfChunk(static_cast<int>(c));
    ch["first_layer"] = L.pipeline().chunk_first_layer[c];
    ch["layers"] = L.pipeline().chunk_layers[c];
    stages.push_back(ch);
  }
  j["pipeline_chunks"] = stages;
  OrderedJson part;
  for (State s : states) {
    if (L.HasState(s)) part[StateName(s)] = PartitionName(L.PartitionOf(s));
  }
  j["partition"] = part;
  return j;
}

}  // namespace

OrderedJson ReshardToJson(const ReshardMap& map, const Layout& from, const Layout& to,
                          const ReshardOptions& options) {
  std::vector<State> states = {State::kParam, State::kMaster, State::kExpAvg, State::kExpAvgSq};
  if (options.include_gradients) states.push_back(State::kGrad);
  OrderedJson j;
  j["from"] = LayoutJson(from, states);
  j["to"] = LayoutJson(to, states);
  OrderedJson width;
  for (State s : states) {
    if (to.HasState(s)) width[StateName(s)] = to.BytesPerElement(s);
  }
  j["bytes_per_element"] = width;
  j["total_bytes"] = map.total_bytes;
  j["bytes_per_rank"] = map.bytes_per_rank;
  if (!map.bytes_per_rank.empty()) {
    j["bytes_per_rank_max"] = *std::max_element(map.bytes_per_rank.begin(), map.bytes_per_rank.end());
    j["bytes_per_rank_min"] = *std::min_element(map.bytes_per_rank.begin(), map.bytes_per_rank.end());
  }
  OrderedJson by_class = OrderedJson::array();
  for (int c = 0; c < kNumTensorClasses; ++c) {
    OrderedJson row;
    row["class"] = TensorClassName(static_cast<TensorClass>(c));
    int64_t sum = 0;
    for (State s : states) {
      row[std::string(StateName(s)) + "_bytes"] = map.bytes_by_class[c][static_cast<int>(s)];
      sum += map.bytes_by_class[c][static_cast<int>(s)];
    }
    row["total_bytes"] = sum;
    if (sum > 0) by_class.push_back(row);
  }
  j["by_class"] = by_class;
  j["fragment_count"] = map.fragment_count;
  if (options.keep_all) j["fragments_of"] = "all";
  else j["fragments_of"] = options.keep_rank;
  OrderedJson frags = OrderedJson::array();
  for (const Fragment& f : map.fragments) {
    const TensorDesc& d = map.tensors[f.tensor];
    OrderedJson fj;
    fj["new_rank"] = f.new_rank;
    fj["tensor"] = d.name;
    fj["class"] = TensorClassName(d.cls);
    fj["layer"] = d.layer;
    fj["shape"] = {d.rows, d.cols};
    fj["state"] = StateName(f.state);
    fj["rows"] = {f.rect.r0, f.rect.r1};
    fj["cols"] = {f.rect.c0, f.rect.c1};
    fj["bytes"] = f.bytes;
    if (f.old_rank >= 0) fj["old_rank"] = f.old_rank;
    else fj["old_rank"] = nullptr;
    fj["route"] = RouteName(f.route);
    frags.push_back(fj);
  }
  j["fragments"] = frags;
  const LoadEstimate& L = map.load;
  OrderedJson load;
  OrderedJson ck;
  ck["fs_GBps"] = options.fs_GBps;
  ck["bytes"] = L.checkpoint_bytes;
  ck["time_s"] = Seconds(L.checkpoint_s);
  ck["bottleneck"] = L.checkpoint_bottleneck;
  load["checkpoint"] = ck;
  OrderedJson pp;
  pp["local_bytes"] = L.local_bytes;
  pp["intra_node_bytes"] = L.intra_node_bytes;
  pp["inter_node_bytes"] = L.inter_node_bytes;
  pp["checkpoint_fallback_bytes"] = L.fallback_checkpoint_bytes;
  pp["time_s"] = Seconds(L.peer_s);
  pp["bottleneck"] = L.peer_bottleneck;
  load["peer_to_peer"] = pp;
  j["load"] = load;
  return j;
}

}  // namespace paratune::planner
