// The cuda backend (GPU tier): compiled wherever CUDA and NCCL are found,
// skipped when this machine has no usable device (no driver, no GPU). On a GPU
// it checks real results, the lowered convolution against the host one, and
// that a large bf16 GEMM runs at a plausible rate.
#include "backend/cuda_nccl.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "backend/conv.h"
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

// The device's lowered convolution (our im2col and col2im kernels, cuBLAS per
// group) against the host one, which conv_test checks against the definition:
// every pass of a strided, grouped 2D and a 3D convolution in fp32, with a
// workspace of one sample so the chunks and the weight gradient's sum run.
TEST_F(CudaBackendTest, ConvolutionPassesMatchTheHostConvolution) {
  struct Shape {
    int dims;
    int64_t n, c, k;
    std::array<int64_t, 3> extent;
    int kernel, stride, groups;
  };
  for (const Shape& t : {Shape{2, 3, 8, 12, {9, 7, 1}, 3, 2, 4}, Shape{3, 2, 4, 8, {5, 6, 4}, 3, 1, 1}}) {
    ConvArgs a;
    a.dims = t.dims, a.n = t.n, a.c = t.c, a.k = t.k, a.extent = t.extent;
    a.kernel = t.kernel, a.stride = t.stride, a.groups = t.groups, a.precision = GemmPrecision::kFp32;
    const int64_t sizes[] = {ConvInputElems(a), ConvFilterElems(a), ConvOutputElems(a),
                             ConvPatchBytesPerSample(a) / 4};
    std::vector<std::vector<float>> host(4);
    std::vector<Buffer> dev(4);
    for (size_t i = 0; i < 4; ++i) {
      host[i].resize(static_cast<size_t>(sizes[i]));
      for (size_t j = 0; j < host[i].size(); ++j) host[i][j] = std::sin(0.37f * static_cast<float>(j + 11 * i));
      auto d = b_->Allocate(sizes[i] * 4);
      ASSERT_TRUE(d.ok());
      dev[i] = *d;
      ASSERT_TRUE(b_->CopyToDevice(dev[i], host[i].data(), sizes[i] * 4).ok());
    }
    for (ConvPass pass : {ConvPass::kForward, ConvPass::kDataGrad, ConvPass::kWeightGrad}) {
      SCOPED_TRACE(ConvPassName(pass));
      a.pass = pass;
      // The written tensor: y (forward), x (data gradient), w (weight gradient).
      const size_t out = pass == ConvPass::kForward ? 2 : pass == ConvPass::kDataGrad ? 0 : 1;
      std::vector<std::vector<float>> mine = host;
      a.x = dev[0], a.w = dev[1], a.y = dev[2], a.workspace = dev[3];
      ASSERT_TRUE(b_->Conv(a).ok());
      ASSERT_TRUE(b_->Synchronize(0).ok());
      std::vector<float> got(mine[out].size());
      ASSERT_TRUE(b_->CopyToHost(got.data(), dev[out], sizes[out] * 4).ok());
      ASSERT_TRUE(b_->CopyToDevice(dev[out], host[out].data(), sizes[out] * 4).ok());  // inputs as before
      ConvArgs h = a;
      auto view = [](std::vector<float>& v, uint64_t id) {
        Buffer x;
        x.id = id, x.bytes = static_cast<int64_t>(v.size() * 4), x.data = v.data();
        return x;
      };
      h.x = view(mine[0], 1), h.w = view(mine[1], 2), h.y = view(mine[2], 3), h.workspace = view(mine[3], 4);
      ASSERT_TRUE(HostConvFp32(h).ok());
      for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], mine[out][j], 1e-3) << "element " << j;
    }
    for (const Buffer& d : dev) ASSERT_TRUE(b_->Free(d).ok());
  }
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
