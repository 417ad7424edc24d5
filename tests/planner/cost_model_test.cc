// Tests of the cost model against published numbers and properties
// (cost-model.md §2-4). Expected values are the papers', not the code's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "planner/cost_model.h"
#include "planner/memory.h"
#include "planner/request.h"
#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

using topology::Collective;

using testing::GptLike;

// --- ZeRO (Rajbhandari et al. 2020, Figure 1): Ψ = 7.5B, Nd = 64, fp16 mixed
// precision with K = 12 → 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for stages 0-3.
TEST(ModelStates, ZeroPaperFigure1) {
  const double psi = 7.5e9;
  const double expected_GB[4] = {120.0, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    ModelStates m = ModelStateBytes(psi, 64, stage, false, 2.0, 2.0);
    EXPECT_NEAR(m.total() / 1e9, expected_GB[stage], 0.06) << "stage " << stage;
  }
}

// --- Megatron-LM distributed optimizer, bytes per parameter
// (docs/source/distrib_optimizer.md): non-distributed vs 'x + y/d'.
TEST(ModelStates, MegatronDistributedOptimizerBytesPerParam) {
  struct Row { double pb, gb, nondist, rep, sharded; };
  const Row rows[] = {
      {2, 2, 20, 4, 16},  // fp16 params, fp16 grads (Megatron's fp32 grad copy in the optimizer)
      {2, 4, 18, 6, 12},  // bf16 params, fp32 grads
      {4, 4, 16, 8, 8},   // fp32 params, fp32 grads
  };
  for (const Row& r : rows) {
    for (int d : {1, 8, 64}) {
      ModelStates dist = ModelStateBytes(1.0, d, 0, true, r.pb, r.gb);
      EXPECT_DOUBLE_EQ(dist.total(), r.rep + r.sharded / d) << "pb=" << r.pb << " d=" << d;
    }
    if (r.gb == 4) {  // the fp16 row's 20 includes Megatron's fp32 grad copy, counted when distributed
      EXPECT_DOUBLE_EQ(ModelStateBytes(1.0, 8, 0, false, r.pb, r.gb).total(), r.nondist);
    }
  }
}

// --- Korthikanti et al. 2022, §4 activation memory per layer (fp16, 1-byte
// dropout masks, unfused attention).
class Korthikanti : public ::testing::Test {
 protected:
  ModelSpec m = GptLike(48, 6144, 64, 51200);  // the paper's 22B shape
  const double s = 2048, b = 4, h = 6144, a = 64;
  double Act(int t, bool sp, Recompute rc) {
    ParallelConfig c;
    c.gy = t;
    c.sp = sp;
    c.mbs = static_cast<int>(b);
    c.recompute = rc;
    return LayerActivationBytes(m, /*flash=*/false, 2.0, static_cast<int>(s), c);
  }
};

TEST_F(Korthikanti, NoParallelism) {
  EXPECT_DOUBLE_EQ(Act(1, false, Recompute::kNone), s * b * h * (34 + 5 * a * s / h));
}
TEST_F(Korthikanti, TensorParallel) {
  for (int t : {2, 4, 8}) {
    EXPECT_DOUBLE_EQ(Act(t, false, Recompute::kNone),
                     s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)));
  }
}
TEST_F(Korthikanti, TensorPlusSequenceParallel) {
  EXPECT_DOUBLE_EQ(Act(8, true, Recompute::kNone), s * b * h / 8 * (34 + 5 * a * s / h));
}
TEST_F(Korthikanti, SelectiveRecomputeWithSequenceParallel) {
  EXPECT_DOUBLE_EQ(Act(8, true, Recompute::kSelective), 34 * s * b * h / 8);
}
TEST_F(Korthikanti, FullRecompute) {
  EXPECT_DOUBLE_EQ(Act(8, false, Recompute::kFull), 2 * s * b * h);
}

