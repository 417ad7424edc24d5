// Helpers shared by the executor tests: small jobs, a cluster description that
// says exactly what the fake backend does (so measured and predicted can be
// compared without hardware noise), and a fake world whose ranks run on
// threads, optionally behind the fault injector.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda_nccl.h"
#include "backend/fake.h"
#include "backend/fault.h"
#include "backend/mpi_cpu.h"
#include "executor/run/runner.h"
#include "planner/plans.h"
#include "planner/request.h"
#include "planner/search.h"
#include "tests/planner/test_models.h"
#include "topology/cluster.h"

namespace paratune::executor::testing {

// A GPT-style model (LayerNorm, GeLU FFN f = 4h, MHA).
inline planner::ModelSpec Gpt(int layers, int hidden, int heads, int vocab, bool dropout = false) {
  return planner::testing::GptLike(layers, hidden, heads, vocab, dropout);
}

// The fake backend's default model as a cluster description: 8 ranks per
// node, bf16 GEMMs at 312 TFLOP/s with no shape penalty (flash attention
// too), device copies at 1600 GB/s, collectives α = 8 µs per rank and 230
// GB/s bus bandwidth inside a node.
inline topology::ClusterSpec FakeLikeCluster() {
  auto preset = topology::ClusterPreset("dgx-a100-80gb");
  topology::ClusterSpec c = *preset;
  c.name = "fake-like";
  topology::GpuSpec& g = c.gpu;
  const size_t bf16 = static_cast<size_t>(topology::Precision::kBf16);
  for (auto& curve : g.gemm_efficiency) curve.clear();
  g.gemm_efficiency[bf16] = {{1.0, 1.0}};
  g.peak_tflops[bf16] = 312.0;
  g.hbm_GBps = 1600.0;
  g.hbm_efficiency = 1.0;
  g.flash_fwd_efficiency = 1.0;
  g.flash_bwd_efficiency = 1.0;
  // The fake backend charges math and bytes only: no launch gaps, no shape
  // penalties (the ideal device these tests compare the executor against).
  for (const auto& [key, field] : topology::kKernelConstants) g.*field = 0;
  g.gemm_ceilings.clear();  // nor a measured ceiling: its GEMMs run at the peak
  g.memory_GiB = 80.0;
  c.gpus_per_node = 8;
  c.intra_node_fabric = "nvswitch";
  c.intra_node_GBps = 230.0;
  c.intra_node_table.clear();
  c.intra_alpha_us = 8.0;
  c.alltoall_efficiency = 1.0;
  // The fake prices every collective α-β (backend/fake.h), the view a
  // measured profile's fit gives the model in place of NCCL's tables.
  c.fits.clear();
  for (int k = 0; k < topology::kNumCollectives; ++k) {
    c.fits.push_back({static_cast<topology::Collective>(k), topology::Tier::kIntraNode, 8, 8.0, 230.0});
  }
  return c;
}

inline planner::Job MakeJob(const planner::ModelSpec& m, const topology::ClusterSpec& c, int gpus,
                            int seq, int64_t global_batch,
                            topology::Precision p = topology::Precision::kBf16) {
  planner::Job job;
  job.model = m;
  job.cluster = c;
  job.gpus = gpus;
  job.training.seq_len = seq;
  job.training.global_batch = global_batch;
  job.training.precision = p;
  return job;
}

// Megatron: tp = 2 with sequence parallelism, pp = 2, dp = 2, ZeRO-1 (the
// distributed optimizer: the megatron framework's costs, the fused baseline),
// on 8 ranks.
inline planner::ParallelConfig MegatronSp() {
  planner::ParallelConfig c;
  c.gy = 2;
  c.sp = true;
  c.pp = 2;
  c.gdata = 2;
  c.distributed_optimizer = true;
  return c;
}

// A training framework that can express `c` (the executor runs what the plan
// names; these tests build plans by hand): AxoNN for its X/Z grid, DeepSpeed's
// Megatron for ZeRO stages and FPDT, torchtitan for FSDP with TP/PP/CP,
// Megatron otherwise.
inline planner::Framework FrameworkFor(const planner::ParallelConfig& c) {
  if (c.zero > 0 || (c.cp > 1 && c.cp_kind == planner::CpKind::kFpdt))
    return planner::Framework::kMegatronDeepSpeed;
  if (c.gx > 1) return planner::Framework::kAxonn;
  if (c.gz > 1) {
    return (c.pp > 1 || c.cp > 1 || c.sp) ? planner::Framework::kTorchtitan
                                          : planner::Framework::kAxonn;
  }
  return planner::Framework::kMegatron;
}
inline planner::Job WithFrameworkFor(planner::Job job, const planner::ParallelConfig& c) {
  job.training.framework = FrameworkFor(c);
  return job;
}

// The input that confirms `configs` as the plan's ranks 1, 2, ..., each under
// a framework that can express it.
inline ConfirmInput InputFor(const planner::Job& job,
                             const std::vector<planner::ParallelConfig>& configs) {
  ConfirmInput in;
  in.job = job;
  in.candidates = configs;
  for (size_t i = 0; i < configs.size(); ++i) {
    in.plan_ranks.push_back(static_cast<int>(i) + 1);
    in.frameworks.push_back(FrameworkFor(configs[i]));
  }
  return in;
}

// A Megatron-family search of `job` keeping its `top_k` best: the section and
// the options a plans document is written from.
struct MegatronPlan {
  planner::SearchOptions options;
  planner::PlanSection section;
  size_t size() const { return section.result.top.size(); }
  OrderedJson Document() const { return planner::PlansToJson({section}, options); }
};
inline MegatronPlan SearchMegatron(const planner::Job& job, int top_k) {
  planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  MegatronPlan p;
  p.options.top_k = top_k;
  p.options.family = planner::Family::kMegatron;
  planner::Search search(cm, p.options);
  p.section = planner::PlanSection{job, search.RunAll(), 0.0, {}};
  return p;
}

// Runs `body` on every rank of a fake world, each on its own thread, each
// backend wrapped in the fault injector when `fault` is set (the plan's rank
// picks the victim). Returns every rank's backend (the fakes' logs) through
// `fakes` when given.
inline void RunWorld(const backend::FakeConfig& config,
                     const std::function<void(backend::Backend&)>& body,
                     const backend::FaultPlan* fault = nullptr,
                     std::vector<backend::FakeBackend*>* fakes = nullptr) {
  auto world = backend::FakeWorld::Create(config);
  std::vector<std::unique_ptr<backend::Backend>> ranks;
  if (fakes) fakes->clear();
  for (int r = 0; r < config.world_size; ++r) {
    std::unique_ptr<backend::FakeBackend> fb = world->MakeRank(r);
    if (fakes) fakes->push_back(fb.get());
    if (fault) {
      ranks.push_back(std::make_unique<backend::FaultBackend>(std::move(fb), *fault));
    } else {
      ranks.push_back(std::move(fb));
    }
  }
  std::vector<std::thread> threads;
  for (auto& r : ranks) threads.emplace_back([&body, &r] { body(*r); });
  for (auto& t : threads) t.join();
  // Keep the backends (and their logs) alive for the caller.
  static std::vector<std::vector<std::unique_ptr<backend::Backend>>> keep;
  keep.push_back(std::move(ranks));
}

// Runs ConfirmCandidates on every rank of a fake world, behind the fault
// injector when `fault` is set. Returns rank 0's report (empty when rank 0
// failed), and every rank's status through `statuses` and every rank's
// backend through `fakes` when given.
inline RunReport ConfirmOnFakeWorld(const backend::FakeConfig& fc, const ConfirmInput& in,
                                    const ConfirmOptions& o,
                                    const backend::FaultPlan* fault = nullptr,
                                    std::vector<Status>* statuses = nullptr,
                                    std::vector<backend::FakeBackend*>* fakes = nullptr) {
  RunReport root;
  std::mutex mu;
  std::vector<Status> st(static_cast<size_t>(fc.world_size));
  RunWorld(
      fc,
      [&](backend::Backend& b) {
        auto r = ConfirmCandidates(b, in, o, nullptr, nullptr);
        std::lock_guard<std::mutex> lock(mu);
        st[static_cast<size_t>(b.rank())] = r.status();
        if (r.ok() && b.rank() == 0) root = *r;
      },
      fault, fakes);
  if (statuses) *statuses = std::move(st);
  return root;
}

// The mpi-cpu backend of this process, created once (MPI is initialised once
// per process); aborts when it cannot be created, since every rank must fail
// alike under mpirun.
inline backend::Backend& MpiCpuBackend() {
  static std::unique_ptr<backend::Backend> b = [] {
    auto r = backend::CreateMpiCpuBackend({});
    if (!r.ok()) {
      std::fprintf(stderr, "mpi-cpu backend: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return std::move(*r);
  }();
  return *b;
}

// A small mixture of experts a CPU runs in moments: 8 experts of width 128,
// top-2, hidden 64, SwiGLU, two layers.
inline planner::ModelSpec SmallMoe() {
  return planner::ModelSpec{.name = "small-moe",
                            .layers = 2,
                            .hidden = 64,
                            .heads = 4,
                            .kv_heads = 4,
                            .ffn_hidden = 256,
                            .vocab = 1000,
                            .gated_ffn = true,
                            .norm = "rmsnorm",
                            .max_seq_len = 128,
                            .experts = 8,
                            .top_k = 2,
                            .moe_ffn_hidden = 128};
}

// Tokens each rank routes through the MoE layer per micro-batch: the
// micro-batch's sequence, split over the tensor ranks under sequence
// parallelism.
inline int64_t MoeTokensPerRank(const planner::ParallelConfig& c, int seq) {
  return int64_t{c.mbs} * seq / (c.sp ? c.gy : 1);
}

// The checks every confirmed MoE candidate passes, whatever the backend: the
// candidate ran, its MoE layer ran at the planned EP x ETP on the rank's
// tokens, each all-to-all sent tokens x top_k x hidden elements of
// `element_bytes`, (ep - 1)/ep of them leaving the rank, and the layer has
// measured and predicted times. Call it under ASSERT_NO_FATAL_FAILURE.
inline void ExpectMoeLayerAsPlanned(const CandidateReport& cand, const planner::ParallelConfig& c,
                                    const planner::ModelSpec& m, int seq, int element_bytes) {
  ASSERT_EQ(cand.status, Outcome::kOk) << cand.reason;
  ASSERT_TRUE(cand.moe_layer.has_value());
  const MoeLayerReport& ml = *cand.moe_layer;
  EXPECT_EQ(ml.ep, c.ep);
  EXPECT_EQ(ml.etp, c.etp);
  EXPECT_TRUE(ml.as_planned);
  const int64_t tokens = MoeTokensPerRank(c, seq);
  EXPECT_EQ(ml.tokens, tokens);
  EXPECT_EQ(ml.local_experts, m.experts / c.ep);
  EXPECT_EQ(ml.a2a_bytes_per_rank, tokens * m.top_k * m.hidden * element_bytes * (c.ep - 1) / c.ep);
  EXPECT_GT(ml.a2a.measured_s, 0);
  EXPECT_GT(ml.a2a.predicted_s, 0);
  EXPECT_GT(ml.experts.predicted_s, 0);
  EXPECT_GE(ml.layer_measured_s, ml.experts.measured_s);
}

// Asserts that ParseRunReport refuses `report` and that its message names
// `pointer`, the JSON pointer of the offending key.
inline void ExpectRunReportRefusedAt(const Json& report, const std::string& pointer) {
  auto parsed = ParseRunReport(report);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find(pointer), std::string::npos)
      << parsed.status().message();
}

// A test on the single-process cuda backend. SetUp opens it, reads its device
// and loads the cluster preset that describes that device (H200, H100 or A100
// 80 GB); it skips the test without a device or without such a preset, and
// fails it when the backend, the device or the preset cannot be opened.
class OneGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = backend::CudaDeviceCount();
    if (!devices.ok()) GTEST_SKIP() << devices.status().message();
    auto made = backend::CreateCudaNcclBackend(backend::CreateSingleProcessBootstrap(), {});
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    backend_ = std::move(*made);
    auto dev = backend_->DescribeDevice();
    ASSERT_TRUE(dev.ok());
    device_ = *dev;
    std::string preset;
    for (auto [needle, name] : {std::pair<const char*, const char*>{"H200", "dgx-h200"},
                                {"H100", "dgx-h100"},
                                {"A100", "dgx-a100-80gb"}}) {
      if (preset.empty() && dev->name.find(needle) != std::string::npos) preset = name;
    }
    if (preset.empty()) GTEST_SKIP() << "no cluster preset for " << dev->name;
    auto cluster = topology::ClusterPreset(preset);
    ASSERT_TRUE(cluster.ok());
    cluster_ = *cluster;
  }

  std::unique_ptr<backend::Backend> backend_;
  backend::DeviceInfo device_;
  topology::ClusterSpec cluster_;
};

}  // namespace paratune::executor::testing
