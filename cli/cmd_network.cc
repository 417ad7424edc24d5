// `paratune predict --network` and `paratune plan --network`: jobs of networks
// that are not transformer stacks (planner/network.h, network_cost.h).
#include "cli/cmd_network.h"

#include <iomanip>
#include <ostream>

#include "cli/common.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "planner/network_request.h"
#include "topology/cluster.h"

namespace paratune::cli {
namespace {

// The request document (planner/network_request.h) the flags state; the
// service reads the same document.
Result<Json> RequestFromNetworkFlags(const Flags& flags, std::istream& in, bool predict,
                                     bool batch_required = true) {
  Json req;
  PT_ASSIGN_OR_RETURN(req["network"], PresetOrFile(*flags.Get("--network"), "--network", in));
  auto cluster = flags.Get("--cluster");
  if (!cluster) return Status::InvalidArgument("--cluster is required");
  PT_ASSIGN_OR_RETURN(req["cluster"], PresetOrFile(*cluster, "--cluster", in));
  auto gpus = flags.Get("--gpus");
  if (!gpus) return Status::InvalidArgument("--gpus is required");
  PT_ASSIGN_OR_RETURN(req["gpus"], ParseInt(*gpus, "--gpus"));
  auto batch = flags.Get("--global-batch");
  if (!batch && batch_required) {
    return Status::InvalidArgument("--global-batch is required (samples per optimizer step)");
  }
  if (batch) {
    PT_ASSIGN_OR_RETURN(req["global_batch"], ParseCount(*batch, "--global-batch"));
  } else {
    req["global_batch"] = req["gpus"];
  }
  Json training = Json::object();
  if (auto f = flags.Get("--framework")) req["framework"] = *f;
  if (auto p = flags.Get("--precision")) training["precision"] = *p;
  for (auto [flag, key] : {std::pair{"--grad-bytes", "grad_bytes"},
                           std::pair{"--optimizer-state-bytes", "optimizer_state_bytes"},
                           std::pair{"--headroom", "headroom"}}) {
    if (auto v = flags.Get(flag)) {
      PT_ASSIGN_OR_RETURN(training[key], ParseDouble(*v, flag));
    }
  }
  if (!training.empty()) req["training"] = training;
  if (predict) {
    Json layout = Json::object();
    for (auto [flag, key] : {std::pair{"--micro-batch", "micro_batch"}, std::pair{"--spatial", "spatial"},
                             std::pair{"--tensor", "tensor"}, std::pair{"--sequence", "sequence"}}) {
      if (auto v = flags.Get(flag)) {
        PT_ASSIGN_OR_RETURN(layout[key], ParseInt(*v, flag));
      }
    }
    if (auto v = flags.Get("--sharding")) layout["sharding"] = *v;
    if (flags.Has("--recompute")) layout["recompute"] = true;
    if (!layout.empty()) req["layout"] = layout;
  } else if (auto t = flags.Get("--top")) {
    PT_ASSIGN_OR_RETURN(req["top"], ParseInt(*t, "--top"));
  }
  return req;
}

Result<planner::NetworkJob> JobFromFlags(const Flags& flags, std::istream& in, bool predict) {
  PT_ASSIGN_OR_RETURN(Json req, RequestFromNetworkFlags(flags, in, predict));
  return planner::ParseNetworkJob(req);
}

std::string Headline(const planner::NetworkJob& job) {
  return job.network.name + " on " + std::to_string(job.gpus) + " × " + job.cluster.gpu.name + " (" +
         job.cluster.name + "), global batch " + std::to_string(job.global_batch) +
         (job.framework.empty() ? "" : ", layouts " + job.framework + " runs");
}

double Num(const OrderedJson& j, const char* key) { return j[key].get<double>(); }

// One prediction of a network document (NetworkPredictionJson), as lines.
void PrintPrediction(std::ostream& out, const planner::NetworkJob& job, const OrderedJson& p) {
  const OrderedJson& l = p["layout"];
  const int64_t accum = l["accumulation"].get<int64_t>();
  out << "  " << l["sharding"].get<std::string>() << ", data " << l["data"] << ", spatial " << l["spatial"]
      << ", tensor " << l["tensor"] << (l["sequence"].get<int>() > 1 ? ", sequence " + l["sequence"].dump() : "")
      << ", micro-batch " << l["micro_batch"] << ", " << accum << " micro-step"
      << (accum == 1 ? "" : "s") << (l["recompute"].get<bool>() ? ", blocks recomputed" : "") << "\n";
  out << "  step " << FormatFixed(Num(p, "step_s"), 4) << " s, " << FormatFixed(Num(p, "samples_per_s"), 1)
      << " samples/s, " << FormatFixed(Num(p, "model_tflops_per_gpu"), 1) << " model TFLOP/s per GPU (MFU "
      << FormatFixed(100 * Num(p, "mfu"), 1) << " %)\n";
  if (p["above_published_mfu"].get<bool>()) {
    out << "  WARNING: MFU above the best published for this GPU and precision ("
        << FormatFixed(100 * Num(p, "published_mfu_ceiling"), 1)
        << " %): no run has shown it; treat this step time as optimistic\n";
  }
  out << "  per micro-step: forward " << FormatFixed(Num(p, "forward_s"), 4) << " s, backward "
      << FormatFixed(Num(p, "backward_s"), 4) << " s, halo " << FormatFixed(Num(p, "halo_s"), 4)
      << " s, tensor-parallel " << FormatFixed(Num(p, "tensor_comm_s"), 4) << " s"
      << (Num(p, "sequence_comm_s") > 0 ? ", sequence all-to-all " + FormatFixed(Num(p, "sequence_comm_s"), 4) + " s"
                                        : "")
      << "; per step: gradient sync " << FormatFixed(Num(p, "grad_sync_s"), 4) << " s ("
      << FormatFixed(Num(p, "grad_sync_exposed_s"), 4) << " s exposed), optimizer "
      << FormatFixed(Num(p, "optimizer_s"), 4) << " s\n";
  out << "  memory " << FormatFixed(Num(p, "memory_GiB"), 1) << " GiB of "
      << FormatFixed(job.cluster.gpu.memory_GiB, 1) << " (activations " << FormatFixed(Num(p, "activations_GiB"), 1)
      << "): " << (p["fits"].get<bool>() ? "fits" : "DOES NOT FIT") << "\n";
}

}  // namespace

int PredictNetworkCommand(const Flags& flags, Io io) {
  auto job = JobFromFlags(flags, io.in, /*predict=*/true);
  if (!job.ok()) return UsageError(io, "predict", job.status());
  auto doc = planner::PredictNetworkDocument(*job);
  if (!doc.ok()) return UsageError(io, "predict", doc.status());
  const std::string format = flags.GetOr("--format", "json");
  if (format == "json") {
    io.out << doc->dump(2) << "\n";
    return kExitOk;
  }
  if (format != "table") return UsageError(io, "predict", Status::InvalidArgument("--format must be json or table"));
  const OrderedJson& p = (*doc)["prediction"];
  io.out << Headline(*job) << "\n";
  PrintPrediction(io.out, *job, p);
  io.out << "  slowest layers (forward + backward per micro-step):\n";
  for (const auto& s : p["slowest_layers"]) {
    io.out << "    " << std::left << std::setw(40) << s["layer"].get<std::string>() << std::setw(12)
           << s["op"].get<std::string>() << std::right << FormatFixed(1e3 * s["seconds"].get<double>(), 2) << " ms"
           << (s["memory_bound"].get<bool>() ? "  (memory-bound)" : "") << "\n";
  }
  return kExitOk;
}

int PlanNetworkCommand(const Flags& flags, Io io) {
  auto job = JobFromFlags(flags, io.in, /*predict=*/false);
  if (!job.ok()) return UsageError(io, "plan", job.status());
  const OrderedJson doc = planner::PlanNetworkDocument(*job);
  const std::string format = flags.GetOr("--format", "table");
  if (format == "json") {
    io.out << doc.dump(2) << "\n";
    return kExitOk;
  }
  if (format != "table") return UsageError(io, "plan", Status::InvalidArgument("--format must be table or json"));
  io.out << Headline(*job) << ": " << doc["layouts_fit"] << " layouts fit, " << doc["refused_over_memory"]
         << " over memory\n";
  if (doc["plans"].empty()) {
    io.out << "  nothing fits: fewer samples per GPU (a larger --gpus), sharding, a tensor or sequence "
              "split (token layers, transformers), a spatial split (3D networks) or recomputation (stacks "
              "of repeated blocks) would be needed\n";
    return kExitOk;
  }
  for (size_t i = 0; i < doc["plans"].size(); ++i) {
    io.out << "#" << i + 1 << "\n";
    PrintPrediction(io.out, *job, doc["plans"][i]);
  }
  return kExitOk;
}

int CapacityNetworkCommand(const Flags& flags, Io io) {
  // One sample per data-parallel replica: the batch the request form needs
  // is not read by the capacity search.
  auto req = RequestFromNetworkFlags(flags, io.in, /*predict=*/false, /*batch_required=*/false);
  if (!req.ok()) return UsageError(io, "capacity", req.status());
  auto job = planner::ParseNetworkJob(*req);
  if (!job.ok()) return UsageError(io, "capacity", job.status());
  int64_t max_size = planner::SizeOf(job->network).step * 1024;
  if (auto m = flags.Get("--max-size")) {
    auto v = ParseCount(*m, "--max-size");
    if (!v.ok()) return UsageError(io, "capacity", v.status());
    if (*v < 1 || *v > (int64_t{1} << 24)) {
      return UsageError(io, "capacity", Status::InvalidArgument("--max-size: must be in [1, 2^24]"));
    }
    max_size = *v;
  }
  auto doc = planner::NetworkCapacityDocument(*job, max_size);
  if (!doc.ok()) return UsageError(io, "capacity", doc.status());
  const bool found = (*doc)["found"].get<bool>();
  const std::string format = flags.GetOr("--format", "table");
  if (format == "json") {
    io.out << doc->dump(2) << "\n";
  } else if (format == "table") {
    const OrderedJson& size = (*doc)["size"];
    io.out << job->network.name << " on " << job->gpus << " × " << job->cluster.gpu.name << " ("
           << job->cluster.name << "), one sample per data-parallel replica:\n";
    if (!found) {
      io.out << "  nothing fits: not even " << size["key"].get<std::string>() << " " << size["step"]
             << " (the smallest step); more GPUs, a spatial split or a smaller network would be needed\n";
    } else {
      io.out << "  the largest " << size["key"].get<std::string>() << " value that fits: " << size["largest"] << " (steps of "
             << size["step"] << "; binds " << (*doc)["binds"].get<std::string>() << ")\n";
      PrintPrediction(io.out, *job, (*doc)["layout_prediction"]);
    }
  } else {
    return UsageError(io, "capacity", Status::InvalidArgument("--format must be table or json"));
  }
  return found ? kExitOk : 3;
}

}  // namespace paratune::cli
