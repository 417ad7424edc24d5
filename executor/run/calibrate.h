// executor/run/calibrate.h: `paratune calibrate`. Fits the three correction
// factors the cost model multiplies its terms by (topology::ClusterSpec::
// Corrections: compute, communication, memory_bound) to run reports, so the
// next plan on this cluster predicts what the hardware did.
//
// One point per (ok candidate, term) whose measured figure carries
// information (source measured, scaled or derived; modelled terms are left
// out: they are the model's own numbers). Its features are the term's
// prediction with the corrections it was made with divided out, split by the
// factor that scales it: compute → compute; comm_x..comm_pp → communication;
// optimizer → memory_bound; the bubble → compute and communication in the
// stage's proportions. Rows are weighted by 1 / the candidate's measured
// iteration time, so every candidate counts alike and a term by its share of
// the step. The factors minimise Σ w²(measured − Σ f·x)² within
// (0.05, 20) (the range the cluster parser accepts; bounded least squares,
// solved exactly over the 3^3 active sets with Eigen). A factor no point
// informs keeps its previous value. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "executor/run/report.h"
#include "topology/cluster.h"

namespace paratune::executor {

inline constexpr double kMinCorrection = 0.06;  // the cluster parser accepts (0.05, 20)
inline constexpr double kMaxCorrection = 19.0;

struct CalibrationFit {
  topology::ClusterSpec::Corrections factors;   // fitted (absolute: apply as they are)
  topology::ClusterSpec::Corrections previous;  // those the first report was predicted with
  int points = 0;                               // (candidate, term) rows used
  int candidates = 0;                           // ok candidates used
  // RMS over the rows of w·(measured − predicted), before (the reports'
  // predictions) and after (the fitted factors).
  double residual_before = 0;
  double residual_after = 0;
  // Mean |predicted − measured| / measured of the iteration time over the
  // candidates, before and after (after: each fitted term's change applied to
  // the report's prediction).
  double iteration_error_before = 0;
  double iteration_error_after = 0;
  std::vector<std::string> fixed;     // factors no point informs (kept at `previous`)
  std::vector<std::string> at_bound;  // factors the fit pushed to a bound
  std::vector<std::string> warnings;
};

// Fits the factors to every ok candidate of `reports`. kInvalidArgument when
// no candidate is ok or no term carries a measured figure.
Result<CalibrationFit> FitCalibration(const std::vector<RunReport>& reports);

// The profile's "calibration" section: the factors (under the Corrections
// key names), previous factors, points, candidates, residuals, iteration
// errors, fixed/at-bound factors, `reports` (paths), method and created_at.
OrderedJson CalibrationToJson(const CalibrationFit& fit, const std::vector<std::string>& reports);

// `profile` with its "calibration" section set to `section` (replacing one).
OrderedJson WithCalibration(const OrderedJson& profile, const OrderedJson& section);
// `profile` without its "calibration" section (what profiler::ParseProfile
// reads today: it rejects unknown keys).
Json WithoutCalibration(const Json& profile);
// The factors of a profile's "calibration" section; nullopt when it has none.
// Strict about the section's own keys.
Result<std::optional<topology::ClusterSpec::Corrections>> CorrectionsFromProfile(
    const Json& profile);
// Sets cluster->corrections from the profile's section, when it has one.
Status ApplyCalibration(const Json& profile, topology::ClusterSpec* cluster);

}  // namespace paratune::executor
