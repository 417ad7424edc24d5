// `paratune plan`: exhaustive search, ranking, Pareto fronts, --explain.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <optional>
#include <ostream>
#include <thread>

#include "cli/commands.h"
#include "cli/cmd_network.h"
#include "cli/common.h"
#include "common/strings.h"
#include "elastic/failure_policy.h"
#include "planner/goodput_request.h"
#include "planner/plans.h"
#include "scenario/scenario.h"

namespace paratune::cli {
namespace {

constexpr const char* kPlanHelp =
    R"(usage: paratune plan --model M --cluster C --gpus N|A:B[:STEP] [--global-batch B]
                     [--seq S] [--precision bf16] [--attention flash|unfused]
                     [--framework F] [--compile] [--allow-lossy] [--no-expandable-segments]
                     [--space all|megatron|deepspeed|axonn|fsdp] [--fix "pp=1,zero=3"]
                     [--objective time|tokens_per_s|mfu|memory|time-to-train] [--top K]
                     [--headroom F] [--tokens N [--fs-GBps BW] [--fs-node-GBps BW]
                     [--failures-per-gpu-hour F] [--restart-min M] [--checkpoint-save auto|sync]
                     [--gpu-hour-price P]]
                     [--explain "tp=8,pp=16,..."] [--pareto] [--threads T]
                     [--profile PROFILE.json] [--format table|json]

Answers "what is the best way to train this model on these GPUs?": enumerates
every configuration of the chosen framework family (tensor X/Y/Z, data,
pipeline + interleaving, context parallelism ring/Ulysses/FPDT, sequence
parallelism, ZeRO 0-3 and ZeRO++, host offload of optimizer and parameters,
recompute, micro-batch, placement), drops those that break a framework rule or
do not fit in GPU memory or, for what they offload (ZeRO-Offload/Infinity, FPDT
chunks), in the node's host memory (with --headroom kept free of both),
predicts the rest and ranks them. "mem_GiB" is GPU memory; a configuration
that keeps data in host memory shows "+host N" (GiB per node) after it, and
"!" when host memory is the resource nearest its limit. When memory rejects
every configuration, the table names the fewest GPUs (doubling from --gpus) at
which one fits, with its best plan. Nothing is launched: a dry run.

