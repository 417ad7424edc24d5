// frameworks/emit_internal.h: what the per-framework emitters share (not a
// public header). Each framework's room (frameworks/<name>.cc) holds its
// start-up checks, its writer and the snapshot of the framework whose rules
// they follow; frameworks/emit.cc loads the plan and dispatches.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "frameworks/emit.h"
#include "frameworks/moe_args.h"
#include "planner/config.h"
#include "planner/framework.h"
#include "planner/pipeline.h"
#include "planner/plans.h"

namespace paratune::planner::emit_internal {

// One candidate of a plans document with everything the emitters need.
struct Plan {
  Job job;
  ParallelConfig c;
  Framework framework = Framework::kMegatron;  // the stack that priced it (candidate's "framework")
  int rank = 1;
  std::string config_string;
  double iteration_time_s = -1;  // < 0: the document has no prediction
  double iteration_time_lo = -1, iteration_time_hi = -1;
  double mfu = -1;
  // The GPU's best published MFU at the plan's precision (< 0: none given)
  // and whether the prediction is above it (the CLI table's `!`).
  double published_mfu_ceiling = -1;
  bool above_published_mfu = false;
  double memory_reserved_GiB = -1, memory_capacity_GiB = -1;
  bool compile = false;  // job.training.compile (torch.compile / TE graphs)
  // The checkpoint schedule the plan was priced with (its candidate's
  // "goodput", there when the plan was made with a token budget): a save every
  // checkpoint_interval_steps steps (0: the plan priced none), asynchronous
  // when checkpoint_async (planner/goodput.h, OffersAsyncSave).
  int64_t checkpoint_interval_steps = 0;
  bool checkpoint_async = false;

  int64_t Gbs() const { return job.training.global_batch; }
  // Micro-batches per iteration per pipeline: GBS / (mbs · gz · gdata).
  int64_t MicroBatches() const { return Gbs() / (int64_t{c.mbs} * c.gz * c.gdata); }
  // The pipeline split the plan was priced with (its framework's rule).
  PpSplit PricedSplit() const { return FrameworkPreset(framework).support.pp_split; }
  // Nodes the job spans (gpus / gpus per node, at least 1).
  int64_t Nodes() const;
  // GPUs the launcher starts on each node (gpus per node, at most the job's GPUs).
  int64_t GpusPerNode() const;
};

// The snapshot of a framework whose rules an emitter follows.
struct Follows {
  const char* repository;  // "NVIDIA/Megatron-LM"
  const char* commit;      // abbreviated hash of the snapshot
  const char* version;     // the version it states at that commit
  const char* files;       // the files whose rules the checks restate
};

// A setting the user must keep for the plan to run as priced.
struct Keep {
  std::string name, value, why;
};

// What a framework's room provides.
struct FrameworkEmitter {
  EmitFormat format;
  Follows follows;
  Status (*check)(const Plan&);
  std::string (*write)(const Plan&);
  std::vector<Keep> (*keep)(const Plan&);
  std::string (*launcher)(const Plan&);
};

const FrameworkEmitter& MegatronEmitter();
const FrameworkEmitter& MegatronDeepSpeedEmitter();
const FrameworkEmitter& DeepSpeedEmitter();
const FrameworkEmitter& TorchtitanEmitter();
const FrameworkEmitter& AxonnEmitter();
const FrameworkEmitter& MegatronBridgeEmitter();

Status Refuse(EmitFormat f, const std::string& why);
// What gx and gz are in the plan's own framework, for a format that has
// neither: FSDP's shard degree (dp_shard = gz) for a plan priced for fsdp or
// torchtitan, AxoNN's 3D tensor grid otherwise; with the format that has it.
std::string ShardingGridWords(const Plan& p);
std::string Str(int64_t v);
// A number as C++ streams print it (1e-06, 7, 0.5): what Python's float() reads.
std::string Num(double v);
// True when the plan's active dimensions (degree > 1) appear in the same
// relative order as in `framework_order` (innermost first).
bool OrderMatches(const ParallelConfig& c, std::initializer_list<Dim> framework_order);
std::string OrderString(const ParallelConfig& c);
// The header every text format carries, each line after `comment`: what it
// is, the job, the prediction, the framework snapshot it follows, the
// pipeline split, the settings to keep and the launcher line.
std::string Header(const Plan& p, const FrameworkEmitter& fe, const char* comment,
                   const char* what);
// How a shell script format starts: the header in `#` comments, then an
// `export NAME=value` line for each setting the framework's room keeps.
std::string ShellHeader(const Plan& p, const FrameworkEmitter& fe, const char* what);
// The allocator setting the plan's memory verdict assumes, appended to `keep`
// when the job runs with expandable segments (TrainingSpec::expandable_segments):
// `var` is the variable the stack reads it from.
void KeepAllocator(const Plan& p, const char* var, std::vector<Keep>* keep);
// Transformer layers per pipeline rank and per model chunk as the plan priced them.
std::vector<int> RankLayers(const Plan& p);
std::vector<int> ChunkLayerList(const Plan& p);
// The plan's pipeline layout must be the one `split` builds for it: the same
// layers on every chunk as the split the plan was priced with.
Status CheckSameSplit(const Plan& p, EmitFormat f, PpSplit split);
// The plan's expert layout and what the frameworks' MoE rules depend on.
MoeLaunch MoeLaunchOf(const Plan& p);
// A refusal from frameworks/moe_args.h as the emitter of format f says it.
Status RefuseMoe(EmitFormat f, const Status& why);
// Where an emitted run saves and resumes its checkpoints: $CHECKPOINT_DIR,
// ./checkpoints when unset (a shell expansion; Python reads the same variable).
inline constexpr const char* kCheckpointDirShell = "\"${CHECKPOINT_DIR:-checkpoints}\"";
inline constexpr const char* kCheckpointDirPython = "os.environ.get(\"CHECKPOINT_DIR\", \"checkpoints\")";
// The header line that says the checkpoint schedule a plan was priced with,
// or "" when it priced none.
std::string CheckpointNote(const Plan& p);
// The start-up rules of framework fw's preset (planner/framework.h), as refusals.
Status CheckPresetRules(const Plan& p, EmitFormat f, Framework fw);

}  // namespace paratune::planner::emit_internal
