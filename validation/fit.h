// validation/fit.h: the hardware and framework constants that are
// fitted to calibration rows, made explicit, and the fitter that refits them.
// Each constant names the preset and key it lives in, its prior (its value
// from a public source before any calibration row is seen), its bounds and the
// rows it takes part in. `paratune validate` refits every constant without one
// group of rows (a source, a model, a GPU, a release) and predicts that group:
// the held-out error is what a stack with no calibration rows of its own can
// expect (docs/model.md, "Validation"). Pure and deterministic.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "validation/validation.h"

namespace paratune::planner {

// A constant of a GPU or framework preset that validation fits.
struct FittableConstant {
  std::string name;          // "hopper.gemm_sustained_fraction"
  std::string preset;        // where it lives: "gpu h100-sxm, h200, gh200" | "framework fsdp"
  std::string key;           // the preset key
  std::string informs;       // the rows it takes part in, in words
  double prior = 1;          // its value from a public source, before any row is fitted
  std::string prior_source;  // that source
  double lo = 0, hi = 1;     // bounds of the fit
  // Constants of the same kind on sibling parts, nearest tier first (the
  // part with the same GPU die, then the vendor's other GPUs, then every
  // other GPU). Given no row of its own, the constant takes the median of the
  // first tier's fitted siblings that had rows (a GPU with no calibration
  // borrows its die's, else its vendor's sustained fraction), and its prior
  // only when no tier had any.
  std::vector<std::vector<std::string>> siblings = {};
  // Whether the constant takes part in predicting `run`.
  std::function<bool(const PublishedRun& run)> applies;
  // The value the presets ship, for the run's GPU and framework.
  std::function<double(const topology::GpuSpec& gpu, const FrameworkSpec& fw)> get;
  // Sets the value in copies of the run's GPU and framework specs.
  std::function<void(double value, topology::GpuSpec* gpu, FrameworkSpec* fw)> set;
};

// The GPU die a preset or printed GPU name runs: a Grace-Blackwell superchip's
// GPU is the HGX part's die ("gb200" and "GB200" → "b200", "gb300" → "b300";
// the NVL72 datasheets give it higher peaks than the HGX ones, 2500 against
// 2250 dense bf16 TFLOP/s, from its power limit, which each preset's peaks
// already carry); every other name is itself, in lower case.
std::string GpuDie(const std::string& gpu_name);

// Every fitted constant, in fit order (the fitter visits them in this order).
const std::vector<FittableConstant>& FittableConstants();

// Constant name → value. A constant absent from the map keeps the preset's.
using ConstantValues = std::map<std::string, double>;

// The prediction of `run` with `values` in place of the presets' constants
// that apply to it. With an empty map: the prediction with the presets as shipped.
Prediction PredictWithConstants(const PublishedRun& run, const ConstantValues& values);

// log(predicted / measured throughput): the error the fitter minimises.
double LogThroughputError(const PublishedRun& run, const Prediction& p);

struct FitOptions {
  int passes = 2;       // coordinate-descent sweeps over the constants
  int iterations = 16;  // golden-section steps per constant and sweep
  // Weight of |log(value / prior)| in the objective: a weak pull towards the
  // public figure, so a constant that the rows barely constrain stays near it.
  double prior_weight = 0.01;
};

struct FitResult {
  // Every constant: fitted, or its prior where no row it applies to was given.
  ConstantValues values;
  // Constant → the sources (PublishedRun::source_key) of the rows it applies to.
  std::map<std::string, std::vector<std::string>> informed_by;
};

// Fits every constant to `rows`: coordinate descent from the priors, each
// constant in turn by golden-section search over [lo, hi] minimising the mean
// over sources of the median |log error| of the rows it applies to (every
// source one vote, however many rows it has) plus the prior pull.
FitResult FitConstants(const std::vector<const PublishedRun*>& rows,
                       const FitOptions& options = {});

// How rows are grouped for leave-one-group-out: by source, model, GPU preset
// or release (rows that state none group as "unstated"), or along an axis the
// model must generalise across: the GPU count's decade ("1-9", "10-99", ...),
// the sequence length's decade ("1000-9999", ...), the framework family
// (FrameworkFamily) or the GPU generation (GpuGeneration).
enum class Holdout : uint8_t {
  kSource = 0,
  kModel,
  kGpu,
  kRelease,
  kGpuCount,
  kSeq,
  kFramework,
  kGeneration,
};
// "source" | "model" | "gpu" | "release" | "gpu-count" | "seq" | "framework" | "generation"
const char* HoldoutName(Holdout h);
Result<Holdout> ParseHoldout(const std::string& s);
std::string HoldoutKey(const PublishedRun& run, Holdout h);
// The axes of leave-one-axis-out, in report order.
inline constexpr Holdout kAxes[] = {Holdout::kGpuCount, Holdout::kSeq, Holdout::kFramework,
                                    Holdout::kGeneration};

// The architecture generation of a GPU preset or printed name: "volta",
// "ampere", "hopper", "blackwell" (NVIDIA), "cdna2", "cdna3", "cdna4" (AMD);
// the name itself, lower-cased, when it is none of these.
std::string GpuGeneration(const std::string& gpu_name);
// The family of a framework: "megatron" (Megatron-LM/Core, NeMo, Megatron-
// Bridge), "deepspeed" (DeepSpeed and Megatron-DeepSpeed), "torch" (PyTorch
// FSDP, torchtitan) or "axonn".
std::string FrameworkFamily(Framework f);
// The decade [10^k, 10^(k+1)) that holds n ≥ 1, written "10^k-(10^(k+1)-1)".
std::string DecadeOf(int64_t n);

// One source's rows inside a held-out group (a GPU held out across files).
struct SourceError {
  std::string source;
  int runs = 0;
  double held_out_abs = 0, held_out_signed = 0;  // medians refitted without the group
  double held_out_p90_abs = 0;                   // p90 of |error| refitted without the group
};

struct GroupError {
  std::string group;
  int runs = 0;
  double in_sample_abs = 0, in_sample_signed = 0;  // medians with the presets as shipped
  double held_out_abs = 0, held_out_signed = 0;    // medians refitted without the group
  double in_sample_p90_abs = 0, held_out_p90_abs = 0;  // p90 of |error|, the same two ways
  // Constants that apply to the group but to no row outside it: held out,
  // they take their fitted siblings' median (FittableConstant::siblings), else
  // keep their prior.
  std::vector<std::string> prior_only;
  // The constants as refitted without the group (what predicted it).
  ConstantValues refit;
  // The held-out errors per source, sorted by source; one entry when the group
  // is one source.
  std::vector<SourceError> by_source;
  // Each row's held-out throughput error, by run id.
  std::map<std::string, double> held_out_by_run;
};

struct CrossValidation {
  Holdout holdout = Holdout::kSource;
  std::vector<GroupError> groups;  // sorted by group name
  FitResult all;                   // the fit on every row (compare with the presets)
};

// Leave-one-group-out: for every group, FitConstants on the other rows and
// predict the group's rows with the result; errors are throughput errors
// (predicted / measured − 1).
// `all`: the fit on every row when the caller already has it (another
// holdout's CrossValidation::all), so it is not fitted again.
CrossValidation LeaveOneGroupOut(const std::vector<PublishedRun>& runs, Holdout holdout,
                                 const FitOptions& options = {}, const FitResult* all = nullptr);

}  // namespace paratune::planner
