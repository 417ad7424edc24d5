// `paratune tune`: the one line of a job script before the training launch.
// Finds the allocation, reuses or makes the cluster's profile (cached, one
// profiling run per cluster however many jobs start), plans, confirms the top
// plans on the hardware, writes everything to an output directory and prints
// only `export NAME=value` lines, so `eval "$(paratune tune ...)"` works.
// Thin: the pieces are profiler::RunProfile, planner::Search, executor::
// ConfirmCandidates and planner::EmitConfig.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <thread>
#include <vector>

#include "cli/allocation.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "cli/version.h"
#include "common/json.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "backend/factory.h"
#include "executor/run/runner.h"
#include "frameworks/emit.h"
#include "planner/plans.h"
#include "profiler/cache.h"
#include "profiler/runner.h"
#include "scenario/scenario.h"

namespace paratune::cli {
namespace {

constexpr const char* kTuneHelp =
    R"HELP(usage: paratune tune --model M --global-batch B [--seq S] [--precision P]
                     [--cluster C] [--backend cuda|mpi-cpu|fake] [--quick]
                     [--gpus N | --nodes N --gpus-per-node G]
                     [--framework F | --space all|megatron|deepspeed|axonn|fsdp] [--fix SPEC]
                     [--confirm-top K] [--out-dir D] [--cache-dir D] [--wait S]

The line in a job script that picks the parallel configuration right before
the training starts:

  eval "$(srun --ntasks-per-node=8 paratune tune --model llama3-8b --framework megatron \
            --global-batch 512 --seq 8192 --backend cuda --quick --out-dir run1)"
  source run1/megatron.sh   # GPT_MODEL_ARGS, TRAINING_ARGS, MODEL_PARALLEL_ARGS
  srun python pretrain_gpt.py "${GPT_MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" \
       "${MODEL_PARALLEL_ARGS[@]}" ...

stdout carries only `export NAME=value` lines: TP PP CP DP SP VP MBS GBS
ZERO_STAGE RECOMPUTE GX GY GZ, DP_SHARD DP_REPLICATE for an FSDP plan
(fsdp, torchtitan), and PARATUNE_PLAN (meanings: paratune emit --help).
Everything else (what was found, reused, measured, chosen) goes to stderr.
Run it as one process per GPU under srun/mpirun to profile and confirm on
every GPU (rank 0 prints), or as one process without --backend to plan from
the cluster preset and the cached profile only.

What it does, in order:
  1. the allocation: --gpus or --nodes/--gpus-per-node; else Slurm
     (SLURM_JOB_NUM_NODES/SLURM_NNODES with SLURM_GPUS_ON_NODE,
     SLURM_GPUS_PER_NODE, SLURM_NTASKS_PER_NODE or SLURM_NTASKS); else torchrun
     (WORLD_SIZE, LOCAL_WORLD_SIZE); else Open MPI (OMPI_COMM_WORLD_SIZE,
     OMPI_COMM_WORLD_LOCAL_SIZE) or PMI (PMI_SIZE); else local discovery (the
     processes of --backend, or one node of --cluster). It says which.
  2. the profile: the cached profile of this cluster's fingerprint when there
     is one; else, with --backend, it measures (--quick: about a minute) and
     caches it. Jobs that start together profile once: one takes the lock and
     measures, the others wait for it (up to --wait seconds, then exit 75) and
     reuse its profile. Without --backend and without a cached profile it plans
     with the cluster preset's figures.
  3. the plan: every configuration of --space, ranked (as `paratune plan`).
  4. confirmation (with --backend cuda or mpi-cpu): the top K run on the real
     kernels, and the fastest measured one is chosen; otherwise the best
     predicted one.
  5. output, in --out-dir: plans.json, profile.json, run_report.json (when
     confirmed), tune.json (what was decided and why), env.sh, config.json
     (the plan's canonical config) and the chosen plan in the framework's own
     form: with --framework, that framework's file only (megatron.sh,
     paratune_bridge.py for megatron-bridge, megatron_deepspeed.sh,
     ds_config.json, paratune_plan.py for fsdp and torchtitan, axonn.py);
     without, the file of every framework that can run it (refusals are
     explained on stderr).

