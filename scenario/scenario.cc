#include "scenario/scenario.h"

#include "common/strings.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "topology/gpu.h"

namespace paratune::scenario {
namespace {

// The request's `training` object, or an empty one.
const Json& TrainingOf(const Json& request) {
  static const Json kEmpty = Json::object();
  if (!request.is_object()) return kEmpty;
  auto t = request.find("training");
  return t != request.end() && t->is_object() ? *t : kEmpty;
}

}  // namespace

std::vector<Assumption> JobAssumptions(const Json& request, const planner::Job& job,
                                       bool searches_space) {
  const Json& stated = TrainingOf(request);
  const planner::TrainingSpec& t = job.training;
  std::vector<Assumption> out;
  auto unstated = [&](const char* key) { return !stated.contains(key); };
  if (unstated("seq_len")) {
    out.push_back({"/training/seq_len", t.seq_len,
                   job.model.pretrain_seq_len > 0
                       ? "the model's published pretraining length"
                       : "the model's context length, at most " +
                             std::to_string(planner::kLongestPretrainSeqLen) +
                             " (the longest pretraining length published)"});
  }
  if (unstated("global_batch")) {
    out.push_back({"/training/global_batch", t.global_batch,
                   job.model.pretrain_global_batch > 0
                       ? "the model's published pretraining batch, in tokens, at this sequence "
                         "length"
                       : "2^22 tokens at this sequence length (the model has no published "
                         "pretraining batch)"});
  }
  if (unstated("precision")) {
    out.push_back({"/training/precision", planner::StatedPrecisionName(t),
                   "the best precision " + job.cluster.gpu.name + " trains in"});
  }
  if (t.precision == topology::Precision::kFp8 && !t.recipe_stated) {
    out.push_back({"/training/precision", topology::RecipeName(t.recipe),
                   "fp8 named without a recipe: " + job.cluster.gpu.name + "'s default recipe"});
  }
  if (unstated("framework") && searches_space) {
    out.push_back({"/training/framework", "each of the space",
                   "no framework named: the search costs every framework of the space"});
  } else if (unstated("framework")) {
    out.push_back({"/training/framework", planner::FrameworkName(t.framework),
                   "the default framework (Megatron-LM/Core)"});
  }
  if (unstated("attention")) {
    out.push_back({"/training/attention", planner::AttentionName(t.attention),
                   "fused attention, every framework's default"});
  }
  if (unstated("main_grads_fp32")) {
    out.push_back({"/training/main_grads_fp32", t.main_grads_fp32,
                   t.main_grads_fp32
                       ? "fp32 main gradients, accumulated and reduced in fp32: Megatron-LM's "
                         "default for bf16 (megatron/training/arguments.py:1204-1217 @d98e8a6 sets "
                         "accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16). "
                         "Megatron-Bridge's performance recipes reduce in bf16 "
                         "(grad_reduce_in_fp32=False): state main_grads_fp32=false to price them"
                       : "fp16 training keeps its gradients in fp16"});
  }
  if (unstated("expandable_segments")) {
    out.push_back({"/training/expandable_segments", t.expandable_segments,
                   "PyTorch's caching allocator in expandable segments, as torchtitan's "
                   "run_train.sh and Megatron-Bridge's launch templates set it and as every "
                   "emitted launch exports it (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): "
                   "reserved memory stays near the allocated peak. Without it, fixed-size "
                   "segments strand free memory between blocks (a Llama-3 70B run measured at "
                   "58.8 GB allocated ran out of 80 GB H100s, Megatron-Bridge "
                   "skills/nemo-mbridge-perf-memory-tuning/SKILL.md): state "
                   "expandable_segments=false to price that"});
  }
  if (t.compile && unstated("compile_loss")) {
    out.push_back({"/training/compile_loss", t.compile_loss,
                   "torch.compile compiles the loss with the model, as torchtitan's "
                   "compile.components default [\"model\", \"loss\"] does; torchtitan "
                   "releases before it could (9dec370 and earlier) ran the loss eager: state "
                   "compile_loss=false to price them"});
  }
  if (const planner::ModelSpec trained = planner::ModelAtSequence(job.model, t.seq_len);
      trained.max_seq_len != job.model.max_seq_len) {
    out.push_back({"/model/max_seq_len", trained.max_seq_len,
                   job.model.name + "'s " + std::to_string(job.model.max_seq_len) +
                       " learned positions extended to the sequence, as the frameworks build "
                       "it (one row per position; Megatron refuses fewer than --seq-length): " +
                       std::to_string(trained.ParamCount() - job.model.ParamCount()) +
                       " parameters more, priced with their gradients and optimizer states"});
  }
  if (unstated("headroom")) {
    out.push_back({"/training/headroom", t.headroom,
                   "fraction of GPU memory kept free beyond the predicted reserved memory for "
                   "a 'fits' verdict: the margin for the memory model's error, the same "
                   "default for every command (validate reports the rows that ran that it "
                   "would refuse)"});
  }
  return out;
}

void ResolveConfig(const Json& stated, planner::Framework f, planner::ParallelConfig* c,
                   std::vector<Assumption>* assumed) {
  const planner::ParallelConfig policy = planner::WithFrameworkPolicy(f, *c);
  const std::string fw = planner::FrameworkName(f);
  auto is_stated = [&](const char* key) { return stated.is_object() && stated.contains(key); };
  for (const planner::OverlapSwitch& sw : planner::kOverlapSwitches) {
    if (is_stated(sw.key)) continue;
    c->*sw.field = policy.*sw.field;
    assumed->push_back({std::string("/config/") + sw.key, c->*sw.field,
                        fw + "'s overlap policy where it applies (its preset's overlaps), as "
                             "plan ranks every configuration"});
  }
  if (!is_stated("moe_a2a_overlap") && c->ep > 1) {
    c->moe_a2a_overlap = policy.moe_a2a_overlap;
    assumed->push_back({"/config/moe_a2a_overlap", c->moe_a2a_overlap,
                        c->moe_a2a_overlap
                            ? "Megatron-Core overlaps the expert all-to-all where its rules allow"
                            : fw + " does not overlap the expert all-to-all here"});
  }
}

Result<Scenario> ResolvePredict(const Json& request) {
  Scenario s;
  PT_ASSIGN_OR_RETURN(s.request, planner::ParsePredictRequest(request));
  s.assumed = JobAssumptions(request, s.request.job);
  static const Json kNone = Json::object();
  const Json& stated = request.is_object() && request.contains("config") ? request["config"] : kNone;
  ResolveConfig(stated, s.request.job.training.framework, &s.request.config, &s.assumed);
  return s;
}

OrderedJson AssumedToJson(const std::vector<Assumption>& assumed) {
  OrderedJson out = OrderedJson::array();
  for (const Assumption& a : assumed) {
    OrderedJson j;
    j["key"] = a.key;
    j["value"] = a.value;
    j["why"] = a.why;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace paratune::scenario
