// Every route of `paratune serve` over real HTTP on an ephemeral loopback
// port: documents, each error status with its problem body, the plan cache,
// auth, metrics, and the OpenAPI schemas checked against real responses.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <chrono>
#include <set>
#include <thread>

#include "planner/network_request.h"
#include "tests/web/test_util.h"
#include "web/problem.h"

namespace paratune::web::testing {
namespace {

const char* kPlan = R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":16,
  "training":{"seq_len":4096,"global_batch":64},"space":"megatron","top":5,"pareto":true})";

// Runs the paratune binary with the profile cache off; returns stdout and the exit code.
std::pair<std::string, int> RunCli(const std::string& args) {
  const std::string cmd =
      std::string("PARATUNE_NO_CACHE=1 ") + PARATUNE_BINARY + " " + args + " 2>/dev/null";
  return RunCommand(cmd);
}

// The plans document `rest` equals the CLI's for `args` (which exits
// `exit_code`), but for the search time.
void ExpectPlansAsCli(Json rest, const std::string& args, int exit_code) {
  auto [cli, code] = RunCli(args);
  ASSERT_EQ(code, exit_code);
  Json c = Json::parse(cli);
  rest.erase("search_time_s");
  c.erase("search_time_s");
  EXPECT_EQ(rest, c);
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("server");
    server_ = std::make_unique<TestServer>(TestOptions(dir_));
    ASSERT_TRUE(server_->ok()) << server_->error();
    client_ = server_->Client();
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  httplib::Result PostJson(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }
  // Posts `base` to `path` with the field at JSON pointer `field` set to
  // `value`, and checks that the answer is a 422 problem naming that field.
  Json ExpectFieldRefused(const std::string& path, const char* base, const std::string& field,
                          const Json& value) {
    Json bad = Json::parse(base);
    bad[Json::json_pointer(field)] = value;
    return ExpectProblem(PostJson(path, bad.dump()), 422, field);
  }
  std::string dir_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServerTest, HealthEndpoints) {
  auto live = client_->Get("/livez");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  auto ready = client_->Get("/readyz?verbose");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_NE(ready->body.find("[+]presets ok"), std::string::npos) << ready->body;
  EXPECT_NE(ready->body.find("[+]cache ok"), std::string::npos) << ready->body;
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServerTest, ReadyzFailsWhenTheStateDirectoryIsGone) {
  // Replace the cache directory by a plain file: no write can succeed, even as root.
  std::filesystem::remove_all(dir_);
  std::ofstream(dir_) << "not a directory";
  auto ready = client_->Get("/readyz?verbose");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->get_header_value("Retry-After"), "5");
  EXPECT_NE(ready->body.find("[-]cache failed"), std::string::npos) << ready->body;
  EXPECT_EQ(client_->Get("/livez")->status, 200);  // alive, just not ready
  std::filesystem::remove(dir_);
}

TEST_F(ServerTest, PageAndStaticFilesAreServedFromTheBinary) {
  auto page = client_->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script src=\"/static/app.js\""), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  auto js = client_->Get("/static/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  // Nothing on the page may come from another server.
  for (const char* f : {"/", "/static/app.js", "/static/style.css"}) {
    auto r = client_->Get(f);
    ASSERT_TRUE(r);
    std::string body = r->body;
    const std::string svg_ns = "\"http://www.w3.org/2000/svg\"";  // a namespace name, never fetched
    for (size_t i; (i = body.find(svg_ns)) != std::string::npos;) body.erase(i, svg_ns.size());
    EXPECT_EQ(body.find("http://"), std::string::npos) << f;
    EXPECT_EQ(body.find("https://"), std::string::npos) << f;
  }
  ExpectProblem(client_->Get("/static/nope.js"), 404);
}

TEST_F(ServerTest, PresetsMatchTheCli) {
  auto all = client_->Get("/v1/presets");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  Json j = BodyJson(all);
  EXPECT_EQ(j["schema"], "paratune.presets/v1");
  for (const std::string kind : {"models", "gpus", "clusters"}) {
    auto r = client_->Get(("/v1/presets/" + kind).c_str());
    ASSERT_TRUE(r);
    Json k = BodyJson(r);
    ASSERT_TRUE(k.contains(kind));
    EXPECT_FALSE(k.contains(kind == "models" ? "gpus" : "models"));
    auto [cli, code] = RunCli("presets " + kind + " --format json");
    ASSERT_EQ(code, 0);
    Json c = Json::parse(cli);
    ASSERT_EQ(k[kind].size(), c[kind].size());
    for (size_t i = 0; i < c[kind].size(); ++i) {
      for (const auto& [key, v] : c[kind][i].items())
        EXPECT_EQ(k[kind][i][key], v) << kind << " " << key;
    }
  }
  auto one = client_->Get("/v1/presets/models/gpt3-175b");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  auto [cli, code] = RunCli("presets show gpt3-175b");
  ASSERT_EQ(code, 0);
  EXPECT_EQ(BodyJson(one), Json::parse(cli));
  ExpectProblem(client_->Get("/v1/presets/models/no-such-model"), 404);
  ExpectProblem(client_->Get("/v1/presets/gpus/no-such-gpu"), 404);
}

TEST_F(ServerTest, PredictIsTheCliDocument) {
  auto r = PostJson("/v1/predict", kPredict);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json; charset=utf-8");
  Json rest = BodyJson(r);
  const std::string path = dir_ + "/predict.json";
  std::ofstream(path) << kPredict;
  auto [cli, code] = RunCli("predict --request " + path + " --format json");
  ASSERT_EQ(code, 0);
  EXPECT_EQ(rest, Json::parse(cli));
  EXPECT_EQ(rest["schema"], "paratune.prediction/v1");
}

