#include "backend/cuda_nccl.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "backend/bootstrapped.h"
#include "backend/collectives.h"
#include "backend/conv.h"
#include "backend/cuda_kernels.h"
#include "backend/nvml_topology.h"
#include "common/enum_names.h"

namespace paratune::backend {
namespace {

Status CudaError(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Internal("CUDA error in " + what + ": " + cudaGetErrorName(e) + ": " +
                          cudaGetErrorString(e));
}

Status CublasError(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal("cuBLAS error in " + what + ": " + cublasGetStatusString(s));
}

Status NcclError(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  if (r == ncclSuccess) return Status::Ok();
  std::string last = ncclGetLastError(comm) ? ncclGetLastError(comm) : "";
  return Status::Internal("NCCL error in " + what + ": " + ncclGetErrorString(r) +
                          (last.empty() ? "" : " (" + last + ")"));
}

// NCCL's type and reduction for each DataType and ReduceOp, by value.
constexpr ncclDataType_t kNcclTypes[] = {ncclInt8,    ncclFloat16, ncclBfloat16,
                                         ncclFloat32, ncclFloat64, ncclFloat8e4m3};
static_assert(std::size(kNcclTypes) == kNumDataTypes);
constexpr ncclRedOp_t kNcclOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static_assert(std::size(kNcclOps) == EnumIndex(ReduceOp::kAvg) + 1);

ncclDataType_t NcclType(DataType t) { return EnumLookup(t, kNcclTypes, ncclFloat32); }
ncclRedOp_t NcclOp(ReduceOp op) { return EnumLookup(op, kNcclOps, ncclSum); }

cuda::FillType ToFillType(DataType t) { return static_cast<cuda::FillType>(static_cast<int>(t)); }

std::string VersionString(int v, int major_div, int minor_div, int minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}

class CudaNcclBackend final : public BootstrappedBackend {
 public:
  CudaNcclBackend(std::unique_ptr<Bootstrap> boot, HostLayout layout, int device,
                  const CudaNcclOptions& options)
      : BootstrappedBackend(std::move(boot), std::move(layout)),
        device_(device),
        options_(options) {}

  ~CudaNcclBackend() override {
    cudaSetDevice(device_);
    // Bounded wait: a hung collective aborts the communicators instead of blocking exit.
    if (!aborted_ && !streams_.empty()) {
      Status drained = SynchronizeAll();
      (void)drained;
    }
    for (size_t i = comms_.size(); i-- > 0;) {
      if (!comms_[i].comm) continue;
      if (aborted_)
        ncclCommAbort(comms_[i].comm);
      else
        ncclCommDestroy(comms_[i].comm);
    }
    if (lt_) cublasLtDestroy(lt_);
    if (cublas_) cublasDestroy(cublas_);
    if (workspace_) cudaFree(workspace_);
    for (auto& [id, a] : allocations_) cudaFree(a.base);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    if (gate_host_) cudaFreeHost(const_cast<int*>(gate_host_));
  }

