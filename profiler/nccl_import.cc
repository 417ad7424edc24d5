#include "profiler/nccl_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "common/json.h"
#include "common/strings.h"
#include "profiler/nccl_format.h"

namespace paratune::profiler {

using topology::Collective;

namespace {

// One "#  Rank  3 Group  0 Pid 1234 on host device  3 [0000:..] NAME" line.
struct RankInfo {
  int rank = 0;
  int group = 0;
  std::string host;
  std::string device;
};

// One nccl-tests test (a table) while it is being read.
struct Section {
  std::string test_name;  // "all_reduce_perf", from "Collective test starting" / argv
  std::vector<RankInfo> ranks;
  bool per_iter = false;
  std::vector<SeriesRow> rows;
  std::string type, redop;
  double stated_avg = -1;
  std::string origin;
  int n_gpus_total = 0;  // nThread × nGpus from the parameter line (per process)
};

std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream ss(line);
  std::string t;
  while (ss >> t) out.push_back(t);
  return out;
}

bool IsInteger(const std::string& t) {
  if (t.empty()) return false;
  size_t i = (t[0] == '-') ? 1 : 0;
  if (i == t.size()) return false;
  for (; i < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
  }
  return true;
}

bool IsDate(const std::string& t) {  // 2024-01-31
  return t.size() == 10 && t[4] == '-' && t[7] == '-';
}
bool IsClock(const std::string& t) {  // 12:34:56
  return t.size() == 8 && t[2] == ':' && t[5] == ':';
}

Result<double> Number(const std::string& t, const std::string& where, const char* column) {
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
    return Status::ParseError(where + ": column '" + column + "' is not a number: '" + t + "'");
  }
  return v;
}

int ElementBytes(const std::string& type) {
  static const std::map<std::string, int> kBytes = {
      {"int8", 1},    {"uint8", 1},    {"char", 1},   {"f8e4m3", 1}, {"f8e5m2", 1}, {"half", 2},
      {"float16", 2}, {"bfloat16", 2}, {"int32", 4},  {"uint32", 4}, {"int", 4},    {"float", 4},
      {"float32", 4}, {"int64", 8},    {"uint64", 8}, {"double", 8}, {"float64", 8}};
  auto it = kBytes.find(type);
  return it == kBytes.end() ? 0 : it->second;
}

// Parses "Rank N [Group G] Pid P on HOST device D [bus] NAME..." (after '#').
bool ParseRankLine(const std::vector<std::string>& t, RankInfo* out) {
  if (t.size() < 2 || t[0] != "Rank" || !IsInteger(t[1])) return false;
  out->rank = std::atoi(t[1].c_str());
  size_t i = 2;
  if (i + 1 < t.size() && t[i] == "Group" && IsInteger(t[i + 1])) {
    out->group = std::atoi(t[i + 1].c_str());
    i += 2;
  }
  for (; i < t.size(); ++i) {
    if (t[i] == "on" && i + 1 < t.size()) out->host = t[i + 1];
    if (t[i] == "device" && i + 2 < t.size()) {
      // Skip the device number and the bus id in brackets; the rest is the name.
      size_t j = i + 2;
      if (j < t.size() && !t[j].empty() && t[j][0] == '[') {
        while (j < t.size() && t[j].back() != ']') ++j;
        ++j;
      }
      std::string name;
      for (; j < t.size(); ++j) name += (name.empty() ? "" : " ") + t[j];
      out->device = name;
      break;
    }
  }
  return true;
}

// The median busbw/algbw ratio of the rows precise enough to read it from
// (algbw ≥ 1 GB/s: the columns have two decimals); 0 when there are none.
double BusAlgRatio(const std::vector<SeriesRow>& rows) {
  std::vector<double> q;
  for (const SeriesRow& r : rows) {
    if (r.algbw_GBps >= 1.0 && r.busbw_GBps > 0 && r.wrong <= 0) q.push_back(r.busbw_GBps / r.algbw_GBps);
  }
  if (q.empty()) return 0;
  std::sort(q.begin(), q.end());
  return q[q.size() / 2];
}

