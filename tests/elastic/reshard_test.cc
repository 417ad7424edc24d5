// The reshard map (docs/replan.md): layouts tile every tensor, maps conserve
// every element and round-trip, and hand-computed cases (TP 8 → 4 with DP
// doubling, ZeRO-3 shard counts, pipeline boundaries that move).
#include "elastic/reshard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

topology::ClusterSpec TestCluster(int gpus_per_node) {
  auto c = topology::ClusterPreset("dgx-a100-80gb");
  EXPECT_TRUE(c.ok());
  topology::ClusterSpec spec = *c;
  spec.gpus_per_node = gpus_per_node;
  return spec;
}

// A small GPT: h = 64, 8 heads (MHA: qkv_out = 192), f = 256, V = 1024, tied,
// LayerNorm without linear biases.
ModelSpec Tiny(int layers) {
  ModelSpec m = testing::GptLike(layers, 64, 8, 1024, /*dropout=*/false, /*max_seq_len=*/0);
  m.name = "tiny";
  m.linear_bias = false;
  return m;
}

ParallelConfig Cfg(int tp, int dp, int pp = 1, int zero = 0) {
  ParallelConfig c;
  c.gy = tp;
  c.gdata = dp;
  c.pp = pp;
  c.zero = zero;
  return c;
}

Layout MakeLayout(const ModelSpec& m, const ParallelConfig& c) {
  auto l = Layout::Make(m, c, topology::Precision::kBf16, true);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return *l;
}

Allocation Identity(int gpus, int gpn) {
  Allocation a;
  a.gpus_per_node = gpn;
  for (int g = 0; g < gpus; ++g) a.new_gpus.push_back(g), a.surviving.push_back(g);
  return a;
}

