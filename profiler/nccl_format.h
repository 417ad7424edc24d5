// profiler/nccl_format.h: nccl-tests semantics, so our numbers read like
// theirs (ecosystem.md §1.1): the size syntax and sweep (-b -e -f -i), the byte
// accounting of each collective (the `size` and `count` columns), algbw and
// busbw with the documented factors, and the table text with its column widths
// and shrinking decimals (getFloatStr). Pure functions; nothing here prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "topology/cluster.h"

namespace paratune::profiler {

// A size sweep as nccl-tests takes it: from min_bytes to max_bytes, multiplying
// by step_factor when it is > 1, else adding step_bytes.
struct SizeSweep {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{8} << 30;
  int64_t step_factor = 2;
  int64_t step_bytes = 0;
};
// Parses "-b 8 -e 8G -f 2" values: ParseSizeBytes for -b/-e/-i, an integer for -f.
// Empty strings keep the defaults of `base`. Fails when min > max or the step is 0.
Result<SizeSweep> ParseSweep(const SizeSweep& base, const std::string& min_bytes,
                             const std::string& max_bytes, const std::string& step_factor,
                             const std::string& step_bytes);
// The sizes the sweep visits, ascending (nccl-tests loop). At most 4096 sizes.
Result<std::vector<int64_t>> SweepSizes(const SizeSweep& sweep);

// nccl-tests byte accounting of one row (getCollByteCount): `size_bytes` is
// rounded down so every rank moves whole elements.
struct RowCounts {
  int64_t count = 0;       // the `count` column: elements per call argument
  int64_t size_bytes = 0;  // the `size` column: max(send, recv) bytes
  int64_t send_bytes = 0;  // per rank
  int64_t recv_bytes = 0;  // per rank
};
// REQUIRES: elem_bytes ≥ 1, group_size ≥ 1. count == 0 when the size is below
// one element per rank.
RowCounts CountsFor(topology::Collective c, int64_t size_bytes, int elem_bytes, int group_size);

// algbw = size / time, GB/s (1e9): bytes / µs / 1e3. 0 when time_us ≤ 0.
double AlgBwGBps(int64_t size_bytes, double time_us);
// busbw = algbw × BusFactor (all_reduce 2(n−1)/n; all_gather, reduce_scatter,
// alltoall (n−1)/n; sendrecv 1).
double BusBwGBps(topology::Collective c, int group_size, double algbw_GBps);

// nccl-tests' getFloatStr: `value` right-aligned in `width` characters with 2,
// 1 or 0 decimals, or an exponent, whichever fits.
std::string FloatStr(double value, int width);

// One row of a report table.
struct ReportRow {
  int64_t size_bytes = 0;
  int64_t count = 0;
  std::string type = "float";
  std::string redop = "sum";  // "none" for alltoall and sendrecv
  int root = -1;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  int64_t wrong = -1;  // -1 prints "N/A" (not checked)
};
// The two `#` header lines of the columns, then one line per row, each ending
// in '\n', with nccl-tests' printf widths (%12li %12li %8s %6s %6s %7s %6s %6s).
std::string FormatTableHeader();
std::string FormatRow(const ReportRow& row);
// nccl-tests' redop column: "none" for collectives without a reduction.
std::string RedopColumn(topology::Collective c, const std::string& op);

}  // namespace paratune::profiler
