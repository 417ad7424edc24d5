#include "web/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "common/state_dir.h"
#include "common/strings.h"
#include "planner/plans.h"
#include "profiler/runner.h"
#include "topology/cluster.h"

extern char** environ;

namespace paratune::web {
namespace {

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Tail(const std::string& path, size_t max_bytes) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  const std::string& s = *text;
  return s.size() <= max_bytes ? s : s.substr(s.size() - max_bytes);
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

bool ValidId(const std::string& id) { return IsPathToken(id); }

double AgeSeconds(const std::string& rfc3339) {
  std::tm tm{};
  if (!strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  const std::time_t t = timegm(&tm);
  return std::difftime(std::time(nullptr), t);
}

// Whether process `pid` is running this job's work: its command line names
// the job's folder (so a recycled pid is never killed).
bool IsJobProcess(pid_t pid, const std::string& work) {
  auto cmd = ReadFileToString("/proc/" + std::to_string(pid) + "/cmdline");
  return cmd.ok() && cmd->find(work + "/") != std::string::npos;
}

}  // namespace

JobManager::JobManager(JobOptions options) : options_(std::move(options)) {}

JobManager::~JobManager() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool JobManager::UsesHardware(const Json& request) {
  if (!request.is_object()) return false;
  auto it = request.find("backend");
  return it == request.end() || !it->is_string() || it->get<std::string>() != "fake";
}

Status JobManager::Start() {
  std::error_code ec;
  if (!options_.read_only) {
    PT_RETURN_IF_ERROR(MakeStateSubdirectory(options_.dir));
  } else if (!std::filesystem::exists(options_.dir, ec)) {
    return Status::Ok();
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  if (ec) return Status::IoError("cannot list " + options_.dir + ": " + ec.message());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> queued;  // (created_at, id)
  for (const auto& f : files) {
    // A record we cannot read was not written by us (writes are atomic): it
    // is set aside as <name>.corrupt, and the service starts without it.
    auto set_aside = [&](const std::string& why) {
      std::error_code rec;
      std::filesystem::rename(f, f.string() + ".corrupt", rec);
      std::fprintf(stderr, "paratune serve: job record %s set aside: %s\n",
                   f.filename().string().c_str(), why.c_str());
    };
    auto text = ReadStateFile(f.string());
    if (!text.ok()) {
      set_aside(text.status().message());
      continue;
    }
    auto doc = ParseJson(*text, f.filename().string());
    if (!doc.ok()) {
      set_aside(doc.status().message());
      continue;
    }
    const Json& d = *doc;
    Job j;
    try {
      j.id = d.at("id").get<std::string>();
      j.kind = d.at("kind").get<std::string>();
      j.backend = d.at("backend").get<std::string>();
      j.status = d.at("status").get<std::string>();
      j.request = d.at("request");
      j.created_at = d.value("created_at", "");
      j.started_at = d.value("started_at", "");
      j.finished_at = d.value("finished_at", "");
      j.error = d.value("error", "");
      if (d.contains("exit_code")) j.exit_code = d.at("exit_code").get<int>();
      if (d.contains("pid")) j.pid = d.at("pid").get<pid_t>();
    } catch (const Json::exception& e) {
      set_aside(std::string("not a paratune.job/v1 record: ") + e.what());
      continue;
    }
    if (!ValidId(j.id) || f.stem().string() != j.id) {
      set_aside("the record's id does not match its file name");
      continue;
    }
    if (j.status == "running") {
      // Its child died with the service (PR_SET_PDEATHSIG); what it started
      // in its process group may not have: end that too.
      if (j.pid > 0 && IsJobProcess(j.pid, options_.dir + "/" + j.id)) ::kill(-j.pid, SIGKILL);
      j.pid = 0;
      j.status = "failed";
      j.error = "interrupted: the service stopped while the job ran";
      j.finished_at = NowRfc3339();
      if (Status w = options_.read_only ? Status::Ok() : Persist(j); !w.ok()) {
        std::fprintf(stderr, "paratune serve: job %s: %s (kept in memory)\n", j.id.c_str(),
                     w.message().c_str());
      }
    } else if (j.status == "queued") {
      queued.emplace_back(j.created_at, j.id);
    }
    j.pid = 0;
    jobs_[j.id] = std::move(j);
  }
  std::sort(queued.begin(), queued.end());
  for (auto& q : queued) queue_.push_back(q.second);
  if (options_.read_only) return Status::Ok();
  Prune();
  worker_ = std::thread([this] { Worker(); });
  return Status::Ok();
}

Result<OrderedJson> JobManager::Submit(const Json& request, SubmitError* why) {
  *why = SubmitError::kInvalid;
  Job j;
  ObjectReader r(request, "");
  if (!request.is_object()) return Status::InvalidArgument("the request must be a JSON object");
  std::string schema = kJobRequestSchema;
  PT_RETURN_IF_ERROR(r.OptString("schema", &schema));
  if (schema != kJobRequestSchema)
    return r.Error("schema", std::string("must be \"") + kJobRequestSchema + "\"");
  PT_RETURN_IF_ERROR(r.String("kind", &j.kind));
  PT_RETURN_IF_ERROR(r.String("backend", &j.backend));
  if (j.backend != "fake" && j.backend != "mpi-cpu" && j.backend != "cuda") {
    return r.Error("backend", "must be \"cuda\", \"mpi-cpu\" or \"fake\"");
  }
  if (j.kind == "profile") {
    bool quick = true;
    PT_RETURN_IF_ERROR(r.OptBool("quick", &quick));
    // `paratune profile --samples N --iters N`, within the CLI's bounds.
    int64_t samples = -1, iters = -1;
    PT_RETURN_IF_ERROR(r.OptInteger("samples", &samples));
    PT_RETURN_IF_ERROR(r.OptInteger("iters", &iters));
    if (r.Has("samples") && samples == -1) return r.Error("samples", "must be >= 1");
    if (r.Has("iters") && iters == -1) return r.Error("iters", "must be >= 1");
    PT_RETURN_IF_ERROR(profiler::CheckSampling(samples, iters, -1, "/"));
    if (r.Has("cluster")) {
      auto c = topology::ResolveCluster(r.Raw("cluster"), "/cluster");
      if (!c.ok()) return c.status();
    }
  } else if (j.kind == "confirm") {
    if (!r.Has("plans")) return r.Error("plans", "is required (a paratune.plans/v1 document)");
    const Json& plans = r.Raw("plans");
    // The job kind's own message for a plans value that is no document at all.
    if (!plans.is_object() || !plans.contains("schema") || !plans["schema"].is_string()) {
      return r.Error("plans", "must be a paratune.plans/v1 object");
    }
    // Library messages name pointers inside the plans document: re-root them.
    auto under_plans = [](const Status& s) {
      const std::string& m = s.message();
      return Status(s.code(), m.rfind('/', 0) == 0 ? "/plans" + m : "/plans: " + m);
    };
    auto job = planner::JobFromPlans(plans);
    if (!job.ok()) return under_plans(job.status());
    auto cands = planner::CandidatesFromPlans(plans);
    if (!cands.ok()) return under_plans(cands.status());
    if (cands->empty()) return r.Error("plans", "has no candidates to confirm");
    int64_t top = 3;
    PT_RETURN_IF_ERROR(r.OptInteger("top", &top));
    if (top < 1 || top > 20) return r.Error("top", "must be in [1, 20]");
  } else {
    return r.Error("kind", "must be \"profile\" or \"confirm\"");
  }
  PT_RETURN_IF_ERROR(r.Finish());
  j.request = request;
  j.status = "queued";
  j.created_at = NowRfc3339();

  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(queue_.size()) >= options_.max_queued) {
    *why = SubmitError::kQueueFull;
    return Status::Unavailable("the job queue is full (" + std::to_string(options_.max_queued) +
                               " waiting); retry later");
  }
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[40];
  std::snprintf(id, sizeof id, "%012llx-%04llx",
                static_cast<unsigned long long>(rng() & 0xffffffffffffULL),
                static_cast<unsigned long long>(++counter_ & 0xffff));
  j.id = id;
  // Acknowledged only once the record is on disk.
  if (Status s = Persist(j); !s.ok()) {
    *why = SubmitError::kIo;
    return s;
  }
  OrderedJson out = ToJson(j, false);
  jobs_[j.id] = j;
  queue_.push_back(j.id);
  *why = SubmitError::kNone;
  cv_.notify_all();
  return out;
}

OrderedJson JobManager::ToJson(const Job& j, bool with_result) const {
  OrderedJson o;
  o["schema"] = kJobSchema;
  o["id"] = j.id;
  o["kind"] = j.kind;
  o["backend"] = j.backend;
  o["status"] = j.status;
  o["created_at"] = j.created_at;
  if (!j.started_at.empty()) o["started_at"] = j.started_at;
  if (!j.finished_at.empty()) o["finished_at"] = j.finished_at;
  if (j.pid > 0) o["pid"] = j.pid;  // running: the process (group leader) doing the work
  if (j.exit_code) o["exit_code"] = *j.exit_code;
  if (!j.error.empty()) o["error"] = j.error;
  o["links"] = {{"self", "/v1/jobs/" + j.id}};
  o["request"] = j.request;
  if (with_result) {
    const std::string work = options_.dir + "/" + j.id;
    if (j.status != "queued") o["log_tail"] = Tail(work + "/log.txt", 4096);
    if (j.status == "succeeded") {
      auto text = ReadFileToString(work + "/result.json");
      if (text.ok()) {
        auto doc = ParseJson(*text, "result");
        if (doc.ok()) o["result"] = *doc;
      }
    }
  }
  return o;
}

Status JobManager::Persist(const Job& j) const {
  OrderedJson o = ToJson(j, false);
  return WriteStateFile(options_.dir + "/" + j.id + ".json",
                         o.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

std::optional<OrderedJson> JobManager::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return ToJson(it->second, true);
}

std::vector<const JobManager::Job*> JobManager::Newest() const {
  std::vector<const Job*> all;
  for (const auto& [id, j] : jobs_) all.push_back(&j);
  std::sort(all.begin(), all.end(), [](const Job* a, const Job* b) {
    return a->created_at != b->created_at ? a->created_at > b->created_at : a->id > b->id;
  });
  return all;
}

std::vector<OrderedJson> JobManager::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OrderedJson> out;
  for (const Job* j : Newest()) out.push_back(ToJson(*j, false));
  return out;
}

Result<std::vector<OrderedJson>> JobManager::Page(size_t limit, const std::string& after,
                                                  bool* more) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<const Job*> all = Newest();
  size_t start = 0;
  if (!after.empty()) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Job* j) { return j->id == after; });
    if (it == all.end()) return Status::NotFound("after: no job '" + after + "'");
    start = static_cast<size_t>(it - all.begin()) + 1;
  }
  std::vector<OrderedJson> out;
  for (size_t i = start; i < all.size() && out.size() < limit; ++i)
    out.push_back(ToJson(*all[i], false));
  *more = start + out.size() < all.size();
  return out;
}

