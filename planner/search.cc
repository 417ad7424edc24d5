// The exhaustive search over the configuration space (planner/search.h):
// enumeration with pruning, ranking by the pessimistic edge, the Pareto front,
// and the merge of per-thread shards. Over 800 lines because RunShard keeps
// the whole loop nest (framework, tensor, pipeline and schedule, context,
// ZeRO, experts, micro-batch) in one function, where each outer loop's pruning
// bound is visible to the loops inside it.
#include "planner/search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <tuple>

#include "common/enum_names.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "planner/cost/internal.h"
#include "planner/moe_sharding.h"
#include "planner/pipeline.h"

namespace paratune::planner {
namespace {

using cost::Divisors;

// By value, in the order of each enum's declaration (search.h).
constexpr const char* kFamilyNames[] = {"all", "megatron", "deepspeed", "axonn", "fsdp"};
constexpr const char* kObjectiveNames[] = {"time", "tokens_per_s", "mfu", "memory",
                                           "time-to-train"};

// ZeRO/optimizer-sharding choices as one small record.
struct ZeroChoice {
  int zero;
  bool dist_opt, qwz, hpz, qgz;
  bool offload_opt, offload_param;  // ZeRO-Offload / Infinity to host memory
};

constexpr const char* kIntKeys[] = {"tp",  "gx", "gy",   "gz",  "dp", "gdata", "pp",
                                    "vpp", "cp", "zero", "mbs", "ep", "etp"};
// Pipeline layout keys the enumeration handles itself (0 allowed).
constexpr const char* kLayoutKeys[] = {"first_stage_layers", "last_stage_layers",
                                       "pp_embedding_layers", "pp_loss_layers"};
constexpr const char* kBoolKeys[] = {"sp",
                                     "distributed_optimizer",
                                     "qwz",
                                     "hpz",
                                     "qgz",
                                     "offload_optimizer",
                                     "offload_param",
                                     "oar",
                                     "ors",
                                     "oag",
                                     "overlap_grad_reduce",
                                     "overlap_param_gather",
                                     "tp_comm_overlap",
                                     "overlap_p2p",
                                     "uneven_pp",
                                     "moe_a2a_overlap",
                                     "cuda_graphs"};

bool IsIn(const char* const* b, const char* const* e, const std::string& k) {
  return std::find_if(b, e, [&](const char* s) { return k == s; }) != e;
}

int BoolValue(const std::string& v) {
  if (v == "true" || v == "on" || v == "yes" || v == "1") return 1;
  if (v == "false" || v == "off" || v == "no" || v == "0") return 0;
  return -1;
}

// Whether a (time, memory) point is dominated by a front sorted by memory
// ascending (times strictly descending).
bool ParetoDominated(const std::vector<Candidate>& front, double t, double mem) {
  auto it = std::upper_bound(front.begin(), front.end(), mem, [](double v, const Candidate& q) {
    return v < q.prediction.memory.reserved_GiB;
  });
  return it != front.begin() && std::prev(it)->prediction.iteration_time_s <= t;
}

// Whether some (memory, time) point of `front` (sorted by memory, times
// descending) has no more memory and a strictly smaller time.
bool StrictlyDominated(const std::vector<std::pair<double, double>>& front, double t, double mem) {
  auto it = std::upper_bound(front.begin(), front.end(), std::make_pair(mem, std::numeric_limits<double>::infinity()));
  return it != front.begin() && std::prev(it)->second < t;
}

// Canonical order for deterministic ties.
auto Key(const ParallelConfig& c) {
  return std::make_tuple(c.pp, c.gx, c.gy, c.cp, c.gz, c.gdata, c.vpp,
                         static_cast<int>(c.pp_schedule), c.first_stage_layers,
                         c.last_stage_layers, c.pp_embedding_layers, c.pp_loss_layers,
                         static_cast<int>(c.cp_kind),
                         c.sp, c.zero, c.distributed_optimizer, c.qwz, c.hpz, c.qgz,
                         c.offload_optimizer, c.offload_param, c.mbs, static_cast<int>(c.recompute),
                         c.recompute_modules,
                         c.placement.order, c.ep, c.etp, static_cast<int>(c.moe_dispatcher));
}

// Whether a pinned search allows `key` = `value` (Search::Allowed).
using AllowedFn = std::function<bool(const char* key, int value)>;

std::vector<CpKind> CpKindChoices(int cp, const FrameworkSupport& fr, const AllowedFn& allowed) {
  std::vector<CpKind> kinds;
  if (cp == 1) {
    kinds.push_back(CpKind::kRing);
  } else {
    if (fr.cp_ring && allowed("cp_kind", 0)) kinds.push_back(CpKind::kRing);
    if (fr.cp_ulysses && allowed("cp_kind", 1)) kinds.push_back(CpKind::kUlysses);
    if (fr.cp_fpdt && allowed("cp_kind", 2)) kinds.push_back(CpKind::kFpdt);
  }
  return kinds;
}

// A pipeline layout the framework builds at some pp (planner/pipeline.h), with
// one interleaving degree that builds it and one schedule that runs it.
struct Pipe {
  PipeLayout layout;
  int vpp;
  PpSchedule schedule;
  // Sets c's layout keys, vpp and schedule to this pipeline.
  void ApplyTo(ParallelConfig* c) const {
    layout.ApplyTo(c);
    c->vpp = vpp;
    c->pp_schedule = schedule;
  }
};

// The pipelines the framework of `cm` builds at `pp` stages, each with the
// interleaving degrees and schedules that build it; pins and uneven_pp filter them.
std::vector<Pipe> PipeChoices(int pp, const CostModel& cm, const FixedFields& fixed,
                              int pinned_first, int pinned_last, const AllowedFn& allowed) {
  const FrameworkSupport& fr = cm.framework().support;
  const ModelSpec& m = cm.model();
  std::vector<Pipe> pipes;
  const bool interleave = pp >= std::max(2, fr.vpp_min_pp) && fr.vpp;
  bool schedule_pinned = false;
  for (const auto& kv : fixed) schedule_pinned = schedule_pinned || kv.first == "pp_schedule";
  // PyTorch's zero-bubble schedules refuse compiled stages (rules.cc).
  const bool zb_h1_runs =
      fr.pp_schedules[static_cast<int>(PpSchedule::kZbH1)] && !cm.training().compile;
  const int max_vpp = (m.layers + 2) / std::max(1, pp);
  for (const LayoutChoice& ch : LayoutChoices(m.layers, pp, fr.pp_split, interleave, max_vpp,
                                              pinned_first, pinned_last)) {
    ParallelConfig probe;
    probe.pp = pp;
    ch.ApplyTo(&probe);
    // uneven_pp=false pins whole, equal stages (Megatron-LM before
    // Megatron-Core 0.9 asserted num_layers % pipeline size == 0).
    const bool uneven = pp > 1 && !SplitLayers(m.layers, probe, fr.pp_split).even;
    if ((uneven && !fr.uneven_pp) || !allowed("uneven_pp", uneven) ||
        !allowed("first_stage_layers", ch.first) || !allowed("last_stage_layers", ch.last) ||
        !allowed("pp_embedding_layers", ch.embedding) || !allowed("pp_loss_layers", ch.loss)) {
      continue;
    }
    for (int v : ch.vpps) {
      if (!allowed("vpp", v)) continue;
      // Each schedule the framework runs on this layout and vpp: 1F1B
      // (interleaved), and where offered the zero-bubble and V schedules
      // (their shapes: planner/pipeline.h).
      for (int si = 0; si < kNumPpSchedules; ++si) {
        const auto sched = static_cast<PpSchedule>(si);
        if (!fr.pp_schedules[si] || !allowed("pp_schedule", si)) continue;
        // DualPipeV places its stages as ZB-V does, with a bubble
        // (pp−1)(f+2b−w)/2 >= ZB-V's and more activations (planner/pipeline.h):
        // the model never ranks it above ZB-V, so it is priced only when pinned.
        if (sched == PpSchedule::kDualPipeV && !schedule_pinned) continue;
        // Interleaved 1F1B and ZB-H1 over the same stages differ only in
        // the bubble, ZB-H1's (f+b−w)/(f+b+w) of it: where ZB-H1 runs, the
        // interleaved schedule is priced only when pinned.
        if (sched == PpSchedule::k1F1B && v >= 2 && !schedule_pinned && zb_h1_runs) {
          ParallelConfig zb = probe;
          zb.vpp = v;
          zb.pp_schedule = PpSchedule::kZbH1;
          if (PipelineLayoutError(m.layers, zb, fr.pp_split).empty()) continue;
        }
        if (sched != PpSchedule::k1F1B) {
          probe.vpp = v;
          probe.pp_schedule = sched;
          const bool ok = PipelineLayoutError(m.layers, probe, fr.pp_split).empty();
          probe.pp_schedule = PpSchedule::k1F1B;
          if (!ok) continue;
        }
        pipes.push_back({ch, v, sched});
      }
    }
  }
  return pipes;
}

// Sequence parallelism is a choice only with plain tensor parallelism.
std::vector<int> SequenceParallelChoices(int gx, int gy, const FrameworkSupport& fr,
                                         const AllowedFn& allowed) {
  std::vector<int> sps;
  if (gy > 1 && gx == 1) {
    if (fr.tp_without_sp && allowed("sp", 0)) sps.push_back(0);
    if (fr.sp && allowed("sp", 1)) sps.push_back(1);
  } else if (allowed("sp", 0)) {
    sps.push_back(0);
  }
  return sps;
}

// ZeRO stages, the distributed optimizer, ZeRO++ and host offload as the
// framework of `cm` offers them, over `replicas` (data × cp: ranks holding
// the same weights).
std::vector<ZeroChoice> ZeroChoices(int replicas, const CostModel& cm, bool allow_lossy,
                                    const AllowedFn& allowed) {
  const FrameworkSupport& fr = cm.framework().support;
  const ModelSpec& m = cm.model();
  const topology::ClusterSpec& cluster = cm.cluster();
  const bool host_known = cluster.host_memory_GiB > 0 && cluster.host_memory_GBps > 0;
  std::vector<ZeroChoice> zeros;
  for (int z = 0; z <= 3; ++z) {
    if (!fr.zero[z] || !allowed("zero", z)) continue;
    if (ExpertShardingUnmodelled(m, cm.training().framework, z)) continue;  // rules.cc refuses it
    if (z > 0 && replicas == 1) continue;  // nothing to shard over: same as zero 0
    for (int d = 0; d <= (z == 0 && fr.distributed_optimizer && replicas > 1 ? 1 : 0); ++d) {
      if (!allowed("distributed_optimizer", d)) continue;
      const int pp_max = (z == 3 && fr.zeropp) ? 7 : 0;
      for (int q = 0; q <= pp_max; ++q) {
        ZeroChoice zc{z, d == 1, (q & 1) != 0, (q & 2) != 0, (q & 4) != 0, false, false};
        if ((zc.qwz || zc.qgz) && !allow_lossy) continue;
        if (!allowed("qwz", zc.qwz) || !allowed("hpz", zc.hpz) || !allowed("qgz", zc.qgz)) continue;
        // Offload: none, the optimizer (ZeRO-Offload), or under ZeRO-3 the
        // optimizer and the parameters (ZeRO-Infinity, CPU). Offered only where
        // the cluster states its host memory and bandwidth.
        const int off_max = z >= 1 && fr.offload_optimizer && host_known && !m.is_moe()
                                ? (z == 3 && fr.offload_param ? 2 : 1)
                                : 0;
        for (int off = 0; off <= off_max; ++off) {
          zc.offload_opt = off >= 1;
          zc.offload_param = off == 2;
          if (!allowed("offload_optimizer", zc.offload_opt) ||
              !allowed("offload_param", zc.offload_param)) {
            continue;
          }
          zeros.push_back(zc);
        }
      }
    }
  }
  return zeros;
}

// One recompute choice: the granularity, its modules, and the lighter choice
// (an index into the same list, -1: none) that makes it worth pricing only
// when that one does not fit: recomputing more only adds time.
struct RecomputeChoice {
  Recompute rc = Recompute::kNone;
  uint8_t modules = kDefaultRecomputeModules;
  int unless_fits = -1;
};

// The framework's granularities; where it recomputes per module (Megatron-Core)
// also the module sets its recipes use to fit, cheapest first: the
// output-discarding modules that apply to the model (an MoE layer's pre-MLP
// norm and experts' activation, MLA's input norm and up-projections), then
// with the dense MLP. Under flash attention core_attn frees only the softmax
// statistics for a second attention forward, so those sets leave it out.
std::vector<RecomputeChoice> RecomputeChoices(const FrameworkSupport& fr, const ModelSpec& m,
                                              bool flash, const AllowedFn& allowed,
                                              uint8_t pinned_modules) {
  std::vector<RecomputeChoice> rcs;
  if (pinned_modules != 0) {
    // Pinned modules: selective recompute of exactly those.
    if (fr.recompute[static_cast<int>(Recompute::kSelective)] && fr.recompute_modules &&
        allowed("recompute", static_cast<int>(Recompute::kSelective))) {
      rcs.push_back({Recompute::kSelective, pinned_modules, -1});
    }
    return rcs;
  }
  int none = -1;
  for (int r = 0; r < 3; ++r) {
    if (!fr.recompute[r] || !allowed("recompute", r)) continue;
    if (r == 0) none = static_cast<int>(rcs.size());
    rcs.push_back({static_cast<Recompute>(r), kDefaultRecomputeModules, -1});
    if (static_cast<Recompute>(r) != Recompute::kSelective || !fr.recompute_modules) continue;
    uint8_t cheap = flash ? 0 : kRcCoreAttn;
    if (m.is_moe()) cheap |= kRcLayerNorm | kRcMoeAct;
    if (m.is_mla()) cheap |= kRcLayerNorm | kRcMlaUpProj;
    int lighter = none;
    if (cheap & ~kRcCoreAttn) {
      rcs.push_back({Recompute::kSelective, cheap, lighter});
      lighter = static_cast<int>(rcs.size()) - 1;
    }
    if (m.dense_layer_count() > 0) {
      rcs.push_back({Recompute::kSelective, static_cast<uint8_t>(cheap | kRcMlp), lighter});
    }
  }
  return rcs;
}

// Micro-batch sizes that split the batch over `per_mb` (gz · gdata) ranks.
std::vector<int> MicroBatchChoices(int64_t batch, int64_t per_mb, int max_mbs,
                                   const AllowedFn& allowed) {
  std::vector<int> mbss;
  if (batch % per_mb != 0) return mbss;
  for (int b : Divisors(batch / per_mb)) {
    if (b <= max_mbs && allowed("mbs", b)) mbss.push_back(b);
  }
  return mbss;
}

// Placements that give every dimension the same stride are the same layout:
// one of each, for the degrees of `degrees`.
std::vector<Placement> DistinctPlacements(ParallelConfig degrees,
                                          const std::vector<Placement>& placements) {
  std::vector<Placement> places;
  std::vector<std::array<int, kNumDims>> seen;
  for (const Placement& pl : placements) {
    degrees.placement = pl;
    std::array<int, kNumDims> strides;
    for (int d = 0; d < kNumDims; ++d) {
      const Dim dim = static_cast<Dim>(d);
      strides[d] = degrees.Degree(dim) > 1 ? degrees.Stride(dim) : 0;  // a size-1 dim has no groups
    }
    if (std::find(seen.begin(), seen.end(), strides) != seen.end()) continue;
    seen.push_back(strides);
    places.push_back(pl);
  }
  return places;
}

}  // namespace

const char* FamilyName(Family f) { return EnumLookup(f, kFamilyNames, "all"); }

Result<Family> ParseFamily(const std::string& s) {
  auto f = ParseEnumName<Family>(s, kFamilyNames, "a space");
  if (f.ok()) return f;
  const std::string hint =
      DidYouMean(s, std::vector<std::string>(std::begin(kFamilyNames), std::end(kFamilyNames)));
  if (hint.empty()) return f;
  return Status::InvalidArgument(f.status().message() + "; " + hint);
}

std::vector<Framework> FrameworksOf(Family f) {
  switch (f) {
    case Family::kMegatron: return {Framework::kMegatron};
    case Family::kDeepSpeed: return {Framework::kMegatronDeepSpeed};
    case Family::kAxonn: return {Framework::kAxonn};
    case Family::kFsdp: return {Framework::kFsdp, Framework::kTorchtitan};
    case Family::kAll: break;
  }
  return {Framework::kMegatron, Framework::kMegatronDeepSpeed, Framework::kAxonn, Framework::kFsdp,
          Framework::kTorchtitan};
}

Family FamilyOf(Framework f) {
  switch (f) {
    case Framework::kMegatron: return Family::kMegatron;
    case Framework::kMegatronDeepSpeed:
    case Framework::kDeepSpeed: return Family::kDeepSpeed;
    case Framework::kAxonn: return Family::kAxonn;
    case Framework::kFsdp:
    case Framework::kTorchtitan: return Family::kFsdp;
  }
  return Family::kAll;
}

const char* ObjectiveName(Objective o) { return EnumLookup(o, kObjectiveNames, "time"); }

Result<Objective> ParseObjective(const std::string& s) {
  return ParseEnumName<Objective>(s, kObjectiveNames, "an objective");
}

Status CheckFixedForModel(const FixedFields& fixed, const ModelSpec& model) {
  for (const auto& [k, v] : fixed) {
    // Recompute modules the model does not have: the search's own rule.
    if (k != "recompute_modules") continue;
    const auto modules = ParseRecomputeModules(v);
    if (!modules.ok()) return Status::InvalidArgument(k + "=" + v + ": " + modules.status().message());
    if (const char* why = CostModel::RecomputeModulesModelGap(model, *modules)) {
      return Status::InvalidArgument(k + "=" + v + ": " + why + " (" + model.name + ")");
    }
  }
  if (!model.is_moe()) return Status::Ok();
  for (const auto& [k, v] : fixed) {
    const char* what = nullptr;
    auto as_int = [&v, &k]() {
      auto n = ParseInt(v, "--fix " + k);
      return n.ok() ? *n : 0;
    };
    if (k == "zero" && as_int() == 3) {
      what = "ZeRO-3 (the gathers of the experts' shards are not priced); zero 0-2 or the "
             "distributed optimizer are searched";
    } else if ((k == "offload_optimizer" || k == "offload_param") && BoolValue(v) == 1) {
      what = "host offload (the experts' optimizer states and copies to host memory are not "
             "priced)";
    }
    if (what) {
      return Status::InvalidArgument(k + "=" + v + ": " + model.name +
                                     " is a mixture-of-experts model, and the search does not "
                                     "offer " + what);
    }
  }
  return Status::Ok();
}

Status ValidateFixed(const FixedFields& fixed) {
  for (const auto& [k, v] : fixed) {
    if (IsIn(std::begin(kIntKeys), std::end(kIntKeys), k)) {
      auto n = ParseInt(v, "--fix " + k);
      if (!n.ok()) return n.status();
      if (*n < (k == "zero" ? 0 : 1)) return Status::InvalidArgument("--fix " + k + ": out of range");
    } else if (k == "edp") {
      // Derived from the other degrees; pinned, it must equal what they give
      // (a generic pin on the canonical JSON, as the table's text carries it).
      auto n = ParseInt(v, "--fix edp");
      if (!n.ok()) return n.status();
      if (*n < 1) return Status::InvalidArgument("--fix edp: out of range");
    } else if (IsIn(std::begin(kBoolKeys), std::end(kBoolKeys), k)) {
      if (BoolValue(v) < 0) return Status::InvalidArgument("--fix " + k + ": expected true or false");
    } else if (k == "cp_kind") {
      if (!ParseCpKind(v).ok()) return ParseCpKind(v).status();
    } else if (k == "recompute") {
      if (!ParseRecompute(v).ok()) return ParseRecompute(v).status();
    } else if (k == "recompute_modules") {
      if (auto m = ParseRecomputeModules(v); !m.ok()) {
        return Status::InvalidArgument("--fix recompute_modules: " + m.status().message());
      }
    } else if (k == "placement") {
      if (!ParsePlacement(v).ok()) return ParsePlacement(v).status();
    } else if (k == "moe_dispatcher") {
      if (!ParseMoeDispatcher(v).ok()) return ParseMoeDispatcher(v).status();
    } else if (k == "pp_schedule") {
      if (!ParsePpSchedule(v).ok()) return ParsePpSchedule(v).status();
    } else if (IsIn(std::begin(kLayoutKeys), std::end(kLayoutKeys), k)) {
      auto n = ParseInt(v, "--fix " + k);
      if (!n.ok()) return n.status();
      if (*n < 0) return Status::InvalidArgument("--fix " + k + ": out of range (0 = automatic)");
    } else {
      // Any other key of a configuration (--config): checked by the config parser.
      PT_ASSIGN_OR_RETURN(Json j, ConfigStringToJson(k + "=" + v));
      if (Result<ParallelConfig> c = ParseConfig(j, "--fix", 0); !c.ok()) return c.status();
    }
  }
  return Status::Ok();
}

Search::Search(std::vector<const CostModel*> models, SearchOptions options)
    : models_(std::move(models)), options_(std::move(options)) {
  if (options_.memory_only) options_.objective = Objective::kMemory;
  for (const auto& [k, v] : options_.fixed) {
    if (k == "first_stage_layers") pinned_first_ = static_cast<int>(*ParseInt(v, k));
    if (k == "last_stage_layers") pinned_last_ = static_cast<int>(*ParseInt(v, k));
    const bool native = IsIn(std::begin(kIntKeys), std::end(kIntKeys), k) ||
                        IsIn(std::begin(kBoolKeys), std::end(kBoolKeys), k) ||
                        IsIn(std::begin(kLayoutKeys), std::end(kLayoutKeys), k) || k == "cp_kind" ||
                        k == "recompute" || k == "recompute_modules" || k == "placement" ||
                        k == "moe_dispatcher" || k == "pp_schedule";
    if (native) continue;
    // A key the enumeration does not choose by itself: the configuration's
    // canonical JSON must hold the pinned value (ValidateFixed parsed it).
    const Json j = *ConfigStringToJson(k + "=" + v);
    generic_pins_.emplace_back(k, j[k].dump());
  }
  placements_.resize(models_.size());
  for (int i = 0; i < static_cast<int>(models_.size()); ++i) Enumerate(i);
}

const CostModel* Search::ModelFor(Framework f) const {
  for (const CostModel* m : models_) {
    if (m->training().framework == f) return m;
  }
  return nullptr;
}

bool Search::Allowed(const char* key, int value) const {
  for (const auto& [k, v] : options_.fixed) {
    bool match = k == key;
    if (!match && std::string(key) == "gy" && k == "tp") match = true;
    if (!match && std::string(key) == "gdata" && k == "dp") match = true;
    if (!match) continue;
    if (std::string(key) == "cp_kind") {
      if (static_cast<int>(*ParseCpKind(v)) != value) return false;
    } else if (std::string(key) == "recompute") {
      if (static_cast<int>(*ParseRecompute(v)) != value) return false;
    } else if (std::string(key) == "moe_dispatcher") {
      if (static_cast<int>(*ParseMoeDispatcher(v)) != value) return false;
    } else if (std::string(key) == "pp_schedule") {
      if (static_cast<int>(*ParsePpSchedule(v)) != value) return false;
    } else if (IsIn(std::begin(kBoolKeys), std::end(kBoolKeys), k)) {
      if (BoolValue(v) != value) return false;
    } else if (*ParseInt(v, k) != value) {
      return false;
    }
  }
  // tp pins gx to 1 (Megatron tensor parallelism).
  if (std::string(key) == "gx" && value != 1) {
    for (const auto& kv : options_.fixed) if (kv.first == "tp") return false;
  }
  return true;
}

bool Search::AllowedPlacement(const Placement& p) const {
  for (const auto& [k, v] : options_.fixed) {
    if (k == "placement" && !(*ParsePlacement(v) == p)) return false;
  }
  return true;
}

bool Search::MatchesGenericPins(const ParallelConfig& c) const {
  const OrderedJson j = ConfigToJson(c);
  for (const auto& [k, v] : generic_pins_) {
    if (!j.contains(k) || j[k].dump() != v) return false;
  }
  return true;
}

void Search::Enumerate(int model) {
  const CostModel& cm = *models_[model];
  const FrameworkSupport& fr = cm.framework().support;
  std::vector<Placement>& places = placements_[model];
  for (const std::string& s : fr.placements) {
    Placement p = *ParsePlacement(s);
    if (AllowedPlacement(p)) places.push_back(p);
  }
  // A pinned placement outside the framework's usual orders is still honoured.
  for (const auto& [k, v] : options_.fixed) {
    if (k == "placement" && places.empty()) places.push_back(*ParsePlacement(v));
  }
  const int n = cm.gpus();
  const bool tensor = fr.tp || fr.axonn_xy;
  const bool any_cp = fr.cp_ring || fr.cp_ulysses || fr.cp_fpdt;
  for (int gx : Divisors(n)) {
    if ((!fr.axonn_xy && gx > 1) || !Allowed("gx", gx)) continue;
    for (int gy : Divisors(n / gx)) {
      if ((!tensor && gy > 1) || !Allowed("gy", gy)) continue;
      const int r1 = n / gx / gy;
      for (int cp : Divisors(r1)) {
        if ((cp > 1 && !any_cp) || !Allowed("cp", cp)) continue;
        const int r2 = r1 / cp;
        for (int pp : Divisors(r2)) {
          if ((!fr.pp && pp > 1) || !Allowed("pp", pp)) continue;
          const int r3 = r2 / pp;
          for (int gz : Divisors(r3)) {
            if ((!fr.shard_z && gz > 1) || !Allowed("gz", gz)) continue;
            // Sharded expert weights are modelled for torchtitan's FSDP2 only.
            if (gz > 1 && models_[model]->model().is_moe() &&
                models_[model]->training().framework != Framework::kTorchtitan) {
              continue;
            }
            const int gdata = r3 / gz;
            if (!Allowed("gdata", gdata)) continue;
            outer_.push_back({model, gx, gy, gz, gdata, pp, cp});
          }
        }
      }
    }
  }
}

bool Search::Better(const Candidate& a, const Candidate& b) const {
  const Prediction &pa = a.prediction, &pb = b.prediction;
  // Time, tokens/s and MFU rank alike at one job (same tokens and FLOPs per
  // iteration): by the pessimistic edge of the time band, so a configuration
  // whose error could be optimistic does not win on it (docs/model.md).
  double va = pa.pessimistic_time_s, vb = pb.pessimistic_time_s;
  switch (options_.objective) {
    case Objective::kTime:
    case Objective::kTokensPerS:
    case Objective::kMfu:
    case Objective::kTimeToTrain:  // kept by step time; re-ranked with the job (RankForTrust)
      break;
    case Objective::kMemory:
      if (pa.memory.reserved_GiB != pb.memory.reserved_GiB) return pa.memory.reserved_GiB < pb.memory.reserved_GiB;
      break;
  }
  if (va != vb) return va < vb;
  if (Key(a.config) != Key(b.config)) return Key(a.config) < Key(b.config);
  return a.framework < b.framework;
}

bool Search::InSpace(const ParallelConfig& c) const {
  for (int i = 0; i < static_cast<int>(models_.size()); ++i) {
    if (InSpaceOf(i, c)) return true;
  }
  return false;
}

bool Search::InSpaceOf(int model, const ParallelConfig& c) const {
  const CostModel& cm = *models_[model];
  if (!cm.Supports(c)) return false;
  if ((c.qwz || c.qgz) && !options_.allow_lossy) return false;
  const std::pair<const char*, int> pinned[] = {{"gx", c.gx},   {"gy", c.gy},     {"gz", c.gz},
                                                {"gdata", c.gdata}, {"pp", c.pp}, {"vpp", c.vpp},
                                                {"cp", c.cp},   {"zero", c.zero}, {"mbs", c.mbs}};
  for (const auto& [key, value] : pinned) {
    if (!Allowed(key, value)) return false;
  }
  if (c.cp > 1 && !Allowed("cp_kind", static_cast<int>(c.cp_kind))) return false;
  if (!Allowed("pp_schedule", static_cast<int>(c.pp_schedule))) return false;
  if (!Allowed("uneven_pp", c.pp > 1 && !SplitLayers(cm.model().layers, c, cm.framework().support.pp_split).even)) {
    return false;
  }
  if (!Allowed("first_stage_layers", c.first_stage_layers) || !Allowed("last_stage_layers", c.last_stage_layers) ||
      !Allowed("pp_embedding_layers", c.pp_embedding_layers) || !Allowed("pp_loss_layers", c.pp_loss_layers)) {
    return false;
  }
  if (cm.BrokenRule(c) != nullptr) return false;
  if (!generic_pins_.empty() && !MatchesGenericPins(c)) return false;
  if (!Allowed("sp", c.sp) || !Allowed("distributed_optimizer", c.distributed_optimizer) ||
      !Allowed("qwz", c.qwz) || !Allowed("hpz", c.hpz) || !Allowed("qgz", c.qgz) ||
      !Allowed("offload_optimizer", c.offload_optimizer) ||
      !Allowed("offload_param", c.offload_param) ||
      !Allowed("recompute", static_cast<int>(c.recompute)) || !Allowed("ep", c.ep) ||
      !Allowed("etp", c.etp) || !Allowed("moe_dispatcher", static_cast<int>(c.moe_dispatcher)) ||
      !Allowed("moe_a2a_overlap", c.moe_a2a_overlap)) {
    return false;
  }
  const std::vector<Placement>& places = placements_[model];
  return AllowedPlacement(c.placement) ||
         std::find(places.begin(), places.end(), c.placement) != places.end();
}

// One tuple of degrees: its inner choices (the *Choices functions above),
// then the nested enumeration (MoE degrees × pipelines × ZeRO × recompute ×
// placements). The nesting stays in one function (about 500 lines) on
// purpose: each level computes what the levels below reuse (the dense and
// the layout's terms, the rule verdicts per pipe, the overlap flags per key,
// the states' overflow, the shared memory breakdown, the compute lower bound
// for pruning), and split apart those caches would be passed between a dozen
// functions.
SearchResult Search::RunShard(int shard) const {
  SearchResult res;
  const Outer& o = outer_[shard];
  const CostModel& cm = *models_[o.model];
  const FrameworkSupport& fr = cm.framework().support;
  const Framework framework = cm.training().framework;
  const std::vector<Placement>& placements = placements_[o.model];
  const ModelSpec& m = cm.model();
  const int64_t batch = cm.training().global_batch;

  // Inner choices for this tuple, each filtered by the framework and the pins.
  const AllowedFn allowed = [this](const char* key, int value) { return Allowed(key, value); };
  const std::vector<CpKind> kinds = CpKindChoices(o.cp, fr, allowed);
  const std::vector<Pipe> pipes =
      PipeChoices(o.pp, cm, options_.fixed, pinned_first_, pinned_last_, allowed);
  if (pipes.empty()) return res;
  const std::vector<int> sps = SequenceParallelChoices(o.gx, o.gy, fr, allowed);
  const std::vector<ZeroChoice> zeros =
      ZeroChoices(o.gdata * o.cp, cm, options_.allow_lossy, allowed);
  uint8_t pinned_modules = 0;
  for (const auto& [k, v] : options_.fixed) {
    if (k == "recompute_modules") pinned_modules = *ParseRecomputeModules(v);
  }
  const std::vector<RecomputeChoice> rcs = RecomputeChoices(
      fr, m, cm.training().attention == Attention::kFlash, allowed, pinned_modules);
  const topology::ClusterSpec& cluster = cm.cluster();
  const std::vector<int> mbss =
      MicroBatchChoices(batch, int64_t{o.gz} * o.gdata, options_.max_mbs, allowed);
  const int64_t inner = static_cast<int64_t>(kinds.size()) * pipes.size() * sps.size() * zeros.size() *
                        rcs.size() * placements.size();
  if (mbss.empty() || kinds.empty() || sps.empty() || zeros.empty() || rcs.empty()) {
    // The batch cannot be split over gz·gdata (or a pin leaves nothing to try).
    res.evaluated += inner;
    res.rejected[static_cast<int>(Reason::kBatchNotDivisible)] += inner;
    return res;
  }

  ParallelConfig degrees;
  o.ApplyTo(&degrees);
  const std::vector<Placement> places = DistinctPlacements(degrees, placements);
  const int64_t per_mbs = static_cast<int64_t>(pipes.size()) * sps.size() * zeros.size() * rcs.size() *
                          places.size();

  // Pruning by the lower bound is exact for every objective that ranks by time
  // at a fixed GPU count and batch (time, tokens/s, MFU), not for memory.
  const bool prune = options_.objective != Objective::kMemory && !options_.memory_only;
  std::vector<std::pair<double, double>> front;  // snapshot of finished shards' fronts
  if (options_.keep_pareto) {
    std::lock_guard<std::mutex> lock(front_mu_);
    front = front_;
  }
  // The candidates the ranking may need, best first up to `sorted`, then
  // newcomers; trimmed (Trim) whenever the newcomers have doubled it.
  std::vector<Candidate> pool;
  double keep = std::numeric_limits<double>::infinity();  // this shard's keep limit
  size_t next_trim = 64;
  const bool by_time = options_.objective != Objective::kMemory;
  auto offer = [&](const ParallelConfig& cfg, const Prediction& pred) {
    if (!by_time ||
        pred.iteration_time_s <= std::min(keep, bound_.load(std::memory_order_relaxed))) {
      pool.push_back({cfg, pred, framework});
      if (pool.size() >= next_trim) {
        keep = Trim(&pool);
        next_trim = 2 * pool.size() + 16;
        if (prune) LowerBound(keep);
      }
    }
    if (options_.keep_pareto) {
      // Non-dominated in (iteration time, memory per GPU). res.pareto is kept
      // sorted by memory ascending, so times are strictly descending: the entry
      // with the largest memory <= mem has the smallest time among those.
      const double t = pred.iteration_time_s, mem = pred.memory.reserved_GiB;
      auto& f = res.pareto;
      if (ParetoDominated(f, t, mem)) return;
      // Remove the entries the newcomer dominates: memory >= mem and time >= t.
      auto first = std::lower_bound(f.begin(), f.end(), mem, [](const Candidate& q, double v) {
        return q.prediction.memory.reserved_GiB < v;
      });
      auto last = first;
      while (last != f.end() && last->prediction.iteration_time_s >= t) ++last;
      f.insert(f.erase(first, last), Candidate{cfg, pred, framework});
    }
  };

  // Mixture of experts: expert parallel degrees folded into the stage's ranks
  // (ep divides the experts, ep·etp the stage's ranks), etp 1 or the tensor
  // degree, and the dispatcher: all-to-all, or DeepEP's node-deduplicating one
  // (Megatron's flex dispatcher) when an EP group spans nodes.
  struct MoeChoice {
    int ep, etp;
    MoeDispatcher dispatcher;
  };
  std::vector<MoeChoice> moe_choices;
  const bool moe_framework = framework != Framework::kAxonn && framework != Framework::kFsdp;
  if (m.is_moe() && moe_framework) {
    const int64_t stage = int64_t{o.gx} * o.gy * o.gz * o.gdata * o.cp;
    std::vector<int> etps = {1};
    if (o.gy > 1 && o.gx == 1 && framework != Framework::kDeepSpeed &&
        framework != Framework::kMegatronDeepSpeed) {
      etps.push_back(o.gy);
    }
    for (int etp : etps) {
      if (!Allowed("etp", etp) || m.moe_ffn_hidden % etp != 0) continue;
      for (int ep : Divisors(m.experts)) {
        if (!Allowed("ep", ep) || stage % (int64_t{ep} * etp) != 0) continue;
        // Expert ranks outside torchtitan's shard mesh are no layout it has
        // (with etp 1 exactly its rule; etp > 1 it refuses anyway).
        if (framework == Framework::kTorchtitan && !EpInShardMesh(o.gz, o.cp, o.gy, ep * etp)) {
          continue;
        }
        for (int d = 0; d < kNumMoeDispatchers; ++d) {
          const auto disp = static_cast<MoeDispatcher>(d);
          bool offered = disp == MoeDispatcher::kAllToAll;
          if (disp == MoeDispatcher::kDeepEp && framework == Framework::kMegatron) {
            offered = int64_t{ep} * etp > cluster.gpus_per_node;
          }
          bool pinned = false;
          for (const auto& kv : options_.fixed) pinned = pinned || kv.first == "moe_dispatcher";
          if (pinned) offered = Allowed("moe_dispatcher", d);
          if (offered && (ep > 1 || disp == MoeDispatcher::kAllToAll)) {
            moe_choices.push_back({ep, etp, disp});
          }
        }
      }
    }
  } else if (Allowed("ep", 1) && Allowed("etp", 1)) {
    moe_choices.push_back({1, 1, MoeDispatcher::kAllToAll});
  }
  // Expert degrees whose expert weights, their gradients and (at best sharded over
  // the expert-data group) their Adam states exceed the GPU alone cannot fit:
  // skipped whole, counted as out of memory.
  if (m.is_moe() && !moe_choices.empty()) {
    const double usable = cluster.gpu.memory_GiB * (1.0 - cm.training().headroom) * 1073741824.0;
    const int64_t stage = int64_t{o.gx} * o.gy * o.gz * o.gdata * o.cp;
    std::vector<MoeChoice> kept;
    for (const MoeChoice& mc : moe_choices) {
      ParallelConfig probe;
      o.ApplyTo(&probe);
      probe.ep = mc.ep;
      probe.etp = mc.etp;
      // The least any of the tuple's pipeline layouts holds.
      double held = std::numeric_limits<double>::infinity();
      for (const Pipe& p : pipes) {
        p.ApplyTo(&probe);
        held = std::min(held, cm.ExpertParamsHeld(probe));
      }
      const double edp = static_cast<double>(stage) / (int64_t{mc.ep} * mc.etp);
      // Under FSDP2 every expert state is an efsdp shard (at least a 4-byte
      // master, a 2-byte gradient and Adam's 8); otherwise bf16 weights and
      // gradients and Adam states at best sharded over the expert-data group.
      const int efsdp = cm.ExpertFsdpShards(probe);
      const double bytes = efsdp > 1 ? held * 14.0 / efsdp : held * (2.0 + 2.0 + 12.0 / edp);
      if (bytes > usable) {
        const int64_t n = inner * static_cast<int64_t>(mbss.size());
        res.evaluated += n;
        res.rejected[static_cast<int>(Reason::kOutOfMemory)] += n;
      } else {
        kept.push_back(mc);
      }
    }
    moe_choices = std::move(kept);
    if (moe_choices.empty()) return res;
  }
  if (moe_choices.empty()) {  // pinned expert degrees that cannot fold into this tuple
    res.evaluated += inner * static_cast<int64_t>(mbss.size());
    res.rejected[static_cast<int>(Reason::kExpertsNotDivisible)] +=
        inner * static_cast<int64_t>(mbss.size());
    return res;
  }

  // The framework's overlap switches (kOverlapSwitches order) per overlap key.
  using OverlapFlags = std::array<bool, std::size(kOverlapSwitches)>;
  std::array<std::optional<OverlapFlags>, 32> overlaps;
  ParallelConfig c;
  o.ApplyTo(&c);
  // Full-iteration CUDA graphs are never enumerated (for MoE they bring
  // HybridEP's token budget): only a pin turns them on.
  for (const auto& [k, v] : options_.fixed) {
    if (k == "cuda_graphs") c.cuda_graphs = BoolValue(v) == 1;
  }
  std::vector<char> refused_order(places.size());
  const bool a2a_overlap_allowed = Allowed("moe_a2a_overlap", 1);
  MemoryBreakdown shared_mem;  // a recompute choice's memory (memory_of below)
  // DenseCompute per (context kind, sequence parallelism, micro-batch), the
  // same for every expert layout.
  std::vector<std::optional<CostModel::ComputeTerms>> dense_terms(kinds.size() * sps.size() *
                                                                  mbss.size());
  for (const MoeChoice& mc : moe_choices) {
    c.ep = mc.ep;
    c.etp = mc.etp;
    c.moe_dispatcher = mc.dispatcher;
    // Memory over this expert layout's configurations: the states' ledgers
    // once per (pipeline, ZeRO choice), whatever the micro-batch, sequence
    // parallelism and context kind.
    CostModel::MemoryGrid grid(cm, pipes.size() * zeros.size());
    // What a layout changes in the terms (psi and the MoE layers per stage)
    // reads its layer counts and the expert degrees only: computed at a
    // pipeline's first micro-batch, and shared by consecutive pipes of one
    // layout (its vpps and schedules), but for the layers each rank holds,
    // which the vpp changes.
    std::vector<std::optional<CostModel::LayoutTerms>> layout_terms(pipes.size());
    // The rules that read the rank order read nothing below this level
    // (pp, data, ep, etp): each placement is checked once here.
    for (size_t i = 0; i < places.size(); ++i) {
      c.placement = places[i];
      refused_order[i] = cm.PlacementUnsupportedWhy(c)[0] != '\0';
    }
    const int64_t refused_places = std::count(refused_order.begin(), refused_order.end(), 1);
    for (size_t ki = 0; ki < kinds.size(); ++ki) {
      const CpKind kind = kinds[ki];
      c.cp_kind = kind;
      // Shape rules that hold for the whole tuple are checked once and every
      // configuration they rule out is counted under its reason.
      // The probe takes the first choice of every inner field (each is one the
      // framework supports, so a framework rule that fails here fails them all).
      pipes.front().ApplyTo(&c);
      c.mbs = mbss.front();
      c.sp = sps.front() != 0;
      c.zero = 0;
      c.distributed_optimizer = false;
      c.qwz = c.hpz = c.qgz = false;
      c.offload_optimizer = c.offload_param = false;
      c.recompute = rcs.front().rc;
      c.recompute_modules = rcs.front().modules;
      // The framework's start-up rules (its preset's `rules`) are applied per
      // configuration below, so that the fastest configuration they forbid can
      // still be named.
      const Reason shape = cm.CheckRules(c, /*framework_rules=*/false);
      if (shape != Reason::kOk && shape != Reason::kBatchNotDivisible &&
          shape != Reason::kMicroBatchesVsPp) {
        const int64_t n = per_mbs * static_cast<int64_t>(mbss.size());
        res.evaluated += n;
        res.rejected[static_cast<int>(shape)] += n;
        continue;
      }
      for (size_t si = 0; si < sps.size(); ++si) {
        const int sp = sps[si];
        c.sp = sp != 0;
        // The rules checked per pipeline below read the micro-batch size only
        // through whether the micro-batches divide over an interleaved
        // pipeline (every size in mbss divides the batch): one verdict per
        // pipe and that answer.
        std::vector<std::array<std::optional<Reason>, 2>> level_of(pipes.size());
        for (size_t mi = 0; mi < mbss.size(); ++mi) {
          const int mbs = mbss[mi];
          c.mbs = mbs;
          c.recompute = Recompute::kNone;
          c.recompute_modules = kDefaultRecomputeModules;
          // The micro-batch's compute terms (with the current pipeline's
          // layout applied) and each recompute choice's floor on the
          // iteration time: the micro-batches times what the slowest stage
          // spends at least per micro-batch, whatever the layout, ZeRO choice
          // and placement. Computed when a configuration of this size first
          // needs them: many never do (the rules or the states alone decide).
          std::optional<CostModel::ComputeTerms> priced;
          std::array<double, CostModel::MemoryGrid::kRecomputeSlots> floor_s{};
          auto price = [&](const CostModel::LayoutTerms& layout) {
            ParallelConfig probe = c;
            pipes.front().ApplyTo(&probe);
            probe.recompute = Recompute::kNone;
            probe.recompute_modules = kDefaultRecomputeModules;
            std::optional<CostModel::ComputeTerms>& dense =
                dense_terms[(ki * sps.size() + si) * mbss.size() + mi];
            if (!dense) dense = cm.DenseCompute(probe);
            priced = *dense;
            cm.CompleteCompute(probe, &*priced);
            const double n_mb = static_cast<double>(cost::MicroBatches(batch, probe));
            for (size_t ri = 0; ri < rcs.size(); ++ri) {
              probe.recompute = rcs[ri].rc;
              probe.recompute_modules = rcs[ri].modules;
              floor_s[ri] = n_mb * cm.ComputeFloorPerMicroBatch(probe, *priced);
            }
            cm.ApplyLayout(layout, &*priced);
            grid.NewTerms(&*priced);
          };
          for (size_t pj = 0; pj < pipes.size(); ++pj) {
            const Pipe& pipe = pipes[pj];
            pipe.ApplyTo(&c);
            std::optional<CostModel::LayoutTerms>& layout = layout_terms[pj];
            if (!layout) {
              const bool same = pj > 0 && pipes[pj - 1].layout == pipe.layout;
              layout = same ? *layout_terms[pj - 1] : cm.LayoutTermsOf(c);
              if (same) layout->stages = cm.Stages(c);  // the vpp splits the layers
            }
            if (priced) cm.ApplyLayout(*layout, &*priced);
            grid.NewLayout(*layout);
            // Every remaining rule depends on fields fixed at this level (layers vs
            // pp·vpp, micro-batches vs pp); zero choices are valid by construction.
            // The overlaps are set per ZeRO choice and recompute below.
            c.zero = 0;
            c.distributed_optimizer = c.qwz = c.hpz = c.qgz = false;
            c.offload_optimizer = c.offload_param = false;
            c.moe_a2a_overlap = false;
            for (const OverlapSwitch& sw : kOverlapSwitches) c.*sw.field = false;
            const bool uneven_micro_batches = c.vpp > 1 && cost::MicroBatches(batch, c) % c.pp != 0;
            std::optional<Reason>& known_level = level_of[pj][uneven_micro_batches ? 1 : 0];
            if (!known_level) known_level = cm.CheckRules(c, /*framework_rules=*/false);
            const Reason level = *known_level;
            if (level != Reason::kOk) {
              const int64_t n = static_cast<int64_t>(zeros.size()) * rcs.size() * places.size();
              res.evaluated += n;
              res.rejected[static_cast<int>(level)] += n;
              continue;
            }
            for (size_t zj = 0; zj < zeros.size(); ++zj) {
              const ZeroChoice& zc = zeros[zj];
              grid.NewZeroChoice(pj * zeros.size() + zj);
              c.zero = zc.zero;
              c.distributed_optimizer = zc.dist_opt;
              c.qwz = zc.qwz;
              c.hpz = zc.hpz;
              c.qgz = zc.qgz;
              c.offload_optimizer = zc.offload_opt;
              c.offload_param = zc.offload_param;
              // The framework's overlaps read only fields fixed at this level
              // (gz, pp, vpp, sp, ZeRO), so they are set once for every
              // recompute and placement below.
              // Never slower in the model: not enumerated. ApplyFrameworkOverlaps
              // reads only whether FSDP shards (gz > 1, or cp > 1 where it
              // shards over cp), pp == 1, distributed_optimizer || zero == 3,
              // sp and vpp > 1 (planner/framework.cc): its answer for each of
              // those combinations is kept for the shard.
              const int overlap_key = (fr.Fsdp(c) ? 1 : 0) | (c.pp == 1 ? 2 : 0) |
                                      (c.distributed_optimizer || c.zero == 3 ? 4 : 0) |
                                      (c.sp ? 8 : 0) | (c.vpp > 1 ? 16 : 0);
              std::optional<OverlapFlags>& known = overlaps[static_cast<size_t>(overlap_key)];
              if (!known) {
                for (const OverlapSwitch& sw : kOverlapSwitches) c.*sw.field = false;
                ApplyFrameworkOverlaps(fr, &c);
                known.emplace();
                for (size_t i = 0; i < known->size(); ++i) (*known)[i] = c.*kOverlapSwitches[i].field;
              }
              for (size_t i = 0; i < known->size(); ++i) c.*kOverlapSwitches[i].field = (*known)[i];
              for (const auto& [k, v] : options_.fixed) {  // pinned overlaps win
                for (const auto& [key, field] : kOverlapSwitches) {
                  if (k == key) c.*field = BoolValue(v) == 1;
                }
              }
              // The framework's start-up rules read neither the recompute nor
              // the placement (planner/framework.cc FrameworkRuleBroken).
              const bool forbidden = cm.BrokenRule(c) != nullptr;
              // Refused at start-up whatever the placement: ZeRO-2/3 or the
              // overlapped gradient reduction under a pipeline the framework
              // does not run them with.
              const bool refused_config =
                  (c.pp > 1 && c.zero >= 2 && !fr.pp_with_zero2) ||
                  (c.pp > 1 && c.overlap_grad_reduce && !fr.overlap_grad_reduce_with_pp);
              // Memory reads the placement only through the hpZ node group
              // (planner/cost/memory.cc); otherwise the grid has it.
              const bool memory_per_placement = c.hpz && c.zero == 3;
              auto memory_at = [&](const ParallelConfig& x, size_t slot) {
                return memory_per_placement ? cm.MemoryWith(x, *priced) : grid.Memory(x, slot);
              };
              // States that alone overflow the GPU decide every verdict below
              // (out of memory) without pricing any memory.
              const bool states_overflow = !memory_per_placement && grid.StatesOverflow(c);
              if (!states_overflow && !priced) price(*layout);
              // By recompute choice: 1 fits, 0 not, -1 not priced.
              std::array<int8_t, CostModel::MemoryGrid::kRecomputeSlots> fits_by_choice;
              fits_by_choice.fill(-1);
              for (size_t ri = 0; ri < rcs.size(); ++ri) {
                const Recompute rc = rcs[ri].rc;
                c.recompute = rc;
                c.recompute_modules = rcs[ri].modules;
                if (const int lighter = rcs[ri].unless_fits; lighter >= 0) {
                  // Dominated: the lighter choice fits and is faster.
                  const size_t li = static_cast<size_t>(lighter);
                  if (fits_by_choice[li] < 0) {
                    ParallelConfig l = c;
                    l.recompute = rcs[li].rc;
                    l.recompute_modules = rcs[li].modules;
                    fits_by_choice[li] =
                        !states_overflow && memory_at(l, li).Verdict() == Reason::kOk ? 1 : 0;
                  }
                  if (fits_by_choice[li] == 1) continue;
                  if (cm.RecomputeModulesWhy(c) != nullptr) continue;
                }
                // Megatron's EP all-to-all overlap where its rules allow it
                // (transformer_config.py:3002-3046 @d98e8a64); also never slower.
                c.moe_a2a_overlap = a2a_overlap_allowed && MoeA2aOverlapApplies(framework, c);
                // Outside hpZ one breakdown serves every placement of this
                // recompute choice.
                bool have_mem = false;
                auto memory_of = [&]() -> const MemoryBreakdown& {
                  if (memory_per_placement || !have_mem) {
                    shared_mem = memory_at(c, ri);
                    have_mem = true;
                  }
                  return shared_mem;
                };
                if (generic_pins_.empty() && !memory_per_placement && !forbidden) {
                  // The placements share every verdict but the rank-order
                  // rules: where none of them can be ranked, they are counted
                  // at once, as the loop below would count them.
                  const int64_t n = static_cast<int64_t>(places.size());
                  if (refused_config || refused_places == n) {
                    res.evaluated += n;
                    res.rejected[static_cast<int>(Reason::kFrameworkUnsupported)] += n;
                    continue;
                  }
                  const Reason verdict =
                      states_overflow ? Reason::kOutOfMemory : memory_of().Verdict();
                  fits_by_choice[ri] = verdict == Reason::kOk ? 1 : 0;
                  if (verdict != Reason::kOk) {
                    res.evaluated += n;
                    res.rejected[static_cast<int>(Reason::kFrameworkUnsupported)] += refused_places;
                    res.rejected[static_cast<int>(verdict)] += n - refused_places;
                    continue;
                  }
                }
                for (size_t pi = 0; pi < places.size(); ++pi) {
                  c.placement = places[pi];
                  if (!generic_pins_.empty() && !MatchesGenericPins(c)) continue;
                  ++res.evaluated;
                  // A configuration the framework would refuse at start-up is never
                  // ranked; the fastest one is kept aside (plans' faster_if_allowed).
                  if (refused_config || refused_order[pi]) {
                    ++res.rejected[static_cast<int>(Reason::kFrameworkUnsupported)];
                    continue;
                  }
                  if (forbidden) {
                    ++res.rejected[static_cast<int>(Reason::kFrameworkUnsupported)];
                    if (options_.memory_only || states_overflow) continue;
                    // Only one faster than every ranked candidate is worth naming.
                    const double lb = floor_s[ri];
                    if (prune && lb > bound_.load(std::memory_order_relaxed)) continue;
                    if (!res.forbidden.empty() &&
                        lb > res.forbidden.front().prediction.iteration_time_s) {
                      continue;
                    }
                    const MemoryBreakdown& mem = memory_of();
                    fits_by_choice[ri] = mem.Verdict() == Reason::kOk ? 1 : 0;
                    if (mem.Verdict() != Reason::kOk) continue;
                    const Prediction pred = cm.PredictWith(c, *priced, &mem);
                    Candidate cand{c, pred, framework};
                    if (res.forbidden.empty()) {
                      res.forbidden.push_back(cand);
                    } else if (Better(cand, res.forbidden.front())) {
                      res.forbidden.front() = cand;
                    }
                    continue;
                  }
                  // Memory first: cheap, and most rejections are for memory.
                  if (states_overflow) {
                    fits_by_choice[ri] = 0;
                    ++res.rejected[static_cast<int>(Reason::kOutOfMemory)];
                    continue;
                  }
                  const MemoryBreakdown& mem = memory_of();
                  fits_by_choice[ri] = mem.Verdict() == Reason::kOk ? 1 : 0;
                  if (const Reason verdict = mem.Verdict(); verdict != Reason::kOk) {
                    ++res.rejected[static_cast<int>(verdict)];
                    continue;
                  }
                  ++res.feasible;
                  if (options_.memory_only) {
                    Prediction mp;
                    mp.memory = mem;
                    mp.fits = true;
                    offer(c, mp);
                    continue;
                  }
                  if (prune) {
                    // Exact pruning: a lower bound on the iteration time
                    // (ComputeFloorPerMicroBatch).
                    const double lb = floor_s[ri];
                    const bool out_of_top =
                        lb > bound_.load(std::memory_order_relaxed) || lb > keep;
                    if (out_of_top && lb >= options_.count_faster_than_s &&
                        (!options_.keep_pareto ||
                         ParetoDominated(res.pareto, lb, mem.reserved_GiB) ||
                         StrictlyDominated(front, lb, mem.reserved_GiB))) {
                      continue;
                    }
                  }
                  const Prediction pred = cm.PredictWith(c, *priced, &mem);
                  if (pred.iteration_time_s < options_.count_faster_than_s) ++res.faster;
                  offer(c, pred);
                }
              }
            }
          }
        }
      }
    }
  }  // moe_choices
  keep = Trim(&pool);
  if (prune) LowerBound(keep);
  res.top.assign(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(
                                                  pool.size(), std::max(options_.top_k, 0))));
  res.pool = std::move(pool);
  if (options_.keep_pareto && !res.pareto.empty()) {
    std::lock_guard<std::mutex> lock(front_mu_);
    for (const Candidate& q : res.pareto) {
      front_.emplace_back(q.prediction.memory.reserved_GiB, q.prediction.iteration_time_s);
    }
    std::sort(front_.begin(), front_.end());
    std::vector<std::pair<double, double>> kept;
    for (const auto& pt : front_) {
      if (kept.empty() || pt.second < kept.back().second) kept.push_back(pt);
    }
    front_ = std::move(kept);
  }
  return res;
}

