#include "cli/common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include <iterator>
#include <ostream>

#include "common/strings.h"
#include "common/user_input.h"
#include "planner/config.h"
#include "profiler/cache.h"
#include "profiler/profile.h"

namespace paratune::cli {

int ExitCodeFor(const Status& s, bool measuring) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kParseError:
    case StatusCode::kIoError:
      return kExitUsage;
    // Only the profile cache lock: retrying later can help (EX_TEMPFAIL). A
    // launch that cannot work is kInvalidArgument (exit 2).
    case StatusCode::kFailedPrecondition: return kExitTempFail;
    case StatusCode::kUnavailable:
    case StatusCode::kTimeout: return kExitMeasureFailed;
    case StatusCode::kInternal: return measuring ? kExitMeasureFailed : kExitInternal;
  }
  return kExitInternal;
}

int UsageError(Io io, const std::string& cmd, const Status& s, bool measuring) {
  io.err << "paratune " << cmd << ": " << s.message() << "\n";
  return ExitCodeFor(s, measuring);
}

std::optional<int> ParseOrHelp(Flags& flags, const Args& args, Io io, const std::string& cmd,
                               const char* help, bool measuring) {
  if (Status s = flags.Parse(args); !s.ok()) return UsageError(io, cmd, s, measuring);
  if (flags.Has("--help")) {
    io.out << help;
    return kExitOk;
  }
  return std::nullopt;
}

Result<int> IntFlag(const Flags& f, const std::string& name, int def, int min, int max) {
  auto v = f.Get(name);
  if (!v) return def;
  PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(*v, name));
  if (n < min || n > max) {
    return Status::InvalidArgument(name + " must be in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  }
  return static_cast<int>(n);
}

Result<Json> LoadJsonArg(const std::string& path, const std::string& what, std::istream& in) {
  Result<std::string> text =
      path == "-" ? ReadStreamToString(in, "<stdin>") : ReadFileToString(path);
  if (!text.ok()) return text.status().WithContext(what);
  return ParseJson(*text, what + " " + (path == "-" ? std::string("<stdin>") : path));
}

Result<Json> PresetOrFile(const std::string& arg, const std::string& what, std::istream& in) {
  // Anything that exists but a directory is a file argument: a FIFO from
  // `<(...)` is read, and a device (/dev/zero) or socket is refused by name
  // rather than taken for a preset. A directory stays a name, so a folder
  // that happens to share a preset's name does not shadow it.
  struct stat st;
  if (arg == "-" || (::stat(arg.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))) {
    return LoadJsonArg(arg, what, in);
  }
  return Json(arg);
}

Result<Json> RequestFromFlags(const Flags& flags, bool with_config, std::istream& in, int gpus) {
  Json req = Json::object();
  Json training = Json::object();
  auto model = flags.Get("--model");
  auto cluster = flags.Get("--cluster");
  if (!model) return Status::InvalidArgument("--model is required (or --request FILE)");
  if (!cluster) return Status::InvalidArgument("--cluster is required (or --request FILE)");
  PT_ASSIGN_OR_RETURN(req["model"], PresetOrFile(*model, "--model", in));
  PT_ASSIGN_OR_RETURN(req["cluster"], PresetOrFile(*cluster, "--cluster", in));
  if (gpus > 0) {
    req["gpus"] = gpus;
  } else if (auto g = flags.Get("--gpus")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(*g, "--gpus"));
    req["gpus"] = n;
  } else {
    return Status::InvalidArgument("--gpus is required");
  }
  if (auto b = flags.Get("--global-batch")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseCount(*b, "--global-batch"));
    training["global_batch"] = n;
  }
  if (auto s = flags.Get("--seq")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseCount(*s, "--seq"));
    training["seq_len"] = n;
  }
  if (auto p = flags.Get("--precision")) training["precision"] = *p;
  if (auto a = flags.Get("--attention")) training["attention"] = *a;
  if (auto f = flags.Get("--framework")) training["framework"] = *f;
  if (flags.Has("--compile")) training["compile"] = true;
  if (flags.Has("--no-expandable-segments")) training["expandable_segments"] = false;
  if (auto h = flags.Get("--headroom")) {
    PT_ASSIGN_OR_RETURN(double v, ParseDouble(*h, "--headroom"));
    training["headroom"] = v;
  }
  req["training"] = training;
  if (with_config) {
    if (auto c = flags.Get("--config")) {
      PT_ASSIGN_OR_RETURN(req["config"], planner::ConfigStringToJson(*c));
    }
  }
  return req;
}

std::string PrecisionLabel(const planner::Job& job) {
  const planner::TrainingSpec& t = job.training;
  if (t.precision != topology::Precision::kFp8 || t.recipe_stated) {
    return planner::StatedPrecisionName(t);
  }
  return std::string("fp8 (") + topology::RecipeName(t.recipe) + ", " + job.cluster.gpu.name +
         "'s default recipe)";
}

