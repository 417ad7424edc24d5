// planner/plans.h: the ranked-plans document ("schema": "paratune.plans/v1"),
// produced by `paratune plan` and POST /v1/plans, consumed by the executor
// (`paratune confirm`), emitters and the UI. It carries the whole job (model,
// cluster and training specs, not just names) so a consumer can rebuild the
// cost model without the presets.
#pragma once

#include <vector>

#include "common/json.h"
#include "planner/request.h"
#include "planner/search.h"

namespace paratune::planner {

inline constexpr const char* kPlansSchema = "paratune.plans/v1";

// One GPU count's search, for the document.
struct PlanSection {
  Job job;
  SearchResult result;
  double search_time_s = 0;
};

// The document. With one section it is the plan for that GPU count; with
// several (a --gpus range) `candidates` etc. describe the largest count that has
// a feasible plan and `scaling` lists the best plan of every count, with the
// Pareto front of GPUs vs tokens/s marked.
OrderedJson PlansToJson(const std::vector<PlanSection>& sections, const SearchOptions& options);

// Rebuilds the job of a plans document (its "job" object). Strict.
Result<Job> JobFromPlans(const Json& plans);
// The configs of its candidates, best first.
Result<std::vector<ParallelConfig>> CandidatesFromPlans(const Json& plans);

}  // namespace paratune::planner
