// `paratune profile`: measure this allocation (GEMMs, links, collectives) into
// a profile, or import nccl-tests logs into one. Thin: parse flags, call
// profiler::RunProfile / ImportProfile, print.
#include <sys/stat.h>

#include <functional>
#include <iostream>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "cli/version.h"
#include "common/json.h"
#include "common/strings.h"
#include "profiler/report.h"
#include "profiler/runner.h"

namespace paratune::cli {
namespace {

constexpr const char* kProfileHelp =
    R"(usage: paratune profile --backend cuda|mpi-cpu [--quick] [-b MIN -e MAX -f FACTOR] --out FILE
       paratune profile import LOG... --out FILE [--collective NAME] [--ranks N] [--in-place]
                               [--cluster C]

Measures the machine a job will run on, the way nccl-tests and nvbandwidth do,
and fits what the planner needs: alpha (latency per rank) and beta (bus
bandwidth) per collective x tier x group size, GEMM efficiency curves per
precision, device-copy and P2P bandwidth. Start one process per GPU with the
launcher you already use; rank 0 writes the file:

  srun --ntasks-per-node=8 paratune profile --backend cuda --quick --out prof.json
  mpirun -np 16 -N 8 paratune profile --backend cuda --out prof.json

Numbers read like nccl-tests: size in bytes, time in microseconds, algbw and
busbw in GB/s (1e9) with nccl-tests' busbw factors (all_reduce 2(n-1)/n;
all_gather, reduce_scatter, alltoall (n-1)/n; sendrecv 1). Each row is the
median of several samples; each sample is the slowest rank's time, taken with
events while every stream is released at once after a barrier.

Profiles are cached by cluster fingerprint; a second run on the same cluster
reuses the cached profile unless --refresh. Use the profile with
`paratune plan|predict --profile FILE`.

measure:
  --backend B          cuda (cuBLAS + NCCL, one GPU per process), mpi-cpu (MPI
                       processes on CPUs, Eigen GEMMs), fake (a model; tests)
  --quick              about a minute on one node: fewer sizes, shapes, samples
  -b, --minbytes N     smallest message; nccl-tests syntax: 8, 64K, 1M, 8G
                       (K/M/G are powers of 1024)
  -e, --maxbytes N     largest message (lowered when device memory is short)
  -f, --stepfactor F   multiply the size by F each step (default 4)
  -i, --stepbytes N    add N bytes each step instead
  -n, --iters N        ops per timed sample (default 20; --quick 10; at most 10000)
  -w, --warmup_iters N warm-up ops before each size
  --samples N          timed samples per row; the row reports their median
  -d, --datatype T     float (default), half, bfloat16, double, int8
  --collectives LIST   comma-separated subset of all_reduce, all_gather,
                       reduce_scatter, alltoall, sendrecv (default: all)
  --no-gemm            skip the GEMM sweep
  --cluster C          tie the profile to this cluster description (a preset
                       name or a JSON file) so `plan --cluster C` finds it in
                       the cache; default: the description discovered here
  --out FILE           the profile, "paratune.profile/v1" (required)
  --report FILE        the report in nccl-tests columns ("-" = stdout)
  --json FILE          the raw measurements with the environment (versions,
                       hosts, argv): "paratune.measurements/v1"
  --cluster-out FILE   the cluster description the profile is tied to
  --cache-dir DIR      default ${PARATUNE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/paratune}
  --no-cache           neither read nor write the cache
  --refresh            measure even when the cache holds this cluster's profile
  --timeout S          cuda: seconds before a hung collective is aborted (300)
  --inject-fault F     exercise the failure paths: KIND@N[:rank=R] with KIND one
                       of rank_dies, collective_error, timeout, oom

import:
  LOG...               nccl-tests text output or -J JSON files (any release;
                       out-of-place and in-place columns, #wrong N/A, NCCL INFO
                       lines in between are fine; NCCL_TESTS_SPLIT groups are
                       read from the "#  Rank .. Group .." lines)
                       A pasted fragment (data rows, no header, one or no
                       "#  Rank" line) is read too: the collective from the
                       file name (all_reduce*.log) or the columns (a reduction
                       with busbw > algbw is all_reduce, < algbw
                       reduce_scatter), the group size from busbw/algbw
                       (2(n-1)/n all_reduce, (n-1)/n gathers and alltoall)
  --collective NAME    for logs that do not say which test they are and whose
                       columns do not tell (all_gather vs alltoall, sendrecv)
  --ranks N            ranks per group, for fragments whose columns do not
                       tell it (sendrecv)
  --in-place           fit the in-place columns instead of out-of-place
  --cluster C          tie the profile to this cluster (fingerprint, GEMM peaks)
  --out FILE           the profile (required)

exit codes: 0 ok; 2 bad flags or input (a malformed log line is named), or a
              launch that cannot work (more ranks on a host than it has GPUs);
            4 a measurement failed or the backend is unavailable here (no GPU,
              a rank died, an NCCL error, a timeout); 75 the cache is locked by
              another paratune profiling the same cluster: try again later.
            Nothing half-written is ever left in the cache.

examples:
  paratune profile --backend mpi-cpu --quick --out cpu.json --report -
  paratune profile import all_reduce_perf.log ag.json --cluster dgx-h100 --out h100.json
  paratune plan --model gpt3-175b --cluster dgx-h100 --gpus 1024 --global-batch 1536 \
      --profile h100.json
)";

