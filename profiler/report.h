// profiler/report.h: the human report of a profiling run, in nccl-tests'
// columns so it reads (and re-imports) like an nccl-tests log: per collective
// and group shape a "# Collective test starting" block with the ranks, the
// column header, one row per size and the "# Avg bus bandwidth" line; then the
// fits with their residuals, GEMM rates and efficiencies, the device copy
// bandwidth, the P2P matrix (nvbandwidth's layout) and what was waived.
// Reporters only format: no measuring, no fitting, no I/O.
#pragma once

#include <string>

#include "profiler/measurements.h"
#include "profiler/profile.h"

namespace paratune::profiler {

// The collective tables of `m` only.
std::string FormatCollectiveTables(const Measurements& m);

// The whole report: tables, then (when `profile` is given) its fits.
std::string FormatReport(const Measurements& m, const Profile* profile);

// The fit summary of a profile: one line per collective entry (α, β, residual)
// and per GEMM curve.
std::string FormatFits(const Profile& p);

}  // namespace paratune::profiler
