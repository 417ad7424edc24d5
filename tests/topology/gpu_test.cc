#include "topology/gpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/topology/test_util.h"

namespace paratune::topology {
namespace {

using testing::ExpectRangeVerdict;
using testing::MustGpu;
using testing::MustParse;
using testing::SetAt;

const std::vector<std::string> kGpuPresets = {
    "a100-40gb", "a100-80gb", "b200",       "b300",   "gb200",  "gb300",  "gh200",  "h100-sxm",
    "h200",      "h800",      "mi250x-gcd", "mi300x", "mi325x", "mi350x", "mi355x", "v100-16gb",
    "v100-32gb"};

TEST(PrecisionTest, NamesRoundTrip) {
  ASSERT_NO_FATAL_FAILURE(
      testing::ExpectNamesRoundTrip<Precision>(kNumPrecisions, PrecisionName, ParsePrecision));
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
  Result<Precision> bad = ParsePrecision("bfloat16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
}

TEST(GpuPresetTest, EveryPresetParsesAndIsListed) {
  testing::ExpectEveryPresetLoads<GpuSpec>(GpuPresetNames(), kGpuPresets, &GpuPreset,
                                           [](const std::string& name, const GpuSpec& g) {
                                             EXPECT_GT(g.memory_GiB, 0);
                                             EXPECT_GT(g.PeakTflops(Precision::kFp32), 0) << name;
                                           });
}

TEST(GpuPresetTest, UnknownNameIsNotFoundAndListsValidNames) {
  testing::ExpectUnknownPresetListsTheKnown<GpuSpec>("a100", &GpuPreset, kGpuPresets);
}

// A near miss names the closest presets before the full list; nothing close,
// no question.
TEST(GpuPresetTest, UnknownNameSuggestsTheClosest) {
  const std::string near = GpuPreset("h10").status().message();
  const size_t ask = near.find("did you mean");
  ASSERT_NE(ask, std::string::npos) << near;
  EXPECT_LT(near.find("h100-sxm", ask), near.find("(valid:")) << near;
  EXPECT_EQ(GpuPreset("zzzzzz").status().message().find("did you mean"), std::string::npos);
}

// The two SXM2 V100s are one die with two capacities: every rate the same,
// no bf16 and no fp8 on either.
TEST(GpuPresetTest, V100PartsDifferOnlyInCapacity) {
  const GpuSpec small = MustGpu("v100-16gb"), large = MustGpu("v100-32gb");
  EXPECT_LT(small.memory_GiB, 16);
  EXPECT_GT(small.memory_GiB, 15);
  EXPECT_LT(small.memory_GiB, large.memory_GiB);
  for (int p = 0; p < kNumPrecisions; ++p) {
    EXPECT_EQ(small.peak_tflops[p], large.peak_tflops[p]) << PrecisionName(static_cast<Precision>(p));
  }
  EXPECT_EQ(small.hbm_GBps, large.hbm_GBps);
  EXPECT_EQ(small.GemmEfficiency(Precision::kFp16, 8192, 8192, 8192),
            large.GemmEfficiency(Precision::kFp16, 8192, 8192, 8192));
  EXPECT_EQ(small.PeakTflops(Precision::kBf16), 0);
  EXPECT_EQ(small.peak_tflops[static_cast<int>(Precision::kFp8)], 0);
  EXPECT_GT(small.PeakTflops(Precision::kFp16), 0);
}

// Datasheet figures (dense peaks) must come out of the presets unchanged.
TEST(GpuPresetTest, PublishedFigures) {
  const GpuSpec a100 = MustGpu("a100-80gb");
  EXPECT_DOUBLE_EQ(a100.PeakTflops(Precision::kBf16), 312);
  EXPECT_DOUBLE_EQ(a100.PeakTflops(Precision::kFp16), 312);
  EXPECT_DOUBLE_EQ(a100.PeakTflops(Precision::kTf32), 156);
  EXPECT_DOUBLE_EQ(a100.PeakTflops(Precision::kFp32), 19.5);
  EXPECT_DOUBLE_EQ(a100.hbm_GBps, 2039);
  EXPECT_DOUBLE_EQ(MustGpu("a100-40gb").hbm_GBps, 1555);
  EXPECT_DOUBLE_EQ(MustGpu("a100-40gb").PeakTflops(Precision::kBf16), 312);

  const GpuSpec h100 = MustGpu("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.PeakTflops(Precision::kBf16), 989);
  EXPECT_DOUBLE_EQ(h100.PeakTflops(Precision::kFp8), 1979);
  EXPECT_DOUBLE_EQ(h100.PeakTflops(Precision::kTf32), 494);
  EXPECT_DOUBLE_EQ(h100.hbm_GBps, 3350);
  EXPECT_DOUBLE_EQ(MustGpu("h200").hbm_GBps, 4800);
  EXPECT_DOUBLE_EQ(MustGpu("h200").PeakTflops(Precision::kBf16), 989);
  EXPECT_DOUBLE_EQ(MustGpu("gh200").host_link_GBps, 450);

  // MI250X: 383 TFLOP/s bf16 per card = 191.5 per GCD; 64 GB per GCD.
  const GpuSpec gcd = MustGpu("mi250x-gcd");
  EXPECT_DOUBLE_EQ(2 * gcd.PeakTflops(Precision::kBf16), 383);
  EXPECT_NEAR(gcd.memory_GiB, 64, 0.1);

  // The 2025-26 fleet, dense peaks from the vendors' datasheets (sparse halved).
  const GpuSpec b200 = MustGpu("b200");  // NVIDIA HGX B200: per GPU 2.25 / 4.5 / 9 PF
  EXPECT_DOUBLE_EQ(b200.PeakTflops(Precision::kBf16), 2250);
  EXPECT_DOUBLE_EQ(b200.PeakTflops(Precision::kFp8), 4500);
  EXPECT_DOUBLE_EQ(b200.fp4_peak_tflops, 9000);
  EXPECT_DOUBLE_EQ(b200.hbm_GBps, 7700);
  const GpuSpec gb200 = MustGpu("gb200");  // GB200 NVL72: 1440 PF FP4 sparse / 72
  EXPECT_DOUBLE_EQ(gb200.PeakTflops(Precision::kBf16), 2500);
  EXPECT_DOUBLE_EQ(gb200.PeakTflops(Precision::kFp8), 5000);
  EXPECT_DOUBLE_EQ(gb200.fp4_peak_tflops, 10000);
  EXPECT_DOUBLE_EQ(gb200.hbm_GBps, 8000);
  EXPECT_DOUBLE_EQ(gb200.host_link_GBps, 450);  // NVLink-C2C 900 GB/s bidirectional
  const GpuSpec b300 = MustGpu("b300");         // HGX B300: 108 PF dense FP4 / 8
  EXPECT_DOUBLE_EQ(b300.fp4_peak_tflops, 13500);
  EXPECT_DOUBLE_EQ(b300.PeakTflops(Precision::kFp8), 4500);
  const GpuSpec gb300 = MustGpu("gb300");  // GB300 NVL72: 1080 PF dense FP4, 360 PF FP8 / 72
  EXPECT_DOUBLE_EQ(72 * gb300.fp4_peak_tflops, 1080000);
  EXPECT_DOUBLE_EQ(72 * gb300.PeakTflops(Precision::kFp8), 360000);
  EXPECT_DOUBLE_EQ(gb300.hbm_GBps, 8000);
  // H800: H100's tensor cores and memory; only NVLink (cluster) and FP64 differ.
  const GpuSpec h800 = MustGpu("h800");
  EXPECT_DOUBLE_EQ(h800.PeakTflops(Precision::kBf16), h100.PeakTflops(Precision::kBf16));
  EXPECT_DOUBLE_EQ(h800.PeakTflops(Precision::kFp8), 1979);
  EXPECT_DOUBLE_EQ(h800.memory_GiB, h100.memory_GiB);
  // AMD Instinct datasheets and the ROCm GPU specification table (VRAM GiB).
  const GpuSpec mi300x = MustGpu("mi300x");
  EXPECT_DOUBLE_EQ(mi300x.PeakTflops(Precision::kBf16), 1307.4);
  EXPECT_DOUBLE_EQ(mi300x.PeakTflops(Precision::kFp8), 2614.9);
  EXPECT_DOUBLE_EQ(mi300x.hbm_GBps, 5300);
  EXPECT_DOUBLE_EQ(mi300x.memory_GiB, 192);
  EXPECT_DOUBLE_EQ(MustGpu("mi325x").hbm_GBps, 6000);
  EXPECT_DOUBLE_EQ(MustGpu("mi325x").memory_GiB, 256);
  EXPECT_DOUBLE_EQ(MustGpu("mi325x").PeakTflops(Precision::kBf16), 1307.4);
  EXPECT_NEAR(MustGpu("mi350x").PeakTflops(Precision::kBf16), 2300, 10);  // "2.3 PF"
  const GpuSpec mi355x = MustGpu("mi355x");
  // 256 CUs x 8192 FP8 FLOP per CU per clock x 2.4 GHz (AMD, ISSCC 2026).
  EXPECT_NEAR(mi355x.PeakTflops(Precision::kFp8), 256 * 8192 * 2.4e9 / 1e12, 0.1);
  EXPECT_DOUBLE_EQ(mi355x.PeakTflops(Precision::kBf16), 2516.6);
  EXPECT_DOUBLE_EQ(mi355x.fp4_peak_tflops, 10066.3);
  EXPECT_DOUBLE_EQ(mi355x.hbm_GBps, 8000);
  EXPECT_DOUBLE_EQ(mi355x.memory_GiB, 288);
  EXPECT_DOUBLE_EQ(mi355x.PeakTflops(Precision::kTf32), 0);  // CDNA 4: no TF32 matrix rate

  const GpuSpec v100 = MustGpu("v100-32gb");
  EXPECT_DOUBLE_EQ(v100.PeakTflops(Precision::kFp16), 125);
  EXPECT_DOUBLE_EQ(v100.PeakTflops(Precision::kFp32), 15.7);
  EXPECT_DOUBLE_EQ(v100.PeakTflops(Precision::kBf16), 0);  // Volta has no bf16
}

// cost-model.md §7: measured on this project's machines.
TEST(GpuPresetTest, MeasuredFiguresOnHopper) {
  const GpuSpec h100 = MustGpu("h100-sxm");
  const double gemm_tflops =
      h100.PeakTflops(Precision::kBf16) * h100.GemmEfficiency(Precision::kBf16, 8192, 8192, 8192);
  EXPECT_NEAR(gemm_tflops, 798, 0.02 * 798);  // ≈ 798 TFLOP/s for one 8192³ bf16 GEMM
  EXPECT_NEAR(h100.hbm_GBps * h100.hbm_efficiency, 3000, 0.02 * 3000);  // D2D ≈ 3.0 TB/s

  const GpuSpec h200 = MustGpu("h200");
  const double h200_tflops =
      h200.PeakTflops(Precision::kBf16) * h200.GemmEfficiency(Precision::kBf16, 8192, 8192, 8192);
  EXPECT_GE(h200_tflops, 769 * 0.99);
  EXPECT_LE(h200_tflops, 798 * 1.01);
  EXPECT_NEAR(h200.hbm_GBps * h200.hbm_efficiency, 4300, 0.02 * 4300);  // D2D ≈ 4.3 TB/s
}

TEST(GpuSpecTest, PeakFp8FallsBackToBf16) {
  EXPECT_DOUBLE_EQ(MustGpu("a100-80gb").PeakTflops(Precision::kFp8), 312);
  EXPECT_DOUBLE_EQ(MustGpu("h100-sxm").PeakTflops(Precision::kFp8), 1979);
}

// Interpolation on a known curve (the provisional A100 points of the preset
// brief), independent of whatever the presets are calibrated to.
TEST(GpuSpecTest, CurveInterpolatesInLog2AndClamps) {
  GpuSpec g;
  g.gemm_efficiency[static_cast<int>(Precision::kBf16)] = {{256, 0.25},  {512, 0.42},  {1024, 0.55},
                                                           {2048, 0.62}, {4096, 0.66}, {8192, 0.72},
                                                           {16384, 0.76}};
  const Precision bf16 = Precision::kBf16;
  EXPECT_NEAR(g.GemmEfficiency(bf16, 8192, 8192, 8192), 0.72, 1e-12);
  EXPECT_NEAR(g.GemmEfficiency(bf16, 1024, 1024, 1024), 0.55, 1e-12);
  EXPECT_NEAR(g.GemmEfficiency(bf16, 64, 64, 64), 0.25, 1e-12);           // below: clamped
  EXPECT_NEAR(g.GemmEfficiency(bf16, 65536, 65536, 65536), 0.76, 1e-12);  // above: clamped
  // Geometric mean of (4096, 8192, 8192) is 4096·2^(2/3): two thirds of the way
  // from the 4096 point (0.66) to the 8192 point (0.72) in log2.
  EXPECT_NEAR(g.GemmEfficiency(bf16, 4096, 8192, 8192), 0.66 + (0.72 - 0.66) * 2.0 / 3.0, 1e-9);
  // Keyed by the geometric-mean dimension: equal volume, equal efficiency.
  EXPECT_NEAR(g.GemmEfficiency(bf16, 2048, 8192, 32768), g.GemmEfficiency(bf16, 8192, 8192, 8192),
              1e-12);
  EXPECT_NEAR(g.GemmEfficiency(bf16, 0, 8192, 8192), 0.25, 1e-12);  // degenerate: smallest point
  // Other precisions without a curve read the bf16 one.
  EXPECT_NEAR(g.GemmEfficiency(Precision::kFp8, 2048, 2048, 2048), 0.62, 1e-12);
}

TEST(GpuSpecTest, EmptyCurveFallsBack) {
  const GpuSpec a100 = MustGpu("a100-80gb");
  // fp32 has no curve of its own: it reads the bf16 curve.
  EXPECT_DOUBLE_EQ(a100.GemmEfficiency(Precision::kFp32, 4096, 4096, 4096),
                   a100.GemmEfficiency(Precision::kBf16, 4096, 4096, 4096));
  // V100 has no bf16 curve: every precision reads the fp16 one.
  const GpuSpec v100 = MustGpu("v100-32gb");
  EXPECT_TRUE(v100.gemm_efficiency[static_cast<int>(Precision::kBf16)].empty());
  EXPECT_FALSE(v100.gemm_efficiency[static_cast<int>(Precision::kFp16)].empty());
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kTf32}) {
    EXPECT_DOUBLE_EQ(v100.GemmEfficiency(p, 3000, 5000, 7000),
                     v100.GemmEfficiency(Precision::kFp16, 3000, 5000, 7000));
  }
  // A spec with no curve at all is the ideal model.
  GpuSpec bare;
  EXPECT_DOUBLE_EQ(bare.GemmEfficiency(Precision::kBf16, 100, 100, 100), 1.0);
  EXPECT_TRUE(bare.EffectiveGemmCurve(Precision::kBf16).empty());
}

// Property: a bigger GEMM is never less efficient, and efficiencies stay in (0, 1].
TEST(GpuPresetTest, CurvesAreMonotoneFractions) {
  for (const std::string& name : kGpuPresets) {
    const GpuSpec g = MustGpu(name);
    for (int i = 0; i < kNumPrecisions; ++i) {
      const Precision p = static_cast<Precision>(i);
      double prev = 0;
      for (double size = 64; size <= 65536; size *= 1.19) {
        const double e = g.GemmEfficiency(p, size, size, size);
        EXPECT_GT(e, 0) << name;
        EXPECT_LE(e, 1) << name;
        EXPECT_GE(e, prev) << name << " " << PrecisionName(p) << " at " << size;
        prev = e;
      }
    }
  }
}

// Every number in a preset names where it comes from.
TEST(GpuPresetTest, EveryNumberHasASource) {
  const std::vector<std::string> fields = {
      "memory_GiB",           "hbm_GBps",        "hbm_efficiency",
      "peak_tflops",          "gemm_efficiency", "flash_fwd_efficiency",
      "flash_bwd_efficiency", "host_link_GBps",  "runtime_reserved_GiB"};
  for (const std::string& name : kGpuPresets) {
    const GpuSpec g = MustGpu(name);
    EXPECT_FALSE(g.source.empty()) << name;
    for (const std::string& f : fields) {
      auto it = g.sources.find(f);
      ASSERT_NE(it, g.sources.end()) << name << " has no source for " << f;
      EXPECT_GE(it->second.size(), 10u) << name << "/" << f;
    }
  }
}

TEST(GpuSpecTest, JsonRoundTrip) {
  for (const std::string& name : kGpuPresets) {
    const GpuSpec g = MustGpu(name);
    const Json j = GpuSpecToJson(g);
    // Through text as well, as a file would go.
    Result<GpuSpec> back = ParseGpuSpec(MustParse(j.dump()), "");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(back->name, g.name);
    EXPECT_EQ(back->display_name, g.display_name);
    EXPECT_EQ(back->memory_GiB, g.memory_GiB);
    EXPECT_EQ(back->hbm_GBps, g.hbm_GBps);
    EXPECT_EQ(back->peak_tflops, g.peak_tflops);
    for (int i = 0; i < kNumPrecisions; ++i) {
      ASSERT_EQ(back->gemm_efficiency[i].size(), g.gemm_efficiency[i].size());
      for (size_t k = 0; k < g.gemm_efficiency[i].size(); ++k) {
        EXPECT_EQ(back->gemm_efficiency[i][k].size, g.gemm_efficiency[i][k].size);
        EXPECT_EQ(back->gemm_efficiency[i][k].efficiency, g.gemm_efficiency[i][k].efficiency);
      }
    }
    EXPECT_EQ(back->flash_fwd_efficiency, g.flash_fwd_efficiency);
    EXPECT_EQ(back->gemm_sustained_fraction, g.gemm_sustained_fraction);
    EXPECT_EQ(back->host_link_GBps, g.host_link_GBps);
    EXPECT_EQ(back->runtime_reserved_GiB, g.runtime_reserved_GiB);
    EXPECT_EQ(back->sources, g.sources);
    EXPECT_EQ(GpuSpecToJson(*back), j);
  }
}

Json MinimalGpu() {
  return MustParse(R"({
    "name": "toy", "memory_GiB": 16, "hbm_GBps": 1000,
    "peak_tflops": {"bf16": 100},
    "gemm_efficiency": {"bf16": [{"size": 1024, "efficiency": 0.5},
                                 {"size": 4096, "efficiency": 0.7}]}
  })");
}

TEST(GpuSpecTest, MinimalObjectTakesDefaults) {
  Result<GpuSpec> g = ParseGpuSpec(MinimalGpu(), "/gpu");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->display_name, "toy");
  EXPECT_DOUBLE_EQ(g->PeakTflops(Precision::kFp16), 0);
  EXPECT_DOUBLE_EQ(g->hbm_efficiency, GpuSpec{}.hbm_efficiency);
}

