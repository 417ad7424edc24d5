// Published goodput figures asked of the goodput model
// (validation/goodput_checks.h; docs/model.md, "Time to train").
#include "validation/goodput_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "common/strings.h"
#include "planner/goodput.h"
#include "planner/request.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

// A required integer field in [1, 2^24] (GPU counts, degrees, lengths).
Status CountField(ObjectReader& r, const char* key, int* out) {
  int64_t v = 0;
  PT_RETURN_IF_ERROR(r.Integer(key, &v));
  if (v < 1 || v > (int64_t{1} << 24)) return r.Error(key, "must be an integer in [1, 2^24]");
  *out = static_cast<int>(v);
  return Status::Ok();
}

// Required fields of a row, each read into its variable.
Status Strings(ObjectReader& r, std::initializer_list<std::pair<const char*, std::string*>> fields) {
  for (const auto& [key, out] : fields) PT_RETURN_IF_ERROR(r.String(key, out));
  return Status::Ok();
}
Status Numbers(ObjectReader& r, std::initializer_list<std::pair<const char*, double*>> fields) {
  for (const auto& [key, out] : fields) PT_RETURN_IF_ERROR(r.Number(key, out));
  return Status::Ok();
}

// Megatron-style degrees {tp, cp?, pp, dp, zero?} of a row; `gpus` > 0: their
// product must equal it.
Result<ParallelConfig> DegreesOf(const Json& row, const std::string& pointer, int gpus) {
  if (!row.contains("config") || !row["config"].is_object()) {
    return Status::InvalidArgument(pointer + "/config: must be an object");
  }
  ObjectReader c(row["config"], pointer + "/config");
  ParallelConfig p;
  PT_RETURN_IF_ERROR(CountField(c, "tp", &p.gy));
  PT_RETURN_IF_ERROR(CountField(c, "pp", &p.pp));
  PT_RETURN_IF_ERROR(CountField(c, "dp", &p.gdata));
  if (c.Has("cp")) PT_RETURN_IF_ERROR(CountField(c, "cp", &p.cp));
  PT_RETURN_IF_ERROR(c.OptInt("zero", &p.zero));
  if (p.zero < 0 || p.zero > 3) return c.Error("zero", "must be 0-3");
  if (p.world() > (int64_t{1} << 24) || (gpus > 0 && p.world() != gpus)) {
    return Status::InvalidArgument(pointer + "/config: tp·cp·pp·dp must equal gpus");
  }
  return p;
}

// A model and cluster preset and a framework, as a row names them.
Status ResolveJob(const Json& row, const std::string& ptr, Job* job, Framework* fw) {
  ObjectReader r(row, ptr);
  if (!row.contains("model")) return Status::InvalidArgument(ptr + "/model: is required");
  Json model = row["model"];
  if (model.is_object() && !model.contains("name")) model["name"] = row.value("id", "model");
  auto m = ResolveModel(model, ptr + "/model");
  if (!m.ok()) return m.status();
  job->model = *m;
  PT_RETURN_IF_ERROR(r.Parsed("cluster", topology::ClusterPreset, &job->cluster));
  PT_RETURN_IF_ERROR(r.Parsed("framework", ParseFramework, fw));
  job->training.framework = *fw;
  return Status::Ok();
}

