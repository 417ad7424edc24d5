#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda_kernels.h"

namespace paratune::backend::cuda {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void SpinWaitKernel(const volatile int* flag, int generation, uint64_t timeout_ns) {
  const uint64_t start = GlobalTimerNs();
  while (*flag < generation) {
    if (GlobalTimerNs() - start > timeout_ns) break;
  }
}

__device__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__device__ T FromFloat(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __half FromFloat<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __nv_fp8_e4m3 FromFloat<__nv_fp8_e4m3>(float v) {
  return __nv_fp8_e4m3(v);
}
template <>
__device__ int8_t FromFloat<int8_t>(float v) {
  return static_cast<int8_t>(v * 127.0f);
}

template <typename T>
__global__ void FillKernel(T* data, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = FromFloat<T>(value);
  }
}

template <typename T>
__global__ void FillRandomKernel(T* data, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = SplitMix64(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
    data[i] = FromFloat<T>(u);
  }
}

template <typename T>
__device__ float ToFloat(T v) {
  return static_cast<float>(v);
}
template <>
__device__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// One thread per patch element: (sample, output position, kernel offset, channel).
template <typename T>
__global__ void Im2ColKernel(ConvLowering g, const T* x, int64_t n0, int64_t nn, T* col) {
  const int64_t total = nn * g.out_positions * g.window * g.c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.c, r = (i / g.c) % g.window, o = (i / (g.c * g.window)) % g.out_positions;
    const int64_t s = i / (g.c * g.window * g.out_positions);
    const int64_t src = PatchSource(g, o, r);
    col[PatchIndex(g, nn, s, o, r, c)] = src < 0 ? FromFloat<T>(0.0f) : x[((n0 + s) * g.in_positions + src) * g.c + c];
  }
}

// One thread per input element: the sum of its entries in the patches.
template <typename T>
__global__ void Col2ImKernel(ConvLowering g, const T* col, int64_t n0, int64_t nn, T* dx) {
  const int64_t total = nn * g.in_positions * g.c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.c, p = (i / g.c) % g.in_positions, s = i / (g.c * g.in_positions);
    float sum = 0.0f;
    for (int64_t r = 0; r < g.window; ++r) {
      const int64_t o = PatchTarget(g, p, r);
      if (o >= 0) sum += ToFloat<T>(col[PatchIndex(g, nn, s, o, r, c)]);
    }
    dx[((n0 + s) * g.in_positions + p) * g.c + c] = FromFloat<T>(sum);
  }
}

dim3 GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return dim3(static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535));
}

template <template <typename> class Launcher, typename... Args>
cudaError_t Dispatch(FillType type, Args... args) {
  switch (type) {
    case FillType::kInt8:
      return Launcher<int8_t>::Run(args...);
    case FillType::kFloat16:
      return Launcher<__half>::Run(args...);
    case FillType::kBFloat16:
      return Launcher<__nv_bfloat16>::Run(args...);
    case FillType::kFloat32:
      return Launcher<float>::Run(args...);
    case FillType::kFloat64:
      return Launcher<double>::Run(args...);
    case FillType::kFp8E4M3:
      return Launcher<__nv_fp8_e4m3>::Run(args...);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
struct FillLauncher {
  static cudaError_t Run(cudaStream_t stream, void* data, int64_t n, float value) {
    FillKernel<T><<<GridFor(n), 256, 0, stream>>>(static_cast<T*>(data), n, value);
    return cudaGetLastError();
  }
};

template <typename T>
struct FillRandomLauncher {
  static cudaError_t Run(cudaStream_t stream, void* data, int64_t n, uint64_t seed) {
    FillRandomKernel<T><<<GridFor(n), 256, 0, stream>>>(static_cast<T*>(data), n, seed);
    return cudaGetLastError();
  }
};

template <typename T>
struct Im2ColLauncher {
  static cudaError_t Run(cudaStream_t stream, ConvLowering g, const void* x, int64_t n0, int64_t nn, void* col) {
    Im2ColKernel<T><<<GridFor(nn * g.out_positions * g.window * g.c), 256, 0, stream>>>(
        g, static_cast<const T*>(x), n0, nn, static_cast<T*>(col));
    return cudaGetLastError();
  }
};

template <typename T>
struct Col2ImLauncher {
  static cudaError_t Run(cudaStream_t stream, ConvLowering g, const void* col, int64_t n0, int64_t nn, void* dx) {
    Col2ImKernel<T><<<GridFor(nn * g.in_positions * g.c), 256, 0, stream>>>(g, static_cast<const T*>(col), n0,
                                                                            nn, static_cast<T*>(dx));
    return cudaGetLastError();
  }
};

// The element types a convolution runs in.
bool ConvType(FillType type) {
  return type == FillType::kFloat16 || type == FillType::kBFloat16 || type == FillType::kFloat32;
}

}  // namespace

cudaError_t LaunchIm2Col(cudaStream_t stream, const ConvLowering& g, const void* x, int64_t n0, int64_t nn,
                         void* col, FillType type) {
  if (!ConvType(type)) return cudaErrorInvalidValue;
  return Dispatch<Im2ColLauncher>(type, stream, g, x, n0, nn, col);
}

cudaError_t LaunchCol2Im(cudaStream_t stream, const ConvLowering& g, const void* col, int64_t n0, int64_t nn,
                         void* dx, FillType type) {
  if (!ConvType(type)) return cudaErrorInvalidValue;
  return Dispatch<Col2ImLauncher>(type, stream, g, col, n0, nn, dx);
}

cudaError_t LaunchSpinWait(cudaStream_t stream, const volatile int* flag, int generation,
                           uint64_t timeout_ns) {
  SpinWaitKernel<<<1, 1, 0, stream>>>(flag, generation, timeout_ns);
  return cudaGetLastError();
}

cudaError_t LaunchFill(cudaStream_t stream, void* data, int64_t count, FillType type, float value) {
  if (count <= 0) return cudaSuccess;
  return Dispatch<FillLauncher>(type, stream, data, count, value);
}

cudaError_t LaunchFillRandom(cudaStream_t stream, void* data, int64_t count, FillType type,
                             uint64_t seed) {
  if (count <= 0) return cudaSuccess;
  return Dispatch<FillRandomLauncher>(type, stream, data, count, seed);
}

}  // namespace paratune::backend::cuda
