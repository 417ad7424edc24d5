// tests/web/test_util.h: a real web::Server on an ephemeral loopback port, in
// this process, with its own temporary cache directory; and helpers to read
// problem documents.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "common/json.h"
#include "web/server.h"

namespace paratune::web::testing {

inline std::string TempDir(const std::string& tag) {
  std::random_device rd;
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("paratune-web-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Options for a test server: loopback, any port, the paratune binary built
// beside the tests for jobs, small limits so the limit paths are cheap to hit.
inline ServerOptions TestOptions(const std::string& cache_dir) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.cache_dir = cache_dir;
  o.executable = PARATUNE_BINARY;
  o.version = "test";
  o.max_body_bytes = 256 * 1024;
  o.http_threads = 16;
  o.plans.search_threads = 2;
  o.plans.search_time_limit_s = 60;
  return o;
}

class TestServer {
 public:
  explicit TestServer(ServerOptions o) {
    auto s = Server::Create(std::move(o));
    if (!s.ok()) {
      error_ = s.status().ToString();
      return;
    }
    server_ = std::move(s).value();
    auto port = server_->Bind();
    if (!port.ok()) {
      error_ = port.status().ToString();
      return;
    }
    port_ = *port;
    thread_ = std::thread([this] { server_->Listen(); });
  }
  ~TestServer() { Shutdown(); }
  void Shutdown() {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  Server& server() { return *server_; }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(120, 0);
    c->set_connection_timeout(5, 0);
    return c;
  }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::string error_;
  int port_ = 0;
};

// The response body as JSON (a test failure when it does not parse).
inline Json BodyJson(const httplib::Result& r) {
  if (!r) {
    ADD_FAILURE() << "no response: " << httplib::to_string(r.error());
    return Json();
  }
  try {
    return Json::parse(r->body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << r->body.substr(0, 300);
    return Json();
  }
}

// Checks that `r` is an RFC 9457 problem with `status`, and (when given) that
// errors[0].pointer is `pointer`. Returns the problem.
inline Json ExpectProblem(const httplib::Result& r, int status, const std::string& pointer = "") {
  EXPECT_TRUE(r) << "no response";
  if (!r) return Json();
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << r->body;
  Json p = BodyJson(r);
  EXPECT_EQ(p.value("status", 0), status) << r->body;
  EXPECT_TRUE(p.contains("type") && p["type"].is_string()) << r->body;
  EXPECT_TRUE(p.contains("title") && p["title"].is_string()) << r->body;
  if (!pointer.empty()) {
    EXPECT_TRUE(p.contains("errors")) << r->body;
    if (p.contains("errors")) {
      EXPECT_EQ(p["errors"][0].value("pointer", ""), pointer) << r->body;
    }
  }
  return p;
}

}  // namespace paratune::web::testing
