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
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <set>

#include "common/strings.h"
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
      ASSERT_TRUE(SendAll(fd, "POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Le"));
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
                      "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n" +
                          chunked);
  ASSERT_EQ(ok.status, 200) << ok.body;
  auto plain = server_->Client()->Post("/v1/predict", kPredict, "application/json");
  EXPECT_EQ(ok.body, plain->body);

  // Over the limit: 413 as soon as the decoded bytes pass it, the rest unread.
  const int fd = Connect(port_);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
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
                            "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            "application/json\r\nContent-Length: 52428800\r\n\r\n{");
  EXPECT_EQ(declared.status, 413);
  // So is one that asks first (curl does for large bodies).
  Reply expect = Exchange(port_,
                          "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
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
      "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
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
                     "GET /livez HTTP/1.1\r\nHost: x\r\nX: " + std::string(20000, 'a') + "\r\n\r\n")
                .status,
            431);
  // Identical repeated lengths are one length.
  EXPECT_EQ(Exchange(port_, head + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}").status, 422);
}

TEST_F(HostileTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  const int fd = Connect(port_);
  ASSERT_TRUE(SendAll(fd,
                      "GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/version HTTP/1.1\r\nHost: "
                      "x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
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
  EXPECT_EQ(Exchange(port_, "DELETE /v1/jobs/abc HTTP/1.1\r\nHost: x\r\n\r\n").status, 401);
  EXPECT_EQ(Exchange(port_, "DELETE /v1/profiles/abc HTTP/1.1\r\nHost: x\r\n\r\n").status, 401);
  // Same origin with the token: accepted. Reads need nothing on loopback.
  const std::string origin = "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n";
  Reply ok =
      Exchange(port_, "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(job.size()) + "\r\n" + bearer + origin + "\r\n" + job);
  EXPECT_EQ(ok.status, 202) << ok.body;
  EXPECT_EQ(Exchange(port_, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
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
  plan([](Json& j) { j["training"]["global_batch"] = "64"; }, "/training/global_batch");
  plan([](Json& j) { j["training"]["global_batch"] = int64_t{1} << 40; }, "/training/global_batch");
  plan([](Json& j) { j["training"]["seq_len"] = int64_t{1} << 40; }, "/training/seq_len");
  plan([](Json& j) { j["training"]["seq_len"] = "4096"; }, "/training/seq_len");
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
                                  " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 2\r\nAuthorization: Bearer " +
                                  server_->token() + "\r\n\r\n{}");
    EXPECT_EQ(r.status, 405) << k.method << " " << k.path << ": " << r.body;
    EXPECT_EQ(r.Header("Allow"), k.allow) << k.method << " " << k.path;
  }
  EXPECT_EQ(Exchange(port_, "GET /v1/no-such-thing HTTP/1.1\r\nHost: x\r\n\r\n").status, 404);
  // A method HTTP does not define is not implemented anywhere.
  EXPECT_EQ(Exchange(port_, "FOO /v1/version HTTP/1.1\r\nHost: x\r\n\r\n").status, 501);
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

}  // namespace
}  // namespace paratune::web::testing
