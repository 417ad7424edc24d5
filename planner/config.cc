#include "planner/config.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>

#include "common/enum_names.h"
#include "common/strings.h"

namespace paratune::planner {

namespace {
// By value, in the order of each enum's declaration (config.h).
constexpr const char* kCpKindNames[] = {"ring", "ulysses", "fpdt"};
constexpr const char* kRecomputeNames[] = {"none", "selective", "full"};
constexpr const char* kMoeDispatcherNames[] = {"alltoall", "allgather", "deepep", "hybridep"};
static_assert(std::size(kMoeDispatcherNames) == kNumMoeDispatchers);
constexpr const char* kPpScheduleNames[] = {"1f1b", "zb-h1", "zb-v", "dualpipev"};
static_assert(std::size(kPpScheduleNames) == kNumPpSchedules);
constexpr const char* kDimNames[] = {"x", "y", "cp", "z", "data", "pp"};
static_assert(std::size(kDimNames) == kNumDims);
}  // namespace

const char* CpKindName(CpKind k) { return EnumLookup(k, kCpKindNames, "ring"); }

const char* RecomputeName(Recompute r) { return EnumLookup(r, kRecomputeNames, "none"); }

const char* MoeDispatcherName(MoeDispatcher d) {
  return EnumLookup(d, kMoeDispatcherNames, "alltoall");
}

Result<MoeDispatcher> ParseMoeDispatcher(const std::string& s) {
  return ParseEnumName<MoeDispatcher>(s, kMoeDispatcherNames, "a moe_dispatcher");
}

const char* PpScheduleName(PpSchedule s, int vpp) {
  if (s == PpSchedule::k1F1B && vpp > 1) return "interleaved";
  return EnumLookup(s, kPpScheduleNames, "1f1b");
}

Result<PpSchedule> ParsePpSchedule(const std::string& s) {
  if (s == "interleaved") return PpSchedule::k1F1B;
  if (auto p = EnumFromName<PpSchedule>(s, kPpScheduleNames)) return *p;
  return Status::InvalidArgument("'" + s +
                                 "' is not a pipeline schedule (1f1b | interleaved | zb-h1 | "
                                 "zb-v | dualpipev)");
}

Result<CpKind> ParseCpKind(const std::string& s) {
  // The --cp-comm-type values paratune writes for Megatron (frameworks/megatron.cc).
  if (s == "p2p") return CpKind::kRing;
  if (s == "a2a") return CpKind::kUlysses;
  return ParseEnumName<CpKind>(s, kCpKindNames, "a cp_kind");
}

constexpr const char* kRecomputeModuleNames[] = {"core_attn", "layernorm",       "mlp",
                                                 "moe_act",   "moe",             "shared_experts",
                                                 "mla_up_proj"};
static_assert(std::size(kRecomputeModuleNames) == kNumRecomputeModules);

const char* RecomputeModuleName(RecomputeModule m) {
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if (m == (1 << i)) return kRecomputeModuleNames[i];
  }
  return "?";
}

std::string RecomputeModulesName(uint8_t modules) {
  std::string out;
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if (!(modules & (1 << i))) continue;
    if (!out.empty()) out += '+';
    out += kRecomputeModuleNames[i];
  }
  return out;
}

Result<uint8_t> ParseRecomputeModules(const std::string& s) {
  uint8_t modules = 0;
  std::string name;
  auto take = [&]() -> Status {
    if (name.empty()) return Status::Ok();
    int bit = -1;
    for (int i = 0; i < kNumRecomputeModules; ++i) {
      if (name == kRecomputeModuleNames[i]) bit = i;
    }
    if (bit < 0) {
      return Status::InvalidArgument("'" + name + "' is not a recompute module (" +
                                     RecomputeModulesName(0x7f) + ")");
    }
    if (modules & (1 << bit)) return Status::InvalidArgument("'" + name + "' is named twice");
    modules |= static_cast<uint8_t>(1 << bit);
    name.clear();
    return Status::Ok();
  };
  for (char ch : s) {
    if (ch == '+' || ch == ',' || ch == ' ') {
      PT_RETURN_IF_ERROR(take());
    } else {
      name += ch;
    }
  }
  PT_RETURN_IF_ERROR(take());
  if (modules == 0) {
    return Status::InvalidArgument("recompute modules: name at least one (" +
                                   RecomputeModulesName(0x7f) + ")");
  }
  return modules;
}

