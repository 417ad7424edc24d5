// profiler/measurements.h: the raw results of a profiling run or of an
// imported nccl-tests log, before any fitting: one CollectiveSeries per
// nccl-tests table, GEMM timings per precision, the device-copy and P2P
// figures, what was waived and why, and the environment they were taken in.
// Plain data; ToJson gives the "paratune.measurements/v1" report document.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::profiler {

// Where and how the numbers were taken.
struct Environment {
  std::string tool;     // "paratune 0.1.0"
  std::string backend;  // "cuda" | "mpi-cpu" | "fake" | "nccl-tests" (import)
  std::vector<std::string> argv;
  std::vector<std::string> hosts;  // host of each world rank
  int world_size = 0;
  int ranks_per_node = 0;  // the most ranks any host ran
  int nodes = 0;
  std::string device;  // device name of rank 0 ("NVIDIA H100 80GB HBM3", CPU model)
  std::map<std::string, std::string> versions;  // "nccl" → "2.28.9", "mpi" → …
  std::string created_at;                       // UTC, ISO 8601 ("2026-01-31T12:00:00Z")
  std::vector<std::string> sources;             // imported files
};

// One row of a collective table. Times are µs, bandwidths GB/s (1e9).
struct SeriesRow {
  int64_t size_bytes = 0;  // nccl-tests `size`
  int64_t count = 0;       // nccl-tests `count`
  double time_us = 0;      // median over samples of the max over ranks
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  int64_t wrong = -1;                  // elements wrong in the correctness check; -1 = not checked
  std::vector<double> sample_time_us;  // each sample's max-over-ranks time (measured runs)
};

// One collective over one group shape: a nccl-tests table.
struct CollectiveSeries {
  topology::Collective collective = topology::Collective::kAllReduce;
  int group_size = 2;
  int stride = 1;             // world ranks between consecutive members
  int groups = 1;             // group instances that ran at once (NCCL_TESTS_SPLIT)
  int concurrent_groups = 1;  // of which share one node (and its NICs)
  topology::Tier tier = topology::Tier::kIntraNode;
  std::string dtype = "float";
  std::string redop = "sum";
  std::vector<SeriesRow> rows;
  std::string origin;                 // "measured", or "file:line" for imports
  double stated_avg_busbw_GBps = -1;  // a log's "# Avg bus bandwidth" line, -1 if none
};

struct GemmRow {
  int64_t m = 0, n = 0, k = 0;
  double time_us = 0;  // median over samples of the max over ranks
  double tflops = 0;   // 2mnk / time, TFLOP/s
  std::vector<double> sample_time_us;
};

struct GemmSeries {
  topology::Precision precision = topology::Precision::kBf16;
  std::vector<GemmRow> rows;
};

// Device-to-device copy bandwidth, counting bytes read plus written (2 × bytes
// per copy), as cost-model.md §7 reports HBM figures.
struct CopyResult {
  int64_t bytes = 0;
  double time_us = 0;
  double GBps = 0;
};

// Unidirectional point-to-point bandwidth between the ranks of one node, GB/s;
// GBps[i][j] from ranks[i] to ranks[j], 0 on the diagonal.
struct P2PMatrix {
  std::vector<int> ranks;
  int64_t bytes = 0;
  std::vector<std::vector<double>> GBps;
};

// A measurement that could not run here, and why (nvbandwidth's WAIVED).
struct Waived {
  std::string what;
  std::string reason;
};

struct Measurements {
  Environment env;
  std::vector<CollectiveSeries> collectives;
  std::vector<GemmSeries> gemm;
  std::optional<CopyResult> copy;
  std::optional<P2PMatrix> p2p;
  std::vector<Waived> waived;
};

OrderedJson EnvironmentToJson(const Environment& env);
// Strict: unknown keys are errors naming their JSON pointer.
Result<Environment> ParseEnvironment(const Json& j, const std::string& pointer);

// The "paratune.measurements/v1" report: environment plus every row (with each
// sample's time), GEMM timings, copy and P2P figures, waived items.
OrderedJson MeasurementsToJson(const Measurements& m);

// Adds the fields the measurements and the profile documents both end with:
// "copy" and "p2p" when measured, then "waived".
void CopyP2pWaivedToJson(const std::optional<CopyResult>& copy, const std::optional<P2PMatrix>& p2p,
                         const std::vector<Waived>& waived, OrderedJson* j);

}  // namespace paratune::profiler
