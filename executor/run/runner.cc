// The runner's entry points: the plan's communicators, one pass of a
// workload, the candidates of a plans document, and the confirmation loop
// over candidates (one candidate: candidate.cc; its report: measure.cc).
// Every phase keeps the SPMD discipline described in runner.h: host-side
// collectives are entered by every rank in the same order whatever happened
// locally; device work is skipped once a rank has failed.
#include "executor/run/runner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "common/strings.h"
#include "executor/run/candidate.h"
#include "executor/run/extrapolate.h"
#include "planner/cost_model.h"
#include "planner/plans.h"

namespace paratune::executor {

using backend::Backend;
using backend::CommId;
using backend::EventId;
using backend::StreamId;
using detail::Arena;
using detail::CandidateRun;
using detail::CommSlots;
using detail::Fixed;
using detail::Issuer;
using detail::Scratch;
using detail::ScratchNeeds;
using detail::SlotsOf;
using planner::ParallelConfig;

Result<std::map<GroupKind, CommId>> SplitPlanGroups(Backend& b, const ParallelConfig& c,
                                                    int gpus_per_node) {
  PT_CHECK(b.world_size() >= c.world());
  std::map<GroupKind, CommId> out;
  const int me = b.rank();
  const bool active = me < c.world();
  for (GroupKind kind : GroupKindsOf(c, gpus_per_node)) {
    int color = -1, key = 0;
    if (active) {
      const std::vector<int> members = GroupRanks(c, kind, me, gpus_per_node);
      color = *std::min_element(members.begin(), members.end());
      key = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    }
    auto id = b.SplitComm(backend::kWorldComm, color, key);
    if (!id.ok())
      return id.status().WithContext(std::string("splitting the ") + GroupKindName(kind) +
                                     " groups");
    out[kind] = *id;
  }
  return out;
}

Status IssueWorkloadOnce(Backend& b, const Workload& w, const std::map<GroupKind, CommId>& comms) {
  PT_ASSIGN_OR_RETURN(CommSlots slots, SlotsOf(b, comms));
  int64_t compute = 0, comm = 0;
  auto size_of = [&](GroupKind g) {
    auto it = slots.find(g);
    return it == slots.end() ? 1 : it->second.size;
  };
  ScratchNeeds(w, size_of, &compute, &comm);
  Arena arena(b);
  Scratch s;
  PT_ASSIGN_OR_RETURN(s.compute, arena.Carve(compute));
  PT_ASSIGN_OR_RETURN(s.send, arena.Carve(std::max<int64_t>(comm, 1)));
  PT_ASSIGN_OR_RETURN(s.recv, arena.Carve(std::max<int64_t>(comm, 1)));
  std::array<StreamId, kNumStreamRoles> streams{};
  for (auto& sid : streams) {
    PT_ASSIGN_OR_RETURN(sid, b.CreateStream());
  }
  std::vector<EventId> events(w.ops.size(), -1);
  Issuer issuer(b, w, s, slots);
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const WorkOp& op = w.ops[i];
    const StreamId sid = streams[static_cast<size_t>(op.stream)];
    for (int d : op.after) {
      const WorkOp& dep = w.ops[static_cast<size_t>(d)];
      if (dep.stream == op.stream) continue;
      if (events[static_cast<size_t>(d)] < 0) {
        return Status::Internal(op.name + " waits for " + dep.name + ", which recorded no event");
      }
      PT_RETURN_IF_ERROR(b.StreamWaitEvent(sid, events[static_cast<size_t>(d)]));
    }
    PT_RETURN_IF_ERROR(issuer.Issue(static_cast<int>(i), sid));
    // Record an event after every op another stream may wait for.
    bool needed = false;
    for (size_t j = i + 1; j < w.ops.size() && !needed; ++j) {
      const WorkOp& later = w.ops[j];
      needed = later.stream != op.stream && std::find(later.after.begin(), later.after.end(),
                                                      static_cast<int>(i)) != later.after.end();
    }
    if (needed) {
      PT_ASSIGN_OR_RETURN(events[i], b.CreateEvent());
      PT_RETURN_IF_ERROR(b.RecordEvent(events[i], sid));
    }
  }
  for (StreamId sid : streams) PT_RETURN_IF_ERROR(b.Synchronize(sid));
  return Status::Ok();
}

