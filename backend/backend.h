// backend/backend.h: the one seam between paratune and hardware.
//
// Everything that touches a GPU, a NIC or another process goes through a
// Backend, the way leveldb reaches the disk only through Env: GEMMs, collectives
// on communicators split from the world (ncclCommSplit / MPI_Comm_split
// semantics), point-to-point transfers, device memory, streams and events, and
// an out-of-band host control plane (barrier, max-reduction of timings, gather of
// strings) used to coordinate measurements. Implementations:
//   fake      deterministic α-β and GEMM-rate model, records every op (fake.h);
//   fault     wraps any backend and injects failures (fault.h);
//   mpi-cpu   real MPI processes, real MPI collectives, Eigen GEMMs (mpi_cpu.h);
//   cuda      cuBLAS/cuBLASLt GEMMs, NCCL bootstrapped from MPI, CUDA events (cuda_nccl.h).
// Create one with CreateBackend() (factory.h).
//
// Conventions: sizes are bytes (`*_bytes`), element counts are `count` with NCCL
// meaning per call, times are seconds, ranks are indices in the named
// communicator. Failures at the boundary are Status values, never exceptions or
// aborts; a missing capability is kUnavailable with a reason. A Backend object
// belongs to one rank and is thread-compatible, not thread-safe: one thread
// drives it. This header deliberately depends on common/status.h only, so the
// CUDA implementation builds without nlohmann/Eigen/Boost.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace paratune::backend {

// Element types of collective and copy buffers, spelled as nccl-tests prints them.
enum class DataType : uint8_t { kInt8 = 0, kFloat16, kBFloat16, kFloat32, kFloat64, kFp8E4M3 };
inline constexpr int kNumDataTypes = 6;
// Bytes per element.
int DataTypeBytes(DataType t);
// nccl-tests spelling: "int8" | "half" | "bfloat16" | "float" | "double" | "f8e4m3".
const char* DataTypeName(DataType t);
// Accepts the nccl-tests spellings above (and "fp16", "bf16", "fp32", "fp64" aliases).
Result<DataType> ParseDataType(const std::string& name);

enum class ReduceOp : uint8_t { kSum = 0, kProd, kMax, kMin, kAvg };
// nccl-tests spelling: "sum" | "prod" | "max" | "min" | "avg".
const char* ReduceOpName(ReduceOp op);

// GEMM precisions, in the order of topology::Precision (the profiler maps the two).
//   kFp32: fp32 in/out, fp32 math. kTf32: fp32 in/out, TF32 tensor-core math.
//   kBf16, kFp16: 16-bit in/out, fp32 accumulate. kFp8: e4m3 in, bf16 out, fp32 accumulate.
enum class GemmPrecision : uint8_t { kFp32 = 0, kTf32, kBf16, kFp16, kFp8 };
inline constexpr int kNumGemmPrecisions = 5;
// "fp32" | "tf32" | "bf16" | "fp16" | "fp8".
const char* GemmPrecisionName(GemmPrecision p);
Result<GemmPrecision> ParseGemmPrecision(const std::string& name);
// Bytes per element of the A and B operands, and of C.
int GemmInputBytes(GemmPrecision p);
int GemmOutputBytes(GemmPrecision p);

// The kinds of operation a backend runs; the fake records them (OpRecord).
enum class OpKind : uint8_t {
  kAllReduce = 0,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,  // a send and/or a receive, grouped (pipeline hand-off, ring exchange)
  kGemm,
  kCopy,  // device-to-device copy
  kAllocate,
  kFree,
  kSplitComm,
  kDestroyComm,
  kRecordEvent,
  kWaitEvent,
  kSynchronize,
  kHoldStreams,
  kReleaseStreams,
  kConv,  // one pass of a convolution (Backend::Conv)
};
const char* OpKindName(OpKind k);  // "all_reduce", "gemm", ...
// Ok for the collectives (kAllReduce .. kSendRecv); kInvalidArgument
// "<name> is not a collective" for any other kind.
Status CheckIsCollective(OpKind kind);

// A device allocation or a slice of one. `data` is the address on the device
// (nullptr for backends that hold no memory, such as the fake). Slices share
// the `id` of their allocation; `offset_bytes` is from the allocation's start.
struct Buffer {
  uint64_t id = 0;           // 0 = no buffer
  int64_t offset_bytes = 0;  // within the allocation
  int64_t bytes = 0;         // length of this view
  void* data = nullptr;      // device address of the view's first byte, or nullptr
  bool valid() const { return id != 0; }
};
// The view [offset_bytes, offset_bytes + bytes) of `b`. REQUIRES: it lies inside b.
Buffer Slice(const Buffer& b, int64_t offset_bytes, int64_t bytes);