  --model, --cluster, --gpus, --global-batch, --seq, --precision, --attention,
  --headroom, --profile, --no-expandable-segments    as in `paratune predict --help`
  --gpus A:B[:STEP]  a range: every multiple of STEP (default: doubling from A)
                     up to B; shows what more GPUs buy (best plan per count and
                     the Pareto front of GPUs vs tokens/s). At most 64 counts,
                     B <= 16777216 (exit 2 beyond)
  --framework F      the training stack you will run: megatron (Megatron-LM/Core,
                     NeMo; TE), megatron-deepspeed, deepspeed, fsdp (PyTorch FSDP1:
                     llm-foundry, HF), torchtitan (FSDP2), axonn. Only what it can
                     express is searched, costed as it runs (its fused kernels,
                     loss, host overhead, overlap; docs/frameworks.md)
  --compile          the model runs under torch.compile (fsdp, deepspeed, torchtitan)
  --space F          without --framework: which stacks to compare (default all),
                     each configuration costed by the framework that runs it:
                       megatron   megatron: TP(+SP), PP(+interleaving, uneven stages), CP ring/a2a,
                                  distributed optimizer
                       deepspeed  megatron-deepspeed: TP, PP, ZeRO 0-3 + ZeRO++, Ulysses/FPDT,
                                  ZeRO-Offload/Infinity to host memory (clusters
                                  that state host_memory_GiB)
                       axonn      axonn: 3D tensor gx·gy·gz + data
                       fsdp       fsdp (FSDP/HSDP) and torchtitan (FSDP2 + TP/SP, PP, ring CP)
                     Overlaps are on where the framework offers them.
  --allow-lossy      also offer ZeRO++'s quantized collectives (qwZ int8 weights,
                     qgZ int4 gradients): they change the training numerics
  --fix SPEC         pin fields, e.g. "pp=1,zero=3,recompute=full" (keys of --config;
                     also uneven_pp=false: whole pipeline stages only); on a
                     mixture-of-experts model zero=3 and host offload are
                     refused (not priced for experts)
  --objective O      rank by time (default), tokens_per_s, mfu, memory, or
                     time-to-train: the expected wall time to train --tokens,
                     failures, restarts and checkpoints included (needs --tokens;
                     re-ranks the rows a step-time search keeps: the leaders
                     and --top distinct predictions, so a larger --top widens it)
  --tokens N         price the run to a token budget, not one step: N tokens
                     with a decimal suffix (15T = 15e12, 300B, 2.5M). Each row
                     then shows the checkpoint its framework writes (Megatron
                     dist-ckpt, torch DCP, DeepSpeed ZeRO files: bytes from the
                     plan's sharding), the step's stall per save (the whole
                     write, or with an async save only the copy to host
                     memory), the load on restart, Daly's optimal checkpoint
                     interval, the fraction of wall time that trains, the days
                     and GPU-hours to the budget. A failure on any GPU stops
                     the job and loses the work since the last checkpoint
  --fs-GBps BW       filesystem bandwidth the job gets, aggregate, GB/s (default
                     500: a tenth of Perlmutter scratch's 5 TB/s; an assumption)
  --fs-node-GBps BW  filesystem bandwidth one node gets, GB/s (default: the
                     node's network injection bandwidth)
  --failures-per-gpu-hour F
                     job-stopping failures per GPU-hour (default 1.97e-5: Llama
                     3 405B's 419 unexpected interruptions in 54 days on 16,384
                     H100s, arXiv 2407.21783 §3.3.4); the job's mean time
                     between failures is 1 / (F x GPUs)
  --restart-min M    minutes from a failure to training again, before the load
                     (default 10: MegaScale's detection and diagnosis on
                     10,000+ GPUs, NSDI'24 §6.3; a slower stack restarts later)
  --checkpoint-save S  auto (default): asynchronous where the framework offers
                     it (Megatron-Core --async-save, torchtitan
                     checkpoint.async_mode, DeepSpeed's decoupled writer without
                     pipeline stages), which `emit` turns on with the interval;
                     sync: every save stalls the step for the write
  --checkpoint-min-interval-min M
                     never save more often than every M minutes (default 10:
                     an assumption; cheap async saves would otherwise be
                     written back to back, a cost the model does not price);
                     0: only the write itself bounds an async save
  --repair-h H       hours a failed node takes to come back (default 4: an
                     assumption; OPT-175B's logbook says replacing one "can
                     take hours"). With --tokens the table prices rank 1's
                     failures three ways: a hot spare node (idle spares paid
                     for), waiting for the repair, or continuing on the GPUs
                     left in replan's best layout until the node is back
  --gpu-hour-price P price of one GPU-hour: adds the cost to the budget
  --top K            rows to print (default 10), cut from the ranking of the whole
                     space: rows whose predictions are identical collapse into
                     one ("+N same"); leaders within the winner's uncertainty
                     band (marked ~) are ordered simplest first
  --pareto           also print the time vs memory-per-GPU Pareto front
  --explain SPEC     why this configuration was rejected, or where it ranks and
                     what separates it from the winner
  --threads T        worker threads (default: all cores)
  --format F         table (default) | json (schema paratune.plans/v1)

exit codes: 0 ok, 2 invalid input, 3 no configuration fits

Networks that are not transformer stacks: --network N (a preset of `paratune
presets networks` or a network JSON file) with --cluster, --gpus N, and
--global-batch B ranks every layout the network model expresses (ddp, zero1,
fsdp; micro-batches dividing each replica's share; spatial splits of 3D
networks; tensor groups within an NVLink domain) by step time among those
that fit within --headroom, and prints the --top fastest (--grad-bytes,
--optimizer-state-bytes and --precision as `paratune predict --network`;
JSON: schema paratune.network_plans/v1, which confirm, emit and replan
read). --framework pytorch ranks only what PyTorch's own DDP, ZeRO-1 and
FSDP2 run (no spatial or tensor split); --framework torchtitan only what
torchtitan's FLUX runs (flux1-schnell, fsdp): every ranked plan then emits.

examples:
  paratune plan --network unet3d-kits19 --cluster dgx-h100 --gpus 64 --global-batch 64
  paratune plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 --global-batch 1536
  paratune plan --model llama3-70b --cluster dgx-h100 --gpus 256:2048 --global-batch 1024 \
      --seq 8192 --space megatron --format json > plans.json
  paratune plan --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --global-batch 2048 \
      --seq 8192 --objective time-to-train --tokens 15T --fs-GBps 2000 --gpu-hour-price 2
)";

planner::SearchResult RunThreaded(const planner::Search& search, int threads) {
  return RunSearchThreaded(search, threads);
}

// The largest GPU count a job may name (the request's /gpus cap, ParseJob) and
// the most counts one range may hold: a plan is a search per count.
constexpr int64_t kMaxGpus = int64_t{1} << 24;
constexpr size_t kMaxGpuCounts = 64;

Result<std::vector<int>> GpuCounts(const std::string& spec) {
  std::vector<std::string> parts = Split(spec, ':');
  const std::string range = "--gpus must be in [1, " + std::to_string(kMaxGpus) + "]";
  if (parts.size() == 1) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(parts[0], "--gpus"));
    if (n < 1 || n > kMaxGpus) return Status::InvalidArgument(range);
    return std::vector<int>{static_cast<int>(n)};
  }
  if (parts.size() > 3) return Status::InvalidArgument("--gpus: expected N, A:B or A:B:STEP");
  PT_ASSIGN_OR_RETURN(int64_t a, ParseInt(parts[0], "--gpus"));
  PT_ASSIGN_OR_RETURN(int64_t b, ParseInt(parts[1], "--gpus"));
  if (a < 1 || b < a) return Status::InvalidArgument("--gpus A:B needs 1 <= A <= B");
  if (b > kMaxGpus) return Status::InvalidArgument(range);
  int64_t step = 0;  // 0: doubling
  if (parts.size() == 3) {
    PT_ASSIGN_OR_RETURN(step, ParseInt(parts[2], "--gpus"));
    if (step < 1) return Status::InvalidArgument("--gpus: STEP must be positive");
  }
  std::vector<int> out;
  for (int64_t g = a; g <= b; g = step > 0 ? g + step : g * 2) {
    if (out.size() == kMaxGpuCounts) {
      return Status::InvalidArgument("--gpus: the range has more than " + std::to_string(kMaxGpuCounts) +
                                     " counts (raise STEP)");
    }
    out.push_back(static_cast<int>(g));
  }
  return out;
}

std::string TopTerms(const planner::Prediction& p) {
  const auto& b = p.breakdown;
  std::pair<double, const char*> terms[] = {
      {b.compute_s, "compute"}, {b.comm_x_s, "comm_x"}, {b.comm_y_s, "comm_tp"},
      {b.comm_z_s, "comm_z"}, {b.comm_cp_s, "comm_cp"}, {b.comm_data_s, "comm_dp"},
      {b.comm_pp_s, "comm_pp"}, {b.bubble_s, "bubble"}, {b.optimizer_s, "optimizer"},
      {b.offload_s, "offload"}, {b.host_s, "host"}};
  std::sort(std::begin(terms), std::end(terms), [](auto& x, auto& y) { return x.first > y.first; });
  return std::string(terms[0].second) + " " + FormatFixed(100 * terms[0].first / p.iteration_time_s, 0) +
         "%, " + terms[1].second + " " + FormatFixed(100 * terms[1].first / p.iteration_time_s, 0) + "%";
}

// The ranked rows as a table. A row ranked above a faster one is followed by
// a line saying why (`notes`; the Pareto listing, ordered by memory, leaves
// them out), and the footer names the fastest row.
void PrintCandidates(const std::vector<planner::RankedPlan>& rows, std::ostream& out,
                     bool notes = true, const char* ranked_by = planner::kRankedBy) {
  out << std::right << std::setw(4) << "rank" << "  " << std::left << std::setw(19) << "framework"
      << std::setw(52) << "config" << std::right << std::setw(10) << "time_s" << std::setw(8) << "±%"
      << std::setw(11) << "tokens/s" << std::setw(7) << "MFU%" << std::setw(9) << "mem_GiB" << "  top terms\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& p = rows[i].best.prediction;
    std::string cfg = planner::ConfigText(rows[i].best.framework, rows[i].best.config);
    if (!rows[i].alternatives.empty()) cfg += " (+" + std::to_string(rows[i].alternatives.size()) + " same)";
    out << std::setw(4) << i + 1 << (rows[i].within_band ? "~ " : "  ") << std::left
        << std::setw(19) << planner::FrameworkName(rows[i].best.framework) << std::setw(52) << cfg
        << std::right << std::setw(10) << FormatFixed(p.iteration_time_s, 3) << std::setw(8)
        << FormatFixed(100 * p.uncertainty, 0) << std::setw(11) << FormatFixed(p.tokens_per_s, 0)
        << std::setw(7) << FormatFixed(100 * p.mfu, 1) << std::setw(9)
        << FormatFixed(p.memory.reserved_GiB, 1) << "  " << TopTerms(p)
        << (p.above_published_mfu ? "  !MFU above published" : "");
    if (p.memory.host_node_GiB > 0) {
      out << "  +host " << FormatFixed(p.memory.host_node_GiB, 0)
          << (std::string(p.memory.Binding()) == "host_memory" ? "!" : "");
    }
    out << "\n";
    if (notes && !rows[i].rank_note.empty()) out << "        ^ " << rows[i].rank_note << "\n";
  }
  int above = 0;
  for (const auto& r : rows) above += r.best.prediction.above_published_mfu;
  if (!rows.empty() && rows.front().best.prediction.pessimistic_time_s > 0) {
    out << ranked_by << " (docs/model.md, Ranking)\n";
    // The fastest row, among those shown and those their notes name.
    int fastest = 1;
    double fastest_s = rows.front().best.prediction.iteration_time_s;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].best.prediction.iteration_time_s < fastest_s) {
        fastest = static_cast<int>(i) + 1;
        fastest_s = rows[i].best.prediction.iteration_time_s;
      }
      if (rows[i].faster_rank > 0 && rows[i].faster_time_s < fastest_s) {
        fastest = rows[i].faster_rank;
        fastest_s = rows[i].faster_time_s;
      }
    }
    out << "fastest: #" << fastest << " " << FormatFixed(fastest_s, 3) << " s\n";
  }
  if (above > 0) {
    out << "! " << above << " predicted above the best published MFU for this GPU and precision ("
        << FormatFixed(100 * rows.front().best.prediction.published_mfu_ceiling, 0)
        << " %): ranked as if at it\n";
  }
  int within = 0;
  for (const auto& r : rows) within += r.within_band;
  if (within > 1) {
    out << "~ " << within << " leaders are within the winner's uncertainty band (±"
        << FormatFixed(100 * rows.front().best.prediction.uncertainty, 0)
        << " %): among them the simpler configuration is ranked first (docs/model.md, Ranking)\n";
  }
}

