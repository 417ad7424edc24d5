#include "planner/plans.h"

namespace paratune::planner {
namespace {

OrderedJson CandidateJson(int rank, const Candidate& c, const CostModel& cm) {
  OrderedJson j;
  j["rank"] = rank;
  j["config"] = ConfigToJson(c.config);
  j["config_string"] = ConfigToString(c.config);
  j["prediction"] = PredictionFields(c.prediction, cm);
  return j;
}

OrderedJson JobJson(const Job& job) {
  OrderedJson j;
  j["model"] = OrderedJson::parse(ModelSpecToJson(job.model).dump());
  j["cluster"] = OrderedJson::parse(topology::ClusterSpecToJson(job.cluster).dump());
  j["gpus"] = job.gpus;
  j["training"] = TrainingToJson(job.training);
  return j;
}

}  // namespace

OrderedJson PlansToJson(const std::vector<PlanSection>& sections, const SearchOptions& options) {
  OrderedJson doc;
  doc["schema"] = kPlansSchema;
  if (sections.empty()) return doc;
  // The section described in full: the largest GPU count with a feasible plan.
  size_t main = sections.size() - 1;
  for (size_t i = sections.size(); i-- > 0;) {
    if (!sections[i].result.top.empty()) {
      main = i;
      break;
    }
  }
  const PlanSection& s = sections[main];
  CostModel cm(s.job.model, s.job.training, s.job.cluster, s.job.gpus);
  doc["model"] = s.job.model.name;
  doc["cluster"] = s.job.cluster.name;
  doc["cluster_fingerprint"] = topology::Fingerprint(s.job.cluster);
  if (!s.job.cluster.profile_fingerprint.empty()) doc["profile"] = s.job.cluster.profile_fingerprint;
  doc["gpus"] = s.job.gpus;
  doc["space"] = FamilyName(options.family);
  doc["objective"] = ObjectiveName(options.objective);
  OrderedJson fixed = OrderedJson::object();
  for (const auto& [k, v] : options.fixed) fixed[k] = v;
  doc["fixed"] = fixed;
  doc["job"] = JobJson(s.job);
  doc["evaluated"] = s.result.evaluated;
  doc["feasible"] = s.result.feasible;
  OrderedJson rejected = OrderedJson::object();
  for (int i = 1; i < kNumReasons; ++i) rejected[ReasonName(static_cast<Reason>(i))] = s.result.rejected[i];
  doc["rejected"] = rejected;
  doc["search_time_s"] = s.search_time_s;
  OrderedJson cands = OrderedJson::array();
  for (size_t i = 0; i < s.result.top.size(); ++i) cands.push_back(CandidateJson(static_cast<int>(i) + 1, s.result.top[i], cm));
  doc["candidates"] = cands;
  OrderedJson pareto = OrderedJson::array();
  for (const Candidate& c : s.result.pareto) {
    OrderedJson p;
    p["config_string"] = ConfigToString(c.config);
    p["config"] = ConfigToJson(c.config);
    p["iteration_time_s"] = c.prediction.iteration_time_s;
    p["tokens_per_s"] = c.prediction.tokens_per_s;
    p["memory_GiB"] = c.prediction.memory.total_GiB;
    pareto.push_back(p);
  }
  doc["pareto"] = pareto;
  if (sections.size() > 1) {
    OrderedJson scaling = OrderedJson::array();
    double best_tps = 0;
    for (const PlanSection& sec : sections) {
      OrderedJson row;
      row["gpus"] = sec.job.gpus;
      row["evaluated"] = sec.result.evaluated;
      row["feasible"] = sec.result.feasible;
      row["search_time_s"] = sec.search_time_s;
      if (sec.result.top.empty()) {
        row["best"] = nullptr;
        row["pareto"] = false;
      } else {
        const Candidate& b = sec.result.top.front();
        row["config_string"] = ConfigToString(b.config);
        row["config"] = ConfigToJson(b.config);
        row["iteration_time_s"] = b.prediction.iteration_time_s;
        row["tokens_per_s"] = b.prediction.tokens_per_s;
        row["tokens_per_s_per_gpu"] = b.prediction.tokens_per_s / sec.job.gpus;
        row["mfu"] = b.prediction.mfu;
        // More GPUs are on the front only if they buy more tokens per second.
        row["pareto"] = b.prediction.tokens_per_s > best_tps;
        best_tps = std::max(best_tps, b.prediction.tokens_per_s);
      }
      scaling.push_back(row);
    }
    doc["scaling"] = scaling;
  }
  return doc;
}

Result<Job> JobFromPlans(const Json& plans) {
  if (!plans.is_object() || plans.value("schema", std::string()) != kPlansSchema) {
    return Status::InvalidArgument("/schema: must be \"" + std::string(kPlansSchema) + "\"");
  }
  if (!plans.contains("job")) return Status::InvalidArgument("/job: is required");
  ObjectReader r(plans["job"], "/job");
  PT_ASSIGN_OR_RETURN(Job job, ParseJob(plans["job"], r));
  PT_RETURN_IF_ERROR(r.Finish());
  return job;
}

Result<std::vector<ParallelConfig>> CandidatesFromPlans(const Json& plans) {
  if (!plans.contains("candidates") || !plans["candidates"].is_array()) {
    return Status::InvalidArgument("/candidates: must be an array");
  }
  std::vector<ParallelConfig> out;
  for (size_t i = 0; i < plans["candidates"].size(); ++i) {
    const Json& c = plans["candidates"][i];
    const std::string ptr = "/candidates/" + std::to_string(i) + "/config";
    if (!c.contains("config")) return Status::InvalidArgument(ptr + ": is required");
    PT_ASSIGN_OR_RETURN(ParallelConfig pc, ParseConfig(c["config"], ptr, 0));
    out.push_back(pc);
  }
  return out;
}

}  // namespace paratune::planner
