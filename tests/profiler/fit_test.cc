// The fits recover known parameters: α-β from exact and from noisy samples
// (fixed seed), the AxoNN authors' Perlmutter constants, and the GEMM
// efficiency curve this project's H100 preset was built from (E = 0.895,
// s₀ = 1253, γ = 1.2, anchored at 798 TFLOP/s for 8192³ bf16).
#include "profiler/fit.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "topology/gpu.h"

namespace paratune::profiler {
namespace {

using testing::Noise;
using topology::Collective;

std::vector<TimedSize> Synthetic(Collective c, int p, double alpha_us, double beta_GBps, int64_t lo,
                                 int64_t hi, double sigma, uint64_t seed) {
  Noise noise(seed);
  std::vector<TimedSize> out;
  for (int64_t s = lo; s <= hi; s *= 2) {
    const double t = alpha_us * p + topology::BusFactor(c, p) * s / (beta_GBps * 1e3);
    out.push_back({s, t * noise.Factor(sigma)});
  }
  return out;
}

TEST(FitAlphaBeta, RecoversExactParameters) {
  // A100 NVSwitch: ≈ 230 GB/s all-reduce busbw (cost-model.md §7), 8 µs per rank.
  auto fit =
      FitAlphaBeta(Synthetic(Collective::kAllReduce, 8, 8.0, 230.0, 8, int64_t{8} << 30, 0, 1),
                   Collective::kAllReduce, 8);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->alpha_us, 8.0, 1e-6);
  EXPECT_NEAR(fit->beta_GBps, 230.0, 1e-6);
  EXPECT_LT(fit->residual, 1e-9);
  EXPECT_EQ(fit->relative_errors.size(), 31u);
}

TEST(FitAlphaBeta, RecoversParametersFromNoisySamples) {
  // 3 % multiplicative noise, the spread nccl-tests rows show run to run.
  auto fit = FitAlphaBeta(
      Synthetic(Collective::kAllGather, 16, 9.0, 59.52, 1024, int64_t{4} << 30, 0.03, 2026),
      Collective::kAllGather, 16);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->alpha_us, 9.0, 0.9);     // within 10 %
  EXPECT_NEAR(fit->beta_GBps, 59.52, 1.8);  // within 3 %
  EXPECT_GT(fit->residual, 0.01);           // the noise is seen…
  EXPECT_LT(fit->residual, 0.06);           // …and is all there is
}

TEST(FitAlphaBeta, ReproducesTheAxonnPerlmutterFit) {
  // AxoNN (axonn-notes.md §2.3): β_node = 59.52 GB/s, α = 0.009 ms per GPU,
  // fitted on NCCL all-gather as t = α·p + ((p−1)/p·size)/β.
  for (int p : {2, 4, 8, 16, 64}) {
    auto fit = FitAlphaBeta(
        Synthetic(Collective::kAllGather, p, 9.0, 59.52, 1 << 16, int64_t{1} << 32, 0, 7),
        Collective::kAllGather, p);
    ASSERT_TRUE(fit.ok());
    EXPECT_NEAR(fit->alpha_us, 9.0, 1e-6) << p;
    EXPECT_NEAR(fit->beta_GBps, 59.52, 1e-6) << p;
  }
}

TEST(FitAlphaBeta, ClampsANegativeInterceptToZero) {
  // Pure bandwidth with a slow tail at small sizes pulls the intercept below 0.
  std::vector<TimedSize> s;
  for (int64_t b = 1 << 20; b <= (int64_t{1} << 30); b *= 2) {
    s.push_back({b, b / 100e3 * (b < (1 << 24) ? 0.9 : 1.0)});
  }
  auto fit = FitAlphaBeta(s, Collective::kSendRecv, 2);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->alpha_us, 0.0);
  EXPECT_NEAR(fit->beta_GBps, 100.0, 10.0);
}

TEST(FitAlphaBeta, RefusesWhatCannotBeFitted) {
  std::vector<TimedSize> flat = {{8, 20.0}, {64, 20.0}, {512, 19.9}};
  auto f = FitAlphaBeta(flat, Collective::kAllReduce, 8);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("latency-bound"), std::string::npos);
  EXPECT_FALSE(FitAlphaBeta({{1024, 10.0}, {1024, 11.0}}, Collective::kAllReduce, 8).ok());
  EXPECT_FALSE(FitAlphaBeta({{1024, 10.0}, {2048, 11.0}}, Collective::kAllReduce, 1).ok());
  EXPECT_FALSE(FitAlphaBeta({{1024, 0.0}, {2048, 11.0}}, Collective::kAllReduce, 8).ok());
}

