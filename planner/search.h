// planner/search.h: exhaustive search of the configuration space (cost-model.md
// §1) for one job: enumerate → rules → memory → full cost → top-K and Pareto.
// The space is restricted to what a framework family supports (--space) and
// any field can be pinned (--fix). Work is split into shards (ranges of the
// outer degree tuples) so callers can run them on threads; each shard keeps
// the candidates the ranking can need (the K best distinct predictions and
// those within the uncertainty band of the best) and a Pareto set, so memory
// stays bounded by those, whatever the space size. Pure and deterministic: ties break on the
// canonical config order.
#pragma once

#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/goodput_options.h"

namespace paratune::planner {

// A search space (--space): the frameworks whose configurations it covers.
// Each configuration is costed with the framework that would run it, so
// families are compared as their real stacks run them.
enum class Family : uint8_t { kAll = 0, kMegatron, kDeepSpeed, kAxonn, kFsdp };
const char* FamilyName(Family f);  // "all" | "megatron" | "deepspeed" | "axonn" | "fsdp"
Result<Family> ParseFamily(const std::string& s);
// megatron → megatron; deepspeed → megatron-deepspeed; axonn → axonn;
// fsdp → fsdp (FSDP1) and torchtitan (FSDP2 with TP/PP/CP); all → every one of those.
std::vector<Framework> FrameworksOf(Family f);
// The space a framework belongs to (megatron-deepspeed and deepspeed → deepspeed).
Family FamilyOf(Framework f);

// kTimeToTrain: the expected wall time to train a token budget, failures and
// checkpoints included (planner/goodput.h); the search keeps its candidates by
// step time as kTime does, and RankForTrust with the job re-ranks them.
enum class Objective : uint8_t { kTime = 0, kTokensPerS, kMfu, kMemory, kTimeToTrain };
// "time" | "tokens_per_s" | "mfu" | "memory" | "time-to-train"
const char* ObjectiveName(Objective o);
Result<Objective> ParseObjective(const std::string& s);

// Pinned fields: key = any config key (as in --config: tp, pp, vpp, dp, gx, gy,
// gz, gdata, cp, cp_kind, sp, zero, distributed_optimizer, qwz, hpz, qgz,
// offload_optimizer, offload_param, offload_activation_layers, cuda_graphs, mbs,
// recompute, first_stage_layers, last_stage_layers, pp_embedding_layers,
// pp_loss_layers, oar, ors, oag, overlap_grad_reduce, overlap_param_gather,
// tp_comm_overlap, overlap_p2p, placement, ep, etp, moe_dispatcher,
// moe_a2a_overlap), value as in --config; also uneven_pp (false: only
// pipelines whose stages hold equal layer counts).
using FixedFields = std::vector<std::pair<std::string, std::string>>;
// Checks keys and values; errors name the bad piece.
Status ValidateFixed(const FixedFields& fixed);
// Pins the search never offers for `model`, as an error naming the pin and
// why: recompute modules the model does not have (mla_up_proj without MLA,
// the MoE modules on a dense model); on a mixture-of-experts model ZeRO-3 and
// host offload, whose handling of the experts is not priced (torchtitan's
// FSDP2 over gz is).
Status CheckFixedForModel(const FixedFields& fixed, const ModelSpec& model);

struct SearchOptions {
  Family family = Family::kAll;
  Objective objective = Objective::kTime;
  int top_k = 10;
  FixedFields fixed;
  bool keep_pareto = false;  // time vs memory-per-GPU front among fitting configs
  int max_mbs = 64;         // largest micro-batch tried
  // When set (>= 0): count fitting candidates whose objective beats this
  // iteration time (for `plan --explain`: the rank of a given config).
  double count_faster_than_s = -1;
  // Memory only (for `paratune capacity`): fitting candidates get their memory
  // breakdown and no time; ranked by memory. Much cheaper than the full cost.
  bool memory_only = false;
  // Lossy collectives (ZeRO++ qwZ int8 weights, qgZ int4 gradients) change the
  // numerics of training: offered only when asked for (--allow-lossy).
  bool allow_lossy = false;
  // The run beyond one step (token budget, filesystem, failures, price): with
  // objective kTimeToTrain, or whenever goodput.enabled(), the plans document
  // gives each candidate its checkpoint interval, effective fraction, time to
  // train and cost (planner/goodput.h).
  GoodputOptions goodput;
};

struct Candidate {
  ParallelConfig config;
  Prediction prediction;
  Framework framework = Framework::kMegatron;  // the stack that runs it (and costed it)
};

struct SearchResult {
  std::vector<Candidate> top;     // best first, at most top_k, fitting configs only
  // Best first: every fitting candidate the ranked rows of a plan need
  // (RankForTrust with top_k rows), whatever top_k is: the candidates of the
  // first top_k distinct predictions (SamePrediction), each with every
  // configuration that shares its prediction, and every candidate within the
  // widest uncertainty band of the best. `top` is its first top_k entries.
  std::vector<Candidate> pool;
  std::vector<Candidate> pareto;  // by memory ascending (time descending)
  // The fastest fitting configuration the framework's start-up rules forbid
  // (framework preset `rules`), when one beats the K-th ranked: at most one.
  std::vector<Candidate> forbidden;
  int64_t evaluated = 0;          // configurations enumerated
  int64_t feasible = 0;           // passed the rules and fit in memory
  std::array<int64_t, kNumReasons> rejected{};  // by Reason
  int64_t faster = 0;             // fitting candidates faster than count_faster_than_s
};

// Whether two candidates are one row of a plan: the same framework, iteration
// time and memory per GPU (to 1e-9 relative), so nothing tells them apart.
bool SamePrediction(const Candidate& a, const Candidate& b);

class Search {
 public:
  // Searches the configurations each model's framework can express, costed by
  // that model. REQUIRES: the models outlive the Search, share the job (model,
  // training but for the framework, cluster, GPUs) and have distinct
  // frameworks; options validated (ValidateFixed).
  Search(std::vector<const CostModel*> models, SearchOptions options);
  // One framework: the model's.
  Search(const CostModel& cm, SearchOptions options) : Search(std::vector<const CostModel*>{&cm}, std::move(options)) {}

