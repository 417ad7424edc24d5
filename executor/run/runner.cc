// The runner. Every phase keeps the SPMD discipline described in runner.h:
// host-side collectives are entered by every rank in the same order whatever
// happened locally; device work is skipped once a rank has failed.
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
#include "executor/run/extrapolate.h"
#include "planner/cost_model.h"
#include "planner/plans.h"

namespace paratune::executor {
namespace {

using backend::Backend;
using backend::Buffer;
using backend::CommId;
using backend::DataType;
using backend::EventId;
using backend::OpKind;
using backend::StreamId;
using planner::ParallelConfig;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kAlign = 256;

int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Fixed(double v, int digits) { return FormatFixed(v, digits); }

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

topology::Collective ToCollective(OpKind k) {
  switch (k) {
    case OpKind::kAllGather:
      return topology::Collective::kAllGather;
    case OpKind::kReduceScatter:
      return topology::Collective::kReduceScatter;
    case OpKind::kAllToAll:
      return topology::Collective::kAllToAll;
    case OpKind::kSendRecv:
      return topology::Collective::kSendRecv;
    default:
      return topology::Collective::kAllReduce;
  }
}

// ---- Buffers ---------------------------------------------------------------------------

struct Scratch {
  Buffer compute;  // GEMM operands and copy source/destination
  Buffer send, recv;
};

// Element counts and buffer sizes of one call of a collective on `size` ranks.
struct CallShape {
  int64_t count = 0;  // the backend call's count argument
  int64_t send_bytes = 0, recv_bytes = 0;
};

CallShape ShapeOf(const WorkOp& op, int size) {
  const int64_t es = backend::DataTypeBytes(op.dtype);
  const int64_t elems = op.bytes / es;
  const int64_t per = CeilDiv(elems, std::max(1, size));
  CallShape s;
  switch (op.collective) {
    case OpKind::kAllGather:
      s = {per, per * es, per * size * es};
      break;
    case OpKind::kReduceScatter:
      s = {per, per * size * es, per * es};
      break;
    case OpKind::kAllToAll:
      s = {per, per * size * es, per * size * es};
      break;
    default:
      s = {elems, elems * es, elems * es};
      break;
  }
  return s;
}

int64_t ComputeBytes(const WorkOp& op) {
  if (op.type == OpType::kGemm) {
    const backend::GemmPrecision p = op.precision;
    const int64_t in = backend::GemmInputBytes(p), out = backend::GemmOutputBytes(p);
    return AlignUp(op.k * op.m * in) + AlignUp(op.k * op.n * in) + AlignUp(op.m * op.n * out);
  }
  if (op.type == OpType::kMemoryBound) return 2 * AlignUp(op.traffic_bytes / 2);
  return 0;
}

// The model's memory for one rank, allocated through the backend, and the
// workload's buffers carved out of it.
class Arena {
 public:
  explicit Arena(Backend& b) : b_(b) {}
  ~Arena() { Release(); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Allocates each component of `mem` and (when `touch`) writes it, so host
  // pages are committed. OOM names the component and how far it got.
  Status Prove(const planner::MemoryBreakdown& mem, bool touch) {
    const std::pair<const char*, double> parts[] = {{"parameters", mem.params_GiB},
                                                    {"gradients", mem.grads_GiB},
                                                    {"optimizer state", mem.optimizer_GiB},
                                                    {"activations", mem.activations_GiB},
                                                    {"buffers", mem.buffers_GiB}};
    for (const auto& [what, gib] : parts) {
      const int64_t bytes = static_cast<int64_t>(std::llround(gib * kGiB));
      if (bytes <= 0) continue;
      auto buf = b_.Allocate(bytes);
      if (!buf.ok()) {
        return buf.status().WithContext("allocating " + Fixed(gib, 2) + " GiB of " + what +
                                        " after " + Fixed(static_cast<double>(proven_) / kGiB, 2) +
                                        " GiB of the model's " + Fixed(mem.total_GiB, 2) +
                                        " GiB per GPU");
      }
      blocks_.push_back({*buf, 0});
      proven_ += bytes;
      if (touch) PT_RETURN_IF_ERROR(b_.Fill(*buf, DataType::kFloat64, 0.0));
    }
    return Status::Ok();
  }

  // A view of `bytes` inside the proven memory, else a new allocation beyond it.
  Result<Buffer> Carve(int64_t bytes) {
    bytes = std::max<int64_t>(kAlign, AlignUp(bytes));
    for (Block& blk : blocks_) {
      if (blk.buf.bytes - blk.used >= bytes) {
        Buffer v = backend::Slice(blk.buf, blk.used, bytes);
        blk.used += bytes;
        return v;
      }
    }
    auto buf = b_.Allocate(bytes);
    if (!buf.ok()) {
      return buf.status().WithContext("the workload's buffers (" +
                                      Fixed(static_cast<double>(bytes) / kGiB, 3) +
                                      " GiB) beside the model's memory");
    }
    PT_RETURN_IF_ERROR(b_.Fill(*buf, DataType::kFloat64, 0.0));
    blocks_.push_back({*buf, bytes});
    beyond_ += bytes;
    return *buf;
  }

  void Release() {
    for (const Block& blk : blocks_) (void)b_.Free(blk.buf);
    blocks_.clear();
  }
  double proven_GiB() const { return static_cast<double>(proven_) / kGiB; }
  double beyond_GiB() const { return static_cast<double>(beyond_) / kGiB; }

 private:
  struct Block {
    Buffer buf;
    int64_t used = 0;
  };
  Backend& b_;
  std::vector<Block> blocks_;
  int64_t proven_ = 0, beyond_ = 0;
};

// A communicator as an op needs it.
struct CommSlot {
  CommId id = backend::kNoComm;
  int size = 1;
  int position = 0;
};
using CommSlots = std::map<GroupKind, CommSlot>;

Result<CommSlots> SlotsOf(Backend& b, const std::map<GroupKind, CommId>& comms) {
  CommSlots out;
  for (const auto& [kind, id] : comms) {
    if (id == backend::kNoComm) continue;
    PT_ASSIGN_OR_RETURN(backend::CommInfo info, b.GetCommInfo(id));
    out[kind] = CommSlot{id, info.size, info.rank};
  }
  return out;
}

// Issues ops of one workload on a backend.
class Issuer {
 public:
  Issuer(Backend& b, const Workload& w, const Scratch& s, const CommSlots& comms)
      : b_(b), w_(w), s_(s), comms_(comms) {}

