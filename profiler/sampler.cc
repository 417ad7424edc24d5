#include "profiler/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/median.h"
#include "common/strings.h"
#include "profiler/fit.h"

namespace paratune::profiler {

using backend::Backend;
using backend::Buffer;
using backend::CommId;
using backend::DataType;
using topology::Collective;

namespace {

static_assert(static_cast<int>(topology::Precision::kFp8) ==
                  static_cast<int>(backend::GemmPrecision::kFp8),
              "topology::Precision and backend::GemmPrecision must list precisions alike");
static_assert(static_cast<int>(Collective::kSendRecv) ==
                      static_cast<int>(backend::OpKind::kSendRecv) &&
                  static_cast<int>(Collective::kAllToAll) ==
                      static_cast<int>(backend::OpKind::kAllToAll),
              "topology::Collective and backend::OpKind must list collectives alike");

std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 30) && b % (int64_t{1} << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// Buffers and events a measurement needs, released on every path.
class Scratch {
 public:
  explicit Scratch(Backend& b) : b_(b) {}
  ~Scratch() {
    for (const Buffer& buf : buffers_) {
      Status s = b_.Free(buf);
      (void)s;  // best effort on the way out; the run's own Status is what matters
    }
  }
  Result<Buffer> Allocate(int64_t bytes) {
    PT_ASSIGN_OR_RETURN(Buffer buf, b_.Allocate(bytes));
    buffers_.push_back(buf);
    return buf;
  }

 private:
  Backend& b_;
  std::vector<Buffer> buffers_;
};

// The timing protocol of one sample shared by collectives, GEMMs and copies:
// barrier, gate, events around `iters` ops, barrier, release, sync.
class Timer {
 public:
  explicit Timer(Backend& b) : b_(b) {}
  Status Init() {
    PT_ASSIGN_OR_RETURN(start_, b_.CreateEvent());
    PT_ASSIGN_OR_RETURN(end_, b_.CreateEvent());
    return Status::Ok();
  }
  // Seconds per op; `op` enqueues one op (it may be a no-op on idle ranks).
  template <typename Op>
  Result<double> Sample(int iters, Op op) {
    PT_RETURN_IF_ERROR(b_.HostBarrier());
    PT_RETURN_IF_ERROR(b_.HoldStreams({backend::kDefaultStream}));
    Status enqueued = b_.RecordEvent(start_, backend::kDefaultStream);
    for (int i = 0; i < iters && enqueued.ok(); ++i) enqueued = op();
    if (enqueued.ok()) enqueued = b_.RecordEvent(end_, backend::kDefaultStream);
    // Release even on failure so the device does not stay gated.
    Status barrier = enqueued.ok() ? b_.HostBarrier() : Status::Ok();
    Status released = b_.ReleaseStreams();
    PT_RETURN_IF_ERROR(enqueued);
    PT_RETURN_IF_ERROR(barrier);
    PT_RETURN_IF_ERROR(released);
    PT_RETURN_IF_ERROR(b_.Synchronize(backend::kDefaultStream));
    PT_ASSIGN_OR_RETURN(double s, b_.ElapsedSeconds(start_, end_));
    return s / iters;
  }

 private:
  Backend& b_;
  backend::EventId start_ = -1, end_ = -1;
};

// Runs `samples` timed samples and returns each one's max over ranks, µs.
template <typename Op>
Result<std::vector<double>> TimedSamples(Backend& b, Timer& timer, int samples, int iters, Op op) {
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    PT_ASSIGN_OR_RETURN(double sec, timer.Sample(iters, op));
    t.push_back(sec * 1e6);
  }
  PT_RETURN_IF_ERROR(b.HostAllReduceMax(&t));
  return t;
}

// Runs `op` `warmup` times and waits for the device, then takes TimedSamples;
// a failure names `what`.
template <typename Op>
Result<std::vector<double>> WarmedSamples(Backend& b, Timer& timer, int warmup, int samples,
                                          int iters, Op op, const std::string& what) {
  Status warm = Status::Ok();
  for (int w = 0; w < warmup && warm.ok(); ++w) warm = op();
  if (warm.ok()) warm = b.Synchronize(backend::kDefaultStream);
  PT_RETURN_IF_ERROR(warm.WithContext(what));
  auto times = TimedSamples(b, timer, samples, iters, op);
  if (!times.ok()) return times.status().WithContext(what);
  return times;
}

// Sum over world ranks of one value per rank (max-reduction of one slot each).
Result<double> SumOverRanks(Backend& b, double mine) {
  std::vector<double> slots(static_cast<size_t>(b.world_size()), 0.0);
  slots[static_cast<size_t>(b.rank())] = mine;
  PT_RETURN_IF_ERROR(b.HostAllReduceMax(&slots));
  double sum = 0;
  for (double v : slots) sum += v;
  return sum;
}

Status RunOne(Backend& b, Collective c, CommId comm, const Buffer& send, const Buffer& recv,
              const RowCounts& rc, DataType t, backend::ReduceOp op, int me, int p) {
  switch (c) {
    case Collective::kAllReduce:
      return b.AllReduce(comm, send, recv, rc.count, t, op, backend::kDefaultStream);
    case Collective::kAllGather:
      return b.AllGather(comm, send, recv, rc.count, t, backend::kDefaultStream);
    case Collective::kReduceScatter:
      return b.ReduceScatter(comm, send, recv, rc.count, t, op, backend::kDefaultStream);
    case Collective::kAllToAll:
      return b.AllToAll(comm, send, recv, rc.count, t, backend::kDefaultStream);
    case Collective::kSendRecv:
      return b.SendRecv(comm, send, (me + 1) % p, recv, (me - 1 + p) % p, rc.count, t,
                        backend::kDefaultStream);
  }
  return Status::InvalidArgument("unknown collective");
}

// Fills known values, runs the collective once and counts wrong elements of
// this rank's result (nccl-tests' check, on small integers exact in fp32/fp64).
// -1 when this backend holds no data (the fake) or the type is not checkable.
Result<int64_t> CheckOnce(Backend& b, Collective c, CommId comm, const Buffer& send,
                          const Buffer& recv, const RowCounts& rc, DataType t, int me, int p) {
  if (t != DataType::kFloat32 && t != DataType::kFloat64) return int64_t{-1};
  // A backend that holds no data (the fake) says so for an empty copy; skip
  // the fills and the host buffers then.
  if (b.CopyToHost(nullptr, recv, 0).code() == StatusCode::kUnavailable) return int64_t{-1};
  const int elem = backend::DataTypeBytes(t);
  if (c == Collective::kAllToAll) {
    const int64_t chunk = rc.count * elem;
    for (int j = 0; j < p; ++j) {
      PT_RETURN_IF_ERROR(b.Fill(backend::Slice(send, chunk * j, chunk), t, me * p + j + 1));
    }
  } else {
    PT_RETURN_IF_ERROR(b.Fill(backend::Slice(send, 0, rc.send_bytes), t, me + 1));
  }
  PT_RETURN_IF_ERROR(b.Fill(backend::Slice(recv, 0, rc.recv_bytes), t, -1));
  PT_RETURN_IF_ERROR(RunOne(b, c, comm, send, recv, rc, t, backend::ReduceOp::kSum, me, p));
  PT_RETURN_IF_ERROR(b.Synchronize(backend::kDefaultStream));
  const int64_t n = rc.recv_bytes / elem;
  std::vector<double> got(static_cast<size_t>(n));
  if (t == DataType::kFloat32) {
    std::vector<float> raw(static_cast<size_t>(n));
    Status s = b.CopyToHost(raw.data(), recv, rc.recv_bytes);
    if (s.code() == StatusCode::kUnavailable) return int64_t{-1};
    PT_RETURN_IF_ERROR(s);
    std::copy(raw.begin(), raw.end(), got.begin());
  } else {
    Status s = b.CopyToHost(got.data(), recv, rc.recv_bytes);
    if (s.code() == StatusCode::kUnavailable) return int64_t{-1};
    PT_RETURN_IF_ERROR(s);
  }
  const double sum = p * (p + 1) / 2.0;
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    switch (c) {
      case Collective::kAllReduce:
      case Collective::kReduceScatter:
        want = sum;
        break;
      case Collective::kAllGather:
        want = static_cast<double>(i / rc.count) + 1;
        break;
      case Collective::kAllToAll:
        want = static_cast<double>((i / rc.count) * p + me + 1);
        break;
      case Collective::kSendRecv:
        want = (me - 1 + p) % p + 1;
        break;
    }
    if (got[static_cast<size_t>(i)] != want) ++wrong;
  }
  return wrong;
}

