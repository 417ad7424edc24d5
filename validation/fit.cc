#include "validation/fit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "common/enum_names.h"
#include "common/median.h"
#include "common/strings.h"

namespace paratune::planner {
namespace {

// By value, in the order of Holdout's declaration (fit.h).
constexpr const char* kHoldoutNames[] = {"source",    "model", "gpu",       "release",
                                         "gpu-count", "seq",   "framework", "generation"};

bool GpuIs(const PublishedRun& r, std::initializer_list<const char*> prefixes) {
  const std::string& n = r.request.job.cluster.gpu.name;
  for (const char* p : prefixes) {
    if (n.rfind(p, 0) == 0) return true;
  }
  return false;
}
bool Hopper(const PublishedRun& r) { return GpuIs(r, {"h100", "h200", "gh200"}); }
bool Blackwell(const PublishedRun& r) { return GpuIs(r, {"b200", "b300", "gb200", "gb300"}); }
bool Fp8(const PublishedRun& r) {
  return r.request.job.training.precision == topology::Precision::kFp8;
}
bool Flash(const PublishedRun& r) { return r.request.job.training.attention == Attention::kFlash; }
bool Runs(const PublishedRun& r, Framework f) { return r.request.job.training.framework == f; }

double CurveAt(const std::vector<topology::EfficiencyPoint>& c, double size) {
  for (const auto& pt : c) {
    if (pt.size == size) return pt.efficiency;
  }
  return c.empty() ? 0.0 : c.back().efficiency;
}

// GpuSpec::gemm_sustained_fraction, the fraction of the GPU's short-run GEMM
// curve that training sustains.
double SustainedFraction(const topology::GpuSpec& g, const FrameworkSpec&) {
  return g.gemm_sustained_fraction;
}
void SetSustainedFraction(double v, topology::GpuSpec* g, FrameworkSpec*) {
  g->gemm_sustained_fraction = v;
}

// GpuSpec::flash_fwd_efficiency; setting it moves flash_bwd_efficiency in
// proportion (capped at 1).
double FlashEfficiency(const topology::GpuSpec& g, const FrameworkSpec&) {
  return g.flash_fwd_efficiency;
}
void SetFlashEfficiency(double v, topology::GpuSpec* g, FrameworkSpec*) {
  const double ratio = g->flash_bwd_efficiency / g->flash_fwd_efficiency;
  g->flash_fwd_efficiency = v;
  g->flash_bwd_efficiency = std::min(1.0, v * ratio);
}

constexpr const char* kHopperGpus = "gpu h100-sxm, h200, gh200";
constexpr const char* kBlackwellGpus = "gpu b200, b300, gb200, gb300";
constexpr const char* kSustainedKey = "gemm_sustained_fraction";
constexpr const char* kFlashKey = "flash_fwd_efficiency (flash_bwd_efficiency in proportion)";

// The GPU presets with a sustained fraction of their own (Blackwell and CDNA 4).
constexpr const char* kPerGpu[] = {"b200", "b300", "gb200", "gb300", "mi350x", "mi355x"};
// What a GPU sustains of its short-run GEMM curve under a long tensor load,
// before any framework: its power cap's clock. Measured, not fitted: 8192^3
// bf16 GEMMs back to back for 40 s on an H100 (700 W) ran at 663-679 of the
// short run's 798 TFLOP/s, the SM clock at 1290-1395 of 1980 MHz, throttled
// by the software power cap (docs/model.md, Measured on an H100;
// bench/gpu/sustained_gemm.py). The prior of each GPU's sustained fraction:
// what the silicon gives before a stack's smaller GEMMs and overlap take more.
constexpr double kPowerCapSustained = 0.85;
constexpr const char* kPowerCapSustainedSource =
    "0.85: the power cap's sustained share of the short-run GEMM curve, 8192^3 bf16 GEMMs "
    "back to back for 40 s on an H100 at 663-679 of 798 TFLOP/s (docs/model.md, Measured "
    "on an H100)";
bool IsAmdKey(const std::string& gpu) { return gpu.rfind("mi", 0) == 0; }
std::string FractionName(const std::string& gpu) { return gpu + ".gemm_sustained_fraction"; }

std::vector<FittableConstant> MakeConstants() {
  using topology::GpuSpec;
  using topology::Precision;
  const int bf16 = static_cast<int>(Precision::kBf16), fp8 = static_cast<int>(Precision::kFp8);
  std::vector<FittableConstant> out;
  // Held out, Hopper borrows the same vendor's next generation (the same
  // cuBLAS and Transformer Engine stack), then the other vendor's.
  std::vector<std::vector<std::string>> hopper_siblings(2);
  for (const char* g : kPerGpu) hopper_siblings[IsAmdKey(g) ? 1 : 0].push_back(FractionName(g));
  out.push_back({.name = "hopper.gemm_sustained_fraction",
                 .preset = kHopperGpus,
                 .key = kSustainedKey,
                 .informs = "every Hopper row (GEMM time)",
                 .prior = kPowerCapSustained,
                 .prior_source = kPowerCapSustainedSource,
                 .lo = 0.5,
                 .hi = 1.0,
                 .siblings = std::move(hopper_siblings),
                 .applies = Hopper,
                 .get = SustainedFraction,
                 .set = SetSustainedFraction});
  out.push_back({.name = "hopper.fp8_gemm_ratio",
                 .preset = kHopperGpus,
                 .key = "gemm_efficiency.fp8 (÷ gemm_efficiency.bf16)",
                 .informs = "Hopper FP8 rows (Transformer Engine recipes)",
                 .prior = 1.0,
                 .prior_source = "1: FP8 GEMMs reach the same fraction of the doubled dense peak "
                                 "(H100 datasheet: FP8 1979 = 2 x BF16 989 TFLOP/s)",
                 .lo = 0.5,
                 .hi = 1.2,
                 .applies = [](const PublishedRun& r) { return Hopper(r) && Fp8(r); },
                 .get =
                     [bf16, fp8](const GpuSpec& g, const FrameworkSpec&) {
                       const double b = CurveAt(g.gemm_efficiency[bf16], 8192);
                       return b > 0 ? CurveAt(g.gemm_efficiency[fp8], 8192) / b : 1.0;
                     },
                 .set =
                     [bf16, fp8](double v, GpuSpec* g, FrameworkSpec*) {
                       auto& f = g->gemm_efficiency[fp8];
                       f = g->gemm_efficiency[bf16];
                       for (auto& pt : f) pt.efficiency *= v;
                     }});
  out.push_back({.name = "hopper.flash_efficiency",
                 .preset = kHopperGpus,
                 .key = kFlashKey,
                 .informs = "Hopper rows with fused attention (attention-bound at long sequences)",
                 .prior = 0.35,
                 .prior_source = "0.35: FlashAttention-2 reaches 35 % of the H100's peak (Shah et "
                                 "al. 2024, FlashAttention-3, §1)",
                 // Not below FlashAttention-2's 35 %: the kernel class this
                 // constant prices (Transformer Engine's cuDNN fused attention,
                 // framework preset megatron) runs at least as fast as
                 // FlashAttention-2 on H100 (the same paper's benchmarks).
                 .lo = 0.35,
                 // Times the shape factor's 1.1, under FlashAttention-3's best
                 // forward on H100, 0.764 of the peak (hd 256; physics_test).
                 .hi = 0.69,
                 .applies = [](const PublishedRun& r) { return Hopper(r) && Flash(r); },
                 .get = FlashEfficiency,
                 .set = SetFlashEfficiency});
  // Blackwell and CDNA 4: the sustained fraction of each GPU's GEMM curve, as
  // for Hopper (each GPU its own: the NVL72 racks' power and clock limits differ
  // from the HGX boards'), fitted to the Megatron-Bridge and MLPerf rows.
  for (const char* g : kPerGpu) {
    const std::string gpu = g;
    FittableConstant c{
        .name = FractionName(gpu),
        .preset = "gpu " + gpu,
        .key = kSustainedKey,
        .informs = "every " + gpu + " row (GEMM time)",
        .prior = kPowerCapSustained,
        .prior_source = std::string(kPowerCapSustainedSource) +
                        "; no sustained-load measurement of this GPU was found, so the "
                        "H100's stands in (its curve is the H100's shape)",
        .lo = 0.4,
        .hi = 1.0,
        .applies = [gpu](const PublishedRun& r) { return r.request.job.cluster.gpu.name == gpu; },
        .get = SustainedFraction,
        .set = SetSustainedFraction};
    // Held out, a GPU borrows the fraction of the part with its die (the
    // same silicon and kernels; the board's power limit is in the peaks the
    // fraction multiplies), then its vendor's, then the rest.
    c.siblings.resize(3);
    for (const char* o : kPerGpu) {
      if (gpu == o) continue;
      const size_t tier = GpuDie(o) == GpuDie(gpu) ? 0 : IsAmdKey(o) == IsAmdKey(gpu) ? 1 : 2;
      c.siblings[tier].push_back(FractionName(o));
    }
    c.siblings[2].push_back("hopper.gemm_sustained_fraction");
    out.push_back(std::move(c));
  }
  // The microscaling recipes' GEMM rate relative to per-tensor FP8 on Blackwell
  // (GpuSpec::recipe_gemm_factor): one value for the four Blackwell parts, the
  // same Transformer Engine kernels on the same tensor cores.
  struct RecipeConst {
    const char* name;
    topology::Recipe recipe;
    const char* prior_source;
  };
  for (const RecipeConst& rc :
       {RecipeConst{"blackwell.mxfp8_gemm_factor", topology::Recipe::kMxfp8,
                    "1: MXFP8 runs at the dense FP8 peak (NVIDIA Blackwell datasheets list one FP8 "
                    "figure for FP8 and MXFP8; the block scales are applied in the tensor core)"},
        RecipeConst{"blackwell.nvfp4_gemm_factor", topology::Recipe::kNvfp4,
                    "1: NVFP4 GEMMs reach the same fraction of the dense FP4 peak as FP8 of "
                    "its own (NVIDIA Blackwell datasheets, dense FP4 = 2 x FP8 on B200/GB200)"}}) {
    const topology::Recipe recipe = rc.recipe;
    const int i = static_cast<int>(recipe);
    out.push_back(
        {.name = rc.name,
         .preset = kBlackwellGpus,
         .key = std::string("recipe_gemm_factor.") + topology::RecipeName(recipe),
         .informs = std::string("Blackwell rows with the ") + topology::RecipeName(recipe) +
                    " recipe (the linear layers' GEMMs)",
         .prior = 1.0,
         .prior_source = rc.prior_source,
         .lo = 0.4,
         .hi = 1.0,
         .applies =
             [recipe](const PublishedRun& r) {
               return Blackwell(r) && Fp8(r) && r.request.job.training.recipe == recipe;
             },
         .get = [i](const GpuSpec& s, const FrameworkSpec&) { return s.recipe_gemm_factor[i]; },
         .set = [i](double v, GpuSpec* s, FrameworkSpec*) { s->recipe_gemm_factor[i] = v; }});
  }
  out.push_back({.name = "blackwell.flash_efficiency",
                 .preset = kBlackwellGpus,
                 .key = kFlashKey,
                 .informs = "Blackwell rows (fused attention: Llama at 8K tokens, DeepSeek-V3's "
                            "and Kimi K2's MLA with 128 heads)",
                 .prior = 0.35,
                 .prior_source = "0.35: FlashAttention-2's fraction of the dense bf16 peak on the "
                                 "previous generation (Shah et al. 2024, FlashAttention-3, §1), "
                                 "the figure a kernel not yet tuned for a new tensor core reaches",
                 .lo = 0.2,
                 // Times the shape factor's 1.1, under the best published
                 // Blackwell forward, FlashAttention-4's 0.717 on B200 (physics_test).
                 .hi = 0.65,
                 .applies = [](const PublishedRun& r) { return Blackwell(r) && Flash(r); },
                 .get = FlashEfficiency,
                 .set = SetFlashEfficiency});
  out.push_back(
      {.name = "fsdp.attention_efficiency",
       .preset = "framework fsdp",
       .key = "costs.attention_efficiency",
       .informs = "FSDP1 rows with fused attention (llm-foundry's Triton kernel with ALiBi)",
       .prior = 0.53,
       .prior_source = "1/1.9: FlashAttention-2 runs 1.3-2.5x faster than FlashAttention in "
                       "Triton (Dao 2023, FlashAttention-2, §4.1), the kernel family "
                       "llm-foundry's ALiBi attention comes from",
       .lo = 0.3,
       .hi = 1.0,
       .applies = [](const PublishedRun& r) { return Runs(r, Framework::kFsdp) && Flash(r); },
       .get = [](const GpuSpec&, const FrameworkSpec& f) { return f.costs.attention_efficiency; },
       .set = [](double v, GpuSpec*, FrameworkSpec* f) { f->costs.attention_efficiency = v; }});
  out.push_back(
      {.name = "megatron.moe_host_us_per_local_expert",
       .preset = "framework megatron",
       .key = "costs.moe_host_us_per_local_expert",
       .informs = "Megatron-Core MoE rows where the experts' kernels outlast their GPU time (small "
                  "experts, small micro-batches, no full-iteration CUDA graph)",
       .prior = 48,
       .prior_source = "48: six GEMM launches per local expert (FC1 and FC2 forward, input and "
                       "weight gradients; Transformer Engine's grouped linear issues one cuBLAS "
                       "GEMM per expert) at the ~8 us per launch of host_us_per_layer's source",
       .lo = 0,
       .hi = 2000,
       .applies =
           [](const PublishedRun& r) {
             return Runs(r, Framework::kMegatron) && r.request.job.model.is_moe();
           },
       .get = [](const GpuSpec&,
                 const FrameworkSpec& f) { return f.costs.moe_host_us_per_local_expert; },
       .set = [](double v, GpuSpec*,
                 FrameworkSpec* f) { f->costs.moe_host_us_per_local_expert = v; }});
  out.push_back({.name = "a100.gemm_sustained_fraction",
                 .preset = "gpu a100-40gb, a100-80gb",
                 .key = kSustainedKey,
                 .informs = "every A100 row (GEMM time)",
                 .prior = 1.0,
                 .prior_source =
                     "1: the A100 curve as fitted to Korthikanti et al. 2022 Table 4 layer timings",
                 .lo = 0.7,
                 .hi = 1.0,
                 .applies = [](const PublishedRun& r) { return GpuIs(r, {"a100"}); },
                 .get = SustainedFraction,
                 .set = SetSustainedFraction});
  out.push_back(
      {.name = "gemm_k0",
       .preset = "gpu (every preset)",
       .key = "gemm_k0",
       .informs = "every row (GEMMs with a short inner dimension: small models, tensor-split FFNs)",
       .prior = 128,
       .prior_source =
           "128: one K tile of a CUTLASS/cuBLAS Hopper and Ampere bf16 GEMM main loop (64-128)",
       .lo = 0,
       .hi = 1024,
       .applies = [](const PublishedRun&) { return true; },
       .get = [](const GpuSpec& g, const FrameworkSpec&) { return g.gemm_k0; },
       .set = [](double v, GpuSpec* g, FrameworkSpec*) { g->gemm_k0 = v; }});
  return out;
}

// Mean over sources of the median |log error| of `rows` predicted with `values`.
double FitObjective(const std::vector<const PublishedRun*>& rows, const ConstantValues& values) {
  std::map<std::string, std::vector<double>> by_source;
  for (const PublishedRun* r : rows) {
    by_source[r->source_key].push_back(
        std::fabs(LogThroughputError(*r, PredictWithConstants(*r, values))));
  }
  if (by_source.empty()) return 0;
  double sum = 0;
  for (const auto& [src, errs] : by_source) sum += Median(errs);
  return sum / static_cast<double>(by_source.size());
}

}  // namespace

std::string GpuDie(const std::string& gpu_name) {
  std::string n = AsciiLower(gpu_name);
  if (n.rfind("gb", 0) == 0 && n.size() > 2 && std::isdigit(static_cast<unsigned char>(n[2]))) {
    n.erase(0, 1);
  }
  return n;
}

const std::vector<FittableConstant>& FittableConstants() {
  static const std::vector<FittableConstant> kConstants = MakeConstants();
  return kConstants;
}

Prediction PredictWithConstants(const PublishedRun& run, const ConstantValues& values) {
  const Job& job = run.request.job;
  topology::ClusterSpec cluster = job.cluster;
  FrameworkSpec fw = FrameworkPreset(job.training.framework);
  for (const FittableConstant& c : FittableConstants()) {
    auto it = values.find(c.name);
    if (it != values.end() && c.applies(run)) c.set(it->second, &cluster.gpu, &fw);
  }
  const CostModel cm(job.model, job.training, cluster, static_cast<int>(job.gpus), std::move(fw));
  return cm.Predict(run.request.config);
}

double LogThroughputError(const PublishedRun& run, const Prediction& p) {
  return std::log1p(std::max(-0.999, ThroughputError(run, p)));
}

FitResult FitConstants(const std::vector<const PublishedRun*>& rows, const FitOptions& options) {
  FitResult out;
  const auto& constants = FittableConstants();
  std::vector<std::vector<const PublishedRun*>> applies(constants.size());
  for (size_t i = 0; i < constants.size(); ++i) {
    std::set<std::string> sources;
    for (const PublishedRun* r : rows) {
      if (constants[i].applies(*r)) {
        applies[i].push_back(r);
        sources.insert(r->source_key);
      }
    }
    out.informed_by[constants[i].name] = {sources.begin(), sources.end()};
    out.values[constants[i].name] = constants[i].prior;
  }
  const double golden = (std::sqrt(5.0) - 1.0) / 2.0;
  for (int pass = 0; pass < options.passes; ++pass) {
    for (size_t i = 0; i < constants.size(); ++i) {
      if (applies[i].empty()) continue;
      const FittableConstant& c = constants[i];
      ConstantValues trial = out.values;
      auto f = [&](double v) {
        trial[c.name] = v;
        const double pull =
            options.prior_weight * std::fabs(std::log((v + 1e-9) / (c.prior + 1e-9)));
        return FitObjective(applies[i], trial) + pull;
      };
      double a = c.lo, b = c.hi;
      double x1 = b - golden * (b - a), x2 = a + golden * (b - a);
      double f1 = f(x1), f2 = f(x2);
      for (int it = 0; it < options.iterations; ++it) {
        if (f1 <= f2) {
          b = x2;
          x2 = x1;
          f2 = f1;
          x1 = b - golden * (b - a);
          f1 = f(x1);
        } else {
          a = x1;
          x1 = x2;
          f1 = f2;
          x2 = a + golden * (b - a);
          f2 = f(x2);
        }
      }
      // The bracket's better end, unless the current value is better still.
      const double best = f1 <= f2 ? x1 : x2;
      const double current = out.values[c.name];
      if (f(best) <= f(current)) out.values[c.name] = best;
    }
  }
  // Constants no row informed: the median of their fitted siblings.
  for (size_t i = 0; i < constants.size(); ++i) {
    if (!applies[i].empty()) continue;
    for (const std::vector<std::string>& tier : constants[i].siblings) {
      std::vector<double> fitted;
      for (const std::string& sib : tier) {
        for (size_t j = 0; j < constants.size(); ++j) {
          if (constants[j].name == sib && !applies[j].empty()) fitted.push_back(out.values[sib]);
        }
      }
      if (fitted.empty()) continue;
      out.values[constants[i].name] = Median(fitted);
      break;
    }
  }
  return out;
}

const char* HoldoutName(Holdout h) { return EnumName(h, kHoldoutNames); }

Result<Holdout> ParseHoldout(const std::string& s) {
  if (auto h = EnumFromName<Holdout>(s, kHoldoutNames)) return *h;
  return Status::InvalidArgument("--holdout: '" + s + "' is not one of " +
                                 EnumNameList(kHoldoutNames));
}

std::string GpuGeneration(const std::string& gpu_name) {
  const std::string n = AsciiLower(gpu_name);
  // Printed names ("NVIDIA H100 80GB HBM3", "GB200") and preset keys alike.
  const auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
  if (has("v100")) return "volta";
  if (has("a100") || has("a800")) return "ampere";
  if (has("h100") || has("h200") || has("h800") || has("gh200")) return "hopper";
  if (has("b200") || has("b300")) return "blackwell";
  if (has("mi250")) return "cdna2";
  if (has("mi300") || has("mi325")) return "cdna3";
  if (has("mi350") || has("mi355")) return "cdna4";
  return n;
}

std::string FrameworkFamily(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return "megatron";
    case Framework::kMegatronDeepSpeed:
    case Framework::kDeepSpeed:
      return "deepspeed";
    case Framework::kFsdp:
    case Framework::kTorchtitan:
      return "torch";
    case Framework::kAxonn:
      return "axonn";
  }
  return FrameworkName(f);
}

