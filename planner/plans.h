// planner/plans.h: the ranked-plans document ("schema": "paratune.plans/v1"),
// produced by `paratune plan` and POST /v1/plans, consumed by the executor
// (`paratune confirm`), emitters and the UI. It carries the whole job (model,
// cluster and training specs, not just names) so a consumer can rebuild the
// cost model without the presets.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "planner/goodput.h"
#include "planner/request.h"
#include "planner/search.h"

namespace paratune::planner {

inline constexpr const char* kPlansSchema = "paratune.plans/v1";
// How time-like objectives rank candidates (the plans document's `ranked_by`,
// the table's footer): the slow end of each prediction's band.
inline constexpr const char* kRankedBy =
    "ranked by the pessimistic edge: iteration time x (1 + uncertainty), never faster than the "
    "GPU's "
    "published MFU ceiling";

// How --objective time-to-train ranks (the plans document's `ranked_by`).
inline constexpr const char* kRankedByTimeToTrain =
    "ranked by the pessimistic time to train the token budget: the pessimistic step time with "
    "failures, restarts and checkpoints at the optimal interval";

// A ranked row of the plan: a candidate, the configurations whose
// predictions are identical to it (placements or choices that change nothing),
// whether it is within the winner's uncertainty band, and its simplicity.
struct RankedPlan {
  Candidate best;
  std::vector<ParallelConfig> alternatives;
  bool within_band = false;
  int complexity = 0;  // Complexity(best.config)
  // When a row ranked below this one has a shorter point prediction: the
  // fastest such row's rank (1-based, in the whole ranking, so it holds for
  // any `max_rows`) and time, and why this row is ahead of it (RankForTrust),
  // e.g. "simpler than #3 (no interleaving); 3.9 % slower, within the ±7 %
  // band". 0 and empty otherwise.
  int faster_rank = 0;
  double faster_time_s = 0;
  std::string rank_note;
  // The run to the token budget (GoodputOf), when the options ask for one
  // (GoodputOptions::enabled); absent otherwise.
  std::optional<Goodput> goodput;
};

// What makes a configuration complex, lowest = simplest (the documented
// preference among candidates inside the uncertainty band): one point per
// parallel dimension above 1 (gx, gy — "tp" when gx is 1 — gz, pp, cp), one
// for interleaving, one per ZeRO stage, one per ZeRO++ option (qwZ, hpZ,
// qgZ), one for uneven stages, one for a placement other than the
// framework's first. Each part is named as a person reads it ("tp",
// "interleaving", "ZeRO-2", "uneven stages", "placement ...").
struct ComplexityPart {
  std::string name;
  int points = 0;
};
std::vector<ComplexityPart> ComplexityParts(const ParallelConfig& c, const FrameworkSpec& fw);
// The sum of ComplexityParts' points.
int Complexity(const ParallelConfig& c, const FrameworkSpec& fw);

// Orders a search's candidates for people (`pool`, best first: a
// SearchResult's pool): configurations with identical predictions
// (SamePrediction) collapse into one row; among the rows within the fastest
// one's uncertainty band (prediction.uncertainty) the simpler configuration
// ranks first (then the faster); the rest follow by time. A row ranked above
// a faster one says why (RankedPlan::rank_note). Then the first `max_rows`
// rows are kept: the ranking is made on the whole pool, so a smaller
// `max_rows` returns a prefix of a larger one's rows. kTimeToTrain needs the
// job and the goodput inputs (the form below); here it ranks as kTime.
std::vector<RankedPlan> RankForTrust(const std::vector<Candidate>& pool, Objective objective,
                                     int max_rows);
// The same for a plan of `job` under `options`: with options.goodput enabled
// every row carries its Goodput, and with objective kTimeToTrain the rows rank
// as above with the expected time to train in place of the step time (the
// pessimistic time to train orders them; the leaders are the rows whose point
// time to train lies under the first row's pessimistic one). Without a goodput
// the same as the form above.
std::vector<RankedPlan> RankForTrust(const std::vector<Candidate>& pool, const Job& job,
                                     const SearchOptions& options, int max_rows);

// What changes from one GPU count's pick to the next's, as "key a -> b" for
// each configuration key (canonical JSON) and the framework, leaving out the
// data-parallel width, which follows the count, and framework knobs that
// follow their framework's policy on both sides: empty when the next count
// keeps the layout and only adds or drops replicas.
std::vector<std::string> LayoutChanges(const Candidate& from, const Candidate& to);

// The fastest configuration the framework's start-up rules forbid
// (SearchResult::forbidden), when it is faster than every configuration the
// search kept: what `plan` names as "fastest if allowed". nullptr otherwise.
const Candidate* FasterIfAllowed(const SearchResult& r);

// The cost models a search needs (docs/frameworks.md): one per framework of
// `family` (FrameworksOf), each costing the configurations it runs; or, when
// the request named its framework (`framework_named`), only
// job.training.framework, which must then belong to `family` unless the
// family is kAll or was not given (`family_named` false). kInvalidArgument
// naming /training/framework otherwise. torch.compile applies to the
// frameworks that support it.
struct SpaceModels {
  std::vector<std::unique_ptr<CostModel>> models;
  std::vector<const CostModel*> Pointers() const;
};
Result<SpaceModels> ModelsForSpace(const Job& job, Family family, bool family_named,
                                   bool framework_named);

// When memory rejects every configuration: the fewest GPUs, doubling from the
// job's count, at which the same search fits, and that count's rank-1
// candidate (RankForTrust).
struct FitsFrom {
  int gpus = 0;
  Candidate best;
};
// Whether memory (GPU or host) rejected most of a search's configurations.
bool MemoryBinds(const SearchResult& r);
// The most GPUs FewestGpusThatFit tries: 1024 times the job's, `max_gpus` and
// the cluster's size (max_nodes, where it states one), whichever is least.
int64_t MostGpusToTry(const Job& job, int64_t max_gpus);
// Tries job.gpus·2, ·4, ... up to MostGpusToTry; `run` runs one search (its
// error, e.g. a deadline, ends the attempt with that error). nullopt: nothing
// fits up to there.
using SearchRun = std::function<Result<SearchResult>(const Search&)>;
Result<std::optional<FitsFrom>> FewestGpusThatFit(const Job& job, SearchOptions options,
                                                  bool family_named, bool framework_named,
                                                  int64_t max_gpus, const SearchRun& run);

// One GPU count's search, for the document.
struct PlanSection {
  Job job;
  SearchResult result;
  double search_time_s = 0;
  // Set (FewestGpusThatFit) when nothing fits for lack of memory.
  std::optional<FitsFrom> fits_from;
};

// One GPU count's pick in a sweep (the document's scaling rows, the CLI's
// scaling table). A count keeps the previous count's layout (its degrees,
// schedule, stage split, dispatcher and ZeRO stage; the data width, micro-batch,
// recompute, offloads and overlaps follow the count) while that layout is
// among the count's leaders (RankForTrust's band: its point time under the
// best pessimistic edge), so the pick does not flip between layouts the model
// cannot tell apart; otherwise it takes the count's rank-1 row and says what
// makes the previous layout lose there.
struct ScalingPick {
  Candidate best;
  std::vector<std::string> changed;  // LayoutChanges from the previous count's pick (knobs too)
  // Why the layout changed (the previous one does not divide, fit or start
  // here, or is slower beyond the band), or why a kept layout is not this
  // count's rank 1. Empty otherwise.
  std::string why;
  bool kept = false;   // the previous layout, kept over this count's rank 1
  bool first = true;   // the first count with a pick: nothing to compare
};
// One entry per section, nullopt where nothing fits. Sections in ascending
// GPU count, as a sweep runs them. Picks are made as RankForTrust ranks each
// count (by step time, or by time to train the budget under kTimeToTrain with
// options.goodput enabled), and the leaders' band that keeps a layout is
// measured in the same clock.
std::vector<std::optional<ScalingPick>> PicksAcrossCounts(const std::vector<PlanSection>& sections,
                                                          const SearchOptions& options);

// The document. With one section it is the plan for that GPU count; with
// several (a --gpus range) `candidates` etc. describe the largest count that has
// a feasible plan and `scaling` lists the best plan of every count, with the
// Pareto front of GPUs vs tokens/s marked.
OrderedJson PlansToJson(const std::vector<PlanSection>& sections, const SearchOptions& options);

// Rebuilds the job of a plans document (its "job" object). Strict.
Result<Job> JobFromPlans(const Json& plans);
// The configs of its candidates, best first.
Result<std::vector<ParallelConfig>> CandidatesFromPlans(const Json& plans);

}  // namespace paratune::planner
