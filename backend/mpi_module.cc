// The entry point of paratune_backend_mpi.so (backend/module.h): the mpi-cpu
// backend and the MPI bootstrap (which the cuda backend uses under mpirun/srun),
// linked against MPI, which the paratune executable itself does not need.
#include "backend/module.h"
#include "backend/mpi_bootstrap.h"
#include "backend/mpi_cpu.h"

#ifndef PARATUNE_VERSION
#define PARATUNE_VERSION "dev"
#endif

extern "C" __attribute__((visibility("default"))) const paratune::backend::ModuleApi*
paratune_backend_module_v1() {
  static const paratune::backend::ModuleApi api = [] {
    paratune::backend::ModuleApi a;
    a.paratune_version = PARATUNE_VERSION;
    a.module = "mpi";
    a.create_mpi_cpu = &paratune::backend::CreateMpiCpuBackend;
    a.create_mpi_bootstrap = &paratune::backend::CreateMpiBootstrap;
    return a;
  }();
  return &api;
}
