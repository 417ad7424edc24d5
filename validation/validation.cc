#include "validation/validation.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "common/strings.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "scenario/scenario.h"
#include "validation/row_fields.h"

namespace paratune::planner {
namespace {

bool ContainsNoCase(const std::string& s, const char* needle) {
  return AsciiLower(s).find(needle) != std::string::npos;
}

std::string StrOr(const Json& j, const char* key, const std::string& def = "") {
  return row_fields::Str(j, key, def);
}
int IntOr(const Json& j, const char* key, int def) { return row_fields::Int(j, key, def); }

}  // namespace

void ResolveUnstated(const Json& stated, Framework f, ParallelConfig* c,
                     std::vector<std::string>* assumed) {
  std::vector<scenario::Assumption> a;
  scenario::ResolveConfig(stated, f, c, &a);
  if (assumed == nullptr) return;
  std::string on;
  for (const scenario::Assumption& x : a) {
    if (x.value.is_boolean() && x.value.get<bool>()) {
      on += (on.empty() ? "" : " ") + x.key.substr(x.key.rfind('/') + 1);
    }
  }
  assumed->push_back(std::string(FrameworkName(f)) + "'s policy (scenario layer): " +
                     (on.empty() ? std::string("no overlaps") : on));
}

namespace {

// The run a throughput row starts (its id and source); an error naming the
// row ("<kind> row <id>") where it lacks its model, parallel or hardware object.
Result<PublishedRun> StartRun(const Json& row, const std::string& id, const char* kind) {
  if (!row.contains("model") || !row.contains("parallel") || !row.contains("hardware")) {
    return Status::InvalidArgument(std::string(kind) + " row " + id +
                                   ": needs model, parallel, hardware");
  }
  PublishedRun run;
  run.id = id;
  run.source = StrOr(row, "source");
  return run;
}

// The shape a row's model states: name (else `default_name`), layers, hidden,
// heads, kv_heads (else heads), ffn_hidden (else 4 hidden) and vocab.
void ReadModelShape(const Json& mj, const std::string& default_name, ModelSpec* m) {
  m->name = StrOr(mj, "name", default_name);
  m->layers = IntOr(mj, "layers", 0);
  m->hidden = IntOr(mj, "hidden", 0);
  m->heads = IntOr(mj, "heads", 0);
  m->kv_heads = IntOr(mj, "kv_heads", m->heads);
  m->ffn_hidden = IntOr(mj, "ffn_hidden", 4 * m->hidden);
  m->vocab = IntOr(mj, "vocab", 0);
}

}  // namespace

Result<std::vector<PublishedRun>> PublishedRunsFromCalibration(const Json& doc,
                                                               const std::string& cluster_preset) {
  if (!doc.is_array()) return Status::InvalidArgument("calibration: the document must be an array");
  PT_ASSIGN_OR_RETURN(topology::ClusterSpec cluster, topology::ClusterPreset(cluster_preset));
  std::vector<PublishedRun> runs;
  for (const Json& row : doc) {
    const std::string id = StrOr(row, "id", "?");
    if (StrOr(row, "row_type") != "throughput") continue;
    PT_ASSIGN_OR_RETURN(PublishedRun run, StartRun(row, id, "calibration"));
    const Json& mj = row["model"];
    const Json& pj = row["parallel"];
    const Json& hj = row["hardware"];
    run.source_key = "korthikanti2022";
    ModelSpec& m = run.request.job.model;
    ReadModelShape(mj, id, &m);
    m.gated_ffn = false;
    m.tied_embeddings = true;
    m.dropout = true;
    m.linear_bias = true;
    m.norm = "layernorm";
    m.max_seq_len = IntOr(mj, "seq_len", 2048);
    if (Status s = ValidateModel(m, "/model"); !s.ok()) return s.WithContext("calibration row " + id);

    run.request.job.cluster = cluster;
    run.request.job.gpus = IntOr(hj, "num_gpus", 0);
    if (hj.contains("gpus_per_node") && hj["gpus_per_node"].is_number() &&
        hj["gpus_per_node"].get<int>() != cluster.gpus_per_node) {
      return Status::InvalidArgument("calibration row " + id + ": gpus_per_node differs from " +
                                     cluster_preset);
    }
    TrainingSpec& t = run.request.job.training;
    t.seq_len = m.max_seq_len;
    t.precision = topology::Precision::kBf16;  // fp16/bf16 mixed: same peak and widths
    t.attention = Attention::kUnfused;
    const int dp = IntOr(pj, "dp", 1);
    const int mbs = IntOr(pj, "microbatch", 1);
    if (pj.contains("global_batch") && pj["global_batch"].is_number()) {
      t.global_batch = pj["global_batch"].get<int64_t>();
    } else {
      continue;  // no batch stated: the row cannot be predicted
    }
    ParallelConfig& c = run.request.config;
    c.gy = IntOr(pj, "tp", 1);
    c.pp = IntOr(pj, "pp", 1);
    c.vpp = std::max(1, IntOr(pj, "virtual_pp", 1));
    c.gdata = dp;
    c.mbs = mbs;
    const std::string spcp = StrOr(pj, "sp_or_cp"), rc = StrOr(pj, "recompute");
    c.sp = ContainsNoCase(spcp, "sequence parallel") || ContainsNoCase(spcp, "sp");
    if (ContainsNoCase(rc, "full"))
      c.recompute = Recompute::kFull;
    else if (ContainsNoCase(rc, "selective"))
      c.recompute = Recompute::kSelective;
    c.oar = true;  // Megatron-LM's asynchronous tensor-parallel all-reduce (on by default)
    c.zero = IntOr(pj, "zero_stage", 0);
    if (run.request.job.gpus != c.world()) {
      return Status::InvalidArgument("calibration row " + id + ": degrees do not multiply to num_gpus");
    }
    const Json& meas = row.value("measured", Json::object());
    if (meas.contains("iter_time_s") && meas["iter_time_s"].is_number()) {
      run.measured_iteration_s = meas["iter_time_s"].get<double>();
    }
    if (meas.contains("mfu") && meas["mfu"].is_number()) run.measured_mfu = meas["mfu"].get<double>();
    runs.push_back(std::move(run));
  }
  return runs;
}

double ThroughputError(const PublishedRun& run, const Prediction& p) {
  if (run.measured_tokens_per_s > 0) return p.tokens_per_s / run.measured_tokens_per_s - 1.0;
  if (run.measured_model_tflops > 0) return p.model_tflops_per_gpu / run.measured_model_tflops - 1.0;
  if (run.measured_iteration_s > 0) return run.measured_iteration_s / p.iteration_time_s - 1.0;
  return 0.0;
}

namespace {

double NumOr(const Json& j, const char* key, double def) { return row_fields::Num(j, key, def); }

// Published benchmark runs are tuned by the people who ran them, so a knob a
// row leaves unstated takes the value the model finds fastest among those the
// framework accepts and that fit (docs/model.md, Validation): the micro-batch
// (a divisor of the sequences per data-parallel rank, up to 16) and the
// interleaved stages (a divisor of the layers per stage). Stated knobs stay,
// and so does everything when no choice fits (the model's memory is then
// pessimistic for a run that ran). Unstated recompute stays none: a tuned
// run recomputes only what memory forces, and where the model thinks memory
// forces it the run has shown otherwise.
constexpr const char* kTuned = " (not stated: the fastest that fits)";

void TuneUnstated(PredictRequest& req, bool mbs, bool vpp,
                  const std::function<void(ParallelConfig*)>& overlaps) {
  const Job& job = req.job;
  const CostModel cm(job.model, job.training, job.cluster, static_cast<int>(job.gpus));
  const ParallelConfig base = req.config;
  const int64_t per_rank = job.training.global_batch / std::max<int64_t>(1, base.gdata * base.gz);
  std::vector<int> mbss{base.mbs}, vpps{base.vpp};
  if (mbs) {
    mbss.clear();
    for (int b = 1; b <= 16; ++b) {
      if (per_rank % b == 0) mbss.push_back(b);
    }
  }
  if (vpp) {
    const int per_stage = job.model.layers / std::max(1, base.pp);
    for (int v = 2; v <= per_stage; ++v) {
      if (per_stage % v == 0) vpps.push_back(v);
    }
  }
  double best = 0;
  for (int b : mbss) {
    for (int v : vpps) {
      ParallelConfig c = base;
      c.mbs = b;
      c.vpp = v;
      overlaps(&c);
      if (cm.CheckRules(c) != Reason::kOk) continue;
      const Prediction p = cm.Predict(c);
      if (!p.fits) continue;
      if (best == 0 || p.iteration_time_s < best) {
        best = p.iteration_time_s;
        req.config = c;
      }
    }
  }
}

}  // namespace

Result<std::vector<PublishedRun>> PublishedRunsFromPublicRuns(const Json& doc) {
  if (!doc.is_array()) return Status::InvalidArgument("runs: the document must be an array");
  std::vector<PublishedRun> runs;
  for (const Json& row : doc) {
    const std::string id = StrOr(row, "id", "?");
    if (StrOr(row, "row_type") != "throughput") continue;
    PT_ASSIGN_OR_RETURN(PublishedRun run, StartRun(row, id, "runs"));
    const Json& mj = row["model"];
    const Json& pj = row["parallel"];
    const Json& hj = row["hardware"];
    run.source_key = run.source.substr(0, run.source.find(' '));
    run.release = StrOr(row, "release");
    const bool foundry = run.source_key.find("llm-foundry") != std::string::npos;

    // Hardware: the GPU's cluster preset.
    const std::string gpu = AsciiLower(StrOr(hj, "gpu"));
    std::string preset;
    if (gpu.find("a100") != std::string::npos && gpu.find("40gb") != std::string::npos) preset = "dgx-a100-40gb";
    else if (gpu.find("a100") != std::string::npos) preset = "dgx-a100-80gb";
    else if (gpu.find("h100") != std::string::npos) preset = "dgx-h100";
    else if (gpu.find("h200") != std::string::npos) preset = "dgx-h200";
    else return Status::InvalidArgument("runs row " + id + ": no cluster preset for GPU '" + gpu + "'");
    PT_ASSIGN_OR_RETURN(run.request.job.cluster, topology::ClusterPreset(preset));
    run.request.job.gpus = IntOr(hj, "num_gpus", 0);
    if (IntOr(hj, "gpus_per_node", run.request.job.cluster.gpus_per_node) != run.request.job.cluster.gpus_per_node) {
      return Status::InvalidArgument("runs row " + id + ": gpus_per_node differs from " + preset);
    }

    // Model: the family's architecture (the rows give shapes, not these details).
    const std::string name = AsciiLower(StrOr(mj, "name", id));
    ModelSpec& m = run.request.job.model;
    ReadModelShape(mj, id, &m);
    const int seq = IntOr(mj, "seq_len", 2048);
    if (m.vocab == 0) {
      m.vocab = 50304;  // MLPerf GPT-3: GPT-2 BPE (50257) padded to a multiple of 128
      run.assumed.push_back("vocab 50304 (GPT-2 BPE padded; the row states none)");
    }
    TrainingSpec& t = run.request.job.training;
    if (name.find("mpt") != std::string::npos) {
      // MPT (llm-foundry): ALiBi (no position table), no biases, no dropout,
      // LayerNorm, GeLU 4h, tied embeddings.
      m.norm = "layernorm";
      m.gated_ffn = false;
      m.tied_embeddings = true;
      m.dropout = false;
      m.linear_bias = false;
      m.max_seq_len = 0;
    } else if (name.find("llama") != std::string::npos) {
      m.norm = "rmsnorm";
      m.gated_ffn = true;
      m.tied_embeddings = false;
      m.dropout = false;
      m.linear_bias = false;
      m.max_seq_len = seq;
    } else {
      // Megatron's GPT: LayerNorm, GeLU, learned positions, biases; dropout 0.1
      // in the 2022 NeMo launcher configs, off in MLPerf and the 2024 benchmarks.
      m.norm = "layernorm";
      m.gated_ffn = false;
      m.tied_embeddings = StrOr(mj, "notes").find("untied") == std::string::npos;
      m.linear_bias = true;
      m.dropout = run.source_key.find("Launcher") != std::string::npos;
      m.max_seq_len = seq;
    }
    if (Status s = ValidateModel(m, "/model"); !s.ok()) return s.WithContext("runs row " + id);

    // Training.
    t.seq_len = seq;
    const std::string prec = AsciiLower(StrOr(hj, "precision"));
    t.precision = prec.find("fp8") != std::string::npos ? topology::Precision::kFp8 : topology::Precision::kBf16;
    // FlashAttention everywhere but the 2022 NeMo launcher (Megatron's fused softmax).
    t.attention = run.source_key.find("Launcher") != std::string::npos ? Attention::kUnfused : Attention::kFlash;
    t.framework = foundry ? Framework::kFsdp : Framework::kMegatron;
    const std::string other = AsciiLower(StrOr(pj, "other"));
    // Composer's FSDP mixed precision: PURE reduces gradients in bf16, DEFAULT in fp32.
    t.main_grads_fp32 = !(foundry && other.find("mode pure") != std::string::npos);
    // NVIDIA's MLPerf Training v3.1 GPT-3 (NeMo 23.09) synchronises gradients
    // in bf16: Apex's DistributedFusedAdam (config_common.sh:8,
    // run_and_time.sh:116-117) with grad_sync_dtype bf16
    // (conf/optim/distributed_fused_adam.yaml:6), in
    // mlcommons/training_results_v3.1@d06288b NVIDIA/benchmarks/gpt3/
    // implementations/pytorch.
    if (run.source_key.find("training_results_v3.1") != std::string::npos) {
      t.main_grads_fp32 = false;
    }
    if (!pj.contains("global_batch") || !pj["global_batch"].is_number()) continue;
    t.global_batch = pj["global_batch"].get<int64_t>();

    // Parallel configuration.
    ParallelConfig& c = run.request.config;
    const int tp = IntOr(pj, "tp", 1), pp = IntOr(pj, "pp", 1), dp = IntOr(pj, "dp", 1);
    c.gy = tp;
    c.pp = pp;
    c.vpp = std::max(1, IntOr(pj, "virtual_pp", 1));
    const std::string spcp = AsciiLower(StrOr(pj, "sp_or_cp"));
    if (auto at = spcp.find("cp="); at != std::string::npos) c.cp = std::max(1, std::atoi(spcp.c_str() + at + 3));
    c.sp = tp > 1 && spcp.find("sp") != std::string::npos;
    const std::string zero = AsciiLower(StrOr(pj, "zero_stage"));
    if (foundry || zero.find("full_shard") != std::string::npos) {
      c.gz = dp;  // FSDP FULL_SHARD over every data rank
      c.gdata = 1;
    } else {
      c.gdata = dp;
      c.distributed_optimizer = zero.find("distributed") != std::string::npos && dp * c.cp > 1;
    }
    c.mbs = IntOr(pj, "microbatch", 0);
    const bool mbs_unstated = c.mbs == 0;
    c.mbs = std::max(1, c.mbs);
    const std::string rc = AsciiLower(StrOr(pj, "recompute"));
    const bool rc_unstated = rc.empty();
    if (rc.find("0 layers") != std::string::npos || rc.find("none") != std::string::npos || rc.empty()) {
      c.recompute = Recompute::kNone;
    } else if (rc.find("selective") != std::string::npos) {
      c.recompute = Recompute::kSelective;
    } else if (rc.find("full") != std::string::npos) {
      c.recompute = Recompute::kFull;
    }
    // A row that states its micro-batch transcribes a whole configuration (the
    // NeMo launcher's YAML, an MLPerf log), where no interleaving means none.
    const bool vpp_unstated = !pj.contains("virtual_pp") && pp > 1 && mbs_unstated;
    // TE's TP comm overlap only where the row states it (in its notes, its SP
    // field or the run's flags quoted in its source).
    const std::string said = other + " " + spcp + " " + AsciiLower(run.source);
    const bool tp_overlap_stated = said.find("tp comm overlap") != std::string::npos ||
                                   said.find("tp-comm-overlap") != std::string::npos;
    if (run.request.job.gpus != c.world()) {
      return Status::InvalidArgument("runs row " + id + ": degrees do not multiply to num_gpus");
    }
    // The 2022 launcher's distributed_fused_adam is apex's DistributedFusedAdam,
    // which overlapped its gradient reduce-scatter with the backward
    // (overlap_grad_sync=True at NVIDIA/apex 2b0e8371, the release of the
    // launcher's README table) but ran the parameter all-gather after the
    // step: overlapping it with the forward came with apex c0a0b0f6
    // (2023-02-06, "Distributed optimizer overlaps forward compute and param
    // all-gather").
    const bool launcher_2022 = run.source_key.find("Launcher") != std::string::npos;
    // The framework's overlap policy, as the search applies it.
    Json stated = Json::object();
    if (!tp_overlap_stated) stated["tp_comm_overlap"] = false;
    if (launcher_2022) stated["overlap_param_gather"] = false;
    auto overlaps = [&](ParallelConfig* x) { ResolveUnstated(stated, t.framework, x, nullptr); };
    overlaps(&c);
    if (mbs_unstated || vpp_unstated) {
      TuneUnstated(run.request, mbs_unstated, vpp_unstated, overlaps);
      if (mbs_unstated) run.assumed.push_back("micro-batch " + std::to_string(c.mbs) + kTuned);
      if (vpp_unstated)
        run.assumed.push_back("interleaved stages " + std::to_string(c.vpp) + kTuned);
    }
    if (rc_unstated) run.assumed.push_back("no recompute (not stated)");
    ResolveUnstated(stated, t.framework, &c, &run.assumed);
    if (launcher_2022 && c.distributed_optimizer) {
      run.assumed.push_back(
          "parameter all-gather after the step (apex DistributedFusedAdam of 2022)");
    }

    // What was measured.
    const Json& meas = row.value("measured", Json::object());
    const double peak = NumOr(hj, "peak_tflops_per_gpu", 0);
    run.measured_tokens_per_s = NumOr(meas, "tokens_per_s", 0);
    if (run.measured_tokens_per_s <= 0) {
      run.measured_model_tflops = NumOr(meas, "model_tflops_per_gpu_with_cp", NumOr(meas, "tflops_per_gpu", 0));
      if (run.measured_model_tflops <= 0 && NumOr(meas, "mfu", 0) > 0) {
        // MFU quoted against the bf16 dense peak (989 TFLOP/s on H100).
        const double bf16 = run.request.job.cluster.gpu.PeakTflops(topology::Precision::kBf16);
        run.measured_model_tflops = NumOr(meas, "mfu", 0) * (peak > 0 && prec.find("fp8") == std::string::npos ? peak : bf16);
      }
    }
    if (run.measured_tokens_per_s <= 0 && run.measured_model_tflops <= 0) continue;
    run.measured_mfu = NumOr(meas, "mfu", 0);
    runs.push_back(std::move(run));
  }
  return runs;
}

namespace {

// Megatron-Bridge's pipeline layouts for the 61-layer models by (pp, vp), as
// its recipes set them: DeepSeek-V3 with its MTP module
// (recipes/deepseek/deepseek_v3.py:68-76 @v0.5.0; PP 2 × VP 8 in
// perf_recipes/deepseek/gb300/deepseek_v3.py:90-104 @v0.6.0) and Kimi K2
// without one (recipes/kimi/h100/kimi_k2.py:31-40 @v0.6.0). "" for others.
std::string RecipeLayout(const std::string& key, int pp, int vp) {
  const bool dsv3 = key == "deepseek_v3";
  if (!dsv3 && key != "kimi_k2") return "";
  const std::string tail = dsv3 ? "mL" : "L";
  if (pp == 4 && vp == 1) return "Et*16|(t*16|)*2t*13" + tail;
  if ((pp == 8 && vp == 1) || (pp == 4 && vp == 2)) return "Et*8|(t*8|)*6t*5" + tail;
  if ((pp == 16 && vp == 1) || (pp == 8 && vp == 2) || (pp == 4 && vp == 4) ||
      (pp == 2 && vp == 8)) {
    return "Et*4|(t*4|)*14t" + tail;
  }
  return "";
}

// Megatron's uneven stages for `layers` over pp stages with vpp chunks each:
// the first/last stage counts (multiples of vpp) that leave the other stages an
// equal share in whole chunks, as balanced as possible. False when none exists.
bool UnevenStages(int layers, int pp, int vpp, int* first, int* last) {
  int best = -1;
  for (int f = vpp; f <= layers; f += vpp) {
    for (int l = vpp; f + l <= layers; l += vpp) {
      const int rest = layers - f - l, stages = pp - 2;
      if (stages == 0 ? rest != 0 : (rest <= 0 || rest % (stages * vpp) != 0)) continue;
      const int mid = stages > 0 ? rest / stages : 0;
      const int worst = std::max({f, l, mid});
      // Of the splits whose fullest rank is least full, the one with the
      // fewest layers on the last rank: it also runs the output layer, the loss
      // and any MTP module (Megatron-Bridge's DeepSeek-V3 layouts put the
      // remainder there: recipes/deepseek/deepseek_v3.py:68-76 @v0.5.0).
      if (best < 0 || worst < best || (worst == best && l < *last)) {
        best = worst;
        *first = f;
        *last = l;
      }
    }
  }
  return best >= 0;
}

}  // namespace

Result<std::vector<PublishedRun>> PublishedRunsFromMoeRuns(const Json& doc,
                                                           std::vector<std::string>* skipped) {
  if (!doc.is_array()) return Status::InvalidArgument("runs: the document must be an array");
  std::vector<PublishedRun> runs;
  auto skip = [&](const std::string& id, const std::string& why) {
    if (skipped) skipped->push_back(id + ": " + why);
  };
  for (const Json& row : doc) {
    if (!row.is_object() || StrOr(row, "record_type") != "run") continue;
    const std::string id = StrOr(row, "id", "?");
    for (const char* key : {"model", "parallel", "hardware", "measured"}) {
      if (!row.contains(key) || !row[key].is_object()) {
        return Status::InvalidArgument("runs row " + id + ": needs an object '" + key + "'");
      }
    }
    const Json& mj = row["model"];
    const Json& pj = row["parallel"];
    const Json& hj = row["hardware"];
    const Json& meas = row["measured"];
    PublishedRun run;
    run.id = id;
    const Json& src = row.value("source", Json::object());
    run.source_key = src.is_object() ? StrOr(src, "repo", "megatron-bridge") : "megatron-bridge";
    run.source =
        run.source_key + (src.is_object() ? " " + StrOr(src, "path") + " @ " +
                                                StrOr(src, "commit") + ", " + StrOr(src, "section")
                                          : std::string());

    // Hardware.
    const std::string gpu = AsciiLower(StrOr(hj, "gpu"));
    std::string preset;
    if (gpu.find("h100") != std::string::npos)
      preset = "dgx-h100";
    else if (gpu == "b200")
      preset = "dgx-b200";
    else if (gpu == "b300")
      preset = "dgx-b300";
    else if (gpu == "gb200")
      preset = "gb200-nvl72";
    else if (gpu == "gb300")
      preset = "gb300-nvl72";
    Result<topology::ClusterSpec> cluster = topology::ClusterPreset(preset);
    if (preset.empty() || !cluster.ok()) {
      skip(id, "no cluster preset for GPU " + StrOr(hj, "gpu"));
      continue;
    }
    run.request.job.cluster = *cluster;
    run.request.job.gpus = IntOr(hj, "num_gpus", 0);

    // Model: the preset of its key, else the row's own fields.
    const std::string key = StrOr(mj, "key");
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (name == "qwen3-235b-a22b" || name == "qwen3-30b-a3b" || name == "deepseek-v3") {
      PT_ASSIGN_OR_RETURN(run.request.job.model, ModelPreset(name));
    } else {
      ModelSpec& m = run.request.job.model;
      ReadModelShape(mj, key, &m);
      m.gated_ffn = true;
      m.tied_embeddings = false;
      m.norm = "rmsnorm";
      m.experts = IntOr(mj, "num_experts", 0);
      m.top_k = IntOr(mj, "top_k", 0);
      m.moe_ffn_hidden = IntOr(mj, "moe_ffn_hidden", 0);
      m.shared_ffn_hidden = IntOr(mj, "shared_expert_ffn_hidden", 0);
      m.first_dense_layers = IntOr(mj, "first_k_dense_layers", 0);
      if (mj.contains("mla") && mj["mla"].is_object()) {
        const Json& mla = mj["mla"];
        m.q_lora_rank = IntOr(mla, "q_lora_rank", 0);
        m.kv_lora_rank = IntOr(mla, "kv_lora_rank", 0);
        m.qk_nope_head_dim = IntOr(mla, "qk_nope_head_dim", 0);
        m.qk_rope_head_dim = IntOr(mla, "qk_rope_head_dim", 0);
        m.v_head_dim = IntOr(mla, "v_head_dim", 0);
      }
      if (StrOr(mj, "router").find("sigmoid") != std::string::npos) m.router = "sigmoid";
      m.source = "calibration row " + id;
      if (Status st = ValidateModel(m, "/model"); !st.ok()) {
        skip(id, st.message());
        continue;
      }
      if (StrOr(mj, "notes").find("Muon") != std::string::npos) {
        run.assumed.push_back("Adam's optimizer step and states (the run used Muon)");
      }
    }
    const ModelSpec& m = run.request.job.model;

    // Training.
    TrainingSpec& t = run.request.job.training;
    t.seq_len = IntOr(mj, "seq_len", 4096);
    t.global_batch = IntOr(pj, "gbs", 0);
    // The printed precision names the recipe (Megatron-Bridge's FP8_CS, FP8_MX,
    // FP8_SC/blockscaled configurations); plain "FP8" is the GPU's default.
    const std::string prec = AsciiLower(StrOr(hj, "precision"));
    const bool mx = prec.find("mx") != std::string::npos;
    t.precision = prec.find("fp8") != std::string::npos || mx ? topology::Precision::kFp8
                                                              : topology::Precision::kBf16;
    if (t.precision == topology::Precision::kFp8) {
      t.recipe_stated = true;
      if (mx) {
        t.recipe = topology::Recipe::kMxfp8;
      } else if (prec.find("block") != std::string::npos) {
        t.recipe = topology::Recipe::kFp8Blockwise;
      } else if (prec.find("cs") != std::string::npos) {
        t.recipe = topology::Recipe::kFp8Current;
      } else {
        t.recipe_stated = false;
        t.recipe = run.request.job.cluster.gpu.fp8_default_recipe;
      }
      if (!run.request.job.cluster.gpu.Supports(t.recipe)) {
        run.assumed.push_back(StrOr(hj, "precision") + " priced as " +
                              topology::RecipeName(run.request.job.cluster.gpu.fp8_default_recipe) +
                              " (the GPU preset lists no " + topology::RecipeName(t.recipe) + ")");
        t.recipe = run.request.job.cluster.gpu.fp8_default_recipe;
      }
    }
    t.attention = Attention::kFlash;
    t.framework = Framework::kMegatron;
    // Megatron-Bridge's MoE performance configurations keep and reduce the main
    // gradients in bf16: grad_reduce_in_fp32 = False in
    // scripts/performance/configs/deepseek/deepseek_llm_pretrain.py:43-44,
    // qwen/qwen3_llm_pretrain.py:42-43 and kimi/kimi_llm_pretrain.py:50-51
    // @v0.5.0 (fcbb6031).
    if (run.source_key.find("Megatron-Bridge") != std::string::npos) t.main_grads_fp32 = false;
    t.moe_skew = 1.0;  // forced load balance (the tables' footnote)
    if (!(pj.contains("force_load_balance") && pj["force_load_balance"].is_boolean() &&
          pj["force_load_balance"].get<bool>())) {
      run.assumed.push_back("balanced routing (skew 1)");
    }

    // Parallel configuration.
    ParallelConfig& c = run.request.config;
    const int tp = std::max(1, IntOr(pj, "tp", 1)), pp = std::max(1, IntOr(pj, "pp", 1));
    c.gy = tp;
    c.pp = pp;
    c.cp = std::max(1, IntOr(pj, "cp", 1));
    c.vpp = std::max(1, IntOr(pj, "vp", 1));
    c.ep = std::max(1, IntOr(pj, "ep", 1));
    c.etp = std::max(1, IntOr(pj, "etp", 1));
    c.mbs = std::max(1, IntOr(pj, "mbs", 1));
    const int64_t per_stage = int64_t{tp} * pp * c.cp;
    if (run.request.job.gpus <= 0 || run.request.job.gpus % per_stage != 0) {
      return Status::InvalidArgument("runs row " + id + ": tp·pp·cp does not divide num_gpus");
    }
    c.gdata = static_cast<int>(run.request.job.gpus / per_stage);
    c.sp = tp > 1;
    if (tp > 1) run.assumed.push_back("sequence parallelism with tp > 1 (Megatron-Bridge recipes)");
    c.distributed_optimizer = pj.value("distributed_optimizer", true) && c.gdata * c.cp > 1;
    const std::string rc = AsciiLower(StrOr(pj, "recompute"));
    c.recompute = rc.find("selective") != std::string::npos ? Recompute::kSelective
                  : rc.find("full") != std::string::npos    ? Recompute::kFull
                                                            : Recompute::kNone;
    // "selective: mla_up_proj,mlp": Megatron-Core's recompute_modules.
    if (const size_t colon = rc.find("selective:"); colon != std::string::npos) {
      auto modules = ParseRecomputeModules(rc.substr(colon + 10));
      if (!modules.ok()) {
        return Status::InvalidArgument("runs row " + id + ": " + modules.status().message());
      }
      c.recompute_modules = *modules;
    }
    // A row that states no recompute, run with the layout of Megatron-Bridge's
    // DeepSeek-V3 GB200 performance recipes (tp 1, pp 4, vp 4, ep 64), takes
    // their selective recompute: mla_up_proj in BF16 and MXFP8, mlp in FP8
    // current scaling (Megatron-Bridge@067f987
    // src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py:30-45,
    // 82-97, 134-149; common.py:35).
    if (rc.empty() && key == "deepseek_v3" && preset == "gb200-nvl72" && tp == 1 && pp == 4 &&
        c.vpp == 4 && c.ep == 64) {
      const bool cs = t.precision == topology::Precision::kFp8 && t.recipe == topology::Recipe::kFp8Current;
      c.recompute = Recompute::kSelective;
      c.recompute_modules = cs ? kRcMlp : kRcMlaUpProj;
      run.assumed.push_back(std::string("selective recompute of ") + (cs ? "mlp" : "mla_up_proj") +
                            " (Megatron-Bridge's GB200 DeepSeek-V3 recipe; the row states none)");
    }
    const std::string disp = AsciiLower(StrOr(pj, "dispatcher"));
    c.moe_dispatcher = disp.find("hybridep") != std::string::npos ? MoeDispatcher::kHybridEp
                       : disp.find("deepep") != std::string::npos ? MoeDispatcher::kDeepEp
                                                                  : MoeDispatcher::kAllToAll;
    // Megatron-Bridge's 25.09 performance runs chose DeepSeek-V3's dispatcher
    // in the run script, not in the per-GPU configuration the rows transcribe:
    // on H100, DeepEP (flex) with forced balance and the 1F1B all-to-all
    // overlap (Megatron-Bridge@r0.1.0 684a6861
    // scripts/performance/run_script.py:56-85). A row that names its own
    // dispatcher keeps it.
    const bool bridge_2509_dsv3_h100 = StrOr(row, "release") == "25.09" && key == "deepseek_v3" &&
                                       preset == "dgx-h100" && disp.empty();
    if (bridge_2509_dsv3_h100) {
      c.moe_dispatcher = MoeDispatcher::kDeepEp;
      run.assumed.push_back(
          "DeepEP and the all-to-all overlap of Megatron-Bridge 25.09's run script for DeepSeek-V3 "
          "on H100");
    }
    if (pj.contains("other") && pj["other"].is_object()) {
      const Json& other = pj["other"];
      c.moe_a2a_overlap = bridge_2509_dsv3_h100 || (other.contains("ep_a2a_overlap") &&
                                                    other["ep_a2a_overlap"].is_boolean() &&
                                                    other["ep_a2a_overlap"].get<bool>());
      // A full-iteration graph replays the whole step (Megatron-Bridge sets it
      // with HybridEP's per-rank capacity and paged stash,
      // perf_recipes/qwen/common.py:36-60 @v0.6.0); per-module graphs
      // (attn, moe_router, moe_preprocess) leave the experts eager.
      c.cuda_graphs = other.contains("cuda_graphs") && other["cuda_graphs"].is_object() &&
                      StrOr(other["cuda_graphs"], "impl") == "full_iteration";
    }
    {
      // The row states its all-to-all overlap (off unless it says so).
      Json stated = Json::object();
      stated["moe_a2a_overlap"] = c.moe_a2a_overlap;
      ResolveUnstated(stated, t.framework, &c, &run.assumed);
    }
    // Layouts the layer count does not divide: Megatron-Bridge states them as a
    // pipeline layout string (the row's recipe `pp_layout`), its 25.09 run
    // script set one for DeepSeek-V3 on H100 (run_script.py:66 @r0.1.0,
    // 684a6861), and its DeepSeek-V3 and Kimi K2 recipes set one per (pp, vp)
    // (RecipeLayout).
    std::string layout = row.contains("recipe") && row["recipe"].is_object()
                             ? StrOr(row["recipe"], "pp_layout")
                             : std::string();
    if (layout.empty() && bridge_2509_dsv3_h100) layout = "Et|(tt|)*30mL";
    if (layout.empty() && pp > 1 && m.layers % (pp * c.vpp) != 0) {
      layout = RecipeLayout(key, pp, c.vpp);
    }
    bool laid_out = false;
    if (pp > 1 && !layout.empty()) {
      Result<MegatronLayout> l = ParseMegatronLayout(layout, m.layers, m.mtp_layers);
      if (l.ok() && l->chunks == pp * c.vpp) {
        c.pp_embedding_layers = l->embedding;
        c.pp_loss_layers = l->loss;
        laid_out = true;
        run.assumed.push_back("pipeline layout " + layout);
      } else {
        run.assumed.push_back("pipeline layout " + layout + " not priced (" +
                              (l.ok() ? "its chunks are not pp x vp" : l.status().message()) + ")");
      }
    }
    // Megatron-Bridge's Qwen3 MoE recipes count the embedding and the loss as
    // one layer each (account_for_embedding/loss_in_pipeline_split,
    // recipes/qwen/qwen3_moe.py:166-167 @v0.5.0): Megatron's own form of an
    // uneven split, taken where it divides at the stated interleaving.
    const bool uneven = !laid_out && pp > 1 && m.layers % (pp * c.vpp) != 0;
    if (uneven && (m.layers + 2) % (pp * c.vpp) == 0) {
      c.pp_embedding_layers = c.pp_loss_layers = 1;
      run.assumed.push_back("embedding and loss counted as pipeline layers for the row's layout");
    } else if (uneven) {
      int first = 0, last = 0;
      const int vpp_stated = c.vpp;
      // The largest interleaving up to the stated one that such a split allows.
      while (!UnevenStages(m.layers, pp, c.vpp, &first, &last) && c.vpp > 1) --c.vpp;
      if (!UnevenStages(m.layers, pp, c.vpp, &first, &last)) {
        skip(id, "no uneven pipeline split of " + std::to_string(m.layers) + " layers");
        continue;
      }
      c.first_stage_layers = first;
      c.last_stage_layers = last;
      run.assumed.push_back(
          "stages " + std::to_string(first) + "/…/" + std::to_string(last) +
          (c.vpp != vpp_stated
               ? ", vp " + std::to_string(vpp_stated) + " as " + std::to_string(c.vpp)
               : "") +
          " for the row's pipeline layout");
      if (c.vpp == 1 && c.moe_a2a_overlap) {  // Megatron needs vpp for it with pp > 1
        c.moe_a2a_overlap = false;
        run.assumed.push_back("no all-to-all overlap (it needs the interleaving priced as 1)");
      }
    }

    // What was measured: tokens/s per GPU (the tables' headline) or model TFLOP/s.
    const double tok = NumOr(meas, "tokens_per_s_per_gpu", 0);
    run.measured_tokens_per_s = tok > 0 ? tok * run.request.job.gpus : 0;
    if (run.measured_tokens_per_s <= 0) {
      run.measured_model_tflops = NumOr(meas, "model_tflops_per_gpu", 0);
    }
    if (run.measured_tokens_per_s <= 0 && run.measured_model_tflops <= 0) {
      skip(id, "states no throughput");
      continue;
    }
    // Some rows combine a table's parenthesized alternatives into a layout
    // Megatron-Core refuses (e.g. PP 8 with EP 64 on 256 GPUs): not a run.
    const CostModel cm(m, t, run.request.job.cluster, run.request.job.gpus);
    if (const Reason why = cm.CheckRules(c); why != Reason::kOk) {
      skip(id, "a layout the framework refuses: " + cm.Explain(why, c));
      continue;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace paratune::planner
