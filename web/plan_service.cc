#include "web/plan_service.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

#include "common/strings.h"
#include "planner/cost_model.h"
#include "elastic/failure_policy.h"
#include "planner/goodput_request.h"
#include "frameworks/emit.h"
#include "frameworks/network_emit.h"
#include "elastic/replan.h"
#include "planner/request.h"
#include "scenario/scenario.h"
#include "profiler/cache.h"

namespace paratune::web {
namespace {

// How far below the service's other threads a search runs (nice steps).
constexpr int kSearchNice = 10;

// With `idle`, runs `fn` on a thread of its own under SCHED_IDLE and
// kSearchNice below the service's other threads (both per thread on Linux,
// and inherited by the threads it starts), and waits for it: parsing, setting
// up and running a search use the cores a cached plan or a probe leaves idle.
template <typename Fn>
auto InBackground(bool idle, Fn&& fn) -> decltype(fn()) {
  if (!idle) return fn();
  std::optional<decltype(fn())> out;
  std::thread t([&] {
    // SCHED_IDLE where allowed (any user may choose it): a waking request
    // thread preempts the search at once; else the nice value alone.
    sched_param none{};
    ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &none);
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kSearchNice);
    out.emplace(fn());
  });
  t.join();
  return *std::move(out);
}

// "/collectives/3: ..." inside an inline profile → "/profile/collectives/3: ...".
Status UnderPointer(const Status& s, const std::string& prefix) {
  if (s.ok()) return s;
  const std::string& m = s.message();
  if (!m.empty() && m[0] == '/') return Status(s.code(), prefix + m);
  return Status(s.code(), prefix + ": " + m);
}

bool IsFingerprint(const std::string& s) { return IsPathToken(s); }

// A --fix value from JSON: strings as they are, integers and booleans spelled
// as the flag form spells them.
Result<std::string> FixValue(const Json& v, const std::string& pointer) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return Status::InvalidArgument(pointer + ": must be a string, an integer or a boolean");
}

}  // namespace

int JsonNestingDepth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

Result<std::vector<int>> ParseGpuCounts(const std::string& spec, const std::string& pointer,
                                        int max_counts) {
  const std::vector<std::string> parts = Split(spec, ':');
  auto bad = [&](const std::string& rule) {
    return Status::InvalidArgument(pointer + ": " + rule);
  };
  if (parts.empty() || parts.size() > 3) return bad("expected N, \"A:B\" or \"A:B:STEP\"");
  std::vector<int64_t> v;
  for (const std::string& p : parts) {
    auto n = ParseInt(p, pointer);
    if (!n.ok())
      return bad("expected N, \"A:B\" or \"A:B:STEP\" with integers, not \"" + spec + "\"");
    // Checked before any narrowing: "4294967552" must not become 256.
    if (*n > planner::kMaxGpus)
      return bad("each count must be at most " + std::to_string(planner::kMaxGpus));
    v.push_back(*n);
  }
  if (v.size() == 1) {
    if (v[0] < 1) return bad("must be positive");
    return std::vector<int>{static_cast<int>(v[0])};
  }
  if (v[0] < 1 || v[1] < v[0] || v[1] > (int64_t{1} << 30)) return bad("A:B needs 1 <= A <= B");
  std::vector<int> out;
  if (v.size() == 3) {
    if (v[2] < 1) return bad("STEP must be positive");
    for (int64_t g = v[0]; g <= v[1] && static_cast<int>(out.size()) <= max_counts; g += v[2]) {
      out.push_back(static_cast<int>(g));
    }
  } else {
    for (int64_t g = v[0]; g <= v[1] && static_cast<int>(out.size()) <= max_counts; g *= 2) {
      out.push_back(static_cast<int>(g));
    }
  }
  if (static_cast<int>(out.size()) > max_counts) {
    return bad("the range has more than " + std::to_string(max_counts) + " GPU counts");
  }
  return out;
}

