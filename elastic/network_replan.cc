#include "elastic/network_replan.h"

#include <algorithm>

#include "planner/network_request.h"

namespace paratune::planner {

namespace {

struct NetworkReplanRequest {
  NetworkJob job;  // the running job, its layout the plan's
  int available = 0;
  int top = 5;
};

// At most this many GPU counts are searched, the largest first.
constexpr int kMaxCounts = 64;

Result<NetworkReplanRequest> ParseRequest(const Json& j) {
  ObjectReader r(j, "");
  NetworkReplanRequest out;
  if (!r.Has("from")) return r.Error("from", "is required");
  int64_t rank = 1;
  PT_RETURN_IF_ERROR(r.OptInteger("rank", &rank));
  if (rank < 1 || rank > 1000) return r.Error("rank", "must be in [1, 1000]");
  auto job = NetworkJobOfPlan(r.Raw("from"), static_cast<int>(rank));
  if (!job.ok()) return job.status().WithContext("/from");
  out.job = *job;
  const int gpn = std::max(1, out.job.cluster.gpus_per_node);
  int given = 0;
  for (const char* key : {"gpus", "lost_nodes", "add_nodes"}) {
    if (!r.Has(key)) continue;
    ++given;
    int64_t v = 0;
    PT_RETURN_IF_ERROR(r.Integer(key, &v));
    if (v < 0 || v > (int64_t{1} << 24)) return r.Error(key, "must be in [0, 2^24]");
    const std::string k = key;
    const int64_t avail = k == "gpus" ? v : k == "lost_nodes" ? out.job.gpus - v * gpn : out.job.gpus + v * gpn;
    if (avail < 1 || avail > (int64_t{1} << 24)) {
      return r.Error(key, "leaves " + std::to_string(avail) + " GPUs of the running " + std::to_string(out.job.gpus));
    }
    out.available = static_cast<int>(avail);
  }
  if (given != 1) return Status::InvalidArgument("/gpus: give exactly one of gpus, lost_nodes or add_nodes");
  int64_t top = out.top;
  PT_RETURN_IF_ERROR(r.OptInteger("top", &top));
  if (top < 1 || top > 100) return r.Error("top", "must be in [1, 100]");
  out.top = static_cast<int>(top);
  // Keys the transformer replan reads that have no meaning here are refused
  // by name (Finish), not ignored.
  PT_RETURN_IF_ERROR(r.Finish());
  return out;
}

// The GPU counts tried: whole nodes of the available GPUs, one node less at a
// time, down to half of them (every count: the global batch divides some
// better than others), at most kMaxCounts.
std::vector<int> Counts(int available, int gpn) {
  std::vector<int> out;
  const int step = available >= gpn ? gpn : 1;
  const int first = available >= gpn ? available / gpn * gpn : available;
  for (int g = first; g >= std::max(1, available / 2) && out.size() < kMaxCounts; g -= step) out.push_back(g);
  if (out.empty()) out.push_back(available);
  return out;
}

}  // namespace

bool IsNetworkReplan(const Json& request) {
  return request.is_object() && request.contains("from") && IsNetworkPlans(request["from"]);
}

Result<OrderedJson> NetworkReplanDocument(const Json& request, const std::function<bool()>& expired) {
  PT_ASSIGN_OR_RETURN(NetworkReplanRequest in, ParseRequest(request));
  const NetworkJob& job = in.job;
  PT_ASSIGN_OR_RETURN(NetworkPrediction running,
                      PredictNetwork(job.network, job.cluster, job.layout, job.training));
  OrderedJson doc;
  doc["schema"] = kNetworkReplanSchema;
  doc["network"] = job.network.name;
  doc["cluster"] = job.cluster.name;
  doc["global_batch"] = job.global_batch;
  OrderedJson run = NetworkPredictionJson(job.layout, running);
  run["gpus"] = job.gpus;
  doc["running"] = run;
  doc["available_gpus"] = in.available;
  doc["counts"] = OrderedJson::array();
  int best_gpus = 0;
  double best_step = 0;
  const std::vector<int> counts = Counts(in.available, job.cluster.gpus_per_node);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expired && expired()) {
      return Status::Timeout("the network replan ran out of time after " + std::to_string(i) + " of " +
                             std::to_string(counts.size()) + " GPU counts");
    }
    const int g = counts[i];
    int refused = 0;
    bool stopped = false;
    const std::vector<NetworkCandidate> ranked = SearchNetworkLayouts(
        job.network, job.cluster, g, job.global_batch, job.training, job.headroom, &refused, job.space, expired,
        &stopped);
    if (stopped) {
      return Status::Timeout("the network replan ran out of time in the search of " + std::to_string(g) + " GPUs");
    }
    OrderedJson c;
    c["gpus"] = g;
    c["refused_over_memory"] = refused;
    if (ranked.empty()) {
      c["plan"] = nullptr;
    } else {
      const NetworkPrediction& p = ranked.front().prediction;
      c["plan"] = NetworkPredictionJson(ranked.front().layout, p);
      c["relative_step_time"] = p.step_s / running.step_s;
      c["relative_samples_per_s"] = p.samples_per_s / running.samples_per_s;
      // Samples per second decide between counts: the global batch is the same.
      if (best_gpus == 0 || p.step_s < best_step) best_gpus = g, best_step = p.step_s;
    }
    doc["counts"].push_back(std::move(c));
  }
  if (best_gpus == 0) {
    doc["plans"] = nullptr;
    return doc;
  }
  NetworkJob next = job;
  next.gpus = best_gpus;
  next.top = in.top;
  next.request["gpus"] = best_gpus;
  PT_ASSIGN_OR_RETURN(doc["plans"], PlanNetworkDocumentUntil(next, expired));
  return doc;
}

}  // namespace paratune::planner
