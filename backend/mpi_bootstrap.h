// backend/mpi_bootstrap.h: the MPI process group (compiled when MPI is
// found). Initialises MPI on first use (MPI_Init_thread, FUNNELED) and
// finalises it at process exit if it was the one to initialise it; all traffic
// runs on a private duplicate of MPI_COMM_WORLD with errors returned, not fatal.
#pragma once

#include <memory>

#include "backend/bootstrap.h"

namespace paratune::backend {

// Fails with kUnavailable when MPI cannot be initialised.
Result<std::unique_ptr<Bootstrap>> CreateMpiBootstrap();

}  // namespace paratune::backend
