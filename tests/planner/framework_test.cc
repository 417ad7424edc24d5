// Tests of the training stack as an input: framework presets,
// uneven pipeline stages, ranking people can trust (equivalent configurations
// collapse, the simpler leader first, the band), lossy options behind a flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/embedded.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "tests/planner/test_jobs.h"

namespace paratune {
const std::vector<EmbeddedPreset>& EmbeddedPresets_frameworks();
}  // namespace paratune

namespace paratune::planner {
namespace {

using testing::CostModelOf;
using testing::MakeJob;

TEST(Framework, EveryPresetLoadsAndCitesItsCosts) {
  for (Framework f : AllFrameworks()) {
    const FrameworkSpec& spec = FrameworkPreset(f);
    SCOPED_TRACE(FrameworkName(f));
    EXPECT_EQ(spec.name, FrameworkName(f));
    EXPECT_FALSE(spec.source.empty());
    for (const char* key : {"supports", "elementwise_traffic", "loss_bytes_per_logit",
                            "loss_live_bytes_per_logit", "kernels_per_layer", "host_us_per_layer",
                            "attention_efficiency", "shard_overlap", "uncertainty"}) {
      EXPECT_TRUE(spec.sources.count(key)) << key;
    }
    EXPECT_FALSE(spec.support.placements.empty());
    EXPECT_EQ(*ParseFramework(FrameworkName(f)), f);
  }
  EXPECT_FALSE(ParseFramework("jax").ok());
}

// A framework file may state version limits of its interleaved schedule and
// gradient-reduce overlap; bad values name their field.
TEST(Framework, VersionLimitsParseAndBind) {
  Json j;
  for (const EmbeddedPreset& p : EmbeddedPresets_frameworks()) {
    if (p.name == "megatron") j = Json::parse(p.text);
  }
  ASSERT_FALSE(j.is_null());
  j["supports"]["vpp_min_pp"] = 1;
  auto bad = ParseFrameworkSpec(j, "/framework");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/framework/supports/vpp_min_pp"), std::string::npos)
      << bad.status().message();
  j["supports"]["vpp_min_pp"] = 3;
  j["supports"]["overlap_grad_reduce_with_pp"] = false;
  auto spec = ParseFrameworkSpec(j, "/framework");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->support.vpp_min_pp, 3);
  EXPECT_FALSE(spec->support.overlap_grad_reduce_with_pp);
  EXPECT_EQ(FrameworkPreset(Framework::kMegatron).support.vpp_min_pp, 2);

  const Job job = MakeJob("gpt3-13b", "dgx-a100-80gb", 64, 512, 2048);
  CostModel cm(job.model, job.training, job.cluster, job.gpus, *spec);
  ParallelConfig c{.gy = 4, .gdata = 8, .pp = 2, .vpp = 2, .sp = true};
  EXPECT_NE(std::string(cm.UnsupportedWhy(c)).find("pp"), std::string::npos);
  c.vpp = 1;
  c.overlap_grad_reduce = true;
  EXPECT_NE(std::string(cm.UnsupportedWhy(c)).find("overlap_grad_reduce"), std::string::npos);
  // The search never turns the overlap on where the framework cannot run it.
  SearchOptions o;
  o.top_k = 5;
  for (const Candidate& cand : Search(cm, o).RunAll().top) {
    EXPECT_TRUE(cand.config.pp == 1 || !cand.config.overlap_grad_reduce) << ConfigToString(cand.config);
    EXPECT_TRUE(cand.config.vpp == 1 || cand.config.pp >= 3) << ConfigToString(cand.config);
  }
}

// The deduplicating dispatchers' NIC fractions: an ascending node count, a
// fraction in (0, 1]; a bad point names its place.
TEST(Framework, DedupNicFractionParses) {
  Json j;
  for (const EmbeddedPreset& p : EmbeddedPresets_frameworks()) {
    if (p.name == "megatron") j = Json::parse(p.text);
  }
  ASSERT_FALSE(j.is_null());
  Json& t = j["costs"]["dedup_nic_fraction"];
  ASSERT_TRUE(t.is_array());
  t[1]["nodes"] = 2;  // not ascending
  auto bad = ParseFrameworkSpec(j, "/framework");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/framework/costs/dedup_nic_fraction/1/nodes"),
            std::string::npos)
      << bad.status().message();
  t[1]["nodes"] = 4;
  t[0]["fraction"] = 1.5;
  bad = ParseFrameworkSpec(j, "/framework");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/framework/costs/dedup_nic_fraction/0/fraction"),
            std::string::npos)
      << bad.status().message();
  t = Json::array();
  auto none = ParseFrameworkSpec(j, "/framework");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(DedupNicFraction(none->costs, 4), 0.0);
}

