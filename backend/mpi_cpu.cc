#include "backend/mpi_cpu.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <sstream>
#include <vector>

#include "backend/bootstrap.h"
#include "backend/bootstrapped.h"
#include "backend/collectives.h"
#include "backend/conv.h"
#include "backend/mpi_bootstrap.h"

namespace paratune::backend {
namespace {

// Reads a "Key:   12345 kB" line of /proc/meminfo, bytes; 0 when absent.
int64_t MemInfoBytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream ss(line.substr(key.size() + 1));
    int64_t kb = 0;
    ss >> kb;
    return kb * 1024;
  }
  return 0;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        return b == std::string::npos ? "cpu" : line.substr(b);
      }
    }
  }
  return "cpu";
}

int CpusAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

MPI_Datatype MpiType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kFp8E4M3:
      return MPI_UINT8_T;  // moved as bits; never reduced
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;  // moved as bits, reduced by our own ops
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

template <typename T>
float ToFloat(T v) {
  return static_cast<float>(v);
}

// Element-wise reduction of 16-bit floats through fp32, as MPI user ops.
template <typename T, ReduceOp kOp>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    float r = 0;
    switch (kOp) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        r = x + y;
        break;
      case ReduceOp::kProd:
        r = x * y;
        break;
      case ReduceOp::kMax:
        r = std::max(x, y);
        break;
      case ReduceOp::kMin:
        r = std::min(x, y);
        break;
    }
    b[i] = T(r);
  }
}

// The one of `sum`, `prod`, `max`, `min` that implements `op`; an average
// reduces as a sum (the caller divides).
template <typename V>
V ForReduceOp(ReduceOp op, V sum, V prod, V max, V min) {
  static_assert(static_cast<int>(ReduceOp::kAvg) == 4, "by_op follows ReduceOp's order");
  const V by_op[] = {sum, prod, max, min, sum};
  return by_op[static_cast<size_t>(op)];
}

// The MPI user function that reduces 16-bit floats of type T by `op`.
template <typename T>
MPI_User_function* Reduce16Function(ReduceOp op) {
  return ForReduceOp<MPI_User_function*>(
      op, &Reduce16<T, ReduceOp::kSum>, &Reduce16<T, ReduceOp::kProd>, &Reduce16<T, ReduceOp::kMax>,
      &Reduce16<T, ReduceOp::kMin>);
}

template <typename T>
void FillTyped(void* data, int64_t n, const std::function<double(int64_t)>& value) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(value(i)));
}

void FillAny(void* data, int64_t n, DataType t, const std::function<double(int64_t)>& value) {
  switch (t) {
    case DataType::kInt8: {
      auto* p = static_cast<int8_t*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int8_t>(value(i) * 127.0);
      return;
    }
    case DataType::kFloat16:
      FillTyped<Eigen::half>(data, n, value);
      return;
    case DataType::kBFloat16:
      FillTyped<Eigen::bfloat16>(data, n, value);
      return;
    case DataType::kFloat32:
      FillTyped<float>(data, n, value);
      return;
    case DataType::kFloat64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = value(i);
      return;
    }
    case DataType::kFp8E4M3:
      return;  // refused by the callers
  }
}

// Divides every element by `d` (the avg reduction: MPI has sum only).
void ScaleAny(void* data, int64_t n, DataType t, double d) {
  switch (t) {
    case DataType::kInt8: {
      auto* p = static_cast<int8_t*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int8_t>(p[i] / d);
      return;
    }
    case DataType::kFloat16: {
      auto* p = static_cast<Eigen::half*>(data);
      for (int64_t i = 0; i < n; ++i)
        p[i] = Eigen::half(static_cast<float>(p[i]) / static_cast<float>(d));
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<Eigen::bfloat16*>(data);
      for (int64_t i = 0; i < n; ++i) {
        p[i] = Eigen::bfloat16(static_cast<float>(p[i]) / static_cast<float>(d));
      }
      return;
    }
    case DataType::kFloat32: {
      auto* p = static_cast<float*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] / d);
      return;
    }
    case DataType::kFloat64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] /= d;
      return;
    }
    case DataType::kFp8E4M3:
      return;  // never reduced
  }
}

// SplitMix64: a fixed, fast generator so runs are reproducible.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool Overlap(const Buffer& a, const Buffer& b) {
  if (!a.data || !b.data) return false;
  const char* pa = static_cast<const char*>(a.data);
  const char* pb = static_cast<const char*>(b.data);
  return pa < pb + b.bytes && pb < pa + a.bytes;
}