// Llama 3-style rows: interruption counts over a period on a stated layout
// and storage bandwidth; the published effective fraction is a lower bound.
Status CheckInterruptions(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  ObjectReader r(row, ptr);
  std::string id;
  PT_RETURN_IF_ERROR(r.String("id", &id));
  std::string source;
  PT_RETURN_IF_ERROR(r.String("source", &source));
  int gpus = 0;
  PT_RETURN_IF_ERROR(CountField(r, "gpus", &gpus));
  int seq = 0;
  PT_RETURN_IF_ERROR(CountField(r, "seq_len", &seq));
  double batch_tokens = 0;
  PT_RETURN_IF_ERROR(r.Number("tokens_per_batch", &batch_tokens));
  double days = 0;
  PT_RETURN_IF_ERROR(r.Number("days", &days));
  double interruptions = 0;
  PT_RETURN_IF_ERROR(r.Number("interruptions", &interruptions));
  double storage_TBps = 0;
  PT_RETURN_IF_ERROR(r.Number("storage_sustained_TBps", &storage_TBps));
  double fraction_min = 0;
  PT_RETURN_IF_ERROR(r.Number("effective_training_fraction_min", &fraction_min));
  std::string fraction_text;
  PT_RETURN_IF_ERROR(r.String("effective_training_text", &fraction_text));
  double per_gpu_min = 0;
  PT_RETURN_IF_ERROR(r.Number("checkpoint_per_gpu_bytes_min", &per_gpu_min));
  double per_gpu_max = 0;
  PT_RETURN_IF_ERROR(r.Number("checkpoint_per_gpu_bytes_max", &per_gpu_max));

  Job job;
  Framework fw = Framework::kMegatron;
  PT_RETURN_IF_ERROR(ResolveJob(row, ptr, &job, &fw));
  job.gpus = gpus;
  job.training.seq_len = seq;
  job.training.global_batch = static_cast<int64_t>(batch_tokens) / seq;
  PT_ASSIGN_OR_RETURN(ParallelConfig config, DegreesOf(row, ptr, gpus));
  config.distributed_optimizer = fw == Framework::kMegatron;

  GoodputOptions o;
  o.save = CheckpointSave::kSync;
  o.fs_GBps = storage_TBps * 1000;
  const CheckpointEstimate ck = EstimateCheckpoint(job, fw, config, o);
  const std::string layout = std::string(FrameworkName(fw)) + "'s layout (" +
                             CheckpointFormatName(ck.format) + ") for the published degrees";

  GoodputCheck size;
  size.id = id + "/checkpoint_per_gpu";
  size.source = source;
  size.published =
      FormatFixed(per_gpu_min / 1e6, 0) + " MB to " + FormatFixed(per_gpu_max / 1e9, 0) + " GB per GPU";
  size.value = ck.max_rank_bytes;
  size.paratune = FormatFixed(ck.max_rank_bytes / 1e9, 2) + " GB per GPU";
  size.within = ck.max_rank_bytes >= per_gpu_min && ck.max_rank_bytes <= per_gpu_max;
  size.assumed = {layout};
  out->push_back(size);

  // Every interruption, planned ones included, costs a restart and the work
  // since the last save: the pessimistic reading (a planned stop could save
  // first).
  const double mtbf_s = days * 86400 / interruptions;
  const double restart_s = kDefaultRestartS + ck.load_s;
  const double tau = DalyInterval(ck.blocking_s, mtbf_s);
  const double fraction = EffectiveFraction(tau, ck.blocking_s, restart_s, mtbf_s);
  // The longest restart (load included) at which the bound still holds:
  // the fraction scales as e^{-R/M}.
  const double bound_s =
      mtbf_s * std::log(EffectiveFraction(tau, ck.blocking_s, 0, mtbf_s) / fraction_min);
  GoodputCheck eff;
  eff.id = id + "/effective_training";
  eff.source = source;
  eff.published = "\"" + fraction_text + "\"";
  eff.value = fraction;
  eff.paratune = FormatFixed(100 * fraction, 1) + " % (the bound holds while restart + load < " +
                 FormatFixed(bound_s / 60, 1) + " min)";
  eff.within = fraction > fraction_min;
  eff.assumed = {
      "all " + FormatFixed(interruptions, 0) + " interruptions in " + FormatFixed(days, 0) +
          " days stop the job and lose the work since the last save (planned ones could save "
          "first: the pessimistic reading); one every " +
          FormatFixed(mtbf_s / 3600, 2) + " h",
      layout + ", saved synchronously at the stated sustained " + FormatFixed(storage_TBps, 0) +
          " TB/s: " + FormatFixed(ck.blocking_s, 1) + " s, every " + FormatFixed(tau / 60, 1) +
          " min (Daly's optimum)",
      "restart " + FormatFixed(kDefaultRestartS / 60, 0) + " min (MegaScale's detection and diagnosis, arXiv 2402.15627 §6.3) + load " +
          FormatFixed(ck.load_s, 0) + " s (each rank reads the " + FormatFixed(ck.held_rank_bytes / 1e9, 1) +
          " GB it holds)"};
  out->push_back(eff);
  return Status::Ok();
}

