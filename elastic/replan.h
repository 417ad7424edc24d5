// elastic/replan.h: elastic replanning (docs/replan.md). A run
// trains under one configuration; nodes die or capacity appears. Replan runs the
// real search (planner/search.h) on the GPUs now available (and on a few whole-
// node counts below, because an odd GPU count often admits no configuration),
// ranks the fitting configurations by throughput against the running one's
// prediction, and computes the reshard map (elastic/reshard.h) from the running
// layout to the chosen candidate. The global batch is kept unless the caller
// allows it to change; a change is reported in the document.
//
// Pure: the search is run through a caller-supplied SearchRunner (the CLI and
// the web service run shards on threads; the default runs them in the calling
// thread). No I/O or printing.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/goodput_options.h"
#include "planner/plans.h"
#include "planner/request.h"
#include "elastic/expert_reshard.h"
#include "elastic/reshard.h"
#include "scenario/scenario.h"
#include "planner/search.h"

namespace paratune::planner {

inline constexpr const char* kReplanSchema = "paratune.replan/v1";
inline constexpr const char* kReplanRequestSchema = "paratune.replan_request/v1";

struct ReplanOptions {
  // The new allocation; exactly one of: gpus (total now available), lost_nodes
  // (the last K nodes of the running allocation are gone), lost_node_ids (these
  // node indices, 0-based, of the running allocation are gone), add_nodes.
  int gpus = 0;
  int lost_nodes = 0;
  std::vector<int> lost_node_ids;
  int add_nodes = 0;
  bool allow_global_batch_change = false;
  // Space, pinned fields and top_k; the ranking is by throughput (tokens/s),
  // which is step time when the global batch is kept.
  SearchOptions search;
  int min_gpus = 0;    // smallest GPU count tried (0 = half the available GPUs)
  int gpu_step = 0;    // step between counts tried (0 = one node)
  int max_counts = 3;  // stop after this many counts with a fitting plan
  int reshard_candidate = 1;  // 1-based candidate to compute the reshard map for; 0 = none
  ReshardOptions reshard;
  // After lost nodes: what continuing on the GPUs left costs against waiting
  // for the repair or a spare (elastic/failure_policy.h). The run's goodput
  // inputs, the repair time among them (a plans document's goodput_inputs;
  // tokens 0 = no budget, per-failure costs only).
  GoodputOptions goodput;
};

struct ReplanCandidate {
  Candidate candidate;
  int gpus = 0;
  int64_t global_batch = 0;
  double relative_step_time = 0;     // candidate iteration time / running iteration time
  double relative_tokens_per_s = 0;  // candidate tokens/s / running tokens/s
  // The running layout with fewer (or more) data-parallel replicas: what an
  // operator tries first (nothing but the data-parallel groups changes, the
  // checkpoint needs no resharding within a replica).
  bool keeps_layout = false;
};

// The routed experts' part of a reshard. Each pipeline stage's experts lie
// over its ranks as ep × etp × edp (elastic/expert_reshard.h): an MoE layer
// that stays on the stage of the same index keeps what each stage-local rank
// already holds (PlanExpertReshard); one that changes stage is read whole.
struct ExpertMove {
  ExpertLayout from, to;  // per stage
  int moe_layers = 0;
  int layers_changing_stage = 0;
  // Parameters, summed over the new ranks and the MoE layers (replicas count).
  int64_t params_needed = 0, params_kept = 0, params_moved = 0;
  // Bytes of the moved parameters with their optimizer state: the weights in
  // the training dtype, the fp32 master weights (below fp32) and Adam's m and
  // v, these three split over the expert-data replicas under a distributed
  // optimizer or ZeRO.
  double bytes_moved = 0;
  // The most one new rank reads, summed over its stage's MoE layers (each
  // layer's busiest rank: an upper bound).
  int64_t max_rank_params_in = 0;
  // The load time if every moved piece crossed nodes: the busiest rank's bytes
  // at its share of the node's injection bandwidth, or all bytes at every new
  // node's, whichever is longer; 0 when nothing moves or the cluster has no
  // inter-node bandwidth.
  double cross_node_s = 0;
};
// Errors: a config whose experts do not divide over its stage's ranks.
Result<ExpertMove> PlanExpertMove(const ModelSpec& m, const ParallelConfig& from,
                                  const ParallelConfig& to, topology::Precision precision,
                                  const topology::ClusterSpec& cluster);

struct ReplanResult {
  Job old_job;
  ParallelConfig old_config;
  Prediction old_prediction;
  Allocation allocation;        // physical GPUs of the new ranks (all available GPUs)
  std::vector<int> lost_nodes;  // node indices of the running allocation that are gone
  int available_gpus = 0;
  int added_gpus = 0;
  struct Searched {
    int gpus = 0;
    int64_t global_batch = 0;
    int64_t evaluated = 0, feasible = 0;
  };
  std::vector<Searched> searched;
  std::vector<ReplanCandidate> candidates;  // best first
  bool global_batch_changed = false;        // some candidate runs another global batch
  // With the batch kept, the running layout on the most GPUs that hold it
  // with another batch (BatchesFor's order), when that is the only way to
  // keep it there: what --allow-global-batch-change would offer first.
  std::optional<ReplanCandidate> same_layout_with_batch_change;
  // The reshard map to candidate reshard_candidate (absent with none).
  std::optional<ReshardMap> reshard;
  std::optional<Layout> reshard_from, reshard_to;
  // A mixture-of-experts model's routed experts, which the map above leaves
  // out, moved to the same candidate (absent for a dense model or no map).
  std::optional<ExpertMove> experts;
};

using SearchRunner = std::function<SearchResult(const Search&)>;

// Replans `old_config` of `old_job` (job.gpus = the running GPU count).
// Errors (kInvalidArgument): no or several allocation changes, an allocation
// with no GPU left or beyond the cluster's nodes, a running config that breaks
// a rule, reshard_candidate out of range. No fitting configuration is not an
// error: `candidates` is empty. `run` null = Search::RunAll.
Result<ReplanResult> Replan(const Job& old_job, const ParallelConfig& old_config, const ReplanOptions& options,
                            const SearchRunner& run = nullptr);

// The paratune.replan/v1 document.
OrderedJson ReplanToJson(const ReplanResult& r, const ReplanOptions& options);

// A parsed replan request: the running job and config, and the options.
struct ReplanInput {
  Job job;
  ParallelConfig config;
  ReplanOptions options;
  std::string profile_path;  // a predict request's "profile" (CLI only)
  // What a predict-request `from` left unstated, resolved as predict resolves
  // it (scenario/): the running configuration is priced as plan and predict
  // price it. Empty for a plans document, whose candidates state every knob.
  std::vector<scenario::Assumption> assumed;
};

// Parses the running state from `from`: a plans document (paratune.plans/v1;
// `rank` picks the candidate, 1-based; its space and pinned fields become the
// defaults) or a predict request (model, cluster, gpus, training, config).
// Errors name JSON pointers under `pointer`.
Result<ReplanInput> ParseReplanFrom(const Json& from, int rank, const std::string& pointer);

// Parses a replan request (POST /v1/replans; the CLI builds the same object):
// {"schema"?: "paratune.replan_request/v1", "from": <plans document or predict
// request>, "rank"?: 1, one of "gpus" | "lost_nodes" | "lost_node_ids" |
// "add_nodes", "allow_global_batch_change"?: false, "space"?, "fix"?: "pp=1,...",
// "top"?: 10, "min_gpus"?, "gpu_step"?, "max_counts"?, "fs_GBps"?: 500,
// "reshard_candidate"?: 1, "fragments_of"?: 0 | "all", "include_gradients"?: false}.
// Strict: unknown keys are errors naming their pointer.
Result<ReplanInput> ParseReplanRequest(const Json& j);

// Request in, document out: ParseReplanRequest + Replan + ReplanToJson, for
// the REST route; a network's plans as `from` are replanned as a network
// (elastic/network_replan.h), asking `expired` before each GPU count's search
// (Timeout when it says the time is up). Measured profiles are not applied
// here (the cluster object in `from` is used as given).
Result<OrderedJson> ReplanDocument(const Json& request, const SearchRunner& run = nullptr,
                                   const std::function<bool()>& expired = nullptr);

}  // namespace paratune::planner
