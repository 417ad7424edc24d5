// Megatron-FSDP is paratune's ZeRO-2 and ZeRO-3 under the megatron framework
// (--use-megatron-fsdp with optim_grads / optim_grads_params, Megatron-LM
// arguments.py:3190 @d98e8a6). One predicate for the rules, the search and
// the memory ledger, which price and refuse it apart from DeepSpeed's ZeRO.
#pragma once

#include "planner/framework.h"

namespace paratune::planner {

inline bool MegatronFsdp(Framework f, int zero) { return f == Framework::kMegatron && zero >= 2; }

}  // namespace paratune::planner