// Feature bands: a known feature with a fraction in [0, 1]; anything else is
// refused with its place.
TEST(Framework, FeatureUncertaintyParses) {
  Json j;
  for (const EmbeddedPreset& p : EmbeddedPresets_frameworks()) {
    if (p.name == "megatron") j = Json::parse(p.text);
  }
  ASSERT_FALSE(j.is_null());
  j["feature_uncertainty"] = Json{{"dedup_dispatch_across_domains", 0.3}};
  auto spec = ParseFrameworkSpec(j, "/framework");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_DOUBLE_EQ(spec->dedup_across_domains_uncertainty, 0.3);
  j["feature_uncertainty"] = Json{{"deepep", 0.3}};
  auto bad = ParseFrameworkSpec(j, "/framework");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/framework/feature_uncertainty"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("dedup_dispatch_across_domains"), std::string::npos);
  j["feature_uncertainty"] = Json{{"dedup_dispatch_across_domains", -0.1}};
  EXPECT_FALSE(ParseFrameworkSpec(j, "/framework").ok());
  j.erase("feature_uncertainty");
  auto none = ParseFrameworkSpec(j, "/framework");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->dedup_across_domains_uncertainty, 0.0);
}

// The same configuration runs slower in an eager PyTorch stack than in
// Megatron-Core with Transformer Engine (unfused element-wise kernels, host
// dispatch, upcast loss), and torch.compile wins part of it back.
TEST(Framework, EagerStacksAreSlowerAndCompileHelps) {
  Job mj = MakeJob("gpt3-350m", "dgx-h100", 8, 64, 2048, Framework::kMegatron);
  Job tj = MakeJob("gpt3-350m", "dgx-h100", 8, 64, 2048, Framework::kTorchtitan);
  ParallelConfig c;
  c.gdata = 8;
  c.mbs = 8;
  const Prediction pm = CostModelOf(mj).Predict(c);
  const Prediction pt = CostModelOf(tj).Predict(c);
  EXPECT_GT(pt.iteration_time_s, pm.iteration_time_s);
  tj.training.compile = true;
  const Prediction pc = CostModelOf(tj).Predict(c);
  EXPECT_LT(pc.iteration_time_s, pt.iteration_time_s);
  EXPECT_GE(pc.iteration_time_s, pm.iteration_time_s * 0.99);
}

// A layer too small to keep the GPU busy waits for the host to issue it.
TEST(Framework, TinyLayersAreHostBound) {
  Job j = MakeJob("gpt3-125m", "dgx-h100", 8, 8, 512, Framework::kFsdp);
  ParallelConfig c;
  c.gz = 8;
  c.mbs = 1;
  c.oag = c.ors = true;
  const Prediction p = CostModelOf(j).Predict(c);
  EXPECT_GT(p.breakdown.host_s, 0.0);
  Job big = MakeJob("gpt3-2.7b", "dgx-h100", 8, 64, 2048, Framework::kFsdp);
  c.mbs = 8;
  EXPECT_EQ(CostModelOf(big).Predict(c).breakdown.host_s, 0.0);
}

TEST(Framework, RulesNameTheFramework) {
  const CostModel cm =
      CostModelOf(MakeJob("llama2-7b", "dgx-a100-80gb", 16, 64, 4096, Framework::kFsdp));
  const ParallelConfig c{.gy = 2, .gdata = 8};
  EXPECT_EQ(cm.CheckRules(c), Reason::kFrameworkUnsupported);
  EXPECT_NE(cm.Explain(Reason::kFrameworkUnsupported, c).find("fsdp"), std::string::npos);
  EXPECT_EQ(std::string(ReasonField(Reason::kFrameworkUnsupported)), "/training/framework");
}