Result<ConfirmInput> ConfirmInputFromPlans(const Json& plans, int top_k) {
  if (top_k < 1) return Status::InvalidArgument("--top must be >= 1");
  ConfirmInput in;
  PT_ASSIGN_OR_RETURN(in.job, planner::JobFromPlans(plans));
  PT_ASSIGN_OR_RETURN(std::vector<planner::ParallelConfig> all,
                      planner::CandidatesFromPlans(plans));
  if (all.empty())
    return Status::InvalidArgument("/candidates: the plan has no feasible candidate");
  for (size_t i = 0; i < all.size() && static_cast<int>(i) < top_k; ++i) {
    in.candidates.push_back(all[i]);
    int rank = static_cast<int>(i) + 1;
    const Json& cj = plans["candidates"][i];
    planner::Framework fw = in.job.training.framework;
    if (cj.contains("framework") && cj["framework"].is_string()) {
      auto parsed = planner::ParseFramework(cj["framework"].get<std::string>());
      if (!parsed.ok()) {
        return Status::InvalidArgument("/candidates/" + std::to_string(i) +
                                       "/framework: " + parsed.status().message());
      }
      fw = *parsed;
    }
    in.frameworks.push_back(fw);
    if (cj.contains("rank") && cj["rank"].is_number_integer()) rank = cj["rank"].get<int>();
    in.plan_ranks.push_back(rank);
  }
  if (plans.contains("profile") && plans["profile"].is_string())
    in.profile = plans["profile"].get<std::string>();
  return in;
}