void JobManager::Prune() {
  std::vector<const Job*> finished;
  for (const Job* j : Newest()) {
    if (j->status != "queued" && j->status != "running") finished.push_back(j);
  }
  std::vector<std::string> drop;
  for (size_t i = 0; i < finished.size(); ++i) {
    const Job* j = finished[i];
    const std::string& when = j->finished_at.empty() ? j->created_at : j->finished_at;
    if (static_cast<int>(i) >= options_.max_finished || AgeSeconds(when) > options_.max_age_s)
      drop.push_back(j->id);
  }
  for (const std::string& id : drop) {
    std::error_code ec;
    const std::string work = options_.dir + "/" + id;
    if (ValidId(id) && PathIsUnder(work, options_.dir)) {
      std::filesystem::remove(work + ".json", ec);
      std::filesystem::remove_all(work, ec);
    }
    jobs_.erase(id);
  }
}

std::map<std::string, int> JobManager::CountByStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int> out = {
      {"queued", 0}, {"running", 0}, {"succeeded", 0}, {"failed", 0}, {"cancelled", 0}};
  for (const auto& [id, j] : jobs_) ++out[j.status];
  return out;
}

std::optional<OrderedJson> JobManager::Cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  Job& j = it->second;
  if (j.status == "queued") {
    j.status = "cancelled";
    j.finished_at = NowRfc3339();
    (void)Persist(j);  // the in-memory state wins; a failed write is retried on the next transition
    std::erase(queue_, id);
  } else if (j.status == "running") {
    j.cancel_requested = true;  // the worker kills the process group and records "cancelled"
    cv_.notify_all();
  }
  return ToJson(j, false);
}