std::string JobHeadline(const planner::Job& job) {
  const planner::ModelSpec& m = job.model;
  const int seq = job.training.seq_len;
  std::string s = m.name + " on " + std::to_string(job.gpus) + " × " + job.cluster.gpu.name + " (" +
                  job.cluster.name + "), seq " + std::to_string(seq);
  if (job.seq_defaulted) {
    if (m.pretrain_seq_len > 0) {
      s += " (" + m.name + "'s pretraining length; --seq to choose)";
    } else if (m.max_seq_len > seq) {
      s += " (" + m.name + " states no pretraining length: the longest published one, below its " +
           std::to_string(m.max_seq_len) +
           "-token context, which a long-context stage reaches; --seq to choose)";
    } else {
      s += " (the model's context length; --seq to choose)";
    }
  }
  s += ", global batch " + std::to_string(job.training.global_batch);
  if (job.batch_defaulted) {
    if (m.pretrain_global_batch <= 0) {
      s += " (" + std::to_string(planner::kDefaultBatchTokens >> 20) +
           "M tokens, the default where the model states no pretraining batch; "
           "--global-batch to choose)";
    } else if (seq == m.pretrain_seq_len) {
      s += " (" + m.name + "'s pretraining batch; --global-batch to choose)";
    } else {
      s += " (" + m.name +
           "'s pretraining tokens per step at this length; --global-batch to choose)";
    }
  }
  return s;
}

Result<planner::LogFlags> LogFlagsFromFlags(const Flags& flags, std::istream& in) {
  planner::LogFlags lf;
  if (auto m = flags.Get("--model")) {
    PT_ASSIGN_OR_RETURN(Json j, PresetOrFile(*m, "--model", in));
    lf.model = j;
  }
  if (auto c = flags.Get("--cluster")) {
    PT_ASSIGN_OR_RETURN(Json j, PresetOrFile(*c, "--cluster", in));
    lf.cluster = j;
  }
  if (auto g = flags.Get("--gpus")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(*g, "--gpus"));
    if (n < 1 || n > (int64_t{1} << 24))
      return Status::InvalidArgument("--gpus: must be in [1, 2^24]");
    lf.gpus = static_cast<int>(n);
  }
  if (auto b = flags.Get("--global-batch")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseCount(*b, "--global-batch"));
    lf.global_batch = n;
  }
  if (auto s = flags.Get("--seq")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseCount(*s, "--seq"));
    if (n < 1 || n > planner::kMaxModelSeqLen)
      return Status::InvalidArgument("--seq: out of range");
    lf.seq_len = static_cast<int>(n);
  }
  if (auto p = flags.Get("--precision")) lf.precision = *p;
  if (auto a = flags.Get("--attention")) lf.attention = *a;
  if (auto f = flags.Get("--framework")) lf.framework = *f;
  if (auto c = flags.Get("--config")) {
    PT_ASSIGN_OR_RETURN(Json j, planner::ConfigStringToJson(*c));
    lf.config = j;
  }
  if (auto r = flags.Get("--run")) {
    PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(*r, "--run"));
    if (n < 1 || n > (int64_t{1} << 20)) {
      return Status::InvalidArgument("--run: must be a run number, 1 for the log's first run");
    }
    lf.run = static_cast<int>(n);
  }
  return lf;
}

}  // namespace paratune::cli

namespace paratune::cli {

bool ProgressWanted() {
  if (const char* v = std::getenv("PARATUNE_PROGRESS"); v && *v) return std::string(v) != "0";
  return ::isatty(STDERR_FILENO) != 0;
}

Status ApplyProfileFile(const std::string& path, topology::ClusterSpec* cluster) {
  PT_ASSIGN_OR_RETURN(profiler::Profile p, profiler::LoadProfile(path));
  return profiler::ApplyProfile(p, cluster).WithContext("--profile " + path);
}

Status ApplyCachedProfile(topology::ClusterSpec* cluster, std::ostream& err) {
  if (const char* off = std::getenv("PARATUNE_NO_CACHE"); off && *off && std::string(off) != "0") {
    return Status::Ok();
  }
  auto cached = profiler::LoadCachedProfile(profiler::DefaultCacheDir(), topology::Fingerprint(*cluster));
  if (!cached.ok()) return cached.status().WithContext("profile cache");
  if (!cached->has_value()) return Status::Ok();
  PT_RETURN_IF_ERROR(profiler::ApplyProfile(**cached, cluster));
  err << "paratune: using the cached profile " << cluster->profile_fingerprint << " for cluster "
      << cluster->name << " (" << profiler::DefaultCacheDir() << "; PARATUNE_NO_CACHE=1 to ignore)\n";
  return Status::Ok();
}

planner::SearchResult RunSearchThreaded(const planner::Search& search, int threads) {
  const int n = search.num_shards();
  std::vector<planner::SearchResult> parts(n);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < n; i = next++) parts[i] = search.RunShard(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return search.Merge(std::move(parts));
}

}  // namespace paratune::cli
