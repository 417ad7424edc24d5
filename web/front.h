// web/front.h: the service's connection front end. One thread owns every
// socket (epoll): it accepts, reads each request whole (request line, headers
// and body) under deadlines and size limits, and only then hands the complete
// request to a worker, so a slow or idle client holds a buffer and a file
// descriptor, never a thread. Workers run the HTTP handlers and write the
// response; the connection then returns to the reading thread.
//
// What the front end decides itself, before any handler runs:
//  - headers larger than max_header_bytes: 431; a request line or header it
//    cannot parse, a Content-Length that is not one decimal number (two
//    different values included), Content-Length together with
//    Transfer-Encoding, a malformed chunk: 400; a transfer coding other than
//    chunked: 501; a Content-Encoding other than identity: 415 (bodies are
//    never decompressed, so no compressed body can grow past the limit);
//  - a body over max_body_bytes, counted as it arrives whatever the transfer
//    encoding (the declared Content-Length, the decoded chunked bytes, and the
//    raw bytes on the wire): 413, before more than the limit is held;
//  - headers not complete header_timeout_s after the request's first byte,
//    or a body not complete body_timeout_s after its headers: 408 and close;
//    a keep-alive connection idle idle_timeout_s between requests: closed;
//  - more than max_connections open: the longest-idle connection between
//    requests is closed to make room, else the slowest request still being
//    read (a client that sends headers a byte at a time loses its slot before
//    anyone else); only when every connection is being served is the new one
//    refused with 503;
//  - more than max_pending complete requests waiting for a worker, or one that
//    waited queue_wait_s: 503 with Retry-After.
// Requests are served first come, first served; a connection has at most one
// request in flight. Health probes (probe_paths) have their own worker, so
// they are answered while every other worker is busy.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace paratune::web {

struct FrontOptions {
  size_t max_connections = 512;  // open client connections
  size_t max_pending = 256;      // complete requests waiting for a worker
  int workers = 16;              // threads running handlers
  int probe_workers = 1;         // threads answering probe_paths only
  double header_timeout_s = 10;  // first byte of a request to the end of its headers
  double body_timeout_s = 30;    // end of the headers to the end of the body
  double idle_timeout_s = 5;     // keep-alive: idle time between requests
  double write_timeout_s = 30;   // one write of a response may block this long
  double queue_wait_s = 10;      // a request waiting longer for a worker gets 503
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  size_t max_requests_per_connection = 1000;
  std::set<std::string> probe_paths = {"/livez", "/readyz", "/healthz"};
};

// One complete request as handed to a worker: the bytes of a plain HTTP/1.1
// request (a chunked body arrives decoded, with a Content-Length; Expect is
// answered and removed), the socket to write the response to, and the peer.
struct Exchange {
  std::string request;
  int fd = -1;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
  bool close_after = false;  // the response must close the connection
  double write_timeout_s = 30;
};

// Writes all of `data` to the non-blocking socket `fd`, waiting at most
// `timeout_s` for each chunk to drain. Returns bytes written or -1.
ssize_t WriteAll(int fd, const char* data, size_t size, double timeout_s);

class Front {
 public:
  // Runs one request; returns false when the connection must be closed (the
  // client asked for it, or the response could not be written). Called on a
  // worker thread.
  using Handler = std::function<bool(Exchange&)>;
  // The body of a response the front end makes itself (a problem document),
  // and a hook to count it (status, method).
  using ProblemBody = std::function<std::string(
      int status, const std::string& type, const std::string& detail, const std::string& path)>;
  using Count = std::function<void(int status, const std::string& method)>;

  Front(FrontOptions options, Handler handler, ProblemBody problem, Count count);
  ~Front();  // Stop()s and joins

  // Creates the listening socket (SO_REUSEADDR, backlog SOMAXCONN) on
  // host:port; returns the port (the chosen one for port 0). kUnavailable when
  // the address cannot be bound.
  Result<int> Bind(const std::string& host, int port);
  // Serves until Stop(). REQUIRES: Bind() succeeded. Blocks.
  void Run();
  // Stops accepting and reading; Run() returns once requests in flight are done.
  // Thread-safe; callable before Run() (Run then returns at once).
  void Stop();

  // Live counts, for tests and /metrics.
  size_t open_connections() const { return open_.load(); }

 private:
  struct Conn;
  enum class Outcome { kNeedMore, kReady, kRefused };
  void Accept();
  void OnReadable(Conn& c);
  Outcome Parse(Conn& c);
  void Refuse(Conn& c, int status, const std::string& type, const std::string& detail,
              const std::vector<std::string>& extra_headers = {});
  void Dispatch(Conn& c);
  void CloseConn(int fd);
  bool EvictOne();
  void Sweep(std::chrono::steady_clock::time_point now);
  void TakeBack();
  void Arm(Conn& c, bool on);
  void Worker(bool probes);

  FrontOptions options_;
  Handler handler_;
  ProblemBody problem_;
  Count count_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0};
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // reading thread only

  struct Job {
    Conn* conn;
    std::chrono::steady_clock::time_point queued_at;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_, probe_queue_;
  std::vector<std::pair<Conn*, bool>> returned_;  // (connection, keep it open)
  int in_flight_ = 0;
  bool workers_stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace paratune::web