  // Issues op `i` (all its calls) on `stream`. A collective whose group has
  // no communicator here is skipped. `calls` overrides the op's own count.
  Status Issue(int i, StreamId stream, int calls = -1) {
    const WorkOp& op = w_.ops[static_cast<size_t>(i)];
    const int n = calls >= 0 ? calls : op.calls;
    switch (op.type) {
      case OpType::kGemm: {
        const backend::GemmPrecision p = op.precision;
        const int64_t in = backend::GemmInputBytes(p), out = backend::GemmOutputBytes(p);
        const int64_t a_bytes = op.k * op.m * in, b_bytes = op.k * op.n * in;
        backend::GemmArgs g;
        g.m = op.m;
        g.n = op.n;
        g.k = op.k;
        g.precision = p;
        g.a = backend::Slice(s_.compute, 0, a_bytes);
        g.b = backend::Slice(s_.compute, AlignUp(a_bytes), b_bytes);
        g.c = backend::Slice(s_.compute, AlignUp(a_bytes) + AlignUp(b_bytes), op.m * op.n * out);
        g.stream = stream;
        for (int k = 0; k < n; ++k) PT_RETURN_IF_ERROR(b_.Gemm(g).WithContext(op.name));
        return Status::Ok();
      }
      case OpType::kMemoryBound: {
        const int64_t half = op.traffic_bytes / 2;
        const Buffer src = backend::Slice(s_.compute, 0, half);
        const Buffer dst = backend::Slice(s_.compute, AlignUp(half), half);
        for (int k = 0; k < n; ++k)
          PT_RETURN_IF_ERROR(b_.Copy(dst, src, half, stream).WithContext(op.name));
        return Status::Ok();
      }
      case OpType::kCollective:
        return IssueCollective(op, stream, n);
    }
    return Status::Ok();
  }

  bool HasComm(GroupKind g) const { return comms_.count(g) > 0; }

