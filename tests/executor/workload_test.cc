// The workload builder: the ops a plan rank issues for one micro-batch of its
// slice. Every expected shape, byte count and group below is worked out from
// the formulas (cost-model.md §3, axonn-notes.md §1.2-1.4, Korthikanti 2022
// §4.2) for the config at hand, not read back from the builder.
#include "executor/run/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "executor/run/runner.h"
#include "planner/cost_model.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

using backend::DataType;
using backend::OpKind;
using planner::ParallelConfig;
using testing::FakeLikeCluster;
using testing::Gpt;
using testing::MakeJob;
using testing::MegatronSp;

using Shape = std::tuple<int64_t, int64_t, int64_t>;

// h = 1024, 16 heads (d = 64), f = 4h, V = 32000, s = 2048, bf16.
constexpr int64_t kH = 1024, kF = 4096, kV = 32000, kS = 2048, kD = 64, kHeads = 16, kE = 2;

planner::Job TestJob(int gpus, int64_t global_batch = 8) {
  return MakeJob(Gpt(4, kH, kHeads, kV), FakeLikeCluster(), gpus, kS, global_batch);
}

// AxoNN 4D: gx = gy = gz = 2 on 8 ranks.
ParallelConfig Axonn() { return ParallelConfig{.gx = 2, .gy = 2, .gz = 2}; }

Workload Build(const planner::Job& job, const ParallelConfig& c, int rank) {
  auto w = BuildWorkload(testing::WithFrameworkFor(job, c), c, rank, WorkloadOptions{});
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return std::move(*w);
}

std::multiset<Shape> Gemms(const Workload& w) {
  std::multiset<Shape> s;
  for (const WorkOp& op : w.ops) {
    for (int k = 0; op.type == OpType::kGemm && k < op.calls; ++k) s.insert({op.m, op.n, op.k});
  }
  return s;
}

// (kind, group, bytes) → calls.
std::map<std::tuple<OpKind, GroupKind, int64_t>, int> Collectives(const Workload& w) {
  std::map<std::tuple<OpKind, GroupKind, int64_t>, int> m;
  for (const WorkOp& op : w.ops) {
    if (op.type == OpType::kCollective) m[{op.collective, op.group, op.bytes}] += op.calls;
  }
  return m;
}

void AddTimes(std::multiset<Shape>* s, Shape shape, int n) {
  for (int i = 0; i < n; ++i) s->insert(shape);
}

// Flash attention on 8 local heads (16 / gy), causal keys s/2: forward
// S = QKᵀ and O = PV, backward S again, dV, dP, dQ, dK.
void AddAttention(std::multiset<Shape>* s, int layers) {
  const int64_t rows = 1 * kHeads / 2, keys = kS / 2;
  AddTimes(s, {rows * kS, keys, kD}, 3 * layers);  // S fwd, S recomputed in bwd, dP
  AddTimes(s, {rows * kS, kD, keys}, 2 * layers);  // O fwd, dQ
  AddTimes(s, {rows * keys, kD, kS}, 2 * layers);  // dV, dK
}

TEST(Coordinates, FollowThePlacementInnermostFirst) {
  const ParallelConfig c = MegatronSp();  // x-y-cp-z-data-pp: y stride 1, data 2, pp 4
  for (int r = 0; r < 8; ++r) {
    const auto co = Coordinates(c, r);
    EXPECT_EQ(co[static_cast<size_t>(planner::Dim::kY)], r % 2);
    EXPECT_EQ(co[static_cast<size_t>(planner::Dim::kData)], (r / 2) % 2);
    EXPECT_EQ(co[static_cast<size_t>(planner::Dim::kPp)], r / 4);
    EXPECT_EQ(RankOf(c, co), r);
  }
  ParallelConfig d = c;
  auto p = planner::ParsePlacement("data-y-x-cp-z-pp");
  ASSERT_TRUE(p.ok());
  d.placement = *p;  // data innermost: data stride 1, y stride 2
  EXPECT_EQ(GroupRanks(d, GroupKind::kData, 5, 8), (std::vector<int>{4, 5}));
  EXPECT_EQ(GroupRanks(d, GroupKind::kY, 5, 8), (std::vector<int>{5, 7}));
  EXPECT_EQ(GroupStride(d, GroupKind::kY), 2);
}