// Megatron's --decoder-first/last-pipeline-num-layers: the stages in between
// share the rest evenly (megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build). Llama 3.1 405B: 126 layers.
TEST(UnevenStages, MegatronFirstAndLastStageCounts) {
  ParallelConfig c;
  c.pp = 16;
  c.first_stage_layers = 7;
  c.last_stage_layers = 7;
  StageLayers s = SplitLayers(126, c, PpSplit::kMegatron);
  EXPECT_EQ(s.first, 7);
  EXPECT_EQ(s.middle, 8);  // (126 - 14) / 14
  EXPECT_EQ(s.last, 7);
  EXPECT_EQ(s.max, 8);
  EXPECT_FALSE(s.even);
  // Only the first stage given: the other 15 share 126 - 6 = 120.
  c.last_stage_layers = 0;
  c.first_stage_layers = 6;
  s = SplitLayers(126, c, PpSplit::kMegatron);
  EXPECT_EQ(s.first, 6);
  EXPECT_EQ(s.middle, 8);
  EXPECT_EQ(s.last, 8);

  const CostModel cm = CostModelOf(MakeJob("llama3.1-405b", "dgx-h100", 2048, 512, 8192));
  ParallelConfig p;
  p.gy = 8;
  p.pp = 16;
  p.gdata = 16;
  p.sp = true;
  EXPECT_EQ(cm.CheckRules(p), Reason::kLayersNotDivisible);  // Megatron needs the counts
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  EXPECT_EQ(cm.CheckRules(p), Reason::kOk);
  p.first_stage_layers = 5;  // 126 - 12 = 114 is not a multiple of 14 middle stages
  p.last_stage_layers = 7;
  EXPECT_EQ(cm.CheckRules(p), Reason::kLayersNotDivisible);
}

// Frameworks without explicit counts split as evenly as possible, the first
// stages taking the remainder: 70 layers on 12 stages = 10 × 6 + 2 × 5.
TEST(UnevenStages, EvenAsPossibleAndTheSlowestStageGoverns) {
  ParallelConfig c;
  c.pp = 12;
  const StageLayers s = SplitLayers(70, c, PpSplit::kBalanced);
  EXPECT_EQ(s.first, 6);
  EXPECT_EQ(s.last, 5);
  EXPECT_EQ(s.max, 6);

  Job j = MakeJob("llama2-70b", "dgx-h100", 96, 96, 4096, Framework::kTorchtitan);
  j.model.layers = 78;  // 78 layers over 8 stages: 6 stages of 10, 2 of 9
  const CostModel cm = CostModelOf(j);
  ParallelConfig p;
  p.gy = 4;
  p.sp = true;
  p.pp = 8;
  p.gdata = 3;
  ASSERT_EQ(cm.CheckRules(p), Reason::kOk);
  const Prediction uneven = cm.Predict(p);
  Job even_job = j;
  even_job.model.layers = 80;  // 10 per stage everywhere
  const Prediction even = CostModelOf(even_job).Predict(p);
  // The slowest stage holds 10 layers in both: the steady state is the same
  // length, and the 78-layer model has less bubble work at most.
  EXPECT_LE(uneven.iteration_time_s, even.iteration_time_s);
  EXPECT_GT(uneven.iteration_time_s, even.iteration_time_s * 0.97);
}

// The search offers uneven stages where the framework runs them.
TEST(UnevenStages, SearchCoversThem) {
  const CostModel cm = CostModelOf(MakeJob("llama3.1-405b", "dgx-h100", 2048, 512, 8192));
  SearchOptions opt;
  opt.fixed = {{"tp", "8"}, {"pp", "16"}};
  SearchResult r = Search(cm, opt).RunAll();
  ASSERT_FALSE(r.top.empty());
  // 7 + 14 x 8 + 7, stated as first/last counts or by counting the embedding
  // and the loss as layers ((126 + 2) / 16 = 8): the same split, priced alike.
  const StageLayers st = cm.Stages(r.top.front().config);
  EXPECT_EQ(st.first, 7);
  EXPECT_EQ(st.middle, 8);
  EXPECT_EQ(st.last, 7);
  opt.fixed.push_back({"first_stage_layers", "7"});
  const SearchResult pinned = Search(cm, opt).RunAll();
  ASSERT_FALSE(pinned.top.empty());
  EXPECT_EQ(pinned.top.front().config.last_stage_layers, 7);
  // Stated counts of 7 divide into no virtual stages; the counted embedding and
  // loss (8 per rank) do, so the free search is at least as fast.
  EXPECT_EQ(pinned.top.front().config.vpp, 1);
  EXPECT_GE(pinned.top.front().prediction.iteration_time_s, r.top.front().prediction.iteration_time_s);
}

