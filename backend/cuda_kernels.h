// backend/cuda_kernels.h: the few device kernels the CUDA backend
// needs, behind plain host functions (implemented in cuda_kernels.cu, the only
// file nvcc compiles): the nvbandwidth-style stream gate, buffer fills and a
// lowered convolution's patch gather and scatter.
// Errors come back as cudaError_t from the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/conv_lowering.h"

namespace paratune::backend::cuda {

// Element encodings the fills understand (mirrors backend::DataType).
enum class FillType : int { kInt8 = 0, kFloat16, kBFloat16, kFloat32, kFloat64, kFp8E4M3 };

// Enqueues a one-thread kernel on `stream` that spins until *flag ≥ `generation`
// (`flag` is a host-mapped int the host raises) or `timeout_ns` of GPU global
// time have passed, so work queued behind it starts when the host releases it.
cudaError_t LaunchSpinWait(cudaStream_t stream, const volatile int* flag, int generation,
                           uint64_t timeout_ns);

// Sets `count` elements at `data` to `value`, converted to `type`.
cudaError_t LaunchFill(cudaStream_t stream, void* data, int64_t count, FillType type, float value);

// Sets `count` elements to uniform values in [-1, 1) from `seed` (SplitMix64 per index).
cudaError_t LaunchFillRandom(cudaStream_t stream, void* data, int64_t count, FillType type,
                             uint64_t seed);

// A lowered convolution's patch gather and its inverse (conv_lowering.h) for
// samples [n0, n0 + nn), elements of `type` (kFloat16, kBFloat16 or
// kFloat32; others are cudaErrorInvalidValue). Col2Im writes every element of
// those samples of dx, summing in fp32.
cudaError_t LaunchIm2Col(cudaStream_t stream, const ConvLowering& g, const void* x, int64_t n0, int64_t nn,
                         void* col, FillType type);
cudaError_t LaunchCol2Im(cudaStream_t stream, const ConvLowering& g, const void* col, int64_t n0, int64_t nn,
                         void* dx, FillType type);

}  // namespace paratune::backend::cuda
