// The memory terms taken from framework sources (planner/memory.h,
// planner/cost/memory.cc), each against a figure computed by hand from the
// source's rule (docs/model.md, "Memory ledger terms").
#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/memory.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelSpec Llama31_8B() {
  ModelSpec m;
  m.name = "llama-3.1-8b";
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.gated_ffn = true;
  m.tied_embeddings = false;
  m.norm = "rmsnorm";
  return m;
}

// h = 1024, 8 heads, GeLU f = 4096, RMSNorm, no biases: one block holds
// 4h² + 2hf + 2h = 12,584,960 parameters; the embedding 32,000 × 1024.
ModelSpec Small(int layers, bool tied) {
  ModelSpec m;
  m.name = "small";
  m.layers = layers;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  m.gated_ffn = false;
  m.tied_embeddings = tied;
  m.norm = "rmsnorm";
  return m;
}

// torchtitan's per-op SAC on Llama-3.1-8B, b = 2, s = 8192, no TP: T = 16384
// tokens; saved: the block input (h), wq (h), wv (kv = 1024), the SDPA output
// (h), w1 (f), w2 (h) at 2 bytes, and the fp32 log-sum-exp of 32 heads:
// 2·16384·(4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4·2·32·8192.
TEST(MemoryTermsTest, PerOpSacKeepsEveryOtherMatmulAndTheAttentionOutput) {
  ParallelConfig c;
  c.mbs = 2;
  EXPECT_DOUBLE_EQ(PerOpSacActivationBytes(Llama31_8B(), 2.0, 8192, c), 1042284544.0);
}

// GeLU block (wq, wk, wv, wo, w1, w2: the 1st, 3rd, 5th saved), h = 1024,
// 8 heads, s = 1024, b = 1, TP 2 with SP: input 2·1024·1024/2, wq and wv
// 2·1024·1024/2 each, w1 2·1024·4096/2, SDPA 2·1024·1024/2 + 4·4·1024, the
// two reduce-scatter outputs 2·2·1024·1024/2.
TEST(MemoryTermsTest, PerOpSacUnderTensorAndSequenceParallelism) {
  ParallelConfig c;
  c.gy = 2;
  c.sp = true;
  const double expected = 4 * 1048576.0 + 4194304.0 + 16384.0 + 2097152.0;
  EXPECT_DOUBLE_EQ(PerOpSacActivationBytes(Small(4, false), 2.0, 1024, c), expected);
}

// The torchtitan preset's selective recompute is the per-op policy.
TEST(MemoryTermsTest, TorchtitanSelectiveIsPerOp) {
  TrainingSpec t;
  t.seq_len = 8192;
  t.global_batch = 16;
  t.framework = Framework::kTorchtitan;
  const CostModel cm(Llama31_8B(), t, *topology::ClusterPreset("dgx-h100"), 8);
  ParallelConfig c;
  c.gz = 8;
  c.mbs = 2;
  c.recompute = Recompute::kSelective;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  EXPECT_DOUBLE_EQ(cm.Compute(c).act_bytes[static_cast<int>(Recompute::kSelective)], 1042284544.0);
}

// FSDP2 under PP (torchtitan: reshard_after_forward = not pp_enabled): the
// first of 2 stages, sharded over 4, holds its 2 blocks and the embedding
// gathered, 2 × 12,584,960 + 32,768,000 = 57,937,920 parameters, at 2 bytes
// (bf16) plus their unsharded fp32 gradients (4 bytes), and no longer the
// 2 gathered blocks in flight (2 × 2 bytes) and one block's unsharded
// gradient (4 bytes) of per-block resharding:
// 57,937,920 × 6 − 12,584,960 × 8 = 246,947,840 bytes more.
TEST(MemoryTermsTest, Fsdp2UnderPipelineKeepsStagesUnsharded) {
  TrainingSpec t;
  t.seq_len = 1024;
  t.global_batch = 8;
  t.framework = Framework::kTorchtitan;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-h100");
  FrameworkSpec off = FrameworkPreset(Framework::kTorchtitan);
  ASSERT_EQ(off.costs.pp_keeps_unsharded, 1.0);
  off.costs.pp_keeps_unsharded = 0;
  const CostModel on_cm(Small(4, false), t, cl, 8);
  const CostModel off_cm(Small(4, false), t, cl, 8, off);
  ParallelConfig c;
  c.pp = 2;
  c.gz = 4;
  ASSERT_EQ(on_cm.CheckRules(c), Reason::kOk);
  const double diff =
      (on_cm.Memory(c).first_stage_allocated_GiB - off_cm.Memory(c).first_stage_allocated_GiB) * kGiB;
  EXPECT_NEAR(diff, 246947840.0, 1.0);
}

