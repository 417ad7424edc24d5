// `paratune replan`: the next best plan when nodes fail or capacity appears,
// and the reshard map from the running layout to it (docs/replan.md).
#include <algorithm>
#include <iomanip>
#include <ostream>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/strings.h"
#include "elastic/network_replan.h"
#include "elastic/replan.h"
#include "planner/network_request.h"

namespace paratune::cli {
namespace {

constexpr const char* kReplanHelp = R"(usage: paratune replan --from FILE [--rank N]
                       (--gpus N | --lost-nodes K | --lost-node-ids 3,7 | --add-nodes K)
                       [--keep-global-batch | --allow-global-batch-change]
                       [--space F] [--fix SPEC] [--top K] [--min-gpus N] [--gpu-step S]
                       [--max-counts C] [--fs-GBps BW] [--reshard-rank N]
                       [--repair-h H] [--restart-min M]
                       [--fragments-of RANK|all] [--include-gradients]
                       [--profile PROFILE.json] [--threads T] [--format table|json]

Answers "three nodes died (or sixty GPUs came free): what now?". Takes the
running configuration, searches every configuration on the GPUs now
available, ranks the ones that fit by throughput against the running one, and
computes how the saved state must be re-sharded to reach the chosen one: for
every tensor (QKV, projection, FC1, FC2, norms, embeddings) and every state
(bf16/fp16 params, fp32 master, Adam m and v), which old rank holds each
fragment the new ranks need, as [row, col) ranges of the unsharded tensor
(Universal Checkpointing's consolidated coordinates), and the predicted time
to load it from a consolidated checkpoint versus from the surviving ranks.

  --from FILE        the running state: a plans document (paratune plan --format
                     json; --rank picks the candidate, default 1; its --space and
                     --fix are kept) or a predict request (model, cluster, gpus,
                     training, config). "-" reads stdin.
  --gpus N           GPUs now available in total (fewer: the highest-numbered are gone)
  --lost-nodes K     the last K nodes of the run are gone
  --lost-node-ids L  these nodes (0-based, rank r ran on node r / gpus_per_node) are gone
  --add-nodes K      K more nodes joined
  --keep-global-batch          keep the global batch (the default)
  --allow-global-batch-change  also try the batch rounded to the new data width;
                     a change is reported on stderr and in "global_batch_changed"
  --min-gpus N       also search whole-node counts down to N (default: half of
                     what is available): an odd GPU count often fits nothing
  --gpu-step S       step between those counts (default: one node)
  --max-counts C     stop after C counts with a fitting plan (default 3)
  --space, --fix, --top, --threads, --profile   as in `paratune plan`
  --fs-GBps BW       parallel-filesystem read bandwidth the job gets, GB/s
                     (default 500: a tenth of Perlmutter scratch's >5 TB/s)
  --reshard-rank N   compute the reshard map for candidate N (default 1; 0 = none)
  --fragments-of R   list the fragments new rank R needs (default 0), or "all"
  --include-gradients  map gradients too (ZeRO-2/3 shard them; they are zeroed
                     after every step, so a checkpoint does not hold them)
  --repair-h H       after lost nodes: hours until they are back (default 4: an
                     assumption; OPT-175B's logbook says replacing one "can
                     take hours"). The table then prices this failure three
                     ways: continue now on the reshard candidate until the
                     nodes return, wait for them, or swap in hot spares; with
                     a plans document made with --tokens, also the days and
                     GPU-hours to its budget if every failure went this way
  --restart-min M    minutes from a failure to training again, before the load
                     (default 10: MegaScale's detection and diagnosis)
  --format F         table (default) | json (schema paratune.replan/v1)

exit codes: 0 ok, 2 invalid input, 3 no configuration fits

examples:
  paratune plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 --global-batch 1536 \
      --space megatron --format json > plans.json
  paratune replan --from plans.json --lost-nodes 3
  paratune replan --from plans.json --lost-nodes 3 --allow-global-batch-change --format json
)";

std::string GiB(double bytes) { return FormatFixed(bytes / (1024.0 * 1024 * 1024), 2); }

std::string Secs(const OrderedJson& v) { return v.is_null() ? "unreachable" : FormatFixed(v.get<double>(), 2) + " s"; }

// After lost nodes: this failure priced three ways (elastic/failure_policy.h).
void PrintContinueOrWait(const OrderedJson& c, std::ostream& out) {
  if (c.is_null()) return;
  const double repair_h = c["repair_s"].get<double>() / 3600;
  out << "\ncontinue or wait (nodes back after " << FormatFixed(repair_h, 1) << " h"
      << (c["repair_assumed"].get<bool>() ? ", assumed: --repair-h" : "") << "; restart "
      << FormatFixed(c["restart_s"].get<double>() / 60, 1) << " min + load):\n";
  const bool budget = !c["policies"].empty() && c["policies"][0].contains("time_to_train_days");
  for (const auto& p : c["policies"]) {
    const std::string name = p["name"].get<std::string>();
    out << "  " << std::left << std::setw(8) << name << std::right << std::setw(9)
        << FormatFixed(p["per_failure_min"].get<double>(), 1) << " min lost";
    if (name == "spare") out << " (" << p["spare_nodes"].get<int>() << " idle spare nodes held)";
    if (name == "shrink" && !c["shrink_to"].is_null()) {
      const auto& s = c["shrink_to"];
      out << " (on " << s["gpus"].get<int>() << " GPUs as " << s["config"].get<std::string>() << " at "
          << FormatFixed(100 * s["relative_tokens_per_s"].get<double>(), 1)
          << " % throughput, load " << FormatFixed(s["load_s"].get<double>(), 0) << " s)";
    }
    if (budget) {
      out << "; to the budget " << FormatFixed(p["time_to_train_days"].get<double>(), 2) << " days, "
          << FormatFixed(p["gpu_hours"].get<double>(), 0) << " GPU-hours";
    }
    out << "\n";
  }
  out << "  trains soonest: " << c["soonest"].get<std::string>();
  if (!c["fewest_gpu_hours"].is_null()) {
    out << "; fewest GPU-hours, spares included: " << c["fewest_gpu_hours"].get<std::string>();
  }
  out << "\n";
}

void PrintReplanTable(const OrderedJson& d, std::ostream& out) {
  const auto& from = d["from"];
  const auto& a = d["allocation"];
  out << "running   " << from["config_string"].get<std::string>() << " on " << a["old_gpus"].get<int>() << " GPUs: "
      << FormatFixed(from["prediction"]["iteration_time_s"].get<double>(), 3) << " s/step predicted ("
      << d["model"].get<std::string>() << ", " << d["cluster"].get<std::string>() << ", global batch "
      << from["global_batch"].get<int64_t>() << ")\n";
  out << "now       " << a["available_gpus"].get<int>() << " GPUs available";
  if (a["lost_gpus"].get<int>() > 0) {
    out << " (lost " << a["lost_gpus"].get<int>() << " GPUs on nodes";
    for (const auto& n : a["lost_nodes"]) out << " " << n.get<int>();
    out << ")";
  }
  if (a["added_gpus"].get<int>() > 0) out << " (" << a["added_gpus"].get<int>() << " GPUs added)";
  out << "\nsearched ";
  for (const auto& s : d["searched"]) {
    out << " " << s["gpus"].get<int>() << (s["global_batch"] != from["global_batch"] ? "@B=" + std::to_string(s["global_batch"].get<int64_t>()) : "")
        << ":" << s["feasible"].get<int64_t>();
  }
  out << "  (GPUs:fitting configs)\n";
  if (const auto& s = d["same_layout_with_batch_change"]; !s.is_null()) {
    out << "the running layout keeps " << s["gpus"].get<int>() << " GPUs at global batch "
        << s["global_batch"].get<int64_t>() << " (" << FormatFixed(s["relative_tokens_per_s"].get<double>(), 3)
        << "x tokens/s): --allow-global-batch-change ranks it\n";
  }
  if (d["candidates"].empty()) {
    out << "no configuration fits\n";
    return;
  }
  out << "\n" << std::setw(4) << "rank" << std::setw(6) << "gpus" << "  " << std::left << std::setw(52) << "config"
      << std::right << std::setw(9) << "time_s" << std::setw(10) << "vs_now" << std::setw(11) << "tokens/s"
      << std::setw(7) << "MFU%" << std::setw(9) << "mem_GiB" << "  batch\n";
  bool any_same = false;
  for (const auto& c : d["candidates"]) {
    const auto& p = c["prediction"];
    const bool same = c["keeps_layout"].get<bool>();
    any_same = any_same || same;
    out << std::setw(3) << c["rank"].get<int>() << (same ? "=" : " ") << std::setw(6) << c["gpus"].get<int>() << "  " << std::left
        << std::setw(52) << c["config_string"].get<std::string>() << std::right << std::setw(9)
        << FormatFixed(p["iteration_time_s"].get<double>(), 3) << std::setw(9)
        << FormatFixed(c["relative_step_time"].get<double>(), 3) << "x" << std::setw(11)
        << FormatFixed(p["tokens_per_s"].get<double>(), 0) << std::setw(7) << FormatFixed(100 * p["mfu"].get<double>(), 1)
        << std::setw(9) << FormatFixed(p["memory_GiB"]["reserved"].get<double>(), 1) << "  "
        << c["global_batch"].get<int64_t>() << (c["global_batch_changed"].get<bool>() ? " (CHANGED)" : "") << "\n";
  }
  if (any_same) {
    out << "= the running layout with fewer data-parallel replicas: ranked first unless another "
           "is faster by more than its uncertainty band\n";
  }
  if (d["reshard"].is_null()) return;
  const auto& r = d["reshard"];
  out << "\nreshard to candidate " << d["reshard_candidate"].get<int>() << ": " << GiB(r["total_bytes"].get<double>())
      << " GiB to place, at most " << GiB(r["bytes_per_rank_max"].get<double>()) << " GiB per rank, "
      << r["fragment_count"].get<int64_t>() << " fragments\n";
  out << "  partitions  from";
  for (auto& [k, v] : r["from"]["partition"].items()) out << " " << k << "=" << v.get<std::string>();
  out << "\n              to  ";
  for (auto& [k, v] : r["to"]["partition"].items()) out << " " << k << "=" << v.get<std::string>();
  out << "\n  " << std::left << std::setw(12) << "class" << std::right;
  std::vector<std::string> states;
  for (auto& [k, v] : r["bytes_per_element"].items()) states.push_back(k);
  for (const auto& s : states) out << std::setw(12) << s;
  out << std::setw(12) << "total" << "   (GiB)\n";
  for (const auto& row : r["by_class"]) {
    out << "  " << std::left << std::setw(12) << row["class"].get<std::string>() << std::right;
    for (const auto& s : states) out << std::setw(12) << GiB(row[s + "_bytes"].get<double>());
    out << std::setw(12) << GiB(row["total_bytes"].get<double>()) << "\n";
  }
  const auto& ck = r["load"]["checkpoint"];
  const auto& pp = r["load"]["peer_to_peer"];
  out << "  load from a consolidated checkpoint: " << Secs(ck["time_s"]) << " (" << GiB(ck["bytes"].get<double>())
      << " GiB read at " << FormatFixed(ck["fs_GBps"].get<double>(), 0) << " GB/s; bound by "
      << ck["bottleneck"].get<std::string>() << ")\n";
  out << "  load peer-to-peer from survivors:    " << Secs(pp["time_s"]) << " (local "
      << GiB(pp["local_bytes"].get<double>()) << ", intra-node " << GiB(pp["intra_node_bytes"].get<double>())
      << ", inter-node " << GiB(pp["inter_node_bytes"].get<double>()) << ", from checkpoint "
      << GiB(pp["checkpoint_fallback_bytes"].get<double>()) << " GiB; bound by " << pp["bottleneck"].get<std::string>()
      << ")\n";
  if (!d["experts"].is_null()) {
    const auto& e = d["experts"];
    auto lay = [](const Json& l) {
      return std::to_string(l["ep"].get<int>()) + "x" + std::to_string(l["etp"].get<int>()) + "x" +
             std::to_string(l["edp"].get<int>());
    };
    const double bytes_per_param = d["reshard"]["bytes_per_element"]["param"].get<double>();
    out << "  routed experts (ep x etp x edp per stage " << lay(e["from"]) << " -> " << lay(e["to"])
        << "; not in the loads above): " << e["moe_layers"].get<int>() << " MoE layers, "
        << e["layers_changing_stage"].get<int>() << " change stage; "
        << GiB(e["params_moved"].get<double>() * bytes_per_param) << " of "
        << GiB(e["params_needed"].get<double>() * bytes_per_param) << " GiB of weights move, "
        << GiB(e["bytes_moved"].get<double>())
        << " GiB with their optimizer state; a rank reads at most "
        << GiB(e["max_rank_params_in"].get<double>() * bytes_per_param)
        << " GiB of weights; " << Secs(e["cross_node_s"])
        << " if every moved piece crossed nodes\n";
  }
  const auto& frags = r["fragments"];
  if (!frags.empty()) {
    const size_t show = std::min<size_t>(frags.size(), 12);
    out << "  fragments of new rank " << r["fragments_of"].dump() << " (" << show << " of " << frags.size()
        << "; --format json lists all):\n";
    for (size_t i = 0; i < show; ++i) {
      const auto& f = frags[i];
      out << "    " << std::left << std::setw(30) << f["tensor"].get<std::string>() << std::setw(11)
          << f["state"].get<std::string>() << std::right << " rows [" << f["rows"][0].get<int64_t>() << ", "
          << f["rows"][1].get<int64_t>() << ") cols [" << f["cols"][0].get<int64_t>() << ", "
          << f["cols"][1].get<int64_t>() << ")  " << f["bytes"].get<int64_t>() << " B  from "
          << (f["old_rank"].is_null() ? std::string("checkpoint") : "rank " + std::to_string(f["old_rank"].get<int>()))
          << " (" << f["route"].get<std::string>() << ")\n";
    }
  }
}

// A network's run (elastic/network_replan.h): the flags that apply become its
// request; the transformer search's own flags are refused by name.
int ReplanNetwork(const Flags& flags, const Json& from, const std::string& format, Io io) {
  for (const char* f : {"--lost-node-ids", "--space", "--fix", "--min-gpus", "--gpu-step", "--max-counts", "--fs-GBps",
                        "--reshard-rank", "--fragments-of", "--profile", "--threads", "--repair-h", "--restart-min",
                        "--allow-global-batch-change", "--include-gradients"}) {
    if (flags.Has(f)) {
      return UsageError(io, "replan", Status::InvalidArgument(std::string(f) + " does not apply to a network's plans "
                                                                               "(its global batch is kept)"));
    }
  }
  Json req;
  req["from"] = from;
  for (auto [flag, key] : {std::pair{"--rank", "rank"}, {"--gpus", "gpus"}, {"--lost-nodes", "lost_nodes"},
                           {"--add-nodes", "add_nodes"}, {"--top", "top"}}) {
    if (auto v = flags.Get(flag)) {
      auto n = ParseInt(*v, flag);
      if (!n.ok()) return UsageError(io, "replan", n.status());
      req[key] = *n;
    }
  }
  auto doc = planner::NetworkReplanDocument(req);
  if (!doc.ok()) return UsageError(io, "replan", doc.status());
  if (format == "json") {
    io.out << doc->dump(2) << "\n";
  } else {
    const OrderedJson& run = (*doc)["running"];
    io.out << (*doc)["network"].get<std::string>() << ", global batch " << (*doc)["global_batch"].get<int64_t>()
           << ": running on " << run["gpus"].get<int>() << " GPUs at " << FormatFixed(run["step_s"].get<double>(), 4)
           << " s a step; " << (*doc)["available_gpus"].get<int>() << " GPUs available\n";
    io.out << std::setw(7) << "gpus" << std::setw(10) << "step_s" << std::setw(11) << "relative" << "  layout\n";
    for (const OrderedJson& c : (*doc)["counts"]) {
      io.out << std::setw(7) << c["gpus"].get<int>();
      if (c["plan"].is_null()) {
        io.out << "  no layout fits (" << c["refused_over_memory"].get<int>() << " over memory)\n";
        continue;
      }
      const OrderedJson& l = c["plan"]["layout"];
      io.out << std::setw(10) << FormatFixed(c["plan"]["step_s"].get<double>(), 4) << std::setw(10)
             << FormatFixed(c["relative_step_time"].get<double>(), 2) << "x  " << l["sharding"].get<std::string>()
             << " data " << l["data"].get<int>() << " spatial " << l["spatial"].get<int>() << " tensor "
             << l["tensor"].get<int>() << " micro " << l["micro_batch"].get<int64_t>() << " accumulation "
             << l["accumulation"].get<int64_t>() << "\n";
    }
    if (!(*doc)["plans"].is_null()) {
      io.out << "fastest: " << (*doc)["plans"]["job"]["gpus"].get<int>()
             << " GPUs; --format json holds its plans (paratune.network_plans/v1) for emit and confirm\n";
    }
  }
  return (*doc)["plans"].is_null() ? kExitNoFeasible : kExitOk;
}

}  // namespace

int RunReplan(const Args& args, Io io) {
  Flags flags({"--from", "--rank", "--gpus", "--lost-nodes", "--lost-node-ids", "--add-nodes", "--space", "--fix",
               "--top", "--min-gpus", "--gpu-step", "--max-counts", "--fs-GBps", "--reshard-rank", "--fragments-of",
               "--profile", "--threads", "--format", "--repair-h", "--restart-min"},
              {"--help", "--keep-global-batch", "--allow-global-batch-change", "--include-gradients"},
              {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "replan", kReplanHelp)) return *done;
  const std::string format = flags.GetOr("--format", "table");
  if (format != "table" && format != "json") {
    return UsageError(io, "replan", Status::InvalidArgument("--format must be table or json"));
  }
  if (flags.Has("--keep-global-batch") && flags.Has("--allow-global-batch-change")) {
    return UsageError(io, "replan",
                      Status::InvalidArgument("--keep-global-batch and --allow-global-batch-change exclude each other"));
  }
  auto path = flags.Get("--from");
  if (!path) return UsageError(io, "replan", Status::InvalidArgument("--from is required (a plans document or a predict request)"));
  auto from = LoadJsonArg(*path, "--from", io.in);
  if (!from.ok()) return UsageError(io, "replan", from.status());
  if (planner::IsNetworkPlans(*from)) {
    return ReplanNetwork(flags, *from, format, io);
  }

  // The flags become a replan request (the REST body), parsed by the library.
  Json req;
  req["from"] = *from;
  auto int_flag = [&](const char* flag, const char* key) -> Status {
    if (auto v = flags.Get(flag)) {
      auto n = ParseInt(*v, flag);
      if (!n.ok()) return n.status();
      req[key] = *n;
    }
    return Status::Ok();
  };
  for (auto [flag, key] : {std::pair{"--rank", "rank"}, {"--gpus", "gpus"}, {"--lost-nodes", "lost_nodes"},
                           {"--add-nodes", "add_nodes"}, {"--top", "top"}, {"--min-gpus", "min_gpus"},
                           {"--gpu-step", "gpu_step"}, {"--max-counts", "max_counts"},
                           {"--reshard-rank", "reshard_candidate"}}) {
    if (Status s = int_flag(flag, key); !s.ok()) return UsageError(io, "replan", s);
  }
  if (auto ids = flags.Get("--lost-node-ids")) {
    Json list = Json::array();
    for (const std::string& piece : Split(*ids, ',')) {
      auto n = ParseInt(piece, "--lost-node-ids");
      if (!n.ok()) return UsageError(io, "replan", n.status());
      list.push_back(*n);
    }
    req["lost_node_ids"] = list;
  }
  if (auto f = flags.Get("--fs-GBps")) {
    auto v = ParseDouble(*f, "--fs-GBps");
    if (!v.ok()) return UsageError(io, "replan", v.status());
    req["fs_GBps"] = *v;
  }
  // Hours and minutes on the command line, seconds in the request.
  for (auto [flag, key, scale] : {std::tuple{"--repair-h", "repair_s", 3600.0},
                                  std::tuple{"--restart-min", "restart_s", 60.0}}) {
    if (auto f = flags.Get(flag)) {
      auto v = ParseDouble(*f, flag);
      if (!v.ok()) return UsageError(io, "replan", v.status());
      req[key] = *v * scale;
    }
  }
  if (auto f = flags.Get("--fragments-of")) {
    if (*f == "all") {
      req["fragments_of"] = "all";
    } else {
      auto n = ParseInt(*f, "--fragments-of");
      if (!n.ok()) return UsageError(io, "replan", n.status());
      req["fragments_of"] = *n;
    }
  }
  if (auto s = flags.Get("--space")) req["space"] = *s;
  if (auto s = flags.Get("--fix")) req["fix"] = *s;
  req["allow_global_batch_change"] = flags.Has("--allow-global-batch-change");
  req["include_gradients"] = flags.Has("--include-gradients");
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (auto t = flags.Get("--threads")) {
    auto n = ParseInt(*t, "--threads");
    if (!n.ok() || *n < 1 || *n > 1024) {
      return UsageError(io, "replan", Status::InvalidArgument("--threads must be in [1, 1024]"));
    }
    threads = static_cast<int>(*n);
  }

  auto in = planner::ParseReplanRequest(req);
  if (!in.ok()) return UsageError(io, "replan", in.status());
  const std::string profile = flags.GetOr("--profile", in->profile_path);
  if (!profile.empty()) {
    if (Status s = ApplyProfileFile(profile, &in->job.cluster); !s.ok()) return UsageError(io, "replan", s);
  } else if (Status s = ApplyCachedProfile(&in->job.cluster, io.err); !s.ok()) {
    return UsageError(io, "replan", s);
  }
  auto result = planner::Replan(in->job, in->config, in->options,
                                [threads](const planner::Search& s) { return RunSearchThreaded(s, threads); });
  if (!result.ok()) return UsageError(io, "replan", result.status());
  if (result->global_batch_changed) {
    io.err << "paratune replan: WARNING: candidates marked CHANGED run a different global batch than the "
           << in->job.training.global_batch << " sequences the run uses (--allow-global-batch-change): "
           << "the optimisation changes; compare tokens/s, not step time\n";
  }
  OrderedJson doc = planner::ReplanToJson(*result, in->options);
  doc["assumed"] = scenario::AssumedToJson(in->assumed);
  if (format == "json") {
    io.out << doc.dump(2) << "\n";
  } else {
    PrintReplanTable(doc, io.out);
    PrintContinueOrWait(doc["continue_or_wait"], io.out);
  }
  return result->candidates.empty() ? kExitNoFeasible : kExitOk;
}

}  // namespace paratune::cli