// What set a plan's checkpoint interval, in words.
std::string IntervalWords(const planner::Goodput& r, const planner::GoodputOptions& g) {
  const std::string name = r.interval_bound;
  const std::string daly = "Daly's optimum (Young's " + FormatFixed(r.interval_young_s / 60, 1) + " min)";
  if (name == "min_interval") {
    return "the shortest interval, " + FormatFixed(g.min_interval_s / 60, 1) + " min" +
           (g.min_interval_s == planner::kDefaultMinCheckpointIntervalS
                ? " (assumed; --checkpoint-min-interval-min)"
                : "") +
           ", above " + daly;
  }
  if (name == "write") return "the async write itself (a save waits for the previous one), above " + daly;
  if (name == "step") return "one step, above " + daly;
  return daly;
}

// The ranked rows' runs to the token budget (planner/goodput.h): the
// checkpoint each writes, its save and load, the interval, the effective
// fraction, the time to train and its cost, and the inputs they assume.
void PrintGoodput(const std::vector<planner::RankedPlan>& rows, const planner::SearchOptions& opt,
                  std::ostream& out) {
  const planner::GoodputOptions& g = opt.goodput;
  out << "\ntime to train " << FormatFixed(g.tokens / 1e12, 3) << "T tokens"
      << " (docs/model.md, Time to train):\n";
  out << std::right << std::setw(4) << "rank" << std::setw(20) << "checkpoint" << std::setw(10)
      << "total_GB" << std::setw(9) << "rank_GB" << std::setw(8) << "save" << std::setw(9)
      << "stall_s" << std::setw(8) << "load_s" << std::setw(11) << "interval" << std::setw(7)
      << "eff%" << std::setw(8) << "days" << std::setw(12) << "GPU-hours"
      << (g.gpu_hour_price > 0 ? "        cost" : "") << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].goodput) continue;
    const planner::Goodput& r = *rows[i].goodput;
    const planner::CheckpointEstimate& ck = r.checkpoint;
    const std::string interval = FormatFixed(r.interval_s / 60, 1) + " min";
    out << std::setw(4) << i + 1 << std::setw(20) << planner::CheckpointFormatName(ck.format)
        << std::setw(10) << FormatFixed(ck.total_bytes / 1e9, 0) << std::setw(9)
        << FormatFixed(ck.max_rank_bytes / 1e9, 2) << std::setw(8) << (ck.async ? "async" : "sync")
        << std::setw(9) << FormatFixed(ck.blocking_s, 2) << std::setw(8)
        << FormatFixed(ck.load_s, 1) << std::setw(11) << interval << std::setw(7)
        << FormatFixed(100 * r.effective_fraction, 1) << std::setw(8)
        << FormatFixed(r.time_to_train_s / 86400, 2) << std::setw(12)
        << FormatFixed(r.gpu_hours, 0);
    if (g.gpu_hour_price > 0) out << std::setw(12) << FormatFixed(r.cost, 0);
    out << "\n";
  }
  if (!rows.empty() && rows.front().goodput) {
    const planner::Goodput& r = *rows.front().goodput;
    out << "failures: " << FormatFixed(g.failures_per_gpu_hour * 1e6, 2) << " per million GPU-hours"
        << (g.failures_per_gpu_hour == planner::kDefaultFailuresPerGpuHour
                ? " (Llama 3 405B's 419 unexpected interruptions in 54 days on 16,384 H100s)"
                : "")
        << ", one every " << FormatFixed(r.job_mtbf_s / 3600, 1) << " h on "
        << rows.front().best.config.world()
        << " GPUs; restart " << FormatFixed(g.restart_s / 60, 1) << " min"
        << (g.restart_s == planner::kDefaultRestartS ? " (MegaScale's; --restart-min)" : "")
        << " + load; filesystem " << FormatFixed(g.fs_GBps, 0) << " GB/s aggregate"
        << (g.fs_node_GBps > 0 ? ", " + FormatFixed(g.fs_node_GBps, 0) + " GB/s per node"
                               : std::string(", the node's NICs per node"))
        << "; interval for #1: " << IntervalWords(r, g) << "\n";
  }
}

