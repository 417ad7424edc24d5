// validation/goodput_checks.h: published effective-training figures and
// checkpoint sizes asked of the goodput model (planner/goodput.h): `paratune
// validate --goodput validation/data/goodput_runs.json`, tests, docs/model.md
// "Time to train". Each check states the figure as published, the model's
// figure, whether it lies within the published figure's precision, and what
// the check assumed where the source is silent. Pure: the document and the
// presets in, checks out.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

inline constexpr const char* kGoodputRunsSchema = "paratune.goodput_runs/v1";
inline constexpr const char* kGoodputChecksSchema = "paratune.goodput_checks/v1";

struct GoodputCheck {
  std::string id;                    // "<row id>/<what>": "llama3-405b/effective_training"
  std::string source;                // the row's source
  std::string published;             // the figure as its source states it
  std::string paratune;              // the model's figure, as text ("91.5 %", "328.3 GiB")
  double value = 0;                  // the model's figure: a fraction, or bytes
  bool within = false;               // inside the published figure's precision
  std::vector<std::string> assumed;  // what the check assumed where the source is silent
};

// The checks of a goodput_runs document: for each run with interruption
// counts, the effective training fraction under Daly's model and the per-GPU
// checkpoint size against the published range; for each published checkpoint
// size, the size in the framework's layout. kInvalidArgument naming the JSON
// pointer when the document is malformed or names an unknown preset.
Result<std::vector<GoodputCheck>> CheckGoodputRuns(const Json& doc);

// {"schema": kGoodputChecksSchema, "checks": [{id, source, published,
// paratune, value, within, assumed}], "within": n, "of": n}.
OrderedJson GoodputChecksToJson(const std::vector<GoodputCheck>& checks);

}  // namespace paratune::planner
