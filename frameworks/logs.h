// frameworks/logs.h: calibration from the training logs users already have
// (docs/model.md "Calibration from training logs").
//
// Three pure stages, no I/O:
//  1. ParseTrainingLog: the text of one log -> a LoggedRun: the step times it
//     reports and the configuration it states. Readers: Megatron-LM /
//     Megatron-Core / NeMo (the "arguments" block, "using world size: ..." and
//     "iteration N/M | ... elapsed time per iteration (ms): X" lines),
//     Megatron-DeepSpeed (the same plus DeepSpeed markers), DeepSpeed (its
//     config print, "step=N, skipped=K" and "SamplesPerSec=" /
//     "CurrSamplesPerSec=" lines), torchtitan ("step: N loss: ... tps: T"
//     lines, its "Training starts at step ..." line and device mesh) and the
//     Hugging Face Trainer ("***** Running training *****" block and the final
//     {'train_runtime': ..., 'train_steps_per_second': ...} dict). Lines of
//     several ranks may be interleaved: rank prefixes ("[rank3]:", "3: ",
//     "[default3]:", "[1,3]<stdout>:") and ANSI colours are stripped and a step
//     logged by several ranks counts once.
//  2. SummarizeSteps: drop warm-up, intervals with skipped iterations and
//     outliers; the median of the rest.
//  3. RequestFromLog: the run as a predict request (planner/request.h), the
//     log's statements first, `LogFlags` for what it does not state, with a
//     list of what was read and what was assumed.
// The fit itself (one scale per framework x GPU) is FitLogCalibration.
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/framework.h"
#include "planner/request.h"