bool SamePrediction(const Candidate& a, const Candidate& b) {
  const double ta = a.prediction.iteration_time_s, tb = b.prediction.iteration_time_s;
  return a.framework == b.framework && std::fabs(ta - tb) <= 1e-9 * std::max(ta, tb) &&
         std::fabs(a.prediction.memory.reserved_GiB - b.prediction.memory.reserved_GiB) <= 1e-9;
}

double Search::Trim(std::vector<Candidate>* pool) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<Candidate>& p = *pool;
  std::sort(p.begin(), p.end(),
            [this](const Candidate& a, const Candidate& b) { return Better(a, b); });
  if (options_.top_k <= 0) {
    p.clear();
    return -kInf;
  }
  if (p.empty()) return kInf;
  // Rows as RankForTrust forms them: a candidate joins the row whose first
  // member has its prediction. The band is a prefix of rows; a row past the
  // first top_k and past the band is needed by no ranking, nor is what follows.
  const bool by_time = options_.objective != Objective::kMemory;
  // Ranked by the pessimistic edge (Better); a candidate belongs to the band
  // when its point prediction lies within the best's pessimistic edge.
  const double band_limit = by_time ? p.front().prediction.pessimistic_time_s : -kInf;
  int rows = 0;
  size_t first = 0;   // the first member of the current row
  double kth = kInf;  // the pessimistic edge of the top_k-th row
  bool in_band = true;
  size_t n = 0;
  for (; n < p.size(); ++n) {
    if (rows > 0 && SamePrediction(p[first], p[n])) continue;
    in_band = in_band && p[n].prediction.iteration_time_s <= band_limit;
    if (rows == options_.top_k && !in_band) break;
    first = n;
    if (++rows == options_.top_k) kth = p[n].prediction.pessimistic_time_s;
  }
  p.erase(p.begin() + static_cast<std::ptrdiff_t>(n), p.end());
  if (!by_time || rows < options_.top_k) return kInf;
  // A candidate slower than this starts a row after the top_k-th (the margin
  // covers SamePrediction's tolerance) outside the band.
  return std::max(kth, band_limit) * (1.0 + 1e-8);
}

