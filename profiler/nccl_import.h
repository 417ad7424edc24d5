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
  int ranks = 0;           // ranks per group when the log does not list them (0 = infer)
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
// A pasted fragment (no header, one or no "#  Rank" line) is read too: the
// collective comes from the test name, else options.collective, else the
// file name, else the columns where they tell it (a reduction with busbw >
// algbw is all_reduce, with busbw < algbw reduce_scatter); the group size
// from the rank lines when they list two or more, else options.ranks, else
// busbw/algbw (2(n-1)/n for all_reduce, (n-1)/n for the gathers and
// alltoall). Fails with kParseError on a malformed data row, a "Test
// failure" line, a log without any data row, or a test whose collective or
// group size cannot be told (the message names --collective or --ranks).
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
