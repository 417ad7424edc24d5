#include "executor/run/report.h"

#include <iterator>
#include <variant>

#include "common/document.h"
#include "common/enum_names.h"

namespace paratune::executor {
namespace {

Status NonNegative(ObjectReader* r, std::string_view key, double* out, bool required) {
  if (required && !r->Has(key)) return r->Error(key, "is required");
  PT_RETURN_IF_ERROR(r->OptNumber(key, out));
  if (*out < 0) return r->Error(key, "must be >= 0");
  return Status::Ok();
}

// Reads `key` with `read` into *out when the object has it; absent leaves
// *out empty.
template <class T, class Read>
Status ReadOptional(ObjectReader* r, std::string_view key, std::optional<T>* out, Read read) {
  if (!r->Has(key)) {
    r->Ignore(key);
    return Status::Ok();
  }
  T v{};
  PT_RETURN_IF_ERROR(read(key, &v));
  *out = v;
  return Status::Ok();
}

OrderedJson OptionalNumber(const std::optional<double>& v) {
  return v ? OrderedJson(*v) : OrderedJson(nullptr);
}

// The environment block's fields in document order: RunReportToJson writes
// and ParseRunReport reads this one list. Only tool and backend are required;
// the rest are absent from reports written before them.
struct EnvironmentField {
  const char* key;
  std::variant<std::string RunEnvironment::*, std::vector<std::string> RunEnvironment::*,
               int RunEnvironment::*, int64_t RunEnvironment::*, double RunEnvironment::*,
               std::map<std::string, std::string> RunEnvironment::*>
      member;
  bool required = false;
};
const EnvironmentField kEnvironmentFields[] = {
    {"tool", &RunEnvironment::tool, true},
    {"backend", &RunEnvironment::backend, true},
    {"argv", &RunEnvironment::argv},
    {"hosts", &RunEnvironment::hosts},
    {"world_size", &RunEnvironment::world_size},
    {"device", &RunEnvironment::device},
    {"device_memory_bytes", &RunEnvironment::device_memory_bytes},
    {"device_sm_clock_GHz", &RunEnvironment::device_sm_clock_GHz},
    {"device_sm_clock_now_GHz", &RunEnvironment::device_sm_clock_now_GHz},
    {"device_sm_clock_max_GHz", &RunEnvironment::device_sm_clock_max_GHz},
    {"versions", &RunEnvironment::versions},
    {"created_at", &RunEnvironment::created_at},
};

// One environment field, by its type. `required` is honoured for strings,
// the only required fields.
Status ReadField(ObjectReader* r, std::string_view key, std::string* out, bool required) {
  return required ? r->String(key, out) : r->OptString(key, out);
}
Status ReadField(ObjectReader* r, std::string_view key, std::vector<std::string>* out, bool) {
  return r->OptStringList(key, out);
}
Status ReadField(ObjectReader* r, std::string_view key, int* out, bool) {
  return r->OptInt(key, out);
}
Status ReadField(ObjectReader* r, std::string_view key, int64_t* out, bool) {
  return r->OptInteger(key, out);
}
Status ReadField(ObjectReader* r, std::string_view key, double* out, bool) {
  return r->OptNumber(key, out);
}
Status ReadField(ObjectReader* r, std::string_view key, std::map<std::string, std::string>* out,
                 bool) {
  if (!r->Has(key)) {
    r->Ignore(key);
    return Status::Ok();
  }
  const Json& v = r->Raw(key);
  if (!v.is_object()) return r->Error(key, "must be an object of strings");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->is_string()) return r->Error(key, "must be an object of strings");
    (*out)[it.key()] = it->get<std::string>();
  }
  return Status::Ok();
}

// {"measured_s": ..., "predicted_s": ...}, both required and >= 0.
Status ParseMeasuredPredicted(ObjectReader* parent, std::string_view key, TermTimes* t) {
  if (!parent->Has(key)) return parent->Error(key, "is required");
  ObjectReader r(parent->Raw(key), parent->PointerOf(key));
  PT_RETURN_IF_ERROR(NonNegative(&r, "measured_s", &t->measured_s, true));
  PT_RETURN_IF_ERROR(NonNegative(&r, "predicted_s", &t->predicted_s, true));
  t->source = Source::kMeasured;
  return r.Finish();
}

