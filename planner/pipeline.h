// planner/pipeline.h: how a training framework splits a model's transformer
// layers over pipeline stages, so the plan the cost model prices is the split
// the framework builds. Three rules (framework preset key `pp_split`), each
// restated from the framework's source (docs/frameworks.md "Pipeline
// layouts"):
//
//  - megatron: Megatron-Core's get_num_layers_to_build — every rank the same
//    count; or the first/last rank given explicitly (--decoder-first/last-
//    pipeline-num-layers) and the rest even; or the embedding and/or the loss
//    counted as one layer each (--account-for-embedding/loss-in-pipeline-split)
//    and the layers plus those split evenly, the first chunk of the first rank
//    building one layer fewer for the embedding, the last chunk of the last
//    rank one fewer for the loss. With interleaving every rank's count splits
//    evenly into vpp chunks.
//  - torchtitan: _generate_llm_fqn_per_model_part — pp·vpp stages share
//    layers + in + out "effective" layers (in / out = the embedding's and the
//    output's weight, pipeline_parallel_first/last_stage_less_layers), the
//    first (effective % stages) stages one more; stage 0 loses `in` layers, the
//    last stage `out`; stage s runs on rank s % pp. The stage count comes from
//    the schedule (1 per rank for 1F1B, 2 for looped) or from
//    pipeline_parallel_layers_per_stage.
//  - balanced: DeepSpeed's PipelineModule — layers as evenly as possible, the
//    first stages one more, no interleaving.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/config.h"

namespace paratune::planner {

enum class PpSplit : uint8_t { kMegatron = 0, kTorchtitan, kBalanced };
const char* PpSplitName(PpSplit s);  // "megatron" | "torchtitan" | "balanced"
Result<PpSplit> ParsePpSplit(const std::string& s);

// "" when the framework builds c's pipeline layout (pp, vpp, first_stage_layers,
// last_stage_layers, pp_embedding_layers, pp_loss_layers) for a model of
// `layers` transformer layers; otherwise the rule it breaks, with its source.
std::string PipelineLayoutError(int layers, const ParallelConfig& c, PpSplit split);

// Transformer layers of model chunk k in [0, pp·vpp): virtual stage k / pp on
// pipeline rank k % pp. REQUIRES: PipelineLayoutError(layers, c, split) is "".
int ChunkLayers(int layers, const ParallelConfig& c, PpSplit split, int k);

// Transformer layers per pipeline rank (summed over its chunks): the first,
// the last, the largest of the ranks between, the largest of all.
// REQUIRES: PipelineLayoutError(layers, c, split) is "".
StageLayers SplitLayers(int layers, const ParallelConfig& c, PpSplit split);

// torchtitan's pipeline_parallel_layers_per_stage for c's pp·vpp stages:
// 0 when the schedule's default stage count is already pp·vpp (vpp 1 with
// 1F1B, vpp 2 with a looped schedule), -1 when no value gives that count
// (ceil((layers + in + out) / value) == pp·vpp; pipeline_parallel.py:217-263).
int TorchtitanLayersPerStage(int layers, const ParallelConfig& c);

// A pipeline layout the search offers at one pp (layout keys of ParallelConfig).
struct LayoutChoice {
  int first = 0, last = 0;      // first_stage_layers, last_stage_layers
  int embedding = 0, loss = 0;  // pp_embedding_layers, pp_loss_layers
  std::vector<int> vpps;        // the interleaving degrees that build it
  bool operator==(const LayoutChoice& o) const {
    return first == o.first && last == o.last && embedding == o.embedding && loss == o.loss;
  }
};

// The layouts a framework with rule `split` builds at pp stages, each with the
// vpp values (<= max_vpp, from 1; interleaving only when `interleave`) it
// builds with: Megatron's even split, embedding and/or loss counted as
// layers, and the balanced first/last split when layers % pp != 0; torchtitan's
// default weights (1, 1), none (0, 0) and one of them; DeepSpeed's balanced split.
// `pinned_first` / `pinned_last` (> 0) add the Megatron layout with those
// counts (the other one balancing the ranks between). Layouts no vpp builds
// are left out.
std::vector<LayoutChoice> LayoutChoices(int layers, int pp, PpSplit split, bool interleave,
                                        int max_vpp, int pinned_first = 0, int pinned_last = 0);

}  // namespace paratune::planner
