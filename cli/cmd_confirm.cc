// `paratune confirm`: run the top candidates of a plan on real kernels and
// report measured against predicted. Thin: parse flags, make the backend,
// call executor::ConfirmCandidates, print.
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "backend/factory.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "cli/version.h"
#include "common/json.h"
#include "common/strings.h"
#include "executor/run/network_confirm.h"
#include "executor/run/runner.h"
#include "topology/gpu.h"

namespace paratune::cli {
namespace {

constexpr const char* kConfirmHelp =
    R"(usage: paratune confirm --plans FILE --backend cuda|mpi-cpu|fake --out FILE [--top K]
                        [--layers N] [--samples N] [--warmup N] [--comm-iters N]
                        [--no-overlapped-slice] [--timeout S] [--inject-fault F]
                        [--strict-gpu] [--fake-gpu GPU]

A prediction is a promise; confirm keeps it honest. It takes a plans document
(`paratune plan --format json`), runs each of the top K candidates as the real
per-rank workload of a training step on this machine, and writes a run report
("paratune.run_report/v2") with measured and predicted time per candidate and
per term, the error, and the candidates re-ranked by what was measured. Feed
reports to `paratune calibrate` so the next plan is closer.

Start one process per GPU with the launcher you already use; rank 0 writes
the report (after every candidate, so a partial report survives a crash):

  srun --ntasks-per-node=8 paratune confirm --plans plan.json --top 5 --backend cuda --out run.json
  mpirun -np 4 paratune confirm --plans plan.json --top 3 --backend mpi-cpu --out run.json

What runs, per candidate and rank (docs/executor.md):
  - one micro-batch of a slice of the rank's layers (--layers, default 2):
    forward, recompute and backward GEMMs at the cost model's per-GPU shapes
    (AxoNN normal/transposed linears over X and Y, Megatron TP = gx 1),
    attention as FLOP-equivalent GEMMs, element-wise kernels, the optimizer
    step and TE FP8 casts as device copies of the same bytes; the embedding
    and the logits on the first and last pipeline stage; the element-wise
    work and the loss as the plan's framework runs them (training.framework,
    training.compile: an eager stack's many separate kernels, a fused or
    compiled one's few; the loss's passes in fp32 where the stack upcasts
    the logits, in bf16 where it fuses the cross entropy);
  - every collective on a communicator split per dimension (tensor/sequence
    parallel, AxoNN X/Y/Z, ring or Ulysses context parallel, pipeline
    hand-off, data-parallel/ZeRO sync), each timed alone nccl-tests style;
  - the slice again with its streams and events (OAR/ORS/OAG, TP comm overlap,
    ZeRO-3 prefetch) on every rank at once, which measures the overlap;
  - for a mixture-of-experts model, one MoE layer's forward on expert-parallel
    communicators (the plan's ep and etp, or the most that tile the processes):
    the dispatch all-to-all, the local experts' FC1/FC2 GEMMs, the combine
    all-to-all; the report's "moe_layer" has them measured beside the cost
    model's all-to-all and expert-GEMM figures;
  - first, the memory proof: the model's per-GPU memory is allocated (and
    written); a candidate that does not fit is reported "oom", not "fits".
A network's plans (`paratune plan --network ...`: U-Nets, DiTs, CNNs) run
layer by layer instead: the layer shapes the model prices slowest (--layers,
default 24 distinct shapes), each at the micro-batch and shard one GPU
holds; convolutions as the backend's lowered convolution (im2col and a GEMM
per group: cuBLAS on cuda, Eigen on mpi-cpu), linears and attention as
GEMMs, norms and element-wise work as copies of their bytes; the gradient
all-reduce on the processes there are; the report is
"paratune.network_run_report/v1" (docs/executor.md, section 8).

A step is extrapolated from the slice with the cost model's own composition
(micro-batches x slowest stage + 1F1B bubble + hand-offs + data-parallel sync
+ optimizer); the report says how, in words.

