// planner/request.h: the prediction request and response documents
// (`paratune predict`, POST /v1/predict). Request keys: model, cluster, gpus,
// training {seq_len, global_batch, precision, attention, main_grads_fp32,
// expandable_segments, headroom, fpdt_chunk_tokens}, config, and optionally profile (a path, CLI
// only). The response carries "schema": "paratune.prediction/v1".
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
  // training.seq_len / global_batch were not given: DefaultSeqLen / DefaultGlobalBatch.
  bool seq_defaulted = false;
  bool batch_defaulted = false;
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

// Tokens per step a request that names no global batch trains with when the
// model states no pretraining batch of its own: 4M, Llama 2's pretraining
// batch (Touvron et al. 2023, arXiv 2307.09288, section 2.2 and Table 1).
inline constexpr int64_t kDefaultBatchTokens = int64_t{1} << 22;

// The longest pretraining length of the published recipes the model presets
// cite: Llama 3 pretrains at 8192 tokens before a long-context stage extends
// the window to 128K (Dubey et al. 2024, arXiv 2407.21783, sections 3.4.1 and
// 3.4.2); DeepSeek-V3 at 4096 before YaRN (arXiv 2412.19437, sections 4.2 and
// 4.3). A context length above it is an extension's, not pretraining's.
inline constexpr int kLongestPretrainSeqLen = 8192;

// The sequence length of a request that names none: the model's published
// pretraining length (pretrain_seq_len), else its context length capped at
// kLongestPretrainSeqLen, else 2048.
int DefaultSeqLen(const ModelSpec& model);

// The global batch (sequences) of a request that names none, at `seq_len`:
// the model's published pretraining batch in tokens (pretrain_global_batch ×
// pretrain_seq_len), else kDefaultBatchTokens, divided by seq_len (at least 1).
// So a model run at its pretraining length gets its published batch.
int64_t DefaultGlobalBatch(const ModelSpec& model, int seq_len);

// Parses the `training` object; an absent seq_len or global_batch takes the
// defaults above. Strict.
Result<TrainingSpec> ParseTraining(const Json& j, const std::string& pointer, const ModelSpec& model);
OrderedJson TrainingToJson(const TrainingSpec& t);
// The precision as a request states it: the recipe's name when one was asked
// for ("mxfp8"), else the precision's ("fp8", "bf16").
const char* StatedPrecisionName(const TrainingSpec& t);

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
