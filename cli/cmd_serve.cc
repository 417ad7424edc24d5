// `paratune serve`: the REST service and the web page (docs/rest.md). Thin:
// parse flags, read the token, build web::Server, wait for SIGINT/SIGTERM.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <ostream>
#include <thread>
#include <tuple>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/version.h"
#include "common/strings.h"
#include "profiler/cache.h"
#include "web/server.h"

namespace paratune::cli {
namespace {

constexpr const char* kServeHelp =
    R"help(usage: paratune serve [--host 127.0.0.1] [--port 8080] [--token-file F] [--cache-dir D]
                      [--max-body-bytes N] [--max-connections N] [--workers N]
                      [--header-timeout S] [--idle-timeout S] [--search-threads T]
                      [--search-time-limit S] [--max-queued-jobs N]
                      [--max-finished-jobs N] [--job-max-age-days D]

Runs paratune as a service: the REST API under /v1 and the web page at /, from
this one binary (the page is compiled in; nothing is fetched from elsewhere).

  POST /v1/plans      the request of `paratune plan` as JSON -> paratune.plans/v1
                      (identical requests are answered from memory); a body
                      with "network" -> paratune.network_plans/v1 (docs/networks.md)
  POST /v1/predict    the request of `paratune predict --request` -> paratune.prediction/v1;
                      a body with "network" -> paratune.network_prediction/v1
  GET  /v1/presets[/models|networks|gpus|clusters[/NAME]]
  GET  /v1/profiles[/FP]   cached profiles with their provenance
  POST /v1/profiles   a profile, an nccl-tests -J document, or {"nccl_tests_log": TEXT}
                      with ?cluster=NAME                               (token)
  DELETE /v1/profiles/FP                                               (token)
  POST /v1/jobs       profiling or confirmation as a child process -> 202 (token)
  GET  /v1/jobs[?limit=N&after=ID], GET|DELETE /v1/jobs/ID      (DELETE: token)
  GET  /v1/openapi.json (OpenAPI 3.1), /livez, /readyz, /metrics (Prometheus)
Errors are RFC 9457 application/problem+json naming the bad field by JSON pointer.

Who may change what: reads are open to anyone who can reach loopback; every
write (token) needs "Authorization: Bearer <token>". Without --token-file a
fresh token is written at start to <cache-dir>/serve-token (mode 0600, readable
only by the user running the service) and its path printed on stderr. Requests
that change state from a web page on another origin are refused (403), and
bodies are JSON only. docs/service.md has the threat model and every limit.

