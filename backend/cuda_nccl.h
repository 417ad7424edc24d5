// backend/cuda_nccl.h: the GPU Backend. One process drives one GPU
// (the rank's local rank picks it, as nccl-tests does with -g 1 under
// mpirun/srun). GEMMs run through cuBLAS (cublasGemmEx; FP8 through cuBLASLt,
// TN layout), collectives through NCCL: the world communicator is bootstrapped
// out of band (rank 0 calls ncclGetUniqueId, the Bootstrap broadcasts it, every
// rank calls ncclCommInitRank) and further communicators come from
// ncclCommSplit. Timing uses CUDA events; the stream gate is a spin kernel on a
// host-mapped flag (nvbandwidth). Without a driver or a device every entry
// point returns kUnavailable with the CUDA runtime's reason, never a crash.
// Compiled when CUDA and NCCL are found; depends on common/status.h, the
// bootstrap and the CUDA libraries only.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/bootstrap.h"

namespace paratune::backend {

struct CudaNcclOptions {
  int device = -1;  // CUDA ordinal; -1 = local rank modulo the visible devices
  // Longest a Synchronize may wait before aborting the NCCL communicators and
  // failing with kTimeout (a dead peer otherwise hangs a collective forever), s.
  double timeout_s = 300.0;
  int64_t cublas_workspace_bytes = int64_t{32} << 20;
};

// Visible CUDA devices, or kUnavailable naming why there are none (no driver,
// driver older than the runtime, no device).
Result<int> CudaDeviceCount();

// Creates the backend over `boot` (MPI under a launcher, or a single process).
// REQUIRES: boot != nullptr.
Result<std::unique_ptr<Backend>> CreateCudaNcclBackend(std::unique_ptr<Bootstrap> boot,
                                                       const CudaNcclOptions& options);

}  // namespace paratune::backend
