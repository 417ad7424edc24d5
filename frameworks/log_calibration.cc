// Calibration from training logs: the plan request a parsed log stands for
// (what was read from the log, what was assumed), the prediction for it, and
// the fit of the framework × GPU corrections over many logged runs
// (docs/model.md, "Calibration from training logs"). Reading the logs is logs.cc.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "common/enum_names.h"
#include "common/strings.h"
#include "frameworks/logs.h"
#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/model.h"

namespace paratune::planner {
namespace {

std::string Describe(const char* what, const std::string& value, const char* source) {
  return std::string(what) + " " + value + " (" + source + ")";
}

// The MoE fields of an inline model built from a log (planner/model.h keys).
void AddMoeModelFields(const LoggedRun& run, Json* m, std::vector<std::string>* assumed) {
  if (run.head_dim && run.hidden && run.heads && *run.head_dim * *run.heads != *run.hidden) {
    (*m)["head_dim"] = *run.head_dim;
  }
  if (!run.experts) return;
  (*m)["experts"] = *run.experts;
  (*m)["top_k"] = run.top_k.value_or(2);
  if (!run.top_k) assumed->push_back("top_k 2, Megatron-Core's default (not in the log)");
  if (run.moe_ffn_hidden) {
    (*m)["moe_ffn_hidden"] = *run.moe_ffn_hidden;
  } else if (m->contains("ffn_hidden")) {
    (*m)["moe_ffn_hidden"] = (*m)["ffn_hidden"];
    assumed->push_back("expert width = ffn_hidden (not in the log)");
  }
  if (run.shared_ffn_hidden) (*m)["shared_ffn_hidden"] = *run.shared_ffn_hidden;
  if (run.first_dense_layers) (*m)["first_dense_layers"] = *run.first_dense_layers;
  if (run.moe_layer_step) (*m)["moe_layer_step"] = *run.moe_layer_step;
  if (run.router) (*m)["router"] = *run.router;
  if (run.capacity_factor) (*m)["capacity_factor"] = *run.capacity_factor;
  if (run.mtp_layers) (*m)["mtp_layers"] = *run.mtp_layers;
}

// The preset with the log's architecture, if any.
std::optional<std::string> MatchPreset(const LoggedRun& run) {
  for (const std::string& n : ModelPresetNames()) {
    auto m = ModelPreset(n);
    if (!m.ok()) continue;
    if (m->layers != *run.layers || m->hidden != *run.hidden || m->heads != *run.heads) continue;
    if (m->kv_heads != run.kv_heads.value_or(*run.heads)) continue;
    if (run.ffn_hidden && m->ffn_hidden != *run.ffn_hidden) continue;
    if (run.swiglu && m->gated_ffn != *run.swiglu) continue;
    // A dense log never matches a MoE preset and back; MoE logs match on the
    // experts, top-k and expert width they state.
    if (m->experts != run.experts.value_or(0)) continue;
    if (run.top_k && m->top_k != *run.top_k) continue;
    if (run.moe_ffn_hidden && m->moe_ffn_hidden != *run.moe_ffn_hidden) continue;
    return n;
  }
  return std::nullopt;
}

// What RequestFromLog builds, step by step: each step reads the log, falls
// back to a flag, and records a fact neither gives in `missing` (with the
// flag that supplies it) so that one error names them all.
struct LogRequestBuilder {
  const LoggedRun& run;
  const LogFlags& flags;
  LogRequest& out;
  Json req = Json::object();
  Json training = Json::object();
  std::vector<std::string> missing = {};  // "the GPU count: pass --gpus", ...
  Status parse_error = Status::Ok();        // a flag that does not parse

  void ReadFramework();
  void ReadCluster();
  void ReadGpus();
  void ReadModel();
  void ReadBatchAndSequence();
  Status Config();
  Status MeasuredTime(const StepSummaryOptions& options);