  --model M, --global-batch B, --seq S, --precision P, --attention A,
  --headroom F         the training job, as in `paratune plan`
  --cluster C          a preset name or cluster file; default with --backend:
                       the cluster discovered from the hardware
  --backend B          cuda (one GPU per process), mpi-cpu (CPU processes),
                       fake (a model of a GPU; tests); none: no measurement
  --quick              a short profile (fewer sizes and samples)
  --refresh            measure even when the cache holds a profile
  --gpus N, --nodes N, --gpus-per-node G   the allocation, overriding the environment
  --framework F        the training stack: megatron, megatron-bridge (a
                       Megatron-Bridge script; plans as megatron), megatron-deepspeed,
                       deepspeed, fsdp, torchtitan or axonn; plans only what it can
                       run (its --space); tune.json's default_format names its file
  --space F, --fix SPEC, --objective O, --top K, --threads T   as in `paratune plan`
  --confirm-top K      plans to confirm (default 3 with cuda or mpi-cpu, else
                       0); 0 skips confirmation
  --layers N, --samples N  confirmation slice size and samples (as `confirm`)
  --out-dir D          where files go (default paratune-tune)
  --cache-dir D        default ${PARATUNE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/paratune};
                       put it on the shared filesystem
  --wait S             seconds to wait for another job's profiling (default 600)

exit codes: 0 ok (exports printed); 2 bad flags or input; 3 no configuration
            fits (nothing printed; plans.json says why); 4 a measurement failed
            or the backend is unavailable here; 75 another job held the profile
            cache lock longer than --wait: try again. Never 0 without exports.

examples:
  # a Slurm batch script, 4 nodes x 8 GPUs (see docs/examples/):
  eval "$(srun paratune tune --model gpt3-13b --global-batch 1024 --framework megatron \
            --backend cuda --quick --cache-dir $SCRATCH/paratune --out-dir tune.$SLURM_JOB_ID)"
  source tune.$SLURM_JOB_ID/megatron.sh
  # no GPUs at hand: plan 64 GPUs of a preset, exports only
  paratune tune --model llama3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --seq 8192
)HELP";

const char* EnvOrNull(const char* name) { return std::getenv(name); }

// `s` as one shell word: unchanged when it has only safe characters, else in
// single quotes (a quote inside becomes '\'').
std::string ShellQuote(const std::string& s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:@%+=,-", c) != nullptr;
  });
  if (safe) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Waits for a cached profile of `fp` while another process holds the cache
