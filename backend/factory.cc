#include "backend/factory.h"

#include "backend/module.h"

namespace paratune::backend {

std::vector<std::string> CompiledBackends() {
  std::vector<std::string> names;
#if PARATUNE_BACKEND_CUDA
  names.push_back("cuda");
#endif
#if PARATUNE_BACKEND_MPI
  names.push_back("mpi-cpu");
#endif
  names.push_back("fake");
  return names;
}

namespace {

Result<std::unique_ptr<Backend>> CreateBare(const BackendOptions& o) {
  if (o.name == "fake") {
    FakeConfig config = o.fake;
    config.world_size = 1;
    std::unique_ptr<Backend> b = FakeWorld::Create(config)->MakeRank(0);
    return b;
  }
  if (o.name == "mpi-cpu") {
#if PARATUNE_BACKEND_MPI
    PT_ASSIGN_OR_RETURN(const ModuleApi* mpi, LoadBackendModule("mpi"));
    return mpi->create_mpi_cpu(o.mpi_cpu);
#else
    return Status::Unavailable(
        "this paratune was built without MPI: the mpi-cpu backend is absent");
#endif
  }
  if (o.name == "cuda") {
#if PARATUNE_BACKEND_CUDA
    std::unique_ptr<Bootstrap> boot;
    if (o.cuda_use_mpi.value_or(LaunchedUnderMpi())) {
#if PARATUNE_BACKEND_MPI
      PT_ASSIGN_OR_RETURN(const ModuleApi* mpi, LoadBackendModule("mpi"));
      PT_ASSIGN_OR_RETURN(boot, mpi->create_mpi_bootstrap());
#else
      if (o.cuda_use_mpi.value_or(false)) {
        return Status::Unavailable(
            "this paratune was built without MPI: multi-process cuda runs "
            "need it (one process per GPU)");
      }
#endif
    }
    PT_ASSIGN_OR_RETURN(const ModuleApi* cuda, LoadBackendModule("cuda"));
    if (!boot) boot = CreateSingleProcessBootstrap();
    return cuda->create_cuda(std::move(boot), o.cuda);
#else
    return Status::Unavailable(
        "this paratune was built without CUDA and NCCL: the cuda backend is absent");
#endif
  }
  return Status::InvalidArgument("unknown backend '" + o.name + "' (cuda, mpi-cpu, fake)");
}

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  PT_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBare(options));
  if (options.fault)
    return std::unique_ptr<Backend>(new FaultBackend(std::move(b), *options.fault));
  return b;
}

}  // namespace paratune::backend
