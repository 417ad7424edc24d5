// The mpi-cpu backend on real MPI processes (run under mpirun -np 4): every
// collective moves and reduces real buffers to the values NCCL semantics
// promise, splits follow MPI_Comm_split, GEMMs match a naive product.
#include "backend/mpi_cpu.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <vector>

namespace paratune::backend {
namespace {

Backend& B() {
  static std::unique_ptr<Backend> b = [] {
    auto r = CreateMpiCpuBackend({});
    if (!r.ok()) {
      std::fprintf(stderr, "mpi-cpu backend: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return std::move(*r);
  }();
  return *b;
}

std::vector<float> ReadFloats(Backend& b, const Buffer& buf, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  Status s = b.CopyToHost(v.data(), buf, n * 4);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

TEST(MpiCpu, WorldHasFourRanksOnOneHost) {
  Backend& b = B();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  EXPECT_EQ(b.local_size(), 4);
  EXPECT_EQ(b.local_rank(), b.rank());
  EXPECT_EQ(b.hosts().size(), 4u);
  EXPECT_EQ(b.name(), "mpi-cpu");
  EXPECT_FALSE(b.Versions().at("mpi").empty());
}

TEST(MpiCpu, AllReduceSumsAndAveragesRealBuffers) {
  Backend& b = B();
  const int64_t n = 1000;
  auto buf = b.Allocate(n * 4);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(b.Fill(*buf, DataType::kFloat32, b.rank() + 1).ok());
  ASSERT_TRUE(b.AllReduce(kWorldComm, *buf, *buf, n, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  for (float v : ReadFloats(b, *buf, n)) ASSERT_EQ(v, 10.0f);  // 1 + 2 + 3 + 4
  // bf16 through the backend's own MPI op; avg = sum / 4.
  auto h = b.Allocate(n * 2);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(b.Fill(*h, DataType::kBFloat16, 2.0 * (b.rank() + 1)).ok());
  ASSERT_TRUE(b.AllReduce(kWorldComm, *h, *h, n, DataType::kBFloat16, ReduceOp::kAvg, 0).ok());
  std::vector<Eigen::bfloat16> got(static_cast<size_t>(n));
  ASSERT_TRUE(b.CopyToHost(got.data(), *h, n * 2).ok());
  for (auto v : got) ASSERT_EQ(static_cast<float>(v), 5.0f);  // (2+4+6+8)/4
  ASSERT_TRUE(b.Free(*buf).ok());
  ASSERT_TRUE(b.Free(*h).ok());
}

TEST(MpiCpu, GatherScatterAllToAllAndTheRingMoveTheRightBlocks) {
  Backend& b = B();
  const int p = 4, me = b.rank();
  const int64_t c = 8;  // elements per block
  auto send = b.Allocate(p * c * 4), recv = b.Allocate(p * c * 4);
  ASSERT_TRUE(send.ok() && recv.ok());
  // all_gather: block j of the result is rank j's value.
  ASSERT_TRUE(b.Fill(Slice(*send, 0, c * 4), DataType::kFloat32, me + 1).ok());
  ASSERT_TRUE(
      b.AllGather(kWorldComm, Slice(*send, 0, c * 4), *recv, c, DataType::kFloat32, 0).ok());
  auto ag = ReadFloats(b, *recv, p * c);
  for (int64_t i = 0; i < p * c; ++i) ASSERT_EQ(ag[static_cast<size_t>(i)], i / c + 1);
  // reduce_scatter in NCCL's in-place form: recv is this rank's block of send.
  ASSERT_TRUE(b.Fill(*send, DataType::kFloat32, me + 1).ok());
  const Buffer mine = Slice(*send, me * c * 4, c * 4);
  ASSERT_TRUE(
      b.ReduceScatter(kWorldComm, *send, mine, c, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  for (float v : ReadFloats(b, mine, c)) ASSERT_EQ(v, 10.0f);
  // alltoall: rank me sends me*p + j + 1 to rank j.
  for (int j = 0; j < p; ++j) {
    ASSERT_TRUE(b.Fill(Slice(*send, j * c * 4, c * 4), DataType::kFloat32, me * p + j + 1).ok());
  }
  ASSERT_TRUE(b.AllToAll(kWorldComm, *send, *recv, c, DataType::kFloat32, 0).ok());
  auto a2a = ReadFloats(b, *recv, p * c);
  for (int64_t i = 0; i < p * c; ++i) ASSERT_EQ(a2a[static_cast<size_t>(i)], (i / c) * p + me + 1);
  // sendrecv ring: receive the left neighbour's value.
  ASSERT_TRUE(b.Fill(*send, DataType::kFloat32, me + 1).ok());
  ASSERT_TRUE(
      b.SendRecv(kWorldComm, *send, (me + 1) % p, *recv, (me + p - 1) % p, c, DataType::kFloat32, 0)
          .ok());
  for (float v : ReadFloats(b, *recv, c)) ASSERT_EQ(v, (me + p - 1) % p + 1);
  ASSERT_TRUE(b.Free(*send).ok());
  ASSERT_TRUE(b.Free(*recv).ok());
}

TEST(MpiCpu, SplitFollowsColorAndKeyAndCollectivesStayInTheGroup) {
  Backend& b = B();
  auto comm = b.SplitComm(kWorldComm, b.rank() % 2, -b.rank());
  ASSERT_TRUE(comm.ok());
  auto info = b.GetCommInfo(*comm);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 2);
  const int other = b.rank() % 2 == 0 ? (b.rank() == 0 ? 2 : 0) : (b.rank() == 1 ? 3 : 1);
  // Reversed key: the higher world rank comes first.
  EXPECT_EQ(info->world_ranks,
            (std::vector<int>{std::max(b.rank(), other), std::min(b.rank(), other)}));
  auto buf = b.Allocate(64);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(b.Fill(*buf, DataType::kFloat32, b.rank()).ok());
  ASSERT_TRUE(b.AllReduce(*comm, *buf, *buf, 16, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  for (float v : ReadFloats(b, *buf, 16)) ASSERT_EQ(v, b.rank() + other);
  auto none = b.SplitComm(kWorldComm, b.rank() == 0 ? -1 : 0, 0);
  ASSERT_TRUE(none.ok());
  if (b.rank() == 0)
    EXPECT_EQ(*none, kNoComm);
  else
    EXPECT_EQ(b.GetCommInfo(*none)->size, 3);
  ASSERT_TRUE(b.DestroyComm(*comm).ok());
  EXPECT_FALSE(b.GetCommInfo(*comm).ok());
  ASSERT_TRUE(b.Free(*buf).ok());
}

TEST(MpiCpu, GemmMatchesANaiveProduct) {
  Backend& b = B();
  const int64_t m = 37, n = 29, k = 41;
  auto a = b.Allocate(k * m * 4), bb = b.Allocate(k * n * 4), c = b.Allocate(m * n * 4);
  ASSERT_TRUE(a.ok() && bb.ok() && c.ok());
  ASSERT_TRUE(b.FillRandom(*a, DataType::kFloat32, 11).ok());
  ASSERT_TRUE(b.FillRandom(*bb, DataType::kFloat32, 12).ok());
  ASSERT_TRUE(b.Gemm({m, n, k, GemmPrecision::kFp32, *a, *bb, *c, 0}).ok());
  auto A = ReadFloats(b, *a, k * m), Bm = ReadFloats(b, *bb, k * n), C = ReadFloats(b, *c, m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;  // C(i,j) = Σ_l A(l,i)·B(l,j), column-major, A stored k×m
      for (int64_t l = 0; l < k; ++l)
        want += A[static_cast<size_t>(l + i * k)] * Bm[static_cast<size_t>(l + j * k)];
      ASSERT_NEAR(C[static_cast<size_t>(i + j * m)], want, 1e-4);
    }
  }
  EXPECT_EQ(b.CheckGemm(GemmPrecision::kBf16).code(), StatusCode::kUnavailable);
}

TEST(MpiCpu, AllocationBeyondTheRanksShareIsOutOfMemory) {
  Backend& b = B();
  auto mem = b.GetMemoryInfo();
  ASSERT_TRUE(mem.ok());
  auto r = b.Allocate(mem->free_bytes + 1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsOutOfMemory(r.status())) << r.status().ToString();
}

TEST(MpiCpu, HostCollectivesSeeEveryRank) {
  Backend& b = B();
  std::vector<double> v{static_cast<double>(b.rank())};
  ASSERT_TRUE(b.HostAllReduceMax(&v).ok());
  EXPECT_EQ(v[0], 3.0);
  auto all = b.HostAllGather(std::string(static_cast<size_t>(b.rank()) + 1, 'x'));
  ASSERT_TRUE(all.ok());
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ((*all)[static_cast<size_t>(r)].size(), static_cast<size_t>(r) + 1);
}

}  // namespace
}  // namespace paratune::backend
