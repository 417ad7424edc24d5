// validation/collective_tables.h: measured collective tables (nccl-tests and
// rccl-tests printouts, shared/calibration/nccl_tables.json; schema in
// nccl_tables.md beside it) as questions to the collective model
// (topology/collective_algorithms.h): each row's size on the table's system,
// predicted vs measured time (`paratune validate --collectives`, docs/model.md
// "Collective validation").
#pragma once

#include <map>
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

// The cluster preset of a table's GPU (A100 by its memory, H100, H800, GB200,
// MI355X, ...; "" when none).
std::string CollectivePresetOf(const std::string& gpu, const std::string& detail);

// The preset `preset` with the table's GPUs per node (an NVLink domain they no
// longer divide is dropped).
Result<topology::ClusterSpec> CollectivePresetWithNodes(const Json& table,
                                                        const std::string& preset);

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

// The collective model's constants that these tables set: NCCL's
// pipeline-fill share and the latency a network hop adds per fabric
// (topology::NetTransport::fabric → µs), at their compiled values unless set.
struct CollectiveConstants {
  double pipeline_fill = topology::kNcclPipelineFill;
  std::map<std::string, double> net_latency_us = CompiledNetLatencies();
  static std::map<std::string, double> CompiledNetLatencies();
};
// A row priced with `k` in place of the compiled-in constants, for refits.
CollectiveRowCheck CheckCollectiveRow(const CollectiveTable& table, const CollectiveRow& row,
                                      const CollectiveConstants& k);

// The fabric whose hop latency a table's rows bear on: its transport's, when
// the group crosses a NIC; "" when it does not.
std::string NetFabricOf(const CollectiveTable& table);

// Each constant on its grid (the share on 0.025 steps over [0, 1], a hop
// latency on 1 µs steps over [0, 60]), the others at their compiled values,
// with the lowest median |error| over the rows it bears on (every row for the
// share, the fabric's tables for its latency) of every system but
// `held_out_system` (none when empty). A constant with none of its rows left
// keeps its compiled value.
CollectiveConstants FitCollectiveConstants(const CollectiveTables& tables,
                                           const std::string& held_out_system = "");

// Leave one system out: each system's rows priced with the constants
// refitted without it.
struct HeldOutSystem {
  std::string system;
  CollectiveConstants refit;
  std::vector<double> errors;  // predicted / measured − 1, its rows in file order
};
std::vector<HeldOutSystem> LeaveOneSystemOut(const CollectiveTables& tables);

}  // namespace paratune::planner
