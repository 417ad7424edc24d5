#include "validation/beyond_runs.h"

#include <cmath>

#include "validation/row_fields.h"

namespace paratune::planner {

namespace rf = row_fields;

namespace {

// What a benchmark's reference implementation trains with, where the rows do
// not say: the network preset, the precision of its GEMMs, the width of the
// gradients its data-parallel collective moves, its optimizer's state per
// parameter and how it shards weights.
struct BenchmarkDefaults {
  const char* benchmark;
  const char* network;
  double grad_bytes;
  double optimizer_state_bytes;
  WeightSharding sharding;
  const char* why;  // the implementation the defaults come from
};

constexpr BenchmarkDefaults kBenchmarks[] = {
    {"resnet", "resnet-50", 2, 4, WeightSharding::kReplicated,
     "NVIDIA's MXNet implementation: fp16 mixed precision with fp16 gradients all-reduced, SGD with "
     "LARS (one momentum per parameter)"},
    {"retinanet", "retinanet-resnext50", 4, 8, WeightSharding::kReplicated,
     "PyTorch AMP (fp32 gradients) with DDP and Adam, as the MLPerf reference"},
    {"stable_diffusion", "sd2-unet", 4, 8, WeightSharding::kReplicated,
     "NeMo with bf16 mixed precision, fp32 gradients all-reduced, AdamW"},
    {"flux1", "flux1-schnell", 2, 8, WeightSharding::kOptimizer,
     "NeMo/Megatron with bf16 mixed precision, the distributed optimizer (ZeRO-1) reducing bf16 "
     "gradients, AdamW"},
    {"unet3d", "unet3d-kits19", 2, 4, WeightSharding::kReplicated,
     "NVIDIA's MXNet implementation: fp16 (--static_cast) with fp16 gradients, SGD with momentum"},
    {"deepcam", "deepcam", 4, 8, WeightSharding::kReplicated,
     "NVIDIA's PyTorch implementation: AMP (fp16) with fp32 gradients all-reduced by DDP, LAMB (two "
     "fp32 moments per parameter)"},
    {"cosmoflow", "cosmoflow", 4, 4, WeightSharding::kReplicated,
     "mixed precision with fp32 gradients all-reduced, SGD with momentum (MLPerf HPC reference)"},
};

// The cluster preset of a row's GPU, and its generation.
struct GpuMap {
  const char* gpu;
  const char* cluster;
  const char* generation;
};
constexpr GpuMap kGpus[] = {
    {"NVIDIA A100-SXM-40GB", "dgx-a100-40gb", "Ampere"}, {"NVIDIA A100-SXM-80GB", "dgx-a100-80gb", "Ampere"},
    {"NVIDIA H100-SXM", "dgx-h100", "Hopper"},           {"NVIDIA H200-SXM", "dgx-h200", "Hopper"},
    {"NVIDIA B200", "dgx-b200", "Blackwell"},            {"NVIDIA GB200", "gb200-nvl72", "Blackwell"},
    {"NVIDIA GB300", "gb300-nvl72", "Blackwell"},
};

// The row's layout from its parallel and hardware blocks; an empty string, or
// why it cannot be expressed.
std::string ReadLayout(const Json& row, NetworkLayout* l, std::vector<std::string>* assumed) {
  const Json empty = Json::object();
  const Json& par = row.contains("parallel") ? row["parallel"] : empty;
  const Json& hw = row.contains("hardware") ? row["hardware"] : empty;
  if (rf::Int(par, "context_parallel", 1) > 1) return "context parallelism of a network is not modelled";
  l->gpus = rf::Int(par, "training_gpus", rf::Int(hw, "num_gpus", 0));
  l->spatial = std::max(1, rf::Int(par, "spatial_parallel", 1));
  l->tensor = std::max(1, rf::Int(par, "tensor_parallel", 1));
  l->global_batch = static_cast<int64_t>(rf::Num(par, "global_batch", 0));
  if (l->gpus < 1 || l->global_batch < 1) return "the row states no GPU count or global batch";
  if (l->gpus % (l->spatial * l->tensor) != 0) return "spatial × tensor parallelism does not divide the training GPUs";
  const int dp = rf::Int(par, "data_parallel", l->Data());
  if (dp != l->Data()) {
    return "data_parallel " + std::to_string(dp) + " is not training GPUs / (spatial × tensor) (" +
           std::to_string(l->Data()) + ")";
  }
  const int64_t accum = std::max<int64_t>(1, static_cast<int64_t>(rf::Num(par, "grad_accum", 1)));
  if (rf::Has(par, "local_batch")) {
    l->micro_batch = static_cast<int64_t>(rf::Num(par, "local_batch", 1));
  } else {
    l->micro_batch = std::max<int64_t>(1, l->global_batch / (static_cast<int64_t>(l->Data()) * accum));
    assumed->push_back("local batch " + std::to_string(l->micro_batch) + " (global batch over replicas)");
  }
  if (l->micro_batch < 1 || l->Accumulation() == 0) {
    return "global batch " + std::to_string(l->global_batch) + " is not replicas × local batch × accumulation";
  }
  return "";
}

Result<BeyondRun> MapRow(const Json& row, std::string* why) {
  BeyondRun run;
  run.id = rf::Str(row, "id", "(no id)");
  run.source_key = rf::Str(row, "round", "(no round)");
  run.benchmark = rf::Str(row, "benchmark");
  const BenchmarkDefaults* bench = nullptr;
  for (const BenchmarkDefaults& b : kBenchmarks) {
    if (run.benchmark == b.benchmark) bench = &b;
  }
  if (!bench) {
    *why = "no network preset for benchmark '" + run.benchmark + "'";
    return Status::NotFound(*why);
  }
  const Json& hw = row.contains("hardware") ? row["hardware"] : Json::object();
  run.gpu = rf::Str(hw, "gpu");
  const GpuMap* gpu = nullptr;
  for (const GpuMap& g : kGpus) {
    if (run.gpu == g.gpu) gpu = &g;
  }
  if (!gpu) {
    *why = "no cluster preset for GPU '" + run.gpu + "'";
    return Status::NotFound(*why);
  }
  run.generation = gpu->generation;
  const Json fw = row.contains("framework") ? row["framework"] : Json::object();
  run.framework = rf::Str(fw, "name", "unstated");
  *why = ReadLayout(row, &run.layout, &run.assumed);
  if (!why->empty()) return Status::InvalidArgument(*why);
  const Json& measured = row.contains("measured") ? row["measured"] : Json::object();
  run.measured_samples_per_s = rf::Num(measured, "samples_per_s", 0);
  if (!(run.measured_samples_per_s > 0)) {
    *why = "no measured samples_per_s";
    return Status::InvalidArgument(*why);
  }
  auto net = NetworkPreset(bench->network);
  if (!net.ok()) return net.status();
  run.network = *std::move(net);
  auto cluster = topology::ClusterPreset(gpu->cluster);
  if (!cluster.ok()) return cluster.status();
  run.cluster = *std::move(cluster);
  run.layout.sharding = bench->sharding;
  // NVIDIA's ResNet networks named "*-stats-*" and "*-mainloop-*" fuse batch
  // norm into the convolutions (the row's config NETWORK).
  const Json& par = row.contains("parallel") ? row["parallel"] : Json::object();
  const Json& vars = par.contains("config_vars") && par["config_vars"].is_object() ? par["config_vars"] : Json::object();
  const std::string network_var = rf::Str(vars, "NETWORK");
  if (network_var.find("stats") != std::string::npos || network_var.find("mainloop") != std::string::npos) {
    run.training.fused_norm = true;
    run.assumed.push_back("norms fused into the convolutions (NETWORK=" + network_var + ")");
  }
  run.training.grad_bytes = bench->grad_bytes;
  run.training.optimizer_state_bytes = bench->optimizer_state_bytes;
  run.assumed.push_back(std::string("network ") + bench->network + " on " + gpu->cluster);
  run.assumed.push_back(std::string("16-bit mixed precision, ") + WeightShardingName(bench->sharding) + ": " +
                        bench->why);
  return run;
}

}  // namespace

bool IsBeyondRunsDocument(const Json& doc) {
  if (!doc.is_array() || doc.empty()) return false;
  const Json& r = doc.front();
  return r.is_object() && r.contains("benchmark") && r.contains("measured") && r["measured"].is_object() &&
         r["measured"].contains("samples_per_s");
}

Result<BeyondRuns> BeyondRunsFromCalibration(const Json& doc) {
  if (!IsBeyondRunsDocument(doc)) {
    return Status::InvalidArgument("not a beyond_runs.json document (rows with benchmark and measured.samples_per_s)");
  }
  BeyondRuns out;
  for (const Json& row : doc) {
    std::string why;
    auto run = MapRow(row, &why);
    if (run.ok()) {
      out.runs.push_back(*std::move(run));
    } else {
      out.skipped.push_back({rf::Str(row, "id", "(no id)"), why.empty() ? run.status().message() : why});
    }
  }
  return out;
}

double BeyondError(const BeyondRun& run, const NetworkPrediction& p) {
  return p.samples_per_s / run.measured_samples_per_s - 1.0;
}

}  // namespace paratune::planner
