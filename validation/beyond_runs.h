// validation/beyond_runs.h: shared/calibration/beyond_runs.json (MLPerf
// Training and HPC runs of U-Nets, diffusion transformers and CNNs) as
// network predictions (planner/network_cost.h), so `paratune validate` can
// report the non-transformer path against measured throughput.
//
// Mapping: the benchmark names the network preset (resnet → resnet-50,
// retinanet → retinanet-resnext50, stable_diffusion → sd2-unet, flux1 →
// flux1-schnell, unet3d → unet3d-kits19, cosmoflow → cosmoflow); the GPU names
// the cluster preset (H100-SXM → dgx-h100, H200-SXM → dgx-h200, B200 →
// dgx-b200, GB200/GB300 → their NVL72 racks, A100-SXM 40/80 GB → their DGX);
// the row's training GPUs, data, spatial and tensor parallelism, local and
// global batch are its layout. What the rows do not state (precision, gradient
// width, optimizer, weight sharding) comes from the benchmark's reference
// implementation and is listed in each run's `assumed`. Rows of other
// benchmarks, GPUs without a preset, and layouts the network model does not
// express (context parallelism) are left out with the reason.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/network_cost.h"

namespace paratune::planner {

struct BeyondRun {
  std::string id;
  std::string source_key;  // the round: "MLPerf Training v4.0"
  std::string benchmark;   // "resnet"
  std::string gpu;         // as the row names it: "NVIDIA H100-SXM"
  std::string generation;  // "Ampere" | "Hopper" | "Blackwell"
  std::string framework;   // the row's framework.name ("MXNet", "PyTorch", ...; "unstated")
  Network network;
  topology::ClusterSpec cluster;
  NetworkLayout layout;
  NetworkTraining training;
  double measured_samples_per_s = 0;
  std::vector<std::string> assumed;
};

struct SkippedBeyondRow {
  std::string id;
  std::string reason;
};

struct BeyondRuns {
  std::vector<BeyondRun> runs;
  std::vector<SkippedBeyondRow> skipped;
};

// Whether `doc` is a beyond_runs.json document (rows with a benchmark and
// measured samples per second).
bool IsBeyondRunsDocument(const Json& doc);
// Maps every row; a row that cannot be mapped is listed in `skipped`, never
// an error. Fails only when `doc` is not such a document.
Result<BeyondRuns> BeyondRunsFromCalibration(const Json& doc);

// The prediction's throughput relative to the row's: predicted / measured − 1.
double BeyondError(const BeyondRun& run, const NetworkPrediction& p);

}  // namespace paratune::planner
