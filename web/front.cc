#include "web/front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/strings.h"
#include "web/problem.h"

namespace paratune::web {

using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool IsTokenChar(char c) {
  // c != 0: strchr would find the string's own terminator.
  return std::isalnum(static_cast<unsigned char>(c)) ||
         (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c));
}

// A request target's characters: visible ASCII, no space or control.
bool IsVisibleChar(char c) { return c > 0x20 && c < 0x7f; }

// A header value's characters (RFC 9110 §5.5): visible, space, tab, and
// obs-text (bytes >= 0x80); never NUL, CR, LF or another control.
bool IsFieldValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

void PeerAddress(int fd, bool local, std::string* ip, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int rc = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                       : ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    *ip = host;
    *port = std::atoi(serv);
  }
}

}  // namespace

ssize_t WriteAll(int fd, const char* data, size_t size, double timeout_s) {
  size_t done = 0;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(timeout_s));
  while (done < size) {
    const ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const double left = Seconds(until - Clock::now());
      if (left <= 0) return -1;
      pollfd p{fd, POLLOUT, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::max(1.0, left * 1000)));
      if (rc < 0 && errno != EINTR) return -1;
      continue;
    }
    return -1;
  }
  return static_cast<ssize_t>(done);
}

struct Front::Conn {
  int fd = -1;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
  enum class State { kReading, kInFlight, kDraining } state = State::kReading;
  std::string buf;  // bytes read and not yet consumed
  Clock::time_point last_activity, request_start, headers_done, drain_until;
  bool has_start = false;    // a byte of the current request has arrived
  bool peer_closed = false;  // the client sent EOF
  bool armed = false;        // in the epoll set
  size_t served = 0;
  // The request being read.
  bool headers_parsed = false;
  size_t header_end = 0, header_scan = 0;
  std::string head, method, path;
  bool chunked = false, expect_continue = false, continue_sent = false, client_close = false;
  int64_t content_length = 0;
  size_t scan = 0;          // chunked: offset in buf of the next unparsed byte
  int64_t chunk_left = -1;  // chunked: -1 size line next, -2 CRLF next, -3 trailers, else data
  size_t raw_body = 0;      // chunked: bytes of the body on the wire
  std::string body;         // chunked: decoded
  // Handed to a worker.
  std::string request;
  bool close_after = false;

  void ResetRequest() {
    has_start = headers_parsed = chunked = expect_continue = continue_sent = client_close = false;
    header_end = header_scan = scan = raw_body = 0;
    content_length = 0;
    chunk_left = -1;
    head.clear();
    method.clear();
    path.clear();
    body.clear();
  }
};

Front::Front(FrontOptions options, Handler handler, ProblemBody problem, Count count)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      problem_(std::move(problem)),
      count_(std::move(count)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Front::~Front() {
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Result<int> Front::Bind(const std::string& host, int port) {
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    return Status::Unavailable(std::string("cannot create the event loop: ") +
                               std::strerror(errno));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string h = host.size() > 2 && host.front() == '[' && host.back() == ']'
                            ? host.substr(1, host.size() - 2)
                            : host;
  if (::getaddrinfo(h.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return Status::Unavailable("cannot resolve " + host);
  }
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return Status::Unavailable("cannot bind " + host + ":" + std::to_string(port) +
                               " (in use, or not an address of this machine)");
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = ss.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  listen_fd_ = fd;
  // Every connection costs a descriptor: keep the cap under the process limit.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128) {
      options_.max_connections =
          std::min<size_t>(options_.max_connections, static_cast<size_t>(rl.rlim_cur) - 96);
    }
  }
  return bound;
}

void Front::Stop() {
  stopping_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;
  }
}

// A connection in flight is out of the epoll set altogether: epoll reports
// hang-ups even for an empty event mask, and the loop must neither spin on
// them nor touch a connection a worker holds.
void Front::Arm(Conn& c, bool on) {
  if (on == c.armed) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  if (::epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c.fd, &ev) == 0 || !on)
    c.armed = on;
}

