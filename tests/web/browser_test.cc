// The page in a real headless Chromium (Debian's `chromium`, installed by
// scripts/test.sh): it loads, plans (the form is submitted by the page's own
// submit path, ?autorun=1), and shows the ranked table, the stacked bars, the
// Pareto scatter and the topology. A screenshot is kept in
// build/artifacts/web_page.png. Skips cleanly where no Chromium is installed.
#include <sys/wait.h>

#include <cstdio>
#include <regex>

#include "tests/web/test_util.h"

namespace paratune::web {
namespace {

using testing::TempDir;
using testing::TestOptions;
using testing::TestServer;

std::string FindChromium() {
  if (const char* env = std::getenv("PARATUNE_CHROMIUM"); env && *env) return env;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

std::pair<std::string, int> RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {"", -1};
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// The element with id `id` and what follows it, up to the next section.
std::string Section(const std::string& dom, const std::string& id, size_t len = 200000) {
  const size_t i = dom.find("id=\"" + id + "\"");
  return i == std::string::npos ? "" : dom.substr(i, len);
}

TEST(Browser, PagePlansAndDrawsTheResults) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium on PATH (scripts/test.sh installs Debian's)";
  const std::string dir = TempDir("browser");
  TestServer s(TestOptions(dir));
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string url = "http://127.0.0.1:" + std::to_string(s.port()) +
                          "/?autorun=1&model=llama3-70b&cluster=dgx-h100&gpus=256&global_batch=512&"
                          "seq_len=4096&space=megatron&top=60" +
                          "&compare=1,3&sweep=pp";
  const std::string base =
      "timeout 150 " + chromium +
      " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
      " --disable-extensions --hide-scrollbars --user-data-dir=" +
      dir +
      "/profile"
      " --virtual-time-budget=60000 --window-size=1440,3400";
  auto [dom, code] = RunCommand(base + " --dump-dom '" + url + "' 2>" + dir + "/chromium.log");
  ASSERT_EQ(code, 0) << "chromium failed; see " << dir << "/chromium.log";
  ASSERT_NE(dom.find("data-state=\"planned\""), std::string::npos)
      << "the page did not finish planning:\n"
      << dom.substr(0, 3000);
  // The ranked table: up to 60 rows (configurations with identical
  // predictions share one), each focusable, and the scatter draws every row.
  const std::string table = Section(dom, "candidates");
  const int rows = Count(table.substr(0, table.find("</table>")), "<tr tabindex=\"0\"");
  EXPECT_GE(rows, 20);
  EXPECT_LE(rows, 60);
  EXPECT_NE(table.find("tp="), std::string::npos);
  // The charts: stacked bars, the scatter with its front, the topology.
  const std::string bars = Section(dom, "breakdown-chart", 100000);
  EXPECT_GT(Count(bars.substr(0, bars.find("</svg>")), "<rect"), 15);
  const std::string pareto = Section(dom, "pareto-chart", 100000);
  EXPECT_EQ(Count(pareto.substr(0, pareto.find("</svg>")), "<circle"), rows);
  EXPECT_NE(pareto.find("<polyline class=\"front\""), std::string::npos);
  const std::string topo = Section(dom, "topology", 400000);
  EXPECT_GE(Count(topo.substr(0, topo.find("</svg>")), "rank "), 64);
  EXPECT_NE(Section(dom, "summary").find("searched"), std::string::npos);
  EXPECT_NE(Section(dom, "detail-summary").find("per iteration"), std::string::npos);
  EXPECT_EQ(dom.find("class=\"error\""), std::string::npos);
  // Two candidates term by term, and pp swept with the rest of the winner fixed
  // (POST /v1/predict per value).
  const std::string compare = Section(dom, "compare", 20000);
  EXPECT_NE(compare.find("#3 "), std::string::npos);
  EXPECT_NE(compare.find("memory total (GiB)"), std::string::npos);
  const std::string sweep = Section(dom, "sweep-table", 20000);
  EXPECT_GE(Count(sweep.substr(0, sweep.find("</table>")), "<tr>"), 7);  // header + pp 1..64
  EXPECT_NE(Section(dom, "sweep-chart", 20000).find("<polyline"), std::string::npos);
  // The winner's Megatron-LM arguments, from POST /v1/emit.
  EXPECT_NE(Section(dom, "emit-text", 20000).find("MODEL_PARALLEL_ARGS"), std::string::npos)
      << Section(dom, "emit-text", 2000);

  // The screenshot, kept as an artifact.
  std::filesystem::create_directories(PARATUNE_ARTIFACT_DIR);
  const std::string png = std::string(PARATUNE_ARTIFACT_DIR) + "/web_page.png";
  std::filesystem::remove(png);
  auto [out, code2] =
      RunCommand(base + " --screenshot=" + png + " '" + url + "' 2>>" + dir + "/chromium.log");
  ASSERT_EQ(code2, 0) << out;
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 30000u);  // a blank page compresses to a few KB
  auto head = ReadFileToString(png);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->substr(1, 3), "PNG");
  std::cout << "[browser] screenshot: " << png << "\n";
  s.Shutdown();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paratune::web