struct ShapeInfo {
  topology::Tier tier = topology::Tier::kIntraNode;
  int groups = 0;
  int concurrent_groups = 1;
};

ShapeInfo DescribeShape(const GroupShape& shape, const std::vector<std::string>& hosts) {
  const int world = static_cast<int>(hosts.size());
  std::map<int, std::set<std::string>> hosts_of_group;
  std::map<std::string, std::set<int>> groups_on_host;
  for (int r = 0; r < world; ++r) {
    const GroupSlot slot = SlotFor(shape, world, r);
    if (slot.color < 0) continue;
    hosts_of_group[slot.color].insert(hosts[static_cast<size_t>(r)]);
    groups_on_host[hosts[static_cast<size_t>(r)]].insert(slot.color);
  }
  ShapeInfo info;
  info.groups = static_cast<int>(hosts_of_group.size());
  for (const auto& [g, hs] : hosts_of_group) {
    if (hs.size() > 1) info.tier = topology::Tier::kInterNode;
  }
  for (const auto& [h, gs] : groups_on_host) {
    info.concurrent_groups = std::max(info.concurrent_groups, static_cast<int>(gs.size()));
  }
  return info;
}

// The communicator of this rank's group in one shape (kNoComm when it idles).
struct GroupComm {
  CommId comm = backend::kNoComm;
  int me = 0;
};

