// backend/fake.h: a deterministic backend for unit tests of the
// profiler and the executor. Each rank of a FakeWorld is a Backend; ranks run
// in the caller's threads (RunRanks gives one thread per rank) and meet at host
// collectives and communicator splits like real processes. Nothing touches
// hardware: every op is validated like a real backend would (ids, sizes,
// peers), advances a virtual clock on its stream by a model time and is
// appended to a log the tests assert on.
//
// Model (cost-model.md §3): a collective over p ranks with nccl-tests size S
// bytes takes α_tier·p + BusFactor(op, p)·S / β_tier, the tier being inter-node
// when the communicator's members span hosts (for SendRecv: when a peer is on
// another host); a GEMM takes latency + 2·m·n·k / rate; a device copy of N bytes
// takes 2N / copy bandwidth (bytes read plus written, like nvbandwidth).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collectives.h"

namespace paratune::backend {

// α-β of one tier: latency per rank in the group (µs) and bus bandwidth (GB/s, 1e9).
struct FakeLinkModel {
  double alpha_us = 0;
  double busbw_GBps = 0;
};

struct FakeConfig {
  int world_size = 1;
  int ranks_per_node = 8;  // world rank r lives on host "fake-node<r / ranks_per_node>"
  std::string device_name = "fake";
  int64_t memory_bytes = int64_t{80} << 30;  // per rank
  FakeLinkModel intra_node{8.0, 230.0};      // A100 NVSwitch all-reduce busbw (cost-model §7)
  FakeLinkModel inter_node{12.0, 24.0};      // one 200 Gb/s NIC's share
  // Sustained GEMM rate per GemmPrecision, TFLOP/s (1e12); 0 = precision unsupported.
  std::array<double, kNumGemmPrecisions> gemm_tflops{19.5, 156.0, 312.0, 312.0, 0.0};
  double gemm_latency_us = 6.0;  // fixed cost per GEMM, µs
  double copy_GBps = 1600.0;     // device copy, bytes read + written per second / 1e9
  double host_timeout_s = 30.0;  // a host collective or split waits this long for peers
};

// One logged operation. Times are the rank's virtual seconds on `stream`.
struct OpRecord {
  OpKind kind = OpKind::kAllReduce;
  StreamId stream = kDefaultStream;
  CommId comm = kNoComm;  // collectives and splits
  int comm_size = 0;
  bool inter_node = false;
  int64_t bytes = 0;  // collectives: the nccl-tests "size"; copy/alloc/free: bytes
  int64_t count = 0;  // the call's element count argument
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int send_peer = kNoPeer;
  int recv_peer = kNoPeer;
  int64_t m = 0, n = 0, k = 0;
  GemmPrecision precision = GemmPrecision::kBf16;
  EventId event = -1;      // record/wait
  int color = 0, key = 0;  // splits
  double start_s = 0;
  double end_s = 0;
};

class FakeBackend;

// The shared state of one simulated world. Thread-safe.
class FakeWorld : public std::enable_shared_from_this<FakeWorld> {
 public:
  // REQUIRES: config.world_size ≥ 1, ranks_per_node ≥ 1.
  static std::shared_ptr<FakeWorld> Create(const FakeConfig& config);

  const FakeConfig& config() const { return config_; }
  // The backend of world rank `rank`; call once per rank. REQUIRES: 0 ≤ rank < world_size.
  std::unique_ptr<FakeBackend> MakeRank(int rank);
  // Runs `body` for every rank, each on its own thread with its own backend, and
  // returns the first failure (by rank) or Ok. The backends are handed back in
  // `backends` (by rank) when it is non-null, so tests can read their logs.
  Status RunRanks(const std::function<Status(Backend&)>& body,
                  std::vector<std::unique_ptr<FakeBackend>>* backends = nullptr);

  // Internal to fake.cc: rendezvous of all world ranks exchanging one string each.
  Result<std::vector<std::string>> Exchange(int rank, const std::string& mine);
  struct SplitResult {
    int object_id = -1;  // world-wide id of the new communicator
    std::vector<int> world_ranks;
  };
  // Registers `world_rank`'s (color, key) for split number `seq` of communicator
  // object `parent` (members `parent_members`) and waits for the others.
  Result<SplitResult> Split(int parent, int seq, const std::vector<int>& parent_members,
                            int world_rank, int color, int key);

