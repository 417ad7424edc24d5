// Which ZeRO stages shard a mixture-of-experts model's experts in a way the
// cost model does not price: ZeRO-3's gathers of the experts, and
// Megatron-FSDP (megatron with zero 2 or 3). Shared by the rules
// (CostModel::CheckRules) and the search's enumeration of ZeRO choices, so
// the two cannot disagree.
#pragma once

#include "planner/framework.h"
#include "planner/megatron_fsdp.h"
#include "planner/model.h"

namespace paratune::planner {

inline bool ExpertShardingUnmodelled(const ModelSpec& m, Framework f, int zero) {
  return m.is_moe() && (zero == 3 || MegatronFsdp(f, zero));
}

}  // namespace paratune::planner
