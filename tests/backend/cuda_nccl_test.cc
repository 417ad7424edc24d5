// The cuda backend (GPU tier): compiled wherever CUDA and NCCL are found,
// skipped when this machine has no usable device (no driver, no GPU). On a GPU
// it checks real results and that a large bf16 GEMM runs at a plausible rate.
#include "backend/cuda_nccl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/nvml_topology.h"

namespace paratune::backend {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = CudaDeviceCount();
    if (!n.ok()) GTEST_SKIP() << n.status().message();
    auto b = CreateCudaNcclBackend(CreateSingleProcessBootstrap(), {});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    b_ = std::move(*b);
  }
  std::unique_ptr<Backend> b_;
};

TEST(CudaBackend, NoDeviceIsUnavailableWithTheRuntimesReason) {
  auto n = CudaDeviceCount();
  if (n.ok()) GTEST_SKIP() << *n << " device(s) present";
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  auto b = CreateCudaNcclBackend(CreateSingleProcessBootstrap(), {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
}

TEST_F(CudaBackendTest, DescribesTheDevice) {
  auto d = b_->DescribeDevice();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, "cuda");
  EXPECT_GT(d->memory_bytes, int64_t{1} << 30);
  EXPECT_GT(d->multiprocessors, 0);
  EXPECT_FALSE(b_->Versions().at("nccl").empty());
  // NVML's SM clocks where the driver's library is there: the clock now never
  // above the maximum (1 % for the MHz rounding).
  if (QueryNvmlTopology().ok()) {
    EXPECT_GT(d->clock_max_GHz, 0.0);
    EXPECT_LE(d->clock_now_GHz, d->clock_max_GHz * 1.01);
  }
}

TEST_F(CudaBackendTest, FillCopyAndSingleRankAllReduceKeepValues) {
  const int64_t n = 1 << 20;
  auto a = b_->Allocate(n * 4), c = b_->Allocate(n * 4);
  ASSERT_TRUE(a.ok() && c.ok());
  ASSERT_TRUE(b_->Fill(*a, DataType::kFloat32, 3.0).ok());
  ASSERT_TRUE(b_->Copy(*c, *a, n * 4, 0).ok());
  ASSERT_TRUE(b_->AllReduce(kWorldComm, *c, *c, n, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  ASSERT_TRUE(b_->Synchronize(0).ok());
  std::vector<float> host(static_cast<size_t>(n));
  ASSERT_TRUE(b_->CopyToHost(host.data(), *c, n * 4).ok());
  for (float v : host) ASSERT_EQ(v, 3.0f);
}

TEST_F(CudaBackendTest, GatedBf16GemmRunsAtAPlausibleRate) {
  ASSERT_TRUE(b_->CheckGemm(GemmPrecision::kBf16).ok() ||
              b_->CheckGemm(GemmPrecision::kBf16).code() == StatusCode::kUnavailable);
  if (!b_->CheckGemm(GemmPrecision::kBf16).ok()) GTEST_SKIP() << "no bf16 on this GPU";
  const int64_t s = 8192;
  auto a = b_->Allocate(s * s * 2), bb = b_->Allocate(s * s * 2), c = b_->Allocate(s * s * 2);
  ASSERT_TRUE(a.ok() && bb.ok() && c.ok());
  ASSERT_TRUE(b_->FillRandom(*a, DataType::kBFloat16, 1).ok());
  ASSERT_TRUE(b_->FillRandom(*bb, DataType::kBFloat16, 2).ok());
  GemmArgs g{s, s, s, GemmPrecision::kBf16, *a, *bb, *c, 0};
  ASSERT_TRUE(b_->Gemm(g).ok());
  auto e0 = b_->CreateEvent(), e1 = b_->CreateEvent();
  ASSERT_TRUE(e0.ok() && e1.ok());
  ASSERT_TRUE(b_->HoldStreams({0}).ok());
  ASSERT_TRUE(b_->RecordEvent(*e0, 0).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b_->Gemm(g).ok());
  ASSERT_TRUE(b_->RecordEvent(*e1, 0).ok());
  ASSERT_TRUE(b_->ReleaseStreams().ok());
  ASSERT_TRUE(b_->Synchronize(0).ok());
  auto dt = b_->ElapsedSeconds(*e0, *e1);
  ASSERT_TRUE(dt.ok());
  const double tflops = 10 * 2.0 * s * s * s / *dt / 1e12;
  EXPECT_GT(tflops, 50.0);    // any bf16 tensor-core GPU
  EXPECT_LT(tflops, 5000.0);  // and no clock error
  std::printf("bf16 8192^3 GEMM: %.1f TFLOP/s\n", tflops);
}

TEST_F(CudaBackendTest, OutOfMemoryIsAStatus) {
  auto mem = b_->GetMemoryInfo();
  ASSERT_TRUE(mem.ok());
  auto r = b_->Allocate(mem->total_bytes * 2);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsOutOfMemory(r.status())) << r.status().ToString();
  EXPECT_TRUE(b_->Allocate(1 << 20).ok());  // the failure did not poison the context
}

}  // namespace
}  // namespace paratune::backend
