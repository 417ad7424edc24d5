#include "web/metrics.h"

#include <cstdio>

namespace paratune::web {

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string MethodLabel(const std::string& method) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
    if (method == m) return method;
  }
  return "other";
}

void Metrics::RecordRequest(const std::string& route, const std::string& method, int code,
                            double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  // Labels come from bounded sets only, so no client can grow the series.
  ++requests_[{route, MethodLabel(method), code < 100 || code > 599 ? 0 : code}];
  Histogram& h = latency_[{route, code}];
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  if (i < kBuckets.size()) ++h.counts[i];
  ++h.count;
  h.sum_s += seconds;
}

void Metrics::RecordPlan(bool cache_hit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++plans_served_;
  if (cache_hit) ++cache_hits_;
}

int64_t Metrics::plans_served() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_served_;
}

int64_t Metrics::cache_hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_hits_;
}

namespace {
std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

std::string Metrics::Render(const std::string& version,
                            const std::function<void(std::string*)>& extra_gauges) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o;
  o += "# HELP paratune_build_info The running paratune build (value 1).\n";
  o += "# TYPE paratune_build_info gauge\n";
  o += "paratune_build_info{version=\"" + EscapeLabel(version) + "\"} 1\n";
  o += "# HELP paratune_http_requests_total HTTP requests answered, by route pattern, method and "
       "status code.\n";
  o += "# TYPE paratune_http_requests_total counter\n";
  for (const auto& [k, n] : requests_) {
    const auto& [route, method, code] = k;
    o += "paratune_http_requests_total{route=\"" + EscapeLabel(route) + "\",method=\"" +
         EscapeLabel(method) + "\",code=\"" + std::to_string(code) + "\"} " + std::to_string(n) +
         "\n";
  }
  o += "# HELP paratune_http_request_duration_seconds Time from a parsed request to its response, "
       "by route and code.\n";
  o += "# TYPE paratune_http_request_duration_seconds histogram\n";
  for (const auto& [k, h] : latency_) {
    const std::string labels =
        "route=\"" + EscapeLabel(k.first) + "\",code=\"" + std::to_string(k.second) + "\"";
    int64_t cum = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cum += h.counts[i];
      o += "paratune_http_request_duration_seconds_bucket{" + labels + ",le=\"" + Num(kBuckets[i]) +
           "\"} " + std::to_string(cum) + "\n";
    }
    o += "paratune_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
         std::to_string(h.count) + "\n";
    o += "paratune_http_request_duration_seconds_sum{" + labels + "} " + Num(h.sum_s) + "\n";
    o += "paratune_http_request_duration_seconds_count{" + labels + "} " + std::to_string(h.count) +
         "\n";
  }
  o += "# HELP paratune_plans_served_total Plans documents returned by POST /v1/plans.\n";
  o += "# TYPE paratune_plans_served_total counter\n";
  o += "paratune_plans_served_total " + std::to_string(plans_served_) + "\n";
  o += "# HELP paratune_plan_cache_hits_total Plans documents answered from the in-memory plan "
       "cache.\n";
  o += "# TYPE paratune_plan_cache_hits_total counter\n";
  o += "paratune_plan_cache_hits_total " + std::to_string(cache_hits_) + "\n";
  if (extra_gauges) extra_gauges(&o);
  return o;
}

}  // namespace paratune::web
