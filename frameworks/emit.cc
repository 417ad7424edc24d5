#include "frameworks/emit.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>
#include <vector>

#include "common/enum_names.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "frameworks/emit_internal.h"

namespace paratune::planner {
namespace {

using emit_internal::FrameworkEmitter;
using emit_internal::Plan;
using emit_internal::Str;

// By value, in the order of EmitFormat's declaration (emit.h).
constexpr const char* kEmitFormatNames[] = {
    "megatron", "megatron-deepspeed", "deepspeed", "axonn", "torchtitan", "env", "json",
    "megatron-bridge"};

// The framework room behind a format (nullptr: env and json, which follow no framework).
const FrameworkEmitter* RoomOf(EmitFormat f) {
  switch (f) {
    case EmitFormat::kMegatron:
      return &emit_internal::MegatronEmitter();
    case EmitFormat::kMegatronDeepSpeed:
      return &emit_internal::MegatronDeepSpeedEmitter();
    case EmitFormat::kDeepSpeed:
      return &emit_internal::DeepSpeedEmitter();
    case EmitFormat::kAxonn:
      return &emit_internal::AxonnEmitter();
    case EmitFormat::kTorchtitan:
      return &emit_internal::TorchtitanEmitter();
    case EmitFormat::kMegatronBridge:
      return &emit_internal::MegatronBridgeEmitter();
    case EmitFormat::kEnv:
    case EmitFormat::kJson:
      return nullptr;
  }
  return nullptr;
}

bool FsdpPlan(const Plan& p) {
  return p.framework == Framework::kFsdp || p.framework == Framework::kTorchtitan;
}

// ZERO_STAGE: the ZeRO stage (1 for Megatron's distributed optimizer); for a
// plan priced for FSDP, 3 when it shards over gz (FSDP's full sharding splits
// parameters, gradients and optimizer states: ZeRO-3's partitioning).
int ZeroStageWord(const Plan& p) {
  if (FsdpPlan(p) && p.c.gz > 1) return 3;
  return p.c.zero > 0 ? p.c.zero : (p.c.distributed_optimizer ? 1 : 0);
}

std::string EmitEnv(const Plan& p) {
  const ParallelConfig& c = p.c;
  std::vector<std::pair<const char*, std::string>> vars = {
      {"TP", Str(c.tensor())},
      {"PP", Str(c.pp)},
      {"CP", Str(c.cp)},
      {"DP", Str(c.gdata)},
      {"SP", c.sp ? "1" : "0"},
      {"VP", Str(c.vpp)},
      {"MBS", Str(c.mbs)},
      {"GBS", Str(p.Gbs())},
      {"ZERO_STAGE", Str(ZeroStageWord(p))},
      {"RECOMPUTE", RecomputeName(c.recompute)},
      {"GX", Str(c.gx)},
      {"GY", Str(c.gy)},
      {"GZ", Str(c.gz)},
  };
  if (FsdpPlan(p)) {
    // torchtitan's names (parallelism.data_parallel_shard_degree and
    // data_parallel_replicate_degree, config/configs.py).
    vars.push_back({"DP_SHARD", Str(c.gz)});
    vars.push_back({"DP_REPLICATE", Str(c.gdata)});
  }
  std::string out;
  for (const auto& [k, v] : vars) out += std::string("export ") + k + "=" + v + "\n";
  return out;
}

double NumberOr(const Json& j, const char* key, double def) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : def;
}

Result<Plan> LoadPlan(const Json& plans, int rank) {
  Plan p;
  PT_ASSIGN_OR_RETURN(p.job, JobFromPlans(plans));
  if (!plans.contains("candidates") || !plans["candidates"].is_array()) {
    return Status::InvalidArgument("/candidates: must be an array");
  }
  const Json& cands = plans["candidates"];
  if (cands.empty()) {
    return Status::InvalidArgument(
        "/candidates: the plans document has no candidate (nothing fit)");
  }
  if (rank < 1 || rank > static_cast<int>(cands.size())) {
    return Status::InvalidArgument("--rank " + std::to_string(rank) + ": the plans document has " +
                                   std::to_string(cands.size()) + " candidate(s), ranks 1-" +
                                   std::to_string(cands.size()));
  }
  const Json& cand = cands[rank - 1];
  const std::string ptr = "/candidates/" + std::to_string(rank - 1);
  if (!cand.is_object() || !cand.contains("config")) {
    return Status::InvalidArgument(ptr + "/config: is required");
  }
  PT_ASSIGN_OR_RETURN(p.c, ParseConfig(cand["config"], ptr + "/config", p.job.gpus));
  if (p.c.world() != p.job.gpus) {
    return Status::InvalidArgument(ptr + "/config: the degrees multiply to " + Str(p.c.world()) +
                                   ", not the plan's " + Str(p.job.gpus) + " GPUs");
  }
  if (p.c.mbs < 1 || p.Gbs() % (int64_t{p.c.mbs} * p.c.gz * p.c.gdata) != 0) {
    return Status::InvalidArgument(ptr + "/config: global batch " + Str(p.Gbs()) +
                                   " is not divisible by mbs·gz·dp");
  }
  // The stack that priced the candidate (its split of layers over stages).
  p.framework = p.job.training.framework;
  if (cand.contains("framework")) {
    if (!cand["framework"].is_string())
      return Status::InvalidArgument(ptr + "/framework: must be a string");
    auto f = ParseFramework(cand["framework"].get<std::string>());
    if (!f.ok()) return Status::InvalidArgument(ptr + "/framework: " + f.status().message());
    p.framework = *f;
  }
  p.rank = rank;
  p.config_string = ConfigToString(p.c);
  if (cand.contains("prediction") && cand["prediction"].is_object()) {
    const Json& pr = cand["prediction"];
    p.iteration_time_s = NumberOr(pr, "iteration_time_s", -1);
    p.mfu = NumberOr(pr, "mfu", -1);
    p.published_mfu_ceiling = NumberOr(pr, "published_mfu_ceiling", -1);
    p.above_published_mfu = pr.contains("above_published_mfu") &&
                            pr["above_published_mfu"].is_boolean() &&
                            pr["above_published_mfu"].get<bool>();
    if (pr.contains("iteration_time_s_range") && pr["iteration_time_s_range"].is_array() &&
        pr["iteration_time_s_range"].size() == 2 && pr["iteration_time_s_range"][0].is_number() &&
        pr["iteration_time_s_range"][1].is_number()) {
      p.iteration_time_lo = pr["iteration_time_s_range"][0].get<double>();
      p.iteration_time_hi = pr["iteration_time_s_range"][1].get<double>();
    }
    if (pr.contains("memory_GiB")) {
      p.memory_reserved_GiB = NumberOr(pr["memory_GiB"], "reserved", -1);
      p.memory_capacity_GiB = NumberOr(pr["memory_GiB"], "capacity", -1);
    }
  }
  if (cand.contains("goodput") && cand["goodput"].is_object()) {
    const Json& g = cand["goodput"];
    // A document may come from anywhere (POST /v1/emit): the interval is a
    // whole number of steps in [1, 1e12] or the plan is refused.
    const double steps = NumberOr(g, "interval_steps", 0);
    if (!(steps >= 1 && steps <= 1e12) || steps != std::floor(steps)) {
      return Status::InvalidArgument(ptr + "/goodput/interval_steps: must be a whole number of steps in [1, 1e12]");
    }
    p.checkpoint_interval_steps = static_cast<int64_t>(steps);
    p.checkpoint_async = g.contains("checkpoint") && g["checkpoint"].is_object() &&
                         g["checkpoint"].contains("async") && g["checkpoint"]["async"].is_boolean() &&
                         g["checkpoint"]["async"].get<bool>();
  }
  const Json& tr = plans["job"]["training"];
  if (tr.contains("compile") && tr["compile"].is_boolean()) p.compile = tr["compile"].get<bool>();
  return p;
}

Result<std::string> EmitChecked(const Json& plans, int rank, EmitFormat format) {
  PT_ASSIGN_OR_RETURN(Plan p, LoadPlan(plans, rank));
  if (format == EmitFormat::kEnv) return EmitEnv(p);
  if (format == EmitFormat::kJson) return ConfigToJson(p.c).dump(2) + "\n";
  const FrameworkEmitter* room = RoomOf(format);
  PT_RETURN_IF_ERROR(room->check(p));
  return room->write(p);
}

Result<OrderedJson> SidecarChecked(const Json& plans, int rank, EmitFormat format) {
  PT_ASSIGN_OR_RETURN(Plan p, LoadPlan(plans, rank));
  const FrameworkEmitter* room = RoomOf(format);
  if (room) PT_RETURN_IF_ERROR(room->check(p));
  OrderedJson j;
  j["schema"] = kEmitSidecarSchema;
  j["format"] = EmitFormatName(format);
  if (room) {
    OrderedJson f;
    f["repository"] = room->follows.repository;
    f["commit"] = room->follows.commit;
    f["version"] = room->follows.version;
    f["files"] = room->follows.files;
    j["follows"] = f;
  } else {
    j["follows"] = nullptr;
  }
  OrderedJson job;
  job["model"] = p.job.model.name;
  job["cluster"] = p.job.cluster.name;
  job["gpus"] = p.job.gpus;
  job["seq_len"] = p.job.training.seq_len;
  job["global_batch"] = p.Gbs();
  j["job"] = job;
  j["rank"] = p.rank;
  j["framework"] = FrameworkName(p.framework);
  j["config_string"] = p.config_string;
  j["config"] = ConfigToJson(p.c);
  OrderedJson pred;
  if (p.iteration_time_s >= 0) {
    pred["iteration_time_s"] = p.iteration_time_s;
    if (p.iteration_time_lo >= 0)
      pred["iteration_time_s_range"] = {p.iteration_time_lo, p.iteration_time_hi};
    if (p.mfu >= 0) pred["mfu"] = p.mfu;
    if (p.published_mfu_ceiling > 0) {
      pred["published_mfu_ceiling"] = p.published_mfu_ceiling;
      pred["above_published_mfu"] = p.above_published_mfu;
    }
    if (p.memory_reserved_GiB >= 0) pred["memory_reserved_GiB"] = p.memory_reserved_GiB;
    if (p.memory_capacity_GiB >= 0) pred["memory_capacity_GiB"] = p.memory_capacity_GiB;
    j["predicted"] = pred;
  } else {
    j["predicted"] = nullptr;
  }
  if (p.checkpoint_interval_steps > 0) {
    OrderedJson ck;
    ck["interval_steps"] = p.checkpoint_interval_steps;
    ck["async"] = p.checkpoint_async;
    j["checkpoint"] = ck;
  }
  if (p.c.pp > 1) {
    OrderedJson pl;
    pl["split"] = PpSplitName(p.PricedSplit());
    pl["rank_layers"] = emit_internal::RankLayers(p);
    pl["chunk_layers"] = emit_internal::ChunkLayerList(p);
    j["pipeline"] = pl;
  }
  OrderedJson keep = OrderedJson::object();
  if (room) {
    for (const emit_internal::Keep& k : room->keep(p)) {
      keep[k.name] = {{"value", k.value}, {"why", k.why}};
    }
  }
  j["environment"] = keep;
  j["launcher"] = room ? room->launcher(p) : std::string();
  return j;
}

}  // namespace

