// elastic/failure_policy.h: what a node failure costs a run, under the three
// things an operator can do about it (docs/model.md, "Spares, waiting or
// continuing on fewer GPUs"):
//   spare   a hot spare node takes the failed node's place: the restart and
//           the load of the checkpoint, as the goodput model prices every
//           failure (planner/goodput.h); the spares sit idle and are paid for;
//   wait    no spare: the job waits for the node's repair, then restarts;
//   shrink  continue at once on the GPUs left, in replan's best layout for
//           them (elastic/replan.h, its reshard map gives the load), at its
//           relative throughput until the node is back, then restart onto
//           the full allocation.
// Each is priced as Daly's restart cost per failure (everything a failure
// costs besides the lost work, which is the same under all three), so the
// effective fraction, the time to train and the GPU-hours follow as for the
// plan itself. Pure except ShrinkOnNodeLoss, which runs replan's search.
#pragma once

#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "elastic/replan.h"
#include "planner/goodput.h"

namespace paratune::planner {

// The probability that the spare pool covers every node in repair at once.
inline constexpr double kSpareCoverage = 0.99;

// Continuing on the GPUs a lost node leaves: replan's rank-1 candidate there.
struct ShrinkOption {
  int gpus = 0;                       // GPUs the run continues on
  std::string config;                 // its configuration (ConfigText)
  double relative_tokens_per_s = 0;   // its throughput over the running plan's
  double load_s = 0;                  // reading its state from the consolidated checkpoint
  bool keeps_layout = false;          // the running layout with fewer data-parallel replicas
};

// What one policy costs.
struct PolicyOutcome {
  const char* name = "";     // "spare" | "wait" | "shrink"
  // Seconds of full-speed training each failure costs beyond the lost work:
  // Daly's restart cost R under this policy.
  double per_failure_s = 0;
  int spare_nodes = 0;       // idle nodes held (the spare policy only)
  // With a token budget (GoodputOptions::enabled): Daly's effective fraction
  // at the plan's interval, the expected wall time, and the GPU-hours and cost
  // with the spares included.
  double effective_fraction = 0;
  double time_to_train_s = 0;
  double gpu_hours = 0;
  double cost = 0;
};

struct FailurePolicies {
  double repair_s = 0;        // a node's time to return
  double restart_s = 0;       // relaunch and warm-up (GoodputOptions::restart_s)
  double load_s = 0;          // the running layout's checkpoint read
  double job_mtbf_s = 0;      // the job's mean time between failures
  double nodes_in_repair = 0; // the mean number of nodes in repair at once
  bool budgeted = false;      // time to train and GPU-hours were computed
  std::optional<ShrinkOption> shrink_to;  // absent: nothing fits on the GPUs left
  PolicyOutcome spare, wait;
  std::optional<PolicyOutcome> shrink;
  // The policy that trains soonest (by per-failure cost without a budget)
  // and, with a budget, the one with the fewest GPU-hours, spares included
  // ("" without one: the spares' hours need the run's length).
  const char* soonest = "";
  const char* fewest_gpu_hours = "";
};

// The three policies for a plan of `job` whose run to the budget is `g`
// (GoodputOf under `o`; o.tokens may be 0, then per-failure costs only),
// a failed node returning after o.repair_s.
// REQUIRES: o.repair_s >= 0, job.cluster.gpus_per_node >= 1.
FailurePolicies CompareFailurePolicies(const Job& job, const Goodput& g, const GoodputOptions& o,
                                       const std::optional<ShrinkOption>& shrink);

// The policies of a plan's rank 1 (RankForTrust under `options`) for the
// plan's section: its shrink option from ShrinkOnNodeLoss through `run`.
// nullopt without a budget (options.goodput) or a fitting plan.
Result<std::optional<FailurePolicies>> RankOnePolicies(const PlanSection& s,
                                                       const SearchOptions& options,
                                                       const SearchRunner& run = nullptr);

// The spare nodes that cover every node in repair with probability
// kSpareCoverage, repairs overlapping as a Poisson count of mean
// `nodes_in_repair` (failures at exponential times, repairs of fixed length:
// an M/G/infinity queue).
int SpareNodesFor(double nodes_in_repair);

// Replan's answer to losing the job's last node: its rank-1 candidate on the
// GPUs left (whole-node counts below them too) with the load from the
// consolidated checkpoint. nullopt when the job has one node or nothing fits.
Result<std::optional<ShrinkOption>> ShrinkOnNodeLoss(const Job& job, const ParallelConfig& c,
                                                     double fs_GBps, const SearchRunner& run = nullptr);
// The same from a replan that has already run (candidate `rank`, 1-based,
// with its reshard map): what `paratune replan --lost-nodes` computes.
std::optional<ShrinkOption> ShrinkFromReplan(const ReplanResult& r, int rank);

// {"repair_s", "repair_assumed", "restart_s", "load_s", "job_mtbf_h",
//  "nodes_in_repair", "shrink_to": {gpus, config, relative_tokens_per_s, load_s,
//  keeps_layout} | null, "policies": [{name, per_failure_min, spare_nodes,
//  effective_fraction?, time_to_train_days?, gpu_hours?, cost?}],
//  "soonest", "fewest_gpu_hours" (null without a budget)}.
OrderedJson FailurePoliciesToJson(const FailurePolicies& f);

}  // namespace paratune::planner
