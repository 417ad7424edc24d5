// Reading the goodput inputs (planner/goodput_request.h).
#include "planner/goodput_request.h"

#include <cmath>

#include "common/strings.h"

namespace paratune::planner {

Result<double> ParseTokenBudget(const std::string& text, const std::string& what) {
  const std::string bad = what + ": '" + text +
                          "' is not a token budget (accepted: a number with an optional decimal "
                          "suffix k, M, B or G, T: 15T = 15e12, 2.5B = 2.5e9)";
  if (text.empty()) return Status::InvalidArgument(bad);
  double scale = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      scale = 1e3;
      break;
    case 'M':
      scale = 1e6;
      break;
    case 'B':
    case 'G':
      scale = 1e9;
      break;
    case 'T':
      scale = 1e12;
      break;
    default:
      break;
  }
  const std::string digits = scale == 1 ? text : text.substr(0, text.size() - 1);
  auto v = ParseDouble(digits, what);
  if (!v.ok() || !(*v > 0) || !std::isfinite(*v * scale) || *v * scale > 1e18) {
    return Status::InvalidArgument(bad);
  }
  return *v * scale;
}

namespace {

// A number at `key`, if present, that must be > 0 (>= 0 with `zero_ok`).
Status OptPositive(ObjectReader& r, const char* key, double* out, bool zero_ok = false) {
  if (!r.Has(key)) return Status::Ok();
  PT_RETURN_IF_ERROR(r.Number(key, out));
  const bool ok = std::isfinite(*out) && (zero_ok ? *out >= 0 : *out > 0);
  return ok ? Status::Ok() : r.Error(key, zero_ok ? "must be a number >= 0" : "must be > 0");
}

}  // namespace

Result<GoodputOptions> ParseGoodputRequest(const Json& j, const std::string& pointer) {
  if (!j.is_object()) return Status::InvalidArgument(pointer + ": must be an object");
  ObjectReader r(j, pointer);
  GoodputOptions g;
  if (!r.Has("tokens")) return r.Error("tokens", "is required (the token budget, e.g. \"15T\")");
  const Json& t = r.Raw("tokens");
  if (t.is_string()) {
    auto v = ParseTokenBudget(t.get<std::string>(), r.PointerOf("tokens"));
    if (!v.ok()) return v.status();
    g.tokens = *v;
  } else if (t.is_number() && t.get<double>() > 0 && t.get<double>() <= 1e18) {
    g.tokens = t.get<double>();
  } else {
    return r.Error("tokens", "must be a number in (0, 1e18] or a string such as \"15T\"");
  }
  PT_RETURN_IF_ERROR(OptPositive(r, "fs_GBps", &g.fs_GBps));
  PT_RETURN_IF_ERROR(OptPositive(r, "fs_node_GBps", &g.fs_node_GBps));
  PT_RETURN_IF_ERROR(
      OptPositive(r, "failures_per_gpu_hour", &g.failures_per_gpu_hour, /*zero_ok=*/true));
  PT_RETURN_IF_ERROR(OptPositive(r, "restart_s", &g.restart_s));
  std::string save = "auto";
  PT_RETURN_IF_ERROR(r.OptString("checkpoint_save", &save));
  if (save != "auto" && save != "sync") return r.Error("checkpoint_save", "must be auto or sync");
  g.save = save == "sync" ? CheckpointSave::kSync : CheckpointSave::kAuto;
  PT_RETURN_IF_ERROR(OptPositive(r, "min_interval_s", &g.min_interval_s, /*zero_ok=*/true));
  PT_RETURN_IF_ERROR(OptPositive(r, "repair_s", &g.repair_s, /*zero_ok=*/true));
  PT_RETURN_IF_ERROR(OptPositive(r, "gpu_hour_price", &g.gpu_hour_price));
  PT_RETURN_IF_ERROR(r.Finish());
  return g;
}

}  // namespace paratune::planner