Result<EmitFormat> ParseEmitFormat(const std::string& name) {
  if (auto f = EnumFromName<EmitFormat>(name, kEmitFormatNames)) return *f;
  const std::string hint = DidYouMean(
      name, std::vector<std::string>(std::begin(kEmitFormatNames), std::end(kEmitFormatNames)));
  return Status::InvalidArgument("--format '" + name + "' is not one of " +
                                 EnumNameList(kEmitFormatNames) + (hint.empty() ? "" : "; " + hint));
}

const char* EmitFormatName(EmitFormat f) { return EnumLookup(f, kEmitFormatNames, "json"); }

Result<std::string> EmitConfig(const Json& plans, int rank, EmitFormat format) {
  // Documents come from users (CLI, REST): a JSON type surprise is bad input, not a crash.
  try {
    return EmitChecked(plans, rank, format);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("not a valid plans document: ") + e.what());
  }
}

Result<OrderedJson> EmitSidecar(const Json& plans, int rank, EmitFormat format) {
  try {
    return SidecarChecked(plans, rank, format);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("not a valid plans document: ") + e.what());
  }
}

EmitFormat DefaultEmitFormat(const Json& plans) {
  std::string framework;
  if (plans.is_object() && plans.contains("job") && plans["job"].is_object() &&
      plans["job"].contains("training") && plans["job"]["training"].is_object()) {
    const Json& t = plans["job"]["training"];
    if (t.contains("framework") && t["framework"].is_string())
      framework = t["framework"].get<std::string>();
  }
  if (framework.empty() && plans.is_object() && plans.contains("space") &&
      plans["space"].is_string()) {
    const std::string space = plans["space"].get<std::string>();
    if (space == "deepspeed") framework = "megatron-deepspeed";
    if (space == "axonn") framework = "axonn";
    if (space == "fsdp") framework = "fsdp";
  }
  if (framework == "megatron-deepspeed") return EmitFormat::kMegatronDeepSpeed;
  if (framework == "deepspeed") return EmitFormat::kDeepSpeed;
  if (framework == "fsdp" || framework == "torchtitan") return EmitFormat::kTorchtitan;
  if (framework == "axonn") return EmitFormat::kAxonn;
  return EmitFormat::kMegatron;
}

}  // namespace paratune::planner
