// Contract of `paratune replan` (docs/cli.md, docs/replan.md): the keys scripts
// read, the exit codes, and the loud global-batch warning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "cli/commands.h"
#include "tests/cli/call.h"
#include "common/json.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);


const char* kRunning = R"({"model": "llama2-7b", "cluster": "dgx-a100-80gb", "gpus": 64,
  "training": {"seq_len": 4096, "global_batch": 256},
  "config": {"tp": 2, "pp": 2, "distributed_optimizer": true}})";

TEST(ReplanCli, HelpTeaches) {
  Outcome r = Call(RunReplan, {"--help"});
  EXPECT_EQ(r.code, kExitOk);
  for (const char* k : {"--lost-nodes", "--add-nodes", "--allow-global-batch-change", "--fs-GBps", "consolidated"}) {
    EXPECT_NE(r.out.find(k), std::string::npos) << k;
  }
}

TEST(ReplanCli, JsonHasTheContractKeys) {
  Outcome r = Call(RunReplan, {"--from", "-", "--lost-nodes", "3", "--space", "megatron", "--top", "2",
                               "--format", "json"}, kRunning);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json d = Json::parse(r.out);
  EXPECT_EQ(d["schema"], "paratune.replan/v1");
  EXPECT_EQ(d["allocation"]["available_gpus"], 40);
  EXPECT_EQ(d["global_batch_policy"], "keep");
  ASSERT_EQ(d["candidates"].size(), 2u);
  EXPECT_TRUE(d["candidates"][0].contains("relative_step_time"));
  EXPECT_LE(d["candidates"][0]["gpus"].get<int>(), 40);
  for (const char* k : {"bytes_per_rank", "total_bytes", "fragments", "load"}) {
    EXPECT_TRUE(d["reshard"].contains(k)) << k;
  }
  EXPECT_TRUE(d["reshard"]["load"]["checkpoint"].contains("time_s"));
  EXPECT_TRUE(d["reshard"]["load"]["peer_to_peer"].contains("time_s"));
  EXPECT_EQ(r.err.find("WARNING"), std::string::npos);
}

TEST(ReplanCli, FromAPlansDocumentWithRank) {
  Outcome plan = Call(RunPlan, {"--model", "llama2-7b", "--cluster", "dgx-a100-80gb", "--gpus", "64",
                                "--global-batch", "256", "--seq", "4096", "--space", "megatron", "--top", "3",
                                "--format", "json"});
  ASSERT_EQ(plan.code, kExitOk) << plan.err;
  Outcome r = Call(RunReplan, {"--from", "-", "--rank", "2", "--add-nodes", "1", "--max-counts", "1",
                               "--format", "json"}, plan.out);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json d = Json::parse(r.out);
  EXPECT_EQ(d["from"]["config"], Json::parse(plan.out)["candidates"][1]["config"]);
  EXPECT_EQ(d["space"], "megatron");  // kept from the plans document
  EXPECT_EQ(d["allocation"]["available_gpus"], 72);
}

TEST(ReplanCli, TableAndLoudBatchChange) {
  Outcome r = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--space", "megatron", "--top", "3",
                               "--allow-global-batch-change"}, kRunning);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("WARNING"), std::string::npos);
  EXPECT_NE(r.out.find("CHANGED"), std::string::npos);
  EXPECT_NE(r.out.find("reshard to candidate 1"), std::string::npos);
  EXPECT_NE(r.out.find("peer-to-peer"), std::string::npos);
}

// Operators keep the running layout and drop data-parallel replicas first.
// Llama 3 70B on 32 nodes loses one: with the batch allowed to change, the
// running layout on 15 replicas takes the batch nearest the running one that
// they divide (510), stays on the table whatever outranks it, and is marked.
TEST(ReplanCli, TheRunningLayoutWithFewerReplicasIsOffered) {
  const Outcome plan = Call(RunPlan, {"--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256",
                                      "--seq", "8192", "--global-batch", "512", "--space", "megatron",
                                      "--format", "json"});
  ASSERT_EQ(plan.code, kExitOk) << plan.err;
  const Json running = Json::parse(plan.out)["candidates"][0]["config"];
  const Outcome r = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--allow-global-batch-change",
                                     "--top", "4", "--format", "json"}, plan.out);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json d = Json::parse(r.out);
  int same = 0;
  for (const Json& c : d["candidates"]) {
    if (!c["keeps_layout"].get<bool>()) continue;
    ++same;
    Json want = running;
    want["dp"] = c["config"]["dp"];
    EXPECT_EQ(c["config"], want);
    EXPECT_LT(c["config"]["dp"].get<int>(), running["dp"].get<int>());
    // The nearest batch the new replicas divide.
    const int64_t dp = c["config"]["dp"].get<int64_t>(), batch = c["global_batch"].get<int64_t>();
    EXPECT_EQ(batch % dp, 0);
    EXPECT_LE(std::abs(batch - 512), dp / 2);
  }
  EXPECT_EQ(same, 1);
  // With the batch kept the layout cannot hold 15 replicas: the document says
  // where it would, and with which batch.
  const Outcome kept = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--top", "2", "--format", "json"},
                            plan.out);
  ASSERT_EQ(kept.code, kExitOk) << kept.err;
  const Json k = Json::parse(kept.out);
  ASSERT_FALSE(k["same_layout_with_batch_change"].is_null());
  EXPECT_EQ(k["same_layout_with_batch_change"]["gpus"], 240);
  EXPECT_EQ(k["same_layout_with_batch_change"]["global_batch"], 510);
}

