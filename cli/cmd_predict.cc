// `paratune predict`: one configuration in, its predicted time and memory out;
// or (--log) a training log in, its measured and predicted step time out.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/cmd_network.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/strings.h"
#include "frameworks/logs.h"
#include "planner/request.h"
#include "scenario/scenario.h"

namespace paratune::cli {
namespace {

constexpr const char* kPredictHelp = R"(usage: paratune predict --request FILE [--format json|table]
       paratune predict --log FILE --cluster C [--model M] [--gpus N] [--run N] [...]
                        [--profile PROFILE.json] [--format json|table]
       paratune predict --model M --cluster C --gpus N [--global-batch B]
                        [--seq S] [--precision bf16] [--attention flash|unfused]
                        [--framework megatron] [--compile] [--no-expandable-segments]
                        [--config "tp=8,pp=16,mbs=1,recompute=full"] [--headroom 0.05]
                        [--profile PROFILE.json] [--format json|table]
       paratune predict --network N --cluster C --gpus G --global-batch B
                        [--micro-batch b] [--spatial s] [--tensor t] [--sequence q]
                        [--sharding ddp|zero1|fsdp] [--recompute] [--precision bf16]
                        [--grad-bytes 4] [--optimizer-state-bytes 8]
                        [--framework pytorch|torchtitan] [--format json|table]

Predicts the time of one training iteration and the memory each GPU needs for
ONE parallel configuration, with a breakdown (compute, each dimension's exposed
communication, pipeline bubble, optimizer). Use `paratune plan` to search.

