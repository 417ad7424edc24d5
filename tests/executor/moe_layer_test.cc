// One MoE layer's forward on the fake backend (executor/run/moe_layer.h): the
// all-to-all moves the volume the papers give per rank (tokens x top-k x hidden
// x bytes), on the expert-parallel communicators of Megatron-Core's expert
// order, and the experts' GEMMs run at the per-expert token counts.
#include "executor/run/moe_layer.h"

#include <gtest/gtest.h>

#include "backend/fake.h"

namespace paratune::executor {
namespace {

using backend::FakeBackend;
using backend::OpKind;

planner::ModelSpec Preset(const std::string& name) {
  auto m = planner::ModelPreset(name);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return *m;
}

TEST(MoeLayer, DeepSeekV3DispatchVolumePerRank) {
  // DeepSeek-V3 (hidden 7168, top-8 of 256 experts) with 4096 tokens per rank,
  // EP 64: each dispatch sends 4096 x 8 x 7168 bf16 elements = 469,762,048 bytes
  // from every rank, 63/64 of it to other ranks; each of the 4 local experts
  // computes 4096 x 8 x 64 / 256 = 8192 rows.
  auto s = MoeLayerShapeOf(Preset("deepseek-v3"), 4096, 64, 1);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->a2a_elements * 2, int64_t{469762048});
  EXPECT_EQ(s->local_experts, 4);
  EXPECT_EQ(s->rows_per_expert, 8192);
  EXPECT_EQ(s->fc1_out, 2 * 2048);  // SwiGLU: gate and up
  EXPECT_EQ(s->ffn_local, 2048);
}

TEST(MoeLayer, ShapesThatDoNotSplitAreNamed) {
  const planner::ModelSpec mixtral = Preset("mixtral-8x7b");
  EXPECT_NE(MoeLayerShapeOf(mixtral, 64, 3, 1).status().message().find("ep: 3"), std::string::npos);
  EXPECT_NE(MoeLayerShapeOf(mixtral, 64, 8, 5).status().message().find("etp: 5"),
            std::string::npos);
  EXPECT_NE(MoeLayerShapeOf(mixtral, 3, 8, 1).status().message().find("tokens: 3"),
            std::string::npos);
  EXPECT_FALSE(MoeLayerShapeOf(Preset("llama2-7b"), 64, 1, 1).ok());
}

TEST(MoeLayer, FakeRunIssuesTheDispatcherOpsOnTheExpertGroups) {
  // Mixtral 8x7B (8 experts, top-2, hidden 4096, width 14336) on 8 ranks as
  // EP 4 x ETP 2: 64 tokens per rank.
  const planner::ModelSpec m = Preset("mixtral-8x7b");
  auto shape = MoeLayerShapeOf(m, 64, 4, 2);
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_EQ(shape->rows_per_expert, 64 * 2 * 4 * 2 / 8);
  backend::FakeConfig cfg;
  cfg.world_size = 8;
  auto world = backend::FakeWorld::Create(cfg);
  std::vector<MoeLayerTiming> timings(8);
  std::vector<std::vector<int>> ep_members(8), etp_members(8);
  std::vector<std::unique_ptr<FakeBackend>> ranks;
  Status st = world->RunRanks(
      [&](backend::Backend& b) -> Status {
        PT_ASSIGN_OR_RETURN(MoeLayerComms comms, SplitMoeComms(b, 4, 2));
        PT_ASSIGN_OR_RETURN(backend::CommInfo ep, b.GetCommInfo(comms.ep));
        PT_ASSIGN_OR_RETURN(backend::CommInfo etp, b.GetCommInfo(comms.etp));
        ep_members[b.rank()] = ep.world_ranks;
        etp_members[b.rank()] = etp.world_ranks;
        PT_ASSIGN_OR_RETURN(timings[b.rank()],
                            RunMoeLayer(b, comms, *shape, backend::GemmPrecision::kBf16, 1, 3));
        return Status::Ok();
      },
      &ranks);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const int64_t a2a_bytes = int64_t{64} * 2 * 4096 * 2;  // tokens x top-k x hidden x bf16
  for (const auto& r : ranks) {
    int alltoalls = 0, gathers = 0, scatters = 0, gemms = 0;
    for (const backend::OpRecord& op : r->ops()) {
      if (op.kind == OpKind::kAllToAll) {
        ++alltoalls;
        EXPECT_EQ(op.bytes, a2a_bytes);
        EXPECT_EQ(op.comm_size, 4);
      } else if (op.kind == OpKind::kAllGather) {
        ++gathers;
        EXPECT_EQ(op.comm_size, 2);
        EXPECT_EQ(op.bytes, 2 * a2a_bytes);
      } else if (op.kind == OpKind::kReduceScatter) {
        ++scatters;
        EXPECT_EQ(op.comm_size, 2);
      } else if (op.kind == OpKind::kGemm) {
        ++gemms;
        EXPECT_EQ(op.m, 128);
        EXPECT_TRUE((op.n == 14336 && op.k == 4096) || (op.n == 4096 && op.k == 7168))
            << op.n << " x " << op.k;
      }
    }
    // 4 forwards (1 warm-up + 3): two all-to-alls each, one ETP all-gather and
    // reduce-scatter, FC1 and FC2 for each of the 2 local experts.
    EXPECT_EQ(alltoalls, 8);
    EXPECT_EQ(gathers, 4);
    EXPECT_EQ(scatters, 4);
    EXPECT_EQ(gemms, 16);
  }
  // Megatron-Core's expert order: etp innermost, so world ranks 0 and 1 are
  // one ETP pair and the EP group of rank 0 is {0, 2, 4, 6}.
  EXPECT_EQ(ep_members[0], (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(ep_members[5], (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(etp_members[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(etp_members[5], (std::vector<int>{4, 5}));
  const MoeLayerTiming& t = timings[0];
  EXPECT_GT(t.dispatch_s, 0);
  EXPECT_GT(t.experts_s, 0);
  EXPECT_GT(t.combine_s, 0);
  EXPECT_NEAR(t.total_s, t.dispatch_s + t.experts_s + t.combine_s, 1e-9 + 1e-6 * t.total_s);
  for (const MoeLayerTiming& o : timings) EXPECT_DOUBLE_EQ(o.total_s, t.total_s);  // max over ranks
}

}  // namespace
}  // namespace paratune::executor