class MpiCpuBackend final : public BootstrappedBackend {
 public:
  MpiCpuBackend(std::unique_ptr<Bootstrap> boot, HostLayout layout, int64_t memory_limit_bytes)
      : BootstrappedBackend(std::move(boot), std::move(layout)),
        memory_limit_bytes_(memory_limit_bytes) {
    stream_count_ = 1;
  }

  ~MpiCpuBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      for (MPI_Comm& c : comms_) {
        if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
      }
      for (auto& [key, op] : ops16_) MPI_Op_free(&op);
    }
    for (auto& [id, a] : allocations_) std::free(a.base);
  }

  Status Init() {
    MPI_Comm world = MPI_COMM_NULL;
    PT_RETURN_IF_ERROR(MpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup"));
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    comms_.push_back(world);
    return Status::Ok();
  }

  std::string name() const override { return "mpi-cpu"; }

  Result<DeviceInfo> DescribeDevice() override {
    DeviceInfo d;
    d.kind = "cpu";
    d.name = CpuModelName();
    d.device_index = layout_.local_rank;
    // This rank's share of installed RAM (stable, unlike MemAvailable).
    d.memory_bytes = MemInfoBytes("MemTotal") / std::max(1, layout_.local_size);
    d.multiprocessors = std::max(1, CpusAllowed() / std::max(1, layout_.local_size));
    return d;
  }

  std::map<std::string, std::string> Versions() const override {
    auto v = boot_->Versions();
    v["eigen"] = std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
                 "." + std::to_string(EIGEN_MINOR_VERSION);
    return v;
  }

  Status CheckGemm(GemmPrecision p) const override {
    if (p == GemmPrecision::kFp32) return Status::Ok();
    return Status::Unavailable(std::string("the mpi-cpu backend runs fp32 GEMMs only (Eigen has no "
                                           "native ") +
                               GemmPrecisionName(p) + " kernel on CPUs)");
  }

  Status CheckCollective(OpKind kind, DataType t, ReduceOp) const override {
    const bool reduces = kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter;
    if (reduces && t == DataType::kFp8E4M3) {
      return Status::Unavailable("the mpi-cpu backend cannot reduce f8e4m3 data");
    }
    return CheckIsCollective(kind);
  }

  Result<Buffer> Allocate(int64_t bytes) override {
    if (bytes < 0) return Status::InvalidArgument("negative allocation size");
    const int64_t free_bytes = memory_limit_bytes_ - allocated_bytes_;
    const std::string where = "mpi-cpu rank " + std::to_string(rank());
    if (bytes > free_bytes) return OutOfMemory(bytes, free_bytes, where);
    const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
    void* base = std::aligned_alloc(64, rounded);
    if (!base) return OutOfMemory(bytes, free_bytes, where);
    Buffer b;
    b.id = next_id_++;
    b.bytes = bytes;
    b.data = base;
    allocations_[b.id] = Allocation{base, bytes};
    allocated_bytes_ += bytes;
    return b;
  }

  Status Free(const Buffer& b) override {
    auto it = allocations_.find(b.id);
    if (it == allocations_.end() || b.offset_bytes != 0) {
      return Status::InvalidArgument("free of a buffer that is not an allocation");
    }
    std::free(it->second.base);
    allocated_bytes_ -= it->second.bytes;
    allocations_.erase(it);
    return Status::Ok();
  }

  Result<MemoryInfo> GetMemoryInfo() override {
    return MemoryInfo{memory_limit_bytes_, memory_limit_bytes_ - allocated_bytes_};
  }

  Status CopyToDevice(const Buffer& dst, const void* src, int64_t bytes) override {
    PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy to device"));
    if (bytes > 0) std::memcpy(dst.data, src, static_cast<size_t>(bytes));
    return Status::Ok();
  }

  Status CopyToHost(void* dst, const Buffer& src, int64_t bytes) override {
    PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy to host"));
    if (bytes > 0) std::memcpy(dst, src.data, static_cast<size_t>(bytes));
    return Status::Ok();
  }

  Status Fill(const Buffer& b, DataType t, double value) override {
    PT_RETURN_IF_ERROR(CheckBuffer(b, 0, "fill"));
    PT_RETURN_IF_ERROR(CheckFillType(t));
    FillAny(b.data, b.bytes / DataTypeBytes(t), t, [value](int64_t) { return value; });
    return Status::Ok();
  }

  Status FillRandom(const Buffer& b, DataType t, uint64_t seed) override {
    PT_RETURN_IF_ERROR(CheckBuffer(b, 0, "fill"));
    PT_RETURN_IF_ERROR(CheckFillType(t));
    FillAny(b.data, b.bytes / DataTypeBytes(t), t, [seed](int64_t i) {
      const uint64_t r = SplitMix64(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
      return static_cast<double>(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
    });
    return Status::Ok();
  }

  Status Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) override {
    PT_RETURN_IF_ERROR(CheckStream(stream));
    PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy destination"));
    PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy source"));
    if (bytes > 0) std::memmove(dst.data, src.data, static_cast<size_t>(bytes));
    return Status::Ok();
  }

  Result<StreamId> CreateStream() override { return stream_count_++; }

  Result<EventId> CreateEvent() override {
    events_.push_back(-1.0);
    return static_cast<EventId>(events_.size() - 1);
  }

  Status RecordEvent(EventId e, StreamId stream) override {
    PT_RETURN_IF_ERROR(CheckStream(stream));
    PT_RETURN_IF_ERROR(CheckEvent(e, false));
    // Ops ran when they were enqueued: the stream has reached this point now.
    events_[static_cast<size_t>(e)] = NowSeconds();
    return Status::Ok();
  }

  Status StreamWaitEvent(StreamId stream, EventId e) override {
    PT_RETURN_IF_ERROR(CheckStream(stream));
    return CheckEvent(e, true);
  }

  Result<double> ElapsedSeconds(EventId start, EventId end) override {
    PT_RETURN_IF_ERROR(CheckEvent(start, true));
    PT_RETURN_IF_ERROR(CheckEvent(end, true));
    return events_[static_cast<size_t>(end)] - events_[static_cast<size_t>(start)];
  }

  Status Synchronize(StreamId stream) override { return CheckStream(stream); }
  Status SynchronizeAll() override { return Status::Ok(); }
  Status HoldStreams(const std::vector<StreamId>& streams) override {
    for (StreamId s : streams) PT_RETURN_IF_ERROR(CheckStream(s));
    return Status::Ok();
  }
  Status ReleaseStreams() override { return Status::Ok(); }

  Result<CommId> SplitComm(CommId parent, int color, int key) override {
    PT_ASSIGN_OR_RETURN(MPI_Comm p, FindComm(parent));
    MPI_Comm out = MPI_COMM_NULL;
    PT_RETURN_IF_ERROR(MpiCheck(MPI_Comm_split(p, color < 0 ? MPI_UNDEFINED : color, key, &out),
                                "MPI_Comm_split"));
    if (out == MPI_COMM_NULL) return kNoComm;
    MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
    comms_.push_back(out);
    return static_cast<CommId>(comms_.size() - 1);
  }

  Status DestroyComm(CommId comm) override {
    if (comm == kWorldComm)
      return Status::InvalidArgument("the world communicator cannot be destroyed");
    PT_ASSIGN_OR_RETURN(MPI_Comm c, FindComm(comm));
    PT_RETURN_IF_ERROR(MpiCheck(MPI_Comm_free(&c), "MPI_Comm_free"));
    comms_[static_cast<size_t>(comm)] = MPI_COMM_NULL;
    return Status::Ok();
  }

  Result<CommInfo> GetCommInfo(CommId comm) const override {
    PT_ASSIGN_OR_RETURN(MPI_Comm c, FindComm(comm));
    CommInfo info;
    MPI_Comm_rank(c, &info.rank);
    MPI_Comm_size(c, &info.size);
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(comms_[0], &wg);
    std::vector<int> mine(static_cast<size_t>(info.size)), world(static_cast<size_t>(info.size));
    for (int i = 0; i < info.size; ++i) mine[static_cast<size_t>(i)] = i;
    MPI_Group_translate_ranks(g, info.size, mine.data(), wg, world.data());
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    info.world_ranks = world;
    return info;
  }

  // Collectives (backend/collectives.h): calls arrive checked; MPI runs them
  // at once on the calling thread (the streams are ordering tokens only).
  Status RunCollective(const CollectiveCall& call) override {
    PT_ASSIGN_OR_RETURN(MPI_Comm c, FindComm(call.comm));
    PT_RETURN_IF_ERROR(CheckCount(call.count));
    const DataType t = call.dtype;
    const int n = static_cast<int>(call.count);
    const Buffer& send = call.send;
    const Buffer& recv = call.recv;
    const int p = call.comm_size;
    switch (call.kind) {
      case OpKind::kAllReduce: {
        PT_ASSIGN_OR_RETURN(MPI_Op mop, MpiOp(t, call.op));
        const void* src = send.data == recv.data ? MPI_IN_PLACE : send.data;
        PT_RETURN_IF_ERROR(
            MpiCheck(MPI_Allreduce(src, recv.data, n, MpiType(t), mop, c), "MPI_Allreduce"));
        if (call.op == ReduceOp::kAvg) ScaleAny(recv.data, call.count, t, p);
        return Status::Ok();
      }
      case OpKind::kAllGather: {
        int me = 0;
        MPI_Comm_rank(c, &me);
        const void* src = send.data;
        if (send.data == static_cast<char*>(recv.data) + call.send_bytes * me) {
          src = MPI_IN_PLACE;
        } else if (Overlap(send, recv)) {
          return Status::InvalidArgument("all_gather: send overlaps recv other than in place");
        }
        return MpiCheck(MPI_Allgather(src, n, MpiType(t), recv.data, n, MpiType(t), c),
                        "MPI_Allgather");
      }
      case OpKind::kReduceScatter: {
        PT_ASSIGN_OR_RETURN(MPI_Op mop, MpiOp(t, call.op));
        const void* src = send.data;
        std::vector<char> staged;
        if (Overlap(send, recv)) {  // NCCL's in-place form (recv inside send): stage the input
          staged.assign(static_cast<const char*>(send.data),
                        static_cast<const char*>(send.data) + call.send_bytes);
          src = staged.data();
        }
        PT_RETURN_IF_ERROR(
            MpiCheck(MPI_Reduce_scatter_block(src, recv.data, n, MpiType(t), mop, c),
                     "MPI_Reduce_scatter_block"));
        if (call.op == ReduceOp::kAvg) ScaleAny(recv.data, call.count, t, p);
        return Status::Ok();
      }
      case OpKind::kAllToAll: {
        const void* src = send.data == recv.data ? MPI_IN_PLACE : send.data;
        return MpiCheck(MPI_Alltoall(src, n, MpiType(t), recv.data, n, MpiType(t), c),
                        "MPI_Alltoall");
      }
      case OpKind::kSendRecv: {
        constexpr int kTag = 7070;
        const int to = call.send_peer, from = call.recv_peer;
        if (to != kNoPeer && from != kNoPeer) {
          return MpiCheck(MPI_Sendrecv(send.data, n, MpiType(t), to, kTag, recv.data, n,
                                       MpiType(t), from, kTag, c, MPI_STATUS_IGNORE),
                          "MPI_Sendrecv");
        }
        if (to != kNoPeer) {
          return MpiCheck(MPI_Send(send.data, n, MpiType(t), to, kTag, c), "MPI_Send");
        }
        return MpiCheck(MPI_Recv(recv.data, n, MpiType(t), from, kTag, c, MPI_STATUS_IGNORE),
                        "MPI_Recv");
      }
      default:
        return Status::InvalidArgument(std::string(OpKindName(call.kind)) +
                                       " is not a collective");
    }
  }
  Status CheckCollectiveStream(StreamId s) const override { return CheckStream(s); }
  Result<int> CollectiveCommSize(CommId comm) const override {
    PT_ASSIGN_OR_RETURN(MPI_Comm c, FindComm(comm));
    return CommSize(c);
  }
  Status CheckCollectiveBuffer(const Buffer& b, int64_t need_bytes,
                               const char* what) const override {
    return CheckBuffer(b, need_bytes, what);
  }

  Status Gemm(const GemmArgs& a) override {
    PT_RETURN_IF_ERROR(CheckStream(a.stream));
    PT_RETURN_IF_ERROR(CheckGemm(a.precision));
    if (a.m <= 0 || a.n <= 0 || a.k <= 0) return Status::InvalidArgument("GEMM dims must be > 0");
    PT_RETURN_IF_ERROR(CheckBuffer(a.a, a.k * a.m * 4, "gemm A"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.b, a.k * a.n * 4, "gemm B"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.c, a.m * a.n * 4, "gemm C"));
    Eigen::Map<const Eigen::MatrixXf> A(static_cast<const float*>(a.a.data), a.k, a.m);
    Eigen::Map<const Eigen::MatrixXf> B(static_cast<const float*>(a.b.data), a.k, a.n);
    Eigen::Map<Eigen::MatrixXf> C(static_cast<float*>(a.c.data), a.m, a.n);
    try {
      C.noalias() = A.transpose() * B;
    } catch (const std::bad_alloc&) {
      return OutOfMemory(0, 0, "mpi-cpu rank " + std::to_string(rank()) + " (GEMM workspace)");
    }
    return Status::Ok();
  }

  Status Conv(const ConvArgs& a) override {
    PT_RETURN_IF_ERROR(CheckStream(a.stream));
    PT_RETURN_IF_ERROR(CheckGemm(a.precision));
    PT_RETURN_IF_ERROR(CheckBuffer(a.x, 0, "convolution x"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.w, 0, "convolution w"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.y, 0, "convolution y"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.workspace, 0, "convolution workspace"));
    return HostConvFp32(a);
  }

  void AbortWorld(int exit_code) override { boot_->Abort(exit_code); }

 private:
  struct Allocation {
    void* base = nullptr;
    int64_t bytes = 0;
  };

  static double NowSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static int CommSize(MPI_Comm c) {
    int n = 1;
    MPI_Comm_size(c, &n);
    return n;
  }
  static Status CheckFillType(DataType t) {
    if (t == DataType::kFp8E4M3)
      return Status::Unavailable("the mpi-cpu backend has no f8e4m3 type");
    return Status::Ok();
  }
  static Status CheckCount(int64_t count) {
    if (count < 0 || count > INT_MAX) {
      return Status::InvalidArgument(
          "the mpi-cpu backend moves 0 to 2^31-1 elements per call, got " + std::to_string(count));
    }
    return Status::Ok();
  }
  Status CheckStream(StreamId s) const {
    if (s < 0 || s >= stream_count_)
      return Status::InvalidArgument("unknown stream " + std::to_string(s));
    return Status::Ok();
  }
  Status CheckEvent(EventId e, bool recorded) const {
    if (e < 0 || e >= static_cast<int>(events_.size())) {
      return Status::InvalidArgument("unknown event " + std::to_string(e));
    }
    if (recorded && events_[static_cast<size_t>(e)] < 0) {
      return Status::InvalidArgument("event " + std::to_string(e) + " was never recorded");
    }
    return Status::Ok();
  }
  Status CheckBuffer(const Buffer& b, int64_t need_bytes, const char* what) const {
    auto it = allocations_.find(b.id);
    const bool allocated = it != allocations_.end();
    return CheckBufferView(b, allocated, allocated ? it->second.base : nullptr,
                           allocated ? it->second.bytes : 0, need_bytes, what);
  }
  Result<MPI_Comm> FindComm(CommId c) const {
    if (c < 0 || c >= static_cast<int>(comms_.size()) ||
        comms_[static_cast<size_t>(c)] == MPI_COMM_NULL) {
      return Status::InvalidArgument("unknown communicator " + std::to_string(c));
    }
    return comms_[static_cast<size_t>(c)];
  }
  Result<MPI_Op> MpiOp(DataType t, ReduceOp op) {
    if (t == DataType::kFp8E4M3)
      return Status::Unavailable("the mpi-cpu backend cannot reduce f8e4m3 data");
    if (t != DataType::kFloat16 && t != DataType::kBFloat16) {
      return ForReduceOp<MPI_Op>(op, MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN);
    }
    const int key = static_cast<int>(t) * 16 + static_cast<int>(op);
    auto it = ops16_.find(key);
    if (it != ops16_.end()) return it->second;
    MPI_User_function* fn = t == DataType::kBFloat16 ? Reduce16Function<Eigen::bfloat16>(op)
                                                     : Reduce16Function<Eigen::half>(op);
    MPI_Op mop = MPI_OP_NULL;
    PT_RETURN_IF_ERROR(MpiCheck(MPI_Op_create(fn, 1, &mop), "MPI_Op_create"));
    ops16_[key] = mop;
    return mop;
  }

  int64_t memory_limit_bytes_;
  int64_t allocated_bytes_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Allocation> allocations_;
  std::vector<MPI_Comm> comms_;
  std::map<int, MPI_Op> ops16_;
  std::vector<double> events_;
  int stream_count_ = 1;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateMpiCpuBackend(const MpiCpuOptions& options) {
  PT_ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> boot, CreateMpiBootstrap());
  PT_ASSIGN_OR_RETURN(HostLayout layout, DiscoverHostLayout(*boot));
  int64_t limit = options.memory_limit_bytes;
  if (limit <= 0) limit = MemInfoBytes("MemAvailable") / std::max(1, layout.local_size);
  if (limit <= 0) return Status::Unavailable("cannot read MemAvailable from /proc/meminfo");
  auto backend = std::make_unique<MpiCpuBackend>(std::move(boot), std::move(layout), limit);
  PT_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace paratune::backend
