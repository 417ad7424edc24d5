#include "profiler/runner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "common/json.h"
#include "common/strings.h"
#include "profiler/cache.h"
#include "profiler/discovery.h"
#include "profiler/report.h"

namespace paratune::profiler {
namespace {

// Rank 0's verdict on the cache, shared with every rank.
enum class Plan { kMeasure = 0, kFromCache, kFail };

// Runs `body`; on failure in a multi-rank world reports and ends every process.
template <typename T>
Result<T> OrAbort(backend::Backend& b, const std::function<int(const Status&)>& on_fatal,
                  Result<T> r) {
  if (r.ok() || b.world_size() <= 1) return r;
  Status named = r.status().WithContext("rank " + std::to_string(b.rank()));
  if (on_fatal) b.AbortWorld(on_fatal(named));
  return named;
}

// Either the profile another process stored for `fp`, or the cache lock (to
// measure and store it ourselves).
struct CacheVerdict {
  std::optional<Profile> profile;
  std::optional<CacheLock> lock;
};

// Takes the lock, or waits (polling) for its holder to finish for up to
// `wait_s` seconds. After the lock is taken the cache is read again: a holder
// that stored the profile and released the lock between our first look and
// our lock leaves a profile that must be reused, not measured twice.
// With `reuse` false (--refresh) a cached profile is never taken: only the lock.
Result<CacheVerdict> WaitForCacheOrLock(const std::string& dir, const std::string& fp, double wait_s,
                                        bool reuse, bool* waited,
                                        const std::function<void(const std::string&)>& say) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, wait_s));
  for (bool first = true;; first = false) {
    auto l = CacheLock::TryAcquire(dir, fp);
    if (l.ok()) {
      std::optional<Profile> again;
      if (reuse) {
        PT_ASSIGN_OR_RETURN(again, LoadCachedProfile(dir, fp));
      }
      CacheVerdict v;
      if (again) v.profile = std::move(*again);
      else v.lock.emplace(std::move(*l));
      return v;
    }
    if (l.status().code() != StatusCode::kFailedPrecondition ||
        std::chrono::steady_clock::now() >= deadline) {
      if (!first) {
        return l.status().WithContext("waited " + std::to_string(static_cast<int>(wait_s)) + " s");
      }
      return l.status();
    }
    if (first) {
      *waited = true;
      say("another process is profiling this cluster; waiting up to " +
          std::to_string(static_cast<int>(wait_s)) + " s for its profile");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!reuse) continue;
    PT_ASSIGN_OR_RETURN(std::optional<Profile> hit, LoadCachedProfile(dir, fp));
    if (hit) {
      CacheVerdict v;
      v.profile = std::move(*hit);
      return v;
    }
  }
}

}  // namespace

