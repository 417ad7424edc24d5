// topology/gpu.h: what the cost model needs to know about one GPU model: memory,
// HBM bandwidth, dense peak per precision and how efficiently real kernels reach
// that peak (a GEMM efficiency curve by shape, fused-attention efficiency).
// Presets live in topology/presets/gpus/*.json, every number with a `source`;
// a measured profile (profiler/) may replace the GEMM curve.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::topology {

enum class Precision : uint8_t { kFp32 = 0, kTf32, kBf16, kFp16, kFp8 };
inline constexpr int kNumPrecisions = 5;

// "fp32" | "tf32" | "bf16" | "fp16" | "fp8".
const char* PrecisionName(Precision p);
// Whether training at `p` keeps weights, activations and gradients in fp32
// (fp32, tf32: no separate master copy); below it they are 2 bytes (fp8
// recipes keep bf16 weights).
inline bool TrainsInFp32(Precision p) { return p == Precision::kFp32 || p == Precision::kTf32; }
Result<Precision> ParsePrecision(const std::string& name);

// Low-precision training recipes: how GEMM inputs are scaled and in which
// format they run (Transformer Engine's recipe classes in brackets).
//   fp8_delayed    per-tensor scales from an amax history (DelayedScaling)
//   fp8_current    per-tensor scales from the tensor itself (Float8CurrentScaling)
//   fp8_blockwise  1x128 activation / 128x128 weight scales (Float8BlockScaling;
//                  DeepSeek-V3's recipe)
//   mxfp8          OCP MXFP8: E4M3 with an E8M0 scale per 32 elements (MXFP8BlockScaling)
//   nvfp4          NVFP4: E2M1 with an E4M3 scale per 16 elements (NVFP4BlockScaling)
enum class Recipe : uint8_t { kFp8Delayed = 0, kFp8Current, kFp8Blockwise, kMxfp8, kNvfp4 };
inline constexpr int kNumRecipes = 5;
const char* RecipeName(Recipe r);  // "fp8_delayed" | ... | "nvfp4"
Result<Recipe> ParseRecipe(const std::string& name);

// One point of a GEMM efficiency curve. `size` is the geometric mean of the
// GEMM's three dimensions, (m·n·k)^(1/3); `efficiency` is achieved / dense peak.
struct EfficiencyPoint {
  double size = 0;
  double efficiency = 0;
};

// The best model-FLOPs utilisation published for a GPU at one precision
// (model FLOP/s over the dense peak at that precision), with its source.
// A prediction above it is flagged and ranked no better than it.
struct MfuCeiling {
  Precision precision = Precision::kBf16;
  double mfu = 0;      // in (0, 1]
  std::string source;  // the publication (required)
};

// The best published measured efficiency of a dense GEMM at one precision
// (fraction of the GPU's dense peak; key gemm_ceilings): no GEMM the model
// prices may run faster.
struct GemmCeiling {
  Precision precision = Precision::kBf16;
  double fraction = 0;  // in (0, 1]
  std::string source;   // the measurement (required)
};

struct GpuSpec {
  std::string name;              // preset key, e.g. "a100-80gb"
  std::string display_name;      // "NVIDIA A100-SXM4-80GB"
  double memory_GiB = 0;         // HBM capacity visible to the framework, GiB
  double hbm_GBps = 0;           // peak HBM bandwidth, GB/s (1e9)
  double hbm_efficiency = 0.85;  // achievable fraction of hbm_GBps for streaming kernels
  // Dense peak TFLOP/s (1e12) per Precision index; 0 = not supported.
  std::array<double, kNumPrecisions> peak_tflops{};
  // GEMM efficiency by shape, ascending in size, per precision; an empty curve
  // falls back to the bf16 curve (to the fp16 one on GPUs without bf16, e.g.
  // V100). Interpolated linearly in log2(size), clamped at both ends.
  std::array<std::vector<EfficiencyPoint>, kNumPrecisions> gemm_efficiency;
  // The fraction of the curve's (short-run, benchmark or `paratune profile`)
  // GEMM throughput that a training run sustains, in (0, 1]; the cost model
  // multiplies every GEMM's efficiency by it. 1 where the curve was fitted to
  // training runs (A100).
  double gemm_sustained_fraction = 1.0;
  double flash_fwd_efficiency = 0.5;  // fused (flash) attention forward, fraction of peak
  double flash_bwd_efficiency = 0.4;  // fused attention backward, fraction of peak
  double host_link_GBps = 25;         // GPU<->host per direction (PCIe / NVLink-C2C), GB/s
  // Fixed GPU time of one kernel beyond its math or bytes (launch gap,
  // prologue, tail wave), microseconds. 0 = none (an ideal device).
  double kernel_overhead_us = 2.5;
  // GEMMs with a short inner dimension k reach (k/(k + k0)) / (x/(x + k0)) of
  // the curve's efficiency at x = (mnk)^(1/3) (tile prologue/epilogue
  // amortised over fewer MMA steps). 0 = no such penalty.
  double gemm_k0 = 128;
  // Fused attention's shape dependence: efficiency × d/(d + head_dim_half)
  // and × s/(s + seq_half), relative to d = 128, s = 4096. 0 = none.
  double flash_head_dim_half = 32;
  double flash_seq_half = 256;
  double runtime_reserved_GiB = 1.0;  // CUDA context, cuBLAS workspace, NCCL buffers
  // Best published MFU by precision (key published_mfu_ceilings); empty = none.
  std::vector<MfuCeiling> published_mfu_ceilings;
  // Best published measured dense-GEMM efficiency by precision (key
  // gemm_ceilings); empty = none.
  std::vector<GemmCeiling> gemm_ceilings;
  // 4-bit floating point (NVFP4 / MXFP4) GEMMs: the dense peak (0 = none; JSON
  // peak_tflops.fp4) and the efficiency curve (JSON gemm_efficiency.fp4; empty
  // = the fp8 curve). Kept apart from the Precision-indexed arrays because no
  // activation, weight or collective is ever held in fp4 outside a GEMM.
  double fp4_peak_tflops = 0;
  std::vector<EfficiencyPoint> fp4_gemm_efficiency;
  // The low-precision recipes the GPU runs (JSON low_precision_recipes; absent:
  // fp8_delayed, fp8_current and fp8_blockwise where the GPU has an fp8 peak),
  // and the one training.precision "fp8" means on it.
  std::array<bool, kNumRecipes> recipes{};
  // Per recipe, the share of its curve's GEMM throughput the recipe's scaled
  // GEMMs reach (block-scale handling in the kernel, Hadamard transforms), in
  // (0, 1]; JSON recipe_gemm_factor {"mxfp8": 0.95, ...}; absent = 1.
  std::array<double, kNumRecipes> recipe_gemm_factor{1, 1, 1, 1, 1};
  // Default fp8_current: Megatron-Bridge's performance recipes run FP8 with
  // current scaling (FP8-CS) on Hopper and Blackwell.
  Recipe fp8_default_recipe = Recipe::kFp8Current;
  std::string source;  // where the figures come from
  // Per-field provenance: JSON key ("hbm_GBps", "gemm_efficiency", ...) -> where
  // that number comes from (datasheet, paper, measurement, "estimate: ...").
  std::map<std::string, std::string> sources;

