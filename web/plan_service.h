// web/plan_service.h: what POST /v1/predict and POST /v1/plans do, apart from
// HTTP: parse the request (the same document `paratune predict --request` and
// `paratune plan` take, plus plan's search options as keys), apply the cluster's
// profile from the cache directory, run the search on worker threads under a
// deadline, and keep an in-memory cache of plans documents keyed by the
// canonical request and the profile applied, so a repeated request costs a
// hash lookup. Thread-safe: one PlanService serves every handler thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/network_request.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "profiler/profile.h"
#include "web/peer.h"
#include "web/search_slots.h"

namespace paratune::web {

inline constexpr const char* kPlanRequestSchema = "paratune.plan_request/v1";

// A plan request: the predict request's job (model, cluster, gpus, training)
// with `gpus` also a range "A:B[:STEP]" as in `plan --gpus`, and the search
// options of `paratune plan` as keys: space, objective, top, fix (a string
// "pp=1,zero=3" or an object {"pp": 1}), pareto, explain is not offered.
struct PlanRequest {
  Json job;                     // the request without the search keys, "gpus" removed
  std::vector<int> gpu_counts;  // one or more, ascending
  planner::SearchOptions options;
  bool space_named = false;      // the request gave "space"
  bool framework_named = false;  // the request gave training.framework (search only it)
  Json profile;  // null = cached by fingerprint; string = a cached profile's
                 // cluster fingerprint; object = an inline paratune.profile/v1
};

// Parses a plan request. Errors are kInvalidArgument naming a JSON pointer.
Result<PlanRequest> ParsePlanRequest(const Json& j);

// "N", "A:B" (doubling) or "A:B:STEP" → GPU counts (at most `max_counts`),
// exactly as `paratune plan --gpus`.
Result<std::vector<int>> ParseGpuCounts(const std::string& spec, const std::string& pointer,
                                        int max_counts = 64);

// Profiles in <cache_dir>/profiles, parsed once and re-read when the file's
// modification time or size changes. Thread-safe.
class ProfileStore {
 public:
  explicit ProfileStore(std::string cache_dir) : dir_(std::move(cache_dir)) {}
  // The profile cached for a cluster fingerprint; nullopt when there is none.
  Result<std::optional<std::shared_ptr<const profiler::Profile>>> Get(
      const std::string& cluster_fingerprint);
  // Every cached profile: (cluster fingerprint from the file name, the profile
  // or why it could not be read), sorted by name. kIoError when the folder
  // exists but cannot be listed.
  using Listed = std::pair<std::string, Result<std::shared_ptr<const profiler::Profile>>>;
  Result<std::vector<Listed>> List();
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    int64_t mtime_ns = 0;
    int64_t size = 0;
    std::shared_ptr<const profiler::Profile> profile;
  };
  std::string dir_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

// A bounded least-recently-used map from a key to a served document, with
// each entry's owner (the client that caused it, web/peer.h). When full, the
// owner holding the most entries loses its least recently used one, so one
// client filling the cache flushes its own documents, not its neighbours'.
// Thread-safe.
class DocumentCache {
 public:
  explicit DocumentCache(size_t capacity) : capacity_(capacity) {}
  std::shared_ptr<const std::string> Get(const std::string& key);
  void Put(const std::string& key, std::shared_ptr<const std::string> doc,
           const std::string& owner = "");
  void Clear();
  size_t CountOwnedBy(const std::string& owner) const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const std::string> doc;
    std::string owner;
  };
  void EvictOneLocked(const std::string& inserting);
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  std::map<std::string, size_t> per_owner_;
};

struct PlanServiceOptions {
  std::string cache_dir;            // profiles are read from <cache_dir>/profiles
  int search_threads = 2;           // worker threads per search
  int max_concurrent_searches = 2;  // searches running at once; others wait
  int max_waiting_per_client = 2;   // a client's searches waiting for a slot (more: 429)
  int max_waiting_searches = 8;     // all searches waiting for a slot (more: 429); keeps
                                    // the front end's workers free for cached plans
  double slot_quantum_s = 0.25;     // a search yields its slot to a waiting client after this
  // Searches (and their set-up) run under SCHED_IDLE / nice +10, on the
  // cores cached plans and probes leave idle. `paratune serve` turns it on;
  // off, they run at the service's own priority (tests, embedding).
  bool idle_priority = false;
  double search_time_limit_s = 30;  // a plan request (set-up, slot wait, search) still
                                    // running this long after it arrived fails (kTimeout)
  double queue_wait_limit_s = 10;   // waiting for a search slot longer fails (kUnavailable)
  size_t cache_entries = 256;       // plans documents kept (least recently used evicted)
  int max_gpus = 1 << 17;           // largest GPU count (and added nodes) accepted
  int max_top = 1000;               // most candidates one request may ask for
};

