// `paratune validate --beyond FILE`: predicted vs measured throughput of the
// non-transformer MLPerf runs of shared/calibration/beyond_runs.json
// (validation/beyond_runs.h, planner/network_cost.h).
#include "cli/validate_beyond.h"

#include <iomanip>
#include <map>
#include <ostream>

#include "cli/common.h"
#include "cli/validate_memory.h"
#include "common/strings.h"
#include "validation/beyond_runs.h"
#include "validation/memory_runs.h"

namespace paratune::cli {
namespace {

std::string GpuDecade(int gpus) {
  return gpus < 10 ? "1-9 GPUs" : gpus < 100 ? "10-99 GPUs" : gpus < 1000 ? "100-999 GPUs" : "1000+ GPUs";
}

struct Groups {
  std::map<std::string, std::vector<double>> benchmark, source, generation, decade, framework;
  std::vector<double> all;
  void Add(const planner::BeyondRun& r, double e) {
    benchmark[r.benchmark].push_back(e);
    source[r.source_key].push_back(e);
    generation[r.generation].push_back(e);
    decade[GpuDecade(r.layout.gpus)].push_back(e);
    framework[r.framework].push_back(e);
    all.push_back(e);
  }
};

void PrintRowHeader(std::ostream& out) {
  out << std::left << std::setw(66) << "run" << std::right << std::setw(6) << "gpus" << std::setw(4) << "sp"
      << std::setw(6) << "mb" << std::setw(7) << "gbs" << std::setw(12) << "measured" << std::setw(12)
      << "predicted" << std::setw(9) << "error" << std::setw(9) << "MFU" << std::setw(9) << "mem GiB"
      << "\n";
}

void PrintRow(std::ostream& out, const planner::BeyondRun& r, const planner::NetworkPrediction& p, double e) {
  std::string id = r.id.size() > 64 ? r.id.substr(0, 61) + "..." : r.id;
  out << std::left << std::setw(66) << id << std::right << std::setw(6) << r.layout.gpus << std::setw(4)
      << r.layout.spatial << std::setw(6) << r.layout.micro_batch << std::setw(7) << r.layout.global_batch
      << std::setw(12) << FormatFixed(r.measured_samples_per_s, 1) << std::setw(12)
      << FormatFixed(p.samples_per_s, 1) << std::setw(9) << Pct(e) << std::setw(9) << Pct(p.mfu)
      << std::setw(9) << FormatFixed(p.memory_GiB, 1) << (p.fits ? "" : "  (over capacity)") << "\n";
}

OrderedJson RowJson(const planner::BeyondRun& r, const planner::NetworkPrediction& p, double e) {
  OrderedJson j;
  j["id"] = r.id;
  j["source"] = r.source_key;
  j["benchmark"] = r.benchmark;
  j["framework"] = r.framework;
  j["network"] = r.network.name;
  j["cluster"] = r.cluster.name;
  j["gpus"] = r.layout.gpus;
  j["spatial"] = r.layout.spatial;
  j["micro_batch"] = r.layout.micro_batch;
  j["global_batch"] = r.layout.global_batch;
  j["sharding"] = planner::WeightShardingName(r.layout.sharding);
  j["measured_samples_per_s"] = r.measured_samples_per_s;
  j["predicted_samples_per_s"] = p.samples_per_s;
  j["error"] = e;
  j["mfu"] = p.mfu;
  j["memory_GiB"] = p.memory_GiB;
  j["fits"] = p.fits;
  j["assumed"] = r.assumed;
  return j;
}

}  // namespace

int RunValidateBeyond(const Json& doc, const std::string& format, Io io) {
  auto loaded = planner::BeyondRunsFromCalibration(doc);
  if (!loaded.ok()) return UsageError(io, "validate", loaded.status());
  const bool table = format == "table";
  OrderedJson out;
  out["schema"] = "paratune.beyond_validation/v1";
  out["runs"] = OrderedJson::array();
  Groups g;
  int over_capacity = 0;
  if (table) {
    io.out << "Networks beyond the transformer (beyond_runs.json): " << loaded->runs.size()
           << " runs predicted, " << loaded->skipped.size() << " left out\n\n";
    PrintRowHeader(io.out);
  }
  for (const planner::BeyondRun& r : loaded->runs) {
    auto p = planner::PredictNetwork(r.network, r.cluster, r.layout, r.training);
    if (!p.ok()) {
      loaded->skipped.push_back({r.id, p.status().message()});
      continue;
    }
    const double e = planner::BeyondError(r, *p);
    g.Add(r, e);
    if (!p->fits) ++over_capacity;
    if (table) PrintRow(io.out, r, *p, e);
    out["runs"].push_back(RowJson(r, *p, e));
  }
  std::map<std::string, int> reasons;
  for (const planner::SkippedBeyondRow& s : loaded->skipped) ++reasons[s.reason];
  const planner::MemoryErrorStats total = planner::MemoryStats(g.all);
  if (table) {
    io.out << "\nRuns predicted over their GPU's capacity (they ran): " << over_capacity << " of "
           << g.all.size() << "\n";
    PrintErrorGroups(io.out, "By benchmark", g.benchmark, 34);
    PrintErrorGroups(io.out, "By source (round); nothing is fitted to this file, so held out = in-sample",
                     g.source, 34);
    PrintErrorGroups(io.out, "By GPU generation (leave-one-axis-out = in-sample: nothing fitted)", g.generation, 34);
    PrintErrorGroups(io.out, "By GPU-count decade", g.decade, 34);
    PrintErrorGroups(io.out, "By framework (as the row names it)", g.framework, 34);
    io.out << "\n";
    PrintErrorStats(io.out, "all rows", total, 34);
    io.out << "\nLeft out:\n";
    for (const auto& [why, n] : reasons) io.out << "  " << std::setw(4) << n << "  " << why << "\n";
    return 0;
  }
  out["by_benchmark"] = ErrorGroupsJson(g.benchmark);
  out["by_source"] = ErrorGroupsJson(g.source);
  out["by_generation"] = ErrorGroupsJson(g.generation);
  out["by_gpu_decade"] = ErrorGroupsJson(g.decade);
  out["by_framework"] = ErrorGroupsJson(g.framework);
  out["all"] = ErrorStatsJson(total);
  out["fitted_constants"] = OrderedJson::array();
  out["over_capacity"] = over_capacity;
  out["left_out"] = OrderedJson::array();
  for (const planner::SkippedBeyondRow& s : loaded->skipped) out["left_out"].push_back({{"id", s.id}, {"reason", s.reason}});
  io.out << out.dump(2) << "\n";
  return 0;
}

}  // namespace paratune::cli