TEST(Workload, MegatronSpPipelineZero1IssuesTheExpectedGemms) {
  const planner::Job job = TestJob(8);
  const ParallelConfig c = MegatronSp();
  for (int rank : {0, 4}) {  // first and last pipeline stage
    const Workload w = Build(job, c, rank);
    const bool last = rank >= 4;
    EXPECT_EQ(w.stage, rank / 4);
    EXPECT_EQ(w.layers_per_stage, 2);
    EXPECT_EQ(w.slice_layers, 2);
    EXPECT_EQ(w.micro_batches, 4);  // 8 / (mbs 1 · dp 2)
    std::multiset<Shape> want;
    const int64_t T = kS;  // tokens per rank per micro-batch
    // Column-parallel QKV and FC1 split outputs over Y = 2, row-parallel proj
    // and FC2 split inputs; fwd (T, n_loc, k_loc), dgrad (T, k_loc, n_loc),
    // wgrad (n_loc, k_loc, T).
    const int64_t kn_loc[4][2] = {{kH, 3 * kH / 2}, {kH / 2, kH}, {kH, kF / 2}, {kF / 2, kH}};
    for (const auto& l : kn_loc) {
      AddTimes(&want, {T, l[1], l[0]}, 2);
      AddTimes(&want, {T, l[0], l[1]}, 2);
      AddTimes(&want, {l[1], l[0], T}, 2);
    }
    AddAttention(&want, 2);
    if (last) {  // logits over V / tp
      want.insert({T, kV / 2, kH});
      want.insert({T, kH, kV / 2});
      want.insert({kV / 2, kH, T});
    }
    EXPECT_EQ(Gemms(w), want) << "rank " << rank;
  }
}

TEST(Workload, MegatronSpPipelineZero1IssuesTheExpectedCollectives) {
  const planner::Job job = TestJob(8);
  const ParallelConfig c = MegatronSp();
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const double psi = cm.Compute(c).psi;  // parameters this rank holds before data sharding
  for (int rank : {0, 4}) {
    const Workload w = Build(job, c, rank);
    const bool last = rank >= 4;
    const int64_t sp_buf = kS * kH * kE;  // T·h·e: the sp all-gather output / reduce-scatter input
    // Megatron's distributed optimizer (its ZeRO-1) over the 2 data ranks, one
    // call each (under 256 MiB): the fp32 main gradients reduce-scattered (bf16
    // training accumulates and reduces in fp32: Megatron-LM arguments.py) and
    // the bf16 parameters gathered.
    const int64_t elems = (static_cast<int64_t>(std::ceil(psi)) + 1) / 2 * 2;
    const int64_t grads = elems * 4, params = elems * kE;
    std::map<std::tuple<OpKind, GroupKind, int64_t>, int> want;
    // Per layer: forward all-gather before QKV and FC1, reduce-scatter after
    // proj and FC2; backward the mirror images plus the re-gather of QKV's and
    // FC1's input for wgrad (Korthikanti 2022 §4.2.2): 6 all-gathers, 4
    // reduce-scatters; 2 layers in the slice.
    want[{OpKind::kAllGather, GroupKind::kY, sp_buf}] = 12 + (last ? 1 : 0);
    want[{OpKind::kReduceScatter, GroupKind::kY, sp_buf}] = 8 + (last ? 1 : 0);
    // Pipeline: activations to the next stage, gradients back: T·(h/tp)·e.
    want[{OpKind::kSendRecv, GroupKind::kPp, kS * (kH / 2) * kE}] = 2;
    want[{OpKind::kReduceScatter, GroupKind::kData, grads}] = 1;
    want[{OpKind::kAllGather, GroupKind::kData, params}] = 1;
    EXPECT_EQ(Collectives(w), want) << "rank " << rank;
  }
}

TEST(Workload, MegatronSpLayerOrderFollowsKorthikanti) {
  const Workload w = Build(TestJob(8), MegatronSp(), 0);
  std::vector<std::string> fwd;
  for (const WorkOp& op : w.ops) {
    if (op.layer == 0 && op.phase == Phase::kForward) fwd.push_back(op.name);
  }
  const std::vector<std::string> want = {"L0.fwd.norm_residual.attention",
                                         "L0.fwd.sp_all_gather.attention",
                                         "L0.fwd.qkv",
                                         "L0.fwd.attention.scores",
                                         "L0.fwd.attention.context",
                                         "L0.fwd.proj",
                                         "L0.fwd.sp_reduce_scatter.attention",
                                         "L0.fwd.norm_residual.mlp",
                                         "L0.fwd.sp_all_gather.mlp",
                                         "L0.fwd.fc1",
                                         "L0.fwd.activation",
                                         "L0.fwd.fc2",
                                         "L0.fwd.sp_reduce_scatter.mlp"};
  EXPECT_EQ(fwd, want);
  // Without overlap flags every op is on the compute stream.
  for (const WorkOp& op : w.ops) EXPECT_EQ(op.stream, StreamRole::kCompute) << op.name;
}