using StreamId = int;  // 0 is the default stream every backend has
using EventId = int;
using CommId = int;  // 0 is the world communicator
inline constexpr StreamId kDefaultStream = 0;
inline constexpr CommId kWorldComm = 0;
inline constexpr CommId kNoComm = -1;  // returned by SplitComm for color < 0
inline constexpr int kNoPeer = -1;     // SendRecv: no send or no receive on this side

struct CommInfo {
  int rank = 0;                  // this process's rank in the communicator
  int size = 1;                  // ranks in the communicator
  std::vector<int> world_ranks;  // world rank of each member, by communicator rank
};

// C = Aᵀ·B in column-major "TN" layout, as nn.Linear and cuBLAS FP8 use it:
// A is k×m (lda = k), B is k×n (ldb = k), C is m×n (ldc = m).
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  GemmPrecision precision = GemmPrecision::kBf16;
  Buffer a, b, c;  // sizes ≥ k·m·in, k·n·in, m·n·out bytes (GemmInputBytes/GemmOutputBytes)
  StreamId stream = kDefaultStream;
};

// A convolution's passes, as cuDNN names them: the forward y = conv(x, w),
// the data gradient dx from dy and w, the weight gradient dw from x and dy.
enum class ConvPass : uint8_t { kForward = 0, kDataGrad, kWeightGrad };
const char* ConvPassName(ConvPass p);  // "fwd" | "dgrad" | "wgrad"

// One pass of a 1D, 2D or 3D convolution over channels-last tensors (NHWC,
// NDHWC: the layout cuDNN's tensor-core kernels and NVIDIA's MLPerf networks
// run), padded (kernel − 1) / 2 planes on each side, in the forward's geometry:
//   x  [n, extent[0], .., extent[dims − 1], c]      dx for kDataGrad (written)
//   w  [k, kernel^dims, c / groups]                 dw for kWeightGrad (written)
//   y  [n, out[0], .., out[dims − 1], k]             dy for the gradients (read)
// with out[i] = (extent[i] − 1) / stride + 1 (ConvOutExtent). Every tensor is
// at the precision's input width (GemmInputBytes); fp8 has no convolution.
// The backends lower it as cuDNN's IMPLICIT_GEMM algorithms do, but with the
// patch matrix written out: `workspace` holds the patches of at least one
// sample (ConvPatchBytesPerSample) and the samples run in chunks that fit it.
struct ConvArgs {
  ConvPass pass = ConvPass::kForward;
  int dims = 2;                            // 1..3
  int64_t n = 1, c = 1, k = 1;             // samples, input and output channels
  std::array<int64_t, 3> extent{1, 1, 1};  // input extent; unused dimensions 1
  int kernel = 1, stride = 1, groups = 1;  // cubic kernel side; groups divide c and k
  GemmPrecision precision = GemmPrecision::kBf16;
  Buffer x, w, y, workspace;
  StreamId stream = kDefaultStream;
};
// Output extent of dimension i (1 for i ≥ dims).
int64_t ConvOutExtent(const ConvArgs& a, int i);
int64_t ConvInputElems(const ConvArgs& a);   // n · extent · c
int64_t ConvFilterElems(const ConvArgs& a);  // k · kernel^dims · c / groups
int64_t ConvOutputElems(const ConvArgs& a);  // n · out · k
// Bytes of one sample's patch matrix: out positions × kernel^dims × c.
int64_t ConvPatchBytesPerSample(const ConvArgs& a);
// Multiply-add FLOPs of the pass (each pass executes the forward's count).
double ConvFlops(const ConvArgs& a);
// The checks every backend makes: dims in 1..3, sizes ≥ 1, groups dividing
// c and k, no fp8, and x, w, y and workspace large enough (`allocated`:
// backends holding no memory check the sizes only). InvalidArgument names
// what is wrong.
Status CheckConvArgs(const ConvArgs& a, bool allocated);

