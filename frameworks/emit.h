// frameworks/emit.h: one plan of a plans document (paratune.plans/v1) written the
// way each training framework takes it (ecosystem.md §2): Megatron-LM bash
// argument arrays, Megatron-DeepSpeed's launch arguments with its
// ds_config.json, a DeepSpeed ds_config.json alone, an AxoNN `ax.init(...)`
// setup, a torchtitan configuration function (Python), a Megatron-Bridge
// training script (a recipe's ConfigContainer with the plan's overrides,
// Python), shell `export` lines, or the plan's canonical config as JSON.
//
// One place per framework: frameworks/<name>.cc holds the framework's
// start-up checks, its writer, the snapshot of the framework whose source the
// checks restate, the settings a run must keep and its launcher line
// (frameworks/emit_internal.h). Every emitter first checks the plan against
// that framework's start-up rules (Megatron-LM validate_args and
// TransformerConfig, Transformer Engine's context parallelism, DeepSpeed's
// batch assertion and pipeline engine, Megatron-DeepSpeed's sequence
// parallelism, AxoNN's init and auto_parallelize, torchtitan's ParallelDims,
// trainer and pipeline split); a plan the framework would reject, or cannot
// express at all (AxoNN's 3D grid in Megatron, ZeRO-3 in torchtitan), is
// refused with the rule and the value that breaks it, never emitted. The
// rules are restated from each framework's source, with file and lines, in
// tests/frameworks/framework_rules.h and listed in docs/frameworks.md.
//
// Pure functions of the document: no I/O, no clocks; thread-safe.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

enum class EmitFormat {
  kMegatron,
  kMegatronDeepSpeed,
  kDeepSpeed,
  kAxonn,
  kTorchtitan,
  kEnv,
  kJson,
  kMegatronBridge
};

// "megatron" | "megatron-deepspeed" | "deepspeed" | "axonn" | "torchtitan" |
// "env" | "json" | "megatron-bridge"; anything else is kInvalidArgument listing the names.
Result<EmitFormat> ParseEmitFormat(const std::string& name);
const char* EmitFormatName(EmitFormat f);

// The text for candidate `rank` (1-based, as in the document's `candidates`)
// of a paratune.plans/v1 document, in `format`:
//   kMegatron           bash: a header of comments (the plan, its prediction,
//                       the Megatron-LM commit whose rules it follows, its
//                       pipeline split, the settings to keep, the launcher),
//                       `export CUDA_DEVICE_MAX_CONNECTIONS=1`, then the arrays
//                       GPT_MODEL_ARGS, TRAINING_ARGS, MODEL_PARALLEL_ARGS
//   kMegatronDeepSpeed  bash: the header, the exports, ds_config.json written by
//                       a heredoc, then MEGATRON_DEEPSPEED_ARGS (TP, PP, ZeRO
//                       stage, Ulysses or FPDT with its chunk and offloading)
//   kDeepSpeed          ds_config.json alone (a JSON object: its header is the
//                       sidecar, EmitSidecar)
//   kAxonn              Python: the header, ax.init(...), batch constants,
//                       optimize_communication(...)
//   kTorchtitan         Python: the header and paratune_plan() returning
//                       torchtitan's Trainer.Config (--module / --config)
//   kEnv                `export NAME=value` lines only: TP PP CP DP SP VP MBS GBS
//                       ZERO_STAGE RECOMPUTE GX GY GZ, and DP_SHARD DP_REPLICATE
//                       for a plan priced for fsdp or torchtitan (ZERO_STAGE 3
//                       when it shards over gz)
//   kJson               the candidate's canonical config object (ConfigToJson)
//   kMegatronBridge     Python: the header, then a script that builds the
//                       ConfigContainer of the Megatron-Bridge recipe for the
//                       model (or a GPTModelProvider from its architecture when
//                       Bridge has no recipe for it), checks that the recipe
//                       builds the planned shapes, overrides everything the
//                       plan decides (parallelism, pipeline layout, recompute,
//                       CUDA graphs, precision recipe, MoE dispatcher and
//                       overlaps, batch, DDP and optimizer sharding, comm
//                       overlap) and calls Bridge's pretrain(cfg, forward_step);
//                       the plan's Megatron-LM arguments restated as
//                       ConfigContainer fields (frameworks/megatron_bridge.cc)
// Errors: kInvalidArgument for a document that is not a plans document (naming
// the JSON pointer), a rank outside [1, number of candidates], or a plan that
// `format`'s framework cannot express or would reject at start-up; the message
// says which rule and which values.
Result<std::string> EmitConfig(const Json& plans, int rank, EmitFormat format);

// What an emitted file assumes, as a document (schema below): format, the
// framework snapshot whose rules it follows ({repository, commit, version,
// files}; null for env and json), job, rank, framework the plan was priced
// for, config_string, config, predicted {iteration_time_s,
// iteration_time_s_range, mfu, published_mfu_ceiling and above_published_mfu
// (when the plan states a ceiling), memory_reserved_GiB, memory_capacity_GiB},
// pipeline {split, rank_layers, chunk_layers} (pp > 1), environment {NAME:
// {value, why}} the run must keep, launcher. Same errors as EmitConfig.
inline constexpr const char* kEmitSidecarSchema = "paratune.emit/v1";
Result<OrderedJson> EmitSidecar(const Json& plans, int rank, EmitFormat format);

// The format a plan emits by default: the framework it was made for
// (`job.training.framework`: megatron → kMegatron, megatron-deepspeed →
// kMegatronDeepSpeed, deepspeed → kDeepSpeed, fsdp and torchtitan →
// kTorchtitan, axonn → kAxonn); without that key, the search space (`space`:
// deepspeed → kMegatronDeepSpeed, axonn, fsdp → kTorchtitan), else kMegatron.
EmitFormat DefaultEmitFormat(const Json& plans);

}  // namespace paratune::planner
