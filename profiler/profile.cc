#include "profiler/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "common/document.h"
#include "common/strings.h"

namespace paratune::profiler {

using topology::Collective;
using topology::Precision;
using topology::Tier;

namespace {

// PT_RETURN_IF_ERROR around a call whose lambda argument uses PT_RETURN_IF_ERROR
// itself: a differently named temporary, so -Wshadow stays quiet.
#define RETURN_IF_ERROR_OUTER(expr)                \
  do {                                             \
    ::paratune::Status outer_status_ = (expr);     \
    if (!outer_status_.ok()) return outer_status_; \
  } while (0)

Result<Tier> ParseTier(const std::string& s) {
  if (s == "intra_node") return Tier::kIntraNode;
  if (s == "inter_node") return Tier::kInterNode;
  return Status::InvalidArgument("must be \"intra_node\" or \"inter_node\"");
}

// Reads an array under `key` calling `each(element, pointer)`.
template <typename F>
Status ForEachElement(ObjectReader* r, std::string_view key, bool required, F each) {
  if (!r->Has(key)) {
    if (required) return r->Error(key, "is required");
    r->Ignore(key);
    return Status::Ok();
  }
  const std::string pointer = r->PointerOf(key);
  const Json& a = r->Raw(key);
  if (!a.is_array()) return Status::InvalidArgument(pointer + ": must be an array");
  for (size_t i = 0; i < a.size(); ++i) {
    PT_RETURN_IF_ERROR(each(a[i], pointer + "/" + std::to_string(i)));
  }
  return Status::Ok();
}

Status PositiveNumber(ObjectReader* r, std::string_view key, double* out) {
  PT_RETURN_IF_ERROR(r->Number(key, out));
  if (!(*out > 0)) return r->Error(key, "must be positive");
  return Status::Ok();
}

Status NonNegativeNumber(ObjectReader* r, std::string_view key, double* out) {
  PT_RETURN_IF_ERROR(r->Number(key, out));
  if (*out < 0) return r->Error(key, "must be >= 0");
  return Status::Ok();
}

// Ranks counted in a profile (group sizes, strides, groups) stay within a
// job's GPU cap (2^24), so they fit an int (a fuzzed 2^32 wrapped to 0).
constexpr int64_t kMaxRanks = int64_t{1} << 24;

Status PositiveInt(ObjectReader* r, std::string_view key, int64_t min, int64_t* out,
                   int64_t max = std::numeric_limits<int64_t>::max()) {
  PT_RETURN_IF_ERROR(r->Integer(key, out));
  if (*out < min || *out > max) {
    return max == std::numeric_limits<int64_t>::max()
               ? r->Error(key, "must be >= " + std::to_string(min))
               : r->Error(key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return Status::Ok();
}

Result<CollectiveEntry> ParseCollectiveEntry(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  CollectiveEntry e;
  PT_RETURN_IF_ERROR(r.Parsed("collective", topology::ParseCollective, &e.collective));
  int64_t v = 0;
  PT_RETURN_IF_ERROR(PositiveInt(&r, "group_size", 2, &v, kMaxRanks));
  e.group_size = static_cast<int>(v);
  v = 1;
  PT_RETURN_IF_ERROR(r.OptInteger("stride", &v));
  if (v < 1 || v > kMaxRanks) return r.Error("stride", "must be in [1, 16777216]");
  e.stride = static_cast<int>(v);
  v = 1;
  PT_RETURN_IF_ERROR(r.OptInteger("concurrent_groups", &v));
  if (v < 1 || v > kMaxRanks) return r.Error("concurrent_groups", "must be in [1, 16777216]");
  e.concurrent_groups = static_cast<int>(v);
  PT_RETURN_IF_ERROR(r.Parsed("tier", ParseTier, &e.tier));
  PT_RETURN_IF_ERROR(r.OptString("dtype", &e.dtype));
  PT_RETURN_IF_ERROR(NonNegativeNumber(&r, "alpha_us", &e.alpha_us));
  PT_RETURN_IF_ERROR(PositiveNumber(&r, "beta_GBps", &e.beta_GBps));
  PT_RETURN_IF_ERROR(NonNegativeNumber(&r, "residual", &e.residual));
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "samples", true, [&](const Json& sj, const std::string& sp) {
        ObjectReader sr(sj, sp);
        ProfileSample ps;
        int64_t size = 0;
        PT_RETURN_IF_ERROR(PositiveInt(&sr, "size_bytes", 1, &size));
        ps.size_bytes = size;
        PT_RETURN_IF_ERROR(PositiveNumber(&sr, "time_us", &ps.time_us));
        PT_RETURN_IF_ERROR(NonNegativeNumber(&sr, "algbw_GBps", &ps.algbw_GBps));
        PT_RETURN_IF_ERROR(NonNegativeNumber(&sr, "busbw_GBps", &ps.busbw_GBps));
        PT_RETURN_IF_ERROR(sr.Finish());
        e.samples.push_back(ps);
        return Status::Ok();
      }));
  if (e.samples.empty()) return r.Error("samples", "must hold the samples the fit came from");
  PT_RETURN_IF_ERROR(r.Finish());
  return e;
}

Result<GemmEntry> ParseGemmEntry(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  GemmEntry g;
  PT_RETURN_IF_ERROR(r.Parsed("precision", topology::ParsePrecision, &g.precision));
  PT_RETURN_IF_ERROR(PositiveNumber(&r, "peak_tflops", &g.peak_tflops));
  PT_RETURN_IF_ERROR(r.OptString("peak_source", &g.peak_source));
  PT_RETURN_IF_ERROR(PositiveNumber(&r, "saturation_efficiency", &g.saturation_efficiency));
  PT_RETURN_IF_ERROR(NonNegativeNumber(&r, "size_half", &g.size_half));
  PT_RETURN_IF_ERROR(PositiveNumber(&r, "gamma", &g.gamma));
  PT_RETURN_IF_ERROR(NonNegativeNumber(&r, "residual", &g.residual));
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "curve", true, [&](const Json& cj, const std::string& cp) {
        ObjectReader cr(cj, cp);
        topology::EfficiencyPoint pt;
        PT_RETURN_IF_ERROR(PositiveNumber(&cr, "size", &pt.size));
        PT_RETURN_IF_ERROR(cr.Number("efficiency", &pt.efficiency));
        if (!(pt.efficiency > 0 && pt.efficiency <= 1))
          return cr.Error("efficiency", "must be in (0, 1]");
        if (!g.curve.empty() && !(pt.size > g.curve.back().size)) {
          return cr.Error("size", "must be larger than the previous point's (ascending sizes)");
        }
        PT_RETURN_IF_ERROR(cr.Finish());
        g.curve.push_back(pt);
        return Status::Ok();
      }));
  if (g.curve.empty()) return r.Error("curve", "must hold at least one point");
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "samples", true, [&](const Json& sj, const std::string& sp) {
        ObjectReader sr(sj, sp);
        GemmSample gs;
        PT_RETURN_IF_ERROR(PositiveInt(&sr, "m", 1, &gs.m));
        PT_RETURN_IF_ERROR(PositiveInt(&sr, "n", 1, &gs.n));
        PT_RETURN_IF_ERROR(PositiveInt(&sr, "k", 1, &gs.k));
        PT_RETURN_IF_ERROR(PositiveNumber(&sr, "time_us", &gs.time_us));
        PT_RETURN_IF_ERROR(PositiveNumber(&sr, "tflops", &gs.tflops));
        PT_RETURN_IF_ERROR(PositiveNumber(&sr, "efficiency", &gs.efficiency));
        PT_RETURN_IF_ERROR(sr.Finish());
        g.samples.push_back(gs);
        return Status::Ok();
      }));
  PT_RETURN_IF_ERROR(r.Finish());
  return g;
}

}  // namespace

