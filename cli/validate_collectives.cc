// `paratune validate --collectives FILE`: predicted vs measured collective
// times of shared/calibration/nccl_tables.json (validation/collective_tables.h).
#include "cli/validate_collectives.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>

#include "cli/common.h"
#include "cli/validate_memory.h"
#include "common/median.h"
#include "common/strings.h"
#include "validation/collective_tables.h"
#include "validation/ep_kernel_tables.h"
#include "validation/memory_runs.h"

namespace paratune::cli {
namespace {

using planner::MemoryErrorStats;
using planner::MemoryStats;

void PrintCollectiveStats(std::ostream& out, const std::string& name, const MemoryErrorStats& s) {
  PrintErrorStats(out, name, s, 34);
}

// Axes the error is read along: the rank count's decade and the message size.
std::string RankDecade(int ranks) {
  return ranks < 10 ? "2-9 ranks" : ranks < 100 ? "10-99 ranks" : "100+ ranks";
}
std::string SizeClass(double bytes) {
  return bytes < 65536 ? "< 64 KiB (latency)" : bytes < 256.0 * (1 << 20) ? "64 KiB - 256 MiB"
                                                                          : ">= 256 MiB (bandwidth)";
}

// "ring/LL -> nvls" for the algorithms a table's rows ran, in size order.
std::string AlgorithmsRun(const std::vector<planner::CollectiveRowCheck>& checks) {
  std::string out, last;
  for (const planner::CollectiveRowCheck& c : checks) {
    std::string name = topology::AlgorithmName(c.algorithm);
    if (c.algorithm == topology::Algorithm::kRing || c.algorithm == topology::Algorithm::kTree) {
      name += std::string("/") + topology::ProtocolName(c.protocol);
    }
    if (name == last) continue;
    out += (out.empty() ? "" : " > ") + name;
    last = name;
  }
  return out;
}

// "0.375-0.55": the range of one constant's refits with a system held out.
std::string RefitRange(const std::map<std::string, double>& refits, int decimals) {
  if (refits.empty()) return "none";
  const auto [lo, hi] = std::minmax_element(refits.begin(), refits.end(), [](const auto& a, const auto& b) {
    return a.second < b.second;
  });
  return FormatFixed(lo->second, decimals) + "-" + FormatFixed(hi->second, decimals);
}

// One fitted constant: its value, this file's fit and each held-out refit.
OrderedJson FittedConstantJson(const char* name, double value, double refit,
                               const std::map<std::string, double>& held_out) {
  OrderedJson j;
  j["name"] = name;
  j["value"] = value;
  j["refit_on_these_rows"] = refit;
  j["held_out"] = OrderedJson::object();
  for (const auto& [system, v] : held_out) j["held_out"][system] = v;
  return j;
}

// The expert-parallel kernels' rows (DeepEP, HybridEP) on the MoE dispatch
// term: per table and per kernel × span, into out["ep_kernels"], and printed
// on `os` unless it is null (the JSON format).
void ValidateEpKernels(const planner::EpKernelTables& ep, OrderedJson* out, std::ostream* os) {
  OrderedJson j;
  j["tables"] = OrderedJson::array();
  std::map<std::string, std::vector<double>> by_group;
  std::vector<double> all;
  if (os != nullptr) {
    *os << "\nexpert-parallel kernels (DeepEP, HybridEP) on the MoE dispatch term:\n"
        << std::left << std::setw(44) << "table" << std::right << std::setw(6) << "rows"
        << std::setw(10) << "median" << std::setw(10) << "signed" << std::setw(9) << "p90"
        << "\n";
  }
  for (const planner::EpKernelTable& t : ep.tables) {
    std::vector<double> errors;
    OrderedJson rows = OrderedJson::array();
    for (const planner::EpKernelRow& row : t.rows) {
      const planner::EpKernelCheck c = planner::CheckEpKernelRow(t, row);
      errors.push_back(c.error);
      const std::string group =
          std::string(planner::MoeDispatcherName(t.dispatcher)) +
          (row.ep_ranks <= t.cluster.DomainGpus() ? ", one NVLink domain" : ", across nodes");
      by_group[group].push_back(c.error);
      OrderedJson r;
      r["ep_ranks"] = row.ep_ranks;
      r["phase"] = row.combine ? "combine" : "dispatch";
      r["dtype"] = row.fp8 ? "FP8" : "BF16";
      if (row.num_sms > 0) r["num_sms"] = row.num_sms;
      r["bandwidth_counts"] = row.rdma ? "rdma" : "nvlink";
      r["measured_GBps"] = row.measured_GBps;
      r["bench_bytes"] = row.bench_bytes;
      r["measured_us"] = row.measured_us;
      r["predicted_us"] = c.predicted_us;
      r["error"] = c.error;
      rows.push_back(r);
    }
    all.insert(all.end(), errors.begin(), errors.end());
    const MemoryErrorStats s = MemoryStats(errors);
    OrderedJson tj;
    tj["id"] = t.id;
    tj["system"] = t.system;
    tj["dispatcher"] = planner::MoeDispatcherName(t.dispatcher);
    tj["tokens"] = t.tokens;
    tj["hidden"] = t.hidden;
    tj["top_k"] = t.top_k;
    tj["stats"] = ErrorStatsJson(s);
    tj["assumed"] = t.assumed;
    tj["source"] = t.source;
    tj["rows"] = rows;
    j["tables"].push_back(tj);
    if (os != nullptr) {
      *os << std::left << std::setw(44) << t.id.substr(0, 43) << std::right << std::setw(6)
          << s.rows << std::setw(10) << Pct(s.median_abs) << std::setw(10) << Pct(s.median_signed)
          << std::setw(9) << Pct(s.p90_abs) << "\n";
    }
  }
  j["per_kernel_and_span"] = ErrorGroupsJson(by_group);
  const MemoryErrorStats overall = MemoryStats(all);
  j["overall"] = ErrorStatsJson(overall);
  OrderedJson skipped = OrderedJson::array();
  int skipped_rows = 0;
  for (const planner::SkippedCollectives& sk : ep.skipped) {
    skipped.push_back({{"id", sk.id}, {"rows", sk.rows}, {"why", sk.why}});
    skipped_rows += sk.rows;
  }
  j["not_asked"] = skipped;
  (*out)["ep_kernels"] = j;
  if (os == nullptr) return;
  PrintErrorGroups(*os, "per kernel and span", by_group, 34);
  *os << "\n";
  PrintCollectiveStats(*os, "all kernel rows (predicted / measured - 1)", overall);
  *os << "kernel rows not asked (" << skipped_rows << "):\n";
  for (const planner::SkippedCollectives& sk : ep.skipped) {
    *os << "  " << std::left << std::setw(44) << sk.id.substr(0, 43) << std::right << std::setw(4)
        << sk.rows << "  " << sk.why << "\n";
  }
}

}  // namespace

int RunValidateCollectives(const Json& doc, const std::string& format, Io io) {
  auto tables = planner::CollectiveTablesFromCalibration(doc);
  if (!tables.ok()) return UsageError(io, "validate", tables.status());
  const bool table_format = format == "table";
  OrderedJson out;
  out["schema"] = "paratune.collective_validation/v4";
  out["tables"] = OrderedJson::array();
  std::map<std::string, std::vector<double>> by_system, by_collective, by_ranks, by_size;
  std::vector<double> all, table_medians;
  // Leave one system out: the fitted constants refitted without it. A
  // fabric's hop latency is listed for the systems with tables across it.
  std::map<std::string, double> held_out_fill;
  std::map<std::string, std::map<std::string, double>> held_out_latency;  // fabric → system → µs
  std::map<std::string, std::set<std::string>> fabric_systems;
  for (const planner::CollectiveTable& t : tables->tables) {
    if (const std::string f = planner::NetFabricOf(t); !f.empty()) fabric_systems[f].insert(t.system);
  }
  std::map<std::string, std::vector<double>> held_out_by_system;
  std::vector<double> held_out_all;
  for (const planner::HeldOutSystem& h : planner::LeaveOneSystemOut(*tables)) {
    held_out_fill[h.system] = h.refit.pipeline_fill;
    for (const auto& [fabric, us] : h.refit.net_latency_us) {
      if (fabric_systems[fabric].count(h.system)) held_out_latency[fabric][h.system] = us;
    }
    held_out_by_system[h.system] = h.errors;
    held_out_all.insert(held_out_all.end(), h.errors.begin(), h.errors.end());
  }
  if (table_format) {
    io.out << std::left << std::setw(42) << "table" << std::setw(14) << "collective" << std::right
           << std::setw(6) << "ranks" << std::setw(6) << "rows" << std::setw(10) << "median"
           << std::setw(10) << "signed" << std::setw(9) << "p90" << "  algorithms NCCL's tuner runs\n";
  }
  for (const planner::CollectiveTable& t : tables->tables) {
    std::vector<double> errors;
    std::vector<planner::CollectiveRowCheck> checks;
    OrderedJson rows = OrderedJson::array();
    for (const planner::CollectiveRow& row : t.rows) {
      const planner::CollectiveRowCheck c = planner::CheckCollectiveRow(t, row);
      checks.push_back(c);
      errors.push_back(c.error);
      by_size[SizeClass(row.size_bytes)].push_back(c.error);
      OrderedJson r;
      r["size_bytes"] = row.size_bytes;
      r["measured_us"] = row.measured_us;
      r["measured_from"] = row.from;
      r["predicted_us"] = c.predicted_us;
      r["error"] = c.error;
      r["algorithm"] = topology::AlgorithmName(c.algorithm);
      r["protocol"] = topology::ProtocolName(c.protocol);
      r["latency_us"] = c.latency_us;
      r["algbw_GBps"] = c.algbw_GBps;
      rows.push_back(r);
    }
    const MemoryErrorStats s = MemoryStats(errors);
    all.insert(all.end(), errors.begin(), errors.end());
    table_medians.push_back(s.median_abs);
    auto& sys = by_system[t.system];
    sys.insert(sys.end(), errors.begin(), errors.end());
    auto& col = by_collective[topology::CollectiveName(t.collective)];
    col.insert(col.end(), errors.begin(), errors.end());
    auto& rk = by_ranks[RankDecade(t.ranks)];
    rk.insert(rk.end(), errors.begin(), errors.end());
    OrderedJson j;
    j["id"] = t.id;
    j["system"] = t.system;
    j["collective"] = topology::CollectiveName(t.collective);
    j["ranks"] = t.ranks;
    j["nodes"] = t.nodes;
    j["trust"] = t.trust;
    j["net_transport"] = t.cluster.net_transport;
    j["algorithms"] = AlgorithmsRun(checks);
    j["forced_algorithm"] = t.allowed != topology::kAnyAlgorithm;
    j["stats"] = ErrorStatsJson(s);
    j["assumed"] = t.assumed;
    j["source"] = t.source;
    j["rows"] = rows;
    out["tables"].push_back(j);
    if (table_format) {
      io.out << std::left << std::setw(42) << t.id.substr(0, 41) << std::setw(14)
             << topology::CollectiveName(t.collective) << std::right << std::setw(6) << t.ranks
             << std::setw(6) << s.rows << std::setw(10) << Pct(s.median_abs) << std::setw(10)
             << Pct(s.median_signed) << std::setw(9) << Pct(s.p90_abs) << "  "
             << AlgorithmsRun(checks) << (t.allowed != topology::kAnyAlgorithm ? " (forced)" : "")
             << "\n";
    }
  }
  const MemoryErrorStats overall = MemoryStats(all);
  out["per_system"] = ErrorGroupsJson(by_system);
  out["per_collective"] = ErrorGroupsJson(by_collective);
  out["per_rank_decade"] = ErrorGroupsJson(by_ranks);
  out["per_size"] = ErrorGroupsJson(by_size);
  out["overall"] = ErrorStatsJson(overall);
  out["median_of_table_medians"] = Median(table_medians);
  // Every other constant comes from NCCL's source or from a cluster
  // preset's cited measurement outside this file; the pipeline-fill share and
  // the hop latency of each fabric are fitted to these rows, and refitted
  // without each system held out.
  const planner::CollectiveConstants compiled, refit = planner::FitCollectiveConstants(*tables);
  out["fitted_constants"] = OrderedJson::array();
  out["fitted_constants"].push_back(FittedConstantJson(
      "pipeline_fill", compiled.pipeline_fill, refit.pipeline_fill, held_out_fill));
  std::string latency_refits;
  for (const auto& [fabric, us] : compiled.net_latency_us) {
    out["fitted_constants"].push_back(FittedConstantJson(("net_latency_us." + fabric).c_str(), us,
                                                         refit.net_latency_us.at(fabric),
                                                         held_out_latency[fabric]));
    latency_refits += ", " + fabric + " hop " + FormatFixed(us, 0) + " us to " +
                      RefitRange(held_out_latency[fabric], 0) + " us";
  }
  out["leave_one_system_out"] = ErrorGroupsJson(held_out_by_system);
  const MemoryErrorStats held_out_overall = MemoryStats(held_out_all);
  out["leave_one_system_out_overall"] = ErrorStatsJson(held_out_overall);
  OrderedJson skipped = OrderedJson::array();
  int skipped_rows = 0;
  for (const planner::SkippedCollectives& sk : tables->skipped) {
    OrderedJson j;
    j["id"] = sk.id;
    j["rows"] = sk.rows;
    j["why"] = sk.why;
    skipped.push_back(j);
    skipped_rows += sk.rows;
  }
  out["not_asked"] = skipped;
  auto ep = planner::EpKernelTablesFromCalibration(doc);
  if (!ep.ok()) return UsageError(io, "validate", ep.status());
  if (!table_format) {
    ValidateEpKernels(*ep, &out, nullptr);
    io.out << out.dump(2) << "\n";
    return kExitOk;
  }
  PrintErrorGroups(io.out, "per system (GPU @ publisher)", by_system, 34);
  PrintErrorGroups(io.out,
                   "per system held out (refitted without it: pipeline fill " +
                       FormatFixed(compiled.pipeline_fill, 3) + " to " +
                       RefitRange(held_out_fill, 3) + latency_refits + ")",
                   held_out_by_system, 34);
  PrintErrorGroups(io.out, "per collective", by_collective, 34);
  PrintErrorGroups(io.out, "per rank count", by_ranks, 34);
  PrintErrorGroups(io.out, "per message size", by_size, 34);
  io.out << "\n";
  PrintCollectiveStats(io.out, "all rows (predicted / measured - 1)", overall);
  PrintCollectiveStats(io.out, "all rows, each system held out", held_out_overall);
  io.out << "median of the tables' medians: " << Pct(Median(table_medians))
         << "\n\nnot asked (" << skipped_rows << " rows):\n";
  for (const planner::SkippedCollectives& sk : tables->skipped) {
    io.out << "  " << std::left << std::setw(44) << sk.id.substr(0, 43) << std::right << std::setw(4)
           << sk.rows << "  " << sk.why << "\n";
  }
  ValidateEpKernels(*ep, &out, &io.out);
  return kExitOk;
}

}  // namespace paratune::cli
