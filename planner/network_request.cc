#include "planner/network_request.h"

#include <algorithm>

namespace paratune::planner {

namespace {

Status ReadTraining(ObjectReader& r, NetworkJob* job) {
  std::string precision = "bf16";
  PT_RETURN_IF_ERROR(r.OptString("precision", &precision));
  auto p = topology::ParsePrecision(precision);
  if (!p.ok()) return r.Error("precision", p.status().message());
  if (*p == topology::Precision::kFp8) {
    return r.Error("precision", "fp8 recipes are priced for transformer layers only");
  }
  job->training.precision = *p;
  PT_RETURN_IF_ERROR(r.OptNumber("grad_bytes", &job->training.grad_bytes));
  if (job->training.grad_bytes != 2 && job->training.grad_bytes != 4) {
    return r.Error("grad_bytes", "must be 2 (half-precision gradients) or 4 (fp32)");
  }
  PT_RETURN_IF_ERROR(r.OptNumber("optimizer_state_bytes", &job->training.optimizer_state_bytes));
  if (!(job->training.optimizer_state_bytes >= 0 && job->training.optimizer_state_bytes <= 64)) {
    return r.Error("optimizer_state_bytes", "must be in [0, 64] (Adam 8, SGD with momentum 4)");
  }
  PT_RETURN_IF_ERROR(r.OptBool("fused_norm", &job->training.fused_norm));
  PT_RETURN_IF_ERROR(r.OptNumber("headroom", &job->headroom));
  if (!(job->headroom >= 0 && job->headroom < 1)) return r.Error("headroom", "must be in [0, 1)");
  return r.Finish();
}

// The framework's space (what frameworks/network_emit.h writes for it).
Status ReadFramework(ObjectReader& r, NetworkJob* job) {
  PT_RETURN_IF_ERROR(r.OptString("framework", &job->framework));
  if (job->framework.empty()) return Status::Ok();
  if (job->framework == "pytorch") {
    job->space.spatial = job->space.tensor = job->space.sequence = false;
    job->training.zero1_whole_weights = true;  // ZeroRedundancyOptimizer (frameworks/network_emit.h)
  } else if (job->framework == "torchtitan") {
    const bool flux = r.Raw("network").is_string() && r.Raw("network").get<std::string>() == "flux1-schnell";
    if (!flux) {
      return r.Error("framework", "torchtitan trains FLUX.1-schnell among these networks (its own flux_schnell); "
                                  "use pytorch");
    }
    job->space.spatial = job->space.tensor = job->space.sequence = false;
    job->space.replicated = job->space.optimizer = false;
  } else {
    return r.Error("framework", "must be pytorch or torchtitan (omit it for every layout the model expresses)");
  }
  return Status::Ok();
}

// The layout a job runs when none is stated: no split, the framework's
// sharding (ddp, or fsdp where the framework only shards), one micro-step
// of the global batch over the GPUs.
NetworkLayout DefaultLayout(const NetworkJob& job) {
  NetworkLayout l;
  l.gpus = job.gpus;
  l.global_batch = job.global_batch;
  l.micro_batch = std::max<int64_t>(1, job.global_batch / job.gpus);
  l.sharding = job.space.replicated ? WeightSharding::kReplicated : WeightSharding::kFull;
  return l;
}

}  // namespace

Result<NetworkLayout> ReadNetworkLayout(const NetworkJob& job, const Json& layout, const std::string& pointer) {
  ObjectReader r(layout, pointer);
  NetworkLayout l = DefaultLayout(job);
  // The splits of a sample, read in turn: each with those before it must
  // divide gpus.
  int64_t product = 1;
  std::string named;
  for (auto [key, out] : {std::pair{"spatial", &l.spatial}, std::pair{"tensor", &l.tensor},
                          std::pair{"sequence", &l.sequence}}) {
    named += named.empty() ? key : std::string(" × ") + key;
    int64_t v = 1;
    PT_RETURN_IF_ERROR(r.OptInteger(key, &v));
    if (v < 1 || v > job.gpus || job.gpus % (product * v) != 0) {
      return r.Error(key, named + " must divide gpus (" + std::to_string(job.gpus) + ")");
    }
    product *= v;
    *out = static_cast<int>(v);
  }
  l.micro_batch = job.global_batch / l.Data();
  PT_RETURN_IF_ERROR(r.OptInteger("micro_batch", &l.micro_batch));
  if (l.micro_batch < 1) return r.Error("micro_batch", "must be positive");
  std::string sharding = WeightShardingName(l.sharding);
  PT_RETURN_IF_ERROR(r.OptString("sharding", &sharding));
  auto s = ParseWeightSharding(sharding);
  if (!s.ok()) return r.Error("sharding", s.status().message());
  l.sharding = *s;
  PT_RETURN_IF_ERROR(r.OptBool("recompute", &l.recompute));
  PT_RETURN_IF_ERROR(r.Finish());
  if (!job.space.Allows(l)) {
    return Status::InvalidArgument(pointer + ": " + job.framework + " does not run " +
                                   WeightShardingName(l.sharding) + " with spatial " + std::to_string(l.spatial) +
                                   ", sequence " + std::to_string(l.sequence) + " and tensor " +
                                   std::to_string(l.tensor) +
                                   (l.recompute ? " and recomputation" : "") + " (docs/networks.md)");
  }
  return l;
}

Result<NetworkJob> ParseNetworkJob(const Json& j) {
  ObjectReader r(j, "");
  NetworkJob job;
  if (!r.Has("network")) return r.Error("network", "is required");
  PT_ASSIGN_OR_RETURN(job.network, ResolveNetwork(r.Raw("network"), r.PointerOf("network")));
  if (job.network.layers.size() > kMaxNetworkLayers) {
    return r.Error("network", "lists " + std::to_string(job.network.layers.size()) + " layers; at most " +
                                  std::to_string(kMaxNetworkLayers) + " (use repeat for identical ones)");
  }
  if (!r.Has("cluster")) return r.Error("cluster", "is required");
  PT_ASSIGN_OR_RETURN(job.cluster, topology::ResolveCluster(r.Raw("cluster"), r.PointerOf("cluster")));
  int64_t gpus = 0;
  PT_RETURN_IF_ERROR(r.Integer("gpus", &gpus));
  if (gpus < 1 || gpus > (int64_t{1} << 24)) return r.Error("gpus", "must be in [1, 2^24]");
  job.gpus = static_cast<int>(gpus);
  PT_RETURN_IF_ERROR(r.Integer("global_batch", &job.global_batch));
  if (job.global_batch < 1 || job.global_batch > (int64_t{1} << 30)) {
    return r.Error("global_batch", "must be in [1, 2^30] samples");
  }
  if (r.Has("training")) {
    ObjectReader t(r.Raw("training"), r.PointerOf("training"));
    PT_RETURN_IF_ERROR(ReadTraining(t, &job));
  }
  PT_RETURN_IF_ERROR(ReadFramework(r, &job));
  job.layout = DefaultLayout(job);
  if (r.Has("layout")) {
    PT_ASSIGN_OR_RETURN(job.layout, ReadNetworkLayout(job, r.Raw("layout"), r.PointerOf("layout")));
  }
  int64_t top = job.top;
  PT_RETURN_IF_ERROR(r.OptInteger("top", &top));
  if (top < 1 || top > 1000) return r.Error("top", "must be in [1, 1000]");
  job.top = static_cast<int>(top);
  PT_RETURN_IF_ERROR(r.Finish());
  job.request = j;
  job.request.erase("layout");
  job.request.erase("top");
  return job;
}

bool IsNetworkPlans(const Json& j) {
  return j.is_object() && j.contains("schema") && j["schema"].is_string() && j["schema"] == kNetworkPlansSchema;
}

Result<NetworkJob> NetworkJobOfPlan(const Json& plans, int rank) {
  if (!IsNetworkPlans(plans)) {
    return Status::InvalidArgument(std::string("/schema: not a ") + kNetworkPlansSchema + " document");
  }
  if (!plans.contains("request") || !plans["request"].is_object()) {
    return Status::InvalidArgument(
        "/request: missing (a plans document written before plans carried their request): plan again");
  }
  auto job = ParseNetworkJob(plans["request"]);
  if (!job.ok()) return job.status().WithContext("/request");
  PT_ASSIGN_OR_RETURN(job->layout, NetworkLayoutOfPlan(*job, plans, rank));
  return job;
}

Result<NetworkLayout> NetworkLayoutOfPlan(const NetworkJob& job, const Json& plans, int rank) {
  const Json& list = plans.is_object() && plans.contains("plans") ? plans["plans"] : Json();
  if (!list.is_array() || list.empty()) return Status::InvalidArgument("/plans: no plans");
  if (rank < 1 || static_cast<size_t>(rank) > list.size()) {
    return Status::InvalidArgument("/plans: no plan " + std::to_string(rank) + " (the document has " +
                                   std::to_string(list.size()) + ")");
  }
  const Json& plan = list[static_cast<size_t>(rank - 1)];
  const std::string at = "/plans/" + std::to_string(rank - 1) + "/layout";
  if (!plan.is_object() || !plan.contains("layout") || !plan["layout"].is_object()) {
    return Status::InvalidArgument(at + ": missing");
  }
  // The keys a layout is stated by; the rest (data, accumulation) follow from them.
  Json stated = Json::object();
  for (const char* k : {"spatial", "tensor", "sequence", "micro_batch", "sharding", "recompute"}) {
    if (plan["layout"].contains(k)) stated[k] = plan["layout"][k];
  }
  return ReadNetworkLayout(job, stated, at);
}

OrderedJson NetworkJobJson(const NetworkJob& job) {
  OrderedJson j;
  j["network"] = job.network.name;
  j["family"] = job.network.family;
  j["params"] = job.network.Params();
  j["train_flops_per_sample"] = job.network.TrainingFlops();
  j["cluster"] = job.cluster.name;
  j["gpu"] = job.cluster.gpu.name;
  j["gpus"] = job.gpus;
  j["global_batch"] = job.global_batch;
  j["precision"] = topology::PrecisionName(job.training.precision);
  j["grad_bytes"] = job.training.grad_bytes;
  j["optimizer_state_bytes"] = job.training.optimizer_state_bytes;
  j["fused_norm"] = job.training.fused_norm;
  j["framework"] = job.framework.empty() ? OrderedJson(nullptr) : OrderedJson(job.framework);
  return j;
}

OrderedJson NetworkPredictionJson(const NetworkLayout& l, const NetworkPrediction& p) {
  OrderedJson j;
  j["layout"] = {{"sharding", WeightShardingName(l.sharding)}, {"data", l.Data()},
                 {"spatial", l.spatial},  {"tensor", l.tensor}, {"sequence", l.sequence},
                 {"micro_batch", l.micro_batch}, {"accumulation", l.Accumulation()},
                 {"recompute", l.recompute}};
  j["step_s"] = p.step_s;
  j["samples_per_s"] = p.samples_per_s;
  j["forward_s"] = p.forward_s;
  j["backward_s"] = p.backward_s;
  j["halo_s"] = p.halo_s;
  j["tensor_comm_s"] = p.tensor_comm_s;
  j["sequence_comm_s"] = p.sequence_comm_s;
  j["grad_sync_s"] = p.grad_sync_s;
  j["grad_sync_exposed_s"] = p.grad_sync_exposed_s;
  j["optimizer_s"] = p.optimizer_s;
  j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  j["mfu"] = p.mfu;
  j["published_mfu_ceiling"] = p.published_mfu_ceiling;
  j["above_published_mfu"] = p.above_published_mfu;
  j["memory_GiB"] = p.memory_GiB;
  j["activations_GiB"] = p.activations_GiB;
  j["fits"] = p.fits;
  OrderedJson slow = OrderedJson::array();
  for (const auto& s : p.slowest) {
    slow.push_back({{"layer", s.name}, {"op", s.op}, {"seconds", s.seconds}, {"memory_bound", s.memory_bound}});
  }
  j["slowest_layers"] = slow;
  return j;
}

Result<OrderedJson> PredictNetworkDocument(const NetworkJob& job) {
  PT_ASSIGN_OR_RETURN(NetworkPrediction p, PredictNetwork(job.network, job.cluster, job.layout, job.training));
  OrderedJson doc;
  doc["schema"] = "paratune.network_prediction/v1";
  doc["job"] = NetworkJobJson(job);
  doc["prediction"] = NetworkPredictionJson(job.layout, p);
  return doc;
}

OrderedJson PlanNetworkDocument(const NetworkJob& job) { return *PlanNetworkDocumentUntil(job, nullptr); }

Result<OrderedJson> PlanNetworkDocumentUntil(const NetworkJob& job, const std::function<bool()>& expired) {
  int refused = 0;
  bool stopped = false;
  const std::vector<NetworkCandidate> ranked =
      SearchNetworkLayouts(job.network, job.cluster, job.gpus, job.global_batch, job.training, job.headroom,
                           &refused, job.space, expired, &stopped);
  if (stopped) {
    return Status::Timeout("the network's layout search ran out of time after " + std::to_string(ranked.size()) +
                           " fitting layouts");
  }
  OrderedJson doc;
  doc["schema"] = kNetworkPlansSchema;
  doc["job"] = NetworkJobJson(job);
  doc["request"] = job.request;
  doc["headroom"] = job.headroom;
  doc["refused_over_memory"] = refused;
  doc["layouts_fit"] = ranked.size();
  doc["plans"] = OrderedJson::array();
  for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(job.top); ++i) {
    doc["plans"].push_back(NetworkPredictionJson(ranked[i].layout, ranked[i].prediction));
  }
  return doc;
}

Result<OrderedJson> NetworkCapacityDocument(const NetworkJob& job, int64_t max_size) {
  PT_ASSIGN_OR_RETURN(NetworkCapacity c,
                      CapacityOf(job.network, job.cluster, job.gpus, job.training, job.headroom, max_size, job.space));
  OrderedJson doc;
  doc["schema"] = "paratune.network_capacity/v1";
  OrderedJson j = NetworkJobJson(job);
  j.erase("global_batch");
  doc["job"] = j;
  doc["headroom"] = job.headroom;
  doc["size"] = {{"key", c.size.key}, {"step", c.size.step}, {"largest", c.found ? c.size.value : 0},
                 {"max", max_size}};
  doc["found"] = c.found;
  doc["binds"] = c.found ? OrderedJson(c.binds) : OrderedJson(nullptr);
  doc["layout_prediction"] = c.found ? NetworkPredictionJson(c.layout, c.prediction) : OrderedJson(nullptr);
  return doc;
}

}  // namespace paratune::planner
