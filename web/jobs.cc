#include "web/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "planner/plans.h"
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

bool ValidId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-')) return false;
  }
  return true;
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
  std::filesystem::create_directories(options_.dir, ec);
  if (ec)
    return Status::IoError("cannot create the job folder " + options_.dir + ": " + ec.message());
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  if (ec) return Status::IoError("cannot list " + options_.dir + ": " + ec.message());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> queued;  // (created_at, id)
  for (const auto& f : files) {
    auto text = ReadFileToString(f.string());
    if (!text.ok()) return text.status();
    auto doc = ParseJson(*text, f.string());
    // A record we cannot read was not written by us (writes are atomic): say so.
    if (!doc.ok()) return doc.status();
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
    } catch (const Json::exception& e) {
      return Status::ParseError(f.string() + ": not a paratune.job/v1 record: " + e.what());
    }
    if (!ValidId(j.id) || f.stem().string() != j.id) {
      return Status::ParseError(f.string() + ": the record's id does not match its file name");
    }
    if (j.status == "running") {
      j.status = "failed";
      j.error = "interrupted: the service stopped while the job ran";
      j.finished_at = NowRfc3339();
      PT_RETURN_IF_ERROR(Persist(j));
    } else if (j.status == "queued") {
      queued.emplace_back(j.created_at, j.id);
    }
    jobs_[j.id] = std::move(j);
  }
  std::sort(queued.begin(), queued.end());
  for (auto& q : queued) queue_.push_back(q.second);
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
    for (const char* key : {"samples", "iters"}) {  // `paratune profile --samples N --iters N`
      int64_t n = 1;
      PT_RETURN_IF_ERROR(r.OptInteger(key, &n));
      if (n < 1 || n > 100000) return r.Error(key, "must be in [1, 100000]");
    }
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
  return WriteFileAtomic(options_.dir + "/" + j.id + ".json",
                         o.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

std::optional<OrderedJson> JobManager::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return ToJson(it->second, true);
}

std::vector<OrderedJson> JobManager::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Job*> all;
  for (const auto& [id, j] : jobs_) all.push_back(&j);
  std::sort(all.begin(), all.end(), [](const Job* a, const Job* b) {
    return a->created_at != b->created_at ? a->created_at > b->created_at : a->id > b->id;
  });
  std::vector<OrderedJson> out;
  for (const Job* j : all) out.push_back(ToJson(*j, false));
  return out;
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
    std::error_code ec;
    std::filesystem::create_directories(work, ec);
    Status inputs = Status::Ok();
    if (j.kind == "profile" && j.request.contains("cluster")) {
      // Resolve presets here so the child reads one self-contained file.
      auto c = topology::ResolveCluster(j.request["cluster"], "/cluster");
      inputs =
          c.ok() ? WriteFileAtomic(work + "/cluster.json", topology::ClusterSpecToJson(*c).dump(2))
                 : c.status();
    } else if (j.kind == "confirm") {
      inputs = WriteFileAtomic(work + "/plans.json", j.request["plans"].dump(2));
    }
    j.started_at = NowRfc3339();
    if (ec || !inputs.ok()) {
      j.status = "failed";
      j.error = ec ? "cannot create " + work + ": " + ec.message() : inputs.message();
      j.finished_at = j.started_at;
      (void)Persist(j);
      return;
    }
    j.status = "running";
    (void)Persist(j);
    argv = Argv(j);
  }

  // Spawn in a new process group so a cancel reaches mpirun's children too.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  const std::string log = work + "/log.txt";
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with default signal handling and an empty mask, whatever
  // the service blocked or ignored (it waits for SIGINT/SIGTERM on a thread).
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    Job& j = jobs_.at(id);
    j.status = "failed";
    j.error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    j.finished_at = NowRfc3339();
    (void)Persist(j);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.at(id).pid = pid;
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
}

}  // namespace paratune::web
