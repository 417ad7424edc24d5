#include "planner/plans.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>

#include "planner/network_request.h"

namespace paratune::planner {
namespace {

// A row's run to the token budget (planner/goodput.h), keys with their units.
OrderedJson GoodputJson(const Goodput& g) {
  const CheckpointEstimate& ck = g.checkpoint;
  OrderedJson c;
  c["format"] = CheckpointFormatName(ck.format);
  c["params"] = ck.params;
  c["bytes_per_param"] = ck.bytes_per_param;
  c["total_GB"] = ck.total_bytes / 1e9;
  c["weights_GB"] = ck.weights_bytes / 1e9;
  c["max_rank_GB"] = ck.max_rank_bytes / 1e9;
  c["max_node_GB"] = ck.max_node_bytes / 1e9;
  c["held_rank_GB"] = ck.held_rank_bytes / 1e9;
  c["write_s"] = ck.write_s;
  c["write_bound"] = ck.write_node_bound ? "node" : "filesystem";
  c["async"] = ck.async;
  c["async_one_step"] = ck.async_one_step;
  c["blocking_s"] = ck.blocking_s;
  c["load_s"] = ck.load_s;
  OrderedJson j;
  j["checkpoint"] = c;
  j["job_mtbf_h"] = std::isfinite(g.job_mtbf_s) ? OrderedJson(g.job_mtbf_s / 3600) : OrderedJson();
  j["restart_s"] = g.restart_s;
  j["interval_young_s"] =
      std::isfinite(g.interval_young_s) ? OrderedJson(g.interval_young_s) : OrderedJson();
  j["interval_s"] = g.interval_s;
  j["interval_bound"] = g.interval_bound;
  j["interval_steps"] = g.interval_steps;
  j["effective_fraction"] = g.effective_fraction;
  j["steps"] = g.steps;
  j["compute_days"] = g.compute_s / 86400;
  j["time_to_train_days"] = g.time_to_train_s / 86400;
  j["pessimistic_time_to_train_days"] = g.pessimistic_time_to_train_s / 86400;
  j["gpu_hours"] = g.gpu_hours;
  j["cost"] = g.cost > 0 ? OrderedJson(g.cost) : OrderedJson();
  return j;
}

// What every row's goodput assumed (the plans document's `goodput_inputs`).
OrderedJson GoodputInputsJson(const GoodputOptions& o) {
  OrderedJson j;
  j["tokens"] = o.tokens;
  j["fs_GBps"] = o.fs_GBps;
  j["fs_node_GBps"] = o.fs_node_GBps > 0 ? OrderedJson(o.fs_node_GBps) : OrderedJson();
  j["failures_per_gpu_hour"] = o.failures_per_gpu_hour;
  j["failures_default"] = o.failures_per_gpu_hour == kDefaultFailuresPerGpuHour;
  j["restart_s"] = o.restart_s;
  j["restart_assumed"] = o.restart_s == kDefaultRestartS;
  j["min_interval_s"] = o.min_interval_s;
  j["min_interval_assumed"] = o.min_interval_s == kDefaultMinCheckpointIntervalS;
  j["repair_s"] = o.repair_s;
  j["repair_assumed"] = o.repair_s == kDefaultRepairS;
  j["save"] = o.save == CheckpointSave::kSync ? "sync" : "auto";
  j["gpu_hour_price"] = o.gpu_hour_price > 0 ? OrderedJson(o.gpu_hour_price) : OrderedJson();
  return j;
}

OrderedJson CandidateJson(int rank, const RankedPlan& r, const CostModel& cm) {
  const Candidate& c = r.best;
  OrderedJson j;
  j["rank"] = rank;
  j["framework"] = FrameworkName(c.framework);
  j["config"] = ConfigToJson(c.config);
  j["config_string"] = ConfigText(c.framework, c.config);
  j["within_band"] = r.within_band;
  j["complexity"] = r.complexity;
  // Why this row ranks above a faster one; null when no row below is faster.
  j["rank_note"] = r.rank_note.empty() ? OrderedJson(nullptr) : OrderedJson(r.rank_note);
  OrderedJson alts = OrderedJson::array();
  for (const ParallelConfig& a : r.alternatives) alts.push_back(ConfigText(c.framework, a));
  j["alternatives"] = alts;
  j["prediction"] = PredictionFields(c.prediction, cm);
  if (r.goodput) j["goodput"] = GoodputJson(*r.goodput);
  return j;
}

// A candidate in brief, as the pareto front and the faster-if-allowed note
// list it: framework, configuration, time, throughput and reserved memory.
OrderedJson CandidateBrief(const Candidate& c) {
  OrderedJson j;
  j["framework"] = FrameworkName(c.framework);
  j["config_string"] = ConfigText(c.framework, c.config);
  j["config"] = ConfigToJson(c.config);
  j["iteration_time_s"] = c.prediction.iteration_time_s;
  j["tokens_per_s"] = c.prediction.tokens_per_s;
  j["memory_GiB"] = c.prediction.memory.reserved_GiB;
  return j;
}

OrderedJson JobJson(const Job& job) {
  OrderedJson j;
  j["model"] = OrderedJson::parse(ModelSpecToJson(job.model).dump());
  j["cluster"] = OrderedJson::parse(topology::ClusterSpecToJson(job.cluster).dump());
  j["gpus"] = job.gpus;
  j["training"] = TrainingToJson(job.training);
  return j;
}

}  // namespace

std::vector<const CostModel*> SpaceModels::Pointers() const {
  std::vector<const CostModel*> out;
  for (const auto& m : models) out.push_back(m.get());
  return out;
}

Result<SpaceModels> ModelsForSpace(const Job& job, Family family, bool family_named,
                                   bool framework_named) {
  std::vector<Framework> frameworks = FrameworksOf(family);
  if (framework_named) {
    const Framework f = job.training.framework;
    if (family_named && family != Family::kAll && FamilyOf(f) != family) {
      return Status::InvalidArgument(std::string("/training/framework: ") + FrameworkName(f) +
                                     " runs the " + FamilyName(FamilyOf(f)) + " space, not " +
                                     FamilyName(family));
    }
    frameworks = {f};
  }
  SpaceModels out;
  for (Framework f : frameworks) {
    TrainingSpec t = job.training;
    t.framework = f;
    t.compile = t.compile && FrameworkPreset(f).support.compile;
    out.models.push_back(std::make_unique<CostModel>(job.model, t, job.cluster, job.gpus));
  }
  return out;
}

std::vector<ComplexityPart> ComplexityParts(const ParallelConfig& c, const FrameworkSpec& fw) {
  std::vector<ComplexityPart> parts;
  auto add = [&parts](bool on, const char* name, int points = 1) {
    if (on) parts.push_back({name, points});
  };
  add(c.gx > 1, "gx");
  add(c.gy > 1, c.gx > 1 ? "gy" : "tp");  // ConfigText's names: tp when the grid is 1D
  add(c.gz > 1, "gz");
  add(c.pp > 1, "pp");
  add(c.cp > 1, "cp");
  add(c.vpp > 1, "interleaving");
  add(c.zero > 0, "ZeRO", c.zero);
  add(c.qwz, "qwZ");
  add(c.hpz, "hpZ");
  add(c.qgz, "qgZ");
  add(c.first_stage_layers > 0 || c.last_stage_layers > 0 || c.pp_embedding_layers > 0 ||
          c.pp_loss_layers > 0,
      "uneven stages");
  add(!fw.support.placements.empty() && c.pp > 1 &&
          PlacementToString(c.placement) != fw.support.placements.front(),
      "placement");
  return parts;
}

int Complexity(const ParallelConfig& c, const FrameworkSpec& fw) {
  int n = 0;
  for (const ComplexityPart& p : ComplexityParts(c, fw)) n += p.points;
  return n;
}

namespace {

std::string PartLabel(const std::string& name, int points) {
  return name == "ZeRO" ? "ZeRO-" + std::to_string(points) : name;
}

// What the simpler configuration `a` leaves out of `b`, in ComplexityParts'
// terms: "no cp, no interleaving", "ZeRO-1 not ZeRO-3", and what it has that
// `b` lacks ("has pp").
std::string SimplerBecause(const RankedPlan& a, const RankedPlan& b) {
  const std::vector<ComplexityPart> pa = ComplexityParts(a.best.config, FrameworkPreset(a.best.framework));
  const std::vector<ComplexityPart> pb = ComplexityParts(b.best.config, FrameworkPreset(b.best.framework));
  auto points = [](const std::vector<ComplexityPart>& parts, const std::string& name) {
    for (const ComplexityPart& p : parts) {
      if (p.name == name) return p.points;
    }
    return 0;
  };
  std::vector<std::string> less, more;
  for (const ComplexityPart& p : pb) {
    const int mine = points(pa, p.name);
    if (mine == 0) less.push_back("no " + PartLabel(p.name, p.points));
    else if (mine < p.points) less.push_back(PartLabel(p.name, mine) + " not " + PartLabel(p.name, p.points));
  }
  for (const ComplexityPart& p : pa) {
    if (points(pb, p.name) == 0) more.push_back("has " + PartLabel(p.name, p.points));
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string s = join(less);
  if (!more.empty()) s += (s.empty() ? "" : "; ") + join(more);
  return s;
}

std::string Percent(double fraction, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, 100 * fraction);
  return buf;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// Why row `a` ranks above the faster row `b` (rank `b_rank`): the objective
// (memory), the band's preference for the simpler configuration, or the
// pessimistic edge (a narrower band, or b's MFU above the published ceiling).
// `edge`: the best pessimistic edge, under which the leaders' point times lie.
std::string RankNote(const RankedPlan& a, const RankedPlan& b, int b_rank, Objective objective,
                     double edge) {
  const Prediction &pa = a.best.prediction, &pb = b.best.prediction;
  const std::string other = "#" + std::to_string(b_rank);
  const std::string slower = Percent(pa.iteration_time_s / pb.iteration_time_s - 1, 1) + " % slower";
  if (objective == Objective::kMemory) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.1f vs %.1f GiB reserved); ", pa.memory.reserved_GiB,
                  pb.memory.reserved_GiB);
    return "less memory than " + other + buf + slower;
  }
  if (a.within_band && b.within_band && a.complexity < b.complexity) {
    return "simpler than " + other + " (" + SimplerBecause(a, b) + "); " + slower +
           ", both in the leaders' band (point times under the best pessimistic edge, " + Seconds(edge) + " s)";
  }
  std::string why = "pessimistic edge " + Seconds(pa.pessimistic_time_s) + " s vs " + other + "'s " +
                    Seconds(pb.pessimistic_time_s) + " s";
  if (pb.above_published_mfu) {
    why += " (" + other + " is above the GPU's published MFU ceiling, ranked as if at it)";
  } else if (pa.uncertainty != pb.uncertainty) {
    why += " (±" + Percent(pa.uncertainty, 0) + " % vs ±" + Percent(pb.uncertainty, 0) + " %)";
  }
  return why + "; " + slower;
}

