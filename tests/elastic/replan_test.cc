// Elastic replanning (docs/replan.md): allocations after losing or adding
// nodes, candidates that never need more GPUs or memory than remain, the
// global-batch policy, and the request → document path used by REST.
#include "elastic/replan.h"

#include <gtest/gtest.h>

#include "tests/elastic/running_job.h"

namespace paratune::planner {
namespace {

using elastic_test::RunningConfig;
using elastic_test::RunningJob;

ReplanOptions Lose(int nodes) {
  ReplanOptions o;
  o.lost_nodes = nodes;
  o.search.family = Family::kMegatron;
  o.search.top_k = 20;
  return o;
}

TEST(Replan, AfterLosingNodesNeverNeedsMoreGpusOrMemoryThanRemain) {
  for (int lost : {1, 3, 5}) {
    auto r = Replan(RunningJob(), RunningConfig(), Lose(lost));
    ASSERT_TRUE(r.ok()) << r.status().message();
    const int left = 64 - 8 * lost;
    EXPECT_EQ(r->available_gpus, left);
    ASSERT_FALSE(r->searched.empty());
    EXPECT_EQ(r->searched.front().gpus, left);  // the whole allocation is tried first
    ASSERT_FALSE(r->candidates.empty()) << lost;
    for (const ReplanCandidate& c : r->candidates) {
      EXPECT_LE(c.gpus, left);
      EXPECT_EQ(c.candidate.config.world(), c.gpus);
      EXPECT_EQ(c.global_batch, 256);  // kept by default
      // Re-predict independently on the candidate's GPU count: it fits.
      Job job = RunningJob();
      job.gpus = c.gpus;
      CostModel cm(job.model, job.training, job.cluster, c.gpus);
      ASSERT_EQ(cm.CheckRules(c.candidate.config), Reason::kOk);
      const Prediction p = cm.Predict(c.candidate.config);
      EXPECT_TRUE(p.fits);
      EXPECT_LE(p.memory.total_GiB, p.memory.usable_GiB);
      EXPECT_LE(p.memory.usable_GiB, 80.0);
      EXPECT_NEAR(c.relative_step_time * r->old_prediction.iteration_time_s, p.iteration_time_s,
                  1e-6 * p.iteration_time_s)  // the search sums the same terms in another order
          << ConfigToString(c.candidate.config);
    }
    // Fewer GPUs never make the same batch faster than the running plan here.
    EXPECT_GT(r->candidates.front().relative_step_time, 1.0);
  }
}

TEST(Replan, RankedByThroughputAndRelativeToTheRunningPrediction) {
  auto r = Replan(RunningJob(), RunningConfig(), Lose(1));
  ASSERT_TRUE(r.ok());
  CostModel cm(RunningJob().model, RunningJob().training, RunningJob().cluster, 64);
  EXPECT_DOUBLE_EQ(r->old_prediction.iteration_time_s, cm.Predict(RunningConfig()).iteration_time_s);
  for (size_t i = 1; i < r->candidates.size(); ++i) {
    EXPECT_GE(r->candidates[i - 1].candidate.prediction.tokens_per_s, r->candidates[i].candidate.prediction.tokens_per_s);
  }
}

TEST(Replan, AllocationsByHand) {
  ReplanOptions o = Lose(0);
  o.lost_node_ids = {0, 5};  // ranks 0-7 and 40-47 are gone
  o.reshard_candidate = 0;
  auto r = Replan(RunningJob(), RunningConfig(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lost_nodes, (std::vector<int>{0, 5}));
  EXPECT_EQ(r->available_gpus, 48);
  EXPECT_EQ(r->allocation.new_gpus.front(), 8);
  EXPECT_EQ(r->allocation.new_gpus[32], 48);  // 8..39, then 48..63
  EXPECT_FALSE(r->reshard.has_value());

  ReplanOptions add;
  add.add_nodes = 2;
  add.max_counts = 1;
  add.search.family = Family::kMegatron;
  auto a = Replan(RunningJob(), RunningConfig(), add);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->available_gpus, 80);
  EXPECT_EQ(a->allocation.surviving.size(), 64u);
  EXPECT_EQ(a->allocation.new_gpus.back(), 79);  // new nodes 8 and 9
  ASSERT_TRUE(a->reshard.has_value());
  EXPECT_EQ(static_cast<int>(a->reshard->bytes_per_rank.size()), a->candidates.front().gpus);

  ReplanOptions fewer;
  fewer.gpus = 60;  // ranks 60-63 gone: node 7 is only half there
  fewer.search.family = Family::kMegatron;
  auto f = Replan(RunningJob(), RunningConfig(), fewer);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->available_gpus, 60);
  EXPECT_EQ(f->allocation.surviving.back(), 59);
}

TEST(Replan, RejectsAmbiguousOrEmptyAllocations) {
  ReplanOptions both = Lose(1);
  both.add_nodes = 1;
  EXPECT_FALSE(Replan(RunningJob(), RunningConfig(), both).ok());
  EXPECT_FALSE(Replan(RunningJob(), RunningConfig(), ReplanOptions()).ok());
  EXPECT_FALSE(Replan(RunningJob(), RunningConfig(), Lose(8)).ok());  // nothing left
  ReplanOptions bad = Lose(0);
  bad.lost_node_ids = {8};  // the run has nodes 0-7
  EXPECT_FALSE(Replan(RunningJob(), RunningConfig(), bad).ok());
  ParallelConfig broken = RunningConfig();
  broken.gy = 3;  // 32 heads % 3
  EXPECT_FALSE(Replan(RunningJob(), broken, Lose(1)).ok());
}

// Uneven stages open GPU counts no even split can use: 56 GPUs run Llama 2 7B
// (32 layers) on 7 stages of 3 + 5·5 + 4 layers with the batch kept.
TEST(Replan, UnevenStagesAbsorbAnOddFactor) {
  auto kept = Replan(RunningJob(), RunningConfig(), Lose(1));
  ASSERT_TRUE(kept.ok());
  ASSERT_GT(kept->searched.front().feasible, 0);
  bool uneven = false;
  for (const auto& c : kept->candidates) {
    const ParallelConfig& k = c.candidate.config;
    if (c.gpus == 56 && k.pp % 7 == 0) uneven = uneven || k.first_stage_layers > 0;
  }
  EXPECT_TRUE(uneven);
}

TEST(Replan, GlobalBatchChangesOnlyWhenAllowed) {
  // 56 GPUs: 7 is a factor no tensor/pipeline degree of Llama 2 7B absorbs, and
  // 256 has no factor 7, so with the batch kept nothing fits on 56. Allowed to
  // change, the running block (tp 2 · pp 2 = 4) gives a data width of 14 and a
  // batch of round(256 / 14) · 14 = 252.
  // The pipeline stays at the running 2 stages: uneven stages (pp = 7 with
  // Megatron's first/last counts) would otherwise absorb the 7.
  ReplanOptions same_pp = Lose(1);
  same_pp.search.fixed = {{"pp", "2"}};
  auto kept = Replan(RunningJob(), RunningConfig(), same_pp);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->global_batch_changed);
  EXPECT_EQ(kept->searched.front().feasible, 0);
  ReplanOptions o = same_pp;
  o.allow_global_batch_change = true;
  auto changed = Replan(RunningJob(), RunningConfig(), o);
  ASSERT_TRUE(changed.ok());
  bool tried = false;
  for (const auto& s : changed->searched) tried = tried || (s.gpus == 56 && s.global_batch == 252);
  EXPECT_TRUE(tried);
  ASSERT_FALSE(changed->candidates.empty());
  EXPECT_TRUE(changed->global_batch_changed);
  EXPECT_EQ(changed->candidates.front().gpus, 56);
  EXPECT_EQ(changed->candidates.front().global_batch, 252);
  const OrderedJson doc = ReplanToJson(*changed, o);
  EXPECT_EQ(doc["global_batch_policy"], "allow_change");
  EXPECT_TRUE(doc["candidates"][0]["global_batch_changed"].get<bool>());
  EXPECT_FALSE(doc["warnings"].empty());
}