Status CheckSampling(int64_t samples, int64_t iters, int64_t warmup_iters,
                     const std::string& prefix) {
  auto range = [&](const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v == -1 || (v >= lo && v <= hi)) return Status::Ok();
    return Status::InvalidArgument(prefix + name + ": must be in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  };
  PT_RETURN_IF_ERROR(range("samples", samples, 1, kMaxSamples));
  PT_RETURN_IF_ERROR(range("iters", iters, 1, kMaxIters));
  PT_RETURN_IF_ERROR(range("warmup_iters", warmup_iters, 0, kMaxWarmupIters));
  // Unstated values count at the largest default (5 samples of 20 iterations).
  const int64_t ops = (samples == -1 ? 5 : samples) * (iters == -1 ? 20 : iters);
  if (ops > kMaxSampledOps) {
    return Status::InvalidArgument(prefix + "samples × " + prefix + "iters: " +
                                   std::to_string(ops) + " timed operations per row; at most " +
                                   std::to_string(kMaxSampledOps));
  }
  return Status::Ok();
}

Result<ProfileRunResult> RunProfile(const ProfileRunOptions& o,
                                    const std::function<void(const std::string&)>& progress,
                                    const std::function<int(const Status&)>& on_fatal) {
  if (o.out_path.empty()) return Status::InvalidArgument("--out FILE is required");
  PT_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> owned, backend::CreateBackend(o.backend));
  backend::Backend& b = *owned;
  ProfileRunResult result;
  result.rank = b.rank();
  result.world_size = b.world_size();
  const bool root = b.rank() == 0;
  auto say = [&](const std::string& line) {
    if (root && progress) progress(line);
  };
  say("backend " + b.name() + ": " + std::to_string(b.world_size()) + " rank(s)");

  PT_ASSIGN_OR_RETURN(Discovery disc, OrAbort(b, on_fatal, Discover(b)));
  result.nodes = disc.nodes;
  result.ranks_per_node = disc.ranks_per_node;
  say("discovered " + std::to_string(disc.nodes) + " node(s) × " +
      std::to_string(disc.ranks_per_node) + " rank(s) of " + disc.device.name +
      (disc.device.kind == "cuda" ? (disc.nvml ? ", NVML topology read" : ", " + disc.nvml_note)
                                  : ""));

  // Rank 0 decides: cached profile, measure (holding the lock), or fail.
  // The fake backend measures nothing: its profiles live in a cache of their
  // own that no plan reads (SyntheticCacheDir).
  const bool synthetic = o.backend.name == "fake";
  const std::string shared_dir = o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir;
  const std::string cache_dir = synthetic ? SyntheticCacheDir(shared_dir) : shared_dir;
  std::optional<topology::ClusterSpec> base;
  std::optional<CacheLock> lock;
  std::optional<Profile> cached;
  Status verdict_status;
  Plan plan = Plan::kMeasure;
  if (root) {
    auto cluster =
        o.cluster ? Result<topology::ClusterSpec>(*o.cluster) : ClusterFromDiscovery(disc);
    if (!cluster.ok()) {
      verdict_status = cluster.status();
      plan = Plan::kFail;
    } else {
      base = *cluster;
      const std::string fp = topology::Fingerprint(*base);
      say("cluster fingerprint " + fp +
          (o.cluster ? " (--cluster " + base->name + ")" : " (discovered)"));
      if (o.use_cache) {
        result.cache_path = CachedProfilePath(cache_dir, fp);
        auto hit = o.refresh ? Result<std::optional<Profile>>(std::optional<Profile>())
                             : LoadCachedProfile(cache_dir, fp);
        if (!hit.ok()) {
          verdict_status = hit.status();
          plan = Plan::kFail;
        } else if (hit->has_value()) {
          cached = std::move(**hit);
          plan = Plan::kFromCache;
        } else {
          auto got = WaitForCacheOrLock(cache_dir, fp, o.lock_wait_s, !o.refresh, &result.waited, say);
          if (!got.ok()) {
            verdict_status = got.status();
            plan = Plan::kFail;
          } else if (got->profile) {
            cached = std::move(*got->profile);
            plan = Plan::kFromCache;
          } else {
            lock.emplace(std::move(*got->lock));
          }
        }
      }
    }
  }
  PT_ASSIGN_OR_RETURN(std::vector<std::string> verdicts,
                      b.HostAllGather(std::to_string(static_cast<int>(plan))));
  plan = static_cast<Plan>(std::stoi(verdicts[0]));
  if (plan == Plan::kFail) {
    if (root) return verdict_status;
    return Status::FailedPrecondition("rank 0 could not start the profile (see its message)");
  }
  if (plan == Plan::kFromCache) {
    result.from_cache = true;
    if (root) {
      say("using the cached profile " + result.cache_path + " (measured " +
          cached->environment.created_at + "); --refresh measures again");
      PT_RETURN_IF_ERROR(WriteProfile(*cached, o.out_path));
      // The measure → plan flow reads this file on every run, not only the first.
      if (!o.cluster_out_path.empty()) {
        PT_RETURN_IF_ERROR(WriteFileAtomic(
            o.cluster_out_path,
            topology::ClusterSpecToJson(cached->cluster ? *cached->cluster : *base).dump(2) +
                "\n"));
      }
      result.profile = std::move(*cached);
    }
    return result;
  }

  // Measure.
  MeasurementPlan mp = DefaultPlan(o.backend.name, o.quick, b.world_size(), disc.ranks_per_node);
  if (o.sweep) mp.sweep = *o.sweep;
  if (o.iters) mp.iters = *o.iters;
  if (o.warmup_iters) mp.warmup_iters = *o.warmup_iters;
  if (o.samples) mp.samples = *o.samples;
  if (o.dtype) mp.dtype = *o.dtype;
  if (!o.collectives.empty()) mp.collectives = o.collectives;
  if (o.skip_gemm) mp.gemm_precisions.clear();
  PT_ASSIGN_OR_RETURN(Measurements m, OrAbort(b, on_fatal, RunMeasurements(b, mp, say)));
  m.env.tool = o.tool;
  m.env.backend = o.backend.name;
  m.env.argv = o.argv;
  if (!root) return result;

  PT_ASSIGN_OR_RETURN(result.profile, BuildProfile(m, base, PeaksOf(*base), &result.warnings));
  result.report = FormatReport(m, &result.profile);
  if (lock) {
    PT_RETURN_IF_ERROR(synthetic ? StoreSyntheticProfile(shared_dir, result.profile, *lock)
                                 : StoreCachedProfile(cache_dir, result.profile, *lock));
    say(std::string(synthetic ? "cached apart from measured profiles (plans never read it) as "
                              : "cached as ") +
        result.cache_path);
  }
  PT_RETURN_IF_ERROR(WriteProfile(result.profile, o.out_path));
  if (!o.report_path.empty()) PT_RETURN_IF_ERROR(WriteFileAtomic(o.report_path, result.report));
  if (!o.measurements_path.empty()) {
    PT_RETURN_IF_ERROR(WriteFileAtomic(o.measurements_path, MeasurementsToJson(m).dump(2) + "\n"));
  }
  if (!o.cluster_out_path.empty()) {
    PT_RETURN_IF_ERROR(
        WriteFileAtomic(o.cluster_out_path, topology::ClusterSpecToJson(*base).dump(2) + "\n"));
  }
  return result;
}