// Fills each row's faster_rank, faster_time_s and rank_note: the fastest
// row ranked below it, when that row's point prediction is shorter.
void NoteFasterRowsBelow(std::vector<RankedPlan>& rows, Objective objective, double edge) {
  size_t fastest = rows.size();  // the fastest row below i
  for (size_t i = rows.size(); i-- > 0;) {
    if (fastest < rows.size() && rows[fastest].best.prediction.iteration_time_s <
                                     rows[i].best.prediction.iteration_time_s) {
      RankedPlan& r = rows[i];
      r.faster_rank = static_cast<int>(fastest) + 1;
      r.faster_time_s = rows[fastest].best.prediction.iteration_time_s;
      r.rank_note = RankNote(r, rows[fastest], r.faster_rank, objective, edge);
    }
    if (fastest == rows.size() || rows[i].best.prediction.iteration_time_s <=
                                      rows[fastest].best.prediction.iteration_time_s) {
      fastest = i;
    }
  }
}

}  // namespace

std::vector<RankedPlan> RankForTrust(const std::vector<Candidate>& pool, Objective objective,
                                     int max_rows) {
  std::vector<RankedPlan> rows;
  for (const Candidate& c : pool) {
    if (!rows.empty() && SamePrediction(rows.back().best, c)) {
      rows.back().alternatives.push_back(c.config);
      continue;
    }
    RankedPlan r;
    r.best = c;
    r.complexity = Complexity(c.config, FrameworkPreset(c.framework));
    rows.push_back(std::move(r));
  }
  auto truncated = [&rows, max_rows]() {
    if (static_cast<int>(rows.size()) > max_rows)
      rows.resize(static_cast<size_t>(std::max(max_rows, 0)));
    return std::move(rows);
  };
  if (rows.empty()) return truncated();
  if (objective == Objective::kMemory) {
    NoteFasterRowsBelow(rows, objective, 0);
    return truncated();
  }
  // The rows arrive ranked by their pessimistic edge; the leaders are those
  // whose point prediction lies inside the first row's band.
  const double edge = rows.front().best.prediction.pessimistic_time_s;
  size_t lead = 0;
  while (lead < rows.size() && rows[lead].best.prediction.iteration_time_s <= edge) {
    rows[lead++].within_band = true;
  }
  std::stable_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(lead),
                   [](const RankedPlan& a, const RankedPlan& b) { return a.complexity < b.complexity; });
  // Notes are made before the cut, so a row names the faster row's rank in
  // the whole ranking whatever `max_rows` is.
  NoteFasterRowsBelow(rows, objective, edge);
  return truncated();
}