  Status IssueCollective(const WorkOp& op, StreamId stream, int n) {
    auto it = comms_.find(op.group);
    if (it == comms_.end()) return Status::Ok();
    const CommSlot& slot = it->second;
    const CallShape shape = ShapeOf(op, slot.size);
    const Buffer send = backend::Slice(s_.send, 0, shape.send_bytes);
    const Buffer recv = backend::Slice(s_.recv, 0, shape.recv_bytes);
    for (int k = 0; k < n; ++k) {
      Status st;
      switch (op.collective) {
        case OpKind::kAllReduce:
          st = b_.AllReduce(slot.id, send, recv, shape.count, op.dtype, backend::ReduceOp::kSum,
                            stream);
          break;
        case OpKind::kAllGather:
          st = b_.AllGather(slot.id, send, recv, shape.count, op.dtype, stream);
          break;
        case OpKind::kReduceScatter:
          st = b_.ReduceScatter(slot.id, send, recv, shape.count, op.dtype, backend::ReduceOp::kSum,
                                stream);
          break;
        case OpKind::kAllToAll:
          st = b_.AllToAll(slot.id, send, recv, shape.count, op.dtype, stream);
          break;
        case OpKind::kSendRecv: {
          const int p = slot.size, pos = slot.position;
          int to = backend::kNoPeer, from = backend::kNoPeer;
          switch (op.peers) {
            case Peers::kNext:
              if (pos + 1 < p) to = pos + 1;
              if (pos > 0) from = pos - 1;
              break;
            case Peers::kPrev:
              if (pos > 0) to = pos - 1;
              if (pos + 1 < p) from = pos + 1;
              break;
            case Peers::kRing:
            case Peers::kNone:
              to = (pos + 1) % p;
              from = (pos + p - 1) % p;
              break;
          }
          if (to == backend::kNoPeer && from == backend::kNoPeer) return Status::Ok();
          st = b_.SendRecv(slot.id, send, to, recv, from, shape.count, op.dtype, stream);
          break;
        }
        default:
          return Status::Internal(op.name + ": not a collective");
      }
      if (!st.ok())
        return st.WithContext(op.name + " on the " + GroupKindName(op.group) + " group");
    }
    return Status::Ok();
  }

