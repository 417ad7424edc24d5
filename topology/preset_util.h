// topology/preset_util.h: internal helpers shared by gpu.cc and cluster.cc for
// reading compiled-in presets and their per-field `sources` objects. Not part
// of the module's public interface.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/embedded.h"
#include "common/json.h"
#include "common/status.h"
#include "common/user_input.h"

namespace paratune::topology {

// Reads the optional "sources" object of `r` into `out`: every value must be a
// non-empty string and every key one of `allowed` (a typo in a key would hide a
// missing source). Errors name the JSON pointer.
inline Status ReadSources(ObjectReader* r, const std::set<std::string>& allowed,
                          std::map<std::string, std::string>* out) {
  if (!r->Has("sources")) {
    r->Ignore("sources");
    return Status::Ok();
  }
  const std::string pointer = r->PointerOf("sources");
  const Json& j = r->Raw("sources");
  if (!j.is_object()) return Status::InvalidArgument(pointer + ": must be an object");
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string p = pointer + "/" + JsonPointerToken(it.key());
    if (allowed.count(it.key()) == 0) {
      return Status::InvalidArgument(p + ": not a field that takes a source");
    }
    if (!it->is_string() || it->get<std::string>().empty()) {
      return Status::InvalidArgument(p + ": must be a non-empty string");
    }
    (*out)[it.key()] = it->get<std::string>();
  }
  return Status::Ok();
}

// A bound as an error message writes it: integers whole, others as %g.
inline std::string RangeNumber(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// The range checks of GPU and cluster fields, each an error naming the field's
// pointer, the accepted range with its unit and the value given:
// "/gpu/memory_GiB: must be in (0, 4096] GiB (got 1e+308)".
inline Status RangeError(const ObjectReader& r, std::string_view key, const std::string& range,
                         std::string_view unit, double v) {
  return r.Error(key, "must be " + range + (unit.empty() ? "" : " " + std::string(unit)) +
                          " (got " + RangeNumber(v) + ")");
}
// v in [lo, hi].
inline Status CheckClosed(const ObjectReader& r, std::string_view key, double v, double lo,
                          double hi, std::string_view unit) {
  if (v >= lo && v <= hi) return Status::Ok();
  return RangeError(r, key, "in [" + RangeNumber(lo) + ", " + RangeNumber(hi) + "]", unit, v);
}
// v in (0, hi].
inline Status CheckPositive(const ObjectReader& r, std::string_view key, double v, double hi,
                            std::string_view unit) {
  if (v > 0 && v <= hi) return Status::Ok();
  return RangeError(r, key, "in (0, " + RangeNumber(hi) + "]", unit, v);
}
// v == 0 (meaning `zero`) or v in [lo, hi].
inline Status CheckZeroOr(const ObjectReader& r, std::string_view key, double v, double lo,
                          double hi, std::string_view unit, const std::string& zero) {
  if (v == 0 || (v >= lo && v <= hi)) return Status::Ok();
  return RangeError(r, key,
                    "0 (" + zero + ") or in [" + RangeNumber(lo) + ", " + RangeNumber(hi) + "]",
                    unit, v);
}

// "a, b, c".
inline std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Parses one compiled-in preset with `parse`; the preset's "name" must equal its
// file name. Errors carry "<kind> preset '<name>'" as context.
template <typename T>
Result<T> ParsePreset(const EmbeddedPreset& p, const char* kind,
                      Result<T> (*parse)(const Json&, const std::string&)) {
  const std::string context = std::string(kind) + " preset '" + std::string(p.name) + "'";
  Result<Json> j = ParseJson(p.text, context);
  if (!j.ok()) return j.status();
  Result<T> spec = parse(*j, "");
  if (!spec.ok()) return spec.status().WithContext(context);
  if (spec->name != p.name) {
    return Status::Internal(context + ": /name is '" + spec->name + "', not the file name");
  }
  return spec;
}

// The names of `presets`, in their order.
inline std::vector<std::string> PresetNames(const std::vector<EmbeddedPreset>& presets) {
  std::vector<std::string> names;
  for (const EmbeddedPreset& p : presets) names.emplace_back(p.name);
  return names;
}

// Compiled-in presets of one kind, each parsed once (ParsePreset), by name.
template <typename T>
class PresetTable {
 public:
  PresetTable(const std::vector<EmbeddedPreset>& presets, const char* kind,
              Result<T> (*parse)(const Json&, const std::string&))
      : names_(PresetNames(presets)) {
    for (const EmbeddedPreset& p : presets) {
      parsed_.emplace(std::string(p.name), ParsePreset<T>(p, kind, parse));
    }
  }

  // The preset `name` (or why it does not parse), or kNotFound
  // "unknown <label> preset '<name>'; did you mean <the closest names>? (valid:
  // <the names in preset order>)", the question only when a name is close.
  Result<T> Find(const std::string& name, const char* label) const {
    auto it = parsed_.find(name);
    if (it == parsed_.end()) {
      const std::string hint = DidYouMean(name, names_);
      return Status::NotFound("unknown " + std::string(label) + " preset '" + name + "'" +
                              (hint.empty() ? "" : "; " + hint) + " (valid: " +
                              JoinNames(names_) + ")");
    }
    return it->second;
  }

 private:
  std::vector<std::string> names_;
  std::map<std::string, Result<T>, std::less<>> parsed_;
};

}  // namespace paratune::topology
