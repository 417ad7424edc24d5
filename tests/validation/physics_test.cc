// Physics the cost model may not break (docs/model.md, "Executed FLOPs and
// the GEMM ceilings"): every measured GEMM ceiling a GPU preset states quotes
// its measurement; no GEMM is priced above it at any size; and no prediction
// of a published run executes more FLOP/s than its GPU's best measured GEMM,
// the fastest kernel a training step runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "common/json.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "topology/cluster.h"
#include "topology/gpu.h"
#include "validation/fit.h"
#include "validation/validation.h"

namespace paratune::planner {
namespace {

// A ceiling's source quotes the measurement it comes from: "X of the Y
// TFLOP/s dense peak" with X / Y the fraction, or, borrowed from a sibling
// part of the same die, "Z TFLOP/s" and "as a fraction of P's Y TFLOP/s
// dense peak" with Z / Y the fraction.
TEST(Physics, GemmCeilingsQuoteTheirMeasurement) {
  int cells = 0;
  const std::regex own(R"(([0-9.]+) of the ([0-9.]+) TFLOP/s dense peak)");
  const std::regex borrowed(R"(([0-9.]+) TFLOP/s .*as a fraction of \S+ ([0-9.]+) TFLOP/s dense peak)");
  for (const std::string& name : topology::GpuPresetNames()) {
    auto gpu = topology::GpuPreset(name);
    ASSERT_TRUE(gpu.ok()) << name;
    for (const topology::GemmCeiling& c : gpu->gemm_ceilings) {
      ++cells;
      std::smatch m;
      const bool found = std::regex_search(c.source, m, own) || std::regex_search(c.source, m, borrowed);
      ASSERT_TRUE(found) << name << ": " << c.source;
      EXPECT_NEAR(std::stod(m[1]) / std::stod(m[2]), c.fraction, 0.0015) << name << ": " << c.source;
      EXPECT_LT(c.fraction, 0.9) << name << ": no dense GEMM has been measured at 90 % of peak";
    }
  }
  EXPECT_GE(cells, 25);
  // Every GPU the calibration files run on states its bf16 (V100: fp16) ceiling.
  for (const char* name : {"v100-32gb", "a100-80gb", "h100-sxm", "h200", "b200", "b300", "gb200",
                           "gb300", "mi300x", "mi355x"}) {
    const auto gpu = topology::GpuPreset(name);
    ASSERT_TRUE(gpu.ok()) << name;
    EXPECT_LT(gpu->GemmCeilingAt(topology::Precision::kBf16), 1.0) << name;
  }
}

// Priced at any size from 256³ to 65536³, a GEMM runs no faster than its GPU's
// measured ceiling at the training precision: for every GPU preset and every
// precision it states a ceiling for, through the whole cost model path
// (curve, short-k factor, sustained fraction, recipe factor).
TEST(Physics, NoGemmIsPricedAboveItsMeasuredCeiling) {
  auto base = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(base.ok());
  ModelSpec model = *ModelPreset("llama3-8b");
  int checked = 0;
  for (const std::string& name : topology::GpuPresetNames()) {
    topology::ClusterSpec cluster = *base;
    cluster.gpu = *topology::GpuPreset(name);
    for (const topology::GemmCeiling& c : cluster.gpu.gemm_ceilings) {
      TrainingSpec t;
      t.precision = c.precision;
      t.global_batch = 64;
      t.seq_len = 2048;
      if (!(cluster.gpu.PeakTflops(c.precision) > 0)) continue;
      const CostModel cm(model, t, cluster, 8);
      const double peak = c.precision == topology::Precision::kFp8
                              ? cluster.gpu.RecipePeakTflops(t.recipe)
                              : cluster.gpu.PeakTflops(c.precision);
      for (double n = 256; n <= 65536; n *= 2) {
        const double eff = 2 * n * n * n / (cm.GemmSeconds(n, n, n) * peak * 1e12);
        EXPECT_LE(eff, c.fraction + 1e-9) << name << " " << topology::PrecisionName(c.precision) << " " << n;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 200);
}

// The best published fused-attention figures per GPU (fraction of the dense
// bf16 peak; docs/model.md, "Attention against its published kernels").
struct AttentionBest {
  std::vector<const char*> gpus;
  double fwd = 0, bwd = 0;  // 0: not published apart
  double fwd_bwd = 0;       // forward + backward together (0: not used)
  const char* source;
};
const AttentionBest kAttentionBest[] = {
    {{"a100-40gb", "a100-80gb"}, 0, 0, 0.651,
     "FlashAttention-2 forward + backward, hd 128, 16K, 203 TFLOP/s (Dao-AILab/flash-attention "
     "@0251105 assets/flash2_a100)"},
    {{"h100-sxm", "h200", "gh200", "h800"}, 0.764, 0.619, 0,
     "FlashAttention-3 forward hd 256 756 TFLOP/s (same repository, FA3 figure); cuDNN 9.19 SDPA "
     "backward on H200 612 TFLOP/s (NVIDIA/cudnn-frontend @3929da2)"},
    {{"b200", "b300", "gb200", "gb300"}, 0.717, 0.562, 0,
     "FlashAttention-4 on B200, 1613 TFLOP/s (arXiv 2603.05451 abstract); cuDNN 9.22 SDPA "
     "backward on GB200 1404 TFLOP/s (cudnn-frontend @3929da2)"},
    {{"mi350x", "mi355x"}, 0.522, 0.48, 0,
     "HipKittens forward 1304, AITER backward 1201 TFLOP/s on MI355X (HazyResearch/HipKittens "
     "@f09e968)"},
};

// The model's fused attention runs at flash_*_efficiency × its shape factor
// (at most 1.1) × the framework's attention_efficiency: at the most favourable
// of each, shipped and at the fitted constants' upper bounds, no GPU's
// attention beats the best published kernel on it.
TEST(Physics, AttentionStaysUnderItsPublishedKernels) {
  constexpr double kShapeMax = 1.1;  // FlashShapeFactor's cap (planner/cost/compute.cc)
  double fw_max = 0;
  for (Framework f : AllFrameworks()) {
    fw_max = std::max(fw_max, FrameworkPreset(f).costs.attention_efficiency);
  }
  std::map<std::string, double> bound_hi;
  for (const FittableConstant& c : FittableConstants()) bound_hi[c.name] = c.hi;
  int checked = 0;
  for (const AttentionBest& best : kAttentionBest) {
    for (const char* name : best.gpus) {
      const auto gpu = topology::GpuPreset(name);
      ASSERT_TRUE(gpu.ok()) << name;
      const double ratio = gpu->flash_bwd_efficiency / gpu->flash_fwd_efficiency;
      const std::string family = GpuGeneration(name);
      const auto hi = bound_hi.find(family + ".flash_efficiency");
      std::vector<double> fwds = {gpu->flash_fwd_efficiency};
      if (hi != bound_hi.end()) fwds.push_back(hi->second);
      for (double fwd : fwds) {
        const double f = fwd * kShapeMax * fw_max;
        const double b = std::min(1.0, fwd * ratio) * kShapeMax * fw_max;
        if (best.fwd > 0) {
          EXPECT_LE(f, best.fwd) << name << " forward at " << fwd << ": " << best.source;
        }
        if (best.bwd > 0) {
          EXPECT_LE(b, best.bwd) << name << " backward at " << fwd << ": " << best.source;
        }
        // Forward + backward: FLOPs 1 + 2.5 (FlashAttention-2 §3.1) over their times.
        if (best.fwd_bwd > 0) {
          EXPECT_LE(3.5 / (1 / f + 2.5 / b), best.fwd_bwd) << name << ": " << best.source;
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 18);
}

std::vector<PublishedRun> Load(const char* file) {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/" + file);
  if (!text.ok()) return {};
  auto doc = ParseJson(*text, file);
  if (!doc.ok()) return {};
  std::vector<std::string> skipped;
  Result<std::vector<PublishedRun>> runs = std::string(file) == "moe_runs.json"
                                               ? PublishedRunsFromMoeRuns(*doc, &skipped)
                                           : std::string(file) == "fleet_runs.json"
                                               ? PublishedRunsFromFleetRuns(*doc)
                                               : PublishedRunsFromPublicRuns(*doc);
  return runs.ok() ? *runs : std::vector<PublishedRun>{};
}

// Every published run, predicted with the presets as shipped and with the
// constants refitted to all of them, executes at most its GPU's best measured
// GEMM efficiency (executed FLOP/s over the dense peak of the precision it
// trains in: HFU as Prediction::hfu counts it), and its executed FLOPs are at
// most the counted ones plus recompute wherever a fused kernel skips the
// masked half.
TEST(Physics, NoPublishedRunExecutesAboveItsGpusGemmCeiling) {
  std::vector<PublishedRun> runs;
  for (const char* f : {"public_runs.json", "fleet_runs.json", "moe_runs.json"}) {
    const auto r = Load(f);
    runs.insert(runs.end(), r.begin(), r.end());
  }
  if (runs.empty()) GTEST_SKIP() << "calibration files not found";
  std::vector<const PublishedRun*> rows;
  for (const PublishedRun& r : runs) rows.push_back(&r);
  const FitResult refit = FitConstants(rows);
  int checked = 0;
  for (const PublishedRun& r : runs) {
    const TrainingSpec& t = r.request.job.training;
    if (t.precision == topology::Precision::kFp8 && t.recipe == topology::Recipe::kNvfp4) continue;
    const double ceiling = r.request.job.cluster.gpu.GemmCeilingAt(
        t.precision == topology::Precision::kFp8 ? topology::Precision::kFp8 : t.precision);
    for (const Prediction& p : {PredictWithConstants(r, {}), PredictWithConstants(r, refit.values)}) {
      if (!(p.iteration_time_s > 0)) continue;
      EXPECT_LE(p.hfu, ceiling) << r.id << ": executed " << p.executed_tflops_per_gpu << " TFLOP/s";
      EXPECT_GT(p.hfu, 0) << r.id;
      ++checked;
    }
  }
  EXPECT_GE(checked, 700);
}

}  // namespace
}  // namespace paratune::planner
