// elastic/expert_reshard.h: where the routed experts' weights go when the expert
// layout of a mixture-of-experts model changes (docs/replan.md "Experts").
//
// Megatron-Core's MoE parallel folding lays the experts of one pipeline stage over
// that stage's ranks as etp x ep x edp, innermost first (the expert RankGenerator
// of megatron/core/parallel_state.py:887-896 at NVIDIA/Megatron-LM d98e8a64, in
// the default order "tp-cp-ep-dp-pp" of line 617 with cp = 1 for the experts):
//  - expert parallel rank i holds the contiguous experts [i·E/ep, (i+1)·E/ep)
//    (megatron/core/transformer/moe/moe_layer.py:186-188: num_local_experts =
//    num_moe_experts // ep_size, local_expert_indices_offset = ep_rank · that);
//  - each expert is an MLP on the expert tensor-parallel group
//    (experts.py:1442-1450, tp_group = expt_tp): FC1 column-parallel (its output
//    rows, for a gated FFN the gate and the up half each, split over etp), FC2
//    row-parallel (its input columns split), so expert-tensor rank j holds the
//    slice [j·f_e/etp, (j+1)·f_e/etp) of the expert's intermediate width;
//  - the expert-data-parallel ranks (edp) hold replicas.
// Every MoE layer of a stage has the same layout, so the map is per layer.
//
// Pure: no I/O, clocks or threads. Deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "planner/model.h"

namespace paratune::planner {

// The experts' layout over the ranks of one pipeline stage.
struct ExpertLayout {
  int ep = 1;   // expert parallel
  int etp = 1;  // expert tensor parallel
  int edp = 1;  // expert data parallel (replicas)
  int ranks() const { return ep * etp * edp; }
};

// A stage-local rank's place in the layout: etp innermost, then ep, then edp.
struct ExpertCoords {
  int etp = 0, ep = 0, edp = 0;
};
// REQUIRES: 0 <= stage_rank < layout.ranks().
ExpertCoords ExpertCoordsOf(const ExpertLayout& layout, int stage_rank);

// A part of one routed expert: the slice [f0, f1) of its intermediate width, with
// the FC1 rows (gate and up) and FC2 columns of that slice.
struct ExpertSlice {
  int expert = 0;
  int64_t f0 = 0, f1 = 0;
  bool operator==(const ExpertSlice&) const = default;
};

// Parameters of a slice: (gated ? 3 : 2)·h·(f1 − f0) weights, and with biases
// the slice's FC1 bias ((gated ? 2 : 1)·(f1 − f0)) and, on the slice that starts
// at 0, the expert's FC2 bias (h). The slices of one expert sum to ExpertParams().
int64_t ExpertSliceParams(const ModelSpec& m, const ExpertSlice& s);

// Checks that `layout` can hold `m`'s experts: ep, etp, edp >= 1, experts
// divisible by ep and moe_ffn_hidden by etp. kInvalidArgument naming the field
// ("ep", "etp", "edp") otherwise, or when m has no experts.
Status CheckExpertLayout(const ModelSpec& m, const ExpertLayout& layout);

// The slices stage-local rank `stage_rank` holds in every MoE layer: its E/ep
// experts, each at its etp slice, in expert order.
// REQUIRES: CheckExpertLayout(m, layout).ok(), 0 <= stage_rank < layout.ranks().
std::vector<ExpertSlice> ExpertSlicesHeld(const ModelSpec& m, const ExpertLayout& layout,
                                          int stage_rank);

// One piece a rank of the new layout reads from a rank of the old one.
struct ExpertTransfer {
  int to_rank = 0;    // stage-local rank in the new layout
  int from_rank = 0;  // stage-local rank in the old layout that holds the piece
  ExpertSlice slice;  // the piece, in consolidated coordinates
  int64_t params = 0;
};

// The reshard of one MoE layer's routed experts from `from` to `to` (the ranks
// of one stage before and after; their counts may differ, as after losing or
// adding nodes). A new rank keeps what it held before under the same stage-local
// index (no transfer) and reads every other piece from an old holder: of the
// old ranks holding the piece, the one at index (to_rank mod holders), which
// spreads the reads of a piece over its replicas.
struct ExpertReshardPlan {
  std::vector<ExpertTransfer> transfers;  // by new rank, then expert, then f0
  int64_t params_needed = 0;              // Σ over new ranks of the parameters each holds
  int64_t params_kept = 0;                // of which already in place
  int64_t params_moved = 0;               // = needed − kept, the sum over transfers
  int64_t max_rank_params_in = 0;         // the most any new rank reads
  int64_t max_rank_params_out = 0;        // the most any old rank serves
};
// Errors: CheckExpertLayout of either layout (the field named with "from." or
// "to." in front).
Result<ExpertReshardPlan> PlanExpertReshard(const ModelSpec& m, const ExpertLayout& from,
                                            const ExpertLayout& to);

}  // namespace paratune::planner
