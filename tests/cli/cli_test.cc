// Contract tests of the CLI documents and exit codes (docs/cli.md): scripts
// call these commands, so keys and codes change only on purpose.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "tests/cli/call.h"
#include "cli/common.h"
#include "common/json.h"
#include "common/median.h"
#include "planner/plans.h"
#include "topology/cluster.h"
#include "validation/fit.h"

namespace paratune::cli {
namespace {

// Hermetic: a developer's profile cache must not change these answers.
const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);


const Args kPredict175b = {"--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024",
                           "--seq", "2048", "--global-batch", "1536",
                           "--config", "tp=8,pp=16,mbs=1,recompute=full"};

TEST(Predict, JsonHasTheDocumentedKeys) {
  Outcome r = Call(RunPredict, kPredict175b);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema"], "paratune.prediction/v1");
  for (const char* k : {"fits", "iteration_time_s", "tokens_per_s", "model_tflops_per_gpu",
                        "hardware_tflops_per_gpu", "mfu", "hfu", "memory_GiB", "breakdown_s", "config",
                        "training", "cluster_fingerprint", "micro_batches"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (const char* k : {"params", "grads", "optimizer", "activations", "buffers", "total", "capacity"}) {
    EXPECT_TRUE(j["memory_GiB"].contains(k)) << k;
  }
  for (const char* k : {"compute", "comm_x", "comm_y", "comm_z", "comm_cp", "comm_data", "comm_pp",
                        "bubble", "optimizer"}) {
    EXPECT_TRUE(j["breakdown_s"].contains(k)) << k;
  }
  EXPECT_EQ(j["config"]["tp"], 8);
  EXPECT_EQ(j["config"]["dp"], 8);  // derived: 1024 / (8 · 16)
  // tokens/s is the batch's tokens over the iteration time.
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["iteration_time_s"].get<double>(), 1536.0 * 2048, 1e-6 * 1536 * 2048);
}

// --explain memory lists the ledger stage by stage: each stage's terms add up
// to the peak it names, the first and last stages' peaks are the ones the
// prediction reports, the largest stage's reserved memory is the verdict's,
// and every term names its source.
TEST(Predict, ExplainMemoryListsEachStagesLedger) {
  Args args = kPredict175b;
  args.insert(args.end(), {"--explain", "memory"});
  Outcome r = Call(RunPredict, args);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_TRUE(j.contains("memory_ledger"));
  std::map<std::string, double> sum, peak, reserved;
  for (const Json& row : j["memory_ledger"]) {
    const std::string stage = row["stage"], term = row["term"];
    EXPECT_FALSE(row["source"].get<std::string>().empty()) << term;
    if (term.rfind("peak", 0) == 0) {
      peak[stage] = row["GiB"].get<double>();
    } else if (term.rfind("reserved", 0) == 0) {
      reserved[stage] = row["GiB"].get<double>();
    } else if (term.rfind("optimizer step copy", 0) != 0) {
      sum[stage] += row["GiB"].get<double>();
    }
  }
  ASSERT_EQ(peak.size(), 3u);  // pp 16: first, middle, last
  for (const auto& [stage, gib] : peak) EXPECT_NEAR(sum[stage], gib, 1e-9 * gib) << stage;
  EXPECT_NEAR(peak["first"], j["memory_GiB"]["first_stage_allocated"].get<double>(), 1e-9);
  EXPECT_NEAR(peak["last"], j["memory_GiB"]["last_stage_allocated"].get<double>(), 1e-9);
  ASSERT_EQ(reserved.size(), 3u);
  double largest = 0;
  for (const auto& [stage, gib] : reserved) {
    EXPECT_GT(gib, peak[stage]) << stage;  // the allocator's slack over the peak
    largest = std::max(largest, gib);
  }
  EXPECT_NEAR(largest, j["memory_GiB"]["reserved"].get<double>(), 1e-9);
  Args bad = kPredict175b;
  bad.insert(bad.end(), {"--explain", "time"});
  EXPECT_EQ(Call(RunPredict, bad).code, kExitUsage);
  Args table = args;
  table.insert(table.end(), {"--format", "table"});
  Outcome t = Call(RunPredict, table);
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("memory ledger"), std::string::npos);
  EXPECT_NE(t.out.find("middle stage"), std::string::npos);
}

TEST(Predict, RequestFileAndFlagsAgree) {
  const std::string req = R"({"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "gpus": 1024,
    "training": {"seq_len": 2048, "global_batch": 1536},
    "config": {"tp": 8, "pp": 16, "mbs": 1, "recompute": "full"}})";
  Outcome a = Call(RunPredict, {"--request", "-"}, req);
  Outcome b = Call(RunPredict, kPredict175b);
  ASSERT_EQ(a.code, kExitOk) << a.err;
  EXPECT_EQ(Json::parse(a.out)["iteration_time_s"], Json::parse(b.out)["iteration_time_s"]);
}

