#include "executor/run/calibrate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/strings.h"

namespace paratune::executor {
namespace {

constexpr int kFactors = 3;  // compute, communication, memory_bound
constexpr const char* kFactorName[kFactors] = {"compute", "communication", "memory_bound"};

std::array<double, kFactors> AsArray(const topology::ClusterSpec::Corrections& c) {
  return {c.compute, c.communication, c.memory_bound};
}
topology::ClusterSpec::Corrections FromArray(const std::array<double, kFactors>& a) {
  topology::ClusterSpec::Corrections c;
  c.compute = a[0];
  c.communication = a[1];
  c.memory_bound = a[2];
  return c;
}

struct Row {
  std::array<double, kFactors> x{};  // base prediction (corrections divided out) per factor
  double y = 0;                      // measured
  double reported = 0;               // what the report predicted (= previous factors · x)
  double w = 1;                      // weight
  size_t candidate = 0;              // index into the candidate list
};

double Residual2(const std::vector<Row>& rows, const std::array<double, kFactors>& f) {
  double s = 0;
  for (const Row& r : rows) {
    double pred = 0;
    for (int j = 0; j < kFactors; ++j)
      pred += f[static_cast<size_t>(j)] * r.x[static_cast<size_t>(j)];
    const double e = r.w * (r.y - pred);
    s += e * e;
  }
  return s;
}

// min Σ w²(y − x·f)² with lo ≤ f_j ≤ hi for the `free` factors (the others
// stay at `f0`): every assignment of each free factor to {solved, lo, hi},
// kept when the solved ones land inside the bounds; the best wins.
std::array<double, kFactors> BoundedLeastSquares(const std::vector<Row>& rows,
                                                 const std::array<bool, kFactors>& free_f,
                                                 const std::array<double, kFactors>& f0, double lo,
                                                 double hi, std::array<bool, kFactors>* at_bound) {
  std::array<double, kFactors> best = f0;
  double best_r = std::numeric_limits<double>::infinity();
  int combos = 1;
  for (int j = 0; j < kFactors; ++j) combos *= 3;
  for (int code = 0; code < combos; ++code) {
    std::array<int, kFactors> state{};  // 0 solved, 1 lo, 2 hi
    int rest = code;
    bool skip = false;
    for (int j = 0; j < kFactors; ++j) {
      state[static_cast<size_t>(j)] = rest % 3;
      rest /= 3;
      if (!free_f[static_cast<size_t>(j)] && state[static_cast<size_t>(j)] != 0) skip = true;
    }
    if (skip) continue;
    std::array<double, kFactors> f = f0;
    std::vector<int> solve;
    for (int j = 0; j < kFactors; ++j) {
      if (!free_f[static_cast<size_t>(j)]) continue;
      if (state[static_cast<size_t>(j)] == 1)
        f[static_cast<size_t>(j)] = lo;
      else if (state[static_cast<size_t>(j)] == 2)
        f[static_cast<size_t>(j)] = hi;
      else
        solve.push_back(j);
    }
    if (!solve.empty()) {
      Eigen::MatrixXd A(static_cast<Eigen::Index>(rows.size()),
                        static_cast<Eigen::Index>(solve.size()));
      Eigen::VectorXd b(static_cast<Eigen::Index>(rows.size()));
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        double y = r.y;
        for (int j = 0; j < kFactors; ++j) {
          if (std::find(solve.begin(), solve.end(), j) == solve.end()) {
            y -= f[static_cast<size_t>(j)] * r.x[static_cast<size_t>(j)];
          }
        }
        b(static_cast<Eigen::Index>(i)) = r.w * y;
        for (size_t k = 0; k < solve.size(); ++k) {
          A(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) =
              r.w * r.x[static_cast<size_t>(solve[k])];
        }
      }
      const Eigen::VectorXd sol = A.colPivHouseholderQr().solve(b);
      bool inside = true;
      for (size_t k = 0; k < solve.size(); ++k) {
        const double v = sol(static_cast<Eigen::Index>(k));
        if (!(v >= lo && v <= hi)) inside = false;
        f[static_cast<size_t>(solve[k])] = v;
      }
      if (!inside) continue;
    }
    const double r2 = Residual2(rows, f);
    if (r2 < best_r * (1 - 1e-12)) {
      best_r = r2;
      best = f;
      for (int j = 0; j < kFactors; ++j) {
        (*at_bound)[static_cast<size_t>(j)] =
            free_f[static_cast<size_t>(j)] && state[static_cast<size_t>(j)] != 0;
      }
    }
  }
  return best;
}

}  // namespace

