// backend/collectives.h: the collective skeleton every backend shares.
//
// Backend's collective calls (AllReduce, AllGather, ReduceScatter, AllToAll,
// SendRecv) are implemented once, by CollectiveBackend: each call becomes a
// CollectiveCall, is checked the same way on every backend (the stream, the
// communicator, the peers, and the bytes each buffer must hold for the
// communicator's size, CollectiveBufferBytes), and the checked call goes to
// the backend's one primitive, RunCollective. A backend supplies only its
// primitives: how it finds a stream and a communicator, how it checks a
// buffer, and how it runs a checked call.
//
// Adding a collective: its OpKind and Backend method (backend.h), its row in
// CollectiveBufferBytes, CollectiveLabel and IssueCollective (collectives.cc),
// the method here that builds the call, and one case in each backend's
// RunCollective.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace paratune::backend {

// One collective call, NCCL argument conventions. `count` means what the
// Backend method's count means: AllReduce `count`, AllGather `send_count`,
// ReduceScatter `recv_count`, AllToAll `count_per_peer`, SendRecv `count`.
struct CollectiveCall {
  OpKind kind = OpKind::kAllReduce;
  CommId comm = kWorldComm;
  Buffer send, recv;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // reductions only
  StreamId stream = kDefaultStream;
  int send_peer = kNoPeer, recv_peer = kNoPeer;  // SendRecv only
  // Filled by the check (CollectiveBackend): the communicator's size and the
  // bytes the send and receive buffers must hold (0: that side is unused).
  int comm_size = 0;
  int64_t send_bytes = 0, recv_bytes = 0;
  // The bytes the collective moves as nccl-tests counts its size: the larger side.
  int64_t size_bytes() const { return send_bytes > recv_bytes ? send_bytes : recv_bytes; }
};

// Fills call->comm_size, send_bytes and recv_bytes for a communicator of
// `comm_size` ranks. REQUIRES: call->kind is a collective (kAllReduce ... kSendRecv).
void CollectiveBufferBytes(int comm_size, CollectiveCall* call);

// How error messages name the call's buffers: "all_reduce", "alltoall", ...;
// SendRecv's buffers are "send" and "recv".
const char* CollectiveLabel(OpKind kind);

// Runs `call` through `b`'s public collective method (a wrapper such as the
// fault backend forwards a call to the backend it wraps this way).
Status IssueCollective(Backend& b, const CollectiveCall& call);

class CollectiveBackend : public Backend {
 public:
  Status AllReduce(CommId comm, const Buffer& send, const Buffer& recv, int64_t count, DataType t,
                   ReduceOp op, StreamId stream) final;
  Status AllGather(CommId comm, const Buffer& send, const Buffer& recv, int64_t send_count,
                   DataType t, StreamId stream) final;
  Status ReduceScatter(CommId comm, const Buffer& send, const Buffer& recv, int64_t recv_count,
                       DataType t, ReduceOp op, StreamId stream) final;
  Status AllToAll(CommId comm, const Buffer& send, const Buffer& recv, int64_t count_per_peer,
                  DataType t, StreamId stream) final;
  Status SendRecv(CommId comm, const Buffer& send, int send_peer, const Buffer& recv, int recv_peer,
                  int64_t count, DataType t, StreamId stream) final;

 protected:
  // Checks `call` and fills its sizes: the stream (CheckCollectiveStream), the
  // communicator (CollectiveCommSize), SendRecv's peers, then each used buffer
  // (CheckCollectiveBuffer). A wrapper that leaves the checks to the backend it
  // wraps overrides it.
  virtual Status PrepareCollective(CollectiveCall* call);
  // Runs a call PrepareCollective accepted.
  virtual Status RunCollective(const CollectiveCall& call) = 0;

  // The primitives PrepareCollective uses.
  virtual Status CheckCollectiveStream(StreamId stream) const = 0;
  virtual Result<int> CollectiveCommSize(CommId comm) const = 0;
  virtual Status CheckCollectiveBuffer(const Buffer& b, int64_t need_bytes,
                                       const char* what) const = 0;

 private:
  Status Dispatch(CollectiveCall call);
};

// The check every backend that holds memory makes of a buffer view against
// the allocation it came from: valid, allocated (`base`, `allocated_bytes`;
// `allocated` false when the id is unknown), inside it, at the address the
// allocation implies (when `base` is not null), and at least `need_bytes`
// long. `where` is appended to the not-allocated message (" on rank 3").
Status CheckBufferView(const Buffer& b, bool allocated, const void* base, int64_t allocated_bytes,
                       int64_t need_bytes, const char* what, const std::string& where = "");

}  // namespace paratune::backend