// --- FLOPs (Korthikanti Eq. 7; Narayanan 2021 Eq. 3 with full recompute).
TEST(Flops, Gpt3_175bModelAndHardwareFlops) {
  ModelSpec m = GptLike(96, 12288, 96, 51200);
  const TrainingSpec t{.seq_len = 2048, .global_batch = 1536, .attention = Attention::kUnfused};
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  CostModel cm(m, t, *cluster, 1024);
  const double B = 1536, L = 96, s = 2048, h = 12288, V = 51200;
  const double eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(cm.ModelFlopsPerIteration() / eq7, 1.0, 1e-12);

  ParallelConfig c;
  c.gy = 8;
  c.pp = 16;
  c.gdata = 8;
  c.recompute = Recompute::kFull;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  Prediction p = cm.Predict(c);
  const double eq3 = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  EXPECT_NEAR(p.hardware_tflops_per_gpu / p.model_tflops_per_gpu, eq3 / eq7, 1e-9);
}

// --- Executed FLOPs: what the kernels run, from Eq. 7's terms. Per token
// forward, GPT-3 175B's linear layers and logits are 24·L·h² + 2·h·V and its
// attention core 4·s·h·L over the full square. Unfused attention computes the
// square: executed = model FLOPs. A fused causal kernel runs half of it
// (FlashAttention-2 §3.1), its backward 2.5× its forward; selective recompute
// reruns that forward, full recompute every forward but the logits.
TEST(Flops, ExecutedFlopsCountWhatTheKernelsRun) {
  const ModelSpec m = GptLike(96, 12288, 96, 51200);
  const double B = 1536, L = 96, s = 2048, h = 12288, V = 51200, tokens = B * s;
  const double linear = 24 * L * h * h + 2 * h * V, half_core = 2 * s * h * L;
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(std::string(m.FlopsConvention()), "full-square");
  const TrainingSpec unfused{.seq_len = 2048, .global_batch = 1536, .attention = Attention::kUnfused};
  const CostModel cu(m, unfused, *cluster, 1024);
  EXPECT_NEAR(cu.ExecutedFlopsPerIteration(Recompute::kNone) / cu.ModelFlopsPerIteration(), 1.0, 1e-12);
  const TrainingSpec fused{.seq_len = 2048, .global_batch = 1536, .attention = Attention::kFlash};
  const CostModel cf(m, fused, *cluster, 1024);
  const double none = tokens * (3 * linear + 3.5 * half_core);
  EXPECT_NEAR(cf.ExecutedFlopsPerIteration(Recompute::kNone) / none, 1.0, 1e-12);
  EXPECT_NEAR(cf.ExecutedFlopsPerIteration(Recompute::kSelective) / (none + tokens * half_core), 1.0,
              1e-12);
  EXPECT_NEAR(cf.ExecutedFlopsPerIteration(Recompute::kFull) /
                  (none + tokens * (linear - 2 * h * V + half_core)),
              1.0, 1e-12);
  // hfu is executed TFLOP/s over the peak; mfu stays on Eq. 7's count.
  ParallelConfig c;
  c.gy = 8;
  c.pp = 16;
  c.gdata = 8;
  c.recompute = Recompute::kSelective;
  ASSERT_EQ(cf.CheckRules(c), Reason::kOk);
  const Prediction p = cf.Predict(c);
  EXPECT_NEAR(p.hfu / p.mfu,
              cf.ExecutedFlopsPerIteration(Recompute::kSelective) / cf.ModelFlopsPerIteration(), 1e-9);
  EXPECT_NEAR(p.executed_tflops_per_gpu * 1e12 * p.iteration_time_s * 1024,
              cf.ExecutedFlopsPerIteration(Recompute::kSelective), 1e-6 * none);
  EXPECT_EQ(std::string(p.flops_convention), "full-square");
}

// At long sequences the counted full square outgrows what a fused causal
// kernel runs: at 64K tokens the executed FLOPs of a 7B-class model are well
// under the counted ones, and at 512 tokens within a few per cent of them.
TEST(Flops, ExecutedShareFallsWithSequenceLength) {
  const ModelSpec m = GptLike(32, 4096, 32, 50304);
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  auto ratio = [&](int seq) {
    const TrainingSpec t{.seq_len = seq, .global_batch = 8, .attention = Attention::kFlash};
    const CostModel cm(m, t, *cluster, 8);
    return cm.ExecutedFlopsPerIteration(Recompute::kNone) / cm.ModelFlopsPerIteration();
  };
  EXPECT_GT(ratio(512), 0.97);
  EXPECT_LT(ratio(65536), 0.80);
  EXPECT_LT(ratio(65536), ratio(8192));
}