int FailProfile(Io io, const Status& s) { return UsageError(io, "profile", s, /*measuring=*/true); }

// A --cluster argument: an existing file is read as JSON, anything else is a preset name.
Result<topology::ClusterSpec> ClusterArg(const std::string& arg) {
  struct stat st;
  Json j;
  if (::stat(arg.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    PT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(arg));
    PT_ASSIGN_OR_RETURN(j, ParseJson(text, "--cluster " + arg));
  } else {
    j = arg;
  }
  auto c = topology::ResolveCluster(j, "");
  if (!c.ok()) return c.status().WithContext("--cluster");
  return c;
}

Result<int> PositiveIntFlag(const Flags& f, const std::string& name) {
  PT_ASSIGN_OR_RETURN(int64_t v, ParseInt(*f.Get(name), name));
  if (v < 1 || v > 1000000) return Status::InvalidArgument(name + " must be in [1, 1000000]");
  return static_cast<int>(v);
}

int RunImport(const Args& args, Io io) {
  Flags f({"--out", "--collective", "--ranks", "--cluster"}, {"--in-place", "--help"});
  if (auto done = ParseOrHelp(f, args, io, "profile", kProfileHelp, /*measuring=*/true))
    return *done;
  profiler::ImportRunOptions o;
  o.logs = f.positionals();
  o.out_path = f.GetOr("--out", "");
  o.import.in_place = f.Has("--in-place");
  o.import.collective = f.GetOr("--collective", "");
  if (auto r = f.Get("--ranks")) {
    auto v = ParseInt(*r, "--ranks");
    if (!v.ok()) return FailProfile(io, v.status());
    if (*v < 2 || *v > (1 << 20)) {
      return FailProfile(io, Status::InvalidArgument("--ranks must be in [2, 1048576]"));
    }
    o.import.ranks = static_cast<int>(*v);
  }
  o.tool = ToolName();
  o.argv = {"paratune", "profile", "import"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  if (auto c = f.Get("--cluster")) {
    auto cluster = ClusterArg(*c);
    if (!cluster.ok()) return FailProfile(io, cluster.status());
    o.cluster = *cluster;
  }
  std::vector<std::string> warnings;
  auto p = profiler::ImportProfile(o, &warnings);
  for (const std::string& w : warnings) io.err << "paratune profile import: warning: " << w << "\n";
  if (!p.ok()) return FailProfile(io, p.status());
  io.err << "paratune profile import: " << p->collectives.size() << " fit(s) from " << o.logs.size()
         << " log(s) written to " << o.out_path << "\n";
  io.out << profiler::FormatFits(*p);
  return kExitOk;
}

}  // namespace