Result<GroupComm> SplitForShape(Backend& b, const GroupShape& shape) {
  const GroupSlot slot = SlotFor(shape, b.world_size(), b.rank());
  GroupComm g;
  PT_ASSIGN_OR_RETURN(g.comm, b.SplitComm(backend::kWorldComm, slot.color, slot.key));
  if (g.comm != backend::kNoComm) {
    PT_ASSIGN_OR_RETURN(backend::CommInfo info, b.GetCommInfo(g.comm));
    g.me = info.rank;
    if (info.size != shape.group_size) {
      return Status::Internal("split gave a communicator of " + std::to_string(info.size) +
                              " ranks for a group of " + std::to_string(shape.group_size));
    }
  }
  return g;
}

Status MeasureCollective(Backend& b, const MeasurementPlan& plan, Collective c,
                         const GroupShape& shape, const GroupComm& group,
                         const std::vector<int64_t>& sizes, const Buffer& send, const Buffer& recv,
                         Timer& timer, const ProgressFn& progress, Measurements* out) {
  const CommId comm = group.comm;
  const int me = group.me, p = shape.group_size;
  const ShapeInfo info = DescribeShape(shape, b.hosts());
  const int elem = backend::DataTypeBytes(plan.dtype);
  if (progress) {
    progress(std::string(topology::CollectiveName(c)) + ": " + std::to_string(info.groups) +
             " group(s) of " + std::to_string(p) + " ranks, stride " +
             std::to_string(shape.stride) + ", " + topology::TierName(info.tier) + ", " +
             std::to_string(sizes.size()) + " sizes");
  }
  const bool active = comm != backend::kNoComm;
  std::vector<SeriesRow> rows;
  for (int64_t size : sizes) {
    const RowCounts rc = CountsFor(c, size, elem, p);
    if (rc.count == 0) continue;
    auto op = [&]() -> Status {
      if (!active) return Status::Ok();
      return RunOne(b, c, comm, send, recv, rc, plan.dtype, plan.op, me, p);
    };
    const std::string what = std::string(topology::CollectiveName(c)) + " of " +
                             std::to_string(rc.size_bytes) + " B on " + std::to_string(p) +
                             " ranks (stride " + std::to_string(shape.stride) + ")";
    PT_ASSIGN_OR_RETURN(
        std::vector<double> times,
        WarmedSamples(b, timer, plan.warmup_iters, plan.samples, plan.iters, op, what));
    SeriesRow row;
    row.size_bytes = rc.size_bytes;
    row.count = rc.count;
    row.sample_time_us = times;
    row.time_us = Median(times);
    row.algbw_GBps = AlgBwGBps(rc.size_bytes, row.time_us);
    row.busbw_GBps = BusBwGBps(c, p, row.algbw_GBps);
    int64_t wrong = 0;
    if (size <= plan.check_max_bytes && plan.op == backend::ReduceOp::kSum) {
      if (active) {
        auto w = CheckOnce(b, c, comm, send, recv, rc, plan.dtype, me, p);
        if (!w.ok()) return w.status().WithContext("checking " + what);
        wrong = *w;
      }
      // Every rank learns whether any rank could not check (-1) and the total.
      std::vector<double> unchecked{wrong < 0 ? 1.0 : 0.0};
      PT_RETURN_IF_ERROR(b.HostAllReduceMax(&unchecked));
      PT_ASSIGN_OR_RETURN(double total, SumOverRanks(b, std::max<int64_t>(wrong, 0)));
      row.wrong = unchecked[0] > 0 ? -1 : static_cast<int64_t>(total);
    } else {
      row.wrong = -1;
    }
    rows.push_back(std::move(row));
  }
  out->collectives.push_back(
      CollectiveSeries{.collective = c,
                       .group_size = p,
                       .stride = shape.stride,
                       .groups = info.groups,
                       .concurrent_groups = info.concurrent_groups,
                       .tier = info.tier,
                       .dtype = backend::DataTypeName(plan.dtype),
                       .redop = RedopColumn(c, backend::ReduceOpName(plan.op)),
                       .rows = std::move(rows),
                       .origin = "measured"});
  return Status::Ok();
}