// --- Megatron TP = t is AxoNN (gx = 1, gy = t, gz = 1): per layer 2 all-reduces
// forward and 2 backward, each of b·s·h elements (Narayanan 2021 §3.2; AxoNN's
// normal/transposed pair with X = 1).
TEST(Communication, MegatronTensorParallelIsAxonnGy) {
  ModelSpec m = GptLike(32, 4096, 32, 51200);
  const TrainingSpec t{.seq_len = 2048, .global_batch = 8};
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  const int tp = 8;
  CostModel cm(m, t, *cluster, tp);
  auto megatron = ParseConfig(Json::parse(R"({"tp": 8, "mbs": 1})"), "/config", tp);
  auto axonn = ParseConfig(Json::parse(R"({"gx": 1, "gy": 8, "gz": 1, "mbs": 1})"), "/config", tp);
  ASSERT_TRUE(megatron.ok() && axonn.ok());
  Prediction pm = cm.Predict(*megatron), pa = cm.Predict(*axonn);
  const double ar = topology::CollectiveSeconds(*cluster, Collective::kAllReduce, 1, tp,
                                                1.0 * 2048 * 4096 * 2);
  // Transformer layers only: the logits' gather adds 2 more all-reduces per micro-batch.
  const double expected = (4.0 * m.layers + 2.0) * ar * pm.micro_batches;
  EXPECT_NEAR(pm.breakdown.comm_y_s, expected, 1e-12 * expected);
  EXPECT_DOUBLE_EQ(pa.breakdown.comm_y_s, pm.breakdown.comm_y_s);
  EXPECT_DOUBLE_EQ(pa.iteration_time_s, pm.iteration_time_s);
  EXPECT_EQ(pm.breakdown.comm_x_s, 0.0);
  EXPECT_EQ(pm.breakdown.comm_z_s, 0.0);
}

// --- DeepSpeed's ZeRO-3 gathers in the calls its prefetch bucket makes
// (stage3_prefetch_bucket_size, 5e7 elements: a call takes parameters until it
// holds at least that many) and reduce-scatters per reduce bucket (5e8, flushed
// before it would overflow). A GPT-3 175B layer's weight matrices hold 151M to
// 604M elements each, so each is its own collective; GPT-2-small's hold 0.6M to
// 2.4M, so one call spans several layers.
// The exposed data-parallel seconds (comm_data) of `c` for `m` on `gpus`
// GPUs of the cluster preset `cluster` under framework spec `fw`.
double CommDataSeconds(const ModelSpec& m, const TrainingSpec& t, const char* cluster, int gpus,
                       const FrameworkSpec& fw, const ParallelConfig& c) {
  auto cl = topology::ClusterPreset(cluster);
  EXPECT_TRUE(cl.ok());
  return CostModel(m, t, *cl, gpus, fw).Predict(c).breakdown.comm_data_s;
}

class DeepSpeedZero3 : public ::testing::Test {
 protected:
  // The ZeRO-3 seconds (comm_data: no other data-parallel traffic under
  // ZeRO-3, nothing overlapped) of `m` on `gpus` A100s, with DeepSpeed's
  // buckets or with one gather and one reduce-scatter per layer.
  static double Zero3Seconds(const ModelSpec& m, int gpus, bool buckets) {
    const TrainingSpec t{.seq_len = 2048, .global_batch = gpus, .framework = Framework::kDeepSpeed};
    FrameworkSpec fw = FrameworkPreset(Framework::kDeepSpeed);
    EXPECT_EQ(fw.costs.zero3_gather_bucket_elements, 5e7);  // config.py:215
    EXPECT_EQ(fw.costs.zero3_reduce_bucket_elements, 5e8);  // config.py:113
    if (!buckets) fw.costs.zero3_gather_bucket_elements = fw.costs.zero3_reduce_bucket_elements = 0;
    ParallelConfig c;
    c.zero = 3;
    c.gdata = gpus;
    return CommDataSeconds(m, t, "dgx-a100-80gb", gpus, fw, c);
  }
};

TEST_F(DeepSpeedZero3, LargeLayersPayALatencyPerMatrix) {
  const ModelSpec gpt3 = GptLike(96, 12288, 96, 51200);
  // Four calls of a quarter of the layer cost more than one of all of it, by
  // the three extra latencies of each ring; rings grow with the data group,
  // so the extra share grows from 384 to 1,536 GPUs.
  double last_excess = 0;
  for (int gpus : {384, 768, 1536}) {
    const double one = Zero3Seconds(gpt3, gpus, false), four = Zero3Seconds(gpt3, gpus, true);
    const double excess = four / one - 1.0;
    EXPECT_GT(excess, last_excess) << gpus;
    last_excess = excess;
  }
  EXPECT_GT(last_excess, 0.0);
}

