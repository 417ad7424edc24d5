// executor/run/candidate.h: one candidate's run on every rank (internal to
// executor/run/). CandidateRun's phases (set-up, compute, communication and
// slice passes, tear-down: candidate.cc) keep the SPMD discipline of runner.h;
// turning the gathered timings into a CandidateReport is measure.cc.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor/run/issue.h"
#include "executor/run/runner.h"

namespace paratune::executor::detail {

// Host-side collectives of one candidate. After the control plane itself
// fails (a peer is gone) the rest are skipped: the world is broken and every
// rank ends the candidate.
class HostPlane {
 public:
  explicit HostPlane(Backend& b) : b_(b) {}
  Status Barrier() {
    if (!broken_.ok()) return broken_;
    Status s = b_.HostBarrier();
    if (!s.ok()) broken_ = s;
    return s;
  }
  Status MaxReduce(std::vector<double>* v) {
    if (!broken_.ok()) return broken_;
    Status s = b_.HostAllReduceMax(v);
    if (!s.ok()) broken_ = s;
    return s;
  }
  Result<std::vector<std::string>> AllGather(const std::string& mine) {
    if (!broken_.ok()) return broken_;
    auto r = b_.HostAllGather(mine);
    if (!r.ok()) broken_ = r.status();
    return r;
  }
  bool broken() const { return !broken_.ok(); }
  const Status& broken_status() const { return broken_; }

 private:
  Backend& b_;
  Status broken_;
};

struct Verdict {
  Outcome outcome = Outcome::kOk;
  std::string reason;
  bool ok() const { return outcome == Outcome::kOk; }
};

// The ranks agree on a phase's outcome: the first failing rank's message.
// `waive` marks a local failure as a missing capability.
Verdict Agree(HostPlane& host, const Status& mine, bool waive = false);

// A distinct collective of a candidate: every op with this key shares its timing.
struct Spec {
  GroupKind group = GroupKind::kX;
  const WorkOp* op = nullptr;  // an op with this key (shape, dtype, peers)
  double per_call_s = 0;       // plan-group seconds per call
  Source source = Source::kMeasured;
  std::string note;  // how it was obtained, for the report
};
// The key of the Spec `op` belongs to.
std::string SpecKey(const WorkOp& op);
// "1.5 GiB", "12.0 MiB", "4.0 KiB".
std::string Bytes(double b);

// One role's measured figures, shipped to rank 0.
struct RoleResult {
  int plan_rank = -1;
  std::vector<double> op_s;  // compute ops; 0 for collectives
  double slice_s = -1;
};
std::string SerializeRoles(const std::vector<RoleResult>& roles);

// ---- One candidate -------------------------------------------------------------------

class CandidateRun {
 public:
  CandidateRun(Backend& b, const ConfirmInput& in, const ConfirmOptions& o, size_t index,
               const ProgressFn& progress, const FatalFn& on_fatal)
      : b_(b),
        in_(in),
        o_(o),
        index_(index),
        c_(in.candidates[index]),
        host_(b),
        progress_(progress),
        on_fatal_(on_fatal) {}

  CandidateReport Run();

 private:
  void Say(const std::string& line) {
    if (b_.rank() == 0 && progress_) progress_("  " + line);
  }
  // A local failure inside a phase whose collectives may leave peers blocked.
  void MaybeFatal(const Status& s) {
    if (s.ok() || !o_.peers_can_hang || b_.world_size() < 2) return;
    const int code = on_fatal_ ? on_fatal_(s) : 4;
    b_.AbortWorld(code);
  }
  Status SetUp();
  Status Capabilities() const;
  Status PassCompute(const Workload* w, const Scratch& s, RoleResult* out);
  Status PassComm(const Scratch* s, const Workload* mine);
  Status PassSlice(const Workload* w, const Scratch& s, RoleResult* out);
  // Mixture of experts: one MoE layer's forward on expert-parallel
  // communicators folded over the world (executor/run/moe_layer.h), beside the
  // cost model's figures for it. Collective over the world; leaves `out` empty
  // (and says why in `rep`'s modelled parts) when the layer cannot be shaped.
  Status PassMoe(const planner::Job& job, const planner::CostModel& cm, CandidateReport* rep,
                 std::optional<MoeLayerReport>* out);
  Result<EventId> Event(size_t k);
  void Finish(CandidateReport* rep, const std::vector<std::string>& gathered);
  void TearDown();
  int GroupSizeOfPlan(GroupKind g) const;

  Backend& b_;
  const ConfirmInput& in_;
  const ConfirmOptions& o_;
  size_t index_;
  const ParallelConfig& c_;
  HostPlane host_;
  const ProgressFn& progress_;
  const FatalFn& on_fatal_;
  bool full_ = false;  // every plan rank has a process
  std::vector<int> reps_;
  std::vector<Workload> rep_w_;   // the representatives' workloads (all ranks build them)
  std::optional<Workload> mine_;  // full mode: this process's plan rank
  std::map<GroupKind, CommId> comms_;
  std::map<GroupKind, bool>
      physical_inter_;  // fewer-ranks mode: does the measured group leave the node
  CommSlots slots_;
  std::array<StreamId, kNumStreamRoles> streams_{};
  std::vector<EventId> events_;
  std::vector<Spec> specs_;
  std::map<std::string, size_t> spec_index_;
  std::vector<RoleResult> results_;
  double allocated_GiB_ = 0, beyond_GiB_ = 0;
};

}  // namespace paratune::executor::detail
