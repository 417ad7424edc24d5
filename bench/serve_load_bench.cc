// serve_load_bench: how fast `paratune serve` answers a cached POST /v1/plans
// under load while slow clients hold sockets. Starts the real service
// in-process on an ephemeral loopback port, plans once (the cache miss, timed
// separately), connects S slow clients that send request headers one byte a
// second (reconnecting whenever the service closes them), then C keep-alive
// connections, driven from one epoll thread as wrk drives them, send the same
// request until N requests are done or T seconds pass, while a prober asks
// /livez ten times a second. Meanwhile, as another user (uid 65534, when run as root),
// W attacker clients loop distinct searches of Llama-3.1-405B over 64 GPU
// counts each, and a neighbour sends distinct small uncached plans one after
// another. Reports latency percentiles, throughput, errors and probe
// failures, and the neighbour's plans (answered, refused, p50/p99); exits 1
// on any error, probe failure or unanswered neighbour plan, or when the
// cached p99 misses the target.
//
//   build/bench/serve_load_bench [--connections 64] [--slow-clients 100]
//                                [--requests 300000] [--seconds 30] [--target-p99-ms 20]
//                                [--sweep-clients 4]
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "web/server.h"

namespace {

const char* kPlan = R"({"model":"gpt3-175b","cluster":"dgx-a100-80gb","gpus":1024,
  "training":{"seq_len":2048,"global_batch":1536},"top":10,"pareto":true})";

// The attack of issue 40: a 405B search over 64 GPU counts, distinct each time.
std::string SweepPlan(int client, int i) {
  return R"({"model":"llama3.1-405b","cluster":"dgx-h100","gpus":"2048:131072:2048",
    "training":{"seq_len":8192,"global_batch":)" +
         std::to_string(2048 * (1 + client * 100000 + i)) + "}}";
}

// The attacker process: `n` clients looping sweeps until killed.
int Attack(int port, int n) {
  std::vector<std::thread> ts;
  for (int c = 0; c < n; ++c) {
    ts.emplace_back([port, c] {
      httplib::Client cl("127.0.0.1", port);
      cl.set_read_timeout(120, 0);
      for (int i = 0;; ++i) cl.Post("/v1/plans", SweepPlan(c, i), "application/json");
    });
  }
  for (auto& t : ts) t.join();
  return 0;
}

// Starts the attacker as uid 65534 (a second local user); -1 when this
// process cannot change user (not root).
pid_t StartAttacker(int port, int n) {
  if (::geteuid() != 0 || n == 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // kept across exec; cleared by setuid, so set again below
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(99);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string p = std::to_string(port), k = std::to_string(n);
    ::execl("/proc/self/exe", "serve_load_bench", "--attack-port", p.c_str(), "--sweep-clients",
            k.c_str(), nullptr);
    ::_exit(98);
  }
  return pid;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // completes in the background
  return fd;
}

