// The entry point of paratune_backend_cuda.so (backend/module.h): the cuda
// backend, linked against the CUDA runtime, cuBLAS, cuBLASLt and NCCL, none of
// which the paratune executable itself needs.
#include "backend/cuda_nccl.h"
#include "backend/module.h"

#ifndef PARATUNE_VERSION
#define PARATUNE_VERSION "dev"
#endif

extern "C" __attribute__((visibility("default"))) const paratune::backend::ModuleApi*
paratune_backend_module_v1() {
  static const paratune::backend::ModuleApi api = [] {
    paratune::backend::ModuleApi a;
    a.paratune_version = PARATUNE_VERSION;
    a.module = "cuda";
    a.create_cuda = &paratune::backend::CreateCudaNcclBackend;
    a.cuda_device_count = &paratune::backend::CudaDeviceCount;
    return a;
  }();
  return &api;
}