void Front::CloseConn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second->armed) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
  open_ = conns_.size();
}

void Front::Refuse(Conn& c, int status, const std::string& type, const std::string& detail,
                   const std::vector<std::string>& extra_headers) {
  const std::string body = problem_(status, type, detail, c.path.empty() ? "/" : c.path);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) +
                    "\r\nContent-Type: " + kProblemMediaType +
                    "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n";
  for (const auto& h : extra_headers) out += h + "\r\n";
  out += "\r\n" + body;
  (void)WriteAll(c.fd, out.data(), out.size(), 0.05);
  if (count_) count_(status, c.method.empty() ? "-" : c.method);
  // Half-close and read what the client still sends for a moment, so the
  // response is not lost to a reset while it writes the rest of its body.
  ::shutdown(c.fd, SHUT_WR);
  c.state = Conn::State::kDraining;
  c.drain_until = Clock::now() + std::chrono::seconds(2);
  c.buf.clear();
  c.buf.shrink_to_fit();
  c.body.clear();
  c.body.shrink_to_fit();
}

Front::Outcome Front::Parse(Conn& c) {
  const auto now = Clock::now();
  if (!c.headers_parsed) {
    // Blank lines before a request are allowed (RFC 9112 §2.2).
    size_t skip = 0;
    while (skip < c.buf.size() && (c.buf[skip] == '\r' || c.buf[skip] == '\n')) ++skip;
    if (skip) c.buf.erase(0, skip);
    if (c.buf.empty()) return Outcome::kNeedMore;
    if (!c.has_start) {
      c.has_start = true;
      c.request_start = now;
    }
    const size_t from = c.header_scan > 3 ? c.header_scan - 3 : 0;
    const size_t end = c.buf.find("\r\n\r\n", from);
    if (end == std::string::npos || end + 4 > options_.max_header_bytes) {
      c.header_scan = c.buf.size();
      if (c.buf.size() > options_.max_header_bytes || end != std::string::npos) {
        Refuse(c, 431, "urn:paratune:problem:headers-too-large",
               "the request line and headers exceed " + std::to_string(options_.max_header_bytes) +
                   " bytes");
        return Outcome::kRefused;
      }
      return Outcome::kNeedMore;
    }
    c.header_end = end + 4;
    // Request line.
    const size_t eol = c.buf.find("\r\n");
    const std::string line = c.buf.substr(0, eol);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    auto bad = [&](const std::string& why) {
      Refuse(c, 400, "urn:paratune:problem:bad-request", why);
      return Outcome::kRefused;
    };
    if (sp1 == std::string::npos || sp2 == sp1) return bad("malformed request line");
    c.method = line.substr(0, sp1);
    const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = line.substr(sp2 + 1);
    if (c.method.empty() || !std::all_of(c.method.begin(), c.method.end(), IsTokenChar))
      return bad("malformed method");
    static const std::set<std::string> kMethods = {"GET",    "HEAD",    "POST", "PUT",
                                                   "DELETE", "OPTIONS", "PATCH"};
    if (!kMethods.count(c.method)) {
      c.method = c.method.substr(0, 16);
      Refuse(c, 501, "urn:paratune:problem:not-implemented",
             "the method " + c.method + " is not served");
      return Outcome::kRefused;
    }
    if (target.empty() || !std::all_of(target.begin(), target.end(), IsVisibleChar))
      return bad("malformed request target");
    c.path = target.substr(0, target.find('?'));
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
      Refuse(c, 505, "urn:paratune:problem:http-version", "only HTTP/1.1 and HTTP/1.0 are served");
      return Outcome::kRefused;
    }
    // Headers.
    std::vector<std::string> lengths;
    std::string te, ce, expect, connection;
    int te_count = 0, host_count = 0;
    c.head = line + "\r\n";
    size_t at = eol + 2;
    while (at < end + 2) {
      const size_t e = c.buf.find("\r\n", at);
      const std::string h = c.buf.substr(at, e - at);
      at = e + 2;
      if (h.empty()) break;
      if (h[0] == ' ' || h[0] == '\t') return bad("obsolete header line folding");
      const size_t colon = h.find(':');
      if (colon == std::string::npos || colon == 0) return bad("malformed header line");
      const std::string name = h.substr(0, colon);
      if (!std::all_of(name.begin(), name.end(), IsTokenChar))
        return bad("malformed header name '" + name.substr(0, 64) + "'");
      const std::string value = Trim(h.substr(colon + 1));
      // RFC 9110 §5.5: a field value never holds CR, LF or NUL (a bare CR is
      // how requests are smuggled past proxies that split lines on it).
      if (!std::all_of(value.begin(), value.end(), IsFieldValueChar))
        return bad("a control character in the value of header '" + name.substr(0, 64) + "'");
      const std::string lname = AsciiLower(name);
      if (lname == "host") ++host_count;
      // Byte ranges are not served (one request could ask for a document a
      // thousand times over): the whole document is the answer, as RFC 9110
      // §14.2 allows a server that ignores Range.
      if (lname == "range" || lname == "if-range") continue;
      if (lname == "content-length") {
        lengths.push_back(value);
        continue;
      }
      if (lname == "transfer-encoding") {
        te = AsciiLower(value);
        ++te_count;
        continue;
      }
      if (lname == "expect") {
        expect = AsciiLower(value);
        continue;
      }
      if (lname == "content-encoding") ce = AsciiLower(value);
      if (lname == "connection") connection = AsciiLower(value);
      c.head += h + "\r\n";
    }
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host.
    if (host_count > 1) return bad("more than one Host header");
    if (host_count == 0 && version == "HTTP/1.1") return bad("an HTTP/1.1 request needs a Host header");
    for (const std::string& v : lengths) {
      if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), ::isdigit))
        return bad("Content-Length must be one decimal number");
      if (v != lengths[0]) return bad("conflicting Content-Length headers");
    }
    if (te_count > 0 && !lengths.empty())
      return bad("Content-Length and Transfer-Encoding together");
    if (te_count > 1 || (te_count == 1 && te != "chunked")) {
      Refuse(c, 501, "urn:paratune:problem:not-implemented",
             "the only transfer coding served is chunked");
      return Outcome::kRefused;
    }
    if (!ce.empty() && ce != "identity") {
      Refuse(c, 415, "urn:paratune:problem:unsupported-media-type",
             "Content-Encoding '" + ce.substr(0, 32) +
                 "' is not accepted: send the body uncompressed (identity)",
             {"Accept-Encoding: identity"});
      return Outcome::kRefused;
    }
    if (!expect.empty() && expect != "100-continue") {
      Refuse(c, 417, "urn:paratune:problem:expectation-failed", "only 100-continue is understood");
      return Outcome::kRefused;
    }
    c.chunked = te_count == 1;
    c.content_length = lengths.empty() ? 0 : std::stoll(lengths[0]);
    if (c.content_length > static_cast<int64_t>(options_.max_body_bytes)) {
      Refuse(c, 413, "urn:paratune:problem:too-large",
             "the body is larger than this service's limit of " +
                 std::to_string(options_.max_body_bytes) + " bytes");
      return Outcome::kRefused;
    }
    c.expect_continue = !expect.empty();
    c.client_close = connection.find("close") != std::string::npos ||
                     (version == "HTTP/1.0" && connection.find("keep-alive") == std::string::npos);
    c.headers_parsed = true;
    c.headers_done = now;
    c.scan = c.header_end;
  }

  bool complete = false;
  size_t consumed = 0;
  if (!c.chunked) {
    const size_t need = c.header_end + static_cast<size_t>(c.content_length);
    if (c.buf.size() >= need) {
      complete = true;
      consumed = need;
      c.body.assign(c.buf, c.header_end, static_cast<size_t>(c.content_length));
    }
  } else {
    const size_t raw_limit = 2 * options_.max_body_bytes + 64 * 1024;
    auto bad = [&](const std::string& why) {
      Refuse(c, 400, "urn:paratune:problem:bad-request", "malformed chunked body: " + why);
      return Outcome::kRefused;
    };
    auto too_large = [&] {
      Refuse(c, 413, "urn:paratune:problem:too-large",
             "the body is larger than this service's limit of " +
                 std::to_string(options_.max_body_bytes) + " bytes");
      return Outcome::kRefused;
    };
    while (!complete) {
      if (c.chunk_left == -1 || c.chunk_left == -3) {
        const size_t e = c.buf.find("\r\n", c.scan);
        if (e == std::string::npos) {
          if (c.buf.size() - c.scan > 1024) return bad("a line longer than 1024 bytes");
          break;
        }
        const std::string l = c.buf.substr(c.scan, e - c.scan);
        c.raw_body += e + 2 - c.scan;
        c.scan = e + 2;
        if (c.chunk_left == -3) {  // trailers: skipped, up to an empty line
          if (l.empty()) {
            complete = true;
            consumed = c.scan;
          } else if (c.raw_body > raw_limit) {
            return too_large();
          }
          continue;
        }
        std::string hex = Trim(l.substr(0, l.find(';')));
        if (hex.empty() || hex.size() > 8 || !std::all_of(hex.begin(), hex.end(), ::isxdigit))
          return bad("a chunk size that is not a hexadecimal number");
        const int64_t n = std::stoll(hex, nullptr, 16);
        if (n == 0) {
          c.chunk_left = -3;
        } else {
          if (c.body.size() + static_cast<size_t>(n) > options_.max_body_bytes) return too_large();
          c.chunk_left = n;
        }
      } else if (c.chunk_left == -2) {
        if (c.buf.size() - c.scan < 2) break;
        if (c.buf.compare(c.scan, 2, "\r\n") != 0) return bad("a chunk not followed by CRLF");
        c.scan += 2;
        c.raw_body += 2;
        c.chunk_left = -1;
      } else {
        const size_t take = std::min(static_cast<size_t>(c.chunk_left), c.buf.size() - c.scan);
        if (take == 0) break;
        c.body.append(c.buf, c.scan, take);
        c.scan += take;
        c.raw_body += take;
        c.chunk_left -= static_cast<int64_t>(take);
        if (c.chunk_left == 0) c.chunk_left = -2;
      }
      if (c.raw_body > raw_limit) return too_large();
    }
    // Keep only what is not decoded yet: the raw chunks never pile up.
    if (!complete && c.scan > c.header_end + 64 * 1024) {
      c.buf.erase(c.header_end, c.scan - c.header_end);
      c.scan = c.header_end;
    }
  }
  if (!complete) {
    if (c.expect_continue && !c.continue_sent) {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)WriteAll(c.fd, kContinue, sizeof kContinue - 1, 0.05);
      c.continue_sent = true;
    }
    return Outcome::kNeedMore;
  }
  c.request = c.head;
  if ((c.method != "GET" && c.method != "HEAD") || !c.body.empty())
    c.request += "Content-Length: " + std::to_string(c.body.size()) + "\r\n";
  c.request += "\r\n";
  c.request += c.body;
  c.buf.erase(0, consumed);
  return Outcome::kReady;
}