// A published checkpoint size: the model's shape, the framework and layout
// that wrote it, and the sizes as printed, read as binary units rounded up
// (as `du -h` prints them).
Status CheckSize(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  ObjectReader r(row, ptr);
  std::string id;
  PT_RETURN_IF_ERROR(r.String("id", &id));
  std::string source;
  PT_RETURN_IF_ERROR(r.String("source", &source));
  double weights_GiB = 0;
  PT_RETURN_IF_ERROR(r.Number("weights_GiB_rounded_up", &weights_GiB));
  double full_TiB = 0;
  PT_RETURN_IF_ERROR(r.Number("full_TiB_rounded_up", &full_TiB));
  std::string weights_text;
  PT_RETURN_IF_ERROR(r.String("weights_text", &weights_text));
  std::string full_text;
  PT_RETURN_IF_ERROR(r.String("full_text", &full_text));
  Job job;
  Framework fw = Framework::kMegatron;
  PT_RETURN_IF_ERROR(ResolveJob(row, ptr, &job, &fw));
  PT_ASSIGN_OR_RETURN(const ParallelConfig config, DegreesOf(row, ptr, 0));
  job.gpus = static_cast<int>(config.world());
  const CheckpointEstimate ck = EstimateCheckpoint(job, fw, config, GoodputOptions());
  const double full = ck.total_bytes, weights = ck.weights_bytes;
  const double GiB = std::pow(2.0, 30), TiB = std::pow(2.0, 40);
  const std::string layout = std::string(FrameworkName(fw)) + "'s layout (" +
                             CheckpointFormatName(CheckpointFormatOf(fw)) + ")";
  const std::string units = "sizes in binary units rounded up, as du -h prints them";
  GoodputCheck w;
  w.id = id + "/weights";
  w.source = source;
  w.published = "\"" + weights_text + "\"";
  w.value = weights;
  w.paratune = FormatFixed(weights / GiB, 1) + " GiB";
  w.within = std::ceil(weights / GiB) == weights_GiB;
  w.assumed = {layout, units};
  out->push_back(w);
  GoodputCheck f;
  f.id = id + "/full_checkpoint";
  f.source = source;
  f.published = "\"" + full_text + "\"";
  f.value = full;
  f.paratune = FormatFixed(full / TiB, 3) + " TiB";
  f.within = std::abs(std::ceil(10 * full / TiB) / 10 - full_TiB) < 1e-9;
  f.assumed = {layout, units};
  out->push_back(f);
  return Status::Ok();
}

