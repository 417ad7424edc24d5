// POST/GET/DELETE /v1/jobs with the real `paratune` binary as the child
// process: fake-backend profiling and confirmation run to completion; a
// long MPI/CPU profile is cancelled; records survive a restart of the service
// and a SIGKILL of a real `paratune serve` process.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "planner/plans.h"
#include "tests/executor/test_util.h"
#include "tests/web/test_util.h"

namespace paratune::web::testing {
namespace {

constexpr const char* kToken = "jobs-test-token-0123456789";

// Work that takes long enough to be cancelled or interrupted (about 25 s on
// this project's machines): a profile of this machine on the MPI/CPU backend
// with many samples per row, a real measurement.
// Runs far longer than any test waits (every test stops it): under the ASan
// tier on a loaded machine a shorter one could end before the test stops it.
// Skips a test that needs kSlowJob where the build has no MPI backend: there
// the job fails at once and nothing long-running exists to stop.
#ifdef PARATUNE_TEST_HAVE_MPI
#define SKIP_WITHOUT_SLOW_JOB() (void)0
#else
#define SKIP_WITHOUT_SLOW_JOB() \
  GTEST_SKIP() << "needs a long-running job (an mpi-cpu profile); this build has no MPI backend"
#endif
const char* kSlowJob =
    R"({"kind":"profile","backend":"mpi-cpu","quick":true,"samples":200,"iters":2000})";

Json WaitForStatus(httplib::Client& c, const std::string& id, const std::set<std::string>& want,
                   double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  Json rec;
  while (std::chrono::steady_clock::now() < until) {
    auto r = c.Get(("/v1/jobs/" + id).c_str());
    if (r && r->status == 200) {
      rec = Json::parse(r->body);
      // "running" is recorded just before the process is spawned; its pid just after.
      const bool starting = rec["status"] == "running" && !rec.contains("pid");
      if (want.count(rec["status"].get<std::string>()) && !starting) return rec;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "job " << id << " did not reach the wanted status in " << timeout_s
                << " s: " << rec.dump();
  return rec;
}

class JobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Open MPI refuses to start as root without these (CI runs as root).
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    dir_ = TempDir("jobs");
    Start();
  }
  void Start(int max_queued = 8) {
    ServerOptions o = TestOptions(dir_);
    o.token = kToken;
    o.jobs.max_queued = max_queued;
    server_ = std::make_unique<TestServer>(o);
    ASSERT_TRUE(server_->ok()) << server_->error();
    client_ = server_->Client();
    client_->set_bearer_token_auth(kToken);
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Submits and returns the record (expects 202 and a Location).
  Json Submit(const std::string& body) {
    auto r = client_->Post("/v1/jobs", body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return Json();
    EXPECT_EQ(r->status, 202) << r->body;
    Json rec = BodyJson(r);
    EXPECT_EQ(r->get_header_value("Location"), "/v1/jobs/" + rec.value("id", std::string("?")));
    return rec;
  }
  std::string dir_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(JobsTest, FakeProfileRunsAndStoresItsProfile) {
  Json rec = Submit(R"({"kind":"profile","backend":"fake","quick":true})");
  EXPECT_EQ(rec["schema"], "paratune.job/v1");
  EXPECT_EQ(rec["status"], "queued");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/jobs/" + rec["id"].get<std::string>() + ".json"));
  Json done = WaitForStatus(*client_, rec["id"], {"succeeded", "failed"}, 120);
  ASSERT_EQ(done["status"], "succeeded") << done.dump(1);
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_EQ(done["result"]["schema"], "paratune.profile/v1");
  // The fake backend measured nothing: its profile is kept apart from the
  // cache plans read, so it is not listed and changes no plan.
  Json list = BodyJson(client_->Get("/v1/profiles"));
  EXPECT_TRUE(list["profiles"].empty()) << list.dump();
  EXPECT_TRUE(std::filesystem::exists(
      dir_ + "/synthetic/profiles/" + done["result"]["cluster_fingerprint"].get<std::string>() +
      ".json"));
  Json jobs = BodyJson(client_->Get("/v1/jobs"));
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(jobs["jobs"][0]["id"], rec["id"]);
}

TEST_F(JobsTest, FakeConfirmationRunsThePlan) {
  planner::Job job = executor::testing::MakeJob(executor::testing::Gpt(4, 1024, 16, 32000),
                                                executor::testing::FakeLikeCluster(), 8, 2048, 16);
  const auto plan = executor::testing::SearchMegatron(job, 2);
  ASSERT_GE(plan.size(), 2u);
  Json req = {{"kind", "confirm"},
              {"backend", "fake"},
              {"top", 2},
              {"plans", Json::parse(plan.Document().dump())}};
  Json rec = Submit(req.dump());
  Json done = WaitForStatus(*client_, rec["id"], {"succeeded", "failed"}, 180);
  ASSERT_EQ(done["status"], "succeeded") << done.dump(1);
  EXPECT_EQ(done["result"]["schema"], "paratune.run_report/v2");
  EXPECT_EQ(done["result"]["candidates"].size(), 2u);
}

TEST_F(JobsTest, BadRequestsAreProblems) {
  auto post = [&](const std::string& b) {
    return client_->Post("/v1/jobs", b, "application/json");
  };
  ExpectProblem(post(R"({"kind":"train","backend":"fake"})"), 422, "/kind");
  ExpectProblem(post(R"({"kind":"profile","backend":"fake","extra":1})"), 422, "/extra");
  ExpectProblem(post(R"({"kind":"profile","backend":"fake","quick":"yes"})"), 422, "/quick");
  ExpectProblem(post(R"({"kind":"profile","backend":"fake","cluster":"no-such-cluster"})"), 422,
                "/cluster");
  ExpectProblem(post(R"({"kind":"confirm","backend":"fake"})"), 422, "/plans");
  ExpectProblem(
      post(R"({"kind":"confirm","backend":"fake","plans":{"schema":"paratune.plans/v1"}})"), 422);
  ExpectProblem(post(R"({"kind":"profile","backend":"tpu"})"), 422, "/backend");
  ExpectProblem(post("{"), 400);
  ExpectProblem(client_->Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})", "text/plain"),
                415);
  ExpectProblem(client_->Get("/v1/jobs/no-such-job"), 404);
  ExpectProblem(client_->Delete("/v1/jobs/no-such-job"), 404);
  ExpectProblem(client_->Put("/v1/jobs/no-such-job", "{}", "application/json"), 405);
  ExpectProblem(client_->Delete("/v1/jobs"), 405);
  EXPECT_TRUE(BodyJson(client_->Get("/v1/jobs"))["jobs"].empty());  // nothing refused was recorded
}

// Every job needs the token, fake backend included: a job writes shared state
// (records, the profile cache). The server generated one at start.
TEST(JobsAuth, JobsNeedTheToken) {
  const std::string dir = TempDir("jobs-auth");
  TestServer s(TestOptions(dir));  // no token given: one is generated into the state directory
  ASSERT_TRUE(s.ok()) << s.error();
  auto token_file = ReadFileToString(dir + "/serve-token");
  ASSERT_TRUE(token_file.ok());
  EXPECT_EQ(token_file->substr(0, token_file->find('\n')), s.token());
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/serve-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto c = s.Client();
  for (const char* b :
       {R"({"kind":"profile","backend":"mpi-cpu"})", R"({"kind":"profile","backend":"cuda"})",
        R"({"kind":"profile"})", R"({"kind":"profile","backend":"fake"})"}) {
    Json p = ExpectProblem(c->Post("/v1/jobs", b, "application/json"), 401);
    EXPECT_EQ(p["type"], "urn:paratune:problem:unauthorized");
  }
  c->set_bearer_token_auth("not-the-token-0123456789");
  ExpectProblem(c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})", "application/json"),
                401);
  c->set_bearer_token_auth(s.token());
  EXPECT_EQ(
      c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})", "application/json")->status,
      202);
  // Reads stay open on loopback.
  EXPECT_EQ(s.Client()->Get("/v1/jobs")->status, 200);
  s.Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(JobsLimits, AFullQueueSays429) {
  const std::string dir = TempDir("jobs-full");
  ServerOptions o = TestOptions(dir);
  o.jobs.max_queued = 0;
  TestServer s(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto c = s.Client();
  c->set_bearer_token_auth(s.token());
  auto r = c->Post("/v1/jobs", R"({"kind":"profile","backend":"fake"})", "application/json");
  Json p = ExpectProblem(r, 429);
  EXPECT_EQ(p["type"], "urn:paratune:problem:queue-full");
  EXPECT_EQ(r->get_header_value("Retry-After"), "30");
  s.Shutdown();
  std::filesystem::remove_all(dir);
}

TEST_F(JobsTest, CancellingARunningJobKillsIt) {
  SKIP_WITHOUT_SLOW_JOB();
  Json rec = Submit(kSlowJob);
  Json running = WaitForStatus(*client_, rec["id"], {"running", "failed", "succeeded"}, 60);
  ASSERT_EQ(running["status"], "running") << running.dump(1);
  ASSERT_TRUE(running.contains("pid"));
  const pid_t pid = running["pid"];
  EXPECT_EQ(::kill(pid, 0), 0);
  auto del = client_->Delete(("/v1/jobs/" + rec["id"].get<std::string>()).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  Json done = WaitForStatus(*client_, rec["id"], {"cancelled", "failed", "succeeded"}, 30);
  EXPECT_EQ(done["status"], "cancelled") << done.dump(1);
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: no such process any more
  // Cancelling a finished job changes nothing.
  auto again = client_->Delete(("/v1/jobs/" + rec["id"].get<std::string>()).c_str());
  EXPECT_EQ(BodyJson(again)["status"], "cancelled");
}

TEST_F(JobsTest, ARestartLosesNothingAcknowledged) {
  SKIP_WITHOUT_SLOW_JOB();
  Json slow = Submit(kSlowJob);
  WaitForStatus(*client_, slow["id"], {"running"}, 60);
  Json queued = Submit(R"({"kind":"profile","backend":"fake","quick":true})");
  Json q = BodyJson(client_->Get(("/v1/jobs/" + queued["id"].get<std::string>()).c_str()));
  ASSERT_EQ(q["status"], "queued");  // behind the running one
  server_.reset();                   // the service stops: the running job is interrupted
  Start();
  Json s = BodyJson(client_->Get(("/v1/jobs/" + slow["id"].get<std::string>()).c_str()));
  EXPECT_EQ(s["status"], "failed");
  EXPECT_NE(s.value("error", "").find("interrupted"), std::string::npos) << s.dump(1);
  // Generous: the queued profile runs a child paratune, slow under ASan.
  Json done = WaitForStatus(*client_, queued["id"], {"succeeded", "failed"}, 300);
  EXPECT_EQ(done["status"], "succeeded") << done.dump(1);
  EXPECT_EQ(BodyJson(client_->Get("/v1/jobs"))["jobs"].size(), 2u);
}

// A real `paratune serve` process, killed with SIGKILL mid-job: the next one
// reads the record it left and marks the job failed ("interrupted").
struct ServeProcess {
  pid_t pid = 0;
  int port = 0;
  std::string log;
  ~ServeProcess() { Kill(SIGKILL); }  // never leave a server behind a failed assertion
  bool Start(const std::string& dir, const std::string& name) {
    log = dir + "/" + name + ".log";
    std::ofstream(dir + "/token") << kToken << "\n";
    std::filesystem::permissions(dir + "/token", std::filesystem::perms::owner_read |
                                                     std::filesystem::perms::owner_write);
    pid = ::fork();
    if (pid == 0) {
      const std::string cache = dir + "/cache", token = dir + "/token";
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      FILE* g = std::freopen("/dev/null", "w", stdout);
      (void)f;
      (void)g;
      ::execl(PARATUNE_BINARY, PARATUNE_BINARY, "serve", "--port", "0", "--cache-dir",
              cache.c_str(), "--token-file", token.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    for (int i = 0; i < 400; ++i) {  // up to 20 s for "listening on http://127.0.0.1:PORT/"
      auto text = ReadFileToString(log);
      if (text.ok()) {
        const size_t at = text->find("127.0.0.1:");
        if (at != std::string::npos && text->find('/', at) != std::string::npos) {
          port = std::atoi(text->c_str() + at + 10);
          return port > 0;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void Kill(int sig) {
    if (pid > 0) {
      ::kill(pid, sig);
      ::waitpid(pid, nullptr, 0);
      pid = 0;
    }
  }
};

TEST(JobsCrash, AJobRunningWhenTheServiceIsKilledIsMarkedInterrupted) {
  SKIP_WITHOUT_SLOW_JOB();
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string dir = TempDir("jobs-crash");
  ServeProcess first;
  ASSERT_TRUE(first.Start(dir, "first")) << ReadFileToString(first.log).value();
  httplib::Client c("127.0.0.1", first.port);
  c.set_bearer_token_auth(kToken);
  auto r = c.Post("/v1/jobs", kSlowJob, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string id = Json::parse(r->body)["id"];
  Json running = WaitForStatus(c, id, {"running"}, 60);
  ASSERT_TRUE(running.contains("pid"));
  const pid_t child = running["pid"];
  first.Kill(SIGKILL);
  // The job's process dies with the service; it does not run on and write its
  // result later (a zombie waiting for its new parent to reap it is dead).
  auto alive = [](pid_t pid) {
    auto stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
    if (!stat.ok()) return false;
    const size_t paren = stat->rfind(')');
    return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
  };
  for (int i = 0; i < 200 && alive(child); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(child)) << "the job's process outlived the service";
  ::kill(-child, SIGKILL);  // whatever is left of its process group, should the check fail

  ServeProcess second;
  ASSERT_TRUE(second.Start(dir, "second")) << ReadFileToString(second.log).value();
  httplib::Client c2("127.0.0.1", second.port);
  c2.set_bearer_token_auth(kToken);
  auto g = c2.Get(("/v1/jobs/" + id).c_str());
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  Json rec = Json::parse(g->body);
  EXPECT_EQ(rec["status"], "failed");
  EXPECT_NE(rec.value("error", "").find("interrupted"), std::string::npos) << rec.dump(1);
  second.Kill(SIGTERM);  // a clean stop
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paratune::web::testing