 private:
  void InlineModel(const std::string& arch);
};

void LogRequestBuilder::ReadFramework() {
  // The framework behind each log format, in LogFormat's order (logs.h).
  constexpr planner::Framework kWriter[] = {
      Framework::kMegatron, Framework::kMegatronDeepSpeed, Framework::kDeepSpeed,
      Framework::kTorchtitan, Framework::kFsdp};
  planner::Framework fw = EnumLookup(run.format, kWriter, Framework::kMegatron);
  if (flags.framework) {
    if (auto parsed = ParseFramework(*flags.framework); parsed.ok()) {
      fw = *parsed;
      out.assumed.push_back(Describe("framework", FrameworkName(fw), "--framework") +
                            "; the log reads as " + LogFormatName(run.format));
    } else {
      parse_error = parsed.status();
    }
  } else if (run.format == LogFormat::kHfTrainer) {
    out.assumed.push_back(
        std::string("framework fsdp: the Hugging Face Trainer's PyTorch stack "
                    "(pass --framework deepspeed if it ran DeepSpeed)"));
  } else {
    out.read_from_log.push_back(std::string("framework ") + FrameworkName(fw) + " (" +
                                LogFormatName(run.format) + " log format)");
  }
  out.framework = fw;
  training["framework"] = FrameworkName(fw);
}

// --cluster, else the DGX preset of the device a line names (the node and
// network are then the preset's, an assumption).
void LogRequestBuilder::ReadCluster() {
  if (flags.cluster) {
    req["cluster"] = *flags.cluster;
    out.assumed.push_back("cluster " +
                          (flags.cluster->is_string() ? flags.cluster->get<std::string>()
                                                      : std::string("from file")) +
                          " (--cluster)");
    if (run.gpu_device) {
      out.read_from_log.push_back("device " + *run.gpu_device + " (device-name line)");
    }
  } else if (auto preset = run.gpu_device ? ClusterForDevice(*run.gpu_device) : std::nullopt) {
    req["cluster"] = *preset;
    out.read_from_log.push_back("device " + *run.gpu_device + " (device-name line)");
    out.assumed.push_back("cluster " + *preset +
                          ": the DGX preset of that GPU (its nodes and network; --cluster)");
  } else {
    missing.push_back(run.gpu_device
                          ? "the cluster (the log's device " + *run.gpu_device +
                                " has no cluster preset): pass --cluster"
                          : std::string("the cluster: pass --cluster"));
  }
}

void LogRequestBuilder::ReadGpus() {
  if (run.world_size) {
    req["gpus"] = *run.world_size;
    out.read_from_log.push_back(Describe("gpus", std::to_string(*run.world_size), "world size"));
    if (flags.gpus && *flags.gpus != *run.world_size) {
      out.warnings.push_back("--gpus " + std::to_string(*flags.gpus) + " contradicts the log's " +
                             std::to_string(*run.world_size) + "; the log wins");
    }
  } else if (flags.gpus) {
    req["gpus"] = *flags.gpus;
    out.assumed.push_back(Describe("gpus", std::to_string(*flags.gpus), "--gpus"));
  } else {
    missing.push_back("the GPU count: pass --gpus");
  }
}

void LogRequestBuilder::InlineModel(const std::string& arch) {
  auto& assumed = out.assumed;
  Json m = Json::object();
  m["name"] = "from-log";
  m["layers"] = *run.layers;
  m["hidden"] = *run.hidden;
  m["heads"] = *run.heads;
  m["kv_heads"] = run.kv_heads.value_or(*run.heads);
  if (run.ffn_hidden) {
    m["ffn_hidden"] = *run.ffn_hidden;
  } else {
    assumed.push_back("ffn_hidden 4 x hidden (not in the log)");
  }
  if (run.vocab) {
    m["vocab"] = *run.vocab;
  } else {
    // GPT-2 BPE (Radford et al. 2019), Megatron's GPT default tokenizer.
    m["vocab"] = 50257;
    assumed.push_back("vocab 50257, GPT-2 BPE (not in the log; pass --model for another)");
  }
  m["gated_ffn"] = run.swiglu.value_or(false);
  m["tied_embeddings"] = !run.untied_embeddings.value_or(false);
  m["dropout"] = run.dropout.value_or(false);
  m["linear_bias"] = run.linear_bias.value_or(true);
  m["norm"] = run.rmsnorm.value_or(false) ? "rmsnorm" : "layernorm";
  if (run.max_positions) m["max_seq_len"] = *run.max_positions;
  AddMoeModelFields(run, &m, &assumed);
  req["model"] = m;
  out.read_from_log.push_back("model built from the log's arguments (" + arch + ")");
}

void LogRequestBuilder::ReadModel() {
  if (flags.model) {
    req["model"] = *flags.model;
    out.assumed.push_back(
        "model " +
        (flags.model->is_string() ? flags.model->get<std::string>() : std::string("from file")) +
        " (--model)");
    if (run.layers && run.hidden && run.heads) {
      auto m = ResolveModel(*flags.model, "--model");
      if (m.ok() &&
          (m->layers != *run.layers || m->hidden != *run.hidden || m->heads != *run.heads)) {
        out.warnings.push_back("--model has " + std::to_string(m->layers) + " layers, hidden " +
                               std::to_string(m->hidden) + ", " + std::to_string(m->heads) +
                               " heads; the log states " + std::to_string(*run.layers) + ", " +
                               std::to_string(*run.hidden) + ", " + std::to_string(*run.heads) +
                               "; --model is used");
      }
    }
  } else if (run.layers && run.hidden && run.heads) {
    const std::string arch =
        std::to_string(*run.layers) + " layers, hidden " + std::to_string(*run.hidden) + ", " +
        std::to_string(*run.heads) + " heads" +
        (run.kv_heads ? ", " + std::to_string(*run.kv_heads) + " kv heads" : "");
    if (auto preset = MatchPreset(run)) {
      req["model"] = *preset;
      out.read_from_log.push_back("model " + *preset + " (the preset with the log's " + arch +
                                  ")");
    } else {
      InlineModel(arch);
    }
  } else {
    missing.push_back("the model's architecture: pass --model (a preset or a file)");
  }
}

void LogRequestBuilder::ReadBatchAndSequence() {
  auto& read = out.read_from_log;
  auto& assumed = out.assumed;
  if (run.global_batch) {
    training["global_batch"] = *run.global_batch;
    read.push_back(Describe("global batch", std::to_string(*run.global_batch), "log"));
    if (flags.global_batch && *flags.global_batch != *run.global_batch) {
      out.warnings.push_back("--global-batch contradicts the log; the log wins");
    }
  } else if (flags.global_batch) {
    training["global_batch"] = *flags.global_batch;
    assumed.push_back(
        Describe("global batch", std::to_string(*flags.global_batch), "--global-batch"));
  } else {
    missing.push_back("the global batch: pass --global-batch");
  }
  if (run.seq_len) {
    training["seq_len"] = *run.seq_len;
    read.push_back(Describe("seq", std::to_string(*run.seq_len), "log"));
  } else if (flags.seq_len) {
    training["seq_len"] = *flags.seq_len;
    assumed.push_back(Describe("seq", std::to_string(*flags.seq_len), "--seq"));
  } else {
    assumed.push_back("seq: the model's default length (not in the log; --seq)");
  }
  if (run.precision) {
    training["precision"] = *run.precision;
    read.push_back("precision " + *run.precision + " (" +
                   (run.precision_recipe ? *run.precision_recipe : std::string("log")) + ")");
    if (flags.precision && *flags.precision != *run.precision) {
      out.warnings.push_back("--precision " + *flags.precision + " contradicts the log's " +
                             *run.precision + "; the log wins");
    }
  } else if (flags.precision) {
    training["precision"] = *flags.precision;
    assumed.push_back(Describe("precision", *flags.precision, "--precision"));
  } else {
    assumed.push_back("precision: the GPU's best (not in the log; --precision)");
  }
  if (flags.attention) training["attention"] = *flags.attention;
  req["training"] = training;
}

// torchtitan's FSDP2 mesh as the planner's: the shard group is gz and HSDP's
// replicas are dp (gdata). data_parallel_shard_degree -1 takes every rank the
// other degrees leave (torchtitan ParallelDims._validate).
void PutTitanDataParallel(const LoggedRun& run, int gpus,
                          const std::function<void(const char*, const Json&, const char*)>& put) {
  const int replicate = std::max(1, run.dp_replicate.value_or(1));
  int shard = run.dp_shard.value_or(-1);
  const int rest = run.tp.value_or(1) * run.pp.value_or(1) * run.cp.value_or(1) * replicate;
  if (shard < 1 && rest > 0 && gpus % rest == 0) shard = gpus / rest;
  if (shard > 1) {
    put("gz", shard,
        run.dp_shard && *run.dp_shard > 0 ? "FSDP2 shard degree (dp_shard)"
                                          : "FSDP2 shard degree: the ranks the other degrees leave");
  }
  if (run.dp_replicate && *run.dp_replicate > 1) {
    put("dp", *run.dp_replicate, "HSDP replicate degree (dp_replicate)");
  }
}

// The configuration: the log's statements, then --config for the rest.
Status LogRequestBuilder::Config() {
  auto& read = out.read_from_log;
  const int gpus = req["gpus"].get<int>();
  Json config = Json::object();
  auto put = [&](const char* key, const Json& v, const char* what) {
    config[key] = v;
    read.push_back(std::string(key) + "=" + (v.is_string() ? v.get<std::string>() : v.dump()) +
                   " (" + what + ")");
  };
  if (run.tp) put("tp", *run.tp, "tensor parallel size");
  if (run.pp) put("pp", *run.pp, "pipeline parallel size");
  if (run.vpp && *run.vpp > 1) put("vpp", *run.vpp, "virtual pipeline stages");
  if (run.cp) put("cp", *run.cp, "context parallel size");
  if (run.sp) put("sp", *run.sp, "sequence_parallel");
  if (run.micro_batch) put("mbs", *run.micro_batch, "micro batch size");
  // The expert layout, in the configuration's key names.
  Json& moe = out.moe_config;
  moe = Json::object();
  if (run.ep) moe["ep"] = *run.ep;
  if (run.etp && (run.ep || *run.etp > 1)) moe["etp"] = *run.etp;
  if (run.moe_dispatcher) moe["moe_dispatcher"] = *run.moe_dispatcher;
  if (run.moe_a2a_overlap) moe["moe_a2a_overlap"] = *run.moe_a2a_overlap;
  if (run.recompute) put("recompute", *run.recompute, "recompute setting");
  if (run.distributed_optimizer)
    put("distributed_optimizer", *run.distributed_optimizer, "use_distributed_optimizer");
  if (run.offload_optimizer)
    put("offload_optimizer", *run.offload_optimizer, "zero_config offload_optimizer");
  if (run.offload_param) put("offload_param", *run.offload_param, "zero_config offload_param");
  if (run.format == LogFormat::kTorchtitan) {
    if (run.zero || run.dp_shard || run.dp_replicate) PutTitanDataParallel(run, gpus, put);
  } else if (run.zero) {
    put("zero", *run.zero, "ZeRO stage");
  }
  bool overlaps_stated = false;
  if (run.overlap_grad_reduce)
    put("overlap_grad_reduce", *run.overlap_grad_reduce, "log"), overlaps_stated = true;
  if (run.overlap_param_gather)
    put("overlap_param_gather", *run.overlap_param_gather, "log"), overlaps_stated = true;
  if (run.tp_comm_overlap)
    put("tp_comm_overlap", *run.tp_comm_overlap, "log"), overlaps_stated = true;
  if (flags.config) {
    for (auto it = flags.config->begin(); it != flags.config->end(); ++it) {
      if (config.contains(it.key())) {
        if (config[it.key()] != it.value()) {
          out.warnings.push_back("--config " + it.key() + "=" + it.value().dump() +
                                 " contradicts the log's " + config[it.key()].dump() +
                                 "; the log wins");
        }
        continue;
      }
      config[it.key()] = it.value();
      out.assumed.push_back(it.key() + "=" + it.value().dump() + " (--config)");
      if (it.key() == "overlap_grad_reduce" || it.key() == "overlap_param_gather" ||
          it.key() == "tp_comm_overlap" || it.key() == "oar" || it.key() == "ors" ||
          it.key() == "oag" || it.key() == "overlap_p2p") {
        overlaps_stated = true;
      }
    }
  }
  // The expert keys join the configuration when the configuration knows them;
  // otherwise the run is read without them and the warning says what was left out.
  Result<ParallelConfig> parsed = Status::InvalidArgument("unparsed");
  if (!moe.empty()) {
    Json with = config;
    for (auto it = moe.begin(); it != moe.end(); ++it) with[it.key()] = it.value();
    parsed = ParseConfig(with, "/config", gpus);
    if (parsed.ok()) {
      for (auto it = moe.begin(); it != moe.end(); ++it) {
        read.push_back(
            it.key() + "=" +
            (it.value().is_string() ? it.value().get<std::string>() : it.value().dump()) +
            " (log)");
      }
    } else {
      out.warnings.push_back("the log's expert layout " + moe.dump() +
                             " is not applied: " + parsed.status().message());
    }
  }
  if (moe.empty() || !parsed.ok()) parsed = ParseConfig(config, "/config", gpus);
  PT_ASSIGN_OR_RETURN(ParallelConfig pc, std::move(parsed));
  if (!overlaps_stated) {
    ApplyFrameworkOverlaps(FrameworkPreset(out.framework).support, &pc);
    out.assumed.push_back(std::string("overlaps: ") + FrameworkName(out.framework) +
                          "'s defaults (the log states none)");
  }
  req["config"] = Json::parse(ConfigToJson(pc).dump());
  out.request = req;
  return Status::Ok();
}

Status LogRequestBuilder::MeasuredTime(const StepSummaryOptions& options) {
  PT_ASSIGN_OR_RETURN(out.summary, SummarizeSteps(run, options));
  const double med = out.summary.median;
  const int gpus = req["gpus"].get<int>();
  switch (run.unit) {
    case StepUnit::kSeconds:
      out.measured_iteration_s = med;
      break;
    case StepUnit::kSamplesPerSec:
      out.measured_iteration_s = static_cast<double>(training["global_batch"].get<int64_t>()) / med;
      out.assumed.push_back("iteration time = global batch / samples per second");
      break;
    case StepUnit::kTokensPerSecPerGpu: {
      PT_ASSIGN_OR_RETURN(PredictRequest pr, ParsePredictRequest(req));
      out.measured_iteration_s = static_cast<double>(pr.job.training.global_batch) *
                                 pr.job.training.seq_len / (med * gpus);
      out.read_from_log.push_back("iteration time = global batch x seq / (tps x gpus)");
      break;
    }
  }
  if (run.whole_run_average) {
    out.assumed.push_back("the whole run's average (train_runtime): warm-up is inside it");
  }
  if (!(out.measured_iteration_s > 0) || !std::isfinite(out.measured_iteration_s)) {
    return Status::InvalidArgument("the log's step figures give no positive iteration time");
  }
  return Status::Ok();
}

}  // namespace

Result<LogRequest> RequestFromLog(const LoggedRun& run, const LogFlags& flags,
                                  const StepSummaryOptions& options) {
  LogRequest out;
  LogRequestBuilder b{run, flags, out};
  b.ReadFramework();
  b.ReadCluster();
  b.ReadGpus();
  b.ReadModel();
  b.ReadBatchAndSequence();
  PT_RETURN_IF_ERROR(b.parse_error);
  if (!b.missing.empty()) {
    std::string msg = b.missing.size() == 1 ? "the log does not state " + b.missing.front()
                                            : "the log does not state " +
                                                  std::to_string(b.missing.size()) +
                                                  " facts a prediction needs:";
    if (b.missing.size() > 1) {
      for (const std::string& m : b.missing) msg += "\n  " + m;
    }
    return Status::InvalidArgument(msg);
  }
  PT_RETURN_IF_ERROR(b.Config());
  PT_RETURN_IF_ERROR(b.MeasuredTime(options));
  return out;
}


double PredictIterationSeconds(const PredictRequest& r) {
  const CostModel cm(r.job.model, r.job.training, r.job.cluster, r.job.gpus);
  return cm.Predict(r.config).iteration_time_s;
}

namespace {

double PredictScaled(const PredictRequest& r, double s) {
  PredictRequest q = r;
  topology::ClusterSpec& c = q.job.cluster;
  c.framework_corrections.clear();
  c.corrections.compute *= s;
  c.corrections.communication *= s;
  c.corrections.memory_bound *= s;
  return PredictIterationSeconds(q);
}

}  // namespace

Result<LogCalibrationFit> FitLogCalibration(const std::vector<LogCalibrationRun>& runs) {
  constexpr double kLo = 0.06, kHi = 19.0;  // inside the cluster parser's (0.05, 20)
  LogCalibrationFit fit;
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> keys;
  for (size_t i = 0; i < runs.size(); ++i) {
    const PredictRequest& r = runs[i].request;
    const CostModel cm(r.job.model, r.job.training, r.job.cluster, r.job.gpus);
    if (Status s = ValidateConfig(cm, r.config); !s.ok()) return s.WithContext(runs[i].label);
    if (!(runs[i].measured_iteration_s > 0)) {
      return Status::InvalidArgument(runs[i].label + ": no positive measured iteration time");
    }
    keys[{FrameworkName(r.job.training.framework), r.job.cluster.gpu.name}].push_back(i);
    fit.predicted_before_s.push_back(PredictIterationSeconds(r));
  }
  if (runs.empty()) return Status::InvalidArgument("no run to calibrate on");
  fit.predicted_after_s = fit.predicted_before_s;
  for (const auto& [key, idx] : keys) {
    double lo = 1e-300, hi = 1e300;
    for (size_t i : idx) {
      const auto& c = runs[i].request.job.cluster.corrections;
      for (double f : {c.compute, c.communication, c.memory_bound}) {
        lo = std::max(lo, kLo / f);
        hi = std::min(hi, kHi / f);
      }
    }
    auto cost = [&](double s) {
      double j = 0;
      for (size_t i : idx) {
        const double e = (PredictScaled(runs[i].request, s) - runs[i].measured_iteration_s) /
                         runs[i].measured_iteration_s;
        j += e * e;
      }
      return j;
    };
    // A log grid, then golden section between the best point's neighbours.
    constexpr int kGrid = 97;
    const double llo = std::log(lo), lhi = std::log(hi);
    int best = 0;
    double best_j = std::numeric_limits<double>::infinity();
    std::vector<double> grid(kGrid);
    for (int g = 0; g < kGrid; ++g) {
      grid[static_cast<size_t>(g)] = llo + (lhi - llo) * g / (kGrid - 1);
      const double j = cost(std::exp(grid[static_cast<size_t>(g)]));
      if (j < best_j) {
        best_j = j;
        best = g;
      }
    }
    double a = grid[static_cast<size_t>(std::max(0, best - 1))];
    double b = grid[static_cast<size_t>(std::min(kGrid - 1, best + 1))];
    const double phi = (std::sqrt(5.0) - 1) / 2;
    double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
    double f1 = cost(std::exp(x1)), f2 = cost(std::exp(x2));
    while (b - a > 1e-7) {
      if (f1 < f2) {
        b = x2;
        x2 = x1;
        f2 = f1;
        x1 = b - phi * (b - a);
        f1 = cost(std::exp(x1));
      } else {
        a = x1;
        x1 = x2;
        f1 = f2;
        x2 = a + phi * (b - a);
        f2 = cost(std::exp(x2));
      }
    }
    double s = std::exp(0.5 * (a + b));
    if (cost(std::exp(grid[static_cast<size_t>(best)])) < cost(s)) {
      s = std::exp(grid[static_cast<size_t>(best)]);
    }
    LogCalibrationEntry e;
    e.framework = key.first;
    e.gpu = key.second;
    e.scale = s;
    e.runs = idx;
    e.at_bound = s <= lo * (1 + 1e-6) || s >= hi * (1 - 1e-6);
    const auto& base = runs[idx.front()].request.job.cluster.corrections;
    e.factors.compute = base.compute * s;
    e.factors.communication = base.communication * s;
    e.factors.memory_bound = base.memory_bound * s;
    for (size_t i : idx) {
      const double m = runs[i].measured_iteration_s;
      fit.predicted_after_s[i] = PredictScaled(runs[i].request, s);
      e.error_before += std::fabs(fit.predicted_before_s[i] - m) / m;
      e.error_after += std::fabs(fit.predicted_after_s[i] - m) / m;
    }
    e.error_before /= static_cast<double>(idx.size());
    e.error_after /= static_cast<double>(idx.size());
    e.factors.residual = e.error_after;
    fit.entries.push_back(std::move(e));
  }
  return fit;
}

}  // namespace paratune::planner
