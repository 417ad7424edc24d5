// shared/calibration/nccl_tables.json as questions to the collective model
// (validation/collective_tables.h; docs/model.md "Collective validation").
#include "validation/collective_tables.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <regex>

#include "common/median.h"
#include "common/strings.h"
#include "validation/row_fields.h"

namespace paratune::planner {

using row_fields::Num;
using row_fields::Str;
using topology::Algorithm;
using topology::Collective;

std::string CollectivePresetOf(const std::string& gpu, const std::string& detail) {
  if (gpu == "A100") return Contains(detail, "40GB") ? "dgx-a100-40gb" : "dgx-a100-80gb";
  if (gpu == "H100") return "dgx-h100";
  if (gpu == "H200") return "dgx-h200";
  if (gpu == "H800") return "hgx-h800";
  if (gpu == "B200") return "dgx-b200";
  if (gpu == "B300") return "dgx-b300";
  if (gpu == "GB200") return "gb200-nvl72";
  if (gpu == "GB300") return "gb300-nvl72";
  if (gpu == "MI300X") return "mi300x";
  if (gpu == "MI355X") return "mi355x";
  return "";
}

Result<topology::ClusterSpec> CollectivePresetWithNodes(const Json& t, const std::string& preset) {
  PT_ASSIGN_OR_RETURN(topology::ClusterSpec c, topology::ClusterPreset(preset));
  const int gpn = std::clamp(static_cast<int>(Num(t, "gpus_per_node", c.gpus_per_node)), 1, 64);
  if (gpn != c.gpus_per_node) {
    c.gpus_per_node = gpn;
    if (c.nvlink_domain_gpus > 0 && c.nvlink_domain_gpus % gpn != 0) c.nvlink_domain_gpus = 0;
  }
  return c;
}

namespace {

// Why a table is not asked about, or "" when it is.
std::string SkipReason(const Json& t, const std::string& preset) {
  const std::string kind = Str(t, "kind");
  if (kind == "ep_kernel_benchmark" || Str(t, "collective") == "alltoall_ep") {
    return "DeepEP/HybridEP dispatch and combine kernels: asked of the MoE dispatch term "
           "(expert-parallel kernels, validation/ep_kernel_tables.h)";
  }
  if (kind != "nccl_tests_table") return "a prose summary (" + kind + "), not a measured table";
  const std::string net = Str(t, "inter_network");
  if (Contains(net, "TCP sockets") || Contains(net, "plain TCP") || Contains(net, "TCP over")) {
    return "NCCL's TCP-socket transport (no RDMA): the model prices RDMA and NVLink fabrics";
  }
  if (preset.empty()) return "no cluster preset for GPU '" + Str(t, "gpu") + "'";
  return "";
}

// The publisher of a table's source: the repository owner.
std::string Publisher(const Json& t) {
  const Json& src = t.contains("source") ? t["source"] : Json();
  const std::string repo = Str(src, "repo");
  const size_t slash = repo.find('/');
  return slash == std::string::npos ? repo : repo.substr(0, slash);
}

// NCCL_ALGO as the table states it: NVLS, Ring, or any.
topology::AlgorithmMask ForcedAlgorithms(const Json& t) {
  const std::string text = Str(t, "sharp_nvls") + " " + Str(t, "algo") + " " +
                           (t.contains("inferred") ? t["inferred"].dump() : "");
  if (Contains(text, "NCCL_ALGO=NVLS")) {
    return topology::MaskOf(Algorithm::kNvls) | topology::MaskOf(Algorithm::kNvlsTree);
  }
  if (Contains(text, "no (Ring)") || Str(t, "algo") == "Ring" || Contains(text, "NCCL_ALGO=Ring")) {
    return topology::MaskOf(Algorithm::kRing);
  }
  return topology::kAnyAlgorithm;
}

// "8 x 400 Gb/s" in the network text: NICs per node and GB/s per NIC.
bool ParseNics(const std::string& text, int* nics, double* GBps) {
  static const std::regex kNics(R"((\d+)\s*x\s*(\d+)\s*Gb/s)");
  std::smatch m;
  if (!std::regex_search(text, m, kNics)) return false;
  *nics = std::stoi(m[1].str());
  *GBps = std::stod(m[2].str()) / 8.0;
  return *nics > 0 && *nics <= 64 && *GBps > 0;
}

// A row's time: the faster of its out-of-place and in-place times (a warm-up
// outlier in one column does not count), else the time its bus bandwidth
// implies when printed to three significant digits. False when neither.
bool RowTime(const Json& r, Collective coll, int ranks, CollectiveRow* out) {
  out->size_bytes = Num(r, "size_bytes", 0);
  if (!(out->size_bytes > 0)) return false;
  const double oop = Num(r, "oop_time_us", 0), ip = Num(r, "ip_time_us", 0);
  if (oop > 0 || ip > 0) {
    const bool use_ip = ip > 0 && (!(oop > 0) || ip < oop);
    out->measured_us = use_ip ? ip : oop;
    out->from = use_ip ? "ip_time_us" : "oop_time_us";
    return true;
  }
  for (const char* key : {"ip_busbw_GBps", "oop_busbw_GBps", "busbw_GBps_placement_unstated"}) {
    const double busbw = Num(r, key, 0);
    if (busbw >= 1.0) {
      out->measured_us = topology::BusFactor(coll, ranks) * out->size_bytes / (busbw * 1e3);
      out->from = key;
      return true;
    }
  }
  return false;
}

// The transport a table's network text names (cluster.h net_transport): AWS
// EFA on its A100 instances (p4d, p4de: AWS's only A100 instances with EFA)
// runs aws-ofi-nccl's send/recv protocol, on later ones its RDMA protocol.
std::string TransportOf(const Json& t) {
  if (!Contains(Str(t, "inter_network"), "EFA")) return "verbs";
  return Str(t, "gpu") == "A100" ? "efa-sendrecv" : "efa";
}

// The table's system: the GPU's preset with its nodes and NICs.
Result<topology::ClusterSpec> TableCluster(const Json& t, const std::string& preset,
                                           std::vector<std::string>* assumed) {
  PT_ASSIGN_OR_RETURN(topology::ClusterSpec c, CollectivePresetWithNodes(t, preset));
  const int nodes = static_cast<int>(Num(t, "num_nodes", 1));
  int nics = 0;
  double nic_GBps = 0;
  if (ParseNics(Str(t, "inter_network"), &nics, &nic_GBps)) {
    c.nics_per_node = nics;
    c.nic_GBps = nic_GBps;
  } else if (nodes > 1 && c.DomainGpus() < static_cast<int>(Num(t, "total_ranks", 0))) {
    assumed->push_back("NICs not stated: the preset's " + std::to_string(c.nics_per_node) + " x " +
                       FormatFixed(c.nic_GBps * 8, 0) + " Gb/s per node");
  }
  c.net_transport = TransportOf(t);
  c.name = preset + " (" + Str(t, "id") + ")";
  return c;
}

}  // namespace

bool IsCollectiveTablesDocument(const Json& doc) {
  if (!doc.is_array() || doc.empty()) return false;
  for (const Json& t : doc) {
    if (!t.is_object() || !t.contains("collective") || !t.contains("total_ranks") ||
        !t.contains("rows") || !t["rows"].is_array()) {
      return false;
    }
  }
  return true;
}

Result<CollectiveTables> CollectiveTablesFromCalibration(const Json& doc) {
  if (!IsCollectiveTablesDocument(doc)) {
    return Status::InvalidArgument(
        "not a collective-tables document: an array of tables with collective, total_ranks and "
        "rows (shared/calibration/nccl_tables.json)");
  }
  CollectiveTables out;
  for (const Json& t : doc) {
    const std::string id = Str(t, "id", "?");
    const int n_rows = static_cast<int>(t["rows"].size());
    const std::string preset = CollectivePresetOf(Str(t, "gpu"), Str(t, "gpu_detail"));
    if (std::string why = SkipReason(t, preset); !why.empty()) {
      out.skipped.push_back({id, n_rows, why});
      continue;
    }
    auto coll = topology::ParseCollective(Str(t, "collective"));
    const double ranks = Num(t, "total_ranks", 0);
    if (!coll.ok() || !(ranks >= 2 && ranks <= 1 << 20)) {
      out.skipped.push_back({id, n_rows, "collective or total_ranks not usable"});
      continue;
    }
    CollectiveTable table;
    table.id = id;
    table.system = Str(t, "gpu") + " @ " + Publisher(t);
    table.source = t.contains("source") ? Str(t["source"], "url") : "";
    table.trust = Str(t, "trust");
    table.collective = *coll;
    table.ranks = static_cast<int>(ranks);
    table.nodes = std::max(1, static_cast<int>(Num(t, "num_nodes", 1)));
    auto cluster = TableCluster(t, preset, &table.assumed);
    if (!cluster.ok()) return cluster.status().WithContext(id);
    table.cluster = std::move(*cluster);
    table.allowed = ForcedAlgorithms(t);
    int unusable = 0;
    for (const Json& r : t["rows"]) {
      CollectiveRow row;
      if (RowTime(r, table.collective, table.ranks, &row)) {
        table.rows.push_back(row);
      } else {
        ++unusable;
      }
    }
    if (unusable > 0) {
      out.skipped.push_back({id, unusable,
                             "rows with no time and a bus bandwidth printed below 1 GB/s (two "
                             "decimals leave it unknown to more than 1 %)"});
    }
    if (table.rows.empty()) continue;
    table.cost = topology::GroupCost(table.cluster, table.collective, 1, table.ranks);
    // A forced algorithm the system cannot run (NVLS on a GPU without it):
    // NCCL falls back to its own choice.
    const topology::AlgoOption* chosen = nullptr;
    topology::FastestSeconds(table.cost.options, table.rows.front().size_bytes, table.allowed,
                             &chosen);
    if (chosen == nullptr && table.allowed != topology::kAnyAlgorithm) {
      table.assumed.push_back("the forced algorithm is not available on this system: NCCL's choice");
      table.allowed = topology::kAnyAlgorithm;
    }
    out.tables.push_back(std::move(table));
  }
  return out;
}

namespace {

CollectiveRowCheck CheckRow(const topology::AlgoOptions& options, topology::AlgorithmMask allowed,
                            const CollectiveRow& row) {
  const topology::AlgoOption* chosen = nullptr;
  const double seconds = topology::FastestSeconds(options, row.size_bytes, allowed, &chosen);
  CollectiveRowCheck check;
  check.predicted_us = seconds * 1e6;
  check.error = row.measured_us > 0 ? check.predicted_us / row.measured_us - 1.0 : 0.0;
  if (chosen != nullptr) {
    check.algorithm = chosen->algorithm;
    check.protocol = chosen->protocol;
    check.latency_us = chosen->latency_us;
    check.algbw_GBps = chosen->algbw_GBps;
  }
  return check;
}

topology::AlgoOptions WithPipelineFill(topology::AlgoOptions options, double fill) {
  for (int i = 0; i < options.count; ++i) {
    if (options.items[i].pipeline_fill > 0) options.items[i].pipeline_fill = fill;
  }
  return options;
}

// The table's options with its fabric's hop at `net_latency_us` (its own
// options when that is the latency it was priced with).
topology::AlgoOptions OptionsWith(const CollectiveTable& t, double net_latency_us) {
  if (net_latency_us == t.cluster.NetLatencyUs()) return t.cost.options;
  topology::ClusterSpec c = t.cluster;
  c.net_latency_us = net_latency_us;
  return topology::GroupCost(c, t.collective, 1, t.ranks).options;
}

// The table's options with every constant of `k`: its fabric's hop latency
// and the pipeline-fill share.
topology::AlgoOptions OptionsWith(const CollectiveTable& t, const CollectiveConstants& k) {
  const auto it = k.net_latency_us.find(NetFabricOf(t));
  return WithPipelineFill(it == k.net_latency_us.end() ? t.cost.options : OptionsWith(t, it->second),
                          k.pipeline_fill);
}

// The value on `grid` whose options give the lowest median |error| over the
// rows of the tables `acts_on`, every system but `held_out`'s; `fallback`
// when no such row is left.
template <typename ActsOn, typename OptionsAt>
double FitOnGrid(const CollectiveTables& tables, const std::string& held_out,
                 const std::vector<double>& grid, double fallback, const ActsOn& acts_on,
                 const OptionsAt& options_at) {
  double best = fallback, best_median = std::numeric_limits<double>::infinity();
  std::vector<double> abs_errors;
  for (double value : grid) {
    abs_errors.clear();
    for (const CollectiveTable& t : tables.tables) {
      if (!acts_on(t) || (!held_out.empty() && t.system == held_out)) continue;
      const topology::AlgoOptions options = options_at(t, value);
      for (const CollectiveRow& row : t.rows) {
        abs_errors.push_back(std::fabs(CheckRow(options, t.allowed, row).error));
      }
    }
    if (abs_errors.empty()) return fallback;
    const double median = Median(abs_errors);
    if (median < best_median - 1e-12) {
      best_median = median;
      best = value;
    }
  }
  return best;
}

std::vector<double> Grid(double step, int steps) {
  std::vector<double> grid;
  for (int i = 0; i <= steps; ++i) grid.push_back(step * i);
  return grid;
}

}  // namespace

std::map<std::string, double> CollectiveConstants::CompiledNetLatencies() {
  std::map<std::string, double> out;
  for (const topology::NetTransport& t : topology::NetTransports()) out[t.fabric] = t.latency_us;
  return out;
}

std::string NetFabricOf(const CollectiveTable& table) {
  if (table.cost.tier != topology::Tier::kInterNode) return "";
  return topology::FindNetTransport(table.cluster.net_transport).fabric;
}

CollectiveRowCheck CheckCollectiveRow(const CollectiveTable& table, const CollectiveRow& row) {
  return CheckRow(table.cost.options, table.allowed, row);
}

CollectiveRowCheck CheckCollectiveRow(const CollectiveTable& table, const CollectiveRow& row,
                                      const CollectiveConstants& k) {
  return CheckRow(OptionsWith(table, k), table.allowed, row);
}

CollectiveConstants FitCollectiveConstants(const CollectiveTables& tables,
                                           const std::string& held_out_system) {
  const CollectiveConstants compiled;
  CollectiveConstants fit;
  fit.pipeline_fill = FitOnGrid(
      tables, held_out_system, Grid(0.025, 40), compiled.pipeline_fill,
      [](const CollectiveTable&) { return true; },
      [](const CollectiveTable& t, double fill) { return WithPipelineFill(t.cost.options, fill); });
  for (auto& [fabric, latency] : fit.net_latency_us) {
    latency = FitOnGrid(
        tables, held_out_system, Grid(1.0, 60), latency,
        [&](const CollectiveTable& t) { return NetFabricOf(t) == fabric; },
        [](const CollectiveTable& t, double us) { return OptionsWith(t, us); });
  }
  return fit;
}

std::vector<HeldOutSystem> LeaveOneSystemOut(const CollectiveTables& tables) {
  std::vector<HeldOutSystem> out;
  for (const CollectiveTable& t : tables.tables) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const HeldOutSystem& h) { return h.system == t.system; });
    if (it == out.end()) {
      out.push_back({t.system, FitCollectiveConstants(tables, t.system), {}});
      it = std::prev(out.end());
    }
    // Priced once per table: a refitted hop latency reprices the group.
    const topology::AlgoOptions options = OptionsWith(t, it->refit);
    for (const CollectiveRow& row : t.rows) {
      it->errors.push_back(CheckRow(options, t.allowed, row).error);
    }
  }
  return out;
}

}  // namespace paratune::planner
