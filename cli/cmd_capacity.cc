// `paratune capacity`: the inverse query long-context users ask first: the
// longest sequence (and the largest preset model) that fits, per family.
#include <algorithm>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/strings.h"
#include "planner/request.h"
#include "planner/search.h"

namespace paratune::cli {
namespace {

constexpr const char* kHelp = R"(usage: paratune capacity --model M --cluster C --gpus N
                         [--space all|megatron|deepspeed|axonn|fsdp] [--seq S]
                         [--max-seq 16M] [--precision bf16] [--attention flash|unfused]
                         [--headroom 0.1] [--format table|json]

For each framework family (or the one --space names): the longest sequence
that fits in memory on N GPUs with some configuration of that family (one
sequence per data-parallel replica, micro-batch 1), and the largest built-in
model that fits at --seq (default: the model's context length). Only memory
is modelled here; use `paratune plan` for the speed at that length.

Memory is GPU memory and, where the cluster states it (host_memory_GiB),
host memory: configurations may offload the optimizer and parameters to the
host (ZeRO-Offload/Infinity, DeepSpeed spaces) and FPDT keeps all but two
sequence chunks there. "binds" names what stops a longer sequence:
gpu_memory, host_memory (it would fit with unlimited host memory), or max_seq
(--max-seq reached). With "nothing fits", it names what would have to grow.

  --max-seq L     upper end of the sequence search (default 16M; K/M/G suffixes
                  are powers of 1024 as in nccl-tests: 16M = 16,777,216 tokens)
exit codes: 0 ok, 2 invalid input, 3 nothing fits at all
)";

// Whether some configuration of `opt`'s space fits `seq`-token sequences.
bool AnyFits(const planner::ModelSpec& model, planner::TrainingSpec training,
             const topology::ClusterSpec& cluster, int gpus, int seq, planner::SearchOptions opt,
             planner::Candidate* best) {
  training.seq_len = seq;
  training.global_batch = gpus;  // every batch-splitting degree divides it; micro-batch 1
  opt.fixed.push_back({"mbs", "1"});
  opt.memory_only = true;
  opt.top_k = 1;
  std::vector<planner::CostModel> models;
  for (planner::Framework f : planner::FrameworksOf(opt.family)) {
    training.framework = f;
    training.compile = false;
    models.emplace_back(model, training, cluster, gpus);
  }
  std::vector<const planner::CostModel*> ptrs;
  for (const auto& m : models) ptrs.push_back(&m);
  planner::Search search(ptrs, opt);
  planner::SearchResult r = search.RunAll();
  if (r.top.empty()) return false;
  if (best) *best = r.top.front();
  return true;
}

}  // namespace

int RunCapacity(const Args& args, Io io) {
  Flags flags({"--model", "--cluster", "--gpus", "--space", "--seq", "--max-seq", "--precision",
               "--attention", "--headroom", "--format", "--profile"},
              {"--help"}, {{"-h", "--help"}});
  if (Status s = flags.Parse(args); !s.ok()) return UsageError(io, "capacity", s);
  if (flags.Has("--help")) {
    io.out << kHelp;
    return kExitOk;
  }
  // The request parser wants a batch; capacity sets its own per configuration.
  std::vector<std::string> a = args;
  a.push_back("--global-batch");
  a.push_back("1");
  Flags full({"--model", "--cluster", "--gpus", "--space", "--seq", "--max-seq", "--precision",
              "--attention", "--headroom", "--format", "--profile", "--global-batch"},
             {"--help"});
  if (Status s = full.Parse(a); !s.ok()) return UsageError(io, "capacity", s);
  auto req_json = RequestFromFlags(full, false, io.in);
  if (!req_json.ok()) return UsageError(io, "capacity", req_json.status());
  auto req = planner::ParsePredictRequest(*req_json);
  if (!req.ok()) return UsageError(io, "capacity", req.status());
  if (auto p = flags.Get("--profile")) {
    if (Status s = ApplyProfileFile(*p, &req->job.cluster); !s.ok()) return UsageError(io, "capacity", s);
  }
  int64_t max_seq = 16 * 1024 * 1024;
  if (auto m = flags.Get("--max-seq")) {
    auto v = ParseSizeBytes(*m);
    if (!v.ok() || *v < 1024) return UsageError(io, "capacity", Status::InvalidArgument("--max-seq must be >= 1024"));
    max_seq = *v;
  }
  std::vector<planner::Family> families = {planner::Family::kMegatron, planner::Family::kDeepSpeed,
                                           planner::Family::kAxonn, planner::Family::kFsdp,
                                           planner::Family::kAll};
  if (auto sp = flags.Get("--space")) {
    auto f = planner::ParseFamily(*sp);
    if (!f.ok()) return UsageError(io, "capacity", f.status());
    families = {*f};
  }
  const std::string format = flags.GetOr("--format", "table");
  const auto& job = req->job;
  const int seq_at = job.training.seq_len;

  // Model presets by size, largest first, for the "largest model" question.
  std::vector<planner::ModelSpec> models;
  for (const auto& name : planner::ModelPresetNames()) models.push_back(*planner::ModelPreset(name));
  std::sort(models.begin(), models.end(),
            [](const auto& x, const auto& y) { return x.ParamCount() > y.ParamCount(); });

  OrderedJson doc;
  doc["schema"] = "paratune.capacity/v1";
  doc["model"] = job.model.name;
  doc["cluster"] = job.cluster.name;
  doc["gpus"] = job.gpus;
  doc["families"] = OrderedJson::array();
  if (format == "table") {
    io.out << job.model.name << " on " << job.gpus << " × " << job.cluster.gpu.name << " ("
           << job.cluster.name << "), micro-batch 1, one sequence per replica, "
           << FormatFixed(job.training.headroom * 100, 0) << " % headroom\n";
    io.out << std::left << std::setw(11) << "space" << std::right << std::setw(13) << "max seq"
           << "  " << std::left << std::setw(48) << "config at max seq"
           << " " << std::setw(22) << ("largest at " + std::to_string(seq_at)) << " binds\n";
  }
  bool any = false;
  for (planner::Family fam : families) {
    planner::SearchOptions opt;
    opt.family = fam;
    io.err << "capacity: " << planner::FamilyName(fam) << "...\n";
    // Sequence: grow by doubling, then bisect in steps of 1024 tokens.
    int64_t lo = 0, hi = 0;
    planner::Candidate at_lo;
    // Every doubling is tried, not only up to the first failure: FPDT's
    // offloaded chunks make memory fall as sequences grow past a few chunks,
    // so a length can fit when a shorter one does not.
    for (int64_t s = 1024; s <= max_seq; s *= 2) {
      planner::Candidate c;
      if (AnyFits(job.model, job.training, job.cluster, job.gpus, static_cast<int>(s), opt, &c)) {
        lo = s;
        at_lo = c;
        hi = 0;
      } else if (hi == 0) {
        hi = s;
      }
    }
    if (lo > 0 && hi > 0) {
      while (hi - lo > 1024) {
        int64_t mid = (lo + hi) / 2 / 1024 * 1024;
        if (mid <= lo) break;
        planner::Candidate c;
        if (AnyFits(job.model, job.training, job.cluster, job.gpus, static_cast<int>(mid), opt, &c)) {
          lo = mid;
          at_lo = c;
        } else {
          hi = mid;
        }
      }
    }
    // FPDT runs whole chunks only (seq % fpdt_chunk_tokens == 0 past one
    // chunk), so the 1024-token bisection can stop below a longer multiple of
    // the chunk that still fits: step on by whole chunks from there.
    const int64_t chunk = job.training.fpdt_chunk_tokens;
    auto next_len = [&](int64_t l) {
      const bool fpdt = at_lo.config.cp > 1 && at_lo.config.cp_kind == planner::CpKind::kFpdt;
      return fpdt && l >= chunk ? (l / chunk + 1) * chunk : l + 1024;
    };
    if (lo > 0 && hi > 0) {
      for (int64_t n = next_len(lo); n <= max_seq; n = next_len(lo)) {
        planner::Candidate c;
        if (!AnyFits(job.model, job.training, job.cluster, job.gpus, static_cast<int>(n), opt,
                     &c)) {
          hi = n;
          break;
        }
        lo = n;
        at_lo = c;
        hi = 0;
      }
    }
    // What stops the sequence from growing: at the first length that does not
    // fit, would it fit if host memory were unlimited? Then host memory binds
    // (offloaded optimizer/parameters, FPDT's chunks); otherwise GPU memory.
    std::string binding = "max_seq";
    if (lo > 0 && hi > 0) {
      topology::ClusterSpec unlimited = job.cluster;
      unlimited.host_memory_GiB = unlimited.host_memory_GiB > 0 ? 1e12 : 0.0;
      binding =
          unlimited.host_memory_GiB > 0 && AnyFits(job.model, job.training, unlimited, job.gpus,
                                                   static_cast<int>(hi), opt, nullptr)
              ? "host_memory"
              : "gpu_memory";
    } else if (lo == 0) {
      binding = "gpu_memory";
      if (job.cluster.host_memory_GiB > 0) {
        topology::ClusterSpec unlimited = job.cluster;
        unlimited.host_memory_GiB = 1e12;
        if (AnyFits(job.model, job.training, unlimited, job.gpus, 1024, opt, nullptr))
          binding = "host_memory";
      }
    }
    // Largest preset model that fits at seq_at.
    std::string largest;
    double largest_b = 0;
    for (const auto& m : models) {
      if (AnyFits(m, job.training, job.cluster, job.gpus, seq_at, opt, nullptr)) {
        largest = m.name;
        largest_b = static_cast<double>(m.ParamCount()) / 1e9;
        break;
      }
    }
    any = any || lo > 0;
    OrderedJson row;
    row["space"] = planner::FamilyName(fam);
    row["max_seq_len"] = lo;
    row["max_seq_capped"] = lo > 0 && hi == 0;
    row["binding"] = binding;
    if (lo > 0) {
      row["config"] = planner::ConfigToJson(at_lo.config);
      row["memory_GiB"] = at_lo.prediction.memory.reserved_GiB;
      row["host_memory_GiB_per_node"] = at_lo.prediction.memory.host_node_GiB;
    }
    row["largest_model"] = largest.empty() ? OrderedJson(nullptr) : OrderedJson(largest);
    row["largest_model_params_B"] = largest_b;
    doc["families"].push_back(row);
    if (format == "table") {
      io.out << std::left << std::setw(11) << planner::FamilyName(fam) << std::right
             << std::setw(12) << (lo > 0 ? std::to_string(lo) : std::string("-"))
             << (lo > 0 && hi == 0 ? "+" : " ") << "  " << std::left << std::setw(48)
             << (lo > 0 ? planner::ConfigToString(at_lo.config) : "nothing fits") << " "
             << std::setw(22)
             << (largest.empty() ? "-" : largest + " (" + FormatFixed(largest_b, 1) + "B)") << " "
             << binding << "\n";
    }
  }
  if (format == "json") io.out << doc.dump(2) << "\n";
  return any ? kExitOk : kExitNoFeasible;
}

}  // namespace paratune::cli