TEST_F(ServerTest, PredictErrors) {
  ExpectProblem(PostJson("/v1/predict", "{\"model\": "), 400);
  ExpectProblem(client_->Post("/v1/predict", kPredict, "text/plain"), 415);
  ExpectProblem(client_->Post("/v1/predict", kPredict, "application/xml"), 415);
  // A rule broken: tp must divide the 96 heads; the pointer names the field.
  Json p = ExpectFieldRefused("/v1/predict", kPredict, "/config/tp", 64);
  EXPECT_EQ(p["type"], "urn:paratune:problem:invalid-spec");
  ExpectFieldRefused("/v1/predict", kPredict, "/training/global_batch", "many");
  ExpectFieldRefused("/v1/predict", kPredict, "/surprise", 1);
  ExpectFieldRefused("/v1/predict", kPredict, "/model", "no-such-model");
  ExpectProblem(PostJson("/v1/predict", "[1,2,3]"), 422);
  // Too large: over the 256 KiB limit of the test server.
  ExpectProblem(PostJson("/v1/predict", std::string(300 * 1024, ' ')), 413);
  // Too deep.
  ExpectProblem(PostJson("/v1/predict", std::string(100, '[') + std::string(100, ']')), 400);
  // Wrong method, unknown route.
  auto get = client_->Get("/v1/predict");
  ExpectProblem(get, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  ExpectProblem(client_->Get("/v1/nothing-here"), 404);
}

// Networks that are not transformer stacks (docs/networks.md): the same
// documents as `paratune predict/plan --network`, the presets, and refusals
// by pointer.
constexpr const char* kNetworkPlan =
    R"({"network": "unet3d-kits19", "cluster": "dgx-h100", "gpus": 16, "global_batch": 16, "top": 3})";

TEST_F(ServerTest, NetworkJobsAreTheCliDocuments) {
  auto r = PostJson("/v1/plans", kNetworkPlan);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json rest = BodyJson(r);
  EXPECT_EQ(rest["schema"], "paratune.network_plans/v1");
  auto [cli, code] = RunCli(
      "plan --network unet3d-kits19 --cluster dgx-h100 --gpus 16 --global-batch 16 --top 3 --format json");
  ASSERT_EQ(code, 0);
  EXPECT_EQ(rest, Json::parse(cli));
  const std::string predict =
      R"({"network": "resnet-50", "cluster": "dgx-h100", "gpus": 8, "global_batch": 256,
          "layout": {"micro_batch": 16, "sharding": "zero1"}})";
  auto p = PostJson("/v1/predict", predict);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->status, 200) << p->body;
  auto [cli2, code2] = RunCli(
      "predict --network resnet-50 --cluster dgx-h100 --gpus 8 --global-batch 256 --micro-batch 16 "
      "--sharding zero1");
  ASSERT_EQ(code2, 0);
  EXPECT_EQ(BodyJson(p), Json::parse(cli2));
  ExpectFieldRefused("/v1/predict", predict.c_str(), "/layout/sharding", "zero9");
  // Emit and replan take the network's plans as the CLI does.
  const std::string path = dir_ + "/network_plans.json";
  std::ofstream(path) << r->body;
  auto e = PostJson("/v1/emit", Json{{"plans", rest}, {"format", "pytorch"}}.dump());
  ASSERT_TRUE(e);
  ASSERT_EQ(e->status, 200) << e->body;
  EXPECT_EQ(e->get_header_value("X-Paratune-Format"), "pytorch");
  auto [emitted, emit_code] = RunCli("emit --plans " + path);
  ASSERT_EQ(emit_code, 0);
  EXPECT_EQ(e->body, emitted);
  ExpectProblem(PostJson("/v1/emit", Json{{"plans", rest}, {"format", "megatron"}}.dump()), 422);
  auto re = PostJson("/v1/replans", Json{{"from", rest}, {"lost_nodes", 1}}.dump());
  ASSERT_TRUE(re);
  ASSERT_EQ(re->status, 200) << re->body;
  auto [replanned, replan_code] = RunCli("replan --from " + path + " --lost-nodes 1 --format json");
  ASSERT_EQ(replan_code, 0);
  EXPECT_EQ(BodyJson(re), Json::parse(replanned));
  ExpectProblem(PostJson("/v1/replans", Json{{"from", rest}, {"lost_nodes", 1}, {"space", "megatron"}}.dump()), 422);
  ExpectFieldRefused("/v1/plans", kNetworkPlan, "/global_batch", int64_t{1} << 31);
  ExpectFieldRefused("/v1/plans", kNetworkPlan, "/surprise", 1);
  ExpectFieldRefused("/v1/plans", kNetworkPlan, "/training/grad_bytes", 3);
  // An explicit network past the layer cap is refused before any search.
  Json layers = Json::array();
  for (int i = 0; i < 1025; ++i) layers.push_back({{"op", "linear"}, {"tokens", 1}, {"in_features", 8}, {"out_features", 8}});
  ExpectFieldRefused("/v1/plans", kNetworkPlan, "/network", Json{{"name", "n"}, {"source", "s"}, {"layers", layers}});
  auto list = client_->Get("/v1/presets/networks");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  EXPECT_FALSE(BodyJson(list)["networks"].empty());
  auto one = client_->Get("/v1/presets/networks/sd2-unet");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200);
  EXPECT_TRUE(BodyJson(one)["layers"].is_array());
  ExpectProblem(client_->Get("/v1/presets/networks/sd2unet"), 404);
}