void Search::LowerBound(double t) const {
  double cur = bound_.load(std::memory_order_relaxed);
  while (t < cur && !bound_.compare_exchange_weak(cur, t, std::memory_order_relaxed)) {
  }
}

SearchResult Search::Merge(std::vector<SearchResult> parts) const {
  SearchResult out;
  std::vector<Candidate> all_pool, all_pareto;
  for (SearchResult& p : parts) {
    out.evaluated += p.evaluated;
    out.feasible += p.feasible;
    out.faster += p.faster;
    for (int i = 0; i < kNumReasons; ++i) out.rejected[i] += p.rejected[i];
    all_pool.insert(all_pool.end(), std::make_move_iterator(p.pool.begin()),
                    std::make_move_iterator(p.pool.end()));
    for (const Candidate& f : p.forbidden) {
      if (out.forbidden.empty()) out.forbidden.push_back(f);
      else if (Better(f, out.forbidden.front())) out.forbidden.front() = f;
    }
    all_pareto.insert(all_pareto.end(), p.pareto.begin(), p.pareto.end());
  }
  Trim(&all_pool);
  out.top.assign(all_pool.begin(),
                 all_pool.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(
                                        all_pool.size(), std::max(options_.top_k, 0))));
  out.pool = std::move(all_pool);
  // Pareto of the union: sort by memory, then keep strictly improving times.
  std::sort(all_pareto.begin(), all_pareto.end(), [](const Candidate& a, const Candidate& b) {
    if (a.prediction.memory.reserved_GiB != b.prediction.memory.reserved_GiB) {
      return a.prediction.memory.reserved_GiB < b.prediction.memory.reserved_GiB;
    }
    if (a.prediction.iteration_time_s != b.prediction.iteration_time_s) {
      return a.prediction.iteration_time_s < b.prediction.iteration_time_s;
    }
    return Key(a.config) < Key(b.config);
  });
  for (const Candidate& c : all_pareto) {
    if (out.pareto.empty() || c.prediction.iteration_time_s < out.pareto.back().prediction.iteration_time_s) {
      out.pareto.push_back(c);
    }
  }
  return out;
}

