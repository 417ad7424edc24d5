// Megatron-Bridge's performance tables and the MLPerf Training v5.1 AMD rows
// (shared/calibration/fleet_runs.json) as prediction requests, and the refits
// `paratune validate` reports beside them (docs/model.md, Validation).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/median.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "validation/fit.h"
#include "validation/row_fields.h"
#include "validation/validation.h"

namespace paratune::planner {
namespace {

using row_fields::Bool;
using row_fields::Has;
using row_fields::Int;
using row_fields::Num;
using row_fields::Str;
std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

// The cluster preset of a row's GPU: hardware is calibrated per preset.
const char* FleetPresetOf(const std::string& gpu) {
  static const std::map<std::string, const char*> kMap = {
      {"H100", "dgx-h100"},     {"B200", "dgx-b200"},     {"B300", "dgx-b300"},
      {"GB200", "gb200-nvl72"}, {"GB300", "gb300-nvl72"}, {"H800", "hgx-h800"},
      {"MI300X", "mi300x"},     {"MI325X", "mi325x"},     {"MI350X", "mi350x"},
      {"MI355X", "mi355x"}};
  auto it = kMap.find(Upper(gpu));
  return it == kMap.end() ? nullptr : it->second;
}

}  // namespace

Result<std::vector<PublishedRun>> PublishedRunsFromFleetRuns(const Json& doc) {
  if (!doc.is_array()) return Status::InvalidArgument("fleet runs: the document must be an array");
  std::vector<PublishedRun> runs;
  for (const Json& row : doc) {
    const std::string id = Str(row, "id", "?");
    if (Str(row, "record_type") != "run" || Str(row, "row_type", "pretrain") != "pretrain")
      continue;
    if (!Has(row, "model") || !Has(row, "parallel") || !Has(row, "hardware")) {
      return Status::InvalidArgument("fleet row " + id + ": needs model, parallel, hardware");
    }
    const Json& mj = row["model"];
    const Json& pj = row["parallel"];
    const Json& hj = row["hardware"];
    const Json rj = Has(row, "recipe") ? row["recipe"] : Json::object();
    PublishedRun run;
    run.id = id;
    run.source_key = Str(row, "source_group", "fleet");
    run.gpu = Upper(Str(hj, "gpu"));
    run.release = Str(row, "release");
    {
      const Json& sj = row.value("source", Json::object());
      run.source = Str(sj, "repo") + "@" + Str(sj, "commit") + " " + Str(sj, "path");
    }
    const char* preset = FleetPresetOf(run.gpu);
    if (preset == nullptr) {
      return Status::InvalidArgument("fleet row " + id + ": no cluster preset for GPU '" + run.gpu +
                                     "'");
    }
    PT_ASSIGN_OR_RETURN(run.request.job.cluster, topology::ClusterPreset(preset));
    Job& job = run.request.job;
    job.gpus = Int(hj, "num_gpus", 0);

    // Model: Llama 3 / 3.1 (RMSNorm, SwiGLU, RoPE, untied, no biases, no dropout).
    ModelSpec& m = job.model;
    m.name = Str(mj, "name", id);
    m.layers = Int(mj, "layers", 0);
    m.hidden = Int(mj, "hidden", 0);
    m.heads = Int(mj, "heads", 0);
    m.kv_heads = Int(mj, "kv_heads", m.heads);
    m.ffn_hidden = Int(mj, "ffn_hidden", 0);
    m.vocab = Int(mj, "vocab", 128256);
    m.norm = "rmsnorm";
    m.gated_ffn = true;
    m.tied_embeddings = false;
    m.dropout = false;
    m.linear_bias = false;
    m.max_seq_len = Int(mj, "seq_len", 8192);
    if (Status s = ValidateModel(m, "/model"); !s.ok()) return s.WithContext("fleet row " + id);

    // Training: the recipe as matched (recipe.config names it), else as printed.
    TrainingSpec& t = job.training;
    t.seq_len = m.max_seq_len;
    t.framework = Framework::kMegatron;
    t.attention = Attention::kFlash;
    // Megatron-Bridge's Llama performance configurations keep and reduce the
    // main gradients in bf16 (grad_reduce_in_fp32 = False in
    // scripts/performance/configs/llama/llama3_llm_pretrain.py:43-44 and
    // llama31_llm_pretrain.py:42-43 @v0.5.0).
    if (run.source_key.find("megatron-bridge") != std::string::npos) t.main_grads_fp32 = false;
    const std::string cfg_name = Upper(Str(rj, "config"));
    const std::string printed = Upper(Str(hj, "precision"));
    t.precision = topology::Precision::kFp8;
    if (cfg_name.find("NVFP4") != std::string::npos || printed.find("FP4") != std::string::npos) {
      t.recipe = topology::Recipe::kNvfp4;
    } else if (cfg_name.find("FP8_MX") != std::string::npos ||
               printed.find("MX") != std::string::npos) {
      t.recipe = topology::Recipe::kMxfp8;
    } else if (cfg_name.find("FP8_CS") != std::string::npos ||
               printed.find("CS") != std::string::npos) {
      t.recipe = topology::Recipe::kFp8Current;
    } else if (printed.find("FP8") != std::string::npos &&
               run.source_key.find("mlperf") != std::string::npos) {
      t.recipe = topology::Recipe::kFp8Delayed;  // AMD's recipe: TE fp8='hybrid', amax history 4
    } else if (printed.find("FP8") != std::string::npos || printed.empty()) {
      t.recipe = job.cluster.gpu.fp8_default_recipe;
      run.assumed.push_back(std::string("fp8 recipe ") + topology::RecipeName(t.recipe) +
                            " (scaling not printed: the GPU's default)");
    } else {
      t.precision = topology::Precision::kBf16;
    }
    t.global_batch = static_cast<int64_t>(Num(pj, "gbs", 0));
    if (t.global_batch <= 0) continue;

    // Parallel configuration.
    ParallelConfig& c = run.request.config;
    const bool layout_known = Has(pj, "tp");
    const int tp = Int(pj, "tp", 1), pp = Int(pj, "pp", 1), cp = Int(pj, "cp", 1);
    c.gy = tp;
    c.pp = pp;
    c.cp = cp;
    c.vpp = pp > 1 ? std::max(1, Int(pj, "vp", 1)) : 1;
    c.sp = tp > 1;
    c.mbs = Int(pj, "mbs", 0);
    const int dp = job.gpus / std::max(1, tp * pp * cp);
    if (!layout_known) {
      // MLPerf submitters that left their layout out ran AMD's recipe.
      const double ga =
          Num(row.value("measured", Json::object()), "gradient_accumulation_steps_logged", 2);
      c.mbs = static_cast<int>(t.global_batch / (dp * std::max(1.0, ga)));
      run.assumed.push_back("layout tp1 pp1 dp" + std::to_string(dp) + " mbs " +
                            std::to_string(c.mbs) +
                            " (AMD's MLPerf recipe; the submitter's folder states none)");
    }
    c.mbs = std::max(1, c.mbs);
    const bool fsdp = Bool(rj, "use_megatron_fsdp") || Bool(pj, "fsdp");
    if (fsdp) {
      c.gdata = dp;
      c.zero = 3;  // Megatron-FSDP, optim_grads_params
    } else {
      c.gdata = dp;
      c.distributed_optimizer = dp * cp > 1;
    }
    c.offload_activation_layers = Int(rj, "cpu_offloading_num_layers", 0);
    const std::string cg = Str(rj, "cuda_graph_impl");
    c.cuda_graphs = cg == "local" || cg == "transformer_engine" || cg == "full_iteration";
    if (Has(rj, "recompute_modules")) c.recompute = Recompute::kSelective;
    if (Int(rj, "recompute_num_layers", 0) > 0) {
      run.assumed.push_back("recompute of " + std::to_string(Int(rj, "recompute_num_layers", 0)) +
                            " layers not modelled (none)");
    }
    // A layer count the stages do not divide (Llama 3.1 405B: 126 on pp·vp 64)
    // runs with the embedding and the loss counted as layers, the layout
    // Megatron-Core builds for it: (L + 2) % (pp·vp) == 0
    // (--account-for-embedding/loss-in-pipeline-split, transformer_config.py:2366-2415
    // @d98e8a6; Megatron-LM's examples/llama/README.md lists 405B at PP 8 × VP 8).
    const int layers = job.model.layers, stages = c.pp * c.vpp;
    if (c.pp > 1 && layers % stages != 0 && (layers + 2) % stages == 0) {
      c.pp_embedding_layers = c.pp_loss_layers = 1;
      run.assumed.push_back("embedding and loss counted as pipeline layers (" +
                            std::to_string(layers) + " + 2 layers on pp·vp " +
                            std::to_string(stages) + ")");
    }
    ResolveUnstated(Json::object(), t.framework, &c, &run.assumed);
    if (job.gpus != c.world()) {
      return Status::InvalidArgument("fleet row " + id + ": degrees do not multiply to num_gpus");
    }
    // A row no recipe was matched to leaves its memory knobs unstated: the
    // least the model needs for it to fit, as its published neighbours do
    // (CPU activation offloading in steps of 5 layers without pipeline
    // stages, else selective then full recompute).
    if (!Has(row, "recipe")) {
      // The least that runs: reserved memory within the whole capacity (the
      // run ran), not within the planner's headroom.
      TrainingSpec ran = t;
      ran.headroom = 0.0;
      const CostModel cm(m, ran, job.cluster, job.gpus);
      auto fits = [&](const ParallelConfig& x) {
        return cm.CheckRules(x) == Reason::kOk && cm.Memory(x).Verdict() == Reason::kOk;
      };
      if (cm.CheckRules(c) == Reason::kOk && !fits(c)) {
        std::vector<ParallelConfig> tries;
        for (int n = 5; c.pp == 1 && n < m.layers; n += 5) {
          ParallelConfig x = c;
          x.offload_activation_layers = n;
          tries.push_back(x);
        }
        for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
          ParallelConfig x = c;
          x.recompute = rc;
          tries.push_back(x);
        }
        // Without tensor, pipeline or context parallelism every GPU holds the
        // whole model: Megatron-Bridge runs such a layout for a model whose
        // weights and gradients exceed one GPU only with Megatron-FSDP
        // (use_megatron_fsdp, optim_grads_params), as the recipes matched to
        // the same tables' TP1/PP1 rows state. A printed FSDP column of 0 on
        // such a row is read as unprinted.
        if (c.gy == 1 && c.gx == 1 && c.pp == 1 && c.cp == 1 && c.zero == 0) {
          ParallelConfig f = c;
          f.zero = 3;
          f.distributed_optimizer = false;
          tries.push_back(f);
          for (int n = 5; n < m.layers; n += 5) {
            ParallelConfig x = f;
            x.offload_activation_layers = n;
            tries.push_back(x);
          }
        }
        for (const ParallelConfig& x : tries) {
          if (!fits(x)) continue;
          c = x;
          std::string what =
              x.offload_activation_layers > 0
                  ? "CPU activation offloading of " + std::to_string(x.offload_activation_layers) +
                        " layers"
                  : x.zero == 3 ? std::string()
                                : std::string("recompute ") + RecomputeName(x.recompute);
          if (x.zero == 3) {
            what = "Megatron-FSDP" + (what.empty() ? std::string() : " with " + what);
          }
          run.assumed.push_back(what + " (no recipe matched: the least that fits)");
          break;
        }
      }
    }

    // What was measured: tokens/s per GPU. 26.04.01 printed rounded tokens/s
    // (fleet_runs.json's note): there the TFLOP/s column over the row's own
    // FLOPs per token is the figure.
    const Json& meas = row.value("measured", Json::object());
    const Json& der = row.value("derived", Json::object());
    double per_gpu = Num(meas, "tokens_per_s_per_gpu", Num(der, "tokens_per_s_per_gpu", 0));
    if (run.release == "26.04.01" && Num(meas, "model_tflops_per_gpu", 0) > 0 &&
        Num(der, "formula_gflop_per_token", 0) > 0) {
      per_gpu = Num(meas, "model_tflops_per_gpu", 0) * 1e3 / Num(der, "formula_gflop_per_token", 1);
    }
    if (per_gpu <= 0) continue;
    run.measured_tokens_per_s = per_gpu * job.gpus;
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace paratune::planner

namespace paratune::planner {
namespace {

// Bisection on one constant in [lo, 1] for a zero median signed error over
// `rows` (throughput grows with each constant); 0 when there are no rows.
double FitOne(const std::vector<const PublishedRun*>& rows, FleetConstants k,
              double FleetConstants::*field, double lo) {
  if (rows.empty()) return 0.0;
  auto median_at = [&](double v) {
    FleetConstants kk = k;
    kk.*field = v;
    std::vector<double> e;
    for (const PublishedRun* r : rows) {
      const double x = FleetRunError(*r, kk);
      if (std::isfinite(x)) e.push_back(x);
    }
    return Median(e);
  };
  double a = lo, b = 1.0;
  if (median_at(b) <= 0) return b;  // even the ceiling is pessimistic
  if (median_at(a) >= 0) return a;
  for (int i = 0; i < 24; ++i) {
    const double mid = 0.5 * (a + b);
    (median_at(mid) > 0 ? b : a) = mid;
  }
  return 0.5 * (a + b);
}

bool IsAmdName(const std::string& gpu) { return gpu.rfind("MI", 0) == 0; }

// The constants for `gpu` when it is held out of the fit: each the median of
// the nearest tier of other GPUs that fitted it: the part with the same die
// (GpuDie: GB200's GPU is B200's), then the vendor's, then every GPU.
FleetConstants Borrowed(const std::map<std::string, FleetConstants>& fits, const std::string& gpu) {
  auto in_tier = [&gpu](int tier, const std::string& g) {
    if (g == gpu) return false;
    if (tier == 0) return GpuDie(g) == GpuDie(gpu);
    if (tier == 1) return IsAmdName(g) == IsAmdName(gpu);
    return true;
  };
  auto borrow = [&](double FleetConstants::*field) {
    for (int tier : {0, 1, 2}) {
      std::vector<double> v;
      for (const auto& [g, k] : fits) {
        if (in_tier(tier, g) && k.*field > 0) v.push_back(k.*field);
      }
      if (!v.empty()) return Median(v);
    }
    return 0.0;
  };
  FleetConstants out;
  out.sustained = borrow(&FleetConstants::sustained);
  out.mxfp8 = borrow(&FleetConstants::mxfp8);
  out.nvfp4 = borrow(&FleetConstants::nvfp4);
  return out;
}

}  // namespace

void ApplyFleetConstants(const FleetConstants& k, topology::GpuSpec* g) {
  if (k.sustained > 0) g->gemm_sustained_fraction = k.sustained;
  if (k.mxfp8 > 0) g->recipe_gemm_factor[static_cast<int>(topology::Recipe::kMxfp8)] = k.mxfp8;
  if (k.nvfp4 > 0) g->recipe_gemm_factor[static_cast<int>(topology::Recipe::kNvfp4)] = k.nvfp4;
}

double FleetRunError(const PublishedRun& run, const FleetConstants& k) {
  Job job = run.request.job;
  ApplyFleetConstants(k, &job.cluster.gpu);
  const CostModel cm(job.model, job.training, job.cluster, job.gpus);
  if (cm.CheckRules(run.request.config) != Reason::kOk) return std::nan("");
  return ThroughputError(run, cm.Predict(run.request.config));
}

std::map<std::string, FleetConstants> FitFleetConstants(const std::vector<PublishedRun>& runs) {
  std::map<std::string, std::vector<const PublishedRun*>> by_gpu;
  for (const PublishedRun& r : runs) by_gpu[r.gpu].push_back(&r);
  std::map<std::string, FleetConstants> out;
  for (const auto& [gpu, rows] : by_gpu) {
    // The sustained fraction from the per-tensor fp8 rows, then each
    // microscaling recipe's factor from its own rows on top of it.
    std::vector<const PublishedRun*> fp8, mx, fp4;
    for (const PublishedRun* r : rows) {
      const topology::Recipe rc = r->request.job.training.recipe;
      (rc == topology::Recipe::kMxfp8   ? mx
       : rc == topology::Recipe::kNvfp4 ? fp4
                                        : fp8)
          .push_back(r);
    }
    FleetConstants k;
    k.sustained = FitOne(fp8, k, &FleetConstants::sustained, 0.2);
    k.mxfp8 = FitOne(mx, k, &FleetConstants::mxfp8, 0.3);
    k.nvfp4 = FitOne(fp4, k, &FleetConstants::nvfp4, 0.05);
    out[gpu] = k;
  }
  return out;
}

std::vector<HeldOutGroup> LeaveOneOut(const std::vector<PublishedRun>& runs, bool by_gpu) {
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < runs.size(); ++i)
    groups[by_gpu ? runs[i].gpu : runs[i].release].push_back(i);
  std::vector<HeldOutGroup> out;
  for (const auto& [name, idx] : groups) {
    std::vector<PublishedRun> train;
    std::set<size_t> held(idx.begin(), idx.end());
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!held.count(i)) train.push_back(runs[i]);
    }
    const std::map<std::string, FleetConstants> fits = FitFleetConstants(train);
    HeldOutGroup g;
    g.group = name;
    for (size_t i : idx) {
      const PublishedRun& r = runs[i];
      FleetConstants k = Borrowed(fits, r.gpu);
      if (auto it = fits.find(r.gpu); it != fits.end()) {
        // Its GPU kept rows in the fit: those constants, each borrowed where
        // the fit had no rows of that recipe.
        const FleetConstants own = it->second;
        if (own.sustained > 0) k.sustained = own.sustained;
        if (own.mxfp8 > 0) k.mxfp8 = own.mxfp8;
        if (own.nvfp4 > 0) k.nvfp4 = own.nvfp4;
      }
      const double e = FleetRunError(r, k);
      if (std::isfinite(e)) g.errors.push_back(e);
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace paratune::planner
