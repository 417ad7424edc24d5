// executor/run/network_confirm.h: `paratune confirm` for a network's plans
// (paratune.network_plans/v1, planner/network_request.h): each of the top
// candidates' layers run on real kernels, layer by layer as one GPU of the
// layout runs them, and compared with the cost model's figure for the same
// layer (paratune.network_run_report/v1, docs/executor.md).
//
// Per candidate, on every process at once (SPMD; rank 0 writes the report):
//   1. capability: the training precision's GEMMs and convolutions on this
//      backend, else "waived" with the reason;
//   2. memory proof: the predicted per-GPU memory allocated and written, else "oom";
//   3. compute: the layer shapes the model prices slowest (forward and
//      backward, times every occurrence of the shape; `layers` of them), each at
//      the micro-batch and the shard one GPU holds (the tensor group's
//      widths, the spatial group's planes), on one stream between events:
//      convolutions as Backend::Conv passes (forward, data gradient unless
//      the layer needs none, weight gradient), linears as their three GEMMs,
//      fused attention as its FLOP-equivalent GEMMs (the forward's two per
//      head, the backward's five), norms, element-wise work and resampling as
//      device copies of the bytes the model streams; warm-up, then the median
//      of `samples` runs, the maximum over ranks, counted for every layer of
//      that shape. Layers not measured are scaled by the measured layers'
//      measured/predicted ratio;
//   4. gradient sync: the data-parallel all-reduce of the gradients' bytes on
//      the processes there are (up to the plan's data-parallel group), timed
//      like nccl-tests; measured when the processes are the plan's group, the
//      model's figure otherwise (halo exchanges and tensor-parallel
//      all-reduces are the model's);
//   5. the step: micro-steps × (measured forward + backward + the model's
//      halo and tensor traffic) + the exposed gradient sync + the optimizer.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/json.h"
#include "common/status.h"
#include "planner/network_request.h"

namespace paratune::executor {

inline constexpr const char* kNetworkRunReportSchema = "paratune.network_run_report/v1";

struct NetworkConfirmOptions {
  int layers = 24;     // distinct layer shapes measured, the slowest predicted first
  int warmup = 1;      // unmeasured runs before each timed pass
  int samples = 5;     // timed runs; each figure is their median
  int comm_iters = 5;  // all-reduce calls per timed sample
  bool touch_memory = true;
  std::string tool;
  std::vector<std::string> argv;
};

struct NetworkConfirmInput {
  planner::NetworkJob job;
  std::vector<planner::NetworkLayout> candidates;  // best first
  std::vector<int> plan_ranks;                     // 1-based place of each in the plans
  std::string measured_gpu;  // the GPU preset the device matched, when not the plan's ("" = the plan's)
};

// The job (the plans document's "request", read as the request was) and the
// first `top_k` plans. InvalidArgument naming the JSON pointer otherwise.
Result<NetworkConfirmInput> NetworkConfirmInputFromPlans(const Json& plans, int top_k);

// Compares like with like: the job's cluster with `gpu_preset`'s GPU, so the
// predictions are for the GPU measured. No-op for "" or the plan's GPU.
Status MeasureNetworkOnDevice(NetworkConfirmInput* in, const std::string& gpu_preset);

// Runs every candidate (module comment) and returns the report on every rank
// (rank 0's carries the measurements). A candidate that cannot run is
// reported "waived", "oom" or "failed" and the next one runs; errors are for
// the run as a whole. Every rank calls it with equal arguments.
Result<OrderedJson> ConfirmNetworkCandidates(backend::Backend& b, const NetworkConfirmInput& in,
                                             const NetworkConfirmOptions& options,
                                             const std::function<void(const std::string&)>& progress);

}  // namespace paratune::executor