Status MeasureGemms(Backend& b, const MeasurementPlan& plan, Timer& timer,
                    const ProgressFn& progress, Measurements* out) {
  for (topology::Precision prec : plan.gemm_precisions) {
    const backend::GemmPrecision gp = ToGemmPrecision(prec);
    const std::string pname = topology::PrecisionName(prec);
    // Ranks must agree on waiving: any rank unable → waived for all.
    Status can = b.CheckGemm(gp);
    std::vector<double> unable{can.ok() ? 0.0 : 1.0};
    PT_RETURN_IF_ERROR(b.HostAllReduceMax(&unable));
    if (unable[0] > 0) {
      out->waived.push_back(
          {pname + " GEMM", can.ok() ? "unavailable on another rank" : can.message()});
      continue;
    }
    if (progress)
      progress(pname + " GEMMs: " + std::to_string(plan.gemm_shapes.size()) + " shapes");
    GemmSeries series;
    series.precision = prec;
    for (const GemmShape& s : plan.gemm_shapes) {
      const std::string what = pname + " GEMM " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                               "x" + std::to_string(s.k);
      Scratch scratch(b);
      const int64_t in = backend::GemmInputBytes(gp), outb = backend::GemmOutputBytes(gp);
      auto a = scratch.Allocate(s.k * s.m * in);
      auto bb = a.ok() ? scratch.Allocate(s.k * s.n * in) : a;
      auto c = bb.ok() ? scratch.Allocate(s.m * s.n * outb) : bb;
      std::vector<double> oom{c.ok() ? 0.0 : 1.0};
      PT_RETURN_IF_ERROR(b.HostAllReduceMax(&oom));
      if (oom[0] > 0) {
        if (!c.ok() && !backend::IsOutOfMemory(c.status())) return c.status().WithContext(what);
        out->waived.push_back({what, "does not fit in device memory"});
        continue;
      }
      PT_RETURN_IF_ERROR(b.FillRandom(*a, GemmInputType(prec), 1).WithContext(what));
      PT_RETURN_IF_ERROR(b.FillRandom(*bb, GemmInputType(prec), 2).WithContext(what));
      backend::GemmArgs args{s.m, s.n, s.k, gp, *a, *bb, *c, backend::kDefaultStream};
      auto op = [&]() { return b.Gemm(args); };
      PT_ASSIGN_OR_RETURN(std::vector<double> times,
                          WarmedSamples(b, timer, 2, plan.samples, plan.gemm_iters, op, what));
      GemmRow row;
      row.m = s.m;
      row.n = s.n;
      row.k = s.k;
      row.sample_time_us = times;
      row.time_us = Median(times);
      row.tflops = GemmTflops(s.m, s.n, s.k, row.time_us);
      series.rows.push_back(std::move(row));
    }
    if (!series.rows.empty()) out->gemm.push_back(std::move(series));
  }
  return Status::Ok();
}