  int num_shards() const { return static_cast<int>(outer_.size()); }
  // Searches one shard. Thread-safe: shards may run concurrently.
  SearchResult RunShard(int shard) const;
  // Merges shard results (any order) into one, deterministically.
  SearchResult Merge(std::vector<SearchResult> parts) const;
  // Runs every shard in the calling thread.
  SearchResult RunAll() const;

  // True when `a` ranks before `b` under the objective (ties: canonical order).
  bool Better(const Candidate& a, const Candidate& b) const;
  // Whether `c` lies in the space of some searched framework and satisfies the
  // pinned fields.
  bool InSpace(const ParallelConfig& c) const;
  // The searched model for framework f, or nullptr.
  const CostModel* ModelFor(Framework f) const;

 private:
  struct Outer {  // one tuple of degrees for one framework: the unit of sharding
    int model;     // index into models_
    int gx, gy, gz, gdata, pp, cp;
    // Sets c's degrees to this tuple's.
    void ApplyTo(ParallelConfig* c) const {
      c->gx = gx;
      c->gy = gy;
      c->gz = gz;
      c->gdata = gdata;
      c->pp = pp;
      c->cp = cp;
    }
  };
  void Enumerate(int model);
  bool Allowed(const char* key, int value) const;
  bool AllowedPlacement(const Placement& p) const;
  bool InSpaceOf(int model, const ParallelConfig& c) const;
  // Whether c holds the pinned values of keys the enumeration does not choose.
  bool MatchesGenericPins(const ParallelConfig& c) const;

  // Lowers the shared bound to `t` (the keep limit some shard holds).
  void LowerBound(double t) const;
  // Sorts `pool` best first and drops every candidate the ranking cannot need
  // (SearchResult::pool). Returns the keep limit: no candidate of a larger
  // iteration time is needed (infinity while fewer than top_k rows are held,
  // and for the memory objective, which does not rank by time).
  double Trim(std::vector<Candidate>* pool) const;

  std::vector<const CostModel*> models_;
  SearchOptions options_;
  // The smallest keep limit any shard has seen (Trim): a configuration whose
  // time exceeds it is slower than K distinct predictions and outside the
  // band of a faster one, so no ranking needs it. Shared by concurrent
  // shards; pruning with it is exact, results do not depend on thread timing.
  mutable std::atomic<double> bound_{std::numeric_limits<double>::infinity()};
  // The union of the fronts of finished shards, as (memory GiB, time s) sorted
  // by memory: a candidate strictly slower than a point with no more memory is
  // not on the final front. Guarded by front_mu_.
  mutable std::mutex front_mu_;
  mutable std::vector<std::pair<double, double>> front_;
  std::vector<Outer> outer_;
  int pinned_first_ = 0, pinned_last_ = 0;  // first/last_stage_layers pins (0: none)
  std::vector<std::pair<std::string, std::string>> generic_pins_;  // key, JSON text
  std::vector<std::vector<Placement>> placements_;  // per model
};

// The longest sequence some configuration fits in memory (`paratune
// capacity`, planner/seeds.h). `fits(seq, unlimited_host, best)` answers
// whether any configuration fits at `seq` tokens (with host memory unlimited
// when asked: that is how host memory is found to bind) and sets `best` to
// one that does. Doubles from `start` to `max_seq` (every doubling: FPDT's
// offloaded chunks let a longer sequence fit where a shorter one does not),
// bisects in 1024-token steps, then steps on by whole FPDT chunks
// (`fpdt_chunk` tokens) when the fitting configuration runs FPDT. Errors of
// `fits` are returned as they are.
struct LongestSequence {
  int64_t max_seq = 0;        // 0: nothing fits at `start`
  int64_t first_failing = 0;  // the shortest length tried past max_seq that fails; 0 = capped
  Candidate at_max;           // a configuration that fits at max_seq
  // What stops a longer sequence: "host_memory", "gpu_memory", or "max_seq"
  // (it fits at the cap).
  std::string binding;
};
using FitsAt = std::function<Result<bool>(int64_t seq, bool unlimited_host, Candidate* best)>;
Result<LongestSequence> FindLongestSequence(const FitsAt& fits, int64_t start, int64_t max_seq,
                                            int64_t fpdt_chunk);

}  // namespace paratune::planner
