// executor/run/moe_layer.h: one mixture-of-experts layer's forward, run for real
// on a Backend the way Megatron-Core's alltoall token dispatcher issues it
// (megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM
// d98e8a64, MoEAlltoAllTokenDispatcher):
//   1. dispatch: an all-to-all of the routed token copies over the
//      expert-parallel group (token_dispatch, lines 705-711);
//   2. with expert tensor parallelism, an all-gather of the received tokens over
//      the expert-tensor group (lines 746-751);
//   3. the local experts: per expert FC1 (h -> (gated ? 2 : 1)·f_e/etp) and FC2
//      (f_e/etp -> h) GEMMs at the expert's token count (a grouped GEMM is these
//      GEMMs issued back to back);
//   4. a reduce-scatter of the expert outputs over the expert-tensor group (lines
//      824-832) and the combine all-to-all back over the expert-parallel group
//      (token_combine, lines 864-870).
// Routing is balanced (each rank's tokens·top_k copies spread evenly over the
// experts, as the "forced load balance" benchmark recipes run): each rank sends
// tokens·top_k·hidden elements per all-to-all, 1/ep of them to each EP rank, and
// each local expert computes ep·etp·tokens·top_k / experts rows.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "common/status.h"
#include "planner/model.h"

namespace paratune::executor {

struct MoeLayerShape {
  int64_t tokens = 0;           // tokens this rank routes per micro-batch
  int top_k = 1;                // experts per token
  int64_t hidden = 0;           // h
  int local_experts = 1;        // experts / ep
  int64_t rows_per_expert = 0;  // tokens each local expert computes: ep·etp·tokens·top_k / experts
  int64_t fc1_out = 0;          // (gated ? 2 : 1) · f_e / etp
  int64_t ffn_local = 0;        // f_e / etp
  int ep = 1, etp = 1;
  // Elements each all-to-all sends from this rank (tokens·top_k·h), of which
  // (ep − 1)/ep leave it.
  int64_t a2a_elements = 0;
};

// The shape of one MoE layer on one rank. kInvalidArgument naming the field when
// the model has no experts, ep does not divide the experts, etp does not divide
// the expert width, or the token copies do not split evenly over the ep ranks
// and the experts (tokens·top_k·ep·etp % experts, tokens·top_k % ep).
Result<MoeLayerShape> MoeLayerShapeOf(const planner::ModelSpec& m, int64_t tokens, int ep, int etp);

// The element type tokens move as in the dispatch and combine: bf16, or fp32
// for an fp32/tf32 run.
backend::DataType MoeTokenType(backend::GemmPrecision precision);

// Bytes one all-to-all sends from a rank to the other ranks of its EP group:
// tokens·top_k·h elements of `MoeTokenType`, (ep − 1)/ep of them leaving it.
int64_t MoeA2aBytesPerRank(const MoeLayerShape& s, backend::GemmPrecision precision);

// The communicators the layer runs on: the expert-parallel group and, when
// etp > 1, the expert-tensor group (kNoComm otherwise).
struct MoeLayerComms {
  backend::CommId ep = backend::kWorldComm;
  backend::CommId etp = backend::kNoComm;
};

// Splits the expert groups from the world in Megatron-Core's expert order (etp
// innermost, then ep, then expert data: world rank r has etp index r % etp and
// ep index (r / etp) % ep). Collective over the world. REQUIRES: world % (ep·etp) == 0.
Result<MoeLayerComms> SplitMoeComms(backend::Backend& b, int ep, int etp);

// Seconds, the maximum over the world's ranks of the median over samples.
struct MoeLayerTiming {
  double dispatch_s = 0;  // the dispatch all-to-all (plus the ETP all-gather)
  double experts_s = 0;   // the local experts' GEMMs
  double combine_s = 0;   // the ETP reduce-scatter plus the combine all-to-all
  double total_s = 0;     // the layer, issued back to back
};

// Allocates the layer's buffers (tokens, dispatch and combine buffers, every
// local expert's weights), fills them with random data, runs `warmup` unmeasured
// and `samples` measured forwards and frees everything. Every world rank must
// call it with the same arguments. `precision` is the GEMM precision; tokens
// move as bf16 (fp32 for an fp32/tf32 run).
Result<MoeLayerTiming> RunMoeLayer(backend::Backend& b, const MoeLayerComms& comms,
                                   const MoeLayerShape& shape, backend::GemmPrecision precision,
                                   int warmup, int samples);

}  // namespace paratune::executor
