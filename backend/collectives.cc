#include "backend/collectives.h"

#include <string>

namespace paratune::backend {

void CollectiveBufferBytes(int comm_size, CollectiveCall* call) {
  const int64_t unit = call->count * DataTypeBytes(call->dtype);
  const int64_t all = unit * comm_size;
  call->comm_size = comm_size;
  switch (call->kind) {
    case OpKind::kAllReduce:
      call->send_bytes = call->recv_bytes = unit;
      return;
    case OpKind::kAllGather:  // each rank's block in, every rank's blocks out
      call->send_bytes = unit;
      call->recv_bytes = all;
      return;
    case OpKind::kReduceScatter:  // every rank's blocks in, this rank's reduced block out
      call->send_bytes = all;
      call->recv_bytes = unit;
      return;
    case OpKind::kAllToAll:  // block j goes to rank j; block j comes from rank j
      call->send_bytes = call->recv_bytes = all;
      return;
    case OpKind::kSendRecv:
      call->send_bytes = call->send_peer != kNoPeer ? unit : 0;
      call->recv_bytes = call->recv_peer != kNoPeer ? unit : 0;
      return;
    default:
      call->send_bytes = call->recv_bytes = 0;
      return;
  }
}

const char* CollectiveLabel(OpKind kind) {
  return kind == OpKind::kSendRecv ? "" : OpKindName(kind);
}

Status IssueCollective(Backend& b, const CollectiveCall& c) {
  switch (c.kind) {
    case OpKind::kAllReduce:
      return b.AllReduce(c.comm, c.send, c.recv, c.count, c.dtype, c.op, c.stream);
    case OpKind::kAllGather:
      return b.AllGather(c.comm, c.send, c.recv, c.count, c.dtype, c.stream);
    case OpKind::kReduceScatter:
      return b.ReduceScatter(c.comm, c.send, c.recv, c.count, c.dtype, c.op, c.stream);
    case OpKind::kAllToAll:
      return b.AllToAll(c.comm, c.send, c.recv, c.count, c.dtype, c.stream);
    case OpKind::kSendRecv:
      return b.SendRecv(c.comm, c.send, c.send_peer, c.recv, c.recv_peer, c.count, c.dtype,
                        c.stream);
    default:
      return Status::InvalidArgument(std::string(OpKindName(c.kind)) + " is not a collective");
  }
}

namespace {

// What every collective call names: its kind, communicator, buffers, element
// count and type, stream and (for the reductions) operation; SendRecv adds
// its peers.
CollectiveCall Call(OpKind kind, CommId comm, const Buffer& send, const Buffer& recv, int64_t count,
                    DataType t, StreamId stream, ReduceOp op = ReduceOp::kSum) {
  return {.kind = kind,
          .comm = comm,
          .send = send,
          .recv = recv,
          .count = count,
          .dtype = t,
          .op = op,
          .stream = stream};
}

}  // namespace

Status CollectiveBackend::AllReduce(CommId comm, const Buffer& send, const Buffer& recv,
                                    int64_t count, DataType t, ReduceOp op, StreamId stream) {
  return Dispatch(Call(OpKind::kAllReduce, comm, send, recv, count, t, stream, op));
}

Status CollectiveBackend::AllGather(CommId comm, const Buffer& send, const Buffer& recv,
                                    int64_t send_count, DataType t, StreamId stream) {
  return Dispatch(Call(OpKind::kAllGather, comm, send, recv, send_count, t, stream));
}

Status CollectiveBackend::ReduceScatter(CommId comm, const Buffer& send, const Buffer& recv,
                                        int64_t recv_count, DataType t, ReduceOp op,
                                        StreamId stream) {
  return Dispatch(Call(OpKind::kReduceScatter, comm, send, recv, recv_count, t, stream, op));
}

Status CollectiveBackend::AllToAll(CommId comm, const Buffer& send, const Buffer& recv,
                                   int64_t count_per_peer, DataType t, StreamId stream) {
  return Dispatch(Call(OpKind::kAllToAll, comm, send, recv, count_per_peer, t, stream));
}

Status CollectiveBackend::SendRecv(CommId comm, const Buffer& send, int send_peer,
                                   const Buffer& recv, int recv_peer, int64_t count, DataType t,
                                   StreamId stream) {
  CollectiveCall call = Call(OpKind::kSendRecv, comm, send, recv, count, t, stream);
  call.send_peer = send_peer;
  call.recv_peer = recv_peer;
  return Dispatch(call);
}

Status CollectiveBackend::Dispatch(CollectiveCall call) {
  PT_RETURN_IF_ERROR(PrepareCollective(&call));
  return RunCollective(call);
}

Status CollectiveBackend::PrepareCollective(CollectiveCall* call) {
  PT_RETURN_IF_ERROR(CheckCollectiveStream(call->stream));
  PT_ASSIGN_OR_RETURN(int size, CollectiveCommSize(call->comm));
  if (call->kind == OpKind::kSendRecv) {
    if (call->send_peer == kNoPeer && call->recv_peer == kNoPeer) {
      return Status::InvalidArgument("sendrecv with neither a send nor a receive peer");
    }
    for (int peer : {call->send_peer, call->recv_peer}) {
      if (peer != kNoPeer && (peer < 0 || peer >= size)) {
        return Status::InvalidArgument("peer " + std::to_string(peer) +
                                       " outside communicator of " + std::to_string(size) +
                                       " ranks");
      }
    }
  }
  CollectiveBufferBytes(size, call);
  const std::string label = CollectiveLabel(call->kind);
  const std::string prefix = label.empty() ? "" : label + " ";
  const bool send_used = call->kind != OpKind::kSendRecv || call->send_peer != kNoPeer;
  const bool recv_used = call->kind != OpKind::kSendRecv || call->recv_peer != kNoPeer;
  if (send_used) {
    PT_RETURN_IF_ERROR(
        CheckCollectiveBuffer(call->send, call->send_bytes, (prefix + "send").c_str()));
  }
  if (recv_used) {
    PT_RETURN_IF_ERROR(
        CheckCollectiveBuffer(call->recv, call->recv_bytes, (prefix + "recv").c_str()));
  }
  return Status::Ok();
}

Status CheckBufferView(const Buffer& b, bool allocated, const void* base, int64_t allocated_bytes,
                       int64_t need_bytes, const char* what, const std::string& where) {
  if (!b.valid()) return Status::InvalidArgument(std::string(what) + ": no buffer");
  if (!allocated) {
    return Status::InvalidArgument(std::string(what) + ": buffer " + std::to_string(b.id) +
                                   " is not allocated" + where);
  }
  if (b.offset_bytes < 0 || b.offset_bytes + b.bytes > allocated_bytes ||
      (base != nullptr && b.data != static_cast<const char*>(base) + b.offset_bytes)) {
    return Status::InvalidArgument(std::string(what) + ": view lies outside its allocation");
  }
  if (b.bytes < need_bytes) {
    return Status::InvalidArgument(std::string(what) + ": buffer holds " + std::to_string(b.bytes) +
                                   " bytes, the call needs " + std::to_string(need_bytes));
  }
  return Status::Ok();
}

}  // namespace paratune::backend
