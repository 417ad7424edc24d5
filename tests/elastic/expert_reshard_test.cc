// The expert reshard map (elastic/expert_reshard.h) on the published expert
// shapes of DeepSeek-V3 and Mixtral 8x7B: every new rank ends with exactly its
// E/ep experts at its etp slice, read from ranks that hold them, and the sizes are
// the papers' (an expert is 3 x hidden x expert width for a SwiGLU FFN).
#include "elastic/expert_reshard.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

using testing::Preset;

// Each new rank's received and kept pieces tile exactly what the new layout
// gives it, and every source holds what it sends.
void ExpectCovers(const ModelSpec& m, const ExpertLayout& from, const ExpertLayout& to,
                  const ExpertReshardPlan& plan) {
  std::map<int, int64_t> in;
  for (const ExpertTransfer& t : plan.transfers) {
    in[t.to_rank] += t.params;
    bool holds = false;
    for (const ExpertSlice& s : ExpertSlicesHeld(m, from, t.from_rank)) {
      holds = holds || (s.expert == t.slice.expert && s.f0 <= t.slice.f0 && t.slice.f1 <= s.f1);
    }
    EXPECT_TRUE(holds) << "old rank " << t.from_rank << " does not hold expert " << t.slice.expert;
  }
  EXPECT_EQ(plan.params_kept + plan.params_moved, plan.params_needed);
  int64_t needed = 0;
  for (int r = 0; r < to.ranks(); ++r) {
    for (const ExpertSlice& s : ExpertSlicesHeld(m, to, r)) needed += ExpertSliceParams(m, s);
  }
  EXPECT_EQ(needed, plan.params_needed);
}

TEST(ExpertReshard, DeepSeekV3ExpertSizeAndTheMegatronPlacement) {
  const ModelSpec m = Preset("deepseek-v3");
  // DeepSeek-V3 config.json: hidden 7168, moe_intermediate_size 2048, 256 routed
  // experts, SwiGLU: one expert is 3 x 7168 x 2048 = 44,040,192 parameters.
  EXPECT_EQ(ExpertSliceParams(m, {0, 0, 2048}), 44040192);
  EXPECT_EQ(ExpertSliceParams(m, {0, 0, 2048}), m.ExpertParams());
  // EP 64 (the paper's training layout, DeepSeek-V3 report section 3.2): 4
  // experts per rank, rank 5 of the EP group holds experts 20..23.
  const ExpertLayout ep64{64, 1, 1};
  ASSERT_TRUE(CheckExpertLayout(m, ep64).ok());
  const auto held = ExpertSlicesHeld(m, ep64, 5);
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(held.front(), (ExpertSlice{20, 0, 2048}));
  EXPECT_EQ(held.back(), (ExpertSlice{23, 0, 2048}));
  // Folding order: etp innermost, then ep, then edp.
  const ExpertLayout folded{4, 2, 3};
  const ExpertCoords c = ExpertCoordsOf(folded, 1 + 2 * 3 + 8 * 2);
  EXPECT_EQ(c.etp, 1);
  EXPECT_EQ(c.ep, 3);
  EXPECT_EQ(c.edp, 2);
}

TEST(ExpertReshard, HalvingExpertParallelismDoublesEachRanksExperts) {
  const ModelSpec m = Preset("deepseek-v3");
  // 64 ranks -> 32 ranks of one stage: each new rank holds 256 / 32 = 8 experts.
  const ExpertLayout from{64, 1, 1}, to{32, 1, 1};
  auto plan = PlanExpertReshard(m, from, to);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ExpectCovers(m, from, to, *plan);
  EXPECT_EQ(plan->params_needed, 256 * int64_t{44040192});
  // New rank r needs experts 8r..8r+7, old rank r held 4r..4r+3: only rank 0
  // keeps its four (0..3); every other rank reads all eight.
  EXPECT_EQ(plan->params_kept, 4 * int64_t{44040192});
  EXPECT_EQ(plan->max_rank_params_in, 8 * int64_t{44040192});
  EXPECT_EQ(plan->max_rank_params_out, 4 * int64_t{44040192});
}

TEST(ExpertReshard, SameLayoutMovesNothingAndReplicasShareTheReads) {
  const ModelSpec m = Preset("mixtral-8x7b");
  // Mixtral 8x7B (Jiang et al. 2024, config.json): 8 experts of width 14336, hidden 4096.
  EXPECT_EQ(m.ExpertParams(), 3 * int64_t{4096} * 14336);
  const ExpertLayout l{8, 1, 2};
  auto same = PlanExpertReshard(m, l, l);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->transfers.empty());
  EXPECT_EQ(same->params_moved, 0);
  EXPECT_EQ(same->params_kept, 16 * m.ExpertParams());
  // EP 8 -> EP 4 with ETP 2 on the same 16 ranks: rank 2·i + j holds experts
  // 2i' .. of width 7168 at slice j; every piece is read from one of the two
  // replicas, alternating with the reading rank.
  const ExpertLayout to{4, 2, 2};
  auto plan = PlanExpertReshard(m, l, to);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ExpectCovers(m, l, to, *plan);
  EXPECT_EQ(plan->params_needed, 2 * 8 * m.ExpertParams());  // two replicas of every expert
  std::map<int, int> replica_reads;
  for (const ExpertTransfer& t : plan->transfers)
    ++replica_reads[ExpertCoordsOf(l, t.from_rank).edp];
  EXPECT_GT(replica_reads[0], 0);
  EXPECT_GT(replica_reads[1], 0);
}

TEST(ExpertReshard, GrowingToNewRanksReadsEverythingTheyHold) {
  const ModelSpec m = Preset("qwen3-30b-a3b");
  // Qwen3-30B-A3B: 128 experts of width 768. 8 ranks -> 16 ranks (EP 8 -> 16):
  // ranks 8..15 are new and read their 8 experts each.
  auto plan = PlanExpertReshard(m, {8, 1, 1}, {16, 1, 1});
  ASSERT_TRUE(plan.ok());
  ExpectCovers(m, {8, 1, 1}, {16, 1, 1}, *plan);
  int64_t new_ranks_in = 0;
  for (const ExpertTransfer& t : plan->transfers) {
    if (t.to_rank >= 8) new_ranks_in += t.params;
  }
  EXPECT_EQ(new_ranks_in, 8 * 8 * m.ExpertParams());
}

TEST(ExpertReshard, LayoutsThatDoNotDivideAreNamed) {
  const ModelSpec m = Preset("mixtral-8x7b");
  auto bad_ep = PlanExpertReshard(m, {8, 1, 1}, {3, 1, 1});
  ASSERT_FALSE(bad_ep.ok());
  EXPECT_NE(bad_ep.status().message().find("to.ep: 3 does not divide the 8 experts"),
            std::string::npos)
      << bad_ep.status().message();
  auto bad_etp = PlanExpertReshard(m, {8, 5, 1}, {8, 1, 1});
  ASSERT_FALSE(bad_etp.ok());
  EXPECT_NE(bad_etp.status().message().find("from.etp"), std::string::npos);
  auto dense = PlanExpertReshard(Preset("llama2-7b"), {1, 1, 1}, {1, 1, 1});
  ASSERT_FALSE(dense.ok());
  EXPECT_NE(dense.status().message().find("no routed experts"), std::string::npos);
}

}  // namespace
}  // namespace paratune::planner
