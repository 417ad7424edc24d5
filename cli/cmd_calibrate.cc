// `paratune calibrate`: fit the cost model's correction factors to run
// reports (executor::FitCalibration) or to training logs
// (planner::FitLogCalibration, one scale per framework x GPU) and store them
// in a profile. Thin: load, fit, write, print.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/strings.h"
#include "executor/run/calibrate.h"
#include "executor/run/report.h"
#include "frameworks/logs.h"
#include "profiler/profile.h"
#include "topology/cluster.h"

namespace paratune::cli {
namespace {

constexpr const char* kCalibrateHelp =
    R"(usage: paratune calibrate --reports FILE [FILE...] --profile FILE --out FILE
                          [--cluster-out FILE]
       paratune calibrate --logs FILE [FILE...] --out FILE [--profile FILE]
                          [--cluster C] [--model M] [--gpus N] [--global-batch B]
                          [--seq S] [--precision P] [--framework F] [--config SPEC]

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

  --reports FILE...  run reports (paratune.run_report/v2 or v1); repeat the flag or
                     list several files after it
  --profile FILE     the profile the plans were made with (paratune.profile/v1)
  --out FILE         the calibrated profile (the input plus "calibration")
  --cluster-out FILE also write the profile's cluster description with the
                     profile's fits and the fitted corrections applied: a
                     cluster `paratune plan --cluster FILE` takes as it is

exit codes: 0 ok; 2 bad flags, an invalid report or profile, or no candidate
            that ran ok (nothing to fit).

From training logs (--logs): the runs a team already has are the truest
calibration. Each log is read (Megatron-LM / Megatron-Core / NeMo, Megatron-
DeepSpeed, DeepSpeed, torchtitan, Hugging Face Trainer; lines of several ranks
may be interleaved), warm-up (the first logged step), intervals with skipped
iterations and outliers (beyond 3.5 scaled MADs and 5 %) are dropped, and
the median step time is the run's measured time. What the log states
(Megatron's arguments block, torchtitan's mesh and batch line, DeepSpeed's
config print) wins; what it does not state comes from the flags below, and
the command lists for each run what it read and what it assumed. A log has
one number, so one scale per framework x GPU is fitted over that key's runs
(least squares of the relative error, each run weighted by 1 / its measured
time) and multiplies all three factors: one run is reproduced, several are
fitted. The profile's "calibration" gets an "entries" list keyed by framework
and GPU; the planner applies an entry only to candidates of that framework on
that GPU, so other frameworks and GPUs predict as before. Without --profile
the output is a profile holding only that calibration (and the cluster it was
fitted on); the profile cache is not read.