namespace {

std::string Days(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s / 86400);
  return buf;
}

// Why row `a` ranks above row `b` (rank `b_rank`), whose expected time to
// train is shorter: the leaders' preference for the simpler configuration, or
// the pessimistic time to train. `edge`: the best pessimistic time to train.
std::string TimeToTrainNote(const RankedPlan& a, const RankedPlan& b, int b_rank, double edge) {
  const Goodput &ga = *a.goodput, &gb = *b.goodput;
  const std::string other = "#" + std::to_string(b_rank);
  const std::string longer =
      Percent(ga.time_to_train_s / gb.time_to_train_s - 1, 1) + " % longer to train";
  if (a.within_band && b.within_band && a.complexity < b.complexity) {
    return "simpler than " + other + " (" + SimplerBecause(a, b) + "); " + longer +
           ", both in the leaders' band (times to train under the best pessimistic one, " +
           Days(edge) + " days)";
  }
  return "pessimistic time to train " + Days(ga.pessimistic_time_to_train_s) + " vs " + other +
         "'s " + Days(gb.pessimistic_time_to_train_s) + " days; " + longer;
}

// Each row's rank_note when a row ranked below it trains sooner (point
// times). faster_rank and faster_time_s keep their step-time meaning and are
// left unset: a row quicker to train need not have the shorter step.
void NoteQuickerToTrainBelow(std::vector<RankedPlan>& rows, double edge) {
  size_t quickest = rows.size();
  for (size_t i = rows.size(); i-- > 0;) {
    if (quickest < rows.size() &&
        rows[quickest].goodput->time_to_train_s < rows[i].goodput->time_to_train_s) {
      rows[i].rank_note =
          TimeToTrainNote(rows[i], rows[quickest], static_cast<int>(quickest) + 1, edge);
    }
    if (quickest == rows.size() ||
        rows[i].goodput->time_to_train_s <= rows[quickest].goodput->time_to_train_s) {
      quickest = i;
    }
  }
}