Status MeasureCopy(Backend& b, const MeasurementPlan& plan, Timer& timer,
                   const ProgressFn& progress, Measurements* out) {
  if (plan.copy_bytes <= 0) return Status::Ok();
  if (progress) progress("device copy bandwidth: " + Bytes(plan.copy_bytes));
  Scratch scratch(b);
  auto src = scratch.Allocate(plan.copy_bytes);
  auto dst = src.ok() ? scratch.Allocate(plan.copy_bytes) : src;
  std::vector<double> oom{dst.ok() ? 0.0 : 1.0};
  PT_RETURN_IF_ERROR(b.HostAllReduceMax(&oom));
  if (oom[0] > 0) {
    if (!dst.ok() && !backend::IsOutOfMemory(dst.status())) return dst.status();
    out->waived.push_back({"device copy", "buffers do not fit in device memory"});
    return Status::Ok();
  }
  PT_RETURN_IF_ERROR(b.FillRandom(*src, DataType::kFloat32, 3));
  auto op = [&]() { return b.Copy(*dst, *src, plan.copy_bytes, backend::kDefaultStream); };
  PT_RETURN_IF_ERROR(op());
  PT_RETURN_IF_ERROR(b.Synchronize(backend::kDefaultStream));
  const int iters = std::max(2, plan.iters / 2);
  auto times = TimedSamples(b, timer, plan.samples, iters, op);
  if (!times.ok()) return times.status().WithContext("device copy");
  CopyResult r;
  r.bytes = plan.copy_bytes;
  r.time_us = Median(*times);
  r.GBps = 2.0 * static_cast<double>(plan.copy_bytes) / r.time_us / 1e3;  // read + written
  out->copy = r;
  return Status::Ok();
}