TEST(Replan, RequestToDocument) {
  Json req = Json::parse(R"({
    "schema": "paratune.replan_request/v1",
    "from": {"model": "llama2-7b", "cluster": "dgx-a100-80gb", "gpus": 64,
             "training": {"seq_len": 4096, "global_batch": 256},
             "config": {"tp": 2, "pp": 2, "distributed_optimizer": true}},
    "lost_nodes": 2, "space": "megatron", "top": 3, "fs_GBps": 100, "fragments_of": 1})");
  auto doc = ReplanDocument(req);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const OrderedJson& d = *doc;
  EXPECT_EQ(d["schema"], kReplanSchema);
  ASSERT_EQ(d["candidates"].size(), 3u);
  for (const auto& c : d["candidates"]) {
    for (const char* k : {"config", "prediction", "relative_step_time", "gpus", "global_batch"}) {
      EXPECT_TRUE(c.contains(k)) << k;
    }
  }
  const auto& rs = d["reshard"];
  const int world = d["candidates"][0]["gpus"].get<int>();
  ASSERT_EQ(static_cast<int>(rs["bytes_per_rank"].size()), world);
  int64_t sum = 0;
  for (const auto& b : rs["bytes_per_rank"]) sum += b.get<int64_t>();
  EXPECT_EQ(sum, rs["total_bytes"].get<int64_t>());
  for (const auto& f : rs["fragments"]) EXPECT_EQ(f["new_rank"], 1);
  EXPECT_EQ(rs["load"]["checkpoint"]["fs_GBps"], 100.0);
  // Every parameter is placed at least once: the bf16 params sum to at least 2 Ψ.
  EXPECT_GE(rs["by_class"].size(), 5u);
  int64_t params = 0;
  for (const auto& row : rs["by_class"]) params += row["param_bytes"].get<int64_t>();
  EXPECT_GE(params, 2 * ModelPreset("llama2-7b")->ParamCount());

  Json bad = req;
  bad["lost_nodez"] = 1;
  auto e = ReplanDocument(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("/lost_nodez"), std::string::npos) << e.status().message();
}