// The three policies as a table: what each failure costs, the spares held,
// and with the budget the days, effective fraction and GPU-hours.
void PrintPolicies(const planner::FailurePolicies& f, std::ostream& out) {
  out << "\nwhen a node fails (rank 1; a node back after " << FormatFixed(f.repair_s / 3600, 1) << " h"
      << (f.repair_s == planner::kDefaultRepairS ? ", assumed: --repair-h" : "") << "; "
      << FormatFixed(f.nodes_in_repair, 2) << " nodes in repair on average):\n";
  out << std::left << std::setw(8) << "policy" << std::right << std::setw(16) << "per failure"
      << std::setw(8) << "spares" << std::setw(7) << "eff%" << std::setw(8) << "days" << std::setw(12)
      << "GPU-hours" << "  what happens\n";
  const planner::PolicyOutcome* all[] = {&f.spare, &f.wait, f.shrink ? &*f.shrink : nullptr};
  for (const planner::PolicyOutcome* p : all) {
    if (p == nullptr) continue;
    const std::string name = p->name;
    std::string what;
    if (name == "spare") {
      what = "a spare node replaces it: restart and load";
    } else if (name == "wait") {
      what = "no spare: wait for the node, then restart and load";
    } else {
      what = "continue on " + std::to_string(f.shrink_to->gpus) + " GPUs as " + f.shrink_to->config +
             " at " + FormatFixed(100 * f.shrink_to->relative_tokens_per_s, 1) +
             " % throughput (load " + FormatFixed(f.shrink_to->load_s, 0) +
             " s), back to the full allocation when the node returns";
    }
    out << std::left << std::setw(8) << name << std::right << std::setw(12)
        << FormatFixed(p->per_failure_s / 60, 1) << " min" << std::setw(8) << p->spare_nodes
        << std::setw(7) << FormatFixed(100 * p->effective_fraction, 1) << std::setw(8)
        << FormatFixed(p->time_to_train_s / 86400, 2) << std::setw(12) << FormatFixed(p->gpu_hours, 0)
        << "  " << what << "\n";
  }
  if (!f.shrink) out << "(no layout fits on the GPUs a lost node leaves: no shrink policy)\n";
  out << "trains soonest: " << f.soonest << "; fewest GPU-hours, spares included: "
      << f.fewest_gpu_hours << "\n";
}

void PrintSummary(const planner::PlanSection& s, std::ostream& out) {
  out << JobHeadline(s.job) << ", " << PrecisionLabel(s.job)
      << (s.job.precision_defaulted
              ? " (the best " + s.job.cluster.gpu.name + " supports; --precision to choose)"
              : std::string())
      << "\n";
  out << "searched " << s.result.evaluated << " configurations in " << FormatFixed(s.search_time_s, 3)
      << " s: " << s.result.feasible << " fit";
  std::vector<std::pair<int64_t, int>> rej;
  for (int i = 1; i < planner::kNumReasons; ++i) {
    if (s.result.rejected[i] > 0) rej.push_back({s.result.rejected[i], i});
  }
  std::sort(rej.rbegin(), rej.rend());
  for (auto& [n, i] : rej) out << ", " << n << " " << planner::ReasonName(static_cast<planner::Reason>(i));
  out << "\n";
}

// Per-term difference between a config and the winner, largest first.
void PrintDifference(const planner::Prediction& mine, const planner::Prediction& best, std::ostream& out) {
  const auto &a = mine.breakdown, &b = best.breakdown;
  std::pair<double, const char*> d[] = {
      {a.compute_s - b.compute_s, "compute"}, {a.comm_x_s - b.comm_x_s, "comm x"},
      {a.comm_y_s - b.comm_y_s, "comm tp/y"}, {a.comm_z_s - b.comm_z_s, "comm z"},
      {a.comm_cp_s - b.comm_cp_s, "comm cp"}, {a.comm_data_s - b.comm_data_s, "comm data"},
      {a.comm_pp_s - b.comm_pp_s, "comm pp"}, {a.bubble_s - b.bubble_s, "bubble"},
      {a.optimizer_s - b.optimizer_s, "optimizer"}, {a.offload_s - b.offload_s, "offload"},
      {a.host_s - b.host_s, "host"}};
  std::sort(std::begin(d), std::end(d), [](auto& x, auto& y) { return std::abs(x.first) > std::abs(y.first); });
  for (auto& [v, name] : d) {
    if (std::abs(v) < 1e-4 * best.iteration_time_s) continue;
    out << "  " << std::left << std::setw(11) << name << std::right << (v > 0 ? " +" : " ")
        << FormatFixed(v, 3) << " s\n";
  }
}