Result<PlanRequest> ParsePlanRequest(const Json& j) {
  if (!j.is_object()) return Status::InvalidArgument("the request must be a JSON object");
  PlanRequest req;
  req.job = j;
  auto take = [&](const char* key) -> std::optional<Json> {
    auto it = req.job.find(key);
    if (it == req.job.end()) return std::nullopt;
    Json v = *it;
    req.job.erase(it);
    return v;
  };
  if (auto s = take("schema")) {
    if (!s->is_string() || s->get<std::string>() != kPlanRequestSchema) {
      return Status::InvalidArgument(std::string("/schema: must be \"") + kPlanRequestSchema +
                                     "\"");
    }
  }
  if (auto g = take("gpus")) {
    if (g->is_number_integer()) {
      const int64_t n = g->get<int64_t>();
      if (n < 1 || n > planner::kMaxGpus)
        return Status::InvalidArgument("/gpus: must be an integer in [1, " +
                                       std::to_string(planner::kMaxGpus) + "]");
      req.gpu_counts = {static_cast<int>(n)};
    } else if (g->is_string()) {
      // A string is a range; one count is a JSON integer, never a string.
      if (g->get<std::string>().find(':') == std::string::npos) {
        return Status::InvalidArgument(
            "/gpus: one GPU count must be a JSON integer, not a string (a string is a range "
            "\"A:B[:STEP]\")");
      }
      PT_ASSIGN_OR_RETURN(req.gpu_counts, ParseGpuCounts(g->get<std::string>(), "/gpus"));
    } else {
      return Status::InvalidArgument("/gpus: must be an integer or a range string \"A:B[:STEP]\"");
    }
  } else {
    return Status::InvalidArgument("/gpus: is required (an integer or \"A:B[:STEP]\")");
  }
  planner::SearchOptions& o = req.options;
  if (auto v = take("space")) {
    if (!v->is_string()) return Status::InvalidArgument("/space: must be a string");
    auto f = planner::ParseFamily(v->get<std::string>());
    if (!f.ok()) return UnderPointer(f.status(), "/space");
    o.family = *f;
    req.space_named = true;
  }
  if (auto v = take("allow_lossy")) {
    if (!v->is_boolean()) return Status::InvalidArgument("/allow_lossy: must be true or false");
    o.allow_lossy = v->get<bool>();
  }
  if (auto v = take("objective")) {
    if (!v->is_string()) return Status::InvalidArgument("/objective: must be a string");
    auto ob = planner::ParseObjective(v->get<std::string>());
    if (!ob.ok()) return UnderPointer(ob.status(), "/objective");
    o.objective = *ob;
  }
  // The run beyond one step (docs/rest.md): a token budget and what prices it.
  if (auto v = take("goodput")) {
    PT_ASSIGN_OR_RETURN(o.goodput, planner::ParseGoodputRequest(*v, "/goodput"));
  }
  if (o.objective == planner::Objective::kTimeToTrain && !o.goodput.enabled()) {
    return Status::InvalidArgument(
        "/objective: time-to-train needs a token budget: /goodput {\"tokens\": \"15T\"}");
  }
  if (auto v = take("top")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 10000) {
      return Status::InvalidArgument("/top: must be an integer in [1, 10000]");
    }
    o.top_k = static_cast<int>(v->get<int64_t>());
  }
  if (auto v = take("pareto")) {
    if (!v->is_boolean()) return Status::InvalidArgument("/pareto: must be a boolean");
    o.keep_pareto = v->get<bool>();
  }
  if (auto v = take("fix")) {
    if (v->is_string()) {
      auto kv = planner::ConfigTextToPairs(v->get<std::string>());
      if (!kv.ok()) return UnderPointer(kv.status(), "/fix");
      o.fixed = *kv;
    } else if (v->is_object()) {
      for (const auto& [k, val] : v->items()) {
        PT_ASSIGN_OR_RETURN(std::string s, FixValue(val, "/fix/" + JsonPointerToken(k)));
        o.fixed.emplace_back(k, s);
      }
    } else {
      return Status::InvalidArgument(
          "/fix: must be a string \"pp=1,zero=3\" or an object {\"pp\": 1}");
    }
    if (Status s = planner::ValidateFixed(o.fixed); !s.ok()) return UnderPointer(s, "/fix");
  }
  if (auto v = take("profile")) req.profile = *v;
  if (req.job.contains("config")) {
    return Status::InvalidArgument(
        "/config: a plan request searches every configuration; use fix to pin fields");
  }
  req.framework_named = req.job.contains("training") && req.job["training"].is_object() &&
                        req.job["training"].contains("framework");
  return req;
}