// The routed experts of a replan: nothing moves when the layout is unchanged;
// each MoE layer's parameters are counted once per expert-data replica; a
// layer that changes pipeline stage is read whole.
TEST(Replan, ExpertMoveCountsEveryReplicaAndKeepsWhatStays) {
  const ModelSpec m = *ModelPreset("qwen3-30b-a3b");
  ParallelConfig a;
  a.gdata = 64;
  a.ep = 8;
  a.distributed_optimizer = true;
  const topology::ClusterSpec cluster = *topology::ClusterPreset("dgx-h100");
  auto same = PlanExpertMove(m, a, a, topology::Precision::kBf16, cluster);
  ASSERT_TRUE(same.ok()) << same.status().message();
  const int64_t per_layer = int64_t{m.experts} * m.ExpertParams();
  EXPECT_EQ(same->moe_layers, m.moe_layer_count());
  EXPECT_EQ(same->from.edp, 8);  // 64 ranks of one stage over ep 8
  EXPECT_EQ(same->params_needed, m.moe_layer_count() * per_layer * 8);
  EXPECT_EQ(same->params_kept, same->params_needed);
  EXPECT_EQ(same->params_moved, 0);
  EXPECT_EQ(same->bytes_moved, 0.0);
  EXPECT_EQ(same->cross_node_s, 0.0);
  // To 56 GPUs on 7 stages of 8 ranks (EP 8, one replica): the 48 layers split
  // 7 + 7 + ... ; only stage 0's layers stay on a stage of the same index.
  ParallelConfig b;
  b.pp = 7;
  b.gdata = 8;
  b.ep = 8;
  b.distributed_optimizer = true;
  auto move = PlanExpertMove(m, a, b, topology::Precision::kBf16, cluster);
  ASSERT_TRUE(move.ok()) << move.status().message();
  EXPECT_EQ(move->to.edp, 1);
  EXPECT_EQ(move->params_needed, m.moe_layer_count() * per_layer);
  auto stages = SplitLayers(m.layers, 7);
  ASSERT_TRUE(stages.ok());
  EXPECT_EQ(move->layers_changing_stage, m.layers - stages->front());
  // Stage 0's layers keep each rank's own eighth of the experts (same EP).
  EXPECT_EQ(move->params_kept, int64_t{stages->front()} * per_layer);
  // Moved weights in bf16, with fp32 master, m and v (one replica: not split).
  EXPECT_DOUBLE_EQ(move->bytes_moved, static_cast<double>(move->params_moved) * (2 + 12));
  // Never faster than the moved bytes over the 7 new nodes' injection bandwidth.
  EXPECT_GE(move->cross_node_s, move->bytes_moved / (7 * cluster.NodeInjectionGBps() * 1e9));
  // A dense model's replan has no experts.
  Json req = Json::parse(R"({
    "from": {"model": "llama2-7b", "cluster": "dgx-a100-80gb", "gpus": 16,
             "training": {"seq_len": 4096, "global_batch": 64}, "config": {"tp": 2}},
    "lost_nodes": 1, "space": "megatron", "top": 1})");
  auto doc = ReplanDocument(req);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_TRUE((*doc)["experts"].is_null());
  // Under FSDP2 (torchtitan shards the experts over efsdp) the move is not
  // mapped, and the document says so.
  Json tt = Json::parse(R"({
    "from": {"model": "qwen3-30b-a3b", "cluster": "dgx-h100", "gpus": 64,
             "training": {"seq_len": 4096, "global_batch": 1024, "framework": "torchtitan"},
             "config": {"gz": 32, "dp": 2, "ep": 8, "mbs": 2}},
    "lost_nodes": 1, "space": "fsdp", "top": 1})");
  auto fsdp = ReplanDocument(tt);
  ASSERT_TRUE(fsdp.ok()) << fsdp.status().message();
  EXPECT_FALSE((*fsdp)["reshard"].is_null());
  EXPECT_TRUE((*fsdp)["experts"].is_null());
  bool warned = false;
  for (const auto& w : (*fsdp)["warnings"]) {
    warned |= w.get<std::string>().find("routed experts' move is not mapped") != std::string::npos;
  }
  EXPECT_TRUE(warned) << (*fsdp)["warnings"].dump();
}

}  // namespace
}  // namespace paratune::planner
