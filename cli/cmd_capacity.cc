// `paratune capacity`: the inverse query long-context users ask first: the
// longest sequence (and the largest preset model) that fits, per family.
#include <algorithm>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/strings.h"
#include "common/user_input.h"
#include "cli/cmd_network.h"
#include "planner/request.h"
#include "planner/search.h"
#include "scenario/scenario.h"

namespace paratune::cli {
namespace {

constexpr const char* kCapacityHelp = R"(usage: paratune capacity --model M --cluster C --gpus N
                         [--space all|megatron|deepspeed|axonn|fsdp] [--seq S]
                         [--max-seq 16M] [--precision bf16] [--attention flash|unfused]
                         [--headroom 0.05] [--no-expandable-segments] [--format table|json]
       paratune capacity --network N --cluster C --gpus N [--max-size S]
                         [--precision bf16] [--grad-bytes 4] [--optimizer-state-bytes 8]
                         [--framework pytorch|torchtitan] [--headroom 0.05] [--format table|json]

For each framework family (or the one --space names): the longest sequence
that fits in memory on N GPUs with some configuration of that family (one
sequence per data-parallel replica, micro-batch 1), and the largest built-in
model that fits at --seq (default as in `paratune predict --help`). Only memory
is modelled here; use `paratune plan` for the speed at that length.

Memory is GPU memory and, where the cluster states it (host_memory_GiB),
host memory: configurations may offload the optimizer and parameters to the
host (ZeRO-Offload/Infinity, DeepSpeed spaces) and FPDT keeps all but two
sequence chunks there. "binds" names what stops a longer sequence:
gpu_memory, host_memory (it would fit with unlimited host memory), or max_seq
(--max-seq reached). With "nothing fits", it names what would have to grow.

  --no-expandable-segments
                  price the allocator's fixed-size segments (`paratune predict --help`)
  --max-seq L     upper end of the sequence search (default 16M; k/K, m/M, g/G
                  are powers of 1024 as for --seq: 16M = 16,777,216 tokens,
                  128K = 131,072; 2^24 works too)

With --network (a preset of `paratune presets networks` or a family-built
network file, docs/networks.md): the largest input of the network's family
that fits with one sample per data-parallel replica and some layout (spatial
split, tensor group, ddp/zero1/fsdp): the image side of a ResNet, RetinaNet
or ViT, the latent side of a U-Net, the image tokens of a DiT, the patch side
of a 3D U-Net, the volume side of a 3D CNN, in the steps the architecture
keeps (every halving must divide), up to --max-size (default 1024 steps),
with the fastest layout at that size (--framework pytorch|torchtitan: among
the layouts that framework runs). JSON: paratune.network_capacity/v1.
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
               "--attention", "--headroom", "--format", "--profile", "--network", "--max-size",
               "--grad-bytes", "--optimizer-state-bytes", "--framework"},
              {"--help", "--no-expandable-segments"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "capacity", kCapacityHelp)) return *done;
  if (flags.Has("--network")) {
    for (const char* f : {"--model", "--space", "--seq", "--max-seq", "--attention", "--profile",
                          "--no-expandable-segments"}) {
      if (flags.Has(f)) {
        return UsageError(io, "capacity", Status::InvalidArgument(std::string(f) + " does not apply with --network"));
      }
    }
    return CapacityNetworkCommand(flags, io);
  }
  for (const char* f : {"--max-size", "--grad-bytes", "--optimizer-state-bytes", "--framework"}) {
    if (flags.Has(f)) {
      return UsageError(io, "capacity", Status::InvalidArgument(std::string(f) + " applies with --network only"));
    }
  }
  // The request parser wants a batch; capacity sets its own per configuration.
  std::vector<std::string> a = args;
  a.push_back("--global-batch");
  a.push_back("1");
  Flags full({"--model", "--cluster", "--gpus", "--space", "--seq", "--max-seq", "--precision",
              "--attention", "--headroom", "--format", "--profile", "--global-batch"},
             {"--help", "--no-expandable-segments"});
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
    auto v = ParseCount(*m, "--max-seq");
    if (!v.ok()) return UsageError(io, "capacity", v.status());
    if (*v < 1024) return UsageError(io, "capacity", Status::InvalidArgument("--max-seq: must be at least 1024 (1k)"));
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
  for (const auto& name : planner::ModelPresetNames())
    models.push_back(*planner::ModelPreset(name));
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
    auto fits = [&](int64_t seq, bool unlimited_host, planner::Candidate* best) -> Result<bool> {
      topology::ClusterSpec cluster = job.cluster;
      if (unlimited_host && cluster.host_memory_GiB > 0) cluster.host_memory_GiB = 1e12;
      return AnyFits(job.model, job.training, cluster, job.gpus, static_cast<int>(seq), opt, best);
    };
    auto longest =
        planner::FindLongestSequence(fits, 1024, max_seq, job.training.fpdt_chunk_tokens);
    if (!longest.ok()) return UsageError(io, "capacity", longest.status());
    const int64_t lo = longest->max_seq, hi = longest->first_failing;
    const planner::Candidate& at_lo = longest->at_max;
    const std::string& binding = longest->binding;
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
  // The job's unstated knobs, as plan and predict list them (scenario/); each
  // family's search costs every framework of its space.
  doc["assumed"] =
      scenario::AssumedToJson(scenario::JobAssumptions(*req_json, job, /*searches_space=*/true));
  if (format == "json") io.out << doc.dump(2) << "\n";
  return any ? kExitOk : kExitNoFeasible;
}

}  // namespace paratune::cli