  --logs FILE...     training logs (text); repeat the flag or list several
  --cluster C        the cluster the runs ran on (a preset or a file; a log
                     never says); default: the --profile's embedded cluster
  --model M          the model, when the log has no arguments block (else the
                     preset matching the log's layers/hidden/heads, or a model
                     built from them)
  --gpus N, --global-batch B, --seq S, --precision P, --attention A,
  --framework F,
  --config SPEC      fill in what a log does not state (as in `paratune
                     predict`); a flag that contradicts the log is a warning
                     and the log wins (--framework overrides the log format's)
  --run N            the run to read of logs holding several (1-based; a log
                     with several runs and no --run exits 2 listing them)

exit codes (--logs): 0 ok; 2 a log that reads as no supported format, a
            missing fact (the message names the flag to pass) or a config that
            breaks a rule.

example:
  mpirun -np 8 paratune confirm --plans plan.json --top 5 --backend cuda --out run.json
  paratune calibrate --reports run.json --profile h100.json --out h100-cal.json
  paratune plan --model gpt3-13b --cluster dgx-h100 --gpus 64 --global-batch 512 \
      --profile h100-cal.json
  paratune calibrate --logs run1.log run2.log --cluster dgx-h100 --out h100-logs.json
  paratune predict --log run1.log --cluster dgx-h100 --profile h100-logs.json
)";

int FailCalibrate(Io io, const Status& s) { return UsageError(io, "calibrate", s); }

Result<OrderedJson> LoadOrdered(const std::string& path) {
  PT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  PT_RETURN_IF_ERROR(ParseJson(text, "--profile " + path).status());
  return OrderedJson::parse(text);
}

std::string SignedError(double predicted, double measured) {
  const double e = 100 * (predicted - measured) / measured;
  return (e >= 0 ? "+" : "") + FormatFixed(e, 1) + " %";
}

// `calibrate --logs`: one scale per framework x GPU from training logs.
int RunCalibrateLogs(const Flags& f, Io io) {
  std::vector<std::string> paths = f.GetAll("--logs");
  for (const std::string& p : f.positionals()) paths.push_back(p);
  const std::string out_path = f.GetOr("--out", "");
  if (out_path.empty()) return FailCalibrate(io, Status::InvalidArgument("--out FILE is required"));
  if (f.Has("--reports")) {
    return FailCalibrate(io,
                         Status::InvalidArgument("--logs and --reports are separate calibrations"));
  }
  auto lf = LogFlagsFromFlags(f, io.in);
  if (!lf.ok()) return FailCalibrate(io, lf.status());
  std::optional<OrderedJson> doc;
  std::optional<profiler::Profile> profile;
  if (auto pp = f.Get("--profile")) {
    auto d = LoadOrdered(*pp);
    if (!d.ok()) return FailCalibrate(io, d.status());
    auto prof = profiler::ParseProfile(Json::parse(d->dump()));
    if (!prof.ok()) return FailCalibrate(io, prof.status().WithContext("--profile " + *pp));
    doc = std::move(*d);
    profile = std::move(*prof);
    if (!lf->cluster) {
      if (!profile->cluster) {
        return FailCalibrate(io, Status::InvalidArgument("--cluster is required: " + *pp +
                                                         " embeds no cluster description"));
      }
      topology::ClusterSpec c = *profile->cluster;
      c.framework_corrections.clear();
      lf->cluster = topology::ClusterSpecToJson(c);
    }
  }
  const planner::StepSummaryOptions options;
  std::vector<planner::LogCalibrationRun> runs;
  std::vector<planner::LogRequest> built;
  for (const std::string& path : paths) {
    auto text = ReadFileToString(path);
    if (!text.ok()) return FailCalibrate(io, text.status().WithContext("--logs"));
    auto run = planner::ParseTrainingLog(*text, path, lf->run);
    if (!run.ok()) return FailCalibrate(io, run.status());
    auto lr = planner::RequestFromLog(*run, *lf, options);
    if (!lr.ok()) return FailCalibrate(io, lr.status().WithContext(path));
    auto req = planner::ParsePredictRequest(lr->request);
    if (!req.ok()) return FailCalibrate(io, req.status().WithContext(path));
    if (profile) {
      if (Status s = profiler::ApplyProfile(*profile, &req->job.cluster); !s.ok()) {
        return FailCalibrate(io, s.WithContext("--profile"));
      }
    }
    for (const std::string& n : run->notes)
      io.err << "paratune calibrate: " << path << ": " << n << "\n";
    for (std::string& w : planner::CalibratedRangeWarnings(*req)) {
      lr->warnings.push_back(std::move(w));
    }
    for (const std::string& w : lr->warnings) {
      io.err << "paratune calibrate: warning: " << path << ": " << w << "\n";
    }
    runs.push_back({path, std::move(*req), lr->measured_iteration_s});
    built.push_back(std::move(*lr));
  }
  if (runs.empty()) return FailCalibrate(io, Status::InvalidArgument("--logs FILE... is required"));
  auto fit = planner::FitLogCalibration(runs);
  if (!fit.ok()) return FailCalibrate(io, fit.status());

  // The section: the profile's own (its factors kept), entries replaced by key.
  const topology::ClusterSpec& base = runs.front().request.job.cluster;
  OrderedJson section;
  if (doc && doc->contains("calibration")) {
    section = (*doc)["calibration"];
  } else {
    section["compute"] = base.corrections.compute;
    section["communication"] = base.corrections.communication;
    section["memory_bound"] = base.corrections.memory_bound;
  }
  OrderedJson entries = OrderedJson::array();
  if (section.contains("entries")) {
    for (const auto& e : section["entries"]) {
      bool replaced = false;
      // Entries of another shape are kept as they were, never an exception.
      auto str = [&e](const char* k) {
        return e.is_object() && e.contains(k) && e[k].is_string() ? e[k].get<std::string>()
                                                                  : std::string();
      };
      for (const auto& n : fit->entries)
        replaced |= str("framework") == n.framework && str("gpu") == n.gpu;
      if (!replaced) entries.push_back(e);
    }
  }
  const std::string now = UtcNowIso8601();
  for (const planner::LogCalibrationEntry& e : fit->entries) {
    OrderedJson j;
    j["framework"] = e.framework;
    j["gpu"] = e.gpu;
    j["compute"] = e.factors.compute;
    j["communication"] = e.factors.communication;
    j["memory_bound"] = e.factors.memory_bound;
    j["residual"] = e.factors.residual;
    j["scale"] = e.scale;
    j["runs"] = e.runs.size();
    OrderedJson logs = OrderedJson::array();
    for (size_t i : e.runs) logs.push_back(runs[i].label);
    j["logs"] = logs;
    j["error_before"] = e.error_before;
    j["error_after"] = e.error_after;
    j["at_bound"] = e.at_bound;
    j["created_at"] = now;
    entries.push_back(j);
  }
  section["entries"] = entries;
  section["logs_method"] =
      "per framework x GPU: one scale s on all three factors of the cluster's own corrections, "
      "minimising sum(((T_i(s) - m_i) / m_i)^2) over the key's logged runs (median step time "
      "after warm-up, skipped intervals and outliers beyond 3.5 MADs and 5 %), s kept so factors "
      "stay in "
      "(0.06, 19)";
  std::string text;
  if (doc) {
    text = executor::WithCalibration(*doc, section).dump(2) + "\n";
  } else {
    profiler::Profile p;
    topology::ClusterSpec c = base;
    c.framework_corrections.clear();
    c.profile_fingerprint.clear();
    p.cluster = c;
    p.cluster_fingerprint = topology::Fingerprint(c);
    p.environment.tool = "paratune calibrate --logs";
    p.environment.backend = "logs";
    p.environment.created_at = now;
    p.environment.sources = paths;
    p.calibration = Json::parse(section.dump());
    text = profiler::ProfileToJson(p).dump(2) + "\n";
  }
  if (Status s = WriteFileAtomic(out_path, text); !s.ok()) return FailCalibrate(io, s);

  io.out << "calibration from " << runs.size() << " training log(s)\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const planner::LogRequest& b = built[i];
    const auto& job = runs[i].request.job;
    io.out << runs[i].label << "  (" << planner::FrameworkName(job.training.framework) << " on "
           << job.gpus << " x " << job.cluster.gpu.name << ", " << job.model.name << ", "
           << planner::ConfigToString(runs[i].request.config) << ")\n";
    io.out << "  measured " << FormatFixed(b.measured_iteration_s, 4) << " s/iteration (median of "
           << b.summary.used << " step(s); dropped " << b.summary.warmup_dropped << " warm-up, "
           << b.summary.skipped_dropped << " skipped, " << b.summary.outliers_dropped
           << " outlier)\n";
    io.out << "  predicted before " << FormatFixed(fit->predicted_before_s[i], 4) << " s ("
           << SignedError(fit->predicted_before_s[i], b.measured_iteration_s) << "), after "
           << FormatFixed(fit->predicted_after_s[i], 4) << " s ("
           << SignedError(fit->predicted_after_s[i], b.measured_iteration_s) << ")\n";
    for (const std::string& r : b.read_from_log) io.out << "  read:    " << r << "\n";
    for (const std::string& a : b.assumed) io.out << "  assumed: " << a << "\n";
  }
  io.out << "  framework           gpu            scale   compute  comm  memory  error before -> "
            "after\n";
  for (const planner::LogCalibrationEntry& e : fit->entries) {
    io.out << "  " << std::left << std::setw(20) << e.framework << std::setw(14) << e.gpu
           << std::right << std::setw(7) << FormatFixed(e.scale, 3) << std::setw(9)
           << FormatFixed(e.factors.compute, 3) << std::setw(7)
           << FormatFixed(e.factors.communication, 3) << std::setw(8)
           << FormatFixed(e.factors.memory_bound, 3) << "   "
           << FormatFixed(100 * e.error_before, 1) << " % -> "
           << FormatFixed(100 * e.error_after, 1) << " %\n";
    if (e.at_bound) {
      io.err << "paratune calibrate: warning: " << e.framework << " on " << e.gpu
             << ": the scale hit the factors' bound; the model and these runs disagree by more "
                "than a factor can say\n";
    }
  }
  io.err << "paratune calibrate: wrote " << out_path << "\n";
  return kExitOk;
}

}  // namespace

