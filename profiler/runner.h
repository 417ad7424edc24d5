// profiler/runner.h: one `paratune profile` run from end to end, on every rank
// (SPMD): create the backend, discover the allocation, decide on rank 0
// whether the cache already holds this cluster's profile (and take the cache
// lock if not), measure, fit, and on rank 0 store the profile in the cache and
// write the output files. The CLI is a thin layer over RunProfile and
// ImportProfile.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/factory.h"
#include "profiler/measurements.h"
#include "profiler/nccl_import.h"
#include "profiler/profile.h"
#include "profiler/sampler.h"
#include "topology/cluster.h"

namespace paratune::profiler {

// The sampling bounds that `paratune profile` and the service's profile jobs
// check before any work starts. Each timed sample enqueues `iters` operations
// whose timing events are held until the sample ends, so memory grows with
// samples × iters: 10,000 × 10,000 took 7.3 GB on the fake backend (73 bytes
// an operation), so the product is capped at 10^6 (about 73 MB).
inline constexpr int64_t kMaxSamples = 1000;
inline constexpr int64_t kMaxIters = 10000;
inline constexpr int64_t kMaxWarmupIters = 10000;
inline constexpr int64_t kMaxSampledOps = 1000000;  // samples × iters

// kInvalidArgument naming the field (`prefix` + "samples", "iters",
// "warmup_iters": "--" for the CLI's flags, "/" for a job's JSON) and its
// range when a value is outside it; -1 = not given (the plan's default).
Status CheckSampling(int64_t samples, int64_t iters, int64_t warmup_iters,
                     const std::string& prefix);

struct ProfileRunOptions {
  backend::BackendOptions backend;  // name, fake/cuda options, fault injection
  bool quick = false;
  std::optional<SizeSweep> sweep;  // -b/-e/-f/-i; default: the backend's plan
  std::optional<int> iters, warmup_iters, samples;
  std::optional<backend::DataType> dtype;
  std::vector<topology::Collective> collectives;  // empty: all five
  bool skip_gemm = false;
  // The cluster description to tie the profile to (--cluster); default: the
  // one discovered from the hardware.
  std::optional<topology::ClusterSpec> cluster;
  std::string out_path;           // the profile (rank 0 writes); required
  std::string report_path;        // nccl-tests-style text report; "" = none
  std::string measurements_path;  // paratune.measurements/v1 JSON; "" = none
  std::string cluster_out_path;   // the cluster description; "" = none
  std::string cache_dir;          // "" = DefaultCacheDir()
  bool use_cache = true;
  bool refresh = false;  // measure even when the cache has a profile
  // When another process holds the cache lock (it is profiling this cluster
  // now), wait up to this many seconds for it to finish and then reuse its
  // profile, instead of failing at once with kFailedPrecondition (0 = no wait).
  double lock_wait_s = 0;
  std::vector<std::string> argv;
  std::string tool;  // "paratune 0.1.0"
};

struct ProfileRunResult {
  int rank = 0;
  int world_size = 1;
  bool from_cache = false;  // the profile came from the cache, nothing measured
  bool waited = false;      // rank 0 waited for another process's profile run
  int nodes = 0;            // hosts in the world (discovery)
  int ranks_per_node = 0;   // the most ranks on any host
  std::string cache_path;   // where it is cached ("" when the cache is off)
  Profile profile;          // valid on rank 0
  std::vector<std::string> warnings;
  std::string report;  // the text report (rank 0)
};

// Runs the whole profile. `progress` receives one line per step on rank 0
// (nothing on other ranks). Errors: kUnavailable when the backend cannot run
// here (no GPU, not compiled), kFailedPrecondition when another process holds
// the cache lock, the measurement's own Status when a rank or a collective
// fails (the cache is left untouched). On a failure in a multi-process world,
// `on_fatal` (when set) reports the Status and returns an exit code, and the
// backend then ends every process with it (MPI_Abort) so that no peer hangs.
Result<ProfileRunResult> RunProfile(const ProfileRunOptions& options,
                                    const std::function<void(const std::string&)>& progress,
                                    const std::function<int(const Status&)>& on_fatal);

struct ImportRunOptions {
  std::vector<std::string> logs;
  ImportOptions import;
  std::optional<topology::ClusterSpec> cluster;  // --cluster: tie and fingerprint the profile
  std::string out_path;
  std::vector<std::string> argv;
  std::string tool;
};

// Imports nccl-tests logs (text or -J JSON) and fits them into a profile,
// written to out_path. Warnings (skipped rows, series that could not be
// fitted, busbw that does not match the factor) come back in `warnings`.
Result<Profile> ImportProfile(const ImportRunOptions& options, std::vector<std::string>* warnings);

}  // namespace paratune::profiler