// FSDP2's mixed precision holds each parameter's shard as the fp32 master
// (sharded_params_are_master) beside its fp32 reduced gradient and Adam's two
// fp32 moments: 16 bytes per parameter over the shards, every parameter of the
// model once (the layers, the embedding and output tables and the one final
// norm). Llama-3.1-8B over dp_shard 8: 16 / 8 = 2 bytes per parameter.
TEST(MemoryTermsTest, Fsdp2ShardsHoldEveryParameterOnce) {
  TrainingSpec t;
  t.seq_len = 8192;
  t.global_batch = 8;
  t.framework = Framework::kTorchtitan;
  const CostModel cm(Llama31_8B(), t, *topology::ClusterPreset("dgx-h100"), 8);
  ParallelConfig c;
  c.gz = 8;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const MemoryBreakdown b = cm.Memory(c);
  const double states =
      (b.params_GiB + b.grads_GiB + b.optimizer_GiB + b.optimizer_step_GiB) * kGiB;
  EXPECT_NEAR(states / static_cast<double>(Llama31_8B().ParamCount()), 2.0, 1e-12);
}

// torchtitan's FSDP2 shards over dp_shard × cp, its fsdp mesh, and applies
// FSDP whenever either is above 1 (pytorch/torchtitan b5bcd76
// torchtitan/distributed/parallel_dims.py:225-228, 281, 645). On 8 GPUs a
// rank of dp_shard 4 × cp 2, or of cp 8 alone, holds the 1/8 shard dp_shard 8
// holds (above). Replicated over cp (the preset without fsdp_over_cp) the
// cp-8 rank holds every state unsharded: bf16 weights, fp32 gradients, the
// fp32 master and moments, 2 + 4 + 12 = 18 bytes a parameter, nine times 2.
TEST(MemoryTermsTest, TorchtitanShardsOverDataShardTimesCp) {
  TrainingSpec t;
  t.seq_len = 8192;
  t.global_batch = 8;
  t.framework = Framework::kTorchtitan;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-h100");
  FrameworkSpec replicated = FrameworkPreset(Framework::kTorchtitan);
  ASSERT_TRUE(replicated.support.fsdp_over_cp);
  replicated.support.fsdp_over_cp = false;
  const CostModel cm(Llama31_8B(), t, cl, 8);
  const CostModel over_cp_off(Llama31_8B(), t, cl, 8, replicated);
  auto states = [](const CostModel& m, const ParallelConfig& c) {
    const MemoryBreakdown b = m.Memory(c);
    return b.params_GiB + b.grads_GiB + b.optimizer_GiB + b.optimizer_step_GiB;
  };
  ParallelConfig shard8;
  shard8.gz = 8;
  ParallelConfig shard4_cp2;
  shard4_cp2.gz = 4;
  shard4_cp2.cp = 2;
  ParallelConfig cp8;
  cp8.cp = 8;
  for (const ParallelConfig& c : {shard8, shard4_cp2, cp8})
    ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  EXPECT_DOUBLE_EQ(states(cm, shard4_cp2), states(cm, shard8));
  EXPECT_DOUBLE_EQ(states(cm, cp8), states(cm, shard8));
  EXPECT_NEAR(states(over_cp_off, cp8) / states(cm, cp8), 9.0, 1e-9);
}

// Megatron's interleaved 1F1B: the last of 4 ranks warms up (vpp − 1)·pp = 4
// model chunks before its first backward and runs a fifth: 5 chunks of 1 layer
// each (8 layers on pp·vpp = 8), where 1F1B holds one micro-batch of its 2
// layers. Full recompute keeps the layer input, 2·1024·1024 bytes per layer:
// (5 − 2) × 2,097,152 = 6,291,456 bytes more on the last rank.
TEST(MemoryTermsTest, InterleavedLastRankHoldsItsWarmupChunks) {
  TrainingSpec t;
  t.seq_len = 1024;
  t.global_batch = 8;
  const CostModel cm(Small(8, false), t, *topology::ClusterPreset("dgx-h100"), 4);
  ParallelConfig c;
  c.pp = 4;
  c.recompute = Recompute::kFull;
  ParallelConfig v = c;
  v.vpp = 2;
  ASSERT_EQ(cm.CheckRules(v), Reason::kOk);
  const double diff =
      (cm.Memory(v).last_stage_allocated_GiB - cm.Memory(c).last_stage_allocated_GiB) * kGiB;
  EXPECT_NEAR(diff, 6291456.0, 1.0);
}