TEST_F(DeepSpeedZero3, SmallLayersShareACall) {
  const ModelSpec small = GptLike(12, 768, 12, 50257);
  // 7M elements a layer: a 5e7 gather call spans about seven layers, the 5e8
  // reduce bucket the whole model, so fewer latencies than one call a layer.
  EXPECT_LT(Zero3Seconds(small, 256, true), Zero3Seconds(small, 256, false));
}

// --- Megatron's DDP buckets (Megatron-LM d98e8a6): with --overlap-grad-reduce
// gradients reduce in buckets of max(4e7, 1e6 x dp) elements, launched as each
// completes in the backward; parameters enter buckets in backward order, so
// the embedding's bucket is reduced after the backward ends and, with
// --overlap-param-gather, gathered before the forward can start.
class MegatronDdpBuckets : public ::testing::Test {
 protected:
  // comm_data of a Llama-3-8B-shaped model on `gpus` H100s, pure data
  // parallel with the distributed optimizer and both overlaps on, a long
  // step (eight micro-batches of 8K tokens) for the overlap to hide behind.
  static double DataSeconds(int gpus, bool buckets, bool overlap = true) {
    const TrainingSpec t{.seq_len = 8192, .global_batch = 8 * gpus};
    FrameworkSpec fw = FrameworkPreset(Framework::kMegatron);
    EXPECT_EQ(fw.costs.ddp_bucket_min_elements, 4e7);       // training.py:2189
    EXPECT_EQ(fw.costs.ddp_bucket_elements_per_rank, 1e6);  // training.py:2189
    if (!buckets) fw.costs.ddp_bucket_min_elements = fw.costs.ddp_bucket_elements_per_rank = 0;
    ParallelConfig c;
    c.gdata = gpus;
    c.distributed_optimizer = true;
    c.overlap_grad_reduce = c.overlap_param_gather = overlap;
    return CommDataSeconds(GptLike(32, 4096, 32, 128256), t, "dgx-h100", gpus, fw, c);
  }
};

TEST_F(MegatronDdpBuckets, EmbeddingBucketIsExposed) {
  auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  for (int gpus : {64, 512}) {
    // At least the embedding's fp32 gradients reduce-scattered and its bf16
    // weights gathered with nothing to hide behind.
    const double embedding = 128256.0 * 4096.0;
    const double floor =
        topology::CollectiveSeconds(*cluster, Collective::kReduceScatter, 1, gpus, embedding * 4) +
        topology::CollectiveSeconds(*cluster, Collective::kAllGather, 1, gpus, embedding * 2);
    EXPECT_GE(DataSeconds(gpus, true), floor) << gpus;
    EXPECT_GT(DataSeconds(gpus, true), DataSeconds(gpus, false)) << gpus;
  }
}

TEST_F(MegatronDdpBuckets, NoOverlapKeepsOneBucket) {
  // Without --overlap-grad-reduce the buffer is one bucket (training.py:2193):
  // the bucket sizes change nothing.
  EXPECT_DOUBLE_EQ(DataSeconds(64, true, false), DataSeconds(64, false, false));
}

// --- ZeRO-3 shards the embedding too, outside the layers it gathers one by
// one: the embedding's gradients are the step's last and its weights the
// first needed, so one reduce-scatter and one gather of it stay exposed.
// Only that term depends on the vocabulary.
TEST(Zero3Embedding, ItsLastReduceAndFirstGatherAreExposed) {
  auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  const TrainingSpec t{.seq_len = 4096, .global_batch = 256};
  ParallelConfig c;
  c.zero = 3;
  c.gdata = 64;
  c.overlap_grad_reduce = c.overlap_param_gather = true;
  auto comm_data = [&](int vocab) {
    return CommDataSeconds(GptLike(32, 4096, 32, vocab), t, "dgx-h100", 64,
                           FrameworkPreset(t.framework), c);
  };
  auto exposed = [&](double vocab) {
    const double e = vocab * 4096;  // bf16 weights and gradients
    return topology::CollectiveSeconds(*cluster, Collective::kReduceScatter, 1, 64, e * 2) +
           topology::CollectiveSeconds(*cluster, Collective::kAllGather, 1, 64, e * 2);
  };
  const double grew = comm_data(128256) - comm_data(32000);
  EXPECT_NEAR(grew, exposed(128256) - exposed(32000), 1e-9);
  EXPECT_GT(grew, 0.0);
}

