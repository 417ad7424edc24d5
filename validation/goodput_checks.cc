// Published goodput figures asked of the goodput model
// (validation/goodput_checks.h; docs/model.md, "Time to train").
#include "validation/goodput_checks.h"

#include <cmath>
#include <cstdio>

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
      "restart " + FormatFixed(kDefaultRestartS / 60, 0) + " min (no published figure) + load " +
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

}  // namespace

Result<std::vector<GoodputCheck>> CheckGoodputRuns(const Json& doc) {
  if (!doc.is_object() || doc.value("schema", "") != kGoodputRunsSchema) {
    return Status::InvalidArgument(std::string("/schema: must be \"") + kGoodputRunsSchema + "\"");
  }
  std::vector<GoodputCheck> out;
  const std::pair<const char*,
                  Status (*)(const Json&, const std::string&, std::vector<GoodputCheck>*)>
      lists[] = {{"runs", CheckInterruptions}, {"checkpoints", CheckSize}};
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