// lock (it is profiling that cluster). nullopt: no profile and nobody making one.
Result<std::optional<profiler::Profile>> CachedProfileWaiting(const std::string& dir, const std::string& fp,
                                                              double wait_s, std::ostream& err) {
  const Timer t;
  bool said = false;
  for (;;) {
    PT_ASSIGN_OR_RETURN(std::optional<profiler::Profile> hit, profiler::LoadCachedProfile(dir, fp));
    if (hit) return hit;
    auto lock = profiler::CacheLock::TryAcquire(dir, fp);
    if (lock.ok()) return std::optional<profiler::Profile>();  // nobody is profiling
    if (lock.status().code() != StatusCode::kFailedPrecondition || t.Seconds() >= wait_s) {
      return lock.status();
    }
    if (!said) {
      err << "[tune] another process is profiling this cluster; waiting up to " << static_cast<int>(wait_s)
          << " s for its profile\n";
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// Where each format's text goes in the output directory.
const char* FileFor(planner::EmitFormat f) {
  switch (f) {
    case planner::EmitFormat::kMegatron: return "megatron.sh";
    case planner::EmitFormat::kMegatronDeepSpeed: return "megatron_deepspeed.sh";
    case planner::EmitFormat::kDeepSpeed: return "ds_config.json";
    case planner::EmitFormat::kAxonn: return "axonn.py";
    case planner::EmitFormat::kTorchtitan: return "paratune_plan.py";
    case planner::EmitFormat::kEnv: return "env.sh";
    case planner::EmitFormat::kJson: return "config.json";
    case planner::EmitFormat::kMegatronBridge: return "paratune_bridge.py";
  }
  return "config.json";
}

// The stack the planner prices for --framework: Megatron-Bridge runs
// Megatron-Core, so its plans are Megatron-LM's.
std::string PricedFramework(const std::string& framework) {
  return framework == "megatron-bridge" ? "megatron" : framework;
}

// The format of tune's own file: --framework megatron-bridge's script, else
// the plans document's default format (the framework the plan was made for).
planner::EmitFormat OwnFormat(const Json& plans, const std::string& framework) {
  if (framework == "megatron-bridge") return planner::EmitFormat::kMegatronBridge;
  return planner::DefaultEmitFormat(plans);
}

// The formats tune writes: with --framework, that framework's own and the
// canonical config and exports; without, every format that can express the
// chosen plan.
std::vector<planner::EmitFormat> FormatsToWrite(const Json& plans, const std::string& framework) {
  using planner::EmitFormat;
  if (!framework.empty()) return {OwnFormat(plans, framework), EmitFormat::kJson, EmitFormat::kEnv};
  return {EmitFormat::kMegatron,   EmitFormat::kMegatronBridge, EmitFormat::kMegatronDeepSpeed,
          EmitFormat::kDeepSpeed,  EmitFormat::kAxonn,          EmitFormat::kTorchtitan,
          EmitFormat::kJson,       EmitFormat::kEnv};
}

// Rank 0's work between the profile and the confirmation: the allocation, the
// job and the search. Returns the plans document's text, or an exit code.
struct PlanOutcome {
  int exit_code = kExitOk;
  std::string plans_text;  // the document (also when nothing fits)
  OrderedJson allocation;
};

}  // namespace

int RunTune(const Args& args, Io io) {
  Flags f({"--model", "--cluster", "--gpus", "--nodes", "--gpus-per-node", "--global-batch", "--seq",
           "--precision", "--attention", "--headroom", "--space", "--fix", "--objective", "--top",
           "--threads", "--framework", "--backend", "--confirm-top", "--layers", "--samples", "--out-dir", "--cache-dir",
           "--wait"},
          {"--quick", "--refresh", "--help"}, {{"-h", "--help"}});
  auto fail = [&io](const Status& s, bool measuring = false) {
    return UsageError(io, "tune", s, measuring);
  };
  if (Status s = f.Parse(args); !s.ok()) return fail(s);
  if (f.Has("--help")) {
    // --help is the one payload that is not exports: it is asked for.
    io.out << kTuneHelp;
    return kExitOk;
  }
  if (!f.positionals().empty()) {
    return fail(Status::InvalidArgument("unexpected argument '" + f.positionals()[0] + "'"));
  }
  if (!f.Has("--model")) return fail(Status::InvalidArgument("--model is required"));
  if (!f.Has("--global-batch")) return fail(Status::InvalidArgument("--global-batch is required"));
  const std::string backend_name = f.GetOr("--backend", "");
  if (!backend_name.empty() && backend_name != "cuda" && backend_name != "mpi-cpu" && backend_name != "fake") {
    return fail(Status::InvalidArgument("--backend must be cuda, mpi-cpu or fake"));
  }
  if (backend_name.empty() && !f.Has("--cluster")) {
    return fail(Status::InvalidArgument("--cluster is required without --backend (nothing to discover the "
                                        "cluster with)"));
  }
  planner::SearchOptions opt;
  {
    // --framework names the training stack; its search space is the default --space.
    std::string space = "all";
    if (auto fw = f.Get("--framework")) {
      if (*fw == "megatron" || *fw == "megatron-bridge") space = "megatron";
      else if (*fw == "deepspeed" || *fw == "megatron-deepspeed") space = "deepspeed";
      else if (*fw == "fsdp" || *fw == "torchtitan") space = "fsdp";
      else if (*fw == "axonn") space = "axonn";
      else {
        return fail(Status::InvalidArgument("--framework must be megatron, megatron-bridge, "
                                            "megatron-deepspeed, deepspeed, fsdp, torchtitan or axonn, "
                                            "not '" + *fw + "'"));
      }
    }
    auto fam = planner::ParseFamily(f.GetOr("--space", space));
    if (!fam.ok()) return fail(fam.status());
    opt.family = *fam;
    auto obj = planner::ParseObjective(f.GetOr("--objective", "time"));
    if (!obj.ok()) return fail(obj.status());
    // tune takes no token budget: time to train is `paratune plan --tokens`'s.
    if (*obj == planner::Objective::kTimeToTrain) {
      return fail(Status::InvalidArgument(
          "--objective time-to-train needs a token budget, which tune does not take; use "
          "`paratune plan --objective time-to-train --tokens N`"));
    }
    opt.objective = *obj;
    auto top = IntFlag(f, "--top", 10, 1, 10000);
    if (!top.ok()) return fail(top.status());
    opt.top_k = *top;
    if (auto fix = f.Get("--fix")) {
      auto kv = planner::ConfigTextToPairs(*fix);
      if (!kv.ok()) return fail(kv.status().WithContext("--fix"));
      opt.fixed = *kv;
      if (Status s = planner::ValidateFixed(opt.fixed); !s.ok()) return fail(s);
    }
  }
  const bool can_confirm = backend_name == "cuda" || backend_name == "mpi-cpu";
  auto confirm_top = IntFlag(f, "--confirm-top", can_confirm ? 3 : 0, 0, 1000);
  auto layers = IntFlag(f, "--layers", 2, 1, 1000000);
  auto samples = IntFlag(f, "--samples", 5, 1, 1000000);
  auto threads = IntFlag(f, "--threads", static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), 1, 1024);
  for (const auto* r : {&confirm_top, &layers, &samples, &threads}) {
    if (!r->ok()) return fail(r->status());
  }
  if (*confirm_top > 0 && backend_name.empty()) {
    return fail(Status::InvalidArgument("--confirm-top needs --backend (cuda or mpi-cpu) to run plans on"));
  }
  double wait_s = 600;
  if (auto w = f.Get("--wait")) {
    auto v = ParseDouble(*w, "--wait");
    if (!v.ok() || !(*v >= 0)) return fail(Status::InvalidArgument("--wait must be a number of seconds >= 0"));
    wait_s = *v;
  }
  const std::string out_dir = f.GetOr("--out-dir", "paratune-tune");
  const std::string cache_dir = f.GetOr("--cache-dir", profiler::DefaultCacheDir());

  // The cluster, when named.
  std::optional<topology::ClusterSpec> cluster;
  if (auto c = f.Get("--cluster")) {
    auto j = PresetOrFile(*c, "--cluster", io.in);
    if (!j.ok()) return fail(j.status());
    auto spec = topology::ResolveCluster(*j, "");
    if (!spec.ok()) return fail(spec.status().WithContext("--cluster"));
    cluster = *spec;
  }
  {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) return fail(Status::IoError("cannot create --out-dir '" + out_dir + "': " + ec.message()));
  }

  // 2. The profile (every process takes part when there is a backend).
  int rank = 0, local_nodes = 1, local_per_node = 0;
  std::optional<profiler::Profile> profile;
  std::string profile_how = "none";
  std::vector<std::string> argv = {"paratune", "tune"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!backend_name.empty()) {
    profiler::ProfileRunOptions o;
    o.backend.name = backend_name;
    o.quick = f.Has("--quick");
    o.cluster = cluster;
    o.out_path = out_dir + "/profile.json";
    o.cache_dir = cache_dir;
    o.use_cache = true;
    o.refresh = f.Has("--refresh");
    o.lock_wait_s = wait_s;
    o.tool = ToolName();
    o.argv = argv;
    auto progress = [&io](const std::string& line) { io.err << "[tune] profile: " << line << std::endl; };
    auto on_fatal = [&io](const Status& s) {
      io.err << "paratune tune: " << s.message() << std::endl;
      return ExitCodeFor(s, /*measuring=*/true);
    };
    auto r = profiler::RunProfile(o, progress, on_fatal);
    if (!r.ok()) return fail(r.status(), /*measuring=*/true);
    rank = r->rank;
    local_nodes = r->nodes;
    local_per_node = r->ranks_per_node;
    if (rank == 0) {
      profile = r->profile;
      profile_how = r->from_cache ? (r->waited ? "reused (after waiting for another process's run)" : "reused")
                                  : "measured";
      io.err << "[tune] profile " << profile_how << ": " << r->cache_path << std::endl;
      if (!cluster && profile->cluster) cluster = *profile->cluster;
    }
  } else {
    const std::string fp = topology::Fingerprint(*cluster);
    auto cached = CachedProfileWaiting(cache_dir, fp, wait_s, io.err);
    if (!cached.ok()) return fail(cached.status());
    if (*cached) {
      profile = std::move(**cached);
      profile_how = "reused";
      io.err << "[tune] profile reused: " << profiler::CachedProfilePath(cache_dir, fp) << std::endl;
    } else {
      io.err << "[tune] no cached profile for cluster " << cluster->name << " (" << fp
             << ") and no --backend to measure one: planning with the preset's figures" << std::endl;
    }
    local_per_node = cluster->gpus_per_node;
  }
  const bool root = rank == 0;

  // 1 and 3 on rank 0: the allocation, the job, the search.
  // From here on rank 0 must not return before the confirmation's broadcast
  // (the other processes wait in it): failures become planned.exit_code.
  PlanOutcome planned;
  if (root) {
    planned = [&]() -> PlanOutcome {
      PlanOutcome out;
      auto bad = [&](const Status& s) {
        out.exit_code = fail(s);
        return out;
      };
      if (!cluster) {
        return bad(Status::InvalidArgument("the cached profile carries no cluster description; give --cluster"));
      }
      std::optional<Allocation> alloc;
      auto from_flags = AllocationFromFlags(f.Get("--gpus"), f.Get("--nodes"), f.Get("--gpus-per-node"),
                                            cluster->gpus_per_node);
      if (!from_flags.ok()) return bad(from_flags.status());
      alloc = *from_flags;
      if (!alloc) {
        auto from_env = AllocationFromEnv(EnvOrNull, cluster->gpus_per_node);
        if (!from_env.ok()) return bad(from_env.status());
        alloc = *from_env;
      }
      if (!alloc) {
        Allocation a;
        a.nodes = local_nodes;
        a.gpus_per_node = local_per_node;
        a.gpus = a.nodes * a.gpus_per_node;
        a.source = backend_name.empty() ? "local (one node of cluster " + cluster->name + ")"
                                        : "local (the " + backend_name + " processes)";
        alloc = a;
      }
      io.err << "[tune] allocation: " << alloc->nodes << " node(s) x " << alloc->gpus_per_node << " GPU(s) = "
             << alloc->gpus << " from " << alloc->source << std::endl;
      if (alloc->gpus_per_node != cluster->gpus_per_node) {
        io.err << "[tune] note: the allocation has " << alloc->gpus_per_node << " GPU(s) per node, cluster "
               << cluster->name << " " << cluster->gpus_per_node << "; planning " << alloc->gpus
               << " GPUs with the cluster's node layout" << std::endl;
      }
      out.allocation["source"] = alloc->source;
      out.allocation["nodes"] = alloc->nodes;
      out.allocation["gpus_per_node"] = alloc->gpus_per_node;
      out.allocation["gpus"] = alloc->gpus;

      Json req = Json::object();
      auto model = PresetOrFile(*f.Get("--model"), "--model", io.in);
      if (!model.ok()) return bad(model.status());
      req["model"] = *model;
      req["cluster"] = topology::ClusterSpecToJson(*cluster);
      req["gpus"] = alloc->gpus;
      Json training = Json::object();
      auto gb = ParseCount(*f.Get("--global-batch"), "--global-batch");
      if (!gb.ok()) return bad(gb.status());
      training["global_batch"] = *gb;
      if (auto s = f.Get("--seq")) {
        auto n = ParseCount(*s, "--seq");
        if (!n.ok()) return bad(n.status());
        training["seq_len"] = *n;
      }
      if (auto p = f.Get("--precision")) training["precision"] = *p;
      if (auto a = f.Get("--attention")) training["attention"] = *a;
      if (auto fw = f.Get("--framework")) training["framework"] = PricedFramework(*fw);
      if (auto h = f.Get("--headroom")) {
        auto v = ParseDouble(*h, "--headroom");
        if (!v.ok()) return bad(v.status());
        training["headroom"] = *v;
      }
      req["training"] = training;
      auto parsed = planner::ParsePredictRequest(req);
      if (!parsed.ok()) return bad(parsed.status());
      planner::PlanSection sec;
      sec.job = parsed->job;
      if (profile) {
        if (Status s = profiler::ApplyProfile(*profile, &sec.job.cluster); !s.ok()) return bad(s);
      }
      // One cost model per framework of the space, or only the one named.
      auto space = planner::ModelsForSpace(sec.job, opt.family, f.Has("--space"),
                                           training.contains("framework"));
      if (!space.ok()) return bad(space.status());
      if (Status s = planner::CheckFixedForModel(opt.fixed, sec.job.model); !s.ok()) {
        return bad(s.WithContext("--fix"));
      }
      planner::Search search(space->Pointers(), opt);
      const Timer timer;
      sec.result = RunSearchThreaded(search, *threads);
      sec.search_time_s = timer.Seconds();
      std::vector<planner::PlanSection> sections;
      sections.push_back(std::move(sec));
      // The plans document lists what the job left unstated, as `plan`'s does.
      OrderedJson plans = planner::PlansToJson(sections, opt);
      plans["assumed"] = scenario::AssumedToJson(
          scenario::JobAssumptions(req, sections.front().job, /*searches_space=*/true));
      out.plans_text = plans.dump(2) + "\n";
      const planner::PlanSection& s = sections.front();
      io.err << "[tune] plan: " << s.result.evaluated << " configurations searched in "
             << FormatFixed(s.search_time_s, 2) << " s, " << s.result.feasible << " fit" << std::endl;
      if (Status w = WriteFileAtomic(out_dir + "/plans.json", out.plans_text); !w.ok()) return bad(w);
      if (s.result.top.empty()) {
        int64_t most = 0;
        std::string why;
        for (int i = 1; i < planner::kNumReasons; ++i) {
          if (s.result.rejected[i] > most) {
            most = s.result.rejected[i];
            why = planner::ReasonName(static_cast<planner::Reason>(i));
          }
        }
        io.err << "paratune tune: no configuration fits " << alloc->gpus << " GPUs (most common reason: " << why
               << "; " << out_dir << "/plans.json lists them all)" << std::endl;
        out.exit_code = kExitNoFeasible;
      }
      return out;
    }();
  }

  // 4. Confirmation: every process runs the top K of rank 0's plan.
  int chosen = 1;
  std::string chosen_by = "predicted";
  OrderedJson confirmed = nullptr;
  if (*confirm_top > 0) {
    backend::BackendOptions bo;
    bo.name = backend_name;
    auto b = backend::CreateBackend(bo);
    if (!b.ok()) return fail(b.status().WithContext("--backend " + backend_name), /*measuring=*/true);
    backend::Backend& be = **b;
    const std::string mine =
        !root ? std::string() : (planned.exit_code != kExitOk ? "!" + std::to_string(planned.exit_code) : planned.plans_text);
    auto all = be.HostAllGather(mine);
    if (!all.ok()) return fail(all.status(), /*measuring=*/true);
    const std::string& text = (*all)[0];
    if (!text.empty() && text[0] == '!') return std::atoi(text.c_str() + 1);
    auto plans = ParseJson(text, "rank 0's plans");
    if (!plans.ok()) return fail(plans.status());
    auto input = executor::ConfirmInputFromPlans(*plans, *confirm_top);
    if (!input.ok()) return fail(input.status());
    executor::ConfirmOptions co;
    co.workload.slice_layers = *layers;
    co.samples = *samples;
    co.peers_can_hang = backend_name == "mpi-cpu";
    co.out_path = out_dir + "/run_report.json";
    co.tool = ToolName();
    co.argv = argv;
    if (root) {
      io.err << "[tune] confirming the top " << input->candidates.size() << " plan(s) on " << be.world_size()
             << " " << be.name() << " process(es)" << std::endl;
    }
    auto progress = [&io](const std::string& line) { io.err << "[tune] confirm: " << line << std::endl; };
    auto on_fatal = [&io, &be](const Status& s) {
      io.err << "paratune tune: rank " << be.rank() << ": " << s.message() << std::endl;
      return kExitMeasureFailed;
    };
    auto report = executor::ConfirmCandidates(be, *input, co, progress, on_fatal);
    if (!report.ok()) return fail(report.status(), /*measuring=*/true);
    if (!root) return kExitOk;
    confirmed = OrderedJson::array();
    for (const executor::CandidateReport& c : report->candidates) {
      OrderedJson row;
      row["rank"] = c.rank;
      row["status"] = executor::OutcomeName(c.status);
      row["predicted_s"] = c.predicted_s;
      if (c.measured_s) row["measured_s"] = *c.measured_s;
      if (!c.reason.empty()) row["reason"] = c.reason;
      confirmed.push_back(row);
      if (c.status == executor::Outcome::kOk && c.measured_rank && *c.measured_rank == 1) {
        chosen = c.rank;
        chosen_by = "measured";
      }
    }
    if (chosen_by == "measured") {
      io.err << "[tune] chose plan rank " << chosen << ": the fastest measured of the top "
             << report->candidates.size() << " (" << out_dir << "/run_report.json)" << std::endl;
    } else {
      io.err << "[tune] no confirmed plan ran ok; keeping the best predicted plan (rank 1)" << std::endl;
    }
  } else if (!root) {
    return kExitOk;
  }
  if (planned.exit_code != kExitOk) return planned.exit_code;

  // 5. Output: every framework's config for the chosen plan, then the exports.
  auto plans = ParseJson(planned.plans_text, "plans");
  if (!plans.ok()) return fail(plans.status());
  OrderedJson files = OrderedJson::object();
  OrderedJson refused = OrderedJson::object();
  const std::string plan_path = Absolute(out_dir + "/plans.json");
  std::string exports;
  for (planner::EmitFormat fmt : FormatsToWrite(*plans, f.GetOr("--framework", ""))) {
    auto text = planner::EmitConfig(*plans, chosen, fmt);
    if (!text.ok()) {
      refused[planner::EmitFormatName(fmt)] = text.status().message();
      io.err << "[tune] " << text.status().message() << std::endl;
      continue;
    }
    std::string body = *text;
    if (fmt == planner::EmitFormat::kEnv) {
      body += "export PARATUNE_PLAN=" + ShellQuote(plan_path) + "\n";
      exports = body;
    }
    const std::string path = out_dir + "/" + FileFor(fmt);
    if (Status s = WriteFileAtomic(path, body); !s.ok()) return fail(s);
    files[planner::EmitFormatName(fmt)] = Absolute(path);
  }
  if (exports.empty()) return fail(Status::Internal("the env format refused the plan"));

  OrderedJson summary;
  summary["schema"] = "paratune.tune/v1";
  summary["allocation"] = planned.allocation;
  summary["cluster"] = cluster->name;
  summary["cluster_fingerprint"] = topology::Fingerprint(*cluster);
  summary["profile"] = profile_how;
  summary["chosen_rank"] = chosen;
  summary["chosen_by"] = chosen_by;
  summary["confirmed"] = confirmed;
  summary["plans"] = plan_path;
  summary["files"] = files;
  summary["refused"] = refused;
  summary["default_format"] = planner::EmitFormatName(OwnFormat(*plans, f.GetOr("--framework", "")));
  if (Status s = WriteFileAtomic(out_dir + "/tune.json", summary.dump(2) + "\n"); !s.ok()) return fail(s);
  io.err << "[tune] wrote " << out_dir << "/{plans.json,tune.json,env.sh,...}" << std::endl;
  io.out << exports;
  return kExitOk;
}

}  // namespace paratune::cli
