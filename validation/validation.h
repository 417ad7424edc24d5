// validation/validation.h: published measured runs as prediction requests, so the
// model can be checked against them (`paratune validate`, tests, docs/model.md).
// Reads the calibration format of ../shared/calibration/*.json (rows with
// hardware, model, parallel, measured). Mapping rules, documented in
// docs/model.md §Validation: the hardware maps to the cluster preset named by
// the caller (same for every row: hardware is calibrated, never a run); the
// model is GPT-style (LayerNorm, GeLU, learned positions, tied embeddings,
// dropout 0.1, biases) as in Megatron-LM; the framework is Megatron-LM of 2022:
// unfused attention, asynchronous tensor-parallel all-reduce (oar), sequence
// parallelism and recompute as the row states.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/request.h"

namespace paratune::planner {

struct PublishedRun {
  std::string id;
  std::string source;      // the full citation
  std::string source_key;  // the repository (or "korthikanti2022"): the unit of per-source statistics
  std::string release;     // the framework release the row states ("" when none)
  PredictRequest request;
  double measured_iteration_s = 0;  // 0 when the row states none
  double measured_mfu = 0;          // 0 when the row states none
  // What the row measured, as a throughput: tokens/s when stated, else model
  // TFLOP/s per GPU (Megatron's FLOP count, Korthikanti Eq. 7 generalised),
  // compared with the prediction's own model_tflops_per_gpu.
  double measured_tokens_per_s = 0;
  double measured_model_tflops = 0;
  std::vector<std::string> assumed;  // settings the row does not state, and what was used
  std::string gpu;                   // the row's GPU as printed ("GB200"); set by the fleet reader
};

// The framework knobs a row does not state (`stated`: a config object of the
// keys it does state, with their values), resolved by the scenario layer as
// plan and predict resolve them (scenario::ResolveConfig). With `assumed`, one
// line names the switches the policy turned on.
void ResolveUnstated(const Json& stated, Framework f, ParallelConfig* c,
                     std::vector<std::string>* assumed);

// The prediction's throughput relative to the row's: predicted / measured − 1
// (positive = optimistic). REQUIRES: the row states a time, tokens/s or TFLOP/s.
double ThroughputError(const PublishedRun& run, const Prediction& p);

// Converts every "throughput" row that has a parallel configuration into a
// request on `cluster_preset`. Rows of other types are skipped; a row whose
// fields cannot be mapped is an error naming its id.
Result<std::vector<PublishedRun>> PublishedRunsFromCalibration(const Json& doc,
                                                               const std::string& cluster_preset);

// Converts shared/calibration/public_runs.json rows (llm-foundry, Megatron-Core,
// NeMo, MLPerf) into requests. The cluster is the preset of the row's GPU
// (A100-SXM4-40GB → dgx-a100-40gb, A100-SXM4-80GB → dgx-a100-80gb, H100 →
// dgx-h100): hardware is calibrated per preset, never per run. The framework
// follows the source (llm-foundry → fsdp; Megatron-LM, NeMo, MLPerf →
// megatron) with its overlap policy; model architecture follows the family
// name (MPT: ALiBi, no biases, no dropout; LLAMA: RMSNorm, SwiGLU, untied;
// GPT: Megatron's GPT). An unstated micro-batch (and, in a row that states no
// micro-batch, unstated interleaving) takes the value the model finds fastest
// among those that fit, as a tuned benchmark would run; unstated recompute =
// none; each such assumption is listed in the run's `assumed`.
Result<std::vector<PublishedRun>> PublishedRunsFromPublicRuns(const Json& doc);

// Converts shared/calibration/fleet_runs.json rows (Megatron-Bridge's
// performance tables, MLPerf Training v5.1) into requests: the cluster preset
// of the row's GPU (H100 dgx-h100, B200 dgx-b200, GB200/GB300 their NVL72
// racks, MI350X/MI355X their nodes), Llama's architecture, the matched
// recipe's precision (FP8-CS current scaling, MXFP8, NVFP4; AMD's delayed
// scaling), Megatron-FSDP, CPU activation offloading and CUDA graphs as the
// recipe states, the planner's headroom (a row's `fits` is checked against the
// whole capacity: the run ran), Megatron's overlap policy through the scenario
// layer (scenario::ResolveConfig).
// Measured: tokens/s; for the 26.04.01 rows, whose tokens/s are rounded, the
// TFLOP/s column over the row's FLOPs per token. Fills `gpu` and `release`.
Result<std::vector<PublishedRun>> PublishedRunsFromFleetRuns(const Json& doc);

// Hardware constants the fleet calibrates per GPU (0 = keep the preset's):
// the GPU's gemm_sustained_fraction and its recipe_gemm_factor for mxfp8 and
// nvfp4.
struct FleetConstants {
  double sustained = 0, mxfp8 = 0, nvfp4 = 0;
};
void ApplyFleetConstants(const FleetConstants& k, topology::GpuSpec* gpu);
// The run's throughput error with `k` applied to its GPU; NaN when its
// configuration breaks a rule.
double FleetRunError(const PublishedRun& run, const FleetConstants& k);
// Per GPU (PublishedRun::gpu): the sustained fraction that zeroes the median
// signed error of its per-tensor fp8 rows, then the mxfp8 and nvfp4 factors
// that zero their rows' on top of it.
std::map<std::string, FleetConstants> FitFleetConstants(const std::vector<PublishedRun>& runs);
// Held-out errors: for each GPU (by_gpu) or release, the constants refitted
// without its rows predict them; a GPU with no rows left borrows each
// constant from the part with its die (GpuDie), else the median of its
// vendor's other GPUs, else of all GPUs.
struct HeldOutGroup {
  std::string group;
  std::vector<double> errors;
};
std::vector<HeldOutGroup> LeaveOneOut(const std::vector<PublishedRun>& runs, bool by_gpu);
// Converts shared/calibration/moe_runs.json rows (Megatron-Bridge's published MoE
// throughput tables, one row per configuration and release) into requests. The
// model is the preset of the row's model key (deepseek_v3, qwen3_235b_a22b,
// qwen3_30b_a3b), else built from the row's own architecture fields; the cluster
// is the preset of its GPU (H100-SXM-80GB → dgx-h100; B200 → dgx-b200, B300 →
// dgx-b300, GB200 → gb200-nvl72, GB300 → gb300-nvl72 where those presets exist);
// the framework Megatron-Core with the row's EP/ETP, dispatcher (flex/deepep,
// flex/hybridep), EP all-to-all overlap, recompute, distributed optimizer and
// forced load balance (skew 1), the recipe the printed precision names (MXFP8,
// FP8-CS, blockscaled; plain FP8 the GPU's default), bf16 main gradients
// (Megatron-Bridge's MoE performance configurations) and the planner's
// headroom. Stated: tp, pp, vp, cp, ep, etp, mbs, gbs; assumed and listed in
// `assumed`: sequence parallelism with tp > 1 (Megatron-Bridge's recipes),
// Megatron-Bridge's selective recompute modules as selective recompute, an
// interleaved layout the layer count does not divide as the nearest uneven
// first/last stages Megatron accepts with the largest vpp up to the stated one. A row that cannot be mapped (no preset for its GPU) is left out and
// named, with the reason, in *skipped (when given).
Result<std::vector<PublishedRun>> PublishedRunsFromMoeRuns(const Json& doc,
                                                           std::vector<std::string>* skipped);

}  // namespace paratune::planner
