// frameworks/emit.h: one plan of a plans document (paratune.plans/v1) written the
// way each training framework takes it (ecosystem.md §2): Megatron-LM bash
// argument arrays, a DeepSpeed ds_config.json, an AxoNN `ax.init(...)` call
// with its overlap context, a torchtitan TOML `[parallelism]` job config, shell
// `export` lines, or the plan's canonical config as JSON.
//
// Every emitter first checks the plan against that framework's start-up rules
// (Megatron-LM validate_args and TransformerConfig, DeepSpeed's batch assertion
// and pipeline engine, AxoNN's init and auto_parallelize, torchtitan's
// ParallelDims and trainer); a plan the framework would reject, or cannot
// express at all (AxoNN's 3D grid in Megatron, ZeRO-3 in torchtitan), is
// refused with the rule and the value that breaks it, never emitted. The
// checks are mirrored, with the source file and lines they copy, in
// tests/frameworks/emit_test.cc.
//
// Pure functions of the document: no I/O, no clocks; thread-safe.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

enum class EmitFormat { kMegatron, kDeepSpeed, kAxonn, kTorchtitan, kEnv, kJson };

// "megatron" | "deepspeed" | "axonn" | "torchtitan" | "env" | "json"; anything
// else is kInvalidArgument listing the names.
Result<EmitFormat> ParseEmitFormat(const std::string& name);
const char* EmitFormatName(EmitFormat f);

// The text for candidate `rank` (1-based, as in the document's `candidates`)
// of a paratune.plans/v1 document, in `format`:
//   kMegatron    bash: `export CUDA_DEVICE_MAX_CONNECTIONS=1`, then the arrays
//                GPT_MODEL_ARGS, TRAINING_ARGS, MODEL_PARALLEL_ARGS
//   kDeepSpeed   ds_config.json (a JSON object; offload_optimizer / offload_param
//                device "cpu" when the plan offloads, "none" otherwise)
//   kAxonn       Python: ax.init(...), batch constants, optimize_communication(...)
//   kTorchtitan  TOML: [training], [parallelism], [activation_checkpoint] (+ [compile])
//   kEnv         `export NAME=value` lines only: TP PP CP DP SP VP MBS GBS
//                ZERO_STAGE RECOMPUTE GX GY GZ
//   kJson        the candidate's canonical config object (ConfigToJson)
// Errors: kInvalidArgument for a document that is not a plans document (naming
// the JSON pointer), a rank outside [1, number of candidates], or a plan that
// `format`'s framework cannot express or would reject at start-up; the message
// says which rule and which values.
Result<std::string> EmitConfig(const Json& plans, int rank, EmitFormat format);

// The format a plan emits by default: the framework it was made for
// (`job.training.framework`: megatron → kMegatron, megatron-deepspeed and
// deepspeed → kDeepSpeed, fsdp and torchtitan → kTorchtitan, axonn → kAxonn);
// without that key, the search space (`space`: deepspeed, axonn, fsdp), else
// kMegatron.
EmitFormat DefaultEmitFormat(const Json& plans);

}  // namespace paratune::planner