  --host H             address to listen on (default 127.0.0.1). Anything but
                       loopback requires --token-file.
  --allow-host H[,H]   Host names answered besides loopback's, the --host
                       address and (off loopback) this machine's name; any
                       other Host header gets 421 (DNS-rebinding defence)
  --port P             TCP port (default 8080; 0 = any free port, printed on stderr)
  --token-file F       a file holding the bearer token (at least 16 characters),
                       yours and mode 0600 or stricter (else refused, exit 2);
                       then reads (/v1, /metrics) need it too, not only writes
  --cache-dir D        the state directory: profiles, job records, the token
                       (default ${PARATUNE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/paratune}).
                       Made mode 0700 when missing; refused (exit 2) when it or
                       anything in it belongs to another user, is writable by
                       group or others, or is a link. Read-only (or full):
                       plans are served, writes get 503, /readyz says degraded
  --max-body-bytes N   largest request body, however it is sent (default 1048576;
                       larger: 413). Compressed bodies are refused (415).
  --max-connections N  open connections (default 512); when full, the longest
                       idle or slowest one is closed to make room
  --workers N          requests handled at once (default 16); health probes
                       have their own worker and never wait behind them
  --header-timeout S   a request's headers must arrive within S s (default 10)
  --idle-timeout S     a keep-alive connection idle S s is closed (default 5)
  --search-threads T   threads per plan search (default: all cores); searches run
                       at idle priority (SCHED_IDLE), so cached plans and probes
                       preempt them
  --search-time-limit S  a plan request still running S seconds after it
                       arrived (set-up, its wait for a slot and the search) is
                       abandoned with a 422 (default 30)
  --max-queued-jobs N  jobs waiting beyond the running one (default 8; more: 429)
  --max-finished-jobs N  finished jobs kept (default 200; the oldest are pruned)
  --job-max-age-days D   finished jobs older than D days are pruned (default 7)

Job records survive restarts; a job that was running when the service stopped
is marked failed ("interrupted"), and job processes die with the service.

example:
  paratune serve --port 8080 &
  curl -s localhost:8080/v1/plans -H 'Content-Type: application/json' \
    -d '{"model":"llama3-8b","cluster":"dgx-h100","gpus":64,"training":{"global_batch":512}}'
  curl -s localhost:8080/v1/jobs -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $(cat ~/.cache/paratune/serve-token)" \
    -d '{"kind":"profile","backend":"fake"}'
)help";

// kFailedPrecondition when the token file belongs to another user or its
// group or others may read or write it (fix: chmod 600).
Status TokenFileIsPrivate(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::IoError("cannot open '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + path + "' is not a file");
  if (st.st_uid != ::geteuid()) {
    return Status::InvalidArgument("'" + path + "' belongs to uid " +
                                      std::to_string(st.st_uid) +
                                      ", not to the user running the service");
  }
  if (st.st_mode & 077) {
    return Status::InvalidArgument("'" + path +
                                   "' can be read by its group or others; a token is a "
                                   "secret: `chmod 600 '" + path + "'`");
  }
  return Status::Ok();
}

}  // namespace

int RunServe(const Args& args, Io io) {
  Flags flags(
      {"--host", "--port", "--token-file", "--cache-dir", "--max-body-bytes", "--search-threads",
       "--search-time-limit", "--max-queued-jobs", "--max-connections", "--workers",
       "--header-timeout", "--idle-timeout", "--max-finished-jobs", "--job-max-age-days",
       "--allow-host"},
      {"--help"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "serve", kServeHelp)) return *done;
  if (!flags.positionals().empty()) {
    return UsageError(
        io, "serve",
        Status::InvalidArgument("unexpected argument '" + flags.positionals()[0] + "'"));
  }
  web::ServerOptions o;
  o.version = Version();
  o.host = flags.GetOr("--host", "127.0.0.1");
  auto int_flag = [&](const char* name, int64_t def, int64_t lo, int64_t hi) -> Result<int64_t> {
    auto v = flags.Get(name);
    if (!v) return def;
    PT_ASSIGN_OR_RETURN(int64_t n, ParseInt(*v, name));
    if (n < lo || n > hi) {
      return Status::InvalidArgument(std::string(name) + " must be in [" + std::to_string(lo) +
                                     ", " + std::to_string(hi) + "]");
    }
    return n;
  };
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto port = int_flag("--port", 8080, 0, 65535);
  auto body = int_flag("--max-body-bytes", 1 << 20, 1024, int64_t{1} << 30);
  auto threads = int_flag("--search-threads", hw, 1, 1024);
  auto queued = int_flag("--max-queued-jobs", 8, 0, 10000);
  auto conns = int_flag("--max-connections", 512, 8, 65536);
  auto workers = int_flag("--workers", 16, 1, 1024);
  auto finished = int_flag("--max-finished-jobs", 200, 0, 100000);
  for (const Status& s : {port.status(), body.status(), threads.status(), queued.status(),
                          conns.status(), workers.status(), finished.status()}) {
    if (!s.ok()) return UsageError(io, "serve", s);
  }
  o.front.max_connections = static_cast<size_t>(*conns);
  o.front.workers = static_cast<int>(*workers);
  o.jobs.max_finished = static_cast<int>(*finished);
  for (auto [name, out, lo, hi] : {std::tuple<const char*, double*, double, double>{
                                       "--header-timeout", &o.front.header_timeout_s, 0.1, 3600},
                                   {"--idle-timeout", &o.front.idle_timeout_s, 0.1, 3600},
                                   {"--job-max-age-days", &o.jobs.max_age_s, 0, 3650}}) {
    if (auto t = flags.Get(name)) {
      auto v = ParseDouble(*t, name);
      if (!v.ok() || *v < lo || *v > hi) {
        return UsageError(
            io, "serve",
            Status::InvalidArgument(std::string(name) + " must be a number in [" +
                                    FormatFixed(lo, 1) + ", " + FormatFixed(hi, 0) + "]"));
      }
      *out = std::string(name) == "--job-max-age-days" ? *v * 86400 : *v;
    }
  }
  o.port = static_cast<int>(*port);
  o.max_body_bytes = static_cast<size_t>(*body);
  o.plans.search_threads = static_cast<int>(*threads);
  o.plans.max_concurrent_searches = std::max(1, hw / static_cast<int>(*threads));
  o.plans.idle_priority = true;  // searches use the cores cached plans leave idle
  o.jobs.max_queued = static_cast<int>(*queued);
  if (auto t = flags.Get("--search-time-limit")) {
    auto v = ParseDouble(*t, "--search-time-limit");
    if (!v.ok() || !(*v > 0)) {
      return UsageError(
          io, "serve",
          Status::InvalidArgument("--search-time-limit must be a positive number of seconds"));
    }
    o.plans.search_time_limit_s = *v;
  }
  if (auto f = flags.Get("--token-file")) {
    // Like an SSH key: this user's, and readable by nobody else.
    if (Status mine = TokenFileIsPrivate(*f); !mine.ok())
      return UsageError(io, "serve", mine.WithContext("--token-file"));
    auto text = ReadFileToString(*f);
    if (!text.ok()) return UsageError(io, "serve", text.status().WithContext("--token-file"));
    o.token = Trim(*text);
    if (o.token.size() < 16) {
      return UsageError(
          io, "serve",
          Status::InvalidArgument("--token-file: the token must be at least 16 characters"));
    }
  }
  if (auto hosts = flags.Get("--allow-host")) {
    for (const std::string& h : Split(*hosts, ',')) {
      const std::string name = Trim(h);
      if (name.empty() || name.size() > 253 ||
          name.find_first_of(" /\\@#?\t") != std::string::npos) {
        return UsageError(io, "serve",
                          Status::InvalidArgument("--allow-host: '" + name.substr(0, 64) +
                                                  "' is not a host name or address"));
      }
      o.allowed_hosts.push_back(name);
    }
  }
  o.cache_dir = flags.GetOr("--cache-dir", profiler::DefaultCacheDir());
  // Everything the service creates (state, token, job records and logs) is
  // the serving user's alone, whatever umask it was started with.
  ::umask(077);
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  o.executable = ec ? "/proc/self/exe" : self.string();

  // SIGINT/SIGTERM are taken by a thread (sigwait) so shutdown runs outside a
  // signal handler; block them before any thread starts so all inherit it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = web::Server::Create(o);
  if (!server.ok()) {
    // A state directory someone else could have prepared is a usage error
    // (exit 2) with its fix, not a busy cache to retry.
    const Status& st = server.status();
    return UsageError(io, "serve",
                      st.code() == StatusCode::kFailedPrecondition
                          ? Status::InvalidArgument(st.message())
                          : st);
  }
  auto bound = (*server)->Bind();
  if (!bound.ok()) return UsageError(io, "serve", bound.status(), /*measuring=*/false);
  io.err << "paratune serve: listening on http://"
         << (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) << ":" << *bound
         << "/ (state " << o.cache_dir
         << (o.token.empty() ? "; reads open on loopback" : "; bearer token required") << ")\n";
  if (!(*server)->read_only().empty()) {
    io.err << "paratune serve: degraded: " << (*server)->read_only()
           << "; plans are served, profile and job writes are refused (503)\n";
  }
  if (!(*server)->token_file().empty()) {
    io.err << "paratune serve: writes need \"Authorization: Bearer <token>\"; the token is in "
           << (*server)->token_file() << " (mode 0600)\n";
  }
  io.err << std::flush;
  web::Server* srv = server->get();
  std::thread waiter([srv, set] {
    int sig = 0;
    sigwait(&set, &sig);
    srv->Stop();
  });
  srv->Listen();
  // Listen returned: either a signal arrived (waiter done) or Stop came from
  // elsewhere; wake the waiter in the second case.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  io.err << "paratune serve: stopped" << std::endl;
  return kExitOk;
}

}  // namespace paratune::cli