// Orders rows (each with its goodput) as RankForTrust orders step times: by
// the pessimistic time to train; the leaders, whose point time to train lies
// under the first row's pessimistic one, simplest first.
void RankByTimeToTrain(std::vector<RankedPlan>& rows) {
  for (RankedPlan& r : rows) {
    r.within_band = false;
    r.faster_rank = 0;
    r.faster_time_s = 0;
    r.rank_note.clear();
  }
  std::stable_sort(rows.begin(), rows.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.goodput->pessimistic_time_to_train_s < b.goodput->pessimistic_time_to_train_s;
  });
  const double edge = rows.front().goodput->pessimistic_time_to_train_s;
  size_t lead = 0;
  while (lead < rows.size() && rows[lead].goodput->time_to_train_s <= edge) {
    rows[lead++].within_band = true;
  }
  std::stable_sort(
      rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(lead),
      [](const RankedPlan& a, const RankedPlan& b) { return a.complexity < b.complexity; });
  NoteQuickerToTrainBelow(rows, edge);
}

}  // namespace

std::vector<RankedPlan> RankForTrust(const std::vector<Candidate>& pool, const Job& job,
                                     const SearchOptions& options, int max_rows) {
  if (!options.goodput.enabled()) return RankForTrust(pool, options.objective, max_rows);
  const bool by_goodput = options.objective == Objective::kTimeToTrain;
  // By time to train the whole pool is ranked before the cut, as by time.
  std::vector<RankedPlan> rows = RankForTrust(
      pool, by_goodput ? Objective::kTime : options.objective,
      by_goodput ? static_cast<int>(pool.size()) : max_rows);
  for (RankedPlan& r : rows) {
    r.goodput = GoodputOf(job, r.best.framework, r.best.config, r.best.prediction, options.goodput);
  }
  if (by_goodput && !rows.empty()) RankByTimeToTrain(rows);
  if (static_cast<int>(rows.size()) > max_rows) {
    rows.resize(static_cast<size_t>(std::max(max_rows, 0)));
  }
  return rows;
}

const Candidate* FasterIfAllowed(const SearchResult& r) {
  if (r.forbidden.empty()) return nullptr;
  const Candidate& f = r.forbidden.front();
  // `top` is a prefix of `pool`: the pool is every configuration kept.
  for (const Candidate& c : r.pool) {
    if (c.prediction.iteration_time_s <= f.prediction.iteration_time_s) return nullptr;
  }
  return &f;
}

bool MemoryBinds(const SearchResult& r) {
  const int64_t mem = std::max(r.rejected[static_cast<int>(Reason::kOutOfMemory)],
                               r.rejected[static_cast<int>(Reason::kOutOfHostMemory)]);
  for (int i = 1; i < kNumReasons; ++i) {
    if (r.rejected[i] > mem) return false;
  }
  return mem > 0;
}

int64_t MostGpusToTry(const Job& job, int64_t max_gpus) {
  int64_t limit = std::min(max_gpus, int64_t{job.gpus} << 10);
  if (job.cluster.max_nodes > 0) {
    limit = std::min(limit, int64_t{job.cluster.max_nodes} * job.cluster.gpus_per_node);
  }
  return limit;
}

