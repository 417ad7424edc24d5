#include "profiler/fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace paratune::profiler {
namespace {

// Solves min ‖A·x − 1‖² (rows already divided by their measured time, so the
// residuals are relative errors). Column-pivoting QR: stable on the badly
// scaled columns a byte sweep over nine decades produces.
Eigen::VectorXd SolveRelative(const Eigen::MatrixXd& a) {
  // Scale columns to unit norm first; unscale the solution afterwards.
  Eigen::VectorXd norms = a.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < norms.size(); ++j) {
    if (!(norms(j) > 0)) norms(j) = 1;
  }
  const Eigen::MatrixXd scaled = a * norms.cwiseInverse().asDiagonal();
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(a.rows());
  Eigen::VectorXd x = scaled.colPivHouseholderQr().solve(ones);
  return x.cwiseQuotient(norms);
}

double Rms(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace

Result<AlphaBetaFit> FitAlphaBeta(const std::vector<TimedSize>& samples,
                                  topology::Collective collective, int group_size) {
  if (group_size < 2) {
    return Status::InvalidArgument("an α-β fit needs a group of at least 2 ranks");
  }
  std::set<int64_t> sizes;
  for (const TimedSize& s : samples) {
    if (s.size_bytes <= 0 || !(s.time_us > 0) || !std::isfinite(s.time_us)) {
      return Status::InvalidArgument("sample with size " + std::to_string(s.size_bytes) +
                                     " B and time " + std::to_string(s.time_us) +
                                     " us cannot be fitted (both must be positive)");
    }
    sizes.insert(s.size_bytes);
  }
  if (sizes.size() < 2) {
    return Status::InvalidArgument("an α-β fit needs at least two distinct sizes, got " +
                                   std::to_string(sizes.size()));
  }
  const double factor = topology::BusFactor(collective, group_size);
  const auto n = static_cast<Eigen::Index>(samples.size());
  // Model in µs: t = a + b·x, x = bus bytes; a = α·p, b = 1 / (β·1e3).
  Eigen::MatrixXd m(n, 2);
  for (Eigen::Index i = 0; i < n; ++i) {
    const TimedSize& s = samples[static_cast<size_t>(i)];
    m(i, 0) = 1.0 / s.time_us;
    m(i, 1) = factor * static_cast<double>(s.size_bytes) / s.time_us;
  }
  Eigen::VectorXd x = SolveRelative(m);
  double a = x(0), b = x(1);
  if (a < 0) {
    // Intercept clamped at zero: b = Σ(w·x)/Σ(w·x²) with w = 1/t² (relative LSQ).
    double num = 0, den = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      num += m(i, 1);
      den += m(i, 1) * m(i, 1);
    }
    a = 0;
    b = den > 0 ? num / den : 0;
  }
  if (!(b > 0)) {
    return Status::InvalidArgument(
        std::string("cannot fit β for ") + topology::CollectiveName(collective) + " on " +
        std::to_string(group_size) +
        " ranks: time does not grow with size (every sample is latency-bound; raise -e)");
  }
  AlphaBetaFit fit;
  fit.alpha_us = a / group_size;
  fit.beta_GBps = 1.0 / (b * 1e3);
  for (const TimedSize& s : samples) {
    const double predicted = PredictUs(fit, collective, group_size, s.size_bytes);
    fit.relative_errors.push_back((predicted - s.time_us) / s.time_us);
  }
  fit.residual = Rms(fit.relative_errors);
  return fit;
}

double PredictUs(const AlphaBetaFit& fit, topology::Collective collective, int group_size,
                 int64_t size_bytes) {
  const double bus = topology::BusFactor(collective, group_size) * static_cast<double>(size_bytes);
  return fit.alpha_us * group_size + bus / (fit.beta_GBps * 1e3);
}

