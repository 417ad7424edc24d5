// validation/collective_tables.h: measured collective tables (nccl-tests and
// rccl-tests printouts, shared/calibration/nccl_tables.json; schema in
// nccl_tables.md beside it) as questions to the collective model
// (topology/collective_algorithms.h): each row's size on the table's system,
// predicted vs measured time (`paratune validate --collectives`, docs/model.md
// "Collective validation").
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "topology/cluster.h"

namespace paratune::planner {

struct CollectiveRow {
  double size_bytes = 0;   // the nccl-tests size: the whole buffer
  double measured_us = 0;  // the row's time
  std::string from;        // the column it came from: oop_time_us, ip_time_us or a busbw column
};

struct CollectiveTable {
  std::string id;
  std::string system;  // the held-out unit: "<GPU> @ <publisher>", e.g. "H100 @ aws-samples"
  std::string source;  // URL of the printout
  std::string trust;   // A / B / C as nccl_tables.md grades them
  topology::ClusterSpec cluster;  // the GPU's preset with the table's node and NIC facts
  topology::Collective collective = topology::Collective::kAllReduce;
  int ranks = 0;
  int nodes = 0;
  // NCCL_ALGO as the table forced it (kAnyAlgorithm when not forced).
  topology::AlgorithmMask allowed = topology::kAnyAlgorithm;
  // The collective on the table's group (stride 1 over `ranks`), priced once.
  topology::LinkCost cost;
  std::vector<CollectiveRow> rows;
  std::vector<std::string> assumed;  // facts the table leaves open, and what was used
};

// A table or row the model is not asked about, and why (never dropped silently).
struct SkippedCollectives {
  std::string id;
  int rows = 0;
  std::string why;
};

struct CollectiveTables {
  std::vector<CollectiveTable> tables;
  std::vector<SkippedCollectives> skipped;
};

// Whether `doc` is nccl_tables.json: an array of tables with `collective`,
// `total_ranks` and `rows`.
bool IsCollectiveTablesDocument(const Json& doc);

// Converts every nccl-tests table. Mapping (docs/model.md "Collective
// validation"): the cluster preset of the table's GPU; gpus_per_node from the
// table; NICs per node and their line rate from `inter_network` where it
// states "N x R Gb/s" (else the preset's, listed in `assumed`); NCCL_ALGO
// from `sharp_nvls`, `algo` or the inferred notes. A row's time is its
// out-of-place time, else its in-place time, else the time its bus bandwidth
// implies when that figure has three significant digits (≥ 1 GB/s as printed
// with two decimals). Skipped with the reason: DeepEP/HybridEP kernel tables
// and prose summaries (not NCCL collectives), TCP-socket transports (the model
// prices RDMA and NVLink fabrics), GPUs without a preset.
Result<CollectiveTables> CollectiveTablesFromCalibration(const Json& doc);

// One row predicted on its table's system (the loader's `cost`).
struct CollectiveRowCheck {
  double predicted_us = 0;
  double error = 0;  // predicted / measured − 1
  topology::Algorithm algorithm = topology::Algorithm::kRing;
  topology::Protocol protocol = topology::Protocol::kSimple;
  // The chosen option's latency and algorithm bandwidth: the row's time split
  // into its two terms.
  double latency_us = 0;
  double algbw_GBps = 0;
};
CollectiveRowCheck CheckCollectiveRow(const CollectiveTable& table, const CollectiveRow& row);
// The same with NCCL's pipeline-fill share (topology::kNcclPipelineFill) set
// to `fill` on the options that take one, for refits.
CollectiveRowCheck CheckCollectiveRow(const CollectiveTable& table, const CollectiveRow& row,
                                      double fill);

// The pipeline-fill share, on a 0.025 grid over [0, 1], with the lowest
// median |error| over the rows of every system but `held_out_system` (every
// row when it is empty). The one constant fitted to these tables.
double FitPipelineFill(const CollectiveTables& tables, const std::string& held_out_system = "");

}  // namespace paratune::planner