  Status Init() {
    PT_RETURN_IF_ERROR(CudaError(cudaSetDevice(device_), "cudaSetDevice"));
    PT_RETURN_IF_ERROR(CudaError(cudaFree(nullptr), "creating the CUDA context"));
    PT_RETURN_IF_ERROR(
        CudaError(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties"));
    cudaStream_t s = nullptr;
    PT_RETURN_IF_ERROR(
        CudaError(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    streams_.push_back(s);
    void* flag = nullptr;
    PT_RETURN_IF_ERROR(
        CudaError(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc"));
    gate_host_ = static_cast<volatile int*>(flag);
    *gate_host_ = 0;
    void* dflag = nullptr;
    PT_RETURN_IF_ERROR(
        CudaError(cudaHostGetDevicePointer(&dflag, flag, 0), "cudaHostGetDevicePointer"));
    gate_device_ = static_cast<const volatile int*>(dflag);
    PT_RETURN_IF_ERROR(CublasError(cublasCreate(&cublas_), "cublasCreate"));
    PT_RETURN_IF_ERROR(CublasError(cublasLtCreate(&lt_), "cublasLtCreate"));
    PT_RETURN_IF_ERROR(
        CudaError(cudaMalloc(&workspace_, static_cast<size_t>(options_.cublas_workspace_bytes)),
                  "cudaMalloc(cuBLAS workspace)"));
    PT_RETURN_IF_ERROR(
        CublasError(cublasSetWorkspace(cublas_, workspace_,
                                       static_cast<size_t>(options_.cublas_workspace_bytes)),
                    "cublasSetWorkspace"));
    // The world communicator: rank 0 makes the id, the bootstrap carries it.
    ncclUniqueId id{};
    if (boot_->rank() == 0)
      PT_RETURN_IF_ERROR(NcclError(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId"));
    PT_RETURN_IF_ERROR(boot_->Broadcast(&id, sizeof id, 0));
    PT_RETURN_IF_ERROR(boot_->Barrier());
    Comm world;
    PT_RETURN_IF_ERROR(NcclError(ncclCommInitRank(&world.comm, boot_->size(), id, boot_->rank()),
                                 nullptr, "ncclCommInitRank"));
    world.rank = boot_->rank();
    world.size = boot_->size();
    for (int r = 0; r < boot_->size(); ++r) world.world_ranks.push_back(r);
    comms_.push_back(world);
    return Status::Ok();
  }

  std::string name() const override { return "cuda"; }

  Result<DeviceInfo> DescribeDevice() override {
    DeviceInfo d;
    d.kind = "cuda";
    d.name = prop_.name;
    d.device_index = device_;
    d.memory_bytes = static_cast<int64_t>(prop_.totalGlobalMem);
    d.compute_major = prop_.major;
    d.compute_minor = prop_.minor;
    d.multiprocessors = prop_.multiProcessorCount;
    int clock_khz = 0, mem_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device_);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device_);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_);
    d.clock_GHz = clock_khz / 1e6;
    // Double data rate: 2 transfers per clock over bus_bits / 8 bytes.
    d.memory_peak_GBps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop_.pciDomainID, prop_.pciBusID,
                  prop_.pciDeviceID);
    d.pci_bus_id = bus;
    char uuid[64];
    const auto* u = reinterpret_cast<const unsigned char*>(prop_.uuid.bytes);
    std::snprintf(uuid, sizeof uuid,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    d.uuid = uuid;
    // NVML's clocks when the driver's library is there (dlopen, never a link
    // dependency); without it the fields stay 0.
    if (auto topo = QueryNvmlTopology(); topo.ok()) {
      if (const NvmlGpu* g = FindNvmlGpu(*topo, d.pci_bus_id)) {
        d.clock_now_GHz = g->sm_clock_MHz / 1e3;
        d.clock_max_GHz = g->sm_clock_max_MHz / 1e3;
      }
    }
    return d;
  }

  std::map<std::string, std::string> Versions() const override {
    auto v = boot_->Versions();
    int rt = 0, drv = 0, nccl = 0, cublas = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    ncclGetVersion(&nccl);
    if (cublas_) cublasGetVersion(cublas_, &cublas);
    v["cuda_runtime"] = VersionString(rt, 1000, 10, 100);
    v["cuda_driver"] = VersionString(drv, 1000, 10, 100);
    // NCCL ≥ 2.9 encodes major*10000 + minor*100 + patch.
    v["nccl"] = std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) + "." +
                std::to_string(nccl % 100);
    v["cublas"] = std::to_string(cublas / 10000) + "." + std::to_string((cublas / 100) % 100) +
                  "." + std::to_string(cublas % 100);
    return v;
  }

  Status CheckGemm(GemmPrecision p) const override {
    const int cc = prop_.major * 10 + prop_.minor;
    auto need = [&](int min_cc) -> Status {
      if (cc >= min_cc) return Status::Ok();
      return Status::Unavailable(std::string(GemmPrecisionName(p)) +
                                 " GEMMs need compute capability " + std::to_string(min_cc / 10) +
                                 "." + std::to_string(min_cc % 10) + ", " + prop_.name + " has " +
                                 std::to_string(prop_.major) + "." + std::to_string(prop_.minor));
    };
    switch (p) {
      case GemmPrecision::kFp32:
        return Status::Ok();
      case GemmPrecision::kFp16:
        return need(70);
      case GemmPrecision::kTf32:
      case GemmPrecision::kBf16:
        return need(80);
      case GemmPrecision::kFp8:
        return need(89);
    }
    return Status::InvalidArgument("unknown precision");
  }

  Status CheckCollective(OpKind kind, DataType t, ReduceOp) const override {
    switch (kind) {
      case OpKind::kAllReduce:
      case OpKind::kReduceScatter:
        if (t == DataType::kFp8E4M3 && prop_.major < 9) {
          return Status::Unavailable(
              "NCCL reduces f8e4m3 on compute capability 9.0 and newer only");
        }
        return Status::Ok();
      default:
        return CheckIsCollective(kind);
    }
  }

  Result<Buffer> Allocate(int64_t bytes) override {
    PT_RETURN_IF_ERROR(Usable());
    if (bytes < 0) return Status::InvalidArgument("negative allocation size");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes > 0 ? bytes : 1));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return OutOfMemory(bytes, static_cast<int64_t>(free_b),
                         "GPU " + std::to_string(device_) + " of rank " + std::to_string(rank()));
    }
    PT_RETURN_IF_ERROR(CudaError(e, "cudaMalloc"));
    Buffer b;
    b.id = next_id_++;
    b.bytes = bytes;
    b.data = p;
    allocations_[b.id] = Allocation{p, bytes};
    return b;
  }

  Status Free(const Buffer& b) override {
    auto it = allocations_.find(b.id);
    if (it == allocations_.end() || b.offset_bytes != 0) {
      return Status::InvalidArgument("free of a buffer that is not an allocation");
    }
    Status s = CudaError(cudaFree(it->second.base), "cudaFree");
    allocations_.erase(it);
    return s;
  }

  Result<MemoryInfo> GetMemoryInfo() override {
    size_t free_b = 0, total_b = 0;
    PT_RETURN_IF_ERROR(CudaError(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
    return MemoryInfo{static_cast<int64_t>(total_b), static_cast<int64_t>(free_b)};
  }

  Status CopyToDevice(const Buffer& dst, const void* src, int64_t bytes) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy to device"));
    if (bytes == 0) return Status::Ok();
    PT_RETURN_IF_ERROR(CudaError(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    return CudaError(cudaMemcpy(dst.data, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
                     "cudaMemcpy(host to device)");
  }

  Status CopyToHost(void* dst, const Buffer& src, int64_t bytes) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy to host"));
    if (bytes == 0) return Status::Ok();
    PT_RETURN_IF_ERROR(CudaError(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    return CudaError(cudaMemcpy(dst, src.data, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
                     "cudaMemcpy(device to host)");
  }

  Status Fill(const Buffer& b, DataType t, double value) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckBuffer(b, 0, "fill"));
    PT_RETURN_IF_ERROR(CudaError(cuda::LaunchFill(streams_[0], b.data, b.bytes / DataTypeBytes(t),
                                                  ToFillType(t), static_cast<float>(value)),
                                 "fill kernel"));
    return Synchronize(kDefaultStream);
  }

  Status FillRandom(const Buffer& b, DataType t, uint64_t seed) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckBuffer(b, 0, "fill"));
    PT_RETURN_IF_ERROR(
        CudaError(cuda::LaunchFillRandom(streams_[0], b.data, b.bytes / DataTypeBytes(t),
                                         ToFillType(t), seed),
                  "random fill kernel"));
    return Synchronize(kDefaultStream);
  }

  Status Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(stream));
    PT_RETURN_IF_ERROR(CheckBuffer(dst, bytes, "copy destination"));
    PT_RETURN_IF_ERROR(CheckBuffer(src, bytes, "copy source"));
    return CudaError(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(bytes),
                                     cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync(device to device)");
  }

  Result<StreamId> CreateStream() override {
    PT_RETURN_IF_ERROR(Usable());
    cudaStream_t s = nullptr;
    PT_RETURN_IF_ERROR(
        CudaError(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    streams_.push_back(s);
    return static_cast<StreamId>(streams_.size() - 1);
  }

  Result<EventId> CreateEvent() override {
    PT_RETURN_IF_ERROR(Usable());
    cudaEvent_t e = nullptr;
    PT_RETURN_IF_ERROR(CudaError(cudaEventCreate(&e), "cudaEventCreate"));
    events_.push_back(e);
    return static_cast<EventId>(events_.size() - 1);
  }

  Status RecordEvent(EventId e, StreamId stream) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(stream));
    PT_ASSIGN_OR_RETURN(cudaEvent_t ev, FindEvent(e));
    return CudaError(cudaEventRecord(ev, s), "cudaEventRecord");
  }

  Status StreamWaitEvent(StreamId stream, EventId e) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(stream));
    PT_ASSIGN_OR_RETURN(cudaEvent_t ev, FindEvent(e));
    return CudaError(cudaStreamWaitEvent(s, ev, 0), "cudaStreamWaitEvent");
  }

