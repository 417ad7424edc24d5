// `paratune confirm` and `paratune calibrate` end to end on the fake backend:
// flags, exit codes, the files they write and what they print.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "backend/fake.h"
#include "cli/commands.h"
#include "executor/run/calibrate.h"
#include "executor/run/report.h"
#include "executor/run/runner.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "profiler/discovery.h"
#include "profiler/profile.h"
#include "profiler/sampler.h"
#include "tests/cli/call.h"
#include "tests/executor/test_util.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::cli {
namespace {

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("paratune_cli_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // A plan: a small GPT on 8 GPUs of a cluster shaped like the fake backend.
    planner::Job job =
        executor::testing::MakeJob(executor::testing::Gpt(4, 1024, 16, 32000),
                                   executor::testing::FakeLikeCluster(), 8, 2048, 16);
    const auto plan = executor::testing::SearchMegatron(job, 3);
    ASSERT_GE(plan.size(), 2u);
    ASSERT_TRUE(WriteFileAtomic(Path("plan.json"), plan.Document().dump(2)).ok());
    // A profile of the fake backend (one rank: GEMM curves and copies only).
    backend::FakeConfig fc;
    auto world = backend::FakeWorld::Create(fc);
    auto b = world->MakeRank(0);
    profiler::MeasurementPlan mp = profiler::DefaultPlan("fake", true, 1, 1);
    auto m = profiler::RunMeasurements(*b, mp, nullptr);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto p = profiler::BuildProfile(*m, job.cluster, profiler::PeaksOf(job.cluster), nullptr);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE(profiler::WriteProfile(*p, Path("profile.json")).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(CliTest, HelpTeachesAndBadFlagsAreUsageErrors) {
  Outcome h = Call(RunConfirm, {"--help"});
  EXPECT_EQ(h.code, kExitOk);
  for (const char* word : {"--plans", "mpirun", "measured_parts", "oom", "exit codes"}) {
    EXPECT_NE(h.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(Call(RunConfirm, {"--backend", "fake", "--out", Path("r.json")}).code, kExitUsage);
  EXPECT_EQ(Call(RunConfirm, {"--plans", Path("plan.json"), "--backend", "tpu", "--out", "x"}).code,
            kExitUsage);
  EXPECT_EQ(
      Call(RunConfirm, {"--plans", Path("missing.json"), "--backend", "fake", "--out", "x"}).code,
      kExitUsage);
  Outcome c = Call(RunCalibrate, {"--help"});
  EXPECT_EQ(c.code, kExitOk);
  EXPECT_NE(c.out.find("f_compute"), std::string::npos);
  EXPECT_EQ(Call(RunCalibrate, {"--profile", Path("profile.json"), "--out", "x"}).code, kExitUsage);
}

TEST_F(CliTest, ConfirmThenCalibrate) {
  Outcome c = Call(RunConfirm,
                   {"--plans", Path("plan.json"), "--top", "2", "--backend", "fake", "--out",
                    Path("run.json"), "--samples", "2"},
                   "", /*progress=*/true);
  ASSERT_EQ(c.code, kExitOk) << c.err;
  EXPECT_NE(c.err.find("[confirm] candidate 1/2"), std::string::npos) << c.err;
  // stderr not a terminal: the outcome only, no progress lines.
  Outcome quiet = Call(RunConfirm, {"--plans", Path("plan.json"), "--top", "2", "--backend", "fake",
                                    "--out", Path("run2.json"), "--samples", "2"});
  ASSERT_EQ(quiet.code, kExitOk) << quiet.err;
  EXPECT_EQ(quiet.err, "[confirm] wrote " + Path("run2.json") + "\n");
  EXPECT_NE(c.out.find("measured_s"), std::string::npos) << c.out;
  auto rep = executor::LoadRunReport(Path("run.json"));
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->complete);
  ASSERT_EQ(rep->candidates.size(), 2u);
  for (const auto& cand : rep->candidates)
    EXPECT_EQ(cand.status, executor::Outcome::kOk) << cand.reason;
  EXPECT_EQ(rep->environment.backend, "fake");
  EXPECT_EQ(rep->environment.argv[1], "confirm");

  Outcome k =
      Call(RunCalibrate, {"--reports", Path("run.json"), "--profile", Path("profile.json"), "--out",
                          Path("cal.json"), "--cluster-out", Path("cluster.json")});
  ASSERT_EQ(k.code, kExitOk) << k.err;
  EXPECT_NE(k.out.find("compute"), std::string::npos);
  EXPECT_NE(k.err.find("planned without a profile"), std::string::npos) << k.err;
  auto text = ReadFileToString(Path("cal.json"));
  ASSERT_TRUE(text.ok());
  const Json cal = Json::parse(*text);
  ASSERT_TRUE(cal.contains("calibration"));
  EXPECT_EQ(cal["calibration"]["candidates"], 2);
  // The profiler still reads the rest, and the section applies to a cluster.
  EXPECT_TRUE(profiler::ParseProfile(executor::WithoutCalibration(cal)).ok());
  auto factors = executor::CorrectionsFromProfile(cal);
  ASSERT_TRUE(factors.ok() && factors->has_value());
  auto cluster_text = ReadFileToString(Path("cluster.json"));
  ASSERT_TRUE(cluster_text.ok());
  auto cluster = topology::ParseClusterSpec(Json::parse(*cluster_text), "");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(cluster->corrections, **factors);
}

TEST_F(CliTest, FaultsAreReportedWithTheirExitCodes) {
  // Out of memory is a finding (exit 0); a dead rank is a failed measurement (4).
  Outcome oom =
      Call(RunConfirm, {"--plans", Path("plan.json"), "--top", "2", "--backend", "fake", "--out",
                        Path("oom.json"), "--samples", "1", "--inject-fault", "oom@1"});
  EXPECT_EQ(oom.code, kExitOk) << oom.err;
  EXPECT_NE(oom.out.find("oom"), std::string::npos) << oom.out;
  auto rep = executor::LoadRunReport(Path("oom.json"));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->candidates[0].status, executor::Outcome::kOom);
  EXPECT_EQ(rep->candidates[1].status, executor::Outcome::kOk);
  Outcome dead = Call(RunConfirm, {"--plans", Path("plan.json"), "--top", "1", "--backend", "fake",
                                   "--out", Path("dead.json"), "--inject-fault", "rank_dies@3"});
  EXPECT_EQ(dead.code, kExitMeasureFailed);
  EXPECT_NE(dead.out.find("died"), std::string::npos) << dead.out;
  // A report with nothing ok cannot calibrate anything.
  Outcome k = Call(RunCalibrate, {"--reports", Path("dead.json"), "--profile", Path("profile.json"),
                                  "--out", Path("x.json")});
  EXPECT_EQ(k.code, kExitUsage);
}

// Like with like: a plan made for A100-80GB, confirmed on a
// device claiming to be an H100. The report names both GPUs, compares with
// the H100 prediction and keeps the plan's own beside it; --strict-gpu
// refuses the mismatch.
TEST_F(CliTest, ConfirmComparesWithTheMeasuredGpusPrediction) {
  planner::Job job =
      executor::testing::MakeJob(executor::testing::Gpt(4, 1024, 16, 32000),
                                 *topology::ClusterPreset("dgx-a100-80gb"), 8, 2048, 16);
  ASSERT_EQ(job.cluster.gpu.name, "a100-80gb");
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const auto plan = executor::testing::SearchMegatron(job, 2);
  ASSERT_GE(plan.size(), 1u);
  ASSERT_TRUE(WriteFileAtomic(Path("a100.json"), plan.Document().dump(2)).ok());

  Outcome strict =
      Call(RunConfirm, {"--plans", Path("a100.json"), "--backend", "fake", "--fake-gpu", "h100-sxm",
                        "--strict-gpu", "--top", "1", "--out", Path("s.json")});
  EXPECT_EQ(strict.code, kExitUsage);
  EXPECT_NE(strict.err.find("a100-80gb"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("h100-sxm"), std::string::npos) << strict.err;
  EXPECT_FALSE(std::filesystem::exists(Path("s.json")));

  Outcome run =
      Call(RunConfirm, {"--plans", Path("a100.json"), "--backend", "fake", "--fake-gpu", "h100-sxm",
                        "--top", "1", "--samples", "1", "--out", Path("r.json")});
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("plan made for a100-80gb, measured on h100-sxm"), std::string::npos)
      << run.out;
  auto rep = executor::LoadRunReport(Path("r.json"));
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->plan_gpu, "a100-80gb");
  EXPECT_EQ(rep->measured_gpu, "h100-sxm");
  ASSERT_EQ(rep->candidates.size(), 1u);
  const executor::CandidateReport& c = rep->candidates[0];
  ASSERT_TRUE(c.plan_predicted_s.has_value());
  // predicted_s is the H100's prediction for the same job: the plan's cluster with its GPU swapped.
  planner::Job h100 = job;
  h100.cluster.gpu = *topology::GpuPreset("h100-sxm");
  const planner::CostModel hm(h100.model, h100.training, h100.cluster, h100.gpus);
  EXPECT_DOUBLE_EQ(c.predicted_s, hm.Predict(c.config).iteration_time_s);
  EXPECT_DOUBLE_EQ(*c.plan_predicted_s, cm.Predict(c.config).iteration_time_s);
  EXPECT_LT(c.predicted_s, *c.plan_predicted_s)
      << "an H100 step is predicted faster than an A100 one";
  // The error is against the H100's prediction, not the plan's.
  ASSERT_EQ(c.status, executor::Outcome::kOk) << c.reason;
  ASSERT_TRUE(c.measured_s.has_value() && c.error.has_value());
  EXPECT_NEAR(*c.error, (c.predicted_s - *c.measured_s) / *c.measured_s, 1e-9);
  // The report still names the plan's cluster; the device is the one claimed.
  EXPECT_EQ(rep->cluster_fingerprint, topology::Fingerprint(job.cluster));
  EXPECT_EQ(rep->environment.device, topology::GpuPreset("h100-sxm")->display_name);
  EXPECT_EQ(rep->environment.device_memory_bytes,
            static_cast<int64_t>(topology::GpuPreset("h100-sxm")->memory_GiB * (1 << 30)));
  // Calibration fits against the prediction for the GPU measured: its
  // step-time error before fitting is this candidate's |error|.
  auto fit = executor::FitCalibration({*rep});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->iteration_error_before, std::abs(*c.error), 1e-9);
  // Reports measured on different GPUs are fitted together, with a warning.
  executor::RunReport other = *rep;
  other.measured_gpu = "a100-80gb";
  auto mixed = executor::FitCalibration({*rep, other});
  ASSERT_TRUE(mixed.ok());
  bool warned = false;
  for (const std::string& w : mixed->warnings)
    warned |= w.find("different GPUs") != std::string::npos;
  EXPECT_TRUE(warned);
  // A report written before these keys still parses and calibrates the same.
  Json old = Json::parse(executor::RunReportToJson(*rep).dump());
  for (const char* k : {"plan_gpu", "measured_gpu"}) old.erase(k);
  for (const char* k : {"device_memory_bytes", "device_sm_clock_GHz", "device_sm_clock_now_GHz",
                        "device_sm_clock_max_GHz"}) {
    old["environment"].erase(k);
  }
  for (Json& cj : old["candidates"]) cj.erase("plan_predicted_s");
  auto parsed = executor::ParseRunReport(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->measured_gpu, "");
  auto old_fit = executor::FitCalibration({*parsed});
  ASSERT_TRUE(old_fit.ok());
  EXPECT_NEAR(old_fit->iteration_error_before, fit->iteration_error_before, 1e-9);

  // The same plan on a device claiming its own GPU: nothing swapped, strict passes.
  Outcome same = Call(RunConfirm,
                      {"--plans", Path("a100.json"), "--backend", "fake", "--fake-gpu", "a100-80gb",
                       "--strict-gpu", "--top", "1", "--samples", "1", "--out", Path("same.json")});
  ASSERT_EQ(same.code, kExitOk) << same.err;
  auto rs = executor::LoadRunReport(Path("same.json"));
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->measured_gpu, "a100-80gb");
  EXPECT_FALSE(rs->candidates[0].plan_predicted_s.has_value());
  EXPECT_DOUBLE_EQ(rs->candidates[0].predicted_s, *c.plan_predicted_s);
  EXPECT_EQ(Call(RunConfirm, {"--plans", Path("a100.json"), "--backend", "fake", "--fake-gpu",
                              "tpu-v9", "--out", Path("x.json")})
                .code,
            kExitUsage);
}

