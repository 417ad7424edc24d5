// backend/mpi_bootstrap.h: the MPI process group (compiled when MPI is
// found). Initialises MPI on first use (MPI_Init_thread, FUNNELED) and
// finalises it at process exit if it was the one to initialise it; all traffic
// runs on a private duplicate of MPI_COMM_WORLD with errors returned, not fatal.
#pragma once

#include <memory>
#include <string>

#include "backend/bootstrap.h"

namespace paratune::backend {

// Fails with kUnavailable when MPI cannot be initialised.
Result<std::unique_ptr<Bootstrap>> CreateMpiBootstrap();

// Ok for MPI_SUCCESS; otherwise kInternal naming the call `what` with MPI's
// own text for the error code `rc`.
Status MpiCheck(int rc, const std::string& what);

}  // namespace paratune::backend