// The Hopper curves are short-run figures (the 798 TFLOP/s above); training
// sustains a fitted fraction of them (docs/model.md, Validation). The A100
// curve was fitted to training runs and needs none; a GPU object without the
// key sustains its whole curve.
TEST(GpuPresetTest, HopperSustainsAFractionOfItsShortRunCurve) {
  for (const char* name : {"h100-sxm", "h200", "gh200"}) {
    const GpuSpec g = MustGpu(name);
    EXPECT_GT(g.gemm_sustained_fraction, 0.6) << name;
    EXPECT_LT(g.gemm_sustained_fraction, 0.8) << name;
    ASSERT_TRUE(g.sources.count("gemm_sustained_fraction")) << name;
    EXPECT_NE(g.sources.at("gemm_sustained_fraction").find("Megatron-Core"), std::string::npos)
        << name;
  }
  EXPECT_EQ(MustGpu("a100-80gb").gemm_sustained_fraction, 1.0);
  EXPECT_EQ(MustGpu("a100-40gb").gemm_sustained_fraction, 1.0);
  Result<GpuSpec> toy = ParseGpuSpec(MinimalGpu(), "/gpu");
  ASSERT_TRUE(toy.ok());
  EXPECT_EQ(toy->gemm_sustained_fraction, 1.0);
  EXPECT_FALSE(GpuSpecToJson(*toy).contains("gemm_sustained_fraction"));
}