Result<std::optional<FitsFrom>> FewestGpusThatFit(const Job& job, SearchOptions options,
                                                  bool family_named, bool framework_named,
                                                  int64_t max_gpus, const SearchRun& run) {
  options.top_k = 1;
  options.keep_pareto = false;
  const int64_t limit = MostGpusToTry(job, max_gpus);
  for (int64_t g = int64_t{job.gpus} * 2; g <= limit; g *= 2) {
    Job bigger = job;
    bigger.gpus = static_cast<int>(g);
    PT_ASSIGN_OR_RETURN(SpaceModels space,
                        ModelsForSpace(bigger, options.family, family_named, framework_named));
    PT_ASSIGN_OR_RETURN(const SearchResult r, run(Search(space.Pointers(), options)));
    if (!r.top.empty()) {
      return std::optional<FitsFrom>(
          FitsFrom{static_cast<int>(g), RankForTrust(r.pool, bigger, options, 1).front().best});
    }
  }
  return std::optional<FitsFrom>();
}

std::vector<std::string> LayoutChanges(const Candidate& from, const Candidate& to) {
  std::vector<std::string> out;
  if (from.framework != to.framework) {
    out.push_back(std::string("framework ") + FrameworkName(from.framework) + " -> " +
                  FrameworkName(to.framework));
  }
  const OrderedJson a = ConfigToJson(from.config), b = ConfigToJson(to.config);
  // A framework knob that follows its policy on both sides (p2p overlap with
  // interleaving) changes with the layout, not on its own: not listed.
  const OrderedJson policy_a = ConfigToJson(WithFrameworkPolicy(from.framework, from.config));
  const OrderedJson policy_b = ConfigToJson(WithFrameworkPolicy(to.framework, to.config));
  auto follows_policy = [&](const std::string& key) {
    const bool knob = key == "moe_a2a_overlap" ||
                      std::any_of(std::begin(kOverlapSwitches), std::end(kOverlapSwitches),
                                  [&](const OverlapSwitch& sw) { return key == sw.key; });
    return knob && a.contains(key) && b.contains(key) && a[key] == policy_a[key] &&
           b[key] == policy_b[key];
  };
  auto text = [](const OrderedJson& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const auto& [key, value] : b.items()) {
    if (key == "dp" || key == "edp") continue;  // the data width follows the GPU count
    if (follows_policy(key)) continue;
    const OrderedJson before = a.contains(key) ? a[key] : OrderedJson();
    if (before != value) out.push_back(key + " " + text(before) + " -> " + text(value));
  }
  return out;
}