TEST(Ranking, IdenticalPredictionsCollapseIntoOneRow) {
  const CostModel cm = CostModelOf(MakeJob("gpt3-2.7b", "dgx-a100-80gb", 16, 64, 2048));
  ParallelConfig a;
  a.gy = 2;
  a.gdata = 8;
  a.mbs = 2;
  ParallelConfig b = a;  // pp = 1: swapping pp and data in the order changes no stride
  b.placement = *ParsePlacement("x-y-cp-z-pp-data");
  ParallelConfig other = a;
  other.recompute = Recompute::kFull;
  std::vector<Candidate> top = {{a, cm.Predict(a), Framework::kMegatron},
                                {b, cm.Predict(b), Framework::kMegatron},
                                {other, cm.Predict(other), Framework::kMegatron}};
  const std::vector<RankedPlan> rows = RankForTrust(top, Objective::kTime, 10);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].alternatives.size(), 1u);
  EXPECT_EQ(rows[0].alternatives[0], b);
}

// Inside the winner's band the simpler configuration ranks first; outside it
// time decides.
TEST(Ranking, SimplerLeaderFirstWithinTheBand) {
  Prediction fast, close, far;
  fast.iteration_time_s = 1.00;
  fast.uncertainty = 0.05;
  close.iteration_time_s = 1.03;
  far.iteration_time_s = 1.20;
  fast.memory.reserved_GiB = 1;
  close.memory.reserved_GiB = 2;
  far.memory.reserved_GiB = 3;
  // The search hands them over ranked by the pessimistic edge.
  for (Prediction* p : {&fast, &close, &far}) {
    p->uncertainty = 0.05;
    p->pessimistic_time_s = p->iteration_time_s * (1 + p->uncertainty);
  }
  ParallelConfig complex;  // tp + pp + interleaving + cp
  complex.gy = 2;
  complex.pp = 2;
  complex.vpp = 2;
  complex.cp = 2;
  ParallelConfig simple;  // data parallel only
  ParallelConfig simplest_far;
  const std::vector<RankedPlan> rows = RankForTrust({{complex, fast, Framework::kMegatron},
                                                     {simple, close, Framework::kMegatron},
                                                     {simplest_far, far, Framework::kFsdp}},
                                                    Objective::kTime, 10);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].best.config, simple);
  EXPECT_TRUE(rows[0].within_band);
  EXPECT_EQ(rows[1].best.config, complex);
  EXPECT_FALSE(rows[2].within_band);
  EXPECT_LT(Complexity(simple, FrameworkPreset(Framework::kMegatron)),
            Complexity(complex, FrameworkPreset(Framework::kMegatron)));
}