int RunCalibrate(const Args& args, Io io) {
  Flags f({"--reports", "--profile", "--out", "--cluster-out", "--logs", "--cluster", "--model",
           "--gpus", "--global-batch", "--seq", "--precision", "--attention", "--framework",
           "--config", "--run"},
          {"--help"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(f, args, io, "calibrate", kCalibrateHelp)) return *done;
  if (f.Has("--logs")) return RunCalibrateLogs(f, io);
  for (const char* only : {"--cluster", "--model", "--gpus", "--global-batch", "--seq",
                           "--precision", "--attention", "--framework", "--config", "--run"}) {
    if (f.Has(only)) {
      return FailCalibrate(io, Status::InvalidArgument(std::string(only) + " goes with --logs"));
    }
  }
  std::vector<std::string> paths = f.GetAll("--reports");
  for (const std::string& p : f.positionals()) paths.push_back(p);
  if (paths.empty())
    return FailCalibrate(io, Status::InvalidArgument("--reports FILE... is required"));
  const std::string profile_path = f.GetOr("--profile", "");
  const std::string out_path = f.GetOr("--out", "");
  if (profile_path.empty())
    return FailCalibrate(io, Status::InvalidArgument("--profile FILE is required"));
  if (out_path.empty()) return FailCalibrate(io, Status::InvalidArgument("--out FILE is required"));

  std::vector<executor::RunReport> reports;
  for (const std::string& p : paths) {
    auto r = executor::LoadRunReport(p);
    if (!r.ok()) return FailCalibrate(io, r.status());
    if (!r->complete) {
      io.err << "paratune calibrate: warning: " << p
             << " is incomplete (confirm did not finish); using the candidates it has\n";
    }
    reports.push_back(std::move(*r));
  }
  auto doc = LoadOrdered(profile_path);
  if (!doc.ok()) return FailCalibrate(io, doc.status());
  // The profile as the profiler reads it (its own "calibration", if any, aside).
  const Json plain = executor::WithoutCalibration(Json::parse(doc->dump()));
  auto profile = profiler::ParseProfile(plain);
  if (!profile.ok())
    return FailCalibrate(io, profile.status().WithContext("--profile " + profile_path));
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
  if (!fit.ok()) return FailCalibrate(io, fit.status());
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
    return FailCalibrate(io, s);
  }
  if (auto cluster_out = f.Get("--cluster-out")) {
    if (!profile->cluster) {
      return FailCalibrate(io, Status::InvalidArgument("--cluster-out: " + profile_path +
                                                       " embeds no cluster description"));
    }
    topology::ClusterSpec c = *profile->cluster;
    if (Status s = profiler::ApplyProfile(*profile, &c); !s.ok()) return FailCalibrate(io, s);
    c.corrections = fit->factors;
    if (Status s = WriteFileAtomic(*cluster_out, topology::ClusterSpecToJson(c).dump(2) + "\n");
        !s.ok()) {
      return FailCalibrate(io, s);
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
