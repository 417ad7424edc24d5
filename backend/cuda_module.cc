// What paratune_backend_cuda.so provides (backend/module.h): the cuda
// backend, linked against the CUDA runtime, cuBLAS, cuBLASLt and NCCL, none of
// which the paratune executable itself needs.
#include "backend/cuda_nccl.h"
#include "backend/module.h"

namespace paratune::backend {

void FillModuleApi(ModuleApi* api) {
  api->module = "cuda";
  api->create_cuda = &CreateCudaNcclBackend;
  api->cuda_device_count = &CudaDeviceCount;
}

}  // namespace paratune::backend
