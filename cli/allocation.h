// cli/allocation.h: how many nodes and GPUs a job script was given, read the
// way `paratune tune` reads it: explicit flags, then Slurm, then torchrun, then
// Open MPI / PMI variables (ecosystem.md §2.5). Local discovery (the backend's
// processes, or one node of the cluster) is the caller's last resort. Pure:
// the environment comes in as a lookup function.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace paratune::cli {

struct Allocation {
  int nodes = 0;
  int gpus_per_node = 0;
  int gpus = 0;        // nodes × gpus_per_node
  std::string source;  // "flags", "slurm", "torchrun", "openmpi", "pmi", "local", with the variables read
};

// Returns the value of an environment variable, or nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// The allocation from the environment, first source that names one:
//   slurm    SLURM_JOB_NUM_NODES or SLURM_NNODES; GPUs per node from
//            SLURM_GPUS_ON_NODE, else SLURM_GPUS_PER_NODE ("8" or "h100:8"),
//            else SLURM_NTASKS_PER_NODE / SLURM_NTASKS ÷ nodes (one task per GPU)
//   torchrun WORLD_SIZE with LOCAL_WORLD_SIZE
//   openmpi  OMPI_COMM_WORLD_SIZE with OMPI_COMM_WORLD_LOCAL_SIZE
//   pmi      PMI_SIZE with MPI_LOCALNRANKS or PALS_LOCAL_SIZE (else one node)
// nullopt when none is set. A Slurm job that names nodes but no GPU or task
// count gets gpus_per_node = `default_gpus_per_node` (the cluster's), said so
// in `source`. A variable that is set but is not a positive integer, or
// counts that do not divide (WORLD_SIZE % LOCAL_WORLD_SIZE), is
// kInvalidArgument naming the variable.
Result<std::optional<Allocation>> AllocationFromEnv(const EnvLookup& env, int default_gpus_per_node);

// The allocation from flags: --gpus N alone (nodes = ceil(N / default per
// node)), or --nodes with --gpus-per-node (either defaulting to 1 node / the
// cluster's count). nullopt when no flag was given.
Result<std::optional<Allocation>> AllocationFromFlags(const std::optional<std::string>& gpus,
                                                      const std::optional<std::string>& nodes,
                                                      const std::optional<std::string>& gpus_per_node,
                                                      int default_gpus_per_node);

}  // namespace paratune::cli
