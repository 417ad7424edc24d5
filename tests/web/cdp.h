// tests/web/cdp.h: a minimal Chrome DevTools Protocol client over
// --remote-debugging-pipe (requests on the browser's fd 3, replies and events
// on its fd 4, each a JSON message ended by a NUL byte), for tests that must
// ask the laid-out page questions (sizes, fonts) and set the viewport, which
// --dump-dom and --screenshot cannot.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::web::testing {

class DevTools {
 public:
  DevTools() = default;
  DevTools(const DevTools&) = delete;
  DevTools& operator=(const DevTools&) = delete;
  ~DevTools() { Stop(); }

  // Starts `chromium` headless with the pipe; its output goes to `log_file`.
  Status Start(const std::string& chromium, const std::string& profile_dir,
               const std::string& log_file) {
    ::signal(SIGPIPE, SIG_IGN);  // a browser that died must fail a write, not the test
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return Status::IoError("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) return Status::IoError("fork failed");
    if (pid_ == 0) {
      // Move both ends above the fds they are to become, then place them.
      const int in = ::fcntl(to_child[0], F_DUPFD, 10), out = ::fcntl(from_child[1], F_DUPFD, 10);
      ::dup2(in, 3);
      ::dup2(out, 4);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], in, out}) {
        if (fd > 4) ::close(fd);
      }
      const int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      const std::string user_dir = "--user-data-dir=" + profile_dir;
      std::vector<const char*> argv = {
          chromium.c_str(),          "--headless=new", "--no-sandbox",         "--disable-gpu",
          "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions", "--hide-scrollbars",
          "--remote-debugging-pipe", user_dir.c_str(), "about:blank",          nullptr};
      ::execvp(argv[0], const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
    return Status::Ok();
  }

  void Stop() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }

  // Sends one command (to a page's session when `session` is set) and returns
  // its result, skipping the events that arrive meanwhile.
  Result<Json> Call(const std::string& method, Json params = Json::object(),
                    const std::string& session = "", double timeout_s = 60) {
    const int id = next_id_++;
    Json msg = {{"id", id}, {"method", method}, {"params", std::move(params)}};
    if (!session.empty()) msg["sessionId"] = session;
    std::string text = msg.dump();
    text.push_back('\0');
    for (size_t off = 0; off < text.size();) {
      const ssize_t n = ::write(to_, text.data() + off, text.size() - off);
      if (n <= 0) return Status::IoError("the browser closed its pipe during " + method);
      off += static_cast<size_t>(n);
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    for (;;) {
      for (size_t end = buf_.find('\0'); end != std::string::npos; end = buf_.find('\0')) {
        const std::string one = buf_.substr(0, end);
        buf_.erase(0, end + 1);
        Json reply = Json::parse(one, nullptr, false);
        if (reply.is_discarded() || !reply.contains("id") || reply["id"] != id) continue;
        if (reply.contains("error")) return Status::Internal(method + ": " + reply["error"].dump());
        return reply.value("result", Json::object());
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return Status::Timeout(method + " got no reply in time");
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return Status::IoError("the browser closed its pipe during " + method);
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 1;
  std::string buf_;
};

// Standard base64 (RFC 4648) to bytes; CDP sends screenshots so.
inline std::string DecodeBase64(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) continue;  // padding and line breaks
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace paratune::web::testing
