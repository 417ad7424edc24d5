// elastic/network_replan.h: replanning a network's run (U-Nets, DiTs, CNNs;
// planner/network_request.h) after nodes are lost or added: the running
// layout priced as it runs, then the network's layout search on every GPU
// count of whole nodes from those available down to half of them (at most
// 64 counts, the largest first), the global batch kept so the optimisation
// does not change; the fastest count's plans are the answer's.
//
// Request (the "from" is a paratune.network_plans/v1 document; one of gpus,
// lost_nodes, add_nodes):
//   {"from": {...}, "rank": 1, "gpus": N | "lost_nodes": K | "add_nodes": K,
//    "top": 5}
// Answer, paratune.network_replan/v1:
//   {schema, network, cluster, global_batch, running {gpus, layout, step_s,
//    samples_per_s, ...}, available_gpus, counts [{gpus, refused_over_memory,
//    plan | null, relative_step_time, relative_samples_per_s}],
//    plans: the paratune.network_plans/v1 document of the fastest count (what
//    emit and confirm read), or null when no count has a layout that fits}
#pragma once

#include <functional>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

inline constexpr const char* kNetworkReplanSchema = "paratune.network_replan/v1";

// Whether a replan request's "from" is a network's plans.
bool IsNetworkReplan(const Json& request);

// The answer above. InvalidArgument naming the pointer for a request it
// cannot read (unknown keys, not exactly one of gpus/lost_nodes/add_nodes,
// no GPUs left); Timeout when `expired` (asked before each GPU count's
// search) says the caller's time is up.
Result<OrderedJson> NetworkReplanDocument(const Json& request, const std::function<bool()>& expired = nullptr);

}  // namespace paratune::planner