// A fixed layout that predict fits on the remaining GPUs is found: Llama 3.1
// 405B on 2,048 nodes (Meta's tp=8 pp=16 vpp=8 cp=2) loses 3; the layout
// keeps 63 replicas at batch 2016 (32 sequences each: whole groups of the
// interleaved schedule), ranked first, at the step time predict gives it.
TEST(ReplanCli, APinnedLayoutThatFitsIsFound) {
  const Outcome plan = Call(RunPlan, {"--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384",
                                      "--seq", "8192", "--global-batch", "2048", "--space", "megatron",
                                      "--fix", "tp=8,pp=16,vpp=8,cp=2", "--top", "1", "--format", "json"});
  ASSERT_EQ(plan.code, kExitOk) << plan.err;
  const Outcome r = Call(RunReplan, {"--from", "-", "--lost-nodes", "3", "--allow-global-batch-change",
                                     "--fix", "tp=8,pp=16,vpp=8,cp=2", "--top", "3", "--format", "json"},
                         plan.out);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json d = Json::parse(r.out);
  ASSERT_FALSE(d["candidates"].empty());
  const Json& first = d["candidates"][0];
  EXPECT_TRUE(first["keeps_layout"].get<bool>());
  EXPECT_EQ(first["gpus"], 16128);
  EXPECT_EQ(first["global_batch"], 2016);
  const Outcome p = Call(RunPredict, {"--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16128",
                                      "--seq", "8192", "--global-batch", "2016", "--config",
                                      first["config_string"].get<std::string>(), "--format", "json"});
  ASSERT_EQ(p.code, kExitOk) << p.err;
  EXPECT_DOUBLE_EQ(Json::parse(p.out)["iteration_time_s"].get<double>(),
                   first["prediction"]["iteration_time_s"].get<double>());

  // Whatever the running layout, the pinned one is found: batch 2016 is the
  // multiple of 63 replicas below 2048, where the nearest (2079, 33 each)
  // breaks the interleaved schedule's groups of pp = 16 micro-batches.
  const Outcome free = Call(RunPlan, {"--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus",
                                      "16384", "--seq", "8192", "--global-batch", "2048", "--space",
                                      "megatron", "--top", "1", "--format", "json"});
  ASSERT_EQ(free.code, kExitOk) << free.err;
  const Outcome pinned = Call(RunReplan, {"--from", "-", "--lost-nodes", "3", "--allow-global-batch-change",
                                          "--fix", "tp=8,pp=16,vpp=8,cp=2", "--top", "3", "--format", "json"},
                              free.out);
  ASSERT_EQ(pinned.code, kExitOk) << pinned.err;
  bool found = false;
  const Json rows = Json::parse(pinned.out);
  for (const Json& c : rows["candidates"]) {
    found = found || (c["gpus"] == 16128 && c["global_batch"] == 2016);
  }
  EXPECT_TRUE(found) << pinned.out.substr(0, 2000);
}

TEST(ReplanCli, BadInputExitsTwo) {
  EXPECT_EQ(Call(RunReplan, {"--from", "-"}, kRunning).code, kExitUsage);  // no allocation change
  EXPECT_EQ(Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--add-nodes", "1"}, kRunning).code, kExitUsage);
  EXPECT_EQ(Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--keep-global-batch",
                             "--allow-global-batch-change"}, kRunning).code, kExitUsage);
  EXPECT_EQ(Call(RunReplan, {"--lost-nodes", "1"}).code, kExitUsage);
  Outcome r = Call(RunReplan, {"--from", "-", "--lost-nodes", "1", "--fragments-of", "9999"}, kRunning);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("fragments_of"), std::string::npos) << r.err;
  // A plans document whose schema is not a string is bad input naming the
  // field, not an internal error (JobFromPlans once threw a JSON type error).
  for (const char* bad : {R"({"schema": 5, "job": {}})", R"({"schema": ["paratune.plans/v1"]})"}) {
    Outcome b = Call(RunReplan, {"--from", "-", "--lost-nodes", "1"}, bad);
    EXPECT_EQ(b.code, kExitUsage) << bad << ": " << b.err;
    EXPECT_NE(b.err.find("schema"), std::string::npos) << b.err;
  }
}

TEST(ReplanCli, NothingFitsExitsThree) {
  // One GPU left: Llama 2 7B with mixed-precision Adam needs about 16 B × 6.7e9 > 80 GB.
  Outcome r = Call(RunReplan, {"--from", "-", "--gpus", "1", "--space", "megatron"}, kRunning);
  EXPECT_EQ(r.code, kExitNoFeasible) << r.out << r.err;
}

}  // namespace
}  // namespace paratune::cli