// The collective of a section that names none, from its columns where they
// are unambiguous: busbw/algbw is 2(n-1)/n ≥ 1 for all_reduce, (n-1)/n < 1
// for reduce_scatter, all_gather and alltoall, 1 for sendrecv; the redop
// column tells reductions (sum, ...) from the rest ("none").
Result<std::string> CollectiveFromColumns(const Section& s) {
  const std::string unnamed = s.origin +
                              ": the log does not say which collective it measured (no "
                              "\"# Collective test starting\" line, and the file name does not "
                              "start with one)";
  const double q = BusAlgRatio(s.rows);
  if (!(q > 0)) {
    return Status::ParseError(unnamed +
                              " and no row is large enough to read busbw/algbw from; pass "
                              "--collective");
  }
  const bool reduces = !s.redop.empty() && s.redop != "none";
  const std::string ratio = "busbw/algbw = " + FormatFixed(q, 3);
  if (std::fabs(q - 1.0) < 0.01) {
    // nccl-tests prints redop "none" for sendrecv (2.13 on); all_reduce on 2
    // ranks has the same ratio but a reduction, as older sendrecv builds print.
    if (!reduces) return std::string("sendrecv");
    return Status::ParseError(unnamed + ": " + ratio +
                              " with a reduction fits all_reduce on 2 ranks and older "
                              "sendrecv builds alike; pass --collective");
  }
  if (q > 1.0) {
    if (reduces) return std::string("all_reduce");
    return Status::ParseError(unnamed + ": " + ratio + " is all_reduce's, but redop is '" +
                              s.redop + "'; pass --collective");
  }
  if (reduces) return std::string("reduce_scatter");
  return Status::ParseError(unnamed + ": " + ratio +
                            " without a reduction fits all_gather and alltoall alike; pass "
                            "--collective all_gather or --collective alltoall");
}

// The group size from the busbw/algbw ratio of the most precise rows.
int GroupSizeFromRatios(Collective c, const std::vector<SeriesRow>& rows) {
  std::vector<double> ns;
  for (const SeriesRow& r : rows) {
    if (r.algbw_GBps < 1.0 || r.busbw_GBps <= 0) continue;
    const double q = r.busbw_GBps / r.algbw_GBps;
    double n = 0;
    if (c == Collective::kAllReduce && q < 2.0) n = 2.0 / (2.0 - q);
    if ((c == Collective::kAllGather || c == Collective::kReduceScatter ||
         c == Collective::kAllToAll) &&
        q < 1.0) {
      n = 1.0 / (1.0 - q);
    }
    if (n >= 1.5) ns.push_back(n);
  }
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  return static_cast<int>(std::lround(ns[ns.size() / 2]));
}

// "all_reduce" when the file's base name starts with a collective's name
// ("all_reduce_8xA100.log", "alltoall-64n.txt"), else "".
std::string CollectiveFromFileName(const std::string& path) {
  std::string base = path;
  const size_t slash = base.find_last_of('/');
  if (slash != std::string::npos) base = base.substr(slash + 1);
  for (const char* c : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"}) {
    if (base.rfind(c, 0) == 0) return c;
  }
  return "";
}

