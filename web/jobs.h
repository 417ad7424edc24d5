// web/jobs.h: long work behind POST /v1/jobs (profiling, confirmation) run as
// child processes of the `paratune` binary itself, so cancelling is a kill and
// a crash of the work cannot take the service down. Every job is a JSON record
// ("schema": "paratune.job/v1") in <cache_dir>/jobs/<id>.json, rewritten
// atomically (temp + rename) at each transition, so a restart loses nothing
// that was acknowledged: queued jobs are queued again, and jobs that were
// running when the service died are marked failed ("interrupted"), and what
// is left of their process group is killed. A child dies with the service
// (PR_SET_PDEATHSIG). Finished jobs are pruned by age and count (JobOptions);
// job ids are path tokens, and every file a job writes stays under dir.
// Thread-safe: handlers call Submit/Get/Cancel/List concurrently with the
// worker thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::web {

inline constexpr const char* kJobSchema = "paratune.job/v1";
inline constexpr const char* kJobRequestSchema = "paratune.job_request/v1";

struct JobOptions {
  std::string dir;             // where records and work files live (<cache_dir>/jobs)
  std::string cache_dir;       // passed to `paratune profile --cache-dir`
  std::string executable;      // the paratune binary to run ("/proc/self/exe" in the service)
  int max_queued = 8;          // queued jobs accepted beyond the running one; more → queue full
  double time_limit_s = 3600;  // a job still running after this is killed (failed, "timeout")
  double kill_grace_s = 2;     // SIGTERM, then SIGKILL after this many seconds
  int max_finished = 200;      // finished jobs kept (oldest pruned first)
  double max_age_s = 7 * 86400;  // finished jobs older than this are pruned
  // The state directory takes no writes: records are read, nothing is
  // written, no job runs (Submit is refused by the service before it).
  bool read_only = false;
};

// Why Submit refused a job.
enum class SubmitError { kNone, kInvalid, kQueueFull, kIo };

class JobManager {
 public:
  explicit JobManager(JobOptions options);
  ~JobManager();  // stops the worker; a running child is killed and its record marked failed
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Reads the records in options.dir (creating it, mode 0700), re-queues
  // queued jobs, marks jobs that were running as failed ("interrupted"), and
  // starts the worker. A record that cannot be rewritten (a full disk) is
  // reported on stderr and kept in memory. kIoError when the folder cannot be
  // made; kFailedPrecondition when it is not this user's alone. Read-only:
  // reads what is there, writes nothing, starts no worker.
  Status Start();

  // Validates a job request and stores it as a queued record. On success the
  // record; otherwise *why says whether the request was bad (a Status naming
  // the JSON pointer), the queue full, or the disk failed.
  Result<OrderedJson> Submit(const Json& request, SubmitError* why);
  // The record, with the result document inlined once the job succeeded.
  std::optional<OrderedJson> Get(const std::string& id) const;
  // Cancels a queued or running job (a finished one is left as it is) and
  // returns its record; nullopt when there is no such job.
  std::optional<OrderedJson> Cancel(const std::string& id);
  // Every record, newest first, without results.
  std::vector<OrderedJson> List() const;
  // Up to `limit` records, newest first, starting after the job `after` ("" =
  // from the newest); *more says whether older ones follow. kNotFound when
  // `after` is not a job.
  Result<std::vector<OrderedJson>> Page(size_t limit, const std::string& after, bool* more) const;
  // Jobs by status ("queued", "running", ...), for /metrics.
  std::map<std::string, int> CountByStatus() const;
  // Whether the request would run real hardware (any backend but "fake").
  static bool UsesHardware(const Json& request);

 private:
  struct Job {
    std::string id, kind, backend, status;  // status: queued|running|succeeded|failed|cancelled
    Json request;
    std::string created_at, started_at, finished_at;  // RFC 3339 UTC
    std::optional<int> exit_code;
    std::string error;
    bool cancel_requested = false;
    pid_t pid = 0;
  };
  OrderedJson ToJson(const Job& j, bool with_result) const;
  Status Persist(const Job& j) const;  // REQUIRES: mu_ held
  std::vector<std::string> Argv(const Job& j) const;
  void Worker();
  // Drops finished jobs past max_age_s or beyond max_finished (records and
  // work folders). REQUIRES: mu_ held.
  void Prune();
  std::vector<const Job*> Newest() const;  // REQUIRES: mu_ held
  void RunOne(const std::string& id);

  JobOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Job> jobs_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::thread worker_;
  uint64_t counter_ = 0;
};

}  // namespace paratune::web
