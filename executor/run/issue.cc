#include "executor/run/issue.h"

namespace paratune::executor::detail {

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

Result<CommSlots> SlotsOf(Backend& b, const std::map<GroupKind, CommId>& comms) {
  CommSlots out;
  for (const auto& [kind, id] : comms) {
    if (id == backend::kNoComm) continue;
    PT_ASSIGN_OR_RETURN(backend::CommInfo info, b.GetCommInfo(id));
    out[kind] = CommSlot{id, info.size, info.rank};
  }
  return out;
}

}  // namespace paratune::executor::detail
