// backend/fault.h: a Backend that wraps another and injects one
// failure, so that the profiler's and the executor's handling of a dying rank,
// an NCCL error, a hang or an out-of-memory is tested without breaking real
// hardware. Every call is forwarded until the fault fires.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/collectives.h"

namespace paratune::backend {

enum class FaultKind : uint8_t {
  // At the Nth operation (any call that does work: memory, copies, streams,
  // events, splits, collectives, GEMMs, host collectives) the rank "dies": that
  // call and every later one fail with kUnavailable. Peers see their next host
  // collective or synchronisation time out.
  kRankDies = 0,
  // The Nth collective (including splits) fails like ncclRemoteError: kInternal;
  // its communicator stays broken (later collectives on it fail too).
  kCollectiveError,
  // The Nth collective is accepted but never completes: the next Synchronize or
  // ElapsedSeconds that depends on its stream fails with kTimeout, and keeps failing.
  kTimeout,
  // The Nth Allocate fails with OutOfMemory() whatever its size.
  kOutOfMemory,
};
// "rank_dies" | "collective_error" | "timeout" | "oom".
const char* FaultKindName(FaultKind k);
Result<FaultKind> ParseFaultKind(const std::string& name);

struct FaultPlan {
  FaultKind kind = FaultKind::kRankDies;
  int64_t at_call = 1;  // 1-based index among the calls that count for `kind`
  int rank = -1;        // world rank that suffers it; -1 = every rank
};
// Parses "KIND@N" or "KIND@N:rank=R" (e.g. "timeout@3:rank=1"), the form of
// PARATUNE_FAULT and of the CLI's --inject-fault.
Result<FaultPlan> ParseFaultPlan(const std::string& text);

class FaultBackend final : public CollectiveBackend {
 public:
  // Owns `inner`. REQUIRES: inner != nullptr, plan.at_call ≥ 1.
  FaultBackend(std::unique_ptr<Backend> inner, FaultPlan plan);

  // True once the fault has fired on this rank.
  bool fired() const { return fired_; }
  Backend& inner() { return *inner_; }

  std::string name() const override { return "fault(" + inner_->name() + ")"; }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  const std::vector<std::string>& hosts() const override { return inner_->hosts(); }
  Result<DeviceInfo> DescribeDevice() override { return Forward(&Backend::DescribeDevice); }
  std::map<std::string, std::string> Versions() const override { return inner_->Versions(); }

  Status CheckGemm(GemmPrecision p) const override { return inner_->CheckGemm(p); }
  Status CheckCollective(OpKind kind, DataType t, ReduceOp op) const override {
    return inner_->CheckCollective(kind, t, op);
  }

  // Every call that does work counts as an operation (OnOperation). Those with
  // a body here only forward; those defined in fault.cc also inject the other
  // faults.
  Result<Buffer> Allocate(int64_t bytes) override;
  Status Free(const Buffer& b) override { return Forward(&Backend::Free, b); }
  Result<MemoryInfo> GetMemoryInfo() override { return Forward(&Backend::GetMemoryInfo); }
  Status CopyToDevice(const Buffer& dst, const void* src, int64_t bytes) override {
    return Forward(&Backend::CopyToDevice, dst, src, bytes);
  }
  Status CopyToHost(void* dst, const Buffer& src, int64_t bytes) override {
    return Forward(&Backend::CopyToHost, dst, src, bytes);
  }
  Status Fill(const Buffer& b, DataType t, double value) override {
    return Forward(&Backend::Fill, b, t, value);
  }
  Status FillRandom(const Buffer& b, DataType t, uint64_t seed) override {
    return Forward(&Backend::FillRandom, b, t, seed);
  }
  Status Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) override {
    return Forward(&Backend::Copy, dst, src, bytes, stream);
  }

  Result<StreamId> CreateStream() override { return Forward(&Backend::CreateStream); }
  Result<EventId> CreateEvent() override { return Forward(&Backend::CreateEvent); }
  Status RecordEvent(EventId e, StreamId stream) override;
  Status StreamWaitEvent(StreamId stream, EventId e) override;
  Result<double> ElapsedSeconds(EventId start, EventId end) override;
  Status Synchronize(StreamId stream) override;
  Status SynchronizeAll() override;
  Status HoldStreams(const std::vector<StreamId>& streams) override {
    return Forward(&Backend::HoldStreams, streams);
  }
  Status ReleaseStreams() override { return Forward(&Backend::ReleaseStreams); }

  Result<CommId> SplitComm(CommId parent, int color, int key) override;
  Result<CommInfo> GetCommInfo(CommId comm) const override { return inner_->GetCommInfo(comm); }
  Status DestroyComm(CommId comm) override { return Forward(&Backend::DestroyComm, comm); }

  Status Gemm(const GemmArgs& args) override { return Forward(&Backend::Gemm, args); }
  Status Conv(const ConvArgs& args) override { return Forward(&Backend::Conv, args); }

  Status HostBarrier() override { return Forward(&Backend::HostBarrier); }
  Status HostAllReduceMax(std::vector<double>* values) override {
    return Forward(&Backend::HostAllReduceMax, values);
  }
  Result<std::vector<std::string>> HostAllGather(const std::string& mine) override {
    return Forward(&Backend::HostAllGather, mine);
  }
  void AbortWorld(int exit_code) override { inner_->AbortWorld(exit_code); }

 private:
  // Collectives (backend/collectives.h): the wrapped backend checks each call;
  // this one counts it, may inject its fault, and forwards it.
  Status PrepareCollective(CollectiveCall*) override { return Status::Ok(); }
  Status RunCollective(const CollectiveCall& call) override;
  Status CheckCollectiveStream(StreamId) const override { return Status::Ok(); }
  Result<int> CollectiveCommSize(CommId comm) const override {
    PT_ASSIGN_OR_RETURN(CommInfo info, inner_->GetCommInfo(comm));
    return info.size;
  }
  Status CheckCollectiveBuffer(const Buffer&, int64_t, const char*) const override {
    return Status::Ok();
  }

  bool Targets() const { return plan_.rank < 0 || plan_.rank == inner_->rank(); }
  // Counts one operation; the Status to return instead of forwarding, or Ok.
  Status OnOperation();
  // Counts one operation and, unless that kills the rank, makes the call on
  // the wrapped backend.
  template <typename R, typename... Params, typename... Args>
  R Forward(R (Backend::*call)(Params...), Args&&... args) {
    PT_RETURN_IF_ERROR(OnOperation());
    return (inner_.get()->*call)(std::forward<Args>(args)...);
  }
  // Counts one collective on `comm` enqueued on `stream`.
  Status OnCollective(CommId comm, StreamId stream);
  Status Dead() const;

  std::unique_ptr<Backend> inner_;
  FaultPlan plan_;
  int64_t operations_ = 0;
  int64_t collectives_ = 0;
  int64_t allocations_ = 0;
  bool fired_ = false;
  bool dead_ = false;
  std::set<CommId> broken_comms_;
  std::set<StreamId> hung_streams_;
  std::vector<std::pair<EventId, StreamId>> events_;  // where each event was last recorded
};

}  // namespace paratune::backend
