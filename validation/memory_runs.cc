// shared/calibration/memory_runs.json as prediction requests and their
// memory checks (validation/memory_runs.h; docs/model.md, Memory validation).
#include "validation/memory_runs.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "common/median.h"
#include "common/strings.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "validation/row_fields.h"

namespace paratune::planner {
namespace {

using row_fields::Has;
using row_fields::Int;
using row_fields::Num;
using row_fields::Str;
std::string Lower(const std::string& s) { return AsciiLower(s); }
// "q_lora_rank=1536, ..." → 1536 (0 when the key is absent).
int KeyValue(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  if (at == std::string::npos) return 0;
  return std::atoi(text.c_str() + at + key.size() + 1);
}

// The cluster preset of a row's GPU (as printed: "H100-SXM-80GB (DGX H100)").
// A row that names no GPU ("?") runs on the A100 preset: the GPU enters the
// comparison only through the runtime reserve, which the allocator's
// counters leave out.
const char* ClusterOf(const std::string& gpu, std::vector<std::string>* assumed) {
  if (Contains(gpu, "GB200")) return "gb200-nvl72";
  if (Contains(gpu, "B200")) return "dgx-b200";
  if (Contains(gpu, "H100")) return "dgx-h100";
  if (Contains(gpu, "A100")) return "dgx-a100-80gb";
  if (Contains(gpu, "MI300X")) return "mi300x";
  assumed->push_back("GPU not stated: dgx-a100-80gb (only its runtime reserve enters)");
  return "dgx-a100-80gb";
}

// The row's stack by the name memory_runs.md counts it under.
std::string ShortFramework(const std::string& fw) {
  for (const char* name : {"Megatron-Bridge", "Megatron-LM", "torchtitan", "DeepSpeed"}) {
    if (Contains(fw, name)) return name;
  }
  return Contains(fw, "HF") || Contains(fw, "Accelerate") ? "HF" : fw;
}

Result<Framework> FrameworkOf(const std::string& fw) {
  if (fw == "torchtitan") return Framework::kTorchtitan;
  if (fw == "Megatron-LM" || fw == "Megatron-Bridge") return Framework::kMegatron;
  if (fw == "DeepSpeed") return Framework::kDeepSpeed;
  if (Contains(fw, "HF") || Contains(fw, "Accelerate")) return Framework::kFsdp;
  return Status::InvalidArgument("no framework preset for '" + fw + "'");
}

// The model from the row's architecture fields; "" or why it cannot be built.
std::string ModelOf(const Json& mj, const std::string& framework, ModelSpec* m,
                    std::vector<std::string>* assumed) {
  const std::string attention = Str(mj, "attention");
  const std::string name = Str(mj, "name");
  if (Contains(Lower(name), "nemotron-3") || Contains(Lower(name), "nemotron3")) {
    return "hybrid Mamba layers are not expressible";
  }
  m->name = name;
  m->layers = Int(mj, "layers", 0);
  m->hidden = Int(mj, "hidden", 0);
  m->heads = Int(mj, "heads", 0);
  m->kv_heads = Int(mj, "kv_heads", m->heads);
  m->vocab = Int(mj, "vocab", 0);
  m->gated_ffn = Has(mj, "gated_ffn") && mj["gated_ffn"].get<bool>();
  m->ffn_hidden = Int(mj, "ffn_hidden", 0);
  if (m->vocab <= 0) return "vocabulary size not stated";
  if (m->ffn_hidden <= 0) return "FFN width not stated";
  m->tied_embeddings = Has(mj, "tied_embeddings") && mj["tied_embeddings"].get<bool>();
  const std::string norm = Lower(Str(mj, "norm"));
  m->norm = Contains(norm, "layernorm") ? "layernorm" : "rmsnorm";
  const std::string pos = Lower(Str(mj, "position_embedding"));
  m->max_seq_len = Int(mj, "seq_len", 0);
  const int head_dim = Int(mj, "head_dim", 0);
  if (m->heads > 0 && head_dim > 0 && head_dim * m->heads != m->hidden) m->head_dim_override = head_dim;
  // Megatron's GPT models (LayerNorm, learned positions) train with biases and
  // dropout 0.1 (megatron/training/arguments.py defaults --hidden-dropout and
  // --attention-dropout 0.1, --add-bias-linear on); Llama-family models with neither.
  const bool gpt = m->norm == "layernorm";
  m->linear_bias = gpt;
  m->dropout = gpt && Contains(framework, "Megatron");
  if (gpt && m->dropout) assumed->push_back("dropout 0.1 and biases (Megatron's GPT defaults)");
  if (!Contains(pos, "learned") && m->norm == "layernorm") m->max_seq_len = 0;  // RoPE: no table
  if (Contains(attention, "MLA")) {
    m->kv_lora_rank = KeyValue(attention, "kv_lora_rank");
    m->q_lora_rank = KeyValue(attention, "q_lora_rank");
    m->qk_nope_head_dim = KeyValue(attention, "qk_head_dim");
    m->qk_rope_head_dim = KeyValue(attention, "qk_pos_emb_head_dim");
    m->v_head_dim = KeyValue(attention, "v_head_dim");
    if (m->kv_lora_rank <= 0 || m->v_head_dim <= 0) return "MLA dimensions not stated";
  }
  if (Has(mj, "moe")) {
    const Json& e = mj["moe"];
    m->experts = Int(e, "num_experts", 0);
    m->top_k = Int(e, "top_k", 0);
    m->moe_ffn_hidden = Int(e, "moe_ffn_hidden", m->ffn_hidden);
    m->shared_ffn_hidden = Int(e, "shared_experts", 0) * Int(e, "shared_expert_ffn_hidden", 0);
    m->first_dense_layers = Int(e, "dense_layers", 0);
    // Megatron's --moe-layer-freq pattern "([0]*k+[1]*n)": k dense layers first.
    const std::string pattern = Str(e, "layer_pattern");
    if (Contains(pattern, "[0]*")) {
      m->first_dense_layers = std::atoi(pattern.c_str() + pattern.find("[0]*") + 4);
    }
    if (m->experts <= 0 || m->top_k <= 0) return "MoE experts or top-k not stated";
  }
  if (Status s = ValidateModel(*m, "/model"); !s.ok()) return s.message();
  return "";
}

// Recompute as the row states it: none, full, Megatron-Core's selective with
// its --recompute-modules (a list, or the CI's "[a b c]" string; unstated is
// Megatron's default, core_attn) or a framework's per-op selective.
std::string RecomputeOf(const Json& rj, Framework fw, Recompute* r, uint8_t* modules) {
  const std::string g = Lower(Str(rj, "granularity"));
  if (g == "none" || g.empty()) {
    *r = Recompute::kNone;
    return g.empty() ? "recompute not stated" : "";
  }
  if (g == "full") {
    *r = Recompute::kFull;
    return "";
  }
  if (g != "selective") return "recompute not stated";
  *r = Recompute::kSelective;
  if (fw == Framework::kTorchtitan || !Has(rj, "modules")) return "";
  std::string names;
  if (rj["modules"].is_array()) {
    for (const Json& x : rj["modules"]) names += x.get<std::string>() + " ";
  } else {
    names = Str(rj, "modules");
    names.erase(std::remove_if(names.begin(), names.end(),
                               [](char ch) { return ch == '[' || ch == ']'; }),
                names.end());
  }
  // An empty list recomputes nothing.
  if (Trim(names).empty()) {
    *r = Recompute::kNone;
    return "";
  }
  auto parsed = ParseRecomputeModules(names);
  if (!parsed.ok()) return "recompute modules: " + parsed.status().message();
  *modules = *parsed;
  return "";
}

// The precision and recipe the row trains in.
void PrecisionOf(const Json& pj, const topology::GpuSpec& gpu, TrainingSpec* t,
                 std::vector<std::string>* assumed) {
  const std::string fp8 = Lower(Str(pj, "fp8_recipe"));
  t->precision = topology::Precision::kBf16;
  if (fp8.empty()) return;
  t->precision = topology::Precision::kFp8;
  t->recipe_stated = true;
  if (Contains(fp8, "nvfp4")) {
    t->recipe = topology::Recipe::kNvfp4;
  } else if (Contains(fp8, "mxfp8")) {
    t->recipe = topology::Recipe::kMxfp8;
  } else if (Contains(fp8, "delayed")) {
    t->recipe = topology::Recipe::kFp8Delayed;
  } else {
    t->recipe = topology::Recipe::kFp8Current;  // tensorwise / current scaling
  }
  if (ResolveRecipe(gpu, t, "/training").ok()) return;
  t->precision = topology::Precision::kBf16;
  assumed->push_back("fp8 recipe '" + fp8 + "' not run by the GPU preset: bf16");
}

}  // namespace

const char* MemoryMetricName(MemoryMetric m) {
  switch (m) {
    case MemoryMetric::kMaxAllocated: return "max_allocated";
    case MemoryMetric::kMaxReserved: return "max_reserved";
    case MemoryMetric::kPeak: return "peak_unspecified";
    case MemoryMetric::kOom: return "oom";
  }
  return "?";
}

bool IsMemoryRunsDocument(const Json& doc) {
  if (!doc.is_array() || doc.empty() || !doc[0].is_object()) return false;
  const Json& row = doc[0];
  return Has(row, "measured") && row["measured"].is_object() && row["measured"].contains("metric") &&
         (row["measured"].contains("max_allocated_GiB") || row["measured"].contains("max_reserved_GiB"));
}

namespace {

// The degrees, micro-batch and sharding of the row; "" or why it cannot be mapped.
std::string ConfigOf(const Json& pj, Framework fw, const std::string& framework,
                     const std::string& version, Job* job, ParallelConfig* c,
                     std::vector<std::string>* assumed) {
  const int tp = Int(pj, "tp", 1), pp = Int(pj, "pp", 1), cp = Int(pj, "cp", 1);
  c->gy = tp;
  c->pp = pp;
  c->cp = cp;
  c->vpp = pp > 1 ? std::max(1, Int(pj, "vpp", 1)) : 1;
  c->ep = std::max(1, Int(pj, "ep", 1));
  c->etp = std::max(1, Int(pj, "etp", 1));
  const int rest = job->gpus / std::max(1, tp * pp * cp);
  const int dp = Int(pj, "dp", rest);
  if (dp * tp * pp * cp != job->gpus) return "degrees do not multiply to num_gpus";
  const std::string fsdp = Str(pj, "fsdp");
  const bool stated_sp = Has(pj, "sequence_parallel");
  c->sp = tp > 1 && (!stated_sp || pj["sequence_parallel"].get<bool>());
  if (tp > 1 && !stated_sp) assumed->push_back("sequence parallelism with tp > 1");
  switch (fw) {
    case Framework::kTorchtitan:
      // FSDP2's shard degree is the Z (sharded) dimension, its replicas data;
      // the torchtitan preset shards over dp_shard × cp (supports.fsdp_over_cp).
      c->gdata = std::max(1, Int(pj, "dp_replicate", 1));
      c->gz = dp / c->gdata;
      c->sp = tp > 1;  // torchtitan's TP always shards the norms' sequence
      break;
    case Framework::kDeepSpeed:
      c->gdata = dp;
      c->zero = Int(pj, "zero_stage", 0);
      break;
    case Framework::kFsdp:
      c->gz = dp;
      break;
    default:
      c->gdata = dp;
      if (Contains(fsdp, "Megatron-FSDP")) {
        c->zero = 3;  // Megatron-FSDP, optim_grads_params
      } else {
        c->distributed_optimizer =
            Has(pj, "distributed_optimizer") && pj["distributed_optimizer"].get<bool>();
      }
      break;
  }
  c->mbs = Int(pj, "mbs", 0);
  if (c->mbs <= 0 && fw == Framework::kTorchtitan && pp > 1) {
    c->mbs = 1;
    assumed->push_back("micro-batch 1 (torchtitan's pipeline_parallel_microbatch_size default)");
  }
  if (c->mbs <= 0) return "micro-batch not stated";
  const std::string schedule = Lower(Str(pj, "pp_schedule"));
  if (pp > 1 && Contains(schedule, "interleaved") && c->vpp == 1) {
    c->vpp = 2;
    assumed->push_back("2 stages per rank (Interleaved 1F1B, stage count not stated)");
  }
  int64_t gbs = static_cast<int64_t>(Num(pj, "gbs", 0));
  if (gbs <= 0) {
    gbs = int64_t{c->mbs} * c->gz * c->gdata * std::max(1, pp);
    assumed->push_back("global batch " + std::to_string(gbs) + " (not stated; pp micro-batches)");
  }
  job->training.global_batch = gbs;
  if (Contains(Str(pj, "other"), "--attention-backend=unfused")) {
    job->training.attention = Attention::kUnfused;
  }
  job->training.compile = Has(pj, "compile") && pj["compile"].is_boolean() && pj["compile"].get<bool>();
  // torchtitan's December 2024 release compiled each TransformerBlock but
  // left the loss eager ("compiling loss function causes CUDA errors":
  // pytorch/torchtitan@9dec370 train.py:136-138, parallelize_llama.py:297-304).
  if (fw == Framework::kTorchtitan && job->training.compile && Contains(version, "9dec370")) {
    job->training.compile_loss = false;
    assumed->push_back(
        "the loss eager under compile (torchtitan 9dec370 compiles the blocks only)");
  }
  // torchtitan's ChunkedLossWrapper at its default 8 chunks (loss.py:544).
  if (Contains(Str(pj, "other"), "ChunkedLossWrapper")) job->training.loss_chunks = 8;
  // Megatron-Bridge's performance recipes reduce and keep main gradients in
  // bf16 (grad_reduce_in_fp32 = False, as validation/fleet.cc cites).
  if (framework == "Megatron-Bridge") {
    job->training.main_grads_fp32 = false;
    assumed->push_back("bf16 main gradients (Megatron-Bridge performance recipes)");
  }
  ApplyFrameworkOverlaps(FrameworkPreset(fw).support, c);
  // Megatron-LM's rows list the test's flags in `other`; TP communication
  // overlap is off unless asked for (NVIDIA/Megatron-LM@d98e8a6
  // megatron/core/model_parallel_config.py:265), and what it allocates
  // (Transformer Engine's userbuffers workspaces) is in the ledger.
  if (framework == "Megatron-LM") {
    c->tp_comm_overlap = Contains(Str(pj, "other"), "--tp-comm-overlap=True");
  }
  return "";
}

// Megatron CI test cases whose rows state the default ("TE default")
// attention while the test's model_config.yaml runs `--transformer-impl local`
// (NVIDIA/Megatron-LM@d98e8a6 tests/functional_tests/test_cases/gpt/
// gpt3_mcore_tp1_pp2/model_config.yaml:39). Megatron-Core's local spec
// computes attention with DotProductAttention (megatron/core/models/
// backends.py:129-131), which forms and keeps the s x s scores
// (megatron/core/transformer/dot_product_attention.py:194-239: baddbmm,
// softmax, dropout, bmm): unfused attention.
constexpr const char* kLocalImplTestCases[] = {"/gpt3_mcore_tp1_pp2/"};

void CorrectFromTestConfig(const Json& row, TrainingSpec* t, std::vector<std::string>* assumed) {
  const Json& sj = row.value("source", Json::object());
  if (Str(sj, "repo") != "NVIDIA/Megatron-LM") return;
  const std::string path = Str(sj, "path");
  for (const char* test : kLocalImplTestCases) {
    if (!Contains(path, test) || t->attention == Attention::kUnfused) continue;
    t->attention = Attention::kUnfused;
    assumed->push_back(
        "unfused attention: the test runs --transformer-impl local (model_config.yaml:39), "
        "whose DotProductAttention keeps the scores; the row says TE default");
  }
}

// Megatron-Bridge's memory skills tabulate experiments on one workload
// (Llama-3 70B SFT, FP8, 32 H100): the activation-recompute table's runs all
// ran without expandable segments ("For this workload, the actual OOM fix was
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", its baseline the same
// fragmentation OOM), and both tables' "Peak Mem (GB)" is the allocator's
// allocated peak: a run stopped by fragmentation at 58.8 GB on an 80 GB GPU
// had reserved the rest (NVIDIA-NeMo/Megatron-Bridge@067f987
// skills/nemo-mbridge-perf-memory-tuning/SKILL.md, "Measured Results").
constexpr const char* kWithoutExpandableSources[] = {
    "skills/nemo-mbridge-perf-activation-recompute/SKILL.md"};
constexpr const char* kAllocatedPeakSources[] = {
    "skills/nemo-mbridge-perf-memory-tuning/SKILL.md",
    "skills/nemo-mbridge-perf-activation-recompute/SKILL.md"};

bool FromSource(const Json& row, const char* const* begin, const char* const* end) {
  const std::string path = Str(row.value("source", Json::object()), "path");
  return std::any_of(begin, end, [&](const char* p) { return path == p; });
}

// Whether the row's allocator used expandable segments: as its notes, quote
// or flags or its source state it, else the plan's default (on, as the launch
// templates set it).
void AllocatorOf(const Json& row, TrainingSpec* t, std::vector<std::string>* assumed) {
  const std::string notes =
      Lower(Str(row, "notes") + " " + Str(row.value("source", Json::object()), "quote") + " " +
            Str(row.value("parallel", Json::object()), "other"));
  if (Contains(notes, "without pytorch_cuda_alloc_conf=expandable_segments") ||
      FromSource(row, std::begin(kWithoutExpandableSources), std::end(kWithoutExpandableSources))) {
    t->expandable_segments = false;
    assumed->push_back(
        "fixed-size allocator segments (the source ran without expandable_segments)");
  } else if (!Contains(notes, "expandable_segments")) {
    assumed->push_back("expandable allocator segments (not stated; the launch templates' default)");
  }
}

// The row as a run, or why it cannot be one.
std::string RunOf(const Json& row, MemoryRun* run) {
  const Json& pj = row["parallel"];
  const Json& mj = row["model"];
  if (Has(pj, "peft")) return "parameter-efficient fine-tuning (" + Str(pj, "peft") + ") is not expressible";
  const std::string precision = Lower(Str(pj, "precision"));
  if (Contains(precision, "bf16 adam") || Contains(precision, "bf16 master")) {
    return "bf16 master weights and optimizer states are not expressible";
  }
  auto fw = FrameworkOf(run->framework);
  if (!fw.ok()) return fw.status().message();
  Job& job = run->request.job;
  job.gpus = Int(row, "num_gpus", 0);
  if (job.gpus <= 0) return "GPU count not stated";
  auto cluster = topology::ClusterPreset(ClusterOf(Str(row, "gpu"), &run->assumed));
  if (!cluster.ok()) return cluster.status().message();
  job.cluster = *cluster;
  const double capacity = Num(row, "gpu_capacity_GiB", 0);
  if (capacity > 0) job.cluster.gpu.memory_GiB = capacity;
  if (std::string why = ModelOf(mj, run->framework, &job.model, &run->assumed); !why.empty()) return why;
  TrainingSpec& t = job.training;
  t.framework = *fw;
  t.headroom = 0.0;  // the run's own peak against the whole device
  t.seq_len = Int(mj, "seq_len", 0);
  if (t.seq_len <= 0) return "sequence length not stated";
  PrecisionOf(pj, job.cluster.gpu, &t, &run->assumed);
  AllocatorOf(row, &t, &run->assumed);
  if (run->metric == MemoryMetric::kPeak &&
      FromSource(row, std::begin(kAllocatedPeakSources), std::end(kAllocatedPeakSources))) {
    run->metric = MemoryMetric::kMaxAllocated;
    run->assumed.push_back(
        "the table's peak is the allocated peak (a fragmentation OOM at 58.8 GB)");
  }
  ParallelConfig& c = run->request.config;
  const Json rj = Has(pj, "recompute") ? pj["recompute"] : Json::object();
  if (std::string why = RecomputeOf(rj, *fw, &c.recompute, &c.recompute_modules); !why.empty()) {
    return why;
  }
  if (std::string why =
          ConfigOf(pj, *fw, run->framework, Str(row, "framework_version"), &job, &c, &run->assumed);
      !why.empty()) {
    return why;
  }
  CorrectFromTestConfig(row, &t, &run->assumed);
  return "";
}

}  // namespace

Result<MemoryRuns> MemoryRunsFromCalibration(const Json& doc) {
  if (!doc.is_array()) return Status::InvalidArgument("memory runs: the document must be an array");
  MemoryRuns out;
  for (const Json& row : doc) {
    MemoryRun run;
    run.id = Str(row, "id");
    run.framework = ShortFramework(Str(row, "framework"));
    if (!Has(row, "measured") || !Has(row, "parallel") || !Has(row, "model")) {
      return Status::InvalidArgument("memory row " + run.id + ": needs model, parallel, measured");
    }
    const Json& sj = row.value("source", Json::object());
    run.source = Has(sj, "repo") ? Str(sj, "repo") + "@" + Str(sj, "commit") + " " + Str(sj, "path")
                                 : Str(sj, "url");
    const Json& me = row["measured"];
    const std::string metric = Str(me, "metric");
    run.oom = Has(me, "oom") && me["oom"].get<bool>();
    if (run.oom) {
      run.metric = MemoryMetric::kOom;
    } else if (metric == "max_allocated") {
      run.metric = MemoryMetric::kMaxAllocated;
      run.measured_GiB = Num(me, "max_allocated_GiB", Num(me, "peak_GiB", 0));
    } else if (metric == "max_reserved") {
      run.metric = MemoryMetric::kMaxReserved;
      run.measured_GiB = Num(me, "max_reserved_GiB", Num(me, "peak_GiB", 0));
    } else {
      run.metric = MemoryMetric::kPeak;
      run.measured_GiB = Num(me, "peak_GiB", 0);
    }
    const std::string rank = Lower(Str(row, "rank"));
    run.rank = Contains(rank, "last rank") ? ReportedRank::kLast
               : Contains(rank, "rank 0")  ? ReportedRank::kFirst
                                           : ReportedRank::kMax;
    std::string why = RunOf(row, &run);
    if (why.empty() && !run.oom && !(run.measured_GiB > 0)) why = "no measured figure";
    if (!why.empty()) {
      out.unmapped.push_back({run.id, run.framework, why});
      continue;
    }
    out.runs.push_back(std::move(run));
  }
  return out;
}

MemoryCheck CheckMemoryRun(const MemoryRun& run) {
  const Job& job = run.request.job;
  const ParallelConfig& c = run.request.config;
  MemoryCheck check;
  const CostModel cm(job.model, job.training, job.cluster, job.gpus);
  if (Status s = ValidateConfig(cm, c); !s.ok()) {
    check.covered = false;
    check.why = s.message();
    return check;
  }
  const MemoryBreakdown mem = cm.Memory(c);
  const double runtime = job.cluster.gpu.runtime_reserved_GiB;
  check.first_stage_GiB = mem.first_stage_allocated_GiB;
  check.last_stage_GiB = mem.last_stage_allocated_GiB;
  check.reserved_GiB = mem.reserved_GiB;
  check.capacity_GiB = mem.capacity_GiB;
  check.fits = mem.reserved_GiB <= mem.capacity_GiB;
  if (run.metric == MemoryMetric::kOom) return check;
  const double stage = run.rank == ReportedRank::kLast    ? mem.last_stage_allocated_GiB
                       : run.rank == ReportedRank::kFirst ? mem.first_stage_allocated_GiB
                                                          : mem.peak_allocated_GiB;
  // The allocator's counters leave the runtime reserve (CUDA context, NCCL's
  // own buffers) out; a table's unqualified peak is the device's view.
  const double allocated = stage - runtime;
  switch (run.metric) {
    case MemoryMetric::kMaxAllocated: check.predicted_GiB = allocated; break;
    case MemoryMetric::kMaxReserved:
      check.predicted_GiB = cm.ReservedGiB(stage) - runtime;
      break;
    default:
      check.predicted_GiB = cm.ReservedGiB(stage);
      break;
  }
  check.error = check.predicted_GiB / run.measured_GiB - 1.0;
  return check;
}

MemoryErrorStats MemoryStats(const std::vector<double>& errors) {
  MemoryErrorStats s;
  s.rows = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> abs;
  for (double e : errors) abs.push_back(std::fabs(e));
  s.median_abs = Median(abs);
  s.median_signed = Median(errors);
  std::sort(abs.begin(), abs.end());
  // Nearest-rank 90th percentile.
  const size_t k = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(abs.size())));
  s.p90_abs = abs[std::max<size_t>(1, k) - 1];
  return s;
}

}  // namespace paratune::planner
