#include "profiler/measurements.h"

namespace paratune::profiler {
namespace {

Status ReadStringArray(ObjectReader* r, std::string_view key, std::vector<std::string>* out) {
  if (!r->Has(key)) {
    r->Ignore(key);
    return Status::Ok();
  }
  const std::string pointer = r->PointerOf(key);
  const Json& a = r->Raw(key);
  if (!a.is_array()) return Status::InvalidArgument(pointer + ": must be an array of strings");
  out->clear();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) {
      return Status::InvalidArgument(pointer + "/" + std::to_string(i) + ": must be a string");
    }
    out->push_back(a[i].get<std::string>());
  }
  return Status::Ok();
}

}  // namespace

OrderedJson EnvironmentToJson(const Environment& env) {
  OrderedJson j = OrderedJson::object();
  j["tool"] = env.tool;
  j["backend"] = env.backend;
  j["argv"] = env.argv;
  j["hosts"] = env.hosts;
  j["world_size"] = env.world_size;
  j["ranks_per_node"] = env.ranks_per_node;
  j["nodes"] = env.nodes;
  j["device"] = env.device;
  OrderedJson versions = OrderedJson::object();
  for (const auto& [k, v] : env.versions) versions[k] = v;
  j["versions"] = std::move(versions);
  j["created_at"] = env.created_at;
  if (!env.sources.empty()) j["sources"] = env.sources;
  return j;
}

Result<Environment> ParseEnvironment(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  Environment env;
  PT_RETURN_IF_ERROR(r.String("tool", &env.tool));
  PT_RETURN_IF_ERROR(r.String("backend", &env.backend));
  PT_RETURN_IF_ERROR(ReadStringArray(&r, "argv", &env.argv));
  PT_RETURN_IF_ERROR(ReadStringArray(&r, "hosts", &env.hosts));
  int64_t v = 0;
  PT_RETURN_IF_ERROR(r.Integer("world_size", &v));
  if (v < 0) return r.Error("world_size", "must be >= 0");
  env.world_size = static_cast<int>(v);
  PT_RETURN_IF_ERROR(r.Integer("ranks_per_node", &v));
  if (v < 0) return r.Error("ranks_per_node", "must be >= 0");
  env.ranks_per_node = static_cast<int>(v);
  PT_RETURN_IF_ERROR(r.Integer("nodes", &v));
  if (v < 0) return r.Error("nodes", "must be >= 0");
  env.nodes = static_cast<int>(v);
  PT_RETURN_IF_ERROR(r.OptString("device", &env.device));
  if (r.Has("versions")) {
    const std::string vp = r.PointerOf("versions");
    const Json& vj = r.Raw("versions");
    if (!vj.is_object()) return Status::InvalidArgument(vp + ": must be an object of strings");
    for (auto it = vj.begin(); it != vj.end(); ++it) {
      if (!it->is_string()) {
        return Status::InvalidArgument(vp + "/" + JsonPointerToken(it.key()) +
                                       ": must be a string");
      }
      env.versions[it.key()] = it->get<std::string>();
    }
  } else {
    r.Ignore("versions");
  }
  PT_RETURN_IF_ERROR(r.String("created_at", &env.created_at));
  PT_RETURN_IF_ERROR(ReadStringArray(&r, "sources", &env.sources));
  PT_RETURN_IF_ERROR(r.Finish());
  return env;
}

OrderedJson MeasurementsToJson(const Measurements& m) {
  OrderedJson j = OrderedJson::object();
  j["schema"] = "paratune.measurements/v1";
  j["environment"] = EnvironmentToJson(m.env);
  OrderedJson colls = OrderedJson::array();
  for (const CollectiveSeries& s : m.collectives) {
    OrderedJson e = OrderedJson::object();
    e["collective"] = topology::CollectiveName(s.collective);
    e["group_size"] = s.group_size;
    e["stride"] = s.stride;
    e["groups"] = s.groups;
    e["concurrent_groups"] = s.concurrent_groups;
    e["tier"] = topology::TierName(s.tier);
    e["dtype"] = s.dtype;
    e["redop"] = s.redop;
    e["origin"] = s.origin;
    if (s.stated_avg_busbw_GBps >= 0) e["stated_avg_busbw_GBps"] = s.stated_avg_busbw_GBps;
    OrderedJson rows = OrderedJson::array();
    for (const SeriesRow& r : s.rows) {
      OrderedJson row = OrderedJson::object();
      row["size_bytes"] = r.size_bytes;
      row["count"] = r.count;
      row["time_us"] = r.time_us;
      row["algbw_GBps"] = r.algbw_GBps;
      row["busbw_GBps"] = r.busbw_GBps;
      if (r.wrong >= 0)
        row["wrong"] = r.wrong;
      else
        row["wrong"] = nullptr;
      if (!r.sample_time_us.empty()) row["sample_time_us"] = r.sample_time_us;
      rows.push_back(std::move(row));
    }
    e["rows"] = std::move(rows);
    colls.push_back(std::move(e));
  }
  j["collectives"] = std::move(colls);
  OrderedJson gemm = OrderedJson::array();
  for (const GemmSeries& g : m.gemm) {
    OrderedJson e = OrderedJson::object();
    e["precision"] = topology::PrecisionName(g.precision);
    OrderedJson rows = OrderedJson::array();
    for (const GemmRow& r : g.rows) {
      rows.push_back({{"m", r.m},
                      {"n", r.n},
                      {"k", r.k},
                      {"time_us", r.time_us},
                      {"tflops", r.tflops},
                      {"sample_time_us", r.sample_time_us}});
    }
    e["rows"] = std::move(rows);
    gemm.push_back(std::move(e));
  }
  j["gemm"] = std::move(gemm);
  CopyP2pWaivedToJson(m.copy, m.p2p, m.waived, &j);
  return j;
}

void CopyP2pWaivedToJson(const std::optional<CopyResult>& copy, const std::optional<P2PMatrix>& p2p,
                         const std::vector<Waived>& waived, OrderedJson* j) {
  if (copy) {
    (*j)["copy"] = {{"bytes", copy->bytes}, {"time_us", copy->time_us}, {"GBps", copy->GBps}};
  }
  if (p2p) (*j)["p2p"] = {{"ranks", p2p->ranks}, {"bytes", p2p->bytes}, {"GBps", p2p->GBps}};
  OrderedJson w = OrderedJson::array();
  for (const Waived& x : waived) w.push_back({{"what", x.what}, {"reason", x.reason}});
  (*j)["waived"] = std::move(w);
}

}  // namespace paratune::profiler
