// backend/bootstrap.h: the out-of-band process group that starts a
// multi-process backend (nccl-tests' bootstrap: MPI ranks, rank 0 makes the NCCL
// unique id and broadcasts it) and carries the host control plane (barriers,
// max-reduction of timings, gathers of host names). Two implementations: MPI
// (mpi_bootstrap.h, when MPI is found) and a single process. Depends on
// common/status.h only, so the CUDA backend can use it without our -dev packages.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace paratune::backend {

// A group of processes that can exchange bytes out of band. Every member calls
// each collective in the same order. Thread-compatible: one thread drives it.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi" | "single".
  virtual std::string kind() const = 0;
  // Library versions ("mpi" → "Open MPI v4.1.4 ..."), empty for a single process.
  virtual std::map<std::string, std::string> Versions() const = 0;
  virtual Status Barrier() = 0;
  // Copies `bytes` bytes at `data` on `root` to `data` on every rank.
  virtual Status Broadcast(void* data, int64_t bytes, int root) = 0;
  // Gathers `bytes` bytes from each rank into `all` (size() × bytes), by rank.
  virtual Status AllGather(const void* mine, int64_t bytes, void* all) = 0;
  // Element-wise max over ranks, in place, of `n` doubles.
  virtual Status AllReduceMax(double* values, int n) = 0;
  // Terminates every process of the group (MPI_Abort); no effect for one process.
  virtual void Abort(int exit_code) = 0;
};

// A group of one: every collective is a local copy.
std::unique_ptr<Bootstrap> CreateSingleProcessBootstrap();

// Gathers one string of any length per rank, indexed by rank.
Result<std::vector<std::string>> AllGatherStrings(Bootstrap& boot, const std::string& mine);

// Where the ranks live: host name per rank, and this rank's place among the
// ranks on its host (ranks on a host are numbered in world-rank order, like
// nccl-tests' host-hash local rank).
struct HostLayout {
  std::vector<std::string> hosts;  // by world rank
  int local_rank = 0;
  int local_size = 1;
};
Result<HostLayout> DiscoverHostLayout(Bootstrap& boot);

// Whether a launch can give each rank a device of its own: kInvalidArgument
// (a launch that cannot work; retrying does not help) when `requested_device`
// ≥ 0 is not below `devices`, or when no device is requested and the host of
// `rank` runs more ranks than it has devices (the message names the host and
// the launcher flag). `devices` is the count visible on this host.
Status CheckOneDevicePerRank(const HostLayout& layout, int rank, int devices, int requested_device);

// True when this process looks launched by mpirun/srun (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_RANK or SLURM_PROCID in the environment). Reads the
// environment only, so it needs no MPI library.
bool LaunchedUnderMpi();

// This machine's host name (gethostname), "localhost" when it cannot be read.
std::string LocalHostName();

}  // namespace paratune::backend
