#include "backend/fault.h"

#include <algorithm>
#include <iterator>

#include "common/enum_names.h"
#include "common/strings.h"

namespace paratune::backend {

namespace {
// By value, in the order of FaultKind (fault.h).
constexpr const char* kFaultKindNames[] = {"rank_dies", "collective_error", "timeout", "oom"};
static_assert(std::size(kFaultKindNames) == EnumIndex(FaultKind::kOutOfMemory) + 1);
}  // namespace

const char* FaultKindName(FaultKind k) { return EnumName(k, kFaultKindNames); }

Result<FaultKind> ParseFaultKind(const std::string& name) {
  if (auto k = EnumFromName<FaultKind>(name, kFaultKindNames)) return *k;
  return Status::InvalidArgument("unknown fault '" + name + "' (" + EnumNameList(kFaultKindNames) +
                                 ")");
}

Result<FaultPlan> ParseFaultPlan(const std::string& text) {
  const std::string usage = "fault '" + text + "' is not KIND@N[:rank=R]";
  const size_t at = text.find('@');
  if (at == std::string::npos) return Status::InvalidArgument(usage);
  FaultPlan plan;
  PT_ASSIGN_OR_RETURN(plan.kind, ParseFaultKind(text.substr(0, at)));
  std::string rest = text.substr(at + 1);
  const size_t colon = rest.find(':');
  std::string n = rest.substr(0, colon);
  auto at_call = ParseInt(n, "fault call index");
  if (!at_call.ok() || *at_call < 1) return Status::InvalidArgument(usage);
  plan.at_call = *at_call;
  if (colon != std::string::npos) {
    const std::string opt = rest.substr(colon + 1);
    if (opt.rfind("rank=", 0) != 0) return Status::InvalidArgument(usage);
    auto r = ParseInt(opt.substr(5), "fault rank");
    if (!r.ok()) return Status::InvalidArgument(usage);
    plan.rank = static_cast<int>(*r);
  }
  return plan;
}

FaultBackend::FaultBackend(std::unique_ptr<Backend> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(plan) {
  PT_CHECK(inner_ != nullptr && plan_.at_call >= 1);
}

Status FaultBackend::Dead() const {
  return Status::Unavailable("rank " + std::to_string(inner_->rank()) + " died (injected " +
                             FaultKindName(plan_.kind) + " at call " +
                             std::to_string(plan_.at_call) + ")");
}

Status FaultBackend::OnOperation() {
  if (dead_) return Dead();
  ++operations_;
  if (plan_.kind == FaultKind::kRankDies && Targets() && operations_ == plan_.at_call) {
    fired_ = dead_ = true;
    return Dead();
  }
  return Status::Ok();
}

Status FaultBackend::OnCollective(CommId comm, StreamId stream) {
  PT_RETURN_IF_ERROR(OnOperation());
  if (broken_comms_.count(comm)) {
    return Status::Internal("NCCL error on communicator " + std::to_string(comm) +
                            ": remote process exited or there was a network error "
                            "(ncclRemoteError, after an injected fault)");
  }
  ++collectives_;
  if (!Targets() || collectives_ != plan_.at_call) return Status::Ok();
  if (plan_.kind == FaultKind::kCollectiveError) {
    fired_ = true;
    broken_comms_.insert(comm);
    return Status::Internal("NCCL error on communicator " + std::to_string(comm) +
                            ": remote process exited or there was a network error "
                            "(ncclRemoteError, injected at collective " +
                            std::to_string(plan_.at_call) + ")");
  }
  if (plan_.kind == FaultKind::kTimeout) {
    fired_ = true;
    hung_streams_.insert(stream);
  }
  return Status::Ok();
}

Result<Buffer> FaultBackend::Allocate(int64_t bytes) {
  PT_RETURN_IF_ERROR(OnOperation());
  ++allocations_;
  if (plan_.kind == FaultKind::kOutOfMemory && Targets() && allocations_ == plan_.at_call) {
    fired_ = true;
    return OutOfMemory(bytes, 0, "rank " + std::to_string(inner_->rank()) + " (injected)");
  }
  return inner_->Allocate(bytes);
}

Status FaultBackend::RecordEvent(EventId e, StreamId stream) {
  PT_RETURN_IF_ERROR(OnOperation());
  auto it = std::find_if(events_.begin(), events_.end(), [&](auto& p) { return p.first == e; });
  if (it == events_.end())
    events_.push_back({e, stream});
  else
    it->second = stream;
  return inner_->RecordEvent(e, stream);
}

Status FaultBackend::StreamWaitEvent(StreamId stream, EventId e) {
  PT_RETURN_IF_ERROR(OnOperation());
  // Waiting on a hung stream's event hangs the waiter too.
  for (auto& [ev, s] : events_) {
    if (ev == e && hung_streams_.count(s)) hung_streams_.insert(stream);
  }
  return inner_->StreamWaitEvent(stream, e);
}

Result<double> FaultBackend::ElapsedSeconds(EventId start, EventId end) {
  PT_RETURN_IF_ERROR(OnOperation());
  for (auto& [ev, s] : events_) {
    if ((ev == start || ev == end) && hung_streams_.count(s)) {
      return Status::Timeout("event " + std::to_string(ev) + " on stream " + std::to_string(s) +
                             " never completed: a collective hung (injected timeout)");
    }
  }
  return inner_->ElapsedSeconds(start, end);
}

Status FaultBackend::Synchronize(StreamId stream) {
  PT_RETURN_IF_ERROR(OnOperation());
  if (hung_streams_.count(stream)) {
    return Status::Timeout("stream " + std::to_string(stream) + " on rank " +
                           std::to_string(inner_->rank()) +
                           " did not finish: a collective hung (injected timeout)");
  }
  return inner_->Synchronize(stream);
}

Status FaultBackend::SynchronizeAll() {
  PT_RETURN_IF_ERROR(OnOperation());
  if (!hung_streams_.empty()) {
    return Status::Timeout("rank " + std::to_string(inner_->rank()) +
                           " did not finish: a collective hung (injected timeout)");
  }
  return inner_->SynchronizeAll();
}

Result<CommId> FaultBackend::SplitComm(CommId parent, int color, int key) {
  PT_RETURN_IF_ERROR(OnCollective(parent, kDefaultStream));
  return inner_->SplitComm(parent, color, key);
}

Status FaultBackend::RunCollective(const CollectiveCall& call) {
  PT_RETURN_IF_ERROR(OnCollective(call.comm, call.stream));
  return IssueCollective(*inner_, call);
}

}  // namespace paratune::backend
