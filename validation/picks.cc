#include "validation/picks.h"

#include <map>
#include <sstream>

#include "planner/plans.h"
#include "planner/search.h"

namespace paratune::planner {
namespace {

// The throughput `run` measured, in its own metric (tokens/s, model TFLOP/s
// per GPU, or tokens/s from a stated iteration time), and the same for `p`.
bool InTokens(const PublishedRun& r) { return r.measured_model_tflops <= 0; }
double Measured(const PublishedRun& r) {
  if (r.measured_tokens_per_s > 0) return r.measured_tokens_per_s;
  if (r.measured_model_tflops > 0) return r.measured_model_tflops;
  if (r.measured_iteration_s > 0) {
    const TrainingSpec& t = r.request.job.training;
    return static_cast<double>(t.global_batch) * t.seq_len / r.measured_iteration_s;
  }
  return 0;
}
// Tokens/s per GPU where the run states tokens (InTokens).
double MeasuredPerGpu(const PublishedRun& r) { return Measured(r) / r.request.job.gpus; }
double Predicted(const PublishedRun& r, const Prediction& p, double time_s) {
  const double scale = p.iteration_time_s / time_s;  // the same job at another time
  return (InTokens(r) ? p.tokens_per_s : p.model_tflops_per_gpu) * scale;
}

// Model, sequence length, GPU and precision (FP8 whatever its recipe: the
// Blackwell rows moved from per-tensor FP8 to MXFP8 across releases, and the
// model prices MXFP8's GEMMs below FP8's, so the comparison does not favour
// the pick).
std::string PartKey(const PublishedRun& r) {
  const Job& j = r.request.job;
  return j.model.name + "|" + std::to_string(j.training.seq_len) + "|" + j.cluster.gpu.name +
         "|" + topology::PrecisionName(j.training.precision);
}

std::string QuestionKey(const PublishedRun& r) {
  const Job& j = r.request.job;
  std::ostringstream s;
  s << j.model.name << ", " << j.gpus << " × " << j.cluster.gpu.name << ", batch "
    << j.training.global_batch << " × " << j.training.seq_len << ", "
    << FrameworkName(j.training.framework) << ", " << topology::PrecisionName(j.training.precision);
  return s.str();
}

// Overlaps the row's stack did not have: those the framework's policy turns
// on for the row's own configuration that the row leaves off.
FixedFields StackLimits(const PublishedRun& r) {
  const ParallelConfig& c = r.request.config;
  ParallelConfig policy = c;
  ApplyFrameworkOverlaps(FrameworkPreset(r.request.job.training.framework).support, &policy);
  FixedFields fixed;
  for (const auto& [key, member] : kOverlapSwitches) {
    if (policy.*member && !(c.*member)) fixed.emplace_back(key, "false");
  }
  return fixed;
}

}  // namespace

Result<std::vector<PickCheck>> CheckPicks(const std::vector<PublishedRun>& runs) {
  std::map<std::string, std::vector<const PublishedRun*>> questions;
  std::vector<std::string> order;
  for (const PublishedRun& r : runs) {
    if (Measured(r) <= 0) continue;
    const std::string key = QuestionKey(r);
    if (!questions.count(key)) order.push_back(key);
    questions[key].push_back(&r);
  }
  // The fastest tokens/s per GPU any row measured, per PartKey.
  std::map<std::string, const PublishedRun*> fastest;
  for (const PublishedRun& r : runs) {
    if (!InTokens(r) || Measured(r) <= 0) continue;
    const PublishedRun*& f = fastest[PartKey(r)];
    if (f == nullptr || MeasuredPerGpu(r) > MeasuredPerGpu(*f)) {
      f = &r;
    }
  }
  std::vector<PickCheck> out;
  for (const std::string& key : order) {
    const auto& rows = questions[key];
    const PublishedRun* best = rows.front();
    for (const PublishedRun* r : rows) {
      if (Measured(*r) > Measured(*best)) best = r;
    }
    const Job& job = best->request.job;
    const CostModel cm(job.model, job.training, job.cluster, static_cast<int>(job.gpus));
    PickCheck pc;
    pc.question = key;
    pc.source = best->source_key;
    pc.run_id = best->id;
    pc.rows = static_cast<int>(rows.size());
    pc.metric = InTokens(*best) ? "tokens/s" : "model TFLOP/s/GPU";
    pc.measured = Measured(*best);
    pc.expert_config = ConfigToString(best->request.config);
    const Prediction expert = cm.Predict(best->request.config);
    pc.expert_predicted = Predicted(*best, expert, expert.iteration_time_s);
    SearchOptions options;
    options.top_k = 10;
    options.fixed = StackLimits(*best);
    PT_RETURN_IF_ERROR(ValidateFixed(options.fixed).WithContext(best->id));
    const Search search(cm, options);
    const SearchResult result = search.RunAll();
    const std::vector<RankedPlan> ranked = RankForTrust(result.pool, Objective::kTime, 1);
    if (!ranked.empty()) {
      const Candidate& pick = ranked.front().best;
      pc.pick_config = ConfigToString(pick.config);
      pc.pick_predicted = Predicted(*best, pick.prediction, pick.prediction.iteration_time_s);
      pc.pick_pessimistic = Predicted(*best, pick.prediction, pick.prediction.pessimistic_time_s);
      pc.ratio = pc.pick_predicted / pc.measured;
      pc.pessimistic_ratio = pc.pick_pessimistic / pc.measured;
      pc.above_published_mfu = pick.prediction.above_published_mfu;
      if (InTokens(*best)) {
        const PublishedRun* f = fastest.at(PartKey(*best));
        pc.best_same_gpu_run = f->id;
        pc.best_same_gpu_per_gpu = MeasuredPerGpu(*f);
        pc.ratio_to_best_same_gpu = pc.pick_predicted / job.gpus / pc.best_same_gpu_per_gpu;
      }
    }
    out.push_back(std::move(pc));
  }
  return out;
}

OrderedJson PicksToJson(const std::vector<PickCheck>& picks) {
  OrderedJson a = OrderedJson::array();
  for (const PickCheck& p : picks) {
    OrderedJson j;
    j["question"] = p.question;
    j["source"] = p.source;
    j["run"] = p.run_id;
    j["rows"] = p.rows;
    j["metric"] = p.metric;
    j["measured"] = p.measured;
    j["expert_config"] = p.expert_config;
    j["expert_predicted"] = p.expert_predicted;
    j["pick_config"] = p.pick_config;
    j["pick_predicted"] = p.pick_predicted;
    j["pick_pessimistic"] = p.pick_pessimistic;
    j["ratio"] = p.ratio;
    j["pessimistic_ratio"] = p.pessimistic_ratio;
    j["above_published_mfu"] = p.above_published_mfu;
    if (p.ratio_to_best_same_gpu > 0) {
      j["best_same_gpu_run"] = p.best_same_gpu_run;
      j["best_same_gpu_tokens_per_s_per_gpu"] = p.best_same_gpu_per_gpu;
      j["ratio_to_best_same_gpu"] = p.ratio_to_best_same_gpu;
    }
    a.push_back(j);
  }
  return a;
}

}  // namespace paratune::planner