TEST(Workload, MemoryBoundTrafficIsTheCostModelsBytes) {
  // Megatron's own ZeRO-1 (the distributed optimizer): the megatron
  // framework's fused element-wise kernels and loss, the baseline bytes below.
  const ParallelConfig megatron = MegatronSp();
  const Workload w = Build(TestJob(8), megatron, 0);
  std::map<std::string, int64_t> traffic;
  for (const WorkOp& op : w.ops) {
    if (op.type == OpType::kMemoryBound) traffic[op.name] = op.traffic_bytes * op.calls;
  }
  // Norms + residual adds over the T/tp tokens this rank holds with sp, no
  // dropout: (8 + 2·6) bytes per element of h (bf16), half per sub-layer;
  // GeLU reads and writes T·(f/tp) at 2 bytes each way.
  // Split over the stack's kernels, each call's bytes rounded up to whole
  // 2-byte elements: a few bytes over at most.
  const int64_t norm_half = (kS / 2) * kH * 20 / 2;
  auto near = [&](const char* name, int64_t want) {
    EXPECT_GE(traffic[name], want) << name;
    EXPECT_LE(traffic[name], want + 64) << name;
  };
  near("L0.fwd.norm_residual.attention", norm_half);
  near("L0.fwd.activation", kS * (kF / 2) * 4);
  near("L0.bwd.activation", 2 * kS * (kF / 2) * 4);
  EXPECT_EQ(traffic["stage.embedding"], 3 * kS * kH * kE);
  // Adam on the 1/2 shard (distributed optimizer): 28 bytes of fp32 state and gradient plus
  // 6 to refresh the bf16 copy per parameter; the local fp32 main gradients
  // read (norm) and zeroed: 2 × 4 bytes per parameter.
  const planner::Job job = TestJob(8);
  const double psi =
      planner::CostModel(job.model, job.training, job.cluster, 8).Compute(megatron).psi;
  EXPECT_NEAR(static_cast<double>(traffic["step.optimizer"]), psi / 2 * 34 + psi * 2 * 4, 4.0);
}

// The element-wise work runs the way the stack runs it. DeepSpeed
// on a Hugging Face model, eager (deepspeed.json: 80 kernels per layer, 1.6x
// the fused element-wise bytes) against the same under torch.compile (35
// kernels, 1.0x): by the rule of docs/executor.md, round(80/3) - 5 = 22
// forward memory-bound kernels per layer against round(35/3) - 5 = 7.
TEST(Workload, EagerStacksRunMoreSmallerElementwiseKernels) {
  const planner::FrameworkCosts& fc =
      planner::FrameworkPreset(planner::Framework::kDeepSpeed).costs;
  ASSERT_EQ(fc.kernels_per_layer, 80);  // the published figures the expectations below follow
  ASSERT_EQ(fc.kernels_per_layer_compiled, 35);
  ASSERT_EQ(fc.elementwise_traffic, 1.6);
  ASSERT_EQ(fc.elementwise_traffic_compiled, 1.0);
  ParallelConfig c;
  c.gdata = 8;
  c.zero = 1;
  planner::Job job = TestJob(8);
  job.training.framework = planner::Framework::kDeepSpeed;
  auto count = [&](bool compile, int* fwd_kernels, int64_t* fwd_bytes) {
    planner::Job j = job;
    j.training.compile = compile;
    auto w = BuildWorkload(j, c, 0, WorkloadOptions{});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    *fwd_kernels = 0;
    *fwd_bytes = 0;
    for (const WorkOp& op : w->ops) {
      if (op.type != OpType::kMemoryBound) continue;
      if (op.name == "L0.fwd.norm_residual.attention" || op.name == "L0.fwd.norm_residual.mlp" ||
          op.name == "L0.fwd.activation") {
        *fwd_kernels += op.calls;
        *fwd_bytes += op.traffic_bytes * op.calls;
      }
    }
  };
  int ek = 0, ck = 0;
  int64_t eb = 0, cb = 0;
  count(false, &ek, &eb);
  count(true, &ck, &cb);
  EXPECT_NEAR(ek, 22, 1);  // the sections' shares round separately
  EXPECT_NEAR(ck, 7, 1);
  EXPECT_NEAR(static_cast<double>(eb) / static_cast<double>(cb), 1.6, 0.01);
}