// Input as people type it: a misspelt preset or key is refused with the
// closest names (the CLI's resolution functions), and a sequence length or
// batch may carry a size suffix.
TEST_F(ServerTest, NearMissesNameWhatWasMeantAndSuffixesAreRead) {
  Json typo = Json::parse(kPredict);
  typo["model"] = "gpt3-175";
  Json p = ExpectProblem(PostJson("/v1/predict", typo.dump()), 422, "/model");
  EXPECT_NE(p["detail"].get<std::string>().find("did you mean gpt3-175b"), std::string::npos)
      << p.dump();
  typo = Json::parse(kPredict);
  typo["cluster"] = "dgx-a100-80g";
  p = ExpectProblem(PostJson("/v1/predict", typo.dump()), 422, "/cluster");
  EXPECT_NE(p["detail"].get<std::string>().find("dgx-a100-80gb"), std::string::npos) << p.dump();
  // training.seq for training.seq_len: the pointer names the wrong key, the
  // detail the right one.
  Json seq = Json::parse(kPredict);
  seq["training"].erase("seq_len");
  seq["training"]["seq"] = 2048;
  p = ExpectProblem(PostJson("/v1/predict", seq.dump()), 422, "/training/seq");
  EXPECT_NE(p["detail"].get<std::string>().find("did you mean seq_len"), std::string::npos)
      << p.dump();
  auto preset = client_->Get("/v1/presets/models/llama3-405b");
  p = ExpectProblem(preset, 404);
  EXPECT_NE(p["detail"].get<std::string>().find("llama3.1-405b"), std::string::npos) << p.dump();

  Json suffixed = Json::parse(kPredict);
  suffixed["training"]["seq_len"] = "2k";
  suffixed["training"]["global_batch"] = "1536";
  auto a = PostJson("/v1/predict", suffixed.dump());
  auto b = PostJson("/v1/predict", kPredict);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_EQ(BodyJson(a)["iteration_time_s"], BodyJson(b)["iteration_time_s"]);
  EXPECT_EQ(BodyJson(a)["training"], BodyJson(b)["training"]);
}

// A job that fits nowhere for lack of memory gets the CLI's document,
// pointer to where it fits included: a plan at that count has candidates.
TEST_F(ServerTest, NothingFitsNamesTheFewestGpusThatFitAsTheCliDoes) {
  const char* job = R"({"model":"llama3.1-70b","cluster":"dgx-h100","gpus":2,
    "training":{"seq_len":8192,"global_batch":64},"space":"megatron","top":1})";
  auto r = PostJson("/v1/plans", job);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json rest = BodyJson(r);
  EXPECT_TRUE(rest["candidates"].empty());
  ASSERT_TRUE(rest["fewest_gpus_that_fit"].is_object()) << r->body;
  const int fits = rest["fewest_gpus_that_fit"]["gpus"].get<int>();
  EXPECT_GT(fits, 2);
  ExpectPlansAsCli(rest,
      "plan --model llama3.1-70b --cluster dgx-h100 --gpus 2 --seq 8192 --global-batch 64 "
      "--space megatron --top 1 --threads 2 --format json", 3);
  Json there = Json::parse(job);
  there["gpus"] = fits;
  auto r2 = PostJson("/v1/plans", there.dump());
  ASSERT_EQ(r2->status, 200);
  EXPECT_FALSE(BodyJson(r2)["candidates"].empty());
  EXPECT_TRUE(BodyJson(r2)["fewest_gpus_that_fit"].is_null());
}