int TensorIndex(const Layout& L, const std::string& name) {
  for (size_t i = 0; i < L.tensors().size(); ++i) {
    if (L.tensors()[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

// ---------------------------------------------------------------------------

TEST(SplitLayers, EvenAndUnevenRules) {
  EXPECT_EQ(*SplitLayers(6, 3), (std::vector<int>{2, 2, 2}));
  // Remainder to the first stages (DeepSpeed partition_uniform).
  EXPECT_EQ(*SplitLayers(7, 2), (std::vector<int>{4, 3}));
  EXPECT_EQ(*SplitLayers(10, 4), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(*SplitLayers(2, 3), (std::vector<int>{1, 1, 0}));
  // Megatron's explicit first/last stage layer counts; the middle split evenly.
  EXPECT_EQ(*SplitLayers(10, 4, 1, 1), (std::vector<int>{1, 4, 4, 1}));
  EXPECT_EQ(*SplitLayers(9, 4, 1, 2), (std::vector<int>{1, 3, 3, 2}));
  EXPECT_EQ(*SplitLayers(5, 2, 2, 3), (std::vector<int>{2, 3}));
  EXPECT_FALSE(SplitLayers(5, 2, 2, 2).ok());  // one layer left, no middle stage
  EXPECT_FALSE(SplitLayers(4, 2, 3, 2).ok());  // first + last > layers
  EXPECT_FALSE(SplitLayers(4, 1, 1, 0).ok());
  EXPECT_FALSE(SplitLayers(4, 0).ok());
  // Interleaving: chunk c on stage c % pp.
  auto p = MakePipelineLayout(8, 2, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->chunk_layers, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(p->StageOfChunk(p->ChunkOfLayer(5)), 0);  // layers 4-5 are chunk 2, on stage 0
  EXPECT_EQ(p->StageOfChunk(p->ChunkOfLayer(7)), 1);
}

TEST(Catalog, CountsEveryParameterOnce) {
  // Hand count of Tiny(2): per layer qkv 192·64 + proj 64·64 + fc1 256·64 +
  // fc2 64·256 + 2 LayerNorms (2·64 each) = 12288 + 4096 + 16384 + 16384 + 256
  // = 49408; embedding 1024·64 = 65536; final norm 128.
  const auto cat = TensorCatalog(Tiny(2));
  int64_t n = 0;
  for (const auto& t : cat) n += t.numel();
  EXPECT_EQ(n, 2 * 49408 + 65536 + 128);
  // And the presets agree with the model's own accounting.
  for (const char* name : {"gpt3-175b", "llama3-70b", "phi3-mini", "llama2-7b"}) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok());
    int64_t k = 0;
    for (const auto& t : TensorCatalog(*m)) k += t.numel();
    EXPECT_EQ(k, m->ParamCount()) << name;
  }
  // MoE and MLA presets: everything but the routed experts (laid out by
  // PlanExpertReshard) and the multi-token-prediction modules.
  for (const char* name : {"deepseek-v3", "deepseek-v2-lite", "qwen3-30b-a3b", "gpt-oss-20b",
                           "mixtral-8x7b", "llama4-maverick"}) {
    auto m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << name;
    int64_t k = 0;
    for (const auto& t : TensorCatalog(*m)) k += t.numel();
    const int64_t routed = int64_t{m->moe_layer_count()} * m->experts * m->ExpertParams();
    EXPECT_EQ(k, m->ParamCount() - routed - int64_t{m->mtp_layers} * m->MtpModuleParams())
        << name;
  }
  // An MoE layer has no dense MLP: Qwen3-30B-A3B's 48 MoE layers carry routers,
  // not fc1/fc2 (its config's dense intermediate size belongs to no layer).
  auto q = ModelPreset("qwen3-30b-a3b");
  ASSERT_TRUE(q.ok());
  for (const auto& t : TensorCatalog(*q)) {
    EXPECT_NE(t.cls, TensorClass::kFc1) << t.name;
    EXPECT_NE(t.cls, TensorClass::kFc2) << t.name;
  }
}

// ---------------------------------------------------------------------------
// Property tests over random layouts.

struct Case {
  ModelSpec model;
  ParallelConfig from, to;
};

ParallelConfig RandomConfig(std::mt19937& rng, int layers) {
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng));
  };
  for (;;) {
    ParallelConfig c;
    c.gx = pick({1, 1, 2});
    c.gy = pick({1, 2, 4});
    c.gz = pick({1, 1, 2});
    c.gdata = pick({1, 2, 3});
    c.cp = pick({1, 1, 2});
    c.pp = pick({1, 2, 3});
    c.vpp = c.pp > 1 ? pick({1, 2}) : 1;
    if (c.pp * c.vpp > layers + 1) continue;  // allow an empty chunk sometimes
    c.zero = pick({0, 1, 2, 3});
    c.distributed_optimizer = c.zero == 0 && pick({0, 1}) == 1;
    std::shuffle(c.placement.order.begin(), c.placement.order.end(), rng);
    if (c.world() <= 36) return c;
  }
}

ModelSpec RandomModel(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng));
  };
  ModelSpec m;
  m.name = "random";
  m.layers = pick({2, 3, 5});
  m.heads = 4;
  m.kv_heads = pick({4, 2});
  m.hidden = pick({8, 16});
  m.ffn_hidden = pick({12, 24});
  m.vocab = pick({40, 37, 300});  // 37: rows past the padding; 300: several tensor ranks
  m.gated_ffn = pick({0, 1}) == 1;
  m.tied_embeddings = pick({0, 1}) == 1;
  m.linear_bias = pick({0, 1}) == 1;
  m.norm = pick({0, 1}) ? "layernorm" : "rmsnorm";
  m.max_seq_len = m.norm == "layernorm" ? pick({0, 6}) : 0;
  if (pick({0, 1, 2}) == 0) {  // a mixture of experts: a router and shared experts per MoE layer
    m.experts = 4;
    m.top_k = 2;
    m.moe_ffn_hidden = 6;
    m.shared_ffn_hidden = pick({0, 6});
    m.first_dense_layers = pick({0, 1});
  }
  if (pick({0, 1, 2}) == 0) {  // multi-head latent attention, with or without a query LoRA
    m.kv_heads = m.heads;
    m.q_lora_rank = pick({0, 6});
    m.kv_lora_rank = 5;
    m.qk_nope_head_dim = 2;
    m.qk_rope_head_dim = 1;
    m.v_head_dim = 3;
  }
  return m;
}

using Storage = std::map<std::tuple<int, int, int64_t, int64_t>, double>;  // (t, state, r, c) -> value

double Value(int t, int s, int64_t r, int64_t c) { return t * 1e9 + s * 1e8 + r * 1e4 + c; }

std::vector<State> States() { return {State::kParam, State::kMaster, State::kExpAvg, State::kExpAvgSq, State::kGrad}; }