// The logits and the loss in the stack's precision, one kernel per
// pass over the T x V logits (docs/executor.md, "Frameworks"), the passes'
// bytes adding up to the preset's loss_bytes_per_logit:
// - Hugging Face eager (deepspeed.json, 30): logits.float() reads 2 and
//   writes 4; two fp32 passes share the other 30 - 12 = 18 (log-softmax
//   forward, its gradient backward), 9 each; the gradient cast back to bf16
//   reads 4 and writes 2. All fp32.
// - the same under torch.compile (10): the bf16 logits read once forward
//   (log-sum-exp, 2), read again and the gradient written backward (8).
// - llm-foundry's fused cross entropy (fsdp.json, 6): 2 forward, 2 + 2 back.
// - Megatron's vocab-parallel cross entropy (megatron.json, 12): the fp32
//   upcast (2 + 4) and the cast back (4 + 2).
TEST(Workload, TheLossRunsInTheStacksPrecision) {
  struct Pass {
    std::string name;
    Phase phase;
    double bytes_per_logit;
    DataType dtype;
  };
  struct Case {
    planner::Framework framework;
    bool compile;
    double published;  // the preset's loss_bytes_per_logit
    std::vector<Pass> want;
  };
  const Phase F = Phase::kForward, Bw = Phase::kBackward;
  const DataType fp32 = DataType::kFloat32, bf16 = DataType::kBFloat16;
  const std::vector<Case> cases = {
      {planner::Framework::kDeepSpeed,
       false,
       30,
       {{"stage.loss.upcast", F, 6, fp32},
        {"stage.loss.log_softmax", F, 9, fp32},
        {"stage.loss.log_softmax_grad", Bw, 9, fp32},
        {"stage.loss.downcast", Bw, 6, fp32}}},
      {planner::Framework::kDeepSpeed,
       true,
       10,
       {{"stage.loss.logsumexp", F, 2, bf16}, {"stage.loss.gradient", Bw, 8, bf16}}},
      {planner::Framework::kFsdp,
       false,
       6,
       {{"stage.loss.logsumexp", F, 2, bf16}, {"stage.loss.gradient", Bw, 4, bf16}}},
      {planner::Framework::kMegatron,
       false,
       12,
       {{"stage.loss.upcast", F, 6, fp32}, {"stage.loss.downcast", Bw, 6, fp32}}},
  };
  ParallelConfig c;
  c.gdata = 8;
  WorkloadOptions o;
  o.max_call_bytes = int64_t{1} << 40;  // one call per pass: count kernels, not slices
  for (const Case& k : cases) {
    SCOPED_TRACE(planner::FrameworkName(k.framework) + std::string(k.compile ? " compiled" : ""));
    const planner::FrameworkCosts& fc = planner::FrameworkPreset(k.framework).costs;
    ASSERT_EQ(k.compile ? fc.loss_bytes_per_logit_compiled : fc.loss_bytes_per_logit, k.published);
    planner::Job job = TestJob(8);
    job.training.framework = k.framework;
    job.training.compile = k.compile;
    auto w = BuildWorkload(job, c, 0, o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    // One micro-batch of s tokens on this rank, the whole vocabulary (tp = 1).
    const double logits = static_cast<double>(kS * kV);
    std::vector<const WorkOp*> got;
    int logits_fwd = -1, logits_dgrad = -1;
    for (size_t i = 0; i < w->ops.size(); ++i) {
      const WorkOp& op = w->ops[i];
      if (op.name.rfind("stage.loss", 0) == 0) got.push_back(&op);
      if (op.name == "stage.logits.fwd") logits_fwd = static_cast<int>(i);
      if (op.name == "stage.logits.dgrad") logits_dgrad = static_cast<int>(i);
    }
    ASSERT_EQ(got.size(), k.want.size());
    double total = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const WorkOp& op = *got[i];
      EXPECT_EQ(op.name, k.want[i].name);
      EXPECT_EQ(op.type, OpType::kMemoryBound);
      EXPECT_EQ(op.phase, k.want[i].phase) << op.name;
      EXPECT_EQ(op.calls, 1) << op.name;
      EXPECT_EQ(op.dtype, k.want[i].dtype) << op.name;
      EXPECT_NEAR(static_cast<double>(op.traffic_bytes), logits * k.want[i].bytes_per_logit, 2.0)
          << op.name;
      total += static_cast<double>(op.traffic_bytes);
      // Forward passes after the logits GEMM, backward ones before its dgrad.
      const int at = static_cast<int>(got[i] - w->ops.data());
      EXPECT_GT(at, logits_fwd) << op.name;
      EXPECT_LT(at, logits_dgrad) << op.name;
    }
    EXPECT_NEAR(total, logits * k.published, 8.0);
  }
}

