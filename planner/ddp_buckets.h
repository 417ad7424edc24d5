// Megatron's data-parallel gradient bucket, in elements: the job's stated
// --ddp-bucket-size, else Megatron-LM's rule max(4e7, 1e6 x dp·cp)
// (megatron/training/training.py:2179-2194 @d98e8a6), from the framework
// preset's ddp_bucket_min_elements and ddp_bucket_elements_per_rank. The
// cost model prices the plan with it and the Megatron-Bridge script states
// it, so the two cannot drift.
#pragma once

#include <algorithm>

#include "planner/framework.h"

namespace paratune::planner {

inline double DdpBucketElements(const FrameworkCosts& fc, double stated, int dp_cp) {
  return stated > 0 ? stated
                    : std::max(fc.ddp_bucket_min_elements, fc.ddp_bucket_elements_per_rank * dp_cp);
}

}  // namespace paratune::planner