  // The published MFU ceiling at precision p, 0 when the preset states none.
  double PublishedMfuCeiling(Precision p) const;
  // The measured GEMM ceiling at precision p (fp16 and bf16 stand in for each
  // other: the same tensor-core rate); 1 when the preset states none.
  double GemmCeilingAt(Precision p) const;
  // Peak TFLOP/s at precision p (fp8 falls back to bf16 when unsupported).
  double PeakTflops(Precision p) const;
  bool Supports(Recipe r) const { return recipes[static_cast<int>(r)]; }
  // Dense peak of the GEMMs a recipe runs: fp4 for nvfp4, fp8 otherwise.
  double RecipePeakTflops(Recipe r) const {
    return r == Recipe::kNvfp4 ? fp4_peak_tflops : PeakTflops(Precision::kFp8);
  }
  // The curve a recipe's GEMMs read: fp4's for nvfp4 (the fp8 curve when it
  // has none), the fp8 curve otherwise.
  const std::vector<EfficiencyPoint>& RecipeGemmCurve(Recipe r) const;

  // Efficiency for a GEMM of m×k by k×n at precision p, in (0, 1]: the curve
  // at size (m·n·k)^(1/3). 1 (the ideal model) when the spec has no curve at all.
  double GemmEfficiency(Precision p, double m, double n, double k) const;
  // The curve GemmEfficiency reads for p, after the fallback above; an empty
  // vector when the spec has no curve at all. Valid as long as *this is.
  const std::vector<EfficiencyPoint>& EffectiveGemmCurve(Precision p) const;
};

// The per-kernel overhead and the GEMM and fused-attention shape constants by
// preset key, each in [0, 1e6]; 0 turns its effect off.
inline constexpr std::pair<const char*, double GpuSpec::*> kKernelConstants[] = {
    {"kernel_overhead_us", &GpuSpec::kernel_overhead_us},
    {"gemm_k0", &GpuSpec::gemm_k0},
    {"flash_head_dim_half", &GpuSpec::flash_head_dim_half},
    {"flash_seq_half", &GpuSpec::flash_seq_half}};

// Accepted ranges of the numbers in GPU and cluster objects (docs/presets.md,
// "Accepted ranges"): wide enough for any part shipped or announced, narrow
// enough that a typo or a hostile 1e308 / 1e-300 is refused by name before
// the cost model turns it into an iteration of 1e302 s.
inline constexpr double kMaxGpuMemoryGiB = 4096;  // 14x the most any GPU holds (B300, 288 GB)
// A positive peak: 1 GFLOP/s, under one CPU core's (an mpi-cpu rank sharing
// a 2.4 GHz AVX2 core is 0.077 TFLOP/s).
inline constexpr double kMinPeakTflops = 0.001;
inline constexpr double kMaxPeakTflops = 1e6;     // 10x an announced 100 PFLOP/s fp4 package
inline constexpr double kMinGBps = 0.01;          // every bandwidth: 10 MB/s
inline constexpr double kMaxGBps = 1e5;           // every bandwidth: 100 TB/s (HBM is 8)
inline constexpr double kMaxCurveSize = 1e9;      // GEMM curve: geometric-mean dimension

// Parses a GPU object: the preset file format (docs/presets.md). Strict: unknown keys
// are errors naming their JSON pointer.
Result<GpuSpec> ParseGpuSpec(const Json& j, const std::string& pointer);
Json GpuSpecToJson(const GpuSpec& gpu);

// Built-in presets (compiled in): a100-40gb, a100-80gb, b200, b300, gb200,
// gb300, gh200, h100-sxm, h200, h800, mi250x-gcd, mi300x, mi325x, mi350x,
// mi355x, v100-32gb.
std::vector<std::string> GpuPresetNames();
Result<GpuSpec> GpuPreset(const std::string& name);

}  // namespace paratune::topology
