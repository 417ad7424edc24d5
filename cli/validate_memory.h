// cli/validate_memory.h: the memory half of `paratune validate` (--memory).
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/json.h"
#include "validation/memory_runs.h"

namespace paratune::cli {

// Prints every row of a memory_runs.json document predicted vs measured on
// its own metric, the rows that could not be mapped and why, and the error
// per framework and overall (format "table" or "json":
// paratune.memory_validation/v1).
int RunValidateMemory(const Json& doc, const std::string& format, Io io);

// A fraction as a percentage with one decimal: 0.123 -> "12.3%".
std::string Pct(double fraction);

// {rows, median_abs_error, median_signed_error, p90_abs_error}: a group of
// rows' error figures as the validation documents write them.
OrderedJson ErrorStatsJson(const planner::MemoryErrorStats& s);

// One line of a validation table: "  name  rows  median |e|  signed  p90".
void PrintErrorStats(std::ostream& out, const std::string& name, const planner::MemoryErrorStats& s,
                     int name_width);

// A titled table of groups of rows' errors, one PrintErrorStats line each,
// and the same as {group: ErrorStatsJson}.
void PrintErrorGroups(std::ostream& out, const std::string& title,
                      const std::map<std::string, std::vector<double>>& groups, int name_width);
OrderedJson ErrorGroupsJson(const std::map<std::string, std::vector<double>>& groups);

}  // namespace paratune::cli