// Timings of a GEMM whose efficiency follows E / (1 + (s0/s)^γ) against `peak`.
std::vector<GemmTiming> CurveTimings(double e, double s0, double gamma, double peak, double sigma,
                                     uint64_t seed) {
  Noise noise(seed);
  std::vector<GemmTiming> out;
  auto add = [&](int64_t m, int64_t n, int64_t k) {
    const double size = GeometricMeanSize(m, n, k);
    const double eff = e / (1 + std::pow(s0 / size, gamma));
    const double t_us = 2.0 * m * n * k / (peak * eff * 1e6);
    out.push_back({m, n, k, t_us * noise.Factor(sigma)});
  };
  for (int64_t s = 256; s <= 16384; s *= 2) add(s, s, s);
  add(16384, 1024, 4096);  // tensor-parallel slices: same curve by geometric mean
  add(8192, 2048, 8192);
  return out;
}

TEST(FitGemmCurve, RecoversTheH100PresetCurve) {
  // The preset's own points, turned into timings at the 989 TFLOP/s bf16 peak.
  auto h100 = topology::GpuPreset("h100-sxm");
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  const auto& points = h100->gemm_efficiency[static_cast<size_t>(topology::Precision::kBf16)];
  ASSERT_GE(points.size(), 10u);
  std::vector<GemmTiming> t;
  for (const auto& pt : points) {
    const auto s = static_cast<int64_t>(std::llround(pt.size));
    t.push_back({s, s, s, 2.0 * s * s * s / (989.0 * pt.efficiency * 1e6)});
  }
  auto fit = FitGemmCurve(t, 989.0);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  // The preset's documented curve: e_max·x^1.2/(x^1.2 + x0^1.2) with the knee
  // x0 = 1253·(989/312)^(1/3) = 1841 and e_max = 0.81/e(8192) = 0.945.
  EXPECT_NEAR(fit->saturation_efficiency, 0.945, 0.01);
  EXPECT_NEAR(fit->size_half, 1841, 40);
  EXPECT_NEAR(fit->gamma, 1.2, 0.03);
  EXPECT_LT(fit->residual, 0.01);  // the preset's points are rounded to 3 digits
  // The measured anchor: 8192³ bf16 at ≈ 798 TFLOP/s = 0.81 of peak.
  EXPECT_NEAR(CurveEfficiency(*fit, 8192) * 989.0, 798.0, 8.0);
}

TEST(FitGemmCurve, RecoversACurveFromNoisyTimings) {
  auto fit = FitGemmCurve(CurveTimings(0.8, 900, 1.5, 312.0, 0.02, 42), 312.0);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->saturation_efficiency, 0.8, 0.03);
  EXPECT_NEAR(fit->gamma, 1.5, 0.25);
  EXPECT_NEAR(CurveEfficiency(*fit, 2048), 0.8 / (1 + std::pow(900.0 / 2048, 1.5)), 0.02);
  // Curve points ascend in size, efficiencies in (0, 1], spanning the samples.
  ASSERT_FALSE(fit->curve.empty());
  EXPECT_EQ(fit->curve.front().size, 256);
  EXPECT_EQ(fit->curve.back().size, 16384);
  for (size_t i = 0; i < fit->curve.size(); ++i) {
    EXPECT_GT(fit->curve[i].efficiency, 0);
    EXPECT_LE(fit->curve[i].efficiency, 1);
    if (i) {
      EXPECT_GT(fit->curve[i].size, fit->curve[i - 1].size);
    }
  }
  EXPECT_EQ(fit->relative_errors.size(), 9u);
}

TEST(FitGemmCurve, NeedsThreeSizesAndAPeak) {
  EXPECT_FALSE(FitGemmCurve({{512, 512, 512, 10}, {1024, 1024, 1024, 50}}, 100).ok());
  EXPECT_FALSE(FitGemmCurve(CurveTimings(0.8, 900, 1.5, 312, 0, 1), 0).ok());
}

}  // namespace
}  // namespace paratune::profiler