Result<Profile> BuildProfile(const Measurements& m,
                             const std::optional<topology::ClusterSpec>& cluster,
                             const PeakTable& peaks, std::vector<std::string>* warnings) {
  Profile p;
  p.environment = m.env;
  p.cluster = cluster;
  p.cluster_fingerprint = cluster ? topology::Fingerprint(*cluster) : "";
  p.copy = m.copy;
  p.p2p = m.p2p;
  p.waived = m.waived;
  for (const CollectiveSeries& s : m.collectives) {
    std::vector<TimedSize> points;
    for (const SeriesRow& r : s.rows) {
      if (r.size_bytes > 0 && r.time_us > 0) points.push_back({r.size_bytes, r.time_us});
    }
    const std::string name = std::string(topology::CollectiveName(s.collective)) + " on " +
                             std::to_string(s.group_size) + " ranks (stride " +
                             std::to_string(s.stride) + ", " + topology::TierName(s.tier) + ")";
    auto fit = FitAlphaBeta(points, s.collective, s.group_size);
    if (!fit.ok()) {
      if (warnings) warnings->push_back(name + " not fitted: " + fit.status().message());
      continue;
    }
    std::vector<ProfileSample> samples;
    for (const SeriesRow& r : s.rows) {
      if (r.size_bytes > 0 && r.time_us > 0) {
        samples.push_back({r.size_bytes, r.time_us, r.algbw_GBps, r.busbw_GBps});
      }
    }
    p.collectives.push_back(CollectiveEntry{.collective = s.collective,
                                            .group_size = s.group_size,
                                            .stride = s.stride,
                                            .concurrent_groups = s.concurrent_groups,
                                            .tier = s.tier,
                                            .dtype = s.dtype,
                                            .alpha_us = fit->alpha_us,
                                            .beta_GBps = fit->beta_GBps,
                                            .residual = fit->residual,
                                            .samples = std::move(samples)});
  }
  for (const GemmSeries& g : m.gemm) {
    const char* pname = topology::PrecisionName(g.precision);
    std::vector<GemmTiming> timings;
    double best = 0;
    for (const GemmRow& r : g.rows) {
      timings.push_back({r.m, r.n, r.k, r.time_us});
      best = std::max(best, r.tflops);
    }
    GemmEntry e;
    e.precision = g.precision;
    e.peak_tflops = peaks.tflops[static_cast<size_t>(g.precision)];
    e.peak_source = peaks.source;
    if (!(e.peak_tflops > 0) || best > e.peak_tflops) {
      // No datasheet peak (or the datasheet is beaten): relative to the best rate seen.
      e.peak_tflops = best;
      e.peak_source = "largest measured rate";
    }
    auto fit = FitGemmCurve(timings, e.peak_tflops);
    if (!fit.ok()) {
      if (warnings)
        warnings->push_back(std::string(pname) +
                            " GEMM curve not fitted: " + fit.status().message());
      continue;
    }
    e.saturation_efficiency = fit->saturation_efficiency;
    e.size_half = fit->size_half;
    e.gamma = fit->gamma;
    e.residual = fit->residual;
    e.curve = fit->curve;
    for (const GemmRow& r : g.rows) {
      e.samples.push_back({r.m, r.n, r.k, r.time_us, r.tflops, r.tflops / e.peak_tflops});
    }
    p.gemm.push_back(std::move(e));
  }
  if (p.collectives.empty() && p.gemm.empty()) {
    std::string why = "no collective or GEMM series could be fitted";
    if (warnings && !warnings->empty()) why += ": " + warnings->front();
    return Status::InvalidArgument(why);
  }
  return p;
}

