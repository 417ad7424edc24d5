// backend/mpi_cpu.h: a Backend made of real MPI processes on CPUs.
// Buffers are host memory (Allocate refuses beyond this rank's share of
// MemAvailable: the "device memory" of a CPU rank), collectives are MPI collectives on
// communicators split with MPI_Comm_split, GEMMs run through Eigen (fp32; one thread per rank, so
// oversubscribed loopback runs stay honest). Every op runs to completion when it is enqueued, so
// streams are in-order and events are wall clock stamps. It makes multi-rank runs, timings
// included, real on any machine. Compiled when MPI is found.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace paratune::backend {

struct MpiCpuOptions {
  // Device memory this rank may allocate, bytes; 0 = MemAvailable / ranks on this host.
  int64_t memory_limit_bytes = 0;
};

// Initialises MPI if needed. kUnavailable when MPI cannot start.
Result<std::unique_ptr<Backend>> CreateMpiCpuBackend(const MpiCpuOptions& options);

}  // namespace paratune::backend
