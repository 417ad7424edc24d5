// The 2026 fleet's training features in the cost model: low-precision
// recipes (which GEMM rate, what stays in bf16, what is gathered), Megatron-
// FSDP, CPU activation offloading, full-iteration CUDA graphs, and plans on
// rack-scale NVLink and on the NVLink-cut H800 (docs/model.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/request.h"
#include "planner/search.h"

namespace paratune::planner {
namespace {

Result<PredictRequest> Request(const std::string& model, const std::string& cluster, int gpus,
                               int64_t gbs, const std::string& precision, const Json& config,
                               int seq = 8192) {
  Json j = {{"model", model},
            {"cluster", cluster},
            {"gpus", gpus},
            {"training", {{"seq_len", seq}, {"global_batch", gbs}, {"precision", precision}}},
            {"config", config}};
  return ParsePredictRequest(j);
}

PredictRequest Must(const std::string& model, const std::string& cluster, int gpus, int64_t gbs,
                    const std::string& precision, const Json& config, int seq = 8192) {
  Result<PredictRequest> r = Request(model, cluster, gpus, gbs, precision, config, seq);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : PredictRequest{};
}

Prediction PredictOf(const PredictRequest& r) {
  const CostModel cm(r.job.model, r.job.training, r.job.cluster, r.job.gpus);
  EXPECT_EQ(cm.CheckRules(r.config), Reason::kOk) << cm.Explain(cm.CheckRules(r.config), r.config);
  return cm.Predict(r.config);
}

// The memory of a request whose configuration the rules accept.
MemoryBreakdown MemoryOf(const PredictRequest& r) {
  const CostModel cm(r.job.model, r.job.training, r.job.cluster, r.job.gpus);
  EXPECT_EQ(cm.CheckRules(r.config), Reason::kOk) << cm.Explain(cm.CheckRules(r.config), r.config);
  return cm.Memory(r.config);
}

const Json kTp1Pp4 = {
    {"tp", 1}, {"pp", 4}, {"vpp", 5}, {"mbs", 1}, {"distributed_optimizer", true}};

// training.precision names a recipe; "fp8" is the GPU's default; a recipe the
// GPU cannot run is refused naming the field and the recipes it can.
TEST(RecipeTest, ParsedPerGpu) {
  PredictRequest gb = Must("llama3-70b", "gb200-nvl72", 64, 256, "fp8", kTp1Pp4);
  EXPECT_EQ(gb.job.training.precision, topology::Precision::kFp8);
  EXPECT_EQ(gb.job.training.recipe, topology::Recipe::kFp8Current);
  PredictRequest mi = Must("llama3-8b", "mi355x", 8, 32, "fp8", {{"mbs", 2}});
  EXPECT_EQ(mi.job.training.recipe, topology::Recipe::kFp8Delayed);
  EXPECT_EQ(Must("llama3-8b", "hgx-h800", 8, 32, "fp8_blockwise", {{"mbs", 1}}).job.training.recipe,
            topology::Recipe::kFp8Blockwise);
  for (auto [cluster, recipe] : {std::pair{"dgx-h100", "mxfp8"},
                                 {"dgx-h100", "nvfp4"},
                                 {"mi355x", "nvfp4"},
                                 {"mi300x", "mxfp8"},
                                 {"dgx-a100-80gb", "fp8"}}) {
    Result<PredictRequest> r = Request("llama3-8b", cluster, 8, 32, recipe, {{"mbs", 1}});
    ASSERT_FALSE(r.ok()) << cluster << " " << recipe;
    EXPECT_NE(r.status().message().find("/training/precision"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("cannot run"), std::string::npos) << r.status().message();
  }
  Result<PredictRequest> bad = Request("llama3-8b", "dgx-b200", 8, 32, "fp4", {{"mbs", 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nvfp4"), std::string::npos);
  // The document says the recipe back.
  EXPECT_EQ(
      TrainingToJson(
          Must("llama3-8b", "dgx-b200", 8, 32, "mxfp8", {{"mbs", 1}}).job.training)["precision"],
      "mxfp8");
}

// NVFP4 runs the linear layers at the fp4 rate while attention and the
// logits stay in bf16: on GB300 (fp4 15 PF = 3 × fp8) the step gets faster,
// by less than the peak ratio.
TEST(RecipeTest, Fp4IsFasterThanFp8ByLessThanThePeakRatio) {
  const Prediction fp8 =
      PredictOf(Must("llama3-70b", "gb300-nvl72", 64, 256, "fp8_current", kTp1Pp4));
  const Prediction fp4 = PredictOf(Must("llama3-70b", "gb300-nvl72", 64, 256, "nvfp4", kTp1Pp4));
  EXPECT_LT(fp4.iteration_time_s, fp8.iteration_time_s);
  EXPECT_GT(fp4.iteration_time_s, fp8.iteration_time_s / 3.0);
  // MFU is against the peak the GEMMs run at: NVFP4's is the fp4 peak.
  EXPECT_LT(fp4.mfu, fp8.mfu);
}

// Megatron-FSDP is "megatron" with ZeRO-3: parameters, gradients and
// optimizer states sharded over the data group; the non-unit parameters
// (embedding, output layer, final norm) stay gathered once gathered
// (megatron_fsdp/param_and_grad_buffer.py:4367 @d98e8a6).
TEST(MegatronFsdpTest, ShardsEveryStateOverData) {
  const Json fsdp = {{"tp", 1}, {"pp", 1}, {"mbs", 1}, {"zero", 3}};
  const PredictRequest r = Must("llama3-70b", "gb300-nvl72", 64, 256, "fp8", fsdp);
  const MemoryBreakdown mem = MemoryOf(r);
  const ModelSpec& m = r.job.model;
  const double psi = m.ParamCount(), gib = 1 << 30;
  const double non_unit = 2.0 * static_cast<double>(m.vocab) * m.hidden + m.hidden;
  // Adam's fp32 master, moments: 12 bytes per parameter over 64 ranks.
  EXPECT_NEAR(mem.optimizer_GiB, 12.0 * psi / 64 / gib, 0.5);
  EXPECT_NEAR(mem.params_GiB, (2.0 * psi / 64 + 2.0 * non_unit) / gib, 0.05);
}

// Megatron-FSDP's optim_grads is "megatron" with ZeRO-2: gradients and
// optimizer states sharded over the data group, the model weights whole
// (megatron_fsdp/param_and_grad_buffer.py:2338-2341 @d98e8a6), every
// micro-batch's gradients reduce-scattered (mcore_fsdp_adapter.py:163-172).
TEST(MegatronFsdpTest, OptimGradsKeepsTheWeightsWhole) {
  const Json zero2 = {{"tp", 1}, {"pp", 1}, {"mbs", 1}, {"zero", 2}};
  const PredictRequest r = Must("llama3-70b", "gb300-nvl72", 64, 256, "fp8", zero2);
  const MemoryBreakdown mem = MemoryOf(r);
  const double psi = r.job.model.ParamCount(), gib = 1 << 30;
  EXPECT_NEAR(mem.optimizer_GiB, 12.0 * psi / 64 / gib, 0.5);
  EXPECT_GT(mem.params_GiB, 2.0 * psi / gib * 0.95);  // every rank holds the bf16 weights
  EXPECT_LT(mem.grads_GiB, 4.0 * psi / 32 / gib);
  // It reduce-scatters every micro-batch's gradients, where the distributed
  // optimizer reduces once a step: more data-parallel traffic.
  const Json distopt = {{"tp", 1}, {"pp", 1}, {"mbs", 1}, {"distributed_optimizer", true}};
  const PredictRequest once = Must("llama3-70b", "gb300-nvl72", 64, 256, "fp8", distopt);
  EXPECT_GT(PredictOf(r).breakdown.comm_data_s, PredictOf(once).breakdown.comm_data_s);
}

// Megatron-FSDP's communication memory is its double buffer's, which emit
// turns on (--fsdp-double-buffer, arguments.py:3202 @d98e8a6): a pool of two
// FSDP units' (transformer layers') unsharded gradients in the parameter dtype
// (param_and_grad_buffer.py:2526, 3956-3978), and under ZeRO-3 a second of
// two units' gathered parameters; not DeepSpeed's reduce bucket of 5e8
// elements. Its non-unit parameters (embedding, output layer, final norm)
// share one gradient bucket (:1807-1822), fetched at the output layer's
// backward, once the loss's fp32 tensors are gone.
TEST(MegatronFsdpTest, DoubleBufferAndNonUnitBucket) {
  const Json zero2 = {{"tp", 1}, {"pp", 1}, {"mbs", 1}, {"zero", 2}};
  const PredictRequest r = Must("llama3-70b", "gb300-nvl72", 64, 256, "bf16", zero2, 2048);
  const ModelSpec& m = r.job.model;
  const double gib = 1 << 30, h = m.hidden, vocab = static_cast<double>(m.vocab);
  const double non_unit = 2.0 * vocab * h + h;  // untied embedding and output layer, final norm
  const double layer = (static_cast<double>(m.ParamCount()) - non_unit) / m.layers;
  // Beside the runtime reserve, the buffers hold the GEMM workspaces: on a
  // Blackwell GPU under megatron PyTorch's 8 MiB + 128 KiB and cuBLASLt's 1 MiB,
  // Transformer Engine's 32 MiB + 1 KiB (tests/planner/memory_terms_test.cc).
  const double workspaces = (41.0 * 1024 * 1024 + 128 * 1024 + 1024) / gib;
  const double runtime = r.job.cluster.gpu.runtime_reserved_GiB + workspaces;
  EXPECT_NEAR(MemoryOf(r).buffers_GiB - runtime, 2.0 * layer * 2.0 / gib, 0.01);
  PredictRequest z3 = r;
  z3.config.zero = 3;
  EXPECT_NEAR(MemoryOf(z3).buffers_GiB - runtime, 2.0 * 2.0 * layer * 2.0 / gib, 0.01);
  // At 2K tokens the bucket (3.9 GiB in bf16) outweighs the loss's tensors:
  // it raises the peak, by less than its size and by at least what it
  // exceeds the loss by.
  const CostModel cm(m, r.job.training, r.job.cluster, r.job.gpus);
  double bucket = 0, loss = 0;
  for (const CostModel::LedgerRow& row : cm.MemoryLedger(r.config)) {
    if (row.term.find("non-unit gradient bucket") != std::string::npos) bucket = row.GiB;
    if (row.term.find("loss (logits)") != std::string::npos) loss = row.GiB;
  }
  EXPECT_GT(loss, 0.0);
  EXPECT_LT(bucket, non_unit * 2.0 / gib);
  EXPECT_GE(bucket, non_unit * 2.0 / gib - loss);
}

// Megatron-FSDP's handling of experts is not modelled: a mixture-of-experts
// model under megatron with zero 2, as with zero 3, is refused rather than
// priced as ZeRO-2 (no calibration row runs it).
TEST(MegatronFsdpTest, NotPricedForMixtureOfExperts) {
  for (int zero : {2, 3}) {
    const Json cfg = {{"tp", 1}, {"pp", 1}, {"ep", 8}, {"mbs", 1}, {"zero", zero}};
    const Result<PredictRequest> r = Request("mixtral-8x7b", "dgx-h100", 64, 256, "bf16", cfg, 4096);
    if (!r.ok()) {  // refused as the request is read
      EXPECT_NE(r.status().message().find("Megatron-FSDP"), std::string::npos) << zero;
      continue;
    }
    const CostModel cm(r->job.model, r->job.training, r->job.cluster, r->job.gpus);
    EXPECT_EQ(cm.CheckRules(r->config), Reason::kFrameworkUnsupported) << zero;
  }
}

// A stated DDP bucket (Megatron's --ddp-bucket-size) is a megatron request
// key: refused for a framework without such buckets, written back when set.
TEST(DdpBucketRequest, MegatronOnlyAndRoundTrips) {
  Json j = {{"model", "llama3-8b"},
            {"cluster", "dgx-h100"},
            {"gpus", 64},
            {"training", {{"global_batch", 512}, {"ddp_bucket_elements", 5e7}}},
            {"config", {{"mbs", 1}, {"distributed_optimizer", true}}}};
  const Result<PredictRequest> r = ParsePredictRequest(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.training.ddp_bucket_elements, 5e7);
  EXPECT_EQ(TrainingToJson(r->job.training)["ddp_bucket_elements"], 5e7);
  j["training"]["framework"] = "deepspeed";
  j["config"] = {{"zero", 1}};
  const Result<PredictRequest> ds = ParsePredictRequest(j);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("--ddp-bucket-size"), std::string::npos);
}

// CPU activation offloading of N layers (Megatron-Core): only without
// pipeline stages and recompute; at its peak the GPU keeps L - N layers'
// activations (TransformerEngine d0067d0 pytorch/cpu_offload.py:749-751), the
// host holds N, and a slow host link shows as exposed time.
TEST(ActivationOffloadTest, MemoryHostAndRules) {
  Json base = {{"tp", 1}, {"pp", 1}, {"mbs", 2}, {"zero", 3}};
  Json off = base;
  off["offload_activation_layers"] = 40;
  // As Megatron-Bridge runs it: bf16 main gradients, the whole GPU usable.
  PredictRequest r0 = Must("llama3-70b", "gb200-nvl72", 64, 256, "fp8", base);
  r0.job.training.main_grads_fp32 = false;
  r0.job.training.headroom = 0;
  PredictRequest r1 = Must("llama3-70b", "gb200-nvl72", 64, 256, "fp8", off);
  r1.job.training.main_grads_fp32 = false;
  r1.job.training.headroom = 0;
  const Prediction p0 = PredictOf(r0), p1 = PredictOf(r1);
  const CostModel cm(r1.job.model, r1.job.training, r1.job.cluster, r1.job.gpus);
  const double layer = cm.Compute(r1.config).act_bytes[0] / double(1 << 30);
  EXPECT_NEAR(p0.memory.activations_GiB - p1.memory.activations_GiB, 40 * layer, 1e-6);
  EXPECT_NEAR(p1.memory.host_per_gpu_GiB, 40 * layer, 1e-6);
  EXPECT_FALSE(p0.fits);  // 80 layers at 16K tokens do not fit a GB200 ...
  EXPECT_TRUE(p1.fits);   // ... with 40 of them in host memory they do (Megatron-Bridge's recipe)
  // Rules: pp > 1 or recompute exclude it.
  for (Json bad : {Json{{"pp", 2}}, Json{{"recompute", "full"}}}) {
    Json c = off;
    for (auto it = bad.begin(); it != bad.end(); ++it) c[it.key()] = it.value();
    const PredictRequest r = Must("llama3-70b", "gb200-nvl72", 64, 256, "fp8", c);
    const CostModel m(r.job.model, r.job.training, r.job.cluster, r.job.gpus);
    EXPECT_EQ(m.CheckRules(r.config), Reason::kFrameworkUnsupported) << bad.dump();
  }
  // A host link a hundred times slower cannot hide the copies.
  PredictRequest slow = r1;
  slow.job.cluster.host_link_GBps = 2.25;
  EXPECT_GT(PredictOf(slow).breakdown.offload_s, p1.breakdown.offload_s + 1.0);
}

// Full-iteration CUDA graphs: the host issues no kernels, so a step the host
// could not keep up with loses its stall.
TEST(CudaGraphsTest, RemoveTheHostStall) {
  Json c = {{"tp", 1}, {"pp", 1}, {"mbs", 1}};
  PredictRequest eager = Must("gpt3-125m", "dgx-b200", 8, 64, "bf16", c);
  eager.job.training.seq_len = 512;
  const Prediction pe = PredictOf(eager);
  ASSERT_GT(pe.breakdown.host_s, 0);
  PredictRequest graphed = eager;
  graphed.config.cuda_graphs = true;
  const Prediction pg = PredictOf(graphed);
  EXPECT_EQ(pg.breakdown.host_s, 0);
  EXPECT_LT(pg.iteration_time_s, pe.iteration_time_s);
}

// The NVLink cut matters where tensor parallelism carries the traffic: Llama
// 3 8B at 128K tokens on 16 GPUs. On H800 (NVLink 160 GB/s achieved against
// the H100's 370) the tp=8 layout runs more than 8 % slower than on an H100,
// while the best plans (context parallelism carrying the sequence, tp <= 4)
// lose under 2 %; the H800's best uses no more tensor parallelism than the
// H100's, and no plan runs faster on the H800. (At 8K tokens Megatron's TP
// overlap hides the cut.)
TEST(FleetPlanTest, H800CutCostsTensorParallelLayoutsMost) {
  const Json any = Json::object();
  PredictRequest h100 = Must("llama3-8b", "dgx-h100", 16, 8, "bf16", any, 131072);
  PredictRequest h800 = Must("llama3-8b", "hgx-h800", 16, 8, "bf16", any, 131072);
  const CostModel m100(h100.job.model, h100.job.training, h100.job.cluster, h100.job.gpus);
  const CostModel m800(h800.job.model, h800.job.training, h800.job.cluster, h800.job.gpus);
  SearchOptions o;
  o.top_k = 1;
  const SearchResult r100 = Search(m100, o).RunAll();
  const SearchResult r800 = Search(m800, o).RunAll();
  ASSERT_FALSE(r100.top.empty());
  ASSERT_FALSE(r800.top.empty());
  const ParallelConfig& best100 = r100.top[0].config;
  const ParallelConfig& best800 = r800.top[0].config;
  EXPECT_LE(best800.tensor(), best100.tensor()) << ConfigToString(best800);
  EXPECT_LE(best100.tensor(), 4) << ConfigToString(best100);
  const double best_loss =
      r800.top[0].prediction.iteration_time_s / r100.top[0].prediction.iteration_time_s;
  EXPECT_GE(best_loss, 1.0);
  EXPECT_LT(best_loss, 1.02);
  const Json tp8 = {{"tp", 8}, {"pp", 1}, {"dp", 2}, {"sp", true}, {"mbs", 1}};
  const PredictRequest tp8_100 = Must("llama3-8b", "dgx-h100", 16, 8, "bf16", tp8, 131072);
  const PredictRequest tp8_800 = Must("llama3-8b", "hgx-h800", 16, 8, "bf16", tp8, 131072);
  ASSERT_EQ(m100.CheckRules(tp8_100.config), Reason::kOk);
  ASSERT_EQ(m800.CheckRules(tp8_800.config), Reason::kOk);
  EXPECT_GT(PredictOf(tp8_800).iteration_time_s / PredictOf(tp8_100).iteration_time_s, 1.08);
}

// Issue 40 (8): a job's numbers are checked before any work, each error
// naming its field; a cluster without a NIC takes no job larger than a node,
// and what passes gets finite times (the case that answered null before).
TEST(JobRangesTest, RefusedByNameBeforeWork) {
  const Json box = Json::parse(R"({"name": "box", "gpu": "h100-sxm", "gpus_per_node": 8,
    "intra_node_GBps": 370, "nics_per_node": 0})");
  struct Case {
    Json cluster;
    int gpus;
    Json training;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"dgx-h100", 8, {{"seq_len", 0}}, "/training/seq_len: must be in [1, 67108864]"},
      {"dgx-h100", 8, {{"seq_len", 1 << 27}}, "/training/seq_len: must be in [1, 67108864]"},
      {"dgx-h100", 8, {{"global_batch", 0}}, "/training/global_batch: must be in [1, 1073741824]"},
      {"dgx-h100", 8, {{"fpdt_chunk_tokens", 1 << 27}},
       "/training/fpdt_chunk_tokens: must be in [1, 67108864]"},
      {"dgx-h100", 8, {{"headroom", 1}}, "/training/headroom: must be in [0, 1)"},
      {"dgx-h100", 0, Json::object(), "/gpus: must be in [1, 16777216]"},
      {box, 16, Json::object(),
       "/gpus: exceeds the cluster (1 nodes × 8 GPUs; it has no NIC, so no job spans more)"},
  };
  for (const Case& c : cases) {
    Json j = {{"model", "llama3-8b"}, {"cluster", c.cluster}, {"gpus", c.gpus},
              {"training", c.training}};
    Result<PredictRequest> r = ParsePredictRequest(j);
    ASSERT_FALSE(r.ok()) << c.expected;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
  Json many = box;
  many["max_nodes"] = 2;
  Result<PredictRequest> r = ParsePredictRequest(
      {{"model", "llama3-8b"}, {"cluster", many}, {"gpus", 16}, {"training", Json::object()}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/cluster/nics_per_node: must be >= 1"), std::string::npos)
      << r.status().message();
  // One node of the box: accepted, with finite times.
  Result<PredictRequest> in_box = ParsePredictRequest(
      {{"model", "llama3-8b"}, {"cluster", box}, {"gpus", 8},
       {"training", {{"seq_len", 4096}, {"global_batch", 64}}}, {"config", {{"tp", 8}}}});
  ASSERT_TRUE(in_box.ok()) << in_box.status().ToString();
  const Prediction p = PredictOf(*in_box);
  EXPECT_TRUE(std::isfinite(p.iteration_time_s) && p.iteration_time_s > 0) << p.iteration_time_s;
}

}  // namespace
}  // namespace paratune::planner