double GeometricMeanSize(int64_t m, int64_t n, int64_t k) {
  return std::cbrt(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
}

double GemmTflops(int64_t m, int64_t n, int64_t k, double time_us) {
  if (!(time_us > 0)) return 0;
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         (time_us * 1e6);
}

double CurveEfficiency(const GemmCurveFit& fit, double size) {
  return fit.saturation_efficiency / (1.0 + std::pow(fit.size_half / size, fit.gamma));
}

Result<GemmCurveFit> FitGemmCurve(const std::vector<GemmTiming>& samples, double peak_tflops) {
  if (!(peak_tflops > 0)) return Status::InvalidArgument("a GEMM curve needs a positive peak");
  std::set<double> sizes;
  for (const GemmTiming& g : samples) {
    if (g.m <= 0 || g.n <= 0 || g.k <= 0 || !(g.time_us > 0)) {
      return Status::InvalidArgument("GEMM sample with non-positive dims or time");
    }
    sizes.insert(std::round(GeometricMeanSize(g.m, g.n, g.k)));
  }
  if (sizes.size() < 3) {
    return Status::InvalidArgument(
        "a GEMM efficiency curve needs at least three distinct sizes, got " +
        std::to_string(sizes.size()));
  }
  const auto n = static_cast<Eigen::Index>(samples.size());
  std::vector<double> eff(samples.size()), size(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const GemmTiming& g = samples[i];
    eff[i] = GemmTflops(g.m, g.n, g.k, g.time_us) / peak_tflops;
    size[i] = GeometricMeanSize(g.m, g.n, g.k);
  }
  // t̂/t = e·(u + v·s^−γ) with u = 1/E, v = s₀^γ/E: linear in (u, v) for fixed γ.
  GemmCurveFit best;
  best.residual = std::numeric_limits<double>::infinity();
  for (int step = 0; step <= 390; ++step) {
    const double gamma = 0.1 + 0.01 * step;  // 0.1 … 4.0
    Eigen::MatrixXd m(n, 2);
    for (Eigen::Index i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      m(i, 0) = eff[k];
      m(i, 1) = eff[k] * std::pow(size[k], -gamma);
    }
    Eigen::VectorXd x = SolveRelative(m);
    double u = x(0), v = x(1);
    if (v < 0) {  // efficiency must not fall with size: a flat curve instead
      double num = 0, den = 0;
      for (double e : eff) {
        num += e;
        den += e * e;
      }
      u = num / den;
      v = 0;
    }
    if (!(u > 0)) continue;
    double ss = 0;
    for (size_t k = 0; k < eff.size(); ++k) {
      const double r = eff[k] * (u + v * std::pow(size[k], -gamma)) - 1.0;
      ss += r * r;
    }
    const double rms = std::sqrt(ss / static_cast<double>(eff.size()));
    if (rms < best.residual) {
      best.residual = rms;
      best.saturation_efficiency = 1.0 / u;
      best.gamma = gamma;
      best.size_half = v > 0 ? std::pow(v / u, 1.0 / gamma) : 0.0;
    }
  }
  if (!std::isfinite(best.residual)) {
    return Status::InvalidArgument("the GEMM timings admit no positive efficiency curve");
  }
  best.peak_tflops = peak_tflops;
  for (size_t k = 0; k < eff.size(); ++k) {
    best.relative_errors.push_back(eff[k] / CurveEfficiency(best, size[k]) - 1.0);
  }
  // Curve points every half octave across the measured range, ends included.
  const double lo = *std::min_element(size.begin(), size.end());
  const double hi = *std::max_element(size.begin(), size.end());
  std::vector<double> at;
  for (double s = std::exp2(std::ceil(2 * std::log2(lo)) / 2); s < hi * (1 - 1e-9);
       s *= std::sqrt(2.0)) {
    if (s > lo * (1 + 1e-9)) at.push_back(s);
  }
  at.insert(at.begin(), lo);
  at.push_back(hi);
  for (double s : at) {
    const double e = std::clamp(CurveEfficiency(best, s), 1e-6, 1.0);
    best.curve.push_back({std::round(s), e});
  }
  // Rounding may merge neighbours; keep sizes strictly ascending.
  best.curve.erase(std::unique(best.curve.begin(), best.curve.end(),
                               [](const auto& a, const auto& b) { return a.size == b.size; }),
                   best.curve.end());
  return best;
}

}  // namespace paratune::profiler