// Megatron-Core's MoE layer under FP8 (experts.py:273-284): Transformer
// Engine keeps the grouped FC1 and FC2 inputs as 1-byte copies, as the dense
// linears' inputs. Two MoE layers of 8 experts (f_e = 1024, top-2), s = 1024,
// b = 1, no TP or EP: 2048 routed rows. Per layer FP8 saves a byte on the QKV
// and projection inputs (2·1024·1024) and on the rows' FC1 and FC2 inputs
// (2048·(1024 + 1024)); the dense MLP's FC1/FC2 inputs were never the MoE
// layer's, so their byte is not saved twice: 2 × 6,291,456 bytes.
TEST(MemoryTermsTest, Fp8KeepsTheExpertInputsAsOneByteCopies) {
  ModelSpec m = Small(2, false);
  m.experts = 8;
  m.top_k = 2;
  m.moe_ffn_hidden = 1024;
  TrainingSpec bf16;
  bf16.seq_len = 1024;
  bf16.global_batch = 8;
  TrainingSpec fp8 = bf16;
  fp8.precision = topology::Precision::kFp8;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-h100");
  const CostModel bf16_cm(m, bf16, cl, 8), fp8_cm(m, fp8, cl, 8);
  ParallelConfig c;
  c.gdata = 8;
  ASSERT_EQ(fp8_cm.CheckRules(c), Reason::kOk);
  const double diff =
      (bf16_cm.Memory(c).activations_GiB - fp8_cm.Memory(c).activations_GiB) * kGiB;
  EXPECT_NEAR(diff, 2 * 6291456.0, 1.0);
}

// DeepSpeed's BF16_Optimizer (Megatron-DeepSpeed, bf16, ZeRO-1, fp32 gradient
// accumulation) keeps the whole rank's gradients in fp32: 4 layers ×
// 12,584,960 + the tied 32,000 × 1024 table + the final norm (1024) =
// 83,108,864 parameters × 4 bytes, not sharded over the 4 data ranks.
TEST(MemoryTermsTest, Bf16OptimizerKeepsFp32GradientsUnsharded) {
  TrainingSpec t;
  t.seq_len = 1024;
  t.global_batch = 8;
  t.framework = Framework::kMegatronDeepSpeed;
  const CostModel cm(Small(4, true), t, *topology::ClusterPreset("dgx-h100"), 4);
  ParallelConfig c;
  c.gdata = 4;
  c.zero = 1;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  EXPECT_NEAR(cm.Memory(c).grads_GiB * kGiB, 83108864.0 * 4.0, 83108864.0 * 4.0 * 1e-4);
}

// Megatron-Core's TE layer (fused attention, RMSNorm, SwiGLU, no dropout)
// keeps per token per layer e·(4h + 2q + 2kv + 3f) plus the fp32 softmax
// statistics 4a: the input and norm output of each LayerNormLinear, Q, K, V
// and the attention output, FC1's output and FC2's input
// (NVIDIA/Megatron-LM@d98e8a6 with TE 4329ff84; docs/model.md "Recompute
// modules"). Llama-3.1-8B: 2·(16384 + 8192 + 2048 + 43008) + 128 = 139,392
// bytes, before the two 4-byte rsigma the ledger leaves out.
TEST(MemoryTermsTest, MegatronLayerKeepsItsTensorsAtTheirWidths) {
  ParallelConfig c;
  const double T = 8192;
  EXPECT_DOUBLE_EQ(LayerActivationBytesNoRecompute(Llama31_8B(), true, 2.0, 8192, c) / T, 139392.0);
}