// What the device is. Fields a backend cannot know are left empty/zero. All
// fields are fixed properties of the hardware (no free-memory figures), so
// descriptions built from them are stable from run to run.
struct DeviceInfo {
  std::string kind;          // "cuda" | "cpu" | "fake"
  std::string name;          // "NVIDIA H100 80GB HBM3", CPU model name, "fake"
  int device_index = 0;      // CUDA ordinal on this host
  int64_t memory_bytes = 0;  // total device memory (CPU: this rank's share of host RAM)
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;  // SMs (CPU: hardware threads visible to this process)
  double clock_GHz = 0;     // SM clock, GHz (CUDA's cudaDevAttrClockRate: the peak)
  // NVML's SM clocks, GHz: at the time of the query (a throttled or
  // application-clocked GPU runs below clock_GHz) and the maximum. 0 = unknown
  // (no NVML, or not a GPU).
  double clock_now_GHz = 0;
  double clock_max_GHz = 0;
  double memory_peak_GBps = 0;  // theoretical memory bandwidth, GB/s (0 = unknown)
  std::string pci_bus_id;       // "0000:07:00.0"
  std::string uuid;
  // Dense peak TFLOP/s per GemmPrecision where the backend knows it (the fake's
  // configured rates); 0 = unknown (look the device up in the GPU presets).
  double peak_tflops[kNumGemmPrecisions] = {0, 0, 0, 0, 0};
};

// Device memory as the allocator sees it right now, bytes.
struct MemoryInfo {
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

// The message of every out-of-memory Status contains this phrase; use IsOutOfMemory.
inline constexpr const char* kOutOfMemoryPhrase = "out of device memory";
// True when `s` reports an allocation that did not fit (also after WithContext).
bool IsOutOfMemory(const Status& s);
// Builds that Status (code kUnavailable: the memory is not there to be had).
Status OutOfMemory(int64_t requested_bytes, int64_t free_bytes, const std::string& where);

class Backend {
 public:
  virtual ~Backend() = default;

  // "fake" | "fault(<inner>)" | "mpi-cpu" | "cuda".
  virtual std::string name() const = 0;

  // ---- Identity and discovery --------------------------------------------
  virtual int rank() const = 0;        // world rank
  virtual int world_size() const = 0;  // ranks in the world
  virtual int local_rank() const = 0;  // rank among the processes on this host
  virtual int local_size() const = 0;  // processes on this host
  // Host name of every world rank, indexed by world rank.
  virtual const std::vector<std::string>& hosts() const = 0;
  virtual Result<DeviceInfo> DescribeDevice() = 0;
  // Library versions in effect ("cuda_runtime" → "13.0", "nccl" → "2.28.9", "mpi" → ...).
  virtual std::map<std::string, std::string> Versions() const = 0;

  // ---- Capabilities: Ok, or kUnavailable with the reason ------------------
  virtual Status CheckGemm(GemmPrecision p) const = 0;
  virtual Status CheckCollective(OpKind kind, DataType t, ReduceOp op) const = 0;

  // ---- Memory --------------------------------------------------------------
  // Allocates `bytes` of device memory (contents undefined). Failure to fit is
  // OutOfMemory(); the caller owns the buffer and frees it with Free().
  virtual Result<Buffer> Allocate(int64_t bytes) = 0;
  // Frees an allocation returned by Allocate (not a slice). Synchronises first.
  virtual Status Free(const Buffer& b) = 0;
  virtual Result<MemoryInfo> GetMemoryInfo() = 0;
  // Synchronous host↔device copies of `bytes` bytes. Backends that hold no data
  // (the fake) return kUnavailable.
  virtual Status CopyToDevice(const Buffer& dst, const void* src, int64_t bytes) = 0;
  virtual Status CopyToHost(void* dst, const Buffer& src, int64_t bytes) = 0;
  // Fills `b` with `value` converted to `t` (on the default stream, then synchronised).
  virtual Status Fill(const Buffer& b, DataType t, double value) = 0;
  // Fills `b` with uniform values in [-1, 1) of type `t` from `seed` (random data:
  // zeros flatter GPU clocks, cost-model.md §7). For GEMM precisions use the input type.
  virtual Status FillRandom(const Buffer& b, DataType t, uint64_t seed) = 0;
  // Enqueues a device-to-device copy of `bytes` bytes on `stream`.
  virtual Status Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) = 0;