Result<CalibrationFit> FitCalibration(const std::vector<RunReport>& reports) {
  CalibrationFit fit;
  std::vector<Row> rows;
  struct Cand {
    double predicted = 0, measured = 0;
    std::vector<size_t> rows;
  };
  std::vector<Cand> cands;
  bool have_previous = false;
  // One set of factors describes one machine: predicted_s is for the GPU each
  // report measured (measured_gpu), so reports from different GPUs disagree.
  std::string first_gpu;
  bool mixed_gpus = false;
  for (const RunReport& rep : reports) {
    if (rep.measured_gpu.empty()) continue;
    if (first_gpu.empty()) {
      first_gpu = rep.measured_gpu;
    } else if (rep.measured_gpu != first_gpu) {
      mixed_gpus = true;
    }
  }
  if (mixed_gpus) {
    fit.warnings.push_back("the reports were measured on different GPUs (" + first_gpu +
                           " and others); one set of factors is fitted to all of them");
  }
  for (const RunReport& rep : reports) {
    const std::array<double, kFactors> old = AsArray(rep.corrections);
    if (!have_previous) {
      fit.previous = rep.corrections;
      have_previous = true;
    } else if (!(rep.corrections == fit.previous)) {
      fit.warnings.push_back(
          "the reports were predicted with different corrections; each is "
          "divided out, factors no point informs keep the first report's");
    }
    for (const CandidateReport& c : rep.candidates) {
      if (c.status != Outcome::kOk || !c.measured_s || !(*c.measured_s > 0)) continue;
      Cand cand;
      cand.predicted = c.predicted_s;
      cand.measured = *c.measured_s;
      const double w = 1.0 / *c.measured_s;
      auto term = [&](Term t) -> const TermTimes& { return c.breakdown[static_cast<size_t>(t)]; };
      // The bubble is made of stage time: compute and exposed communication
      // in the predicted stage's proportions.
      const double pc = term(Term::kCompute).predicted_s;
      const double pm = term(Term::kCommX).predicted_s + term(Term::kCommY).predicted_s +
                        term(Term::kCommZ).predicted_s + term(Term::kCommCp).predicted_s;
      const double share_compute = (pc + pm) > 0 ? pc / (pc + pm) : 1.0;
      for (Term t : {Term::kCompute, Term::kCommX, Term::kCommY, Term::kCommZ, Term::kCommCp,
                     Term::kCommData, Term::kCommPp, Term::kBubble, Term::kOptimizer}) {
        const TermTimes& tt = term(t);
        if (tt.source == Source::kModelled) continue;
        if (!(tt.predicted_s > 0) && !(tt.measured_s > 0)) continue;
        Row r;
        r.y = tt.measured_s;
        r.reported = tt.predicted_s;
        r.w = w;
        r.candidate = cands.size();
        const double p = tt.predicted_s;
        switch (t) {
          case Term::kCompute:
            r.x[0] = p / old[0];
            break;
          case Term::kOptimizer:
            r.x[2] = p / old[2];
            break;
          case Term::kBubble:
            r.x[0] = p * share_compute / old[0];
            r.x[1] = p * (1 - share_compute) / old[1];
            break;
          default:
            r.x[1] = p / old[1];
            break;
        }
        cand.rows.push_back(rows.size());
        rows.push_back(r);
      }
      cands.push_back(std::move(cand));
    }
  }
  if (cands.empty()) {
    return Status::InvalidArgument("no candidate in the reports ran ok: nothing to calibrate on");
  }
  if (rows.empty()) {
    return Status::InvalidArgument("no term of the ok candidates was measured (all modelled)");
  }
  // Which factors the points inform.
  std::array<bool, kFactors> free_f{};
  std::array<double, kFactors> info{};
  double total = 0;
  for (const Row& r : rows) {
    for (int j = 0; j < kFactors; ++j) {
      info[static_cast<size_t>(j)] += r.w * r.x[static_cast<size_t>(j)];
    }
    total += r.w * r.y;
  }
  const std::array<double, kFactors> f_prev = AsArray(fit.previous);
  for (int j = 0; j < kFactors; ++j) {
    // A factor whose terms are under 0.1 % of the measured time is not determined.
    free_f[static_cast<size_t>(j)] = info[static_cast<size_t>(j)] > 1e-3 * std::max(total, 1e-30);
    if (!free_f[static_cast<size_t>(j)]) fit.fixed.push_back(kFactorName[j]);
  }
  // A prior toward the previous factors, as strong as the data's own noise:
  // one pseudo-point per free factor whose weight² equals the residual sum of
  // squares of the plain fit, so moving a factor by 1 costs as much as all the
  // unexplained variation. Noise-free measurements get no pull (exact
  // recovery); a factor the points barely inform (communication that is a few
  // percent of a CPU step) no longer fits noise. Residuals below are reported
  // on the measurements alone.
  // The noise is read off the unconstrained fit: a bound's misfit is not noise.
  std::array<bool, kFactors> at_bound{};
  const std::array<double, kFactors> plain =
      BoundedLeastSquares(rows, free_f, f_prev, -1e300, 1e300, &at_bound);
  const double noise = std::sqrt(Residual2(rows, plain));
  at_bound = {};
  std::array<double, kFactors> f =
      BoundedLeastSquares(rows, free_f, f_prev, kMinCorrection, kMaxCorrection, &at_bound);
  if (noise > 0) {
    std::vector<Row> solve_rows = rows;
    for (int j = 0; j < kFactors; ++j) {
      if (!free_f[static_cast<size_t>(j)]) continue;
      Row prior;
      prior.x[static_cast<size_t>(j)] = noise;
      prior.y = noise * f_prev[static_cast<size_t>(j)];
      prior.reported = prior.y;
      prior.w = 1.0;
      solve_rows.push_back(prior);
    }
    at_bound = {};
    f = BoundedLeastSquares(solve_rows, free_f, f_prev, kMinCorrection, kMaxCorrection, &at_bound);
  }
  for (int j = 0; j < kFactors; ++j) {
    if (at_bound[static_cast<size_t>(j)]) fit.at_bound.push_back(kFactorName[j]);
  }
  fit.factors = FromArray(f);
  fit.points = static_cast<int>(rows.size());
  fit.candidates = static_cast<int>(cands.size());

  // Residuals and iteration errors. "Before" is what the reports predicted.
  double before2 = 0;
  double after2 = 0;
  std::vector<double> fitted(rows.size(), 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    for (int j = 0; j < kFactors; ++j)
      fitted[i] += f[static_cast<size_t>(j)] * r.x[static_cast<size_t>(j)];
    before2 += std::pow(r.w * (r.y - r.reported), 2);
    after2 += std::pow(r.w * (r.y - fitted[i]), 2);
  }
  fit.residual_before = std::sqrt(before2 / static_cast<double>(rows.size()));
  fit.residual_after = std::sqrt(after2 / static_cast<double>(rows.size()));
  for (const Cand& cand : cands) {
    double after = cand.predicted;
    for (size_t ri : cand.rows) after += fitted[ri] - rows[ri].reported;
    fit.iteration_error_before += std::fabs(cand.predicted - cand.measured) / cand.measured;
    fit.iteration_error_after += std::fabs(after - cand.measured) / cand.measured;
  }
  fit.iteration_error_before /= static_cast<double>(cands.size());
  fit.iteration_error_after /= static_cast<double>(cands.size());
  return fit;
}

