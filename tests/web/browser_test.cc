// The page in a real headless Chromium (Debian's `chromium`, installed by
// scripts/test.sh): it loads, plans (the form is submitted by the page's own
// submit path, ?autorun=1), and shows the ranked table, the stacked bars, the
// Pareto scatter and the topology. A screenshot is kept in
// build/artifacts/web_page.png. Then the page's layout at a phone's width
// (390 px) and a desktop's (1440 px), measured in the page through the
// DevTools protocol: no sideways scrolling, no text under 10 px, the ranked
// table's cells as the CLI shows them (band, leader mark, ceiling flag,
// reserved memory, why a row is ahead of a faster one), screenshots in
// build/artifacts/web_page_390.png and web_page_1440.png. Skips cleanly where
// no Chromium is installed.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/web/cdp.h"
#include "tests/web/test_util.h"

namespace paratune::web::testing {
namespace {

std::string FindChromium() {
  if (const char* env = std::getenv("PARATUNE_CHROMIUM"); env && *env) return env;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
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

// The page asked to plan Llama 3 70B on 256 GPUs of dgx-h100 at once, compare
// plans 1 and 3 and sweep pp.
std::string AutorunUrl(int port) {
  return "http://127.0.0.1:" + std::to_string(port) +
         "/?autorun=1&model=llama3-70b&cluster=dgx-h100&gpus=256&global_batch=512&"
         "seq_len=4096&space=megatron&top=60&compare=1,3&sweep=pp";
}

// What the page tests drive: a Chromium, a scratch directory, a server on it
// and the page's autorun URL.
struct Page {
  std::string chromium;
  std::string dir;
  std::unique_ptr<TestServer> server;
  std::string url;
};
// Removes a page's scratch directory. Chromium's helper processes can still
// be writing its profile there for a moment after the browser has exited, so
// a removal that races them is retried; what is left after 5 s stays in /tmp.
void RemoveScratch(const std::string& dir) {
  for (int i = 0; i < 50; ++i) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!ec) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Opens the page in scratch directory `scratch`: skips the test where no
// Chromium is installed, fails it when the server does not start. The caller
// returns when IsSkipped() or HasFatalFailure().
void OpenPage(const std::string& scratch, Page* page) {
  page->chromium = FindChromium();
  if (page->chromium.empty()) {
    GTEST_SKIP() << "no chromium on PATH (scripts/test.sh installs Debian's)";
  }
  page->dir = TempDir(scratch);
  page->server = std::make_unique<TestServer>(TestOptions(page->dir));
  ASSERT_TRUE(page->server->ok()) << page->server->error();
  page->url = AutorunUrl(page->server->port());
}

// The DOM Chromium leaves after loading `url` on the page's server with 30 s
// of virtual time, and its exit code; its log goes to the scratch directory.
std::pair<std::string, int> DumpDom(const Page& page, const std::string& url) {
  return RunCommand("timeout 150 " + page.chromium +
                    " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage"
                    " --no-first-run --disable-extensions --user-data-dir=" +
                    page.dir + "/profile --virtual-time-budget=30000 --dump-dom '" + url + "' 2>" +
                    page.dir + "/chromium.log");
}

TEST(Browser, PagePlansAndDrawsTheResults) {
  Page page;
  OpenPage("browser", &page);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string base =
      "timeout 150 " + page.chromium +
      " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
      " --disable-extensions --hide-scrollbars --user-data-dir=" +
      page.dir +
      "/profile"
      " --virtual-time-budget=60000 --window-size=1440,3400";
  auto [dom, code] =
      RunCommand(base + " --dump-dom '" + page.url + "' 2>" + page.dir + "/chromium.log");
  ASSERT_EQ(code, 0) << "chromium failed; see " << page.dir << "/chromium.log";
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
  auto [out, code2] = RunCommand(base + " --screenshot=" + png + " '" + page.url + "' 2>>" +
                                 page.dir + "/chromium.log");
  ASSERT_EQ(code2, 0) << out;
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 30000u);  // a blank page compresses to a few KB
  auto head = ReadFileToString(png);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->substr(1, 3), "PNG");
  std::cout << "[browser] screenshot: " << png << "\n";
  page.server->Shutdown();
  RemoveScratch(page.dir);
}

// A job that fits nowhere for lack of memory: the table says so and names
// the fewest GPUs where it fits, as `paratune plan` does.
TEST(Browser, NothingFitsNamesWhereItWould) {
  Page page;
  OpenPage("browser-nofit", &page);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string url = "http://127.0.0.1:" + std::to_string(page.server->port()) +
                          "/?autorun=1&model=llama3.1-70b&cluster=dgx-h100&gpus=2&"
                          "global_batch=64&seq_len=8192&space=megatron&top=5";
  auto [dom, code] = DumpDom(page, url);
  ASSERT_EQ(code, 0) << "chromium failed; see " << page.dir << "/chromium.log";
  const std::string table = Section(dom, "candidates");
  EXPECT_NE(table.find("No configuration fits"), std::string::npos) << table.substr(0, 2000);
  EXPECT_NE(table.find("Fewest GPUs that fit (doubling from 2): "), std::string::npos)
      << table.substr(0, 2000);
  EXPECT_EQ(dom.find("class=\"error\""), std::string::npos);
  page.server->Shutdown();
  RemoveScratch(page.dir);
}

// A network that is not a transformer stack (docs/networks.md): the page
// plans Stable Diffusion's U-Net as it plans a GPT, through POST /v1/plans,
// and shows the ranked layouts with where each step goes and, for the
// selected one, its slowest layers; the transformer table stays hidden.
TEST(Browser, PagePlansAUNet) {
  Page page;
  OpenPage("browser-network", &page);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string url = "http://127.0.0.1:" + std::to_string(page.server->port()) +
                          "/?autorun=1&network=sd2-unet&cluster=dgx-h100&gpus=64&global_batch=2048&top=8";
  auto [dom, code] = DumpDom(page, url);
  ASSERT_EQ(code, 0) << "chromium failed; see " << page.dir << "/chromium.log";
  ASSERT_NE(dom.find("data-state=\"planned\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_NE(dom.find("Global batch (samples)"), std::string::npos);
  const std::string summary = Section(dom, "network-summary", 400);
  EXPECT_NE(summary.find("sd2-unet (865.9 M parameters"), std::string::npos) << summary;
  const std::string plans = Section(dom, "network-plans");
  const std::string body = plans.substr(0, plans.find("</table>"));
  EXPECT_EQ(Count(body, "<tr tabindex=\"0\""), 8) << body.substr(0, 2000);
  EXPECT_NE(body.find("data 64, micro-batch 32"), std::string::npos) << body.substr(0, 2000);
  EXPECT_GE(Count(body, "<rect"), 8);  // a bar per row
  const std::string layers = Section(dom, "network-layers");
  EXPECT_NE(layers.find("attn"), std::string::npos) << layers.substr(0, 2000);
  EXPECT_NE(dom.find("id=\"results\" hidden"), std::string::npos);
  page.server->Shutdown();
  RemoveScratch(page.dir);
}

// A token budget: each ranked row says what the run to it takes (days,
// effective fraction, checkpoint interval, GPU-hours, cost), ranked by time to
// train (docs/model.md, Time to train), and rank 1's failures are priced as a
// spare, a wait or continuing on fewer GPUs, as `paratune plan --tokens`
// prints them.
TEST(Browser, TimeToTrainShowsPerPlan) {
  Page page;
  OpenPage("browser-goodput", &page);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string url = "http://127.0.0.1:" + std::to_string(page.server->port()) +
                          "/?autorun=1&model=llama3-8b&cluster=dgx-h100&gpus=16&"
                          "global_batch=64&seq_len=4096&space=megatron&top=5&"
                          "objective=time-to-train&tokens=1T&gpu_hour_price=2";
  auto [dom, code] = DumpDom(page, url);
  ASSERT_EQ(code, 0) << "chromium failed; see " << page.dir << "/chromium.log";
  ASSERT_NE(dom.find("data-state=\"planned\""), std::string::npos) << dom.substr(0, 3000);
  const std::string table = Section(dom, "candidates", 200000);
  const std::string rows = table.substr(0, table.find("</table>"));
  const int ranked = Count(rows, "<tr tabindex=\"0\"");
  EXPECT_GE(ranked, 1);
  EXPECT_EQ(Count(rows, "class=\"goodput\""), ranked) << rows.substr(0, 3000);
  EXPECT_NE(rows.find("To the budget: "), std::string::npos);
  EXPECT_NE(rows.find(" GPU-hours, cost "), std::string::npos);
  EXPECT_NE(table.find("Ranked by the pessimistic time to train"), std::string::npos)
      << table.substr(0, 3000);
  // Rank 1's failures priced three ways, under the table.
  EXPECT_NE(table.find("class=\"note policies\""), std::string::npos) << table.substr(0, 3000);
  EXPECT_NE(table.find("When a node fails (rank 1; back after 4.0 h, assumed)"), std::string::npos);
  EXPECT_NE(table.find("continue on fewer GPUs (8 GPUs as"), std::string::npos)
      << table.substr(0, 3000);
  EXPECT_EQ(dom.find("class=\"error\""), std::string::npos);
  page.server->Shutdown();
  RemoveScratch(page.dir);
}

// Measured in the page: the viewport and document widths, elements that
// stick out past the viewport (outside a box that scrolls or clips them), the
// smallest rendered size of a chart label (font size times the drawing's
// scale) and of other text, all in CSS pixels.
constexpr const char* kMeasure = R"js((() => {
  const vw = window.innerWidth;
  let svgMin = 1e9, svgMinText = "", svgTexts = 0;
  for (const t of document.querySelectorAll("svg text")) {
    const m = t.getScreenCTM();
    if (!m || !t.getClientRects().length || !t.textContent.trim()) continue;
    const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    ++svgTexts;
    if (px < svgMin) { svgMin = px; svgMinText = t.textContent; }
  }
  let htmlMin = 1e9, htmlMinText = "";
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const e = n.parentElement;
    if (!e || !n.textContent.trim() || e.closest("svg") || !e.getClientRects().length) continue;
    const px = parseFloat(getComputedStyle(e).fontSize);
    if (px < htmlMin) { htmlMin = px; htmlMinText = n.textContent.trim().slice(0, 40); }
  }
  const wide = [];
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 0.5) continue;
    let clipped = false;
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") { clipped = true; break; }
    }
    if (!clipped) wide.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " right " + Math.round(r.right));
  }
  return JSON.stringify({ inner_width: vw, scroll_width: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight, svg_min_px: svgMin, svg_min_text: svgMinText,
    svg_texts: svgTexts, html_min_px: htmlMin, html_min_text: htmlMinText, wide: wide.slice(0, 12) });
})())js";