Result<Recompute> ParseRecompute(const std::string& s) {
  if (s == "off") return Recompute::kNone;
  return ParseEnumName<Recompute>(s, kRecomputeNames, "a recompute mode");
}

const char* DimName(Dim d) { return EnumName(d, kDimNames); }

std::string PlacementToString(const Placement& p) {
  std::string out;
  for (int i = 0; i < kNumDims; ++i) {
    if (i) out += '-';
    out += DimName(p.order[i]);
  }
  return out;
}

Result<Placement> ParsePlacement(const std::string& s) {
  std::vector<std::string> parts = Split(s, '-');
  if (parts.size() == 1) parts = Split(s, ',');
  Placement p;
  bool seen[kNumDims] = {};
  if (parts.size() != kNumDims) {
    return Status::InvalidArgument("placement '" + s +
                                   "' must list each of x, y, cp, z, data, pp once, innermost "
                                   "first, e.g. x-y-cp-z-data-pp");
  }
  for (int i = 0; i < kNumDims; ++i) {
    const std::string& n = parts[i];
    // "tp" and "dp" are Megatron's names of y and data.
    std::string_view key = n;
    if (n == "tp") key = "y";
    if (n == "dp") key = "data";
    const std::optional<Dim> named = EnumFromName<Dim>(key, kDimNames);
    if (!named) return Status::InvalidArgument("placement: unknown dimension '" + n + "'");
    const Dim d = *named;
    if (seen[static_cast<int>(d)]) {
      return Status::InvalidArgument("placement: dimension '" + n + "' appears twice");
    }
    seen[static_cast<int>(d)] = true;
    p.order[i] = d;
  }
  return p;
}

int ParallelConfig::Degree(Dim d) const {
  switch (d) {
    case Dim::kX: return gx;
    case Dim::kY: return gy;
    case Dim::kCp: return cp;
    case Dim::kZ: return gz;
    case Dim::kData: return gdata;
    case Dim::kPp: return pp;
  }
  return 1;
}

int ParallelConfig::Stride(Dim d) const {
  int stride = 1;
  for (Dim o : placement.order) {
    if (o == d) return stride;
    stride *= Degree(o);
  }
  return stride;
}

namespace {

Status PositiveInt(ObjectReader& r, const char* key, int* out) {
  PT_RETURN_IF_ERROR(r.OptInt(key, out));
  if (*out < 1) return r.Error(key, "must be a positive integer");
  return Status::Ok();
}

}  // namespace

