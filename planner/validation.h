// planner/validation.h: published measured runs as prediction requests, so the
// model can be checked against them (`paratune validate`, tests, docs/model.md).
// Reads the calibration format of ../shared/calibration/*.json (rows with
// hardware, model, parallel, measured). Mapping rules, documented in
// docs/model.md §Validation: the hardware maps to the cluster preset named by
// the caller (same for every row: hardware is calibrated, never a run); the
// model is GPT-style (LayerNorm, GeLU, learned positions, tied embeddings,
// dropout 0.1, biases) as in Megatron-LM; the framework is Megatron-LM of 2022:
// unfused attention, asynchronous tensor-parallel all-reduce (oar), sequence
// parallelism and recompute as the row states.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/request.h"

namespace paratune::planner {

struct PublishedRun {
  std::string id;
  std::string source;
  PredictRequest request;
  double measured_iteration_s = 0;  // 0 when the row states none
  double measured_mfu = 0;          // 0 when the row states none
};

// Converts every "throughput" row that has a parallel configuration into a
// request on `cluster_preset`. Rows of other types are skipped; a row whose
// fields cannot be mapped is an error naming its id.
Result<std::vector<PublishedRun>> PublishedRunsFromCalibration(const Json& doc,
                                                               const std::string& cluster_preset);

}  // namespace paratune::planner
