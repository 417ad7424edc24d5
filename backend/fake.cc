#include "backend/fake.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace paratune::backend {
namespace {

// nccl-tests busbw factor (cost-model.md §3). Kept local so this target does
// not depend on topology/.
double BusFactor(OpKind kind, int p) {
  if (p <= 1) return 0.0;
  switch (kind) {
    case OpKind::kAllReduce:
      return 2.0 * (p - 1) / p;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
      return static_cast<double>(p - 1) / p;
    default:
      return 1.0;
  }
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FakeWorld

struct FakeWorld::Impl {
  std::mutex mu;
  std::condition_variable cv;
  // Host exchange rounds.
  uint64_t generation = 0;
  int arrived = 0;
  std::vector<std::string> slots;
  std::vector<bool> present;
  struct Round {
    std::vector<std::string> values;
    int readers = 0;
  };
  std::map<uint64_t, Round> results;
  // Splits: (parent object, sequence) → registrations by world rank.
  struct SplitState {
    std::map<int, std::pair<int, int>> color_key;  // world rank → (color, key)
    std::map<int, int> object_of_color;
  };
  std::map<std::pair<int, int>, SplitState> splits;
  int next_object = 1;  // 0 is the world
};

FakeWorld::FakeWorld(const FakeConfig& config) : config_(config), impl_(std::make_shared<Impl>()) {
  impl_->slots.assign(static_cast<size_t>(config.world_size), "");
  impl_->present.assign(static_cast<size_t>(config.world_size), false);
}

std::shared_ptr<FakeWorld> FakeWorld::Create(const FakeConfig& config) {
  PT_CHECK(config.world_size >= 1 && config.ranks_per_node >= 1);
  return std::shared_ptr<FakeWorld>(new FakeWorld(config));
}

std::unique_ptr<FakeBackend> FakeWorld::MakeRank(int rank) {
  PT_CHECK(rank >= 0 && rank < config_.world_size);
  return std::make_unique<FakeBackend>(shared_from_this(), rank);
}

Status FakeWorld::RunRanks(const std::function<Status(Backend&)>& body,
                           std::vector<std::unique_ptr<FakeBackend>>* backends) {
  const int n = config_.world_size;
  std::vector<std::unique_ptr<FakeBackend>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(MakeRank(r));
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { results[static_cast<size_t>(r)] = body(*ranks[static_cast<size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
  if (backends) *backends = std::move(ranks);
  for (int r = 0; r < n; ++r) {
    if (!results[static_cast<size_t>(r)].ok()) {
      return results[static_cast<size_t>(r)].WithContext("rank " + std::to_string(r));
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> FakeWorld::Exchange(int rank, const std::string& mine) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t gen = s.generation;
  const int n = config_.world_size;
  s.slots[static_cast<size_t>(rank)] = mine;
  s.present[static_cast<size_t>(rank)] = true;
  if (++s.arrived == n) {
    s.results[gen] = Impl::Round{s.slots, n};
    s.slots.assign(static_cast<size_t>(n), "");
    s.present.assign(static_cast<size_t>(n), false);
    s.arrived = 0;
    ++s.generation;
    s.cv.notify_all();
  } else {
    const auto timeout = std::chrono::duration<double>(config_.host_timeout_s);
    if (!s.cv.wait_for(lock, timeout, [&] { return s.generation > gen; })) {
      std::vector<int> missing;
      for (int r = 0; r < n; ++r) {
        if (!s.present[static_cast<size_t>(r)]) missing.push_back(r);
      }
      s.present[static_cast<size_t>(rank)] = false;
      --s.arrived;
      return Status::Timeout("fake world: rank(s) " + JoinRanks(missing) +
                             " did not reach the host collective within " +
                             std::to_string(config_.host_timeout_s) + " s");
    }
  }
  Impl::Round& round = s.results[gen];
  std::vector<std::string> out = round.values;
  if (--round.readers == 0) s.results.erase(gen);
  return out;
}

Result<FakeWorld::SplitResult> FakeWorld::Split(int parent, int seq,
                                                const std::vector<int>& parent_members,
                                                int world_rank, int color, int key) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  Impl::SplitState& st = s.splits[{parent, seq}];
  st.color_key[world_rank] = {color, key};
  s.cv.notify_all();
  const auto timeout = std::chrono::duration<double>(config_.host_timeout_s);
  const size_t need = parent_members.size();
  if (!s.cv.wait_for(lock, timeout, [&] { return st.color_key.size() == need; })) {
    std::vector<int> missing;
    for (int r : parent_members) {
      if (!st.color_key.count(r)) missing.push_back(r);
    }
    return Status::Timeout("fake world: rank(s) " + JoinRanks(missing) +
                           " did not join communicator split #" + std::to_string(seq) + " within " +
                           std::to_string(config_.host_timeout_s) + " s");
  }
  SplitResult out;
  if (color < 0) return out;
  // Members with my color, ordered by (key, parent rank) like ncclCommSplit.
  std::vector<std::pair<std::pair<int, int>, int>> members;
  for (size_t pr = 0; pr < parent_members.size(); ++pr) {
    auto [c, k] = st.color_key.at(parent_members[pr]);
    if (c == color) members.push_back({{k, static_cast<int>(pr)}, parent_members[pr]});
  }
  std::sort(members.begin(), members.end());
  for (auto& m : members) out.world_ranks.push_back(m.second);
  auto it = st.object_of_color.find(color);
  if (it == st.object_of_color.end()) it = st.object_of_color.emplace(color, s.next_object++).first;
  out.object_id = it->second;
  return out;
}

// ---------------------------------------------------------------------------------------------
// FakeBackend

FakeBackend::FakeBackend(std::shared_ptr<FakeWorld> world, int rank)
    : world_(std::move(world)), rank_(rank) {
  const FakeConfig& c = world_->config();
  for (int r = 0; r < c.world_size; ++r) {
    hosts_.push_back("fake-node" + std::to_string(r / c.ranks_per_node));
  }
  stream_time_s_.push_back(0.0);
  Comm world_comm;
  world_comm.object_id = 0;
  for (int r = 0; r < c.world_size; ++r) world_comm.world_ranks.push_back(r);
  world_comm.rank = rank;
  comms_.push_back(world_comm);
}

FakeBackend::~FakeBackend() = default;

int FakeBackend::local_rank() const { return rank_ % world_->config().ranks_per_node; }

int FakeBackend::local_size() const {
  const FakeConfig& c = world_->config();
  const int node = rank_ / c.ranks_per_node;
  return std::min(c.ranks_per_node, c.world_size - node * c.ranks_per_node);
}

double FakeBackend::StreamTime(StreamId s) const {
  PT_CHECK(s >= 0 && s < static_cast<int>(stream_time_s_.size()));
  return stream_time_s_[static_cast<size_t>(s)];
}

Result<DeviceInfo> FakeBackend::DescribeDevice() {
  DeviceInfo d;
  d.kind = "fake";
  d.name = world_->config().device_name;
  d.device_index = local_rank();
  d.memory_bytes = world_->config().memory_bytes;
  d.memory_peak_GBps = world_->config().copy_GBps;  // bytes read + written, like hbm_GBps
  for (int i = 0; i < kNumGemmPrecisions; ++i)
    d.peak_tflops[i] = world_->config().gemm_tflops[static_cast<size_t>(i)];
  return d;
}

std::map<std::string, std::string> FakeBackend::Versions() const { return {{"fake", "1"}}; }

Status FakeBackend::CheckGemm(GemmPrecision p) const {
  if (world_->config().gemm_tflops[static_cast<size_t>(p)] <= 0) {
    return Status::Unavailable(std::string("fake device configured without ") +
                               GemmPrecisionName(p) + " GEMMs");
  }
  return Status::Ok();
}

Status FakeBackend::CheckCollective(OpKind kind, DataType, ReduceOp) const {
  return CheckIsCollective(kind);
}

Status FakeBackend::CheckStream(StreamId s) const {
  if (s < 0 || s >= static_cast<int>(stream_time_s_.size())) {
    return Status::InvalidArgument("unknown stream " + std::to_string(s));
  }
  return Status::Ok();
}

Status FakeBackend::CheckBuffer(const Buffer& b, int64_t need_bytes, const char* what) const {
  auto it = allocations_.find(b.id);
  const bool allocated = it != allocations_.end();
  // The fake holds no memory: views carry no address to check.
  return CheckBufferView(b, allocated, nullptr, allocated ? it->second.bytes : 0, need_bytes, what,
                         " on rank " + std::to_string(rank_));
}

Result<const FakeBackend::Comm*> FakeBackend::FindComm(CommId c) const {
  if (c < 0 || c >= static_cast<int>(comms_.size()) || comms_[static_cast<size_t>(c)].destroyed) {
    return Status::InvalidArgument("unknown communicator " + std::to_string(c));
  }
  return &comms_[static_cast<size_t>(c)];
}

bool FakeBackend::SpansNodes(const std::vector<int>& world_ranks) const {
  for (int r : world_ranks) {
    if (hosts_[static_cast<size_t>(r)] != hosts_[static_cast<size_t>(world_ranks.front())]) {
      return true;
    }
  }
  return false;
}

void FakeBackend::Log(OpRecord rec, double duration_s) {
  double& clock = stream_time_s_[static_cast<size_t>(rec.stream)];
  rec.start_s = clock;
  clock += duration_s;
  rec.end_s = clock;
  ops_.push_back(rec);
}

Result<Buffer> FakeBackend::Allocate(int64_t bytes) {
  if (bytes < 0) return Status::InvalidArgument("negative allocation size");
  const int64_t free_bytes = world_->config().memory_bytes - allocated_bytes_;
  if (bytes > free_bytes)
    return OutOfMemory(bytes, free_bytes, "fake rank " + std::to_string(rank_));
  Buffer b;
  b.id = next_buffer_id_++;
  b.bytes = bytes;
  allocations_[b.id] = Allocation{bytes};
  allocated_bytes_ += bytes;
  OpRecord rec;
  rec.kind = OpKind::kAllocate;
  rec.bytes = bytes;
  Log(rec, 0.0);
  return b;
}

Status FakeBackend::Free(const Buffer& b) {
  auto it = allocations_.find(b.id);
  if (it == allocations_.end() || b.offset_bytes != 0) {
    return Status::InvalidArgument("free of a buffer that is not an allocation");
  }
  allocated_bytes_ -= it->second.bytes;
  OpRecord rec;
  rec.kind = OpKind::kFree;
  rec.bytes = it->second.bytes;
  allocations_.erase(it);
  Log(rec, 0.0);
  return Status::Ok();
}

Result<MemoryInfo> FakeBackend::GetMemoryInfo() {
  return MemoryInfo{world_->config().memory_bytes,
                    world_->config().memory_bytes - allocated_bytes_};
}

Status FakeBackend::CopyToDevice(const Buffer& dst, const void*, int64_t bytes) {
  PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy to device"));
  return Status::Unavailable("the fake backend holds no data");
}

Status FakeBackend::CopyToHost(void*, const Buffer& src, int64_t bytes) {
  PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy to host"));
  return Status::Unavailable("the fake backend holds no data");
}

Status FakeBackend::Fill(const Buffer& b, DataType, double) { return CheckBuffer(b, 0, "fill"); }

Status FakeBackend::FillRandom(const Buffer& b, DataType, uint64_t) {
  return CheckBuffer(b, 0, "fill");
}

Status FakeBackend::Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) {
  PT_RETURN_IF_ERROR(CheckStream(stream));
  PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy destination"));
  PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy source"));
  OpRecord rec;
  rec.kind = OpKind::kCopy;
  rec.stream = stream;
  rec.bytes = bytes;
  Log(rec, 2.0 * static_cast<double>(bytes) / (world_->config().copy_GBps * 1e9));
  return Status::Ok();
}

Result<StreamId> FakeBackend::CreateStream() {
  stream_time_s_.push_back(0.0);
  return static_cast<StreamId>(stream_time_s_.size() - 1);
}

Result<EventId> FakeBackend::CreateEvent() {
  event_time_s_.push_back(-1.0);
  return static_cast<EventId>(event_time_s_.size() - 1);
}

Status FakeBackend::RecordEvent(EventId e, StreamId stream) {
  PT_RETURN_IF_ERROR(CheckStream(stream));
  if (e < 0 || e >= static_cast<int>(event_time_s_.size())) {
    return Status::InvalidArgument("unknown event " + std::to_string(e));
  }
  event_time_s_[static_cast<size_t>(e)] = stream_time_s_[static_cast<size_t>(stream)];
  OpRecord rec;
  rec.kind = OpKind::kRecordEvent;
  rec.stream = stream;
  rec.event = e;
  Log(rec, 0.0);
  return Status::Ok();
}

Status FakeBackend::StreamWaitEvent(StreamId stream, EventId e) {
  PT_RETURN_IF_ERROR(CheckStream(stream));
  if (e < 0 || e >= static_cast<int>(event_time_s_.size()) ||
      event_time_s_[static_cast<size_t>(e)] < 0) {
    return Status::InvalidArgument("wait on event " + std::to_string(e) + " never recorded");
  }
  double& clock = stream_time_s_[static_cast<size_t>(stream)];
  clock = std::max(clock, event_time_s_[static_cast<size_t>(e)]);
  OpRecord rec;
  rec.kind = OpKind::kWaitEvent;
  rec.stream = stream;
  rec.event = e;
  Log(rec, 0.0);
  return Status::Ok();
}

Result<double> FakeBackend::ElapsedSeconds(EventId start, EventId end) {
  for (EventId e : {start, end}) {
    if (e < 0 || e >= static_cast<int>(event_time_s_.size()) ||
        event_time_s_[static_cast<size_t>(e)] < 0) {
      return Status::InvalidArgument("event " + std::to_string(e) + " was never recorded");
    }
  }
  return event_time_s_[static_cast<size_t>(end)] - event_time_s_[static_cast<size_t>(start)];
}

Status FakeBackend::Synchronize(StreamId stream) {
  PT_RETURN_IF_ERROR(CheckStream(stream));
  OpRecord rec;
  rec.kind = OpKind::kSynchronize;
  rec.stream = stream;
  Log(rec, 0.0);
  return Status::Ok();
}

Status FakeBackend::SynchronizeAll() {
  // Every stream has reached its last op once the device is idle.
  const double t = *std::max_element(stream_time_s_.begin(), stream_time_s_.end());
  OpRecord rec;
  rec.kind = OpKind::kSynchronize;
  rec.stream = kDefaultStream;
  rec.start_s = rec.end_s = t;
  ops_.push_back(rec);
  return Status::Ok();
}

Status FakeBackend::HoldStreams(const std::vector<StreamId>& streams) {
  for (StreamId s : streams) PT_RETURN_IF_ERROR(CheckStream(s));
  if (!held_.empty()) return Status::InvalidArgument("streams are already held");
  held_ = streams;
  // Held streams start together when released, at the latest of their clocks;
  // virtual time does not pass while the host holds them, so move them now and
  // anything enqueued meanwhile starts from there.
  double t = 0;
  for (StreamId s : held_) t = std::max(t, stream_time_s_[static_cast<size_t>(s)]);
  for (StreamId s : held_) stream_time_s_[static_cast<size_t>(s)] = t;
  OpRecord rec;
  rec.kind = OpKind::kHoldStreams;
  Log(rec, 0.0);
  return Status::Ok();
}

Status FakeBackend::ReleaseStreams() {
  held_.clear();
  OpRecord rec;
  rec.kind = OpKind::kReleaseStreams;
  Log(rec, 0.0);
  return Status::Ok();
}

Result<CommId> FakeBackend::SplitComm(CommId parent, int color, int key) {
  PT_ASSIGN_OR_RETURN(const Comm* p, FindComm(parent));
  const int seq = comms_[static_cast<size_t>(parent)].splits++;
  const std::vector<int> parent_members = p->world_ranks;
  const int parent_object = p->object_id;
  PT_ASSIGN_OR_RETURN(FakeWorld::SplitResult res,
                      world_->Split(parent_object, seq, parent_members, rank_, color, key));
  OpRecord rec;
  rec.kind = OpKind::kSplitComm;
  rec.comm = parent;
  rec.color = color;
  rec.key = key;
  if (color < 0) {
    Log(rec, 0.0);
    return kNoComm;
  }
  Comm c;
  c.object_id = res.object_id;
  c.world_ranks = res.world_ranks;
  c.rank = static_cast<int>(std::find(c.world_ranks.begin(), c.world_ranks.end(), rank_) -
                            c.world_ranks.begin());
  comms_.push_back(c);
  rec.comm_size = static_cast<int>(c.world_ranks.size());
  Log(rec, 0.0);
  return static_cast<CommId>(comms_.size() - 1);
}

Status FakeBackend::DestroyComm(CommId comm) {
  if (comm == kWorldComm)
    return Status::InvalidArgument("the world communicator cannot be destroyed");
  PT_ASSIGN_OR_RETURN(const Comm* c, FindComm(comm));
  OpRecord rec;
  rec.kind = OpKind::kDestroyComm;
  rec.comm = comm;
  rec.comm_size = static_cast<int>(c->world_ranks.size());
  comms_[static_cast<size_t>(comm)].destroyed = true;
  Log(rec, 0.0);
  return Status::Ok();
}

Result<CommInfo> FakeBackend::GetCommInfo(CommId comm) const {
  PT_ASSIGN_OR_RETURN(const Comm* c, FindComm(comm));
  return CommInfo{c->rank, static_cast<int>(c->world_ranks.size()), c->world_ranks};
}

Result<int> FakeBackend::CollectiveCommSize(CommId comm) const {
  PT_ASSIGN_OR_RETURN(const Comm* c, FindComm(comm));
  return static_cast<int>(c->world_ranks.size());
}

Status FakeBackend::RunCollective(const CollectiveCall& call) {
  PT_ASSIGN_OR_RETURN(const Comm* c, FindComm(call.comm));
  const int p = static_cast<int>(c->world_ranks.size());
  bool inter = SpansNodes(c->world_ranks);
  if (call.kind == OpKind::kSendRecv) {
    inter = false;
    for (int peer : {call.send_peer, call.recv_peer}) {
      if (peer == kNoPeer) continue;
      const int wr = c->world_ranks[static_cast<size_t>(peer)];
      if (hosts_[static_cast<size_t>(wr)] != hosts_[static_cast<size_t>(rank_)]) inter = true;
    }
  }
  const FakeLinkModel& link = inter ? world_->config().inter_node : world_->config().intra_node;
  const int64_t size_bytes = call.size_bytes();
  const double seconds = link.alpha_us * 1e-6 * p + BusFactor(call.kind, p) *
                                                        static_cast<double>(size_bytes) /
                                                        (link.busbw_GBps * 1e9);
  OpRecord rec;
  rec.kind = call.kind;
  rec.stream = call.stream;
  rec.comm = call.comm;
  rec.comm_size = p;
  rec.inter_node = inter;
  rec.bytes = size_bytes;
  rec.count = call.count;
  rec.dtype = call.dtype;
  rec.op = call.op;
  rec.send_peer = call.send_peer;
  rec.recv_peer = call.recv_peer;
  Log(rec, seconds);
  return Status::Ok();
}

Status FakeBackend::Gemm(const GemmArgs& a) {
  PT_RETURN_IF_ERROR(CheckStream(a.stream));
  PT_RETURN_IF_ERROR(CheckGemm(a.precision));
  if (a.m <= 0 || a.n <= 0 || a.k <= 0) return Status::InvalidArgument("GEMM dims must be > 0");
  const int64_t in = GemmInputBytes(a.precision), out = GemmOutputBytes(a.precision);
  PT_RETURN_IF_ERROR(CheckBuffer(a.a, a.k * a.m * in, "gemm A"));
  PT_RETURN_IF_ERROR(CheckBuffer(a.b, a.k * a.n * in, "gemm B"));
  PT_RETURN_IF_ERROR(CheckBuffer(a.c, a.m * a.n * out, "gemm C"));
  const FakeConfig& c = world_->config();
  const double flops =
      2.0 * static_cast<double>(a.m) * static_cast<double>(a.n) * static_cast<double>(a.k);
  const double seconds =
      c.gemm_latency_us * 1e-6 + flops / (c.gemm_tflops[static_cast<size_t>(a.precision)] * 1e12);
  OpRecord rec;
  rec.kind = OpKind::kGemm;
  rec.stream = a.stream;
  rec.m = a.m;
  rec.n = a.n;
  rec.k = a.k;
  rec.precision = a.precision;
  Log(rec, seconds);
  return Status::Ok();
}

Status FakeBackend::Conv(const ConvArgs& a) {
  PT_RETURN_IF_ERROR(CheckStream(a.stream));
  PT_RETURN_IF_ERROR(CheckGemm(a.precision));
  PT_RETURN_IF_ERROR(CheckConvArgs(a, false));
  const FakeConfig& c = world_->config();
  const double seconds =
      c.gemm_latency_us * 1e-6 + ConvFlops(a) / (c.gemm_tflops[static_cast<size_t>(a.precision)] * 1e12);
  OpRecord rec;
  rec.kind = OpKind::kConv;
  rec.stream = a.stream;
  // The forward's implicit GEMM: output positions × output channels × patch.
  rec.m = ConvOutputElems(a) / a.k;
  rec.n = a.k;
  rec.k = ConvFilterElems(a) / a.k;
  rec.precision = a.precision;
  Log(rec, seconds);
  return Status::Ok();
}

Status FakeBackend::HostBarrier() { return world_->Exchange(rank_, "").status(); }

Status FakeBackend::HostAllReduceMax(std::vector<double>* values) {
  std::string mine(values->size() * sizeof(double), '\0');
  if (!values->empty()) std::memcpy(mine.data(), values->data(), mine.size());
  PT_ASSIGN_OR_RETURN(std::vector<std::string> all, world_->Exchange(rank_, mine));
  for (const std::string& s : all) {
    if (s.size() != mine.size()) {
      return Status::InvalidArgument("host max-reduction: ranks passed different lengths");
    }
    for (size_t i = 0; i < values->size(); ++i) {
      double v = 0;
      std::memcpy(&v, s.data() + i * sizeof(double), sizeof v);
      (*values)[i] = std::max((*values)[i], v);
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> FakeBackend::HostAllGather(const std::string& mine) {
  return world_->Exchange(rank_, mine);
}

}  // namespace paratune::backend