// Every element of every tensor is held exactly copies (pipeline) × tensor-group
// replicas × (replicated over data×cp ? dcp : 1) times, and no rank holds an
// element twice.
void ExpectTiles(const Layout& L) {
  const int d = L.dcp_size();
  for (size_t t = 0; t < L.tensors().size(); ++t) {
    const TensorDesc& desc = L.tensors()[t];
    for (State s : States()) {
      if (!L.HasState(s)) continue;
      std::vector<int> count(desc.numel(), 0);
      for (int r = 0; r < L.world(); ++r) {
        std::vector<char> mine(desc.numel(), 0);
        for (const Rect& rc : L.Held(r, static_cast<int>(t), s)) {
          for (int64_t i = rc.r0; i < rc.r1; ++i) {
            for (int64_t j = rc.c0; j < rc.c1; ++j) {
              ASSERT_FALSE(mine[i * desc.cols + j]) << desc.name << " held twice by rank " << r;
              mine[i * desc.cols + j] = 1;
              ++count[i * desc.cols + j];
            }
          }
        }
      }
      const int copies = static_cast<int>(L.ChunksOf(static_cast<int>(t)).size());
      // Norms and positions are replicated over the whole tensor group; a
      // transposed layer's bias (rows split by X) over Y, and so on.
      auto splits = [&](TpAxis a) {
        return desc.row_axis == a || desc.col_axis == a || desc.row_axis == TpAxis::kXY;
      };
      const int tensor_copies = (splits(TpAxis::kX) ? 1 : L.config().gx) * (splits(TpAxis::kY) ? 1 : L.config().gy);
      const int expect = copies * tensor_copies * (L.PartitionOf(s) == Partition::kReplicated ? d : 1);
      for (int64_t e = 0; e < desc.numel(); ++e) {
        ASSERT_EQ(count[e], expect) << desc.name << " " << StateName(s) << " element " << e << " under "
                                    << ConfigToString(L.config());
      }
    }
  }
}

// Applies a map: each new rank takes every fragment from its source old rank.
Storage Apply(const ReshardMap& map, const std::vector<Storage>& old_ranks, std::vector<Storage>* new_ranks,
              int new_world) {
  new_ranks->assign(new_world, Storage());
  for (const Fragment& f : map.fragments) {
    EXPECT_GE(f.old_rank, 0);
    if (f.old_rank < 0) continue;
    for (int64_t i = f.rect.r0; i < f.rect.r1; ++i) {
      for (int64_t j = f.rect.c0; j < f.rect.c1; ++j) {
        const auto key = std::make_tuple(f.tensor, static_cast<int>(f.state), i, j);
        auto it = old_ranks[f.old_rank].find(key);
        // The source must hold what the map says it holds.
        EXPECT_TRUE(it != old_ranks[f.old_rank].end());
        if (it == old_ranks[f.old_rank].end()) continue;
        auto [pos, fresh] = (*new_ranks)[f.new_rank].emplace(key, it->second);
        EXPECT_TRUE(fresh) << "element delivered twice to rank " << f.new_rank;
      }
    }
  }
  return {};
}

std::vector<Storage> Fill(const Layout& L) {
  std::vector<Storage> out(L.world());
  for (int r = 0; r < L.world(); ++r) {
    for (size_t t = 0; t < L.tensors().size(); ++t) {
      for (State s : States()) {
        for (const Rect& rc : L.Held(r, static_cast<int>(t), s)) {
          for (int64_t i = rc.r0; i < rc.r1; ++i) {
            for (int64_t j = rc.c0; j < rc.c1; ++j) {
              out[r][{static_cast<int>(t), static_cast<int>(s), i, j}] = Value(static_cast<int>(t), static_cast<int>(s), i, j);
            }
          }
        }
      }
    }
  }
  return out;
}

TEST(ReshardProperty, RandomLayoutsTileConserveAndRoundTrip) {
  std::mt19937 rng(20261123);
  const topology::ClusterSpec cluster = TestCluster(4);
  ReshardOptions opt;
  opt.keep_all = true;
  opt.include_gradients = true;
  for (int iter = 0; iter < 60; ++iter) {
    const ModelSpec m = RandomModel(rng);
    ASSERT_TRUE(ValidateModel(m, "").ok()) << ValidateModel(m, "").message();
    const ParallelConfig a = RandomConfig(rng, m.layers), b = RandomConfig(rng, m.layers);
    SCOPED_TRACE(ConfigToString(a) + " -> " + ConfigToString(b) + " on " + std::to_string(iter));
    const Layout from = MakeLayout(m, a), to = MakeLayout(m, b);
    ExpectTiles(from);
    ExpectTiles(to);
    const int gpus = std::max(from.world(), to.world());
    const ReshardMap fwd = ComputeReshard(from, to, Identity(gpus, 4), cluster, opt);
    // Conservation: the new ranks end with exactly what their layout says,
    // each element once, and values are the consolidated tensor's.
    std::vector<Storage> old_ranks = Fill(from), new_ranks, back;
    Apply(fwd, old_ranks, &new_ranks, to.world());
    EXPECT_EQ(new_ranks, Fill(to));
    int64_t bytes = 0;
    for (const Fragment& f : fwd.fragments) bytes += f.bytes;
    EXPECT_EQ(bytes, fwd.total_bytes);
    EXPECT_EQ(static_cast<int64_t>(fwd.fragments.size()), fwd.fragment_count);
    // Round trip: old -> new -> old is the identity.
    const ReshardMap rev = ComputeReshard(to, from, Identity(gpus, 4), cluster, opt);
    Apply(rev, new_ranks, &back, from.world());
    EXPECT_EQ(back, old_ranks);
    if (::testing::Test::HasFailure()) break;
  }
}