namespace {

// The previous count's layout at `sec`'s GPU count: its configuration with the
// data-parallel width the count leaves (nullopt when the count is not a
// multiple of one replica's GPUs).
std::optional<ParallelConfig> LayoutAt(const ParallelConfig& layout, int64_t gpus) {
  const int64_t replica = layout.world() / std::max(1, layout.gdata);
  if (replica <= 0 || gpus % replica != 0) return std::nullopt;
  ParallelConfig c = layout;
  c.gdata = static_cast<int>(gpus / replica);
  return c;
}

// Whether two candidates split the model the same way: framework, degrees
// other than the data width, pipeline schedule and stage split, expert
// dispatch and ZeRO stage. The micro-batch, recompute, offloads and overlaps
// follow memory and the count, so a kept layout takes the count's best of them.
bool SameDegrees(const Candidate& a, const Candidate& b) {
  const ParallelConfig& x = a.config;
  const ParallelConfig& y = b.config;
  return a.framework == b.framework && x.gx == y.gx && x.gy == y.gy && x.gz == y.gz &&
         x.pp == y.pp && x.vpp == y.vpp && x.pp_schedule == y.pp_schedule &&
         x.first_stage_layers == y.first_stage_layers && x.last_stage_layers == y.last_stage_layers &&
         x.pp_embedding_layers == y.pp_embedding_layers && x.pp_loss_layers == y.pp_loss_layers &&
         x.cp == y.cp && x.cp_kind == y.cp_kind && x.sp == y.sp && x.zero == y.zero &&
         x.ep == y.ep && x.etp == y.etp && x.moe_dispatcher == y.moe_dispatcher;
}

// What a sweep compares its counts' picks by: the step time, or under
// --objective time-to-train the expected time to train the budget. `point`
// is the estimate, `pessimistic` the slow end of its band.
struct PickClock {
  double point = 0;
  double pessimistic = 0;
};

bool ByTimeToTrain(const SearchOptions& o) {
  return o.objective == Objective::kTimeToTrain && o.goodput.enabled();
}

PickClock ClockOf(const Candidate& c, const Job& job, const SearchOptions& o) {
  if (!ByTimeToTrain(o)) return {c.prediction.iteration_time_s, c.prediction.pessimistic_time_s};
  const Goodput g = GoodputOf(job, c.framework, c.config, c.prediction, o.goodput);
  return {g.time_to_train_s, g.pessimistic_time_to_train_s};
}

// "12.3 % slower here (a vs b s), outside the leaders' band (e s)", in
// seconds per step or in days to train.
std::string SlowerThanPick(PickClock layout, PickClock pick, const SearchOptions& o) {
  const bool days = ByTimeToTrain(o);
  auto shown = [days](double v) { return days ? Days(v) : Seconds(v); };
  const char* unit = days ? " days" : " s";
  return Percent(layout.point / pick.point - 1, 1) + (days ? " % longer to train here (" : " % slower here (") +
         shown(layout.point) + " vs " + shown(pick.point) + unit + "), outside the leaders' band (" +
         shown(pick.pessimistic) + unit + ")";
}

// Why a sweep's count does not keep the previous count's layout, priced by
// the count's own cost model: it does not divide the GPUs, breaks a rule,
// does not fit, or is slower (or, by time to train, longer to train) than the
// count's pick beyond the band.
// `same` is the count's best candidate with the previous degrees, when the
// search kept one (SearchResult::pool holds the band's neighbourhood only).
std::string WhyLayoutLeft(const Candidate& previous, const Candidate* same, const PlanSection& sec,
                          const Candidate& pick, const SearchOptions& o) {
  const PickClock at_pick = ClockOf(pick, sec.job, o);
  if (same != nullptr) {
    return "the previous layout is " + SlowerThanPick(ClockOf(*same, sec.job, o), at_pick, o);
  }
  const std::optional<ParallelConfig> c = LayoutAt(previous.config, sec.job.gpus);
  if (!c) {
    return "the previous layout (" + std::to_string(previous.config.world() / previous.config.gdata) +
           " GPUs per replica) does not divide " + std::to_string(sec.job.gpus) + " GPUs";
  }
  auto models = ModelsForSpace(sec.job, Family::kAll, false, false);
  const CostModel* cm = nullptr;
  if (models.ok()) {
    for (const CostModel* m : models->Pointers()) {
      if (m->training().framework == previous.framework) cm = m;
    }
  }
  if (cm == nullptr) return "the previous layout is not in this count's search space";
  if (Reason r = cm->CheckRules(*c); r != Reason::kOk) {
    return std::string("the previous layout breaks a rule here: ") + ReasonName(r);
  }
  const Prediction p = cm->Predict(*c);
  if (!p.fits) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the previous layout needs %.1f GiB reserved here (%.1f usable)",
                  p.memory.reserved_GiB, p.memory.usable_GiB);
    return buf;
  }
  const Candidate there{*c, p, previous.framework};
  return "the previous layout is " + SlowerThanPick(ClockOf(there, sec.job, o), at_pick, o);
}

}  // namespace

std::vector<std::optional<ScalingPick>> PicksAcrossCounts(const std::vector<PlanSection>& sections,
                                                          const SearchOptions& options) {
  std::vector<std::optional<ScalingPick>> out;
  std::optional<Candidate> previous;
  const bool by_time = options.objective != Objective::kMemory;
  for (const PlanSection& sec : sections) {
    if (sec.result.top.empty()) {
      out.emplace_back();
      continue;
    }
    ScalingPick pick;
    pick.best = RankForTrust(sec.result.pool, sec.job, options, 1).front().best;
    if (previous) {
      pick.first = false;
      // The previous layout among this count's leaders keeps its place: the
      // leaders are the rows whose point estimate (step time, or time to
      // train) lies under the best pessimistic one (RankForTrust), which the
      // model cannot order with confidence.
      // Each candidate's clock once (a time to train walks the job's ranks).
      std::vector<PickClock> clocks;
      clocks.reserve(sec.result.pool.size());
      double edge = std::numeric_limits<double>::infinity();
      for (const Candidate& c : sec.result.pool) {
        clocks.push_back(ClockOf(c, sec.job, options));
        edge = std::min(edge, clocks.back().pessimistic);
      }
      // `same`: the best-ranked candidate with the previous degrees, a leader
      // if one is (the pool keeps every leader).
      const Candidate* same = nullptr;
      bool same_leads = false;
      for (size_t i = 0; i < sec.result.pool.size(); ++i) {
        const Candidate& c = sec.result.pool[i];
        if (!SameDegrees(*previous, c)) continue;
        if (same == nullptr) same = &c;
        if (clocks[i].point <= edge) {
          same = &c;
          same_leads = true;
          break;
        }
      }
      if (same != nullptr && by_time && same_leads && !SameDegrees(*same, pick.best)) {
        const PickClock kept = ClockOf(*same, sec.job, options), best = ClockOf(pick.best, sec.job, options);
        const double slower = kept.point / best.point - 1;
        const bool days = ByTimeToTrain(options);
        pick.why = "keeps the previous count's layout: " +
                   (slower >= 0 ? Percent(slower, 1) + (days ? " % longer to train than" : " % slower than")
                                : Percent(-slower, 1) + (days ? " % quicker to train than" : " % faster than")) +
                   " this count's rank 1 (" + ConfigText(pick.best.framework, pick.best.config) +
                   "), both in the leaders' band";
        pick.best = *same;
        pick.kept = true;
      }
      pick.changed = LayoutChanges(*previous, pick.best);
      if (!pick.changed.empty() && !pick.kept) {
        pick.why = SameDegrees(*previous, pick.best)
                       ? "the same layout; its micro-batch, recompute, offloads and overlaps are "
                         "this count's best for its memory and batch share"
                       : WhyLayoutLeft(*previous, same, sec, pick.best, options);
      }
    }
    previous = pick.best;
    out.push_back(std::move(pick));
  }
  return out;
}

