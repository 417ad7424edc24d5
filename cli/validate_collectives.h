// cli/validate_collectives.h: the collective half of `paratune validate`
// (--collectives).
#pragma once

#include <string>

#include "cli/commands.h"
#include "common/json.h"

namespace paratune::cli {

// Prints every table of a nccl_tables.json document predicted vs measured,
// per table, system, collective, rank count and message size, each system
// held out with the pipeline-fill share refitted without it, and the tables
// not asked and why (format "table" or "json":
// paratune.collective_validation/v4, every row included).
int RunValidateCollectives(const Json& doc, const std::string& format, Io io);

}  // namespace paratune::cli