// Turns a finished section into a series: collective, group size, tier, concurrency.
// `file_name` is the last resort for the collective's name.
Status FinishSection(const Section& s, const ImportOptions& options, const std::string& file_name,
                     ImportResult* out) {
  if (s.rows.empty()) return Status::Ok();
  CollectiveSeries series;
  series.origin = s.origin;
  series.dtype = s.type;
  series.redop = s.redop;
  series.stated_avg_busbw_GBps = s.stated_avg;
  // The collective: the test's name, else the caller's word.
  std::string name = !s.test_name.empty() ? s.test_name : options.collective;
  if (name.empty()) {
    name = CollectiveFromFileName(file_name);
    if (!name.empty()) {
      out->warnings.push_back(s.origin + ": the log does not name its test; " + name +
                              " taken from the file name");
    }
  }
  if (name.empty()) {
    PT_ASSIGN_OR_RETURN(name, CollectiveFromColumns(s));
    out->warnings.push_back(s.origin + ": the log does not name its test; " + name +
                            " read from the redop and busbw/algbw columns");
  }
  PT_ASSIGN_OR_RETURN(series.collective, CollectiveFromTestName(name));
  const Collective c = series.collective;

  // Ranks and groups from the device lines.
  std::map<int, std::vector<const RankInfo*>> groups;
  std::set<int> seen;
  for (const RankInfo& r : s.ranks) {
    if (seen.insert(r.rank).second) groups[r.group].push_back(&r);
  }
  int n = 0;
  const int listed = groups.empty() ? 0 : static_cast<int>(groups.begin()->second.size());
  if (listed >= 2 && options.ranks > 0 && options.ranks != listed) {
    return Status::ParseError(s.origin + ": the log lists " + std::to_string(listed) +
                              " ranks per group, --ranks says " + std::to_string(options.ranks));
  }
  if (listed >= 2) {
    n = listed;
    for (const auto& [g, members] : groups) {
      if (static_cast<int>(members.size()) != n) {
        return Status::ParseError(s.origin +
                                  ": groups of different sizes (NCCL_TESTS_SPLIT) are "
                                  "not supported");
      }
    }
  } else if (options.ranks > 0) {
    n = options.ranks;  // a fragment pasted without its device lines: the caller says
  } else {
    // A fragment: at most one "#  Rank" line (a paste from one rank's output).
    n = GroupSizeFromRatios(c, s.rows);
    if (n == 0 && s.n_gpus_total > 1) n = s.n_gpus_total;
    if (n < 2) {
      return Status::ParseError(
          s.origin + ": cannot tell the group size (" +
          (listed == 1 ? std::string("one \"#  Rank\" line") : std::string("no \"#  Rank\" lines")) +
          " and no busbw/algbw ratio to read it from" +
          (c == Collective::kSendRecv ? ": sendrecv's is 1 at any size" : "") +
          "); pass --ranks N");
    }
    out->warnings.push_back(s.origin + ": " +
                            (listed == 1 ? "one device line" : "no device lines") +
                            "; group size " + std::to_string(n) +
                            " read from busbw/algbw, tier assumed intra_node");
  }
  if (n < 2) return Status::ParseError(s.origin + ": a collective over one rank cannot be fitted");
  series.group_size = n;
  series.groups = std::max<int>(1, static_cast<int>(groups.size()));
  // Tier and sharing: a group whose members sit on several hosts is inter-node;
  // the instances that share one host share its NICs.
  bool inter = false;
  std::map<std::string, std::set<int>> groups_on_host;
  for (const auto& [g, members] : groups) {
    std::set<std::string> hosts;
    for (const RankInfo* r : members) {
      hosts.insert(r->host);
      groups_on_host[r->host].insert(g);
    }
    inter = inter || hosts.size() > 1;
  }
  series.tier = inter ? topology::Tier::kInterNode : topology::Tier::kIntraNode;
  for (const auto& [h, gs] : groups_on_host) {
    series.concurrent_groups = std::max(series.concurrent_groups, static_cast<int>(gs.size()));
  }
  if (!groups.empty()) {
    std::vector<int> ranks;
    for (const RankInfo* r : groups.begin()->second) ranks.push_back(r->rank);
    std::sort(ranks.begin(), ranks.end());
    int stride = ranks.size() > 1 ? ranks[1] - ranks[0] : 1;
    for (size_t i = 2; i < ranks.size(); ++i) {
      if (ranks[i] - ranks[i - 1] != stride) stride = 1;
    }
    series.stride = std::max(1, stride);
  }
  // Rows: drop those with wrong results; check busbw against the factor.
  const int elem = ElementBytes(s.type);
  bool warned_bw = false, warned_count = false;
  for (const SeriesRow& r : s.rows) {
    if (r.wrong > 0) {
      out->warnings.push_back(s.origin + ": size " + std::to_string(r.size_bytes) +
                              " skipped: " + std::to_string(r.wrong) + " wrong elements");
      continue;
    }
    if (r.algbw_GBps >= 0.1 && !warned_bw) {
      const double expected = BusBwGBps(c, n, r.algbw_GBps);
      if (std::fabs(r.busbw_GBps - expected) > std::max(0.02 * expected, 0.011)) {
        out->warnings.push_back(s.origin + ": busbw " + FormatFixed(r.busbw_GBps, 2) + " at size " +
                                std::to_string(r.size_bytes) + " differs from algbw × factor (" +
                                FormatFixed(expected, 2) + ") for " + std::to_string(n) + " ranks");
        warned_bw = true;
      }
    }
    if (elem > 0 && !warned_count && r.size_bytes > 0 &&
        CountsFor(c, r.size_bytes, elem, n).count != r.count) {
      out->warnings.push_back(s.origin + ": count " + std::to_string(r.count) + " at size " +
                              std::to_string(r.size_bytes) + " is not what " +
                              topology::CollectiveName(c) + " on " + std::to_string(n) +
                              " ranks moves");
      warned_count = true;
    }
    series.rows.push_back(r);
  }
  out->series.push_back(std::move(series));
  return Status::Ok();
}

