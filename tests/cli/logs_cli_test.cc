// `paratune calibrate --logs` and `paratune predict --log` in process: the
// profile they write and read, the one-line answer's keys (docs/cli.md) and
// exit codes. The logs are the published excerpts of tests/frameworks/data/logs/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "tests/cli/call.h"
#include "common/json.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);


std::string Log(const std::string& name) {
  return std::string(PARATUNE_SOURCE_DIR) + "/tests/frameworks/data/logs/" + name;
}

// The Megatron run without an arguments block: everything else from flags.
Args MegatronFlags() {
  return {"--cluster", "dgx-a100-80gb", "--model", "llama2-70b", "--gpus",
          "512",       "--seq",         "4096",    "--config",   "tp=8,pp=8,mbs=1,sp=true"};
}
// The torchtitan run: tps lines only.
Args TitanFlags() {
  return {"--cluster", "dgx-h100", "--model",        "llama3-8b", "--gpus",   "8",
          "--seq",     "2048",     "--global-batch", "8",         "--config", "gz=8"};
}

Args Join(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class LogsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)kNoCache;
    dir_ = std::filesystem::temp_directory_path() /
           ("paratune_logs_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& n) const { return (dir_ / n).string(); }
  std::filesystem::path dir_;
};

Json PredictLog(const std::string& log, const Args& flags, const std::string& profile = "") {
  Args a = Join({"--log", log}, flags);
  if (!profile.empty()) a = Join(a, {"--profile", profile});
  Outcome r = Call(RunPredict, a);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line";
  return r.code == kExitOk ? Json::parse(r.out) : Json::object();
}