Result<std::optional<std::shared_ptr<const profiler::Profile>>> ProfileStore::Get(
    const std::string& fp) {
  using Out = std::optional<std::shared_ptr<const profiler::Profile>>;
  PT_RETURN_IF_ERROR(CheckPathToken(fp, "cluster fingerprint"));
  const std::string path = profiler::CachedProfilePath(dir_, fp);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Out();
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(fp);
    if (it != entries_.end() && it->second.mtime_ns == mtime_ns && it->second.size == st.st_size) {
      return Out(it->second.profile);
    }
  }
  auto loaded = profiler::LoadCachedProfile(dir_, fp);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return Out();
  auto p = std::make_shared<const profiler::Profile>(std::move(**loaded));
  std::lock_guard<std::mutex> lock(mu_);
  entries_[fp] = Entry{mtime_ns, static_cast<int64_t>(st.st_size), p};
  return Out(p);
}

Result<std::vector<ProfileStore::Listed>> ProfileStore::List() {
  std::vector<Listed> out;
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(dir_) / "profiles";
  if (!std::filesystem::exists(folder, ec)) return out;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  if (ec) return Status::IoError("cannot list " + folder.string() + ": " + ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    auto got = Get(n);
    if (!got.ok()) {
      out.emplace_back(n, got.status());
    } else if (got->has_value()) {
      out.emplace_back(n, **got);
    }
  }
  return out;
}

std::shared_ptr<const std::string> DocumentCache::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->doc;
}

void DocumentCache::Put(const std::string& key, std::shared_ptr<const std::string> doc,
                        const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0 || index_.count(key)) return;
  lru_.push_front(Entry{key, std::move(doc), owner});
  index_[key] = lru_.begin();
  ++per_owner_[owner];
  while (lru_.size() > capacity_) EvictOneLocked(owner);
}

void DocumentCache::EvictOneLocked(const std::string& inserting) {
  // The owner holding the most entries gives one up (the inserting owner on a
  // tie), its least recently used: a client filling the cache evicts its own
  // documents once it holds the largest share, never a neighbour's first.
  std::string victim = inserting;
  size_t most = per_owner_[inserting];
  for (const auto& [owner, n] : per_owner_) {
    if (n > most) {
      most = n;
      victim = owner;
    }
  }
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (it->owner != victim) continue;
    index_.erase(it->key);
    if (--per_owner_[victim] == 0) per_owner_.erase(victim);
    lru_.erase(it);
    return;
  }
}

size_t DocumentCache::CountOwnedBy(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_owner_.find(owner);
  return it == per_owner_.end() ? 0 : it->second;
}

void DocumentCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
  per_owner_.clear();
}

PlanService::PlanService(PlanServiceOptions options)
    : options_(std::move(options)),
      profiles_(options_.cache_dir),
      slots_(SearchSlotOptions{options_.max_concurrent_searches, options_.max_waiting_per_client,
                               options_.max_waiting_searches, options_.queue_wait_limit_s,
                               options_.slot_quantum_s}),
      by_request_(options_.cache_entries),
      by_body_(options_.cache_entries) {}

void PlanService::InvalidateCache() {
  by_request_.Clear();
  by_body_.Clear();
}

std::string PlanService::BodyKey(const std::string& raw_body) const {
  struct stat st;
  int64_t generation = 0;
  if (::stat((options_.cache_dir + "/profiles").c_str(), &st) == 0) {
    generation = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  }
  return std::to_string(generation) + "#" + raw_body;
}

std::shared_ptr<const std::string> PlanService::LookupBody(const std::string& raw_body) {
  return by_body_.Get(BodyKey(raw_body));
}

