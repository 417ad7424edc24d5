// The fault injector: each fault fires at the Nth counted call, on the chosen
// rank only, and leaves the state a real failure would (a dead rank stays
// dead, a broken communicator stays broken, a hung stream times out).
#include "backend/fault.h"

#include <gtest/gtest.h>

#include <thread>

#include "backend/fake.h"

namespace paratune::backend {
namespace {

std::unique_ptr<FaultBackend> Wrap(FaultPlan plan, int world_size = 1, int rank = 0) {
  FakeConfig c;
  c.world_size = world_size;
  static std::vector<std::shared_ptr<FakeWorld>> keep;  // worlds outlive the test's backends
  keep.push_back(FakeWorld::Create(c));
  return std::make_unique<FaultBackend>(keep.back()->MakeRank(rank), plan);
}

TEST(FaultPlan, ParsesKindCallAndRank) {
  auto p = ParseFaultPlan("timeout@3:rank=1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kind, FaultKind::kTimeout);
  EXPECT_EQ(p->at_call, 3);
  EXPECT_EQ(p->rank, 1);
  auto q = ParseFaultPlan("oom@2");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rank, -1);
  EXPECT_FALSE(ParseFaultPlan("oom").ok());
  EXPECT_FALSE(ParseFaultPlan("oom@0").ok());
  EXPECT_FALSE(ParseFaultPlan("meteor@1").ok());
  EXPECT_FALSE(ParseFaultPlan("oom@1:node=2").ok());
}

TEST(FaultBackend, OutOfMemoryAtTheNthAllocationOnly) {
  auto b = Wrap({FaultKind::kOutOfMemory, 2, -1});
  EXPECT_TRUE(b->Allocate(1024).ok());
  auto second = b->Allocate(1024);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(IsOutOfMemory(second.status()));
  EXPECT_TRUE(b->fired());
  EXPECT_TRUE(b->Allocate(1024).ok());
}

TEST(FaultBackend, CollectiveErrorBreaksItsCommunicatorLikeNccl) {
  auto b = Wrap({FaultKind::kCollectiveError, 2, -1});
  auto buf = b->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  auto op = [&] {
    return b->AllReduce(kWorldComm, *buf, *buf, 16, DataType::kFloat32, ReduceOp::kSum, 0);
  };
  EXPECT_TRUE(op().ok());
  Status s = op();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("NCCL error"), std::string::npos);
  EXPECT_NE(s.message().find("ncclRemoteError"), std::string::npos);
  EXPECT_EQ(op().code(), StatusCode::kInternal);  // still broken
}

TEST(FaultBackend, TimeoutShowsAtSynchronizeAndOnEventsOfTheHungStream) {
  auto b = Wrap({FaultKind::kTimeout, 1, -1});
  auto buf = b->Allocate(4096);
  auto e0 = b->CreateEvent(), e1 = b->CreateEvent();
  ASSERT_TRUE(buf.ok() && e0.ok() && e1.ok());
  ASSERT_TRUE(b->RecordEvent(*e0, 0).ok());
  // Enqueueing succeeds, as with NCCL: the hang shows when waiting.
  ASSERT_TRUE(b->AllReduce(kWorldComm, *buf, *buf, 16, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  ASSERT_TRUE(b->RecordEvent(*e1, 0).ok());
  EXPECT_EQ(b->Synchronize(0).code(), StatusCode::kTimeout);
  EXPECT_EQ(b->ElapsedSeconds(*e0, *e1).status().code(), StatusCode::kTimeout);
  EXPECT_EQ(b->SynchronizeAll().code(), StatusCode::kTimeout);
}

TEST(FaultBackend, OnlyTheChosenRankSuffers) {
  auto spared = Wrap({FaultKind::kRankDies, 1, 3}, 4, 2);
  EXPECT_TRUE(spared->Allocate(16).ok());
  EXPECT_FALSE(spared->fired());
  auto victim = Wrap({FaultKind::kRankDies, 1, 3}, 4, 3);
  EXPECT_EQ(victim->Allocate(16).status().code(), StatusCode::kUnavailable);
}

TEST(FaultBackend, ADeadRankStaysDeadAndItsPeerTimesOutAtTheNextHostCollective) {
  FakeConfig c;
  c.world_size = 2;
  c.host_timeout_s = 0.3;
  auto world = FakeWorld::Create(c);
  FaultBackend r0(world->MakeRank(0), {FaultKind::kRankDies, 2, 1});
  FaultBackend r1(world->MakeRank(1), {FaultKind::kRankDies, 2, 1});
  Status s0, s1, s1_later;
  std::thread t0([&] {
    s0 = r0.HostBarrier();
    if (s0.ok()) s0 = r0.HostBarrier();
  });
  std::thread t1([&] {
    s1 = r1.HostBarrier();                   // call 1: fine
    if (s1.ok()) s1 = r1.HostBarrier();      // call 2: dies
    s1_later = r1.GetMemoryInfo().status();  // dead for good
  });
  t0.join();
  t1.join();
  EXPECT_EQ(s1.code(), StatusCode::kUnavailable);
  EXPECT_NE(s1.message().find("rank 1 died"), std::string::npos);
  EXPECT_EQ(s1_later.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s0.code(), StatusCode::kTimeout);
  EXPECT_NE(s0.message().find("rank(s) 1"), std::string::npos);
}

}  // namespace
}  // namespace paratune::backend
