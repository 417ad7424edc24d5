// Host memory, ZeRO-Offload / ZeRO-Infinity and FPDT's offloaded chunks
// (docs/model.md "Host memory and offload"). Expected values are the papers'
// statements and properties, not the code's output.
#include <gtest/gtest.h>

#include <vector>

#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/memory.h"
#include "planner/search.h"
#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// GPT-style without dropout, 1024-token context.
ModelSpec GptLike(int layers, int hidden, int heads, int vocab) {
  return testing::GptLike(layers, hidden, heads, vocab, /*dropout=*/false, /*max_seq_len=*/1024);
}

// The node of the ZeRO-Offload paper's single-GPU experiments (Ren et al.
// 2021, §6.1): a DGX-2 with 16 V100-32GB, 1.5 TB of host memory and two Xeon
// Platinum 8168 (6 channels of DDR4-2666 each: 2 × 128 GB/s), V100s on PCIe
// 3.0 x16 to the host.
topology::ClusterSpec Dgx2() {
  topology::ClusterSpec c;
  c.name = "dgx-2";
  c.gpu = *topology::GpuPreset("v100-32gb");
  c.gpus_per_node = 16;
  c.intra_node_fabric = "nvswitch";
  c.intra_node_GBps = 120;
  c.nics_per_node = 8;
  c.nic_GBps = 12.5;
  c.host_memory_GiB = 1536;
  c.host_memory_GBps = 256;
  return c;
}

TrainingSpec DeepSpeedTraining(int seq, int64_t batch) {
  TrainingSpec t;
  t.seq_len = seq;
  t.global_batch = batch;
  t.precision = topology::Precision::kFp16;
  t.main_grads_fp32 = false;
  t.framework = Framework::kDeepSpeed;
  return t;
}

// --- ZeRO-Offload §4 (Figure 5 / Table 1): the fp16 parameters stay on the
// GPU (2 bytes per parameter); the fp32 master weights, momentum and variance
// (12 bytes) and the gradients (fp16 in the paper's schedule, 2 bytes; fp32 in
// DeepSpeed's implementation, 4) live on the CPU.
TEST(Offload, StatesSplitAsZeroOffloadPaper) {
  const double psi = 13e9;
  const ModelStates all = ModelStateBytes(psi, 1, 2, false, 2.0, 2.0);
  EXPECT_DOUBLE_EQ(all.total(), 16.0 * psi);  // Ψ(2 + 2 + 12), ZeRO's K = 12
  const OffloadedStates o = OffloadStateBytes(all, psi, 1, 2, true, false);
  EXPECT_DOUBLE_EQ(o.gpu.total(), 2.0 * psi);
  EXPECT_GE(o.host_bytes, 14.0 * psi);  // the paper's 12 + 2
  EXPECT_LE(o.host_bytes, 16.0 * psi);  // DeepSpeed's fp32 gradient partition
  // ZeRO-1 keeps its full gradients on the GPU until the boundary.
  const ModelStates s1 = ModelStateBytes(psi, 8, 1, false, 2.0, 2.0);
  const OffloadedStates o1 = OffloadStateBytes(s1, psi, 8, 1, true, false);
  EXPECT_DOUBLE_EQ(o1.gpu.total(), 4.0 * psi);  // 2 B params + 2 B gradients
  EXPECT_DOUBLE_EQ(o1.host_bytes, (12.0 + 4.0) * psi / 8);
  // ZeRO-Infinity (offload_param, stage 3) leaves no model state on the GPU.
  const ModelStates s3 = ModelStateBytes(psi, 8, 3, false, 2.0, 2.0);
  const OffloadedStates inf = OffloadStateBytes(s3, psi, 8, 3, true, true);
  EXPECT_DOUBLE_EQ(inf.gpu.total(), 0.0);
  EXPECT_GE(inf.host_bytes, s3.total());
  // Offloading nothing moves nothing.
  const OffloadedStates none = OffloadStateBytes(s3, psi, 8, 3, false, false);
  EXPECT_DOUBLE_EQ(none.gpu.total(), s3.total());
  EXPECT_DOUBLE_EQ(none.host_bytes, 0.0);
}

