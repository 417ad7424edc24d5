#include "planner/request.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "common/user_input.h"

namespace paratune::planner {

int DefaultSeqLen(const ModelSpec& model) {
  if (model.pretrain_seq_len > 0) return model.pretrain_seq_len;
  return model.max_seq_len > 0 ? std::min(model.max_seq_len, kLongestPretrainSeqLen) : 2048;
}

int64_t DefaultGlobalBatch(const ModelSpec& model, int seq_len) {
  const int64_t tokens = model.pretrain_global_batch > 0
                             ? model.pretrain_global_batch * model.pretrain_seq_len
                             : kDefaultBatchTokens;
  return std::max<int64_t>(1, tokens / std::max(seq_len, 1));
}

namespace {

// An optional count of tokens or sequences: a JSON integer, or a string as
// people type it on the command line or the page ("8k", "128K", "1M",
// "2^20"; ParseCount), so every path reads one form the same way.
Status OptCount(ObjectReader& r, std::string_view key, int64_t* out) {
  if (r.Has(key) && r.Raw(key).is_string()) {
    PT_ASSIGN_OR_RETURN(*out, ParseCount(r.Raw(key).get<std::string>(), r.PointerOf(key)));
    return Status::Ok();
  }
  Status s = r.OptInteger(key, out);
  if (!s.ok()) return r.Error(key, std::string("must be an integer or a string of ") + kCountForms);
  return s;
}

// OptCount into an int within [1, hi]; out of range, the error names the range.
Status OptCountIn(ObjectReader& r, std::string_view key, int64_t hi, int* out) {
  int64_t v = *out;
  PT_RETURN_IF_ERROR(OptCount(r, key, &v));
  if (v < 1 || v > hi) return r.Error(key, "must be in [1, " + std::to_string(hi) + "]");
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Result<TrainingSpec> ParseTraining(const Json& j, const std::string& pointer,
                                   const ModelSpec& model) {
  TrainingSpec t;
  ObjectReader r(j, pointer);
  t.seq_len = DefaultSeqLen(model);
  PT_RETURN_IF_ERROR(OptCountIn(r, "seq_len", kMaxModelSeqLen, &t.seq_len));
  t.global_batch = DefaultGlobalBatch(model, t.seq_len);
  PT_RETURN_IF_ERROR(OptCount(r, "global_batch", &t.global_batch));
  // The search enumerates the divisors of the batch: bounded, it stays fast.
  if (t.global_batch < 1 || t.global_batch > kMaxGlobalBatch) {
    return r.Error("global_batch", "must be in [1, " + std::to_string(kMaxGlobalBatch) + "]");
  }
  std::string s = "bf16";
  PT_RETURN_IF_ERROR(r.OptString("precision", &s));
  // A low-precision recipe by name (topology/gpu.h) trains in precision fp8
  // with that recipe; "fp8" takes the GPU's fp8_default_recipe (ParseJob).
  if (auto recipe = topology::ParseRecipe(s); recipe.ok()) {
    t.precision = topology::Precision::kFp8;
    t.recipe = *recipe;
    t.recipe_stated = true;
  } else {
    auto prec = topology::ParsePrecision(s);
    if (!prec.ok()) {
      const std::vector<std::string> valid = {"fp32",          "tf32",        "bf16",
                                              "fp16",          "fp8",         "fp8_delayed",
                                              "fp8_current",   "fp8_blockwise", "mxfp8",
                                              "nvfp4"};
      const std::string hint = DidYouMean(s, valid);
      std::string names;
      for (const std::string& v : valid) names += (names.empty() ? "" : ", ") + v;
      return r.Error("precision", "unknown precision '" + s + "'" +
                                      (hint.empty() ? "" : "; " + hint) + " (valid: " + names +
                                      ")");
    }
    t.precision = *prec;
  }
  s = "flash";
  PT_RETURN_IF_ERROR(r.OptString("attention", &s));
  if (s == "flash") t.attention = Attention::kFlash;
  else if (s == "unfused") t.attention = Attention::kUnfused;
  else return r.Error("attention", "must be \"flash\" or \"unfused\"");
  t.main_grads_fp32 = t.precision != topology::Precision::kFp16;
  PT_RETURN_IF_ERROR(r.OptBool("main_grads_fp32", &t.main_grads_fp32));
  PT_RETURN_IF_ERROR(r.OptBool("expandable_segments", &t.expandable_segments));
  PT_RETURN_IF_ERROR(r.OptNumber("headroom", &t.headroom));
  if (t.headroom < 0 || t.headroom >= 1) return r.Error("headroom", "must be in [0, 1)");
  PT_RETURN_IF_ERROR(OptCountIn(r, "fpdt_chunk_tokens", kMaxModelSeqLen, &t.fpdt_chunk_tokens));
  PT_RETURN_IF_ERROR(r.OptParsed("framework", ParseFramework, &t.framework));
  PT_RETURN_IF_ERROR(r.OptBool("compile", &t.compile));
  if (t.compile && !FrameworkPreset(t.framework).support.compile) {
    return r.Error("compile", std::string(FrameworkName(t.framework)) +
                                  " does not run the model under torch.compile (its fused kernels "
                                  "come from its own code); drop compile or pick fsdp, deepspeed or torchtitan");
  }
  PT_RETURN_IF_ERROR(r.OptBool("compile_loss", &t.compile_loss));
  PT_RETURN_IF_ERROR(r.OptNumber("moe_skew", &t.moe_skew));
  if (!(t.moe_skew >= 1.0 && t.moe_skew <= 1024.0))
    return r.Error("moe_skew", "must be in [1, 1024]");
  PT_RETURN_IF_ERROR(r.OptNumber("ddp_bucket_elements", &t.ddp_bucket_elements));
  if (!(t.ddp_bucket_elements >= 0 && t.ddp_bucket_elements <= 1e12)) {
    return r.Error("ddp_bucket_elements", "must be in [0, 1e12] (0 = the framework's own rule)");
  }
  if (t.ddp_bucket_elements > 0 &&
      !(FrameworkPreset(t.framework).costs.ddp_bucket_min_elements > 0)) {
    return r.Error("ddp_bucket_elements", std::string("is Megatron's --ddp-bucket-size; ") +
                                              FrameworkName(t.framework) +
                                              " states no data-parallel buckets");
  }
  PT_RETURN_IF_ERROR(r.OptInt("loss_chunks", &t.loss_chunks));
  if (t.loss_chunks < 0 || t.loss_chunks > 4096) {
    return r.Error("loss_chunks", "must be in [0, 4096] (0 = the whole micro-batch's logits at once)");
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return t;
}

const char* StatedPrecisionName(const TrainingSpec& t) {
  return t.precision == topology::Precision::kFp8 && t.recipe_stated
             ? topology::RecipeName(t.recipe)
             : topology::PrecisionName(t.precision);
}

OrderedJson TrainingToJson(const TrainingSpec& t) {
  OrderedJson j;
  j["seq_len"] = t.seq_len;
  j["global_batch"] = t.global_batch;
  j["precision"] = StatedPrecisionName(t);
  j["attention"] = AttentionName(t.attention);
  j["main_grads_fp32"] = t.main_grads_fp32;
  j["headroom"] = t.headroom;
  j["fpdt_chunk_tokens"] = t.fpdt_chunk_tokens;
  j["framework"] = FrameworkName(t.framework);
  j["compile"] = t.compile;
  if (t.compile) j["compile_loss"] = t.compile_loss;  // read only under compile
  if (t.moe_skew != 1.0) j["moe_skew"] = t.moe_skew;  // written when set: dense documents unchanged
  if (t.loss_chunks > 0) j["loss_chunks"] = t.loss_chunks;
  if (t.ddp_bucket_elements > 0) j["ddp_bucket_elements"] = t.ddp_bucket_elements;
  // Written when off: documents of the default allocator unchanged.
  if (!t.expandable_segments) j["expandable_segments"] = false;
  return j;
}

Status ResolveRecipe(const topology::GpuSpec& gpu, TrainingSpec* t, const std::string& pointer) {
  using topology::Precision;
  if (t->precision != Precision::kFp8) return Status::Ok();
  if (!t->recipe_stated) t->recipe = gpu.fp8_default_recipe;
  if (gpu.peak_tflops[static_cast<int>(Precision::kFp8)] <= 0 || !gpu.Supports(t->recipe)) {
    std::string runs;
    for (int i = 0; i < topology::kNumRecipes; ++i) {
      if (!gpu.recipes[i]) continue;
      runs += (runs.empty() ? "" : ", ") +
              std::string(topology::RecipeName(static_cast<topology::Recipe>(i)));
    }
    return Status::InvalidArgument(
        pointer + "/precision: " + gpu.name + " cannot run " +
        (t->recipe_stated ? topology::RecipeName(t->recipe) : "fp8") + " (" +
        (runs.empty() ? "it has no low-precision recipe; use bf16" : "its recipes: " + runs) + ")");
  }
  return Status::Ok();
}

topology::Precision BestTrainingPrecision(const topology::GpuSpec& gpu) {
  using topology::Precision;
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kTf32}) {
    if (gpu.PeakTflops(p) > 0) return p;
  }
  return Precision::kFp32;
}

Result<Job> ParseJob(const Json& request, ObjectReader& r) {
  Job job;
  if (!r.Has("model")) return r.Error("model", "is required (a preset name or an object)");
  PT_ASSIGN_OR_RETURN(job.model, ResolveModel(r.Raw("model"), r.PointerOf("model")));
  if (!r.Has("cluster")) return r.Error("cluster", "is required (a preset name or an object)");
  PT_ASSIGN_OR_RETURN(job.cluster, topology::ResolveCluster(r.Raw("cluster"), r.PointerOf("cluster")));
  int64_t gpus = 0;
  PT_RETURN_IF_ERROR(r.Integer("gpus", &gpus));
  if (gpus < 1 || gpus > kMaxGpus)
    return r.Error("gpus", "must be in [1, " + std::to_string(kMaxGpus) + "]");
  job.gpus = static_cast<int>(gpus);
  if (job.cluster.max_nodes > 0 &&
      gpus > int64_t{job.cluster.max_nodes} * job.cluster.gpus_per_node) {
    return r.Error("gpus", "exceeds the cluster (" + std::to_string(job.cluster.max_nodes) +
                               " nodes × " + std::to_string(job.cluster.gpus_per_node) + " GPUs" +
                               (job.cluster.nics_per_node == 0
                                    ? "; it has no NIC, so no job spans more"
                                    : "") +
                               ")");
  }
  if (!r.Has("training")) return r.Error("training", "is required ({seq_len, global_batch, ...})");
  Json training = r.Raw("training");
  if (training.is_object() && !training.contains("precision")) {
    training["precision"] = topology::PrecisionName(BestTrainingPrecision(job.cluster.gpu));
    job.precision_defaulted = true;
  }
  auto absent = [&training](const char* key) {
    return training.is_object() && (!training.contains(key) || training[key].is_null());
  };
  job.seq_defaulted = absent("seq_len");
  job.batch_defaulted = absent("global_batch");
  PT_ASSIGN_OR_RETURN(job.training, ParseTraining(training, r.PointerOf("training"), job.model));
  if (!(job.cluster.gpu.PeakTflops(job.training.precision) > 0)) {
    return Status::InvalidArgument(r.PointerOf("training") + "/precision: " + job.cluster.gpu.name +
                                   " has no " + topology::PrecisionName(job.training.precision) +
                                   " support (e.g. V100: use fp16)");
  }
  PT_RETURN_IF_ERROR(ResolveRecipe(job.cluster.gpu, &job.training, r.PointerOf("training")));
  (void)request;
  return job;
}

Result<PredictRequest> ParsePredictRequest(const Json& j) {
  PredictRequest req;
  ObjectReader r(j, "");
  if (r.Has("schema")) {
    std::string schema;
    PT_RETURN_IF_ERROR(r.String("schema", &schema));
    if (schema != "paratune.predict_request/v1") {
      return r.Error("schema", "must be \"paratune.predict_request/v1\"");
    }
  } else {
    r.Ignore("schema");
  }
  PT_ASSIGN_OR_RETURN(req.job, ParseJob(j, r));
  Json empty = Json::object();
  const Json& cfg = r.Has("config") ? r.Raw("config") : empty;
  if (!r.Has("config")) r.Ignore("config");
  PT_ASSIGN_OR_RETURN(req.config, ParseConfig(cfg, "/config", req.job.gpus));
  PT_RETURN_IF_ERROR(r.OptString("profile", &req.profile_path));
  PT_RETURN_IF_ERROR(r.Finish());
  return req;
}

Status ValidateConfig(const CostModel& cm, const ParallelConfig& c) {
  Reason reason = cm.CheckRules(c);
  if (reason == Reason::kOk || reason == Reason::kOutOfMemory) return Status::Ok();
  return Status::InvalidArgument(std::string(ReasonField(reason)) + ": " + cm.Explain(reason, c) +
                                 " [" + ReasonName(reason) + "]");
}

OrderedJson PredictionFields(const Prediction& p, const CostModel& cm) {
  OrderedJson j;
  j["fits"] = p.fits;
  if (!p.fits && p.reason == Reason::kOutOfHostMemory) {
    j["reason"] = ReasonName(p.reason);
    j["reason_detail"] = p.memory.host_usable_GiB > 0
                             ? "needs " + FormatFixed(p.memory.host_node_GiB, 1) +
                                   " GiB of host memory per node, usable " +
                                   FormatFixed(p.memory.host_usable_GiB, 1) + " GiB (less " +
                                   FormatFixed(cm.training().headroom * 100, 0) + " % headroom)"
                             : cm.Explain(Reason::kOutOfHostMemory, ParallelConfig{});
  } else if (!p.fits) {
    j["reason"] = ReasonName(p.reason);
    j["reason_detail"] = "needs " + FormatFixed(p.memory.reserved_GiB, 2) +
                         " GiB per GPU reserved at the peak, usable " +
                         FormatFixed(p.memory.usable_GiB, 2) + " GiB (capacity " +
                         FormatFixed(p.memory.capacity_GiB, 1) + " GiB less " +
                         FormatFixed(cm.training().headroom * 100, 0) + " % headroom)";
  }
  j["iteration_time_s"] = p.iteration_time_s;
  j["iteration_time_s_range"] = {p.iteration_time_s * (1.0 - p.uncertainty),
                                 p.iteration_time_s * (1.0 + p.uncertainty)};
  // What the search ranks by: the slow end of the band, never faster than the
  // GPU's published MFU ceiling (docs/model.md, "Ranking people can trust").
  j["pessimistic_iteration_time_s"] = p.pessimistic_time_s;
  j["evidence_steps"] = p.evidence_steps;
  j["feature_band"] = p.feature_band;
  j["published_mfu_ceiling"] = p.published_mfu_ceiling;
  j["mfu_vs_ceiling"] = p.mfu_vs_ceiling;
  j["above_published_mfu"] = p.above_published_mfu;
  j["tokens_per_s"] = p.tokens_per_s;
  j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  j["hardware_tflops_per_gpu"] = p.hardware_tflops_per_gpu;
  j["executed_tflops_per_gpu"] = p.executed_tflops_per_gpu;
  j["flops_convention"] = p.flops_convention;
  j["mfu"] = p.mfu;
  j["hfu"] = p.hfu;
  j["micro_batches"] = p.micro_batches;
  OrderedJson mem;
  mem["params"] = p.memory.params_GiB;
  mem["grads"] = p.memory.grads_GiB;
  mem["optimizer"] = p.memory.optimizer_GiB;
  mem["activations"] = p.memory.activations_GiB;
  mem["optimizer_step"] = p.memory.optimizer_step_GiB;
  mem["peak_moment"] = p.memory.peak_at_optimizer_step ? "optimizer_step" : "backward";
  mem["buffers"] = p.memory.buffers_GiB;
  mem["total"] = p.memory.total_GiB;
  mem["peak_allocated"] = p.memory.peak_allocated_GiB;
  mem["first_stage_allocated"] = p.memory.first_stage_allocated_GiB;
  mem["last_stage_allocated"] = p.memory.last_stage_allocated_GiB;
  mem["reserved"] = p.memory.reserved_GiB;
  mem["capacity"] = p.memory.capacity_GiB;
  mem["usable"] = p.memory.usable_GiB;
  mem["host_per_gpu"] = p.memory.host_per_gpu_GiB;
  mem["host_per_node"] = p.memory.host_node_GiB;
  mem["host_usable"] = p.memory.host_usable_GiB;
  j["memory_GiB"] = mem;
  j["binding"] = p.memory.Binding();
  const TimeBreakdown& b = p.breakdown;
  OrderedJson br;
  for (const BreakdownTerm& term : kBreakdownTerms) {
    const double v = b.*term.seconds;
    if (term.only_when_positive && !(v > 0)) continue;
    br[term.key] = v;
  }
  j["breakdown_s"] = br;
  return j;
}

OrderedJson PredictionToJson(const Job& job, const ParallelConfig& c, const Prediction& p,
                             const CostModel& cm) {
  OrderedJson j;
  j["schema"] = kPredictionSchema;
  j["model"] = job.model.name;
  j["cluster"] = job.cluster.name;
  j["cluster_fingerprint"] = topology::Fingerprint(job.cluster);
  if (!job.cluster.profile_fingerprint.empty()) j["profile"] = job.cluster.profile_fingerprint;
  j["gpus"] = job.gpus;
  j["training"] = TrainingToJson(job.training);
  j["config"] = ConfigToJson(c);
  const OrderedJson fields = PredictionFields(p, cm);  // a named object: items() refers to it
  for (auto& [k, v] : fields.items()) j[k] = v;
  return j;
}

}  // namespace paratune::planner
