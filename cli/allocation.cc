#include "cli/allocation.h"

#include "common/strings.h"

namespace paratune::cli {
namespace {

// A positive count from `name`; nullopt when unset or empty.
Result<std::optional<int>> Count(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::optional<int>();
  std::string s = v;
  // SLURM_GPUS_PER_NODE may carry a type: "h100:8"; SLURM_TASKS_PER_NODE-like
  // "4(x2)" is not read here.
  if (auto colon = s.rfind(':'); colon != std::string::npos) s = s.substr(colon + 1);
  auto n = ParseInt(s, name);
  if (!n.ok() || *n < 1 || *n > (1 << 24)) {
    return Status::InvalidArgument(std::string(name) + "='" + v + "' is not a positive integer");
  }
  return std::optional<int>(static_cast<int>(*n));
}

Allocation Make(int nodes, int per_node, std::string source) {
  Allocation a;
  a.nodes = nodes;
  a.gpus_per_node = per_node;
  a.gpus = nodes * per_node;
  a.source = std::move(source);
  return a;
}

}  // namespace

Result<std::optional<Allocation>> AllocationFromEnv(const EnvLookup& env, int default_gpus_per_node) {
  // Slurm.
  PT_ASSIGN_OR_RETURN(auto job_nodes, Count(env, "SLURM_JOB_NUM_NODES"));
  PT_ASSIGN_OR_RETURN(auto nnodes, Count(env, "SLURM_NNODES"));
  if (job_nodes || nnodes) {
    const int nodes = job_nodes ? *job_nodes : *nnodes;
    const char* nodes_var = job_nodes ? "SLURM_JOB_NUM_NODES" : "SLURM_NNODES";
    PT_ASSIGN_OR_RETURN(auto on_node, Count(env, "SLURM_GPUS_ON_NODE"));
    if (on_node) return std::optional(Make(nodes, *on_node, std::string("slurm (") + nodes_var + ", SLURM_GPUS_ON_NODE)"));
    PT_ASSIGN_OR_RETURN(auto per_node, Count(env, "SLURM_GPUS_PER_NODE"));
    if (per_node) return std::optional(Make(nodes, *per_node, std::string("slurm (") + nodes_var + ", SLURM_GPUS_PER_NODE)"));
    PT_ASSIGN_OR_RETURN(auto tasks_per_node, Count(env, "SLURM_NTASKS_PER_NODE"));
    if (tasks_per_node) {
      return std::optional(Make(nodes, *tasks_per_node,
                                std::string("slurm (") + nodes_var + ", SLURM_NTASKS_PER_NODE: one task per GPU)"));
    }
    PT_ASSIGN_OR_RETURN(auto tasks, Count(env, "SLURM_NTASKS"));
    if (tasks) {
      if (*tasks % nodes != 0) {
        return Status::InvalidArgument("SLURM_NTASKS=" + std::to_string(*tasks) + " is not a multiple of " +
                                       nodes_var + "=" + std::to_string(nodes));
      }
      return std::optional(Make(nodes, *tasks / nodes,
                                std::string("slurm (") + nodes_var + ", SLURM_NTASKS: one task per GPU)"));
    }
    return std::optional(Make(nodes, default_gpus_per_node,
                              std::string("slurm (") + nodes_var + "; no GPU count in the job, " +
                                  std::to_string(default_gpus_per_node) + " per node from the cluster)"));
  }
  // torchrun.
  PT_ASSIGN_OR_RETURN(auto world, Count(env, "WORLD_SIZE"));
  if (world) {
    PT_ASSIGN_OR_RETURN(auto local, Count(env, "LOCAL_WORLD_SIZE"));
    const int per_node = local ? *local : *world;
    if (*world % per_node != 0) {
      return Status::InvalidArgument("WORLD_SIZE=" + std::to_string(*world) + " is not a multiple of LOCAL_WORLD_SIZE=" +
                                     std::to_string(per_node));
    }
    return std::optional(Make(*world / per_node, per_node, "torchrun (WORLD_SIZE, LOCAL_WORLD_SIZE)"));
  }
  // Open MPI.
  PT_ASSIGN_OR_RETURN(auto ompi, Count(env, "OMPI_COMM_WORLD_SIZE"));
  if (ompi) {
    PT_ASSIGN_OR_RETURN(auto local, Count(env, "OMPI_COMM_WORLD_LOCAL_SIZE"));
    const int per_node = local ? *local : *ompi;
    if (*ompi % per_node != 0) {
      return Status::InvalidArgument("OMPI_COMM_WORLD_SIZE=" + std::to_string(*ompi) +
                                     " is not a multiple of OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(per_node));
    }
    return std::optional(Make(*ompi / per_node, per_node, "openmpi (OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)"));
  }
  // MPICH / Cray PMI.
  PT_ASSIGN_OR_RETURN(auto pmi, Count(env, "PMI_SIZE"));
  if (pmi) {
    PT_ASSIGN_OR_RETURN(auto local, Count(env, "MPI_LOCALNRANKS"));
    if (!local) {
    PT_ASSIGN_OR_RETURN(local, Count(env, "PALS_LOCAL_SIZE"));
  }
    const int per_node = local ? *local : *pmi;
    if (*pmi % per_node != 0) {
      return Status::InvalidArgument("PMI_SIZE=" + std::to_string(*pmi) + " is not a multiple of the local rank count " +
                                     std::to_string(per_node));
    }
    return std::optional(Make(*pmi / per_node, per_node, "pmi (PMI_SIZE)"));
  }
  return std::optional<Allocation>();
}

Result<std::optional<Allocation>> AllocationFromFlags(const std::optional<std::string>& gpus,
                                                      const std::optional<std::string>& nodes,
                                                      const std::optional<std::string>& gpus_per_node,
                                                      int default_gpus_per_node) {
  if (!gpus && !nodes && !gpus_per_node) return std::optional<Allocation>();
  auto positive = [](const std::string& v, const char* name) -> Result<int> {
    auto n = ParseInt(v, name);
    if (!n.ok() || *n < 1 || *n > (1 << 24)) {
      return Status::InvalidArgument(std::string(name) + " must be a positive integer, not '" + v + "'");
    }
    return static_cast<int>(*n);
  };
  if (gpus) {
    if (nodes || gpus_per_node) {
      return Status::InvalidArgument("give --gpus, or --nodes with --gpus-per-node, not both");
    }
    PT_ASSIGN_OR_RETURN(int n, positive(*gpus, "--gpus"));
    const int per = std::max(1, default_gpus_per_node);
    if (n <= per) return std::optional(Make(1, n, "flags (--gpus)"));
    if (n % per != 0) {
      return Status::InvalidArgument("--gpus " + std::to_string(n) + " is not a whole number of " +
                                     std::to_string(per) + "-GPU nodes; give --nodes and --gpus-per-node");
    }
    return std::optional(Make(n / per, per, "flags (--gpus)"));
  }
  int n_nodes = 1, per = default_gpus_per_node;
  if (nodes) {
    PT_ASSIGN_OR_RETURN(n_nodes, positive(*nodes, "--nodes"));
  }
  if (gpus_per_node) {
    PT_ASSIGN_OR_RETURN(per, positive(*gpus_per_node, "--gpus-per-node"));
  }
  return std::optional(Make(n_nodes, per, "flags (--nodes, --gpus-per-node)"));
}

}  // namespace paratune::cli