// --- Properties over many random valid configurations.
class Properties : public ::testing::Test {
 protected:
  std::vector<ParallelConfig> RandomConfigs(const CostModel& cm, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    auto pick = [&](std::initializer_list<int> v) {
      return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
    };
    std::vector<ParallelConfig> out;
    for (int tries = 0; tries < 200000 && static_cast<int>(out.size()) < n; ++tries) {
      ParallelConfig c;
      c.gx = pick({1, 1, 2});
      c.gy = pick({1, 2, 4, 8});
      c.gz = pick({1, 1, 2, 4});
      c.pp = pick({1, 2, 4});
      c.vpp = c.pp > 1 ? pick({1, 2}) : 1;
      c.cp = pick({1, 1, 2});
      c.cp_kind = static_cast<CpKind>(pick({0, 1}));
      c.mbs = pick({1, 2, 4});
      c.recompute = static_cast<Recompute>(pick({0, 1, 2}));
      c.sp = c.gx == 1 && c.gy > 1 && pick({0, 1});
      c.zero = pick({0, 1, 2, 3});
      c.oar = pick({0, 1});
      c.oag = pick({0, 1});
      c.overlap_grad_reduce = pick({0, 1});
      const int64_t rest = int64_t{c.gx} * c.gy * c.gz * c.pp * c.cp;
      if (cm.gpus() % rest) continue;
      c.gdata = static_cast<int>(cm.gpus() / rest);
      if (cm.CheckRules(c) == Reason::kOk) out.push_back(c);
    }
    return out;
  }
  ModelSpec model = GptLike(24, 2048, 16, 51200);
  TrainingSpec training{.seq_len = 2048, .global_batch = 256};
};

TEST_F(Properties, MoreBandwidthIsNeverSlower) {
  auto base = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(base.ok());
  topology::ClusterSpec fast = *base;
  fast.intra_node_GBps *= 2;
  fast.nic_GBps *= 2;
  CostModel slow_cm(model, training, *base, 64), fast_cm(model, training, fast, 64);
  auto configs = RandomConfigs(slow_cm, 300, 7);
  ASSERT_GT(configs.size(), 100u);
  for (const auto& c : configs) {
    EXPECT_LE(fast_cm.Predict(c).iteration_time_s, slow_cm.Predict(c).iteration_time_s * (1 + 1e-12))
        << ConfigToString(c);
  }
}

TEST_F(Properties, MoreMemoryNeverTurnsFitIntoNoFit) {
  auto small = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(small.ok());
  small->gpu.memory_GiB = 16;  // make some configurations fail
  topology::ClusterSpec big = *small;
  big.gpu.memory_GiB = 80;
  CostModel small_cm(model, training, *small, 64), big_cm(model, training, big, 64);
  int small_fit = 0, big_fit = 0;
  for (const auto& c : RandomConfigs(small_cm, 300, 11)) {
    const bool f_small = small_cm.Predict(c).fits, f_big = big_cm.Predict(c).fits;
    small_fit += f_small;
    big_fit += f_big;
    if (f_small) {
      EXPECT_TRUE(f_big) << ConfigToString(c);
    }
  }
  EXPECT_LT(small_fit, big_fit);  // the property was exercised
}