// MegaScale-style rows: a production run's restarts over its duration, with
// bounds on detection, catch-up (load and rework) and the save's stall, and a
// lower bound on the effective training fraction. The model's rework at
// Daly's interval must fit the catch-up, and what the catch-up leaves is the
// load; the fraction follows from Daly's model.
Status CheckRecovery(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  ObjectReader r(row, ptr);
  std::string id, source, catch_up_text, fraction_text, read_as;
  PT_RETURN_IF_ERROR(Strings(r, {{"id", &id},
                                 {"source", &source},
                                 {"catch_up_text", &catch_up_text},
                                 {"effective_training_text", &fraction_text},
                                 {"read_as", &read_as}}));
  double days = 0, restarts = 0, detection_s = 0, catch_up_s = 0, stall_s = 0, fraction_min = 0;
  PT_RETURN_IF_ERROR(Numbers(r, {{"days", &days},
                                 {"restarts", &restarts},
                                 {"detection_s_max", &detection_s},
                                 {"catch_up_s_max", &catch_up_s},
                                 {"save_stall_s_max", &stall_s},
                                 {"effective_training_fraction_min", &fraction_min}}));
  if (!(days > 0 && restarts > 0 && detection_s > 0 && catch_up_s > 0 && stall_s > 0)) {
    return Status::InvalidArgument(ptr + ": days, restarts and the bounds must be > 0");
  }
  const double mtbf_s = days * 86400 / restarts;
  const double tau = DalyInterval(stall_s, mtbf_s);
  const double rework = ExpectedReworkS(tau, mtbf_s);
  const double load = std::max(0.0, catch_up_s - rework);
  auto fraction_at = [&](double n) {
    const double m = days * 86400 / n;
    const double t = DalyInterval(stall_s, m);
    return EffectiveFraction(t, stall_s, detection_s + std::max(0.0, catch_up_s - ExpectedReworkS(t, m)), m);
  };
  const double fraction = fraction_at(restarts);
  // The most restarts in the period at which the bound still holds.
  double lo = restarts, hi = restarts;
  while (fraction_at(hi) > fraction_min && hi < 1e6) lo = hi, hi *= 2;
  for (int i = 0; i < 60 && fraction_at(lo) > fraction_min; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fraction_at(mid) > fraction_min ? lo : hi) = mid;
  }
  const std::string read = "read as published: " + read_as;
  const std::string interval = "Daly's interval for a " + FormatFixed(stall_s, 0) + " s stall: " +
                               FormatFixed(tau / 60, 1) + " min, one restart every " +
                               FormatFixed(mtbf_s / 3600, 2) + " h";
  GoodputCheck c;
  c.id = id + "/catch_up";
  c.source = source;
  c.published = "\"" + catch_up_text + "\"";
  c.value = rework;
  c.paratune = "expected rework " + FormatFixed(rework / 60, 1) + " min, leaving " +
               FormatFixed(load / 60, 1) + " min of the " + FormatFixed(catch_up_s / 60, 0) +
               " for the load";
  c.within = rework <= catch_up_s;
  c.assumed = {read, interval};
  out->push_back(c);
  GoodputCheck e;
  e.id = id + "/effective_training";
  e.source = source;
  e.published = "\"" + fraction_text + "\"";
  e.value = fraction;
  e.paratune = FormatFixed(100 * fraction, 1) + " % (the bound holds up to " +
               FormatFixed(std::floor(lo), 0) + " restarts in " + FormatFixed(days, 0) + " days)";
  e.within = fraction > fraction_min;
  e.assumed = {read, interval,
               "restart = detection " + FormatFixed(detection_s / 60, 0) + " min + the load the catch-up leaves (" +
                   FormatFixed(load / 60, 1) + " min)"};
  out->push_back(e);
  return Status::Ok();
}