 private:
  explicit FakeWorld(const FakeConfig& config);
  struct Impl;
  FakeConfig config_;
  std::shared_ptr<Impl> impl_;
};

class FakeBackend final : public CollectiveBackend {
 public:
  FakeBackend(std::shared_ptr<FakeWorld> world, int rank);
  ~FakeBackend() override;

  // Every op this rank ran, in call order.
  const std::vector<OpRecord>& ops() const { return ops_; }
  // The virtual time stream `s` has reached, seconds.
  double StreamTime(StreamId s) const;
  // Bytes currently allocated.
  int64_t allocated_bytes() const { return allocated_bytes_; }

  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_->config().world_size; }
  int local_rank() const override;
  int local_size() const override;
  const std::vector<std::string>& hosts() const override { return hosts_; }
  Result<DeviceInfo> DescribeDevice() override;
  std::map<std::string, std::string> Versions() const override;

  Status CheckGemm(GemmPrecision p) const override;
  Status CheckCollective(OpKind kind, DataType t, ReduceOp op) const override;

  Result<Buffer> Allocate(int64_t bytes) override;
  Status Free(const Buffer& b) override;
  Result<MemoryInfo> GetMemoryInfo() override;
  Status CopyToDevice(const Buffer& dst, const void* src, int64_t bytes) override;
  Status CopyToHost(void* dst, const Buffer& src, int64_t bytes) override;
  Status Fill(const Buffer& b, DataType t, double value) override;
  Status FillRandom(const Buffer& b, DataType t, uint64_t seed) override;
  Status Copy(const Buffer& dst, const Buffer& src, int64_t bytes, StreamId stream) override;

  Result<StreamId> CreateStream() override;
  Result<EventId> CreateEvent() override;
  Status RecordEvent(EventId e, StreamId stream) override;
  Status StreamWaitEvent(StreamId stream, EventId e) override;
  Result<double> ElapsedSeconds(EventId start, EventId end) override;
  Status Synchronize(StreamId stream) override;
  Status SynchronizeAll() override;
  Status HoldStreams(const std::vector<StreamId>& streams) override;
  Status ReleaseStreams() override;

  Result<CommId> SplitComm(CommId parent, int color, int key) override;
  Result<CommInfo> GetCommInfo(CommId comm) const override;
  Status DestroyComm(CommId comm) override;

  Status Gemm(const GemmArgs& args) override;
  // The implicit GEMM of the pass at the configured GEMM rate (no data moves).
  Status Conv(const ConvArgs& args) override;

  Status HostBarrier() override;
  Status HostAllReduceMax(std::vector<double>* values) override;
  Result<std::vector<std::string>> HostAllGather(const std::string& mine) override;
  // Threads of one process: nothing to abort (peers time out instead).
  void AbortWorld(int) override {}

 private:
  struct Comm {
    int object_id = -1;
    std::vector<int> world_ranks;
    int rank = 0;
    int splits = 0;  // splits this rank has made of it (the split sequence number)
    bool destroyed = false;
  };
  struct Allocation {
    int64_t bytes = 0;
  };
  Status CheckStream(StreamId s) const;
  Status CheckBuffer(const Buffer& b, int64_t need_bytes, const char* what) const;
  Result<const Comm*> FindComm(CommId c) const;
  bool SpansNodes(const std::vector<int>& world_ranks) const;
  // Appends `rec` on its stream after `duration_s`, advancing the stream clock.
  void Log(OpRecord rec, double duration_s);
  // The collective primitives (backend/collectives.h): a checked call costs
  // the α-β model's time on its stream and is recorded.
  Status CheckCollectiveStream(StreamId s) const override { return CheckStream(s); }
  Result<int> CollectiveCommSize(CommId comm) const override;
  Status CheckCollectiveBuffer(const Buffer& b, int64_t need_bytes,
                               const char* what) const override {
    return CheckBuffer(b, need_bytes, what);
  }
  Status RunCollective(const CollectiveCall& call) override;

  std::shared_ptr<FakeWorld> world_;
  int rank_;
  std::vector<std::string> hosts_;
  std::vector<OpRecord> ops_;
  std::vector<double> stream_time_s_;  // by StreamId
  std::vector<double> event_time_s_;   // by EventId; < 0 = never recorded
  std::vector<StreamId> held_;
  std::vector<Comm> comms_;  // by CommId
  std::map<uint64_t, Allocation> allocations_;
  uint64_t next_buffer_id_ = 1;
  int64_t allocated_bytes_ = 0;
};

}  // namespace paratune::backend
