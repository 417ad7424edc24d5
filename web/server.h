// web/server.h: `paratune serve`, the REST service and the web page (docs/rest.md).
// Thin like the CLI: parse, call the library (planner, profiler, jobs), serialise.
// Routes live under /v1 (OpenAPI 3.1 at /v1/openapi.json); errors are RFC 9457
// problem documents (web/problem.h); /livez, /readyz and /metrics serve
// operators; the page and its scripts are compiled into the binary.
//
// Safety (docs/service.md has the threat model): connections are read whole
// by a front end (web/front.h) under deadlines and size limits before a worker
// runs them, and health probes have their own worker. Every write (profiles,
// jobs) needs "Authorization: Bearer <token>": the token comes from
// --token-file or is generated at start into <cache_dir>/serve-token (mode
// 0600). Reads are open on loopback unless a token file was given (then every
// /v1 route and /metrics need it); binding elsewhere needs a token file.
// Requests that change state from another origin (Origin, Sec-Fetch-Site) are
// refused, and bodies are JSON only, so a page elsewhere cannot post a form.
// Bodies are capped (413), JSON nesting is capped (400), searches run under a
// time limit, and the job queue is bounded (429).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "web/front.h"
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
  std::string token;                          // bearer token; "" = generate one at start
  bool token_given = false;  // set by Create: a token was given, so reads need it too
  std::string cache_dir;                      // profiles/ and jobs/ live here; required
  std::string executable = "/proc/self/exe";  // the paratune binary jobs run
  std::string version = "dev";
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413 (copied to front)
  int max_json_depth = 64;          // deeper nesting gets 400
  std::vector<std::string> allowed_hosts;  // Host names answered beyond loopback and --host
  FrontOptions front;               // connections, timeouts, workers (web/front.h)
  PlanServiceOptions plans;         // cache_dir is filled in from cache_dir
  JobOptions jobs;                  // dir, cache_dir, executable filled in
};

// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool IsLoopbackHost(const std::string& host);

// The host of a Host header, lower case, without the port ("[::1]" keeps its
// brackets); "" when malformed.
std::string HostOfHeader(const std::string& host_header);

// The Host names the service answers for (DNS-rebinding defence): loopback
// names, the bound address (unless a wildcard), this machine's name when
// bound beyond loopback, and options.allowed_hosts.
std::set<std::string> AllowedHosts(const ServerOptions& o);

class Server {
 public:
  // Checks the options (a non-loopback host needs a token; the cache folder
  // must be creatable), writes a generated token to token_file() when none
  // was given, loads the job records and starts the job worker.
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
  // Client connections open now (the front end's count).
  size_t open_connections() const { return front_ ? front_->open_connections() : 0; }
  // Where a generated token was written ("" when the token was given).
  const std::string& token_file() const { return token_file_; }
  // Why the state directory took no writes at start ("" = it did): the
  // service then serves plans and refuses profile and job writes (503).
  const std::string& read_only() const { return read_only_; }
  const ServerOptions& options() const { return options_; }
  PlanService& plans() { return *plans_; }
  JobManager& jobs() { return *jobs_; }

 private:
  explicit Server(ServerOptions options);
  // Every route, as named steps: the guards every request passes, the error
  // bodies, then the routes by group.
  void Routes();
  void GuardRequests();
  void AnswerErrors();
  void PageRoutes();
  void OperatorRoutes();
  void PresetRoutes();
  void PlanRoutes();
  void ProfileRoutes();
  void JobRoutes();
  // Registers a route with its method (for 405 + Allow) and its handler.
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  void AddGet(const std::string& pattern, Handler fn);
  void AddPost(const std::string& pattern, Handler fn);
  void AddDelete(const std::string& pattern, Handler fn);
  // The methods the routes matching `path` take ("GET, DELETE"); "" = none.
  std::string Allowed(const std::string& path) const;
  // Readiness checks, each (name, ok, detail).
  std::vector<std::tuple<std::string, bool, std::string>> Checks();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Front> front_;
  std::unique_ptr<PlanService> plans_;
  std::unique_ptr<JobManager> jobs_;
  Metrics metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> request_counter_{0};
  // Route patterns and the method each takes, for 405 + Allow.
  std::vector<std::pair<std::regex, std::string>> routes_;
  std::string token_file_;
  std::string read_only_;  // why the state directory takes no writes ("" = it does)
  std::set<std::string> allowed_hosts_;
  std::vector<std::pair<std::string, std::string>> hide_;  // (folder, role) for HidePaths
  int port_ = 0;
};

}  // namespace paratune::web