 private:
  Backend& b_;
  const Workload& w_;
  const Scratch& s_;
  const CommSlots& comms_;
};

// Largest buffers the workload's ops need: compute scratch, and send/recv per
// collective call on groups of the sizes `size_of` gives.
template <typename SizeOf>
void ScratchNeeds(const Workload& w, SizeOf size_of, int64_t* compute, int64_t* comm) {
  for (const WorkOp& op : w.ops) {
    if (op.type == OpType::kCollective) {
      const CallShape s = ShapeOf(op, size_of(op.group));
      *comm = std::max({*comm, s.send_bytes, s.recv_bytes});
    } else {
      *compute = std::max(*compute, ComputeBytes(op));
    }
  }
}

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
Verdict Agree(HostPlane& host, const Status& mine, bool waive = false) {
  if (host.broken())
    return {Outcome::kFailed, "the host control plane failed: " + host.broken_status().message()};
  std::string msg;
  if (!mine.ok())
    msg = std::string(waive ? "W" : backend::IsOutOfMemory(mine) ? "O" : "E") + mine.message();
  auto all = host.AllGather(msg);
  if (!all.ok()) return {Outcome::kFailed, "the ranks could not agree: " + all.status().message()};
  int first = -1, failing = 0;
  for (size_t r = 0; r < all->size(); ++r) {
    if ((*all)[r].empty()) continue;
    ++failing;
    if (first < 0) first = static_cast<int>(r);
  }
  if (first < 0) return {};
  const std::string& m = (*all)[static_cast<size_t>(first)];
  Verdict v;
  v.outcome = m[0] == 'W' ? Outcome::kWaived : m[0] == 'O' ? Outcome::kOom : Outcome::kFailed;
  v.reason = "rank " + std::to_string(first) + ": " + m.substr(1);
  if (failing > 1) v.reason += " (and " + std::to_string(failing - 1) + " more rank(s))";
  return v;
}

// A distinct collective of a candidate: every op with this key shares its timing.
struct Spec {
  GroupKind group = GroupKind::kX;
  const WorkOp* op = nullptr;  // an op with this key (shape, dtype, peers)
  double per_call_s = 0;       // plan-group seconds per call
  Source source = Source::kMeasured;
  std::string note;  // how it was obtained, for the report
};

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

// One role's measured figures, shipped to rank 0.
struct RoleResult {
  int plan_rank = -1;
  std::vector<double> op_s;  // compute ops; 0 for collectives
  double slice_s = -1;
};

std::string SerializeRoles(const std::vector<RoleResult>& roles) {
  Json j = Json::array();
  for (const RoleResult& r : roles)
    j.push_back({{"rank", r.plan_rank}, {"op_s", r.op_s}, {"slice_s", r.slice_s}});
  return j.dump();
}

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

Result<EventId> CandidateRun::Event(size_t k) {
  while (events_.size() <= k) {
    PT_ASSIGN_OR_RETURN(EventId e, b_.CreateEvent());
    events_.push_back(e);
  }
  return events_[k];
}

int CandidateRun::GroupSizeOfPlan(GroupKind g) const {
  for (const Workload& w : rep_w_) {
    if (const Group* grp = w.FindGroup(g)) return static_cast<int>(grp->ranks.size());
  }
  return 1;
}

Status CandidateRun::Capabilities() const {
  std::set<backend::GemmPrecision> precisions;
  for (const WorkOp& op : rep_w_.front().ops) {
    if (op.type == OpType::kGemm) precisions.insert(op.precision);
  }
  for (backend::GemmPrecision p : precisions) PT_RETURN_IF_ERROR(b_.CheckGemm(p));
  for (const Spec& s : specs_) {
    PT_RETURN_IF_ERROR(b_.CheckCollective(s.op->collective, s.op->dtype, backend::ReduceOp::kSum));
  }
  return Status::Ok();
}

// Communicators and streams. Collective over the world.
Status CandidateRun::SetUp() {
  const int W = b_.world_size(), me = b_.rank();
  const int gpn = std::max(1, in_.job.cluster.gpus_per_node);
  if (full_) {
    auto comms = SplitPlanGroups(b_, c_, gpn);
    if (!comms.ok()) return comms.status();
    comms_ = *comms;
  } else {
    // Groups of the plan's size where the world is big enough, else of all
    // the processes there are; laid out like the plan's when they fit.
    for (GroupKind kind : GroupKindsOf(c_, gpn)) {
      const int p = GroupSizeOfPlan(kind);
      const int q = std::min(p, W);
      if (q < 2) continue;
      const bool compound = kind == GroupKind::kData && c_.gdata > 1 && c_.cp > 1;
      const int plan_stride = GroupStride(c_, kind);
      const int s = (q == p && !compound && plan_stride * q <= W) ? plan_stride : 1;
      const int block = q * s, full_blocks = W / block;
      int color = -1, key = 0;
      if (me < full_blocks * block) {
        color = (me / block) * s + me % s;
        key = (me % block) / s;
      }
      auto id = b_.SplitComm(backend::kWorldComm, color, key);
      if (!id.ok())
        return id.status().WithContext(std::string("splitting the ") + GroupKindName(kind) +
                                       " group");
      comms_[kind] = *id;
      // Does the first such group span hosts?
      bool inter = false;
      for (int i = 0; i < q; ++i) {
        inter = inter || b_.hosts()[static_cast<size_t>(i * s)] != b_.hosts()[0];
      }
      physical_inter_[kind] = inter;
    }
  }
  PT_ASSIGN_OR_RETURN(slots_, SlotsOf(b_, comms_));
  for (int r = 0; r < kNumStreamRoles; ++r) {
    PT_ASSIGN_OR_RETURN(streams_[static_cast<size_t>(r)], b_.CreateStream());
  }
  return Status::Ok();
}

Status CandidateRun::PassCompute(const Workload* w, const Scratch& s, RoleResult* out) {
  std::vector<int> ops;
  if (w) {
    for (size_t i = 0; i < w->ops.size(); ++i) {
      if (w->ops[i].type != OpType::kCollective) ops.push_back(static_cast<int>(i));
    }
  }
  Status local;
  std::vector<std::vector<double>> samples(ops.size());
  const StreamId st = streams_[static_cast<size_t>(StreamRole::kCompute)];
  for (size_t k = 0; w && k <= ops.size() && local.ok(); ++k) {
    auto e = Event(k);
    if (!e.ok()) local = e.status();
  }
  std::optional<Issuer> issuer;
  if (w) issuer.emplace(b_, *w, s, slots_);
  for (int it = 0; it < o_.warmup + o_.samples; ++it) {
    if (!host_.Barrier().ok()) break;
    if (!w || !local.ok()) continue;
    auto once = [&]() -> Status {
      PT_RETURN_IF_ERROR(b_.RecordEvent(events_[0], st));
      for (size_t k = 0; k < ops.size(); ++k) {
        PT_RETURN_IF_ERROR(issuer->Issue(ops[k], st));
        PT_RETURN_IF_ERROR(b_.RecordEvent(events_[k + 1], st));
      }
      PT_RETURN_IF_ERROR(b_.Synchronize(st));
      if (it < o_.warmup) return Status::Ok();
      for (size_t k = 0; k < ops.size(); ++k) {
        PT_ASSIGN_OR_RETURN(double t, b_.ElapsedSeconds(events_[k], events_[k + 1]));
        samples[k].push_back(t);
      }
      return Status::Ok();
    };
    local = once();
  }
  if (w && out) {
    out->plan_rank = w->plan_rank;
    out->op_s.assign(w->ops.size(), 0.0);
    for (size_t k = 0; k < ops.size(); ++k)
      out->op_s[static_cast<size_t>(ops[k])] = Median(samples[k]);
  }
  if (host_.broken()) return host_.broken_status();
  return local;
}

// Times every distinct collective alone on its group (module comment, phase 5).
Status CandidateRun::PassComm(const Scratch* s, const Workload* mine) {
  Status local;
  const StreamId st = streams_[static_cast<size_t>(StreamRole::kDataComm)];
  std::set<std::string> my_keys;
  if (mine) {
    for (const WorkOp& op : mine->ops) {
      if (op.type == OpType::kCollective) my_keys.insert(SpecKey(op));
    }
  }
  auto e0 = Event(0), e1 = Event(1);
  if (!e0.ok()) local = e0.status();
  if (!e1.ok()) local = e1.status();
  // Issue through a one-op workload view so the Issuer's buffer logic applies.
  for (Spec& spec : specs_) {
    auto slot = slots_.find(spec.group);
    const bool member = slot != slots_.end() && s != nullptr &&
                        (full_ ? my_keys.count(SpecKey(*spec.op)) > 0 : true);
    Workload one;
    one.precision = rep_w_.front().precision;
    one.ops.push_back(*spec.op);
    Issuer issuer(b_, one, *s, slots_);
    std::vector<double> t(static_cast<size_t>(o_.samples), 0.0);
    if (member && local.ok()) {
      for (int k = 0; k < o_.warmup && local.ok(); ++k) {
        local = issuer.Issue(0, st, 1);
        if (local.ok()) local = b_.Synchronize(st);
      }
      MaybeFatal(local);
    }
    bool host_ok = true;
    for (int k = 0; k < o_.samples; ++k) {
      if (!host_.Barrier().ok()) {
        host_ok = false;
        break;
      }
      if (!member || !local.ok()) continue;
      auto sample = [&]() -> Status {
        PT_RETURN_IF_ERROR(b_.RecordEvent(*e0, st));
        PT_RETURN_IF_ERROR(issuer.Issue(0, st, o_.comm_iters));
        PT_RETURN_IF_ERROR(b_.RecordEvent(*e1, st));
        PT_RETURN_IF_ERROR(b_.Synchronize(st));
        PT_ASSIGN_OR_RETURN(double e, b_.ElapsedSeconds(*e0, *e1));
        t[static_cast<size_t>(k)] = e / o_.comm_iters;
        return Status::Ok();
      };
      local = sample();
      MaybeFatal(local);
    }
    if (!host_ok || !host_.MaxReduce(&t).ok()) break;
    spec.per_call_s = Median(t);
  }
  if (host_.broken()) return host_.broken_status();
  return local;
}

// The overlapped slice (phase 6): layer and stage ops on their streams.
Status CandidateRun::PassSlice(const Workload* w, const Scratch& s, RoleResult* out) {
  Status local;
  std::vector<int> ops;
  std::vector<int> event_of;  // op index → events_ slot, -1 = none
  std::set<StreamRole> used = {StreamRole::kCompute};
  size_t next =
      2;  // events: 0 start, 1 end, then one per dependency target, then one per side stream
  if (w) {
    event_of.assign(w->ops.size(), -1);
    std::vector<bool> in(w->ops.size(), false);
    for (size_t i = 0; i < w->ops.size(); ++i) {
      const WorkOp& op = w->ops[i];
      if (op.scope == Scope::kStep || op.category == Category::kCommPp) continue;
      if (op.type == OpType::kCollective && !slots_.count(op.group)) continue;
      in[i] = true;
      ops.push_back(static_cast<int>(i));
      used.insert(op.stream);
    }
    for (int i : ops) {
      for (int d : w->ops[static_cast<size_t>(i)].after) {
        if (in[static_cast<size_t>(d)] &&
            w->ops[static_cast<size_t>(d)].stream != w->ops[static_cast<size_t>(i)].stream &&
            event_of[static_cast<size_t>(d)] < 0) {
          event_of[static_cast<size_t>(d)] = static_cast<int>(next++);
        }
      }
    }
    for (size_t k = 0; k < next + used.size() && local.ok(); ++k) {
      auto e = Event(k);
      if (!e.ok()) local = e.status();
    }
  }
  std::vector<StreamId> held;
  for (StreamRole r : used) held.push_back(streams_[static_cast<size_t>(r)]);
  const StreamId compute = streams_[static_cast<size_t>(StreamRole::kCompute)];
  std::optional<Issuer> issuer;
  if (w) issuer.emplace(b_, *w, s, slots_);
  std::vector<double> samples;
  const size_t side_base = next;
  for (int it = 0; it < o_.warmup + o_.samples; ++it) {
    if (!host_.Barrier().ok()) break;
    bool holding = false;
    if (w && local.ok()) {
      auto enqueue = [&]() -> Status {
        PT_RETURN_IF_ERROR(b_.HoldStreams(held));
        holding = true;
        PT_RETURN_IF_ERROR(b_.RecordEvent(events_[0], compute));
        for (StreamId sid : held) {
          if (sid != compute) PT_RETURN_IF_ERROR(b_.StreamWaitEvent(sid, events_[0]));
        }
        for (int i : ops) {
          const WorkOp& op = w->ops[static_cast<size_t>(i)];
          const StreamId sid = streams_[static_cast<size_t>(op.stream)];
          for (int d : op.after) {
            const int ev = event_of[static_cast<size_t>(d)];
            if (ev >= 0 && w->ops[static_cast<size_t>(d)].stream != op.stream) {
              PT_RETURN_IF_ERROR(b_.StreamWaitEvent(sid, events_[static_cast<size_t>(ev)]));
            }
          }
          PT_RETURN_IF_ERROR(issuer->Issue(i, sid));
          const int ev = event_of[static_cast<size_t>(i)];
          if (ev >= 0) PT_RETURN_IF_ERROR(b_.RecordEvent(events_[static_cast<size_t>(ev)], sid));
        }
        // Join: the compute stream waits for every side stream's last op.
        size_t k = side_base;
        for (StreamId sid : held) {
          if (sid == compute) continue;
          PT_RETURN_IF_ERROR(b_.RecordEvent(events_[k], sid));
          PT_RETURN_IF_ERROR(b_.StreamWaitEvent(compute, events_[k]));
          ++k;
        }
        return b_.RecordEvent(events_[1], compute);
      };
      local = enqueue();
      MaybeFatal(local);
    }
    const bool barrier_ok = host_.Barrier().ok();
    if (holding) {
      const Status rel = b_.ReleaseStreams();
      if (local.ok()) local = rel;
    }
    if (!barrier_ok) break;
    if (!w || !local.ok()) continue;
    auto finish = [&]() -> Status {
      for (StreamId sid : held) PT_RETURN_IF_ERROR(b_.Synchronize(sid));
      PT_ASSIGN_OR_RETURN(double t, b_.ElapsedSeconds(events_[0], events_[1]));
      if (it >= o_.warmup) samples.push_back(t);
      return Status::Ok();
    };
    local = finish();
    MaybeFatal(local);
  }
  if (w && out) out->slice_s = Median(samples);
  if (host_.broken()) return host_.broken_status();
  return local;
}

void CandidateRun::TearDown() {
  for (const auto& [kind, id] : comms_) {
    if (id != backend::kNoComm) (void)b_.DestroyComm(id);
  }
  comms_.clear();
  slots_.clear();
}

CandidateReport CandidateRun::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  const planner::Job job = JobFor(in_, index_);
  CandidateReport rep;
  rep.rank = in_.plan_ranks[index_];
  rep.config = c_;
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const planner::Reason why = cm.CheckRules(c_);
  planner::Prediction pred;
  if (why == planner::Reason::kOk) pred = cm.Predict(c_);
  const planner::TimeBreakdown& pb = pred.breakdown;
  const double predicted[kNumTerms] = {pb.compute_s, pb.recompute_s, pb.comm_x_s,    pb.comm_y_s,
                                       pb.comm_z_s,  pb.comm_cp_s,   pb.comm_data_s, pb.comm_pp_s,
                                       pb.bubble_s,  pb.optimizer_s, pb.offload_s,   pb.host_s};
  for (int i = 0; i < kNumTerms; ++i)
    rep.breakdown[static_cast<size_t>(i)].predicted_s = predicted[i];
  rep.predicted_s = pred.iteration_time_s;
  rep.memory_predicted_GiB = pred.memory.total_GiB;
  // The plan's own prediction beside the measured GPU's, also when the
  // candidate does not fit the measured GPU (it was feasible as planned).
  if (in_.plan_job) {
    planner::Job planned = *in_.plan_job;
    planned.training.framework = job.training.framework;
    const planner::CostModel pcm(planned.model, planned.training, planned.cluster, planned.gpus);
    if (pcm.CheckRules(c_) == planner::Reason::kOk) {
      rep.plan_predicted_s = pcm.Predict(c_).iteration_time_s;
    }
  }
  auto done = [&](Outcome o, const std::string& reason) {
    rep.status = o;
    rep.reason = reason;
    rep.slice_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  };
  if (why != planner::Reason::kOk) {
    return done(Outcome::kFailed, std::string("the config breaks a rule: ") + cm.Explain(why, c_));
  }
  const int G = static_cast<int>(c_.world()), W = b_.world_size(), me = b_.rank();
  full_ = W >= G;
  reps_ = RepresentativeRanks(c_);
  for (int r : reps_) {
    auto w = BuildWorkload(job, c_, r, o_.workload);
    if (!w.ok()) return done(Outcome::kFailed, w.status().message());
    rep_w_.push_back(std::move(*w));
  }
  if (full_ && me < G) {
    auto w = BuildWorkload(job, c_, me, o_.workload);
    if (!w.ok()) return done(Outcome::kFailed, w.status().message());
    mine_ = std::move(*w);
  }
  // Distinct collectives, from the representatives (every rank of a stage has
  // its representative's ops), in a fixed order on every rank.
  for (const Workload& w : rep_w_) {
    for (const WorkOp& op : w.ops) {
      if (op.type != OpType::kCollective) continue;
      const std::string key = SpecKey(op);
      if (spec_index_.count(key)) continue;
      spec_index_[key] = 0;
      Spec s;
      s.group = op.group;
      s.op = &op;
      specs_.push_back(s);
    }
  }
  std::sort(specs_.begin(), specs_.end(),
            [](const Spec& a, const Spec& b) { return SpecKey(*a.op) < SpecKey(*b.op); });
  for (size_t i = 0; i < specs_.size(); ++i) spec_index_[SpecKey(*specs_[i].op)] = i;

