// validation/picks.h: the pick check (`paratune validate --picks`).
// Every calibration question that people answered by hand-tuning (same model,
// GPU count, global batch, sequence, precision and framework: the rows of a
// sweep are one question, answered by its fastest row) is asked of the
// planner, and the throughput it promises for its pick is set beside the
// best measured. A ratio above 1 is the planner promising more than the
// experts got: on a model that is right on average, the search maximising over
// thousands of configurations picks the ones whose error is optimistic (the
// winner's curse), which ranking by the pessimistic edge counters.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "validation/validation.h"

namespace paratune::planner {

struct PickCheck {
  std::string question;  // "GPT-3 175B, 1024 × a100-80gb, batch 1536 × 2048, megatron, bf16"
  std::string source;    // the source key of the rows
  std::string run_id;    // the best measured row of the question
  int rows = 0;          // measured rows that asked it
  std::string metric;    // "tokens/s" | "model TFLOP/s/GPU"
  double measured = 0;   // the best measured throughput
  std::string expert_config;
  double expert_predicted = 0;       // the model's prediction of the experts' configuration
  std::string pick_config;           // "" when nothing fits
  double pick_predicted = 0;         // the pick's point prediction
  double pick_pessimistic = 0;       // the pick's pessimistic edge (what it was ranked by)
  double ratio = 0;                  // pick_predicted / measured
  double pessimistic_ratio = 0;      // pick_pessimistic / measured
  bool above_published_mfu = false;  // the pick's predicted MFU exceeds the GPU's published ceiling
  // The fastest any row measured per GPU for the same model, sequence length,
  // GPU and precision, at any GPU count, batch or release (tokens/s/GPU; for
  // tokens/s questions only, else 0), and the pick's promise per GPU over it:
  // whether the promise is beyond what anyone measured on that part, not only
  // beyond this question's experts.
  std::string best_same_gpu_run;
  double best_same_gpu_per_gpu = 0;
  double ratio_to_best_same_gpu = 0;
};

// Asks the planner every question of `runs` in the space of the row's
// framework, with the overlaps the row's stack did not have (those the
// framework's policy would turn on for the experts' configuration but the row
// leaves off) pinned off. Deterministic.
Result<std::vector<PickCheck>> CheckPicks(const std::vector<PublishedRun>& runs);

OrderedJson PicksToJson(const std::vector<PickCheck>& picks);

}  // namespace paratune::planner