  Result<double> ElapsedSeconds(EventId start, EventId end) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(cudaEvent_t a, FindEvent(start));
    PT_ASSIGN_OR_RETURN(cudaEvent_t b, FindEvent(end));
    float ms = 0;
    PT_RETURN_IF_ERROR(CudaError(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime"));
    return ms * 1e-3;
  }

  Status Synchronize(StreamId stream) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(stream));
    return WaitUntil([s] { return cudaStreamQuery(s); }, "stream " + std::to_string(stream));
  }

  Status SynchronizeAll() override {
    PT_RETURN_IF_ERROR(Usable());
    for (size_t i = 0; i < streams_.size(); ++i) {
      cudaStream_t s = streams_[i];
      PT_RETURN_IF_ERROR(
          WaitUntil([s] { return cudaStreamQuery(s); }, "stream " + std::to_string(i)));
    }
    return Status::Ok();
  }

  Status HoldStreams(const std::vector<StreamId>& streams) override {
    PT_RETURN_IF_ERROR(Usable());
    if (holding_) return Status::InvalidArgument("streams are already held");
    // Generations instead of resetting the flag: a gate from an earlier round
    // that has not started yet still sees its own release.
    ++gate_generation_;
    const auto timeout_ns = static_cast<uint64_t>(options_.timeout_s * 1e9);
    for (StreamId id : streams) {
      PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(id));
      PT_RETURN_IF_ERROR(
          CudaError(cuda::LaunchSpinWait(s, gate_device_, gate_generation_, timeout_ns),
                    "stream gate kernel"));
    }
    holding_ = true;
    return Status::Ok();
  }