// The matcher: exact display names, then family and memory.
TEST(GpuPresetFor, NamesAndMemory) {
  backend::DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(executor::GpuPresetFor(d).value_or(""), "h100-sxm");
  d.name = "NVIDIA A100-SXM4-40GB";
  EXPECT_EQ(executor::GpuPresetFor(d).value_or(""), "a100-40gb");
  d.name = "NVIDIA A100 80GB PCIe";  // not a display name: family + memory
  d.memory_bytes = int64_t{80} << 30;
  EXPECT_EQ(executor::GpuPresetFor(d).value_or(""), "a100-80gb");
  d.memory_bytes = int64_t{40} << 30;
  EXPECT_EQ(executor::GpuPresetFor(d).value_or(""), "a100-40gb");
  d.name = "NVIDIA GH200 480GB";
  d.memory_bytes = int64_t{95} << 30;
  EXPECT_EQ(executor::GpuPresetFor(d).value_or(""), "gh200");
  d.name = "NVIDIA H100 PCIe";  // 80 GB, but 756 not 989 TFLOP/s: not h100-sxm
  d.memory_bytes = int64_t{80} << 30;
  EXPECT_FALSE(executor::GpuPresetFor(d).has_value());
  d.name = "NVIDIA H100 NVL";
  d.memory_bytes = int64_t{94} << 30;
  EXPECT_FALSE(executor::GpuPresetFor(d).has_value());
  d.name = "NVIDIA L4";
  EXPECT_FALSE(executor::GpuPresetFor(d).has_value());
  d.name = "fake";
  EXPECT_FALSE(executor::GpuPresetFor(d).has_value());
}

}  // namespace
}  // namespace paratune::cli
