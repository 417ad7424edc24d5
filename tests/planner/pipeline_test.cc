// Pipeline layouts (planner/pipeline.h), the frameworks' start-up rules in
// their presets (planner/framework.h) and pinning every config key.
//
// The expected splits are what the frameworks' own code returns for these
// layouts (Megatron-Core's get_num_layers_to_build at Megatron-LM d98e8a6,
// torchtitan's _generate_llm_fqn_per_model_part at b5bcd76, both run on
// these inputs), and Meta's published Llama 3.1 405B recipe layouts.
#include "planner/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "tests/planner/test_jobs.h"

namespace paratune::planner {
namespace {

using testing::CostModelOf;
using testing::MakeJob;

ParallelConfig Pipe(int pp, int vpp, int first = 0, int last = 0, int emb = 0, int loss = 0) {
  return ParallelConfig{.pp = pp,
                        .vpp = vpp,
                        .first_stage_layers = first,
                        .last_stage_layers = last,
                        .pp_embedding_layers = emb,
                        .pp_loss_layers = loss};
}

std::vector<int> Chunks(int layers, const ParallelConfig& c, PpSplit s) {
  std::vector<int> v;
  for (int k = 0; k < c.pp * c.vpp; ++k) v.push_back(ChunkLayers(layers, c, s, k));
  return v;
}

TEST(Pipeline, MegatronCountsEmbeddingAndLossAsStages) {
  // Llama 3.1 405B, 126 layers, pp 8 x vp 8 with --account-for-embedding/loss:
  // (126 + 2) / 8 = 16 per rank, 2 per chunk; rank 0's first chunk and rank
  // 7's last chunk build one layer each (Megatron-Core returns exactly this).
  const ParallelConfig c = Pipe(8, 8, 0, 0, 1, 1);
  ASSERT_EQ(PipelineLayoutError(126, c, PpSplit::kMegatron), "");
  const std::vector<int> chunks = Chunks(126, c, PpSplit::kMegatron);
  ASSERT_EQ(chunks.size(), 64u);
  EXPECT_EQ(chunks.front(), 1);
  EXPECT_EQ(chunks.back(), 1);
  EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), 0), 126);
  for (size_t k = 1; k + 1 < chunks.size(); ++k) EXPECT_EQ(chunks[k], 2) << k;
  const StageLayers st = SplitLayers(126, c, PpSplit::kMegatron);
  EXPECT_EQ(st.first, 15);
  EXPECT_EQ(st.middle, 16);
  EXPECT_EQ(st.last, 15);
  EXPECT_FALSE(st.even);
  // Without the accounting, 126 layers do not split over 64 chunks.
  EXPECT_NE(PipelineLayoutError(126, Pipe(8, 8), PpSplit::kMegatron), "");
}

TEST(Pipeline, MegatronFirstAndLastStages) {
  // 126 layers on 16 stages, 7 + 14 x 8 + 7 (Meta's 405B recipe at pp 16).
  const ParallelConfig c = Pipe(16, 1, 7, 7);
  ASSERT_EQ(PipelineLayoutError(126, c, PpSplit::kMegatron), "");
  const StageLayers st = SplitLayers(126, c, PpSplit::kMegatron);
  EXPECT_EQ(st.first, 7);
  EXPECT_EQ(st.middle, 8);
  EXPECT_EQ(st.last, 7);
  EXPECT_EQ(st.max, 8);
  // transformer_config.py:2229-2239: not together with the accounting.
  EXPECT_NE(PipelineLayoutError(126, Pipe(16, 1, 7, 7, 1, 0), PpSplit::kMegatron).find("2229"),
            std::string::npos);
  // :2302-2336: with vpp the first/last counts divide into chunks (7 does not into 2).
  EXPECT_NE(PipelineLayoutError(126, Pipe(16, 2, 7, 7), PpSplit::kMegatron), "");
  // :2346-2352: the middle stages must share the rest evenly.
  EXPECT_NE(PipelineLayoutError(126, Pipe(16, 1, 6, 7), PpSplit::kMegatron), "");
}

