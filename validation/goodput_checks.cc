// Published goodput figures asked of the goodput model
// (validation/goodput_checks.h; docs/model.md, "Time to train").
#include "validation/goodput_checks.h"

#include <cmath>
#include <cstdio>

#include "planner/goodput.h"
#include "planner/request.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

Result<double> Number(const Json& j, const char* key, const std::string& pointer) {
  if (!j.contains(key) || !j[key].is_number()) {
    return Status::InvalidArgument(pointer + "/" + key + ": must be a number");
  }
  return j[key].get<double>();
}

Result<std::string> Text(const Json& j, const char* key, const std::string& pointer) {
  if (!j.contains(key) || !j[key].is_string()) {
    return Status::InvalidArgument(pointer + "/" + key + ": must be a string");
  }
  return j[key].get<std::string>();
}

Result<int> Count(const Json& j, const char* key, const std::string& pointer) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
      j[key].get<int64_t>() > (int64_t{1} << 24)) {
    return Status::InvalidArgument(pointer + "/" + key + ": must be an integer in [1, 2^24]");
  }
  return j[key].get<int>();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The job and layout a row names: a model and cluster preset, its GPUs, and
// Megatron-style degrees {tp, cp, pp, dp} (cp optional, zero optional).
struct RowJob {
  Job job;
  ParallelConfig config;
  Framework framework = Framework::kMegatron;
};

// Megatron-style degrees {tp, cp?, pp, dp, zero?} of a row; `gpus` > 0: their
// product must equal it.
Result<ParallelConfig> DegreesOf(const Json& row, const std::string& pointer, int gpus) {
  if (!row.contains("config") || !row["config"].is_object()) {
    return Status::InvalidArgument(pointer + "/config: must be an object");
  }
  const Json& c = row["config"];
  const std::string at = pointer + "/config";
  ParallelConfig p;
  PT_ASSIGN_OR_RETURN(p.gy, Count(c, "tp", at));
  PT_ASSIGN_OR_RETURN(p.pp, Count(c, "pp", at));
  PT_ASSIGN_OR_RETURN(p.gdata, Count(c, "dp", at));
  if (c.contains("cp")) {
    PT_ASSIGN_OR_RETURN(p.cp, Count(c, "cp", at));
  }
  if (c.contains("zero")) {
    if (!c["zero"].is_number_integer() || c["zero"] < 0 || c["zero"] > 3) {
      return Status::InvalidArgument(at + "/zero: must be 0-3");
    }
    p.zero = c["zero"].get<int>();
  }
  if (p.world() > (int64_t{1} << 24) || (gpus > 0 && p.world() != gpus)) {
    return Status::InvalidArgument(at + ": tp·cp·pp·dp must equal gpus");
  }
  return p;
}

// A model and cluster preset and a framework, as a row names them.
Status ResolveJob(const Json& row, const std::string& ptr, Job* job, Framework* fw) {
  if (!row.contains("model")) return Status::InvalidArgument(ptr + "/model: is required");
  Json model = row["model"];
  if (model.is_object() && !model.contains("name")) model["name"] = row.value("id", "model");
  auto m = ResolveModel(model, ptr + "/model");
  if (!m.ok()) return m.status();
  job->model = *m;
  PT_ASSIGN_OR_RETURN(const std::string cluster, Text(row, "cluster", ptr));
  auto c = topology::ClusterPreset(cluster);
  if (!c.ok()) return Status::InvalidArgument(ptr + "/cluster: " + c.status().message());
  job->cluster = *c;
  PT_ASSIGN_OR_RETURN(const std::string framework, Text(row, "framework", ptr));
  auto f = ParseFramework(framework);
  if (!f.ok()) return Status::InvalidArgument(ptr + "/framework: " + f.status().message());
  *fw = *f;
  job->training.framework = *f;
  return Status::Ok();
}