Result<ParallelConfig> ParseConfig(const Json& j, const std::string& pointer, int64_t gpus) {
  ParallelConfig c;
  ObjectReader r(j, pointer);
  int tp = 0, dp = 0;
  if (r.Has("tp")) PT_RETURN_IF_ERROR(PositiveInt(r, "tp", &tp));
  else r.Ignore("tp");
  PT_RETURN_IF_ERROR(PositiveInt(r, "gx", &c.gx));
  PT_RETURN_IF_ERROR(PositiveInt(r, "gy", &c.gy));
  if (tp > 0) {
    if (r.Has("gy") && c.gy != tp) {
      return r.Error("gy", "conflicts with tp (tp is an alias of gy)");
    }
    if (c.gx != 1) return r.Error("tp", "tp (Megatron) needs gx = 1; use gx and gy for AxoNN");
    c.gy = tp;
  }
  PT_RETURN_IF_ERROR(PositiveInt(r, "gz", &c.gz));
  if (r.Has("dp")) PT_RETURN_IF_ERROR(PositiveInt(r, "dp", &dp));
  else r.Ignore("dp");
  const bool has_gdata = r.Has("gdata");
  PT_RETURN_IF_ERROR(PositiveInt(r, "gdata", &c.gdata));
  if (dp > 0) {
    if (has_gdata && c.gdata != dp) return r.Error("gdata", "conflicts with dp (dp is an alias of gdata)");
    c.gdata = dp;
  }
  PT_RETURN_IF_ERROR(PositiveInt(r, "pp", &c.pp));
  PT_RETURN_IF_ERROR(PositiveInt(r, "vpp", &c.vpp));
  PT_RETURN_IF_ERROR(PositiveInt(r, "cp", &c.cp));
  if (r.Has("pp_schedule")) {
    std::string name;
    PT_RETURN_IF_ERROR(r.String("pp_schedule", &name));
    auto ps = ParsePpSchedule(name);
    if (!ps.ok()) return r.Error("pp_schedule", ps.status().message());
    c.pp_schedule = *ps;
    // The shapes each schedule runs on (planner/pipeline.h).
    if (name == "1f1b" && c.vpp > 1) {
      return r.Error("pp_schedule", "1f1b runs one stage per rank; vpp > 1 is \"interleaved\"");
    }
    if (name == "interleaved" && c.vpp < 2) {
      return r.Error("pp_schedule", "interleaved needs vpp >= 2 stages per rank");
    }
    if (c.pp_schedule != PpSchedule::k1F1B && c.pp < 2) {
      return r.Error("pp_schedule", name + " is a pipeline schedule: it needs pp >= 2");
    }
    if ((c.pp_schedule == PpSchedule::kZbV || c.pp_schedule == PpSchedule::kDualPipeV) &&
        c.vpp != 2) {
      return r.Error("pp_schedule", name + " places two stages per rank in a V: it needs vpp = 2");
    }
  } else {
    r.Ignore("pp_schedule");
  }
  PT_RETURN_IF_ERROR(r.OptInt("first_stage_layers", &c.first_stage_layers));
  PT_RETURN_IF_ERROR(r.OptInt("last_stage_layers", &c.last_stage_layers));
  if (c.first_stage_layers < 0) return r.Error("first_stage_layers", "must be >= 0 (0 = automatic)");
  if (c.last_stage_layers < 0) return r.Error("last_stage_layers", "must be >= 0 (0 = automatic)");
  PT_RETURN_IF_ERROR(r.OptInt("pp_embedding_layers", &c.pp_embedding_layers));
  PT_RETURN_IF_ERROR(r.OptInt("pp_loss_layers", &c.pp_loss_layers));
  if (c.pp_embedding_layers < 0) return r.Error("pp_embedding_layers", "must be >= 0 (0 = not counted)");
  if (c.pp_loss_layers < 0) return r.Error("pp_loss_layers", "must be >= 0 (0 = not counted)");
  PT_RETURN_IF_ERROR(r.OptParsed("cp_kind", ParseCpKind, &c.cp_kind));
  PT_RETURN_IF_ERROR(r.OptBool("sp", &c.sp));
  PT_RETURN_IF_ERROR(r.OptInt("zero", &c.zero));
  if (c.zero < 0 || c.zero > 3) return r.Error("zero", "must be 0, 1, 2 or 3");
  PT_RETURN_IF_ERROR(r.OptBool("distributed_optimizer", &c.distributed_optimizer));
  PT_RETURN_IF_ERROR(r.OptBool("qwz", &c.qwz));
  PT_RETURN_IF_ERROR(r.OptBool("hpz", &c.hpz));
  PT_RETURN_IF_ERROR(r.OptBool("qgz", &c.qgz));
  PT_RETURN_IF_ERROR(r.OptBool("offload_optimizer", &c.offload_optimizer));
  PT_RETURN_IF_ERROR(r.OptBool("offload_param", &c.offload_param));
  PT_RETURN_IF_ERROR(r.OptInt("offload_activation_layers", &c.offload_activation_layers));
  if (c.offload_activation_layers < 0) {
    return r.Error("offload_activation_layers", "must be >= 0 (0 = no activation offload)");
  }
  PT_RETURN_IF_ERROR(r.OptBool("cuda_graphs", &c.cuda_graphs));
  PT_RETURN_IF_ERROR(PositiveInt(r, "mbs", &c.mbs));
  PT_RETURN_IF_ERROR(r.OptParsed("recompute", ParseRecompute, &c.recompute));
  if (r.Has("recompute_modules") && !r.Raw("recompute_modules").is_null()) {
    // An array of Megatron's names or one "core_attn+mlp" string.
    std::string text;
    if (r.Raw("recompute_modules").is_array()) {
      std::vector<std::string> names;
      PT_RETURN_IF_ERROR(r.OptStringList("recompute_modules", &names));
      for (const std::string& n : names) text += n + "+";
    } else {
      PT_RETURN_IF_ERROR(r.String("recompute_modules", &text));
    }
    auto modules = ParseRecomputeModules(text);
    if (!modules.ok()) return r.Error("recompute_modules", modules.status().message());
    if (c.recompute != Recompute::kSelective) {
      return r.Error("recompute_modules", "needs recompute selective (the modules are what it recomputes)");
    }
    c.recompute_modules = *modules;
  } else {
    r.Ignore("recompute_modules");
  }
  for (const OverlapSwitch& sw : kOverlapSwitches) {
    PT_RETURN_IF_ERROR(r.OptBool(sw.key, &(c.*sw.field)));
  }
  PT_RETURN_IF_ERROR(PositiveInt(r, "ep", &c.ep));
  PT_RETURN_IF_ERROR(PositiveInt(r, "etp", &c.etp));
  PT_RETURN_IF_ERROR(r.OptParsed("moe_dispatcher", ParseMoeDispatcher, &c.moe_dispatcher));
  PT_RETURN_IF_ERROR(r.OptBool("moe_a2a_overlap", &c.moe_a2a_overlap));
  // The derived expert-data degree is written by ConfigToJson; accepted back only
  // when it agrees (checked once gdata is known).
  int edp_given = 0;
  if (r.Has("edp")) {
    PT_RETURN_IF_ERROR(PositiveInt(r, "edp", &edp_given));
  } else {
    r.Ignore("edp");
  }
  PT_RETURN_IF_ERROR(r.OptParsed("placement", ParsePlacement, &c.placement));
  PT_RETURN_IF_ERROR(r.Finish());

  // Derive the data degree when it was not given (Megatron: DP = world / (TP·PP·CP)).
  if (!has_gdata && dp == 0 && gpus > 0) {
    const int64_t other = int64_t{c.gx} * c.gy * c.gz * c.pp * c.cp;
    if (gpus % other != 0) {
      return Status::InvalidArgument(pointer + ": gpus (" + std::to_string(gpus) +
                                     ") is not divisible by gx·gy·gz·pp·cp (" +
                                     std::to_string(other) + "), so dp cannot be derived");
    }
    c.gdata = static_cast<int>(gpus / other);
  }
  if (edp_given > 0 && edp_given != c.expert_data()) {
    return Status::InvalidArgument(pointer + "/edp: is derived (ranks per stage / (ep · etp) = " +
                                   std::to_string(c.expert_data()) + "); leave it out");
  }
  return c;
}