// Strict parsing: every error names the JSON pointer of the offending field.
TEST(GpuSpecTest, StrictErrorsNameThePointer) {
  struct Case {
    std::string key_path;  // where to inject
    Json value;
    std::string pointer;  // expected in the message
  };
  const std::vector<Case> cases = {
      {"memory_GB", 16, "/gpu/memory_GB: unknown key"},
      {"memory_GiB", -1, "/gpu/memory_GiB"},
      {"memory_GiB", "16", "/gpu/memory_GiB: must be a number"},
      {"hbm_efficiency", 1.5, "/gpu/hbm_efficiency"},
      {"gemm_sustained_fraction", 0, "/gpu/gemm_sustained_fraction: must be in (0, 1]"},
      {"gemm_sustained_fraction", 1.2, "/gpu/gemm_sustained_fraction: must be in (0, 1]"},
      {"sources", Json{{"hbm_Gbps", "typo"}}, "/gpu/sources/hbm_Gbps"},
  };
  for (const Case& c : cases) {
    Json j = MinimalGpu();
    j[c.key_path] = c.value;
    Result<GpuSpec> g = ParseGpuSpec(j, "/gpu");
    ASSERT_FALSE(g.ok()) << c.key_path;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.pointer), std::string::npos) << g.status().message();
  }
  Json j = MinimalGpu();
  j["peak_tflops"]["bf17"] = 1;
  EXPECT_NE(ParseGpuSpec(j, "/gpu").status().message().find("/gpu/peak_tflops/bf17"),
            std::string::npos);
  j = MinimalGpu();
  j["gemm_efficiency"]["bf16"][1]["size"] = 512;  // not ascending
  EXPECT_NE(ParseGpuSpec(j, "/gpu").status().message().find("/gpu/gemm_efficiency/bf16/1/size"),
            std::string::npos);
  j = MinimalGpu();
  j["gemm_efficiency"]["bf16"][0]["eff"] = 0.5;
  EXPECT_NE(ParseGpuSpec(j, "/gpu").status().message().find("/gpu/gemm_efficiency/bf16/0/eff"),
            std::string::npos);
  j = MinimalGpu();
  j.erase("hbm_GBps");
  EXPECT_NE(ParseGpuSpec(j, "/gpu").status().message().find("/gpu/hbm_GBps: is required"),
            std::string::npos);
}