// The MoE layer block's fields in document order: MoeLayerToJson writes and
// ParseMoeLayer reads this one list. Every field is required; integers are at
// least `min`, times at least 0.
struct MoeLayerField {
  const char* key;
  std::variant<int MoeLayerReport::*, int64_t MoeLayerReport::*, bool MoeLayerReport::*,
               TermTimes MoeLayerReport::*, double MoeLayerReport::*>
      member;
  int64_t min = 1;
};
const MoeLayerField kMoeLayerFields[] = {
    {"ep", &MoeLayerReport::ep},
    {"etp", &MoeLayerReport::etp},
    {"as_planned", &MoeLayerReport::as_planned},
    {"tokens", &MoeLayerReport::tokens},
    {"local_experts", &MoeLayerReport::local_experts},
    {"rows_per_expert", &MoeLayerReport::rows_per_expert},
    {"a2a_bytes_per_rank", &MoeLayerReport::a2a_bytes_per_rank, 0},
    {"a2a", &MoeLayerReport::a2a},
    {"experts", &MoeLayerReport::experts},
    {"layer_measured_s", &MoeLayerReport::layer_measured_s},
};

// One MoE layer field, by its type: integers (int, int64_t) checked against
// `min`, a flag, a measured/predicted pair, a time.
template <class Int>
Status ReadMoeField(ObjectReader* r, const MoeLayerField& f, Int* out) {
  int64_t v = 0;
  PT_RETURN_IF_ERROR(r->Integer(f.key, &v));
  if (v < f.min) return r->Error(f.key, "must be >= " + std::to_string(f.min));
  *out = static_cast<Int>(v);
  return Status::Ok();
}
Status ReadMoeField(ObjectReader* r, const MoeLayerField& f, bool* out) {
  return r->Bool(f.key, out);
}
Status ReadMoeField(ObjectReader* r, const MoeLayerField& f, TermTimes* out) {
  return ParseMeasuredPredicted(r, f.key, out);
}
Status ReadMoeField(ObjectReader* r, const MoeLayerField& f, double* out) {
  return NonNegative(r, f.key, out, true);
}

OrderedJson MoeFieldJson(const TermTimes& t) {
  return {{"measured_s", t.measured_s}, {"predicted_s", t.predicted_s}};
}
template <class T>
OrderedJson MoeFieldJson(T v) {
  return v;
}