TEST(Predict, BadInputExitsTwoNamingFieldAndRule) {
  struct Case { Args args; std::string stdin_text; std::string needle; };
  const Case cases[] = {
      {{"--request", "-"},
       R"({"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "gpus": 64,
         "training": {"global_batch": 64}, "config": {"tp": 8, "pp": 8, "tpp": 1}})",
       "/config/tpp: unknown key"},
      {{"--request", "-"},
       R"({"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "gpus": 64,
         "training": {"global_batch": 64}, "config": {"tp": 64}})",
       "/config/tp"},
      {{"--request", "-"},
       R"({"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "gpus": 64,
         "training": {"global_batch": 64}, "config": {"tp": 8, "pp": 8, "dp": 2}})",
       "/gpus"},
      {{"--request", "-"},
       R"({"model": "nope", "cluster": "dgx-a100-80gb", "gpus": 8,
         "training": {"global_batch": 8}})",
       "nope"},
      {{"--request", "-"},
       R"({"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "gpus": 8,
         "training": {"global_batch": 8, "precision": "fp7"}})",
       "/training/precision"},
      {{"--request", "-"},
       R"({"model": "llama2-7b", "cluster": {"gpu": "v100-32gb", "gpus_per_node": 8,
         "intra_node_GBps": 130, "inter_node_GBps_per_gpu": 12}, "gpus": 8,
         "training": {"global_batch": 8, "precision": "bf16"}})",
       "/training/precision"},
      {{"--request", "-"}, "{not json", "invalid JSON"},
      {{"--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--global-batch", "0"},
       "",
       "/training/global_batch"},
      {{"--bogus"}, "", "unknown flag"},
  };
  for (const Case& c : cases) {
    Outcome r = Call(RunPredict, c.args, c.stdin_text);
    EXPECT_EQ(r.code, kExitUsage) << c.needle << "\n" << r.err << r.out;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing on stdout on error";
  }
}

// Issue 40 (8): `--cluster /dev/zero` ended in std::bad_alloc (exit 1), and a
// cluster without NICs answered a two-node job with null times (exit 0). Both
// are usage errors (exit 2) naming what was wrong; a NIC-less single node
// still plans, with numbers.
TEST(Plan, AbsurdInputsExitTwoNamingWhat) {
  Outcome dev = Call(RunPlan, {"--model", "llama3-8b", "--cluster", "/dev/zero", "--gpus", "8",
                               "--global-batch", "64"});
  EXPECT_EQ(dev.code, kExitUsage) << dev.err;
  EXPECT_NE(dev.err.find("'/dev/zero' is a character device"), std::string::npos) << dev.err;
  EXPECT_TRUE(dev.out.empty());

  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string box = R"({"name": "box", "gpu": "h100-sxm", "gpus_per_node": 8,
    "intra_node_GBps": 370, "nics_per_node": 0)";
  const std::string four = write("paratune_nonic4.json", box + R"(, "max_nodes": 4})");
  const std::string one = write("paratune_nonic.json", box + "}");
  const std::string slow = write("paratune_slowlink.json",
                                 R"({"name": "slow", "gpu": "h100-sxm", "gpus_per_node": 8,
    "intra_node_GBps": 1e-300, "nics_per_node": 8, "nic_GBps": 50})");
  struct Case {
    std::string cluster;
    std::string gpus;
    std::string needle;
  };
  for (const Case& c : {Case{four, "16", "/cluster/nics_per_node: must be >= 1"},
                        Case{one, "16", "/gpus: exceeds the cluster"},
                        Case{slow, "8", "/cluster/intra_node_GBps"}}) {
    Outcome r = Call(RunPlan, {"--model", "llama3-8b", "--cluster", c.cluster, "--gpus", c.gpus,
                               "--global-batch", "64"});
    EXPECT_EQ(r.code, kExitUsage) << c.needle << "\n" << r.err << r.out;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  Outcome ok = Call(RunPredict, {"--model", "llama3-8b", "--cluster", one, "--gpus", "8",
                                 "--global-batch", "64", "--seq", "4096", "--config", "tp=8",
                                 "--format", "json"});
  ASSERT_EQ(ok.code, kExitOk) << ok.err;
  const Json j = Json::parse(ok.out);
  EXPECT_TRUE(j["iteration_time_s"].is_number()) << ok.out;
  EXPECT_GT(j["iteration_time_s"].get<double>(), 0);
  for (const std::string& p : {four, one, slow}) std::remove(p.c_str());
}

