// validation/seeds.h: the headline results of the papers paratune is built on,
// asked of the planner as the papers asked them (`paratune validate --seeds`,
// tests, docs/model.md "Seed papers"). Each seed states the published claim,
// the job paratune was given (model, GPUs, network, batch), what paratune
// assumed where the paper is silent, the configuration each side of the
// comparison used, paratune's figures, and whether they fall in the band the
// published result defines. Pure and deterministic: presets in, numbers out.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/framework.h"

namespace paratune::planner {

// One side of a comparison: the best configuration of a space, and what the
// planner predicts for it.
struct SeedSide {
  std::string label;       // "AxoNN", "Megatron-LM (2023)", "ZeRO-3", ...
  std::string framework;   // the framework preset that costs it
  std::string config;      // ParallelConfig::ToString() of the best candidate ("" when none fits)
  double iteration_s = 0;  // predicted seconds per iteration (0 when none fits)
  double hfu = 0;          // executed FLOP/s fraction of peak (Prediction::hfu)
  // Hardware FLOP/s fraction of peak as the papers count it: the model FLOPs
  // of its convention plus the recomputed ones (Narayanan et al. 2021).
  double counted_hfu = 0;
  // The GPU's best measured GEMM efficiency at the precision (GpuSpec::
  // GemmCeilingAt): what `hfu` may not exceed.
  double gemm_ceiling = 1;
  double mfu = 0;
  int64_t max_seq = 0;     // capacity seeds: the longest sequence that fits (tokens)
  std::string binding;     // capacity seeds: what stops a longer one ("gpu_memory", "host_memory")
};

struct SeedResult {
  std::string id;           // "axonn-80b-perlmutter", "fpdt-2m", "zeropp-384-v100", "ulysses-vs-megatron-sp"
  std::string title;
  std::string source;       // the paper
  std::string published;    // the claim, in the paper's words and figures
  std::string criterion;    // the band paratune must land in
  std::vector<SeedSide> sides;
  std::vector<std::string> figures;  // paratune's answer, one line each
  std::vector<std::string> assumed;  // settings the paper does not state, and what was used
  bool reproduced = false;           // paratune's answer falls in the band
};

// Runs every seed (a few exhaustive searches; about a second in all).
Result<std::vector<SeedResult>> RunSeeds();

// Megatron-LM as the 2023 papers ran it: whole pipeline stages only
// (arguments.py asserted num_layers % pipeline size == 0 until Megatron-Core
// 0.9 added --decoder-first/last-pipeline-num-layers), FlashAttention-2 through
// --use-flash-attn rather than Transformer Engine's cuDNN fused attention (the
// attention efficiency of megatron-deepspeed.json, which runs the same kernel),
// and no context parallelism (--context-parallel-size arrived with Megatron-Core
// 0.5, 2024).
FrameworkSpec Megatron2023();

OrderedJson SeedsToJson(const std::vector<SeedResult>& seeds);

}  // namespace paratune::planner
