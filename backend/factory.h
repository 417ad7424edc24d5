// backend/factory.h: makes a Backend by name, optionally wrapped in the
// fault injector. The only place that knows which implementations this build
// compiled (mpi-cpu needs MPI; cuda needs the CUDA toolkit and NCCL). fake
// and fault are in this library; cuda and mpi-cpu are run-time modules
// (module.h) opened on first use, so linking this library pulls in no CUDA,
// NCCL or MPI library.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_nccl.h"
#include "backend/fake.h"
#include "backend/fault.h"
#include "backend/mpi_cpu.h"

namespace paratune::backend {

struct BackendOptions {
  std::string name = "fake";  // "fake" | "mpi-cpu" | "cuda"
  FakeConfig fake;            // name == "fake": a one-rank world (world_size is forced to 1)
  MpiCpuOptions mpi_cpu;
  CudaNcclOptions cuda;
  // cuda: bootstrap through MPI when this build has it and the process was
  // started by mpirun/srun (or always when true / never when false).
  std::optional<bool> cuda_use_mpi;
  std::optional<FaultPlan> fault;  // wrap the backend in a FaultBackend
};

// The backend names this build can create, in preference order.
std::vector<std::string> CompiledBackends();

// kInvalidArgument for an unknown name; kUnavailable when the backend was not
// compiled in, its module or a library the module needs is missing (named:
// "the cuda backend needs libnccl.so.2: not found (...)"), or its hardware
// or runtime is missing (with the reason).
Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace paratune::backend