Status MeasureP2P(Backend& b, const MeasurementPlan& plan, Timer& timer, const ProgressFn& progress,
                  Measurements* out) {
  if (plan.p2p_bytes <= 0) return Status::Ok();
  const auto& hosts = b.hosts();
  std::vector<int> local;
  for (int r = 0; r < b.world_size(); ++r) {
    if (hosts[static_cast<size_t>(r)] == hosts[0]) local.push_back(r);
  }
  if (local.size() < 2) {
    out->waived.push_back({"P2P matrix", "rank 0's host runs a single rank"});
    return Status::Ok();
  }
  if (progress) {
    progress("P2P bandwidth among " + std::to_string(local.size()) + " ranks on " + hosts[0] +
             ": " + Bytes(plan.p2p_bytes));
  }
  Scratch scratch(b);
  PT_ASSIGN_OR_RETURN(Buffer buf, scratch.Allocate(plan.p2p_bytes));
  PT_RETURN_IF_ERROR(b.Fill(buf, DataType::kFloat32, 1.0));
  P2PMatrix m;
  m.ranks = local;
  m.bytes = plan.p2p_bytes;
  m.GBps.assign(local.size(), std::vector<double>(local.size(), 0.0));
  const int64_t count = plan.p2p_bytes / 4;
  const int iters = std::max(2, plan.iters / 2);
  for (size_t i = 0; i < local.size(); ++i) {
    for (size_t j = 0; j < local.size(); ++j) {
      if (i == j) continue;
      const int src = local[i], dst = local[j];
      auto op = [&]() -> Status {
        if (b.rank() == src)
          return b.Send(backend::kWorldComm, buf, dst, count, DataType::kFloat32, 0);
        if (b.rank() == dst)
          return b.Recv(backend::kWorldComm, buf, src, count, DataType::kFloat32, 0);
        return Status::Ok();
      };
      const std::string what = "P2P " + std::to_string(src) + " -> " + std::to_string(dst);
      PT_ASSIGN_OR_RETURN(std::vector<double> times,
                          WarmedSamples(b, timer, 1, plan.samples, iters, op, what));
      m.GBps[i][j] = AlgBwGBps(plan.p2p_bytes, Median(times));
    }
  }
  out->p2p = m;
  return Status::Ok();
}

}  // namespace

GroupSlot SlotFor(const GroupShape& shape, int world_size, int rank) {
  const int block = shape.group_size * shape.stride;
  GroupSlot slot;
  if (block <= 0 || rank / block >= world_size / block) return slot;  // leftover ranks idle
  const int b = rank / block;
  slot.color = b * shape.stride + rank % shape.stride;
  slot.key = (rank % block) / shape.stride;
  return slot;
}

backend::GemmPrecision ToGemmPrecision(topology::Precision p) {
  return static_cast<backend::GemmPrecision>(static_cast<int>(p));
}

DataType GemmInputType(topology::Precision p) {
  switch (p) {
    case topology::Precision::kFp32:
    case topology::Precision::kTf32:
      return DataType::kFloat32;
    case topology::Precision::kBf16:
      return DataType::kBFloat16;
    case topology::Precision::kFp16:
      return DataType::kFloat16;
    case topology::Precision::kFp8:
      return DataType::kFp8E4M3;
  }
  return DataType::kFloat32;
}

std::vector<GroupShape> DefaultGroupShapes(int world, int rpn, bool quick) {
  std::vector<GroupShape> shapes;
  if (world < 2) return shapes;
  rpn = std::max(1, std::min(rpn, world));
  const int nodes = world / rpn;
  std::vector<int> intra;
  for (int p = 2; p <= rpn; p *= 2) intra.push_back(p);
  if (rpn >= 2 && (intra.empty() || intra.back() != rpn)) intra.push_back(rpn);
  if (quick && intra.size() > 2) intra.erase(intra.begin() + 1, intra.end() - 1);
  for (int p : intra) shapes.push_back({p, 1});
  if (nodes >= 2) {
    std::vector<int> inter;
    for (int p = 2; p <= nodes; p *= 2) inter.push_back(p);
    if (inter.back() != nodes) inter.push_back(nodes);
    if (quick) inter.erase(inter.begin(), inter.end() - 1);
    for (int p : inter) shapes.push_back({p, rpn});
    if (rpn > 1) shapes.push_back({world, 1});
  }
  return shapes;
}

