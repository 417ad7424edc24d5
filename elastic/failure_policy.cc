// Spares, waiting or continuing on fewer GPUs (elastic/failure_policy.h).
#include "elastic/failure_policy.h"

#include <algorithm>
#include <cmath>

namespace paratune::planner {
namespace {

// Prices a policy whose failures each cost `per_failure_s` (Daly's R) and
// which holds `spare_nodes` idle nodes for the whole run.
PolicyOutcome Outcome(const char* name, double per_failure_s, int spare_nodes, const Job& job,
                      const Goodput& g, const GoodputOptions& o, bool budgeted) {
  PolicyOutcome p;
  p.name = name;
  p.per_failure_s = per_failure_s;
  p.spare_nodes = spare_nodes;
  if (!budgeted) return p;
  p.effective_fraction = std::isfinite(g.job_mtbf_s)
                             ? EffectiveFraction(g.interval_s, g.checkpoint.blocking_s,
                                                 per_failure_s, g.job_mtbf_s)
                             : 1.0;
  p.time_to_train_s = g.compute_s / p.effective_fraction;
  const double gpus = job.gpus + static_cast<double>(spare_nodes) * std::max(1, job.cluster.gpus_per_node);
  p.gpu_hours = p.time_to_train_s * gpus / 3600;
  p.cost = p.gpu_hours * o.gpu_hour_price;
  return p;
}

}  // namespace

int SpareNodesFor(double nodes_in_repair) {
  // The smallest k with P(N <= k) >= kSpareCoverage for N ~ Poisson(mean).
  const double mean = std::max(0.0, nodes_in_repair);
  double term = std::exp(-mean), cdf = term;
  int k = 0;
  while (cdf < kSpareCoverage && k < 100000) {
    ++k;
    term *= mean / k;
    cdf += term;
  }
  return k;
}

FailurePolicies CompareFailurePolicies(const Job& job, const Goodput& g, const GoodputOptions& o,
                                       const std::optional<ShrinkOption>& shrink) {
  const double repair_s = o.repair_s;
  FailurePolicies f;
  f.repair_s = repair_s;
  f.restart_s = o.restart_s;
  f.load_s = g.checkpoint.load_s;
  f.job_mtbf_s = g.job_mtbf_s;
  f.budgeted = o.enabled();
  f.shrink_to = shrink;
  // Every job failure takes one node out for `repair_s`: nodes in repair at
  // once are a Poisson count of this mean (Little's law).
  f.nodes_in_repair = std::isfinite(g.job_mtbf_s) && g.job_mtbf_s > 0 ? repair_s / g.job_mtbf_s : 0;
  // The plan's own restart cost: relaunch, load, an unfinished async write.
  const double base = g.restart_s;
  f.spare = Outcome("spare", base, SpareNodesFor(f.nodes_in_repair), job, g, o, f.budgeted);
  f.wait = Outcome("wait", base + repair_s, 0, job, g, o, f.budgeted);
  if (shrink) {
    // Restart on the GPUs left and read their layout instead of the full
    // one, lose (1 - relative throughput) of the repair time, then restart
    // onto the full allocation at a checkpoint (no rework) and read it back.
    const double slow = repair_s * std::max(0.0, 1 - shrink->relative_tokens_per_s);
    const double per = base - g.checkpoint.load_s + shrink->load_s + slow + o.restart_s + g.checkpoint.load_s;
    f.shrink = Outcome("shrink", per, 0, job, g, o, f.budgeted);
  }
  const PolicyOutcome* all[] = {&f.spare, &f.wait, f.shrink ? &*f.shrink : nullptr};
  const PolicyOutcome *soonest = &f.spare, *cheapest = &f.spare;
  for (const PolicyOutcome* p : all) {
    if (p == nullptr) continue;
    if (f.budgeted ? p->time_to_train_s < soonest->time_to_train_s
                   : p->per_failure_s < soonest->per_failure_s) {
      soonest = p;
    }
    if (f.budgeted && p->gpu_hours < cheapest->gpu_hours) cheapest = p;
  }
  f.soonest = soonest->name;
  // The spares' GPU-hours need the run's length: no answer without a budget.
  f.fewest_gpu_hours = f.budgeted ? cheapest->name : "";
  return f;
}

std::optional<ShrinkOption> ShrinkFromReplan(const ReplanResult& r, int rank) {
  if (rank < 1 || rank > static_cast<int>(r.candidates.size())) return std::nullopt;
  const ReplanCandidate& c = r.candidates[rank - 1];
  ShrinkOption s;
  s.gpus = c.gpus;
  s.config = ConfigText(c.candidate.framework, c.candidate.config);
  s.relative_tokens_per_s = c.relative_tokens_per_s;
  s.keeps_layout = c.keeps_layout;
  // After a crash the processes restart and read the saved state: the
  // consolidated checkpoint, not the survivors' memory.
  s.load_s = r.reshard ? r.reshard->load.checkpoint_s : 0;
  return s;
}

Result<std::optional<ShrinkOption>> ShrinkOnNodeLoss(const Job& job, const ParallelConfig& c,
                                                     double fs_GBps, const SearchRunner& run) {
  const int gpn = std::max(1, job.cluster.gpus_per_node);
  if (job.gpus <= gpn) return std::optional<ShrinkOption>();
  ReplanOptions ro;
  ro.lost_nodes = 1;
  ro.max_counts = 1;
  ro.search.top_k = 1;
  ro.reshard_candidate = 1;
  ro.reshard.fs_GBps = fs_GBps;
  PT_ASSIGN_OR_RETURN(const ReplanResult r, Replan(job, c, ro, run));
  return ShrinkFromReplan(r, 1);
}

Result<std::optional<FailurePolicies>> RankOnePolicies(const PlanSection& s,
                                                       const SearchOptions& options,
                                                       const SearchRunner& run) {
  if (!options.goodput.enabled() || s.result.top.empty()) return std::optional<FailurePolicies>();
  const Candidate b = RankForTrust(s.result.pool, s.job, options, 1).front().best;
  Job job = s.job;
  job.training.framework = b.framework;
  PT_ASSIGN_OR_RETURN(const std::optional<ShrinkOption> shrink,
                      ShrinkOnNodeLoss(job, b.config, options.goodput.fs_GBps, run));
  const Goodput g = GoodputOf(job, b.framework, b.config, b.prediction, options.goodput);
  return std::optional<FailurePolicies>(CompareFailurePolicies(job, g, options.goodput, shrink));
}

OrderedJson FailurePoliciesToJson(const FailurePolicies& f) {
  OrderedJson j;
  j["repair_s"] = f.repair_s;
  j["repair_assumed"] = f.repair_s == kDefaultRepairS;
  j["restart_s"] = f.restart_s;
  j["load_s"] = f.load_s;
  j["job_mtbf_h"] = std::isfinite(f.job_mtbf_s) ? OrderedJson(f.job_mtbf_s / 3600) : OrderedJson();
  j["nodes_in_repair"] = f.nodes_in_repair;
  if (f.shrink_to) {
    OrderedJson s;
    s["gpus"] = f.shrink_to->gpus;
    s["config"] = f.shrink_to->config;
    s["relative_tokens_per_s"] = f.shrink_to->relative_tokens_per_s;
    s["load_s"] = f.shrink_to->load_s;
    s["keeps_layout"] = f.shrink_to->keeps_layout;
    j["shrink_to"] = s;
  } else {
    j["shrink_to"] = nullptr;
  }
  OrderedJson list = OrderedJson::array();
  const PolicyOutcome* all[] = {&f.spare, &f.wait, f.shrink ? &*f.shrink : nullptr};
  for (const PolicyOutcome* p : all) {
    if (p == nullptr) continue;
    OrderedJson o;
    o["name"] = p->name;
    o["per_failure_min"] = p->per_failure_s / 60;
    o["spare_nodes"] = p->spare_nodes;
    if (f.budgeted) {
      o["effective_fraction"] = p->effective_fraction;
      o["time_to_train_days"] = p->time_to_train_s / 86400;
      o["gpu_hours"] = p->gpu_hours;
      o["cost"] = p->cost > 0 ? OrderedJson(p->cost) : OrderedJson();
    }
    list.push_back(o);
  }
  j["policies"] = list;
  j["soonest"] = f.soonest;
  j["fewest_gpu_hours"] = f.budgeted ? OrderedJson(f.fewest_gpu_hours) : OrderedJson();
  return j;
}

}  // namespace paratune::planner