// ---------------------------------------------------------------------------
// Known cases, numbers by hand.

TEST(ReshardKnown, Tp8ToTp4WithDataDoubling) {
  const ModelSpec m = Tiny(2);
  const Layout from = MakeLayout(m, Cfg(8, 1)), to = MakeLayout(m, Cfg(4, 2));
  ReshardOptions opt;
  opt.keep_rank = 1;
  const ReshardMap map = ComputeReshard(from, to, Identity(8, 8), TestCluster(8), opt);
  // Each new rank holds a quarter of every split matrix and all norms:
  // per layer 2·(192·64 + 64·64 + 256·64 + 64·256)/4 ... = 12288 elements
  // + 256 norm elements; embedding 1024·64/4 = 16384; final norm 128.
  const int64_t elems = 2 * (12288 + 256) + 16384 + 128;
  ASSERT_EQ(elems, 41600);
  const int64_t per_rank = elems * (2 + 4 + 4 + 4);  // bf16 param, fp32 master, m, v
  for (int64_t b : map.bytes_per_rank) EXPECT_EQ(b, per_rank);
  EXPECT_EQ(map.total_bytes, 8 * per_rank);
  // New rank 1 (tp index 1, data 0) needs QKV rows [48, 96): old tp ranks 2 and 3
  // held rows [48, 72) and [72, 96), all 64 columns.
  const int qkv = TensorIndex(to, "layers.0.qkv.weight");
  std::vector<std::pair<int, Rect>> got;
  for (const Fragment& f : map.fragments) {
    EXPECT_EQ(f.new_rank, 1);
    if (f.tensor == qkv && f.state == State::kParam) got.push_back({f.old_rank, f.rect});
  }
  std::sort(got.begin(), got.end(), [](auto& a, auto& b) { return a.second.r0 < b.second.r0; });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, 2);
  EXPECT_EQ(got[0].second, (Rect{48, 72, 0, 64}));
  EXPECT_EQ(got[1].first, 3);
  EXPECT_EQ(got[1].second, (Rect{72, 96, 0, 64}));
  // The projection is row-parallel: new rank 1 needs columns [16, 32) of all 64 rows.
  const int proj = TensorIndex(to, "layers.0.proj.weight");
  for (const Fragment& f : map.fragments) {
    if (f.tensor == proj && f.state == State::kParam) {
      EXPECT_EQ(f.rect.r0, 0);
      EXPECT_EQ(f.rect.r1, 64);
      EXPECT_TRUE(f.rect.c0 == 16 || f.rect.c0 == 24);
      EXPECT_EQ(f.rect.c1 - f.rect.c0, 8);
    }
  }
  // One node: nothing crosses the network. From a checkpoint: 4 bytes per
  // parameter element plus 8 for m and v.
  EXPECT_EQ(map.load.inter_node_bytes, 0);
  EXPECT_DOUBLE_EQ(map.load.checkpoint_bytes, 8.0 * elems * 12);
}

TEST(ReshardKnown, Zero3ShardCountChanges) {
  const ModelSpec m = Tiny(2);
  const Layout from = MakeLayout(m, Cfg(1, 4, 1, 3)), to = MakeLayout(m, Cfg(1, 8, 1, 3));
  EXPECT_EQ(from.PartitionOf(State::kParam), Partition::kPerTensor);
  ReshardOptions opt;
  opt.keep_rank = 3;
  const ReshardMap map = ComputeReshard(from, to, Identity(8, 8), TestCluster(8), opt);
  // QKV [192, 64] = 12288 elements: old slices of 3072, new of 1536. New rank 3
  // needs flat [4608, 6144) = rows [72, 96), which old rank 1 held ([3072, 6144)).
  const int qkv = TensorIndex(to, "layers.1.qkv.weight");
  const int fnorm = TensorIndex(to, "final_norm.bias");
  int seen = 0;
  for (const Fragment& f : map.fragments) {
    if (f.tensor == qkv) {
      ++seen;
      EXPECT_EQ(f.rect, (Rect{72, 96, 0, 64}));
      EXPECT_EQ(f.old_rank, 1);
    }
    if (f.tensor == fnorm) {
      // 64 elements: old slices of 16, new of 8; new rank 3 needs [24, 32) from old rank 1.
      EXPECT_EQ(f.rect, (Rect{24, 32, 0, 1}));
      EXPECT_EQ(f.old_rank, 1);
    }
  }
  EXPECT_EQ(seen, 4);  // param, master, exp_avg, exp_avg_sq
  // Every new rank holds 1/8 of everything (all sizes here divide by 8).
  const int64_t total = 2 * 49408 + 65536 + 128;
  for (int64_t b : map.bytes_per_rank) EXPECT_EQ(b, total / 8 * 14);
}