void RecordDevices(const Section& s, ImportResult* out) {
  if (!out->hosts.empty() || s.ranks.empty()) return;
  std::map<int, const RankInfo*> by_rank;
  for (const RankInfo& r : s.ranks) by_rank.emplace(r.rank, &r);
  for (const auto& [rank, r] : by_rank) out->hosts.push_back(r->host);
  out->device = by_rank.begin()->second->device;
}

}  // namespace

Result<Collective> CollectiveFromTestName(const std::string& raw) {
  std::string name = raw;
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  for (const char* suffix : {"_mpi", "_perf"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      name.resize(name.size() - s.size());
    }
  }
  if (name == "all_reduce" || name == "allreduce") return Collective::kAllReduce;
  if (name == "all_gather" || name == "allgather") return Collective::kAllGather;
  if (name == "reduce_scatter" || name == "reducescatter") return Collective::kReduceScatter;
  if (name == "alltoall" || name == "all_to_all") return Collective::kAllToAll;
  if (name == "sendrecv" || name == "send_recv") return Collective::kSendRecv;
  return Status::InvalidArgument("'" + raw +
                                 "' is not a collective paratune models (all_reduce, "
                                 "all_gather, reduce_scatter, alltoall, sendrecv)");
}

Result<ImportResult> ParseNcclTestsText(const std::string& text, const std::string& name,
                                        const ImportOptions& options) {
  ImportResult out;
  Section cur;
  int line_no = 0;
  auto finish = [&]() -> Status {
    RecordDevices(cur, &out);
    Status st = FinishSection(cur, options, name, &out);
    Section next;
    next.ranks = cur.rows.empty() ? cur.ranks : std::vector<RankInfo>{};
    next.test_name = cur.rows.empty() ? cur.test_name : "";
    cur = next;
    return st;
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = name + ":" + std::to_string(line_no);
    const std::string trimmed = Trim(line);
    if (trimmed.empty()) continue;
    if (trimmed[0] == '#') {
      const std::string body = Trim(trimmed.substr(1));
      const std::vector<std::string> t = Tokens(body);
      if (t.empty()) continue;
      if (body.rfind("nccl-tests version", 0) == 0) {
        if (t.size() >= 3) out.nccl_tests_version = t[2];
        for (const std::string& tok : t) {
          if (tok.rfind("nccl-library=", 0) == 0) out.nccl_version = tok.substr(13);
        }
      } else if (body.rfind("Collective test starting:", 0) == 0) {
        if (!cur.rows.empty()) PT_RETURN_IF_ERROR(finish());
        cur.test_name = t.back();
        cur.origin = where;
      } else if (body.rfind("Collective test concluded:", 0) == 0) {
        PT_RETURN_IF_ERROR(finish());
      } else if (t[0] == "nThread") {
        // Older releases start each test here (no "starting" line).
        if (!cur.rows.empty()) PT_RETURN_IF_ERROR(finish());
        int threads = 1, gpus = 1;
        for (size_t i = 0; i + 1 < t.size(); ++i) {
          if (t[i] == "nThread" && IsInteger(t[i + 1])) threads = std::atoi(t[i + 1].c_str());
          if (t[i] == "nGpus" && IsInteger(t[i + 1])) gpus = std::atoi(t[i + 1].c_str());
        }
        cur.n_gpus_total = threads * gpus;
        if (cur.origin.empty()) cur.origin = where;
      } else if (t[0] == "Rank") {
        RankInfo r;
        if (ParseRankLine(t, &r)) cur.ranks.push_back(r);
      } else if (AsciiLower(body).find("per-iteration") != std::string::npos) {
        cur.per_iter = true;
      } else if (body.rfind("Avg bus bandwidth", 0) == 0) {
        const size_t colon = body.find(':');
        if (colon != std::string::npos) {
          std::vector<std::string> v = Tokens(body.substr(colon + 1));
          if (!v.empty()) {
            PT_ASSIGN_OR_RETURN(cur.stated_avg, Number(v[0], where, "Avg bus bandwidth"));
          }
        }
      }
      continue;
    }
    if (trimmed.find("Test failure") != std::string::npos ||
        trimmed.find("Test NCCL failure") != std::string::npos ||
        trimmed.find("Test CUDA failure") != std::string::npos) {
      return Status::ParseError(where + ": the log reports a failed test: " + trimmed);
    }
    std::vector<std::string> t = Tokens(trimmed);
    if (t.empty() || !IsInteger(t[0])) continue;  // NCCL INFO lines and other chatter
    if (t.size() >= 2 && IsDate(t[t.size() - 2]) && IsClock(t.back())) t.resize(t.size() - 2);
    size_t sets = 0, per_set = 4;
    if (t.size() == 9) {
      sets = 1;
    } else if (t.size() == 13) {
      sets = cur.per_iter ? 1 : 2;
      per_set = cur.per_iter ? 8 : 4;
    } else if (t.size() == 21) {
      sets = 2;
      per_set = 8;
    } else {
      return Status::ParseError(where +
                                ": a data row needs 9, 13 or 21 columns (size count type "
                                "redop root, then time algbw busbw #wrong per column group), got " +
                                std::to_string(t.size()) + ": '" + trimmed + "'");
    }
    if (!IsInteger(t[1]) || !IsInteger(t[4])) {
      return Status::ParseError(where + ": size, count and root must be integers: '" + trimmed +
                                "'");
    }
    SeriesRow row;
    row.size_bytes = std::atoll(t[0].c_str());
    row.count = std::atoll(t[1].c_str());
    if (cur.type.empty()) {
      cur.type = t[2];
      cur.redop = t[3];
    }
    const size_t set = (options.in_place && sets == 2) ? 1 : 0;
    const size_t base = 5 + set * per_set;
    PT_ASSIGN_OR_RETURN(row.time_us, Number(t[base], where, "time"));
    PT_ASSIGN_OR_RETURN(row.algbw_GBps, Number(t[base + 1], where, "algbw"));
    PT_ASSIGN_OR_RETURN(row.busbw_GBps, Number(t[base + 2], where, "busbw"));
    if (t[base + 3] == "N/A") {
      row.wrong = -1;
    } else {
      PT_ASSIGN_OR_RETURN(double w, Number(t[base + 3], where, "#wrong"));
      row.wrong = static_cast<int64_t>(w);
    }
    if (!(row.time_us > 0)) {
      return Status::ParseError(where + ": time must be positive: '" + trimmed + "'");
    }
    if (cur.origin.empty()) cur.origin = where;
    cur.rows.push_back(row);
  }
  PT_RETURN_IF_ERROR(finish());
  if (out.series.empty()) {
    return Status::ParseError(name + ": no nccl-tests data rows found");
  }
  return out;
}