// A served document: the JSON text and whether it came from the cache.
struct Served {
  std::shared_ptr<const std::string> body;
  bool cache_hit = false;
};

class PlanService {
 public:
  explicit PlanService(PlanServiceOptions options);

  // POST /v1/predict: a paratune.prediction/v1 document. `profile` as in
  // PlanRequest ("profile" key of the body). Errors name the field. A body
  // with a "network" key is a network job (planner/network_request.h),
  // answered with paratune.network_prediction/v1 (and by Plan with
  // paratune.network_plans/v1).
  Result<std::string> Predict(const Json& request);
  // POST /v1/plans: a paratune.plans/v1 document (compact JSON). A search over
  // the time limit fails with kTimeout naming the limit. `raw_body` (the bytes
  // `request` was parsed from, optional) is remembered for LookupBody.
  // With options.idle_priority, runs on a thread of its own at idle
  // priority, so a search never takes a core from a cached plan or a probe.
  // `client` (web/peer.h) gets its fair share of the search slots
  // (web/search_slots.h) and owns the cache entries it causes; `refusal`
  // says why a slot was refused (kClientShare/kQueueFull: 429).
  Result<Served> Plan(const Json& request, const std::string& raw_body = "",
                      const Peer& client = Peer(""), SlotRefusal* refusal = nullptr);
  // The document for a body seen before, byte for byte, while no profile in
  // the cache directory changed: the fast path for scripts that repeat a
  // request, before any parsing. nullptr when unknown.
  std::shared_ptr<const std::string> LookupBody(const std::string& raw_body);

  // POST /v1/emit: candidate `rank` (default 1) of a plans document as the
  // configuration a framework takes (frameworks/emit.h), in `format` (default: the
  // plan's own framework). The body names the plans either as "plans" (a
  // paratune.plans/v1 document) or as "request" (a plan request, answered as
  // POST /v1/plans would, from the cache when it can). Returns the format's
  // name and the text. Errors name the JSON pointer; a plan the framework would
  // reject is kInvalidArgument saying which rule.
  Result<std::pair<std::string, std::string>> Emit(const Json& body,
                                                   const Peer& client = Peer(""));

  // POST /v1/replans: planner::ReplanDocument on the service's search threads,
  // under the same slot queue and time limit as POST /v1/plans (kTimeout past
  // it, kUnavailable when every slot stays busy). Returns the
  // paratune.replan/v1 document (compact JSON). Errors name the JSON pointer.
  Result<std::string> Replan(const Json& request, const Peer& client = Peer(""),
                             SlotRefusal* refusal = nullptr);

  ProfileStore& profiles() { return profiles_; }
  // Drops every cached plans document (a profile was added or replaced).
  void InvalidateCache();

 private:
  // Applies the profile selected by `profile` (see PlanRequest) to `cluster`.
  // Returns the applied profile's fingerprint ("" = none).
  Result<std::string> ApplyProfileTo(const Json& profile, topology::ClusterSpec* cluster);
  // A network job request, with this service's GPU limit.
  Result<planner::NetworkJob> NetworkJobFor(const Json& request) const;
  // Plan and Replan themselves, run by those on a lower-priority thread.
  Result<Served> PlanNow(const Json& request, const std::string& raw_body,
                         const Peer& client, SlotRefusal* refusal);
  Result<std::string> ReplanNow(const Json& request, const Peer& client,
                                SlotRefusal* refusal);
  // kTimeout naming the time limit and how to narrow the request.
  Status TooLate() const;
  // Runs `search` on search_threads threads until `deadline` (kTimeout past
  // it), yielding `ticket`'s slot between shards when another client waits.
  Result<planner::SearchResult> RunSearch(const planner::Search& search,
                                          std::chrono::steady_clock::time_point deadline,
                                          SearchSlots::Ticket& ticket);

  PlanServiceOptions options_;
  ProfileStore profiles_;
  SearchSlots slots_;

  // Key for the byte-for-byte cache: the body and the modification time of
  // <cache_dir>/profiles (atomic renames of profiles change it).
  std::string BodyKey(const std::string& raw_body) const;

  DocumentCache by_request_;  // canonical request + applied profile fingerprints
  DocumentCache by_body_;     // raw body + profiles folder generation
};

// The deepest nesting of arrays and objects in `text`, counting brackets
// outside strings; stops counting once `limit` is passed. Lets the service
// refuse pathological bodies before a recursive consumer sees them.
int JsonNestingDepth(std::string_view text, int limit);

}  // namespace paratune::web