// A positive number flag, or its default.
Result<double> PositiveFlag(const Flags& flags, const char* name, double fallback) {
  auto text = flags.Get(name);
  if (!text) return fallback;
  auto v = ParseDouble(*text, name);
  if (!v.ok()) return v.status();
  if (!(*v > 0) || !std::isfinite(*v)) {
    return Status::InvalidArgument(std::string(name) + " must be a positive number");
  }
  return *v;
}

// A flag in `unit` that must be a finite number >= 0, times `scale` (hours
// or minutes to seconds); `fallback` when the flag is absent.
Result<double> NonNegativeFlag(const Flags& flags, const char* name, const char* unit, double scale,
                               double fallback) {
  auto text = flags.Get(name);
  if (!text) return fallback;
  auto v = ParseDouble(*text, name);
  if (!v.ok()) return v.status();
  if (!(*v >= 0) || !std::isfinite(*v)) {
    return Status::InvalidArgument(std::string(name) + " must be a number of " + unit + " >= 0");
  }
  return *v * scale;
}

// The run beyond one step (planner/goodput.h) from --tokens, --fs-GBps,
// --fs-node-GBps, --failures-per-gpu-hour, --restart-min, --checkpoint-save,
// --checkpoint-min-interval-min, --repair-h and --gpu-hour-price. --objective time-to-train needs --tokens; the other
// flags without --tokens are refused, since they would change nothing.
Result<planner::GoodputOptions> GoodputFromFlags(const Flags& flags, planner::Objective objective) {
  planner::GoodputOptions g;
  const char* needs_tokens[] = {"--fs-GBps",        "--fs-node-GBps",
                                "--failures-per-gpu-hour", "--restart-min",
                                "--checkpoint-save", "--checkpoint-min-interval-min",
                                "--repair-h",       "--gpu-hour-price"};
  if (!flags.Has("--tokens")) {
    if (objective == planner::Objective::kTimeToTrain) {
      return Status::InvalidArgument(
          "--objective time-to-train needs --tokens, the token budget to train "
          "(e.g. --tokens 15T)");
    }
    for (const char* f : needs_tokens) {
      if (flags.Has(f)) {
        return Status::InvalidArgument(std::string(f) +
                                       " prices a run to a token budget: give --tokens too");
      }
    }
    return g;
  }
  PT_ASSIGN_OR_RETURN(g.tokens, planner::ParseTokenBudget(*flags.Get("--tokens"), "--tokens"));
  PT_ASSIGN_OR_RETURN(g.fs_GBps, PositiveFlag(flags, "--fs-GBps", g.fs_GBps));
  PT_ASSIGN_OR_RETURN(g.fs_node_GBps, PositiveFlag(flags, "--fs-node-GBps", 0));
  if (flags.Has("--failures-per-gpu-hour")) {
    auto v = ParseDouble(*flags.Get("--failures-per-gpu-hour"), "--failures-per-gpu-hour");
    if (!v.ok()) return v.status();
    if (!(*v >= 0) || !std::isfinite(*v)) {
      return Status::InvalidArgument("--failures-per-gpu-hour must be a number >= 0");
    }
    g.failures_per_gpu_hour = *v;
  }
  PT_ASSIGN_OR_RETURN(const double restart_min,
                      PositiveFlag(flags, "--restart-min", g.restart_s / 60));
  g.restart_s = restart_min * 60;
  const std::string save = flags.GetOr("--checkpoint-save", "auto");
  if (save != "auto" && save != "sync") {
    return Status::InvalidArgument("--checkpoint-save must be auto or sync");
  }
  g.save = save == "sync" ? planner::CheckpointSave::kSync : planner::CheckpointSave::kAuto;
  PT_ASSIGN_OR_RETURN(g.repair_s, NonNegativeFlag(flags, "--repair-h", "hours", 3600, g.repair_s));
  PT_ASSIGN_OR_RETURN(g.min_interval_s, NonNegativeFlag(flags, "--checkpoint-min-interval-min",
                                                        "minutes", 60, g.min_interval_s));
  PT_ASSIGN_OR_RETURN(g.gpu_hour_price, PositiveFlag(flags, "--gpu-hour-price", 0));
  return g;
}

// The search's options from --space, --objective, --top, --pareto,
// --allow-lossy and --fix.
Result<planner::SearchOptions> OptionsFromFlags(const Flags& flags) {
  planner::SearchOptions opt;
  auto fam = planner::ParseFamily(flags.GetOr("--space", "all"));
  if (!fam.ok()) return fam.status();
  opt.family = *fam;
  auto obj = planner::ParseObjective(flags.GetOr("--objective", "time"));
  if (!obj.ok()) return obj.status();
  opt.objective = *obj;
  auto top = ParseInt(flags.GetOr("--top", "10"), "--top");
  if (!top.ok() || *top < 1 || *top > 10000) {
    return Status::InvalidArgument("--top must be in [1, 10000]");
  }
  opt.top_k = static_cast<int>(*top);
  opt.keep_pareto = flags.Has("--pareto");
  opt.allow_lossy = flags.Has("--allow-lossy");
  if (auto fix = flags.Get("--fix")) {
    auto kv = planner::ConfigTextToPairs(*fix);
    if (!kv.ok()) return kv.status().WithContext("--fix");
    opt.fixed = *kv;
    PT_RETURN_IF_ERROR(planner::ValidateFixed(opt.fixed));
  }
  PT_ASSIGN_OR_RETURN(opt.goodput, GoodputFromFlags(flags, opt.objective));
  return opt;
}

// The plan's first row, the winner `--explain` compares against: the
// simplest of the leaders' band (RankForTrust), which need not be the fastest
// by predicted time. Empty when nothing fits.
std::optional<planner::Candidate> ListedFirst(const planner::PlanSection& sec,
                                              const planner::SearchOptions& opt) {
  const auto rows = planner::RankForTrust(sec.result.pool, sec.job, opt, 1);
  if (rows.empty()) return std::nullopt;
  return rows.front().best;
}

