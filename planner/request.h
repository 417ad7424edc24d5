// planner/request.h: the prediction request and response documents
// (`paratune predict`, POST /v1/predict). Request keys: model, cluster, gpus,
// training {seq_len, global_batch, precision, attention, main_grads_fp32,
// headroom, fpdt_chunk_tokens}, config, and optionally profile (a path, CLI only).
// The response carries "schema": "paratune.prediction/v1".
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/model.h"
#include "topology/cluster.h"

namespace paratune::planner {

inline constexpr const char* kPredictionSchema = "paratune.prediction/v1";

struct Job {          // what is trained, where: everything but the parallel config
  ModelSpec model;
  topology::ClusterSpec cluster;
  int gpus = 0;
  TrainingSpec training;
  // training.precision was not given: it is BestTrainingPrecision(cluster.gpu).
  bool precision_defaulted = false;
};

// The precision a job trains in when the request names none: the best the
// GPU has a peak for, in the order bf16, fp16, tf32, fp32 (fp8 is never a
// default: it needs a recipe the request must ask for).
topology::Precision BestTrainingPrecision(const topology::GpuSpec& gpu);

// Settles the low-precision recipe of a job trained in fp8 on `gpu`: "fp8"
// becomes the GPU's fp8_default_recipe; a recipe the GPU does not run is an
// error naming `pointer`/precision and the recipes it does run.
Status ResolveRecipe(const topology::GpuSpec& gpu, TrainingSpec* t, const std::string& pointer);

struct PredictRequest {
  Job job;
  ParallelConfig config;
  std::string profile_path;  // optional measured profile to apply to the cluster
};

// GPUs a request may name (2^24), and so nodes too: every count parsed from a
// request is checked against it before any arithmetic (documented in
// docs/cli.md and docs/service.md).
inline constexpr int64_t kMaxGpus = int64_t{1} << 24;

// Sequences per iteration a request may ask for (2^30): caps the search's
// enumeration of micro-batch sizes (documented in docs/cli.md).
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;

// Parses the `training` object. `model` supplies the default seq_len (its
// max_seq_len) when absent. Strict.
Result<TrainingSpec> ParseTraining(const Json& j, const std::string& pointer, const ModelSpec& model);
OrderedJson TrainingToJson(const TrainingSpec& t);

// Parses model, cluster, gpus and training from a request object, marking those
// keys as read in `r` (so the caller can read its own keys and Finish()).
Result<Job> ParseJob(const Json& request, ObjectReader& r);

// Parses a whole predict request. Errors are kInvalidArgument naming a JSON pointer.
Result<PredictRequest> ParsePredictRequest(const Json& j);

// Rule check for one config with a message naming the field and the rule
// (exit code 2 material). Ok when the config passes every rule.
Status ValidateConfig(const CostModel& cm, const ParallelConfig& c);

// The response document: schema, inputs echoed (model name, cluster name and
// fingerprint, gpus, training, config) and the prediction.
OrderedJson PredictionToJson(const Job& job, const ParallelConfig& c, const Prediction& p,
                             const CostModel& cm);
// The prediction's own fields (fits, times, memory_GiB, breakdown_s), reused by plans.
OrderedJson PredictionFields(const Prediction& p, const CostModel& cm);

}  // namespace paratune::planner
