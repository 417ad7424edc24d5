// The service as a hostile client meets it: a real server on an ephemeral
// loopback port, real sockets. Slow and idle clients must not stop a health
// probe or the API; bodies over the limit are refused whatever the transfer
// encoding; compressed bodies are refused; every identifier that becomes a
// path is checked; writes from another origin or without the token are
// refused; numbers are range-checked where they are parsed; a wrong method
// is a 405 naming the allowed ones; error bodies never show the service's
// folders. Assertions are about behaviour (what is answered, what is
// written), never about how fast.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <set>

#include "common/strings.h"
#include "topology/cluster.h"
#include "web/peer.h"
#include "tests/web/test_util.h"

namespace paratune::web::testing {
namespace {

const char* kPlan = R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":16,
  "training":{"seq_len":4096,"global_batch":64},"space":"megatron","top":5})";

// A blocking loopback socket with a receive timeout (a hung server fails the
// test instead of hanging it).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

struct Reply {
  int status = 0;  // 0 = the connection closed without a response
  std::string head, body;
  std::string Header(const std::string& name) const {
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    std::string key = "\r\n" + name + ":";
    std::transform(key.begin(), key.end(), key.begin(), ::tolower);
    const size_t at = lower.find(key);
    if (at == std::string::npos) return "";
    const size_t end = head.find("\r\n", at + key.size());
    return Trim(head.substr(at + key.size(), end - at - key.size()));
  }
};

// Reads one response (headers, then Content-Length bytes or up to EOF).
// Bytes of a following response already received stay in *carry for the next
// call (pipelined responses can arrive in one read).
Reply ReadReply(int fd, std::string* carry) {
  Reply r;
  std::string buf = std::move(*carry);
  carry->clear();
  char chunk[65536];
  size_t end = std::string::npos;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return r;
    buf.append(chunk, static_cast<size_t>(n));
  }
  r.head = buf.substr(0, end);
  r.body = buf.substr(end + 4);
  if (r.head.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(r.head.c_str() + 9);
  const std::string cl = r.Header("Content-Length");
  const size_t want = cl.empty() ? std::string::npos : std::stoul(cl);
  while (r.body.size() < want) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    r.body.append(chunk, static_cast<size_t>(n));
  }
  if (want != std::string::npos && r.body.size() > want) {
    *carry = r.body.substr(want);
    r.body.resize(want);
  }
  return r;
}

Reply ReadReply(int fd) {
  std::string carry;
  return ReadReply(fd, &carry);
}

// One request on a fresh connection.
Reply Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return Reply{};
  SendAll(fd, request);
  Reply r = ReadReply(fd);
  ::close(fd);
  return r;
}

std::string Post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = "",
                 const std::string& type = "application/json") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" +
         body;
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TempDir("hostile"); }
  void Start(ServerOptions o) {
    server_ = std::make_unique<TestServer>(std::move(o));
    ASSERT_TRUE(server_->ok()) << server_->error();
    port_ = server_->port();
  }
  void Start() { Start(TestOptions(dir_)); }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::unique_ptr<httplib::Client> Authorized() {
    auto c = server_->Client();
    c->set_bearer_token_auth(server_->token());
    return c;
  }
  std::string dir_;
  std::unique_ptr<TestServer> server_;
  int port_ = 0;
};

// Every file under `root`, for "nothing was written outside the state directory".
std::set<std::string> FilesUnder(const std::string& root) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    out.insert(it->path().string());
  }
  return out;
}

// ---- starvation ----

TEST_F(HostileTest, ProbesAndTheApiAnswerWhileAHundredSlowClientsHoldSockets) {
  Start();
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    // Half send a request a byte at a time and stop mid-headers; half send nothing.
    if (i % 2 == 0) {
      ASSERT_TRUE(SendAll(fd, "POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"));
    }
    slow.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < slow.size(); i += 2) SendAll(slow[i], "n");  // still "sending"
    auto c = server_->Client();
    auto live = c->Get("/livez");
    ASSERT_TRUE(live) << httplib::to_string(live.error());
    EXPECT_EQ(live->status, 200);
    auto ready = c->Get("/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200);
    auto presets = c->Get("/v1/presets");
    ASSERT_TRUE(presets);
    EXPECT_EQ(presets->status, 200);
    auto predict = c->Post("/v1/predict", kPredict, "application/json");
    ASSERT_TRUE(predict);
    EXPECT_EQ(predict->status, 200);
  }
  for (int fd : slow) ::close(fd);
}

TEST_F(HostileTest, ProbesAnswerWhileEveryWorkerIsBusy) {
  ServerOptions o = TestOptions(dir_);
  o.front.workers = 1;
  o.plans.max_concurrent_searches = 0;  // a plan request waits for a slot for queue_wait_limit_s
  o.plans.queue_wait_limit_s = 5;
  Start(o);
  std::atomic<int> done{0};
  auto busy = [&] {
    auto c = server_->Client();
    auto r = c->Post("/v1/plans", kPlan, "application/json");
    ++done;
    return r ? r->status : 0;
  };
  auto a = std::async(std::launch::async, busy);
  auto b = std::async(std::launch::async, busy);
  // Let both reach the service: one holds the only worker, one waits behind it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto live = server_->Client()->Get("/livez");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  auto ready = server_->Client()->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_LT(done.load(), 2) << "the probes were answered only after the busy requests";
  EXPECT_EQ(a.get(), 503);  // no search slot: 503 with Retry-After
  EXPECT_EQ(b.get(), 503);
}

TEST_F(HostileTest, AtTheConnectionCapTheSlowestGiveWayToNewClients) {
  ServerOptions o = TestOptions(dir_);
  o.front.max_connections = 32;
  Start(o);
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {  // twice the cap, all mid-headers
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    SendAll(fd, "GET /v1/presets HTTP/1.1\r\nHo");
    slow.push_back(fd);
  }
  auto live = server_->Client()->Get("/livez");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_LE(server_->server().open_connections(), 32u);
  for (int fd : slow) ::close(fd);
}

