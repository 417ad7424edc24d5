// One MoE layer on the mpi-cpu backend under mpirun -np 4: real MPI_Alltoall
// dispatch and combine on the expert-parallel communicators, real expert GEMMs,
// with and without expert tensor parallelism.
#include <gtest/gtest.h>

#include <vector>

#include "backend/mpi_cpu.h"
#include "executor/run/moe_layer.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

backend::Backend& B() { return testing::MpiCpuBackend(); }

TEST(MoeLayerMpi, ExpertGroupsRouteRealBytes) {
  backend::Backend& b = B();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  // EP 2 x ETP 2: ranks {0, 2} and {1, 3} are the EP groups (etp innermost).
  auto comms = SplitMoeComms(b, 2, 2);
  ASSERT_TRUE(comms.ok()) << comms.status().ToString();
  const int64_t per_peer = 16;
  auto send = b.Allocate(2 * per_peer * 4);
  auto recv = b.Allocate(2 * per_peer * 4);
  ASSERT_TRUE(send.ok() && recv.ok());
  std::vector<float> mine(2 * per_peer);
  for (int j = 0; j < 2; ++j) {
    for (int64_t i = 0; i < per_peer; ++i) mine[j * per_peer + i] = 100.0f * b.rank() + j;
  }
  ASSERT_TRUE(b.CopyToDevice(*send, mine.data(), mine.size() * 4).ok());
  ASSERT_TRUE(b.AllToAll(comms->ep, *send, *recv, per_peer, backend::DataType::kFloat32, 0).ok());
  std::vector<float> got(2 * per_peer);
  ASSERT_TRUE(b.CopyToHost(got.data(), *recv, got.size() * 4).ok());
  const int etp_index = b.rank() % 2, ep_index = b.rank() / 2;
  for (int j = 0; j < 2; ++j) {
    // Block j came from EP rank j = world rank etp_index + 2·j, which sent us its block ep_index.
    EXPECT_EQ(got[j * per_peer], 100.0f * (etp_index + 2 * j) + ep_index);
  }
  ASSERT_TRUE(b.Free(*send).ok());
  ASSERT_TRUE(b.Free(*recv).ok());
  ASSERT_TRUE(b.DestroyComm(comms->ep).ok());
  ASSERT_TRUE(b.DestroyComm(comms->etp).ok());
}

TEST(MoeLayerMpi, LayerRunsWithAndWithoutExpertTensorParallelism) {
  backend::Backend& b = B();
  for (const auto& [ep, etp] : {std::pair{4, 1}, std::pair{2, 2}}) {
    auto shape = MoeLayerShapeOf(testing::SmallMoe(), 32, ep, etp);
    ASSERT_TRUE(shape.ok()) << shape.status().ToString();
    auto comms = SplitMoeComms(b, ep, etp);
    ASSERT_TRUE(comms.ok()) << comms.status().ToString();
    auto t = RunMoeLayer(b, *comms, *shape, backend::GemmPrecision::kFp32, 1, 3);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_GT(t->dispatch_s, 0);
    EXPECT_GT(t->experts_s, 0);
    EXPECT_GT(t->combine_s, 0);
    EXPECT_GE(t->total_s, t->experts_s);
    ASSERT_TRUE(b.DestroyComm(comms->ep).ok());
    if (etp > 1) {
      ASSERT_TRUE(b.DestroyComm(comms->etp).ok());
    }
  }
}

}  // namespace
}  // namespace paratune::executor