TEST(Workload, AxonnGridIssuesTheExpectedGemmsAndCollectives) {
  const planner::Job job = TestJob(8);
  const ParallelConfig c = Axonn();
  const Workload w = Build(job, c, 5);
  const int64_t T = kS;
  std::multiset<Shape> gemms;
  // Normal layers (QKV, FC1): inputs over X, outputs over Y; transposed
  // (proj, FC2): inputs over Y, outputs over X (axonn-notes.md §1.2).
  const int64_t kn_loc[4][2] = {
      {kH / 2, 3 * kH / 2}, {kH / 2, kH / 2}, {kH / 2, kF / 2}, {kF / 2, kH / 2}};
  for (const auto& l : kn_loc) {
    AddTimes(&gemms, {T, l[1], l[0]}, 2);
    AddTimes(&gemms, {T, l[0], l[1]}, 2);
    AddTimes(&gemms, {l[1], l[0], T}, 2);
  }
  AddAttention(&gemms, 2);
  gemms.insert({T, kV / 4, kH / 2});  // logits over V / (gx·gy), h / gx
  gemms.insert({T, kH / 2, kV / 4});
  gemms.insert({kV / 4, kH / 2, T});
  EXPECT_EQ(Gemms(w), gemms);

  std::map<std::tuple<OpKind, GroupKind, int64_t>, int> want;
  auto add = [&](OpKind k, GroupKind g, int64_t bytes, int n) { want[{k, g, bytes}] += n; };
  // axonn-notes.md §1.3, per layer: forward all-reduce of the output over X
  // (normal: T·n/gy) or Y (transposed: T·n/gx); backward all-reduce of the
  // input gradient over Y (normal: T·k/gx) or X (transposed: T·k/gy).
  add(OpKind::kAllReduce, GroupKind::kX, T * (3 * kH / 2) * kE, 2);  // QKV fwd
  add(OpKind::kAllReduce, GroupKind::kX, T * (kF / 2) * kE, 2);      // FC1 fwd
  add(OpKind::kAllReduce, GroupKind::kY, T * (kH / 2) * kE, 4);      // proj, FC2 fwd
  add(OpKind::kAllReduce, GroupKind::kY, T * (kH / 2) * kE, 4);      // QKV, FC1 bwd
  add(OpKind::kAllReduce, GroupKind::kX, T * (kH / 2) * kE, 2);      // proj bwd
  add(OpKind::kAllReduce, GroupKind::kX, T * (kF / 2) * kE, 2);      // FC2 bwd
  // Z: each weight block k·n/(gx·gy) gathered forward and its gradient
  // reduce-scattered, per linear. This small model leaves room to cache every
  // layer's gathered blocks (AxoNN --cache-all, the cost model's
  // z_cached_layers), so the backward gathers nothing again.
  {
    const planner::Job axjob = testing::WithFrameworkFor(job, c);
    const planner::CostModel cm(axjob.model, axjob.training, axjob.cluster, axjob.gpus);
    ASSERT_EQ(cm.Memory(c).z_cached_layers, axjob.model.layers);
  }
  for (int64_t kn : {kH * 3 * kH, kH * kH, kH * kF, kF * kH}) {
    add(OpKind::kAllGather, GroupKind::kZ, kn / 4 * kE, 2);
    add(OpKind::kReduceScatter, GroupKind::kZ, kn / 4 * kE, 2);
  }
  // The logits: the hidden states over Y forward and backward (no sp: all-reduce).
  add(OpKind::kAllReduce, GroupKind::kY, T * kH * kE, 2);
  EXPECT_EQ(Collectives(w), want);

  // Groups of rank 5 (x = 1, y = 0, z = 1; strides 1, 2, 4).
  EXPECT_EQ(w.FindGroup(GroupKind::kX)->ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(w.FindGroup(GroupKind::kY)->ranks, (std::vector<int>{5, 7}));
  EXPECT_EQ(w.FindGroup(GroupKind::kZ)->ranks, (std::vector<int>{1, 5}));
  EXPECT_EQ(w.FindGroup(GroupKind::kData), nullptr);
}

TEST(Workload, AxonnOverlapsPutCollectivesOnSideStreamsWithTheirWindows) {
  ParallelConfig c = Axonn();
  c.oar = c.ors = c.oag = true;
  const Workload w = Build(TestJob(8), c, 0);
  std::map<std::string, int> at;
  for (size_t i = 0; i < w.ops.size(); ++i) at[w.ops[i].name] = static_cast<int>(i);
  auto op = [&](const std::string& n) -> const WorkOp& {
    EXPECT_TRUE(at.count(n)) << n;
    return w.ops[static_cast<size_t>(at[n])];
  };
  // OAG: layer 1's gathers are in flight before layer 0's first GEMM; each
  // forward GEMM waits for its own gather.
  EXPECT_LT(at["L1.fwd.qkv.z_all_gather"], at["L0.fwd.qkv"]);
  for (const char* lin : {"qkv", "proj", "fc1", "fc2"}) {
    for (int l = 0; l < 2; ++l) {
      const std::string g = "L" + std::to_string(l) + ".fwd." + lin + ".z_all_gather";
      EXPECT_EQ(op(g).stream, StreamRole::kDepthComm);
      const auto& after = op("L" + std::to_string(l) + ".fwd." + lin).after;
      EXPECT_NE(std::find(after.begin(), after.end(), at[g]), after.end()) << g;
      // ORS: the weight-gradient reduce-scatter on the depth stream.
      EXPECT_EQ(op("L" + std::to_string(l) + ".bwd." + lin + ".z_reduce_scatter").stream,
                StreamRole::kDepthComm);
    }
  }
  // OAR: QKV's input-gradient all-reduce (over Y) runs on the tensor stream
  // behind QKV's wgrad, which is its overlap window.
  const WorkOp& ar = op("L0.bwd.qkv.all_reduce");
  EXPECT_EQ(ar.stream, StreamRole::kTensorComm);
  EXPECT_EQ(ar.group, GroupKind::kY);
  ASSERT_GE(ar.window, 0);
  EXPECT_EQ(w.windows[static_cast<size_t>(ar.window)].compute_ops,
            (std::vector<int>{at["L0.bwd.qkv.wgrad"]}));
  // ... and the forward all-reduces stay on the compute stream (exposed).
  EXPECT_EQ(op("L0.fwd.qkv.all_reduce").stream, StreamRole::kCompute);
}

TEST(Workload, FullRecomputeRepeatsTheForwardInsideTheBackward) {
  ParallelConfig c = MegatronSp();
  c.recompute = planner::Recompute::kFull;
  const Workload w = Build(TestJob(8), c, 0);
  int ag = 0, rs = 0, recompute_gemms = 0;
  for (const WorkOp& op : w.ops) {
    if (op.layer != 0) continue;
    if (op.collective == OpKind::kAllGather && op.type == OpType::kCollective) ++ag;
    if (op.collective == OpKind::kReduceScatter && op.type == OpType::kCollective) ++rs;
    if (op.phase == Phase::kRecompute && op.type == OpType::kGemm) ++recompute_gemms;
  }
  EXPECT_EQ(ag, 6 + 2);  // the forward's 2 all-gathers again
  EXPECT_EQ(rs, 4 + 2);
  EXPECT_EQ(recompute_gemms, 4 + 2);  // 4 linears + 2 attention GEMMs
  // The recompute of layer 1 runs before layer 1's backward and after layer 1's forward.
  int first_recompute = -1, first_bwd = -1;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    if (w.ops[i].layer != 1) continue;
    if (w.ops[i].phase == Phase::kRecompute && first_recompute < 0)
      first_recompute = static_cast<int>(i);
    if (w.ops[i].phase == Phase::kBackward && first_bwd < 0) first_bwd = static_cast<int>(i);
  }
  EXPECT_LT(first_recompute, first_bwd);
}