TEST(Predict, OutOfMemoryIsANormalAnswer) {
  Outcome r = Call(RunPredict, {"--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "8",
                            "--global-batch", "8", "--config", "tp=8"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["reason"], "out_of_memory");
  EXPECT_GT(j["memory_GiB"]["total"].get<double>(), j["memory_GiB"]["usable"].get<double>());
}

TEST(Plan, JsonDocumentAndRanking) {
  Outcome r = Call(RunPlan, {"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch",
                         "512", "--top", "5", "--format", "json", "--threads", "2"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema"], "paratune.plans/v1");
  for (const char* k : {"candidates", "evaluated", "feasible", "rejected", "search_time_s", "job", "space"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  ASSERT_GE(j["candidates"].size(), 1u);
  ASSERT_LE(j["candidates"].size(), 5u);  // identical predictions collapse into one row
  // docs/model.md, Ranking: candidates rank by the pessimistic edge of their
  // band; the leaders (point prediction inside the best edge) come first,
  // simplest first; the rest follow by their edge.
  EXPECT_EQ(j["ranked_by"].get<std::string>().rfind("ranked by the pessimistic edge", 0), 0u);
  const size_t leaders = j["leaders_within_band"].get<size_t>();
  double edge = 1e300;
  for (const Json& c : j["candidates"]) {
    const Json& p = c["prediction"];
    const double t = p["iteration_time_s"],
                 u = p["iteration_time_s_range"][1].get<double>() / t - 1.0;
    EXPECT_GE(p["pessimistic_iteration_time_s"].get<double>(), t * (1 + u) * (1 - 1e-9));
    edge = std::min(edge, p["pessimistic_iteration_time_s"].get<double>());
  }
  double prev = 0;
  int prev_complexity = -1;
  for (size_t i = 0; i < j["candidates"].size(); ++i) {
    const Json& c = j["candidates"][i];
    const double t = c["prediction"]["iteration_time_s"];
    const double e = c["prediction"]["pessimistic_iteration_time_s"];
    EXPECT_TRUE(c["prediction"]["fits"].get<bool>());
    EXPECT_EQ(c["within_band"].get<bool>(), i < leaders);
    EXPECT_TRUE(c.contains("framework"));
    if (i < leaders) {
      EXPECT_LE(t, edge * (1 + 1e-9));
      EXPECT_GE(c["complexity"].get<int>(), prev_complexity);
      prev_complexity = c["complexity"];
    } else {
      EXPECT_GE(e, prev);
      EXPECT_GT(t, edge);
      prev = e;
    }
  }
  int64_t rejected = 0;
  for (auto& [k, v] : j["rejected"].items()) rejected += v.get<int64_t>();
  EXPECT_EQ(j["evaluated"].get<int64_t>(), j["feasible"].get<int64_t>() + rejected);
}

// docs/cli.md, Plans: a row ranked above a faster one says why (`rank_note`,
// naming a row ranked below it), in the document and on a line under its row
// in the table, whose footer names the fastest row. llama3-70b on 256 H100s
// ranks a simpler leader above a faster one (docs/model.md, Ranking).
TEST(Plan, ARowAboveAFasterOneSaysWhy) {
  const Args job = {"--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq", "8192",
                    "--global-batch", "512", "--top", "10", "--threads", "2"};
  Args as_json = job;
  as_json.insert(as_json.end(), {"--format", "json"});
  const Outcome r = Call(RunPlan, as_json);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json cands = Json::parse(r.out)["candidates"];
  ASSERT_GE(cands.size(), 2u);
  auto time = [&](size_t i) { return cands[i]["prediction"]["iteration_time_s"].get<double>(); };
  size_t fastest = 0, notes = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    SCOPED_TRACE("#" + std::to_string(i + 1));
    const Json& note = cands[i]["rank_note"];
    bool faster_below = false;
    for (size_t j = i + 1; j < cands.size(); ++j) faster_below |= time(j) < time(i);
    if (faster_below) {
      EXPECT_TRUE(note.is_string()) << "a faster row is ranked below, unexplained";
    }
    if (time(i) < time(fastest)) fastest = i;
    if (!note.is_string()) continue;
    ++notes;
    const std::string text = note;
    const size_t hash = text.find('#');
    ASSERT_NE(hash, std::string::npos) << text;
    const size_t named = std::stoul(text.substr(hash + 1));
    EXPECT_GT(named, i + 1) << text;
    if (named <= cands.size()) {
      EXPECT_LT(time(named - 1), time(i)) << text;
    }
    EXPECT_NE(text.find("% slower"), std::string::npos) << text;
  }
  EXPECT_GE(notes, 1u) << "rank 1 of this job is a simpler leader, not the fastest row";

  const Outcome t = Call(RunPlan, job);
  ASSERT_EQ(t.code, kExitOk) << t.err;
  std::istringstream lines(t.out);
  std::string line, prev;
  size_t note_lines = 0;
  bool footer = false;
  while (std::getline(lines, line)) {
    if (line.rfind("        ^ ", 0) == 0) {
      const std::string text = line.substr(10);
      bool documented = false;
      for (const Json& c : cands) documented |= c["rank_note"] == text;
      EXPECT_TRUE(documented) << line;
      // A note follows its row, which starts with the rank right-aligned in 4 columns.
      EXPECT_TRUE(prev.size() > 4 && std::isdigit(static_cast<unsigned char>(prev[3])))
          << "a note follows its row: " << prev;
      ++note_lines;
    }
    if (line.rfind("fastest: #", 0) == 0) {
      footer = true;
      // "fastest: #K T s": no shown row is faster, and a shown K is the fastest shown.
      size_t end = 0;
      const size_t k = std::stoul(line.substr(10), &end);
      EXPECT_LE(std::stod(line.substr(10 + end)), time(fastest) + 5e-4) << line;
      if (k <= cands.size()) {
        EXPECT_EQ(k, fastest + 1) << line;
      }
    }
    prev = line;
  }
  EXPECT_EQ(note_lines, notes) << t.out;
  EXPECT_TRUE(footer) << t.out;
}

// docs/frameworks.md, Emitted files: the header states the prediction as the
// plan table shows it: the band (±%), MFU with `!` and the ceiling when above
// the GPU's best published MFU, memory reserved per GPU. Llama 3 8B on 64
// A100s is predicted above the A100's published MFU; GPT-3 2.7B on 64 H100s
// is not.
TEST(Emit, HeaderStatesTheBandTheCeilingAndReservedMemory) {
  struct Case {
    Args plan;
    bool above;
  };
  const Case cases[] = {
      {{"--model", "llama3-8b", "--cluster", "dgx-a100-80gb", "--gpus", "64", "--global-batch", "512",
        "--seq", "4096"},
       true},
      {{"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "512"}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.plan[1]);
    Args args = c.plan;
    args.insert(args.end(), {"--space", "megatron", "--top", "1", "--format", "json", "--threads", "2"});
    const Outcome plans = Call(RunPlan, args);
    ASSERT_EQ(plans.code, kExitOk) << plans.err;
    const Json p = Json::parse(plans.out)["candidates"][0]["prediction"];
    EXPECT_EQ(p["above_published_mfu"].get<bool>(), c.above);
    const Outcome e = Call(RunEmit, {"--plans", "-", "--format", "megatron"}, plans.out);
    ASSERT_EQ(e.code, kExitOk) << e.err;
    const size_t at = e.out.find("# predicted: ");
    ASSERT_NE(at, std::string::npos) << e.out;
    const std::string line = e.out.substr(at, e.out.find('\n', at) - at);
    char band[32], reserved[64], ceiling[32];
    const double t = p["iteration_time_s"];
    std::snprintf(band, sizeof band, " ±%.0f %% (",
                  100 * (p["iteration_time_s_range"][1].get<double>() / t - 1));
    std::snprintf(reserved, sizeof reserved, ", %.1f GiB reserved per GPU",
                  p["memory_GiB"]["reserved"].get<double>());
    std::snprintf(ceiling, sizeof ceiling, "%.1f %%", 100 * p["published_mfu_ceiling"].get<double>());
    EXPECT_NE(line.find(band), std::string::npos) << line;
    EXPECT_NE(line.find(reserved), std::string::npos) << line;
    EXPECT_EQ(line.find("(! above the GPU's best published MFU, ") != std::string::npos, c.above) << line;
    if (c.above) {
      EXPECT_NE(line.find(ceiling), std::string::npos) << line;
    }
  }
}

TEST(Plan, ExplainRanksTheWinnerFirstAndExplainsRejections) {
  Outcome best = Call(RunPlan, {"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64",
                            "--global-batch", "512", "--top", "50", "--format", "json"});
  ASSERT_EQ(best.code, kExitOk);
  // Explain ranks by predicted time; the table leads with the simplest of the
  // leaders' band, so the fastest candidate is the one explain ranks first.
  const Json plans = Json::parse(best.out);
  Json winner;
  double fastest = 0;
  for (const Json& c : plans["candidates"]) {
    const double t = c["prediction"]["iteration_time_s"].get<double>();
    if (winner.is_null() || t < fastest) {
      winner = c["config"];
      fastest = t;
    }
  }
  std::string spec;
  for (auto& [k, v] : winner.items()) {
    if (!spec.empty()) spec += ",";
    spec += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  Outcome ex = Call(RunPlan, {"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch",
                          "512", "--explain", spec, "--format", "json"});
  ASSERT_EQ(ex.code, kExitOk) << ex.err;
  EXPECT_EQ(Json::parse(ex.out)["rank"], 1);
  // The winner explain compares against is the plan's first row.
  Outcome first = Call(RunPlan, {"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64",
                                 "--global-batch", "512", "--top", "1", "--format", "json"});
  ASSERT_EQ(first.code, kExitOk);
  const Json listed = Json::parse(first.out)["candidates"][0];
  EXPECT_EQ(Json::parse(ex.out)["winner"], listed["config_string"]) << listed.dump();
  Outcome bad = Call(RunPlan, {"--model", "gpt3-2.7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch",
                           "512", "--explain", "tp=64", "--format", "json"});
  ASSERT_EQ(bad.code, kExitOk) << bad.err;
  Json b = Json::parse(bad.out);
  EXPECT_EQ(b["status"], "rejected");
  EXPECT_EQ(b["reason"], "heads_not_divisible");
}

TEST(Plan, NothingFitsExitsThree) {
  Outcome r = Call(RunPlan, {"--model", "llama3.1-405b", "--cluster", "dgx-a100-80gb", "--gpus", "8",
                         "--global-batch", "8"});
  EXPECT_EQ(r.code, kExitNoFeasible) << r.err;
}

TEST(Plan, GpuRangeReportsScaling) {
  Outcome r = Call(RunPlan, {"--model", "gpt3-6.7b", "--cluster", "dgx-a100-80gb", "--gpus", "16:64",
                         "--global-batch", "256", "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json j = Json::parse(r.out);
  ASSERT_EQ(j["scaling"].size(), 3u);  // 16, 32, 64
  EXPECT_EQ(j["scaling"][0]["gpus"], 16);
  EXPECT_TRUE(j["scaling"][0]["pareto"].get<bool>());
  // Each row names what its pick changes from the row above, beyond the data
  // width: nothing when only the replicas differ.
  EXPECT_TRUE(j["scaling"][0]["changed"].is_null());
  for (size_t i = 1; i < j["scaling"].size(); ++i) {
    const Json& row = j["scaling"][i];
    ASSERT_TRUE(row["changed"].is_array()) << row.dump();
    Json before = j["scaling"][i - 1]["config"], now = row["config"];
    for (const char* derived : {"dp", "edp"}) {
      before.erase(derived);
      now.erase(derived);
    }
    EXPECT_EQ(row["changed"].empty(), before == now) << row.dump();
    for (const Json& c : row["changed"]) EXPECT_NE(c.get<std::string>().rfind("dp ", 0), 0u);
  }
}

// A sweep keeps the previous count's layout while the model cannot tell it
// from the count's rank 1 (its point time under the count's best pessimistic
// edge), and changes it only with a reason. Checked against the count's own
// plan and a prediction of the previous pick at the new count.
TEST(Plan, ASweepKeepsALayoutWhileItIsAmongTheLeaders) {
  const std::vector<std::vector<std::string>> sweeps = {
      {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8:128", "--seq", "8192",
       "--global-batch", "256"},
      {"--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64:512", "--seq", "8192",
       "--global-batch", "512"}};
  const std::set<std::string> knobs = {"mbs", "recompute", "offload_optimizer", "offload_param",
                                       "offload_activation_layers", "distributed_optimizer",
                                       "cuda_graphs", "moe_a2a_overlap", "oar", "ors", "oag",
                                       "overlap_grad_reduce", "overlap_param_gather",
                                       "tp_comm_overlap", "overlap_p2p", "placement"};
  int kept = 0, left = 0;
  for (std::vector<std::string> args : sweeps) {
    std::vector<std::string> sweep = args;
    sweep.insert(sweep.end(), {"--format", "json"});
    Outcome r = Call(RunPlan, sweep);
    ASSERT_EQ(r.code, kExitOk) << r.err;
    const Json rows = Json::parse(r.out)["scaling"];
    for (size_t i = 1; i < rows.size(); ++i) {
      const Json& row = rows[i];
      const std::string gpus = std::to_string(row["gpus"].get<int>());
      // The count on its own: the best pessimistic edge among its rows.
      std::vector<std::string> one = args;
      one[5] = gpus;
      one.insert(one.end(), {"--format", "json", "--top", "50"});
      Outcome p = Call(RunPlan, one);
      ASSERT_EQ(p.code, kExitOk) << p.err;
      double edge = 1e300;
      const Json alone = Json::parse(p.out);
      for (const Json& c : alone["candidates"]) {
        edge = std::min(edge, c["prediction"]["pessimistic_iteration_time_s"].get<double>());
      }
      // The previous pick, its replicas following the count.
      std::istringstream words(rows[i - 1]["config_string"].get<std::string>());
      std::string prev, w;
      while (words >> w) {
        if (w.rfind("dp=", 0) != 0 && w.rfind("edp=", 0) != 0) prev += (prev.empty() ? "" : " ") + w;
      }
      std::vector<std::string> pa = args;
      pa[5] = gpus;
      pa.insert(pa.end(), {"--config", prev, "--format", "json"});
      Outcome q = Call(RunPredict, pa);
      const Json there = q.code == kExitOk ? Json::parse(q.out) : Json::object();
      const bool prev_leads = q.code == kExitOk && there["fits"].get<bool>() &&
                              there["iteration_time_s"].get<double>() <= edge;
      bool degrees_changed = false;
      for (const Json& c : row["changed"]) {
        const std::string key = c.get<std::string>().substr(0, c.get<std::string>().find(' '));
        degrees_changed = degrees_changed || !knobs.count(key);
      }
      SCOPED_TRACE(row.dump() + " edge " + std::to_string(edge) + ", previous: " + prev);
      if (prev_leads) {
        EXPECT_FALSE(degrees_changed);
      }
      if (degrees_changed) {
        EXPECT_FALSE(row["why"].is_null());
      }
      kept += row["kept_layout"].get<bool>();
      left += degrees_changed;
    }
  }
  // Both cases occur: llama3-8b keeps tp=4 where tp=2 ranks first; llama3-70b
  // leaves tp=8 pp=2 at 512 GPUs, slower there beyond the band.
  EXPECT_GT(kept, 0);
  EXPECT_GT(left, 0);
}

TEST(Capacity, UlyssesAndFpdtReachLongerSequencesThanTensorParallelism) {
  Outcome r = Call(RunCapacity, {"--model", "fpdt-8b", "--cluster", "dgx-a100-80gb", "--gpus", "4",
                             "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema"], "paratune.capacity/v1");
  int64_t megatron = 0, deepspeed = 0;
  for (const Json& f : j["families"]) {
    if (f["space"] == "megatron") megatron = f["max_seq_len"];
    if (f["space"] == "deepspeed") deepspeed = f["max_seq_len"];
  }
  // FPDT (Yao et al. 2024) trains an 8B model at 2M tokens on 4 GPUs; Megatron
  // without offload stays far below.
  EXPECT_GE(deepspeed, 2 * 1024 * 1024);
  EXPECT_LT(megatron, deepspeed);
  EXPECT_GE(megatron, 32768);
}

// FPDT as published (Yao et al. 2024): an 8B model at 2M tokens on 4 A100-40GB,
// with the model states offloaded to host memory. On a DGX A100 (1 TB host
// memory) it reaches 2M; on Perlmutter (256 GB per node) host memory binds
// first. Every row names what binds.
TEST(Capacity, FpdtWithOffloadReachesTwoMillionTokensOnFourA100_40GB) {
  int64_t len[2] = {0, 0};
  std::string binds[2];
  const char* clusters[2] = {"dgx-a100-40gb", "perlmutter"};
  for (int i = 0; i < 2; ++i) {
    Outcome r = Call(RunCapacity, {"--model", "fpdt-8b", "--cluster", clusters[i], "--gpus", "4",
                                   "--space", "deepspeed", "--format", "json"});
    ASSERT_EQ(r.code, kExitOk) << r.err;
    const Json j = Json::parse(r.out);
    ASSERT_EQ(j["families"].size(), 1u);
    const Json& f = j["families"][0];
    len[i] = f["max_seq_len"];
    binds[i] = f["binding"];
    EXPECT_TRUE(binds[i] == "gpu_memory" || binds[i] == "host_memory") << binds[i];
    EXPECT_EQ(f["config"]["cp_kind"], "fpdt");
    EXPECT_TRUE(f["config"]["offload_optimizer"].get<bool>());
    EXPECT_GT(f["host_memory_GiB_per_node"].get<double>(), 0);
  }
  EXPECT_GE(len[0], 2 * 1024 * 1024);
  EXPECT_LT(len[1], len[0]);
  EXPECT_EQ(binds[1], "host_memory");
  // Never a length host memory cannot hold: 256 GB less the default headroom,
  // predicted for the configuration capacity reports (the optimizer states
  // offloaded, the parameters on the GPUs).
  Outcome r =
      Call(RunPredict, {"--model", "fpdt-8b", "--cluster", "perlmutter", "--gpus", "4", "--seq",
                        std::to_string(len[1]), "--global-batch", "1", "--framework",
                        "megatron-deepspeed", "--format", "json", "--config",
                        "cp=4,cp_kind=fpdt,zero=3,offload_optimizer=true,recompute=full"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json p = Json::parse(r.out);
  EXPECT_LE(p["memory_GiB"]["host_per_node"].get<double>(),
            256 * (1 - planner::TrainingSpec{}.headroom));
  EXPECT_TRUE(p.contains("binding"));
}

// When memory rejects every configuration, the table names the fewest GPUs,
// doubling from the job's, at which something fits: a plan there succeeds and
// one at half of it (still above the job's count, or the job's) does not.
TEST(Plan, NothingFitsNamesTheFewestGpusThatFit) {
  const Args job = {"--model", "llama3.1-70b", "--cluster", "dgx-h100", "--seq", "8192",
                    "--global-batch", "64", "--space", "megatron"};
  auto with = [&](int gpus) {
    Args a = job;
    a.insert(a.end(), {"--gpus", std::to_string(gpus)});
    return Call(RunPlan, a);
  };
  const Outcome none = with(2);
  ASSERT_EQ(none.code, kExitNoFeasible) << none.out;
  const std::string key = "fewest GPUs that fit (doubling from 2): ";
  const size_t at = none.out.find(key);
  ASSERT_NE(at, std::string::npos) << none.out;
  const int fits = std::stoi(none.out.substr(at + key.size()));
  EXPECT_GT(fits, 2);
  EXPECT_EQ(with(fits).code, kExitOk);
  EXPECT_EQ(with(fits / 2).code, kExitNoFeasible);
  EXPECT_NE(none.out.find("(--gpus " + std::to_string(fits) + ")"), std::string::npos);
  // It never names more GPUs than the cluster has: Polaris's 560 nodes of 4.
  planner::Job polaris;
  polaris.cluster = *topology::ClusterPreset("polaris");
  polaris.gpus = 64;
  EXPECT_EQ(planner::MostGpusToTry(polaris, int64_t{1} << 24), 560 * 4);
  polaris.gpus = 1;
  EXPECT_EQ(planner::MostGpusToTry(polaris, int64_t{1} << 24), 1024);
  EXPECT_EQ(planner::MostGpusToTry(polaris, 16), 16);
}

TEST(Validate, HoldoutMustBeAGrouping) {
  Outcome r = Call(RunValidate, {"--runs", "-", "--holdout", "vendor"}, "[]");
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--holdout"), std::string::npos) << r.err;
}

// --axes adds leave-one-axis-out (docs/cli.md, Validation): the four axes,
// each binning every row once, the p90 beside the median, and the worst bin
// taken among bins of at least min_rows rows.
TEST(Validate, AxesBinEveryRowOnceWithTheirP90) {
  const std::string cal = std::string(PARATUNE_SHARED_DIR) + "/calibration/korthikanti2022.json";
  if (!std::filesystem::exists(cal)) GTEST_SKIP() << "calibration file not found";
  Outcome r = Call(RunValidate, {"--calibration", cal, "--axes", "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json j = Json::parse(r.out);
  const Json& axes = j["leave_one_axis_out"];
  ASSERT_EQ(axes.size(), 4u);
  std::vector<std::string> names;
  for (const Json& a : axes) {
    names.push_back(a["axis"].get<std::string>());
    int rows = 0;
    double worst = 0;
    for (const Json& b : a["bins"]) {
      rows += b["runs"].get<int>();
      EXPECT_GE(b["held_out_p90_abs_error"].get<double>(), b["held_out_median_abs_error"].get<double>());
      if (b["runs"].get<int>() >= a["min_rows"].get<int>()) {
        worst = std::max(worst, b["held_out_median_abs_error"].get<double>());
      }
    }
    EXPECT_EQ(rows, 8) << a["axis"];
    EXPECT_DOUBLE_EQ(a["worst_held_out_median_abs_error"].get<double>(), worst) << a["axis"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-count", "seq", "framework", "generation"}));
  // Korthikanti's rows are all Megatron-LM on A100: one bin each for those axes.
  EXPECT_EQ(axes[2]["bins"].size(), 1u);
  EXPECT_EQ(axes[3]["bins"][0]["bin"], "ampere");
}

// The held-out groups of the JSON document carry their split by source
// (docs/cli.md, Validation): every key, and one entry that is the group itself
// when the group is one source.
TEST(Validate, HeldOutGroupsCarryTheirSplitBySource) {
  const std::string cal = std::string(PARATUNE_SHARED_DIR) + "/calibration/korthikanti2022.json";
  if (!std::filesystem::exists(cal)) GTEST_SKIP() << "calibration file not found";
  Outcome r = Call(RunValidate, {"--calibration", cal, "--holdout", "gpu", "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["held_out"].size(), 1u);
  const Json& g = j["held_out"][0];
  EXPECT_EQ(g["group"], "a100-80gb");
  ASSERT_EQ(g["by_source"].size(), 1u);
  const Json& s = g["by_source"][0];
  EXPECT_EQ(s["source"], "korthikanti2022");
  EXPECT_EQ(s["runs"], g["runs"]);
  EXPECT_DOUBLE_EQ(s["held_out_median_abs_error"].get<double>(),
                   g["held_out_median_abs_error"].get<double>());
  EXPECT_DOUBLE_EQ(s["held_out_median_signed_error"].get<double>(),
                   g["held_out_median_signed_error"].get<double>());
  // Every fitted constant as refitted: with the only GPU held out no row is
  // left to fit, so each is at its public prior.
  const Json& refit = g["refit_constants"];
  const auto& constants = planner::FittableConstants();
  ASSERT_EQ(refit.size(), constants.size());
  for (const planner::FittableConstant& c : constants) {
    ASSERT_TRUE(refit.contains(c.name)) << c.name;
    EXPECT_DOUBLE_EQ(refit[c.name].get<double>(), c.prior) << c.name;
  }
}

// The rows with sharded parameters, by GPU-count decade (docs/cli.md,
// Validation): llm-foundry's FSDP rows at 8, 32 and 128 GPUs land one bin
// each, every row once, the p90 beside the median; Megatron rows have none.
TEST(Validate, ShardedRowsByGpuDecade) {
  const std::string pub = std::string(PARATUNE_SHARED_DIR) + "/calibration/public_runs.json";
  auto text = ReadFileToString(pub);
  if (!text.ok()) GTEST_SKIP() << "calibration file not found";
  Json picked = Json::array();
  std::map<int, int> per_count;
  for (const Json& r : Json::parse(*text)) {
    if (r.value("id", "").rfind("mosaic_", 0) != 0) continue;
    const int gpus = r["hardware"]["num_gpus"].get<int>();
    if ((gpus == 8 || gpus == 32 || gpus == 128) && per_count[gpus]++ < 2) picked.push_back(r);
  }
  ASSERT_EQ(picked.size(), 6u);
  Outcome out = Call(RunValidate, {"--runs", "-", "--format", "json"}, picked.dump());
  ASSERT_EQ(out.code, kExitOk) << out.err;
  const Json j = Json::parse(out.out);
  std::map<std::string, std::vector<double>> expected;
  for (const Json& r : j["runs"]) {
    EXPECT_TRUE(r["sharded_parameters"].get<bool>()) << r["config"];
    expected[planner::DecadeOf(r["gpus"].get<int>())].push_back(std::fabs(r["error"].get<double>()));
  }
  const Json& bins = j["sharded_by_gpu_decade"];
  ASSERT_EQ(bins.size(), 3u);
  for (const Json& b : bins) {
    const std::string bin = b["bin"].get<std::string>();
    ASSERT_TRUE(expected.count(bin)) << bin;
    EXPECT_EQ(b["runs"].get<size_t>(), expected[bin].size()) << bin;
    EXPECT_DOUBLE_EQ(b["in_sample_median_abs_error"].get<double>(), Median(expected[bin])) << bin;
    EXPECT_GE(b["in_sample_p90_abs_error"].get<double>(), b["in_sample_median_abs_error"].get<double>());
    EXPECT_GE(b["held_out_p90_abs_error"].get<double>(), b["held_out_median_abs_error"].get<double>());
  }
  const std::string cal = std::string(PARATUNE_SHARED_DIR) + "/calibration/korthikanti2022.json";
  Outcome megatron = Call(RunValidate, {"--calibration", cal});
  ASSERT_EQ(megatron.code, kExitOk) << megatron.err;
  EXPECT_NE(megatron.out.find("no such rows"), std::string::npos);
}

TEST(Presets, ListAndShow) {
  Outcome list = Call(RunPresets, {"--format", "json"});
  ASSERT_EQ(list.code, kExitOk);
  Json j = Json::parse(list.out);
  EXPECT_GE(j["models"].size(), 30u);
  // Every preset file in the source tree is listed, the 2026 fleet included.
  const std::string root = PARATUNE_SOURCE_DIR;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(root + "/topology/presets/clusters")) {
    files += e.path().extension() == ".json";
  }
  EXPECT_EQ(j["clusters"].size(), files);
  std::vector<std::string> names;
  for (const Json& c : j["clusters"]) names.push_back(c.is_string() ? c.get<std::string>() : c.value("name", ""));
  for (const char* want : {"dgx-b200", "gb200-nvl72", "hgx-h800", "mi300x", "dgx-h100"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_EQ(j["frameworks"].size(), 6u);
  Outcome show = Call(RunPresets, {"show", "dgx-h100"});
  ASSERT_EQ(show.code, kExitOk);
  EXPECT_EQ(Json::parse(show.out)["gpus_per_node"], 8);
  EXPECT_EQ(Call(RunPresets, {"show", "nope"}).code, kExitUsage);
}

// The MoE questions asked with no length or batch: DeepSeek-V3 trains as its
// report states (4K tokens, batch 15360, §4.2), Qwen3 at its published 4,096
// tokens with the 4M-token default batch; the first line says where each came
// from, and the plans carry expert parallelism.
TEST(Plan, MoeQuestionsWithoutBatchUseThePublishedPretraining) {
  Outcome ds = Call(RunPlan, {"--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "2048",
                              "--top", "3", "--format", "json"});
  ASSERT_EQ(ds.code, kExitOk) << ds.err;
  Json j = Json::parse(ds.out);
  EXPECT_EQ(j["job"]["training"]["seq_len"], 4096);
  EXPECT_EQ(j["job"]["training"]["global_batch"], 15360);
  ASSERT_FALSE(j["candidates"].empty());
  EXPECT_GT(j["candidates"][0]["config"].value("ep", 1), 1) << j["candidates"][0]["config"].dump();

  Outcome q = Call(RunPlan, {"--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256",
                             "--top", "3"});
  ASSERT_EQ(q.code, kExitOk) << q.err;
  EXPECT_NE(q.out.find("seq 4096 (qwen3-235b-a22b's pretraining length; --seq to choose), global "
                       "batch 1024 (4M tokens, the default where the model states no pretraining "
                       "batch; --global-batch to choose)"),
            std::string::npos)
      << q.out;
  // Stated, neither is annotated.
  Outcome s = Call(RunPlan, {"--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16",
                             "--seq", "4096", "--global-batch", "512", "--top", "1"});
  ASSERT_EQ(s.code, kExitOk) << s.err;
  EXPECT_NE(s.out.find("seq 4096, global batch 512, "), std::string::npos) << s.out;
}

// A pin the search never offers a mixture-of-experts model is a usage error
// that says why; a pin that leaves nothing to search says so.
TEST(Plan, PinsTheSearchNeverOffersAreExplained) {
  Outcome moe = Call(RunPlan, {"--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16",
                               "--fix", "zero=3"});
  EXPECT_EQ(moe.code, kExitUsage);
  EXPECT_NE(moe.err.find("--fix: zero=3: qwen3-30b-a3b is a mixture-of-experts model"),
            std::string::npos)
      << moe.err;
  Outcome none = Call(RunPlan, {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                "--space", "axonn", "--fix", "cp=2"});
  EXPECT_NE(none.out.find("nothing to search: the space offers no configuration with the pinned "
                          "fields (--fix)"),
            std::string::npos)
      << none.out;
  EXPECT_EQ(none.out.find("most common reason"), std::string::npos) << none.out;
}

// The headline names the low-precision recipe a job runs: the one asked for,
// or, for plain fp8, the GPU's default and that it is the default.
TEST(Plan, HeadlineNamesTheFp8Recipe) {
  auto headline = [](const char* precision) {
    Outcome o = Call(RunPlan, {"--model", "qwen3-30b-a3b", "--cluster", "dgx-b200", "--gpus", "8",
                               "--precision", precision, "--top", "1"});
    EXPECT_EQ(o.code, kExitOk) << o.err;
    return o.out.substr(0, o.out.find('\n'));
  };
  const std::string mx = headline("mxfp8");
  EXPECT_EQ(mx.substr(mx.size() - 7), ", mxfp8") << mx;
  const std::string fp8 = headline("fp8");
  EXPECT_NE(fp8.find(", fp8 (" + std::string(topology::RecipeName(
                                      topology::GpuPreset("b200")->fp8_default_recipe)) +
                     ", b200's default recipe)"),
            std::string::npos)
      << fp8;
}

TEST(Plan, DefaultPrecisionIsTheBestTheGpuSupportsAndSaysSo) {
  // V100 has fp16 tensor cores and no bf16: the default must not be bf16.
  const std::string v100 = R"({"model": "gpt3-1.3b", "cluster": {"gpu": "v100-32gb",
    "gpus_per_node": 8, "intra_node_GBps": 130, "inter_node_GBps_per_gpu": 12}, "gpus": 8,
    "training": {"global_batch": 64}})";
  Outcome r = Call(RunPlan, {"--request", "-", "--top", "1"}, v100);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("fp16 (the best v100-32gb supports; --precision to choose)"), std::string::npos)
      << r.out;
  Outcome j = Call(RunPlan, {"--request", "-", "--top", "1", "--format", "json"}, v100);
  ASSERT_EQ(j.code, kExitOk) << j.err;
  EXPECT_NE(j.out.find("\"precision\": \"fp16\""), std::string::npos);
  // Where bf16 exists it stays the default, and an explicit choice is not annotated.
  Outcome h = Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                             "--global-batch", "64", "--top", "1"});
  ASSERT_EQ(h.code, kExitOk) << h.err;
  EXPECT_NE(h.out.find(", bf16 (the best h100"), std::string::npos) << h.out;
  Outcome e = Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                             "--global-batch", "64", "--top", "1", "--precision", "fp16"});
  ASSERT_EQ(e.code, kExitOk) << e.err;
  EXPECT_NE(e.out.find(", fp16\n"), std::string::npos) << e.out;
}

TEST(ExitCodes, OnlyALockedCacheIsTryAgainLater) {
  // A launch that cannot work (more ranks than GPUs) is kInvalidArgument: exit 2,
  // never 75; 75 stays for the cache lock (kFailedPrecondition).
  EXPECT_EQ(ExitCodeFor(Status::InvalidArgument("host n1 runs 2 ranks but has 1 GPUs"), true),
            kExitUsage);
  EXPECT_EQ(ExitCodeFor(Status::FailedPrecondition("locked by n1 pid 7"), true), kExitTempFail);
  EXPECT_EQ(ExitCodeFor(Status::Unavailable("the CUDA backend is unusable"), true),
            kExitMeasureFailed);
}

}  // namespace
}  // namespace paratune::cli
