// cli/common.h: helpers shared by the subcommands: error reporting with the
// right exit code, loading JSON arguments (file, "-" or inline), building a
// request from flags, and applying a measured profile.
#pragma once

#include <chrono>
#include <istream>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/json.h"
#include "common/status.h"
#include "frameworks/logs.h"
#include "planner/request.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace paratune::cli {

// The exit code for a failed Status (docs/cli.md): bad input 2, cache locked
// 75, a missing capability or timeout 4. A library failure (kInternal: CUDA,
// NCCL, MPI) is a failed measurement (4) for the measuring commands (profile,
// confirm) and an internal error (1) for the others.
int ExitCodeFor(const Status& s, bool measuring = false);

// Wall-clock seconds since construction, for the progress and timing lines.
struct Timer {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

// Prints "paratune <cmd>: <message>" to err and returns ExitCodeFor(s, measuring).
int UsageError(Io io, const std::string& cmd, const Status& s, bool measuring = false);

// Parses `args` into `flags`. Returns the exit code when the command ends
// there: a usage error, or kExitOk after writing `help` for --help; nullopt
// when it goes on.
std::optional<int> ParseOrHelp(Flags& flags, const Args& args, Io io, const std::string& cmd,
                               const char* help, bool measuring = false);

// The integer flag `name` (`def` when absent), refused outside [min, max].
Result<int> IntFlag(const Flags& f, const std::string& name, int def, int min, int max = 1000000);

// Loads a JSON document from a file path or "-" (the command's input stream
// `in`); `what` names the flag.
Result<Json> LoadJsonArg(const std::string& path, const std::string& what, std::istream& in);

// A --model / --cluster argument: an existing path other than a directory is
// loaded as JSON (ReadFileToString: a device or socket is refused by name),
// anything else is kept as a preset name (a JSON string).
Result<Json> PresetOrFile(const std::string& arg, const std::string& what, std::istream& in);

// Builds a request object from --model --cluster --gpus --global-batch --seq
// --precision --attention --headroom (and --config when with_config). With
// gpus > 0 that count is used and --gpus is not read (plan's ranges).
Result<Json> RequestFromFlags(const Flags& flags, bool with_config, std::istream& in, int gpus = 0);

// "<model> on <gpus> × <gpu> (<cluster>), seq S, global batch B": the question
// a plan or a prediction answers. A length or batch the request left unstated
// says where it came from (the model's pretraining, its context length, the
// longest published pretraining length below a longer context, or the 4M-token
// default) and which flag chooses it.
std::string JobHeadline(const planner::Job& job);

// The job's precision as the request put it: "bf16", "mxfp8"; plain fp8 names
// the recipe the GPU's default gave it ("fp8 (fp8_current, h100-sxm's default
// recipe)").
std::string PrecisionLabel(const planner::Job& job);

// What --model --cluster --gpus --global-batch --seq --precision --attention
// --framework --config supply for a training log (planner::RequestFromLog):
// each only when given.
Result<planner::LogFlags> LogFlagsFromFlags(const Flags& flags, std::istream& in);

// Loads a paratune.profile/v1 file and merges its fits into `cluster`.
Status ApplyProfileFile(const std::string& path, topology::ClusterSpec* cluster);

// When the profile cache (profiler::DefaultCacheDir) holds a profile for this
// cluster's fingerprint, applies it and says so on `err`. No profile: nothing
// happens. PARATUNE_NO_CACHE=1 turns the lookup off.
Status ApplyCachedProfile(topology::ClusterSpec* cluster, std::ostream& err);

// Runs every shard of `search` on up to `threads` threads and merges the
// results (deterministic: the same answer for any thread count).
planner::SearchResult RunSearchThreaded(const planner::Search& search, int threads);

}  // namespace paratune::cli
