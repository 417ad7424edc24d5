// profiler/fit.h: the fits that turn measurements into model parameters.
// Pure, deterministic functions (Eigen least squares inside the .cc; plain
// structs here).
//
// Collectives (cost-model.md §3): t = α·p + bus_bytes / β with bus_bytes =
// BusFactor(collective, p) × size, fitted per collective × tier × group size.
// With p fixed the intercept is α·p; α is reported per rank like the cluster
// model's alpha_us. The fit is weighted least squares on relative error
// (minimises Σ((t̂ − t)/t)²), so the latency-bound small sizes and the
// bandwidth-bound large ones both count — an absolute fit would let the largest
// message decide everything.
//
// GEMMs: efficiency(s) = E / (1 + (s₀/s)^γ) with s the geometric-mean size
// (m·n·k)^(1/3), the saturating form the GPU presets use (topology/presets:
// "x0", "gamma"). For each γ on a fine grid, 1/eff is linear in (1, s^−γ) and
// is solved by least squares on relative time error; the γ with the smallest
// residual wins. A fixed launch latency is the γ = 3 member of this family.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::profiler {

// One measured point of a collective: nccl-tests size (bytes) and time (µs).
struct TimedSize {
  int64_t size_bytes = 0;
  double time_us = 0;
};

struct AlphaBetaFit {
  double alpha_us = 0;                  // latency per rank in the group, µs (intercept / p)
  double beta_GBps = 0;                 // bus bandwidth, GB/s (1e9)
  double residual = 0;                  // RMS of (t̂ − t)/t over the samples used
  std::vector<double> relative_errors;  // (t̂ − t)/t per sample, in input order
};

// Fits t = α·p + BusFactor·size/β. Samples with size 0 or time ≤ 0 are refused.
// α is clamped at 0 (the fit is redone for β alone) when the unconstrained
// intercept is negative. Fails (kInvalidArgument, saying why) with fewer than
// two distinct sizes, group_size < 2, or when time does not grow with size
// (β would be ≤ 0: every sample latency-bound; extend the sweep).
Result<AlphaBetaFit> FitAlphaBeta(const std::vector<TimedSize>& samples,
                                  topology::Collective collective, int group_size);

// Predicted µs of the fitted model for `size_bytes`.
double PredictUs(const AlphaBetaFit& fit, topology::Collective collective, int group_size,
                 int64_t size_bytes);

// One timed GEMM (m, n, k as in GemmArgs; µs).
struct GemmTiming {
  int64_t m = 0, n = 0, k = 0;
  double time_us = 0;
};
// (m·n·k)^(1/3), the size the efficiency curves are indexed by.
double GeometricMeanSize(int64_t m, int64_t n, int64_t k);
// 2·m·n·k / time, TFLOP/s (1e12).
double GemmTflops(int64_t m, int64_t n, int64_t k, double time_us);

struct GemmCurveFit {
  double peak_tflops = 0;               // the peak efficiencies are relative to
  double saturation_efficiency = 0;     // E
  double size_half = 0;                 // s₀: the size at which efficiency is E/2
  double gamma = 0;                     // γ
  double residual = 0;                  // RMS of (t̂ − t)/t
  std::vector<double> relative_errors;  // per sample, in input order
  // The fitted curve at sizes 2^(i/2) spanning the measured sizes (both ends
  // included), efficiencies clamped into (0, 1]: GpuSpec::gemm_efficiency form.
  std::vector<topology::EfficiencyPoint> curve;
};

// Fits the curve to GEMM timings against `peak_tflops` (> 0). Fails with fewer
// than three distinct sizes.
Result<GemmCurveFit> FitGemmCurve(const std::vector<GemmTiming>& samples, double peak_tflops);

// Efficiency of the fitted model at geometric-mean size `size` (unclamped).
double CurveEfficiency(const GemmCurveFit& fit, double size);

}  // namespace paratune::profiler