// What each module's recompute frees (per token, Llama-3.1-8B, t = 1): mlp
// the FC1 norm output, FC1's two outputs and FC2's input, e·(h + 3f) =
// 94,208; core_attn the softmax statistics, 4a = 128; layernorm nothing, the
// dense spec fusing its norms into the linears; mla_up_proj nothing without
// MLA. With MLA (DeepSeek-V3 widths: 128 heads, nope 128, rope 64, v 128)
// mla_up_proj frees Q, K and V: e·a·(2·192 + 128) = 131,072, and layernorm
// the input norm's output e·h = 14,336.
TEST(MemoryTermsTest, RecomputeModulesFreeTheirOwnTensors) {
  ParallelConfig c;
  const double T = 4096;
  const auto dense = DenseRecomputeSavings(Llama31_8B(), true, 2.0, 4096, c);
  auto at = [](const std::array<double, kNumRecomputeModules>& a, RecomputeModule m) {
    return a[static_cast<size_t>(std::countr_zero(unsigned{m}))];
  };
  EXPECT_DOUBLE_EQ(at(dense, kRcMlp) / T, 2.0 * (4096 + 3 * 14336));
  EXPECT_DOUBLE_EQ(at(dense, kRcCoreAttn) / T, 4.0 * 32);
  EXPECT_EQ(at(dense, kRcLayerNorm), 0.0);
  EXPECT_EQ(at(dense, kRcMlaUpProj), 0.0);
  ModelSpec mla = Llama31_8B();
  mla.hidden = 7168;
  mla.heads = mla.kv_heads = 128;
  mla.q_lora_rank = 1536;
  mla.kv_lora_rank = 512;
  mla.qk_nope_head_dim = 128;
  mla.qk_rope_head_dim = 64;
  mla.v_head_dim = 128;
  const auto m = DenseRecomputeSavings(mla, true, 2.0, 4096, c);
  EXPECT_DOUBLE_EQ(at(m, kRcMlaUpProj) / T, 2.0 * 128 * (192 + 192 + 128));
  EXPECT_DOUBLE_EQ(at(m, kRcLayerNorm) / T, 2.0 * 7168);
}

// Megatron's default selective list is core_attn (transformer_config.py:1940):
// a plan that names it explicitly keeps what plain selective keeps, and adding
// mlp frees its share of every layer in flight and costs the MLP's forward.
TEST(MemoryTermsTest, SelectiveModulesPriceTheirMemoryAndTime) {
  TrainingSpec t;
  t.seq_len = 4096;
  t.global_batch = 8;
  const CostModel cm(Llama31_8B(), t, *topology::ClusterPreset("dgx-h100"), 8);
  ParallelConfig c;
  c.gdata = 8;
  c.recompute = Recompute::kSelective;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const Prediction attn = cm.Predict(c);
  ParallelConfig mlp = c;
  mlp.recompute_modules = kRcCoreAttn | kRcMlp;
  ASSERT_EQ(cm.CheckRules(mlp), Reason::kOk);
  const Prediction with_mlp = cm.Predict(mlp);
  const double freed = 32 * 4096 * 2.0 * (4096 + 3 * 14336);  // every layer, one micro-batch
  EXPECT_NEAR((attn.memory.activations_GiB - with_mlp.memory.activations_GiB) * kGiB, freed,
              freed * 1e-9);
  EXPECT_GT(with_mlp.iteration_time_s, attn.iteration_time_s);
  // Modules a model does not have are refused with Megatron's reason.
  ParallelConfig moe_act = c;
  moe_act.recompute_modules = kRcMoeAct;
  EXPECT_NE(cm.CheckRules(moe_act), Reason::kOk);
  ParallelConfig up = c;
  up.recompute_modules = kRcMlaUpProj;
  EXPECT_NE(cm.CheckRules(up), Reason::kOk);
  // A framework without per-module recompute refuses a module list.
  TrainingSpec tt = t;
  tt.framework = Framework::kTorchtitan;
  const CostModel titan(Llama31_8B(), tt, *topology::ClusterPreset("dgx-h100"), 8);
  ParallelConfig fs = mlp;
  fs.gdata = 1;
  fs.gz = 8;
  EXPECT_NE(titan.CheckRules(fs), Reason::kOk);
}