  const int rounds = full_ ? 1 : static_cast<int>(CeilDiv(static_cast<int64_t>(reps_.size()), W));
  Say(std::to_string(G) + " plan rank(s) on " + std::to_string(W) + " process(es): " +
      (full_ ? "every rank runs its own workload"
             : "ranks " + JoinInts(reps_) + " (one per kind of pipeline stage) run in " +
                   std::to_string(rounds) + " round(s)"));

  Verdict v = Agree(host_, Capabilities(), /*waive=*/true);
  if (!v.ok()) return done(v.outcome, v.reason);
  v = Agree(host_, SetUp());
  if (!v.ok()) {
    TearDown();
    return done(v.outcome, v.reason);
  }
  auto size_of_plan = [&](GroupKind g) { return GroupSizeOfPlan(g); };
  for (int round = 0; round < rounds; ++round) {
    const Workload* role = nullptr;
    if (full_) {
      role = mine_ ? &*mine_ : nullptr;
    } else if (round * W + me < static_cast<int>(reps_.size())) {
      role = &rep_w_[static_cast<size_t>(round * W + me)];
    }
    Arena arena(b_);
    Scratch scratch;
    Status mem;
    if (role) {
      mem = arena.Prove(pred.memory, o_.touch_memory);
      int64_t compute = 0, comm = 0;
      auto size_of = [&](GroupKind g) {
        auto it = slots_.find(g);
        return it == slots_.end() ? size_of_plan(g) : it->second.size;
      };
      ScratchNeeds(*role, size_of, &compute, &comm);
      if (mem.ok()) {
        auto cbuf = arena.Carve(compute);
        if (!cbuf.ok())
          mem = cbuf.status();
        else
          scratch.compute = *cbuf;
      }
      if (mem.ok() && full_ && comm > 0) {
        auto sbuf = arena.Carve(comm);
        auto rbuf = sbuf.ok() ? arena.Carve(comm) : sbuf;
        if (!rbuf.ok())
          mem = rbuf.status();
        else
          scratch.send = *sbuf, scratch.recv = *rbuf;
      }
      if (mem.ok()) {
        mem = b_.FillRandom(scratch.compute, role->precision.gemm_input,
                            0x5eed0000u + static_cast<uint64_t>(role->plan_rank));
      }
      allocated_GiB_ = std::max(allocated_GiB_, arena.proven_GiB());
      beyond_GiB_ = std::max(beyond_GiB_, arena.beyond_GiB());
    }
    Say("memory proof: " + Fixed(pred.memory.total_GiB, 2) + " GiB per GPU (the model's, most " +
        "loaded stage)" + (rounds > 1 ? ", round " + std::to_string(round + 1) : ""));
    v = Agree(host_, mem);
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    RoleResult result;
    Say("compute: " + std::to_string(rep_w_.front().slice_layers) + " layer(s), " +
        std::to_string(o_.samples) + " sample(s)");
    v = Agree(host_, PassCompute(role, scratch, &result));
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    if (full_) {
      Say("collectives: " + std::to_string(specs_.size()) + " distinct, on the plan's groups");
      v = Agree(host_, PassComm(&scratch, role));
      if (!v.ok()) {
        TearDown();
        return done(v.outcome, v.reason);
      }
      if (o_.overlapped_slice) {
        Say("overlapped slice on every plan rank");
        v = Agree(host_, PassSlice(role, scratch, &result));
        if (!v.ok()) {
          TearDown();
          return done(v.outcome, v.reason);
        }
      }
    }
    if (role) results_.push_back(std::move(result));
  }
  if (!full_ && !comms_.empty()) {  // the same answer on every rank
    Arena arena(b_);
    Scratch scratch;
    Status mem;
    int64_t comm = 0;
    for (const Spec& s : specs_) {
      auto it = slots_.find(s.group);
      if (it == slots_.end()) continue;
      const CallShape sh = ShapeOf(*s.op, it->second.size);
      comm = std::max({comm, sh.send_bytes, sh.recv_bytes});
    }
    if (comm > 0) {
      auto sbuf = arena.Carve(comm);
      auto rbuf = sbuf.ok() ? arena.Carve(comm) : sbuf;
      if (!rbuf.ok())
        mem = rbuf.status();
      else
        scratch.send = *sbuf, scratch.recv = *rbuf;
    }
    v = Agree(host_, mem);
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    Say("collectives: " + std::to_string(specs_.size()) + " distinct, on groups of up to " +
        std::to_string(W) + " process(es)");
    v = Agree(host_, PassComm(&scratch, nullptr));
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
  }
  auto gathered = host_.AllGather(SerializeRoles(results_));
  TearDown();
  if (!gathered.ok())
    return done(Outcome::kFailed, "gathering the measurements: " + gathered.status().message());
  rep.memory_allocated_GiB = allocated_GiB_;
  rep.scratch_beyond_GiB = beyond_GiB_;
  if (me == 0) Finish(&rep, *gathered);
  return done(Outcome::kOk, "");
}

// Rank 0: the plan-group time of each distinct collective, the stages'
// figures, the extrapolation and the report's words.
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
                  rep->breakdown[static_cast<size_t>(Term::kHost)].predicted_s);
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
}

}  // namespace

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