void Front::Dispatch(Conn& c) {
  c.close_after = c.client_close || c.peer_closed ||
                  c.served + 1 >= options_.max_requests_per_connection || stopping_;
  const bool probe = options_.probe_paths.count(c.path) > 0;
  c.state = Conn::State::kInFlight;
  Arm(c, false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = probe ? probe_queue_ : queue_;
    if (q.size() < options_.max_pending) {
      q.push_back(Job{&c, Clock::now()});
      ++in_flight_;
      c.ResetRequest();
      cv_.notify_all();
      return;
    }
  }
  c.state = Conn::State::kReading;
  Arm(c, true);
  Refuse(c, 503, "urn:paratune:problem:unavailable",
         std::to_string(options_.max_pending) + " requests are waiting already; retry later",
         {"Retry-After: 5"});
}

void Front::Worker(bool probes) {
  while (true) {
    Job job{};
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto& q = probes ? probe_queue_ : queue_;
      cv_.wait(lock, [&] { return workers_stop_ || !q.empty(); });
      if (q.empty()) return;
      job = q.front();
      q.pop_front();
    }
    Conn& c = *job.conn;
    bool keep = false;
    if (!probes && Seconds(Clock::now() - job.queued_at) > options_.queue_wait_s) {
      const std::string body =
          problem_(503, "urn:paratune:problem:unavailable",
                   "the request waited longer than " + FormatFixed(options_.queue_wait_s, 0) +
                       " s for a worker; retry later",
                   "/");
      const std::string out =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + std::string(kProblemMediaType) +
          "\r\nRetry-After: 5\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
          (c.close_after ? "Connection: close\r\n" : "") + "\r\n" + body;
      keep =
          WriteAll(c.fd, out.data(), out.size(), options_.write_timeout_s) >= 0 && !c.close_after;
      if (count_) count_(503, "-");
    } else {
      Exchange ex{.request = std::move(c.request),
                  .fd = c.fd,
                  .remote_ip = c.remote_ip,
                  .local_ip = c.local_ip,
                  .remote_port = c.remote_port,
                  .local_port = c.local_port,
                  .close_after = c.close_after,
                  .write_timeout_s = options_.write_timeout_s};
      keep = handler_(ex) && !c.close_after;
    }
    c.request.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      returned_.emplace_back(&c, keep);
      --in_flight_;
    }
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;
  }
}

