// executor/run/extrapolate.h: from the measured slice of every pipeline stage
// to one training step, with the cost model's own composition (cost-model.md
// §5) so measured and predicted terms compare one to one:
//
//   per-layer time  = measured compute of the slice's layers / slice layers
//                     + the exposed part of their collectives
//   stage time      = layers per stage × per-layer time + the stage's
//                     embedding / logits (compute and collectives)
//   iteration       = micro-batches × slowest stage
//                     + (pp − 1) / vpp × mean stage          (1F1B bubble)
//                     + pipeline hand-offs (2·vpp per micro-batch)
//                     + data-parallel synchronisation + optimizer step
//
// Exposed collective time comes from the overlapped slice when one was run
// (its wall time beyond compute and synchronous collectives is charged to the
// overlapped collectives, in proportion to their stand-alone times, at most
// (1 + 24/132) × their stand-alone time), else from
// the cost model's overlap rule on the measured times: exposed = max(0, comm −
// window) + 24/132 · min(comm, window). Pure; thread-safe.
#pragma once

#include <array>
#include <vector>

#include "executor/run/report.h"
#include "executor/run/workload.h"
#include "planner/config.h"

namespace paratune::executor {

// A collective hidden behind compute still occupies SMs (NCCL runs one CTA per
// channel: 24 of an H100's 132 SMs): the cost model's kOverlapSmShare.
inline constexpr double kOverlapSmShare = 24.0 / 132.0;

// Exposed seconds of `comm` overlapped with `window` seconds of compute (the
// cost model's rule).
double ExposedSeconds(double comm_s, double window_s);

// One pipeline stage's measured slice.
struct StageTimes {
  const Workload* workload = nullptr;  // the ops (a representative rank of the stage)
  // Seconds per op of workload->ops, all its calls; collectives: the group's
  // time (max over its ranks), compute: the slowest rank of the stage.
  std::vector<double> op_s;
  std::vector<Source> op_source;  // where each op's figure came from
  double slice_s = -1;  // the overlapped slice (layer and stage ops), slowest rank; < 0: not run
};

struct StepEstimate {
  double iteration_s = 0;
  std::array<double, kNumTerms> terms{};
  std::array<Source, kNumTerms> sources{};
  std::vector<double> stage_s;  // one micro-batch through each stage, seconds
  int critical_stage = 0;
  bool overlap_measured = false;  // every stage's overlap came from its overlapped slice
};

// REQUIRES: stages.size() == c.pp, every stage's workload set, op_s and
// op_source sized like its ops. `offload_s` (FPDT host traffic, not measured),
// `host_s` (the training framework's host dispatch stall, which the proxy
// workload does not have) and `comm_ep_s` (the expert-parallel dispatch and
// combine left exposed, which the slice does not issue) are added as modelled.
StepEstimate Extrapolate(const planner::ParallelConfig& c, const std::vector<StageTimes>& stages,
                         double offload_s, double host_s = 0.0, double comm_ep_s = 0.0);

// The extrapolation above in one sentence, for the report.
const char* ExtrapolationText();

}  // namespace paratune::executor
