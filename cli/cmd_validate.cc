// `paratune validate`: predictions against published measured runs.
#include <cmath>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/strings.h"
#include "planner/validation.h"

namespace paratune::cli {
namespace {

constexpr const char* kHelp = R"(usage: paratune validate --calibration FILE [--cluster dgx-a100-80gb] [--format table|json]

Predicts every published run in a calibration file (the format of
shared/calibration/korthikanti2022.json) with one cluster preset and no per-run
knobs, and prints predicted vs measured iteration time and the error.
Mapping rules: docs/model.md, "Validation".

  --calibration FILE  the published runs
  --cluster C         the cluster preset that stands for their hardware
  --format F          table (default) | json
)";

}  // namespace

int RunValidate(const Args& args, Io io) {
  Flags flags({"--calibration", "--cluster", "--format"}, {"--help"}, {{"-h", "--help"}});
  if (Status s = flags.Parse(args); !s.ok()) return UsageError(io, "validate", s);
  if (flags.Has("--help")) {
    io.out << kHelp;
    return kExitOk;
  }
  auto path = flags.Get("--calibration");
  if (!path) return UsageError(io, "validate", Status::InvalidArgument("--calibration is required"));
  auto doc = LoadJsonArg(*path, "--calibration", io.in);
  if (!doc.ok()) return UsageError(io, "validate", doc.status());
  auto runs = planner::PublishedRunsFromCalibration(*doc, flags.GetOr("--cluster", "dgx-a100-80gb"));
  if (!runs.ok()) return UsageError(io, "validate", runs.status());
  const std::string format = flags.GetOr("--format", "table");
  if (format != "table" && format != "json") {
    return UsageError(io, "validate", Status::InvalidArgument("--format must be table or json"));
  }

  OrderedJson out;
  out["schema"] = "paratune.validation/v1";
  out["runs"] = OrderedJson::array();
  double sum_abs = 0, max_abs = 0;
  int n = 0;
  if (format == "table") {
    io.out << std::left << std::setw(30) << "run" << std::right << std::setw(6) << "gpus"
           << std::setw(12) << "measured_s" << std::setw(12) << "predicted_s" << std::setw(9)
           << "error" << std::setw(8) << "MFU" << std::setw(10) << "pred MFU" << "\n";
  }
  for (const auto& run : *runs) {
    const auto& job = run.request.job;
    planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
    if (Status s = planner::ValidateConfig(cm, run.request.config); !s.ok()) {
      return UsageError(io, "validate", s.WithContext(run.id));
    }
    planner::Prediction p = cm.Predict(run.request.config);
    double err = 0;
    if (run.measured_iteration_s > 0) {
      err = (p.iteration_time_s - run.measured_iteration_s) / run.measured_iteration_s;
      sum_abs += std::fabs(err);
      max_abs = std::max(max_abs, std::fabs(err));
      ++n;
    }
    OrderedJson r;
    r["id"] = run.id;
    r["gpus"] = job.gpus;
    r["config"] = planner::ConfigToString(run.request.config);
    r["measured_s"] = run.measured_iteration_s;
    r["predicted_s"] = p.iteration_time_s;
    r["error"] = err;
    r["measured_mfu"] = run.measured_mfu;
    r["predicted_mfu"] = p.mfu;
    r["fits"] = p.fits;
    out["runs"].push_back(r);
    if (format == "table") {
      io.out << std::left << std::setw(30) << run.id << std::right << std::setw(6) << job.gpus
             << std::setw(12) << (run.measured_iteration_s > 0 ? FormatFixed(run.measured_iteration_s, 2) : "-")
             << std::setw(12) << FormatFixed(p.iteration_time_s, 2) << std::setw(8)
             << (run.measured_iteration_s > 0 ? FormatFixed(100 * err, 1) + "%" : "-") << std::setw(8)
             << (run.measured_mfu > 0 ? FormatFixed(100 * run.measured_mfu, 1) : "-") << std::setw(10)
             << FormatFixed(100 * p.mfu, 1) << (p.fits ? "" : "  (does not fit)") << "\n";
    }
  }
  out["mean_abs_error"] = n ? sum_abs / n : 0.0;
  out["max_abs_error"] = max_abs;
  if (format == "json") {
    io.out << out.dump(2) << "\n";
  } else {
    io.out << "runs with a measured time: " << n << ", mean |error| "
           << FormatFixed(n ? 100 * sum_abs / n : 0.0, 1) << " %, max |error| "
           << FormatFixed(100 * max_abs, 1) << " %\n";
  }
  return kExitOk;
}

}  // namespace paratune::cli
