// executor/run/report.h: the run report ("schema": "paratune.run_report/v2"),
// what `paratune confirm` writes and `paratune calibrate` reads. Per
// candidate of the plan: its plan rank and config, the outcome (ok, oom,
// failed, waived) with a reason, the predicted and the measured iteration
// time, the relative error, the per-term breakdown (measured and predicted,
// with where each measured figure came from) and, in words, which parts were
// measured and which were modelled; for a mixture-of-experts candidate, one
// MoE layer run for real (dispatch/combine all-to-all and the experts' GEMMs)
// beside the cost model's figures for it. docs/executor.md has the schema.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "topology/cluster.h"

namespace paratune::executor {

inline constexpr const char* kRunReportSchema = "paratune.run_report/v2";
// v1 reports (before the "moe_layer" key) still parse.
inline constexpr const char* kRunReportSchemaV1 = "paratune.run_report/v1";

// The terms of planner::TimeBreakdown, under its JSON names (breakdown_s keys).
enum class Term : uint8_t {
  kCompute = 0,
  kRecompute,  // part of compute (informational)
  kCommX,
  kCommY,
  kCommZ,
  kCommCp,
  kCommData,
  kCommPp,
  kBubble,
  kOptimizer,
  kOffload,
  kHost,    // the framework's host dispatch stall: modelled, the proxy workload has none
  kCommEp,  // expert-parallel dispatch/combine not hidden: modelled, the slice does not issue it
};
inline constexpr int kNumTerms = 13;
// "compute" | "recompute" | "comm_x" | ... | "bubble" | "optimizer" | "offload" | "host" |
// "comm_ep".
const char* TermName(Term t);

// Where a measured figure comes from.
enum class Source : uint8_t {
  kMeasured = 0,  // timed on this run's hardware, on groups shaped like the plan's
  kScaled,        // timed on a smaller group (or another tier) and scaled by the model's α-β
  kDerived,       // a formula over measured figures (the pipeline bubble)
  kModelled,      // the cost model's own figure: nothing here could measure it
};
const char* SourceName(Source s);  // "measured" | "scaled" | "derived" | "modelled"
Result<Source> ParseSource(const std::string& s);

enum class Outcome : uint8_t { kOk = 0, kOom, kFailed, kWaived };
const char* OutcomeName(Outcome o);  // "ok" | "oom" | "failed" | "waived"
Result<Outcome> ParseOutcome(const std::string& s);

struct TermTimes {
  double measured_s = 0;
  double predicted_s = 0;
  Source source = Source::kMeasured;
};

// One mixture-of-experts layer's forward run for real on the expert-parallel
// communicators (executor/run/moe_layer.h), beside the cost model's figures
// for the same layer (planner/cost/moe.cc) at the degrees run.
struct MoeLayerReport {
  int ep = 1, etp = 1;     // the degrees run
  bool as_planned = true;  // ep and etp are the candidate's (else the most that fit the processes)
  int64_t tokens = 0;      // tokens each rank routes per micro-batch
  int local_experts = 0;   // experts / ep
  int64_t rows_per_expert = 0;  // token copies each local expert computes (balanced routing)
  // Bytes one all-to-all sends from each rank to the other EP ranks:
  // tokens · top_k · hidden · token bytes · (ep − 1) / ep.
  int64_t a2a_bytes_per_rank = 0;
  // Dispatch + combine (with the ETP all-gather and reduce-scatter): measured
  // max over ranks of the median; predicted the cost model's forward
  // all-to-all term (ComputeTerms::moe_a2a_fwd).
  TermTimes a2a;
  // The local experts' FC1 and FC2 GEMMs: measured as above; predicted as the
  // cost model prices the grouped GEMMs at these rows.
  TermTimes experts;
  double layer_measured_s = 0;  // the layer issued back to back
};

struct CandidateReport {
  int rank = 0;  // 1-based position in the plans document
  planner::ParallelConfig config;
  Outcome status = Outcome::kOk;
  std::string reason;                // why it is not ok (empty when ok)
  double predicted_s = 0;            // the cost model's iteration time
  std::optional<double> measured_s;  // extrapolated from the measured slice (ok only)
  // (predicted − measured) / measured: negative when the model promised a
  // faster step than the hardware delivered (ok only).
  std::optional<double> error;
  // The plan's own prediction, for the plan's GPU, when the run measured
  // another GPU (predicted_s and error are then for the GPU measured).
  std::optional<double> plan_predicted_s;
  std::optional<int> measured_rank;              // 1 = fastest measured among the ok candidates
  std::array<TermTimes, kNumTerms> breakdown{};  // measured figures valid when ok
  std::vector<std::string> measured_parts;
  std::vector<std::string> modelled_parts;
  std::vector<int> plan_ranks_run;  // plan ranks whose workloads ran
  double memory_predicted_GiB = 0;  // per GPU, most loaded stage
  double memory_allocated_GiB = 0;  // allocated per rank by the memory proof
  double scratch_beyond_GiB = 0;    // workload buffers that did not fit inside it
  double slice_wall_s = 0;          // wall time this candidate took to measure
  std::optional<MoeLayerReport> moe_layer;  // MoE candidates whose layer ran (ok only)
};

// Where and how the run was made.
struct RunEnvironment {
  std::string tool;     // "paratune 0.1.0"
  std::string backend;  // "cuda" | "mpi-cpu" | "fake" | "fault(...)"
  std::vector<std::string> argv;
  std::vector<std::string> hosts;  // host of each process
  int world_size = 0;              // processes
  std::string device;              // rank 0's device name
  // Rank 0's device identity (backend::DeviceInfo), 0 = unknown: memory,
  // bytes; SM clock, GHz: the backend's peak (CUDA), and NVML's at the time
  // of the run and maximum (a throttled GPU shows now < max).
  int64_t device_memory_bytes = 0;
  double device_sm_clock_GHz = 0;
  double device_sm_clock_now_GHz = 0;
  double device_sm_clock_max_GHz = 0;
  std::map<std::string, std::string> versions;
  std::string created_at;  // UTC ISO 8601
};

struct RunReport {
  // The plan this run confirms.
  std::string model;
  std::string cluster;
  std::string cluster_fingerprint;
  std::string profile;  // profile fingerprint the plan used ("" = none)
  int gpus = 0;
  // The plan's GPU preset and the preset the measured device matched ("" =
  // none matched, or a report written before these keys). When they differ,
  // every predicted figure is for measured_gpu (the plan's cluster with its
  // GPU swapped) and candidates carry plan_predicted_s.
  std::string plan_gpu;
  std::string measured_gpu;
  // The calibration factors in effect when the predictions were made
  // (calibrate divides them out before fitting).
  topology::ClusterSpec::Corrections corrections;
  RunEnvironment environment;
  // Measurement settings, echoed.
  int slice_layers = 0;
  int warmup = 0;
  int samples = 0;
  std::string extrapolation;  // how a step's time is extrapolated from the slice, in words
  bool complete = false;      // false while `paratune confirm` is still writing candidates
  std::vector<CandidateReport> candidates;
};

OrderedJson RunReportToJson(const RunReport& r);
// Strict: unknown or missing keys are errors naming their JSON pointer.
Result<RunReport> ParseRunReport(const Json& j);
// Reads and parses a report file; errors name the file.
Result<RunReport> LoadRunReport(const std::string& path);

}  // namespace paratune::executor
