// `paratune validate --collectives` (docs/cli.md, Validation): the tables,
// the groupings and the documented JSON keys, and its refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/json.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

std::string TablesFile() {
  return std::string(PARATUNE_SHARED_DIR) + "/calibration/nccl_tables.json";
}

TEST(ValidateCollectives, PrintsEveryTableAndItsGroups) {
  if (!ReadFileToString(TablesFile()).ok()) GTEST_SKIP() << "no nccl_tables.json";
  const Outcome t = Call(RunValidate, {"--collectives", TablesFile()});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  for (const char* line : {"azure-ndv5-h100-1node-ar-nvls", "nvls (forced)", "per system",
                           "per collective", "per rank count", "per message size", "not asked",
                           "NCCL's TCP-socket transport"}) {
    EXPECT_NE(t.out.find(line), std::string::npos) << line << "\n" << t.out;
  }
  const Outcome j = Call(RunValidate, {"--collectives", TablesFile(), "--format", "json"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["schema"], "paratune.collective_validation/v4");
  for (const char* k : {"tables", "per_system", "per_collective", "per_rank_decade", "per_size",
                        "overall", "fitted_constants", "leave_one_system_out",
                        "leave_one_system_out_overall", "not_asked"}) {
    EXPECT_TRUE(doc.contains(k)) << k;
  }
  ASSERT_FALSE(doc["tables"].empty());
  const Json& row = doc["tables"][0]["rows"][0];
  for (const char* k : {"size_bytes", "measured_us", "measured_from", "predicted_us", "error",
                        "algorithm", "protocol", "latency_us", "algbw_GBps"}) {
    EXPECT_TRUE(row.contains(k)) << k;
  }
  // Three fitted constants, each refitted with each system held out: the
  // share over every system, a fabric's hop latency over the systems with
  // tables across it.
  ASSERT_EQ(doc["fitted_constants"].size(), 3u);
  const Json& fill = doc["fitted_constants"][0];
  EXPECT_EQ(fill["name"], "pipeline_fill");
  EXPECT_EQ(fill["held_out"].size(), doc["per_system"].size());
  EXPECT_EQ(doc["fitted_constants"][1]["name"], "net_latency_us.efa");
  EXPECT_EQ(doc["fitted_constants"][2]["name"], "net_latency_us.verbs");
  EXPECT_TRUE(doc["fitted_constants"][1]["held_out"].contains("H100 @ aws-samples"));
  EXPECT_FALSE(doc["fitted_constants"][1]["held_out"].contains("H100 @ Azure"));
  EXPECT_TRUE(doc["tables"][0].contains("net_transport"));
  EXPECT_EQ(doc["leave_one_system_out"].size(), doc["per_system"].size());
  EXPECT_NE(t.out.find("per system held out"), std::string::npos);
}

TEST(ValidateCollectives, AsksTheExpertParallelKernelsOfTheDispatchTerm) {
  if (!ReadFileToString(TablesFile()).ok()) GTEST_SKIP() << "no nccl_tables.json";
  const Outcome t = Call(RunValidate, {"--collectives", TablesFile()});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  for (const char* line :
       {"expert-parallel kernels (DeepEP, HybridEP)", "per kernel and span", "deepep, across nodes",
        "hybridep, one NVLink domain", "kernel rows not asked", "low-latency kernels"}) {
    EXPECT_NE(t.out.find(line), std::string::npos) << line;
  }
  const Outcome j = Call(RunValidate, {"--collectives", TablesFile(), "--format", "json"});
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const Json ep = Json::parse(j.out)["ep_kernels"];
  for (const char* k : {"tables", "per_kernel_and_span", "overall", "not_asked"}) {
    EXPECT_TRUE(ep.contains(k)) << k;
  }
  ASSERT_FALSE(ep["tables"].empty());
  const Json& row = ep["tables"][0]["rows"][0];
  for (const char* k : {"ep_ranks", "phase", "dtype", "bandwidth_counts", "measured_GBps",
                        "bench_bytes", "measured_us", "predicted_us", "error"}) {
    EXPECT_TRUE(row.contains(k)) << k;
  }
  // Every kernel row of the file is asked or listed with its reason.
  int listed = ep["overall"]["rows"].get<int>();
  for (const Json& s : ep["not_asked"]) listed += s["rows"].get<int>();
  int kernel_rows = 0;
  for (const Json& table : Json::parse(*ReadFileToString(TablesFile()))) {
    if (table.value("kind", "") == "ep_kernel_benchmark")
      kernel_rows += static_cast<int>(table["rows"].size());
  }
  EXPECT_GT(kernel_rows, 0);
  EXPECT_EQ(listed, kernel_rows);
}

TEST(ValidateCollectives, RefusesOtherFilesAndCombinations) {
  const std::string goodput = std::string(PARATUNE_SOURCE_DIR) + "/validation/data/goodput_runs.json";
  const Outcome wrong = Call(RunValidate, {"--collectives", goodput});
  EXPECT_EQ(wrong.code, kExitUsage);
  EXPECT_NE(wrong.err.find("not a nccl_tables.json document"), std::string::npos) << wrong.err;
  EXPECT_EQ(Call(RunValidate, {"--collectives", goodput, "--runs", goodput}).code, kExitUsage);
  EXPECT_EQ(Call(RunValidate, {"--collectives", "/nonexistent/tables.json"}).code, kExitUsage);
}

}  // namespace
}  // namespace paratune::cli
