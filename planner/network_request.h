// planner/network_request.h: a network job as the CLI (`--network`) and the
// service (POST /v1/predict and /v1/plans with a "network" key) state it, and
// the documents they answer with (docs/networks.md, docs/cli.md).
//
// Request:
//   {"network": preset name | network object (network.h),
//    "cluster": preset name | cluster object,
//    "gpus": N, "global_batch": B,
//    "training": {"precision": "bf16", "grad_bytes": 4,
//                 "optimizer_state_bytes": 8, "headroom": 0.05},   (optional)
//    "layout": {"micro_batch": b, "spatial": s, "tensor": t,
//               "sharding": "ddp"},                               (predict; optional)
//    "top": 10,                                                     (plans; optional)
//    "framework": "pytorch" | "torchtitan"}   (optional: only the layouts it runs)
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/network_cost.h"

namespace paratune::planner {

inline constexpr const char* kNetworkPlansSchema = "paratune.network_plans/v1";
// What the transformer emitters and replan answer when handed a network's
// plans (the CLI and the service route them to frameworks/network_emit.h and
// elastic/network_replan.h first).
inline constexpr const char* kNetworkPlansNotEmitted =
    "a network's plans (paratune.network_plans/v1) are not a transformer's: emit them with the network formats "
    "(pytorch, torchtitan for FLUX) and replan them as a network (docs/networks.md)";

struct NetworkJob {
  Network network;
  topology::ClusterSpec cluster;
  int gpus = 0;
  int64_t global_batch = 0;
  NetworkTraining training;
  double headroom = 0.05;  // plans keep memory under capacity × (1 − headroom)
  // Predict: the layout to price. Unstated keys: spatial 1, tensor 1, ddp,
  // the global batch over the data-parallel replicas (one micro-step).
  NetworkLayout layout;
  int top = 10;  // plans: how many to return
  // The framework that will train it ("" = any layout the model expresses):
  // "pytorch" (no spatial or tensor splits) or "torchtitan" (FLUX.1-schnell
  // only, FSDP only), as frameworks/network_emit.h writes them.
  std::string framework;
  NetworkSpace space;
  // The request as it was read, less "layout" and "top": the plans document
  // carries it so confirm, emit and replan read the same job back.
  Json request;
};

// The most layers an explicit network may list on this path: a plans search
// prices a few thousand layouts layer by layer (up to ~4,000 on 110,880 GPUs
// of an NVL72 rack), so this bounds one request to about 2 s (`repeat`
// describes identical layers at no cost; the largest preset has 492).
inline constexpr size_t kMaxNetworkLayers = 1024;

// Parses a request. Strict: unknown keys are errors naming their pointer;
// gpus in [1, 2^24], global_batch in [1, 2^30], headroom in [0, 1),
// grad_bytes 2 or 4, optimizer_state_bytes in [0, 64], top in [1, 1000].
Result<NetworkJob> ParseNetworkJob(const Json& j);

// Whether `j` is a paratune.network_plans/v1 document (an object whose
// "schema" is that string; any other value, of any type, is not).
bool IsNetworkPlans(const Json& j);

// A layout of `job` from its JSON form at `pointer` ({spatial, tensor,
// micro_batch, sharding}; unstated: no split, one micro-step, ddp or the
// framework's sharding), refused when the job's framework does not run it.
Result<NetworkLayout> ReadNetworkLayout(const NetworkJob& job, const Json& layout, const std::string& pointer);

// Plan `rank` (1-based) of a paratune.network_plans/v1 document as a job:
// its "request" read back by ParseNetworkJob with that plan's layout.
// InvalidArgument naming the pointer: another schema, no request (a document
// written before plans carried it), no such plan.
Result<NetworkJob> NetworkJobOfPlan(const Json& plans, int rank);
// The layout of plan `rank` for `job` (the document's job, already read).
Result<NetworkLayout> NetworkLayoutOfPlan(const NetworkJob& job, const Json& plans, int rank);

// paratune.network_prediction/v1: {schema, job, prediction}.
Result<OrderedJson> PredictNetworkDocument(const NetworkJob& job);
// paratune.network_plans/v1: {schema, job, request, headroom,
// refused_over_memory, layouts_fit, plans}: the `top` fastest layouts that
// fit; `request` is NetworkJob::request.
OrderedJson PlanNetworkDocument(const NetworkJob& job);
// The same, stopping when `expired` answers true (SearchNetworkLayouts):
// Timeout then, with how far the search got.
Result<OrderedJson> PlanNetworkDocumentUntil(const NetworkJob& job, const std::function<bool()>& expired);

// paratune.network_capacity/v1: {schema, job, size {key, step, largest,
// max}, found, binds, layout_prediction (the fastest layout at that size, one
// sample per replica; null when nothing fits)}. The job's global_batch is not
// read.
Result<OrderedJson> NetworkCapacityDocument(const NetworkJob& job, int64_t max_size);

// The pieces of those documents, for the table printers.
OrderedJson NetworkJobJson(const NetworkJob& job);
OrderedJson NetworkPredictionJson(const NetworkLayout& l, const NetworkPrediction& p);

}  // namespace paratune::planner
