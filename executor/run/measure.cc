// Measurement: the figures every rank gathered for one candidate become its
// CandidateReport (measured time, per-op and per-collective timings, what was
// extrapolated and why), on rank 0.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "executor/run/candidate.h"
#include "executor/run/extrapolate.h"
#include "planner/plans.h"

namespace paratune::executor::detail {

std::string SpecKey(const WorkOp& op) {
  return std::string(GroupKindName(op.group)) + "|" + backend::OpKindName(op.collective) + "|" +
         std::to_string(op.bytes) + "|" + backend::DataTypeName(op.dtype) + "|" +
         std::to_string(static_cast<int>(op.peers));
}

std::string Bytes(double b) {
  if (b >= kGiB) return Fixed(b / kGiB, 2) + " GiB";
  if (b >= 1 << 20) return Fixed(b / (1 << 20), 1) + " MiB";
  return Fixed(b / 1024.0, 1) + " KiB";
}

std::string SerializeRoles(const std::vector<RoleResult>& roles) {
  Json j = Json::array();
  for (const RoleResult& r : roles)
    j.push_back({{"rank", r.plan_rank}, {"op_s", r.op_s}, {"slice_s", r.slice_s}});
  return j.dump();
}

void CandidateRun::Finish(CandidateReport* rep, const std::vector<std::string>& gathered) {
  const planner::Job job = JobFor(in_, index_);
  const topology::ClusterSpec& cluster = job.cluster;
  const int W = b_.world_size(), gpn = std::max(1, cluster.gpus_per_node);
  std::vector<std::string> scaled_notes, modelled_notes;
  std::map<GroupKind, std::string> measured_groups;
  for (Spec& s : specs_) {
    const WorkOp& op = *s.op;
    const topology::Collective coll = ToCollective(op.collective);
    const int p = op.collective == OpKind::kSendRecv ? 2 : GroupSizeOfPlan(s.group);
    const int stride = GroupStride(c_, s.group);
    const double plan_model =
        topology::CollectiveSeconds(cluster, coll, stride, p, static_cast<double>(op.bytes));
    const std::string what = std::string(GroupKindName(s.group)) + " " +
                             backend::OpKindName(op.collective) + " of " +
                             Bytes(static_cast<double>(op.bytes));
    if (full_) {
      s.source = Source::kMeasured;
      measured_groups[s.group] =
          std::to_string(GroupSizeOfPlan(s.group)) + " ranks, stride " + std::to_string(stride);
      continue;
    }
    const int q = std::min(GroupSizeOfPlan(s.group), W);
    if (q < 2) {
      s.source = Source::kModelled;
      s.per_call_s = plan_model;
      modelled_notes.push_back(what + " over " + std::to_string(p) + " ranks (stride " +
                               std::to_string(stride) +
                               "): the cluster's alpha-beta (no second "
                               "process here)");
      continue;
    }
    const int qq = op.collective == OpKind::kSendRecv ? 2 : q;
    const bool inter = physical_inter_[s.group];
    const topology::Tier plan_tier = topology::GroupCost(cluster, coll, stride, p).tier;
    const bool same_tier = (plan_tier == topology::Tier::kInterNode) == inter;
    const int phys_stride = inter ? gpn : 1;
    const CallShape shape = ShapeOf(op, q);
    const double phys_model = topology::CollectiveSeconds(
        cluster, coll, phys_stride, qq,
        static_cast<double>(std::max(shape.send_bytes, shape.recv_bytes)));
    if (qq == p && same_tier) {
      s.source = Source::kMeasured;
      measured_groups[s.group] =
          std::to_string(q) + " processes, like the plan's " + std::to_string(p) + "-rank groups";
      continue;
    }
    const double ratio =
        phys_model > 0 && std::isfinite(plan_model) ? plan_model / phys_model : 1.0;
    s.source = Source::kScaled;
    s.per_call_s *= ratio;
    scaled_notes.push_back(what + " over " + std::to_string(p) + " ranks (stride " +
                           std::to_string(stride) + ", " + topology::TierName(plan_tier) +
                           "): measured on " + std::to_string(qq) + " process(es)" +
                           (inter ? " across nodes" : " in one node") + ", scaled x" +
                           Fixed(ratio, 2) + " by the cluster's alpha-beta");
  }

  // The stages: each from its representative's op list, compute from the
  // slowest rank that played it, collectives from the spec table.
  std::vector<RoleResult> roles;
  for (const std::string& g : gathered) {
    if (g.empty()) continue;
    auto j = ParseJson(g, "measurements");
    if (!j.ok() || !j->is_array()) continue;
    for (const Json& r : *j) {
      RoleResult rr;
      rr.plan_rank = r.value("rank", -1);
      rr.op_s = r.value("op_s", std::vector<double>());
      rr.slice_s = r.value("slice_s", -1.0);
      roles.push_back(std::move(rr));
    }
  }
  const int pp = c_.pp;
  auto rep_index_of_stage = [&](int stage) -> size_t {
    if (stage == 0) return 0;
    if (stage == pp - 1) return rep_w_.size() - 1;
    return 1;  // middle stages share the middle representative
  };
  std::vector<StageTimes> stages(static_cast<size_t>(pp));
  std::vector<int> ran;
  for (int st = 0; st < pp; ++st) {
    const Workload& w = rep_w_[rep_index_of_stage(st)];
    StageTimes& t = stages[static_cast<size_t>(st)];
    t.workload = &w;
    t.op_s.assign(w.ops.size(), 0.0);
    t.op_source.assign(w.ops.size(), Source::kMeasured);
    bool have_slice = full_ && o_.overlapped_slice;
    int contributors = 0;
    for (const RoleResult& rr : roles) {
      const int rst = Coordinates(c_, rr.plan_rank)[static_cast<size_t>(planner::Dim::kPp)];
      const bool counts = full_ ? rst == st : rr.plan_rank == w.plan_rank;
      if (!counts || rr.op_s.size() != w.ops.size()) continue;
      ++contributors;
      for (size_t i = 0; i < w.ops.size(); ++i) t.op_s[i] = std::max(t.op_s[i], rr.op_s[i]);
      t.slice_s = std::max(t.slice_s, rr.slice_s);
      have_slice = have_slice && rr.slice_s >= 0;
    }
    if (!have_slice) t.slice_s = -1;
    if (contributors == 0) t.slice_s = -1;
    for (size_t i = 0; i < w.ops.size(); ++i) {
      const WorkOp& op = w.ops[i];
      if (op.type != OpType::kCollective) continue;
      const Spec& s = specs_[spec_index_.at(SpecKey(op))];
      t.op_s[i] = s.per_call_s * op.calls;
      t.op_source[i] = s.source;
    }
  }
  for (const RoleResult& rr : roles) ran.push_back(rr.plan_rank);
  std::sort(ran.begin(), ran.end());
  ran.erase(std::unique(ran.begin(), ran.end()), ran.end());
  rep->plan_ranks_run = ran;

  const StepEstimate est =
      Extrapolate(c_, stages, rep->breakdown[static_cast<size_t>(Term::kOffload)].predicted_s,
                  rep->breakdown[static_cast<size_t>(Term::kHost)].predicted_s,
                  rep->breakdown[static_cast<size_t>(Term::kCommEp)].predicted_s);
  for (int i = 0; i < kNumTerms; ++i) {
    rep->breakdown[static_cast<size_t>(i)].measured_s = est.terms[static_cast<size_t>(i)];
    rep->breakdown[static_cast<size_t>(i)].source = est.sources[static_cast<size_t>(i)];
  }
  rep->measured_s = est.iteration_s;
  if (est.iteration_s > 0) rep->error = (rep->predicted_s - est.iteration_s) / est.iteration_s;

  // In words.
  const Workload& w0 = rep_w_.front();
  std::vector<int> stage_list;
  for (int r : ran)
    stage_list.push_back(Coordinates(c_, r)[static_cast<size_t>(planner::Dim::kPp)]);
  std::sort(stage_list.begin(), stage_list.end());
  stage_list.erase(std::unique(stage_list.begin(), stage_list.end()), stage_list.end());
  const std::string recompute = c_.recompute == planner::Recompute::kNone ? "" : " + recompute";
  rep->measured_parts.push_back(
      "compute of " +
      (full_ ? "all " + std::to_string(ran.size()) + " plan ranks"
             : "plan rank(s) " + JoinInts(ran)) +
      " (pipeline stage(s) " + JoinInts(stage_list) + "): " + std::to_string(w0.slice_layers) +
      " of " + std::to_string(w0.layers_per_stage) + " layers per stage, one micro-batch, forward" +
      recompute +
      " + backward; GEMMs at the cost model's per-GPU shapes, attention as "
      "FLOP-equivalent GEMMs, element-wise kernels and the optimizer step as device copies of "
      "the same bytes");
  rep->measured_parts.push_back(
      "memory: " + Fixed(rep->memory_predicted_GiB, 2) +
      " GiB per GPU (the model's figure for the "
      "most loaded stage) allocated" +
      std::string(o_.touch_memory ? " and written" : "") + " on every process that ran compute" +
      (beyond_GiB_ > 0 ? "; the workload's buffers needed " + Fixed(beyond_GiB_, 3) + " GiB more"
                       : ""));
  for (const auto& [g, how] : measured_groups) {
    rep->measured_parts.push_back(std::string(GroupKindName(g)) + " collectives on " + how);
  }
  if (est.overlap_measured) {
    rep->measured_parts.push_back(
        "overlap: the slice run with its streams and events on every "
        "plan rank at once");
  }
  rep->modelled_parts.push_back(std::string("step: ") + ExtrapolationText());
  for (const auto* notes : {&scaled_notes, &modelled_notes}) {
    for (const std::string& n : *notes) {
      if (std::find(rep->modelled_parts.begin(), rep->modelled_parts.end(), n) ==
          rep->modelled_parts.end()) {
        rep->modelled_parts.push_back(n);
      }
    }
  }
  bool windows = false;
  for (const Workload& w : rep_w_) {
    for (const WorkOp& op : w.ops)
      windows = windows || (op.type == OpType::kCollective && op.stream != StreamRole::kCompute);
  }
  if (windows && !est.overlap_measured) {
    rep->modelled_parts.push_back(
        "overlap of the collectives on side streams: the cost model's rule (exposed = max(0, comm "
        "- window) + 24/132 x min(comm, window)) on measured times" +
        std::string(full_ ? " (overlapped slice disabled)"
                          : " (not every plan rank has a process)"));
  }
  if (c_.overlap_grad_reduce || c_.overlap_param_gather) {
    rep->modelled_parts.push_back(
        "data-parallel reduce/gather overlap with the stage's backward/"
        "forward: the cost model's rule on measured times");
  }
  if (c_.pp > 1) {
    rep->modelled_parts.push_back(
        "pipeline bubble: (pp - 1)/vpp x mean stage time, from the "
        "measured stages" +
        std::string(!full_ && pp > 3
                        ? " (stages 1.." + std::to_string(pp - 2) + " as the measured middle stage)"
                        : ""));
    if (c_.overlap_p2p) {
      rep->modelled_parts.push_back(
          "pipeline hand-off overlap: the cost model's rule on measured "
          "times");
    }
  }
  if (c_.cp > 1 && c_.cp_kind == planner::CpKind::kFpdt) {
    rep->modelled_parts.push_back("FPDT host offload: the cost model's figure (not measured)");
  }
  const double ep_s = rep->breakdown[static_cast<size_t>(Term::kCommEp)].predicted_s;
  if (ep_s > 0) {
    rep->modelled_parts.push_back(
        "expert-parallel dispatch and combine left exposed (comm_ep, " + Fixed(ep_s, 4) +
        " s): the cost model's figure, added to the step; the slice runs the MoE layers' "
        "router, permutation, expert and shared-expert GEMMs but not their all-to-all (the moe "
        "layer block measures one)");
  }
}

}  // namespace paratune::executor::detail