Result<std::string> PlanService::ApplyProfileTo(const Json& profile,
                                                topology::ClusterSpec* cluster) {
  if (profile.is_null()) {
    auto cached = profiles_.Get(topology::Fingerprint(*cluster));
    if (!cached.ok()) return cached.status().WithContext("profile cache");
    // A synthetic profile measured nothing: never applied unasked.
    if (!cached->has_value() || profiler::IsSynthetic(***cached)) return std::string();
    PT_RETURN_IF_ERROR(profiler::ApplyProfile(***cached, cluster).WithContext("cached profile"));
    return cluster->profile_fingerprint;
  }
  if (profile.is_string()) {
    const std::string fp = profile.get<std::string>();
    if (!IsFingerprint(fp)) {
      return Status::InvalidArgument(
          "/profile: must name a cached profile by its cluster fingerprint "
          "(GET /v1/profiles) or be a paratune.profile/v1 object");
    }
    auto cached = profiles_.Get(fp);
    if (!cached.ok()) return UnderPointer(cached.status(), "/profile");
    if (!cached->has_value()) {
      return Status::NotFound("/profile: no cached profile for cluster fingerprint '" + fp +
                              "' (GET /v1/profiles)");
    }
    PT_RETURN_IF_ERROR(UnderPointer(profiler::ApplyProfile(***cached, cluster), "/profile"));
    return cluster->profile_fingerprint;
  }
  if (profile.is_object()) {
    auto p = profiler::ParseProfile(profile);
    if (!p.ok()) return UnderPointer(p.status(), "/profile");
    PT_RETURN_IF_ERROR(UnderPointer(profiler::ApplyProfile(*p, cluster), "/profile"));
    return cluster->profile_fingerprint;
  }
  return Status::InvalidArgument(
      "/profile: must be a cluster fingerprint string or a paratune.profile/v1 object");
}