// --- ZeRO-Offload (abstract, §6.2.1): a 13B-parameter model trains on a
// single 32 GB V100 with ZeRO-Offload, while without it PyTorch tops out near
// 1.4B. The 13B model: 40 layers of hidden 5120 (GPT-3 13B's shape). The claim
// is about what runs at all, so no safety headroom is kept here.
TEST(Offload, ThirteenBillionOnOneV100) {
  const ModelSpec m13 = GptLike(40, 5120, 40, 50257);
  ASSERT_GT(m13.ParamCount(), 12.5e9);
  TrainingSpec t = DeepSpeedTraining(1024, 8);
  t.headroom = 0;
  const CostModel cm(m13, t, Dgx2(), 1);
  ParallelConfig c;
  c.zero = 2;  // ZeRO-Offload's single-GPU schedule runs ZeRO-2's gradient path
  c.recompute = Recompute::kFull;
  c.mbs = 1;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const Prediction no = cm.Predict(c);
  EXPECT_FALSE(no.fits);
  EXPECT_EQ(no.reason, Reason::kOutOfMemory);
  c.offload_optimizer = true;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const Prediction yes = cm.Predict(c);
  EXPECT_TRUE(yes.fits) << yes.memory.reserved_GiB << " of " << yes.memory.usable_GiB << " GiB";
  EXPECT_NEAR(yes.memory.params_GiB * kGiB, 2.0 * m13.ParamCount(), 0.05 * m13.ParamCount());
  EXPECT_EQ(yes.memory.optimizer_GiB, 0.0);
  EXPECT_EQ(yes.memory.grads_GiB, 0.0);
  // The host holds at least the paper's 14 bytes per parameter.
  EXPECT_GE(yes.memory.host_per_gpu_GiB * kGiB, 14.0 * m13.ParamCount() * 0.95);

  // Without offload the limit brackets the paper's 1.4B: a 1.3B model (24 ×
  // 2048) fits the same GPU, a 2.6B one (32 × 2560) does not.
  ParallelConfig d;
  d.recompute = Recompute::kFull;
  d.mbs = 1;
  const ModelSpec m13b = GptLike(24, 2048, 16, 50257);
  const ModelSpec m26b = GptLike(32, 2560, 20, 50257);
  ASSERT_LT(m13b.ParamCount(), 1.4e9);
  ASSERT_GT(m26b.ParamCount(), 2.5e9);
  EXPECT_TRUE(CostModel(m13b, t, Dgx2(), 1).Predict(d).fits);
  EXPECT_FALSE(CostModel(m26b, t, Dgx2(), 1).Predict(d).fits);
}

// --- CPU Adam is DRAM-bound: its time scales with the parameters the node's
// ranks update and inversely with the host's bandwidth.
TEST(Offload, CpuAdamScalesWithParametersPerHost) {
  EXPECT_DOUBLE_EQ(CpuAdamSeconds(2e9, 200), 2.0 * CpuAdamSeconds(1e9, 200));
  EXPECT_DOUBLE_EQ(CpuAdamSeconds(1e9, 400), 0.5 * CpuAdamSeconds(1e9, 200));
  // DeepSpeed's CPU Adam reaches a fraction of peak DRAM bandwidth, no more.
  EXPECT_GT(kCpuAdamDramEfficiency, 0.2);
  EXPECT_LT(kCpuAdamDramEfficiency, 0.8);

  // In the cost model: llama3-8b under ZeRO-3 with the optimizer offloaded. On
  // one 8-GPU node every rank's partition is updated by that node's CPUs
  // (8 × Ψ/8 = Ψ per host); on two nodes each host updates Ψ/2: half the time.
  const ModelSpec m = *ModelPreset("llama3-8b");
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-a100-80gb");
  TrainingSpec t;
  t.seq_len = 4096;
  t.framework = Framework::kDeepSpeed;
  ParallelConfig c;
  c.zero = 3;
  c.offload_optimizer = true;
  c.recompute = Recompute::kFull;
  double opt_s[2];
  for (int i = 0; i < 2; ++i) {
    const int gpus = 8 << i;
    t.global_batch = gpus;
    const CostModel cm(m, t, cl, gpus);
    c.gdata = gpus;
    ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
    opt_s[i] = cm.Predict(c).breakdown.optimizer_s;
  }
  EXPECT_NEAR(opt_s[1], 0.5 * opt_s[0], 1e-9 * opt_s[0]);
  // More DRAM bandwidth is never slower.
  topology::ClusterSpec fast = cl;
  fast.host_memory_GBps *= 2;
  t.global_batch = 8;
  c.gdata = 8;
  EXPECT_LT(CostModel(m, t, fast, 8).Predict(c).breakdown.optimizer_s, opt_s[0]);
}

