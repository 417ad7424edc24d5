// common/median.h: the median and quantiles of a sample (timings, relative errors).
#pragma once

#include <algorithm>
#include <vector>

namespace paratune {

// The middle value of `v` (the mean of the two middle values for an even
// count); 0 for an empty sample.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The q-quantile of `v` (0 ≤ q ≤ 1), interpolated linearly between the
// order statistics (q = 0.5 is the median, q = 0.9 the p90); 0 for an empty
// sample.
inline double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace paratune