// S sockets sending "POST /v1/plans HTTP/1.1\r\nX-Slow: aaaa..." a byte a
// second per socket; a socket the service closed (its header deadline) is
// replaced, so S stay connected the whole time.
class SlowClients {
 public:
  SlowClients(int port, int n) : port_(port) {
    for (int i = 0; i < n; ++i) fds_.push_back(Open());
    thread_ = std::thread([this] { Run(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  int64_t reconnects() const { return reconnects_; }

 private:
  int Open() {
    const int fd = ConnectLoopback(port_);
    const char head[] = "POST /v1/plans HTTP/1.1\r\nX-Slow: ";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    (void)::send(fd, head, sizeof head - 1, MSG_NOSIGNAL);
    return fd;
  }
  void Run() {
    while (!stop_) {
      for (int& fd : fds_) {
        char buf[512];
        const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        const bool closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || r > 0;
        if (closed || ::send(fd, "a", 1, MSG_NOSIGNAL) < 0) {
          ::close(fd);
          fd = Open();
          ++reconnects_;
        }
      }
      for (int i = 0; i < 10 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> reconnects_{0};
  std::thread thread_;
};

// The measured load: `connections` keep-alive connections, each with one
// request in flight, driven from a single epoll thread the way wrk drives
// them, so the load generator's own cost stays a small share of the two cores
// it shares with the service. A response counts as an error unless it is a
// 200, `body_bytes` long and a cache hit.
class CachedLoad {
 public:
  CachedLoad(int port, int connections, std::string request, size_t body_bytes)
      : port_(port), request_(std::move(request)), body_bytes_(body_bytes) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    conns_.resize(static_cast<size_t>(connections));
    for (size_t i = 0; i < conns_.size(); ++i) Open(i);
  }
  ~CachedLoad() {
    for (Conn& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    ::close(epoll_);
  }

  // Runs until `requests` were sent and answered or `stop_at` passes.
  void Run(int64_t requests, std::chrono::steady_clock::time_point stop_at) {
    budget_ = requests;
    for (size_t i = 0; i < conns_.size(); ++i) Send(i);
    std::vector<epoll_event> events(conns_.size());
    while (in_flight_ > 0) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
      if (std::chrono::steady_clock::now() > stop_at) budget_ = 0;  // finish what is in flight
      for (int e = 0; e < n; ++e) Readable(events[static_cast<size_t>(e)].data.u64);
    }
  }
  const std::vector<double>& latencies_ms() const { return latencies_ms_; }
  int64_t errors() const { return errors_; }

 private:
  struct Conn {
    int fd = -1;
    std::string in;
    std::chrono::steady_clock::time_point sent_at;
    bool busy = false;
  };

  void Open(size_t i) {
    Conn& c = conns_[i];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ++errors_;
    const int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev);
    c.in.clear();
    c.busy = false;
  }

  void Send(size_t i) {
    if (budget_ <= 0) return;
    --budget_;
    Conn& c = conns_[i];
    c.sent_at = std::chrono::steady_clock::now();
    c.busy = true;
    ++in_flight_;
    // The request is a few hundred bytes: one blocking send writes it whole.
    if (::send(c.fd, request_.data(), request_.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request_.size())) {
      Failed(i);
    }
  }

  // The connection broke mid-request: an error, a fresh connection, the next request.
  void Failed(size_t i) {
    Conn& c = conns_[i];
    if (c.busy) {
      --in_flight_;
      ++errors_;
      latencies_ms_.push_back(Ms(c.sent_at));
    }
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    Open(i);
    Send(i);
  }

  void Readable(size_t i) {
    Conn& c = conns_[i];
    char buf[1 << 16];
    const ssize_t r = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return Failed(i);
    if (r < 0) return;
    c.in.append(buf, static_cast<size_t>(r));
    const size_t head_end = c.in.find("\r\n\r\n");
    if (head_end == std::string::npos) return;
    const std::string_view head(c.in.data(), head_end);
    const size_t length_at = FindHeader(head, "content-length:");
    const size_t length = length_at == std::string::npos
                              ? 0
                              : std::strtoull(c.in.c_str() + length_at, nullptr, 10);
    if (c.in.size() < head_end + 4 + length) return;  // the body is still arriving
    const bool ok = head.starts_with("HTTP/1.1 200") && length == body_bytes_ &&
                    FindHeader(head, "x-paratune-cache: hit") != std::string::npos &&
                    c.in.size() == head_end + 4 + length;
    // The service ends a keep-alive connection after its request limit, as
    // browsers and load generators expect: the next request goes on a new one.
    const bool closing = FindHeader(head, "connection: close") != std::string::npos;
    latencies_ms_.push_back(Ms(c.sent_at));
    if (!ok) ++errors_;
    --in_flight_;
    c.busy = false;
    c.in.clear();
    if (closing) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
      Open(i);
    }
    Send(i);
  }

  // Where a header's value starts (after `name`, matched without case), or npos.
  static size_t FindHeader(std::string_view head, std::string_view name) {
    for (size_t at = head.find("\r\n"); at != std::string_view::npos;
         at = head.find("\r\n", at + 2)) {
      const std::string_view line = head.substr(at + 2, name.size());
      if (line.size() == name.size() &&
          std::equal(line.begin(), line.end(), name.begin(),
                     [](char a, char b) { return std::tolower(a) == b; }))
        return at + 2 + name.size();
    }
    return std::string_view::npos;
  }

  static double Ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
        .count();
  }

  int port_;
  std::string request_;
  size_t body_bytes_;
  int epoll_ = -1;
  std::vector<Conn> conns_;
  int64_t budget_ = 0, in_flight_ = 0, errors_ = 0;
  std::vector<double> latencies_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  int connections = 64, slow_clients = 100, sweep_clients = 4, attack_port = 0;
  int64_t requests = 300000;  // about 18 s at 16k req/s: long enough for the attack to bite
  double seconds = 30, target_ms = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--connections")
      connections = std::max(1, std::atoi(argv[i + 1]));
    else if (f == "--slow-clients")
      slow_clients = std::max(0, std::atoi(argv[i + 1]));
    else if (f == "--requests")
      requests = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    else if (f == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (f == "--target-p99-ms")
      target_ms = std::atof(argv[i + 1]);
    else if (f == "--sweep-clients")
      sweep_clients = std::max(0, std::atoi(argv[i + 1]));
    else if (f == "--attack-port")
      attack_port = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (attack_port > 0) return Attack(attack_port, sweep_clients);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("paratune-serve-bench-" + std::to_string(::getpid()));
  paratune::web::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.cache_dir = dir.string();
  o.plans.search_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.plans.idle_priority = true;  // as `paratune serve` runs
  auto server = paratune::web::Server::Create(o);
  if (!server.ok()) {
    std::fprintf(stderr, "serve: %s\n", server.status().ToString().c_str());
    return 1;
  }
  auto port = (*server)->Bind();
  if (!port.ok()) {
    std::fprintf(stderr, "bind: %s\n", port.status().ToString().c_str());
    return 1;
  }
  std::thread listener([&] { (*server)->Listen(); });

  httplib::Client warm("127.0.0.1", *port);
  warm.set_read_timeout(120, 0);
  const auto t_miss = std::chrono::steady_clock::now();
  auto first = warm.Post("/v1/plans", kPlan, "application/json");
  const double miss_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_miss).count();
  if (!first || first->status != 200) {
    std::fprintf(stderr, "the first plan failed: %s\n",
                 first ? first->body.c_str() : "no response");
    (*server)->Stop();
    listener.join();
    return 1;
  }
  const size_t body_bytes = first->body.size();

  SlowClients slow(*port, slow_clients);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // all connected
  std::atomic<bool> load_done{false};
  std::atomic<int64_t> probes{0}, probe_failures{0};
  std::thread prober([&] {
    httplib::Client p("127.0.0.1", *port);
    p.set_read_timeout(5, 0);
    p.set_connection_timeout(5, 0);
    while (!load_done) {
      auto r = p.Get("/livez");
      ++probes;
      if (!r || r->status != 200) ++probe_failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Another user's sweeps, and a neighbour's small uncached plans.
  const pid_t attacker = StartAttacker(*port, sweep_clients);
  std::vector<double> neighbour_s;
  int64_t neighbour_refused = 0;
  std::thread neighbour([&] {
    httplib::Client n("127.0.0.1", *port);
    n.set_read_timeout(60, 0);
    for (int i = 0; !load_done; ++i) {
      const std::string body = R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":)" +
                               std::to_string(8 * (1 + i % 64)) +
                               R"(,"training":{"seq_len":4096,"global_batch":)" +
                               std::to_string(512 + 8 * i) + R"(},"space":"megatron"})";
      const auto a = std::chrono::steady_clock::now();
      auto r = n.Post("/v1/plans", body, "application/json");
      if (!r || r->status != 200) {
        ++neighbour_refused;
      } else {
        neighbour_s.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      }
    }
  });
  const std::string request = "POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(std::strlen(kPlan)) + "\r\n\r\n" + kPlan;
  CachedLoad load(*port, connections, request, body_bytes);
  const auto t0 = std::chrono::steady_clock::now();
  load.Run(requests, t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds)));
  load_done = true;
  prober.join();
  neighbour.join();
  if (attacker > 0) {
    ::kill(attacker, SIGKILL);
    ::waitpid(attacker, nullptr, 0);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double>& all = load.latencies_ms();
  const int64_t errors = load.errors();
  // The service's own view (pre-routing to logging, without the wait for a
  // CPU or the network): the cumulative histogram of /metrics, whose bucket
  // bounds the 99th percentile from above.
  std::string server_p99 = "?";
  if (auto m = warm.Get("/metrics"); m && m->status == 200) {
    const std::string prefix = "paratune_http_request_duration_seconds_bucket{route=\"/v1/plans\",code=\"200\",le=\"";
    std::vector<std::pair<std::string, double>> buckets;
    for (size_t at = m->body.find(prefix); at != std::string::npos; at = m->body.find(prefix, at + 1)) {
      const size_t le_end = m->body.find('"', at + prefix.size());
      const size_t sp = m->body.find(' ', le_end);
      buckets.emplace_back(m->body.substr(at + prefix.size(), le_end - at - prefix.size()),
                           std::atof(m->body.c_str() + sp + 1));
    }
    if (!buckets.empty()) {
      const double total = buckets.back().second;
      for (const auto& [le, n] : buckets) {
        if (n >= 0.99 * total) {
          server_p99 = le == "+Inf" ? "> 10 s" : "<= " + std::to_string(std::atof(le.c_str()) * 1000).substr(0, 5) + " ms";
          break;
        }
      }
    }
  }
  const int64_t reconnects = slow.reconnects();
  (*server)->Stop();
  listener.join();
  server->reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  const double p99 = Percentile(all, 0.99);
  std::printf("serve_load_bench: cached POST /v1/plans (gpt3-175b, 1024 GPUs, %zu-byte document)\n",
              body_bytes);
  std::printf("  first (uncached) plan  %.3f s\n", miss_s);
  std::printf("  connections            %d (keep-alive, loopback)\n", connections);
  std::printf(
      "  slow clients           %d (a header byte a second; %lld replaced after the "
      "service closed them)\n",
      slow_clients, static_cast<long long>(reconnects));
  std::printf("  requests               %zu in %.2f s = %.0f req/s\n", all.size(), wall,
              static_cast<double>(all.size()) / wall);
  std::printf("  latency ms  p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
              Percentile(all, 0.5), Percentile(all, 0.9), p99, Percentile(all, 0.999),
              Percentile(all, 1.0));
  std::printf("  in the service          p99 %s (its own latency histogram, /metrics)\n", server_p99.c_str());
  std::printf("  errors                 %lld\n", static_cast<long long>(errors));
  std::printf("  /livez probes          %lld, failed %lld\n", static_cast<long long>(probes.load()),
              static_cast<long long>(probe_failures.load()));
  std::printf("  another user's sweeps  %s\n",
              attacker > 0 ? (std::to_string(sweep_clients) +
                              " clients looping llama3.1-405b over 64 GPU counts (uid 65534)")
                                 .c_str()
                           : sweep_clients == 0 ? "not run (--sweep-clients 0)"
                                                : "not run (changing user needs root)");
  std::printf("  neighbour's plans      %zu answered, %lld refused; p50 %.2f s  p99 %.2f s\n",
              neighbour_s.size(), static_cast<long long>(neighbour_refused),
              neighbour_s.empty() ? 0.0 : Percentile(neighbour_s, 0.5),
              neighbour_s.empty() ? 0.0 : Percentile(neighbour_s, 0.99));
  const bool pass = errors == 0 && probe_failures == 0 && p99 < target_ms &&
                    neighbour_refused == 0 && !neighbour_s.empty();
  std::printf("  target p99 < %.0f ms, no errors, every probe answered: %s\n", target_ms,
              pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