// Megatron-Core's explicit layout (--pipeline-model-parallel-layout): its own
// docstring example and the strings Megatron-Bridge's DeepSeek-V3 recipes and
// run scripts write (recipes/deepseek/deepseek_v3.py:68-76 @v0.5.0;
// scripts/performance/run_script.py:66 @r0.1.0).
TEST(Pipeline, MegatronLayoutStrings) {
  // PP 4 x VP 4 (and 8 x 2, 16 x 1): E + 4 | 4 x 14 | 1 + MTP + L.
  auto l = ParseMegatronLayout("Et*4|(t*4|)*14tmL", 61, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->chunks, 16);
  EXPECT_EQ(l->embedding, 0);
  EXPECT_EQ(l->loss, 3);
  ParallelConfig c = Pipe(4, 4, 0, 0, l->embedding, l->loss);
  ASSERT_EQ(PipelineLayoutError(61, c, PpSplit::kMegatron), "");
  EXPECT_TRUE(NeedsMegatronLayout(c));
  EXPECT_EQ(MegatronLayoutString(61, 1, c), "Et*4|(t*4|)*14tmL");
  std::vector<int> chunks = Chunks(61, c, PpSplit::kMegatron);
  EXPECT_EQ(chunks.front(), 4);
  EXPECT_EQ(chunks.back(), 1);
  EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), 0), 61);
  // Rank 3 holds chunks 3, 7, 11, 15: 4 + 4 + 4 + 1.
  EXPECT_EQ(SplitLayers(61, c, PpSplit::kMegatron).last, 13);
  EXPECT_EQ(SplitLayers(61, c, PpSplit::kMegatron).first, 16);

  // The 25.09 H100 run: E + 1 | 2 x 30 | MTP + L on PP 8 x VP 4.
  l = ParseMegatronLayout("Et|(tt|)*30mL", 61, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->chunks, 32);
  EXPECT_EQ(l->embedding, 1);
  EXPECT_EQ(l->loss, 2);
  c = Pipe(8, 4, 0, 0, 1, 2);
  ASSERT_EQ(PipelineLayoutError(61, c, PpSplit::kMegatron), "");
  // Rank 0 holds chunks 0, 8, 16, 24 (1 + 2 + 2 + 2), rank 7 chunks 7, 15, 23, 31.
  const StageLayers st = SplitLayers(61, c, PpSplit::kMegatron);
  EXPECT_EQ(st.first, 7);
  EXPECT_EQ(st.middle, 8);
  EXPECT_EQ(st.last, 6);
  // The same layout unrolled by hand, commas ignored.
  l = ParseMegatronLayout("Et|tt|tt,|" + [] {
    std::string s;
    for (int k = 0; k < 28; ++k) s += "tt|";
    return s;
  }() + "mL", 61, 1);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->chunks, 32);

  // Megatron's docstring example parses (E+3 | 2 x 29 | m | L) but its MTP
  // stands alone in a chunk, which the first/even/last form cannot price.
  EXPECT_FALSE(ParseMegatronLayout("Ettt|(tt|)*29,m|L", 61, 1).ok());
  // What Megatron's validate_layer_layout refuses.
  EXPECT_FALSE(ParseMegatronLayout("Et*4|(t*4|)*14tmL", 60, 1).ok());  // decoder count
  EXPECT_FALSE(ParseMegatronLayout("Et*4|(t*4|)*14tL", 61, 1).ok());   // MTP count
  EXPECT_FALSE(ParseMegatronLayout("t*4E|(t*4|)*14tmL", 61, 1).ok());  // E not first
  EXPECT_FALSE(ParseMegatronLayout("Et*4|(t*4|)*14tLm", 61, 1).ok());  // L not last
  EXPECT_FALSE(ParseMegatronLayout("Et*4|(t*4|)*14mtL", 61, 1).ok());  // MTP before a layer
  EXPECT_FALSE(ParseMegatronLayout("Ex*4|(t*4|)*14tmL", 61, 1).ok());  // unknown character
  // Uneven chunks between the first and the last.
  EXPECT_FALSE(ParseMegatronLayout("Et*4|t*5|t*3|(t*4|)*12tmL", 61, 1).ok());
}

