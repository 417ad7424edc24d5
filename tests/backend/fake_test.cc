// The fake backend: its α-β and GEMM model, its validation, communicator
// splits with ncclCommSplit semantics, the op log, and the in-process world's
// host collectives.
#include "backend/fake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

namespace paratune::backend {
namespace {

FakeConfig A100Node() {
  FakeConfig c;
  c.world_size = 8;
  c.ranks_per_node = 8;
  c.intra_node = {8.0, 230.0};  // cost-model.md §7: A100 NVSwitch all-reduce busbw ≈ 230 GB/s
  c.inter_node = {12.0, 24.0};
  return c;
}

// Rank 0 of A100Node() (its world kept alive) with a send and a receive
// buffer of the same size.
struct Rank0WithBuffers {
  std::shared_ptr<FakeWorld> world;
  std::unique_ptr<FakeBackend> b;
  Buffer send, recv;
};
void MakeRank0WithBuffers(int64_t bytes, Rank0WithBuffers* r) {
  r->world = FakeWorld::Create(A100Node());
  r->b = r->world->MakeRank(0);
  auto send = r->b->Allocate(bytes);
  auto recv = r->b->Allocate(bytes);
  ASSERT_TRUE(send.ok() && recv.ok());
  r->send = *send;
  r->recv = *recv;
}

TEST(FakeBackend, AllReduceTakesAlphaTimesRanksPlusBusBytesOverBeta) {
  const int64_t bytes = int64_t{1} << 30;
  Rank0WithBuffers r;
  ASSERT_NO_FATAL_FAILURE(MakeRank0WithBuffers(bytes, &r));
  FakeBackend* b = r.b.get();
  ASSERT_TRUE(b->AllReduce(kWorldComm, r.send, r.recv, bytes / 4, DataType::kFloat32,
                           ReduceOp::kSum, kDefaultStream)
                  .ok());
  // 8 µs × 8 ranks + 2·7/8 × 2^30 B / 230e9 B/s.
  const double expected = 8e-6 * 8 + 1.75 * 1073741824.0 / 230e9;
  EXPECT_NEAR(b->StreamTime(kDefaultStream), expected, 1e-12);
  const OpRecord& rec = b->ops().back();
  EXPECT_EQ(rec.kind, OpKind::kAllReduce);
  EXPECT_EQ(rec.comm_size, 8);
  EXPECT_EQ(rec.bytes, bytes);
  EXPECT_EQ(rec.count, bytes / 4);
  EXPECT_FALSE(rec.inter_node);
  EXPECT_DOUBLE_EQ(rec.end_s - rec.start_s, expected);
}

// The all-to-all a MoE dispatch issues: count_per_peer elements to each rank,
// nccl-tests' size = the whole buffer and its busbw factor (n-1)/n
// (doc/PERFORMANCE.md "AlltoAll: (n-1)/n").
TEST(FakeBackend, AllToAllTakesAlphaTimesRanksPlusSevenEighthsOfTheBufferOverBeta) {
  const int64_t bytes = int64_t{1} << 30;
  Rank0WithBuffers r;
  ASSERT_NO_FATAL_FAILURE(MakeRank0WithBuffers(bytes, &r));
  FakeBackend* b = r.b.get();
  const int64_t per_peer = bytes / 2 / 8;  // bf16 elements to each of 8 ranks
  ASSERT_TRUE(
      b->AllToAll(kWorldComm, r.send, r.recv, per_peer, DataType::kBFloat16, kDefaultStream).ok());
  const double expected = 8e-6 * 8 + 7.0 / 8 * 1073741824.0 / 230e9;
  EXPECT_NEAR(b->StreamTime(kDefaultStream), expected, 1e-12);
  const OpRecord& rec = b->ops().back();
  EXPECT_EQ(rec.kind, OpKind::kAllToAll);
  EXPECT_EQ(rec.bytes, bytes);
  EXPECT_EQ(rec.count, per_peer);
  // A receive buffer short of size x count_per_peer elements is refused.
  auto small = b->Allocate(bytes / 2);
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(
      b->AllToAll(kWorldComm, r.send, *small, per_peer, DataType::kBFloat16, kDefaultStream).ok());
}

TEST(FakeBackend, SplitFormsGroupsByColorOrderedByKeyAcrossNodes) {
  FakeConfig c = A100Node();
  c.world_size = 16;  // two nodes of 8
  auto world = FakeWorld::Create(c);
  std::vector<std::unique_ptr<FakeBackend>> ranks;
  Status s = world->RunRanks(
      [](Backend& b) -> Status {
        // NCCL_TESTS_SPLIT "MOD 8": color = rank % 8, one GPU per node per group;
        // a reversed key must reverse the order inside each group.
        PT_ASSIGN_OR_RETURN(CommId comm, b.SplitComm(kWorldComm, b.rank() % 8, -b.rank()));
        PT_ASSIGN_OR_RETURN(Buffer buf, b.Allocate(1 << 20));
        return b.AllGather(comm, Slice(buf, 0, 1 << 19), buf, (1 << 19) / 4, DataType::kFloat32,
                           kDefaultStream);
      },
      &ranks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto info = ranks[3]->GetCommInfo(1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 2);
  EXPECT_EQ(info->world_ranks, (std::vector<int>{11, 3}));
  EXPECT_EQ(info->rank, 1);
  const OpRecord& ag = ranks[3]->ops().back();
  EXPECT_EQ(ag.kind, OpKind::kAllGather);
  EXPECT_TRUE(ag.inter_node);
  // all_gather of 2^20 B over 2 ranks: 12 µs × 2 + (1/2) × 2^20 / 24e9.
  EXPECT_NEAR(ag.end_s - ag.start_s, 24e-6 + 0.5 * 1048576.0 / 24e9, 1e-12);
}

TEST(FakeBackend, SplitWithAMissingRankTimesOutNamingIt) {
  FakeConfig c = A100Node();
  c.world_size = 2;
  c.host_timeout_s = 0.2;
  auto world = FakeWorld::Create(c);
  auto r0 = world->MakeRank(0);
  auto comm = r0->SplitComm(kWorldComm, 0, 0);  // rank 1 never joins
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kTimeout);
  EXPECT_NE(comm.status().message().find("rank(s) 1"), std::string::npos);
}

TEST(FakeBackend, NegativeColorJoinsNoCommunicator) {
  FakeConfig c = A100Node();
  c.world_size = 4;
  auto world = FakeWorld::Create(c);
  std::vector<std::unique_ptr<FakeBackend>> ranks;
  std::vector<CommId> got(4);
  Status s = world->RunRanks(
      [&got](Backend& b) -> Status {
        PT_ASSIGN_OR_RETURN(got[static_cast<size_t>(b.rank())],
                            b.SplitComm(kWorldComm, b.rank() < 3 ? 0 : -1, 0));
        return Status::Ok();
      },
      &ranks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got[3], kNoComm);
  EXPECT_EQ(ranks[0]->GetCommInfo(got[0])->size, 3);
}

TEST(FakeBackend, RejectsBuffersThatAreTooSmallAndBadPeers) {
  auto world = FakeWorld::Create(A100Node());
  auto b = world->MakeRank(0);
  auto small = b->Allocate(1024);
  ASSERT_TRUE(small.ok());
  Status s = b->AllReduce(kWorldComm, *small, *small, 1024, DataType::kFloat32, ReduceOp::kSum,
                          kDefaultStream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs 4096"), std::string::npos);
  EXPECT_EQ(b->SendRecv(kWorldComm, *small, 8, *small, 0, 16, DataType::kFloat32, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b->AllReduce(42, *small, *small, 16, DataType::kFloat32, ReduceOp::kSum, 0).code(),
            StatusCode::kInvalidArgument);
  Buffer foreign = *small;
  foreign.id = 999;
  EXPECT_EQ(b->Copy(foreign, *small, 16, 0).code(), StatusCode::kInvalidArgument);
}

TEST(FakeBackend, AllocationBeyondMemoryIsOutOfMemoryAndFreeReturnsIt) {
  FakeConfig c = A100Node();
  c.memory_bytes = int64_t{80} << 30;
  auto world = FakeWorld::Create(c);
  auto b = world->MakeRank(0);
  auto big = b->Allocate(int64_t{60} << 30);
  ASSERT_TRUE(big.ok());
  auto second = b->Allocate(int64_t{30} << 30);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(IsOutOfMemory(second.status()));
  EXPECT_TRUE(IsOutOfMemory(second.status().WithContext("activations of stage 3")));
  ASSERT_TRUE(b->Free(*big).ok());
  EXPECT_TRUE(b->Allocate(int64_t{30} << 30).ok());
  EXPECT_EQ(b->allocated_bytes(), int64_t{30} << 30);
}

TEST(FakeBackend, GemmTakesLatencyPlusFlopsOverRateAndUnsupportedPrecisionIsUnavailable) {
  auto world = FakeWorld::Create(A100Node());
  auto b = world->MakeRank(0);
  const int64_t n = 8192;
  auto a = b->Allocate(n * n * 2), bb = b->Allocate(n * n * 2), c = b->Allocate(n * n * 2);
  ASSERT_TRUE(a.ok() && bb.ok() && c.ok());
  ASSERT_TRUE(b->Gemm({n, n, n, GemmPrecision::kBf16, *a, *bb, *c, kDefaultStream}).ok());
  EXPECT_NEAR(b->StreamTime(0), 6e-6 + 2.0 * n * n * n / 312e12, 1e-12);
  EXPECT_EQ(b->CheckGemm(GemmPrecision::kFp8).code(), StatusCode::kUnavailable);
  EXPECT_EQ(b->Gemm({n, n, n, GemmPrecision::kFp8, *a, *bb, *c, 0}).code(),
            StatusCode::kUnavailable);
}

TEST(FakeBackend, EventsStreamsAndTheGateFollowVirtualTime) {
  auto world = FakeWorld::Create(A100Node());
  auto b = world->MakeRank(0);
  auto s1 = b->CreateStream();
  auto e0 = b->CreateEvent(), e1 = b->CreateEvent();
  ASSERT_TRUE(s1.ok() && e0.ok() && e1.ok());
  auto buf = b->Allocate(1 << 30);
  ASSERT_TRUE(buf.ok());
  // Stream 0 runs a copy; stream 1 is held with it and must start together.
  ASSERT_TRUE(b->Copy(Slice(*buf, 0, 1 << 29), Slice(*buf, 1 << 29, 1 << 29), 1 << 29, 0).ok());
  ASSERT_TRUE(b->HoldStreams({0, *s1}).ok());
  ASSERT_TRUE(b->RecordEvent(*e0, *s1).ok());
  ASSERT_TRUE(b->ReleaseStreams().ok());
  EXPECT_DOUBLE_EQ(b->StreamTime(*s1), b->StreamTime(0));
  ASSERT_TRUE(
      b->AllReduce(kWorldComm, *buf, *buf, 1024, DataType::kFloat32, ReduceOp::kSum, *s1).ok());
  ASSERT_TRUE(b->RecordEvent(*e1, *s1).ok());
  auto dt = b->ElapsedSeconds(*e0, *e1);
  ASSERT_TRUE(dt.ok());
  EXPECT_NEAR(*dt, 64e-6 + 1.75 * 4096 / 230e9, 1e-12);
  // A wait makes stream 0 depend on stream 1's event.
  ASSERT_TRUE(b->StreamWaitEvent(0, *e1).ok());
  EXPECT_GE(b->StreamTime(0), b->StreamTime(*s1));
  EXPECT_EQ(b->StreamWaitEvent(0, 77).code(), StatusCode::kInvalidArgument);
}

TEST(FakeWorld, HostCollectivesMeetAcrossThreads) {
  FakeConfig c = A100Node();
  c.world_size = 4;
  auto world = FakeWorld::Create(c);
  std::atomic<int> checked{0};
  Status s = world->RunRanks([&checked](Backend& b) -> Status {
    std::vector<double> v{static_cast<double>(b.rank()), -static_cast<double>(b.rank())};
    PT_RETURN_IF_ERROR(b.HostAllReduceMax(&v));
    if (v[0] != 3.0 || v[1] != 0.0) return Status::Internal("wrong max");
    PT_ASSIGN_OR_RETURN(auto all, b.HostAllGather("r" + std::to_string(b.rank())));
    if (all != std::vector<std::string>{"r0", "r1", "r2", "r3"}) return Status::Internal("order");
    PT_RETURN_IF_ERROR(b.HostBarrier());
    ++checked;
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(checked.load(), 4);
}

TEST(FakeBackend, LocalRanksAndHostsFollowRanksPerNode) {
  FakeConfig c = A100Node();
  c.world_size = 12;
  auto world = FakeWorld::Create(c);
  auto b = world->MakeRank(9);
  EXPECT_EQ(b->local_rank(), 1);
  EXPECT_EQ(b->local_size(), 4);  // the second node holds ranks 8–11
  EXPECT_EQ(b->hosts()[9], "fake-node1");
  EXPECT_EQ(b->hosts()[7], "fake-node0");
}

}  // namespace
}  // namespace paratune::backend