void Front::TakeBack() {
  std::vector<std::pair<Conn*, bool>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  const auto now = Clock::now();
  for (auto [c, keep] : back) {
    if (!keep || stopping_) {
      CloseConn(c->fd);
      continue;
    }
    ++c->served;
    c->state = Conn::State::kReading;
    c->last_activity = now;
    Arm(*c, true);
    if (!c->buf.empty()) {  // a pipelined request
      if (Parse(*c) == Outcome::kReady) Dispatch(*c);
    }
  }
}

bool Front::EvictOne() {
  Conn* victim = nullptr;
  int victim_rank = 99;
  Clock::time_point victim_t;
  for (auto& [fd, cp] : conns_) {
    Conn& c = *cp;
    int rank;
    Clock::time_point t;
    if (c.state == Conn::State::kInFlight) continue;
    if (c.state == Conn::State::kDraining) {
      rank = 0, t = c.drain_until;
    } else if (!c.has_start) {
      rank = 1, t = c.last_activity;  // idle between requests
    } else {
      rank = 2, t = c.request_start;  // the slowest request still arriving
    }
    if (!victim || rank < victim_rank || (rank == victim_rank && t < victim_t)) {
      victim = &c, victim_rank = rank, victim_t = t;
    }
  }
  if (!victim) return false;
  if (victim_rank == 2) {
    static const char k503[] =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n";
    (void)WriteAll(victim->fd, k503, sizeof k503 - 1, 0);
  }
  CloseConn(victim->fd);
  return true;
}