TEST(ReshardKnown, PipelineBoundariesMove) {
  // 7 layers: pp 2 splits [4, 3], pp 3 splits [3, 2, 2].
  const ModelSpec m = Tiny(7);
  const Layout from = MakeLayout(m, Cfg(1, 1, 2)), to = MakeLayout(m, Cfg(1, 1, 3));
  ReshardOptions opt;
  opt.keep_all = true;
  const ReshardMap map = ComputeReshard(from, to, Identity(3, 8), TestCluster(8), opt);
  std::map<int, std::pair<int, int>> layer_route;  // layer -> (new rank, old rank)
  for (const Fragment& f : map.fragments) {
    const int layer = map.tensors[f.tensor].layer;
    if (layer < 0) continue;
    auto [it, fresh] = layer_route.emplace(layer, std::make_pair(f.new_rank, f.old_rank));
    if (!fresh) {
      EXPECT_EQ(it->second, std::make_pair(f.new_rank, f.old_rank)) << layer;
    }
  }
  const std::map<int, std::pair<int, int>> expect = {
      {0, {0, 0}}, {1, {0, 0}}, {2, {0, 0}}, {3, {1, 0}}, {4, {1, 1}}, {5, {2, 1}}, {6, {2, 1}}};
  EXPECT_EQ(layer_route, expect);
  // Tied embedding: held by the first and last stage in both layouts.
  const int emb = TensorIndex(to, "embedding.weight");
  std::vector<int> needers;
  for (const Fragment& f : map.fragments) {
    if (f.tensor == emb && f.state == State::kParam) needers.push_back(f.new_rank);
  }
  EXPECT_EQ(needers, (std::vector<int>{0, 2}));
}

TEST(ReshardKnown, SurvivingReplicaMeansNoTraffic) {
  // tp 8 × dp 2 on two 8-GPU nodes; node 1 dies; tp 8 on node 0: every new rank
  // already holds its shard (ranks 0-7 were data replica 0).
  const ModelSpec m = Tiny(2);
  const Layout from = MakeLayout(m, Cfg(8, 2)), to = MakeLayout(m, Cfg(8, 1));
  Allocation a = Identity(8, 8);
  const ReshardMap map = ComputeReshard(from, to, a, TestCluster(8), ReshardOptions());
  EXPECT_EQ(map.load.local_bytes, map.total_bytes);
  EXPECT_EQ(map.load.peer_s, 0);
  EXPECT_GT(map.load.checkpoint_s, 0);
}

TEST(ReshardKnown, LostStageFallsBackToCheckpoint) {
  // pp 2 with one stage per node (gpn 1); node 1 (stage 1: layer 1, final norm)
  // is lost; the new pp 1 rank must read those from the checkpoint.
  const ModelSpec m = Tiny(2);
  const Layout from = MakeLayout(m, Cfg(1, 1, 2)), to = MakeLayout(m, Cfg(1, 1, 1));
  Allocation a;
  a.gpus_per_node = 1;
  a.new_gpus = {0};
  a.surviving = {0};
  ReshardOptions opt;
  opt.fs_GBps = 1;
  const ReshardMap map = ComputeReshard(from, to, a, TestCluster(1), opt);
  // Layer 1 (49408) + final norm (128) are gone: 4 bytes × 4 states each.
  EXPECT_DOUBLE_EQ(map.load.fallback_checkpoint_bytes, (49408.0 + 128) * 16);
  EXPECT_DOUBLE_EQ(map.load.peer_s, (49408.0 + 128) * 16 / 1e9);
  EXPECT_EQ(map.load.peer_bottleneck, "filesystem");
}

}  // namespace
}  // namespace paratune::planner