// Issue 40 (8): every number of a GPU object has a range, refused by its
// pointer with the range and the value; the range's ends are accepted.
TEST(GpuSpecTest, NumbersOutsideTheirRangesAreRefusedByName) {
  struct Case {
    std::vector<std::string> path;
    double value;
    std::string expected;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {{"memory_GiB"}, 1e308, "/gpu/memory_GiB: must be in (0, 4096] GiB (got 1e+308)"},
      {{"memory_GiB"}, 0, "/gpu/memory_GiB: must be in (0, 4096] GiB"},
      {{"memory_GiB"}, 4096.5, "/gpu/memory_GiB: must be in (0, 4096] GiB"},
      {{"memory_GiB"}, 4096, ""},
      {{"hbm_GBps"}, 1e-300, "/gpu/hbm_GBps: must be in [0.01, 100000] GB/s (got 1e-300)"},
      {{"hbm_GBps"}, 2e5, "/gpu/hbm_GBps: must be in [0.01, 100000] GB/s"},
      {{"hbm_GBps"}, 0.01, ""},
      {{"hbm_GBps"}, 1e5, ""},
      {{"peak_tflops", "bf16"}, 1e308,
       "/gpu/peak_tflops/bf16: must be 0 (unsupported) or in [0.001, 1000000] TFLOP/s"},
      {{"peak_tflops", "bf16"}, 1e-300, "/gpu/peak_tflops/bf16: must be 0 (unsupported) or in"},
      {{"peak_tflops", "fp32"}, -1, "/gpu/peak_tflops/fp32: must be 0 (unsupported) or in"},
      {{"peak_tflops", "fp4"}, 2e6, "/gpu/peak_tflops/fp4: must be 0 (unsupported) or in"},
      {{"peak_tflops", "bf16"}, 1e6, ""},
      {{"peak_tflops", "bf16"}, 0.001, ""},
      {{"peak_tflops", "fp32"}, 0.0768, ""},  // an mpi-cpu rank on half a 2.4 GHz AVX2 core
      {{"peak_tflops", "fp32"}, 0, ""},
      {{"host_link_GBps"}, 1e-300, "/gpu/host_link_GBps: must be in [0.01, 100000] GB/s"},
      {{"host_link_GBps"}, 0, "/gpu/host_link_GBps: must be in [0.01, 100000] GB/s"},
      {{"host_link_GBps"}, 1e5, ""},
      {{"gemm_efficiency", "bf16", "1", "size"}, 1e12,
       "/gpu/gemm_efficiency/bf16/1/size: must be in (0, 1000000000]"},
      {{"kernel_overhead_us"}, 1e7, "/gpu/kernel_overhead_us: must be in [0, 1e6]"},
      {{"runtime_reserved_GiB"}, 16, "/gpu/runtime_reserved_GiB"},
  };
  for (const Case& c : cases) {
    ExpectRangeVerdict(ParseGpuSpec(SetAt(MinimalGpu(), c.path, c.value), "/gpu").status(),
                       c.path.back() + " = " + Json(c.value).dump(), c.expected);
  }
}

}  // namespace
}  // namespace paratune::topology

