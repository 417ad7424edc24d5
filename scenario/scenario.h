// The scenario layer: one resolved job per question, whoever asks it.
//
// A request states some knobs and leaves the rest to defaults. `plan` has
// always resolved the configuration's unstated knobs from the framework's
// policy (its overlaps, Megatron's expert all-to-all overlap), while a bare
// `predict` left them off, so the same layout was priced differently by the
// two. Here every entry point resolves a request the same way, and says what
// it assumed: {key, value, why} for each knob the request did not state.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "planner/request.h"

namespace paratune::scenario {

// One knob the request left unstated: its JSON pointer in the request
// (/training/seq_len, /config/overlap_grad_reduce), the value used, and why.
struct Assumption {
  std::string key;
  OrderedJson value;
  std::string why;
};

// A predict question resolved: the job and the configuration with every knob
// set, and what was assumed.
struct Scenario {
  planner::PredictRequest request;
  std::vector<Assumption> assumed;
};

// Parses a predict request (planner::ParsePredictRequest: strict, errors name
// JSON pointers) and resolves what it leaves unstated: the job's defaults
// (JobAssumptions) and the configuration's framework knobs (ResolveConfig).
Result<Scenario> ResolvePredict(const Json& request);

// The job-level knobs `request` does not state, with the values `job` took
// for them (sequence length, global batch, precision, framework, attention,
// main-gradient dtype, memory headroom): the same for plan and predict. A
// search (`searches_space`) costs every framework of its space when the
// request names none; a prediction takes the default framework.
std::vector<Assumption> JobAssumptions(const Json& request, const planner::Job& job,
                                       bool searches_space = false);

// Sets in `c` each framework knob (planner::WithFrameworkPolicy: the overlap
// switches, the expert all-to-all overlap) that `stated` (the request's
// config object) does not name, to what framework `f` does, as the search
// does for every configuration it ranks; appends one Assumption per knob set.
void ResolveConfig(const Json& stated, planner::Framework f, planner::ParallelConfig* c,
                   std::vector<Assumption>* assumed);

// The documents' `assumed` array: [{key, value, why}] in the order given.
OrderedJson AssumedToJson(const std::vector<Assumption>& assumed);

}  // namespace paratune::scenario