TEST_F(LogsCli, PredictLogAnswersInOneLineWithTheDocumentedKeys) {
  Json j = PredictLog(Log("megatron_no_args.log"), MegatronFlags());
  for (const char* k : {"log", "framework", "gpu", "config", "measured_iteration_s",
                        "predicted_iteration_s", "error", "read_from_log", "assumed", "warnings"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_DOUBLE_EQ(j["measured_iteration_s"].get<double>(), 89.0752);
  EXPECT_DOUBLE_EQ(j["error"].get<double>(),
                   (j["predicted_iteration_s"].get<double>() - 89.0752) / 89.0752);
  EXPECT_EQ(j["framework"], "megatron");
  EXPECT_EQ(j["gpu"], "a100-80gb");
  Outcome t = Call(RunPredict, Join({"--log", Log("megatron_no_args.log"), "--format", "table"},
                                    MegatronFlags()));
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("measured 89.075 s/iteration"), std::string::npos) << t.out;
}

TEST_F(LogsCli, MissingFactsAndUnknownLogsAreExit2) {
  Outcome r = Call(RunPredict, {"--log", Log("megatron_no_args.log"), "--model", "llama2-70b"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--cluster"), std::string::npos) << r.err;
  const std::string junk = Path("junk.log");
  ASSERT_TRUE(WriteFileAtomic(junk, "hello\nworld\n").ok());
  r = Call(RunCalibrate, Join({"--logs", junk, "--out", Path("p.json")}, MegatronFlags()));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_FALSE(std::filesystem::exists(Path("p.json")));
  r = Call(RunCalibrate, {"--reports", "x.json", "--profile", "y.json", "--out", "z.json",
                          "--cluster", "dgx-h100"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--cluster goes with --logs"), std::string::npos) << r.err;
}

// Two logs, two frameworks on two GPUs: each entry reproduces its run within
// 5 %, predictions outside the entries are unchanged, and calibrating again
// on the output does not compound.
TEST_F(LogsCli, CalibrateOnLogsThenPredictThem) {
  const std::string mlog = Log("megatron_no_args.log"), tlog = Log("torchtitan_rank0.log");
  const Json m0 = PredictLog(mlog, MegatronFlags());
  const Json t0 = PredictLog(tlog, TitanFlags());
  ASSERT_GT(std::fabs(m0["error"].get<double>()), 0.05) << "the test needs an error to fix";

  const std::string prof = Path("logs-profile.json");
  // One call cannot mix clusters (--cluster is one), so the runs go in two
  // calls, the second on the first's profile.
  Outcome r = Call(RunCalibrate, Join({"--logs", mlog, "--out", prof}, MegatronFlags()));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("assumed: gpus 512 (--gpus)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read:    global batch 1024 (log)"), std::string::npos) << r.out;
  const std::string prof2 = Path("logs-profile2.json");
  Args titan = TitanFlags();
  r = Call(RunCalibrate, Join({"--logs", tlog, "--out", prof2, "--profile", prof}, titan));
  ASSERT_EQ(r.code, kExitOk) << r.err;

  auto text = ReadFileToString(prof2);
  ASSERT_TRUE(text.ok());
  const Json doc = Json::parse(*text);
  ASSERT_EQ(doc["calibration"]["entries"].size(), 2u);
  EXPECT_EQ(doc["calibration"]["entries"][0]["framework"], "megatron");
  EXPECT_EQ(doc["calibration"]["entries"][0]["gpu"], "a100-80gb");
  EXPECT_EQ(doc["calibration"]["entries"][1]["framework"], "torchtitan");
  EXPECT_EQ(doc["calibration"]["entries"][1]["gpu"], "h100-sxm");

  const Json m1 = PredictLog(mlog, MegatronFlags(), prof2);
  const Json t1 = PredictLog(tlog, TitanFlags(), prof2);
  EXPECT_LT(std::fabs(m1["error"].get<double>()), 0.05);
  EXPECT_LT(std::fabs(t1["error"].get<double>()), 0.05);

  // Outside the entries: megatron on H100, torchtitan on A100 -- unchanged.
  const Args plain_h100 = {"--model",     "llama3-8b",      "--cluster", "dgx-h100", "--gpus",
                           "8",           "--global-batch", "8",         "--seq",    "2048",
                           "--framework", "megatron",       "--config",  "tp=2"};
  Outcome a = Call(RunPredict, plain_h100);
  Outcome b = Call(RunPredict, Join(plain_h100, {"--profile", prof2}));
  ASSERT_EQ(a.code, kExitOk) << a.err;
  ASSERT_EQ(b.code, kExitOk) << b.err;
  EXPECT_DOUBLE_EQ(Json::parse(a.out)["iteration_time_s"].get<double>(),
                   Json::parse(b.out)["iteration_time_s"].get<double>());
  const Args titan_a100 = {"--model",     "llama3-8b",      "--cluster", "dgx-a100-80gb", "--gpus",
                           "8",           "--global-batch", "8",         "--seq",         "2048",
                           "--framework", "torchtitan",     "--config",  "gz=8"};
  a = Call(RunPredict, titan_a100);
  b = Call(RunPredict, Join(titan_a100, {"--profile", prof2}));
  ASSERT_EQ(a.code, kExitOk) << a.err;
  ASSERT_EQ(b.code, kExitOk) << b.err;
  EXPECT_DOUBLE_EQ(Json::parse(a.out)["iteration_time_s"].get<double>(),
                   Json::parse(b.out)["iteration_time_s"].get<double>());

  // Again on the calibrated profile: the same entry, not a compounded one.
  const std::string prof3 = Path("logs-profile3.json");
  r = Call(RunCalibrate,
           Join({"--logs", mlog, "--out", prof3, "--profile", prof2}, MegatronFlags()));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto text3 = ReadFileToString(prof3);
  ASSERT_TRUE(text3.ok());
  const Json doc3 = Json::parse(*text3);
  ASSERT_EQ(doc3["calibration"]["entries"].size(), 2u);
  const Json& again = doc3["calibration"]["entries"][1];  // replaced: appended after titan's
  EXPECT_EQ(again["framework"], "megatron");
  EXPECT_NEAR(again["scale"].get<double>(), doc["calibration"]["entries"][0]["scale"].get<double>(),
              1e-6);
  EXPECT_LT(again["error_before"].get<double>(), 0.05);
}

// A log holding three torchtitan runs: listed without --run, one picked with it.
TEST_F(LogsCli, SeveralRunsAreListedAndRunPicksOne) {
  const std::string log = Log("torchtitan_three_runs.log");
  Outcome r = Call(RunPredict, {"--log", log, "--model", "llama3-8b"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("holds 3 runs; pass --run N (1-3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run 2 (line 21): torchtitan, bf16"), std::string::npos) << r.err;
  const Json fp8 = PredictLog(log, {"--model", "llama3-8b", "--run", "1"});
  EXPECT_EQ(fp8["config"].get<std::string>().find("gz=8") != std::string::npos, true) << fp8["config"];
  bool read_fp8 = false;
  for (const auto& l : fp8["read_from_log"]) {
    read_fp8 |= l.get<std::string>() == "precision fp8_blockwise (float8 rowwise)";
  }
  EXPECT_TRUE(read_fp8) << fp8["read_from_log"].dump();
  const Json bf16 = PredictLog(log, {"--model", "llama3-8b", "--run", "2"});
  EXPECT_GT(bf16["measured_iteration_s"].get<double>(), fp8["measured_iteration_s"].get<double>());
  r = Call(RunPredict, {"--log", log, "--model", "llama3-8b", "--run", "4"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--run 4 is out of range"), std::string::npos) << r.err;
  r = Call(RunPredict, {"--log", log, "--model", "llama3-8b", "--run", "0"});
  EXPECT_EQ(r.code, kExitUsage);
}

TEST_F(LogsCli, MissingFactsAreAskedForAtOnce) {
  Outcome r = Call(RunPredict, {"--log", Log("megatron_no_args.log")});
  EXPECT_EQ(r.code, kExitUsage);
  for (const char* flag : {"--cluster", "--gpus", "--model"}) {
    EXPECT_NE(r.err.find(flag), std::string::npos) << flag << ": " << r.err;
  }
}

// Outside the calibrated range: the axis is named in `warnings` and in the table.
TEST_F(LogsCli, RunsOutsideTheCalibratedRangeAreWarned) {
  Args mi300x = MegatronFlags();
  mi300x[1] = "mi300x";
  const Json j = PredictLog(Log("megatron_no_args.log"), mi300x);
  ASSERT_TRUE(j.contains("warnings"));
  bool gpu_axis = false;
  for (const auto& w : j["warnings"]) {
    gpu_axis |= w.get<std::string>().find("(GPU generation): no published run on mi300x") !=
                std::string::npos;
  }
  EXPECT_TRUE(gpu_axis) << j["warnings"].dump();
  const Json in_range = PredictLog(Log("megatron_no_args.log"), MegatronFlags());
  EXPECT_TRUE(in_range["warnings"].empty()) << in_range["warnings"].dump();
  Outcome t = Call(RunPredict, {"--log", Log("torchtitan_three_runs.log"), "--model", "llama3-8b",
                                "--run", "3", "--format", "table"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("  warning: outside the calibrated range (framework family)"),
            std::string::npos)
      << t.out;
}

// An argument printed but not in effect (Megatron-DeepSpeed's zero_stage
// without --deepspeed) does not make the log fail.
TEST_F(LogsCli, InactiveZeroStageIsIgnored) {
  const Json j = PredictLog(Log("megatron_deepspeed_no_ds.log"), {"--cluster", "dgx-h100"});
  EXPECT_EQ(j["framework"], "megatron");
  EXPECT_EQ(j["config"].get<std::string>().find("zero"), std::string::npos) << j["config"];
}

}  // namespace
}  // namespace paratune::cli