MeasurementPlan DefaultPlan(const std::string& backend_name, bool quick, int world, int rpn) {
  MeasurementPlan plan;
  plan.collectives = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                      Collective::kAllToAll, Collective::kSendRecv};
  plan.groups = DefaultGroupShapes(world, rpn, quick);
  if (!quick) {
    // AxoNN's (stride, size) table inside a node, all-reduce only.
    for (int s = 2; s < rpn; s *= 2) {
      for (int p = 2; p * s <= rpn; p *= 2) plan.extra_all_reduce_groups.push_back({p, s});
    }
  }
  constexpr int64_t K = 1024, M = K * K, G = M * K;
  if (backend_name == "cuda") {
    plan.sweep = quick ? SizeSweep{64 * K, 1 * G, 4, 0} : SizeSweep{1 * K, 4 * G, 4, 0};
    plan.warmup_iters = 5;
    plan.iters = quick ? 10 : 20;
    plan.samples = quick ? 3 : 5;
    plan.gemm_precisions = quick ? std::vector<topology::Precision>{topology::Precision::kBf16}
                                 : std::vector<topology::Precision>{
                                       topology::Precision::kBf16, topology::Precision::kFp16,
                                       topology::Precision::kTf32, topology::Precision::kFp32,
                                       topology::Precision::kFp8};
    for (int64_t s = quick ? 512 : 256; s <= 8192; s *= 2) plan.gemm_shapes.push_back({s, s, s});
    // Shapes a tensor-parallel split produces: many tokens, a narrow slice of the layer.
    plan.gemm_shapes.push_back({16384, 1024, 4096});
    plan.gemm_shapes.push_back({16384, 4096, 1024});
    plan.gemm_shapes.push_back({8192, 2048, 8192});
    if (!quick) plan.gemm_shapes.push_back({16384, 16384, 16384});
    plan.gemm_iters = quick ? 5 : 10;
    plan.copy_bytes = quick ? 512 * M : 1 * G;
    plan.p2p_bytes = quick ? 64 * M : 256 * M;
  } else if (backend_name == "mpi-cpu") {
    plan.sweep = quick ? SizeSweep{1 * K, 4 * M, 4, 0} : SizeSweep{1 * K, 64 * M, 4, 0};
    plan.warmup_iters = 2;
    plan.iters = quick ? 5 : 10;
    plan.samples = quick ? 3 : 5;
    plan.gemm_precisions = {topology::Precision::kFp32};
    for (int64_t s = 64; s <= (quick ? 256 : 512); s *= 2) plan.gemm_shapes.push_back({s, s, s});
    plan.gemm_shapes.push_back({1024, 64, 256});
    plan.gemm_iters = 3;
    plan.copy_bytes = quick ? 16 * M : 64 * M;
    plan.p2p_bytes = quick ? 1 * M : 16 * M;
  } else {  // fake: model time only, any size is cheap
    plan.sweep = SizeSweep{8, 1 * G, 4, 0};
    plan.warmup_iters = 1;
    plan.iters = 2;
    plan.samples = 3;
    plan.gemm_precisions = {topology::Precision::kBf16, topology::Precision::kFp8};
    for (int64_t s = 256; s <= 16384; s *= 2) plan.gemm_shapes.push_back({s, s, s});
    plan.gemm_iters = 2;
    plan.copy_bytes = 256 * M;
    plan.p2p_bytes = 64 * M;
  }
  return plan;
}