TEST(Pipeline, TorchtitanSplitsItsOwnWay) {
  // torchtitan's default weights (1, 1): 126 + 2 over 8 stages = 16 each,
  // stage 0 and stage 7 one layer fewer.
  const ParallelConfig c = Pipe(8, 1, 0, 0, 1, 1);
  ASSERT_EQ(PipelineLayoutError(126, c, PpSplit::kTorchtitan), "");
  EXPECT_EQ(Chunks(126, c, PpSplit::kTorchtitan),
            (std::vector<int>{15, 16, 16, 16, 16, 16, 16, 15}));
  // 80 layers, pp 4, Interleaved1F1B with 2 stages per rank (the default count):
  // 82 effective over 8 stages: 11, 11, 10 x 6; less 1 first and last.
  const ParallelConfig v = Pipe(4, 2, 0, 0, 1, 1);
  EXPECT_EQ(TorchtitanLayersPerStage(80, v), 0);
  EXPECT_EQ(Chunks(80, v, PpSplit::kTorchtitan), (std::vector<int>{10, 11, 10, 10, 10, 10, 10, 9}));
  // Rank r holds stages r and r + 4.
  const StageLayers st = SplitLayers(80, v, PpSplit::kTorchtitan);
  EXPECT_EQ(st.first, 20);
  EXPECT_EQ(st.last, 19);
  EXPECT_EQ(st.middle, 21);
  // Other stage counts need pipeline_parallel_layers_per_stage with
  // ceil(effective / lps) = pp·vpp: 82 / 7 -> 12 stages (pp 4 x 3), 128 / 4 ->
  // 32 (pp 8 x 4); no lps makes 24 stages of 128 (22 or 26), so torchtitan
  // cannot run 126 layers at pp 8 x 3.
  EXPECT_EQ(TorchtitanLayersPerStage(80, Pipe(4, 3, 0, 0, 1, 1)), 7);
  EXPECT_EQ(TorchtitanLayersPerStage(126, Pipe(8, 4, 0, 0, 1, 1)), 4);
  EXPECT_EQ(TorchtitanLayersPerStage(126, Pipe(8, 3, 0, 0, 1, 1)), -1);
  EXPECT_NE(PipelineLayoutError(126, Pipe(8, 3, 0, 0, 1, 1), PpSplit::kTorchtitan), "");
  // torchtitan has no first/last stage counts.
  EXPECT_NE(PipelineLayoutError(126, Pipe(8, 1, 7, 7), PpSplit::kTorchtitan), "");
}

TEST(Pipeline, LayoutChoicesIncludeTheRecipes) {
  const std::vector<LayoutChoice> m = LayoutChoices(126, 8, PpSplit::kMegatron, true, 16);
  bool recipe = false, first_last = false;
  for (const LayoutChoice& ch : m) {
    if (ch.embedding == 1 && ch.loss == 1 && ch.first == 0) {
      recipe = std::find(ch.vpps.begin(), ch.vpps.end(), 8) != ch.vpps.end();
    }
    if (ch.first == 15 && ch.last == 15) first_last = true;
    for (int v : ch.vpps) {
      ParallelConfig c = Pipe(8, v, ch.first, ch.last, ch.embedding, ch.loss);
      EXPECT_EQ(PipelineLayoutError(126, c, PpSplit::kMegatron), "");
    }
  }
  EXPECT_TRUE(recipe);
  EXPECT_TRUE(first_last);
  // Megatron-Bridge's DeepSeek-V3 layouts (recipes/deepseek/deepseek_v3.py:68-76
  // @v0.5.0) count the MTP module and the loss as 3 layers: PP 4 at VP 1, 2 and 4.
  bool bridge = false;
  for (const LayoutChoice& ch : LayoutChoices(61, 4, PpSplit::kMegatron, true, 15)) {
    if (ch.first != 0 || ch.embedding != 0 || ch.loss != 3) continue;
    bridge = ch.vpps == std::vector<int>{1, 2, 4};
    const std::string want[] = {"Et*16|(t*16|)*2t*13mL", "Et*8|(t*8|)*6t*5mL", "Et*4|(t*4|)*14tmL"};
    for (size_t i = 0; i < ch.vpps.size() && i < 3; ++i) {
      EXPECT_EQ(MegatronLayoutString(61, 1, Pipe(4, ch.vpps[i], 0, 0, 0, 3)), want[i]);
    }
  }
  EXPECT_TRUE(bridge);
  // A pinned first stage brings its layout: 7 first, 7 last on 16 stages.
  bool pinned = false;
  for (const LayoutChoice& ch : LayoutChoices(126, 16, PpSplit::kMegatron, false, 1, 7, 0)) {
    pinned = pinned || (ch.first == 7 && ch.last == 7);
  }
  EXPECT_TRUE(pinned);
  // DeepSpeed: one layout, no interleaving.
  const std::vector<LayoutChoice> d = LayoutChoices(126, 8, PpSplit::kBalanced, true, 16);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].vpps, std::vector<int>{1});
}

