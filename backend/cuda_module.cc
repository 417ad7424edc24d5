// What paratune_backend_cuda.so provides (backend/module.h): the cuda
// backend, linked against the CUDA runtime, cuBLAS, cuBLASLt and NCCL, none of
// which the paratune executable itself needs.
#include "backend/cuda_nccl.h"
#include "backend/module.h"

namespace paratune::backend {

ModuleApi ModuleProvides() {
  return {.module = "cuda",
          .create_cuda = &CreateCudaNcclBackend,
          .cuda_device_count = &CudaDeviceCount};
}

}  // namespace paratune::backend