OrderedJson PlansToJson(const std::vector<PlanSection>& sections, const SearchOptions& options) {
  OrderedJson doc;
  doc["schema"] = kPlansSchema;
  if (sections.empty()) return doc;
  // The section described in full: the largest GPU count with a feasible plan.
  size_t main = sections.size() - 1;
  for (size_t i = sections.size(); i-- > 0;) {
    if (!sections[i].result.top.empty()) {
      main = i;
      break;
    }
  }
  const PlanSection& s = sections[main];
  // One cost model per framework among the candidates (PredictionFields reads
  // the training spec from it), built once.
  std::map<Framework, std::unique_ptr<CostModel>> models;
  auto model_for = [&](Framework f) -> const CostModel& {
    auto& m = models[f];
    if (!m) {
      TrainingSpec t = s.job.training;
      t.framework = f;
      m = std::make_unique<CostModel>(s.job.model, t, s.job.cluster, s.job.gpus);
    }
    return *m;
  };
  doc["model"] = s.job.model.name;
  doc["cluster"] = s.job.cluster.name;
  doc["cluster_fingerprint"] = topology::Fingerprint(s.job.cluster);
  if (!s.job.cluster.profile_fingerprint.empty()) doc["profile"] = s.job.cluster.profile_fingerprint;
  doc["gpus"] = s.job.gpus;
  doc["space"] = FamilyName(options.family);
  doc["objective"] = ObjectiveName(options.objective);
  // Without a token budget kTimeToTrain ranks as kTime (RankForTrust).
  if (options.objective == Objective::kTimeToTrain && options.goodput.enabled()) {
    doc["ranked_by"] = kRankedByTimeToTrain;
  } else if (options.objective != Objective::kMemory) {
    doc["ranked_by"] = kRankedBy;
  }
  OrderedJson fixed = OrderedJson::object();
  for (const auto& [k, v] : options.fixed) fixed[k] = v;
  doc["fixed"] = fixed;
  // The job's framework is the winner's: each candidate names its own.
  Job job = s.job;
  const std::vector<RankedPlan> ranked = RankForTrust(s.result.pool, s.job, options, options.top_k);
  if (options.goodput.enabled()) doc["goodput_inputs"] = GoodputInputsJson(options.goodput);
  if (!ranked.empty()) job.training.framework = ranked.front().best.framework;
  doc["job"] = JobJson(job);
  doc["evaluated"] = s.result.evaluated;
  doc["feasible"] = s.result.feasible;
  OrderedJson rejected = OrderedJson::object();
  for (int i = 1; i < kNumReasons; ++i) rejected[ReasonName(static_cast<Reason>(i))] = s.result.rejected[i];
  doc["rejected"] = rejected;
  doc["search_time_s"] = s.search_time_s;
  OrderedJson cands = OrderedJson::array();
  int within = 0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    within += ranked[i].within_band;
    cands.push_back(CandidateJson(static_cast<int>(i) + 1, ranked[i], model_for(ranked[i].best.framework)));
  }
  doc["candidates"] = cands;
  doc["leaders_within_band"] = within;
  // The fastest configuration the framework's start-up rules forbid, when no
  // kept configuration is as fast: said, never ranked.
  if (const Candidate* f = FasterIfAllowed(s.result)) {
    const CostModel& cm = model_for(f->framework);
    std::string why;
    const FrameworkRuleRef* rule = cm.BrokenRule(f->config, &why);
    OrderedJson n = CandidateBrief(*f);
    n["rule"] = rule ? FrameworkRuleName(rule->rule) : "";
    n["why"] = why;
    n["source"] = rule ? rule->source : "";
    n["note"] = std::string("fastest if ") + FrameworkName(f->framework) + " allowed it: " +
                FrameworkName(f->framework) + " refuses it at start-up, so it is not a candidate";
    doc["faster_if_allowed"] = n;
  }
  OrderedJson pareto = OrderedJson::array();
  for (const Candidate& c : s.result.pareto) {
    pareto.push_back(CandidateBrief(c));
  }
  doc["pareto"] = pareto;
  // Nothing fits for lack of memory: where something does.
  if (ranked.empty() && s.fits_from) {
    const Candidate& b = s.fits_from->best;
    OrderedJson f = CandidateBrief(b);
    f["gpus"] = s.fits_from->gpus;
    // With a token budget: what that count's run to it takes and costs.
    if (options.goodput.enabled()) {
      Job there = s.job;
      there.gpus = s.fits_from->gpus;
      f["goodput"] =
          GoodputJson(GoodputOf(there, b.framework, b.config, b.prediction, options.goodput));
    }
    doc["fewest_gpus_that_fit"] = f;
  } else {
    doc["fewest_gpus_that_fit"] = nullptr;
  }
  if (sections.size() > 1) {
    OrderedJson scaling = OrderedJson::array();
    double best_tps = 0;
    const std::vector<std::optional<ScalingPick>> picks = PicksAcrossCounts(sections, options);
    for (size_t i = 0; i < sections.size(); ++i) {
      const PlanSection& sec = sections[i];
      OrderedJson row;
      row["gpus"] = sec.job.gpus;
      row["evaluated"] = sec.result.evaluated;
      row["feasible"] = sec.result.feasible;
      row["search_time_s"] = sec.search_time_s;
      if (!picks[i]) {
        row["best"] = nullptr;
        row["pareto"] = false;
      } else {
        const Candidate& b = picks[i]->best;
        row["framework"] = FrameworkName(b.framework);
        row["config_string"] = ConfigText(b.framework, b.config);
        row["config"] = ConfigToJson(b.config);
        row["iteration_time_s"] = b.prediction.iteration_time_s;
        row["tokens_per_s"] = b.prediction.tokens_per_s;
        row["tokens_per_s_per_gpu"] = b.prediction.tokens_per_s / sec.job.gpus;
        row["mfu"] = b.prediction.mfu;
        if (options.goodput.enabled()) {
          const Goodput g =
              GoodputOf(sec.job, b.framework, b.config, b.prediction, options.goodput);
          row["effective_fraction"] = g.effective_fraction;
          row["time_to_train_days"] = g.time_to_train_s / 86400;
          row["gpu_hours"] = g.gpu_hours;
          row["cost"] = g.cost > 0 ? OrderedJson(g.cost) : OrderedJson();
        }
        // More GPUs are on the front only if they buy more tokens per second.
        row["pareto"] = b.prediction.tokens_per_s > best_tps;
        best_tps = std::max(best_tps, b.prediction.tokens_per_s);
        // What the pick changes from the previous count's (null for the
        // first), and why: the previous layout kept within the band, or what
        // makes it lose here.
        if (picks[i]->first) {
          row["changed"] = nullptr;
        } else {
          row["changed"] = picks[i]->changed;
        }
        row["kept_layout"] = picks[i]->kept;
        row["why"] = picks[i]->why.empty() ? OrderedJson() : OrderedJson(picks[i]->why);
      }
      scaling.push_back(row);
    }
    doc["scaling"] = scaling;
  }
  return doc;
}