// A row ranked above a faster one says why, naming the faster row by its rank
// in the whole ranking: inside the band the simpler configuration (what the
// faster one adds, in Complexity's terms), outside it the pessimistic edge (a
// narrower band), under the memory objective the memory. A row with no faster
// row below it carries no note.
TEST(Ranking, ARowAboveAFasterOneSaysWhy) {
  auto predicted = [](double time, double band, double reserved) {
    Prediction p;
    p.iteration_time_s = time;
    p.uncertainty = band;
    p.pessimistic_time_s = time * (1 + band);
    p.memory.reserved_GiB = reserved;
    return p;
  };
  ParallelConfig complex;  // tp + interleaved pp
  complex.gy = 2;
  complex.pp = 2;
  complex.vpp = 2;
  ParallelConfig simple;  // data parallel only
  ParallelConfig narrow, wide;  // outside the band: a narrow band ahead of a faster, wider one
  narrow.mbs = 2;
  wide.mbs = 4;
  // In the order the search hands them over: by the pessimistic edge.
  const std::vector<Candidate> pool = {{complex, predicted(1.00, 0.05, 3), Framework::kMegatron},
                                       {simple, predicted(1.03, 0.05, 4), Framework::kMegatron},
                                       {narrow, predicted(1.20, 0.02, 1), Framework::kMegatron},
                                       {wide, predicted(1.15, 0.10, 2), Framework::kMegatron}};
  const std::vector<RankedPlan> rows = RankForTrust(pool, Objective::kTime, 10);
  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(rows[0].best.config, simple);
  EXPECT_EQ(rows[0].faster_rank, 2);
  EXPECT_DOUBLE_EQ(rows[0].faster_time_s, 1.00);
  EXPECT_EQ(rows[0].rank_note.rfind("simpler than #2 (", 0), 0u) << rows[0].rank_note;
  for (const char* part : {"no tp", "no pp", "no interleaving", "slower", "band"}) {
    EXPECT_NE(rows[0].rank_note.find(part), std::string::npos) << part << ": " << rows[0].rank_note;
  }
  EXPECT_EQ(rows[1].faster_rank, 0);  // the fastest
  EXPECT_TRUE(rows[1].rank_note.empty()) << rows[1].rank_note;
  ASSERT_EQ(rows[2].best.config, narrow);
  EXPECT_EQ(rows[2].faster_rank, 4);
  EXPECT_EQ(rows[2].rank_note.rfind("pessimistic edge ", 0), 0u) << rows[2].rank_note;
  EXPECT_NE(rows[2].rank_note.find("#4"), std::string::npos) << rows[2].rank_note;
  EXPECT_TRUE(rows[3].rank_note.empty());
  // Cut to one row, the note still names the faster row's rank in the whole ranking.
  const std::vector<RankedPlan> first = RankForTrust(pool, Objective::kTime, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].rank_note, rows[0].rank_note);
  // Ranked by memory, the leaner row ahead of a faster one says so.
  std::vector<Candidate> by_memory = pool;
  std::sort(by_memory.begin(), by_memory.end(), [](const Candidate& a, const Candidate& b) {
    return a.prediction.memory.reserved_GiB < b.prediction.memory.reserved_GiB;
  });
  const std::vector<RankedPlan> lean = RankForTrust(by_memory, Objective::kMemory, 10);
  EXPECT_EQ(lean[0].rank_note.rfind("less memory than #", 0), 0u) << lean[0].rank_note;
  EXPECT_TRUE(lean[2].rank_note.empty()) << lean[2].rank_note;  // the fastest
}

// The plan's rows do not depend on how many are asked for: ranking, the
// band's preference for simpler configurations and the collapse of identical
// predictions happen on the whole space, and `top` only cuts the list. So the
// rows for any top are the first rows for a larger one, and #1 is the
// simplest configuration (then the fastest) within the band of the fastest
// in the whole space, found here by keeping every fitting configuration.
TEST(Ranking, RowsDoNotDependOnHowManyAreAskedFor) {
  struct Case {
    const char* model;
    const char* cluster;
    int gpus;
    int64_t batch;
    int seq;
    Family family;
    Objective objective;
  };
  const Case cases[] = {
      {"llama3-8b", "dgx-h100", 64, 512, 8192, Family::kAll, Objective::kTime},
      {"llama3-70b", "dgx-h100", 256, 512, 4096, Family::kMegatron, Objective::kTime},
      {"gpt3-2.7b", "dgx-a100-80gb", 16, 64, 2048, Family::kAll, Objective::kTokensPerS},
      {"gpt3-1.3b", "dgx-h100", 8, 64, 2048, Family::kAll, Objective::kMemory},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.model) + " on " + std::to_string(k.gpus) + " " + k.cluster + ", " +
                 ObjectiveName(k.objective));
    planner::Job job;
    job.model = *ModelPreset(k.model);
    job.cluster = *topology::ClusterPreset(k.cluster);
    job.gpus = k.gpus;
    job.training.global_batch = k.batch;
    job.training.seq_len = k.seq;
    auto space = ModelsForSpace(job, k.family, true, false);
    ASSERT_TRUE(space.ok());
    auto rows_for = [&](int top) {
      SearchOptions opt;
      opt.family = k.family;
      opt.objective = k.objective;
      opt.top_k = top;
      PlanSection sec{job, Search(space->Pointers(), opt).RunAll(), 0, {}};
      const OrderedJson doc = PlansToJson({sec}, opt);
      std::vector<std::string> rows;
      for (const auto& c : doc["candidates"]) {
        std::string alts;
        for (const auto& a : c["alternatives"]) alts += " | " + a.get<std::string>();
        rows.push_back(c["framework"].get<std::string>() + " " +
                       c["config_string"].get<std::string>() +
                       (c["within_band"].get<bool>() ? " (band)" : "") + alts);
      }
      return rows;
    };
    const std::vector<std::string> many = rows_for(100);
    ASSERT_GE(many.size(), 50u);
    for (int top : {1, 3, 10, 20, 50}) {
      const std::vector<std::string> few = rows_for(top);
      ASSERT_EQ(few.size(), static_cast<size_t>(top)) << "top " << top;
      for (int i = 0; i < top; ++i)
        EXPECT_EQ(few[i], many[i]) << "top " << top << ", row " << i + 1;
    }
    if (k.objective == Objective::kMemory) continue;
    // #1 from every fitting configuration, kept whole.
    SearchOptions all;
    all.family = k.family;
    all.objective = k.objective;
    all.top_k = 1 << 30;
    Search whole(space->Pointers(), all);
    const SearchResult r = whole.RunAll();
    ASSERT_EQ(r.top.size(), static_cast<size_t>(r.feasible));
    const Candidate& fastest = r.top.front();
    const double limit = fastest.prediction.iteration_time_s * (1 + fastest.prediction.uncertainty);
    // Rows: a configuration whose prediction is its row's first one's joins it.
    const Candidate* pick = nullptr;
    const Candidate* row = nullptr;
    int pick_complexity = 0;
    for (const Candidate& c : r.top) {  // best first
      if (row && SamePrediction(*row, c)) continue;
      row = &c;
      if (c.prediction.iteration_time_s > limit) break;
      const int cx = Complexity(c.config, FrameworkPreset(c.framework));
      if (!pick || cx < pick_complexity) {
        pick = &c;
        pick_complexity = cx;
      }
    }
    ASSERT_NE(pick, nullptr);
    EXPECT_EQ(many[0].substr(0, many[0].find(" (band)")),
              std::string(FrameworkName(pick->framework)) + " " + ConfigToString(pick->config));
  }
}