TEST(FrameworkRules, PresetsCiteEveryRule) {
  for (Framework f : AllFrameworks()) {
    for (const FrameworkRuleRef& r : FrameworkPreset(f).rules) {
      EXPECT_NE(r.source.find(':'), std::string::npos) << FrameworkRuleName(r.rule);
    }
  }
  EXPECT_EQ(FrameworkPreset(Framework::kMegatron).support.pp_split, PpSplit::kMegatron);
  EXPECT_EQ(FrameworkPreset(Framework::kTorchtitan).support.pp_split, PpSplit::kTorchtitan);
  EXPECT_EQ(FrameworkPreset(Framework::kMegatronDeepSpeed).support.pp_split, PpSplit::kBalanced);
  EXPECT_FALSE(ParseFrameworkRule("no_such_rule").ok());
}

// Megatron-Core's tp-pp-dp rank order (--use-tp-pp-dp-mapping) with pipeline
// stages needs the expert data-parallel size to equal DP
// (parallel_state.py:898-902 @d98e8a6): the search does not offer what emit
// refuses.
TEST(FrameworkRules, MegatronTpPpDpMappingNeedsExpertDpEqualToDp) {
  const CostModel cm =
      CostModelOf(MakeJob("qwen3-30b-a3b", "dgx-h100", 32, 512, 4096, Framework::kMegatron));
  ParallelConfig c{.gdata = 16, .pp = 2, .ep = 8};
  ASSERT_EQ(cm.CheckRules(c), Reason::kOk);  // tp-dp-pp: any expert-data size
  c.placement = *ParsePlacement("x-y-cp-z-pp-data");
  EXPECT_EQ(cm.CheckRules(c), Reason::kFrameworkUnsupported);
  EXPECT_NE(std::string(cm.PlacementUnsupportedWhy(c)).find("tp-pp-dp"), std::string::npos);
  EXPECT_NE(cm.Explain(Reason::kFrameworkUnsupported, c).find("tp-pp-dp"), std::string::npos);
  // TP 4, EP 4 on the 16 ranks of a stage: expert-data 4 = DP 4, allowed.
  ParallelConfig ok{.gy = 4, .gdata = 4, .pp = 2, .sp = true, .ep = 4};
  ok.placement = c.placement;
  EXPECT_EQ(ok.expert_data(), ok.gdata);
  EXPECT_EQ(cm.CheckRules(ok), Reason::kOk);
}

TEST(FrameworkRules, ExpertLayoutsTheFrameworksBuild) {
  // gpt-oss has linear biases: Megatron-Core keeps its experts whole
  // (transformer_config.py:2612-2615, "Bias in Moe is only supported when ETP==1").
  const CostModel mc =
      CostModelOf(MakeJob("gpt-oss-20b", "dgx-h100", 16, 256, 4096, Framework::kMegatron));
  ParallelConfig c{.gy = 2, .gdata = 8, .ep = 8, .etp = 2};
  ASSERT_NE(mc.BrokenRule(c), nullptr);
  EXPECT_EQ(mc.BrokenRule(c)->rule, FrameworkRule::kMoeBiasEtp1);
  c.etp = 1;
  EXPECT_EQ(mc.BrokenRule(c), nullptr);
  // torchtitan's experts borrow from dp_shard·cp·tp only (parallel_dims.py:187-192):
  // ep 8 over 2 TP ranks × 4 shard ranks, not over replicas.
  const CostModel tc =
      CostModelOf(MakeJob("qwen3-30b-a3b", "dgx-h100", 16, 256, 4096, Framework::kTorchtitan));
  ParallelConfig t{.gy = 2, .gz = 4, .gdata = 2, .sp = true, .ep = 8};
  EXPECT_EQ(tc.BrokenRule(t), nullptr);
  t.gz = 2;
  t.gdata = 4;
  std::string why;
  ASSERT_NE(tc.BrokenRule(t, &why), nullptr);
  EXPECT_EQ(tc.BrokenRule(t)->rule, FrameworkRule::kEpInShardMesh);
  EXPECT_NE(why.find("dp_shard·cp·tp = 4"), std::string::npos) << why;
  t.gz = 4;
  t.gdata = 2;
  t.ep = 4;
  t.etp = 2;
  EXPECT_NE(tc.BrokenRule(t), nullptr);
  // Megatron-DeepSpeed's experts are the dense MLP (transformer.py:1066-1083):
  // Qwen3-30B-A3B's 768-wide experts beside a 6144-wide dense FFN are not
  // built, at any layout; Mixtral's experts are its dense MLP, so they are.
  const CostModel qmc = CostModelOf(
      MakeJob("qwen3-30b-a3b", "dgx-h100", 16, 256, 4096, Framework::kMegatronDeepSpeed));
  ParallelConfig d;
  d.gdata = 16;
  d.zero = 1;
  d.ep = 8;
  ASSERT_NE(qmc.BrokenRule(d, &why), nullptr);
  EXPECT_EQ(qmc.BrokenRule(d)->rule, FrameworkRule::kMdsModel);
  EXPECT_NE(why.find("dense MLP"), std::string::npos) << why;
  const CostModel mxc = CostModelOf(
      MakeJob("mixtral-8x7b", "dgx-h100", 16, 256, 4096, Framework::kMegatronDeepSpeed));
  EXPECT_EQ(mxc.BrokenRule(d), nullptr);
}

