// Local attention through the search and the Megatron emitter: gpt-oss's sliding
// window and Llama 4's chunked attention are written with the flags Megatron-LM
// defines for them, and what Megatron-Core cannot express is never ranked for it
// nor emitted (the mcore_model rule).
#include <gtest/gtest.h>

#include <string>

#include "common/json.h"
#include "frameworks/emit.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "planner/plans.h"
#include "planner/request.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

struct Ranked {
  Json plans;
  int count = 0;
};

Ranked MegatronPlans(const std::string& model, int gpus, int64_t seq, int64_t gbs) {
  Job job{*ModelPreset(model), *topology::ClusterPreset("dgx-h100"), gpus, {}};
  job.training.seq_len = seq;
  job.training.global_batch = gbs;
  job.training.framework = Framework::kMegatron;
  job.training.precision = BestTrainingPrecision(job.cluster.gpu);
  CostModel cm(job.model, job.training, job.cluster, job.gpus);
  SearchOptions opt;
  opt.top_k = 5;
  opt.family = Family::kMegatron;
  const SearchResult r = Search(cm, opt).RunAll();
  Ranked out;
  out.count = static_cast<int>(r.top.size());
  if (out.count > 0) out.plans = Json::parse(PlansToJson({PlanSection{job, r, 0.0, {}}}, opt).dump());
  return out;
}

// gpt-oss: 128-token windows on every second layer, the first of each pair
// (config.json layer_types). Hugging Face's window of 128 keys includes the
// query's own; Megatron's (left, right) admits keys i - left through i + right
// (utils.py:43-50 @d98e8a6), so 128 keys are (127, 0), as Megatron-Bridge
// writes it (gpt_oss_bridge.py:86-87 @067f987) and Megatron-LM's own gpt-oss
// example (examples/post_training/modelopt/conf/openai/gpt-oss-20b.sh:52
// @d98e8a6: --window-size 127,0); Megatron windows the layers whose 1-based
// number is not a multiple of 2 (utils.py:532-546).
TEST(LocalAttention, GptOssSlidingWindowIsWrittenForMegatron) {
  const Ranked r = MegatronPlans("gpt-oss-20b", 16, 4096, 256);
  ASSERT_GT(r.count, 0);
  for (int rank = 1; rank <= r.count; ++rank) {
    auto text = EmitConfig(r.plans, rank, EmitFormat::kMegatron);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_NE(text->find("--window-size 127,0\n"), std::string::npos) << *text;
    EXPECT_NE(text->find("--window-attn-skip-freq 2\n"), std::string::npos) << *text;
    EXPECT_EQ(text->find("--no-rope-freq"), std::string::npos);
  }
}

// Llama 4: 8192-token chunks on three layers in four, no RoPE on every fourth
// (Megatron-LM's Llama 4 example: --no-rope-freq 4, no window). Up to seq 8192
// a chunk is the whole causal prefix, so Megatron's full attention is exact.
TEST(LocalAttention, Llama4ChunksUpToTheSequenceAreFullAttentionWithoutRopeEveryFourth) {
  const Ranked r = MegatronPlans("llama4-scout", 64, 8192, 512);
  ASSERT_GT(r.count, 0);
  auto text = EmitConfig(r.plans, 1, EmitFormat::kMegatron);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("--no-rope-freq 4\n"), std::string::npos) << *text;
  EXPECT_EQ(text->find("--window-size"), std::string::npos) << *text;

  // Past the chunk Megatron-Core has no way to keep the chunks apart: the
  // search ranks nothing for it and the emitter refuses the same plan.
  EXPECT_EQ(MegatronPlans("llama4-scout", 64, 16384, 512).count, 0);
  Json longer = r.plans;
  longer["job"]["training"]["seq_len"] = 16384;
  auto refused = EmitConfig(longer, 1, EmitFormat::kMegatron);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no chunked attention"), std::string::npos)
      << refused.status().message();
}

TEST(LocalAttention, PatternsMegatronCannotWriteAreNamed) {
  ModelSpec m = *ModelPreset("gpt-oss-20b");
  EXPECT_EQ(LocalAttentionPeriod(m), 2);
  EXPECT_EQ(MegatronLocalAttentionGap(m, 131072), "");
  m.sliding_layers = 10;  // 14 global layers of 24: no N writes it
  EXPECT_EQ(LocalAttentionPeriod(m), 0);
  EXPECT_NE(MegatronLocalAttentionGap(m, 4096).find("--window-attn-skip-freq"), std::string::npos);
  m.sliding_layers = m.layers;  // every layer windowed: --window-size alone
  EXPECT_EQ(LocalAttentionPeriod(m), 1);
  EXPECT_EQ(MegatronLocalAttentionGap(m, 4096), "");
}

// Chunked attention attends within its chunk: at seq 2w a query sees w/2 keys on
// average (each chunk is a causal prefix of w), a sliding window 3w/4 (the first
// w positions see their prefix, the rest w keys); up to seq w both are the full
// causal prefix.
TEST(LocalAttention, ChunksAttendToFewerKeysThanASlidingWindow) {
  ModelSpec chunked = *ModelPreset("llama4-scout");
  ASSERT_TRUE(chunked.chunked_attention);
  ModelSpec sliding = chunked;
  sliding.chunked_attention = false;
  ModelSpec full = chunked;
  full.sliding_window = full.sliding_layers = 0;
  full.chunked_attention = false;
  const int64_t w = chunked.sliding_window;
  EXPECT_DOUBLE_EQ(chunked.ForwardFlopsPerToken(w), full.ForwardFlopsPerToken(w));
  EXPECT_DOUBLE_EQ(sliding.ForwardFlopsPerToken(w), full.ForwardFlopsPerToken(w));
  const double f = full.ForwardFlopsPerToken(2 * w), s = sliding.ForwardFlopsPerToken(2 * w),
               c = chunked.ForwardFlopsPerToken(2 * w);
  EXPECT_LT(c, s);
  EXPECT_LT(s, f);
  // Per local layer the keys go w (full, s/2) -> 3w/4 (sliding) -> w/2 (chunked):
  // the two steps remove the same attention FLOPs.
  EXPECT_NEAR(f - s, s - c, 1e-9 * f);
}

}  // namespace
}  // namespace paratune::planner
