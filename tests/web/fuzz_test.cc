// Bad input against the JSON endpoints: malformed text, huge bodies, deep
// nesting, wrong types and mutated valid requests. The service must answer
// every one with a 4xx problem document (or a 2xx for inputs that happen to be
// valid): never a 5xx, never a dropped connection, never a crash.
#include <random>

#include "tests/web/test_util.h"

namespace paratune::web::testing {
namespace {

const char* kBases[] = {
    R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":8,"training":{"seq_len":2048,"global_batch":16},"config":{"tp":2,"pp":2,"mbs":1,"recompute":"full"}})",
    R"({"model":"llama3-8b","cluster":"dgx-h100","gpus":8,"training":{"seq_len":2048,"global_batch":16},"space":"megatron","top":3,"pareto":true,"fix":"pp=1"})",
    R"({"kind":"profile","backend":"fake","quick":true,"cluster":"dgx-h100"})",
    R"({"kind":"confirm","backend":"fake","top":2,"plans":{"schema":"paratune.plans/v1","candidates":[]}})",
    R"({"schema":"paratune.profile/v1","cluster_fingerprint":"abc","collectives":[],"gemm":[]})",
    R"({"request":{"model":"llama3-8b","cluster":"dgx-h100","gpus":8,"training":{"global_batch":16},"top":2},"rank":1,"format":"deepspeed"})",
};
const char* kRoutes[] = {"/v1/predict", "/v1/plans",    "/v1/jobs",
                         "/v1/jobs",    "/v1/profiles", "/v1/emit"};

// Values of every JSON type and some edge cases, to put where another type belongs.
std::vector<Json> OddValues() {
  return {Json(nullptr),
          Json(true),
          Json(false),
          Json(0),
          Json(-1),
          Json(1e308),
          Json(-1e308),
          Json(2147483648LL),
          Json(9223372036854775807LL),
          Json(0.5),
          Json(""),
          Json("x"),
          Json(std::string(5000, 'a')),
          Json::array(),
          Json::array({1, 2, 3}),
          Json::object(),
          Json{{"a", 1}},
          Json("1:1000000000"),
          Json("\xc3\xa9\xe2\x82\xac"),
          Json("8:16:0"),
          Json("tp=0"),
          Json("../../x")};
}

// Replaces one value somewhere in `j` (depth-first, the n-th node) by `v`.
bool ReplaceNth(Json& j, int& n, const Json& v) {
  if (n-- == 0) {
    j = v;
    return true;
  }
  if (j.is_object()) {
    for (auto& [k, child] : j.items())
      if (ReplaceNth(child, n, v)) return true;
  } else if (j.is_array()) {
    for (auto& child : j)
      if (ReplaceNth(child, n, v)) return true;
  }
  return false;
}

int CountNodes(const Json& j) {
  int n = 1;
  if (j.is_structured())
    for (const auto& c : j) n += CountNodes(c);
  return n;
}

TEST(Fuzz, JsonEndpointsNeverFailWithA5xx) {
  const std::string dir = TempDir("fuzz");
  ServerOptions o = TestOptions(dir);
  o.plans.search_time_limit_s = 2;  // a mutated request may ask for a huge search
  o.jobs.max_queued = 0;            // valid job requests are refused (429), none runs
  TestServer s(o);
  ASSERT_TRUE(s.ok()) << s.error();
  auto c = s.Client();
  c->set_bearer_token_auth(s.token());  // so job and profile bodies reach their validation
  std::mt19937 rng(20261123);
  const auto odd = OddValues();
  int sent = 0, ok2xx = 0, client4xx = 0, server5xx = 0, dropped = 0;
  auto send = [&](const char* route, const std::string& body,
                  const char* type = "application/json") {
    auto r = c->Post(route, body, type);
    ++sent;
    dropped += !r;
    ASSERT_TRUE(r) << route << ": no response for " << body.substr(0, 200);
    server5xx += r->status >= 500;
    ASSERT_LT(r->status, 500) << route << " " << r->body.substr(0, 300)
                              << "\nfor: " << body.substr(0, 300);
    if (r->status >= 400) {
      ++client4xx;
      ASSERT_EQ(r->get_header_value("Content-Type"), "application/problem+json")
          << route << " " << r->status;
      Json p = Json::parse(r->body);
      ASSERT_EQ(p["status"], r->status);
    } else {
      ++ok2xx;
    }
  };

  for (int b = 0; b < 6; ++b) {
    const std::string base = kBases[b];
    const char* route = kRoutes[b];
    const Json doc = Json::parse(base);
    const int nodes = CountNodes(doc);
    // Every node replaced by every odd value: wrong types everywhere.
    for (int n = 1; n < nodes; ++n) {
      for (const Json& v : odd) {
        Json m = doc;
        int k = n;
        ReplaceNth(m, k, v);
        send(route, m.dump());
      }
    }
    // Truncations and byte flips of the valid text: malformed JSON.
    for (size_t cut = 0; cut < base.size(); cut += 3) send(route, base.substr(0, cut));
    std::uniform_int_distribution<size_t> pos(0, base.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int i = 0; i < 400; ++i) {
      std::string m = base;
      for (int f = 0; f < 1 + i % 4; ++f) m[pos(rng)] = static_cast<char>(byte(rng));
      send(route, m);
    }
    // Deep nesting, in arrays and objects, below and above the limit.
    for (int depth : {10, 63, 65, 1000, 100000}) {
      send(route, std::string(depth, '[') + std::string(depth, ']'));
      std::string obj;
      for (int i = 0; i < depth; ++i) obj += "{\"a\":";
      obj += "1" + std::string(depth, '}');
      send(route, obj);
      Json m = doc;
      m["model"] = Json::parse(std::string(std::min(depth, 60), '[') +
                               std::string(std::min(depth, 60), ']'));
      send(route, m.dump());
    }
    // Huge: just under and over the body limit; a huge string; a huge array.
    send(route, "\"" + std::string(200 * 1024, 'x') + "\"");
    send(route, std::string(o.max_body_bytes + 1, '{'));
    Json big = doc;
    big["padding"] = std::string(100 * 1024, 'y');
    send(route, big.dump());
    Json arr = Json::array();
    for (int i = 0; i < 20000; ++i) arr.push_back(i);
    send(route, arr.dump());
    // Not JSON at all, and the wrong media type.
    for (const char* text :
         {"", " ", "null", "true", "0", "\"s\"", "[]", "{}", "{\"\":{}}", "\x00\x01\x02", "NaN",
          "{\"model\":\"llama3-8b\",}", "{'model':1}", "\xff\xfe"}) {
      send(route, text);
    }
    send(route, base, "text/plain");
    send(route, base, "application/x-www-form-urlencoded");
  }
  auto live = c->Get("/livez");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  // Nothing slipped past validation into the job queue.
  EXPECT_EQ(s.server().jobs().List().size(), 0u);
  std::cout << "[fuzz] " << sent << " requests: " << ok2xx << " 2xx, " << client4xx << " 4xx, "
            << server5xx << " 5xx, " << dropped << " without a response\n";
  EXPECT_EQ(server5xx, 0);
  EXPECT_EQ(dropped, 0);
  EXPECT_GT(sent, 3000);
  EXPECT_GT(client4xx, sent * 9 / 10);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paratune::web::testing