Result<Measurements> RunMeasurements(Backend& b, const MeasurementPlan& plan,
                                     const ProgressFn& progress) {
  Measurements out;
  out.env.hosts = b.hosts();
  out.env.world_size = b.world_size();
  std::map<std::string, int> per_host;
  for (const std::string& h : out.env.hosts) ++per_host[h];
  out.env.nodes = static_cast<int>(per_host.size());
  for (const auto& [h, n] : per_host) out.env.ranks_per_node = std::max(out.env.ranks_per_node, n);
  PT_ASSIGN_OR_RETURN(backend::DeviceInfo dev, b.DescribeDevice());
  out.env.device = dev.name;
  out.env.versions = b.Versions();
  out.env.created_at = UtcNowIso8601();

  if (plan.samples < 1 || plan.iters < 1 || plan.warmup_iters < 0 || plan.gemm_iters < 1) {
    return Status::InvalidArgument("samples, iters and gemm_iters must be >= 1, warm-up >= 0");
  }
  Timer timer(b);
  PT_RETURN_IF_ERROR(timer.Init());

  // Collectives: one send and one receive buffer sized for the largest row.
  const bool any_groups = !plan.groups.empty() || !plan.extra_all_reduce_groups.empty();
  if (!plan.collectives.empty() && !any_groups) {
    out.waived.push_back({"collectives", "a single rank: collectives need at least 2"});
  }
  if (!plan.collectives.empty() && any_groups) {
    PT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SweepSizes(plan.sweep));
    int64_t max_bytes = sizes.back();
    // Like nccl-tests' "Reducing maxBytes": keep two buffers well inside free memory.
    PT_ASSIGN_OR_RETURN(backend::MemoryInfo mem, b.GetMemoryInfo());
    std::vector<double> neg_free{-static_cast<double>(mem.free_bytes)};
    PT_RETURN_IF_ERROR(b.HostAllReduceMax(&neg_free));
    const auto budget = static_cast<int64_t>(-neg_free[0] / 3);
    if (max_bytes > budget) {
      while (!sizes.empty() && sizes.back() > budget) sizes.pop_back();
      if (sizes.empty())
        return Status::InvalidArgument("-b/--minbytes does not fit in device memory");
      if (progress)
        progress("reducing max bytes to " + std::to_string(sizes.back()) + " (device memory)");
      max_bytes = sizes.back();
    }
    Scratch scratch(b);
    PT_ASSIGN_OR_RETURN(Buffer send, scratch.Allocate(max_bytes));
    PT_ASSIGN_OR_RETURN(Buffer recv, scratch.Allocate(max_bytes));
    PT_RETURN_IF_ERROR(b.FillRandom(send, plan.dtype, 7));
    std::vector<Collective> runnable;
    for (Collective c : plan.collectives) {
      Status can =
          b.CheckCollective(static_cast<backend::OpKind>(static_cast<int>(c)), plan.dtype, plan.op);
      std::vector<double> unable{can.ok() ? 0.0 : 1.0};
      PT_RETURN_IF_ERROR(b.HostAllReduceMax(&unable));
      if (unable[0] > 0) {
        out.waived.push_back({topology::CollectiveName(c),
                              can.ok() ? "unavailable on another rank" : can.message()});
      } else {
        runnable.push_back(c);
      }
    }
    // One communicator per shape, shared by the collectives measured on it.
    std::vector<std::pair<GroupShape, bool>> shapes;  // (shape, all-reduce only)
    for (const GroupShape& s : plan.groups) shapes.push_back({s, false});
    for (const GroupShape& s : plan.extra_all_reduce_groups) shapes.push_back({s, true});
    for (const auto& [shape, all_reduce_only] : shapes) {
      if (shape.group_size < 2 || shape.stride < 1 ||
          shape.group_size * shape.stride > b.world_size()) {
        return Status::InvalidArgument("group of " + std::to_string(shape.group_size) +
                                       " ranks at stride " + std::to_string(shape.stride) +
                                       " does not fit in " + std::to_string(b.world_size()) +
                                       " ranks");
      }
      std::vector<Collective> here;
      for (Collective c : runnable) {
        if (!all_reduce_only || c == Collective::kAllReduce) here.push_back(c);
      }
      if (here.empty()) continue;
      PT_ASSIGN_OR_RETURN(GroupComm group, SplitForShape(b, shape));
      for (Collective c : here) {
        PT_RETURN_IF_ERROR(
            MeasureCollective(b, plan, c, shape, group, sizes, send, recv, timer, progress, &out));
      }
      if (group.comm != backend::kNoComm) PT_RETURN_IF_ERROR(b.DestroyComm(group.comm));
    }
  }
  PT_RETURN_IF_ERROR(MeasureGemms(b, plan, timer, progress, &out));
  PT_RETURN_IF_ERROR(MeasureCopy(b, plan, timer, progress, &out));
  PT_RETURN_IF_ERROR(MeasureP2P(b, plan, timer, progress, &out));
  return out;
}

}  // namespace paratune::profiler