OrderedJson ProfileToJson(const Profile& p) {
  OrderedJson j = OrderedJson::object();
  j["schema"] = kProfileSchema;
  j["cluster_fingerprint"] = p.cluster_fingerprint;
  j["environment"] = EnvironmentToJson(p.environment);
  if (p.cluster) j["cluster"] = OrderedJson::parse(topology::ClusterSpecToJson(*p.cluster).dump());
  OrderedJson colls = OrderedJson::array();
  for (const CollectiveEntry& e : p.collectives) {
    OrderedJson c = OrderedJson::object();
    c["collective"] = topology::CollectiveName(e.collective);
    c["group_size"] = e.group_size;
    c["stride"] = e.stride;
    c["concurrent_groups"] = e.concurrent_groups;
    c["tier"] = topology::TierName(e.tier);
    c["dtype"] = e.dtype;
    c["alpha_us"] = e.alpha_us;
    c["beta_GBps"] = e.beta_GBps;
    c["residual"] = e.residual;
    OrderedJson samples = OrderedJson::array();
    for (const ProfileSample& s : e.samples) {
      samples.push_back({{"size_bytes", s.size_bytes},
                         {"time_us", s.time_us},
                         {"algbw_GBps", s.algbw_GBps},
                         {"busbw_GBps", s.busbw_GBps}});
    }
    c["samples"] = std::move(samples);
    colls.push_back(std::move(c));
  }
  j["collectives"] = std::move(colls);
  OrderedJson gemm = OrderedJson::array();
  for (const GemmEntry& g : p.gemm) {
    OrderedJson e = OrderedJson::object();
    e["precision"] = topology::PrecisionName(g.precision);
    e["peak_tflops"] = g.peak_tflops;
    e["peak_source"] = g.peak_source;
    e["saturation_efficiency"] = g.saturation_efficiency;
    e["size_half"] = g.size_half;
    e["gamma"] = g.gamma;
    e["residual"] = g.residual;
    OrderedJson curve = OrderedJson::array();
    for (const auto& pt : g.curve)
      curve.push_back({{"size", pt.size}, {"efficiency", pt.efficiency}});
    e["curve"] = std::move(curve);
    OrderedJson samples = OrderedJson::array();
    for (const GemmSample& s : g.samples) {
      samples.push_back({{"m", s.m},
                         {"n", s.n},
                         {"k", s.k},
                         {"time_us", s.time_us},
                         {"tflops", s.tflops},
                         {"efficiency", s.efficiency}});
    }
    e["samples"] = std::move(samples);
    gemm.push_back(std::move(e));
  }
  j["gemm"] = std::move(gemm);
  CopyP2pWaivedToJson(p.copy, p.p2p, p.waived, &j);
  if (p.calibration) j["calibration"] = OrderedJson::parse(p.calibration->dump());
  return j;
}