TEST(Workload, ContextParallelRingAndUlysses) {
  const planner::Job job = TestJob(4);
  ParallelConfig ring;
  ring.cp = 2;
  ring.gdata = 2;
  const Workload wr = Build(job, ring, 0);
  // Each ring step passes this rank's K and V block: 2·(s/cp)·h·e (MHA, tp 1);
  // cp − 1 steps forward, twice that backward, beside the attention.
  const int64_t kv = 2 * (kS / 2) * kH * kE;
  int fwd = 0, bwd = 0;
  for (const WorkOp& op : wr.ops) {
    if (op.type != OpType::kCollective || op.group != GroupKind::kCp) continue;
    EXPECT_EQ(op.collective, OpKind::kSendRecv);
    EXPECT_EQ(op.peers, Peers::kRing);
    EXPECT_EQ(op.bytes, kv);
    EXPECT_EQ(op.stream, StreamRole::kContextComm);
    (op.phase == Phase::kForward ? fwd : bwd) += op.calls;
  }
  EXPECT_EQ(fwd, 2 * 1);
  EXPECT_EQ(bwd, 2 * 2);
  // Weights are replicated over data × cp: the gradient all-reduce spans 4 ranks.
  EXPECT_EQ(wr.FindGroup(GroupKind::kData)->ranks.size(), 4u);

  ParallelConfig uly = ring;
  uly.cp_kind = planner::CpKind::kUlysses;
  const Workload wu = Build(job, uly, 0);
  // All-to-all of Q, K, V in and of the context out, forward and backward:
  // T·3h·e and T·h·e with T = s/cp (DeepSpeed-Ulysses).
  std::map<int64_t, int> a2a;
  for (const WorkOp& op : wu.ops) {
    if (op.type == OpType::kCollective && op.collective == OpKind::kAllToAll)
      a2a[op.bytes] += op.calls;
  }
  EXPECT_EQ(a2a, (std::map<int64_t, int>{{(kS / 2) * 3 * kH * kE, 4}, {(kS / 2) * kH * kE, 4}}));
}