With fewer processes than the plan needs (one GPU, or 4 MPI ranks for a
64-GPU plan) the distinct ranks (first, middle, last pipeline stage) run
their compute and memory for real; collectives run on the largest groups
that fit and are scaled to the plan's groups with the cluster's alpha-beta,
or priced by it on a single process. Each candidate lists measured_parts and
modelled_parts plainly.

  --plans FILE         a paratune.plans/v1 or paratune.network_plans/v1 document
                       ("-" reads stdin)
  --top K              candidates to run, best first (default 5)
  --backend B          cuda (cuBLAS + NCCL, one GPU per process), mpi-cpu (MPI
                       processes on CPUs, Eigen fp32 GEMMs: plan with
                       --precision fp32), fake (the fake backend's model; a dry run)
  --out FILE           the run report (required)
  --layers N           layers per stage in the measured slice (default 2; a
                       network's plans: distinct layer shapes, default 24)
  --samples N          timed runs per measurement; medians are kept (default 5)
  --warmup N           unmeasured runs before each measurement (default 1)
  --comm-iters N       calls per timed collective sample (default 5)
  --no-overlapped-slice  skip the overlapped run: price overlap with the cost
                       model's rule on measured times instead
  --timeout S          cuda: seconds before a hung collective is aborted (300)
  --strict-gpu         refuse (exit 2) when the device measured is not the
                       plan's GPU, or is not a known GPU preset
  --fake-gpu GPU       fake backend: claim to be this GPU preset (its name,
                       memory, peak rates at 80 %, HBM rate), e.g. h100-sxm
  --inject-fault F     exercise the failure paths: KIND@N[:rank=R], KIND one of
                       rank_dies, collective_error, timeout, oom

Like with like: confirm reads the device it runs on (name, memory and SM
clocks from the backend and NVML) and matches it to a GPU preset. When that is
not the plan's GPU, the candidates are predicted again for the measured GPU
(the plan's cluster with its GPU swapped: same nodes, links and network) and
compared with that; the plan's own prediction stays beside it
(plan_predicted_s), and the report and the table name both (plan_gpu,
measured_gpu). A device no preset matches keeps the plan's predictions, and
says so. mpi-cpu measures no GPU: its predictions stay the plan's.

A candidate that fails (out of memory, a rank dies, a collective errors or
hangs) is reported with its reason and the next one runs. Under mpi-cpu a
failed collective call ends the whole job (MPI collectives cannot time out);
the report then holds the candidates finished before it.

exit codes: 0 every candidate ran (ok, oom or waived: the report says which);
            2 bad flags, an invalid plans document, a launch that cannot
              work (more ranks on a host than it has GPUs), or --strict-gpu
              and a device that is not the plan's GPU;
            4 a candidate failed, or the backend is unavailable here.

example:
  paratune plan --model gpt3-350m --cluster dgx-h100 --gpus 8 --global-batch 64 \
      --format json > plan.json
  mpirun -np 8 paratune confirm --plans plan.json --top 3 --backend cuda --out run.json
  paratune calibrate --reports run.json --profile h100.json --out h100-calibrated.json
)";

int FailConfirm(Io io, const Status& s) { return UsageError(io, "confirm", s, /*measuring=*/true); }

std::string Cell(const std::optional<double>& v, int digits) {
  return v ? FormatFixed(*v, digits) : std::string("-");
}

void PrintNetworkTable(const OrderedJson& r, std::ostream& out) {
  const OrderedJson& job = r["job"];
  out << job["network"].get<std::string>() << " on " << job["gpus"].get<int>() << " GPU(s) of "
      << job["cluster"].get<std::string>() << ", confirmed on " << r["environment"]["world_size"].get<int>() << " "
      << r["environment"]["backend"].get<std::string>() << " process(es)\n";
  out << std::setw(5) << "rank" << std::setw(8) << "status" << std::setw(14) << "predicted_s" << std::setw(14)
      << "measured_s" << std::setw(9) << "error" << std::setw(10) << "coverage" << "  layout\n";
  for (const OrderedJson& c : r["candidates"]) {
    const bool ok = c["status"] == "ok";
    const OrderedJson& l = c.contains("layout") ? c["layout"] : OrderedJson();
    out << std::setw(5) << c["rank"].get<int>() << std::setw(8) << c["status"].get<std::string>() << std::setw(14)
        << (c.contains("predicted") ? FormatFixed(c["predicted"]["step_s"].get<double>(), 5) : std::string("-"))
        << std::setw(14) << (ok ? FormatFixed(c["measured_step_s"].get<double>(), 5) : std::string("-"))
        << std::setw(9) << (ok ? FormatFixed(100.0 * c["error"].get<double>(), 1) + " %" : std::string("-"))
        << std::setw(10)
        << (ok ? FormatFixed(100.0 * c["compute"]["coverage"].get<double>(), 0) + " %" : std::string("-"));
    if (l.is_object()) {
      out << "  " << l["sharding"].get<std::string>() << " data " << l["data"].get<int>() << " spatial "
          << l["spatial"].get<int>() << " tensor " << l["tensor"].get<int>() << " micro "
          << l["micro_batch"].get<int64_t>();
    }
    out << "\n";
    if (!ok) out << "      " << c["reason"].get<std::string>() << "\n";
  }
}

void PrintConfirmTable(const executor::RunReport& r, std::ostream& out) {
  out << r.model << " on " << r.gpus << " GPU(s) of " << r.cluster << ", confirmed on "
      << r.environment.world_size << " " << r.environment.backend << " process(es)\n";
  const bool swapped = !r.measured_gpu.empty() && r.measured_gpu != r.plan_gpu;
  if (swapped) {
    out << "plan made for " << r.plan_gpu << ", measured on " << r.measured_gpu
        << ": predicted_s and error are for " << r.measured_gpu << " (the plan's own: plan_s)\n";
  } else if (r.measured_gpu.empty() && r.environment.backend.find("cuda") != std::string::npos) {
    out << "measured on " << r.environment.device << ", which matches no GPU preset: predicted_s "
        << "and error are the plan's " << r.plan_gpu << " predictions\n";
  }
  out << std::setw(5) << "rank" << std::setw(8) << "status" << std::setw(14) << "predicted_s"
      << std::setw(14) << "measured_s" << std::setw(9) << "error" << std::setw(10) << "measured";
  if (swapped) out << std::setw(12) << "plan_s";
  out << "  config\n";
  for (const executor::CandidateReport& c : r.candidates) {
    const std::string err = c.error ? FormatFixed(100.0 * *c.error, 1) + " %" : std::string("-");
    out << std::setw(5) << c.rank << std::setw(8) << executor::OutcomeName(c.status)
        << std::setw(14) << FormatFixed(c.predicted_s, 5) << std::setw(14) << Cell(c.measured_s, 5)
        << std::setw(9) << err << std::setw(10)
        << (c.measured_rank ? std::to_string(*c.measured_rank) : std::string("-"));
    if (swapped) out << std::setw(12) << Cell(c.plan_predicted_s, 4);
    out << "  " << planner::ConfigToString(c.config) << "\n";
    if (c.status != executor::Outcome::kOk) out << "      " << c.reason << "\n";
    if (c.moe_layer) {
      const executor::MoeLayerReport& m = *c.moe_layer;
      out << "      moe layer (ep " << m.ep << " x etp " << m.etp
          << (m.as_planned ? "" : ", not the plan's") << "): a2a "
          << FormatFixed(m.a2a.measured_s * 1e3, 3) << " ms measured / "
          << FormatFixed(m.a2a.predicted_s * 1e3, 3) << " ms predicted, experts "
          << FormatFixed(m.experts.measured_s * 1e3, 3) << " / "
          << FormatFixed(m.experts.predicted_s * 1e3, 3) << " ms\n";
    }
  }
}

// The device this process measures, and the GPU preset it is (none for a
// CPU or a GPU no preset matches).
struct MeasuredDevice {
  std::string name = "unknown";
  std::string kind;
  std::optional<std::string> preset;
};

MeasuredDevice Measured(backend::Backend& be) {
  MeasuredDevice m;
  auto dev = be.DescribeDevice();
  if (!dev.ok()) return m;
  m.name = dev->name;
  m.kind = dev->kind;
  if (dev->kind != "cpu") m.preset = executor::GpuPresetFor(*dev);
  return m;
}

// The network path of confirm (network_confirm.h): like with like on the
// device's GPU preset, every candidate run, the report written by rank 0.
int ConfirmNetwork(Io io, const Json& plans, int top, const backend::BackendOptions& bo,
                   const executor::NetworkConfirmOptions& o, const std::string& out_path, bool strict_gpu) {
  auto input = executor::NetworkConfirmInputFromPlans(plans, top);
  if (!input.ok()) return FailConfirm(io, input.status().WithContext("--plans"));
  auto b = backend::CreateBackend(bo);
  if (!b.ok()) return FailConfirm(io, b.status().WithContext("--backend " + bo.name));
  backend::Backend& be = **b;
  const bool root = be.rank() == 0;
  const MeasuredDevice dev = Measured(be);
  const std::optional<std::string>& measured = dev.preset;
  const std::string plan_gpu = input->job.cluster.gpu.name;
  if (strict_gpu && measured.value_or("") != plan_gpu) {
    return FailConfirm(io, Status::InvalidArgument("--strict-gpu: the plan is for " + plan_gpu +
                                                   " but this device is " + dev.name));
  }
  if (measured) {
    if (Status s = executor::MeasureNetworkOnDevice(&*input, *measured); !s.ok())
      return FailConfirm(io, s);
    if (root && *measured != plan_gpu) {
      io.err << "[confirm] the plan is for " << plan_gpu << "; this device is " << *measured
             << ": comparing with the predictions for " << *measured << std::endl;
    }
  }
  std::function<void(const std::string&)> progress;
  if (io.progress) progress = [&io](const std::string& line) { io.err << "[confirm] " << line << std::endl; };
  auto report = executor::ConfirmNetworkCandidates(be, *input, o, progress);
  if (!report.ok()) return FailConfirm(io, report.status());
  bool failed = false;
  for (const OrderedJson& c : (*report)["candidates"]) failed = failed || c["status"] == "failed";
  if (root) {
    if (Status s = WriteFileAtomic(out_path, report->dump(2) + "\n"); !s.ok())
      return FailConfirm(io, s);
    PrintNetworkTable(*report, io.out);
    io.err << "[confirm] wrote " << out_path << std::endl;
  }
  return failed ? kExitMeasureFailed : kExitOk;
}

}  // namespace

int RunConfirm(const Args& args, Io io) {
  Flags f({"--plans", "--top", "--backend", "--out", "--layers", "--samples", "--warmup",
           "--comm-iters", "--timeout", "--inject-fault", "--fake-gpu"},
          {"--no-overlapped-slice", "--strict-gpu", "--help"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(f, args, io, "confirm", kConfirmHelp, /*measuring=*/true))
    return *done;
  if (!f.positionals().empty()) {
    return FailConfirm(io,
                       Status::InvalidArgument("unexpected argument '" + f.positionals()[0] + "'"));
  }
  const std::string plans_path = f.GetOr("--plans", "");
  if (plans_path.empty())
    return FailConfirm(io, Status::InvalidArgument("--plans FILE is required"));
  const std::string backend_name = f.GetOr("--backend", "");
  if (backend_name != "cuda" && backend_name != "mpi-cpu" && backend_name != "fake") {
    return FailConfirm(io, Status::InvalidArgument("--backend must be cuda, mpi-cpu or fake"));
  }
  executor::ConfirmOptions o;
  o.out_path = f.GetOr("--out", "");
  if (o.out_path.empty()) return FailConfirm(io, Status::InvalidArgument("--out FILE is required"));
  auto top = IntFlag(f, "--top", 5, 1);
  auto layers = IntFlag(f, "--layers", 2, 1);
  auto samples = IntFlag(f, "--samples", 5, 1);
  auto warmup = IntFlag(f, "--warmup", 1, 0);
  auto iters = IntFlag(f, "--comm-iters", 5, 1);
  for (const auto* r : {&top, &layers, &samples, &warmup, &iters}) {
    if (!r->ok()) return FailConfirm(io, r->status());
  }
  o.workload.slice_layers = *layers;
  o.samples = *samples;
  o.warmup = *warmup;
  o.comm_iters = *iters;
  o.overlapped_slice = !f.Has("--no-overlapped-slice");
  o.peers_can_hang = backend_name == "mpi-cpu";
  o.tool = ToolName();
  o.argv = {"paratune", "confirm"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());

  backend::BackendOptions bo;
  bo.name = backend_name;
  if (auto t = f.Get("--timeout")) {
    auto v = ParseDouble(*t, "--timeout");
    if (!v.ok() || !(*v > 0)) {
      return FailConfirm(io,
                         Status::InvalidArgument("--timeout must be a positive number of seconds"));
    }
    bo.cuda.timeout_s = *v;
  }
  if (auto fault = f.Get("--inject-fault")) {
    auto plan = backend::ParseFaultPlan(*fault);
    if (!plan.ok()) return FailConfirm(io, plan.status().WithContext("--inject-fault"));
    bo.fault = *plan;
  }

  if (auto g = f.Get("--fake-gpu")) {
    if (backend_name != "fake") {
      return FailConfirm(io, Status::InvalidArgument("--fake-gpu applies to --backend fake only"));
    }
    auto gpu = topology::GpuPreset(*g);
    if (!gpu.ok()) return FailConfirm(io, gpu.status().WithContext("--fake-gpu"));
    backend::FakeConfig& fc = bo.fake;
    fc.device_name = gpu->display_name.empty() ? gpu->name : gpu->display_name;
    fc.memory_bytes = static_cast<int64_t>(gpu->memory_GiB * double(int64_t{1} << 30));
    // Sustained rates: 80 % of the datasheet peaks (the order of backend::GemmPrecision).
    const topology::Precision order[] = {topology::Precision::kFp32, topology::Precision::kTf32,
                                         topology::Precision::kBf16, topology::Precision::kFp16,
                                         topology::Precision::kFp8};
    for (int i = 0; i < backend::kNumGemmPrecisions; ++i)
      fc.gemm_tflops[static_cast<size_t>(i)] = 0.8 * gpu->PeakTflops(order[i]);
    fc.copy_GBps = gpu->hbm_GBps * gpu->hbm_efficiency;
  }

  // Every process reads the plan (a shared filesystem, like the launchers assume).
  auto plans = LoadJsonArg(plans_path, "--plans", io.in);
  if (!plans.ok()) return FailConfirm(io, plans.status());
  if (planner::IsNetworkPlans(*plans)) {
    executor::NetworkConfirmOptions no;
    no.layers = f.Has("--layers") ? *layers : no.layers;
    no.samples = o.samples;
    no.warmup = o.warmup;
    no.comm_iters = o.comm_iters;
    no.tool = o.tool;
    no.argv = o.argv;
    return ConfirmNetwork(io, *plans, *top, bo, no, o.out_path, f.Has("--strict-gpu"));
  }
  auto input = executor::ConfirmInputFromPlans(*plans, *top);
  if (!input.ok()) return FailConfirm(io, input.status().WithContext("--plans " + plans_path));

  auto b = backend::CreateBackend(bo);
  if (!b.ok()) return FailConfirm(io, b.status().WithContext("--backend " + backend_name));
  backend::Backend& be = **b;
  const bool root = be.rank() == 0;
  // Like with like: the device this process measures, as a GPU preset.
  {
    const MeasuredDevice dev = Measured(be);
    const std::optional<std::string>& measured = dev.preset;
    const std::string plan_gpu = input->job.cluster.gpu.name;
    const std::string& device = dev.name;
    if (f.Has("--strict-gpu") && measured.value_or("") != plan_gpu) {
      return FailConfirm(
          io, Status::InvalidArgument(
                  "--strict-gpu: the plan is for " + plan_gpu + " but this device is " + device +
                  (measured ? " (" + *measured + ")" : " (no GPU preset matches)") +
                  "; plan for this GPU, or drop --strict-gpu to compare with this GPU's "
                  "prediction"));
    }
    if (measured) {
      if (Status s = executor::MeasureOnDevice(&*input, *measured); !s.ok())
        return FailConfirm(io, s);
    }
    if (measured && *measured != plan_gpu) {
      if (root) {
        io.err << "[confirm] the plan is for " << plan_gpu << "; this device is " << device << " ("
               << *measured << "): comparing with the predictions for " << *measured
               << " (the plan's own are kept as plan_predicted_s)" << std::endl;
      }
    } else if (!measured && root && dev.kind == "cuda") {
      io.err << "[confirm] warning: " << device << " matches no GPU preset; comparing with the "
             << "plan's " << plan_gpu << " predictions" << std::endl;
    }
  }
  if (root && io.progress) {
    io.err << "[confirm] " << input->candidates.size() << " candidate(s) of a " << input->job.gpus
           << "-GPU plan for " << input->job.model.name << " on " << be.world_size() << " "
           << be.name() << " process(es)" << std::endl;
  }
  std::function<void(const std::string&)> progress;
  if (io.progress)
    progress = [&io](const std::string& line) { io.err << "[confirm] " << line << std::endl; };
  auto on_fatal = [&io, &be](const Status& s) {
    io.err << "paratune confirm: rank " << be.rank() << ": " << s.message()
           << " (ending every process: its peers would wait forever)" << std::endl;
    return kExitMeasureFailed;
  };
  auto report = executor::ConfirmCandidates(be, *input, o, progress, on_fatal);
  if (!report.ok()) return FailConfirm(io, report.status());
  bool failed = false;
  for (const executor::CandidateReport& c : report->candidates) {
    failed = failed || c.status == executor::Outcome::kFailed;
  }
  if (root) {
    PrintConfirmTable(*report, io.out);
    io.err << "[confirm] wrote " << o.out_path << std::endl;
  }
  return failed ? kExitMeasureFailed : kExitOk;
}

}  // namespace paratune::cli
