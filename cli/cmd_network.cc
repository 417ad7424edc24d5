// `paratune predict --network` and `paratune plan --network`: jobs of networks
// that are not transformer stacks (planner/network.h, network_cost.h).
#include "cli/cmd_network.h"

#include <iomanip>
#include <ostream>

#include "cli/common.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "planner/network_cost.h"
#include "topology/cluster.h"

namespace paratune::cli {
namespace {

struct NetworkJob {
  planner::Network network;
  topology::ClusterSpec cluster;
  int gpus = 0;
  int64_t global_batch = 0;
  planner::NetworkTraining training;
};

Result<NetworkJob> JobFromFlags(const Flags& flags, std::istream& in) {
  NetworkJob job;
  PT_ASSIGN_OR_RETURN(Json net, PresetOrFile(*flags.Get("--network"), "--network", in));
  PT_ASSIGN_OR_RETURN(job.network, planner::ResolveNetwork(net, "--network"));
  auto cluster_arg = flags.Get("--cluster");
  if (!cluster_arg) return Status::InvalidArgument("--cluster is required");
  PT_ASSIGN_OR_RETURN(Json cluster, PresetOrFile(*cluster_arg, "--cluster", in));
  PT_ASSIGN_OR_RETURN(job.cluster, topology::ResolveCluster(cluster, "--cluster"));
  auto gpus = flags.Get("--gpus");
  if (!gpus) return Status::InvalidArgument("--gpus is required");
  PT_ASSIGN_OR_RETURN(int64_t g, ParseInt(*gpus, "--gpus"));
  if (g < 1 || g > (1 << 24)) return Status::InvalidArgument("--gpus: must be in [1, 2^24]");
  job.gpus = static_cast<int>(g);
  auto batch = flags.Get("--global-batch");
  if (!batch) return Status::InvalidArgument("--global-batch is required (samples per optimizer step)");
  PT_ASSIGN_OR_RETURN(job.global_batch, ParseCount(*batch, "--global-batch"));
  if (job.global_batch < 1 || job.global_batch > (int64_t{1} << 40)) {
    return Status::InvalidArgument("--global-batch: must be in [1, 2^40]");
  }
  PT_ASSIGN_OR_RETURN(job.training.precision, topology::ParsePrecision(flags.GetOr("--precision", "bf16")));
  if (job.training.precision == topology::Precision::kFp8) {
    return Status::InvalidArgument("--precision: fp8 recipes are priced for transformer layers only");
  }
  PT_ASSIGN_OR_RETURN(job.training.grad_bytes, ParseDouble(flags.GetOr("--grad-bytes", "4"), "--grad-bytes"));
  if (job.training.grad_bytes != 2 && job.training.grad_bytes != 4) {
    return Status::InvalidArgument("--grad-bytes: 2 (half-precision gradients) or 4 (fp32)");
  }
  PT_ASSIGN_OR_RETURN(job.training.optimizer_state_bytes,
                      ParseDouble(flags.GetOr("--optimizer-state-bytes", "8"), "--optimizer-state-bytes"));
  if (!(job.training.optimizer_state_bytes >= 0 && job.training.optimizer_state_bytes <= 64)) {
    return Status::InvalidArgument("--optimizer-state-bytes: must be in [0, 64] (Adam 8, SGD momentum 4)");
  }
  return job;
}

std::string Headline(const NetworkJob& job) {
  return job.network.name + " on " + std::to_string(job.gpus) + " × " + job.cluster.gpu.name + " (" +
         job.cluster.name + "), global batch " + std::to_string(job.global_batch);
}

std::string LayoutLine(const planner::NetworkLayout& l) {
  return std::string(planner::WeightShardingName(l.sharding)) + ", data " + std::to_string(l.Data()) +
         ", spatial " + std::to_string(l.spatial) + ", micro-batch " + std::to_string(l.micro_batch) + ", " +
         std::to_string(l.Accumulation()) + " micro-step" + (l.Accumulation() == 1 ? "" : "s");
}

OrderedJson PredictionJson(const planner::NetworkLayout& l, const planner::NetworkPrediction& p) {
  OrderedJson j;
  j["layout"] = {{"sharding", planner::WeightShardingName(l.sharding)}, {"data", l.Data()},
                 {"spatial", l.spatial}, {"micro_batch", l.micro_batch},
                 {"accumulation", l.Accumulation()}};
  j["step_s"] = p.step_s;
  j["samples_per_s"] = p.samples_per_s;
  j["forward_s"] = p.forward_s;
  j["backward_s"] = p.backward_s;
  j["halo_s"] = p.halo_s;
  j["grad_sync_s"] = p.grad_sync_s;
  j["grad_sync_exposed_s"] = p.grad_sync_exposed_s;
  j["optimizer_s"] = p.optimizer_s;
  j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  j["mfu"] = p.mfu;
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

OrderedJson JobJson(const NetworkJob& job) {
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
  return j;
}

void PrintPrediction(std::ostream& out, const NetworkJob& job, const planner::NetworkLayout& l,
                     const planner::NetworkPrediction& p) {
  out << "  " << LayoutLine(l) << "\n";
  out << "  step " << FormatFixed(p.step_s, 4) << " s, " << FormatFixed(p.samples_per_s, 1)
      << " samples/s, " << FormatFixed(p.model_tflops_per_gpu, 1) << " model TFLOP/s per GPU (MFU "
      << FormatFixed(100 * p.mfu, 1) << " %)\n";
  out << "  per micro-step: forward " << FormatFixed(p.forward_s, 4) << " s, backward "
      << FormatFixed(p.backward_s, 4) << " s, halo " << FormatFixed(p.halo_s, 4) << " s; per step: gradient sync "
      << FormatFixed(p.grad_sync_s, 4) << " s (" << FormatFixed(p.grad_sync_exposed_s, 4)
      << " s exposed), optimizer " << FormatFixed(p.optimizer_s, 4) << " s\n";
  out << "  memory " << FormatFixed(p.memory_GiB, 1) << " GiB of " << FormatFixed(job.cluster.gpu.memory_GiB, 1)
      << " (activations " << FormatFixed(p.activations_GiB, 1) << "): " << (p.fits ? "fits" : "DOES NOT FIT")
      << "\n";
}

}  // namespace

int PredictNetworkCommand(const Flags& flags, Io io) {
  auto job = JobFromFlags(flags, io.in);
  if (!job.ok()) return UsageError(io, "predict", job.status());
  planner::NetworkLayout l;
  l.gpus = job->gpus;
  l.global_batch = job->global_batch;
  auto int_flag = [&](const char* name, int64_t def) -> Result<int64_t> {
    auto v = flags.Get(name);
    return v ? ParseInt(*v, name) : Result<int64_t>(def);
  };
  auto spatial = int_flag("--spatial", 1);
  if (!spatial.ok()) return UsageError(io, "predict", spatial.status());
  if (*spatial < 1 || *spatial > job->gpus) {
    return UsageError(io, "predict", Status::InvalidArgument("--spatial: must be in [1, --gpus]"));
  }
  l.spatial = static_cast<int>(*spatial);
  auto micro = int_flag("--micro-batch", l.gpus % l.spatial == 0 ? job->global_batch / l.Data() : 1);
  if (!micro.ok()) return UsageError(io, "predict", micro.status());
  l.micro_batch = *micro;
  auto sharding = planner::ParseWeightSharding(flags.GetOr("--sharding", "ddp"));
  if (!sharding.ok()) return UsageError(io, "predict", sharding.status().WithContext("--sharding"));
  l.sharding = *sharding;
  auto p = planner::PredictNetwork(job->network, job->cluster, l, job->training);
  if (!p.ok()) return UsageError(io, "predict", p.status());
  const std::string format = flags.GetOr("--format", "json");
  if (format == "table") {
    io.out << Headline(*job) << "\n";
    PrintPrediction(io.out, *job, l, *p);
    io.out << "  slowest layers (forward + backward per micro-step):\n";
    for (const auto& s : p->slowest) {
      io.out << "    " << std::left << std::setw(40) << s.name << std::setw(12) << s.op << std::right
             << FormatFixed(1e3 * s.seconds, 2) << " ms" << (s.memory_bound ? "  (memory-bound)" : "") << "\n";
    }
    return kExitOk;
  }
  if (format != "json") return UsageError(io, "predict", Status::InvalidArgument("--format must be json or table"));
  OrderedJson doc;
  doc["schema"] = "paratune.network_prediction/v1";
  doc["job"] = JobJson(*job);
  doc["prediction"] = PredictionJson(l, *p);
  io.out << doc.dump(2) << "\n";
  return kExitOk;
}

int PlanNetworkCommand(const Flags& flags, Io io) {
  auto job = JobFromFlags(flags, io.in);
  if (!job.ok()) return UsageError(io, "plan", job.status());
  auto headroom = ParseDouble(flags.GetOr("--headroom", "0.05"), "--headroom");
  if (!headroom.ok()) return UsageError(io, "plan", headroom.status());
  if (!(*headroom >= 0 && *headroom < 1)) {
    return UsageError(io, "plan", Status::InvalidArgument("--headroom: must be in [0, 1)"));
  }
  auto top = ParseInt(flags.GetOr("--top", "10"), "--top");
  if (!top.ok() || *top < 1) return UsageError(io, "plan", Status::InvalidArgument("--top: a positive integer"));
  int refused = 0;
  const std::vector<planner::NetworkCandidate> ranked = planner::SearchNetworkLayouts(
      job->network, job->cluster, job->gpus, job->global_batch, job->training, *headroom, &refused);
  const size_t shown = std::min<size_t>(ranked.size(), static_cast<size_t>(*top));
  const std::string format = flags.GetOr("--format", "table");
  if (format == "table") {
    io.out << Headline(*job) << ": " << ranked.size() << " layouts fit, " << refused
           << " priced over memory\n";
    if (ranked.empty()) {
      io.out << "  nothing fits: fewer samples per GPU (a larger --gpus), sharding, or a spatial split "
                "(3D networks) would be needed\n";
      return kExitOk;
    }
    for (size_t i = 0; i < shown; ++i) {
      io.out << "#" << i + 1 << "\n";
      PrintPrediction(io.out, *job, ranked[i].layout, ranked[i].prediction);
    }
    return kExitOk;
  }
  if (format != "json") return UsageError(io, "plan", Status::InvalidArgument("--format must be json or table"));
  OrderedJson doc;
  doc["schema"] = "paratune.network_plans/v1";
  doc["job"] = JobJson(*job);
  doc["headroom"] = *headroom;
  doc["refused_over_memory"] = refused;
  doc["plans"] = OrderedJson::array();
  for (size_t i = 0; i < shown; ++i) doc["plans"].push_back(PredictionJson(ranked[i].layout, ranked[i].prediction));
  io.out << doc.dump(2) << "\n";
  return kExitOk;
}

}  // namespace paratune::cli
