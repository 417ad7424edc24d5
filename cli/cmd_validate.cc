// `paratune validate`: predictions against published measured runs.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/validate_beyond.h"
#include "cli/validate_collectives.h"
#include "cli/validate_memory.h"
#include "common/median.h"
#include "common/strings.h"
#include "validation/collective_tables.h"
#include "validation/fit.h"
#include "validation/goodput_checks.h"
#include "validation/beyond_runs.h"
#include "validation/memory_runs.h"
#include "validation/picks.h"
#include "validation/seeds.h"
#include "validation/validation.h"

namespace paratune::cli {
namespace {

constexpr const char* kValidateHelp =
    R"(usage: paratune validate [--calibration FILE [--cluster dgx-a100-80gb]] [--runs FILE]
                         [--holdout source|model|gpu|release|gpu-count|seq|framework|generation]
                         [--axes] [--picks] [--seeds] [--memory FILE] [--goodput FILE]
                         [--collectives FILE] [--beyond FILE] [--format table|json]

Predicts published measured runs with the built-in presets and no per-run
knobs, and prints predicted vs measured with the error, then per source the
median |error| and the median signed error of throughput (positive =
optimistic: predicted faster than measured), in-sample and held out.

Held out: the hardware and framework constants that are fitted to calibration
rows (listed after the table, each with its preset key, its prior from a
public source and the sources that inform it) are refitted without one group
of rows, and that group is predicted with them. This is the error to expect
on a stack or model with no calibration rows of its own. A constant that
applies to the held-out group and to no other row (the table's last column)
takes its fitted siblings' value (a GPU's GEMM fraction: the part with the
same die, as GB200 for B200, else its vendor's median), else keeps its prior.

  --calibration FILE  Korthikanti-style rows (shared/calibration/korthikanti2022.json):
                      every row on one cluster preset (--cluster)
  --runs FILE         public runs (shared/calibration/public_runs.json): each row on
                      its GPU's preset, with its source's framework (llm-foundry →
                      fsdp; Megatron-LM, NeMo, MLPerf → megatron); or the
                      2026 fleet (shared/calibration/fleet_runs.json: Megatron-
                      Bridge's tables, MLPerf v5.1 on MI350X/MI355X), read by its
                      record_type: each row on its GPU's preset with its recipe
                      (FP8-CS, MXFP8, NVFP4; Megatron-FSDP, CPU offload, CUDA
                      graphs); rows the model cannot express are listed as not
                      covered, and the output adds the coverage and the median
                      |error| with each GPU and each release held out of the
                      fitted hardware constants; or the MoE runs
                      (shared/calibration/moe_runs.json, recognised by its rows'
                      experts): Megatron-Core with each row's EP/ETP, dispatcher
                      and overlap; rows whose GPU has no preset are listed as not
                      covered
                      --runs may be given several times (and beside
                      --calibration): the constants are then fitted jointly
                      to every file's rows and held out by group across them
  --cluster C         the preset for --calibration rows (default dgx-a100-80gb)
  --holdout G         how rows are grouped for the held-out refit: source
                      (default), model, gpu or release, or an axis: gpu-count
                      (its decade: 1-9, 10-99, ...), seq (the sequence
                      length's decade), framework (family: megatron,
                      deepspeed, torch, axonn) or generation (volta, ampere,
                      hopper, blackwell, cdna2-4); a group whose rows come
                      from several sources (a GPU held out across files) also
                      prints its held-out error per source. The table gives
                      the p90 of |error| beside the median, and the rows
                      with sharded parameters (ZeRO-3, FSDP) by GPU-count
                      decade, in-sample and held out by this grouping
  --axes              also leave one axis out: for each of gpu-count, seq,
                      framework and generation, every bin refitted without
                      its rows and predicted (median, p90 and signed error
                      per bin; bins under 5 rows are shown in brackets and
                      left out of the axis's worst bin)
  --picks             the pick check: every question the rows answered by
                      hand-tuning (same model, GPUs, batch, sequence, precision,
                      framework; a sweep's fastest row answers it) asked of the
                      planner; prints its pick's predicted throughput over the
                      best measured (median and worst; > 1 = the pick promises
                      more than the experts got), and per GPU over the fastest
                      any row measured for the same model, length, GPU and
                      precision
  --seeds             the headline results of the papers paratune is built on
                      (AxoNN vs Megatron-LM, FPDT's 2M tokens, ZeRO++ on slow and
                      fast networks, Ulysses vs Megatron-SP), each beside
                      paratune's answer to the same question: the configuration
                      each side used, the figures, what was assumed where the
                      paper is silent, and whether paratune lands in the band
                      the result defines (json: schema paratune.seeds/v1)
  --memory FILE       measured peak memory (shared/calibration/memory_runs.json;
                      also recognised when given as --calibration): each row
                      predicted at zero headroom on its framework's preset and
                      compared on the metric it reports (max_allocated,
                      max_reserved, an unqualified peak; the reported rank's
                      pipeline stage: Megatron's last rank, rank 0, or the
                      largest), OOM rows by the verdict alone (reserved peak
                      vs capacity); then per framework and overall the median
                      |error|, median signed error and 90th-percentile |error|,
                      the rows that ran but are predicted not to fit, and the
                      rows that could not be mapped, with the reason
                      (json: schema paratune.memory_validation/v1)
  --goodput FILE      published failure counts, effective-training figures and
                      checkpoint sizes (validation/data/goodput_runs.json: Llama 3
                      405B's "higher than 90% effective training time" from its
                      466 interruptions in 54 days, BLOOM's 329GB / 2.3TB
                      checkpoint), each beside the goodput model's figure (the
                      one `plan --tokens` uses), whether it lies within the
                      published precision, and what was assumed where the
                      source is silent (json: schema paratune.goodput_checks/v1)
  --collectives FILE  measured collective tables (shared/calibration/nccl_tables.json:
                      nccl-tests and rccl-tests printouts, A100 to GB300 and
                      MI300X/MI355X, 4 to 192 ranks; also recognised when given
                      as --calibration): every row's size priced on the
                      table's system (its GPU's cluster preset with the
                      table's nodes, NICs and transport, NCCL_ALGO where the
                      table forced one) by NCCL's tuner model, predicted vs
                      measured time per table with the algorithms the tuner
                      runs, then per system, collective, rank count and
                      message size the median |error|, median signed error
                      and p90, each system held out (the pipeline-fill share
                      and the InfiniBand and EFA hop latencies, the constants
                      fitted to the file, refitted without it), and the
                      tables not asked with the reason (DeepEP kernels,
                      prose summaries, TCP-socket transports)
                      (json: schema paratune.collective_validation/v4, every row)
  --beyond FILE       measured throughput of networks that are not transformer
                      stacks (shared/calibration/beyond_runs.json: MLPerf
                      Training and HPC runs of ResNet-50, RetinaNet, Stable
                      Diffusion's U-Net, FLUX.1, the 3D U-Net and CosmoFlow;
                      also recognised as --calibration or as the only --runs):
                      each row's network preset on its GPU's cluster preset with
                      the row's GPUs, data and spatial parallelism and batch,
                      predicted vs measured samples per second, then per
                      benchmark, source (round), GPU generation, GPU-count
                      decade and framework the median |error|, median signed
                      error and p90;
                      rows left out are counted by reason (no preset for the
                      benchmark or the GPU)
                      (json: schema paratune.beyond_validation/v1, every row)
  --format F          table (default) | json (schema paratune.validation/v1)

exit codes: 0 ok (also when a seed or goodput figure is not reproduced: the
            table says so), 2 bad flags or an unreadable file

Mapping rules and assumptions: docs/model.md, "Validation".
)";

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

int PrintSeeds(const std::string& format, Io io) {
  auto seeds = planner::RunSeeds();
  if (!seeds.ok()) return UsageError(io, "validate", seeds.status());
  if (format == "json") {
    io.out << planner::SeedsToJson(*seeds).dump(2) << "\n";
    return kExitOk;
  }
  int reproduced = 0;
  for (const planner::SeedResult& s : *seeds) {
    reproduced += s.reproduced ? 1 : 0;
    io.out << "== " << s.title << "  [" << (s.reproduced ? "reproduced" : "NOT reproduced") << "]\n"
           << "   source:    " << s.source << "\n"
           << "   published: " << s.published << "\n"
           << "   criterion: " << s.criterion << "\n";
    for (const planner::SeedSide& d : s.sides) {
      io.out << "   - " << d.label << " (" << d.framework << "): "
             << (d.config.empty() ? "nothing fits" : d.config);
      if (d.iteration_s > 0) {
        io.out << ", " << FormatFixed(d.iteration_s, 3) << " s, HFU " << FormatFixed(100 * d.hfu, 1)
               << " % (executed; " << FormatFixed(100 * d.counted_hfu, 1)
               << " % as the papers count it), MFU " << FormatFixed(100 * d.mfu, 1) << " %";
      }
      if (d.max_seq > 0) io.out << ", longest sequence " << d.max_seq;
      if (!d.binding.empty()) io.out << " (bound by " << d.binding << ")";
      io.out << "\n";
    }
    for (const std::string& f : s.figures) io.out << "   paratune:  " << f << "\n";
    for (const std::string& a : s.assumed) io.out << "   assumed:   " << a << "\n";
    io.out << "\n";
  }
  io.out << reproduced << " of " << seeds->size() << " seed results reproduced (docs/model.md, Seed papers)\n";
  return kExitOk;
}

// `--goodput FILE`: each published goodput figure beside the model's, with
// what the check assumed (validation/goodput_checks.h).
int PrintGoodputChecks(const Json& doc, const std::string& format, Io io) {
  auto checks = planner::CheckGoodputRuns(doc);
  if (!checks.ok()) return UsageError(io, "validate", checks.status().WithContext("--goodput"));
  if (format == "json") {
    io.out << planner::GoodputChecksToJson(*checks).dump(2) << "\n";
    return kExitOk;
  }
  int within = 0;
  for (const planner::GoodputCheck& c : *checks) {
    within += c.within ? 1 : 0;
    io.out << "== " << c.id << "  [" << (c.within ? "reproduced" : "NOT reproduced") << "]\n"
           << "   source:    " << c.source << "\n"
           << "   published: " << c.published << "\n"
           << "   paratune:  " << c.paratune << "\n";
    for (const std::string& a : c.assumed) io.out << "   assumed:   " << a << "\n";
    io.out << "\n";
  }
  io.out << within << " of " << checks->size()
         << " published goodput figures reproduced (docs/model.md, Time to train)\n";
  return kExitOk;
}

// The rows of the files given (--calibration, read once by the caller; --runs,
// repeatable), each a prediction request.
struct LoadedRuns {
  std::vector<planner::PublishedRun> runs;
  bool fleet = false;                    // fleet_runs.json among the files
  std::vector<std::string> not_covered;  // MoE rows that cannot be mapped, with the reason
  std::optional<Json> beyond;            // a beyond_runs.json document given alone
};

Result<LoadedRuns> LoadRuns(const Flags& flags, const std::optional<Json>& cal_doc,
                            std::istream& in) {
  LoadedRuns out;
  std::vector<planner::PublishedRun>& runs = out.runs;
  if (cal_doc) {
    auto r = planner::PublishedRunsFromCalibration(*cal_doc, flags.GetOr("--cluster", "dgx-a100-80gb"));
    if (!r.ok()) return r.status();
    runs.insert(runs.end(), r->begin(), r->end());
  }
  // --runs may be given several times: one joint fit over every file's rows.
  for (const std::string& runs_file : flags.GetAll("--runs")) {
    auto doc = LoadJsonArg(runs_file, "--runs", in);
    if (!doc.ok()) return doc.status();
    // Networks beyond the transformer are priced by another model: their
    // file is reported on its own.
    if (planner::IsBeyondRunsDocument(*doc)) {
      if (cal_doc || flags.GetAll("--runs").size() > 1) {
        return Status::InvalidArgument("--runs " + runs_file +
                                       ": beyond_runs.json rows are networks, not transformer runs; give "
                                       "it on its own (--runs FILE or --beyond FILE)");
      }
      out.beyond = std::move(*doc);
      return out;
    }
    // The MoE runs: rows with a record_type whose model has experts.
    bool moe_doc = false;
    if (doc->is_array()) {
      for (const Json& row : *doc) {
        if (row.is_object() && row.contains("record_type") && row.contains("model") &&
            row["model"].is_object() && row["model"].contains("num_experts") &&
            row["model"]["num_experts"].is_number() && row["model"]["num_experts"].get<double>() > 0) {
          moe_doc = true;
          break;
        }
      }
    }
    // fleet_runs.json rows are records of type "run"; public_runs.json's are
    // of row_type "throughput".
    const bool fleet_doc = !moe_doc && doc->is_array() && !doc->empty() &&
                           (*doc)[0].is_object() && (*doc)[0].value("record_type", "") == "run";
    out.fleet = out.fleet || fleet_doc;
    auto r = moe_doc     ? planner::PublishedRunsFromMoeRuns(*doc, &out.not_covered)
             : fleet_doc ? planner::PublishedRunsFromFleetRuns(*doc)
                     : planner::PublishedRunsFromPublicRuns(*doc);
    if (!r.ok()) return r.status();
    runs.insert(runs.end(), r->begin(), r->end());
  }
  return out;
}

// Every row predicted: the document's `runs` and what the summaries read.
struct Tally {
  OrderedJson rows = OrderedJson::array();
  double sum_abs = 0, max_abs = 0;
  int n = 0, unfit = 0, over_headroom = 0;
  double headroom = planner::TrainingSpec{}.headroom;  // the rows keep the planner's default
  std::vector<planner::PublishedRun> covered;
  std::map<std::string, std::vector<double>> by_source;
  std::map<std::string, std::vector<double>> by_framework_gpu;  // signed log errors
};

// Predicts every row, a table line each when `table`. A row the model cannot
// express is an error naming it, except a fleet row (reported not covered).
Result<Tally> PredictRows(const LoadedRuns& loaded, bool table, std::ostream& os) {
  Tally t;
  if (table) {
    os << std::left << std::setw(46) << "run" << std::setw(12) << "framework" << std::right
           << std::setw(6) << "gpus" << std::setw(13) << "measured" << std::setw(13) << "predicted"
           << std::setw(9) << "error" << "  metric\n";
  }
  for (const auto& run : loaded.runs) {
    const auto& job = run.request.job;
    planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
    if (Status s = planner::ValidateConfig(cm, run.request.config); !s.ok()) {
      // A fleet row whose configuration the model cannot express is reported
      // as not covered; every other source must map whole.
      if (!loaded.fleet) return s.WithContext(run.id);
      OrderedJson r;
      r["id"] = run.id;
      r["source"] = run.source_key;
      r["gpu"] = job.cluster.gpu.name;
      r["covered"] = false;
      r["why"] = s.message();
      t.rows.push_back(r);
      if (table) {
        os << std::left << std::setw(46) << run.id.substr(0, 45) << "  not covered: " << s.message()
               << "\n";
      }
      continue;
    }
    t.covered.push_back(run);
    const planner::Prediction p = cm.Predict(run.request.config);
    const double err = planner::ThroughputError(run, p);
    t.sum_abs += std::fabs(err);
    t.max_abs = std::max(t.max_abs, std::fabs(err));
    ++t.n;
    // Every row ran: whether its peak fits the device is the memory model's
    // test (the planner's fragmentation slack is a margin, not a limit).
    const bool fits = p.memory.PeakFits();
    t.unfit += !fits;
    // What `plan` would say of the same configuration: reserved memory within
    // the capacity less the planner's headroom (the one default every entry
    // point keeps).
    const bool plan_fits = p.memory.Verdict() == planner::Reason::kOk && fits;
    t.over_headroom += !plan_fits;
    t.headroom = job.training.headroom;
    t.by_source[run.source_key].push_back(err);
    t.by_framework_gpu[std::string(planner::FrameworkName(job.training.framework)) + " " +
                     job.cluster.gpu.name].push_back(std::log1p(err));
    const char* metric = run.measured_tokens_per_s > 0 ? "tokens/s"
                         : run.measured_model_tflops > 0 ? "model TFLOP/s/GPU" : "iteration s";
    const double measured = run.measured_tokens_per_s > 0 ? run.measured_tokens_per_s
                            : run.measured_model_tflops > 0 ? run.measured_model_tflops
                                                            : run.measured_iteration_s;
    const double predicted = run.measured_tokens_per_s > 0 ? p.tokens_per_s
                             : run.measured_model_tflops > 0 ? p.model_tflops_per_gpu
                                                             : p.iteration_time_s;
    OrderedJson r;
    r["id"] = run.id;
    r["source"] = run.source_key;
    r["framework"] = planner::FrameworkName(job.training.framework);
    r["gpu"] = job.cluster.gpu.name;
    r["gpus"] = job.gpus;
    r["config"] = planner::ConfigToString(run.request.config);
    r["sharded_parameters"] = run.request.config.zero >= 3 || run.request.config.gz > 1;
    r["metric"] = metric;
    r["measured"] = measured;
    r["predicted"] = predicted;
    r["error"] = err;
    r["measured_s"] = run.measured_iteration_s;
    r["predicted_s"] = p.iteration_time_s;
    r["measured_mfu"] = run.measured_mfu;
    r["predicted_mfu"] = p.mfu;
    r["fits"] = fits;
    r["fits_with_headroom"] = plan_fits;
    r["peak_allocated_GiB"] = p.memory.peak_allocated_GiB;
    r["reserved_GiB"] = p.memory.reserved_GiB;
    r["assumed"] = run.assumed;
    // The same question as a `paratune predict --request` document.
    OrderedJson req;
    req["schema"] = "paratune.predict_request/v1";
    req["model"] = OrderedJson::parse(planner::ModelSpecToJson(job.model).dump());
    req["cluster"] = job.cluster.name;
    req["gpus"] = job.gpus;
    req["training"] = planner::TrainingToJson(job.training);
    req["config"] = planner::ConfigToJson(run.request.config);
    r["request"] = req;
    t.rows.push_back(r);
    if (table) {
      os << std::left << std::setw(46) << run.id.substr(0, 45) << std::setw(12)
             << planner::FrameworkName(job.training.framework) << std::right << std::setw(6) << job.gpus
             << std::setw(13) << FormatFixed(measured, 2) << std::setw(13) << FormatFixed(predicted, 2)
             << std::setw(8) << FormatFixed(100 * err, 1) << "%  " << metric
             << (fits ? "" : "  (predicted not to fit)")
             << (fits && !plan_fits ? "  (over the planner's headroom)" : "") << "\n";
    }
  }
  return t;
}

// Per source: the median |error| and signed error of throughput.
OrderedJson SourcesToJson(const Tally& t) {
  OrderedJson sources = OrderedJson::array();
  for (const auto& [src, errs] : t.by_source) {
    std::vector<double> abs;
    for (double e : errs) abs.push_back(std::fabs(e));
    OrderedJson s;
    s["source"] = src;
    s["runs"] = errs.size();
    s["median_abs_error"] = Median(abs);
    s["median_signed_error"] = Median(errs);
    sources.push_back(s);
  }
  return sources;
}

// The rows whose parameters are sharded (ZeRO-3; FSDP and AxoNN's depth, gz)
// by GPU-count decade, in-sample and held out by the `cv` grouping: the
// gathers and reduce-scatters of sharded parameters grow with the GPU count.
OrderedJson ShardedByDecade(const OrderedJson& rows, const planner::CrossValidation& cv) {
  std::map<std::string, double> held_out;
  for (const planner::GroupError& g : cv.groups) {
    held_out.insert(g.held_out_by_run.begin(), g.held_out_by_run.end());
  }
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> bins;  // |e| in, out
  for (const auto& r : rows) {
    if (!r.value("sharded_parameters", false)) continue;  // not covered rows have none
    auto& [in, out] = bins[planner::DecadeOf(r["gpus"].get<int64_t>())];
    in.push_back(std::fabs(r["error"].get<double>()));
    const auto it = held_out.find(r["id"].get<std::string>());
    if (it != held_out.end()) out.push_back(std::fabs(it->second));
  }
  OrderedJson all = OrderedJson::array();
  for (const auto& [bin, errors] : bins) {
    OrderedJson b;
    b["bin"] = bin;
    b["runs"] = errors.first.size();
    b["in_sample_median_abs_error"] = Median(errors.first);
    b["in_sample_p90_abs_error"] = Quantile(errors.first, 0.9);
    b["held_out_median_abs_error"] = Median(errors.second);
    b["held_out_p90_abs_error"] = Quantile(errors.second, 0.9);
    all.push_back(b);
  }
  return all;
}

// Held out: the fitted constants refitted without each group.
OrderedJson HeldOutToJson(const planner::CrossValidation& cv) {
  OrderedJson held = OrderedJson::array();
  for (const planner::GroupError& g : cv.groups) {
    OrderedJson h;
    h["group"] = g.group;
    h["runs"] = g.runs;
    h["in_sample_median_abs_error"] = g.in_sample_abs;
    h["in_sample_median_signed_error"] = g.in_sample_signed;
    h["held_out_median_abs_error"] = g.held_out_abs;
    h["held_out_median_signed_error"] = g.held_out_signed;
    h["in_sample_p90_abs_error"] = g.in_sample_p90_abs;
    h["held_out_p90_abs_error"] = g.held_out_p90_abs;
    h["prior_only"] = g.prior_only;
    OrderedJson refit;
    for (const planner::FittableConstant& c : planner::FittableConstants()) {
      auto it = g.refit.find(c.name);
      if (it != g.refit.end()) refit[c.name] = it->second;
    }
    h["refit_constants"] = refit;
    OrderedJson split = OrderedJson::array();
    for (const planner::SourceError& e : g.by_source) {
      OrderedJson x;
      x["source"] = e.source;
      x["runs"] = e.runs;
      x["held_out_median_abs_error"] = e.held_out_abs;
      x["held_out_median_signed_error"] = e.held_out_signed;
      x["held_out_p90_abs_error"] = e.held_out_p90_abs;
      split.push_back(x);
    }
    h["by_source"] = split;
    held.push_back(h);
  }
  return held;
}

// Bins with fewer rows than this print in brackets and stay out of the
// axis's worst bin: a median of fewer rows says little.
constexpr int kAxisBinMinRows = 5;

// Leave one axis out: per axis, each bin's held-out errors, and the worst
// held-out median |error| among bins of at least kAxisBinMinRows rows.
OrderedJson AxesToJson(const std::vector<planner::CrossValidation>& axes) {
  OrderedJson all = OrderedJson::array();
  for (const planner::CrossValidation& cv : axes) {
    OrderedJson a;
    a["axis"] = planner::HoldoutName(cv.holdout);
    OrderedJson bins = OrderedJson::array();
    double worst = 0;
    std::string worst_bin;
    for (const planner::GroupError& g : cv.groups) {
      OrderedJson b;
      b["bin"] = g.group;
      b["runs"] = g.runs;
      b["in_sample_median_abs_error"] = g.in_sample_abs;
      b["held_out_median_abs_error"] = g.held_out_abs;
      b["held_out_p90_abs_error"] = g.held_out_p90_abs;
      b["held_out_median_signed_error"] = g.held_out_signed;
      b["prior_only"] = g.prior_only;
      bins.push_back(b);
      if (g.runs >= kAxisBinMinRows && g.held_out_abs >= worst) {
        worst = g.held_out_abs;
        worst_bin = g.group;
      }
    }
    a["bins"] = bins;
    a["min_rows"] = kAxisBinMinRows;
    a["worst_bin"] = worst_bin;
    a["worst_held_out_median_abs_error"] = worst;
    all.push_back(a);
  }
  return all;
}

// Each fitted constant: shipped, refitted on every row, its prior, and the
// sources that inform it.
OrderedJson ConstantsToJson(const std::vector<planner::PublishedRun>& runs,
                            const planner::CrossValidation& cv) {
  OrderedJson constants = OrderedJson::array();
  for (const planner::FittableConstant& c : planner::FittableConstants()) {
    OrderedJson k;
    k["name"] = c.name;
    k["preset"] = c.preset;
    k["key"] = c.key;
    k["informs"] = c.informs;
    // The shipped value, read from the first row the constant applies to.
    for (const auto& run : runs) {
      if (!c.applies(run)) continue;
      k["shipped"] = c.get(run.request.job.cluster.gpu,
                           planner::FrameworkPreset(run.request.job.training.framework));
      break;
    }
    k["fitted_to_all_rows"] = cv.all.values.at(c.name);
    k["prior"] = c.prior;
    k["prior_source"] = c.prior_source;
    const auto& by = cv.all.informed_by.at(c.name);
    k["informed_by"] = by;
    k["single_source"] = by.size() == 1;
    constants.push_back(k);
  }
  return constants;
}

// The residual spread per framework × GPU: the uncertainty band the
// framework presets carry (docs/model.md, Ranking).
OrderedJson SpreadToJson(const Tally& t) {
  OrderedJson spread = OrderedJson::array();
  for (const auto& [key, logs] : t.by_framework_gpu) {
    double mean = 0;
    for (double v : logs) mean += v;
    mean /= static_cast<double>(logs.size());
    double var = 0;
    for (double v : logs) var += (v - mean) * (v - mean);
    OrderedJson s;
    s["framework_gpu"] = key;
    s["runs"] = logs.size();
    s["rms_error"] = std::sqrt(var / static_cast<double>(logs.size()) + mean * mean);
    spread.push_back(s);
  }
  return spread;
}

// The fleet's hardware constants refitted without each GPU and without each
// release, predicting the rows held out (docs/model.md, Validation).
OrderedJson FleetToJson(const std::vector<planner::PublishedRun>& runs, const Tally& t) {
  std::vector<double> all_abs;
  for (const auto& [src, errs] : t.by_source) {
    for (double e : errs) all_abs.push_back(std::fabs(e));
  }
  OrderedJson f;
  f["runs"] = static_cast<int>(runs.size());
  f["covered"] = t.n;
  f["coverage"] = runs.empty() ? 0.0 : static_cast<double>(t.n) / static_cast<double>(runs.size());
  f["median_abs_error"] = Median(all_abs);
  for (bool by_gpu : {true, false}) {
    OrderedJson groups = OrderedJson::array();
    std::vector<double> pooled;
    for (const planner::HeldOutGroup& g : planner::LeaveOneOut(t.covered, by_gpu)) {
      std::vector<double> abs;
      for (double e : g.errors) abs.push_back(std::fabs(e));
      pooled.insert(pooled.end(), abs.begin(), abs.end());
      OrderedJson gj;
      gj["group"] = g.group;
      gj["runs"] = g.errors.size();
      gj["median_abs_error"] = Median(abs);
      gj["median_signed_error"] = Median(g.errors);
      groups.push_back(gj);
    }
    OrderedJson lo;
    lo["median_abs_error"] = Median(pooled);
    lo["groups"] = groups;
    f[by_gpu ? "leave_one_gpu_out" : "leave_one_release_out"] = lo;
  }
  return f;
}

// The median of pick ratios (pick's predicted / best measured) and, where
// another row measured the same question on the same GPU, per GPU over it.
struct PickRatios {
  std::vector<double> ratios, same_gpu;
};
PickRatios RatiosOf(const std::vector<planner::PickCheck>& picks) {
  PickRatios r;
  for (const auto& p : picks) {
    if (p.ratio > 0) r.ratios.push_back(p.ratio);
    if (p.ratio_to_best_same_gpu > 0) r.same_gpu.push_back(p.ratio_to_best_same_gpu);
  }
  return r;
}

// The leave-one-axis-out table (AxesToJson): a line per bin, then the axis's
// worst bin of at least kAxisBinMinRows rows.
void PrintAxes(const OrderedJson& axes, std::ostream& os) {
  os << "\nleave one axis out (constants refitted without the bin; + = optimistic; "
        "[bins under "
     << kAxisBinMinRows << " rows]):\n";
  os << std::left << std::setw(12) << "axis" << std::setw(24) << "bin" << std::right
     << std::setw(6) << "runs" << std::setw(16) << "in-sample |e|" << std::setw(16)
     << "held-out |e|" << std::setw(14) << "held-out p90" << std::setw(16) << "held-out signed"
     << "\n";
  for (const auto& a : axes) {
    const std::string axis = a["axis"].get<std::string>();
    for (const auto& b : a["bins"]) {
      const bool few = b["runs"].get<int>() < kAxisBinMinRows;
      const std::string bin = b["bin"].get<std::string>();
      os << std::left << std::setw(12) << axis << std::setw(24)
         << (few ? "[" + bin + "]" : bin).substr(0, 23) << std::right << std::setw(6)
         << b["runs"].get<int>() << std::setw(15)
         << FormatFixed(100 * b["in_sample_median_abs_error"].get<double>(), 1) << "%"
         << std::setw(15) << FormatFixed(100 * b["held_out_median_abs_error"].get<double>(), 1)
         << "%" << std::setw(13) << FormatFixed(100 * b["held_out_p90_abs_error"].get<double>(), 1)
         << "%" << std::setw(15)
         << FormatFixed(100 * b["held_out_median_signed_error"].get<double>(), 1) << "%\n";
    }
    os << "  " << axis << ": worst bin " << a["worst_bin"].get<std::string>() << " at "
       << FormatFixed(100 * a["worst_held_out_median_abs_error"].get<double>(), 1)
       << " % held-out median |error|\n";
  }
}

// The table form of the document `out` (after the per-row lines).
void PrintTables(const OrderedJson& out, const planner::CrossValidation& cv, planner::Holdout holdout,
                 const std::vector<planner::PickCheck>* picks, const LoadedRuns& loaded,
                 const Tally& t, std::ostream& os) {
  const PickRatios pr = picks != nullptr ? RatiosOf(*picks) : PickRatios{};
  const std::vector<double>& ratios = pr.ratios;
  const std::vector<double>& same_gpu = pr.same_gpu;
  os << "\nper source (throughput error; + = optimistic):\n";
  os << std::left << std::setw(36) << "source" << std::right << std::setw(6) << "runs" << std::setw(16)
         << "median |error|" << std::setw(16) << "median signed" << "\n";
  for (const auto& s : out["sources"]) {
    os << std::left << std::setw(36) << s["source"].get<std::string>() << std::right << std::setw(6)
           << s["runs"].get<int>() << std::setw(15) << FormatFixed(100 * s["median_abs_error"].get<double>(), 1)
           << "%" << std::setw(15) << FormatFixed(100 * s["median_signed_error"].get<double>(), 1) << "%\n";
  }
  os << "\nheld out by " << planner::HoldoutName(holdout)
         << " (constants refitted without the group; + = optimistic):\n";
  os << std::left << std::setw(36) << planner::HoldoutName(holdout) << std::right
         << std::setw(6) << "runs" << std::setw(16) << "in-sample |e|" << std::setw(16)
         << "held-out |e|" << std::setw(14) << "held-out p90" << std::setw(16)
         << "held-out signed" << "  kept their prior\n";
  for (const planner::GroupError& g : cv.groups) {
    os << std::left << std::setw(36) << g.group.substr(0, 35) << std::right << std::setw(6)
           << g.runs << std::setw(15) << FormatFixed(100 * g.in_sample_abs, 1) << "%"
           << std::setw(15) << FormatFixed(100 * g.held_out_abs, 1) << "%" << std::setw(13)
           << FormatFixed(100 * g.held_out_p90_abs, 1) << "%" << std::setw(15)
           << FormatFixed(100 * g.held_out_signed, 1) << "%  " << Join(g.prior_only, ", ") << "\n";
    // A group that spans sources (a GPU held out across files) splits by source.
    if (g.by_source.size() < 2) continue;
    for (const planner::SourceError& e : g.by_source) {
      os << std::left << std::setw(36) << ("  " + e.source).substr(0, 35) << std::right
             << std::setw(6) << e.runs << std::setw(16) << "" << std::setw(15)
             << FormatFixed(100 * e.held_out_abs, 1) << "%" << std::setw(13)
             << FormatFixed(100 * e.held_out_p90_abs, 1) << "%" << std::setw(15)
             << FormatFixed(100 * e.held_out_signed, 1) << "%\n";
    }
  }
  os << "\nsharded parameters (ZeRO-3, FSDP, AxoNN depth) by GPU-count decade (held out by "
     << planner::HoldoutName(holdout) << "):\n";
  if (out["sharded_by_gpu_decade"].empty()) {
    os << "  no such rows\n";
  } else {
    os << std::left << std::setw(36) << "GPUs" << std::right << std::setw(6) << "runs"
       << std::setw(16) << "in-sample |e|" << std::setw(16) << "in-sample p90" << std::setw(16)
       << "held-out |e|" << std::setw(14) << "held-out p90" << "\n";
  }
  for (const auto& b : out["sharded_by_gpu_decade"]) {
    os << std::left << std::setw(36) << b["bin"].get<std::string>() << std::right << std::setw(6)
       << b["runs"].get<int>() << std::setw(15)
       << FormatFixed(100 * b["in_sample_median_abs_error"].get<double>(), 1) << "%"
       << std::setw(15) << FormatFixed(100 * b["in_sample_p90_abs_error"].get<double>(), 1) << "%"
       << std::setw(15) << FormatFixed(100 * b["held_out_median_abs_error"].get<double>(), 1)
       << "%" << std::setw(13) << FormatFixed(100 * b["held_out_p90_abs_error"].get<double>(), 1)
       << "%\n";
  }
  if (out.contains("leave_one_axis_out")) PrintAxes(out["leave_one_axis_out"], os);
  os << "\nfitted constants (shipped / refit on every row / prior; informed by):\n";
  for (const auto& k : out["constants"]) {
    os << "  " << std::left << std::setw(34) << k["name"].get<std::string>() << std::right
           << std::setw(9)
           << (k.contains("shipped") ? FormatFixed(k["shipped"].get<double>(), 3)
                                     : std::string("-"))
           << std::setw(9) << FormatFixed(k["fitted_to_all_rows"].get<double>(), 3) << std::setw(9)
           << FormatFixed(k["prior"].get<double>(), 3) << "  "
           << Join(k["informed_by"].get<std::vector<std::string>>(), ", ")
           << (k["single_source"].get<bool>() ? "  (one source only)" : "") << "\n";
  }
  if (picks != nullptr) {
    os << "\npick check (the planner's pick for each hand-tuned question, ranked by the "
              "pessimistic "
              "edge; ratio = pick's predicted / best measured):\n";
    for (const auto& p : *picks) {
      os << "  " << std::left << std::setw(44) << p.run_id.substr(0, 43) << std::right
             << std::setw(8) << FormatFixed(p.ratio, 3) << "  "
             << (p.pick_config.empty() ? "nothing fits" : p.pick_config)
             << (p.above_published_mfu ? "  (above the published MFU ceiling)" : "")
             << (p.ratio_to_best_same_gpu > 0 && p.best_same_gpu_run != p.run_id
                     ? "  [" + FormatFixed(p.ratio_to_best_same_gpu, 3) + " per GPU of " +
                           p.best_same_gpu_run + "]"
                     : "")
             << "\n";
    }
    os << "picks: " << ratios.size() << " questions, median ratio "
           << FormatFixed(Median(ratios), 3) << ", worst "
           << FormatFixed(ratios.empty() ? 0.0 : *std::max_element(ratios.begin(), ratios.end()), 3)
           << "\n";
    if (!same_gpu.empty()) {
      os << "  per GPU over the fastest any row measured for the same model, length, GPU "
                "and precision (any GPU count, batch or release; [..] where another row): median "
             << FormatFixed(Median(same_gpu), 3) << "\n";
    }
  }
  os << "per framework × GPU (rms of the log error):\n";
  for (const auto& s : out["framework_gpu"]) {
    os << "  " << std::left << std::setw(34) << s["framework_gpu"].get<std::string>() << std::right
           << std::setw(6) << s["runs"].get<int>() << std::setw(15)
           << FormatFixed(100 * s["rms_error"].get<double>(), 1) << "%\n";
  }
  if (loaded.fleet) {
    const OrderedJson& f = out["fleet"];
    os << "coverage: " << t.n << " of " << loaded.runs.size() << " rows ("
           << FormatFixed(100 * f["coverage"].get<double>(), 1) << " %), in-sample median |error| "
           << FormatFixed(100 * f["median_abs_error"].get<double>(), 1) << " %\n";
    for (const char* key : {"leave_one_gpu_out", "leave_one_release_out"}) {
      os << key << ": median |error| "
             << FormatFixed(100 * f[key]["median_abs_error"].get<double>(), 1) << " %  (";
      bool first = true;
      for (const auto& g : f[key]["groups"]) {
        os << (first ? "" : ", ") << g["group"].get<std::string>() << " "
               << FormatFixed(100 * g["median_abs_error"].get<double>(), 1) << " %";
        first = false;
      }
      os << ")\n";
    }
  }
  os << "runs: " << t.n << ", mean |error| " << FormatFixed(t.n ? 100 * t.sum_abs / t.n : 0.0, 1)
         << " %, max |error| " << FormatFixed(100 * t.max_abs, 1) << " %, predicted not to fit: " << t.unfit
         << ", refused at the planner's " << FormatFixed(100 * t.headroom, 0)
         << " % headroom (as plan would): " << t.over_headroom << "\n";
  if (!loaded.not_covered.empty()) {
    os << "not covered: " << loaded.not_covered.size() << " rows (" << loaded.not_covered.front()
           << (loaded.not_covered.size() > 1 ? ", ..." : "") << ")\n";
  }
}

}  // namespace

int RunValidate(const Args& args, Io io) {
  Flags flags({"--calibration", "--runs", "--cluster", "--format", "--holdout", "--memory",
               "--goodput", "--collectives", "--beyond"},
              {"--help", "--seeds", "--picks", "--axes"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "validate", kValidateHelp)) return *done;
  const std::string format = flags.GetOr("--format", "table");
  if (format != "table" && format != "json") {
    return UsageError(io, "validate", Status::InvalidArgument("--format must be table or json"));
  }
  auto holdout = planner::ParseHoldout(flags.GetOr("--holdout", "source"));
  if (!holdout.ok()) return UsageError(io, "validate", holdout.status());
  auto cal_path = flags.Get("--calibration");
  auto runs_path = flags.Get("--runs");
  if (flags.Has("--seeds")) {
    if (cal_path || runs_path) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--seeds runs on its own (not with --calibration or --runs)"));
    }
    return PrintSeeds(format, io);
  }
  if (auto goodput_path = flags.Get("--goodput")) {
    if (cal_path || runs_path || flags.Has("--memory") || flags.Has("--collectives")) {
      return UsageError(io, "validate",
                        Status::InvalidArgument(
                            "--goodput runs on its own (not with --calibration, --runs, "
                            "--memory or --collectives)"));
    }
    auto doc = LoadJsonArg(*goodput_path, "--goodput", io.in);
    if (!doc.ok()) return UsageError(io, "validate", doc.status());
    return PrintGoodputChecks(*doc, format, io);
  }
  // A --calibration file may be nccl_tables.json or memory_runs.json: read it
  // once to tell.
  std::optional<Json> cal_doc;
  if (cal_path) {
    auto doc = LoadJsonArg(*cal_path, "--calibration", io.in);
    if (!doc.ok()) return UsageError(io, "validate", doc.status());
    cal_doc = std::move(*doc);
  }
  // Measured collective tables: --collectives, or nccl_tables.json given as --calibration.
  auto collectives_path = flags.Get("--collectives");
  const bool cal_is_tables = cal_doc && planner::IsCollectiveTablesDocument(*cal_doc);
  if (collectives_path || (cal_is_tables && !flags.Has("--memory"))) {
    if (runs_path || flags.Has("--memory") || (collectives_path && cal_path)) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--collectives runs on its own (not with "
                                                "--calibration, --runs or --memory)"));
    }
    auto doc = collectives_path ? LoadJsonArg(*collectives_path, "--collectives", io.in)
                                : Result<Json>(*cal_doc);
    if (!doc.ok()) return UsageError(io, "validate", doc.status());
    if (!planner::IsCollectiveTablesDocument(*doc)) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--collectives: not a nccl_tables.json document "
                                                "(tables with collective, total_ranks, rows)"));
    }
    return RunValidateCollectives(*doc, format, io);
  }
  // Networks beyond the transformer: --beyond, or beyond_runs.json given as
  // --calibration (as the only --runs, below).
  auto beyond_path = flags.Get("--beyond");
  if (beyond_path || (cal_doc && planner::IsBeyondRunsDocument(*cal_doc))) {
    if (runs_path || flags.Has("--memory") || (beyond_path && cal_path)) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--beyond runs on its own (not with --calibration, --runs or --memory)"));
    }
    auto doc = beyond_path ? LoadJsonArg(*beyond_path, "--beyond", io.in) : Result<Json>(*cal_doc);
    if (!doc.ok()) return UsageError(io, "validate", doc.status());
    return RunValidateBeyond(*doc, format, io);
  }
  // Measured peak memory: --memory, or memory_runs.json given as --calibration.
  auto memory_path = flags.Get("--memory");
  const bool cal_is_memory = cal_doc && planner::IsMemoryRunsDocument(*cal_doc);
  if (memory_path || cal_is_memory) {
    if (runs_path || (memory_path && cal_path)) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--memory runs on its own (not with --calibration or --runs)"));
    }
    auto doc = memory_path ? LoadJsonArg(*memory_path, "--memory", io.in) : Result<Json>(*cal_doc);
    if (!doc.ok()) return UsageError(io, "validate", doc.status());
    if (!planner::IsMemoryRunsDocument(*doc)) {
      return UsageError(io, "validate",
                        Status::InvalidArgument("--memory: not a memory_runs.json document (rows with measured.metric)"));
    }
    return RunValidateMemory(*doc, format, io);
  }
  if (!cal_path && !runs_path) {
    return UsageError(io, "validate",
                      Status::InvalidArgument("--calibration, --runs, --memory, --collectives, --beyond or --seeds is required"));
  }
  auto loaded = LoadRuns(flags, cal_doc, io.in);
  if (!loaded.ok()) return UsageError(io, "validate", loaded.status());
  if (loaded->beyond) return RunValidateBeyond(*loaded->beyond, format, io);
  const std::vector<planner::PublishedRun>& runs = loaded->runs;
  auto tally = PredictRows(*loaded, format == "table", io.out);
  if (!tally.ok()) return UsageError(io, "validate", tally.status());
  const Tally& t = *tally;
  std::vector<planner::PickCheck> picks;
  if (flags.Has("--picks")) {
    auto p = planner::CheckPicks(runs);
    if (!p.ok()) return UsageError(io, "validate", p.status());
    picks = std::move(*p);
  }
  const planner::CrossValidation cv = planner::LeaveOneGroupOut(runs, *holdout);
  OrderedJson out;
  out["schema"] = "paratune.validation/v1";
  out["runs"] = t.rows;
  if (loaded->fleet) out["fleet"] = FleetToJson(runs, t);
  out["sources"] = SourcesToJson(t);
  out["holdout"] = planner::HoldoutName(*holdout);
  out["held_out"] = HeldOutToJson(cv);
  out["sharded_by_gpu_decade"] = ShardedByDecade(t.rows, cv);
  if (flags.Has("--axes")) {
    std::vector<planner::CrossValidation> axes;
    for (planner::Holdout axis : planner::kAxes) {
      axes.push_back(planner::LeaveOneGroupOut(runs, axis, {}, &cv.all));
    }
    out["leave_one_axis_out"] = AxesToJson(axes);
  }
  out["constants"] = ConstantsToJson(runs, cv);
  out["framework_gpu"] = SpreadToJson(t);
  out["mean_abs_error"] = t.n ? t.sum_abs / t.n : 0.0;
  out["max_abs_error"] = t.max_abs;
  out["predicted_not_to_fit"] = t.unfit;
  out["headroom"] = t.headroom;
  out["refused_at_headroom"] = t.over_headroom;
  if (flags.Has("--picks")) {
    const PickRatios pr = RatiosOf(picks);
    OrderedJson pj;
    pj["ranked_by"] = "pessimistic edge";
    pj["questions"] = planner::PicksToJson(picks);
    pj["median_ratio"] = Median(pr.ratios);
    pj["worst_ratio"] = pr.ratios.empty() ? 0.0 : *std::max_element(pr.ratios.begin(), pr.ratios.end());
    if (!pr.same_gpu.empty()) pj["median_ratio_to_best_same_gpu"] = Median(pr.same_gpu);
    out["picks"] = pj;
  }
  if (!loaded->not_covered.empty()) out["not_covered"] = loaded->not_covered;
  if (format == "json") {
    io.out << out.dump(2) << "\n";
    return kExitOk;
  }
  PrintTables(out, cv, *holdout, flags.Has("--picks") ? &picks : nullptr, *loaded, t, io.out);
  return kExitOk;
}

}  // namespace paratune::cli