int RunProfile(const Args& args, Io io) {
  if (!args.empty() && args[0] == "import")
    return RunImport(Args(args.begin() + 1, args.end()), io);
  Flags f({"--backend", "--minbytes", "--maxbytes", "--stepfactor", "--stepbytes", "--iters",
           "--warmup_iters", "--samples", "--datatype", "--collectives", "--cluster", "--out",
           "--report", "--json", "--cluster-out", "--cache-dir", "--timeout", "--inject-fault"},
          {"--quick", "--no-gemm", "--no-cache", "--refresh", "--help"},
          {{"-b", "--minbytes"},
           {"-e", "--maxbytes"},
           {"-f", "--stepfactor"},
           {"-i", "--stepbytes"},
           {"-n", "--iters"},
           {"-w", "--warmup_iters"},
           {"-d", "--datatype"},
           {"-h", "--help"}});
  if (auto done = ParseOrHelp(f, args, io, "profile", kProfileHelp, /*measuring=*/true))
    return *done;
  if (!f.positionals().empty()) {
    return FailProfile(
        io, Status::InvalidArgument("unexpected argument '" + f.positionals()[0] +
                                    "' (did you mean `paratune profile import LOG...`?)"));
  }
  profiler::ProfileRunOptions o;
  if (!f.Has("--backend")) {
    return FailProfile(io,
                       Status::InvalidArgument("--backend is required (cuda, mpi-cpu or fake)"));
  }
  o.backend.name = *f.Get("--backend");
  if (o.backend.name != "cuda" && o.backend.name != "mpi-cpu" && o.backend.name != "fake") {
    return FailProfile(io,
                       Status::InvalidArgument("--backend must be cuda, mpi-cpu or fake, not '" +
                                               o.backend.name + "'"));
  }
  o.quick = f.Has("--quick");
  o.out_path = f.GetOr("--out", "");
  if (o.out_path.empty()) return FailProfile(io, Status::InvalidArgument("--out FILE is required"));
  if (f.Has("--minbytes") || f.Has("--maxbytes") || f.Has("--stepfactor") || f.Has("--stepbytes")) {
    const profiler::MeasurementPlan defaults = profiler::DefaultPlan(o.backend.name, o.quick, 2, 2);
    auto sweep =
        profiler::ParseSweep(defaults.sweep, f.GetOr("--minbytes", ""), f.GetOr("--maxbytes", ""),
                             f.GetOr("--stepfactor", ""), f.GetOr("--stepbytes", ""));
    if (!sweep.ok()) return FailProfile(io, sweep.status());
    o.sweep = *sweep;
  }
  if (f.Has("--iters")) {
    auto v = PositiveIntFlag(f, "--iters");
    if (!v.ok()) return FailProfile(io, v.status());
    o.iters = *v;
  }
  if (f.Has("--samples")) {
    auto v = PositiveIntFlag(f, "--samples");
    if (!v.ok()) return FailProfile(io, v.status());
    o.samples = *v;
  }
  if (auto w = f.Get("--warmup_iters")) {
    auto v = ParseInt(*w, "--warmup_iters");
    if (!v.ok()) return FailProfile(io, v.status());
    if (*v < 0 || *v > profiler::kMaxWarmupIters) {
      return FailProfile(io,
                         Status::InvalidArgument("--warmup_iters: must be in [0, " +
                                                 std::to_string(profiler::kMaxWarmupIters) + "]"));
    }
    o.warmup_iters = static_cast<int>(*v);
  }
  if (Status s = profiler::CheckSampling(o.samples.value_or(-1), o.iters.value_or(-1),
                                         o.warmup_iters.value_or(-1), "--");
      !s.ok()) {
    return FailProfile(io, s);
  }
  if (auto d = f.Get("--datatype")) {
    auto t = backend::ParseDataType(*d);
    if (!t.ok()) return FailProfile(io, t.status().WithContext("--datatype"));
    o.dtype = *t;
  }
  if (auto c = f.Get("--collectives")) {
    for (const std::string& name : Split(*c, ',')) {
      auto coll = topology::ParseCollective(name);
      if (!coll.ok()) return FailProfile(io, coll.status().WithContext("--collectives"));
      o.collectives.push_back(*coll);
    }
  }
  o.skip_gemm = f.Has("--no-gemm");
  if (auto c = f.Get("--cluster")) {
    auto cluster = ClusterArg(*c);
    if (!cluster.ok()) return FailProfile(io, cluster.status());
    o.cluster = *cluster;
  }
  const std::string report = f.GetOr("--report", "");
  o.report_path = report == "-" ? "" : report;
  o.measurements_path = f.GetOr("--json", "");
  o.cluster_out_path = f.GetOr("--cluster-out", "");
  o.cache_dir = f.GetOr("--cache-dir", "");
  o.use_cache = !f.Has("--no-cache");
  o.refresh = f.Has("--refresh");
  if (auto t = f.Get("--timeout")) {
    auto v = ParseDouble(*t, "--timeout");
    if (!v.ok() || !(*v > 0)) {
      return FailProfile(io,
                         Status::InvalidArgument("--timeout must be a positive number of seconds"));
    }
    o.backend.cuda.timeout_s = *v;
  }
  if (auto fault = f.Get("--inject-fault")) {
    auto plan = backend::ParseFaultPlan(*fault);
    if (!plan.ok()) return FailProfile(io, plan.status().WithContext("--inject-fault"));
    o.backend.fault = *plan;
  }
  o.tool = ToolName();
  o.argv = {"paratune", "profile"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());

  std::function<void(const std::string&)> progress;
  if (io.progress) progress = [&io](const std::string& line) { io.err << "[profile] " << line << std::endl; };
  auto on_fatal = [&io](const Status& s) {
    io.err << "paratune profile: " << s.message() << std::endl;
    return ExitCodeFor(s, /*measuring=*/true);
  };
  auto r = profiler::RunProfile(o, progress, on_fatal);
  if (!r.ok()) return FailProfile(io, r.status());
  if (r->rank != 0) return kExitOk;
  for (const std::string& w : r->warnings) io.err << "paratune profile: warning: " << w << "\n";
  if (report == "-" && !r->from_cache) io.out << r->report;
  if (!r->from_cache) io.out << profiler::FormatFits(r->profile);
  io.err << "[profile] wrote " << o.out_path << (r->from_cache ? " (from the cache)" : "") << "\n";
  return kExitOk;
}

}  // namespace paratune::cli
