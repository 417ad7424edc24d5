// One job, one price: every ranked row's configuration text, pasted into
// `predict --config`, prices as the row does; pasted into `plan --fix`, the
// search finds the same row. Unstated knobs are resolved once (scenario/) and
// listed as assumed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli/common.h"
#include "common/json.h"
#include "planner/config.h"
#include "planner/framework.h"
#include "scenario/scenario.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);

struct Question {
  std::string what;
  Args job;    // model, cluster, gpus, training flags
  Args space;  // --space or --framework for the search
};

// Twelve questions: dense and MoE, long context, fp8, every framework family,
// NVIDIA and AMD, three GPU generations.
const std::vector<Question>& Questions() {
  static const std::vector<Question> q = {
      {"llama3-8b, megatron", {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "512"}, {"--space", "megatron"}},
      {"llama3-70b on 256 H100", {"--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq", "8192", "--global-batch", "512"}, {}},
      {"gpt3-175b on 1024 A100", {"--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024", "--global-batch", "1536"}, {"--space", "megatron"}},
      {"mixtral-8x7b, MoE", {"--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "256", "--seq", "4096"}, {"--space", "megatron"}},
      {"qwen3-30b-a3b, MoE", {"--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "128", "--global-batch", "512", "--seq", "4096"}, {}},
      {"llama3-8b at 128K", {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "131072", "--global-batch", "32"}, {"--space", "megatron"}},
      {"llama3-8b, deepspeed", {"--model", "llama3-8b", "--cluster", "dgx-a100-80gb", "--gpus", "32", "--global-batch", "256"}, {"--space", "deepspeed"}},
      {"llama3-8b, fsdp", {"--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32", "--global-batch", "256"}, {"--space", "fsdp"}},
      {"gpt3-13b, axonn", {"--model", "gpt3-13b", "--cluster", "perlmutter", "--gpus", "64", "--global-batch", "512"}, {"--space", "axonn"}},
      {"llama3-70b fp8", {"--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "128", "--global-batch", "256", "--precision", "fp8"}, {"--space", "megatron"}},
      {"llama3-70b on GB200", {"--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "144", "--global-batch", "576"}, {}},
      {"llama2-70b on MI300X", {"--model", "llama2-70b", "--cluster", "mi300x", "--gpus", "64", "--global-batch", "512"}, {}},
  };
  return q;
}

Args Join(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Json PlanJson(const Question& q, const Args& extra = {}) {
  const Outcome r = Call(RunPlan, Join(Join(Join(q.job, q.space), extra), {"--top", "10", "--format", "json"}));
  EXPECT_EQ(r.code, kExitOk) << q.what << "\n" << r.err;
  return r.code == kExitOk ? Json::parse(r.out) : Json();
}

bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

TEST(RoundTrip, EveryRowsTextPredictsTheRowsTime) {
  (void)kNoCache;
  int rows = 0;
  for (const Question& q : Questions()) {
    const Json plans = PlanJson(q);
    ASSERT_TRUE(plans.is_object()) << q.what;
    ASSERT_FALSE(plans["candidates"].empty()) << q.what;
    for (const Json& c : plans["candidates"]) {
      const std::string text = c["config_string"].get<std::string>();
      const Outcome p = Call(RunPredict, Join(q.job, {"--framework", c["framework"].get<std::string>(),
                                                     "--config", text, "--format", "json"}));
      ASSERT_EQ(p.code, kExitOk) << q.what << ": '" << text << "'\n" << p.err;
      const Json pred = Json::parse(p.out);
      const double row = c["prediction"]["iteration_time_s"].get<double>();
      const double again = pred["iteration_time_s"].get<double>();
      EXPECT_TRUE(Near(row, again)) << q.what << ", rank " << c["rank"] << " '" << text
                                    << "': plan " << row << " s, predict " << again << " s";
      EXPECT_EQ(pred["fits"], c["prediction"]["fits"]) << q.what << " " << text;
      ++rows;
    }
  }
  EXPECT_GE(rows, 12 * 3);
}

// The same text pinned with --fix (and the REST fix string) finds the row again.
TEST(RoundTrip, EveryRowsTextPinsTheRow) {
  for (const Question& q : Questions()) {
    const Json plans = PlanJson(q);
    ASSERT_TRUE(plans.is_object()) << q.what;
    const Json& first = plans["candidates"][0];
    const Json pinned = PlanJson(q, {"--fix", first["config_string"].get<std::string>()});
    ASSERT_TRUE(pinned.is_object()) << q.what;
    ASSERT_FALSE(pinned["candidates"].empty()) << q.what << ": pinning '" << first["config_string"] << "'";
    EXPECT_EQ(pinned["candidates"][0]["config"], first["config"]) << q.what;
  }
}

// Every ranked plan of the twelve questions writes the checkpoint its
// framework's format lays out (docs/model.md, "Time to train", with the
// frameworks' sources): mixed-precision Adam is 2 + 12 bytes per parameter in
// Megatron's dist-ckpt, DeepSpeed's files (12 under ZeRO-3: no 16-bit weights)
// and AxoNN's, 4 + 8 in torch DCP (the fp32 shards are the master copy);
// balanced writers (Megatron's fully parallel save, DCP's deduplication) write
// total / N each, DeepSpeed's data-parallel rank 0 adds its model-parallel
// shard's 16-bit weights to its optimizer partition, AxoNN's first replica
// writes everything.
TEST(Goodput, EveryQuestionsPlansWriteTheirFrameworksCheckpoint) {
  int rows = 0;
  for (const Question& q : Questions()) {
    const Json plans = PlanJson(q, {"--tokens", "1T"});
    ASSERT_TRUE(plans.is_object()) << q.what;
    const int gpus = plans["gpus"];
    const bool fp32 = plans["job"]["training"]["precision"] == "fp32" ||
                      plans["job"]["training"]["precision"] == "tf32";
    const double weight = fp32 ? 4 : 2, master = fp32 ? 0 : 4;
    for (const Json& c : plans["candidates"]) {
      SCOPED_TRACE(q.what + ", rank " + std::to_string(c["rank"].get<int>()));
      auto cfg = planner::ParseConfig(c["config"], "/config", gpus);
      ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
      const Json& ck = c["goodput"]["checkpoint"];
      const std::string fw = c["framework"];
      const double params = ck["params"], t = cfg->tensor(), pp = cfg->pp;
      double bytes = 0, max_rank = 0;
      std::string format;
      if (fw == "megatron") {
        format = "megatron_dist_ckpt";
        bytes = weight + master + 8;
        max_rank = params * bytes / gpus;
      } else if (fw == "fsdp" || fw == "torchtitan") {
        format = "torch_dcp";
        bytes = 12;
        max_rank = params * bytes / gpus;
      } else if (fw == "deepspeed" || fw == "megatron-deepspeed") {
        format = "deepspeed";
        const double w = cfg->zero >= 3 ? 0 : weight, opt = master + 8;
        bytes = w + opt;
        max_rank = cfg->zero >= 1 ? w * params / (t * pp) + opt * params / gpus
                                  : bytes * params / (t * pp);
      } else if (fw == "axonn") {
        format = "axonn_torch_save";
        bytes = weight + master + 8;
        max_rank = params * bytes / (t * cfg->gz * pp);
      } else {
        ADD_FAILURE() << "unexpected framework " << fw;
        continue;
      }
      EXPECT_EQ(ck["format"], format);
      EXPECT_DOUBLE_EQ(ck["bytes_per_param"].get<double>(), bytes);
      EXPECT_NEAR(ck["total_GB"].get<double>() * 1e9, params * bytes, 1e-9 * params * bytes);
      EXPECT_NEAR(ck["max_rank_GB"].get<double>() * 1e9, max_rank, 1e-9 * max_rank);
      ++rows;
    }
  }
  EXPECT_GE(rows, 12 * 3);
}

TEST(ConfigText, ReadsTheTablesFormAndTheFlagForm) {
  const auto a = planner::ConfigStringToJson(
      "tp=8 pp=16 vpp=8 emb/loss_layers=1/1 dp=64 cp=2(ring) sp distopt mbs=1 (+3 same)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)["tp"], 8);
  EXPECT_EQ((*a)["pp_embedding_layers"], 1);
  EXPECT_EQ((*a)["pp_loss_layers"], 1);
  EXPECT_EQ((*a)["cp"], 2);
  EXPECT_EQ((*a)["cp_kind"], "ring");
  EXPECT_EQ((*a)["sp"], true);
  EXPECT_EQ((*a)["distributed_optimizer"], true);
  const auto b = planner::ConfigStringToJson("tp=8,pp=16,vpp=8,cp=2,sp=true,mbs=1,recompute=full");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["recompute"], "full");
  const auto moe = planner::ConfigStringToJson("tp=1 pp=4 dp=16 ep=8 edp=2 deepep a2a-overlap stages=3/../5 offload=opt+param rc=selective");
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ((*moe)["moe_dispatcher"], "deepep");
  EXPECT_EQ((*moe)["moe_a2a_overlap"], true);
  EXPECT_EQ((*moe)["first_stage_layers"], 3);
  EXPECT_EQ((*moe)["last_stage_layers"], 5);
  EXPECT_EQ((*moe)["offload_optimizer"], true);
  EXPECT_EQ((*moe)["offload_param"], true);
  EXPECT_EQ((*moe)["recompute"], "selective");
  // Garbage names the piece.
  const auto bad = planner::ConfigStringToJson("tp=8 turbo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'turbo'"), std::string::npos);
  EXPECT_FALSE(planner::ConfigStringToJson("cp=2(ring").ok());
  EXPECT_FALSE(planner::ConfigStringToJson("").ok());
}

// A knob pinned against the framework's policy is written out, so the text still prices the same.
TEST(ConfigText, PolicyDeviationsAreWrittenOut) {
  planner::ParallelConfig c;
  c.gy = 8;
  c.pp = 2;
  c.gdata = 4;
  c.sp = true;
  c.distributed_optimizer = true;
  c = planner::WithFrameworkPolicy(planner::Framework::kMegatron, c);
  EXPECT_EQ(planner::ConfigText(planner::Framework::kMegatron, c), planner::ConfigToString(c));
  c.tp_comm_overlap = !c.tp_comm_overlap;
  const std::string text = planner::ConfigText(planner::Framework::kMegatron, c);
  EXPECT_NE(text.find(std::string("tp_comm_overlap=") + (c.tp_comm_overlap ? "true" : "false")),
            std::string::npos)
      << text;
}

// Predict resolves what the request leaves out, says so, and keeps what it states.
TEST(Scenario, UnstatedKnobsAreResolvedAndListed) {
  Json request = {{"model", "llama3-70b"},
                  {"cluster", "dgx-h100"},
                  {"gpus", 256},
                  {"training", {{"global_batch", 512}}},
                  {"config", {{"tp", 8}, {"pp", 2}, {"sp", true}, {"distributed_optimizer", true},
                              {"mbs", 1}, {"overlap_grad_reduce", false}}}};
  auto s = scenario::ResolvePredict(request);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto assumed = [&](const std::string& key) {
    for (const auto& a : s->assumed)
      if (a.key == key) return true;
    return false;
  };
  EXPECT_TRUE(assumed("/training/seq_len"));
  EXPECT_FALSE(assumed("/training/global_batch"));  // stated
  EXPECT_TRUE(assumed("/config/tp_comm_overlap"));
  EXPECT_FALSE(assumed("/config/overlap_grad_reduce"));  // stated, and kept
  EXPECT_FALSE(s->request.config.overlap_grad_reduce);
  // Megatron overlaps the TP communication of a sequence-parallel layout.
  EXPECT_TRUE(s->request.config.tp_comm_overlap);
  for (const auto& a : s->assumed) EXPECT_FALSE(a.why.empty()) << a.key;
}

// The allocator's segment kind: expandable unless stated, listed as assumed;
// stated fixed segments reserve more for the same allocation, and the
// request's document keeps the statement.
TEST(Scenario, AllocatorSegmentsAreAssumedExpandableUnlessStated) {
  Json request = {{"model", "llama3-70b"},
                  {"cluster", "dgx-h100"},
                  {"gpus", 32},
                  {"training", {{"seq_len", 4096}, {"global_batch", 32}}},
                  {"config",
                   {{"tp", 4},
                    {"pp", 4},
                    {"vpp", 5},
                    {"sp", true},
                    {"distributed_optimizer", true},
                    {"mbs", 1}}}};
  auto expandable = scenario::ResolvePredict(request);
  ASSERT_TRUE(expandable.ok()) << expandable.status().ToString();
  EXPECT_TRUE(expandable->request.job.training.expandable_segments);
  bool listed = false;
  for (const auto& a : expandable->assumed) listed |= a.key == "/training/expandable_segments";
  EXPECT_TRUE(listed);
  EXPECT_FALSE(
      planner::TrainingToJson(expandable->request.job.training).contains("expandable_segments"));
  request["training"]["expandable_segments"] = false;
  auto fixed = scenario::ResolvePredict(request);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_FALSE(fixed->request.job.training.expandable_segments);
  for (const auto& a : fixed->assumed) EXPECT_NE(a.key, "/training/expandable_segments");
  EXPECT_EQ(planner::TrainingToJson(fixed->request.job.training)["expandable_segments"], false);
  auto memory = [](const scenario::Scenario& s) {
    const planner::Job& j = s.request.job;
    return planner::CostModel(j.model, j.training, j.cluster, j.gpus).Memory(s.request.config);
  };
  const planner::MemoryBreakdown a = memory(*expandable), b = memory(*fixed);
  EXPECT_DOUBLE_EQ(a.peak_allocated_GiB, b.peak_allocated_GiB);
  EXPECT_GT(b.reserved_GiB, a.reserved_GiB);
  request["training"]["expandable_segments"] = "yes";
  EXPECT_FALSE(scenario::ResolvePredict(request).ok());
}

// A learned position table shorter than the sequence is priced extended to it,
// and the answer says so; a rotary model has no table to extend.
TEST(Scenario, ExtendedPositionTableIsListed) {
  auto with_table = [](const char* model, int seq) {
    Json request = {{"model", model},
                    {"cluster", "dgx-h100"},
                    {"gpus", 32},
                    {"training", {{"seq_len", seq}, {"global_batch", 16}}},
                    {"config", {{"tp", 1}, {"pp", 1}, {"mbs", 1}}}};
    auto s = scenario::ResolvePredict(request);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return scenario::Assumption{};
    for (const auto& a : s->assumed) {
      if (a.key == "/model/max_seq_len") return a;
    }
    return scenario::Assumption{};
  };
  const scenario::Assumption gpt = with_table("gpt3-6.7b", 8192);
  EXPECT_EQ(gpt.value, 8192);
  // (8192 - 2048) positions of d_model 4096 (Brown et al. 2020, Table 2.1).
  EXPECT_NE(gpt.why.find(std::to_string((8192 - 2048) * 4096) + " parameters more"),
            std::string::npos)
      << gpt.why;
  EXPECT_TRUE(with_table("gpt3-6.7b", 2048).key.empty());
  EXPECT_TRUE(with_table("llama3-8b", 32768).key.empty());
}

// Every document a question returns lists what it assumed.
TEST(Scenario, PlanAndPredictDocumentsCarryAssumed) {
  const Question& q = Questions()[0];
  const Json plans = PlanJson(q);
  ASSERT_TRUE(plans.contains("assumed"));
  EXPECT_FALSE(plans["assumed"].empty());
  const Outcome p = Call(RunPredict, Join(q.job, {"--config", "tp=2,pp=1,mbs=1", "--format", "json"}));
  ASSERT_EQ(p.code, kExitOk) << p.err;
  const Json pred = Json::parse(p.out);
  ASSERT_TRUE(pred.contains("assumed"));
  for (const Json& a : pred["assumed"]) {
    EXPECT_TRUE(a.contains("key") && a.contains("value") && a.contains("why")) << a.dump();
  }
}

// The same hardware as a preset and as the JSON a user types from the spec
// sheet (NVLink 450 GB/s per direction, 400 Gb/s NDR per GPU, "rates":
// "nominal") plans the same pick within 2 %: the nominal rates become
// achievable ones with the efficiencies the presets carry.
TEST(Scenario, APresetAndItsNominalJsonPlanTheSamePick) {
  const std::string path = testing::TempDir() + "/h100-nominal.json";
  {
    std::ofstream f(path);
    f << R"({"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_GBps": 450,
             "inter_node_GBps_per_gpu": 50, "rates": "nominal"})";
  }
  const std::vector<Args> jobs = {
      {"--model", "llama3-70b", "--gpus", "256", "--seq", "8192", "--global-batch", "512"},
      {"--model", "mixtral-8x22b", "--gpus", "256", "--seq", "4096", "--global-batch", "1024"},
      {"--model", "llama3.1-405b", "--gpus", "2048", "--seq", "8192", "--global-batch", "1024"},
  };
  for (const Args& job : jobs) {
    auto first = [&](const std::string& cluster) {
      const Outcome r = Call(RunPlan, Join(job, {"--cluster", cluster, "--top", "1", "--format", "json"}));
      EXPECT_EQ(r.code, kExitOk) << r.err;
      return r.code == kExitOk ? Json::parse(r.out)["candidates"][0] : Json();
    };
    const Json preset = first("dgx-h100"), typed = first(path);
    ASSERT_TRUE(preset.is_object() && typed.is_object()) << job[1];
    EXPECT_EQ(typed["config"], preset["config"]) << job[1];
    const double a = preset["prediction"]["iteration_time_s"].get<double>();
    const double b = typed["prediction"]["iteration_time_s"].get<double>();
    EXPECT_LT(std::abs(a - b) / a, 0.02) << job[1] << ": preset " << a << " s, nominal JSON " << b << " s";
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace paratune::cli