  --request FILE    a JSON request ("-" reads stdin); see docs/cli.md. Keys:
                    model, cluster, gpus, training{seq_len, global_batch,
                    precision, attention, main_grads_fp32, headroom, framework,
                    compile}, config
  --model M         a preset (paratune presets models), a model JSON file, or a
                    Hugging Face config.json
  --cluster C       a preset (paratune presets clusters) or a cluster JSON file
  --gpus N          total GPUs
  --global-batch B  sequences per iteration (default: the model's published
                    pretraining batch in tokens, e.g. deepseek-v3's 15360 x 4096,
                    else 4M tokens as Llama 2 trained; divided by --seq)
  --seq S           sequence length (default: the model's published pretraining
                    length, e.g. 4096 for deepseek-v3 and qwen3, else its
                    context length up to 8192, the longest published
                    pretraining length: llama3.1-8b's 131072 is reached by a
                    long-context stage after pretraining at 8192)
                    --seq and --global-batch take 8192, 8k or 8K (x 1024),
                    128K, 1M (x 2^20), 1G or 2^13 alike
  --precision P     fp32 | tf32 | bf16 | fp16 | fp8 (the GPU's default FP8
                    recipe) | fp8_delayed | fp8_current | fp8_blockwise | mxfp8 |
                    nvfp4 (a recipe the GPU cannot run is refused; default: the
                    best the GPU supports: bf16, else fp16, else tf32, else fp32)
  --attention A     flash (default) | unfused (materialised softmax, Megatron 2022)
  --framework F     the training stack: megatron (default; Megatron-LM/Core, NeMo),
                    megatron-deepspeed, deepspeed, fsdp (FSDP1: llm-foundry, HF),
                    torchtitan (FSDP2), axonn; a config it cannot run is refused
  --compile         the model runs under torch.compile (fsdp, deepspeed, torchtitan)
  --config SPEC     comma-separated key=value: tp pp vpp dp cp cp_kind sp gx gy gz
                    gdata zero distributed_optimizer qwz hpz qgz mbs recompute
                    oar ors oag overlap_grad_reduce overlap_param_gather
                    tp_comm_overlap overlap_p2p placement first_stage_layers
                    last_stage_layers offload_optimizer offload_param (ZeRO-
                    Offload/Infinity: states in host memory, the cluster must
                    state host_memory_GiB) offload_activation_layers (Megatron's
                    CPU activation offloading of N layers; pp = 1, no recompute)
                    cuda_graphs (full-iteration CUDA graphs; MoE models only
                    with moe_dispatcher=hybridep); megatron with
                    zero=2 or 3 is Megatron-FSDP (optim_grads,
                    optim_grads_params). Omitted degrees are 1, flags off; dp is
                    derived from --gpus. Uneven stages: layers % pp != 0 needs
                    first_stage_layers/last_stage_layers under megatron, or
                    pp_embedding_layers/pp_loss_layers (the embedding / loss
                    counted as that many layers; above 1 Megatron's layout
                    string: Megatron-Bridge's DeepSeek-V3 "Et*4|(t*4|)*14tmL"
                    is pp=4,vpp=4,pp_embedding_layers=0,pp_loss_layers=3).
                    pp_schedule: 1f1b | interleaved (vpp > 1) | zb-h1 (vpp >= 2)
                    | zb-v | dualpipev (vpp = 2): zero-bubble and V schedules,
                    torchtitan only.
  --no-expandable-segments
                    price PyTorch's caching allocator in fixed-size segments,
                    its default when PYTORCH_CUDA_ALLOC_CONF is unset: a third
                    more reserved than allocated (framework preset
                    allocator_fragmentation_fixed) instead of the few percent
                    of expandable segments, which every emitted launch sets
  --headroom F      memory kept free beyond the predicted reserved memory for a
                    "fits" verdict (default 0.05, every command)
  --profile FILE    a measured profile (paratune profile) to use for this cluster
  --format F        json (default) | table
  --explain memory  add the memory ledger, stage by stage: each term (parameters,
                    gradients, optimizer states and the step's copy, activations
                    with the micro-batches held, the loss, buffers) with its GiB
                    and its source (json: memory_ledger)

--log FILE answers "what would paratune have predicted for this run": the
training log (Megatron-LM/Core, NeMo, Megatron-DeepSpeed, DeepSpeed,
torchtitan, Hugging Face Trainer; see `paratune calibrate --help`) gives the
configuration it states and its median step time (warm-up, skipped intervals
and outliers dropped); the flags above fill in what it does not state
(--cluster unless a line names the GPU). A log holding several runs (a job
restarted, jobs appended to one file) lists them and exits 2 unless --run N
(1-based) picks one; each run's fields come from its own part of the log.
With --format json (default) one line comes out, an object with log,
framework, gpu, config, measured_iteration_s, predicted_iteration_s, error
((predicted - measured) / measured), read_from_log, assumed and warnings
(among them one per axis on which the run lies outside the published runs
the model was checked on); with --format table a sentence, then one
"  warning: ..." line per warning.

Networks that are not transformer stacks (--network: a preset of `paratune
presets networks` or a network JSON file, docs/networks.md): U-Nets,
diffusion transformers, CNNs and 3D CNNs, priced layer by layer (convolutions
as implicit GEMMs, fused attention, norms at HBM bandwidth) with data
parallelism (ddp: gradients all-reduced behind the backward; zero1: optimizer
states sharded; fsdp: every weight sharded) and, for 3D networks, a spatial
split of each sample over --spatial GPUs with halo exchange, and for the
token layers of diffusion transformers and U-Net attention, Megatron-style
tensor parallelism over --tensor GPUs, and for transformers (DiT, ViT, video
DiT) DeepSpeed-Ulysses sequence parallelism over --sequence GPUs (tokens
split, attention head-split between all-to-alls); --recompute checkpoints
the stacks of repeated blocks (transformer blocks, DeepCAM's middle flow):
each keeps its input and runs its forward again in the backward.
--micro-batch defaults to the global batch over the data-parallel replicas;
--grad-bytes is the gradient width the data-parallel collective moves (4:
PyTorch AMP, 2: half-precision reduction); --optimizer-state-bytes per
parameter (Adam 8, SGD with momentum 4); --framework refuses a layout that
framework does not run (pytorch: no spatial, tensor or sequence split;
torchtitan: flux1-schnell with fsdp).
A prediction above the GPU's best published MFU is flagged
(above_published_mfu). JSON: schema paratune.network_prediction/v1.

exit codes: 0 ok (also when the config does not fit: "fits": false),
            2 invalid request (the message names the field and the rule)

example:
  paratune predict --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 \
      --seq 2048 --global-batch 1536 --config "tp=8,pp=16,mbs=1,recompute=full"
  paratune predict --log megatron-run.log --cluster dgx-h100 --format table
  paratune predict --network sd2-unet --cluster dgx-h100 --gpus 8 --global-batch 512 --format table
)";

// What the request left unstated, as key=value on one wrapped line (the
// JSON form says why for each).
void PrintAssumed(const std::vector<scenario::Assumption>& assumed, std::ostream& out) {
  if (assumed.empty()) return;
  std::string line = "assumed      ";
  size_t width = line.size();
  for (const scenario::Assumption& a : assumed) {
    const std::string key = a.key.substr(a.key.rfind('/') + 1);
    const std::string item =
        " " + key + "=" + (a.value.is_string() ? a.value.get<std::string>() : a.value.dump());
    if (width + item.size() > 100) {
      line += "\n             ";
      width = 13;
    }
    line += item;
    width += item.size();
  }
  out << line << "\n              (not in the request; --format json says why for each)\n";
}

void PrintPredictTable(const planner::Job& job, const planner::ParallelConfig& c,
                       const planner::Prediction& p, std::ostream& out) {
  const auto& b = p.breakdown;
  const auto& m = p.memory;
  out << JobHeadline(job) << ", " << PrecisionLabel(job) << ", "
      << planner::FrameworkName(job.training.framework)
      << (job.training.compile ? " (compiled)" : "") << "\n";
  out << "config        " << planner::ConfigText(job.training.framework, c) << "  (" << p.micro_batches
      << " micro-batches)\n";
  out << "iteration     " << FormatFixed(p.iteration_time_s, 3) << " s ± "
      << FormatFixed(100 * p.uncertainty, 0) << " %    " << FormatFixed(p.tokens_per_s, 0) << " tokens/s\n";
  out << "per GPU       " << FormatFixed(p.model_tflops_per_gpu, 1) << " model TFLOP/s (MFU "
      << FormatFixed(100 * p.mfu, 1) << " %, " << p.flops_convention << " attention), "
      << FormatFixed(p.executed_tflops_per_gpu, 1) << " executed TFLOP/s (HFU "
      << FormatFixed(100 * p.hfu, 1) << " %)\n";
  out << "pessimistic   " << FormatFixed(p.pessimistic_time_s, 3) << " s (what `plan` ranks by; "
      << FormatFixed(p.evidence_steps, 1) << " steps from calibrated evidence)\n";
  if (p.feature_band > 0) {
    out << "              band " << FormatFixed(100 * p.feature_band, 0)
        << " % for DeepEP/HybridEP dispatch across NVLink domains (the error of the calibration "
           "rows that run it)\n";
  }
  if (p.above_published_mfu) {
    out << "!             MFU above the best published for this GPU and precision ("
        << FormatFixed(100 * p.published_mfu_ceiling, 1) << " %)\n";
  }
  out << "memory/GPU    " << FormatFixed(m.reserved_GiB, 2) << " GiB reserved at the peak ("
      << FormatFixed(m.peak_allocated_GiB, 2) << " allocated, " << FormatFixed(m.total_GiB, 2)
      << " steady) of " << FormatFixed(m.usable_GiB, 2) << " usable  -> "
      << (p.fits ? "fits" : "DOES NOT FIT") << "\n";
  out << "  params " << FormatFixed(m.params_GiB, 2) << "  grads " << FormatFixed(m.grads_GiB, 2)
      << "  optimizer " << FormatFixed(m.optimizer_GiB, 2) << "  activations "
      << FormatFixed(m.activations_GiB, 2) << "  buffers " << FormatFixed(m.buffers_GiB, 2);
  if (m.optimizer_step_GiB > 0) {
    out << "  optimizer step " << FormatFixed(m.optimizer_step_GiB, 2) << " (peak at the "
        << (m.peak_at_optimizer_step ? "step" : "backward") << ")";
  }
  out << "\n";
  if (c.pp > 1) {
    out << "  per stage (allocated at its peak): first " << FormatFixed(m.first_stage_allocated_GiB, 2)
        << "  last " << FormatFixed(m.last_stage_allocated_GiB, 2) << "  largest "
        << FormatFixed(m.peak_allocated_GiB, 2) << "\n";
  }
  out << "time breakdown (s)\n";
  auto row = [&](const char* name, double v) {
    if (v <= 0) return;
    out << "  " << std::left << std::setw(12) << name << std::right << std::setw(10)
        << FormatFixed(v, 4) << "  " << std::setw(5) << FormatFixed(100 * v / p.iteration_time_s, 1)
        << " %\n";
  };
  for (const planner::BreakdownTerm& term : planner::kBreakdownTerms) {
    row(term.label, b.*term.seconds);
  }
}

// `predict --log`: the run a training log describes, predicted and compared.
int PredictLog(const Flags& flags, const std::string& path, Io io) {
  if (flags.Has("--request")) {
    return UsageError(io, "predict",
                      Status::InvalidArgument("--log cannot be combined with --request"));
  }
  auto lf = LogFlagsFromFlags(flags, io.in);
  if (!lf.ok()) return UsageError(io, "predict", lf.status());
  auto text = ReadFileToString(path);
  if (!text.ok()) return UsageError(io, "predict", text.status().WithContext("--log"));
  auto run = planner::ParseTrainingLog(*text, path, lf->run);
  if (!run.ok()) return UsageError(io, "predict", run.status());
  auto lr = planner::RequestFromLog(*run, *lf, planner::StepSummaryOptions{});
  if (!lr.ok()) return UsageError(io, "predict", lr.status().WithContext(path));
  auto req = planner::ParsePredictRequest(lr->request);
  if (!req.ok()) return UsageError(io, "predict", req.status().WithContext(path));
  if (auto p = flags.Get("--profile")) {
    if (Status s = ApplyProfileFile(*p, &req->job.cluster); !s.ok()) {
      return UsageError(io, "predict", s);
    }
  } else if (Status s = ApplyCachedProfile(&req->job.cluster, io.err); !s.ok()) {
    return UsageError(io, "predict", s);
  }
  const planner::CostModel cm(req->job.model, req->job.training, req->job.cluster, req->job.gpus);
  if (Status s = planner::ValidateConfig(cm, req->config); !s.ok()) {
    return UsageError(io, "predict", s.WithContext(path));
  }
  for (std::string& w : planner::CalibratedRangeWarnings(*req)) lr->warnings.push_back(std::move(w));
  const double predicted = cm.Predict(req->config).iteration_time_s;
  const double measured = lr->measured_iteration_s;
  const double error = (predicted - measured) / measured;
  const std::string format = flags.GetOr("--format", "json");
  if (format == "json") {
    OrderedJson j;
    j["log"] = path;
    j["framework"] = planner::FrameworkName(req->job.training.framework);
    j["gpu"] = req->job.cluster.gpu.name;
    j["config"] = planner::ConfigToString(req->config);
    j["measured_iteration_s"] = measured;
    j["predicted_iteration_s"] = predicted;
    j["error"] = error;
    j["read_from_log"] = lr->read_from_log;
    j["assumed"] = lr->assumed;
    j["warnings"] = lr->warnings;
    io.out << j.dump() << "\n";
  } else if (format == "table") {
    io.out << path << ": measured " << FormatFixed(measured, 3) << " s/iteration, predicted "
           << FormatFixed(predicted, 3) << " s (" << (error >= 0 ? "+" : "")
           << FormatFixed(100 * error, 1) << " %) for "
           << planner::FrameworkName(req->job.training.framework) << " "
           << planner::ConfigToString(req->config) << " on " << req->job.gpus << " x "
           << req->job.cluster.gpu.name << "\n";
    for (const std::string& w : lr->warnings) io.out << "  warning: " << w << "\n";
  } else {
    return UsageError(io, "predict", Status::InvalidArgument("--format must be json or table"));
  }
  return kExitOk;
}

// The memory ledger, stage by stage: each term's GiB and its source.
void PrintLedger(const std::vector<planner::CostModel::LedgerRow>& rows, std::ostream& out) {
  out << "memory ledger (GiB per GPU at each stage's peak; source)\n";
  std::string stage;
  for (const auto& r : rows) {
    if (r.stage != stage) {
      stage = r.stage;
      out << "  " << (stage == "every" ? "every rank" : stage + " stage") << "\n";
    }
    out << "    " << std::left << std::setw(52) << r.term << std::right << std::setw(9)
        << FormatFixed(r.GiB, 2) << "  " << r.source << "\n";
  }
}

}  // namespace

int RunPredict(const Args& args, Io io) {
  Flags flags({"--request",      "--model",       "--cluster",    "--gpus",
               "--global-batch", "--seq",         "--precision",  "--attention",
               "--config",       "--headroom",    "--profile",    "--format",
               "--framework",    "--log",         "--run",        "--explain",
               "--network",      "--micro-batch", "--spatial",    "--tensor",
               "--sequence",     "--sharding",    "--grad-bytes", "--optimizer-state-bytes"},
              {"--help", "--compile", "--recompute", "--no-expandable-segments"},
              {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "predict", kPredictHelp)) return *done;
  if (auto log = flags.Get("--log")) return PredictLog(flags, *log, io);
  if (flags.Has("--network")) {
    for (const char* f : {"--request", "--model", "--seq", "--attention", "--config", "--profile",
                          "--explain", "--compile", "--no-expandable-segments"}) {
      if (flags.Has(f)) {
        return UsageError(io, "predict", Status::InvalidArgument(std::string(f) + " does not apply with --network"));
      }
    }
    return PredictNetworkCommand(flags, io);
  }
  for (const char* f : kNetworkFlags) {
    if (flags.Has(f)) {
      return UsageError(io, "predict", Status::InvalidArgument(std::string(f) + " applies with --network only"));
    }
  }
  Json request;
  if (auto path = flags.Get("--request")) {
    for (const char* f :
         {"--model", "--cluster", "--gpus", "--global-batch", "--seq", "--precision", "--attention",
          "--config", "--headroom", "--framework", "--compile", "--no-expandable-segments"}) {
      if (flags.Has(f)) {
        return UsageError(io, "predict",
                          Status::InvalidArgument(std::string(f) + " cannot be combined with --request"));
      }
    }
    auto doc = LoadJsonArg(*path, "--request", io.in);
    if (!doc.ok()) return UsageError(io, "predict", doc.status());
    request = *doc;
  } else {
    auto built = RequestFromFlags(flags, /*with_config=*/true, io.in);
    if (!built.ok()) return UsageError(io, "predict", built.status());
    request = *built;
  }
  if (auto p = flags.Get("--profile")) request["profile"] = *p;

  // One resolution for every entry point: what the request leaves unstated is
  // set as plan sets it, and listed as assumed.
  auto scenario = scenario::ResolvePredict(request);
  if (!scenario.ok()) return UsageError(io, "predict", scenario.status());
  planner::PredictRequest* req = &scenario->request;
  if (!req->profile_path.empty()) {
    if (Status s = ApplyProfileFile(req->profile_path, &req->job.cluster); !s.ok()) {
      return UsageError(io, "predict", s);
    }
  } else if (Status s = ApplyCachedProfile(&req->job.cluster, io.err); !s.ok()) {
    return UsageError(io, "predict", s);
  }
  planner::CostModel cm(req->job.model, req->job.training, req->job.cluster, req->job.gpus);
  if (Status s = planner::ValidateConfig(cm, req->config); !s.ok()) {
    return UsageError(io, "predict", s);
  }
  planner::Prediction p = cm.Predict(req->config);
  const std::string explain = flags.GetOr("--explain", "");
  if (!explain.empty() && explain != "memory") {
    return UsageError(io, "predict", Status::InvalidArgument("--explain takes memory"));
  }
  std::vector<planner::CostModel::LedgerRow> ledger;
  if (explain == "memory") ledger = cm.MemoryLedger(req->config);
  std::string format = flags.GetOr("--format", "json");
  if (format == "table") {
    PrintPredictTable(req->job, req->config, p, io.out);
    if (!ledger.empty()) PrintLedger(ledger, io.out);
    PrintAssumed(scenario->assumed, io.out);
  } else if (format == "json") {
    OrderedJson doc = planner::PredictionToJson(req->job, req->config, p, cm);
    if (!ledger.empty()) {
      OrderedJson rows = OrderedJson::array();
      for (const auto& r : ledger) {
        OrderedJson row;
        row["stage"] = r.stage;
        row["term"] = r.term;
        row["GiB"] = r.GiB;
        row["source"] = r.source;
        rows.push_back(row);
      }
      doc["memory_ledger"] = rows;
    }
    doc["assumed"] = scenario::AssumedToJson(scenario->assumed);
    io.out << doc.dump(2) << "\n";
  } else {
    return UsageError(io, "predict", Status::InvalidArgument("--format must be json or table"));
  }
  return kExitOk;
}

}  // namespace paratune::cli