// The planner's verdict keeps the allocator's fragmentation slack and the
// headroom on top of the peak; whether the peak itself fits the device is the
// looser test a run that ran must pass. At headroom 0 the two differ exactly
// where the peak fits and the slack does not.
TEST_F(Properties, PlannerVerdictIsStricterThanThePeak) {
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  cluster->gpu.memory_GiB = 16;  // make some configurations fail
  TrainingSpec edge = training;
  edge.headroom = 0;
  CostModel cm(model, edge, *cluster, 64);
  int only_peak = 0, neither = 0;
  for (const auto& c : RandomConfigs(cm, 400, 5)) {
    const Prediction p = cm.Predict(c);
    const MemoryBreakdown& m = p.memory;
    if (p.fits) {
      EXPECT_TRUE(m.PeakFits()) << ConfigToString(c);
    }
    EXPECT_EQ(m.PeakFits(), m.peak_allocated_GiB <= m.capacity_GiB) << ConfigToString(c);
    if (!p.fits && m.PeakFits()) {
      ++only_peak;
      EXPECT_GT(m.reserved_GiB, m.capacity_GiB) << ConfigToString(c);
    }
    neither += !m.PeakFits();
  }
  EXPECT_GT(neither, 0);  // the capacity was exercised
  // The band between the two is 5 % of the allocation (Megatron's slack), so
  // a few hundred random configurations land some in it.
  EXPECT_GT(only_peak, 0);
}

TEST_F(Properties, BiggerMicroBatchNeverNeedsLessActivationMemory) {
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  CostModel cm(model, training, *cluster, 64);
  for (auto c : RandomConfigs(cm, 200, 3)) {
    c.mbs = 1;
    if (cm.CheckRules(c) != Reason::kOk) continue;
    double prev = cm.Predict(c).memory.activations_GiB;
    for (int mbs : {2, 4}) {
      c.mbs = mbs;
      if (cm.CheckRules(c) != Reason::kOk) break;
      double now = cm.Predict(c).memory.activations_GiB;
      EXPECT_GE(now, prev) << ConfigToString(c);
      prev = now;
    }
  }
}

TEST_F(Properties, BreakdownAddsUpToIterationTime) {
  auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  CostModel cm(model, training, *cluster, 64);
  for (const auto& c : RandomConfigs(cm, 300, 5)) {
    Prediction p = cm.Predict(c);
    const auto& b = p.breakdown;
    const double sum = b.compute_s + b.comm_x_s + b.comm_y_s + b.comm_z_s + b.comm_cp_s +
                       b.comm_data_s + b.comm_pp_s + b.bubble_s + b.optimizer_s + b.offload_s;
    EXPECT_NEAR(sum, p.iteration_time_s, 1e-9 * p.iteration_time_s) << ConfigToString(c);
    EXPECT_GT(p.mfu, 0.0);
    EXPECT_LT(p.mfu, 1.0);
    EXPECT_LE(b.recompute_s, b.compute_s);
  }
}

// The GPU's sustained fraction scales every GEMM's time by its inverse and
// nothing else: attention, element-wise kernels and memory are untouched.
TEST(GemmSustainedFraction, ScalesGemmsOnly) {
  ModelSpec m = GptLike(24, 4096, 32, 51200);
  const TrainingSpec t{.seq_len = 2048, .global_batch = 64};
  auto full = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->gpu.gemm_sustained_fraction, 1.0);
  topology::ClusterSpec half = *full;
  half.gpu.gemm_sustained_fraction = 0.5;
  ParallelConfig c;
  c.gy = 2;
  c.gdata = 4;
  c.mbs = 2;
  const CostModel a(m, t, *full, 8), b(m, t, half, 8);
  ASSERT_EQ(a.CheckRules(c), Reason::kOk);
  const CostModel::ComputeTerms ta = a.Compute(c), tb = b.Compute(c);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(tb.linear_fwd[i], 2 * ta.linear_fwd[i], 1e-12) << i;
  // The logits GEMMs double, the memory-bound loss beside them does not.
  EXPECT_GT(tb.logits_compute, ta.logits_compute);
  EXPECT_LT(tb.logits_compute, 2 * ta.logits_compute);
  EXPECT_EQ(tb.attn_fwd, ta.attn_fwd);
  EXPECT_EQ(tb.attn_bwd, ta.attn_bwd);
  EXPECT_EQ(tb.elem_fwd, ta.elem_fwd);
  EXPECT_EQ(a.Memory(c).reserved_GiB, b.Memory(c).reserved_GiB);
  EXPECT_GT(b.Predict(c).iteration_time_s, a.Predict(c).iteration_time_s);
}