TEST(Workload, Zero3GathersEveryLayerOverTheDataGroup) {
  ParallelConfig c;
  c.gdata = 8;
  c.zero = 3;
  const planner::Job job = TestJob(8);
  const Workload w = Build(job, c, 3);
  // Per layer: the parameter shard (ParamsPerLayer, all of it here: tp = 1)
  // gathered forward and backward, its gradient reduce-scattered.
  const int64_t shard = job.model.ParamsPerLayer() * kE;
  std::map<std::tuple<OpKind, int64_t>, int> got;
  for (const WorkOp& op : w.ops) {
    if (op.type == OpType::kCollective && op.group == GroupKind::kData) {
      EXPECT_EQ(op.scope, Scope::kLayer) << op.name;  // nothing left for the step
      got[{op.collective, op.bytes}] += op.calls;
    }
  }
  const int64_t rounded = (shard / kE + 7) / 8 * 8 * kE;
  EXPECT_EQ(got, (std::map<std::tuple<OpKind, int64_t>, int>{
                     {{OpKind::kAllGather, rounded}, 4}, {{OpKind::kReduceScatter, rounded}, 2}}));
}

// OLMoE-1B-7B (Muennighoff et al. 2024, Table 1: hidden 2048, 64 experts of
// width 1024, top-8, SwiGLU, no shared expert) on 8 GPUs with EP 8, 1024
// tokens per micro-batch: every layer's MLP is the MoE one. Each rank routes
// its 1024 tokens over the 64 experts (the router GEMM 1024 x 64 x 2048) and,
// balanced, receives 1024 x 8 copies x 8 ranks / 64 experts = 1024 rows for
// each of its 8 experts: FC1 (1024 x 2048 x 2048: gate and up) and FC2
// (1024 x 2048 x 1024) once per expert, their dgrad and wgrad backward.
TEST(Workload, MoeLayersRunTheRouterAndTheLocalExpertsNotADenseMlp) {
  auto m = planner::ModelPreset("olmoe-1b-7b");
  ASSERT_TRUE(m.ok());
  m->qk_norm = "head";  // Megatron, which runs this plan, norms Q/K per head only
  const planner::Job job = MakeJob(*m, FakeLikeCluster(), 8, 1024, 8);
  ParallelConfig c{.gdata = 8, .ep = 8};
  c.distributed_optimizer = true;
  const Workload w = Build(job, c, 0);
  std::multiset<Shape> moe;
  for (const WorkOp& op : w.ops) {
    const bool mlp = op.name.find(".fc1") != std::string::npos ||
                     op.name.find(".fc2") != std::string::npos ||
                     op.name.find("activation") != std::string::npos;
    if (mlp) {
      EXPECT_NE(op.name.find(".moe."), std::string::npos) << "a dense MLP op: " << op.name;
    }
    if (op.type != OpType::kGemm || op.name.find(".moe.") == std::string::npos) continue;
    for (int k = 0; k < op.calls; ++k) moe.insert({op.m, op.n, op.k});
  }
  const size_t S = static_cast<size_t>(w.slice_layers), per_expert = 8 * S;
  std::multiset<Shape> want;
  // The router: forward, dgrad, wgrad.
  AddTimes(&want, {1024, 64, 2048}, static_cast<int>(S));
  AddTimes(&want, {1024, 2048, 64}, static_cast<int>(S));
  AddTimes(&want, {64, 2048, 1024}, static_cast<int>(S));
  // FC1 forward and dgrad, its wgrad; FC2 forward, dgrad and wgrad.
  AddTimes(&want, {1024, 2048, 2048}, static_cast<int>(2 * per_expert));
  AddTimes(&want, {2048, 2048, 1024}, static_cast<int>(per_expert));
  AddTimes(&want, {1024, 2048, 1024}, static_cast<int>(per_expert));
  AddTimes(&want, {1024, 1024, 2048}, static_cast<int>(per_expert));
  AddTimes(&want, {2048, 1024, 1024}, static_cast<int>(per_expert));
  EXPECT_EQ(moe, want);
  // EP 8 on 8 GPUs: each expert has one replica, no expert-data group.
  EXPECT_EQ(w.FindGroup(GroupKind::kExpertData), nullptr);
  // EP 4: two replicas of each expert, ranks ep·etp = 4 apart (etp-ep-edp order).
  ParallelConfig ep4{.gdata = 8, .ep = 4};
  EXPECT_EQ(GroupRanks(ep4, GroupKind::kExpertData, 1, 8), (std::vector<int>{1, 5}));
  EXPECT_EQ(GroupStride(ep4, GroupKind::kExpertData), 4);
}