Result<Profile> ParseProfile(const Json& j) {
  ObjectReader r(j, "");
  Profile p;
  PT_RETURN_IF_ERROR(ReadSchema(r, kProfileSchema));
  PT_RETURN_IF_ERROR(r.String("cluster_fingerprint", &p.cluster_fingerprint));
  if (!r.Has("environment")) return r.Error("environment", "is required");
  PT_ASSIGN_OR_RETURN(p.environment,
                      ParseEnvironment(r.Raw("environment"), r.PointerOf("environment")));
  if (r.Has("cluster")) {
    PT_ASSIGN_OR_RETURN(topology::ClusterSpec c,
                        topology::ParseClusterSpec(r.Raw("cluster"), r.PointerOf("cluster")));
    p.cluster = std::move(c);
    if (!p.cluster_fingerprint.empty() &&
        topology::Fingerprint(*p.cluster) != p.cluster_fingerprint) {
      return r.Error("cluster_fingerprint", "does not match the embedded cluster description (" +
                                                topology::Fingerprint(*p.cluster) + ")");
    }
  } else {
    r.Ignore("cluster");
  }
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "collectives", true, [&](const Json& e, const std::string& ptr) {
        PT_ASSIGN_OR_RETURN(CollectiveEntry c, ParseCollectiveEntry(e, ptr));
        p.collectives.push_back(std::move(c));
        return Status::Ok();
      }));
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "gemm", true, [&](const Json& e, const std::string& ptr) {
        PT_ASSIGN_OR_RETURN(GemmEntry g, ParseGemmEntry(e, ptr));
        p.gemm.push_back(std::move(g));
        return Status::Ok();
      }));
  if (r.Has("copy")) {
    ObjectReader cr(r.Raw("copy"), r.PointerOf("copy"));
    CopyResult c;
    PT_RETURN_IF_ERROR(PositiveInt(&cr, "bytes", 1, &c.bytes));
    PT_RETURN_IF_ERROR(PositiveNumber(&cr, "time_us", &c.time_us));
    PT_RETURN_IF_ERROR(PositiveNumber(&cr, "GBps", &c.GBps));
    PT_RETURN_IF_ERROR(cr.Finish());
    p.copy = c;
  } else {
    r.Ignore("copy");
  }
  if (r.Has("p2p")) {
    const std::string pp = r.PointerOf("p2p");
    ObjectReader pr(r.Raw("p2p"), pp);
    P2PMatrix m;
    PT_RETURN_IF_ERROR(PositiveInt(&pr, "bytes", 1, &m.bytes));
    if (!pr.Has("ranks") || !pr.Has("GBps"))
      return Status::InvalidArgument(pp + ": needs ranks and GBps");
    try {
      m.ranks = pr.Raw("ranks").get<std::vector<int>>();
      m.GBps = pr.Raw("GBps").get<std::vector<std::vector<double>>>();
    } catch (const nlohmann::json::exception&) {
      return Status::InvalidArgument(pp + ": ranks must be integers and GBps a matrix of numbers");
    }
    if (m.GBps.size() != m.ranks.size())
      return Status::InvalidArgument(pp + "/GBps: must be square over ranks");
    for (const auto& row : m.GBps) {
      if (row.size() != m.ranks.size())
        return Status::InvalidArgument(pp + "/GBps: must be square over ranks");
    }
    PT_RETURN_IF_ERROR(pr.Finish());
    p.p2p = m;
  } else {
    r.Ignore("p2p");
  }
  RETURN_IF_ERROR_OUTER(
      ForEachElement(&r, "waived", false, [&](const Json& e, const std::string& ptr) {
        ObjectReader wr(e, ptr);
        Waived w;
        PT_RETURN_IF_ERROR(wr.String("what", &w.what));
        PT_RETURN_IF_ERROR(wr.String("reason", &w.reason));
        PT_RETURN_IF_ERROR(wr.Finish());
        p.waived.push_back(w);
        return Status::Ok();
      }));
  if (r.Has("calibration")) {
    const Json& cal = r.Raw("calibration");
    ObjectReader cr(cal, "/calibration");
    double f = 1;
    for (const char* key : {"compute", "communication", "memory_bound"}) {
      PT_RETURN_IF_ERROR(cr.Number(key, &f));
      if (!(f > 0.05 && f < 20)) return cr.Error(key, "must be in (0.05, 20)");
    }
    // Per framework x GPU entries (`paratune calibrate --logs`).
    if (cal.contains("entries")) {
      const Json& entries = cal["entries"];
      if (!entries.is_array()) return cr.Error("entries", "must be an array");
      for (size_t i = 0; i < entries.size(); ++i) {
        const Json& e = entries[i];
        const std::string ptr = "/calibration/entries/" + std::to_string(i);
        if (!e.is_object() || !e.contains("framework") || !e["framework"].is_string() ||
            !e.contains("gpu") || !e["gpu"].is_string()) {
          return Status::InvalidArgument(ptr + ": needs framework and gpu strings");
        }
        for (const char* key : {"compute", "communication", "memory_bound"}) {
          if (!e.contains(key) || !e[key].is_number() ||
              !(e[key].get<double>() > 0.05 && e[key].get<double>() < 20)) {
            return Status::InvalidArgument(ptr + "/" + key + ": must be a number in (0.05, 20)");
          }
        }
      }
    }
    p.calibration = cal;
  } else {
    r.Ignore("calibration");
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return p;
}