namespace paratune::planner {

// Which trainer wrote a log.
enum class LogFormat : uint8_t {
  kMegatron = 0,       // Megatron-LM, Megatron-Core, NeMo (Megatron's training loop)
  kMegatronDeepSpeed,  // Megatron-DeepSpeed
  kDeepSpeed,          // the DeepSpeed engine (incl. HF Trainer + DeepSpeed)
  kTorchtitan,         // torchtitan
  kHfTrainer,          // Hugging Face Trainer (no DeepSpeed)
};
const char* LogFormatName(LogFormat f);  // "megatron" | "megatron-deepspeed" | ...

// What a logged step figure measures.
enum class StepUnit : uint8_t {
  kSeconds = 0,         // seconds per iteration (Megatron; HF 1/steps_per_second)
  kTokensPerSecPerGpu,  // torchtitan "tps": tokens / s / device
  kSamplesPerSec,       // DeepSpeed SamplesPerSec (whole job), HF samples_per_second
};

struct LogStep {
  int64_t iteration = 0;  // the step number the line names (0 = none)
  double value = 0;       // in LoggedRun::unit
  // The interval had skipped iterations (fp16 loss-scale overflow, NaN):
  // its time is not a training step's.
  bool skipped = false;
};

// What one log says. Optional fields are absent when the log does not state them.
struct LoggedRun {
  LogFormat format = LogFormat::kMegatron;
  StepUnit unit = StepUnit::kSeconds;
  std::vector<LogStep> steps;  // log order, one per distinct step
  // The whole-run average is all the log has (HF Trainer train_runtime):
  // warm-up is inside it and cannot be removed.
  bool whole_run_average = false;
  // Architecture.
  std::optional<int> layers, hidden, heads, kv_heads, ffn_hidden, vocab, max_positions;
  std::optional<bool> swiglu, untied_embeddings, rmsnorm, linear_bias, dropout;
  // Job.
  std::optional<int> seq_len, world_size;
  std::optional<int64_t> global_batch, micro_batch;
  // "bf16" | "fp16" | "fp32", or a low-precision recipe ("fp8_current",
  // "fp8_blockwise", "mxfp8": torchtitan's float8 converter line).
  std::optional<std::string> precision;
  std::optional<std::string> precision_recipe;  // as the log names it, e.g. "float8 rowwise"
  std::optional<std::string> gpu_device;  // e.g. "NVIDIA H100 80GB HBM3" (a device-name line)
  // torchtitan: the data-parallel degree of the device mesh (dp_replicate ×
  // dp_shard) and the gradient accumulation steps its start-up line states.
  std::optional<int> dp_degree, grad_accumulation;
  // torchtitan's FSDP2 degrees: data_parallel_shard_degree (dp_shard; -1 =
  // every rank the other degrees leave) and data_parallel_replicate_degree
  // (dp_replicate, HSDP's replicas).
  std::optional<int> dp_shard, dp_replicate;
  // Parallel configuration.
  std::optional<int> tp, pp, vpp, cp, zero;
  std::optional<bool> sp, distributed_optimizer, overlap_grad_reduce, overlap_param_gather,
      tp_comm_overlap;
  std::optional<std::string> recompute;  // "none" | "selective" | "full"
  // ZeRO-Offload / ZeRO-Infinity to host memory, from DeepSpeed's config print.
  std::optional<bool> offload_optimizer, offload_param;
  // Mixture of experts (Megatron-Core's moe arguments; torchtitan's mesh "ep").
  std::optional<int> experts, top_k, moe_ffn_hidden, shared_ffn_hidden;
  // The MoE layer pattern as the model description states it: the leading dense
  // layers and the step of the rest (absent when the log's pattern has another shape).
  std::optional<int> first_dense_layers, moe_layer_step;
  std::optional<int> ep, etp, mtp_layers, head_dim;
  std::optional<double> capacity_factor;
  std::optional<std::string> router;          // "softmax" | "sigmoid"
  std::optional<std::string> moe_dispatcher;  // "alltoall" | "allgather" | "deepep" | "hybridep"
  std::optional<bool> moe_grouped_gemm, moe_permute_fusion, moe_a2a_overlap;
  int ranks_seen = 0;                    // distinct rank prefixes (0 = lines carry none)
  int first_line = 1;                    // where the run's section of the log starts (1-based)
  std::vector<std::string> notes;        // reader remarks (e.g. duplicated steps)
};

// The cluster preset of an NVIDIA device name as logs print it ("NVIDIA
// H100 80GB HBM3" -> "dgx-h100", "NVIDIA A100-SXM4-40GB" -> "dgx-a100-40gb");
// nullopt for a device without one.
std::optional<std::string> ClusterForDevice(const std::string& device);

// Reads every run of a log, in log order. One log may hold several runs (a
// job restarted, several jobs appended to one file): a run's section starts
// where its framework's start-of-run banner appears after step lines
// (Megatron's "using world size" line and arguments header;
// torchtitan's "Starting job", "Running with args", device mesh and
// "Training starts" lines; DeepSpeed's "DeepSpeed info" and engine
// configuration header; the Hugging Face Trainer's "Running training"
// block), or where the step counter goes back. Each run's fields come from
// its own section only; sections without a step figure are left out.
// kInvalidArgument when the text matches no reader or has no step figure.
Result<std::vector<LoggedRun>> ParseTrainingLogRuns(std::string_view text,
                                                   const std::string& name);

// One line about a run for the list of a multi-run log: "run 2 (line 41):
// torchtitan, bf16, gpus=8 tp=1 pp=1 cp=1 dp_shard=8 dp_replicate=1 zero=3,
// 20 step figure(s) (steps 1-20)". `index` is 1-based.
std::string DescribeLoggedRun(const LoggedRun& run, int index);

// Reads a log and picks one run: `run` (1-based), else the only one. `name`
// (its path) only labels errors. kInvalidArgument when the text matches no
// reader or has no step figure, when `run` is out of range, and when the log
// holds several runs and `run` is absent: the message lists them (one
// DescribeLoggedRun line each) and says to pass --run N.
Result<LoggedRun> ParseTrainingLog(std::string_view text, const std::string& name,
                                   std::optional<int> run = std::nullopt);

// How step figures are summarised (docs/model.md).
struct StepSummaryOptions {
  // Leading logged steps dropped as warm-up (compilation, NCCL set-up, the
  // allocator growing): Megatron's first interval line and torchtitan's step 1
  // carry them. Only when more steps than this remain.
  int warmup_steps = 1;
  // A step whose value is more than this many scaled MADs (1.4826 x median
  // absolute deviation, the normal-consistent estimate) from the median is an
  // outlier (checkpoint save, evaluation, a straggler).
  double outlier_mads = 3.5;
  // ... and more than this fraction of the median away: steady logs have MADs
  // of a fraction of a percent, and a step 2 % slow is not an event.
  double outlier_min_fraction = 0.05;
};
struct StepSummary {
  double median = 0;  // in the run's unit
  int used = 0;
  int warmup_dropped = 0;
  int skipped_dropped = 0;
  int outliers_dropped = 0;
};
// kInvalidArgument when no step is left.
Result<StepSummary> SummarizeSteps(const LoggedRun& run, const StepSummaryOptions& options);

// What the command line supplies for what a log may not state. Empty/absent =
// not given. `model` and `cluster` are request values (a preset name string or
// an object).
struct LogFlags {
  std::optional<Json> model, cluster;
  std::optional<int> gpus, seq_len;
  std::optional<int64_t> global_batch;
  std::optional<std::string> precision, attention, framework;
  std::optional<Json> config;  // ConfigStringToJson of --config
  std::optional<int> run;      // --run N: which run of a log holding several (1-based)
};

// A run as the planner sees it.
struct LogRequest {
  Json request;  // a predict request (ParsePredictRequest reads it)
  Framework framework = Framework::kMegatron;
  double measured_iteration_s = 0;
  StepSummary summary;
  std::vector<std::string> read_from_log;  // "tp=2 (tensor_model_parallel_size)", ...
  std::vector<std::string> assumed;        // "cluster dgx-h100 (--cluster)", ...
  std::vector<std::string> warnings;       // a flag that contradicts the log, ...
  // The expert layout the log states, in configuration keys ("ep", "etp",
  // "moe_dispatcher", "moe_a2a_overlap"); empty for a dense run. It is part of
  // request["config"] when the configuration accepts those keys.
  Json moe_config = Json::object();
};

// Builds the request of `run`: the log's statements win, a flag fills what
// the log does not state (a contradicting flag is a warning, the log wins);
// the model is the flag's, else the preset whose layers, hidden, heads, kv
// heads and FFN width equal the log's, else an inline model from the log. The
// measured time is the summary's median converted to seconds per iteration
// (tps: global_batch x seq / (tps x gpus); samples/s: global_batch / rate).
// kInvalidArgument naming the missing piece and its flag (e.g. "the log does
// not state the GPU count: pass --gpus").
Result<LogRequest> RequestFromLog(const LoggedRun& run, const LogFlags& flags,
                                  const StepSummaryOptions& options);

// One run to calibrate on: the parsed request and its measured time.
struct LogCalibrationRun {
  std::string label;  // the log's path
  PredictRequest request;
  double measured_iteration_s = 0;
};

// One framework x GPU entry of the fit.
struct LogCalibrationEntry {
  std::string framework;                       // FrameworkName
  std::string gpu;                             // GpuSpec::name
  double scale = 1;                            // multiplies the cluster's own corrections
  topology::ClusterSpec::Corrections factors;  // absolute: base x scale, residual set
  std::vector<size_t> runs;                    // indices into the runs
  // Mean |predicted - measured| / measured over the runs, before (the
  // cluster as given, including any earlier entry for the key) and after.
  double error_before = 0, error_after = 0;
  bool at_bound = false;  // the scale hit the factors' (0.06, 19) range
};
struct LogCalibrationFit {
  std::vector<LogCalibrationEntry> entries;                   // sorted by (framework, gpu)
  std::vector<double> predicted_before_s, predicted_after_s;  // per run
};

// Fits one scale s per framework x GPU: the key's runs are predicted with the
// cluster's own corrections (without framework entries) times s on all three
// factors, and s minimises sum(((T_i(s) - m_i) / m_i)^2) (each run weighted
// by 1 / its measured time, as the reports' fit), searched on a log grid over
// the range that keeps every factor in (0.06, 19) and refined by golden
// section. One run is reproduced to the grid's refinement (1e-6 relative in s)
// unless the bound is hit; several runs in the least-squares sense.
// `residual` of the entry = error_after. kInvalidArgument when a run's config
// breaks a rule. Deterministic.
Result<LogCalibrationFit> FitLogCalibration(const std::vector<LogCalibrationRun>& runs);

// Warnings for a run outside the published runs the model is checked on
// (the calibration data of `paratune validate`, summarised per framework
// family x GPU generation in log_ranges.cc), one per axis: "outside the
// calibrated range (framework family | GPU generation | GPU count decade |
// sequence-length decade | model size decade): ...". A size axis counts as
// outside when its value lies in a power of ten no calibrated run of the
// closest rows (same family and GPU, else the family, else the GPU) is in.
std::vector<std::string> CalibratedRangeWarnings(const PredictRequest& r);

// The same predict request's iteration time with `cluster` as given (its
// framework entries applied by the cost model). REQUIRES: the config passes
// the rules.
double PredictIterationSeconds(const PredictRequest& r);

}  // namespace paratune::planner
