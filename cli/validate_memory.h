// cli/validate_memory.h: the memory half of `paratune validate` (--memory).
#pragma once

#include <string>

#include "cli/commands.h"
#include "common/json.h"

namespace paratune::cli {

// Prints every row of a memory_runs.json document predicted vs measured on
// its own metric, the rows that could not be mapped and why, and the error
// per framework and overall (format "table" or "json":
// paratune.memory_validation/v1).
int RunValidateMemory(const Json& doc, const std::string& format, Io io);

}  // namespace paratune::cli
