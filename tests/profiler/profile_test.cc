// The profile document: fits built from a real-format nccl-tests log, the
// strict parser, and ApplyProfile — the planner-side merge — putting measured
// α-β and GEMM curves where GroupCost and GemmEfficiency read them.
#include "profiler/profile.h"

#include <gtest/gtest.h>

#include <cmath>

#include "profiler/nccl_import.h"
#include "test_util.h"
#include "topology/cluster.h"

namespace paratune::profiler {
namespace {

using testing::DataPath;
using topology::Collective;
using topology::Tier;

Measurements Imported(const std::string& file) {
  auto r = ImportNcclTestsFile(DataPath(file), {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  Measurements m;
  m.env.tool = "paratune test";
  m.env.backend = "nccl-tests";
  m.env.created_at = "2026-02-11T09:00:00Z";
  m.env.sources = {file};
  if (r.ok()) m.collectives = r->series;
  return m;
}

// A bf16 GEMM series from the H100 preset's measured-anchored curve (989 TFLOP/s peak).
GemmSeries H100Gemms() {
  auto h100 = topology::GpuPreset("h100-sxm");
  GemmSeries g;
  g.precision = topology::Precision::kBf16;
  for (const auto& pt : h100->gemm_efficiency[static_cast<size_t>(topology::Precision::kBf16)]) {
    const auto s = static_cast<int64_t>(std::llround(pt.size));
    GemmRow r;
    r.m = r.n = r.k = s;
    r.tflops = 989.0 * pt.efficiency;
    r.time_us = 2.0 * s * s * s / (r.tflops * 1e6);
    g.rows.push_back(r);
  }
  return g;
}

Profile Build(const Measurements& m, const std::optional<topology::ClusterSpec>& c = std::nullopt) {
  PeakTable peaks;
  if (c) {
    for (int i = 0; i < topology::kNumPrecisions; ++i) {
      peaks.tflops[static_cast<size_t>(i)] = c->gpu.peak_tflops[static_cast<size_t>(i)];
    }
    peaks.source = "gpu preset " + c->gpu.name;
  }
  std::vector<std::string> warnings;
  auto p = BuildProfile(m, c, peaks, &warnings);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Profile{};
}

TEST(Profile, FitsTheA100LogIntoAlphaAndBeta) {
  const Profile p = Build(Imported("all_reduce_8xA100.log"));
  ASSERT_EQ(p.collectives.size(), 1u);
  const CollectiveEntry& e = p.collectives[0];
  EXPECT_EQ(e.collective, Collective::kAllReduce);
  EXPECT_EQ(e.group_size, 8);
  EXPECT_EQ(e.tier, Tier::kIntraNode);
  // The log: ≈ 28 µs at small sizes (3.5 µs per rank) and ≈ 232 GB/s busbw at the top.
  EXPECT_NEAR(e.alpha_us, 3.5, 0.2);
  EXPECT_NEAR(e.beta_GBps, 232.0, 5.0);
  EXPECT_LT(e.residual, 0.02);
  ASSERT_EQ(e.samples.size(), 31u);
  EXPECT_DOUBLE_EQ(e.samples.back().busbw_GBps, 233.34);  // what the log states
}

TEST(Profile, RoundTripsThroughItsJson) {
  Measurements m = Imported("all_reduce_8xA100.log");
  m.gemm.push_back(H100Gemms());
  m.copy = CopyResult{int64_t{1} << 30, 716.0, 3000.0};
  m.waived.push_back({"fp8 GEMM", "fp8 GEMMs need compute capability 8.9"});
  auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  const Profile p = Build(m, *cluster);
  const Json j = Json::parse(ProfileToJson(p).dump());
  EXPECT_EQ(j["schema"], "paratune.profile/v1");
  EXPECT_EQ(j["cluster_fingerprint"], topology::Fingerprint(*cluster));
  const auto& c0 = j["collectives"][0];
  for (const char* key :
       {"collective", "group_size", "tier", "alpha_us", "beta_GBps", "residual", "samples"}) {
    EXPECT_TRUE(c0.contains(key)) << key;
  }
  for (const char* key : {"size_bytes", "time_us", "algbw_GBps", "busbw_GBps"}) {
    EXPECT_TRUE(c0["samples"][0].contains(key)) << key;
  }
  auto back = ParseProfile(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ProfileFingerprint(*back), ProfileFingerprint(p));
  EXPECT_EQ(back->gemm.size(), 1u);
  EXPECT_EQ(back->waived.size(), 1u);
  EXPECT_TRUE(back->cluster.has_value());
}

TEST(Profile, ParserIsStrictAndNamesThePointer) {
  const Profile p = Build(Imported("all_reduce_8xA100.log"));
  const Json good = Json::parse(ProfileToJson(p).dump());
  auto expect_error = [](Json j, const std::string& pointer) {
    auto r = ParseProfile(j);
    ASSERT_FALSE(r.ok()) << pointer;
    EXPECT_NE(r.status().message().find(pointer), std::string::npos) << r.status().message();
  };
  Json j = good;
  j["bogus"] = 1;
  expect_error(j, "/bogus");
  j = good;
  j["collectives"][0].erase("alpha_us");
  expect_error(j, "/collectives/0/alpha_us");
  j = good;
  j["collectives"][0]["tier"] = "rack";
  expect_error(j, "/collectives/0/tier");
  j = good;
  j["collectives"][0]["beta_GBps"] = -3;
  expect_error(j, "/collectives/0/beta_GBps");
  j = good;
  j["collectives"][0]["samples"][2]["size_bytes"] = "big";
  expect_error(j, "/collectives/0/samples/2/size_bytes");
  j = good;
  j["schema"] = "paratune.profile/v2";
  expect_error(j, "/schema");
  j = good;
  j.erase("environment");
  expect_error(j, "/environment");
}

TEST(ApplyProfile, MeasuredFitsLandWhereGroupCostReadsThem) {
  const Profile p = Build(Imported("all_reduce_8xA100.log"));
  auto c = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(ApplyProfile(p, &*c).ok());
  EXPECT_EQ(c->profile_fingerprint, ProfileFingerprint(p));
  const auto cost = topology::GroupCost(*c, Collective::kAllReduce, 1, 8);
  EXPECT_NEAR(cost.busbw_GBps, p.collectives[0].beta_GBps, 1e-9);
  EXPECT_NEAR(cost.alpha_us, p.collectives[0].alpha_us, 1e-9);
  // The planner now predicts what the log measured: 1 GiB all-reduce, 8086.11 µs.
  const double predicted_us =
      topology::CollectiveSeconds(*c, Collective::kAllReduce, 1, 8, 1073741824.0) * 1e6;
  EXPECT_NEAR(predicted_us, 8086.11, 0.03 * 8086.11);
  // Applying again replaces, it does not duplicate.
  ASSERT_TRUE(ApplyProfile(p, &*c).ok());
  int n = 0;
  for (const auto& f : c->fits) n += f.collective == Collective::kAllReduce && f.group_size == 8;
  EXPECT_EQ(n, 1);
}

TEST(ApplyProfile, InterNodeBetaIsScaledBackToOneGroupInstance) {
  // 8 groups shared each node's NICs while measured; GroupCost divides by the
  // min(stride, gpus_per_node) instances again, giving back the measured figure.
  const Profile p = Build(Imported("all_reduce_split_mod8_2x8xH100.log"));
  ASSERT_EQ(p.collectives.size(), 1u);
  const CollectiveEntry& e = p.collectives[0];
  EXPECT_EQ(e.concurrent_groups, 8);
  EXPECT_NEAR(e.beta_GBps, 5.9, 0.3);
  auto c = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(ApplyProfile(p, &*c).ok());
  const topology::CollectiveFit* fit = nullptr;
  for (const auto& f : c->fits) {
    if (f.tier == Tier::kInterNode) fit = &f;
  }
  ASSERT_NE(fit, nullptr);
  EXPECT_NEAR(fit->busbw_GBps, 8 * e.beta_GBps, 1e-9);
  EXPECT_NEAR(topology::GroupCost(*c, Collective::kAllReduce, 8, 2).busbw_GBps, e.beta_GBps, 1e-9);
}

TEST(ApplyProfile, GemmCurvesReplaceThePresetsAndRefuseAnotherGpu) {
  Measurements m;
  m.env.tool = "t";
  m.env.backend = "cuda";
  m.env.created_at = "2026-02-11T09:00:00Z";
  m.gemm.push_back(H100Gemms());
  auto h100 = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(h100.ok());
  const Profile p = Build(m, *h100);
  ASSERT_EQ(p.gemm.size(), 1u);
  EXPECT_DOUBLE_EQ(p.gemm[0].peak_tflops, 989.0);
  topology::ClusterSpec c = *h100;
  ASSERT_TRUE(ApplyProfile(p, &c).ok());
  EXPECT_NEAR(c.gpu.GemmEfficiency(topology::Precision::kBf16, 8192, 8192, 8192), 0.81, 0.01);
  EXPECT_NE(c.gpu.sources.at("gemm_efficiency").find("measured"), std::string::npos);
  // The profile's GEMMs are short runs like the preset's anchor: training
  // still sustains the preset's fraction of them.
  EXPECT_EQ(c.gpu.gemm_sustained_fraction, h100->gpu.gemm_sustained_fraction);
  EXPECT_LT(c.gpu.gemm_sustained_fraction, 1.0);
  // An A100 (312 TFLOP/s bf16) cannot have run these 800 TFLOP/s GEMMs.
  auto a100 = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(a100.ok());
  Status s = ApplyProfile(p, &*a100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("other hardware"), std::string::npos);
}

TEST(ApplyProfile, AnEmptyProfileIsRefused) {
  auto c = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ApplyProfile(Profile{}, &*c).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paratune::profiler