  // ---- Streams, events, synchronisation -------------------------------------
  virtual Result<StreamId> CreateStream() = 0;
  virtual Result<EventId> CreateEvent() = 0;
  // Marks the point `stream` has reached; the event completes when the stream gets there.
  virtual Status RecordEvent(EventId e, StreamId stream) = 0;
  // Work enqueued on `stream` after this call waits for `e`.
  virtual Status StreamWaitEvent(StreamId stream, EventId e) = 0;
  // Seconds from `start` to `end`. REQUIRES: both recorded and complete (synchronise first).
  virtual Result<double> ElapsedSeconds(EventId start, EventId end) = 0;
  // Blocks until everything enqueued on `stream` has run. Fails with kTimeout when
  // it takes longer than the backend's operation timeout, and reports collective
  // errors raised asynchronously (NCCL) with the communicator named.
  virtual Status Synchronize(StreamId stream) = 0;
  virtual Status SynchronizeAll() = 0;
  // The nvbandwidth gate: `streams` stop at a spin-wait until ReleaseStreams(),
  // so work enqueued meanwhile starts on every stream at once and launch overhead
  // stays out of the timing. Backends whose ops run at enqueue time (mpi-cpu)
  // make both calls no-ops; the host barrier before ReleaseStreams aligns ranks.
  virtual Status HoldStreams(const std::vector<StreamId>& streams) = 0;
  virtual Status ReleaseStreams() = 0;

  // ---- Communicators -------------------------------------------------------------
  // Collective over `parent`: ranks passing the same `color` form a new
  // communicator ordered by (`key`, parent rank). color < 0 joins none and yields
  // kNoComm. Every member of `parent` must call it (NCCL/MPI rule).
  virtual Result<CommId> SplitComm(CommId parent, int color, int key) = 0;
  virtual Result<CommInfo> GetCommInfo(CommId comm) const = 0;
  // Releases a communicator made by SplitComm (not the world). Collective over
  // its members, like ncclCommDestroy; the id is invalid afterwards.
  virtual Status DestroyComm(CommId comm) = 0;

  // ---- Collectives: enqueued on `stream`, NCCL argument conventions ------------------
  // `count` elements in send and recv.
  virtual Status AllReduce(CommId comm, const Buffer& send, const Buffer& recv, int64_t count,
                           DataType t, ReduceOp op, StreamId stream) = 0;
  // Each rank contributes `send_count` elements; recv holds size × send_count.
  virtual Status AllGather(CommId comm, const Buffer& send, const Buffer& recv, int64_t send_count,
                           DataType t, StreamId stream) = 0;
  // send holds size × recv_count elements; each rank receives its `recv_count` reduced block.
  virtual Status ReduceScatter(CommId comm, const Buffer& send, const Buffer& recv,
                               int64_t recv_count, DataType t, ReduceOp op, StreamId stream) = 0;
  // send and recv hold size × count_per_peer elements; block j goes to rank j.
  virtual Status AllToAll(CommId comm, const Buffer& send, const Buffer& recv,
                          int64_t count_per_peer, DataType t, StreamId stream) = 0;
  // Sends `count` elements of `send` to `send_peer` and receives `count` into `recv`
  // from `recv_peer`, as one grouped operation; either peer may be kNoPeer.
  virtual Status SendRecv(CommId comm, const Buffer& send, int send_peer, const Buffer& recv,
                          int recv_peer, int64_t count, DataType t, StreamId stream) = 0;
  Status Send(CommId comm, const Buffer& send, int peer, int64_t count, DataType t,
              StreamId stream) {
    return SendRecv(comm, send, peer, Buffer{}, kNoPeer, count, t, stream);
  }
  Status Recv(CommId comm, const Buffer& recv, int peer, int64_t count, DataType t,
              StreamId stream) {
    return SendRecv(comm, Buffer{}, kNoPeer, recv, peer, count, t, stream);
  }

  // ---- Compute ---------------------------------------------------------------------------
  virtual Status Gemm(const GemmArgs& args) = 0;
  // One convolution pass (ConvArgs), on args.stream.
  virtual Status Conv(const ConvArgs& args) = 0;

  // ---- Host control plane (out of band, world, blocking) ---------------------------------------
  // Every world rank must call these in the same order.
  virtual Status HostBarrier() = 0;
  // Element-wise maximum over world ranks, in place (timings are reduced with max).
  virtual Status HostAllReduceMax(std::vector<double>* values) = 0;
  // Gathers one string per world rank, indexed by world rank.
  virtual Result<std::vector<std::string>> HostAllGather(const std::string& mine) = 0;
  // Ends every process of a multi-process world now with `exit_code`
  // (MPI_Abort), so that peers blocked in a collective with a failed rank do
  // not hang. Returns without effect where there is no such world (one
  // process, the in-process fake).
  virtual void AbortWorld(int exit_code) = 0;
};

}  // namespace paratune::backend