OrderedJson CalibrationToJson(const CalibrationFit& fit, const std::vector<std::string>& reports) {
  OrderedJson j;
  j["compute"] = fit.factors.compute;
  j["communication"] = fit.factors.communication;
  j["memory_bound"] = fit.factors.memory_bound;
  j["previous"] = {{"compute", fit.previous.compute},
                   {"communication", fit.previous.communication},
                   {"memory_bound", fit.previous.memory_bound}};
  j["points"] = fit.points;
  j["candidates"] = fit.candidates;
  j["residual_before"] = fit.residual_before;
  j["residual_after"] = fit.residual_after;
  j["iteration_error_before"] = fit.iteration_error_before;
  j["iteration_error_after"] = fit.iteration_error_after;
  j["fixed"] = fit.fixed;
  j["at_bound"] = fit.at_bound;
  j["reports"] = reports;
  j["method"] =
      "bounded least squares (0.05, 20) of measured ~ f_compute*compute + "
      "f_communication*communication + f_memory_bound*memory_bound over every ok candidate's "
      "measured terms, each weighted by 1/measured iteration time, with a prior toward the "
      "previous factors as strong as the plain fit's residual sum of squares per unit of factor";
  j["created_at"] = UtcNowIso8601();
  return j;
}

OrderedJson WithCalibration(const OrderedJson& profile, const OrderedJson& section) {
  OrderedJson out = profile;
  out["calibration"] = section;
  return out;
}

Json WithoutCalibration(const Json& profile) {
  Json out = profile;
  if (out.is_object()) out.erase("calibration");
  return out;
}

Result<std::optional<topology::ClusterSpec::Corrections>> CorrectionsFromProfile(
    const Json& profile) {
  if (!profile.is_object() || !profile.contains("calibration")) {
    return std::optional<topology::ClusterSpec::Corrections>();
  }
  ObjectReader r(profile["calibration"], "/calibration");
  topology::ClusterSpec::Corrections c;
  for (auto [key, out] : {std::pair<const char*, double*>{"compute", &c.compute},
                          {"communication", &c.communication},
                          {"memory_bound", &c.memory_bound}}) {
    PT_RETURN_IF_ERROR(r.Number(key, out));
    if (!(*out > 0.05 && *out < 20)) return r.Error(key, "must be in (0.05, 20)");
  }
  for (const char* key : {"previous", "points", "candidates", "residual_before", "residual_after",
                          "iteration_error_before", "iteration_error_after", "fixed", "at_bound",
                          "reports", "method", "created_at", "entries", "logs_method"}) {
    r.Ignore(key);
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return std::optional<topology::ClusterSpec::Corrections>(c);
}

Status ApplyCalibration(const Json& profile, topology::ClusterSpec* cluster) {
  PT_CHECK(cluster != nullptr);
  PT_ASSIGN_OR_RETURN(auto c, CorrectionsFromProfile(profile));
  if (c) cluster->corrections = *c;
  return Status::Ok();
}

}  // namespace paratune::executor