// Llama 3-style rows: interruption counts over a period on a stated layout
// and storage bandwidth; the published effective fraction is a lower bound.
Status CheckInterruptions(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  PT_ASSIGN_OR_RETURN(const std::string id, Text(row, "id", ptr));
  PT_ASSIGN_OR_RETURN(const std::string source, Text(row, "source", ptr));
  PT_ASSIGN_OR_RETURN(const int gpus, Count(row, "gpus", ptr));
  PT_ASSIGN_OR_RETURN(const int seq, Count(row, "seq_len", ptr));
  PT_ASSIGN_OR_RETURN(const double batch_tokens, Number(row, "tokens_per_batch", ptr));
  PT_ASSIGN_OR_RETURN(const double days, Number(row, "days", ptr));
  PT_ASSIGN_OR_RETURN(const double interruptions, Number(row, "interruptions", ptr));
  PT_ASSIGN_OR_RETURN(const double storage_TBps, Number(row, "storage_sustained_TBps", ptr));
  PT_ASSIGN_OR_RETURN(const double fraction_min,
                      Number(row, "effective_training_fraction_min", ptr));
  PT_ASSIGN_OR_RETURN(const std::string fraction_text, Text(row, "effective_training_text", ptr));
  PT_ASSIGN_OR_RETURN(const double per_gpu_min, Number(row, "checkpoint_per_gpu_bytes_min", ptr));
  PT_ASSIGN_OR_RETURN(const double per_gpu_max, Number(row, "checkpoint_per_gpu_bytes_max", ptr));

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
      Fixed(per_gpu_min / 1e6, 0) + " MB to " + Fixed(per_gpu_max / 1e9, 0) + " GB per GPU";
  size.value = ck.max_rank_bytes;
  size.paratune = Fixed(ck.max_rank_bytes / 1e9, 2) + " GB per GPU";
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
  eff.paratune = Fixed(100 * fraction, 1) + " % (the bound holds while restart + load < " +
                 Fixed(bound_s / 60, 1) + " min)";
  eff.within = fraction > fraction_min;
  eff.assumed = {
      "all " + Fixed(interruptions, 0) + " interruptions in " + Fixed(days, 0) +
          " days stop the job and lose the work since the last save (planned ones could save "
          "first: the pessimistic reading); one every " +
          Fixed(mtbf_s / 3600, 2) + " h",
      layout + ", saved synchronously at the stated sustained " + Fixed(storage_TBps, 0) +
          " TB/s: " + Fixed(ck.blocking_s, 1) + " s, every " + Fixed(tau / 60, 1) +
          " min (Daly's optimum)",
      "restart " + Fixed(kDefaultRestartS / 60, 0) + " min (no published figure) + load " +
          Fixed(ck.load_s, 0) + " s (each rank reads the " + Fixed(ck.held_rank_bytes / 1e9, 1) +
          " GB it holds)"};
  out->push_back(eff);
  return Status::Ok();
}

// A published checkpoint size: the model's shape, the framework and layout
// that wrote it, and the sizes as printed, read as binary units rounded up
// (as `du -h` prints them).
Status CheckSize(const Json& row, const std::string& ptr, std::vector<GoodputCheck>* out) {
  PT_ASSIGN_OR_RETURN(const std::string id, Text(row, "id", ptr));
  PT_ASSIGN_OR_RETURN(const std::string source, Text(row, "source", ptr));
  PT_ASSIGN_OR_RETURN(const double weights_GiB, Number(row, "weights_GiB_rounded_up", ptr));
  PT_ASSIGN_OR_RETURN(const double full_TiB, Number(row, "full_TiB_rounded_up", ptr));
  PT_ASSIGN_OR_RETURN(const std::string weights_text, Text(row, "weights_text", ptr));
  PT_ASSIGN_OR_RETURN(const std::string full_text, Text(row, "full_text", ptr));
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
  w.paratune = Fixed(weights / GiB, 1) + " GiB";
  w.within = std::ceil(weights / GiB) == weights_GiB;
  w.assumed = {layout, units};
  out->push_back(w);
  GoodputCheck f;
  f.id = id + "/full_checkpoint";
  f.source = source;
  f.published = "\"" + full_text + "\"";
  f.value = full;
  f.paratune = Fixed(full / TiB, 3) + " TiB";
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