namespace paratune::topology {
namespace {

TEST(RecipeTest, NamesRoundTripAndUnknownIsAnError) {
  ASSERT_NO_FATAL_FAILURE(
      testing::ExpectNamesRoundTrip<Recipe>(kNumRecipes, RecipeName, ParseRecipe));
  Result<Recipe> bad = ParseRecipe("fp4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nvfp4"), std::string::npos);
}

// Which recipes each generation runs: microscaling (MXFP8, NVFP4) needs
// Blackwell's tensor cores; CDNA 4 has MX formats but not NVIDIA's NVFP4;
// Hopper and CDNA 3 run per-tensor FP8 only (blockwise on Hopper).
TEST(RecipeTest, WhoRunsWhat) {
  for (const char* g : {"b200", "b300", "gb200", "gb300"}) {
    const GpuSpec s = MustGpu(g);
    for (int i = 0; i < kNumRecipes; ++i) EXPECT_TRUE(s.recipes[i]) << g << " " << i;
    EXPECT_GT(s.RecipePeakTflops(Recipe::kNvfp4), s.RecipePeakTflops(Recipe::kMxfp8)) << g;
  }
  for (const char* g : {"h100-sxm", "h200", "gh200", "h800"}) {
    const GpuSpec s = MustGpu(g);
    EXPECT_TRUE(s.Supports(Recipe::kFp8Delayed)) << g;
    EXPECT_TRUE(s.Supports(Recipe::kFp8Blockwise)) << g;
    EXPECT_FALSE(s.Supports(Recipe::kMxfp8)) << g;
    EXPECT_FALSE(s.Supports(Recipe::kNvfp4)) << g;
  }
  for (const char* g : {"mi350x", "mi355x"}) {
    EXPECT_TRUE(MustGpu(g).Supports(Recipe::kMxfp8)) << g;
    EXPECT_FALSE(MustGpu(g).Supports(Recipe::kNvfp4)) << g;
  }
  EXPECT_FALSE(MustGpu("mi300x").Supports(Recipe::kMxfp8));
  EXPECT_EQ(MustGpu("mi355x").fp8_default_recipe, Recipe::kFp8Delayed);  // AMD's MLPerf recipe
  EXPECT_EQ(MustGpu("gb200").fp8_default_recipe, Recipe::kFp8Current);   // Bridge's FP8-CS
  EXPECT_EQ(MustGpu("h100-sxm").fp8_default_recipe, Recipe::kFp8Current);
  for (int i = 0; i < kNumRecipes; ++i) EXPECT_FALSE(MustGpu("a100-80gb").recipes[i]);
}

TEST(RecipeTest, PresetFieldsAreCheckedAndSourced) {
  for (const std::string& name : GpuPresetNames()) {
    const GpuSpec g = MustGpu(name);
    if (g.fp4_peak_tflops > 0) {
      EXPECT_FALSE(g.fp4_gemm_efficiency.empty()) << name;
    }
    if (g.peak_tflops[static_cast<int>(Precision::kFp8)] > 0) {
      EXPECT_TRUE(g.Supports(g.fp8_default_recipe)) << name;
    }
  }
  Json j = GpuSpecToJson(MustGpu("h100-sxm"));
  j["low_precision_recipes"] = Json::array({"nvfp4"});
  Result<GpuSpec> r = ParseGpuSpec(j, "/gpu");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/gpu/low_precision_recipes/0"), std::string::npos);
  j = GpuSpecToJson(MustGpu("mi300x"));
  j["fp8_default_recipe"] = "mxfp8";  // not one MI300X runs
  r = ParseGpuSpec(j, "/gpu");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/gpu/fp8_default_recipe"), std::string::npos);
  // Round trip keeps the new fields.
  const GpuSpec b200 = MustGpu("b200");
  Result<GpuSpec> back = ParseGpuSpec(GpuSpecToJson(b200), "");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->recipes, b200.recipes);
  EXPECT_EQ(back->fp8_default_recipe, b200.fp8_default_recipe);
  EXPECT_DOUBLE_EQ(back->fp4_peak_tflops, 9000);
  EXPECT_EQ(back->fp4_gemm_efficiency.size(), b200.fp4_gemm_efficiency.size());
}

}  // namespace
}  // namespace paratune::topology