std::optional<std::string> GpuPresetFor(const backend::DeviceInfo& device) {
  auto lower = [](std::string t) {
    std::transform(t.begin(), t.end(), t.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    return t;
  };
  const std::string name = lower(device.name);
  if (name.empty()) return std::nullopt;
  std::vector<topology::GpuSpec> presets;
  for (const std::string& p : topology::GpuPresetNames()) {
    auto g = topology::GpuPreset(p);
    if (g.ok()) presets.push_back(*g);
  }
  for (const topology::GpuSpec& g : presets) {
    if (!g.display_name.empty() && lower(g.display_name) == name) return g.name;
  }
  // Family tokens, longest first (a GH200's name also contains "h200").
  for (const char* family : {"gh200", "mi250x", "a100", "h100", "h200", "v100"}) {
    if (name.find(family) == std::string::npos) continue;
    // H100 PCIe and NVL are not the SXM part with other memory: 756 and 835
    // dense bf16 TFLOP/s and 2.0 and 3.9 TB/s against the SXM's 989 and 3.35
    // (NVIDIA H100 Tensor Core GPU datasheet). No preset describes them, so
    // they match none rather than h100-sxm. (A100 PCIe keeps the SXM's 312
    // TFLOP/s and 1.94 against 2.04 TB/s, NVIDIA A100 datasheet: it matches.)
    if (std::string_view(family) == "h100" &&
        (name.find("pcie") != std::string::npos || name.find("nvl") != std::string::npos)) {
      return std::nullopt;
    }
    const double mem_GiB = device.memory_bytes / double(int64_t{1} << 30);
    std::optional<std::string> best;
    double best_gap = 0.15;
    for (const topology::GpuSpec& g : presets) {
      if (g.name.rfind(family, 0) != 0) continue;
      const double gap = mem_GiB > 0 ? std::abs(g.memory_GiB - mem_GiB) / g.memory_GiB : 0.0;
      if (gap <= best_gap) {
        best_gap = gap;
        best = g.name;
      }
    }
    return best;
  }
  return std::nullopt;
}

Status MeasureOnDevice(ConfirmInput* in, const std::string& measured_gpu) {
  in->measured_gpu = measured_gpu;
  if (measured_gpu.empty() || measured_gpu == in->job.cluster.gpu.name) return Status::Ok();
  PT_ASSIGN_OR_RETURN(topology::GpuSpec gpu, topology::GpuPreset(measured_gpu));
  if (!in->plan_job) in->plan_job = in->job;
  in->job.cluster.gpu = gpu;
  return Status::Ok();
}

planner::Job JobFor(const ConfirmInput& in, size_t i) {
  planner::Job job = in.job;
  if (i < in.frameworks.size()) job.training.framework = in.frameworks[i];
  return job;
}

Result<RunReport> ConfirmCandidates(Backend& b, const ConfirmInput& in, const ConfirmOptions& o,
                                    const ProgressFn& progress, const FatalFn& on_fatal) {
  if (in.candidates.size() != in.plan_ranks.size()) {
    return Status::InvalidArgument("every candidate needs its plan rank");
  }
  if (o.samples < 1 || o.warmup < 0 || o.comm_iters < 1) {
    return Status::InvalidArgument("samples and comm_iters must be >= 1, warmup >= 0");
  }
  const bool root = b.rank() == 0;
  RunReport report;
  report.model = in.job.model.name;
  report.cluster = in.job.cluster.name;
  // The plan's cluster (the one `cluster` names), also when its GPU was
  // swapped for the one measured.
  report.cluster_fingerprint =
      topology::Fingerprint(in.plan_job ? in.plan_job->cluster : in.job.cluster);
  report.profile = in.profile;
  report.gpus = in.job.gpus;
  report.plan_gpu = in.plan_job ? in.plan_job->cluster.gpu.name : in.job.cluster.gpu.name;
  report.measured_gpu = in.measured_gpu;
  report.corrections = in.job.cluster.corrections;
  RunEnvironment& env = report.environment;
  env.tool = o.tool;
  env.backend = b.name();
  env.argv = o.argv;
  env.hosts = b.hosts();
  env.world_size = b.world_size();
  env.versions = b.Versions();
  env.created_at = UtcNowIso8601();
  if (root) {
    auto dev = b.DescribeDevice();
    if (dev.ok()) {
      env.device = dev->name;
      env.device_memory_bytes = dev->memory_bytes;
      env.device_sm_clock_GHz = dev->clock_GHz;
      env.device_sm_clock_now_GHz = dev->clock_now_GHz;
      env.device_sm_clock_max_GHz = dev->clock_max_GHz;
    }
  }
  report.slice_layers = o.workload.slice_layers;
  report.warmup = o.warmup;
  report.samples = o.samples;
  report.extrapolation = ExtrapolationText();
  auto write = [&]() -> Status {
    if (!root || o.out_path.empty()) return Status::Ok();
    return WriteFileAtomic(o.out_path, RunReportToJson(report).dump(2) + "\n");
  };
  PT_RETURN_IF_ERROR(write());  // a report exists even if the world ends mid-run
  for (size_t i = 0; i < in.candidates.size(); ++i) {
    if (root && progress) {
      progress("candidate " + std::to_string(i + 1) + "/" + std::to_string(in.candidates.size()) +
               " (plan rank " + std::to_string(in.plan_ranks[i]) +
               "): " + planner::ConfigToString(in.candidates[i]));
    }
    CandidateRun run(b, in, o, i, progress, on_fatal);
    CandidateReport c = run.Run();
    if (root && progress) {
      if (c.status == Outcome::kOk) {
        progress("  ok: measured " + Fixed(*c.measured_s, 4) + " s, predicted " +
                 Fixed(c.predicted_s, 4) + " s (error " + Fixed(100.0 * c.error.value_or(0), 1) +
                 " %)");
      } else {
        progress(std::string("  ") + OutcomeName(c.status) + ": " + c.reason);
      }
    }
    report.candidates.push_back(std::move(c));
    PT_RETURN_IF_ERROR(write());
  }
  // Re-rank by what was measured.
  std::vector<CandidateReport*> ok;
  for (CandidateReport& c : report.candidates) {
    if (c.status == Outcome::kOk && c.measured_s) ok.push_back(&c);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const CandidateReport* a, const CandidateReport* b2) {
    return *a->measured_s < *b2->measured_s;
  });
  for (size_t i = 0; i < ok.size(); ++i) ok[i]->measured_rank = static_cast<int>(i) + 1;
  report.complete = true;
  PT_RETURN_IF_ERROR(write());
  return report;
}

}  // namespace paratune::executor
