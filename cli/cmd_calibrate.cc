// `paratune calibrate`: fit the cost model's correction factors to run
// reports and store them in a profile. Thin: load, call
// executor::FitCalibration, write, print.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/strings.h"
#include "executor/run/calibrate.h"
#include "executor/run/report.h"
#include "profiler/profile.h"

namespace paratune::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: paratune calibrate --reports FILE [FILE...] --profile FILE --out FILE
                          [--cluster-out FILE]

Fits the three factors the cost model multiplies its terms by (the cluster's
"corrections": compute, communication, memory_bound) to what `paratune
confirm` measured, and writes them into a copy of the profile as its
"calibration" section, so the next `paratune plan --profile` predicts what
this machine does.

Every ok candidate of every report gives one point per term it measured
(compute, comm_x ... comm_pp, bubble, optimizer); terms the report marks
"modelled" (the model's own numbers, e.g. collectives on a one-GPU confirm)
are left out. The fit is least squares of

    measured ~ f_compute * compute + f_communication * communication
               + f_memory_bound * memory_bound

with each point weighted by 1 / its candidate's measured step time, the
factors kept in (0.05, 20), and the corrections the reports were predicted
with divided out first (so factors are absolute, and calibrating twice does
not compound). A factor no point informs keeps its previous value. The output
reports the residual and the mean step-time error before and after.

  --reports FILE...  run reports (paratune.run_report/v1); repeat the flag or
                     list several files after it
  --profile FILE     the profile the plans were made with (paratune.profile/v1)
  --out FILE         the calibrated profile (the input plus "calibration")
  --cluster-out FILE also write the profile's cluster description with the
                     profile's fits and the fitted corrections applied: a
                     cluster `paratune plan --cluster FILE` takes as it is

exit codes: 0 ok; 2 bad flags, an invalid report or profile, or no candidate
            that ran ok (nothing to fit).

example:
  mpirun -np 8 paratune confirm --plans plan.json --top 5 --backend cuda --out run.json
  paratune calibrate --reports run.json --profile h100.json --out h100-cal.json
  paratune plan --model gpt3-13b --cluster dgx-h100 --gpus 64 --global-batch 512 \
      --profile h100-cal.json
)";

int Fail(Io io, const Status& s) { return UsageError(io, "calibrate", s); }

Result<OrderedJson> LoadOrdered(const std::string& path) {
  PT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  PT_RETURN_IF_ERROR(ParseJson(text, "--profile " + path).status());
  return OrderedJson::parse(text);
}

}  // namespace

int RunCalibrate(const Args& args, Io io) {
  Flags f({"--reports", "--profile", "--out", "--cluster-out"}, {"--help"}, {{"-h", "--help"}});
  if (Status s = f.Parse(args); !s.ok()) return Fail(io, s);
  if (f.Has("--help")) {
    io.out << kHelp;
    return kExitOk;
  }
  std::vector<std::string> paths = f.GetAll("--reports");
  for (const std::string& p : f.positionals()) paths.push_back(p);
  if (paths.empty()) return Fail(io, Status::InvalidArgument("--reports FILE... is required"));
  const std::string profile_path = f.GetOr("--profile", "");
  const std::string out_path = f.GetOr("--out", "");
  if (profile_path.empty()) return Fail(io, Status::InvalidArgument("--profile FILE is required"));
  if (out_path.empty()) return Fail(io, Status::InvalidArgument("--out FILE is required"));

  std::vector<executor::RunReport> reports;
  for (const std::string& p : paths) {
    auto r = executor::LoadRunReport(p);
    if (!r.ok()) return Fail(io, r.status());
    if (!r->complete) {
      io.err << "paratune calibrate: warning: " << p
             << " is incomplete (confirm did not finish); using the candidates it has\n";
    }
    reports.push_back(std::move(*r));
  }
  auto doc = LoadOrdered(profile_path);
  if (!doc.ok()) return Fail(io, doc.status());
  // The profile as the profiler reads it (its own "calibration", if any, aside).
  const Json plain = executor::WithoutCalibration(Json::parse(doc->dump()));
  auto profile = profiler::ParseProfile(plain);
  if (!profile.ok()) return Fail(io, profile.status().WithContext("--profile " + profile_path));
  const std::string fp = profiler::ProfileFingerprint(*profile);
  for (size_t i = 0; i < reports.size(); ++i) {
    const std::string& used = reports[i].profile;
    if (used.empty()) {
      io.err << "paratune calibrate: warning: " << paths[i] << " was planned without a profile; "
             << "its factors correct the preset figures, not " << profile_path << "'s\n";
    } else if (used != fp) {
      io.err << "paratune calibrate: warning: " << paths[i] << " was planned with profile " << used
             << ", " << profile_path << " is " << fp << "\n";
    }
  }

  auto fit = executor::FitCalibration(reports);
  if (!fit.ok()) return Fail(io, fit.status());
  for (const std::string& w : fit->warnings) io.err << "paratune calibrate: warning: " << w << "\n";
  for (const std::string& n : fit->fixed) {
    io.err << "paratune calibrate: " << n
           << ": no measured term informs it; kept at its previous value\n";
  }
  for (const std::string& n : fit->at_bound) {
    io.err << "paratune calibrate: warning: " << n << " hit the (0.05, 20) bound: the model and "
           << "this machine disagree by more than a factor can say; check the profile\n";
  }
  const OrderedJson section = executor::CalibrationToJson(*fit, paths);
  if (Status s = WriteFileAtomic(out_path, executor::WithCalibration(*doc, section).dump(2) + "\n");
      !s.ok()) {
    return Fail(io, s);
  }
  if (auto cluster_out = f.Get("--cluster-out")) {
    if (!profile->cluster) {
      return Fail(io, Status::InvalidArgument("--cluster-out: " + profile_path +
                                              " embeds no cluster description"));
    }
    topology::ClusterSpec c = *profile->cluster;
    if (Status s = profiler::ApplyProfile(*profile, &c); !s.ok()) return Fail(io, s);
    c.corrections = fit->factors;
    if (Status s = WriteFileAtomic(*cluster_out, topology::ClusterSpecToJson(c).dump(2) + "\n");
        !s.ok()) {
      return Fail(io, s);
    }
    io.err << "paratune calibrate: wrote " << *cluster_out << "\n";
  }

  const auto& prev = fit->previous;
  const auto& now = fit->factors;
  io.out << "calibration from " << fit->candidates << " candidate(s), " << fit->points
         << " measured term(s) in " << reports.size() << " report(s)\n";
  io.out << "  factor          previous    fitted\n";
  auto row = [&](const char* name, double a, double b) {
    io.out << "  " << std::left << std::setw(14) << name << std::right << std::setw(10)
           << FormatFixed(a, 3) << std::setw(10) << FormatFixed(b, 3) << "\n";
  };
  row("compute", prev.compute, now.compute);
  row("communication", prev.communication, now.communication);
  row("memory_bound", prev.memory_bound, now.memory_bound);
  io.out << "  residual (RMS, share of the step)   " << FormatFixed(fit->residual_before, 4)
         << " -> " << FormatFixed(fit->residual_after, 4) << "\n";
  io.out << "  step-time error (mean |pred-meas|/meas) "
         << FormatFixed(100 * fit->iteration_error_before, 1) << " % -> "
         << FormatFixed(100 * fit->iteration_error_after, 1) << " %\n";
  io.err << "paratune calibrate: wrote " << out_path << "\n";
  return kExitOk;
}

}  // namespace paratune::cli