Result<Profile> LoadProfile(const std::string& path) {
  return LoadDocument(path, "profile", &ParseProfile);
}

Status WriteProfile(const Profile& p, const std::string& path) {
  return WriteFileAtomic(path, ProfileToJson(p).dump(2) + "\n");
}

std::string ProfileFingerprint(const Profile& p) { return Fnv1a64Hex(ProfileToJson(p).dump()); }

Status ApplyProfile(const Profile& profile, topology::ClusterSpec* cluster) {
  PT_CHECK(cluster != nullptr);
  if (profile.calibration) {
    const Json& c = *profile.calibration;
    cluster->corrections.compute = c.at("compute").get<double>();
    cluster->corrections.communication = c.at("communication").get<double>();
    cluster->corrections.memory_bound = c.at("memory_bound").get<double>();
    const auto it = c.find("iteration_error_after");
    if (it != c.end() && it->is_number()) cluster->corrections.residual = it->get<double>();
    // Entries for one framework on one GPU replace the cluster's entry for
    // the same key (ParseProfile checked their shape).
    if (const auto en = c.find("entries"); en != c.end()) {
      for (const Json& e : *en) {
        topology::ClusterSpec::FrameworkCorrections fc;
        fc.framework = e.at("framework").get<std::string>();
        fc.gpu = e.at("gpu").get<std::string>();
        fc.corrections.compute = e.at("compute").get<double>();
        fc.corrections.communication = e.at("communication").get<double>();
        fc.corrections.memory_bound = e.at("memory_bound").get<double>();
        if (const auto r = e.find("residual"); r != e.end() && r->is_number()) {
          fc.corrections.residual = r->get<double>();
        }
        auto& list = cluster->framework_corrections;
        std::erase_if(
            list, [&](const auto& x) { return x.framework == fc.framework && x.gpu == fc.gpu; });
        list.push_back(fc);
      }
    }
  }
  // A profile written from training logs alone carries only its calibration.
  if (profile.collectives.empty() && profile.gemm.empty() && !profile.calibration) {
    return Status::InvalidArgument("the profile holds neither collective fits nor GEMM curves");
  }
  // One fit per (collective, tier, group size): the smallest stride measured.
  std::map<std::tuple<int, int, int>, const CollectiveEntry*> chosen;
  for (const CollectiveEntry& e : profile.collectives) {
    const auto key =
        std::make_tuple(static_cast<int>(e.collective), static_cast<int>(e.tier), e.group_size);
    auto it = chosen.find(key);
    if (it == chosen.end() || e.stride < it->second->stride) chosen[key] = &e;
  }
  topology::ClusterSpec out = *cluster;
  for (const auto& [key, e] : chosen) {
    topology::CollectiveFit fit;
    fit.collective = e->collective;
    fit.tier = e->tier;
    fit.group_size = e->group_size;
    fit.alpha_us = e->alpha_us;
    fit.busbw_GBps =
        e->tier == Tier::kInterNode ? e->beta_GBps * e->concurrent_groups : e->beta_GBps;
    auto same = [&](const topology::CollectiveFit& f) {
      return f.collective == fit.collective && f.tier == fit.tier && f.group_size == fit.group_size;
    };
    out.fits.erase(std::remove_if(out.fits.begin(), out.fits.end(), same), out.fits.end());
    out.fits.push_back(fit);
  }
  const std::string fp = ProfileFingerprint(profile);
  for (const GemmEntry& g : profile.gemm) {
    const auto i = static_cast<size_t>(g.precision);
    double cluster_peak = out.gpu.peak_tflops[i];
    if (!(cluster_peak > 0)) {
      out.gpu.peak_tflops[i] = g.peak_tflops;
      cluster_peak = g.peak_tflops;
    }
    const double scale = g.peak_tflops / cluster_peak;
    std::vector<topology::EfficiencyPoint> curve;
    for (const auto& pt : g.curve) {
      double e = pt.efficiency * scale;
      // Allow rounding noise of the stored figures, not a faster GPU.
      if (e > 1.02) {
        return Status::InvalidArgument(
            std::string("profile's ") + topology::PrecisionName(g.precision) + " GEMMs reach " +
            std::to_string(pt.efficiency * g.peak_tflops) + " TFLOP/s, above the peak of " +
            out.gpu.name + " (" + std::to_string(cluster_peak) +
            " TFLOP/s): the profile was measured on other hardware");
      }
      curve.push_back({pt.size, std::min(e, 1.0)});
    }
    out.gpu.gemm_efficiency[i] = std::move(curve);
    // The measured curve replaces the published ceiling at its precision:
    // this GPU's own GEMMs are the measurement that bounds them.
    std::erase_if(out.gpu.gemm_ceilings,
                  [&](const topology::GemmCeiling& cell) { return cell.precision == g.precision; });
    out.gpu.sources["gemm_efficiency"] = "measured: paratune profile " + fp + " (" +
                                         profile.environment.backend + ", " +
                                         profile.environment.created_at + ")";
  }
  out.profile_fingerprint = fp;
  *cluster = std::move(out);
  return Status::Ok();
}

}  // namespace paratune::profiler