namespace {

// One piece of the table's form as config keys; false when it is not one.
bool TableWord(const std::string& w, std::vector<std::pair<std::string, std::string>>* out) {
  static const std::pair<const char*, const char*> kSwitches[] = {
      {"sp", "sp"},   {"distopt", "distributed_optimizer"}, {"qwz", "qwz"},
      {"hpz", "hpz"}, {"qgz", "qgz"},                       {"cudagraph", "cuda_graphs"},
      {"a2a-overlap", "moe_a2a_overlap"}};
  for (const auto& [word, key] : kSwitches) {
    if (w == word) {
      out->emplace_back(key, "true");
      return true;
    }
  }
  if (ParseMoeDispatcher(w).ok()) {
    out->emplace_back("moe_dispatcher", w);
    return true;
  }
  if (ParsePpSchedule(w).ok()) {
    out->emplace_back("pp_schedule", w);
    return true;
  }
  return false;
}

// "a/b" into two integers' texts.
Result<std::pair<std::string, std::string>> SplitPair(const std::string& v, const std::string& sep,
                                                      const std::string& what) {
  const size_t at = v.find(sep);
  if (at == std::string::npos || at == 0 || at + sep.size() >= v.size()) {
    return Status::InvalidArgument("config: '" + what + "=" + v + "' must read " + what + "=A" +
                                   sep + "B");
  }
  return std::make_pair(v.substr(0, at), v.substr(at + sep.size()));
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> ConfigTextToPairs(std::string_view text) {
  std::string t(text);
  // The table's "(+3 same)": other configurations predicted the same.
  if (const size_t same = t.find("(+"); same != std::string::npos && t.find("same)", same) != std::string::npos) {
    t.erase(same, t.find("same)", same) + 5 - same);
  }
  for (char& ch : t) {
    if (ch == ',' || ch == '\t' || ch == '\n') ch = ' ';
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& piece : Split(t, ' ')) {
    const std::string p = Trim(piece);
    if (p.empty()) continue;
    const size_t eq = p.find('=');
    if (eq == std::string::npos) {
      if (TableWord(p, &out)) continue;
      return Status::InvalidArgument(
          "config: '" + p +
          "' is neither key=value nor a switch (sp, distopt, qwz, hpz, qgz, cudagraph, "
          "a2a-overlap, a dispatcher or a pipeline schedule)");
    }
    if (eq == 0) return Status::InvalidArgument("config: '" + p + "' has no key before '='");
    const std::string k = Trim(p.substr(0, eq)), v = Trim(p.substr(eq + 1));
    if (k == "cp" && v.find('(') != std::string::npos) {  // cp=2(ring)
      const size_t open = v.find('(');
      if (v.back() != ')') return Status::InvalidArgument("config: '" + p + "' must read cp=N(kind)");
      out.emplace_back("cp", v.substr(0, open));
      out.emplace_back("cp_kind", v.substr(open + 1, v.size() - open - 2));
    } else if (k == "emb/loss_layers") {
      PT_ASSIGN_OR_RETURN(auto ab, SplitPair(v, "/", k));
      out.emplace_back("pp_embedding_layers", ab.first);
      out.emplace_back("pp_loss_layers", ab.second);
    } else if (k == "stages") {
      PT_ASSIGN_OR_RETURN(auto ab, SplitPair(v, "/../", k));
      out.emplace_back("first_stage_layers", ab.first);
      out.emplace_back("last_stage_layers", ab.second);
    } else if (k == "offload") {
      for (const std::string& what : Split(v, '+')) {
        if (what == "opt") out.emplace_back("offload_optimizer", "true");
        else if (what == "param") out.emplace_back("offload_param", "true");
        else return Status::InvalidArgument("config: '" + p + "' must read offload=opt, param or opt+param");
      }
    } else if (k == "rc" && v.find('(') != std::string::npos) {  // rc=selective(core_attn+mlp)
      const size_t open = v.find('(');
      if (v.back() != ')') {
        return Status::InvalidArgument("config: '" + p + "' must read rc=selective(module+module)");
      }
      out.emplace_back("recompute", v.substr(0, open));
      out.emplace_back("recompute_modules", v.substr(open + 1, v.size() - open - 2));
    } else if (k == "rc") {
      out.emplace_back("recompute", v);
    } else if (k == "offload_act") {
      out.emplace_back("offload_activation_layers", v);
    } else if (k == "place") {
      out.emplace_back("placement", v);
    } else {
      out.emplace_back(k, v);
    }
  }
  if (out.empty()) return Status::InvalidArgument("config: empty (e.g. \"tp=8,pp=4,mbs=1\")");
  return out;
}

Result<Json> ConfigStringToJson(const std::string& text) {
  PT_ASSIGN_OR_RETURN(auto pairs, ConfigTextToPairs(text));
  Json j = Json::object();
  static const char* kStringKeys[] = {"cp_kind", "recompute", "placement", "moe_dispatcher",
                                      "pp_schedule", "recompute_modules"};
  for (auto& [k, v] : pairs) {
    if (j.contains(k)) return Status::InvalidArgument("--config: '" + k + "' given twice");
    const bool is_string =
        std::find_if(std::begin(kStringKeys), std::end(kStringKeys),
                     [&](const char* s) { return k == s; }) != std::end(kStringKeys);
    if (is_string) {
      j[k] = v;
    } else if (v == "true" || v == "on" || v == "yes") {
      j[k] = true;
    } else if (v == "false" || v == "off" || v == "no") {
      j[k] = false;
    } else {
      auto n = ParseInt(v, "--config " + k);
      if (!n.ok()) return n.status();
      j[k] = *n;
    }
  }
  return j;
}

OrderedJson ConfigToJson(const ParallelConfig& c) {
  OrderedJson j;
  if (c.gx == 1) {
    j["tp"] = c.gy;
  } else {
    j["gx"] = c.gx;
    j["gy"] = c.gy;
  }
  j["gz"] = c.gz;
  j["dp"] = c.gdata;
  j["pp"] = c.pp;
  j["vpp"] = c.vpp;
  // Only when set, so documents of 1F1B plans are unchanged.
  if (c.pp_schedule != PpSchedule::k1F1B) j["pp_schedule"] = PpScheduleName(c.pp_schedule);
  j["first_stage_layers"] = c.first_stage_layers;
  j["last_stage_layers"] = c.last_stage_layers;
  j["pp_embedding_layers"] = c.pp_embedding_layers;
  j["pp_loss_layers"] = c.pp_loss_layers;
  j["cp"] = c.cp;
  j["cp_kind"] = CpKindName(c.cp_kind);
  j["sp"] = c.sp;
  j["zero"] = c.zero;
  j["distributed_optimizer"] = c.distributed_optimizer;
  j["qwz"] = c.qwz;
  j["hpz"] = c.hpz;
  j["qgz"] = c.qgz;
  j["offload_optimizer"] = c.offload_optimizer;
  j["offload_param"] = c.offload_param;
  // Only when set, so documents of configurations without them are unchanged.
  if (c.offload_activation_layers > 0) j["offload_activation_layers"] = c.offload_activation_layers;
  if (c.cuda_graphs) j["cuda_graphs"] = true;
  j["mbs"] = c.mbs;
  j["recompute"] = RecomputeName(c.recompute);
  if (c.recompute == Recompute::kSelective && c.recompute_modules != kDefaultRecomputeModules) {
    OrderedJson names = OrderedJson::array();
    for (int i = 0; i < kNumRecomputeModules; ++i) {
      if (c.recompute_modules & (1 << i)) {
        names.push_back(RecomputeModuleName(static_cast<RecomputeModule>(1 << i)));
      }
    }
    j["recompute_modules"] = names;
  }
  for (const OverlapSwitch& sw : kOverlapSwitches) j[sw.key] = c.*sw.field;
  if (int64_t{c.ep} * c.etp > 1 || c.moe_dispatcher != MoeDispatcher::kAllToAll ||
      c.moe_a2a_overlap) {
    j["ep"] = c.ep;
    j["etp"] = c.etp;
    j["edp"] = c.expert_data();
    j["moe_dispatcher"] = MoeDispatcherName(c.moe_dispatcher);
    j["moe_a2a_overlap"] = c.moe_a2a_overlap;
  }
  j["placement"] = PlacementToString(c.placement);
  return j;
}

std::string ConfigToString(const ParallelConfig& c) {
  std::ostringstream os;
  if (c.gx > 1) os << "gx=" << c.gx << " gy=" << c.gy;
  else os << "tp=" << c.gy;
  if (c.gz > 1) os << " gz=" << c.gz;
  os << " pp=" << c.pp;
  if (c.vpp > 1) os << " vpp=" << c.vpp;
  if (c.pp_schedule != PpSchedule::k1F1B) os << " " << PpScheduleName(c.pp_schedule);
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0) {
    os << " stages=" << c.first_stage_layers << "/../" << c.last_stage_layers;
  }
  if (c.pp_embedding_layers > 0 || c.pp_loss_layers > 0) {
    os << " emb/loss_layers=" << c.pp_embedding_layers << "/" << c.pp_loss_layers;
  }
  os << " dp=" << c.gdata;
  if (c.cp > 1) os << " cp=" << c.cp << "(" << CpKindName(c.cp_kind) << ")";
  if (c.sp) os << " sp";
  if (c.ep > 1 || c.etp > 1) {
    os << " ep=" << c.ep;
    if (c.etp > 1) os << " etp=" << c.etp;
    os << " edp=" << c.expert_data();
  }
  if (c.moe_dispatcher != MoeDispatcher::kAllToAll)
    os << " " << MoeDispatcherName(c.moe_dispatcher);
  if (c.moe_a2a_overlap) os << " a2a-overlap";
  if (c.zero > 0) os << " zero=" << c.zero;
  if (c.distributed_optimizer) os << " distopt";
  if (c.qwz) os << " qwz";
  if (c.hpz) os << " hpz";
  if (c.qgz) os << " qgz";
  if (c.offload_optimizer) os << " offload=opt";
  if (c.offload_param) os << (c.offload_optimizer ? "+param" : " offload=param");
  if (c.offload_activation_layers > 0) os << " offload_act=" << c.offload_activation_layers;
  if (c.cuda_graphs) os << " cudagraph";
  os << " mbs=" << c.mbs;
  if (c.recompute != Recompute::kNone) os << " rc=" << RecomputeName(c.recompute);
  if (c.recompute == Recompute::kSelective && c.recompute_modules != kDefaultRecomputeModules) {
    os << "(" << RecomputeModulesName(c.recompute_modules) << ")";
  }
  if (!(c.placement == Placement{})) os << " place=" << PlacementToString(c.placement);
  return os.str();
}

}  // namespace paratune::planner