// `--explain CONFIG`: where the configuration ranks among those that fit,
// or why it is rejected, and where its time goes against the winner.
int ExplainConfig(const std::string& text, const planner::PlanSection& sec,
                  const std::vector<const planner::CostModel*>& model_ptrs,
                  const planner::Search& search, const planner::SearchOptions& opt, int threads,
                  const std::string& format, Io io) {
  auto cj = planner::ConfigStringToJson(text);
  if (!cj.ok()) return UsageError(io, "plan", cj.status().WithContext("--explain"));
  auto cfg = planner::ParseConfig(*cj, "/explain", sec.job.gpus);
  if (!cfg.ok()) return UsageError(io, "plan", cfg.status());
  OrderedJson ej;
  ej["schema"] = "paratune.explain/v1";
  ej["config"] = planner::ConfigToJson(*cfg);
  // Explain under the first searched framework that can run the config.
  const planner::CostModel* ecm = model_ptrs.front();
  for (const planner::CostModel* m : model_ptrs) {
    if (m->Supports(*cfg)) {
      ecm = m;
      break;
    }
  }
  const planner::CostModel& cm = *ecm;
  const std::optional<planner::Candidate> winner = ListedFirst(sec, opt);
  ej["framework"] = planner::FrameworkName(cm.training().framework);
  const planner::Reason r = cm.CheckRules(*cfg);
  if (r != planner::Reason::kOk) {
    ej["status"] = "rejected";
    ej["reason"] = planner::ReasonName(r);
    ej["field"] = planner::ReasonField(r);
    ej["detail"] = cm.Explain(r, *cfg);
  } else {
    planner::Prediction p = cm.Predict(*cfg);
    ej["in_space"] = search.InSpace(*cfg);
    ej["prediction"] = planner::PredictionFields(p, cm);
    if (!p.fits) {
      ej["status"] = "rejected";
      ej["reason"] = planner::ReasonName(p.reason);
      ej["detail"] = ej["prediction"]["reason_detail"];
    } else {
      planner::SearchOptions o2 = opt;
      o2.count_faster_than_s = p.iteration_time_s;
      o2.top_k = 1;
      o2.keep_pareto = false;
      planner::Search s2(model_ptrs, o2);
      planner::SearchResult r2 = RunThreaded(s2, threads);
      ej["status"] = "feasible";
      ej["rank"] = r2.faster + 1;
      ej["of"] = r2.feasible;
    }
    if (winner) {
      ej["winner"] = planner::ConfigToString(winner->config);
      ej["winner_time_s"] = winner->prediction.iteration_time_s;
    }
  }
  if (format == "json") {
    io.out << ej.dump(2) << "\n";
  } else {
    io.out << "config   " << planner::ConfigToString(*cfg) << "\n";
    if (ej["status"] == "rejected") {
      io.out << "rejected: " << ej["reason"].get<std::string>() << ": " << ej["detail"].get<std::string>() << "\n";
    } else {
      planner::Prediction p = cm.Predict(*cfg);
      io.out << "rank     " << ej["rank"].get<int64_t>() << " of " << ej["of"].get<int64_t>()
             << " fitting configurations by predicted time"
             << (ej["in_space"].get<bool>() ? "" : " (outside --space)") << "\n";
      io.out << "time     " << FormatFixed(p.iteration_time_s, 3) << " s";
      if (winner) {
        io.out << " vs winner " << FormatFixed(winner->prediction.iteration_time_s, 3) << " s ("
               << planner::ConfigToString(winner->config)
               << ", the plan's first row)\nwhere the time goes, relative to the winner:\n";
        PrintDifference(p, winner->prediction, io.out);
      } else {
        io.out << "\n";
      }
    }
  }
  return kExitOk;
}

// One GPU count's table: the summary, the ranked rows (or why nothing fits
// and where something does), a faster plan the framework refuses, and with
// `pareto` the time-vs-memory front.
void PrintSection(const planner::PlanSection& s, const planner::SearchOptions& opt, bool pareto,
                  std::ostream& out) {
  PrintSummary(s, out);
  if (s.result.evaluated == 0) {
    out << "nothing to search: the space offers no configuration with the pinned fields"
              " (--fix) for this job\n";
  } else if (s.result.top.empty()) {
    out << "no configuration fits; the most common reason is shown above\n";
    if (s.fits_from) {
      const planner::Candidate& b = s.fits_from->best;
      out << "fewest GPUs that fit (doubling from " << s.job.gpus << "): " << s.fits_from->gpus
             << ", where the best is " << planner::FrameworkName(b.framework) << " "
             << planner::ConfigText(b.framework, b.config) << " at "
             << FormatFixed(b.prediction.tokens_per_s / 1e3, 1) << "k tokens/s, "
             << FormatFixed(b.prediction.memory.reserved_GiB, 1) << " GiB per GPU (--gpus "
             << s.fits_from->gpus << ")\n";
      if (opt.goodput.enabled()) {
        planner::Job there = s.job;
        there.gpus = s.fits_from->gpus;
        const planner::Goodput g =
            planner::GoodputOf(there, b.framework, b.config, b.prediction, opt.goodput);
        out << "  there, to the budget: " << FormatFixed(g.time_to_train_s / 86400, 2)
            << " days at " << FormatFixed(100 * g.effective_fraction, 1) << " % effective, "
            << FormatFixed(g.gpu_hours, 0) << " GPU-hours"
            << (g.cost > 0 ? ", cost " + FormatFixed(g.cost, 0) : std::string()) << "\n";
      }
    } else if (planner::MemoryBinds(s.result)) {
      out << "nothing fits at up to " << planner::MostGpusToTry(s.job, kMaxGpus)
             << " GPUs either (doubling from " << s.job.gpus
             << ", up to 1024 times it or the cluster's size)\n";
    }
  } else {
    const auto rows = planner::RankForTrust(s.result.pool, s.job, opt, opt.top_k);
    PrintCandidates(rows, out, /*notes=*/true,
                    opt.objective == planner::Objective::kTimeToTrain
                        ? planner::kRankedByTimeToTrain
                        : planner::kRankedBy);
    if (opt.goodput.enabled()) PrintGoodput(rows, opt, out);
  }
  if (const planner::Candidate* faster = planner::FasterIfAllowed(s.result)) {
    // A note, never a candidate: the framework refuses it at start-up.
    const planner::Candidate& f = *faster;
    planner::TrainingSpec t = s.job.training;
    t.framework = f.framework;
    const planner::CostModel cm(s.job.model, t, s.job.cluster, s.job.gpus);
    std::string why;
    const planner::FrameworkRuleRef* rule = cm.BrokenRule(f.config, &why);
    out << "\nnote: fastest if " << planner::FrameworkName(f.framework) << " allowed it: "
           << planner::ConfigText(f.framework, f.config) << " at " << FormatFixed(f.prediction.iteration_time_s, 3)
           << " s; " << planner::FrameworkName(f.framework) << " refuses it at start-up: " << why;
    if (rule) out << " (" << rule->source << ")";
    out << "\n";
  }
  if (pareto && !s.result.pareto.empty()) {
    out << "\nPareto front (time vs memory per GPU):\n";
    PrintCandidates(planner::RankForTrust(s.result.pareto, planner::Objective::kMemory,
                                          static_cast<int>(s.result.pareto.size())),
                    out, /*notes=*/false);
  }
}

