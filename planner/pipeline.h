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
// The schedule (ParallelConfig::pp_schedule) decides which rank runs which
// stage (V schedules: stages s and 2pp−1−s on rank s), the bubble and the
// activations held; each formula below cites its publication.
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

// Transformer layers of model chunk (stage) k in [0, pp·vpp), on rank
// ChunkRank(c, k). REQUIRES: PipelineLayoutError(layers, c, split) is "".
int ChunkLayers(int layers, const ParallelConfig& c, PpSplit split, int k);

// The pipeline rank that runs stage k: k % pp (looped schedules), or for the
// V schedules (ZB-V, DualPipeV; vpp = 2) k on the way down and 2pp−1−k on the
// way back (torchtitan pipeline_parallel.py:532-569 @b5bcd76, style "v").
// Whether the schedule places its two stages per rank in a V: rank 0 then
// holds both the first stage (embedding) and the last (the loss).
inline bool VShaped(PpSchedule s) { return s == PpSchedule::kZbV || s == PpSchedule::kDualPipeV; }
inline int ChunkRank(const ParallelConfig& c, int k) {
  return VShaped(c.pp_schedule) && k >= c.pp ? 2 * c.pp - 1 - k : k % c.pp;
}

// The bubble of one iteration: idle time per rank, in the time units of
// f, b, w — one micro-batch's forward (f), input-gradient backward (b, with any
// recompute) and weight-gradient backward (w) through ONE RANK's layers
// (all its stages). For vpp stages per rank a stage's times are f/vpp, ...
//   1F1B:        (pp−1)(f+b+w)            Qi et al. 2023 Table 2; DualPipe README (F+B)
//   interleaved: (pp−1)(f+b+w)/vpp        Narayanan et al. 2021 §2.2
//   ZB-H1:       (pp−1)(f+b−w)/vpp        Qi et al. 2023 Table 2 (ZB-H1 = ZB1P; DeepSeek-V3
//                                         Table 2: (PP−1)(F+B−2W) with B the full backward);
//                                         looped over vpp stages as interleaving divides 1F1B's
//   ZB-V:        (pp−1)·max(0, f_s+b_s−2w_s), stage times f_s = f/2 (Qi et al. 2023 §6:
//                zero when F = B = W at the same memory as 1F1B)
//   DualPipeV:   (pp−1)(F&B + B − 3W) per stage with F&B = f_s + (b_s+w_s) and B the full
//                backward b_s + w_s (DeepSeek-V3 Table 2; deepseek-ai/DualPipe README:
//                (PP/2−1)(F&B+B−3W) for PP stages on PP/2 ranks); = (pp−1)(f+2b−w)/2
// REQUIRES: pp >= 1, vpp >= 1 (2 for the V schedules), times >= 0.
double PipelineBubble(PpSchedule s, int pp, int vpp, double f, double b, double w);
// PipelineBubble / ((pp−1)(f+b+w)): the bubble as a fraction of 1F1B's (0 when pp = 1).
double BubbleRelativeTo1F1B(PpSchedule s, int pp, int vpp, double f, double b, double w);
// Activations the first rank holds at the peak, in multiples of 1F1B's
// (min(pp, micro-batches) micro-batches of its layers): 1 + (pp−1)/(pp·vpp)
// interleaved (Korthikanti et al. 2022 §4.2.3) and for ZB-H1 looped over vpp
// stages (the same warm-up; ZB-H1 itself holds 1F1B's, Qi et al. 2023 §2.1);
// ZB-V 1 (Qi et al. 2023 §6, pM_B); DualPipeV (PP+1)/PP stage activations for
// PP = 2pp stages = 1 + 1/(2pp) (DeepSeek-V3 Table 2).
inline double ActivationFactor(const ParallelConfig& c) {
  switch (c.pp_schedule) {
    case PpSchedule::kZbV:
      return 1.0;
    case PpSchedule::kDualPipeV:
      return 1.0 + 1.0 / (2.0 * c.pp);
    default:
      return c.vpp > 1 ? 1.0 + (c.pp - 1.0) / (c.pp * c.vpp) : 1.0;
  }
}

// Transformer layers per pipeline rank (summed over its chunks): the first,
// the last, the largest of the ranks between, the largest of all.
// REQUIRES: PipelineLayoutError(layers, c, split) is "".
StageLayers SplitLayers(int layers, const ParallelConfig& c, PpSplit split);

// torchtitan's pipeline_parallel_layers_per_stage for c's pp·vpp stages:
// 0 when the schedule's default stage count is already pp·vpp (vpp 1 with
// 1F1B, vpp 2 with a looped schedule), -1 when no value gives that count
// (ceil((layers + in + out) / value) == pp·vpp; pipeline_parallel.py:217-263).
int TorchtitanLayersPerStage(int layers, const ParallelConfig& c);

// Megatron-Core's explicit layout (--pipeline-model-parallel-layout, parsed by
// PipelineParallelLayerLayout @ d98e8a6, pipeline_parallel_layer_layout.py:
// 'E' embedding, 't' a decoder layer, 'm' an MTP module, 'L' the loss, '|'
// between the pp·vpp chunks, "x*n" and "(...)*n" repeat, ',' is cosmetic) in
// the form the planner prices: every chunk holds the same count except the
// first, which gives `embedding` of them to the embedding, and the last, which
// gives `loss` of them to the MTP modules and the loss — the embedding and the
// loss counted as that many layers (pp_embedding_layers / pp_loss_layers).
// Megatron-Bridge's DeepSeek-V3 layouts are of this form (e.g.
// "Et*4|(t*4|)*14tmL": 16 chunks, embedding 0, loss 3).
struct MegatronLayout {
  int chunks = 0;  // pp·vpp
  int embedding = 0, loss = 0;
};
// Parses `s` for a model of `layers` decoder layers and `mtp` MTP modules;
// an error names what Megatron would refuse (its validate_layer_layout rules:
// E first and once, L last and once, the decoder and MTP counts, MTP after the
// decoder layers in the last chunk) or a layout not of the form above.
Result<MegatronLayout> ParseMegatronLayout(const std::string& s, int layers, int mtp);
// The layout string of c's Megatron split with its embedding/loss counts
// (pp > 1), in the form Megatron-Bridge writes: "E" + first chunk's layers,
// "(t*n|)*k" for the middle chunks, the last chunk's layers + "m"·mtp + "L".
// REQUIRES: PipelineLayoutError(layers, c, kMegatron) is "".
std::string MegatronLayoutString(int layers, int mtp, const ParallelConfig& c);
// Whether Megatron needs the layout string for c (an embedding or loss
// counted as more than one layer, which its account-for switches cannot say).
inline bool NeedsMegatronLayout(const ParallelConfig& c) {
  return c.pp > 1 && (c.pp_embedding_layers > 1 || c.pp_loss_layers > 1);
}

// A pipeline layout (the layout keys of ParallelConfig).
struct PipeLayout {
  int first = 0, last = 0;      // first_stage_layers, last_stage_layers
  int embedding = 0, loss = 0;  // pp_embedding_layers, pp_loss_layers
  bool operator==(const PipeLayout&) const = default;
  // Sets c's layout keys to this layout.
  void ApplyTo(ParallelConfig* c) const {
    c->first_stage_layers = first;
    c->last_stage_layers = last;
    c->pp_embedding_layers = embedding;
    c->pp_loss_layers = loss;
  }
};

// A pipeline layout the search offers at one pp; equal when the layouts are.
struct LayoutChoice : PipeLayout {
  std::vector<int> vpps;  // the interleaving degrees that build it
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