// --- Property: offloading never makes a configuration faster when it fits
// without offload too (the CPU step, the copies and the fetches only add).
TEST(Offload, NeverFasterThanNoOffloadWhenBothFit) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  int compared = 0;
  for (const char* cluster : {"dgx-a100-80gb", "dgx-h100", "perlmutter", "alps"}) {
    const topology::ClusterSpec cl = *topology::ClusterPreset(cluster);
    for (Framework fw : {Framework::kDeepSpeed, Framework::kMegatronDeepSpeed}) {
      for (int gpus : {8, 16}) {
        for (int seq : {2048, 8192}) {
          TrainingSpec t;
          t.seq_len = seq;
          t.global_batch = 4 * gpus;
          t.framework = fw;
          const CostModel cm(m, t, cl, gpus);
          for (int zero = 1; zero <= 3; ++zero) {
            for (int cp : {1, 2}) {
              for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
                for (int mbs : {1, 2}) {
                  ParallelConfig c;
                  c.cp = cp;
                  c.cp_kind = CpKind::kUlysses;
                  c.gdata = gpus / cp;
                  c.zero = zero;
                  c.recompute = rc;
                  c.mbs = mbs;
                  ApplyFrameworkOverlaps(cm.framework().support, &c);
                  if (cm.CheckRules(c) != Reason::kOk) continue;
                  const Prediction base = cm.Predict(c);
                  for (int off = 1; off <= (zero == 3 ? 2 : 1); ++off) {
                    ParallelConfig o = c;
                    o.offload_optimizer = true;
                    o.offload_param = off == 2;
                    ASSERT_EQ(cm.CheckRules(o), Reason::kOk);
                    const Prediction p = cm.Predict(o);
                    // Offload only ever lowers GPU memory.
                    EXPECT_LE(p.memory.reserved_GiB, base.memory.reserved_GiB + 1e-9);
                    if (!(p.fits && base.fits)) continue;
                    ++compared;
                    EXPECT_GE(p.iteration_time_s, base.iteration_time_s)
                        << cluster << " " << ConfigToString(o);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// FPDT over 4 ranks with ZeRO-3, the optimizer and parameters offloaded to the
// host and full recompute, with the framework's overlaps.
ParallelConfig FpdtOnFour(const FrameworkSupport& support) {
  ParallelConfig c;
  c.cp = 4;
  c.cp_kind = CpKind::kFpdt;
  c.zero = 3;
  c.offload_optimizer = c.offload_param = true;
  c.recompute = Recompute::kFull;
  ApplyFrameworkOverlaps(support, &c);
  return c;
}

// --- Host memory is accounted per node, and it binds: FPDT at long sequences
// keeps all but two chunks of every layer's activations in host memory.
TEST(Offload, HostMemoryIsCheckedPerNodeAndNamedAsBinding) {
  const ModelSpec m = *ModelPreset("fpdt-8b");
  TrainingSpec t;
  t.seq_len = 1 << 20;  // 1M tokens: 16 FPDT chunks of 64K
  t.global_batch = 1;
  t.framework = Framework::kMegatronDeepSpeed;
  const ParallelConfig c = FpdtOnFour(FrameworkPreset(t.framework).support);
  // Perlmutter's GPU nodes have 256 GB of DDR4; a DGX A100 (320 GB system) 1 TB.
  const CostModel perl(m, t, *topology::ClusterPreset("perlmutter"), 4);
  const CostModel dgx(m, t, *topology::ClusterPreset("dgx-a100-40gb"), 4);
  ASSERT_EQ(perl.CheckRules(c), Reason::kOk);
  const Prediction p = perl.Predict(c);
  const Prediction d = dgx.Predict(c);
  // Same work per rank: the same host bytes per GPU; four ranks per node.
  EXPECT_DOUBLE_EQ(p.memory.host_per_gpu_GiB, d.memory.host_per_gpu_GiB);
  EXPECT_DOUBLE_EQ(p.memory.host_node_GiB, 4.0 * p.memory.host_per_gpu_GiB);
  EXPECT_DOUBLE_EQ(p.memory.host_usable_GiB, 256.0 * (1 - t.headroom));
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.reason, Reason::kOutOfHostMemory);
  EXPECT_STREQ(p.memory.Binding(), "host_memory");
  EXPECT_TRUE(d.fits);
  EXPECT_EQ(d.reason, Reason::kOk);
  // The host side grows with the sequence; the GPU side does not hold it.
  TrainingSpec t2 = t;
  t2.seq_len = 1 << 19;
  const Prediction half = CostModel(m, t2, *topology::ClusterPreset("perlmutter"), 4).Predict(c);
  EXPECT_LT(half.memory.host_node_GiB, p.memory.host_node_GiB);

  // A cluster without host figures offers no offload: such a config is refused.
  topology::ClusterSpec bare = *topology::ClusterPreset("dgx-a100-40gb");
  bare.host_memory_GiB = bare.host_memory_GBps = 0;
  const Prediction b = CostModel(m, t, bare, 4).Predict(c);
  EXPECT_EQ(b.reason, Reason::kOutOfHostMemory);
}

// --- Rules: offload_optimizer needs ZeRO >= 1, offload_param ZeRO-3; only
// frameworks with ZeRO-Offload express them.
TEST(Offload, RulesAndFrameworks) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  TrainingSpec t;
  t.global_batch = 8;
  t.framework = Framework::kDeepSpeed;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-a100-80gb");
  const CostModel ds(m, t, cl, 8);
  ParallelConfig c;
  c.gdata = 8;
  c.offload_optimizer = true;
  EXPECT_EQ(ds.CheckRules(c), Reason::kZeroConflict);
  c.zero = 2;
  EXPECT_EQ(ds.CheckRules(c), Reason::kOk);
  c.offload_param = true;
  EXPECT_EQ(ds.CheckRules(c), Reason::kZeroConflict);
  c.zero = 3;
  EXPECT_EQ(ds.CheckRules(c), Reason::kOk);
  for (Framework f : {Framework::kMegatron, Framework::kFsdp, Framework::kAxonn}) {
    EXPECT_FALSE(FrameworkPreset(f).support.offload_optimizer) << FrameworkName(f);
  }
  EXPECT_TRUE(FrameworkPreset(Framework::kDeepSpeed).support.offload_param);
  EXPECT_TRUE(FrameworkPreset(Framework::kMegatronDeepSpeed).support.offload_optimizer);
}

// --- FPDT's chunks: DeepSpeed asserts seq % chunk == 0; a 2M-token sequence
// (Yao et al. 2024: 8B model, 2M tokens, 4 A100-40GB) is 32 chunks of 64K. The
// model is fpdt-8b: Llama-3-8B's shape with the GeLU MLP FPDT's FFN runs.
TEST(Offload, FpdtTwoMillionTokensOnFourA100s) {
  const ModelSpec m = *ModelPreset("fpdt-8b");
  TrainingSpec t;
  t.seq_len = 2 * 1024 * 1024;
  t.global_batch = 1;
  t.framework = Framework::kMegatronDeepSpeed;
  const CostModel cm(m, t, *topology::ClusterPreset("dgx-a100-40gb"), 4);
  const ParallelConfig c = FpdtOnFour(cm.framework().support);
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const Prediction p = cm.Predict(c);
  EXPECT_TRUE(p.fits) << p.memory.reserved_GiB << " / " << p.memory.usable_GiB << " GiB, host "
                      << p.memory.host_node_GiB << " / " << p.memory.host_usable_GiB;
  // "over 55 % MFU" at 2M tokens (Yao et al. 2024, abstract).
  EXPECT_GT(p.mfu, 0.45);
  EXPECT_LT(p.mfu, 0.75);
  // Without offloading the model states the GPU cannot hold them.
  ParallelConfig no = c;
  no.offload_optimizer = no.offload_param = false;
  EXPECT_EQ(cm.Predict(no).reason, Reason::kOutOfMemory);
  // Efficiency against length: attention's s² work grows faster than the
  // per-chunk overheads, so MFU does not fall as the sequence grows (the
  // paper's sweep from 256K to 2M on the same 4 GPUs rises).
  double last_mfu = 0;
  for (int64_t seq = 256 * 1024; seq <= 2 * 1024 * 1024; seq *= 2) {
    TrainingSpec ts = t;
    ts.seq_len = static_cast<int>(seq);
    const Prediction q = CostModel(m, ts, *topology::ClusterPreset("dgx-a100-40gb"), 4).Predict(c);
    EXPECT_TRUE(q.fits) << seq;
    EXPECT_GE(q.mfu, last_mfu) << seq;
    last_mfu = q.mfu;
  }
  // One token more than 32 chunks is not a whole number of chunks.
  TrainingSpec odd = t;
  odd.seq_len += 1024;
  EXPECT_EQ(CostModel(m, odd, *topology::ClusterPreset("dgx-a100-40gb"), 4).CheckRules(c),
            Reason::kSeqNotDivisible);
}

// --- The search offers offload as a dimension: it picks it only where the
// GPU cannot hold the states, and never in place of a faster fitting config.
TEST(Offload, SearchChoosesOffloadOnlyWhenNeeded) {
  const ModelSpec m = *ModelPreset("llama3-8b");
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-a100-80gb");
  TrainingSpec t;
  t.seq_len = 4096;
  t.global_batch = 64;
  t.framework = Framework::kMegatronDeepSpeed;
  const CostModel cm(m, t, cl, 8);
  SearchOptions opt;
  opt.top_k = 5;
  const SearchResult r = Search(cm, opt).RunAll();
  ASSERT_FALSE(r.top.empty());
  EXPECT_FALSE(r.top.front().config.offload_optimizer);
  // Pinned on, every answer offloads and is slower than the free winner.
  opt.fixed = {{"offload_optimizer", "true"}};
  const SearchResult pinned = Search(cm, opt).RunAll();
  ASSERT_FALSE(pinned.top.empty());
  for (const Candidate& c : pinned.top) EXPECT_TRUE(c.config.offload_optimizer);
  EXPECT_GT(pinned.top.front().prediction.iteration_time_s,
            r.top.front().prediction.iteration_time_s);
}

}  // namespace
}  // namespace paratune::planner