// A sweep's scaling table: each count's pick (planner::PicksAcrossCounts),
// what it changes from the count above and why.
void PrintScaling(const std::vector<planner::PlanSection>& sections,
                  const planner::SearchOptions& opt, std::ostream& out) {
  const bool by_goodput = opt.objective == planner::Objective::kTimeToTrain;
  out << "\nscaling (best plan per GPU count" << (by_goodput ? " by time to train the budget" : "")
      << "; * = on the GPUs vs tokens/s Pareto front; a\n"
          "`changed:` line names what the pick changes from the count above, beyond its replicas; a\n"
          "count keeps the previous layout while it is among the count's leaders; `why:` says what\n"
          "made it lose, or what a kept layout gives up):\n";
  out << std::setw(7) << "gpus" << std::setw(11) << "time_s" << std::setw(12) << "tokens/s"
         << std::setw(13) << "tok/s/GPU" << std::setw(7) << "MFU%" << "  config\n";
  double best = 0;
  const auto picks = planner::PicksAcrossCounts(sections, opt);
  for (size_t i = 0; i < sections.size(); ++i) {
    out << std::setw(7) << sections[i].job.gpus;
    if (!picks[i]) {
      out << "   (nothing fits)\n";
      continue;
    }
    const planner::Candidate& b = picks[i]->best;
    const auto& p = b.prediction;
    const bool front = p.tokens_per_s > best;
    best = std::max(best, p.tokens_per_s);
    out << std::setw(11) << FormatFixed(p.iteration_time_s, 3) << std::setw(12)
           << FormatFixed(p.tokens_per_s, 0) << std::setw(13)
           << FormatFixed(p.tokens_per_s / sections[i].job.gpus, 1) << std::setw(7)
           << FormatFixed(100 * p.mfu, 1) << (front ? " * " : "   ")
           << planner::ConfigText(b.framework, b.config) << "\n";
    // With a token budget: what more GPUs buy in days and cost the GPU-hours.
    if (opt.goodput.enabled()) {
      const planner::Goodput g =
          planner::GoodputOf(sections[i].job, b.framework, b.config, p, opt.goodput);
      out << "          to the budget: " << FormatFixed(g.time_to_train_s / 86400, 2)
          << " days at " << FormatFixed(100 * g.effective_fraction, 1) << " % effective, "
          << FormatFixed(g.gpu_hours, 0) << " GPU-hours"
          << (g.cost > 0 ? ", cost " + FormatFixed(g.cost, 0) : std::string()) << "\n";
    }
    // What the pick changes from the previous count's, beyond its
    // replicas, and why (or why a kept layout is not this count's rank 1).
    const std::vector<std::string>& changed = picks[i]->changed;
    for (size_t k = 0; k < changed.size(); ++k) {
      out << (k == 0 ? "          changed: " : ", ") << changed[k]
             << (k + 1 == changed.size() ? "\n" : "");
    }
    if (!picks[i]->why.empty()) out << "          why: " << picks[i]->why << "\n";
  }
}

}  // namespace

