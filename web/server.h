// web/server.h: `paratune serve`, the REST service and the web page (docs/rest.md).
// Thin like the CLI: parse, call the library (planner, profiler, jobs), serialise.
// Routes live under /v1 (OpenAPI 3.1 at /v1/openapi.json); errors are RFC 9457
// problem documents (web/problem.h); /livez, /readyz and /metrics serve
// operators; the page and its scripts are compiled into the binary.
//
// Safety: binds to loopback unless a bearer token is configured; with a token
// every /v1 route and /metrics need "Authorization: Bearer <token>"; jobs that
// run real hardware (backend other than "fake") are refused unless a token is
// configured. Bodies are capped (413), JSON nesting is capped (400), searches
// run under a time limit, and the job queue is bounded (429).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "web/jobs.h"
#include "web/metrics.h"
#include "web/plan_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace paratune::web {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                            // 0 = any free port (see Server::Bind)
  std::string token;                          // bearer token; "" = none (then loopback only)
  std::string cache_dir;                      // profiles/ and jobs/ live here; required
  std::string executable = "/proc/self/exe";  // the paratune binary jobs run
  std::string version = "dev";
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  int max_json_depth = 64;          // deeper nesting gets 400
  double read_timeout_s = 10;       // per socket read
  double write_timeout_s = 30;      // per socket write
  int http_threads = 64;            // connections served at once
  PlanServiceOptions plans;         // cache_dir is filled in from cache_dir
  JobOptions jobs;                  // dir, cache_dir, executable filled in
};

// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool IsLoopbackHost(const std::string& host);

class Server {
 public:
  // Checks the options (a non-loopback host needs a token; the cache folder
  // must be creatable), loads the job records and starts the job worker.
  // kInvalidArgument for bad options, kIoError when the cache cannot be used.
  static Result<std::unique_ptr<Server>> Create(ServerOptions options);
  ~Server();  // stops listening and the job worker

  // Binds the listening socket; returns the port (the chosen one when
  // options.port is 0). kUnavailable when the address cannot be bound.
  Result<int> Bind();
  // Serves until Stop(). REQUIRES: Bind() succeeded. Blocks.
  void Listen();
  // Marks the service not ready (so /readyz says 503 while it drains) and
  // stops accepting. Thread-safe; callable from a signal-watching thread.
  void Stop();

  int port() const { return port_; }
  const ServerOptions& options() const { return options_; }
  PlanService& plans() { return *plans_; }
  JobManager& jobs() { return *jobs_; }

 private:
  explicit Server(ServerOptions options);
  void Routes();
  // Readiness checks, each (name, ok, detail).
  std::vector<std::tuple<std::string, bool, std::string>> Checks();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<PlanService> plans_;
  std::unique_ptr<JobManager> jobs_;
  Metrics metrics_;
  std::atomic<bool> stopping_{false};
  // Listen() was entered / has returned: Stop() waits for a listener that is
  // starting (httplib's stop() is a no-op before its loop runs, and the loop
  // would then never end).
  std::atomic<bool> listen_called_{false}, listen_done_{false};
  std::atomic<uint64_t> request_counter_{0};
  int port_ = 0;
};

}  // namespace paratune::web