// Context parallelism over `cp` ranks by all-to-all (Ulysses), beside `dp`
// data-parallel ranks.
ParallelConfig UlyssesCp(int cp, int dp) {
  ParallelConfig c;
  c.cp = cp;
  c.cp_kind = CpKind::kUlysses;
  c.gdata = dp;
  return c;
}

TEST(FrameworkRules, TransformerEngineA2aNeedsLocalHeadsOverCp) {
  // Llama-3-8B (32 heads, 8 KV heads) at 128K: a2a CP 32 at TP 1 breaks TE's
  // rule (8 KV heads over 32 ranks); CP 8 keeps it; ring CP 32 is not concerned.
  const CostModel cm =
      CostModelOf(MakeJob("llama3-8b", "dgx-h100", 64, 32, 131072, Framework::kMegatron));
  ParallelConfig c = UlyssesCp(32, 2);
  std::string why;
  const FrameworkRuleRef* r = cm.BrokenRule(c, &why);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->rule, FrameworkRule::kCpA2aLocalHeads);
  EXPECT_NE(why.find("cp 32"), std::string::npos) << why;
  EXPECT_EQ(cm.CheckRules(c), Reason::kFrameworkUnsupported);
  EXPECT_NE(cm.Explain(Reason::kFrameworkUnsupported, c).find("context_parallel.py:4246"),
            std::string::npos);
  c.cp_kind = CpKind::kRing;
  EXPECT_EQ(cm.BrokenRule(c), nullptr);
  EXPECT_EQ(cm.BrokenRule(UlyssesCp(8, 8)), nullptr);
}

TEST(FrameworkRules, MegatronDeepSpeedUlyssesRefusesGqa) {
  const CostModel cm =
      CostModelOf(MakeJob("llama3-70b", "dgx-h100", 64, 64, 32768, Framework::kMegatronDeepSpeed));
  ParallelConfig c = UlyssesCp(8, 8);
  ASSERT_NE(cm.BrokenRule(c), nullptr);
  EXPECT_EQ(cm.BrokenRule(c)->rule, FrameworkRule::kUlyssesNoGqa);
  // The search never ranks it; the plans document names the fastest it forbade.
  SearchOptions o;
  o.top_k = 5;
  const SearchResult r = Search(cm, o).RunAll();
  for (const Candidate& cand : r.top) {
    EXPECT_FALSE(cand.config.cp > 1 && cand.config.cp_kind == CpKind::kUlysses)
        << ConfigToString(cand.config);
  }
  ASSERT_FALSE(r.forbidden.empty());
  EXPECT_EQ(r.forbidden.front().config.cp_kind, CpKind::kUlysses);
  // FPDT's chunked FFN is the GeLU MLP with biases: Llama's SwiGLU breaks it.
  c.cp_kind = CpKind::kFpdt;
  ASSERT_NE(cm.BrokenRule(c), nullptr);
  EXPECT_EQ(cm.BrokenRule(c)->rule, FrameworkRule::kFpdtShapes);
}

// The forbidden configuration is named ("fastest if allowed") only when no
// configuration the search kept is as fast: the pick, the simplest leader of
// the band, may be slower than another kept one.
TEST(FrameworkRules, FasterIfAllowedBeatsEveryKeptConfiguration) {
  auto at = [](double s) {
    Candidate c;
    c.prediction.iteration_time_s = s;
    return c;
  };
  SearchResult r;
  EXPECT_EQ(FasterIfAllowed(r), nullptr);
  r.forbidden = {at(7.7)};
  r.top = {at(7.9), at(8.2)};
  r.pool = {at(7.9), at(7.5), at(8.2)};  // a leader faster than the pick
  EXPECT_EQ(FasterIfAllowed(r), nullptr);
  r.pool = r.top;
  ASSERT_NE(FasterIfAllowed(r), nullptr);
  EXPECT_EQ(FasterIfAllowed(r)->prediction.iteration_time_s, 7.7);
}