std::vector<std::string> JobManager::Argv(const Job& j) const {
  const std::string work = options_.dir + "/" + j.id;
  std::vector<std::string> a = {options_.executable};
  if (j.kind == "profile") {
    a.insert(a.end(), {"profile", "--backend", j.backend, "--out", work + "/result.json"});
    if (j.request.value("quick", true)) a.push_back("--quick");
    for (const char* key : {"samples", "iters"}) {
      if (j.request.contains(key))
        a.insert(a.end(), {std::string("--") + key, std::to_string(j.request[key].get<int64_t>())});
    }
    if (!options_.cache_dir.empty()) a.insert(a.end(), {"--cache-dir", options_.cache_dir});
    if (j.request.contains("cluster")) a.insert(a.end(), {"--cluster", work + "/cluster.json"});
  } else {
    a.insert(a.end(), {"confirm", "--plans", work + "/plans.json", "--backend", j.backend, "--top",
                       std::to_string(j.request.value("top", 3)), "--out", work + "/result.json"});
  }
  return a;
}

void JobManager::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string id = queue_.front();
    queue_.pop_front();
    lock.unlock();
    RunOne(id);
    lock.lock();
  }
}

void JobManager::RunOne(const std::string& id) {
  std::vector<std::string> argv;
  std::string work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Job& j = jobs_.at(id);
    if (j.status != "queued") return;
    work = options_.dir + "/" + id;
    Status made = MakeStateSubdirectory(work);
    Status inputs = Status::Ok();
    if (j.kind == "profile" && j.request.contains("cluster")) {
      // Resolve presets here so the child reads one self-contained file.
      auto c = topology::ResolveCluster(j.request["cluster"], "/cluster");
      inputs =
          c.ok() ? WriteStateFile(work + "/cluster.json", topology::ClusterSpecToJson(*c).dump(2))
                 : c.status();
    } else if (j.kind == "confirm") {
      inputs = WriteStateFile(work + "/plans.json", j.request["plans"].dump(2));
    }
    j.started_at = NowRfc3339();
    if (!made.ok() || !inputs.ok()) {
      j.status = "failed";
      j.error = !made.ok() ? made.message() : inputs.message();
      j.finished_at = j.started_at;
      (void)Persist(j);
      return;
    }
    j.status = "running";
    (void)Persist(j);
    argv = Argv(j);
  }

  // The child runs in its own process group, so a cancel reaches whatever it
  // starts too, and it is killed when the thread that started it (this
  // worker, alive as long as the service) goes away, however the service
  // ends (PR_SET_PDEATHSIG). Everything the child needs is prepared before
  // fork: between fork and exec only async-signal-safe calls are made.
  const std::string log = work + "/log.txt";
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the service died before prctl
    // Default signal handling and an empty mask, whatever the service blocked
    // or ignored (it waits for SIGINT/SIGTERM on a thread).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Close-on-exec, so the child keeps them only as 0, 1 and 2; every other
    // descriptor of the service (sockets, the epoll set) is closed too.
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (in < 0 || out < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    for (int fd = 0; fd < 3; ++fd) ::fcntl(fd, F_SETFD, 0);  // in == 0 kept its close-on-exec
    ::close_range(3, ~0U, 0);
    ::execve(cargv[0], cargv.data(), environ);
    ::_exit(127);
  }
  const int rc = pid < 0 ? errno : 0;
  if (pid > 0) ::setpgid(pid, pid);  // also here: no race with the kill below
  if (rc != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    Job& j = jobs_.at(id);
    j.status = "failed";
    j.error = std::string("cannot start the job: ") + std::strerror(rc);
    j.finished_at = NowRfc3339();
    (void)Persist(j);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Job& j = jobs_.at(id);
    j.pid = pid;
    (void)Persist(j);  // a restart finds the process group to end by this
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> term_sent;
  std::string stop_reason;  // why we stopped it: "cancelled", "timeout", "stopping"
  int wstatus = 0;
  while (true) {
    const pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    const auto now = std::chrono::steady_clock::now();
    if (stop_reason.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.at(id).cancel_requested)
        stop_reason = "cancelled";
      else if (stopping_)
        stop_reason = "stopping";
      else if (std::chrono::duration<double>(now - t0).count() > options_.time_limit_s)
        stop_reason = "timeout";
    }
    if (!stop_reason.empty()) {
      if (!term_sent) {
        ::kill(-pid, SIGTERM);
        term_sent = now;
      } else if (std::chrono::duration<double>(now - *term_sent).count() > options_.kill_grace_s) {
        ::kill(-pid, SIGKILL);
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }

  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_.at(id);
  j.pid = 0;
  j.finished_at = NowRfc3339();
  if (WIFEXITED(wstatus)) j.exit_code = WEXITSTATUS(wstatus);
  std::error_code ec;
  const bool have_result = std::filesystem::exists(work + "/result.json", ec);
  if (stop_reason == "cancelled") {
    j.status = "cancelled";
  } else if (stop_reason == "stopping") {
    j.status = "failed";
    j.error = "interrupted: the service stopped while the job ran";
  } else if (stop_reason == "timeout") {
    j.status = "failed";
    j.error = "timeout: still running after " +
              std::to_string(static_cast<int>(options_.time_limit_s)) + " s";
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && have_result) {
    j.status = "succeeded";
  } else {
    j.status = "failed";
    std::string last = LastLine(Tail(log, 4096));
    if (WIFSIGNALED(wstatus))
      last = "killed by signal " + std::to_string(WTERMSIG(wstatus)) +
             (last.empty() ? "" : ": " + last);
    j.error = last.empty() ? "exited with code " + std::to_string(j.exit_code.value_or(-1)) : last;
  }
  (void)Persist(j);
  Prune();
}

}  // namespace paratune::web