// Llama 4 Maverick alternates dense and MoE layers (interleave_moe_layer_step
// 2): a two-layer slice holds one of each, the MoE one second.
TEST(Workload, AlternatingModelsPutHalfTheSliceOnTheExperts) {
  auto m = planner::ModelPreset("llama4-maverick");
  ASSERT_TRUE(m.ok());
  const planner::Job job = MakeJob(*m, FakeLikeCluster(), 16, 1024, 16);
  ParallelConfig c{.gy = 8, .gdata = 2, .sp = true, .ep = 16};
  c.distributed_optimizer = true;
  WorkloadOptions o;
  o.slice_layers = 2;
  auto w = BuildWorkload(testing::WithFrameworkFor(job, c), c, 0, o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  bool dense0 = false, moe0 = false, dense1 = false, moe1 = false;
  for (const WorkOp& op : w->ops) {
    dense0 = dense0 || op.name == "L0.fwd.fc1";
    moe0 = moe0 || op.name.rfind("L0.fwd.moe.", 0) == 0;
    dense1 = dense1 || op.name == "L1.fwd.fc1";
    moe1 = moe1 || op.name.rfind("L1.fwd.moe.", 0) == 0;
  }
  EXPECT_TRUE(dense0 && !moe0);
  EXPECT_TRUE(moe1 && !dense1);
  // EP 16 × ETP 1 over the stage's 16 ranks: one expert replica.
  EXPECT_EQ(w->FindGroup(GroupKind::kExpertData), nullptr);
}

TEST(Workload, RejectsConfigsThatBreakARule) {
  ParallelConfig c;
  c.gy = 3;  // 16 heads do not split over 3
  c.gdata = 1;
  auto w = BuildWorkload(TestJob(3), c, 0, WorkloadOptions{});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("heads"), std::string::npos);
  EXPECT_FALSE(BuildWorkload(TestJob(8), MegatronSp(), 8, WorkloadOptions{}).ok());
}

// The fake backend receives exactly the workload's ops, on communicators whose
// members are the plan's groups.
TEST(Workload, FakeBackendSeesTheOpsOnThePlansGroups) {
  const planner::Job job = TestJob(8);
  const ParallelConfig c = MegatronSp();
  backend::FakeConfig fc;
  fc.world_size = 8;
  std::vector<backend::FakeBackend*> fakes;
  std::vector<Workload> ws(8);
  std::vector<Status> st(8);
  testing::RunWorld(
      fc,
      [&](backend::Backend& b) {
        const int r = b.rank();
        ws[static_cast<size_t>(r)] = Build(job, c, r);
        auto comms = SplitPlanGroups(b, c, 8);
        if (!comms.ok()) {
          st[static_cast<size_t>(r)] = comms.status();
          return;
        }
        st[static_cast<size_t>(r)] = IssueWorkloadOnce(b, ws[static_cast<size_t>(r)], *comms);
      },
      nullptr, &fakes);
  for (int r = 0; r < 8; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
    const backend::FakeBackend& fb = *fakes[static_cast<size_t>(r)];
    // GEMMs in issue order.
    std::vector<Shape> want_gemms, got_gemms;
    for (const WorkOp& op : ws[static_cast<size_t>(r)].ops) {
      for (int k = 0; op.type == OpType::kGemm && k < op.calls; ++k)
        want_gemms.push_back({op.m, op.n, op.k});
    }
    for (const backend::OpRecord& rec : fb.ops()) {
      if (rec.kind == OpKind::kGemm) got_gemms.push_back({rec.m, rec.n, rec.k});
    }
    EXPECT_EQ(got_gemms, want_gemms) << "rank " << r;
    // Every collective on its group: members from the placement (y = r % 2,
    // data = r / 2 % 2, stage = r / 4), the nccl-tests size of the op.
    const std::vector<int> y = {r - r % 2, r - r % 2 + 1};
    const std::vector<int> data = {r % 2 + 4 * (r / 4), r % 2 + 2 + 4 * (r / 4)};
    const std::vector<int> pp = {r % 4, r % 4 + 4};
    int collectives = 0;
    for (const backend::OpRecord& rec : fb.ops()) {
      const bool coll = rec.kind == OpKind::kAllGather || rec.kind == OpKind::kReduceScatter ||
                        rec.kind == OpKind::kSendRecv || rec.kind == OpKind::kAllReduce;
      if (!coll) continue;
      ++collectives;
      auto info = fb.GetCommInfo(rec.comm);
      ASSERT_TRUE(info.ok());
      if (rec.kind == OpKind::kSendRecv) {
        EXPECT_EQ(info->world_ranks, pp);
        // Stage 0 sends activations to stage 1 (and receives gradients from
        // it); stage 1 sends gradients back to stage 0.
        const int peer = rec.send_peer != backend::kNoPeer ? rec.send_peer : rec.recv_peer;
        EXPECT_EQ(peer, r < 4 ? 1 : 0);
        EXPECT_EQ(rec.bytes, kS * (kH / 2) * kE);
      } else if (info->world_ranks == y) {
        EXPECT_EQ(rec.bytes, kS * kH * kE);
      } else {
        EXPECT_EQ(info->world_ranks, data) << backend::OpKindName(rec.kind);
      }
    }
    // 20 sp collectives + 2 hand-offs + 2 data; the last stage adds 2 for the logits.
    EXPECT_EQ(collectives, 24 + (r >= 4 ? 2 : 0)) << "rank " << r;
  }
}

}  // namespace
}  // namespace paratune::executor