void Front::Accept() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if ((errno == EMFILE || errno == ENFILE) && EvictOne()) continue;
      return;  // EAGAIN, or nothing to free: the backlog holds the rest
    }
    if (conns_.size() >= options_.max_connections && !EvictOne()) {
      static const char k503[] =
          "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n"
          "Connection: close\r\n\r\n";
      (void)WriteAll(fd, k503, sizeof k503 - 1, 0);
      ::close(fd);
      if (count_) count_(503, "-");
      continue;
    }
    int one = 1, sndbuf = 1 << 20;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A plans document is ~100 KB: with a send buffer that holds it, the
    // write completes at once and the worker moves on.
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->last_activity = Clock::now();
    PeerAddress(fd, false, &c->remote_ip, &c->remote_port);
    PeerAddress(fd, true, &c->local_ip, &c->local_port);
    Arm(*c, true);
    if (!c->armed) {
      ::close(fd);
      continue;
    }
    conns_[fd] = std::move(c);
    open_ = conns_.size();
  }
}

void Front::OnReadable(Conn& c) {
  char chunk[64 * 1024];
  size_t got = 0;
  bool eof = false;
  // Level-triggered: read a bounded amount per turn so one fast sender cannot
  // hold the loop; the rest is read on the next turn.
  while (got < 256 * 1024) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (c.state != Conn::State::kDraining) c.buf.append(chunk, static_cast<size_t>(n));
      if (c.state == Conn::State::kReading && c.headers_parsed) {
        // Parse as it arrives, so a body over the limit is refused before
        // more than the limit is held.
        const Outcome o = Parse(c);
        if (o == Outcome::kRefused) continue;  // now draining
        if (o == Outcome::kReady) {
          Dispatch(c);
          return;
        }
      } else if (c.state == Conn::State::kReading && c.buf.size() > options_.max_header_bytes) {
        break;  // Parse below refuses it
      }
      continue;
    }
    if (n == 0) {
      eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    CloseConn(c.fd);
    return;
  }
  c.last_activity = Clock::now();
  if (c.state == Conn::State::kDraining) {
    if (eof) CloseConn(c.fd);
    return;
  }
  if (c.state != Conn::State::kReading) return;
  if (eof) c.peer_closed = true;
  const Outcome o = Parse(c);
  if (o == Outcome::kReady) {
    Dispatch(c);
  } else if (o == Outcome::kNeedMore && eof) {
    CloseConn(c.fd);
  }
}

