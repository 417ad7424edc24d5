// Tests for the mixture-of-experts terms (planner/moe.h, planner/cost/moe.cc):
// the dispatch volumes against DeepSeek-V3's published routing limits, the
// expert rows per rank, Megatron-Core's folding rules, and the direction of every
// MoE choice in the cost model (EP inside vs across nodes, DeepEP, the all-to-all
// overlap, expert memory per EP rank).
#include "planner/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "planner/cost_model.h"
#include "planner/framework.h"
#include "tests/planner/test_models.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

using testing::Preset;

// DeepSeek-V3 §2.1.2 / §3.2.2: 256 routed experts, top-8, over 8 nodes with
// node-limited routing to at most M = 4 nodes; uniform routing would reach
// 8·(1 − C(224, 8)/C(256, 8)) = 5.295 nodes.
TEST(MoeDispatch, DeepSeekV3NodeLimitedRouting) {
  EXPECT_NEAR(ExpectedNodesPerToken(256, 8, 8, 0, 0), 5.2947, 1e-4);
  // 8 groups, one per node, top-4 groups: exactly M = 4 nodes.
  EXPECT_DOUBLE_EQ(ExpectedNodesPerToken(256, 8, 8, 8, 4), 4.0);
  EXPECT_DOUBLE_EQ(ExpectedNodesPerToken(256, 8, 1, 8, 4), 1.0);
  // Two groups per node on 4 nodes: 4·(1 − C(6, 4)/C(8, 4)) = 4·(1 − 15/70).
  EXPECT_NEAR(ExpectedNodesPerToken(256, 8, 4, 8, 4), 4.0 * (1.0 - 15.0 / 70.0), 1e-12);
  // A group over two of 16 nodes: each of the 4 groups takes 2 of the token's 8
  // experts out of its 32, on 2 nodes of 16 experts: 4·2·(1 − C(16, 2)/C(32, 2)).
  EXPECT_NEAR(ExpectedNodesPerToken(256, 8, 16, 8, 4),
              4.0 * 2.0 * (1.0 - (16.0 * 15.0) / (32.0 * 31.0)), 1e-12);
  // top-1 reaches one node.
  EXPECT_NEAR(ExpectedNodesPerToken(128, 1, 16, 0, 0), 1.0, 1e-12);

  // Volumes: tokens × top-k × hidden × bytes for the all-to-all; one copy per
  // remote node for DeepEP. EP 64 over 8 nodes of 8 GPUs, 4096 tokens, FP8
  // dispatch (1 byte, DeepSeek-V3 §3.3.2).
  const ModelSpec v3 = Preset("deepseek-v3");
  const double tokens = 4096, h = 7168;
  const DispatchVolume a2a = DispatchBytes(v3, MoeDispatcher::kAllToAll, tokens, 64, 8, 1.0);
  EXPECT_DOUBLE_EQ(a2a.bytes, tokens * 8 * h * 63.0 / 64.0);
  EXPECT_DOUBLE_EQ(a2a.inter_node_bytes, tokens * 8 * h * 56.0 / 64.0);  // 7 of 8 nodes are remote
  const DispatchVolume deepep = DispatchBytes(v3, MoeDispatcher::kDeepEp, tokens, 64, 8, 1.0);
  // The preset's 8 groups, top-4 (one group per node here): 4 nodes per token,
  // 7/8 of them remote: 3.5·h per token instead of 7·h.
  EXPECT_DOUBLE_EQ(deepep.inter_node_bytes, tokens * h * 4.0 * 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(deepep.inter_node_bytes / a2a.inter_node_bytes, 0.5);
  // Inside one node there is nothing to deduplicate.
  const DispatchVolume intra = DispatchBytes(v3, MoeDispatcher::kAllToAll, tokens, 8, 8, 1.0);
  EXPECT_DOUBLE_EQ(intra.inter_node_bytes, 0.0);
  // The all-gather dispatcher moves every rank's tokens to every other rank.
  const DispatchVolume ag = DispatchBytes(v3, MoeDispatcher::kAllGather, tokens, 8, 8, 2.0);
  EXPECT_DOUBLE_EQ(ag.bytes, tokens * h * 2.0 * 7.0);
}

TEST(MoeDispatch, RowsPerExpertAndTokenDropping) {
  ModelSpec q = Preset("qwen3-235b-a22b");
  // 2048 tokens per GPU, top-8, EP 32: each GPU holds 4 of 128 experts and
  // receives, balanced, the 8·2048 copies the group sends it: 4096 per expert.
  MoeLayerShape s = MoeShape(q, 2048, 32, 1, 1.0);
  EXPECT_EQ(s.local_experts, 4);
  EXPECT_DOUBLE_EQ(s.copies, 2048.0 * 8);
  EXPECT_DOUBLE_EQ(s.rows_mean, 4096.0);
  EXPECT_DOUBLE_EQ(s.rows_max, 4096.0);
  // ETP 2 gathers the rows of two ranks and halves the width.
  s = MoeShape(q, 2048, 16, 2, 1.0);
  EXPECT_DOUBLE_EQ(s.rows_mean, 4096.0);
  EXPECT_DOUBLE_EQ(s.ffn_local, 768.0);
  // Skew: the slowest rank takes 1.3× the mean; a capacity factor of 1.1 caps it
  // and drops 1 − 1.1/1.3 of the routed copies.
  s = MoeShape(q, 2048, 32, 1, 1.3);
  EXPECT_DOUBLE_EQ(s.rows_max, 4096.0 * 1.3);
  q.capacity_factor = 1.1;
  s = MoeShape(q, 2048, 32, 1, 1.3);
  EXPECT_DOUBLE_EQ(s.rows_max, 4096.0 * 1.1);
  EXPECT_NEAR(s.dropped_fraction, 1.0 - 1.1 / 1.3, 1e-12);
}

struct Fixture {
  ModelSpec model;
  TrainingSpec training;
  topology::ClusterSpec cluster;
  int gpus;
  CostModel Make() const { return CostModel(model, training, cluster, gpus); }
};

// Qwen3-30B-A3B in bf16 at 4096 tokens on `gpus` GPUs of a cluster preset.
Fixture Qwen30On(const char* cluster, int gpus, int64_t global_batch = 1024) {
  Fixture f{Preset("qwen3-30b-a3b"), {}, *topology::ClusterPreset(cluster), gpus};
  f.training.seq_len = 4096;
  f.training.global_batch = global_batch;
  f.training.precision = topology::Precision::kBf16;
  return f;
}

Fixture Qwen30OnH100(int gpus) { return Qwen30On("dgx-h100", gpus); }

ParallelConfig Config(int tp, int pp, int vpp, int ep, int gpus) {
  ParallelConfig c;
  c.gy = tp;
  c.sp = tp > 1;
  c.pp = pp;
  c.vpp = vpp;
  c.ep = ep;
  c.gdata = gpus / (tp * pp);
  c.distributed_optimizer = true;
  c.overlap_grad_reduce = c.overlap_param_gather = true;
  return c;
}

// Megatron-Core's rules: experts % ep (arguments.py:1655-1658 @d98e8a64), the
// stage's ranks % (ep·etp) (parallel_state.py:874-884), no ep on a dense model.
TEST(MoeRules, MegatronFolding) {
  const Fixture f = Qwen30OnH100(64);
  const CostModel cm = f.Make();
  EXPECT_EQ(cm.CheckRules(Config(1, 2, 2, 32, 64)), Reason::kOk);
  EXPECT_EQ(cm.CheckRules(Config(1, 2, 2, 3, 64)), Reason::kExpertsNotDivisible);
  EXPECT_EQ(cm.CheckRules(Config(1, 2, 2, 64, 64)), Reason::kExpertGroupNotDivisible);  // 32 ranks
  ParallelConfig etp = Config(1, 2, 2, 16, 64);
  etp.etp = 2;
  EXPECT_EQ(cm.CheckRules(etp), Reason::kOk);
  EXPECT_EQ(etp.expert_data(), 1);
  etp.etp = 3;
  EXPECT_NE(cm.CheckRules(etp), Reason::kOk);

  Fixture dense = f;
  dense.model = Preset("llama3-70b");
  EXPECT_EQ(dense.Make().CheckRules(Config(1, 2, 2, 2, 64)), Reason::kExpertsNotDivisible);
  ParallelConfig overlap = Config(1, 2, 1, 32, 64);
  overlap.moe_a2a_overlap = true;  // pp > 1 without vpp: Megatron refuses it
  EXPECT_EQ(cm.CheckRules(overlap), Reason::kFrameworkUnsupported);
}

// torchtitan shards an MoE model with FSDP2: the experts over efsdp =
// dp_shard·cp·tp / ep, replicated over dp_replicate (parallel_dims.py:187-192,
// 282, 328 @b5bcd76c). Sharded twice as wide, every state halves; each MoE
// layer then gathers its experts and scatters their gradients, which a
// replicated layout does not.
TEST(MoeCost, TorchtitanShardsTheExpertsWithFsdp2) {
  Fixture f = Qwen30OnH100(64);
  f.training.framework = Framework::kTorchtitan;
  const CostModel cm = f.Make();
  auto hsdp = [](int gz, int gdata, int ep) {
    ParallelConfig c;
    c.gz = gz;
    c.gdata = gdata;
    c.ep = ep;
    ApplyFrameworkOverlaps(FrameworkPreset(Framework::kTorchtitan).support, &c);
    return c;
  };
  const ParallelConfig narrow = hsdp(16, 4, 8), wide = hsdp(32, 2, 8);
  ASSERT_EQ(cm.CheckRules(narrow), Reason::kOk) << cm.UnsupportedWhy(narrow);
  ASSERT_EQ(cm.CheckRules(wide), Reason::kOk) << cm.UnsupportedWhy(wide);
  EXPECT_EQ(wide.expert_data(), 8);
  EXPECT_EQ(cm.ExpertFsdpShards(narrow), 2);
  EXPECT_EQ(cm.ExpertFsdpShards(wide), 4);
  const MemoryBreakdown a = cm.Memory(narrow), b = cm.Memory(wide);
  // Norms and biases are the only unsharded parameters: within 2 %.
  EXPECT_NEAR(b.params_GiB / a.params_GiB, 0.5, 0.01);
  EXPECT_NEAR(b.optimizer_GiB / a.optimizer_GiB, 0.5, 0.01);
  // Megatron keeps its experts replicated over the expert-data group: no shards.
  Fixture mf = Qwen30OnH100(64);
  EXPECT_EQ(mf.Make().ExpertFsdpShards(wide), 1);
  // The experts' gathers show as Z traffic; without sharding there is none.
  const Prediction p = cm.Predict(wide);
  EXPECT_GT(p.breakdown.comm_z_s, 0.0);
  EXPECT_EQ(cm.Predict(hsdp(1, 64, 8)).breakdown.comm_z_s, 0.0);
  // Every second is accounted for at pp 1: no bubble.
  EXPECT_LT(p.breakdown.bubble_s, 1e-9 * p.iteration_time_s);
}

TEST(MoeCost, ExpertParallelChoicesMoveTheTermsTheRightWay) {
  const Fixture f = Qwen30OnH100(64);
  const CostModel cm = f.Make();
  // Expert memory falls with EP: 4× the EP, a quarter of the expert weights.
  ASSERT_EQ(cm.CheckRules(Config(1, 2, 2, 8, 64)), Reason::kOk);
  const Prediction ep8 = cm.Predict(Config(1, 2, 2, 8, 64));
  const Prediction ep32 = cm.Predict(Config(1, 2, 2, 32, 64));
  EXPECT_LT(ep32.memory.params_GiB, ep8.memory.params_GiB);
  // EP 8 stays inside an 8-GPU node (stride 1); EP 32 leaves it: more exposed
  // all-to-all per layer.
  EXPECT_GT(ep8.breakdown.comm_ep_s, 0.0);
  EXPECT_GT(ep32.breakdown.comm_ep_s, ep8.breakdown.comm_ep_s);
  // DeepEP's node deduplication and the all-to-all overlap each cut it.
  ParallelConfig deepep = Config(1, 2, 2, 32, 64);
  deepep.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_LT(cm.Predict(deepep).breakdown.comm_ep_s, ep32.breakdown.comm_ep_s);
  ParallelConfig overlap = Config(1, 2, 2, 32, 64);
  overlap.moe_a2a_overlap = true;
  ASSERT_EQ(cm.CheckRules(overlap), Reason::kOk);
  EXPECT_LT(cm.Predict(overlap).breakdown.comm_ep_s, ep32.breakdown.comm_ep_s);
  // A skewed router makes the slowest rank slower.
  Fixture skewed = f;
  skewed.training.moe_skew = 1.5;
  EXPECT_GT(skewed.Make().Predict(Config(1, 2, 2, 32, 64)).iteration_time_s, ep32.iteration_time_s);
  // The breakdown still adds up.
  const TimeBreakdown& b = ep32.breakdown;
  const double sum = b.compute_s + b.comm_x_s + b.comm_y_s + b.comm_z_s + b.comm_cp_s +
                     b.comm_ep_s + b.comm_data_s + b.comm_pp_s + b.bubble_s + b.optimizer_s +
                     b.offload_s + b.host_s;
  EXPECT_NEAR(sum, ep32.iteration_time_s, 1e-9 * ep32.iteration_time_s);
}

// The host issues a local expert's kernels after the dispatch has blocked it
// (Megatron-Core's MoE README: the CPU-launch bottleneck, cured by a larger
// micro-batch, fewer local experts or a full-iteration CUDA graph): each of
// those moves the exposed host time the right way, and Megatron-Core refuses a
// full-iteration graph of a dropless dispatch other than HybridEP's.
TEST(MoeCost, ExpertLaunchesBindSmallExpertsAtSmallMicroBatches) {
  const Fixture f = Qwen30On("dgx-b200", 8, 512);
  const CostModel cm = f.Make();
  ASSERT_GT(cm.framework().costs.moe_host_us_per_local_expert, 0.0);
  ParallelConfig ep8 = Config(1, 1, 1, 8, 8);
  ep8.moe_dispatcher = MoeDispatcher::kHybridEp;
  ASSERT_EQ(cm.CheckRules(ep8), Reason::kOk);
  const Prediction mbs1 = cm.Predict(ep8);
  EXPECT_GT(mbs1.breakdown.host_s, 0.0);
  // 16 local experts' launches: the same per micro-batch, a quarter as many micro-batches.
  ParallelConfig big = ep8;
  big.mbs = 4;
  const Prediction mbs4 = cm.Predict(big);
  EXPECT_LT(mbs4.breakdown.host_s, mbs1.breakdown.host_s);
  EXPECT_LT(mbs4.iteration_time_s, mbs1.iteration_time_s);
  // Twice the expert parallelism, half the local experts: half the launches.
  Fixture f16 = f;
  f16.gpus = 16;
  f16.training.global_batch = 1024;
  const CostModel cm16 = f16.Make();
  ParallelConfig ep16 = Config(1, 1, 1, 16, 16);
  ep16.moe_dispatcher = MoeDispatcher::kHybridEp;
  ParallelConfig ep8of16 = Config(1, 1, 1, 8, 16);
  ep8of16.moe_dispatcher = MoeDispatcher::kHybridEp;
  EXPECT_EQ(cm16.Compute(ep16).moe_expert_host * 2, cm16.Compute(ep8of16).moe_expert_host);
  // A full-iteration CUDA graph issues nothing from the host.
  ParallelConfig graphed = ep8;
  graphed.cuda_graphs = true;
  ASSERT_EQ(cm.CheckRules(graphed), Reason::kOk);
  EXPECT_EQ(cm.Predict(graphed).breakdown.host_s, 0.0);
  EXPECT_LT(cm.Predict(graphed).iteration_time_s, mbs1.iteration_time_s);
  graphed.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_EQ(cm.CheckRules(graphed), Reason::kFrameworkUnsupported);
  EXPECT_NE(cm.Explain(cm.CheckRules(graphed), graphed).find("hybridep"), std::string::npos)
      << cm.Explain(cm.CheckRules(graphed), graphed);
}

// An EP group larger than the NVLink domain splits into equal domain-local
// parts: EP 128 on 256 GPUs of NVL72 racks runs as two parts of 64 over NVLink
// (not a 72-GPU group that 256 does not divide), and costs more than EP 64,
// which one rack holds whole.
TEST(MoeCost, ExpertGroupLargerThanTheNvlinkDomain) {
  const CostModel cm = Qwen30On("gb200-nvl72", 256).Make();
  const ParallelConfig ep128 = Config(1, 1, 1, 128, 256);
  const ParallelConfig ep64 = Config(1, 1, 1, 64, 256);
  ASSERT_EQ(cm.CheckRules(ep128), Reason::kOk);
  ASSERT_EQ(cm.CheckRules(ep64), Reason::kOk);
  const double a2a128 = cm.Compute(ep128).moe_a2a_fwd, a2a64 = cm.Compute(ep64).moe_a2a_fwd;
  EXPECT_TRUE(std::isfinite(a2a128));
  EXPECT_GT(a2a128, a2a64);
}

// The MoE layers each pipeline stage holds are counted as ModelSpec::
// is_moe_layer says, layer by layer over the stage's span: DeepSeek-V3's three
// dense layers first, and a model with MoE on every second layer, over pipeline
// depths, interleaving and Megatron's embedding/loss-layer accounting.
TEST(MoeCost, MoeLayersPerStageCountLayerByLayer) {
  auto dsv3 = ModelPreset("deepseek-v3");
  ASSERT_TRUE(dsv3.ok());
  ModelSpec every_second = *dsv3;
  every_second.first_dense_layers = 1;
  every_second.moe_layer_step = 2;
  const auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  int checked = 0;
  for (const ModelSpec& m : {*dsv3, every_second}) {
    TrainingSpec t;
    t.seq_len = 4096;
    t.global_batch = 4096;
    const CostModel cm(m, t, *cluster, 1024);
    auto count = [&](int begin, int end) {
      int n = 0;
      for (int i = begin; i < end; ++i) n += m.is_moe_layer(i) ? 1 : 0;
      return n;
    };
    for (int pp : {1, 2, 4, 8, 16}) {
      for (int emb : {0, 1}) {
        ParallelConfig c = Config(1, pp, 1, 8, 1024);
        c.pp_embedding_layers = emb;
        c.pp_loss_layers = emb;
        const CostModel::ComputeTerms terms = cm.Compute(c);
        const StageLayers st = cm.Stages(c);
        if (pp == 1) {
          EXPECT_EQ(terms.moe_layers_first, m.moe_layer_count());
          continue;
        }
        EXPECT_EQ(terms.moe_layers_first, count(0, st.first)) << pp;
        EXPECT_EQ(terms.moe_layers_last, count(m.layers - st.last, m.layers)) << pp;
        int middle = 0;
        for (int k = 1; k + 1 < pp; ++k) {
          const int begin = st.first + (k - 1) * st.middle;
          middle = std::max(middle, count(begin, begin + st.middle));
        }
        EXPECT_EQ(terms.moe_layers_middle, middle) << pp;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 16);
}

// Model FLOPs: the active-parameter count of Megatron-Core's formula, so MFU of an
// MoE model is not inflated by its idle experts.
TEST(MoeCost, ModelFlopsCountActiveExperts) {
  const Fixture f = Qwen30OnH100(64);
  const CostModel cm = f.Make();
  const double tokens = 1024.0 * 4096;
  EXPECT_DOUBLE_EQ(cm.ModelFlopsPerIteration(), 3.0 * f.model.ForwardFlopsPerToken(4096) * tokens);
  // ~6 × 3.3B active parameters per token plus attention: far below 6 × 30.5B.
  EXPECT_LT(cm.ModelFlopsPerIteration() / tokens, 6.0 * 5e9);
  EXPECT_GT(cm.ModelFlopsPerIteration() / tokens, 6.0 * 3e9);
}

// DeepEP's normal internode kernels (deepseek-ai/DeepEP@c18eabd README.md:15-22,
// H800 with one ~50 GB/s CX7 NIC per GPU): 43, 58 and 51 GB/s at EP 16, 32 and
// 64 on 8-GPU nodes, counted over every destination node of a token, the
// sender's own included (tests/test_internode.py: 256 experts, top-8, one group
// per node, top-min(nodes, 4) groups). The share of those nodes that is remote
// is what the NIC carries; Megatron's preset holds that share of 50 GB/s.
TEST(MoeDispatch, DeepEpNicFractionFollowsItsBenchmark) {
  const FrameworkCosts& costs = FrameworkPreset(Framework::kMegatron).costs;
  const struct {
    int nodes;
    double logical_GBps;
  } kReadme[] = {{2, 43}, {4, 58}, {8, 51}};
  for (const auto& r : kReadme) {
    SCOPED_TRACE(r.nodes);
    const int groups = r.nodes, group_topk = std::min(r.nodes, 4);
    const double reached = ExpectedNodesPerToken(256, 8, r.nodes, groups, group_topk);
    // The sender's node is among them with probability reached / nodes.
    const double own = reached / r.nodes;
    const double nic_GBps = r.logical_GBps * (reached - own) / reached;
    EXPECT_NEAR(DedupNicFraction(costs, r.nodes), nic_GBps / 50.0, 0.01);
  }
  // torchtitan's deepep/hybridep backends run the same kernels.
  const FrameworkCosts& titan = FrameworkPreset(Framework::kTorchtitan).costs;
  for (int nodes : {2, 3, 4, 8, 16}) {
    EXPECT_DOUBLE_EQ(DedupNicFraction(titan, nodes), DedupNicFraction(costs, nodes)) << nodes;
  }
  // Between the points, linear in log2(nodes); the ends hold beyond them.
  EXPECT_DOUBLE_EQ(DedupNicFraction(costs, 1), DedupNicFraction(costs, 2));
  EXPECT_DOUBLE_EQ(DedupNicFraction(costs, 64), DedupNicFraction(costs, 8));
  const double mid = DedupNicFraction(costs, 3);
  EXPECT_GT(mid, DedupNicFraction(costs, 2));
  EXPECT_LT(mid, DedupNicFraction(costs, 4));
}

// A DeepEP/HybridEP dispatch whose EP group leaves the NVLink domain carries
// the framework's band for it beside the GPU's; inside the domain, or with
// the all-to-all dispatcher, the band is the GPU's alone.
TEST(MoeBand, DedupDispatchAcrossDomainsWidensTheBand) {
  const double feature = FrameworkPreset(Framework::kMegatron).dedup_across_domains_uncertainty;
  ASSERT_GT(feature, 0);
  const CostModel h100 = Qwen30OnH100(32).Make();
  auto band = [](const CostModel& cm, ParallelConfig c, MoeDispatcher d) {
    c.moe_dispatcher = d;
    const Prediction p = cm.Predict(c);
    return std::make_pair(p.uncertainty, p.feature_band);
  };
  const ParallelConfig across = Config(1, 1, 1, 16, 32);  // two 8-GPU nodes
  const ParallelConfig inside = Config(1, 1, 1, 8, 32);
  const auto [plain, none] = band(h100, across, MoeDispatcher::kAllToAll);
  EXPECT_EQ(none, 0);
  for (MoeDispatcher d : {MoeDispatcher::kDeepEp, MoeDispatcher::kHybridEp}) {
    const auto [wide, f] = band(h100, across, d);
    EXPECT_DOUBLE_EQ(f, feature);
    EXPECT_NEAR(wide, std::hypot(plain, feature), 1e-12);
    EXPECT_EQ(band(h100, inside, d).second, 0);
    EXPECT_DOUBLE_EQ(band(h100, inside, d).first, plain);
  }
  // EP 64 inside one NVL72 rack's NVLink domain.
  const CostModel nvl72 = Qwen30On("gb200-nvl72", 64).Make();
  EXPECT_EQ(band(nvl72, Config(1, 1, 1, 64, 64), MoeDispatcher::kDeepEp).second, 0);
  // The group parts the cost model prices: 16 on 8-GPU nodes is two parts of 8.
  EXPECT_EQ(EpRanksPerDomain(16, 1, 8), 8);
  EXPECT_EQ(EpRanksPerDomain(128, 1, 72), 64);
  EXPECT_EQ(EpRanksPerDomain(12, 2, 8), 4);
  EXPECT_EQ(EpRanksPerDomain(7, 1, 8), 7);
  EXPECT_EQ(EpRanksPerDomain(14, 1, 8), 7);
}

// DeepEP's deduplication cuts the bytes that cross nodes, but across two nodes
// its kernels reach 0.43 of the NIC against the all-to-all's 0.75 (the
// cluster's alltoall_efficiency): its layer time falls by less than its
// volume. From four nodes on (0.87) it falls by more.
TEST(MoeDispatch, DeepEpSavesLessThanItsVolumeAcrossTwoNodes) {
  const ModelSpec q = Preset("qwen3-30b-a3b");
  auto time_ratio = [](int gpus) {
    const CostModel cm = Qwen30OnH100(gpus).Make();
    ParallelConfig c = Config(1, 1, 1, gpus, gpus);
    const double a2a = cm.Compute(c).moe_a2a_fwd;
    c.moe_dispatcher = MoeDispatcher::kDeepEp;
    return cm.Compute(c).moe_a2a_fwd / a2a;
  };
  auto volume_ratio = [&](int gpus) {
    const double tokens = 4096;
    return DispatchBytes(q, MoeDispatcher::kDeepEp, tokens, gpus, 8, 2.0).inter_node_bytes /
           DispatchBytes(q, MoeDispatcher::kAllToAll, tokens, gpus, 8, 2.0).inter_node_bytes;
  };
  EXPECT_GT(time_ratio(16), volume_ratio(16));
  EXPECT_LT(time_ratio(32), volume_ratio(32));
}

}  // namespace
}  // namespace paratune::planner