Result<std::string> PlanService::Predict(const Json& request) {
  if (!request.is_object()) return Status::InvalidArgument("the request must be a JSON object");
  if (request.contains("network")) {
    PT_ASSIGN_OR_RETURN(planner::NetworkJob job, NetworkJobFor(request));
    PT_ASSIGN_OR_RETURN(OrderedJson doc, planner::PredictNetworkDocument(job));
    return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  Json body = request;
  Json profile;
  if (auto it = body.find("profile"); it != body.end()) {
    profile = *it;
    body.erase(it);
  }
  PT_ASSIGN_OR_RETURN(scenario::Scenario resolved, scenario::ResolvePredict(body));
  planner::PredictRequest& req = resolved.request;
  if (req.job.gpus > options_.max_gpus) {
    return Status::InvalidArgument("/gpus: at most " + std::to_string(options_.max_gpus) +
                                   " on this service");
  }
  PT_RETURN_IF_ERROR(ApplyProfileTo(profile, &req.job.cluster).status());
  planner::CostModel cm(req.job.model, req.job.training, req.job.cluster, req.job.gpus);
  PT_RETURN_IF_ERROR(planner::ValidateConfig(cm, req.config));
  const planner::Prediction p = cm.Predict(req.config);
  OrderedJson doc = planner::PredictionToJson(req.job, req.config, p, cm);
  doc["assumed"] = scenario::AssumedToJson(resolved.assumed);
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<planner::NetworkJob> PlanService::NetworkJobFor(const Json& request) const {
  PT_ASSIGN_OR_RETURN(planner::NetworkJob job, planner::ParseNetworkJob(request));
  if (job.gpus > options_.max_gpus) {
    return Status::InvalidArgument("/gpus: at most " + std::to_string(options_.max_gpus) + " on this service");
  }
  return job;
}

Result<std::string> PlanService::Replan(const Json& request, const Peer& client,
                                        SlotRefusal* refusal) {
  return InBackground(options_.idle_priority,
                      [&] { return ReplanNow(request, client, refusal); });
}

Result<std::string> PlanService::ReplanNow(const Json& request, const Peer& client,
                                           SlotRefusal* refusal) {
  SlotRefusal ignored = SlotRefusal::kNone;
  if (!refusal) refusal = &ignored;
  // The service's own bounds, beyond what the replan parser allows anyone.
  if (request.is_object()) {
    if (auto t = request.find("top");
        t != request.end() && t->is_number() && t->get<double>() > options_.max_top) {
      return Status::InvalidArgument("/top: at most " + std::to_string(options_.max_top) +
                                     " on this service");
    }
    for (const char* key : {"gpus", "add_nodes", "lost_nodes"}) {
      if (auto v = request.find(key);
          v != request.end() && v->is_number() && v->get<double>() > options_.max_gpus) {
        return Status::InvalidArgument(std::string("/") + key + ": at most " +
                                       std::to_string(options_.max_gpus) + " on this service");
      }
    }
  }
  PT_ASSIGN_OR_RETURN(SearchSlots::Ticket ticket, slots_.Acquire(client.key(), 0, refusal));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options_.search_time_limit_s));
  Status late = Status::Ok();
  const planner::SearchRunner run = [&](const planner::Search& search) {
    auto r = RunSearch(search, deadline, ticket);
    if (!r.ok()) {
      late = r.status();
      return planner::SearchResult{};
    }
    return *std::move(r);
  };
  // A network's replan searches up to 64 GPU counts: it stops at the
  // service's time limit like any search.
  auto doc = planner::ReplanDocument(request, run, [&] { return std::chrono::steady_clock::now() > deadline; });
  if (!late.ok()) return late;
  if (!doc.ok() && doc.status().code() == StatusCode::kTimeout) return TooLate();
  if (!doc.ok()) return doc.status();
  return doc->dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status PlanService::TooLate() const {
  return Status::Timeout("the search ran past the service's limit of " +
                         FormatFixed(options_.search_time_limit_s, 0) +
                         " s; narrow it (space, fix, a smaller gpus range) or run `paratune plan`");
}

Result<planner::SearchResult> PlanService::RunSearch(
    const planner::Search& search, std::chrono::steady_clock::time_point deadline,
    SearchSlots::Ticket& ticket) {
  const int n = search.num_shards();
  std::vector<planner::SearchResult> parts(n);
  std::atomic<int> next{0};
  std::atomic<bool> late{false}, step_aside{false};
  auto work = [&] {
    while (!late && !step_aside) {
      // Shards are small (one tuple of degrees), so checking between them
      // bounds the overrun by one shard's time.
      if (std::chrono::steady_clock::now() > deadline) {
        late = true;
        return;
      }
      if (slots_.ShouldYield(ticket)) {
        step_aside = true;
        return;
      }
      const int i = next++;
      if (i >= n) return;
      parts[i] = search.RunShard(i);
    }
  };
  const Status too_late = TooLate();
  while (true) {
    std::vector<std::thread> pool;
    for (int t = 1; t < std::min(options_.search_threads, n); ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (late) return too_late;
    if (next >= n) break;
    // Another client waits: give it the slot, then carry on where this stopped.
    if (!slots_.Yield(ticket, deadline).ok()) return too_late;
    step_aside = false;
  }
  return search.Merge(std::move(parts));
}

Result<Served> PlanService::Plan(const Json& request, const std::string& raw_body,
                                 const Peer& client, SlotRefusal* refusal) {
  return InBackground(options_.idle_priority,
                      [&] { return PlanNow(request, raw_body, client, refusal); });
}

Result<Served> PlanService::PlanNow(const Json& request, const std::string& raw_body,
                                    const Peer& client, SlotRefusal* refusal) {
  SlotRefusal ignored = SlotRefusal::kNone;
  if (!refusal) refusal = &ignored;
  // The time limit runs from the request's arrival: set-up, the wait for a
  // slot and the search all count.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options_.search_time_limit_s));
  // Taken before parsing, so a profile stored meanwhile makes the key stale, not the document.
  const std::string body_key = raw_body.empty() ? "" : BodyKey(raw_body);
  if (request.is_object() && request.contains("network")) {
    // A network's layout search takes a search slot like any search, so no
    // client runs more of them at once than its share, and stops at the
    // service's time limit (a user's network and cluster set how many
    // splits it prices).
    PT_ASSIGN_OR_RETURN(planner::NetworkJob job, NetworkJobFor(request));
    PT_ASSIGN_OR_RETURN(SearchSlots::Ticket ticket, slots_.Acquire(client.key(), 1.0, refusal));
    auto doc = planner::PlanNetworkDocumentUntil(job, [&] { return std::chrono::steady_clock::now() > deadline; });
    if (!doc.ok() && doc.status().code() == StatusCode::kTimeout) return TooLate();
    if (!doc.ok()) return doc.status();
    return Served{std::make_shared<const std::string>(doc->dump(-1, ' ', false, Json::error_handler_t::replace)),
                  false};
  }
  PT_ASSIGN_OR_RETURN(PlanRequest req, ParsePlanRequest(request));
  // The search's divisor enumeration grows with the batch: beyond 2^30
  // sequences one shard can run for minutes, past any time limit's check.
  if (auto t = req.job.find("training"); t != req.job.end() && t->is_object()) {
    if (auto b = t->find("global_batch");
        b != t->end() && b->is_number_integer() && b->get<int64_t>() > (int64_t{1} << 30)) {
      return Status::InvalidArgument(
          "/training/global_batch: at most 2^30 sequences on this service");
    }
  }
  if (req.options.top_k > options_.max_top) {
    return Status::InvalidArgument("/top: at most " + std::to_string(options_.max_top) +
                                   " on this service");
  }
  if (req.gpu_counts.back() > options_.max_gpus) {
    return Status::InvalidArgument("/gpus: at most " + std::to_string(options_.max_gpus) +
                                   " on this service");
  }
  // Parse every count's job first: a bad field fails fast, before any search,
  // and the applied profiles become part of the cache key.
  std::vector<planner::PlanSection> sections;
  std::string key = request.dump();
  for (int gpus : req.gpu_counts) {
    Json one = req.job;
    one["gpus"] = gpus;
    PT_ASSIGN_OR_RETURN(planner::PredictRequest parsed, planner::ParsePredictRequest(one));
    if (!parsed.profile_path.empty()) return Status::InvalidArgument("/profile: internal");
    planner::PlanSection sec;
    sec.job = std::move(parsed.job);
    PT_ASSIGN_OR_RETURN(std::string fp, ApplyProfileTo(req.profile, &sec.job.cluster));
    key += "|" + fp;
    sections.push_back(std::move(sec));
  }
  // Every count trains the same model: a pin its search never offers fails here.
  PT_RETURN_IF_ERROR(UnderPointer(
      planner::CheckFixedForModel(req.options.fixed, sections.front().job.model), "/fix"));
  if (auto doc = by_request_.Get(key)) {
    if (!body_key.empty()) by_body_.Put(body_key, doc, client.key());
    return Served{doc, true};
  }
  // Every count's search is set up before a slot is asked for: its size (the
  // shards to cost, summed over the counts) is the estimate the slots order by.
  std::vector<planner::SpaceModels> spaces;
  std::vector<std::unique_ptr<planner::Search>> searches;
  double cost = 0;
  for (planner::PlanSection& sec : sections) {
    // One cost model per framework of the space, or only the one the request names.
    PT_ASSIGN_OR_RETURN(planner::SpaceModels space,
                        planner::ModelsForSpace(sec.job, req.options.family, req.space_named,
                                                req.framework_named));
    spaces.push_back(std::move(space));
    searches.push_back(std::make_unique<planner::Search>(spaces.back().Pointers(), req.options));
    cost += searches.back()->num_shards();
    if (std::chrono::steady_clock::now() > deadline) return TooLate();
  }
  PT_ASSIGN_OR_RETURN(SearchSlots::Ticket ticket, slots_.Acquire(client.key(), cost, refusal));
  for (size_t i = 0; i < sections.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    PT_ASSIGN_OR_RETURN(sections[i].result, RunSearch(*searches[i], deadline, ticket));
    sections[i].search_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Nothing fits for lack of memory: where something does, within the same
  // deadline and the service's GPU cap (past either, the document omits it).
  planner::PlanSection& last = sections.back();
  if (last.result.top.empty() && planner::MemoryBinds(last.result)) {
    auto fits = planner::FewestGpusThatFit(
        last.job, req.options, req.space_named, req.framework_named, options_.max_gpus,
        [&](const planner::Search& s) { return RunSearch(s, deadline, ticket); });
    if (fits.ok()) last.fits_from = *fits;
  }
  OrderedJson plans = planner::PlansToJson(sections, req.options);
  // With a budget: rank 1's failures priced three ways, as the CLI prices
  // them, for the largest count with a plan; its replan search runs under
  // the same deadline and slot.
  const planner::PlanSection* main_section = &sections.back();
  for (const planner::PlanSection& s : sections) {
    if (!s.result.top.empty()) main_section = &s;
  }
  Status replan_error = Status::Ok();
  PT_ASSIGN_OR_RETURN(
      const std::optional<planner::FailurePolicies> policies,
      planner::RankOnePolicies(*main_section, req.options, [&](const planner::Search& s) {
        auto r = RunSearch(s, deadline, ticket);
        if (r.ok()) return *std::move(r);
        replan_error = r.status();
        return planner::SearchResult{};
      }));
  PT_RETURN_IF_ERROR(replan_error);
  if (policies) plans["failure_policies"] = planner::FailurePoliciesToJson(*policies);
  plans["assumed"] = scenario::AssumedToJson(scenario::JobAssumptions(req.job, sections.front().job, /*searches_space=*/true));
  auto body = std::make_shared<const std::string>(
      plans.dump(-1, ' ', false, Json::error_handler_t::replace));
  by_request_.Put(key, body, client.key());
  if (!body_key.empty()) by_body_.Put(body_key, body, client.key());
  return Served{body, false};
}

}  // namespace paratune::web

namespace paratune::web {

Result<std::pair<std::string, std::string>> PlanService::Emit(const Json& body,
                                                              const Peer& client) {
  if (!body.is_object()) return Status::InvalidArgument("the request must be a JSON object");
  ObjectReader r(body, "");
  std::string schema = "paratune.emit_request/v1";
  PT_RETURN_IF_ERROR(r.OptString("schema", &schema));
  if (schema != "paratune.emit_request/v1")
    return r.Error("schema", "must be \"paratune.emit_request/v1\"");
  int64_t rank = 1;
  PT_RETURN_IF_ERROR(r.OptInteger("rank", &rank));
  if (rank < 1 || rank > 10000) return r.Error("rank", "must be in [1, 10000]");
  std::string format_name;
  PT_RETURN_IF_ERROR(r.OptString("format", &format_name));
  Json plans;
  if (r.Has("plans") == r.Has("request")) {
    return Status::InvalidArgument(
        "/plans: give exactly one of plans (a paratune.plans/v1 document) or request (a plan "
        "request)");
  }
  if (r.Has("plans")) {
    plans = r.Raw("plans");
    if (!plans.is_object() || !plans.contains("schema") || !plans["schema"].is_string()) {
      return r.Error("plans", "must be a paratune.plans/v1 object");
    }
  } else {
    auto served = Plan(r.Raw("request"), "", client);
    if (!served.ok()) return UnderPointer(served.status(), "/request");
    auto doc = ParseJson(*served->body, "plans");
    if (!doc.ok()) return doc.status();
    plans = std::move(doc).value();
  }
  PT_RETURN_IF_ERROR(r.Finish());
  if (planner::IsNetworkPlans(plans)) {
    const std::string name = format_name.empty() ? planner::DefaultNetworkEmitFormat(plans) : format_name;
    auto text = planner::EmitNetworkPlan(plans, static_cast<int>(rank), name);
    if (!text.ok()) return r.Has("plans") ? UnderPointer(text.status(), "/plans") : text.status();
    return std::make_pair(name, std::move(text).value());
  }
  planner::EmitFormat format = planner::DefaultEmitFormat(plans);
  if (!format_name.empty()) {
    auto f = planner::ParseEmitFormat(format_name);
    if (!f.ok()) return UnderPointer(f.status(), "/format");
    format = *f;
  }
  auto text = planner::EmitConfig(plans, static_cast<int>(rank), format);
  if (!text.ok()) {
    // Pointers in the emitter's messages are inside the plans document.
    return r.Has("plans") ? UnderPointer(text.status(), "/plans") : text.status();
  }
  return std::make_pair(std::string(planner::EmitFormatName(format)), std::move(text).value());
}

}  // namespace paratune::web