void Front::Sweep(Clock::time_point now) {
  std::vector<int> close;
  for (auto& [fd, cp] : conns_) {
    Conn& c = *cp;
    if (c.state == Conn::State::kInFlight) continue;
    if (c.state == Conn::State::kDraining) {
      if (now > c.drain_until) close.push_back(fd);
    } else if (!c.has_start) {
      if (Seconds(now - c.last_activity) > options_.idle_timeout_s) close.push_back(fd);
    } else if (!c.headers_parsed) {
      if (Seconds(now - c.request_start) > options_.header_timeout_s) {
        Refuse(c, 408, "urn:paratune:problem:request-timeout",
               "the request headers did not arrive within " +
                   FormatFixed(options_.header_timeout_s, 0) + " s");
      }
    } else if (Seconds(now - c.headers_done) > options_.body_timeout_s) {
      Refuse(c, 408, "urn:paratune:problem:request-timeout",
             "the request body did not arrive within " + FormatFixed(options_.body_timeout_s, 0) +
                 " s");
    }
  }
  for (int fd : close) CloseConn(fd);
}

void Front::Run() {
  if (listen_fd_ < 0 || stopping_) return;
  for (int i = 0; i < std::max(1, options_.workers); ++i)
    workers_.emplace_back([this] { Worker(false); });
  for (int i = 0; i < std::max(1, options_.probe_workers); ++i)
    workers_.emplace_back([this] { Worker(true); });
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  auto last_sweep = Clock::now();
  bool listening = true;
  epoll_event events[128];
  while (true) {
    if (stopping_ && listening) {
      // Stop accepting; finish the requests in flight, then return.
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      ::close(listen_fd_);
      listen_fd_ = -1;
      listening = false;
    }
    if (!listening) {
      std::lock_guard<std::mutex> lock(mu_);
      if (in_flight_ == 0) break;
    }
    const int n = ::epoll_wait(epoll_fd_, events, 128, 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        if (!stopping_) Accept();
      } else if (fd == wake_fd_) {
        uint64_t v;
        ssize_t r = ::read(wake_fd_, &v, sizeof v);
        (void)r;
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        if (it->second->state == Conn::State::kInFlight) continue;  // a worker holds it
        if (stopping_) {
          CloseConn(fd);
          continue;
        }
        OnReadable(*it->second);
      }
    }
    TakeBack();
    const auto now = Clock::now();
    if (now - last_sweep > std::chrono::milliseconds(100)) {
      Sweep(now);
      last_sweep = now;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  TakeBack();
  std::vector<int> fds;
  for (auto& [fd, c] : conns_) fds.push_back(fd);
  for (int fd : fds) CloseConn(fd);
}

}  // namespace paratune::web
