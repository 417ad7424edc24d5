// backend/cuda_kernels.h: the few device kernels the CUDA backend
// needs, behind plain host functions (implemented in cuda_kernels.cu, the only
// file nvcc compiles): the nvbandwidth-style stream gate and buffer fills.
// Errors come back as cudaError_t from the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

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

}  // namespace paratune::backend::cuda
