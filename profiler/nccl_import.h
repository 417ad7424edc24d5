// profiler/nccl_import.h: reads the logs people already have from nccl-tests
// (ecosystem.md §1.1): the plain-text output (one or several tests per file,
// out-of-place and in-place column groups, `#wrong` as N/A, numbers whose
// decimals were dropped to fit, NCCL INFO noise between lines, per-iteration
// columns, timestamps) and the `-J` JSON file. Each test becomes a
// CollectiveSeries with the group size, tier and concurrency read from the
// "#  Rank .. Group .. on <host>" lines (or, when those are missing, from the
// busbw/algbw ratio). Our own report tables use the same columns and import too.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "profiler/measurements.h"

namespace paratune::profiler {

struct ImportOptions {
  bool in_place = false;   // take the in-place columns instead of out-of-place
  std::string collective;  // force the collective when the log does not name it ("" = infer)
};

struct ImportResult {
  std::vector<CollectiveSeries> series;
  std::vector<std::string> hosts;     // by rank, when the log lists the devices
  std::string device;                 // device name of rank 0, when listed
  std::string nccl_tests_version;     // "2.19.6" when stated
  std::string nccl_version;           // NCCL library code as stated ("22809")
  std::vector<std::string> warnings;  // rows skipped (wrong results), busbw mismatches
};

// Parses nccl-tests text output. `name` labels errors ("file.log:42: ...").
// Fails with kParseError on a malformed data row, a "Test failure" line, a log
// without any data row, or a test whose collective cannot be told.
Result<ImportResult> ParseNcclTestsText(const std::string& text, const std::string& name,
                                        const ImportOptions& options);

// Parses a `-J` JSON file (JSON_FILE_VERSION 2 and compatible).
Result<ImportResult> ParseNcclTestsJson(const std::string& text, const std::string& name,
                                        const ImportOptions& options);

// Reads `path` and picks the parser by content (a leading '{' is JSON).
Result<ImportResult> ImportNcclTestsFile(const std::string& path, const ImportOptions& options);

// "all_reduce_perf", "./build/all_gather_perf_mpi", "reduce_scatter" → the
// collective; kInvalidArgument for tests we do not model (broadcast, …).
Result<topology::Collective> CollectiveFromTestName(const std::string& name);

}  // namespace paratune::profiler