SearchResult Search::RunAll() const {
  std::vector<SearchResult> parts;
  parts.reserve(outer_.size());
  for (int i = 0; i < num_shards(); ++i) parts.push_back(RunShard(i));
  return Merge(std::move(parts));
}

Result<LongestSequence> FindLongestSequence(const FitsAt& fits, int64_t start, int64_t max_seq,
                                            int64_t fpdt_chunk) {
  LongestSequence out;
  int64_t lo = 0, hi = 0;
  auto probe = [&](int64_t n) -> Result<bool> {
    Candidate c;
    PT_ASSIGN_OR_RETURN(bool ok, fits(n, false, &c));
    if (ok) {
      lo = n;
      out.at_max = c;
    }
    return ok;
  };
  for (int64_t s = start; s <= max_seq; s *= 2) {
    PT_ASSIGN_OR_RETURN(bool ok, probe(s));
    if (ok) {
      hi = 0;
    } else if (hi == 0) {
      hi = s;
    }
  }
  if (lo > 0 && hi > 0) {
    while (hi - lo > 1024) {
      const int64_t mid = (lo + hi) / 2 / 1024 * 1024;
      if (mid <= lo) break;
      PT_ASSIGN_OR_RETURN(bool ok, probe(mid));
      if (!ok) hi = mid;
    }
    // FPDT runs whole chunks only (seq % fpdt_chunk == 0 past one chunk), so
    // the bisection can stop below a longer multiple of the chunk that fits.
    auto next_len = [&](int64_t l) {
      const bool fpdt = out.at_max.config.cp > 1 && out.at_max.config.cp_kind == CpKind::kFpdt;
      return fpdt && l >= fpdt_chunk ? (l / fpdt_chunk + 1) * fpdt_chunk : l + 1024;
    };
    for (int64_t n = next_len(lo); n <= max_seq; n = next_len(lo)) {
      PT_ASSIGN_OR_RETURN(bool ok, probe(n));
      if (!ok) {
        hi = n;
        break;
      }
      hi = 0;
    }
  }
  out.max_seq = lo;
  out.first_failing = hi;
  if (lo > 0 && hi == 0) {
    out.binding = "max_seq";
    return out;
  }
  // What stops the sequence from growing: would the first length that does
  // not fit fit with unlimited host memory?
  PT_ASSIGN_OR_RETURN(bool host, fits(lo > 0 ? hi : start, true, nullptr));
  out.binding = host ? "host_memory" : "gpu_memory";
  return out;
}

}  // namespace paratune::planner