Result<Job> JobFromPlans(const Json& plans) {
  if (IsNetworkPlans(plans)) {
    return Status::InvalidArgument(std::string("/schema: ") + kNetworkPlansNotEmitted);
  }
  if (!plans.is_object() || !plans.contains("schema") || !plans["schema"].is_string() ||
      plans["schema"].get<std::string>() != kPlansSchema) {
    return Status::InvalidArgument("/schema: must be \"" + std::string(kPlansSchema) + "\"");
  }
  if (!plans.contains("job")) return Status::InvalidArgument("/job: is required");
  ObjectReader r(plans["job"], "/job");
  PT_ASSIGN_OR_RETURN(Job job, ParseJob(plans["job"], r));
  PT_RETURN_IF_ERROR(r.Finish());
  return job;
}

Result<std::vector<ParallelConfig>> CandidatesFromPlans(const Json& plans) {
  if (!plans.contains("candidates") || !plans["candidates"].is_array()) {
    return Status::InvalidArgument("/candidates: must be an array");
  }
  std::vector<ParallelConfig> out;
  for (size_t i = 0; i < plans["candidates"].size(); ++i) {
    const Json& c = plans["candidates"][i];
    const std::string ptr = "/candidates/" + std::to_string(i) + "/config";
    if (!c.contains("config")) return Status::InvalidArgument(ptr + ": is required");
    PT_ASSIGN_OR_RETURN(ParallelConfig pc, ParseConfig(c["config"], ptr, 0));
    out.push_back(pc);
  }
  return out;
}

}  // namespace paratune::planner