TEST(FrameworkRules, EveryConfigKeyCanBePinned) {
  const OrderedJson keys = ConfigToJson(ParallelConfig{});
  for (const auto& [k, v] : keys.items()) {
    const std::string value = v.is_string() ? v.get<std::string>() : v.dump();
    EXPECT_TRUE(ValidateFixed({{k, value}}).ok())
        << k << "=" << value << ": " << ValidateFixed({{k, value}}).ToString();
  }
  EXPECT_FALSE(ValidateFixed({{"first_stage_layers", "-1"}}).ok());
  EXPECT_FALSE(ValidateFixed({{"no_such_key", "1"}}).ok());
  // --fix first_stage_layers=7 on Llama 3.1 405B keeps 7-layer first stages.
  const CostModel cm =
      CostModelOf(MakeJob("llama3.1-405b", "dgx-h100", 1024, 512, 8192, Framework::kMegatron));
  SearchOptions o;
  o.top_k = 3;
  o.fixed = {{"pp", "16"}, {"first_stage_layers", "7"}, {"tp", "8"}};
  ASSERT_TRUE(ValidateFixed(o.fixed).ok());
  const SearchResult r = Search(cm, o).RunAll();
  ASSERT_FALSE(r.top.empty());
  for (const Candidate& cand : r.top) {
    EXPECT_EQ(cand.config.first_stage_layers, 7);
    EXPECT_EQ(cand.config.last_stage_layers, 7);
  }
}

// SplitLayers' per-rank counts are the sums of ChunkLayers over each rank's
// chunks (ChunkRank), for every layout shape the search builds: first/last
// splits, embedding/loss pseudo-layers, interleaving and the V schedules.
TEST(SplitLayers, AgreesWithChunkLayersOverEveryRanksChunks) {
  int checked = 0;
  for (PpSplit split : {PpSplit::kMegatron, PpSplit::kTorchtitan, PpSplit::kBalanced}) {
    for (int layers : {1, 7, 32, 61, 62, 80, 126}) {
      for (int pp : {2, 3, 4, 7, 8, 16}) {
        for (int v : {1, 2, 3, 4}) {
          for (int si = 0; si < kNumPpSchedules; ++si) {
            for (int f : {0, 3, 7}) {
              for (int l : {0, 2, 7}) {
                for (int e : {0, 1}) {
                  for (int o : {0, 1, 2}) {
                    ParallelConfig c;
                    c.pp = pp;
                    c.vpp = v;
                    c.pp_schedule = static_cast<PpSchedule>(si);
                    c.first_stage_layers = f;
                    c.last_stage_layers = l;
                    c.pp_embedding_layers = e;
                    c.pp_loss_layers = o;
                    const bool vshape = VShaped(c.pp_schedule) && v == 2;
                    std::vector<int> per_rank(static_cast<size_t>(pp), 0);
                    for (int r = 0; r < pp; ++r) {
                      int& n = per_rank[static_cast<size_t>(r)];
                      if (vshape) {
                        n = ChunkLayers(layers, c, split, r) +
                            ChunkLayers(layers, c, split, 2 * pp - 1 - r);
                      } else {
                        for (int j = 0; j < v; ++j) n += ChunkLayers(layers, c, split, r + j * pp);
                      }
                    }
                    int middle = 0;
                    for (int r = 1; r + 1 < pp; ++r)
                      middle = std::max(middle, per_rank[static_cast<size_t>(r)]);
                    const int lo =
                        std::min(layers, *std::min_element(per_rank.begin(), per_rank.end()));
                    const int hi = std::max(0, *std::max_element(per_rank.begin(), per_rank.end()));
                    const StageLayers s = SplitLayers(layers, c, split);
                    SCOPED_TRACE(std::string(PpSplitName(split)) + " layers " +
                                 std::to_string(layers) + " pp " + std::to_string(pp) + " vpp " +
                                 std::to_string(v) + " schedule " + std::to_string(si) +
                                 " f/l/e/o " + std::to_string(f) + "/" + std::to_string(l) + "/" +
                                 std::to_string(e) + "/" + std::to_string(o));
                    ASSERT_EQ(s.first, per_rank.front());
                    ASSERT_EQ(s.last, per_rank.back());
                    ASSERT_EQ(s.middle, middle);
                    ASSERT_EQ(s.max, hi);
                    ASSERT_EQ(s.even, lo == hi);
                    ++checked;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

}  // namespace
}  // namespace paratune::planner
