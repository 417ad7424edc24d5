// web/metrics.h: the service's Prometheus metrics, rendered in the text
// exposition format 0.0.4 for GET /metrics: request counts by route, method
// and code, latency histograms by route and code, plans served and plan-cache
// hits. Thread-safe: handlers on many threads record into one Metrics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace paratune::web {

inline constexpr const char* kMetricsMediaType = "text/plain; version=0.0.4; charset=utf-8";

class Metrics {
 public:
  // Upper bounds of the latency buckets, seconds (le="..."); +Inf is implied.
  static constexpr std::array<double, 14> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  // One finished request. `route` is the route pattern ("/v1/jobs/{id}"), not
  // the raw path, and a method outside HTTP's seven is counted as "other", so
  // the label set stays bounded. `seconds` ≥ 0.
  void RecordRequest(const std::string& route, const std::string& method, int code, double seconds);
  // One plans document served; `cache_hit` when it came from the plan cache.
  void RecordPlan(bool cache_hit);

  int64_t plans_served() const;
  int64_t cache_hits() const;

  // The exposition text; `gauges` adds current values (name, help, value)
  // sampled by the caller, e.g. jobs by status. Ends with "\n".
  std::string Render(const std::string& version,
                     const std::function<void(std::string*)>& extra_gauges) const;

 private:
  struct Histogram {
    std::array<int64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
    int64_t count = 0;
    double sum_s = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, int64_t> requests_;  // (route, method, code)
  std::map<std::pair<std::string, int>, Histogram> latency_;               // (route, code)
  int64_t plans_served_ = 0;
  int64_t cache_hits_ = 0;
};

// The method label: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH or "other".
std::string MethodLabel(const std::string& method);

// Escapes a label value for the exposition format (\\, \", \n).
std::string EscapeLabel(const std::string& v);

}  // namespace paratune::web