TEST(Ranking, TheBandWidensWithResiduals) {
  Job j = MakeJob("gpt3-2.7b", "dgx-a100-80gb", 16, 64, 2048);
  ParallelConfig c;
  c.gdata = 16;
  c.mbs = 4;
  const Prediction p = CostModelOf(j).Predict(c);
  const double base = p.uncertainty;
  // The framework's residual on the GPU, widened by the job's distance from
  // the calibrated evidence (a 2.7B model: smaller than any calibration row).
  EXPECT_GT(p.evidence_steps, 0);
  EXPECT_NEAR(base,
              std::hypot(FrameworkPreset(Framework::kMegatron).Uncertainty("a100-80gb"),
                         kBandPerEvidenceStep * p.evidence_steps),
              1e-12);
  j.cluster.corrections.residual = 0.2;  // a calibration that left 20 % unexplained
  const double wide = CostModelOf(j).Predict(c).uncertainty;
  EXPECT_GT(wide, base);
  EXPECT_GE(wide, 0.2);
  // A framework with no public runs to calibrate on carries a wider band than megatron.
  EXPECT_GT(FrameworkPreset(Framework::kTorchtitan).Uncertainty("h100-sxm"),
            FrameworkPreset(Framework::kMegatron).Uncertainty("h100-sxm"));
}

// ZeRO++'s quantized collectives change the numerics: never offered unless
// asked for (ZeRO++ paper's setting: 384 V100s, 100 Gb/s between nodes).
TEST(Ranking, LossyOptionsNeedTheFlag) {
  Job j = MakeJob("gpt3-13b", "dgx-a100-80gb", 64, 512, 2048, Framework::kMegatronDeepSpeed);
  j.cluster.nic_GBps = 1.5;  // a slow network, where quantization pays
  const CostModel cm = CostModelOf(j);
  SearchOptions opt;
  opt.fixed = {{"zero", "3"}};
  opt.top_k = 200;
  SearchResult plain = Search(cm, opt).RunAll();
  ASSERT_FALSE(plain.top.empty());
  for (const Candidate& c : plain.top) EXPECT_FALSE(c.config.qwz || c.config.qgz) << ConfigToString(c.config);
  opt.allow_lossy = true;
  SearchResult lossy = Search(cm, opt).RunAll();
  ASSERT_FALSE(lossy.top.empty());
  EXPECT_TRUE(lossy.top.front().config.qwz || lossy.top.front().config.qgz)
      << ConfigToString(lossy.top.front().config);
}

}  // namespace
}  // namespace paratune::planner
