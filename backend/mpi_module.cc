// What paratune_backend_mpi.so provides (backend/module.h): the mpi-cpu
// backend and the MPI bootstrap (which the cuda backend uses under mpirun/srun),
// linked against MPI, which the paratune executable itself does not need.
#include "backend/module.h"
#include "backend/mpi_bootstrap.h"
#include "backend/mpi_cpu.h"

namespace paratune::backend {

ModuleApi ModuleProvides() {
  return {.module = "mpi",
          .create_mpi_cpu = &CreateMpiCpuBackend,
          .create_mpi_bootstrap = &CreateMpiBootstrap};
}

}  // namespace paratune::backend