// BLOOM-style rows: a fleet's failures per week on its GPUs and the work it
// lost per crash at its checkpoint interval. The default failure rate must
// lie in the fleet's range, and the model's expected rework at the stated
// interval must be the published loss.
Status CheckFleetFailures(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  ObjectReader r(row, ptr);
  std::string id, source, lost_text;
  PT_RETURN_IF_ERROR(
      Strings(r, {{"id", &id}, {"source", &source}, {"lost_per_crash_text", &lost_text}}));
  int gpus = 0;
  PT_RETURN_IF_ERROR(CountField(r, "gpus", &gpus));
  double per_week_min = 0, per_week_max = 0, interval_s = 0, lost_h = 0, precision_h = 0, save_s = 0;
  PT_RETURN_IF_ERROR(Numbers(r, {{"failures_per_week_min", &per_week_min},
                                 {"failures_per_week_max", &per_week_max},
                                 {"interval_s", &interval_s},
                                 {"save_s", &save_s},
                                 {"lost_per_crash_h", &lost_h},
                                 {"lost_per_crash_precision_h", &precision_h}}));
  if (!(per_week_min > 0 && per_week_max >= per_week_min && interval_s > 0)) {
    return Status::InvalidArgument(ptr + ": failures per week and the interval must be > 0");
  }
  const double gpu_hours_per_week = gpus * 7.0 * 24;
  const double rate_lo = per_week_min / gpu_hours_per_week, rate_hi = per_week_max / gpu_hours_per_week;
  GoodputCheck rate;
  rate.id = id + "/failure_rate";
  rate.source = source;
  rate.published = FormatFixed(per_week_min, 0) + "-" + FormatFixed(per_week_max, 0) +
                   " GPU failures a week on " + std::to_string(gpus) + " GPUs: " +
                   FormatFixed(rate_lo * 1e6, 1) + "-" + FormatFixed(rate_hi * 1e6, 1) +
                   " per million GPU-hours";
  rate.value = kDefaultFailuresPerGpuHour;
  rate.paratune = "default " + FormatFixed(kDefaultFailuresPerGpuHour * 1e6, 1) +
                  " per million GPU-hours (Llama 3's)";
  rate.within = kDefaultFailuresPerGpuHour >= rate_lo && kDefaultFailuresPerGpuHour <= rate_hi;
  rate.assumed = {"every GPU failure stops the job (one model replica spans the run's GPUs)"};
  out->push_back(rate);
  // The week's failures at either end: the job's mean time between them.
  const double mtbf_hi = 7 * 86400 / per_week_min, mtbf_lo = 7 * 86400 / per_week_max;
  const double lost_a = ExpectedReworkS(interval_s + save_s, mtbf_lo) / 3600;
  const double lost_b = ExpectedReworkS(interval_s + save_s, mtbf_hi) / 3600;
  GoodputCheck lost;
  lost.id = id + "/lost_per_crash";
  lost.source = source;
  lost.published = "\"" + lost_text + "\"";
  lost.value = 0.5 * (lost_a + lost_b);
  lost.paratune = FormatFixed(lost_a, 3) + "-" + FormatFixed(lost_b, 3) + " h expected rework";
  lost.within = std::abs(lost_a - lost_h) <= precision_h && std::abs(lost_b - lost_h) <= precision_h;
  lost.assumed = {"a save every " + FormatFixed(interval_s / 3600, 1) + " h taking " +
                      FormatFixed(save_s, 0) + " s; failures at exponential times, one every " +
                      FormatFixed(mtbf_lo / 3600, 0) + "-" + FormatFixed(mtbf_hi / 3600, 0) + " h",
                  "a loss stated to one decimal: within " + FormatFixed(precision_h, 2) + " h"};
  out->push_back(lost);
  return Status::Ok();
}

}  // namespace

Result<std::vector<GoodputCheck>> CheckGoodputRuns(const Json& doc) {
  if (!doc.is_object() || doc.value("schema", "") != kGoodputRunsSchema) {
    return Status::InvalidArgument(std::string("/schema: must be \"") + kGoodputRunsSchema + "\"");
  }
  std::vector<GoodputCheck> out;
  const std::pair<const char*,
                  Status (*)(const Json&, const std::string&, std::vector<GoodputCheck>*)>
      lists[] = {{"runs", CheckInterruptions},
                 {"recoveries", CheckRecovery},
                 {"fleet_failures", CheckFleetFailures},
                 {"checkpoints", CheckSize}};
  for (const auto& [key, check] : lists) {
    if (!doc.contains(key)) continue;
    if (!doc[key].is_array())
      return Status::InvalidArgument(std::string("/") + key + ": must be an array");
    for (size_t i = 0; i < doc[key].size(); ++i) {
      PT_RETURN_IF_ERROR(
          check(doc[key][i], std::string("/") + key + "/" + std::to_string(i), &out));
    }
  }
  return out;
}

OrderedJson GoodputChecksToJson(const std::vector<GoodputCheck>& checks) {
  OrderedJson doc;
  doc["schema"] = kGoodputChecksSchema;
  OrderedJson list = OrderedJson::array();
  int within = 0;
  for (const GoodputCheck& c : checks) {
    within += c.within;
    OrderedJson j;
    j["id"] = c.id;
    j["source"] = c.source;
    j["published"] = c.published;
    j["paratune"] = c.paratune;
    j["value"] = c.value;
    j["within"] = c.within;
    j["assumed"] = c.assumed;
    list.push_back(j);
  }
  doc["checks"] = list;
  doc["within"] = within;
  doc["of"] = static_cast<int>(checks.size());
  return doc;
}

}  // namespace paratune::planner