  Status ReleaseStreams() override {
    if (!holding_) return Status::Ok();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *gate_host_ = gate_generation_;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    holding_ = false;
    return Status::Ok();
  }

  Result<CommId> SplitComm(CommId parent, int color, int key) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_ASSIGN_OR_RETURN(Comm * p, FindComm(parent));
    ncclComm_t parent_comm = p->comm;
    Comm c;
    PT_RETURN_IF_ERROR(NcclError(
        ncclCommSplit(parent_comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c.comm, nullptr),
        parent_comm, "ncclCommSplit"));
    if (color < 0 || c.comm == nullptr) return kNoComm;
    PT_RETURN_IF_ERROR(NcclError(ncclCommUserRank(c.comm, &c.rank), c.comm, "ncclCommUserRank"));
    PT_RETURN_IF_ERROR(NcclError(ncclCommCount(c.comm, &c.size), c.comm, "ncclCommCount"));
    // Members' world ranks: one all-gather of an int on the new communicator.
    int* dev = nullptr;
    PT_RETURN_IF_ERROR(CudaError(
        cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int) * static_cast<size_t>(c.size + 1)),
        "cudaMalloc(split scratch)"));
    const int me = rank();
    Status s =
        CudaError(cudaMemcpy(dev + c.size, &me, sizeof me, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (s.ok()) {
      s = NcclError(ncclAllGather(dev + c.size, dev, 1, ncclInt32, c.comm, streams_[0]), c.comm,
                    "ncclAllGather(world ranks)");
    }
    if (s.ok()) s = Synchronize(kDefaultStream);
    c.world_ranks.assign(static_cast<size_t>(c.size), -1);
    if (s.ok()) {
      s = CudaError(cudaMemcpy(c.world_ranks.data(), dev, sizeof(int) * static_cast<size_t>(c.size),
                               cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
    }
    cudaFree(dev);
    comms_.push_back(c);  // kept even on failure so the destructor releases it
    PT_RETURN_IF_ERROR(s);
    return static_cast<CommId>(comms_.size() - 1);
  }

  Status DestroyComm(CommId comm) override {
    PT_RETURN_IF_ERROR(Usable());
    if (comm == kWorldComm)
      return Status::InvalidArgument("the world communicator cannot be destroyed");
    PT_ASSIGN_OR_RETURN(Comm * c, FindComm(comm));
    // Outstanding work on it must finish first (ncclCommDestroy does not wait).
    PT_RETURN_IF_ERROR(SynchronizeAll());
    ncclComm_t handle = c->comm;
    c->comm = nullptr;
    return NcclError(ncclCommDestroy(handle), nullptr, "ncclCommDestroy");
  }

  Result<CommInfo> GetCommInfo(CommId comm) const override {
    if (comm < 0 || comm >= static_cast<int>(comms_.size()) ||
        !comms_[static_cast<size_t>(comm)].comm) {
      return Status::InvalidArgument("unknown communicator " + std::to_string(comm));
    }
    const Comm& c = comms_[static_cast<size_t>(comm)];
    return CommInfo{c.rank, c.size, c.world_ranks};
  }

  // Collectives (backend/collectives.h): calls arrive checked and are
  // enqueued on their stream as NCCL calls.
  Status RunCollective(const CollectiveCall& call) override {
    PT_ASSIGN_OR_RETURN(Comm * c, FindComm(call.comm));
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(call.stream));
    const size_t n = static_cast<size_t>(call.count);
    const ncclDataType_t t = NcclType(call.dtype);
    const Buffer& send = call.send;
    const Buffer& recv = call.recv;
    switch (call.kind) {
      case OpKind::kAllReduce:
        return NcclError(ncclAllReduce(send.data, recv.data, n, t, NcclOp(call.op), c->comm, s),
                         c->comm, "ncclAllReduce");
      case OpKind::kAllGather:
        return NcclError(ncclAllGather(send.data, recv.data, n, t, c->comm, s), c->comm,
                         "ncclAllGather");
      case OpKind::kReduceScatter:
        return NcclError(ncclReduceScatter(send.data, recv.data, n, t, NcclOp(call.op), c->comm, s),
                         c->comm, "ncclReduceScatter");
      case OpKind::kAllToAll: {
        // Grouped send/recv per peer, as nccl-tests' alltoall does.
        const int64_t chunk = call.send_bytes / std::max(1, c->size);
        PT_RETURN_IF_ERROR(NcclError(ncclGroupStart(), c->comm, "ncclGroupStart"));
        Status st;
        for (int peer = 0; peer < c->size && st.ok(); ++peer) {
          const char* sp = static_cast<const char*>(send.data) + chunk * peer;
          char* rp = static_cast<char*>(recv.data) + chunk * peer;
          st = NcclError(ncclSend(sp, n, t, peer, c->comm, s), c->comm, "ncclSend");
          if (st.ok()) st = NcclError(ncclRecv(rp, n, t, peer, c->comm, s), c->comm, "ncclRecv");
        }
        Status end = NcclError(ncclGroupEnd(), c->comm, "ncclGroupEnd");
        PT_RETURN_IF_ERROR(st);
        return end;
      }
      case OpKind::kSendRecv: {
        PT_RETURN_IF_ERROR(NcclError(ncclGroupStart(), c->comm, "ncclGroupStart"));
        Status st;
        if (call.send_peer != kNoPeer) {
          st =
              NcclError(ncclSend(send.data, n, t, call.send_peer, c->comm, s), c->comm, "ncclSend");
        }
        if (st.ok() && call.recv_peer != kNoPeer) {
          st =
              NcclError(ncclRecv(recv.data, n, t, call.recv_peer, c->comm, s), c->comm, "ncclRecv");
        }
        Status end = NcclError(ncclGroupEnd(), c->comm, "ncclGroupEnd");
        PT_RETURN_IF_ERROR(st);
        return end;
      }
      default:
        return Status::InvalidArgument(std::string(OpKindName(call.kind)) + " is not a collective");
    }
  }
  Status CheckCollectiveStream(StreamId stream) const override {
    PT_RETURN_IF_ERROR(Usable());
    return FindStream(stream).status();
  }
  Result<int> CollectiveCommSize(CommId comm) const override {
    PT_ASSIGN_OR_RETURN(CommInfo info, GetCommInfo(comm));
    return info.size;
  }
  Status CheckCollectiveBuffer(const Buffer& b, int64_t need_bytes,
                               const char* what) const override {
    return CheckBuffer(b, need_bytes, what);
  }

  Status Gemm(const GemmArgs& a) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckGemm(a.precision));
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(a.stream));
    if (a.m <= 0 || a.n <= 0 || a.k <= 0) return Status::InvalidArgument("GEMM dims must be > 0");
    if (a.m > INT_MAX || a.n > INT_MAX || a.k > INT_MAX) {
      return Status::InvalidArgument("GEMM dims must fit in 32 bits for cuBLAS");
    }
    const int64_t in = GemmInputBytes(a.precision), out = GemmOutputBytes(a.precision);
    PT_RETURN_IF_ERROR(CheckBuffer(a.a, a.k * a.m * in, "gemm A"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.b, a.k * a.n * in, "gemm B"));
    PT_RETURN_IF_ERROR(CheckBuffer(a.c, a.m * a.n * out, "gemm C"));
    if (a.precision == GemmPrecision::kFp8) return GemmFp8(a, s);
    cudaDataType_t ab = CUDA_R_32F, c = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    switch (a.precision) {
      case GemmPrecision::kFp32:
        break;
      case GemmPrecision::kTf32:
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        break;
      case GemmPrecision::kBf16:
        ab = c = CUDA_R_16BF;
        break;
      case GemmPrecision::kFp16:
        ab = c = CUDA_R_16F;
        break;
      case GemmPrecision::kFp8:
        break;
    }
    const float alpha = 1.0f, beta = 0.0f;
    const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
    PT_RETURN_IF_ERROR(CublasError(cublasSetStream(cublas_, s), "cublasSetStream"));
    return CublasError(
        cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a.a.data, ab, k, a.b.data,
                     ab, k, &beta, a.c.data, c, m, compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx(" + std::string(GemmPrecisionName(a.precision)) + ")");
  }

  // The pass lowered as conv_lowering.h lays it out: the patches gathered by
  // our kernel, one strided-batched cuBLAS GEMM over the groups per chunk of
  // samples, the data gradient gathered back by our kernel.
  Status Conv(const ConvArgs& a) override {
    PT_RETURN_IF_ERROR(Usable());
    PT_RETURN_IF_ERROR(CheckGemm(a.precision));
    PT_ASSIGN_OR_RETURN(cudaStream_t s, FindStream(a.stream));
    PT_RETURN_IF_ERROR(CheckConvArgs(a, true));
    for (const Buffer* b : {&a.x, &a.w, &a.y, &a.workspace}) {
      PT_RETURN_IF_ERROR(CheckBuffer(*b, 0, "convolution"));
    }
    const ConvLowering g = LoweringOf(a);
    const int64_t chunk = ConvChunkSamples(a), e = GemmInputBytes(a.precision);
    if (chunk * g.out_positions > INT_MAX || g.patch > INT_MAX || g.k > INT_MAX) {
      return Status::InvalidArgument("convolution too large for cuBLAS's 32-bit dimensions");
    }
    cudaDataType_t type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    cuda::FillType fill = cuda::FillType::kFloat32;
    if (a.precision == GemmPrecision::kTf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    if (a.precision == GemmPrecision::kBf16) type = CUDA_R_16BF, fill = cuda::FillType::kBFloat16;
    if (a.precision == GemmPrecision::kFp16) type = CUDA_R_16F, fill = cuda::FillType::kFloat16;
    PT_RETURN_IF_ERROR(CublasError(cublasSetStream(cublas_, s), "cublasSetStream"));
    const float one = 1.0f, zero = 0.0f;
    const int L = static_cast<int>(g.patch), K = static_cast<int>(g.kg), ldy = static_cast<int>(g.k);
    const auto groups = static_cast<int>(g.groups);
    for (int64_t n0 = 0; n0 < a.n; n0 += chunk) {
      const int64_t nn = std::min(chunk, a.n - n0);
      const int cols = static_cast<int>(nn * g.out_positions);
      void* y = static_cast<char*>(a.y.data) + n0 * g.out_positions * g.k * e;
      void* col = a.workspace.data;
      const long long col_stride = static_cast<long long>(g.patch) * cols, w_stride = static_cast<long long>(L) * K;
      if (a.pass != ConvPass::kDataGrad) {
        PT_RETURN_IF_ERROR(CudaError(cuda::LaunchIm2Col(s, g, a.x.data, n0, nn, col, fill), "im2col"));
      }
      cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
      switch (a.pass) {
        case ConvPass::kForward:
          st = cublasGemmStridedBatchedEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, K, cols, L, &one, a.w.data, type, L,
                                          w_stride, col, type, L, col_stride, &zero, y, type, ldy, K, groups,
                                          compute, CUBLAS_GEMM_DEFAULT);
          break;
        case ConvPass::kDataGrad:
          st = cublasGemmStridedBatchedEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, L, cols, K, &one, a.w.data, type, L,
                                          w_stride, y, type, ldy, K, &zero, col, type, L, col_stride, groups,
                                          compute, CUBLAS_GEMM_DEFAULT);
          break;
        case ConvPass::kWeightGrad:
          st = cublasGemmStridedBatchedEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, L, K, cols, &one, col, type, L,
                                          col_stride, y, type, ldy, K, n0 == 0 ? &zero : &one, a.w.data, type, L,
                                          w_stride, groups, compute, CUBLAS_GEMM_DEFAULT);
          break;
      }
      PT_RETURN_IF_ERROR(CublasError(st, std::string("convolution ") + ConvPassName(a.pass) + " GEMM"));
      if (a.pass == ConvPass::kDataGrad) {
        PT_RETURN_IF_ERROR(CudaError(cuda::LaunchCol2Im(s, g, col, n0, nn, a.x.data, fill), "col2im"));
      }
    }
    return Status::Ok();
  }

  void AbortWorld(int exit_code) override {
    if (boot_->size() > 1) boot_->Abort(exit_code);
  }

 private:
  struct Comm {
    ncclComm_t comm = nullptr;
    int rank = 0;
    int size = 1;
    std::vector<int> world_ranks;
  };
  struct Allocation {
    void* base = nullptr;
    int64_t bytes = 0;
  };

  Status Usable() const {
    if (aborted_) return Status::Unavailable("the CUDA backend is unusable: " + abort_reason_);
    return Status::Ok();
  }

  // Polls `query` until it stops reporting cudaErrorNotReady, watching every
  // NCCL communicator for asynchronous errors and the clock for the timeout.
  template <typename Query>
  Status WaitUntil(Query query, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.timeout_s));
    while (true) {
      cudaError_t e = query();
      if (e == cudaSuccess) return Status::Ok();
      if (e != cudaErrorNotReady) return CudaError(e, "waiting for " + what);
      for (size_t i = 0; i < comms_.size(); ++i) {
        if (!comms_[i].comm) continue;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comms_[i].comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          Status s = NcclError(
              async, comms_[i].comm,
              "communicator " + std::to_string(i) + " (asynchronous) while waiting for " + what);
          Abort(s.message());
          return s;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        Status s = Status::Timeout(what + " on rank " + std::to_string(rank()) +
                                   " did not finish within " + std::to_string(options_.timeout_s) +
                                   " s: a peer may have died or a collective is mismatched");
        Abort(s.message());
        return s;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void Abort(const std::string& reason) {
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = reason;
    if (gate_host_) *gate_host_ = gate_generation_;  // let any gate go
    for (Comm& c : comms_) {
      if (c.comm) ncclCommAbort(c.comm);
      c.comm = nullptr;
    }
  }

  Status GemmFp8(const GemmArgs& a, cudaStream_t s) {
    if (a.m % 16 || a.k % 16) {
      return Status::InvalidArgument("fp8 GEMMs need m and k divisible by 16 (cuBLASLt)");
    }
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    Status st = CublasError(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                            "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (st.ok()) {
      st = CublasError(
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
          "set TRANSA");
    }
    if (st.ok()) {
      st = CublasError(
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
          "set TRANSB");
    }
    if (st.ok()) {
      st = CublasError(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, static_cast<uint64_t>(a.k),
                                                  static_cast<uint64_t>(a.m), a.k),
                       "layout A");
    }
    if (st.ok()) {
      st = CublasError(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, static_cast<uint64_t>(a.k),
                                                  static_cast<uint64_t>(a.n), a.k),
                       "layout B");
    }
    if (st.ok()) {
      st = CublasError(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, static_cast<uint64_t>(a.m),
                                                  static_cast<uint64_t>(a.n), a.m),
                       "layout C");
    }
    if (st.ok()) st = CublasError(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const size_t ws = static_cast<size_t>(options_.cublas_workspace_bytes);
    if (st.ok()) {
      st = CublasError(cublasLtMatmulPreferenceSetAttribute(
                           pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                       "workspace preference");
    }
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    if (st.ok()) {
      st = CublasError(
          cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, lc, lc, pref, 1, &heuristic, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    }
    if (st.ok() && found == 0) {
      st = Status::Unavailable("cuBLASLt has no fp8 algorithm for " + std::to_string(a.m) + "x" +
                               std::to_string(a.n) + "x" + std::to_string(a.k));
    }
    const float alpha = 1.0f, beta = 0.0f;
    if (st.ok()) {
      st = CublasError(cublasLtMatmul(lt_, op, &alpha, a.a.data, la, a.b.data, lb, &beta, a.c.data,
                                      lc, a.c.data, lc, &heuristic.algo, workspace_, ws, s),
                       "cublasLtMatmul(fp8)");
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return st;
  }

  Result<cudaStream_t> FindStream(StreamId s) const {
    if (s < 0 || s >= static_cast<int>(streams_.size())) {
      return Status::InvalidArgument("unknown stream " + std::to_string(s));
    }
    return streams_[static_cast<size_t>(s)];
  }
  Result<cudaEvent_t> FindEvent(EventId e) const {
    if (e < 0 || e >= static_cast<int>(events_.size())) {
      return Status::InvalidArgument("unknown event " + std::to_string(e));
    }
    return events_[static_cast<size_t>(e)];
  }
  Result<Comm*> FindComm(CommId c) {
    if (c < 0 || c >= static_cast<int>(comms_.size()) || !comms_[static_cast<size_t>(c)].comm) {
      return Status::InvalidArgument("unknown communicator " + std::to_string(c));
    }
    return &comms_[static_cast<size_t>(c)];
  }
  Status CheckBuffer(const Buffer& b, int64_t need_bytes, const char* what) const {
    auto it = allocations_.find(b.id);
    const bool allocated = it != allocations_.end();
    return CheckBufferView(b, allocated, allocated ? it->second.base : nullptr,
                           allocated ? it->second.bytes : 0, need_bytes, what);
  }

  int device_;
  CudaNcclOptions options_;
  cudaDeviceProp prop_{};
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<Comm> comms_;
  std::map<uint64_t, Allocation> allocations_;
  uint64_t next_id_ = 1;
  volatile int* gate_host_ = nullptr;
  const volatile int* gate_device_ = nullptr;
  int gate_generation_ = 0;
  bool holding_ = false;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace

Result<int> CudaDeviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::Unavailable(std::string("no usable CUDA device: ") + cudaGetErrorName(e) + ": " +
                               cudaGetErrorString(e));
  }
  if (n == 0) return Status::Unavailable("no CUDA device is visible");
  return n;
}

Result<std::unique_ptr<Backend>> CreateCudaNcclBackend(std::unique_ptr<Bootstrap> boot,
                                                       const CudaNcclOptions& options) {
  PT_CHECK(boot != nullptr);
  PT_ASSIGN_OR_RETURN(int count, CudaDeviceCount());
  PT_ASSIGN_OR_RETURN(HostLayout layout, DiscoverHostLayout(*boot));
  PT_RETURN_IF_ERROR(CheckOneDevicePerRank(layout, boot->rank(), count, options.device));
  const int device = options.device >= 0 ? options.device : layout.local_rank % count;
  auto backend =
      std::make_unique<CudaNcclBackend>(std::move(boot), std::move(layout), device, options);
  PT_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace paratune::backend