int RunPlan(const Args& args, Io io) {
  Flags flags({"--request",
               "--model",
               "--cluster",
               "--gpus",
               "--global-batch",
               "--seq",
               "--precision",
               "--attention",
               "--headroom",
               "--profile",
               "--space",
               "--fix",
               "--objective",
               "--top",
               "--explain",
               "--threads",
               "--format",
               "--framework",
               "--tokens",
               "--fs-GBps",
               "--fs-node-GBps",
               "--failures-per-gpu-hour",
               "--restart-min",
               "--checkpoint-save",
               "--checkpoint-min-interval-min",
               "--repair-h",
               "--gpu-hour-price",
               "--network",
               "--grad-bytes",
               "--optimizer-state-bytes"},
              {"--help", "--pareto", "--compile", "--allow-lossy", "--no-expandable-segments"},
              {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "plan", kPlanHelp)) return *done;
  if (flags.Has("--network")) {
    for (const char* f : {"--request", "--model", "--seq", "--attention", "--profile", "--space",
                          "--fix", "--objective", "--explain", "--tokens", "--compile", "--pareto",
                          "--no-expandable-segments"}) {
      if (flags.Has(f)) {
        return UsageError(io, "plan", Status::InvalidArgument(std::string(f) + " does not apply with --network"));
      }
    }
    return PlanNetworkCommand(flags, io);
  }
  for (const char* f : {"--grad-bytes", "--optimizer-state-bytes"}) {
    if (flags.Has(f)) {
      return UsageError(io, "plan", Status::InvalidArgument(std::string(f) + " applies with --network only"));
    }
  }
  auto options = OptionsFromFlags(flags);
  if (!options.ok()) return UsageError(io, "plan", options.status());
  planner::SearchOptions opt = *options;
  const std::string format = flags.GetOr("--format", "table");
  if (format != "table" && format != "json") {
    return UsageError(io, "plan", Status::InvalidArgument("--format must be table or json"));
  }
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (auto t = flags.Get("--threads")) {
    auto n = ParseInt(*t, "--threads");
    if (!n.ok() || *n < 1 || *n > 1024) return UsageError(io, "plan", Status::InvalidArgument("--threads must be in [1, 1024]"));
    threads = static_cast<int>(*n);
  }

  // The job: flags (or --request) → a predict-style request per GPU count.
  Json base;
  std::vector<int> counts;
  if (auto path = flags.Get("--request")) {
    auto doc = LoadJsonArg(*path, "--request", io.in);
    if (!doc.ok()) return UsageError(io, "plan", doc.status());
    base = *doc;
    if (!base.is_object() || !base.contains("gpus") || !base["gpus"].is_number_integer()) {
      return UsageError(io, "plan", Status::InvalidArgument("/gpus: is required (an integer)"));
    }
    counts = {base["gpus"].get<int>()};
  } else {
    auto gpus = flags.Get("--gpus");
    if (!gpus) return UsageError(io, "plan", Status::InvalidArgument("--gpus is required"));
    auto c = GpuCounts(*gpus);
    if (!c.ok()) return UsageError(io, "plan", c.status());
    counts = *c;
    auto built = RequestFromFlags(flags, /*with_config=*/false, io.in, counts.front());
    if (!built.ok()) return UsageError(io, "plan", built.status());
    base = *built;
  }
  if (auto p = flags.Get("--profile")) base["profile"] = *p;

  std::vector<planner::PlanSection> sections;
  for (size_t ci = 0; ci < counts.size(); ++ci) {
    const int gpus = counts[ci];
    Json req = base;
    req["gpus"] = gpus;
    if (req.contains("config")) req.erase("config");
    auto parsed = planner::ParsePredictRequest(req);
    if (!parsed.ok()) return UsageError(io, "plan", parsed.status());
    planner::PlanSection sec;
    sec.job = parsed->job;
    if (!parsed->profile_path.empty()) {
      if (Status s = ApplyProfileFile(parsed->profile_path, &sec.job.cluster); !s.ok()) {
        return UsageError(io, "plan", s);
      }
    } else if (Status s = ApplyCachedProfile(&sec.job.cluster, io.err); !s.ok()) {
      return UsageError(io, "plan", s);
    }
    // One cost model per framework searched: the one the request names, or
    // every framework of --space, each costing what it would run.
    const bool named = req.contains("training") && req["training"].contains("framework");
    auto space = planner::ModelsForSpace(sec.job, opt.family, flags.Has("--space"), named);
    if (!space.ok()) return UsageError(io, "plan", space.status());
    if (Status s = planner::CheckFixedForModel(opt.fixed, sec.job.model); !s.ok()) {
      return UsageError(io, "plan", s.WithContext("--fix"));
    }
    if (named && !flags.Has("--space")) opt.family = planner::FamilyOf(sec.job.training.framework);
    const std::vector<const planner::CostModel*> model_ptrs = space->Pointers();
    planner::Search search(model_ptrs, opt);
    if (counts.size() > 1 && io.progress) {
      io.err << "[plan] searching " << gpus << " GPUs (" << ci + 1 << "/" << counts.size()
             << ")" << std::endl;
    }
    Timer timer;
    sec.result = RunThreaded(search, threads);
    sec.search_time_s = timer.Seconds();
    if (ci + 1 == counts.size() && sec.result.top.empty() && planner::MemoryBinds(sec.result) &&
        !flags.Has("--explain")) {
      if (io.progress) {
        io.err << "[plan] nothing fits on " << sec.job.gpus << " GPUs; doubling" << std::endl;
      }
      auto fits = planner::FewestGpusThatFit(
          sec.job, opt, flags.Has("--space"), named, kMaxGpus,
          [&](const planner::Search& s) -> Result<planner::SearchResult> {
            return RunThreaded(s, threads);
          });
      if (fits.ok()) sec.fits_from = *fits;
    }

    if (auto ex = flags.Get("--explain"); ex && counts.size() == 1) {
      return ExplainConfig(*ex, sec, model_ptrs, search, opt, threads, format, io);
    }
    sections.push_back(std::move(sec));
  }

  bool any = false;
  for (const auto& s : sections) any = any || !s.result.top.empty();
  // Rank 1's failure policies, for the count the document describes in full:
  // the largest with a plan.
  const planner::PlanSection* main_section = &sections.back();
  for (const auto& s : sections) {
    if (!s.result.top.empty()) main_section = &s;
  }
  if (opt.goodput.enabled() && !main_section->result.top.empty() && io.progress) {
    io.err << "[plan] pricing rank 1's failures: replan on the GPUs a lost node leaves"
           << std::endl;
  }
  auto policies = planner::RankOnePolicies(
      *main_section, opt,
      [threads](const planner::Search& search) { return RunSearchThreaded(search, threads); });
  if (!policies.ok()) return UsageError(io, "plan", policies.status());
  if (format == "json") {
    OrderedJson doc = planner::PlansToJson(sections, opt);
    if (*policies) doc["failure_policies"] = planner::FailurePoliciesToJson(**policies);
    doc["assumed"] = scenario::AssumedToJson(
        scenario::JobAssumptions(base, sections.front().job, /*searches_space=*/true));
    io.out << doc.dump(2) << "\n";
  } else {
    for (const auto& s : sections) {
      if (sections.size() > 1 && &s != &sections.back()) continue;
      PrintSection(s, opt, flags.Has("--pareto"), io.out);
      if (&s == main_section && *policies) PrintPolicies(**policies, io.out);
    }
    if (sections.size() > 1) PrintScaling(sections, opt, io.out);
  }
  return any ? kExitOk : kExitNoFeasible;
}

}  // namespace paratune::cli
