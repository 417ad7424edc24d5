// planner/search.h: exhaustive search of the configuration space (cost-model.md
// §1) for one job: enumerate → rules → memory → full cost → top-K and Pareto.
// The space is restricted to what a framework family supports (--space) and
// any field can be pinned (--fix). Work is split into shards (ranges of the
// outer degree tuples) so callers can run them on threads; each shard keeps a
// bounded top-K heap and a Pareto set, so memory stays bounded whatever the
// space size. Pure and deterministic: ties break on the canonical config order.
#pragma once

#include <array>
#include <atomic>
#include <limits>
#include <mutex>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "planner/cost_model.h"

namespace paratune::planner {

enum class Family : uint8_t { kAll = 0, kMegatron, kDeepSpeed, kAxonn, kFsdp };
const char* FamilyName(Family f);  // "all" | "megatron" | "deepspeed" | "axonn" | "fsdp"
Result<Family> ParseFamily(const std::string& s);

enum class Objective : uint8_t { kTime = 0, kTokensPerS, kMfu, kMemory };
const char* ObjectiveName(Objective o);  // "time" | "tokens_per_s" | "mfu" | "memory"
Result<Objective> ParseObjective(const std::string& s);

// Pinned fields: key = a config key (tp, pp, vpp, dp, gx, gy, gz, gdata, cp,
// cp_kind, sp, zero, distributed_optimizer, qwz, hpz, qgz, mbs, recompute, oar,
// ors, oag, overlap_grad_reduce, overlap_param_gather, tp_comm_overlap,
// overlap_p2p, placement), value as in --config.
using FixedFields = std::vector<std::pair<std::string, std::string>>;
// Checks keys and values; errors name the bad piece.
Status ValidateFixed(const FixedFields& fixed);

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
};

struct Candidate {
  ParallelConfig config;
  Prediction prediction;
};

struct SearchResult {
  std::vector<Candidate> top;     // best first, at most top_k, fitting configs only
  std::vector<Candidate> pareto;  // by memory ascending (time descending)
  int64_t evaluated = 0;          // configurations enumerated
  int64_t feasible = 0;           // passed the rules and fit in memory
  std::array<int64_t, kNumReasons> rejected{};  // by Reason
  int64_t faster = 0;             // fitting candidates faster than count_faster_than_s
};

class Search {
 public:
  // REQUIRES: `cm` outlives the Search; options validated (ValidateFixed).
  Search(const CostModel& cm, SearchOptions options);

  int num_shards() const { return static_cast<int>(outer_.size()); }
  // Searches one shard. Thread-safe: shards may run concurrently.
  SearchResult RunShard(int shard) const;
  // Merges shard results (any order) into one, deterministically.
  SearchResult Merge(std::vector<SearchResult> parts) const;
  // Runs every shard in the calling thread.
  SearchResult RunAll() const;

  // True when `a` ranks before `b` under the objective (ties: canonical order).
  bool Better(const Candidate& a, const Candidate& b) const;
  // Whether `c` lies in the family's space and satisfies the pinned fields.
  bool InSpace(const ParallelConfig& c) const;

 private:
  struct Outer {  // one tuple of degrees: the unit of sharding
    int gx, gy, gz, gdata, pp, cp;
  };
  void Enumerate();
  bool Allowed(const char* key, int value) const;
  bool AllowedPlacement(const Placement& p) const;

  // Lowers the shared bound to `t` (the K-th best time some shard holds).
  void LowerBound(double t) const;

  const CostModel& cm_;
  SearchOptions options_;
  // The smallest K-th best iteration time any shard has seen: a configuration
  // whose time exceeds it is worse than K others, so it cannot be in the top K.
  // Shared by concurrent shards; pruning with it is exact, results do not
  // depend on thread timing.
  mutable std::atomic<double> bound_{std::numeric_limits<double>::infinity()};
  // The union of the fronts of finished shards, as (memory GiB, time s) sorted
  // by memory: a candidate strictly slower than a point with no more memory is
  // not on the final front. Guarded by front_mu_.
  mutable std::mutex front_mu_;
  mutable std::vector<std::pair<double, double>> front_;
  std::vector<Outer> outer_;
  std::vector<Placement> placements_;
};

}  // namespace paratune::planner
