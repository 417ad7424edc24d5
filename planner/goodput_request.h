// planner/goodput_request.h: the goodput inputs (planner/goodput_options.h) as
// people and requests write them: a token budget with a decimal suffix, and
// the request form `POST /v1/plans` takes under "goodput" (docs/rest.md).
// Strict: an unknown key or a bad value is an error naming its JSON pointer.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "planner/goodput_options.h"

namespace paratune::planner {

// A token budget: a decimal number (a fraction allowed) with an optional
// decimal suffix k/K (1e3), M (1e6), B or G (1e9), T (1e12): "15T" = 15e12.
// Budgets are quoted in powers of ten, unlike the binary sequence and batch
// counts (common/user_input.h, ParseCount). kInvalidArgument unless the result
// is in (0, 1e18]; the message names `what` and the accepted forms.
Result<double> ParseTokenBudget(const std::string& text, const std::string& what);

// The request form: {"tokens": 15e12 | "15T", "fs_GBps"?, "fs_node_GBps"?,
// "failures_per_gpu_hour"?, "restart_s"?, "checkpoint_save"?: "auto" | "sync",
// "gpu_hour_price"?}; absent keys keep GoodputOptions' defaults. Errors name
// `pointer` + the key (e.g. /goodput/tokens).
Result<GoodputOptions> ParseGoodputRequest(const Json& j, const std::string& pointer);

}  // namespace paratune::planner
