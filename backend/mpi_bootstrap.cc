#include "backend/mpi_bootstrap.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace paratune::backend {
namespace {

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiBootstrap final : public Bootstrap {
 public:
  explicit MpiBootstrap(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiBootstrap() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }
  std::map<std::string, std::string> Versions() const override {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string v(lib, static_cast<size_t>(len));
    while (!v.empty() && (v.back() == '\n' || v.back() == '\0')) v.pop_back();
    if (size_t nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
    int major = 0, minor = 0;
    MPI_Get_version(&major, &minor);
    return {{"mpi", v}, {"mpi_standard", std::to_string(major) + "." + std::to_string(minor)}};
  }
  Status Barrier() override { return MpiCheck(MPI_Barrier(comm_), "MPI_Barrier"); }
  Status Broadcast(void* data, int64_t bytes, int root) override {
    if (bytes > INT_MAX) return Status::InvalidArgument("bootstrap broadcast over 2 GiB");
    return MpiCheck(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  Status AllGather(const void* mine, int64_t bytes, void* all) override {
    if (bytes > INT_MAX) return Status::InvalidArgument("bootstrap gather over 2 GiB");
    return MpiCheck(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all,
                                  static_cast<int>(bytes), MPI_BYTE, comm_),
                    "MPI_Allgather");
  }
  Status AllReduceMax(double* values, int n) override {
    return MpiCheck(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_MAX, comm_),
                    "MPI_Allreduce(max)");
  }

  void Abort(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

Status MpiCheck(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return Status::Internal("MPI error in " + what + ": " +
                          std::string(msg, static_cast<size_t>(len)));
}

Result<std::unique_ptr<Bootstrap>> CreateMpiBootstrap() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return Status::Unavailable("MPI was already finalised in this process");
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      return Status::Unavailable("MPI_Init_thread failed");
    }
    std::atexit(FinalizeAtExit);
  }
  MPI_Comm comm = MPI_COMM_NULL;
  PT_RETURN_IF_ERROR(MpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup"));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Bootstrap>(new MpiBootstrap(comm));
}

}  // namespace paratune::backend
