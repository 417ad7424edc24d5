// executor/run/runner.h: runs the top candidates of a plan on a Backend and
// reports measured against predicted (`paratune confirm`). SPMD: every process
// of the world calls ConfirmCandidates with the same input; rank 0 gets the
// report (and writes it after every candidate when out_path is set).
//
// Per candidate, in phases that every rank enters in the same order (a rank
// that fails keeps taking part in the host-side barriers and reductions so the
// world stays in step; after each phase the ranks agree on an outcome):
//   1. capability check (GEMM precision, collective types): else "waived";
//   2. communicators: one per parallel dimension, split from the world
//      (ncclCommSplit / MPI_Comm_split semantics);
//   3. memory proof: the model's per-GPU memory (params, grads, optimizer
//      state, activations, buffers) allocated and touched through the
//      backend, the workload's buffers carved from it: "oom" when it does not fit;
//   4. compute: each role's GEMMs and memory-bound kernels on one stream,
//      an event after each, warm-up then `samples` runs, median per op;
//   5. collectives: every distinct collective of the workload timed alone on
//      its communicator nccl-tests style (barrier, `comm_iters` calls between
//      two events, max over ranks, median over samples);
//   6. the overlapped slice (when every plan rank has a process): all layer
//      and stage ops on their streams with their events, all ranks released
//      together, wall time from events (max over the stage's ranks).
// With fewer processes than the plan needs, each distinct rank (first, middle,
// last pipeline stage) runs its compute and memory for real, round by round;
// collectives run on groups of the size that fits and are scaled to the
// plan's groups with the cluster's α-β, or priced by it when nothing fits; the
// report lists measured and modelled parts per candidate. A candidate that
// fails (a rank dies, a collective errors or hangs, memory runs out) is
// reported as such and the next one runs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/json.h"
#include "common/status.h"
#include "executor/run/report.h"
#include "executor/run/workload.h"
#include "planner/request.h"

namespace paratune::executor {

struct ConfirmOptions {
  WorkloadOptions workload;
  int warmup = 1;      // unmeasured runs before each timed pass
  int samples = 5;     // timed runs; each figure is their median
  int comm_iters = 5;  // calls of a collective per timed sample
  // Run phase 6 when every plan rank has a process (else overlap is priced
  // with the cost model's rule on measured times).
  bool overlapped_slice = true;
  bool touch_memory = true;  // write the memory-proof allocations (commits host pages)
  // True for backends whose collectives block until every member arrives and
  // cannot time out (mpi-cpu): a rank whose collective call fails then ends
  // the world through on_fatal / AbortWorld instead of leaving peers blocked.
  bool peers_can_hang = false;
  std::string out_path;  // rank 0 rewrites the report here after every candidate ("" = none)
  std::string tool;      // "paratune 0.1.0"
  std::vector<std::string> argv;
};

// What to confirm: the job and its candidates (best first).
struct ConfirmInput {
  planner::Job job;
  std::vector<planner::ParallelConfig> candidates;
  // The framework that runs each candidate (the plans document's
  // candidates[i].framework); empty = job.training.framework for all.
  std::vector<planner::Framework> frameworks;
  std::vector<int> plan_ranks;  // 1-based position of each in the plans document
  std::string profile;          // profile fingerprint the plan used ("" = none)
  // Set by MeasureOnDevice when the device measured is not the plan's GPU:
  // `job` then carries the measured GPU (predictions are made for it) and
  // `plan_job` the job as planned (its predictions are kept beside them).
  std::optional<planner::Job> plan_job;
  // The GPU preset the measured device matched ("" = none matched).
  std::string measured_gpu;
};

// The GPU preset a device is: its display name exactly (case-insensitive),
// else the preset of the same family (a100, h100, h200, gh200, v100, mi250x
// in the device name) whose memory is closest to the device's, within 15 %.
// nullopt when none (a CPU, an unknown GPU, an H100 PCIe or NVL: no preset
// has their peaks).
std::optional<std::string> GpuPresetFor(const backend::DeviceInfo& device);

// Compares like with like: when `measured_gpu` (a GPU preset name) is not the
// plan's GPU, swaps it into the plan's cluster (same nodes, links and network;
// the GPU's memory, peaks, curves) so every prediction the run compares with
// is for the GPU measured, and keeps the plan's job in `plan_job`. No-op when
// they are the same or `measured_gpu` is empty. kInvalidArgument for an
// unknown preset.
Status MeasureOnDevice(ConfirmInput* in, const std::string& measured_gpu);

// The job and the first `top_k` candidates of a plans document
// (paratune.plans/v1). kInvalidArgument naming the JSON pointer when it is
// not one; top_k < 1 is an error; fewer candidates than top_k is not.
Result<ConfirmInput> ConfirmInputFromPlans(const Json& plans, int top_k);
// The job as candidate i runs it: in.job with that candidate's framework.
planner::Job JobFor(const ConfirmInput& in, size_t i);

using ProgressFn = std::function<void(const std::string&)>;
// Reports a failure that ends a multi-process world and returns the exit code.
using FatalFn = std::function<int(const Status&)>;

// Runs every candidate (module comment). Returns the report on every rank;
// only rank 0's carries measurements. Errors are for the run as a whole
// (invalid input, the host control plane failing before the first
// candidate), never for one candidate. `progress` gets one line per step, on
// rank 0 only. Requires every rank to call it with equal arguments.
Result<RunReport> ConfirmCandidates(backend::Backend& b, const ConfirmInput& input,
                                    const ConfirmOptions& options, const ProgressFn& progress,
                                    const FatalFn& on_fatal);

// ---- Building blocks, exposed for tests -------------------------------------------

// Splits the world into the plan's groups of `c` (GroupKindsOf order): world
// rank r < c.world() is plan rank r, ranks beyond sit out (kNoComm).
// Collective over the world. REQUIRES: b.world_size() >= c.world().
Result<std::map<GroupKind, backend::CommId>> SplitPlanGroups(backend::Backend& b,
                                                             const planner::ParallelConfig& c,
                                                             int gpus_per_node);

// Issues every op of `w` once, in order, on fresh streams with the
// dependencies as events, buffers carved from one scratch allocation; then
// synchronises and frees. Collectives go to `comms` (a group missing there is
// skipped). For tests of what a workload asks the backend to do.
Status IssueWorkloadOnce(backend::Backend& b, const Workload& w,
                         const std::map<GroupKind, backend::CommId>& comms);

}  // namespace paratune::executor