// The ranked table's rows beside the plans document they show: per row the
// candidate's figures and what its cells say.
constexpr const char* kRows = R"js((() => {
  const doc = state.doc;
  const rows = [...document.querySelectorAll("#candidates tbody tr[data-index]")].map((tr) => {
    const c = doc.candidates[Number(tr.dataset.index)], p = c.prediction;
    const flag = tr.querySelector(".ceiling"), note = tr.querySelector(".rank-note");
    return { rank: c.rank, time: p.iteration_time_s, hi: p.iteration_time_s_range[1],
      reserved: p.memory_GiB.reserved, within_band: c.within_band, above: p.above_published_mfu,
      ceiling: p.published_mfu_ceiling, rank_note: c.rank_note,
      leader: !!tr.querySelector(".leader"), band: tr.querySelector(".band").textContent,
      memory: tr.querySelector(".mem").textContent, flag: flag ? flag.title : null,
      note: note ? note.textContent : null };
  });
  return JSON.stringify({ rows, footer: document.querySelector("#candidates tfoot").textContent });
})())js";

// The table shows what the CLI's does: each row's band (±%), `~` on the
// leaders, `!` with the ceiling named where MFU is above the published one,
// memory as reserved; a row ahead of a faster row shows why, naming a row
// ranked below it; the footer names the fastest row.
void ExpectTableAsTheCli(const Json& t) {
  const Json& rows = t["rows"];
  ASSERT_FALSE(rows.empty());
  size_t fastest = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& r = rows[i];
    SCOPED_TRACE("row #" + std::to_string(r["rank"].get<int>()));
    const double time = r["time"];
    char band[32];
    std::snprintf(band, sizeof band, "±%.0f", 100 * (r["hi"].get<double>() / time - 1));
    EXPECT_EQ(r["band"], band);
    EXPECT_NEAR(std::stod(r["memory"].get<std::string>()), r["reserved"].get<double>(), 0.051);
    EXPECT_EQ(r["leader"], r["within_band"]);
    EXPECT_EQ(r["flag"].is_string(), r["above"].get<bool>());
    if (r["flag"].is_string()) {
      char ceiling[32];
      std::snprintf(ceiling, sizeof ceiling, "%.1f %%", 100 * r["ceiling"].get<double>());
      EXPECT_NE(r["flag"].get<std::string>().find(ceiling), std::string::npos) << r["flag"];
    }
    bool faster_below = false;
    for (size_t j = i + 1; j < rows.size(); ++j) faster_below |= rows[j]["time"].get<double>() < time;
    if (faster_below) {
      EXPECT_TRUE(r["note"].is_string()) << "a faster row is ranked below, unexplained";
    }
    EXPECT_EQ(r["note"], r["rank_note"]);
    if (r["note"].is_string()) {
      std::smatch m;
      const std::string note = r["note"];
      ASSERT_TRUE(std::regex_search(note, m, std::regex("#([0-9]+)"))) << note;
      EXPECT_GT(std::stoi(m[1]), r["rank"].get<int>()) << note;
    }
    if (time < rows[fastest]["time"].get<double>()) fastest = i;
  }
  const std::string footer = t["footer"];
  EXPECT_NE(footer.find("Fastest: #" + std::to_string(rows[fastest]["rank"].get<int>()) + " "),
            std::string::npos)
      << footer;
}