Result<Profile> ImportProfile(const ImportRunOptions& o, std::vector<std::string>* warnings) {
  if (o.logs.empty()) return Status::InvalidArgument("give at least one nccl-tests log to import");
  if (o.out_path.empty()) return Status::InvalidArgument("--out FILE is required");
  Measurements m;
  m.env.tool = o.tool;
  m.env.backend = "nccl-tests";
  m.env.argv = o.argv;
  m.env.created_at = UtcNowIso8601();
  for (const std::string& path : o.logs) {
    PT_ASSIGN_OR_RETURN(ImportResult r, ImportNcclTestsFile(path, o.import));
    for (const std::string& w : r.warnings) warnings->push_back(w);
    if (m.env.hosts.empty() && !r.hosts.empty()) {
      m.env.hosts = r.hosts;
      m.env.world_size = static_cast<int>(r.hosts.size());
      std::map<std::string, int> per_host;
      for (const std::string& h : r.hosts) ++per_host[h];
      m.env.nodes = static_cast<int>(per_host.size());
      for (const auto& [h, n] : per_host) m.env.ranks_per_node = std::max(m.env.ranks_per_node, n);
    }
    if (m.env.device.empty()) m.env.device = r.device;
    if (!r.nccl_tests_version.empty()) m.env.versions["nccl_tests"] = r.nccl_tests_version;
    if (!r.nccl_version.empty()) m.env.versions["nccl"] = r.nccl_version;
    m.env.sources.push_back(path);
    for (CollectiveSeries& s : r.series) m.collectives.push_back(std::move(s));
  }
  PeakTable peaks;
  if (o.cluster) peaks = PeaksOf(*o.cluster);
  PT_ASSIGN_OR_RETURN(Profile p, BuildProfile(m, o.cluster, peaks, warnings));
  PT_RETURN_IF_ERROR(WriteProfile(p, o.out_path));
  return p;
}

}  // namespace paratune::profiler