// Megatron's distributed optimizer with 16-bit gradients: its docs count
// 4 + 16/d bytes per parameter (docs/source/distrib_optimizer.md), of which
// the fp32 copy of the gradient shard (4/d) exists only while the optimizer
// steps (distrib_optimizer.py:2792). The backward's peak holds 4 + 12/d and
// the activations; with almost no activations the peak is the step's.
TEST(MemoryTermsTest, OptimizerStepCopyNeverMeetsTheActivations) {
  const ModelStates s = ModelStateBytes(1.0, 8, 0, true, 2.0, 2.0);
  EXPECT_DOUBLE_EQ(s.total(), 4.0 + 16.0 / 8);
  EXPECT_DOUBLE_EQ(s.step_bytes, 4.0 / 8);
  TrainingSpec t;
  t.seq_len = 32;
  t.global_batch = 8;
  t.main_grads_fp32 = false;
  const CostModel cm(Small(4, true), t, *topology::ClusterPreset("dgx-h100"), 8);
  ParallelConfig c;
  c.gdata = 8;
  c.distributed_optimizer = true;
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);
  const MemoryBreakdown m = cm.Memory(c);
  ASSERT_GT(m.optimizer_step_GiB, m.activations_GiB);
  EXPECT_TRUE(m.peak_at_optimizer_step);
  EXPECT_NEAR(m.total_GiB,
              m.params_GiB + m.grads_GiB + m.optimizer_GiB + m.buffers_GiB + m.optimizer_step_GiB,
              1e-12);
  // A long sequence moves the peak to the backward, without the step's copy.
  t.seq_len = 8192;
  const CostModel long_cm(Small(4, true), t, *topology::ClusterPreset("dgx-h100"), 8);
  const MemoryBreakdown l = long_cm.Memory(c);
  EXPECT_FALSE(l.peak_at_optimizer_step);
  EXPECT_NEAR(l.total_GiB, l.params_GiB + l.grads_GiB + l.optimizer_GiB + l.buffers_GiB + l.activations_GiB,
              1e-12);
}

// torchtitan's ChunkedLossWrapper holds one chunk's logits and the hidden
// states' fp32 gradient (loss.py:383-402, 501-544): with 8 chunks the loss
// keeps a eighth of the whole-logit bytes plus 4·T·h.
TEST(MemoryTermsTest, ChunkedLossHoldsOneChunksLogits) {
  TrainingSpec t;
  t.seq_len = 8192;
  t.global_batch = 8;
  t.framework = Framework::kTorchtitan;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-h100");
  TrainingSpec chunked = t;
  chunked.loss_chunks = 8;
  const CostModel whole(Llama31_8B(), t, cl, 8), eighth(Llama31_8B(), chunked, cl, 8);
  ParallelConfig c;
  c.gz = 8;
  ASSERT_EQ(whole.CheckRules(c), Reason::kOk);
  const double T = 8192, V = 128256, h = 4096;
  const double live = whole.framework().costs.loss_live_bytes_per_logit;
  const double saved = live * T * V * (1.0 - 1.0 / 8) - 4.0 * T * h;
  EXPECT_NEAR((whole.Memory(c).activations_GiB - eighth.Memory(c).activations_GiB) * kGiB, saved,
              saved * 1e-9);
}

// Under torch.compile with the loss left eager (torchtitan 9dec370's
// train.py:136-138) the loss holds the preset's eager bytes per logit, the
// fp32 upcast and log-softmax, not the compiled figure.
TEST(MemoryTermsTest, EagerLossUnderCompileHoldsTheEagerBytes) {
  TrainingSpec t;
  t.seq_len = 8192;
  t.global_batch = 8;
  t.framework = Framework::kTorchtitan;
  t.compile = true;
  const topology::ClusterSpec cl = *topology::ClusterPreset("dgx-h100");
  TrainingSpec eager_loss = t;
  eager_loss.compile_loss = false;
  const CostModel compiled(Llama31_8B(), t, cl, 8), eager(Llama31_8B(), eager_loss, cl, 8);
  ParallelConfig c;
  c.gz = 8;
  ASSERT_EQ(compiled.CheckRules(c), Reason::kOk);
  const FrameworkCosts& fc = compiled.framework().costs;
  ASSERT_GT(fc.loss_live_bytes_per_logit, fc.loss_live_bytes_per_logit_compiled);
  const double T = 8192, V = 128256;
  const double more =
      (fc.loss_live_bytes_per_logit - fc.loss_live_bytes_per_logit_compiled) * T * V;
  EXPECT_NEAR((eager.Memory(c).activations_GiB - compiled.Memory(c).activations_GiB) * kGiB, more,
              more * 1e-9);
}

