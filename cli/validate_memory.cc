// `paratune validate --memory FILE`: predicted vs measured peak GPU memory of
// shared/calibration/memory_runs.json (validation/memory_runs.h).
#include <iomanip>
#include <map>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/validate_memory.h"
#include "common/strings.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "planner/request.h"
#include "topology/cluster.h"
#include "validation/memory_runs.h"

namespace paratune::cli {
OrderedJson ErrorStatsJson(const planner::MemoryErrorStats& s) {
  OrderedJson j;
  j["rows"] = s.rows;
  j["median_abs_error"] = s.median_abs;
  j["median_signed_error"] = s.median_signed;
  j["p90_abs_error"] = s.p90_abs;
  return j;
}

std::string Pct(double fraction) { return FormatFixed(100 * fraction, 1) + "%"; }

namespace {

void PrintMemoryStats(std::ostream& out, const std::string& name,
                      const planner::MemoryErrorStats& s) {
  PrintErrorStats(out, name, s, 18);
}

}  // namespace

void PrintErrorStats(std::ostream& out, const std::string& name, const planner::MemoryErrorStats& s,
                     int name_width) {
  out << "  " << std::left << std::setw(name_width) << name.substr(0, name_width - 1) << std::right
      << std::setw(6) << s.rows << std::setw(16) << Pct(s.median_abs) << std::setw(16)
      << Pct(s.median_signed) << std::setw(12) << Pct(s.p90_abs) << "\n";
}

void PrintErrorGroups(std::ostream& out, const std::string& title,
                      const std::map<std::string, std::vector<double>>& groups, int name_width) {
  out << "\n" << title << ":\n  " << std::left << std::setw(name_width) << "" << std::right << std::setw(6)
      << "rows" << std::setw(16) << "median |error|" << std::setw(16) << "median signed" << std::setw(12)
      << "p90 |error|" << "\n";
  for (const auto& [name, errs] : groups) PrintErrorStats(out, name, planner::MemoryStats(errs), name_width);
}

OrderedJson ErrorGroupsJson(const std::map<std::string, std::vector<double>>& groups) {
  OrderedJson j = OrderedJson::object();
  for (const auto& [name, errs] : groups) j[name] = ErrorStatsJson(planner::MemoryStats(errs));
  return j;
}

int RunValidateMemory(const Json& doc, const std::string& format, Io io) {
  auto runs = planner::MemoryRunsFromCalibration(doc);
  if (!runs.ok()) return UsageError(io, "validate", runs.status());
  OrderedJson out;
  out["schema"] = "paratune.memory_validation/v1";
  out["headroom"] = 0.0;
  out["runs"] = OrderedJson::array();
  std::map<std::string, std::vector<double>> by_framework;
  std::vector<double> all;
  int ran_not_fit = 0, oom_rows = 0, oom_predicted_fit = 0;
  std::vector<planner::UnmappedMemoryRow> unmapped = runs->unmapped;
  const bool table = format == "table";
  if (table) {
    io.out << std::left << std::setw(44) << "run" << std::setw(16) << "framework" << std::setw(15)
           << "metric" << std::right << std::setw(10) << "measured" << std::setw(11) << "predicted"
           << std::setw(9) << "error" << "  verdict (reserved / capacity, GiB)\n";
  }
  for (const planner::MemoryRun& run : runs->runs) {
    const planner::MemoryCheck check = planner::CheckMemoryRun(run);
    if (!check.covered) {
      unmapped.push_back({run.id, run.framework, check.why});
      continue;
    }
    const bool oom = run.metric == planner::MemoryMetric::kOom;
    if (oom) {
      ++oom_rows;
      oom_predicted_fit += check.fits ? 1 : 0;
    } else {
      by_framework[run.framework].push_back(check.error);
      all.push_back(check.error);
      ran_not_fit += check.fits ? 0 : 1;
    }
    OrderedJson r;
    r["id"] = run.id;
    r["framework"] = run.framework;
    r["preset"] = planner::FrameworkName(run.request.job.training.framework);
    r["gpu"] = run.request.job.cluster.gpu.name;
    r["gpus"] = run.request.job.gpus;
    r["config"] = planner::ConfigToString(run.request.config);
    r["metric"] = planner::MemoryMetricName(run.metric);
    r["rank"] = run.rank == planner::ReportedRank::kLast    ? "last"
                : run.rank == planner::ReportedRank::kFirst ? "first"
                                                            : "max";
    r["oom"] = run.oom;
    if (!oom) {
      r["measured_GiB"] = run.measured_GiB;
      r["predicted_GiB"] = check.predicted_GiB;
      r["error"] = check.error;
    }
    r["first_stage_allocated_GiB"] = check.first_stage_GiB;
    r["last_stage_allocated_GiB"] = check.last_stage_GiB;
    r["reserved_GiB"] = check.reserved_GiB;
    r["capacity_GiB"] = check.capacity_GiB;
    r["fits"] = check.fits;
    r["assumed"] = run.assumed;
    r["source"] = run.source;
    // The same question as a `paratune predict --request` document.
    const planner::Job& job = run.request.job;
    OrderedJson req;
    req["schema"] = "paratune.predict_request/v1";
    req["model"] = OrderedJson::parse(planner::ModelSpecToJson(job.model).dump());
    req["cluster"] = OrderedJson::parse(topology::ClusterSpecToJson(job.cluster).dump());
    req["gpus"] = job.gpus;
    req["training"] = planner::TrainingToJson(job.training);
    req["config"] = planner::ConfigToJson(run.request.config);
    r["request"] = req;
    out["runs"].push_back(r);
    if (table) {
      const std::string verdict = std::string(check.fits ? "fits " : "NOT fit ") +
                                  FormatFixed(check.reserved_GiB, 1) + " / " +
                                  FormatFixed(check.capacity_GiB, 1) +
                                  (oom ? (check.fits ? "  (ran out of memory: missed)" : "  (ran out of memory)")
                                       : (check.fits ? "" : "  (it ran: missed)"));
      io.out << std::left << std::setw(44) << run.id.substr(0, 43) << std::setw(16)
             << run.framework.substr(0, 15) << std::setw(15) << planner::MemoryMetricName(run.metric)
             << std::right << std::setw(10) << (oom ? std::string("oom") : FormatFixed(run.measured_GiB, 2))
             << std::setw(11) << (oom ? std::string("-") : FormatFixed(check.predicted_GiB, 2))
             << std::setw(9) << (oom ? std::string("-") : Pct(check.error)) << "  " << verdict << "\n";
    }
  }
  OrderedJson frameworks = OrderedJson::object();
  for (const auto& [fw, errs] : by_framework) frameworks[fw] = ErrorStatsJson(planner::MemoryStats(errs));
  const planner::MemoryErrorStats overall = planner::MemoryStats(all);
  out["per_framework"] = frameworks;
  out["overall"] = ErrorStatsJson(overall);
  // Every memory term comes from framework sources and the allocator factor
  // from the framework presets: nothing is fitted to these rows, so a
  // framework's held-out error is its in-sample error.
  out["fitted_constants"] = OrderedJson::array();
  OrderedJson lofo = OrderedJson::object();
  for (const auto& [fw, errs] : by_framework) lofo[fw] = ErrorStatsJson(planner::MemoryStats(errs));
  out["leave_one_framework_out"] = lofo;
  out["ran_predicted_not_to_fit"] = ran_not_fit;
  out["oom_rows"] = oom_rows;
  out["oom_predicted_to_fit"] = oom_predicted_fit;
  OrderedJson left = OrderedJson::array();
  for (const planner::UnmappedMemoryRow& u : unmapped) {
    OrderedJson j;
    j["id"] = u.id;
    j["framework"] = u.framework;
    j["why"] = u.why;
    left.push_back(j);
  }
  out["unmapped"] = left;
  if (!table) {
    io.out << out.dump(2) << "\n";
    return kExitOk;
  }
  io.out << "\nnot mapped (" << unmapped.size() << " rows):\n";
  for (const planner::UnmappedMemoryRow& u : unmapped) {
    io.out << "  " << std::left << std::setw(44) << u.id.substr(0, 43) << std::setw(16)
           << u.framework.substr(0, 15) << u.why << "\n";
  }
  io.out << "\nerror on each row's metric (predicted / measured - 1; + = over-predicted), zero headroom:\n"
         << "  " << std::left << std::setw(18) << "framework" << std::right << std::setw(6) << "rows"
         << std::setw(16) << "median |error|" << std::setw(16) << "median signed" << std::setw(12)
         << "p90 |error|" << "\n";
  for (const auto& [fw, errs] : by_framework) {
    PrintMemoryStats(io.out, fw, planner::MemoryStats(errs));
  }
  PrintMemoryStats(io.out, "all", overall);
  io.out << "leave-one-framework-out: no constant is fitted to these rows (terms from framework "
            "sources, allocator factor from the presets): held out = in-sample\n"
         << "rows that ran predicted not to fit: " << ran_not_fit << " of " << all.size()
         << "; OOM rows predicted to fit: " << oom_predicted_fit << " of " << oom_rows << "\n";
  return kExitOk;
}

}  // namespace paratune::cli
