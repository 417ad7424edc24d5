// validation/memory_runs.h: measured peak GPU memory of published runs
// (shared/calibration/memory_runs.json, schema in memory_runs.md beside it) as
// prediction requests, each compared with the memory model on the metric the
// row reports (`paratune validate --memory`, tests, docs/model.md "Memory
// validation"). Every run is predicted at zero headroom: the question is
// whether the run's own peak is predicted, not whether a planner would leave
// room beside it.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/request.h"

namespace paratune::planner {

// The figure a row measured. torch.cuda.max_memory_allocated / _reserved
// count the caching allocator's blocks only (not the CUDA context, NCCL's own
// buffers or other workspaces outside it); "peak" figures of tables that do
// not say which are compared with the reserved peak plus the runtime reserve
// (what the device shows as used); an OOM row has no figure, only the verdict.
enum class MemoryMetric : uint8_t { kMaxAllocated = 0, kMaxReserved, kPeak, kOom };
const char* MemoryMetricName(MemoryMetric m);  // the row's own key: "max_allocated", ...

// The pipeline rank whose figure the row reports.
enum class ReportedRank : uint8_t {
  kMax = 0,  // the largest over ranks (torchtitan's tables), or unstated
  kFirst,    // rank 0 (a first-stage rank)
  kLast,     // rank world_size − 1 (Megatron's tensorboard scalars: a last-stage rank)
};

struct MemoryRun {
  std::string id;
  std::string framework;  // the row's stack: torchtitan, Megatron-LM, Megatron-Bridge, DeepSpeed, HF
  std::string source;     // repository@commit path (or URL)
  PredictRequest request;  // headroom 0; capacity the row's gpu_capacity_GiB when stated
  MemoryMetric metric = MemoryMetric::kMaxAllocated;
  ReportedRank rank = ReportedRank::kMax;
  double measured_GiB = 0;  // 0 for an OOM row
  bool oom = false;         // the run ran out of memory (oom and oom_with_partial_peak rows)
  std::vector<std::string> assumed;  // settings the row leaves open, and what was used
};

// A row the model cannot be asked about, and why (never dropped silently).
struct UnmappedMemoryRow {
  std::string id;
  std::string framework;
  std::string why;
};

struct MemoryRuns {
  std::vector<MemoryRun> runs;
  std::vector<UnmappedMemoryRow> unmapped;
};

// Whether `doc` is memory_runs.json: an array whose rows carry a `measured`
// object with a memory metric.
bool IsMemoryRunsDocument(const Json& doc);

// Converts every row. Mapping (docs/model.md, "Memory validation"): the
// cluster preset of the row's GPU with its memory set to gpu_capacity_GiB;
// the framework preset of the row's framework (Megatron-LM and
// Megatron-Bridge → megatron, torchtitan, DeepSpeed → deepspeed, HF
// Accelerate FSDP → fsdp); the model from the row's architecture fields; the
// degrees, micro-batch, recompute, precision, optimizer sharding and the
// allocator's segment kind as the row states them (expandable unless it says
// otherwise). A row that states too little (GPU count, micro-batch,
// sequence length, recompute) or uses what the model cannot express (LoRA,
// hybrid Mamba layers, per-module recompute lists beyond core_attn, bf16
// optimizer states) is returned in `unmapped` with the reason.
Result<MemoryRuns> MemoryRunsFromCalibration(const Json& doc);

// One row predicted.
struct MemoryCheck {
  bool covered = true;          // false: the configuration breaks a rule (why says which)
  std::string why;
  double predicted_GiB = 0;     // on the row's metric and rank (0 for OOM rows)
  double error = 0;             // predicted / measured − 1 (0 for OOM rows)
  double reserved_GiB = 0;      // the verdict's figure: the largest stage's reserved peak
  double capacity_GiB = 0;
  bool fits = false;            // reserved_GiB <= capacity_GiB (zero headroom)
  double first_stage_GiB = 0, last_stage_GiB = 0;  // peak allocated per end stage
};
MemoryCheck CheckMemoryRun(const MemoryRun& run);

// Error statistics of a group of measured rows.
struct MemoryErrorStats {
  int rows = 0;
  double median_abs = 0, median_signed = 0, p90_abs = 0;
};
MemoryErrorStats MemoryStats(const std::vector<double>& errors);

}  // namespace paratune::planner