// The GEMM workspaces PyTorch and Transformer Engine take from the caching
// allocator (pytorch/pytorch@26a39059 CublasHandlePool.cpp: 32 MiB on sm90,
// else 2 x 4 MiB + 8 x 16 KiB, and cuBLASLt's 1 MiB; NVIDIA/TransformerEngine@
// d0067d0 pytorch/cpp_extensions/gemm.py:37-67: 32 MiB + 1 KiB from compute
// capability 9, else 4 MiB, and three more with TP communication overlap).
TEST(MemoryTermsTest, GemmWorkspacesFollowPyTorchAndTransformerEngine) {
  constexpr double kMiB = 1024.0 * 1024.0;
  auto workspaces = [](const char* cluster, Framework fw, const ParallelConfig& c) {
    TrainingSpec t;
    t.seq_len = 2048;
    t.global_batch = 8;
    t.framework = fw;
    const CostModel cm(Small(4, true), t, *topology::ClusterPreset(cluster), 8);
    EXPECT_EQ(cm.CheckRules(c), Reason::kOk) << cluster;
    for (const CostModel::LedgerRow& row : cm.MemoryLedger(c)) {
      if (row.term.rfind("GEMM workspaces", 0) == 0) return row.GiB * kGiB;
    }
    return 0.0;
  };
  ParallelConfig dp;
  dp.gdata = 8;
  EXPECT_DOUBLE_EQ(workspaces("dgx-h100", Framework::kMegatron, dp), 65 * kMiB + 1024);
  EXPECT_DOUBLE_EQ(workspaces("dgx-a100-80gb", Framework::kMegatron, dp), 13 * kMiB + 128 * 1024);
  EXPECT_DOUBLE_EQ(workspaces("dgx-b200", Framework::kMegatron, dp), 41 * kMiB + 128 * 1024 + 1024);
  ParallelConfig fsdp;
  fsdp.gz = 8;
  EXPECT_DOUBLE_EQ(workspaces("dgx-h100", Framework::kTorchtitan, fsdp), 33 * kMiB);
  ParallelConfig tp = dp;
  tp.gy = 2;
  tp.gdata = 4;
  tp.sp = true;
  tp.tp_comm_overlap = true;
  EXPECT_DOUBLE_EQ(workspaces("dgx-h100", Framework::kMegatron, tp),
                   33 * kMiB + 4 * (32 * kMiB + 1024));
}

// The caching allocator's slack with either segment kind, against the one
// measured pair (Megatron-Bridge@067f987 skills/nemo-mbridge-perf-memory-tuning
// and -activation-recompute SKILL.md: Llama-3 70B SFT on 80 GB H100s without
// expandable segments ran out of memory at 58.8 GB allocated, "OOM
// (fragmentation)", and ran at 55.6 GB; with expandable segments the 59 GB
// run passed). The allocator's figures leave the runtime reserve out.
TEST(AllocatorTest, FixedSegmentsRefuseTheFragmentedRunAndAdmitWhatRan) {
  for (Framework fw : {Framework::kMegatron, Framework::kTorchtitan, Framework::kDeepSpeed,
                       Framework::kFsdp, Framework::kMegatronDeepSpeed, Framework::kAxonn}) {
    TrainingSpec t;
    t.seq_len = 2048;
    t.global_batch = 8;
    t.framework = fw;
    const topology::ClusterSpec h100 = *topology::ClusterPreset("dgx-h100");
    const double runtime = h100.gpu.runtime_reserved_GiB;
    const double capacity = h100.gpu.memory_GiB;
    ASSERT_TRUE(t.expandable_segments);  // the default
    const CostModel expandable(Small(4, true), t, h100, 8);
    EXPECT_LE(expandable.ReservedGiB(59.0 + runtime), capacity) << FrameworkName(fw);
    t.expandable_segments = false;
    const CostModel fixed(Small(4, true), t, h100, 8);
    EXPECT_GT(fixed.ReservedGiB(58.8 + runtime), capacity) << FrameworkName(fw);
    EXPECT_LE(fixed.ReservedGiB(55.6 + runtime), capacity) << FrameworkName(fw);
    EXPECT_GT(fixed.AllocatorFragmentation(), expandable.AllocatorFragmentation());
    // The verdict and the ledger's last row of a stage are the same figure.
    ParallelConfig c;
    c.gdata = 8;
    const MemoryBreakdown mem = fixed.Memory(c);
    EXPECT_DOUBLE_EQ(mem.reserved_GiB, fixed.ReservedGiB(mem.peak_allocated_GiB));
    const std::vector<CostModel::LedgerRow> rows = fixed.MemoryLedger(c);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows.back().term, "reserved (caching allocator, fixed-size segments)");
    EXPECT_DOUBLE_EQ(rows.back().GiB, mem.reserved_GiB);
  }
}

}  // namespace
}  // namespace paratune::planner