// Evaluates `expr` in the page; its value (returnByValue).
Result<Json> Eval(testing::DevTools& dt, const std::string& session, const std::string& expr) {
  PT_ASSIGN_OR_RETURN(Json r, dt.Call("Runtime.evaluate",
                                      {{"expression", expr}, {"returnByValue", true}}, session));
  if (r.contains("exceptionDetails"))
    return Status::Internal("page threw: " + r["exceptionDetails"].dump());
  return r["result"].value("value", Json());
}

TEST(Browser, FitsAPhoneAndADesktop) {
  Page page;
  OpenPage("layout", &page);
  if (IsSkipped() || HasFatalFailure()) return;
  testing::DevTools dt;
  ASSERT_TRUE(dt.Start(page.chromium, page.dir + "/profile", page.dir + "/chromium.log").ok());
  std::filesystem::create_directories(PARATUNE_ARTIFACT_DIR);
  for (const int width : {390, 1440}) {
    SCOPED_TRACE("width " + std::to_string(width));
    auto target = dt.Call("Target.createTarget", {{"url", "about:blank"}});
    ASSERT_TRUE(target.ok()) << target.status().ToString() << "; see " << page.dir
                             << "/chromium.log";
    auto attached =
        dt.Call("Target.attachToTarget", {{"targetId", (*target)["targetId"]}, {"flatten", true}});
    ASSERT_TRUE(attached.ok()) << attached.status().ToString();
    const std::string session = (*attached)["sessionId"];
    // A phone is a mobile viewport: the page's <meta name="viewport"> applies,
    // and a page wider than the screen would be zoomed out to fit.
    const bool phone = width < 600;
    auto metrics = [&](int height) {
      return dt.Call(
          "Emulation.setDeviceMetricsOverride",
          {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", phone}},
          session);
    };
    ASSERT_TRUE(metrics(phone ? 844 : 900).ok());
    ASSERT_TRUE(dt.Call("Page.navigate", {{"url", page.url}}, session).ok());
    // Planned, swept, and the winner's configuration text in place.
    std::string st;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(150);
    while (std::chrono::steady_clock::now() < until) {
      auto v =
          Eval(dt, session,
               "document.body ? document.body.dataset.state + (document.querySelector("
               "'#emit-text') && document.querySelector('#emit-text').textContent ? '+emit' : '')"
               " : ''");
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      st = v->is_string() ? v->get<std::string>() : "";
      if (st == "planned+emit" || st.rfind("error", 0) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ASSERT_EQ(st, "planned+emit") << "the page did not finish planning";
    auto measured = Eval(dt, session, kMeasure);
    ASSERT_TRUE(measured.ok()) << measured.status().ToString();
    const Json m = Json::parse(measured->get<std::string>());
    std::cout << "[browser] " << width << " px: " << m.dump() << "\n";
    EXPECT_EQ(m["inner_width"], width) << "the page was zoomed out: it is wider than the screen";
    EXPECT_LE(m["scroll_width"].get<int>(), width) << "the page scrolls sideways";
    EXPECT_TRUE(m["wide"].empty()) << "elements past the right edge: " << m["wide"].dump();
    EXPECT_GE(m["svg_texts"].get<int>(), 60) << "the charts were not all drawn";
    EXPECT_GE(m["svg_min_px"].get<double>(), 10.0) << "chart label '" << m["svg_min_text"] << "'";
    EXPECT_GE(m["html_min_px"].get<double>(), 10.0) << "text '" << m["html_min_text"] << "'";
    auto table = Eval(dt, session, kRows);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    ExpectTableAsTheCli(Json::parse(table->get<std::string>()));

    // The whole page in one screenshot: the viewport made as tall as it.
    const int height = std::min(m["height"].get<int>(), 16000);
    ASSERT_TRUE(metrics(height).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto shot = dt.Call("Page.captureScreenshot", {{"format", "png"}}, session);
    ASSERT_TRUE(shot.ok()) << shot.status().ToString();
    const std::string png_bytes = testing::DecodeBase64((*shot)["data"].get<std::string>());
    EXPECT_EQ(png_bytes.substr(1, 3), "PNG");
    const std::string png =
        std::string(PARATUNE_ARTIFACT_DIR) + "/web_page_" + std::to_string(width) + ".png";
    std::ofstream(png, std::ios::binary) << png_bytes;
    EXPECT_GT(std::filesystem::file_size(png), 30000u);
    std::cout << "[browser] screenshot: " << png << "\n";
    ASSERT_TRUE(dt.Call("Target.closeTarget", {{"targetId", (*target)["targetId"]}}).ok());
  }
  dt.Stop();
  page.server->Shutdown();
  RemoveScratch(page.dir);
}

}  // namespace
}  // namespace paratune::web::testing