// --- Rule violations name the field.
TEST(Rules, ViolationsNameFieldAndRule) {
  ModelSpec m = GptLike(24, 2048, 16, 51200);
  const TrainingSpec t{.global_batch = 64};
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  CostModel cm(m, t, *cluster, 64);
  struct Case { const char* config; Reason reason; };
  const Case cases[] = {
      {R"({"tp": 32, "dp": 2})", Reason::kHeadsNotDivisible},
      {R"({"tp": 8, "pp": 5, "dp": 1})", Reason::kWorldMismatch},
      {R"({"tp": 8, "pp": 16, "dp": 1})", Reason::kWorldMismatch},
      {R"({"tp": 4, "pp": 16, "dp": 1})", Reason::kLayersNotDivisible},
      {R"({"tp": 1, "dp": 64, "mbs": 1})", Reason::kOk},
      {R"({"tp": 1, "dp": 64, "mbs": 2})", Reason::kBatchNotDivisible},
      {R"({"tp": 1, "dp": 32, "cp": 2, "cp_kind": "ulysses", "mbs": 2})", Reason::kOk},
      {R"({"tp": 1, "dp": 64, "sp": true})", Reason::kSpNeedsTensor},
      {R"({"tp": 1, "dp": 64, "zero": 1, "distributed_optimizer": true})", Reason::kZeroConflict},
      {R"({"tp": 1, "dp": 64, "qwz": true})", Reason::kZeroConflict},
      {R"({"tp": 2, "pp": 4, "vpp": 2, "dp": 8, "mbs": 2})", Reason::kOk},
  };
  for (const Case& k : cases) {
    auto c = ParseConfig(Json::parse(k.config), "/config", 0);
    ASSERT_TRUE(c.ok()) << k.config << ": " << c.status().ToString();
    EXPECT_EQ(cm.CheckRules(*c), k.reason) << k.config;
    Status v = ValidateConfig(cm, *c);
    EXPECT_EQ(v.ok(), k.reason == Reason::kOk) << k.config;
    if (!v.ok()) {
      EXPECT_NE(v.message().find(ReasonField(k.reason)), std::string::npos);
    }
  }
}

TEST(Rules, ParseConfigRejectsUnknownKeyAndConflicts) {
  auto bad = ParseConfig(Json::parse(R"({"tp": 2, "tpp": 4})"), "/config", 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/config/tpp: unknown key"), std::string::npos);
  auto conflict = ParseConfig(Json::parse(R"({"tp": 2, "gy": 4})"), "/config", 8);
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("/config/gy"), std::string::npos);
  auto derived = ParseConfig(Json::parse(R"({"tp": 2, "pp": 2})"), "/config", 16);
  ASSERT_TRUE(derived.ok());
  EXPECT_EQ(derived->gdata, 4);
  auto underivable = ParseConfig(Json::parse(R"({"tp": 3})"), "/config", 16);
  EXPECT_FALSE(underivable.ok());
}

// Megatron-Core's --recompute-modules in every form a plan is read or written:
// the flag form, the table's "rc=selective(...)", and the JSON array.
TEST(Rules, RecomputeModulesReadAndWriteInEveryForm) {
  auto flag = ConfigStringToJson("tp=2,recompute=selective,recompute_modules=moe_act+layernorm");
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  auto c = ParseConfig(*flag, "/config", 8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->recompute_modules, kRcMoeAct | kRcLayerNorm);
  EXPECT_NE(ConfigToString(*c).find("rc=selective(layernorm+moe_act)"), std::string::npos);
  auto table = ConfigStringToJson(ConfigToString(*c));
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto again = ParseConfig(*table, "/config", 8);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *c);
  const OrderedJson j = ConfigToJson(*c);
  EXPECT_EQ(j["recompute_modules"], OrderedJson::parse(R"(["layernorm", "moe_act"])"));
  auto from_json = ParseConfig(Json::parse(j.dump()), "/config", 8);
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_EQ(*from_json, *c);
  // The default list is not written: documents of other plans are unchanged.
  ParallelConfig plain;
  plain.recompute = Recompute::kSelective;
  EXPECT_FALSE(ConfigToJson(plain).contains("recompute_modules"));
  auto unknown = ParseConfig(Json::parse(R"({"recompute": "selective", "recompute_modules": ["attn"]})"),
                             "/config", 8);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("/config/recompute_modules"), std::string::npos);
  auto not_selective = ParseConfig(Json::parse(R"({"recompute": "full", "recompute_modules": "mlp"})"),
                                   "/config", 8);
  EXPECT_FALSE(not_selective.ok());
}

}  // namespace
}  // namespace paratune::planner