TEST_F(HostileTest, IdleAndSlowConnectionsAreClosed) {
  ServerOptions o = TestOptions(dir_);
  o.front.idle_timeout_s = 0.5;
  o.front.header_timeout_s = 1;
  Start(o);
  const int idle = Connect(port_);
  const int slow = Connect(port_);
  SendAll(slow, "GET /livez HTTP/1.1\r\n");
  for (int i = 0; i < 4; ++i) {  // a byte now and then: a per-read timeout never fires
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    SendAll(slow, "X");
  }
  // The idle one is closed without a response; the slow one gets 408.
  EXPECT_EQ(ReadReply(idle).status, 0);
  Reply r = ReadReply(slow);
  EXPECT_EQ(r.status, 408) << r.head;
  ::close(idle);
  ::close(slow);
}

// ---- bodies ----

TEST_F(HostileTest, ChunkedBodiesAreDecodedAndLimited) {
  Start();  // 256 KiB limit
  // A chunked request within the limit is the same request.
  std::string chunked;
  const std::string body = kPredict;
  for (size_t at = 0; at < body.size(); at += 50) {
    const std::string piece = body.substr(at, 50);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%zx", piece.size());
    chunked += std::string(hex) + "\r\n" + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  Reply ok = Exchange(port_,
                      "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n" +
                          chunked);
  ASSERT_EQ(ok.status, 200) << ok.body;
  auto plain = server_->Client()->Post("/v1/predict", kPredict, "application/json");
  EXPECT_EQ(ok.body, plain->body);

  // Over the limit: 413 as soon as the decoded bytes pass it, the rest unread.
  const int fd = Connect(port_);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n"));
  const std::string piece(64 * 1024, ' ');
  int sent = 0;
  for (; sent < 8; ++sent) {  // 512 KiB, twice the limit; a 50 MiB body stops the same way
    if (!SendAll(fd, "10000\r\n" + piece + "\r\n")) break;
  }
  Reply big = ReadReply(fd);
  EXPECT_EQ(big.status, 413) << big.head;
  EXPECT_EQ(big.Header("Content-Type"), "application/problem+json");
  ::close(fd);
  // A declared Content-Length over the limit is refused before the body is sent.
  Reply declared = Exchange(port_,
                            "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                            "application/json\r\nContent-Length: 52428800\r\n\r\n{");
  EXPECT_EQ(declared.status, 413);
  // So is one that asks first (curl does for large bodies).
  Reply expect = Exchange(port_,
                          "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          "application/json\r\nContent-Length: 52428800\r\nExpect: "
                          "100-continue\r\n\r\n");
  EXPECT_EQ(expect.status, 413);
}

TEST_F(HostileTest, CompressedBodiesAreRefusedUnread) {
  Start();
  // The start of a gzip stream that would inflate far past the limit; the
  // service never inflates a body, whatever the build links.
  std::string gz = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff";
  gz += std::string(1000, '\0');
  for (const char* enc : {"gzip", "deflate", "br", "x-gzip, identity"}) {
    Reply r =
        Exchange(port_, Post("/v1/predict", gz, std::string("Content-Encoding: ") + enc + "\r\n"));
    EXPECT_EQ(r.status, 415) << enc;
  }
  Reply id = Exchange(port_, Post("/v1/predict", kPredict, "Content-Encoding: identity\r\n"));
  EXPECT_EQ(id.status, 200) << id.body;
}

TEST_F(HostileTest, AmbiguousFramingIsRefused) {
  Start();
  const std::string head =
      "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  EXPECT_EQ(Exchange(port_, head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}").status, 400);
  EXPECT_EQ(Exchange(port_, head + "Content-Length: 5, 6\r\n\r\n{}").status, 400);
  EXPECT_EQ(Exchange(port_, head + "Content-Length: -1\r\n\r\n{}").status, 400);
  EXPECT_EQ(
      Exchange(port_,
               head + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
          .status,
      400);
  EXPECT_EQ(Exchange(port_, head + "Transfer-Encoding: gzip, chunked\r\n\r\n").status, 501);
  EXPECT_EQ(Exchange(port_, head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n").status, 400);
  EXPECT_EQ(Exchange(port_,
                     "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n")
                .status,
            431);
  // Identical repeated lengths are one length.
  EXPECT_EQ(Exchange(port_, head + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}").status, 422);
}

TEST_F(HostileTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  const int fd = Connect(port_);
  ASSERT_TRUE(SendAll(fd,
                      "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/version HTTP/1.1\r\nHost: "
                      "localhost\r\n\r\nGET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  std::string carry;
  EXPECT_EQ(ReadReply(fd, &carry).status, 200);
  Reply v = ReadReply(fd, &carry);
  EXPECT_EQ(v.status, 200);
  EXPECT_NE(v.body.find("paratune.version/v1"), std::string::npos);
  EXPECT_EQ(ReadReply(fd, &carry).status, 404);
  ::close(fd);
}

// ---- identifiers that become paths ----

TEST_F(HostileTest, TraversalIdentifiersAreRefusedAndNothingIsWrittenOutside) {
  const std::string outside = TempDir("hostile-outside");
  const std::string state = outside + "/state";
  ServerOptions o = TestOptions(state);
  Start(o);
  const std::set<std::string> before = FilesUnder(outside);
  auto c = Authorized();
  for (const std::string& id :
       std::vector<std::string>{"..", ".", "a.b", "..%2F..%2Fx", "%2e%2e", "x%00y",
                                std::string(65, 'a'), "a%20b", "~root"}) {
    for (const std::string base : {"/v1/profiles/", "/v1/jobs/"}) {
      const std::string path = base + id;
      for (const bool del : {false, true}) {
        auto r = del ? c->Delete(path.c_str()) : c->Get(path.c_str());
        ASSERT_TRUE(r) << path;
        EXPECT_TRUE(r->status == 400 || r->status == 404) << path << " " << r->status;
        EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << path;
      }
    }
  }
  ExpectProblem(c->Get("/v1/profiles/.."), 400);
  ExpectProblem(c->Delete("/v1/jobs/a.b"), 400);
  ExpectProblem(c->Get("/v1/jobs?after=../x"), 400);
  // A profile whose cluster fingerprint is a path: refused, nothing written.
  auto log = ReadFileToString(std::string(PARATUNE_SOURCE_DIR) +
                              "/tests/profiler/data/all_reduce_8xA100.log");
  ASSERT_TRUE(log.ok());
  auto imported = c->Post("/v1/profiles?cluster=dgx-a100-80gb",
                          Json{{"nccl_tests_log", *log}}.dump(), "application/json");
  ASSERT_EQ(imported->status, 201) << imported->body;
  Json doc = BodyJson(c->Get(
      ("/v1/profiles/" + BodyJson(imported)["cluster_fingerprint"].get<std::string>()).c_str()));
  for (const std::string fp : {"../../evil", "../jobs/x", "/tmp/evil", "a/b", "..", ""}) {
    Json bad = doc;
    bad["cluster_fingerprint"] = fp;
    auto r = c->Post("/v1/profiles", bad.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->status == 400 || r->status == 422) << fp << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
  }
  Json bad = doc;
  bad["cluster_fingerprint"] = "../jobs/x";
  Json p = ExpectProblem(c->Post("/v1/profiles", bad.dump(), "application/json"), 400,
                         "/cluster_fingerprint");
  EXPECT_EQ(p["type"], "urn:paratune:problem:bad-identifier");
  // A plan naming a profile by a path.
  Json plan = Json::parse(kPlan);
  plan["profile"] = "../../etc/passwd";
  ExpectProblem(c->Post("/v1/plans", plan.dump(), "application/json"), 422, "/profile");

  // Outside the state directory nothing is new; inside, no stray name.
  std::set<std::string> after = FilesUnder(outside);
  for (const std::string& f : after) {
    EXPECT_TRUE(before.count(f) || f.rfind(state + "/", 0) == 0) << "written outside: " << f;
  }
  EXPECT_FALSE(std::filesystem::exists(state + "/jobs/x.json"));
  // The service still starts on this state directory.
  server_.reset();
  Start(o);
  EXPECT_EQ(server_->Client()->Get("/v1/jobs")->status, 200);
  server_.reset();
  std::filesystem::remove_all(outside);
}

TEST_F(HostileTest, AForeignJobRecordDoesNotStopTheService) {
  std::filesystem::create_directories(dir_ + "/jobs");
  std::ofstream(dir_ + "/jobs/evil.json") << R"({"id":"../../x","kind":"profile","backend":"fake",
    "status":"queued","request":{}})";
  std::ofstream(dir_ + "/jobs/broken.json") << "{ not json";
  Start();
  auto r = server_->Client()->Get("/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(BodyJson(r)["jobs"].empty());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/jobs/evil.json.corrupt"));
}

// ---- who may write ----

TEST_F(HostileTest, WritesNeedTheTokenAndTheSameOrigin) {
  Start();
  const std::string job = R"({"kind":"profile","backend":"fake"})";
  const std::string bearer = "Authorization: Bearer " + server_->token() + "\r\n";
  // No token.
  EXPECT_EQ(Exchange(port_, Post("/v1/jobs", job)).status, 401);
  // A page on another origin, even one that somehow holds the token.
  EXPECT_EQ(
      Exchange(port_, Post("/v1/jobs", job, bearer + "Origin: http://evil.example\r\n")).status,
      403);
  EXPECT_EQ(Exchange(port_, Post("/v1/jobs", job, "Origin: null\r\n")).status, 403);
  EXPECT_EQ(
      Exchange(port_, Post("/v1/jobs", job, bearer + "Sec-Fetch-Site: cross-site\r\n")).status,
      403);
  // The form-encoded and text/plain posts a page may send without a preflight.
  for (const char* type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}) {
    // (A multipart body that does not parse is refused before any handler: 400.)
    const std::set<int> refused = {415, std::string(type) == "multipart/form-data" ? 400 : 415};
    EXPECT_TRUE(refused.count(Exchange(port_, Post("/v1/jobs", job, bearer, type)).status)) << type;
    EXPECT_TRUE(refused.count(
        Exchange(port_, Post("/v1/profiles?cluster=dgx-a100-80gb", "x", bearer, type)).status))
        << type;
  }
  EXPECT_EQ(Exchange(port_, Post("/v1/profiles", "{}", "")).status, 401);
  EXPECT_EQ(Exchange(port_, "DELETE /v1/jobs/abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 401);
  EXPECT_EQ(Exchange(port_, "DELETE /v1/profiles/abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 401);
  // Same origin with the token: accepted. Reads need nothing on loopback.
  const std::string origin = "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n";
  Reply ok =
      Exchange(port_, "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(job.size()) + "\r\n" + bearer + origin + "\r\n" + job);
  EXPECT_EQ(ok.status, 202) << ok.body;
  EXPECT_EQ(Exchange(port_, "GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 200);
  // Computations are not writes, but a page elsewhere cannot post them either.
  EXPECT_EQ(Exchange(port_, Post("/v1/plans", kPlan, "Origin: http://evil.example\r\n")).status,
            403);
  EXPECT_EQ(Exchange(port_, Post("/v1/plans", kPlan, "", "text/plain")).status, 415);
}

// ---- numbers ----

TEST_F(HostileTest, NumbersAreRangeCheckedWhereTheyAreParsed) {
  Start();
  auto c = server_->Client();
  auto plan = [&](const std::function<void(Json&)>& edit, const std::string& pointer) {
    Json j = Json::parse(kPlan);
    edit(j);
    ExpectProblem(c->Post("/v1/plans", j.dump(), "application/json"), 422, pointer);
  };
  plan([](Json& j) { j["gpus"] = "4294967552"; }, "/gpus");  // a string, and past any int
  plan([](Json& j) { j["gpus"] = "64"; }, "/gpus");          // a number as a string
  plan([](Json& j) { j["gpus"] = int64_t{1} << 32; }, "/gpus");
  plan([](Json& j) { j["gpus"] = "1:4294967552"; }, "/gpus");
  plan([](Json& j) { j["gpus"] = 1e300; }, "/gpus");
  plan([](Json& j) { j["top"] = 100000; }, "/top");
  plan([](Json& j) { j["top"] = 5000; }, "/top");  // over this service's limit
  plan([](Json& j) { j["top"] = "10"; }, "/top");
  // Counts may be written as people type them ("8k", docs/cli.md); anything else is refused.
  plan([](Json& j) { j["training"]["global_batch"] = "64 sequences"; }, "/training/global_batch");
  plan([](Json& j) { j["training"]["global_batch"] = "2^40"; }, "/training/global_batch");
  plan([](Json& j) { j["training"]["global_batch"] = int64_t{1} << 40; }, "/training/global_batch");
  plan([](Json& j) { j["training"]["seq_len"] = int64_t{1} << 40; }, "/training/seq_len");
  plan([](Json& j) { j["training"]["seq_len"] = "4096tokens"; }, "/training/seq_len");
  plan([](Json& j) { j["training"]["seq_len"] = "1e9"; }, "/training/seq_len");
  Json pred = Json::parse(kPredict);
  pred["gpus"] = "1024";
  ExpectProblem(c->Post("/v1/predict", pred.dump(), "application/json"), 422, "/gpus");
  pred = Json::parse(kPredict);
  pred["config"]["tp"] = int64_t{1} << 33;
  ExpectProblem(c->Post("/v1/predict", pred.dump(), "application/json"), 422);

  auto planned = c->Post("/v1/plans", kPlan, "application/json");
  ASSERT_EQ(planned->status, 200) << planned->body;
  const Json from = Json::parse(planned->body);
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"add_nodes", 1e9},
           {"add_nodes", int64_t{1} << 31},
           {"gpus", int64_t{1} << 40},
           {"lost_nodes", "1"},
           {"lost_node_ids", Json::array({(int64_t{1} << 32) + 1})},
           {"lost_node_ids", Json::array({-1})},
           {"top", 100000}}) {
    Json req = {{"from", from}, {key, value}};
    auto r = c->Post("/v1/replans", req.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 422) << key << "=" << value.dump() << ": " << r->body;
  }
}

// ---- HTTP hygiene ----

TEST_F(HostileTest, AWrongMethodIs405WithAllow) {
  Start();
  auto c = Authorized();
  struct Case {
    std::string method, path, allow;
  };
  for (const Case& k : std::vector<Case>{{"PUT", "/v1/presets", "GET"},
                                         {"DELETE", "/v1/plans", "POST"},
                                         {"PATCH", "/v1/predict", "POST"},
                                         {"POST", "/livez", "GET"},
                                         {"PUT", "/v1/jobs", "GET, POST"},
                                         {"POST", "/v1/profiles/abc", "GET, DELETE"},
                                         {"OPTIONS", "/v1/version", "GET"}}) {
    Reply r = Exchange(port_, k.method + " " + k.path +
                                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 2\r\nAuthorization: Bearer " +
                                  server_->token() + "\r\n\r\n{}");
    EXPECT_EQ(r.status, 405) << k.method << " " << k.path << ": " << r.body;
    EXPECT_EQ(r.Header("Allow"), k.allow) << k.method << " " << k.path;
  }
  EXPECT_EQ(Exchange(port_, "GET /v1/no-such-thing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 404);
  // A method HTTP does not define is not implemented anywhere.
  EXPECT_EQ(Exchange(port_, "FOO /v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 501);
}

TEST_F(HostileTest, ErrorBodiesNeverShowTheServicesFolders) {
  Start();
  // A profile file the service did not write: reading it fails naming the file.
  std::filesystem::create_directories(dir_ + "/profiles");
  std::ofstream(dir_ + "/profiles/00000000deadbeef.json") << "{ not a profile";
  auto c = Authorized();
  for (int i = 0; i < 4; ++i) {
    auto r = i == 0   ? c->Get("/v1/profiles/00000000deadbeef")
             : i == 1 ? c->Get("/v1/profiles")
             : i == 2 ? c->Delete("/v1/profiles/0000000000c0ffee")
                      : c->Get("/readyz?verbose");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body.find(dir_), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find(std::filesystem::temp_directory_path().string() + "/"),
              std::string::npos)
        << r->body;
  }
  auto r = c->Get("/v1/profiles/00000000deadbeef");
  EXPECT_GE(r->status, 400);
  EXPECT_NE(r->body.find("$STATE"), std::string::npos) << r->body;  // named by its role
}

// ---- jobs: paging and pruning ----

TEST_F(HostileTest, JobsArePagedAndFinishedOnesPruned) {
  std::filesystem::create_directories(dir_ + "/jobs");
  // Twelve finished records, one a year old; the service keeps ten.
  for (int i = 0; i < 12; ++i) {
    char id[32], at[32];
    std::snprintf(id, sizeof id, "00000000000%d-%04d", i % 10, i);
    std::snprintf(at, sizeof at, i == 0 ? "2025-01-01T00:00:%02dZ" : "2099-01-01T00:00:%02dZ", i);
    Json rec = {{"schema", "paratune.job/v1"}, {"id", id},
                {"kind", "profile"},           {"backend", "fake"},
                {"status", "succeeded"},       {"created_at", at},
                {"finished_at", at},           {"request", {{"kind", "profile"}}}};
    std::ofstream(dir_ + "/jobs/" + std::string(id) + ".json") << rec.dump();
    std::filesystem::create_directories(dir_ + "/jobs/" + id);
  }
  ServerOptions o = TestOptions(dir_);
  o.jobs.max_finished = 10;
  o.jobs.max_age_s = 30 * 86400;
  Start(o);
  auto c = server_->Client();
  std::vector<std::string> seen;
  std::string next = "/v1/jobs?limit=4";
  for (int pages = 0; !next.empty() && pages < 10; ++pages) {
    Json page = BodyJson(c->Get(next.c_str()));
    EXPECT_LE(page["jobs"].size(), 4u);
    for (const auto& j : page["jobs"]) seen.push_back(j["id"]);
    next = page.value("next", "");
  }
  ASSERT_EQ(seen.size(), 10u);  // the year-old one and the oldest beyond ten are gone
  EXPECT_EQ(seen.front(), "000000000001-0011");  // newest first
  for (size_t k = 0; k < seen.size(); ++k) {     // newest first: records 11 down to 2
    char id[32];
    std::snprintf(id, sizeof id, "00000000000%d-%04d", static_cast<int>(11 - k) % 10,
                  static_cast<int>(11 - k));
    EXPECT_EQ(seen[k], id);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs/000000000000-0000.json"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs/000000000000-0000"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs/000000000001-0001.json"));
  ExpectProblem(c->Get("/v1/jobs?limit=0"), 422);
  ExpectProblem(c->Get("/v1/jobs?limit=100000"), 422);
}


// ---- round two: a shared node's other users ----

constexpr uid_t kOtherUid = 65534;  // nobody: the second user, where the test runs as root

bool IsRoot() { return ::geteuid() == 0; }

// A GET on a fresh connection with these extra header lines.
Reply Get(int port, const std::string& path, const std::string& headers) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
                            "Connection: close\r\n\r\n");
}

TEST_F(HostileTest, RangesAreIgnoredSoNoRequestAmplifies) {
  Start();
  const Reply whole = Get(port_, "/v1/openapi.json", "");
  ASSERT_EQ(whole.status, 200);
  std::string thousand = "bytes=0-";
  for (int i = 1; i < 1000; ++i) thousand += ",0-";
  for (const std::string& range : {thousand, std::string("bytes=0-10"), std::string("bytes=5-")}) {
    for (const char* path : {"/v1/openapi.json", "/static/app.js"}) {
      const Reply r = Get(port_, path, "Range: " + range + "\r\nIf-Range: x\r\n");
      EXPECT_EQ(r.status, 200) << path;
      if (std::string(path) == "/v1/openapi.json") {
        EXPECT_EQ(r.body.size(), whole.body.size());
      }
      EXPECT_EQ(r.Header("Content-Range"), "");
      EXPECT_EQ(r.Header("Accept-Ranges"), "none");
    }
  }
}

TEST_F(HostileTest, AStateDirectoryOthersCouldHavePreparedIsRefused) {
  auto refused = [&](const std::string& why) {
    auto s = Server::Create(TestOptions(dir_));
    EXPECT_FALSE(s.ok()) << why;
    return s.ok() ? std::string() : s.status().message();
  };
  // Writable by others.
  std::filesystem::permissions(dir_, std::filesystem::perms::all);
  EXPECT_NE(refused("0777").find("chmod go-w"), std::string::npos);
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
  // A link inside, pointing where job records would land.
  const std::string outside = TempDir("outside");
  std::filesystem::create_directory_symlink(outside, dir_ + "/jobs");
  EXPECT_NE(refused("jobs link").find("symbolic link"), std::string::npos);
  std::filesystem::remove(dir_ + "/jobs");
  EXPECT_TRUE(std::filesystem::is_empty(outside));
  if (IsRoot()) {
    // Another user's folder, and another user's profile inside ours.
    ASSERT_EQ(::chown(dir_.c_str(), kOtherUid, kOtherUid), 0);
    EXPECT_NE(refused("owner").find("belongs to uid 65534"), std::string::npos);
    ASSERT_EQ(::chown(dir_.c_str(), 0, 0), 0);
    std::filesystem::create_directories(dir_ + "/profiles");
    std::ofstream(dir_ + "/profiles/00000000deadbeef.json") << "{}";
    ASSERT_EQ(::chown((dir_ + "/profiles/00000000deadbeef.json").c_str(), kOtherUid, kOtherUid), 0);
    EXPECT_NE(refused("planted profile").find("00000000deadbeef.json"), std::string::npos);
    std::filesystem::remove_all(dir_ + "/profiles");
  }
  // A missing one is made 0700 with 0600 files, whatever the umask.
  const std::string fresh = dir_ + "/fresh/state";
  const mode_t old = ::umask(0);
  {
    ServerOptions o = TestOptions(fresh);
    Start(o);
  }
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((fresh + "/serve-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(server_->token().size(), 64u);  // 256 bits in hex, as docs/service.md says
  ASSERT_EQ(::stat((fresh + "/jobs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A planted temporary name is never written through; probes write nothing.
  std::ofstream(outside + "/victim") << "mine\n";
  for (int pid = ::getpid() - 2; pid <= ::getpid() + 2; ++pid) {
    std::filesystem::create_symlink(outside + "/victim",
                                    fresh + "/.readyz.tmp." + std::to_string(pid));
  }
  EXPECT_EQ(Get(port_, "/readyz", "").status, 200);
  EXPECT_EQ(*ReadFileToString(outside + "/victim"), "mine\n");
  EXPECT_FALSE(std::filesystem::exists(fresh + "/.readyz"));
  std::filesystem::remove_all(outside);
}

TEST_F(HostileTest, ARestartOnAReadOnlyStateDirectoryServesPlansDegraded) {
  if (!IsRoot()) GTEST_SKIP() << "needs a second uid (run as root)";
  // The service runs as the second user on a folder that user owns but cannot
  // write (as a read-only mount would be), holding the record of a job that
  // was running when the service was killed.
  std::filesystem::create_directories(dir_ + "/jobs");
  std::ofstream(dir_ + "/jobs/000000000001-0001.json")
      << R"({"id":"000000000001-0001","kind":"profile","backend":"fake","status":"running",
           "request":{},"created_at":"2026-01-01T00:00:00Z","pid":999999})";
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
    ASSERT_EQ(::lchown(e.path().c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chown(dir_.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chmod((dir_ + "/jobs").c_str(), 0500), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0500), 0);
  // A copy of the binary the second user can run wherever the build tree is.
  const std::string bin_dir = TempDir("bin");
  const std::string bin = bin_dir + "/paratune";
  std::filesystem::copy_file(PARATUNE_BINARY, bin);
  ::chmod(bin_dir.c_str(), 0755);
  ::chmod(bin.c_str(), 0755);
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], 2);
    if (::setgid(kOtherUid) != 0 || ::setuid(kOtherUid) != 0) ::_exit(99);
    ::execl(bin.c_str(), bin.c_str(), "serve", "--port", "0", "--cache-dir", dir_.c_str(), nullptr);
    ::_exit(98);
  }
  ::close(out[1]);
  std::string err;
  char buf[4096];
  int port = 0;
  // Its start-up lines, up to the one saying it is degraded (printed after
  // the one naming the port), or 20 s of silence.
  while (port == 0 || err.find("degraded") == std::string::npos) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) break;
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
    const size_t at = err.find("listening on http://127.0.0.1:");
    if (at != std::string::npos && err.find('/', at + 30) != std::string::npos)
      port = std::atoi(err.c_str() + at + 30);
  }
  ASSERT_GT(port, 0) << err;
  EXPECT_NE(err.find("degraded"), std::string::npos) << err;
  const Reply ready = Get(port, "/readyz?verbose", "");
  EXPECT_EQ(ready.status, 200);
  EXPECT_NE(ready.body.find("degraded"), std::string::npos) << ready.body;
  EXPECT_EQ(Exchange(port, Post("/v1/plans", kPlan)).status, 200);
  const Reply job = Exchange(port, Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})"));
  EXPECT_EQ(job.status, 503);
  EXPECT_NE(job.body.find("read-only"), std::string::npos) << job.body;
  EXPECT_EQ(job.body.find(dir_), std::string::npos) << job.body;
  ::kill(child, SIGTERM);
  ::waitpid(child, nullptr, 0);
  ::close(out[0]);
  ::chmod(dir_.c_str(), 0700);
  ::chmod((dir_ + "/jobs").c_str(), 0700);
  std::filesystem::remove_all(bin_dir);
}

TEST_F(HostileTest, AStorageFailureIs503NamingTheOperationNotAPath) {
  Start();
  // The profile's file name is taken by a folder: the store cannot rename
  // over it, as a full disk cannot write it.
  auto c = Authorized();
  auto cluster = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(cluster.ok());
  const std::string fp = topology::Fingerprint(*cluster);
  std::filesystem::create_directories(dir_ + "/profiles/" + fp + ".json/x");
  std::string log;
  std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/tests/profiler/data/all_reduce_8xA100.log");
  log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  ASSERT_FALSE(log.empty());
  auto r = c->Post("/v1/profiles?cluster=dgx-h100", Json({{"nccl_tests_log", log}}).dump(),
                   "application/json");
  Json p = ExpectProblem(r, 503);
  EXPECT_EQ(p["type"], "urn:paratune:problem:storage");
  EXPECT_NE(p["detail"].get<std::string>().find("could not store the profile"), std::string::npos)
      << p.dump();
  EXPECT_EQ(p["detail"].get<std::string>().find('/'), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("$STATE"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("$TMPDIR"), std::string::npos) << r->body;
}

TEST_F(HostileTest, AnotherUsersSweepsDoNotStarveANeighboursPlans) {
  if (!IsRoot()) GTEST_SKIP() << "needs a second uid (run as root)";
  ServerOptions o = TestOptions(dir_);
  o.plans.max_concurrent_searches = 1;  // the 2-core machine: one search at a time
  o.plans.search_threads = 1;
  o.plans.queue_wait_limit_s = 10;
  Start(o);
  // The attacker: four clients of another user looping distinct large sweeps.
  const pid_t attacker = ::fork();
  if (attacker == 0) {
    ::setpgid(0, 0);  // a group of its own, so one kill ends it and its clients
    if (::setgid(kOtherUid) != 0 || ::setuid(kOtherUid) != 0) ::_exit(99);
    for (int k = 0; k < 4; ++k) {
      if (::fork() == 0) {
        for (int i = 0;; ++i) {
          const std::string body =
              R"({"model":"llama3.1-405b","cluster":"dgx-h100","gpus":"2048:131072:2048",
              "training":{"seq_len":8192,"global_batch":)" +
              std::to_string(2048 * (1 + k * 1000 + i)) + "}}";
          Exchange(port_, Post("/v1/plans", body));
        }
      }
    }
    ::pause();
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  // The neighbour: distinct uncached plans, each answered; probes and a
  // cached plan meanwhile.
  std::vector<int> statuses;
  for (int gpus : {8, 16, 24, 32, 48}) {
    const std::string body = R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":)" +
                             std::to_string(gpus) +
                             R"(,"training":{"seq_len":4096,"global_batch":64},"space":"megatron"})";
    statuses.push_back(Exchange(port_, Post("/v1/plans", body)).status);
    EXPECT_EQ(Get(port_, "/livez", "").status, 200);
    const Reply again = Exchange(port_, Post("/v1/plans", body));
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(again.Header("X-Paratune-Cache"), "hit");
  }
  ::setpgid(attacker, attacker);  // as the child did: no race with the kill
  ::kill(-attacker, SIGKILL);
  ::waitpid(attacker, nullptr, 0);
  EXPECT_EQ(statuses, std::vector<int>(5, 200));
}

TEST_F(HostileTest, ACheapSearchOvertakesALargeOneOfTheSameClient) {
  ServerOptions o = TestOptions(dir_);
  o.plans.max_concurrent_searches = 1;
  o.plans.search_threads = 1;
  o.plans.search_time_limit_s = 12;  // the sweep ends (422) inside the socket's 20 s timeout
  Start(o);
  auto sweep = std::async(std::launch::async, [&] {
    return Exchange(port_, Post("/v1/plans",
                                R"({"model":"llama3.1-405b","cluster":"dgx-h100","gpus":"2048:131072:2048",
      "training":{"seq_len":8192,"global_batch":2048}})")).status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Exchange(port_, Post("/v1/plans", kPlan)).status, 200);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int big = sweep.get();
  EXPECT_TRUE(big == 200 || big == 422) << big;
  // Not a timing assertion on speed: the small plan was answered before the
  // sweep's time limit could free the slot.
  EXPECT_LT(waited, o.plans.search_time_limit_s / 2);
}

TEST_F(HostileTest, AbsurdNumbersAreRefusedNamingTheField) {
  Start();
  auto c = server_->Client();
  struct Case {
    std::string cluster, pointer;
  };
  for (const Case& k : std::vector<Case>{
           {R"({"name":"box","gpu":"h100-sxm","gpus_per_node":8,"intra_node_GBps":370,
                "nics_per_node":0,"max_nodes":4})", "/cluster/nics_per_node"},
           {R"({"name":"slow","gpu":"h100-sxm","gpus_per_node":8,"intra_node_GBps":1e-300,
                "nics_per_node":8,"nic_GBps":50})", "/cluster/intra_node_GBps"},
           {R"({"name":"big","gpu":"h100-sxm","gpus_per_node":8,"intra_node_GBps":370,
                "nics_per_node":8,"nic_GBps":50,"gpu_memory_GiB":1e308})", "/cluster/gpu_memory_GiB"}}) {
    const std::string body = R"({"model":"llama3-8b","gpus":16,"training":{"global_batch":64},
      "config":{"tp":8},"cluster":)" + k.cluster + "}";
    Json p = ExpectProblem(c->Post("/v1/predict", body, "application/json"), 422);
    EXPECT_NE(p.dump().find(k.pointer), std::string::npos) << p.dump();
  }
}

TEST_F(HostileTest, AJobInheritsOnlyItsStandardDescriptors) {
  // The job's program lists its open descriptors, as any program it runs could.
  const std::string listing = dir_ + "-fds.txt";
  const std::string script = dir_ + "-job.sh";
  std::ofstream(script) << "#!/bin/sh\nls -l /proc/$$/fd > '" << listing << "'\n";
  ::chmod(script.c_str(), 0700);
  ServerOptions o = TestOptions(dir_);
  o.executable = script;
  Start(o);
  auto c = Authorized();
  auto r = c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  for (int i = 0; i < 200 && !std::filesystem::exists(listing); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the listing written whole
  auto text = ReadFileToString(listing);
  ASSERT_TRUE(text.ok());
  // 0 is /dev/null, 1 and 2 the job's log; the shell's own script may be
  // open too. No socket, no epoll set, nothing else of the service's.
  EXPECT_EQ(text->find("socket:"), std::string::npos) << *text;
  EXPECT_EQ(text->find("anon_inode"), std::string::npos) << *text;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text->find(what); at != std::string::npos; at = text->find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("/dev/null"), 1u) << *text;
  EXPECT_EQ(count("log.txt"), 2u) << *text;
  std::filesystem::remove(listing);
  std::filesystem::remove(script);
}

TEST(PlanCacheFairness, OneClientFillingTheCacheEvictsOnlyItsOwn) {
  DocumentCache cache(8);
  auto doc = std::make_shared<const std::string>("{}");
  cache.Put("mine", doc, "uid:1000");
  for (int i = 0; i < 300; ++i) cache.Put("flood" + std::to_string(i), doc, "uid:1001");
  EXPECT_NE(cache.Get("mine"), nullptr);
  EXPECT_EQ(cache.CountOwnedBy("uid:1001"), 7u);
  EXPECT_EQ(cache.Get("flood0"), nullptr);
  EXPECT_NE(cache.Get("flood299"), nullptr);
}

TEST(PeerIdentity, ALoopbackClientIsItsUser) {
  // /proc/net/tcp rows as the kernel prints them: 127.0.0.1:40000 ->
  // 127.0.0.1:8080 owned by uid 1234, and the server's side of it.
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
      "   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1234        0 2 1\n";
  EXPECT_EQ(SocketOwner(table, "127.0.0.1", 40000, "127.0.0.1", 8080), std::optional<uid_t>(1234));
  EXPECT_EQ(SocketOwner(table, "127.0.0.1", 40001, "127.0.0.1", 8080), std::nullopt);
  EXPECT_EQ(ClientKey("10.0.0.7", 5, "10.0.0.1", 8080), "ip:10.0.0.7");
  // A real connection to this process's own listening socket.
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  const int cfd = Connect(port);
  ASSERT_GE(cfd, 0);
  sockaddr_in mine{};
  len = sizeof mine;
  ::getsockname(cfd, reinterpret_cast<sockaddr*>(&mine), &len);
  EXPECT_EQ(ClientKey("127.0.0.1", ntohs(mine.sin_port), "127.0.0.1", port),
            "uid:" + std::to_string(::geteuid()));
  ::close(cfd);
  ::close(lfd);
}

TEST_F(HostileTest, FakeProfilesNeverEnterTheCacheThatPlansRead) {
  Start();
  const std::string out = dir_ + "/fake.json";
  auto [text, code] = RunCommand(std::string(PARATUNE_BINARY) +
                                 " profile --backend fake --quick --cluster dgx-h100 --out " + out +
                                 " --cache-dir " + dir_ + " 2>&1");
  ASSERT_EQ(code, 0) << text;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/profiles")) << text;
  // Nor through the service: the fake profile is refused, and plans stay as they were.
  auto doc = ReadFileToString(out);
  ASSERT_TRUE(doc.ok());
  Json p = ExpectProblem(Authorized()->Post("/v1/profiles", *doc, "application/json"), 409);
  EXPECT_NE(p["detail"].get<std::string>().find("fake backend"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/profiles/" + Json::parse(*doc)["cluster_fingerprint"]
                                                                    .get<std::string>() + ".json"));
  EXPECT_TRUE(BodyJson(server_->Client()->Get("/v1/profiles"))["profiles"].empty());
}

TEST_F(HostileTest, JobSamplingIsBoundedBeforeWorkStarts) {
  Start();
  auto c = Authorized();
  ExpectProblem(c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake","samples":100000})",
                        "application/json"),
                422, "/samples");
  ExpectProblem(c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake","iters":100000})",
                        "application/json"),
                422, "/iters");
  Json both = ExpectProblem(
      c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake","samples":1000,"iters":10000})",
              "application/json"),
      422);
  EXPECT_NE(both["detail"].get<std::string>().find("at most 1000000"), std::string::npos);
  auto [text, code] = RunCommand(std::string(PARATUNE_BINARY) +
                                 " profile --backend fake --samples 100000 --iters 100000 "
                                 "--no-cache --out " + dir_ + "/x.json 2>&1");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("--samples"), std::string::npos) << text;
}

TEST_F(HostileTest, OnlyTheNamesThisServiceIsReachedByAreAnswered) {
  Start();
  const std::string evil = "Host: evil.example\r\nOrigin: http://evil.example\r\n";
  for (const char* path : {"/v1/plans", "/v1/jobs", "/v1/profiles"}) {
    const Reply r = Exchange(port_, "POST " + std::string(path) +
                                        " HTTP/1.1\r\n" + evil +
                                        "Content-Type: application/json\r\nContent-Length: 2\r\n"
                                        "Connection: close\r\n\r\n{}");
    EXPECT_EQ(r.status, 421) << path;
    EXPECT_NE(r.body.find("--allow-host"), std::string::npos) << r.body;
  }
  for (const char* path : {"/metrics", "/v1/profiles", "/"}) {
    EXPECT_EQ(Exchange(port_, "GET " + std::string(path) + " HTTP/1.1\r\n" + evil +
                                  "Connection: close\r\n\r\n")
                  .status,
              421)
        << path;
  }
  for (const std::string& host : {"localhost:" + std::to_string(port_), std::string("127.0.0.1"),
                                 std::string("[::1]:80"), std::string("LOCALHOST")}) {
    EXPECT_EQ(Exchange(port_, "GET /v1/version HTTP/1.1\r\nHost: " + host +
                                  "\r\nConnection: close\r\n\r\n")
                  .status,
              200)
        << host;
  }
  server_.reset();
  ServerOptions o = TestOptions(dir_);
  o.allowed_hosts = {"paratune.example"};
  Start(o);
  EXPECT_EQ(Exchange(port_, "GET /v1/version HTTP/1.1\r\nHost: paratune.example:8080\r\n"
                            "Connection: close\r\n\r\n")
                .status,
            200);
}

TEST_F(HostileTest, UnknownMethodsShareOneMetricSeries) {
  Start();
  for (int i = 0; i < 200; ++i) {
    Exchange(port_, "M" + std::to_string(i) + " / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  }
  const std::string metrics = server_->Client()->Get("/metrics")->body;
  EXPECT_EQ(metrics.find("M17"), std::string::npos);
  EXPECT_NE(metrics.find("method=\"other\""), std::string::npos);
  EXPECT_LT(metrics.size(), 64u * 1024);
}

TEST_F(HostileTest, HeadersAreReadAsRfc9112Says) {
  Start();
  const Reply bare_cr = Exchange(port_, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\rb\r\n\r\n");
  EXPECT_EQ(bare_cr.status, 400);
  std::string nul = "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a";
  nul += '\0';
  nul += "b\r\n\r\n";
  EXPECT_EQ(Exchange(port_, nul).status, 400);
  std::string nul_name = "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-";
  nul_name += '\0';
  nul_name += ": b\r\n\r\n";
  EXPECT_EQ(Exchange(port_, nul_name).status, 400);
  EXPECT_EQ(Exchange(port_, "GET /livez HTTP/1.1\r\n\r\n").status, 400);  // no Host
  EXPECT_EQ(Exchange(port_, "GET /livez HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").status, 400);
  EXPECT_EQ(Exchange(port_, "GET /livez HTTP/1.0\r\n\r\n").status, 200);  // 1.0 needs none
}

TEST_F(HostileTest, NothingIsLeftBehindAndHeadersSayWhatTheCodeDoes) {
  Start();
  auto c = Authorized();
  for (int i = 0; i < 300; ++i) {
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016x", 0xc0ffee00 + i);
    EXPECT_EQ(c->Delete((std::string("/v1/profiles/") + fp).c_str())->status, 404);
  }
  size_t locks = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
    locks += e.path().extension() == ".lock" ? 1 : 0;
  EXPECT_EQ(locks, 0u);
  const Reply r = Exchange(port_, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.Header("Keep-Alive"), "timeout=5, max=1000");
  // A token file others can read is refused (exit 2), like an SSH key.
  const std::string token = dir_ + "/token";
  std::ofstream(token) << "0123456789abcdef0123\n";
  ::chmod(token.c_str(), 0666);
  auto [text, code] = RunCommand(std::string(PARATUNE_BINARY) + " serve --port 0 --token-file " +
                                 token + " --cache-dir " + dir_ + "/other 2>&1");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("chmod 600"), std::string::npos) << text;
}

}  // namespace
}  // namespace paratune::web::testing
