// cli/validate_beyond.h: the non-transformer half of `paratune validate`
// (--beyond, or beyond_runs.json given as --runs or --calibration).
#pragma once

#include <string>

#include "cli/commands.h"
#include "common/json.h"

namespace paratune::cli {

// Prints every row of a beyond_runs.json document predicted vs measured
// (samples per second), the rows left out and why, and the error by
// benchmark, by source, by GPU generation, by GPU-count decade and by
// framework (format
// "table" or "json": paratune.beyond_validation/v1).
int RunValidateBeyond(const Json& doc, const std::string& format, Io io);

}  // namespace paratune::cli
