// executor/run/issue.h: how the runner issues a workload's ops on a backend
// (internal to executor/run/): the scratch buffers and the arena that proves
// the plan's memory, each op's call shape, the communicator slots, and the
// Issuer that turns a WorkOp into backend calls.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collectives.h"
#include "common/median.h"
#include "common/strings.h"
#include "executor/run/workload.h"
#include "planner/cost_model.h"

namespace paratune::executor::detail {

using backend::Backend;
using backend::Buffer;
using backend::CommId;
using backend::DataType;
using backend::EventId;
using backend::OpKind;
using backend::StreamId;
using planner::ParallelConfig;

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr int64_t kAlign = 256;

inline int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline std::string Fixed(double v, int digits) { return FormatFixed(v, digits); }

inline std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

inline topology::Collective ToCollective(OpKind k) {
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

// The counts and buffer sizes of one call of `op` on a group of `size` ranks.
CallShape ShapeOf(const WorkOp& op, int size);

// Scratch bytes a compute op needs (GEMM operands, a memory-bound copy).
int64_t ComputeBytes(const WorkOp& op);

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

  // The collectives' send and receive buffers, `bytes` each; `scratch` is
  // left as it was when either cannot be had.
  Status CarveComm(int64_t bytes, Scratch* scratch) {
    auto send = Carve(bytes);
    if (!send.ok()) return send.status();
    auto recv = Carve(bytes);
    if (!recv.ok()) return recv.status();
    scratch->send = *send;
    scratch->recv = *recv;
    return Status::Ok();
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

// This rank's slot in each of `comms`.
Result<CommSlots> SlotsOf(Backend& b, const std::map<GroupKind, CommId>& comms);

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
    backend::CollectiveCall call;
    call.kind = op.collective;
    call.comm = slot.id;
    call.send = send;
    call.recv = recv;
    call.count = shape.count;
    call.dtype = op.dtype;
    call.op = backend::ReduceOp::kSum;
    call.stream = stream;
    if (op.collective == OpKind::kSendRecv) {
      const int p = slot.size, pos = slot.position;
      switch (op.peers) {
        case Peers::kNext:
          if (pos + 1 < p) call.send_peer = pos + 1;
          if (pos > 0) call.recv_peer = pos - 1;
          break;
        case Peers::kPrev:
          if (pos > 0) call.send_peer = pos - 1;
          if (pos + 1 < p) call.recv_peer = pos + 1;
          break;
        case Peers::kRing:
        case Peers::kNone:
          call.send_peer = (pos + 1) % p;
          call.recv_peer = (pos + p - 1) % p;
          break;
      }
      if (call.send_peer == backend::kNoPeer && call.recv_peer == backend::kNoPeer) {
        return Status::Ok();
      }
    }
    for (int k = 0; k < n; ++k) {
      Status st = backend::IssueCollective(b_, call);
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

}  // namespace paratune::executor::detail