Result<MoeLayerReport> ParseMoeLayer(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  MoeLayerReport m;
  for (const MoeLayerField& f : kMoeLayerFields) {
    PT_RETURN_IF_ERROR(
        std::visit([&](auto member) { return ReadMoeField(&r, f, &(m.*member)); }, f.member));
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return m;
}

OrderedJson MoeLayerToJson(const MoeLayerReport& m) {
  OrderedJson j;
  for (const MoeLayerField& f : kMoeLayerFields) {
    std::visit([&](auto member) { j[f.key] = MoeFieldJson(m.*member); }, f.member);
  }
  return j;
}

Result<CandidateReport> ParseCandidate(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  CandidateReport c;
  int64_t rank = 0;
  PT_RETURN_IF_ERROR(r.Integer("rank", &rank));
  if (rank < 1) return r.Error("rank", "must be >= 1");
  c.rank = static_cast<int>(rank);
  if (!r.Has("config")) return r.Error("config", "is required");
  PT_ASSIGN_OR_RETURN(c.config, planner::ParseConfig(r.Raw("config"), r.PointerOf("config"), 0));
  r.Ignore("config_string");
  PT_RETURN_IF_ERROR(r.Parsed("status", ParseOutcome, &c.status));
  PT_RETURN_IF_ERROR(r.String("reason", &c.reason));
  PT_RETURN_IF_ERROR(NonNegative(&r, "predicted_s", &c.predicted_s, true));
  auto non_negative = [&r](std::string_view key, double* v) {
    return NonNegative(&r, key, v, true);
  };
  auto number = [&r](std::string_view key, double* v) { return r.Number(key, v); };
  auto integer = [&r](std::string_view key, int* v) { return r.OptInt(key, v); };
  PT_RETURN_IF_ERROR(ReadOptional(&r, "measured_s", &c.measured_s, non_negative));
  PT_RETURN_IF_ERROR(ReadOptional(&r, "error", &c.error, number));
  PT_RETURN_IF_ERROR(ReadOptional(&r, "plan_predicted_s", &c.plan_predicted_s, non_negative));
  PT_RETURN_IF_ERROR(ReadOptional(&r, "measured_rank", &c.measured_rank, integer));
  if (c.status == Outcome::kOk && !c.measured_s) {
    return r.Error("measured_s", "is required when status is \"ok\"");
  }
  if (!r.Has("breakdown")) return r.Error("breakdown", "is required");
  ObjectReader br(r.Raw("breakdown"), r.PointerOf("breakdown"));
  for (int i = 0; i < kNumTerms; ++i) {
    const char* key = TermName(static_cast<Term>(i));
    // Reports before v1.1 of the model have no host term; before mixture-of-
    // experts steps were extrapolated, no comm_ep.
    if ((static_cast<Term>(i) == Term::kHost || static_cast<Term>(i) == Term::kCommEp) &&
        !br.Has(key))
      continue;
    if (!br.Has(key)) return br.Error(key, "is required");
    ObjectReader tr(br.Raw(key), br.PointerOf(key));
    TermTimes& t = c.breakdown[static_cast<size_t>(i)];
    PT_RETURN_IF_ERROR(NonNegative(&tr, "measured_s", &t.measured_s, false));
    PT_RETURN_IF_ERROR(NonNegative(&tr, "predicted_s", &t.predicted_s, true));
    PT_RETURN_IF_ERROR(tr.OptParsed("source", ParseSource, &t.source));
    PT_RETURN_IF_ERROR(tr.Finish());
  }
  PT_RETURN_IF_ERROR(br.Finish());
  PT_RETURN_IF_ERROR(r.OptStringList("measured_parts", &c.measured_parts));
  PT_RETURN_IF_ERROR(r.OptStringList("modelled_parts", &c.modelled_parts));
  if (r.Has("plan_ranks_run")) {
    const Json& a = r.Raw("plan_ranks_run");
    if (!a.is_array()) return r.Error("plan_ranks_run", "must be an array of integers");
    for (const Json& v : a) {
      if (!v.is_number_integer()) return r.Error("plan_ranks_run", "must be an array of integers");
      c.plan_ranks_run.push_back(v.get<int>());
    }
  } else {
    r.Ignore("plan_ranks_run");
  }
  if (r.Has("memory_GiB")) {
    ObjectReader mr(r.Raw("memory_GiB"), r.PointerOf("memory_GiB"));
    PT_RETURN_IF_ERROR(NonNegative(&mr, "predicted", &c.memory_predicted_GiB, false));
    PT_RETURN_IF_ERROR(NonNegative(&mr, "allocated", &c.memory_allocated_GiB, false));
    PT_RETURN_IF_ERROR(NonNegative(&mr, "scratch_beyond", &c.scratch_beyond_GiB, false));
    PT_RETURN_IF_ERROR(mr.Finish());
  } else {
    r.Ignore("memory_GiB");
  }
  PT_RETURN_IF_ERROR(NonNegative(&r, "wall_s", &c.slice_wall_s, false));
  if (r.Has("moe_layer")) {
    PT_ASSIGN_OR_RETURN(c.moe_layer, ParseMoeLayer(r.Raw("moe_layer"), r.PointerOf("moe_layer")));
  } else {
    r.Ignore("moe_layer");
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return c;
}

}  // namespace

namespace {
// By value, in the order of each enum's declaration (report.h).
constexpr const char* kTermNames[] = {"compute", "recompute", "comm_x",    "comm_y",
                                      "comm_z",  "comm_cp",   "comm_data", "comm_pp",
                                      "bubble",  "optimizer", "offload",   "host",
                                      "comm_ep"};
static_assert(std::size(kTermNames) == kNumTerms);
constexpr const char* kSourceNames[] = {"measured", "scaled", "derived", "modelled"};
constexpr const char* kOutcomeNames[] = {"ok", "oom", "failed", "waived"};
}  // namespace

const char* TermName(Term t) { return EnumName(t, kTermNames); }

const char* SourceName(Source s) { return EnumName(s, kSourceNames); }

Result<Source> ParseSource(const std::string& s) {
  if (auto v = EnumFromName<Source>(s, kSourceNames)) return *v;
  return Status::InvalidArgument("must be \"measured\", \"scaled\", \"derived\" or \"modelled\"");
}

const char* OutcomeName(Outcome o) { return EnumName(o, kOutcomeNames); }

Result<Outcome> ParseOutcome(const std::string& s) {
  if (auto v = EnumFromName<Outcome>(s, kOutcomeNames)) return *v;
  return Status::InvalidArgument("must be \"ok\", \"oom\", \"failed\" or \"waived\"");
}

OrderedJson RunReportToJson(const RunReport& r) {
  OrderedJson j;
  j["schema"] = kRunReportSchema;
  j["complete"] = r.complete;
  j["model"] = r.model;
  j["cluster"] = r.cluster;
  j["cluster_fingerprint"] = r.cluster_fingerprint;
  j["profile"] = r.profile;
  j["gpus"] = r.gpus;
  j["plan_gpu"] = r.plan_gpu;
  j["measured_gpu"] = r.measured_gpu;
  j["corrections"] = {{"compute", r.corrections.compute},
                      {"communication", r.corrections.communication},
                      {"memory_bound", r.corrections.memory_bound}};
  OrderedJson env;
  for (const EnvironmentField& f : kEnvironmentFields) {
    std::visit([&](auto member) { env[f.key] = r.environment.*member; }, f.member);
  }
  j["environment"] = env;
  j["measurement"] = {{"slice_layers", r.slice_layers},
                      {"warmup", r.warmup},
                      {"samples", r.samples},
                      {"extrapolation", r.extrapolation}};
  OrderedJson cands = OrderedJson::array();
  for (const CandidateReport& c : r.candidates) {
    OrderedJson cj;
    cj["rank"] = c.rank;
    cj["config"] = planner::ConfigToJson(c.config);
    cj["config_string"] = planner::ConfigToString(c.config);
    cj["status"] = OutcomeName(c.status);
    cj["reason"] = c.reason;
    cj["predicted_s"] = c.predicted_s;
    cj["measured_s"] = OptionalNumber(c.measured_s);
    cj["error"] = OptionalNumber(c.error);
    cj["plan_predicted_s"] = OptionalNumber(c.plan_predicted_s);
    cj["measured_rank"] = c.measured_rank ? OrderedJson(*c.measured_rank) : OrderedJson(nullptr);
    OrderedJson br;
    for (int i = 0; i < kNumTerms; ++i) {
      const TermTimes& t = c.breakdown[static_cast<size_t>(i)];
      OrderedJson tj;
      tj["measured_s"] =
          c.status == Outcome::kOk ? OrderedJson(t.measured_s) : OrderedJson(nullptr);
      tj["predicted_s"] = t.predicted_s;
      tj["source"] = SourceName(t.source);
      br[TermName(static_cast<Term>(i))] = tj;
    }
    cj["breakdown"] = br;
    cj["measured_parts"] = c.measured_parts;
    cj["modelled_parts"] = c.modelled_parts;
    cj["plan_ranks_run"] = c.plan_ranks_run;
    cj["memory_GiB"] = {{"predicted", c.memory_predicted_GiB},
                        {"allocated", c.memory_allocated_GiB},
                        {"scratch_beyond", c.scratch_beyond_GiB}};
    cj["wall_s"] = c.slice_wall_s;
    if (c.moe_layer) cj["moe_layer"] = MoeLayerToJson(*c.moe_layer);
    cands.push_back(cj);
  }
  j["candidates"] = cands;
  return j;
}

Result<RunReport> ParseRunReport(const Json& j) {
  ObjectReader r(j, "");
  RunReport rep;
  std::string schema;
  PT_RETURN_IF_ERROR(r.String("schema", &schema));
  if (schema != kRunReportSchema && schema != kRunReportSchemaV1) {
    return r.Error("schema", std::string("must be \"") + kRunReportSchema + "\" or \"" +
                                 kRunReportSchemaV1 + "\" (got \"" + schema + "\")");
  }
  PT_RETURN_IF_ERROR(r.Bool("complete", &rep.complete));
  PT_RETURN_IF_ERROR(r.String("model", &rep.model));
  PT_RETURN_IF_ERROR(r.String("cluster", &rep.cluster));
  PT_RETURN_IF_ERROR(r.String("cluster_fingerprint", &rep.cluster_fingerprint));
  PT_RETURN_IF_ERROR(r.OptString("profile", &rep.profile));
  int64_t gpus = 0;
  PT_RETURN_IF_ERROR(r.Integer("gpus", &gpus));
  if (gpus < 1) return r.Error("gpus", "must be >= 1");
  rep.gpus = static_cast<int>(gpus);
  PT_RETURN_IF_ERROR(r.OptString("plan_gpu", &rep.plan_gpu));  // absent before they were added
  PT_RETURN_IF_ERROR(r.OptString("measured_gpu", &rep.measured_gpu));
  if (!r.Has("corrections")) return r.Error("corrections", "is required");
  {
    ObjectReader cr(r.Raw("corrections"), r.PointerOf("corrections"));
    auto& f = rep.corrections;
    for (auto [key, out] : {std::pair<const char*, double*>{"compute", &f.compute},
                            {"communication", &f.communication},
                            {"memory_bound", &f.memory_bound}}) {
      PT_RETURN_IF_ERROR(cr.Number(key, out));
      if (!(*out > 0)) return cr.Error(key, "must be positive");
    }
    PT_RETURN_IF_ERROR(cr.Finish());
  }
  if (!r.Has("environment")) return r.Error("environment", "is required");
  {
    ObjectReader er(r.Raw("environment"), r.PointerOf("environment"));
    for (const EnvironmentField& f : kEnvironmentFields) {
      PT_RETURN_IF_ERROR(std::visit(
          [&](auto member) {
            return ReadField(&er, f.key, &(rep.environment.*member), f.required);
          },
          f.member));
    }
    PT_RETURN_IF_ERROR(er.Finish());
  }
  if (!r.Has("measurement")) return r.Error("measurement", "is required");
  {
    ObjectReader mr(r.Raw("measurement"), r.PointerOf("measurement"));
    PT_RETURN_IF_ERROR(mr.OptInt("slice_layers", &rep.slice_layers));
    PT_RETURN_IF_ERROR(mr.OptInt("warmup", &rep.warmup));
    PT_RETURN_IF_ERROR(mr.OptInt("samples", &rep.samples));
    PT_RETURN_IF_ERROR(mr.OptString("extrapolation", &rep.extrapolation));
    PT_RETURN_IF_ERROR(mr.Finish());
  }
  if (!r.Has("candidates") || !r.Raw("candidates").is_array()) {
    return r.Error("candidates", "must be an array");
  }
  const Json& cands = r.Raw("candidates");
  for (size_t i = 0; i < cands.size(); ++i) {
    PT_ASSIGN_OR_RETURN(CandidateReport c, ParseCandidate(cands[i], r.PointerOf("candidates") +
                                                                        "/" + std::to_string(i)));
    rep.candidates.push_back(std::move(c));
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return rep;
}

Result<RunReport> LoadRunReport(const std::string& path) {
  return LoadDocument(path, "run report", &ParseRunReport);
}

}  // namespace paratune::executor