Result<ImportResult> ParseNcclTestsJson(const std::string& text, const std::string& name,
                                        const ImportOptions& options) {
  PT_ASSIGN_OR_RETURN(Json j, ParseJson(text, name));
  if (!j.is_object()) return Status::ParseError(name + ": the nccl-tests JSON must be an object");
  if (!j.contains("results") || !j["results"].is_array()) {
    return Status::ParseError(name + ": no \"results\" array (is this an nccl-tests -J file?)");
  }
  ImportResult out;
  Section s;
  s.origin = name;
  if (j.contains("nccl_version") && j["nccl_version"].is_number_integer()) {
    out.nccl_version = std::to_string(j["nccl_version"].get<int64_t>());
  }
  if (j.contains("args") && j["args"].is_array() && !j["args"].empty() &&
      j["args"][0].is_string()) {
    std::string argv0 = j["args"][0].get<std::string>();
    if (CollectiveFromTestName(argv0).ok()) s.test_name = argv0;
  }
  const Json* devices = nullptr;
  if (j.contains("config") && j["config"].is_object() && j["config"].contains("devices")) {
    devices = &j["config"]["devices"];
  } else if (j.contains("devices")) {
    devices = &j["devices"];
  }
  if (devices && devices->is_array()) {
    for (size_t i = 0; i < devices->size(); ++i) {
      const Json& d = (*devices)[i];
      const std::string where = name + ": /config/devices/" + std::to_string(i);
      if (!d.is_object() || !d.contains("rank") || !d["rank"].is_number_integer()) {
        return Status::ParseError(where + ": needs an integer \"rank\"");
      }
      RankInfo r;
      r.rank = d["rank"].get<int>();
      if (d.contains("group") && d["group"].is_number_integer()) r.group = d["group"].get<int>();
      if (d.contains("hostname") && d["hostname"].is_string())
        r.host = d["hostname"].get<std::string>();
      if (d.contains("device_info") && d["device_info"].is_string()) {
        r.device = d["device_info"].get<std::string>();
      }
      s.ranks.push_back(r);
    }
  }
  const Json& results = j["results"];
  for (size_t i = 0; i < results.size(); ++i) {
    const Json& r = results[i];
    const std::string where = name + ": /results/" + std::to_string(i);
    if (!r.is_object()) return Status::ParseError(where + ": must be an object");
    auto int_field = [&](const char* key, int64_t* v) -> Status {
      if (!r.contains(key) || !r[key].is_number_integer()) {
        return Status::ParseError(where + "/" + key + ": must be an integer");
      }
      *v = r[key].get<int64_t>();
      return Status::Ok();
    };
    SeriesRow row;
    PT_RETURN_IF_ERROR(int_field("size", &row.size_bytes));
    PT_RETURN_IF_ERROR(int_field("count", &row.count));
    if (s.type.empty()) {
      if (r.contains("type") && r["type"].is_string()) s.type = r["type"].get<std::string>();
      if (r.contains("redop") && r["redop"].is_string()) s.redop = r["redop"].get<std::string>();
    }
    if (s.test_name.empty() && r.contains("experiment_name") && r["experiment_name"].is_string() &&
        CollectiveFromTestName(r["experiment_name"].get<std::string>()).ok()) {
      s.test_name = r["experiment_name"].get<std::string>();
    }
    const char* which = options.in_place ? "in_place" : "out_of_place";
    const Json* set = r.contains(which) && r[which].is_object() ? &r[which] : nullptr;
    if (!set && r.contains("in_place") && r["in_place"].is_object())
      set = &r["in_place"];  // replay
    if (!set) return Status::ParseError(where + ": has neither out_of_place nor in_place results");
    const std::string sp = where + "/" + (set == &r["in_place"] ? "in_place" : "out_of_place");
    auto num = [&](const char* key, double* v) -> Status {
      if (!set->contains(key) || !(*set)[key].is_number()) {
        return Status::ParseError(sp + "/" + key + ": must be a number");
      }
      *v = (*set)[key].get<double>();
      return Status::Ok();
    };
    if (set->contains("time")) {
      PT_RETURN_IF_ERROR(num("time", &row.time_us));
    } else {
      PT_RETURN_IF_ERROR(num("cpu_time", &row.time_us));
    }
    PT_RETURN_IF_ERROR(num("alg_bw", &row.algbw_GBps));
    PT_RETURN_IF_ERROR(num("bus_bw", &row.busbw_GBps));
    row.wrong = -1;
    if (set->contains("nwrong") && (*set)["nwrong"].is_number()) {
      row.wrong = static_cast<int64_t>((*set)["nwrong"].get<double>());
    }
    if (!(row.time_us > 0)) return Status::ParseError(sp + "/time: must be positive");
    s.rows.push_back(row);
  }
  if (j.contains("average_bus_bandwidth") && j["average_bus_bandwidth"].is_object() &&
      j["average_bus_bandwidth"].contains("bandwidth") &&
      j["average_bus_bandwidth"]["bandwidth"].is_number()) {
    s.stated_avg = j["average_bus_bandwidth"]["bandwidth"].get<double>();
  }
  if (j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
    return Status::ParseError(name + ": the run reports errors: " + j["errors"].dump());
  }
  RecordDevices(s, &out);
  PT_RETURN_IF_ERROR(FinishSection(s, options, name, &out));
  if (out.series.empty()) return Status::ParseError(name + ": no results");
  return out;
}

Result<ImportResult> ImportNcclTestsFile(const std::string& path, const ImportOptions& options) {
  PT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{')
    return ParseNcclTestsJson(text, path, options);
  return ParseNcclTestsText(text, path, options);
}

}  // namespace paratune::profiler