std::string DecadeOf(int64_t n) {
  int64_t lo = 1;
  while (lo <= n / 10) lo *= 10;
  return std::to_string(lo) + "-" + std::to_string(lo * 10 - 1);
}

std::string HoldoutKey(const PublishedRun& run, Holdout h) {
  const Job& job = run.request.job;
  switch (h) {
    case Holdout::kSource:
      return run.source_key;
    case Holdout::kModel:
      return run.request.job.model.name;
    case Holdout::kGpu:
      return run.request.job.cluster.gpu.name;
    case Holdout::kRelease:
      return run.release.empty() ? "unstated" : run.release;
    case Holdout::kGpuCount:
      return DecadeOf(std::max<int64_t>(1, job.gpus));
    case Holdout::kSeq:
      return DecadeOf(std::max<int64_t>(1, job.training.seq_len));
    case Holdout::kFramework:
      return FrameworkFamily(job.training.framework);
    case Holdout::kGeneration:
      return GpuGeneration(job.cluster.gpu.name);
  }
  return "";
}

CrossValidation LeaveOneGroupOut(const std::vector<PublishedRun>& runs, Holdout holdout,
                                 const FitOptions& options, const FitResult* all) {
  CrossValidation cv;
  cv.holdout = holdout;
  if (all != nullptr) {
    cv.all = *all;
  } else {
    std::vector<const PublishedRun*> rows;
    for (const PublishedRun& r : runs) rows.push_back(&r);
    cv.all = FitConstants(rows, options);
  }
  std::map<std::string, std::vector<const PublishedRun*>> groups;
  for (const PublishedRun& r : runs) groups[HoldoutKey(r, holdout)].push_back(&r);
  const auto& constants = FittableConstants();
  for (const auto& [key, members] : groups) {
    std::vector<const PublishedRun*> rest;
    for (const PublishedRun& r : runs) {
      if (HoldoutKey(r, holdout) != key) rest.push_back(&r);
    }
    const FitResult fit = FitConstants(rest, options);
    GroupError g;
    g.group = key;
    g.runs = static_cast<int>(members.size());
    std::vector<double> in_abs, in_signed, out_abs, out_signed;
    std::map<std::string, std::vector<double>> out_by_source;
    for (const PublishedRun* r : members) {
      const double ein = ThroughputError(*r, PredictWithConstants(*r, {}));
      const double eout = ThroughputError(*r, PredictWithConstants(*r, fit.values));
      in_abs.push_back(std::fabs(ein));
      in_signed.push_back(ein);
      out_abs.push_back(std::fabs(eout));
      out_signed.push_back(eout);
      out_by_source[r->source_key].push_back(eout);
      g.held_out_by_run[r->id] = eout;
    }
    for (const auto& [src, errs] : out_by_source) {
      std::vector<double> abs;
      for (double e : errs) abs.push_back(std::fabs(e));
      g.by_source.push_back({.source = src,
                             .runs = static_cast<int>(errs.size()),
                             .held_out_abs = Median(abs),
                             .held_out_signed = Median(errs),
                             .held_out_p90_abs = Quantile(abs, 0.9)});
    }
    g.in_sample_abs = Median(in_abs);
    g.in_sample_signed = Median(in_signed);
    g.in_sample_p90_abs = Quantile(in_abs, 0.9);
    g.held_out_abs = Median(out_abs);
    g.held_out_signed = Median(out_signed);
    g.held_out_p90_abs = Quantile(out_abs, 0.9);
    g.refit = fit.values;
    for (const FittableConstant& c : constants) {
      const bool here = std::any_of(members.begin(), members.end(),
                                    [&](const PublishedRun* r) { return c.applies(*r); });
      const bool elsewhere = std::any_of(rest.begin(), rest.end(),
                                         [&](const PublishedRun* r) { return c.applies(*r); });
      // Held out, it borrows its siblings' fitted value, or keeps its prior.
      if (here && !elsewhere) g.prior_only.push_back(c.name);
    }
    cv.groups.push_back(std::move(g));
  }
  return cv;
}

}  // namespace paratune::planner