TEST_F(ServerTest, PlansAreTheCliDocumentAndRepeatsComeFromTheCache) {
  auto r1 = PostJson("/v1/plans", kPlan);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  EXPECT_EQ(r1->get_header_value("X-Paratune-Cache"), "miss");
  Json rest = BodyJson(r1);
  EXPECT_EQ(rest["schema"], "paratune.plans/v1");
  ASSERT_EQ(rest["candidates"].size(), 5u);
  EXPECT_FALSE(rest["pareto"].empty());

  ExpectPlansAsCli(rest,
      "plan --model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --global-batch 64 "
      "--space megatron --top 5 --pareto --threads 2 --format json", 0);

  httplib::Headers accept = {{"Accept-Encoding", "br, gzip"}};
  auto r2 = client_->Post("/v1/plans", accept, kPlan, "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->get_header_value("Content-Encoding"), "");  // sent as is: compressing costs more
  EXPECT_EQ(r2->status, 200);
  EXPECT_EQ(r2->get_header_value("X-Paratune-Cache"), "hit");
  EXPECT_EQ(r2->body, r1->body);
  // The same request with keys in another order is the same request.
  Json reordered = Json::parse(kPlan);
  auto r3 = PostJson("/v1/plans", reordered.dump(-1));
  EXPECT_EQ(r3->get_header_value("X-Paratune-Cache"), "hit");
  // A different one is not.
  reordered["top"] = 6;
  auto r4 = PostJson("/v1/plans", reordered.dump());
  EXPECT_EQ(r4->get_header_value("X-Paratune-Cache"), "miss");
  EXPECT_EQ(BodyJson(r4)["candidates"].size(), 6u);

  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("paratune_plans_served_total 4\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("paratune_plan_cache_hits_total 2\n"), std::string::npos) << m->body;
}

TEST_F(ServerTest, PlanRangesAndFixedFields) {
  Json req = Json::parse(kPlan);
  req["gpus"] = "8:32";
  req["fix"] = Json{{"pp", 1}, {"recompute", "selective"}};
  auto r = PostJson("/v1/plans", req.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = BodyJson(r);
  ASSERT_EQ(j["scaling"].size(), 3u);  // 8, 16, 32
  EXPECT_EQ(j["scaling"][2]["gpus"], 32);
  for (const auto& c : j["candidates"]) {
    EXPECT_EQ(c["config"]["pp"], 1);
    EXPECT_EQ(c["config"]["recompute"], "selective");
  }
  // The string form of fix is the CLI's --fix.
  req["fix"] = "pp=1,recompute=selective";
  auto r2 = PostJson("/v1/plans", req.dump());
  Json j2 = BodyJson(r2);
  j.erase("search_time_s");
  j2.erase("search_time_s");
  for (auto& s : j["scaling"]) s.erase("search_time_s");
  for (auto& s : j2["scaling"]) s.erase("search_time_s");
  EXPECT_EQ(j, j2);
}

// The service ranks by time to train as `plan --tokens` does: the same
// document, goodput and all (docs/rest.md).
TEST_F(ServerTest, TimeToTrainAsTheCliRanksIt) {
  const char* job = R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":16,
    "training":{"seq_len":4096,"global_batch":64},"space":"megatron","top":3,
    "objective":"time-to-train","goodput":{"tokens":"1T","fs_GBps":50,
    "checkpoint_save":"sync","gpu_hour_price":2}})";
  auto r = PostJson("/v1/plans", job);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json rest = BodyJson(r);
  ASSERT_FALSE(rest["candidates"].empty());
  EXPECT_TRUE(rest["candidates"][0].contains("goodput"));
  EXPECT_EQ(rest["goodput_inputs"]["tokens"], 1e12);
  ExpectPlansAsCli(rest,
      "plan --model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --global-batch 64 "
      "--space megatron --top 3 --objective time-to-train --tokens 1T --fs-GBps 50 "
      "--checkpoint-save sync --gpu-hour-price 2 --threads 2 --format json", 0);
}

TEST_F(ServerTest, PlanErrors) {
  ExpectFieldRefused("/v1/plans", kPlan, "/space", "tensorflow");
  // Time to train needs a token budget (docs/rest.md): refused without one,
  // not ranked by step time unasked; the budget's keys are read strictly.
  const Json ttt = ExpectFieldRefused("/v1/plans", kPlan, "/objective", "time-to-train");
  EXPECT_NE(ttt.dump().find("/goodput"), std::string::npos) << ttt.dump();
  Json budget = Json::parse(kPlan);
  budget["goodput"] = {{"tokens", "1T"}};
  const std::string with_budget = budget.dump();
  ExpectFieldRefused("/v1/plans", with_budget.c_str(), "/goodput/tokens", "15Q");
  ExpectFieldRefused("/v1/plans", with_budget.c_str(), "/goodput/fs_GBps", -1);
  ExpectFieldRefused("/v1/plans", with_budget.c_str(), "/goodput/checkpoint_save", "never");
  ExpectFieldRefused("/v1/plans", with_budget.c_str(), "/goodput/tokenz", 5);
  ExpectFieldRefused("/v1/plans", kPlan, "/gpus", "8:4");
  Json bad = Json::parse(kPlan);
  bad.erase("gpus");
  ExpectProblem(PostJson("/v1/plans", bad.dump()), 422, "/gpus");
  bad = Json::parse(kPlan);
  bad["fix"] = Json{{"warp", 9}};
  ExpectProblem(PostJson("/v1/plans", bad.dump()), 422);
  // A pin the search never offers a mixture-of-experts model: refused by name.
  bad = Json::parse(kPlan);
  bad["model"] = "qwen3-30b-a3b";
  bad["fix"] = Json{{"zero", 3}};
  const Json moe = ExpectProblem(PostJson("/v1/plans", bad.dump()), 422, "/fix");
  EXPECT_NE(moe.dump().find("mixture-of-experts"), std::string::npos) << moe.dump();
  ExpectFieldRefused("/v1/plans", kPlan, "/top", 0);
  ExpectFieldRefused("/v1/plans", kPlan, "/config", Json{{"tp", 2}});
  ExpectFieldRefused("/v1/plans", kPlan, "/training/seq_len", -5);
  ExpectFieldRefused("/v1/plans", kPlan, "/profile", "../../etc/passwd");
  ExpectFieldRefused("/v1/plans", kPlan, "/profile", "0123456789abcdef");
  ExpectProblem(client_->Post("/v1/plans", kPlan, "text/plain"), 415);
  ExpectProblem(client_->Get("/v1/plans"), 405);
}

// POST /v1/replans answers what `paratune replan --format json` answers for
// the same running plan and allocation change, and refuses bad requests
// naming the field.
TEST_F(ServerTest, ReplanIsTheCliDocument) {
  auto plan = PostJson("/v1/plans", kPlan);
  ASSERT_EQ(plan->status, 200);
  const std::string path = dir_ + "/running.json";
  std::ofstream(path) << plan->body;
  Json req = {{"from", Json::parse(plan->body)}, {"lost_nodes", 1}};
  auto r = PostJson("/v1/replans", req.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto [cli, code] = RunCli("replan --from " + path + " --lost-nodes 1 --format json");
  ASSERT_EQ(code, 0);
  const Json served = BodyJson(r), local = Json::parse(cli);
  EXPECT_EQ(served["schema"], "paratune.replan/v1");
  EXPECT_EQ(served["candidates"], local["candidates"]);
  EXPECT_EQ(served["reshard"], local["reshard"]);
  EXPECT_EQ(served["allocation"], local["allocation"]);
  ASSERT_FALSE(served["candidates"].empty());
  EXPECT_LT(served["candidates"][0]["gpus"].get<int>(), Json::parse(kPlan)["gpus"].get<int>());
  // Two allocation changes at once, an unknown key, a body that is not JSON.
  Json two = req;
  two["add_nodes"] = 1;
  ExpectProblem(PostJson("/v1/replans", two.dump()), 422);
  Json unknown = req;
  unknown["lost_nodez"] = 1;
  ExpectProblem(PostJson("/v1/replans", unknown.dump()), 422);
  ExpectProblem(PostJson("/v1/replans", "{"), 400);
  auto get = client_->Get("/v1/replans");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
}

TEST_F(ServerTest, EmitIsTheCliText) {
  auto plan = PostJson("/v1/plans", kPlan);
  ASSERT_EQ(plan->status, 200);
  const std::string path = dir_ + "/plans.json";
  std::ofstream(path) << plan->body;
  int emitted = 0;
  for (const std::string format : {"megatron", "deepspeed", "torchtitan", "env", "json"}) {
    // From the plan request (answered from the plan cache) and from the document itself.
    Json by_request = {{"request", Json::parse(kPlan)}, {"rank", 2}, {"format", format}};
    Json by_doc = {{"plans", Json::parse(plan->body)}, {"rank", 2}, {"format", format}};
    auto a = PostJson("/v1/emit", by_request.dump());
    auto b = PostJson("/v1/emit", by_doc.dump());
    ASSERT_TRUE(a && b);
    auto [cli, code] = RunCli("emit --plans " + path + " --rank 2 --format " + format);
    if (code != 0) {  // the framework would reject this plan: the service says so too
      ExpectProblem(a, 422);
      ExpectProblem(b, 422);
      continue;
    }
    ASSERT_EQ(a->status, 200) << a->body;
    EXPECT_EQ(a->get_header_value("Content-Type"), "text/plain; charset=utf-8");
    EXPECT_EQ(a->get_header_value("X-Paratune-Format"), format);
    EXPECT_EQ(a->body, cli) << format;
    EXPECT_EQ(b->body, cli) << format;
    ++emitted;
  }
  EXPECT_GE(emitted, 3);
  // Without a format: the plan's framework (megatron for this space).
  auto d = PostJson("/v1/emit", Json{{"request", Json::parse(kPlan)}}.dump());
  EXPECT_EQ(d->get_header_value("X-Paratune-Format"), "megatron");
  ExpectProblem(
      PostJson("/v1/emit", Json{{"request", Json::parse(kPlan)}, {"format", "keras"}}.dump()), 422,
      "/format");
  ExpectProblem(PostJson("/v1/emit", Json{{"request", Json::parse(kPlan)}, {"rank", 99}}.dump()),
                422);
  ExpectProblem(PostJson("/v1/emit", Json{{"rank", 1}}.dump()), 422, "/plans");
  ExpectProblem(PostJson("/v1/emit", Json{{"plans", {{"schema", 3}}}}.dump()), 422, "/plans");
  Json bad_req = Json::parse(kPlan);
  bad_req["space"] = "keras";
  ExpectProblem(PostJson("/v1/emit", Json{{"request", bad_req}}.dump()), 422, "/request/space");
  ExpectProblem(client_->Get("/v1/emit"), 405);
}

TEST(ServerLimits, ASearchOverTheTimeLimitIsRefused) {
  const std::string dir = TempDir("limit");
  ServerOptions o = TestOptions(dir);
  o.plans.search_time_limit_s = 1e-6;
  TestServer s(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto r = s.Client()->Post("/v1/plans", kPlan, "application/json");
  Json p = ExpectProblem(r, 422);
  EXPECT_EQ(p["type"], "urn:paratune:problem:search-time-limit");
  // A network's replan (a search per GPU count) stops at the limit too.
  auto job = planner::ParseNetworkJob(Json::parse(kNetworkPlan));
  ASSERT_TRUE(job.ok());
  const Json plans = Json::parse(planner::PlanNetworkDocument(*job).dump());
  auto re = s.Client()->Post("/v1/replans", Json{{"from", plans}, {"lost_nodes", 1}}.dump(), "application/json");
  EXPECT_EQ(ExpectProblem(re, 422)["type"], "urn:paratune:problem:search-time-limit");
  // So does a network's own layout search, whose size a user's network and
  // cluster set (tensor × sequence × spatial splits).
  auto np = s.Client()->Post("/v1/plans", kNetworkPlan, "application/json");
  EXPECT_EQ(ExpectProblem(np, 422)["type"], "urn:paratune:problem:search-time-limit");
  std::filesystem::remove_all(dir);
}

TEST(ServerLimits, BusySearchSlotsSay503WithRetryAfter) {
  const std::string dir = TempDir("busy");
  ServerOptions o = TestOptions(dir);
  o.plans.max_concurrent_searches = 0;  // every slot taken, for as long as the test runs
  o.plans.queue_wait_limit_s = 0.05;
  TestServer s(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto r = s.Client()->Post("/v1/plans", kPlan, "application/json");
  Json p = ExpectProblem(r, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "5");
  EXPECT_EQ(p["type"], "urn:paratune:problem:unavailable");
  // Predictions need no search slot.
  EXPECT_EQ(s.Client()->Post("/v1/predict", kPredict, "application/json")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST(ServerLimits, NonLoopbackNeedsAToken) {
  ServerOptions o = TestOptions(TempDir("bind"));
  o.host = "0.0.0.0";
  auto s = Server::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--token-file"), std::string::npos);
  o.token = "0123456789abcdef0123";
  EXPECT_TRUE(Server::Create(o).ok());
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("127.example.com"));
  std::filesystem::remove_all(o.cache_dir);
}

TEST(ServerAuth, TokenGuardsTheApiButNotTheProbes) {
  const std::string dir = TempDir("auth");
  ServerOptions o = TestOptions(dir);
  o.token = "s3cret-token-0123456789";
  TestServer s(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto c = s.Client();
  auto r = c->Post("/v1/plans", kPlan, "application/json");
  ExpectProblem(r, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer realm=\"paratune\"");
  ExpectProblem(c->Get("/metrics"), 401);
  c->set_bearer_token_auth("wrong-token-0123456789");
  ExpectProblem(c->Get("/v1/presets"), 401);
  c->set_bearer_token_auth("s3cret-token-012345678");  // a prefix is not the token
  ExpectProblem(c->Get("/v1/presets"), 401);
  c->set_bearer_token_auth(o.token);
  EXPECT_EQ(c->Get("/v1/presets")->status, 200);
  EXPECT_EQ(c->Get("/metrics")->status, 200);
  auto anon = s.Client();
  EXPECT_EQ(anon->Get("/livez")->status, 200);
  EXPECT_EQ(anon->Get("/readyz")->status, 200);
  EXPECT_EQ(anon->Get("/")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST_F(ServerTest, MetricsAreValidPrometheusText) {
  PostJson("/v1/predict", kPredict);
  PostJson("/v1/predict", "{");
  client_->Get("/v1/jobs/does-not-exist");
  // A request is counted when its handler returns, which can trail the
  // client's receipt of the response by a moment: read until the last of the
  // three is there (bounded), then check everything.
  auto m = client_->Get("/metrics");
  auto counted = [&] {
    return m &&
           m->body.find("route=\"/v1/jobs/{id}\",method=\"GET\",code=\"404\"") !=
               std::string::npos &&
           m->body.find("route=\"/v1/predict\",method=\"POST\",code=\"400\"") !=
               std::string::npos &&
           m->body.find("route=\"/v1/predict\",method=\"POST\",code=\"200\"") != std::string::npos;
  };
  for (int i = 0; i < 200 && !counted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = client_->Get("/metrics");
  }
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& t = m->body;
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.back(), '\n');
  EXPECT_NE(
      t.find(
          "paratune_http_requests_total{route=\"/v1/predict\",method=\"POST\",code=\"200\"} 1\n"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(
          "paratune_http_requests_total{route=\"/v1/predict\",method=\"POST\",code=\"400\"} 1\n"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(
          "paratune_http_requests_total{route=\"/v1/jobs/{id}\",method=\"GET\",code=\"404\"} 1\n"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("paratune_http_request_duration_seconds_bucket{route=\"/v1/"
                   "predict\",code=\"200\",le=\"+Inf\"} 1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(
      t.find(
          "paratune_http_request_duration_seconds_count{route=\"/v1/predict\",code=\"200\"} 1\n"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("paratune_jobs{status=\"queued\"} 0\n"), std::string::npos) << t;
  // Every sample's metric has exactly one HELP and one TYPE line before it.
  std::set<std::string> help, type;
  std::istringstream in(t);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      EXPECT_TRUE(help.insert(line.substr(7, line.find(' ', 7) - 7)).second) << line;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_TRUE(type.insert(line.substr(7, line.find(' ', 7) - 7)).second) << line;
    } else {
      std::string name = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
            !type.count(name)) {
          name = name.substr(0, name.size() - s.size());
        }
      }
      EXPECT_TRUE(type.count(name)) << "no TYPE for " << line;
    }
  }
  // Histogram buckets are cumulative.
  int64_t prev = -1;
  std::istringstream in2(t);
  for (std::string line; std::getline(in2, line);) {
    if (line.rfind(
            "paratune_http_request_duration_seconds_bucket{route=\"/v1/predict\",code=\"200\"",
            0) != 0)
      continue;
    const int64_t v = std::stoll(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(v, prev);
    prev = v;
  }
}

// ---- OpenAPI: the document's schemas describe the documents really served ----

// A small JSON Schema checker for the keywords the document uses: $ref, type,
// required, properties, additionalProperties (false or a schema), items,
// enum, const, oneOf.
void Check(const Json& spec, const Json& schema, const Json& v, const std::string& at,
           std::vector<std::string>* errors) {
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const std::string name = ref.substr(ref.rfind('/') + 1);
    ASSERT_TRUE(spec["components"]["schemas"].contains(name)) << ref;
    return Check(spec, spec["components"]["schemas"][name], v, at, errors);
  }
  if (schema.contains("oneOf")) {
    int matched = 0;
    for (const auto& alt : schema["oneOf"]) {
      std::vector<std::string> e;
      Check(spec, alt, v, at, &e);
      matched += e.empty();
    }
    if (matched != 1)
      errors->push_back(at + ": matches " + std::to_string(matched) + " oneOf alternatives");
    return;
  }
  if (schema.contains("const") && v != schema["const"])
    errors->push_back(at + ": not the const " + schema["const"].dump());
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) errors->push_back(at + ": " + v.dump() + " not in enum");
  }
  if (schema.contains("type")) {
    auto is = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "integer") return v.is_number_integer();
      if (t == "number") return v.is_number();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      return false;
    };
    bool ok = false;
    if (schema["type"].is_array()) {
      for (const auto& t : schema["type"]) ok = ok || is(t);
    } else {
      ok = is(schema["type"]);
    }
    if (!ok) {
      errors->push_back(at + ": " + v.dump().substr(0, 60) + " is not " + schema["type"].dump());
      return;
    }
  }
  if (v.is_object()) {
    for (const auto& r : schema.value("required", Json::array())) {
      if (!v.contains(r.get<std::string>()))
        errors->push_back(at + ": missing required " + r.get<std::string>());
    }
    const Json props = schema.value("properties", Json::object());
    for (const auto& [k, child] : v.items()) {
      if (props.contains(k)) {
        Check(spec, props[k], child, at + "/" + k, errors);
      } else if (schema.contains("additionalProperties")) {
        const Json& ap = schema["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) errors->push_back(at + ": unexpected key " + k);
        if (ap.is_object()) Check(spec, ap, child, at + "/" + k, errors);
      } else if (schema.contains("properties") && !props.empty() &&
                 schema.value("type", "") == "object" &&
                 at.find("/rejected") == std::string::npos &&
                 at.find("/fixed") == std::string::npos && at.find("/job/") == std::string::npos) {
        // Documented objects list every key they carry: an undocumented key is drift.
        errors->push_back(at + ": key '" + k + "' is not in the OpenAPI schema");
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i)
      Check(spec, schema["items"], v[i], at + "/" + std::to_string(i), errors);
  }
}

TEST_F(ServerTest, OpenApiSchemasDescribeTheServedDocuments) {
  auto r = client_->Get("/v1/openapi.json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  Json spec = BodyJson(r);
  EXPECT_EQ(spec["openapi"], "3.1.0");
  EXPECT_EQ(spec["info"]["version"], "test");
  for (const char* p :
       {"/v1/predict", "/v1/plans", "/v1/emit", "/v1/replans", "/v1/presets", "/v1/presets/{kind}",
        "/v1/profiles", "/v1/jobs", "/v1/jobs/{id}", "/livez", "/readyz", "/metrics"}) {
    EXPECT_TRUE(spec["paths"].contains(p)) << p;
  }
  auto check = [&](const std::string& schema_name, const Json& doc) {
    std::vector<std::string> errors;
    Check(spec, Json{{"$ref", "#/components/schemas/" + schema_name}}, doc, "", &errors);
    for (const auto& e : errors) ADD_FAILURE() << schema_name << e;
  };
  // Requests the schemas describe are accepted, and responses match.
  check("PredictRequest", Json::parse(kPredict));
  check("PlanRequest", Json::parse(kPlan));
  check("Prediction", BodyJson(PostJson("/v1/predict", kPredict)));
  Json plans = BodyJson(PostJson("/v1/plans", kPlan));
  check("Plans", plans);
  check("Presets", BodyJson(client_->Get("/v1/presets")));
  check("NetworkRequest", Json::parse(kNetworkPlan));
  check("NetworkPlans", BodyJson(PostJson("/v1/plans", kNetworkPlan)));
  check("NetworkPrediction", BodyJson(PostJson("/v1/predict", kNetworkPlan)));
  const Json network_plans = BodyJson(PostJson("/v1/plans", kNetworkPlan));
  check("NetworkReplan", BodyJson(PostJson("/v1/replans", Json{{"from", network_plans}, {"lost_nodes", 1}}.dump())));
  check("EmitRequest", Json{{"plans", network_plans}, {"format", "pytorch"}});
  check("Profiles", BodyJson(client_->Get("/v1/profiles")));
  check("Version", BodyJson(client_->Get("/v1/version")));
  check("Jobs", BodyJson(client_->Get("/v1/jobs")));
  const Json replan_req = {{"from", plans}, {"lost_nodes", 1}};
  check("ReplanRequest", replan_req);
  check("Replan", BodyJson(PostJson("/v1/replans", replan_req.dump())));
  check("Problem", BodyJson(PostJson("/v1/predict", "{")));
  Json bad = Json::parse(kPredict);
  bad["config"]["tp"] = 64;
  check("Problem", BodyJson(PostJson("/v1/predict", bad.dump())));
  // Every problem status the document names for /v1/plans is one the route returns.
  for (const auto& [code, resp] : spec["paths"]["/v1/plans"]["post"]["responses"].items()) {
    EXPECT_TRUE(code == "200" || resp["content"].contains("application/problem+json")) << code;
  }
}

TEST_F(ServerTest, ProfilesImportListAndUse) {
  auto empty = client_->Get("/v1/profiles");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_TRUE(BodyJson(empty)["profiles"].empty());

  auto log = ReadFileToString(std::string(PARATUNE_SOURCE_DIR) +
                              "/tests/profiler/data/all_reduce_8xA100.log");
  ASSERT_TRUE(log.ok());
  // Writes need the token the server wrote at start; nccl-tests text travels inside JSON.
  const std::string text_log = Json{{"nccl_tests_log", *log}}.dump();
  ExpectProblem(PostJson("/v1/profiles?cluster=dgx-a100-80gb", text_log), 401);
  client_->set_bearer_token_auth(server_->token());
  ExpectProblem(PostJson("/v1/profiles", text_log), 422);  // no ?cluster
  ExpectProblem(PostJson("/v1/profiles?cluster=no-such-cluster", text_log), 422);
  ExpectProblem(client_->Post("/v1/profiles?cluster=dgx-a100-80gb", *log, "application/xml"), 415);
  ExpectProblem(client_->Post("/v1/profiles?cluster=dgx-a100-80gb", *log, "text/plain"), 415);
  ExpectProblem(
      PostJson("/v1/profiles?cluster=dgx-a100-80gb", Json{{"nccl_tests_log", "garbage\n"}}.dump()),
      400);
  ExpectProblem(PostJson("/v1/profiles", R"({"schema":"paratune.profile/v1"})"), 422);

  auto r = PostJson("/v1/profiles?cluster=dgx-a100-80gb", text_log);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  Json summary = BodyJson(r);
  const std::string fp = summary["cluster_fingerprint"];
  EXPECT_EQ(r->get_header_value("Location"), "/v1/profiles/" + fp);
  EXPECT_GT(summary["collectives"].get<int>(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/profiles/" + fp + ".json"));

  auto list = BodyJson(client_->Get("/v1/profiles"));
  ASSERT_EQ(list["profiles"].size(), 1u);
  EXPECT_EQ(list["profiles"][0]["cluster_fingerprint"], fp);
  // Listed with where its numbers came from: an import of nccl-tests logs.
  EXPECT_EQ(list["profiles"][0]["provenance"]["backend"], "nccl-tests");
  EXPECT_EQ(list["profiles"][0]["provenance"]["synthetic"], false);
  Json doc = BodyJson(client_->Get(("/v1/profiles/" + fp).c_str()));
  EXPECT_EQ(doc["schema"], "paratune.profile/v1");
  ExpectProblem(client_->Get("/v1/profiles/ffffffffffffffff"), 404);

  // Plans for that cluster now use the profile (as the CLI does from its cache),
  // and so does a request that names it.
  Json req = Json::parse(kPlan);
  req["cluster"] = "dgx-a100-80gb";
  Json plans = BodyJson(PostJson("/v1/plans", req.dump()));
  EXPECT_EQ(plans.value("profile", ""), summary["profile_fingerprint"])
      << plans.dump().substr(0, 400);
  req["profile"] = fp;
  req["top"] = 3;
  Json named = BodyJson(PostJson("/v1/plans", req.dump()));
  EXPECT_EQ(named.value("profile", ""), summary["profile_fingerprint"]);
  // Importing the stored document again round-trips.
  auto again = PostJson("/v1/profiles", doc.dump());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 201) << again->body;
  EXPECT_EQ(BodyJson(again)["profile_fingerprint"], summary["profile_fingerprint"]);
  // The same profile relabelled as synthetic (fake backend) does not replace it.
  Json fake = doc;
  fake["environment"]["backend"] = "fake";
  Json conflict = ExpectProblem(PostJson("/v1/profiles", fake.dump()), 409);
  EXPECT_NE(conflict["detail"].get<std::string>().find("fake backend"), std::string::npos);
  // Deleting needs the token, then the profile is gone and plans stop using it.
  auto anon = server_->Client();
  ExpectProblem(anon->Delete(("/v1/profiles/" + fp).c_str()), 401);
  auto del = client_->Delete(("/v1/profiles/" + fp).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 204);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/profiles/" + fp + ".json"));
  ExpectProblem(client_->Delete(("/v1/profiles/" + fp).c_str()), 404);
  req.erase("profile");
  EXPECT_FALSE(BodyJson(PostJson("/v1/plans", req.dump())).contains("profile"));
}

TEST(ServeCommand, HelpAndRefusals) {
  auto [help, code] = RunCli("serve --help");
  EXPECT_EQ(code, 0);
  for (const char* word :
       {"--token-file", "--cache-dir", "/v1/plans", "/v1/jobs", "problem+json", "/metrics"}) {
    EXPECT_NE(help.find(word), std::string::npos) << word;
  }
  const std::string dir = TempDir("serve-cmd");
  // Not loopback and no token: refused before binding (exit 2, invalid input).
  EXPECT_EQ(RunCli("serve --host 0.0.0.0 --port 0 --cache-dir " + dir).second, 2);
  std::ofstream(dir + "/short-token") << "abc\n";
  ::chmod((dir + "/short-token").c_str(), 0600);  // private, so only its length is wrong
  EXPECT_EQ(RunCli("serve --port 0 --token-file " + dir + "/short-token --cache-dir " + dir).second,
            2);
  EXPECT_EQ(RunCli("serve --port 70000 --cache-dir " + dir).second, 2);
  EXPECT_EQ(RunCli("serve --bogus").second, 2);
  std::filesystem::remove_all(dir);
}

TEST(Problem, PointerFromLibraryMessages) {
  EXPECT_EQ(PointerFromMessage("/config/tp: must divide 96 heads"), "/config/tp");
  EXPECT_EQ(PointerFromMessage("--request x.json: /training/seq_len: must be positive"),
            "/training/seq_len");
  EXPECT_EQ(PointerFromMessage("no pointer here: a/b"), "");
  EXPECT_EQ(PointerFromMessage("cached profile: /collectives/3/alpha_us: negative"),
            "/collectives/3/alpha_us");
  Problem p = ProblemFromStatus(Status::InvalidArgument("/gpus: must be positive"));
  EXPECT_EQ(p.status, 422);
  EXPECT_EQ(p.pointer, "/gpus");
  EXPECT_EQ(ProblemFromStatus(Status::ParseError("x")).status, 400);
  EXPECT_EQ(ProblemFromStatus(Status::FailedPrecondition("x")).status, 409);
  EXPECT_EQ(ProblemFromStatus(Status::Internal("x")).status, 500);
  // A storage failure is the service's state, not its bug: 503 naming the
  // operation and the system's reason, never the file.
  Problem io = ProblemFromStatus(
      Status::IoError("cannot write '/srv/state/jobs/a.json': No space left on device"),
      "record the job");
  EXPECT_EQ(io.status, 503);
  EXPECT_EQ(io.type, "urn:paratune:problem:storage");
  EXPECT_EQ(io.detail, "could not record the job: No space left on device");
}

}  // namespace
}  // namespace paratune::web::testing
