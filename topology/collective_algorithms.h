// topology/collective_algorithms.h: how NCCL prices one collective. Its tuner
// (src/graph/tuning.cc at v2.28.9-1, commit dbc86fd) weighs every enabled
// algorithm × protocol: Ring, Tree, NVLS (NVLink SHARP), NVLS-Tree and PAT
// with the LL, LL128 and Simple protocols, each a latency plus the bytes over
// an algorithm bandwidth, and runs the fastest (enqueue.cc:1822-1843). This
// file holds NCCL's latency tables and protocol factors and applies them to
// the bandwidths the placement model (cluster.h GroupCost) gives a placed
// group, so a collective's time depends on its size, its rank and node counts
// and its algorithm the way NCCL's does. docs/model.md "Collectives" cites
// every constant.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace paratune::topology {

enum class Collective : uint8_t {
  kAllReduce = 0,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv
};
inline constexpr int kNumCollectives = 5;
// "all_reduce" | "all_gather" | "reduce_scatter" | "alltoall" | "sendrecv" (nccl-tests names).
const char* CollectiveName(Collective c);
Result<Collective> ParseCollective(const std::string& name);
// nccl-tests busbw factor: bus bytes per GPU = factor × buffer bytes.
// all_reduce 2(p-1)/p; all_gather, reduce_scatter, alltoall (p-1)/p; sendrecv 1.
double BusFactor(Collective c, int group_size);

// NCCL's algorithms (nccl_tuner.h:26-33) and the point-to-point path that
// all-to-all and send/recv take (no tuner entry: grouped sends and receives).
enum class Algorithm : uint8_t { kRing = 0, kTree, kNvls, kNvlsTree, kPat, kDirect };
inline constexpr int kNumAlgorithms = 6;
enum class Protocol : uint8_t { kLL = 0, kLL128, kSimple };
const char* AlgorithmName(Algorithm a);  // "ring" | "tree" | "nvls" | "nvls_tree" | "pat" | "direct"
const char* ProtocolName(Protocol p);    // "LL" | "LL128" | "Simple"
Result<Algorithm> ParseAlgorithm(const std::string& name);
// A set of algorithms, bit i = Algorithm i (NCCL_ALGO's role).
using AlgorithmMask = uint8_t;
inline constexpr AlgorithmMask kAnyAlgorithm = 0x3F;
inline constexpr AlgorithmMask MaskOf(Algorithm a) {
  return static_cast<AlgorithmMask>(1u << static_cast<int>(a));
}

// The GPU-generation row of NCCL's per-architecture tables (tuning.cc:249:
// compute capability < 80 Volta, < 90 Ampere, < 100 Hopper, else Blackwell).
enum class NcclArch : uint8_t { kVolta = 0, kAmpere, kHopper, kBlackwell };
// By GPU preset name (v100*, a100*, h*/gh200, b*/gb*); AMD GPUs (RCCL, whose
// tables differ: research notes in docs/model.md) take the Hopper row.
NcclArch NcclArchOf(const std::string& gpu_name);
// AMD Instinct GPUs (preset names mi*) run RCCL rather than NCCL.
bool RunsRccl(const std::string& gpu_name);

// What the tuner needs to know of one placed group.
struct GroupShape {
  int ranks = 2;
  // NCCL's nodes: the NVLink domains the group spans (a multi-node NVLink
  // domain is one node to NCCL, as its MNNVL clique is). 1: no NIC crossed.
  int nodes = 1;
  NcclArch arch = NcclArch::kHopper;
  bool pcie = false;  // GPUs of a node talk over PCIe (PCI latency row, no LL128)
  bool rccl = false;  // RCCL's kernels (AMD): no pipeline-fill term, see AlgoOption
  // Ring bus bandwidth of the placed group with the Simple protocol, GB/s:
  // the placement model's figure (the slower of NVLink and the NIC share).
  double ring_GBps = 0;
  // Bus bandwidth of the group's part inside one node (its NVLink ring), GB/s.
  double intra_GBps = 0;
  // NIC bandwidth one node's part of the group has, per direction, GB/s (the
  // node's injection over the group instances sharing it). Unused when nodes == 1.
  double node_nic_GBps = 0;
  // Measured NVLS all-reduce bus bandwidth of the NVLink domain on 8 GPUs,
  // GB/s; 0 = the fabric has no NVLink SHARP (cluster.h nvls_GBps).
  double nvls_GBps = 0;
  // Latency a network hop adds above NCCL's InfiniBand figures, µs: NCCL adds
  // the net plugin's reported latency to every inter-node hop, twice with
  // Simple for the receive flush (search.cc:685; tuning.cc:357-359). Its own
  // InfiniBand/RoCE transport reports 0 (net_ib.cc:945); cluster.h
  // net_transport gives the others'.
  double net_latency_us = 0;
  // The network cannot order 128-byte writes and its plugin forces
  // NCCL_PROTO=simple for the whole process (cluster.h net_transport).
  bool simple_only = false;
};

// One algorithm × protocol: seconds = latency + bytes / algbw for a buffer of
// `bytes` (the nccl-tests size), with NCCL's two per-call adjustments.
struct AlgoOption {
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  double latency_us = 0;
  double algbw_GBps = 0;  // 0 = unusable
  // Tree all-reduce: NCCL's size correction of the bandwidth (tuning.cc:578-592).
  bool tree_correction = false;
  // Multi-node ring all-reduce with Simple: latency × 1.4 once each channel
  // carries ≥ 64 bytes per rank (tuning.cc:593-596); 0 = never.
  double plateau_bytes = 0;
  // NCCL pipelines the collective through its steps in chunks and shrinks
  // chunks, channels and threads as the message shrinks (enqueue.cc:1880-1899,
  // 2045-2068), so bus bandwidth ramps up slowly through the mid sizes. A
  // pipeline whose per-chunk overhead sums to the latency L over its stages,
  // chunked for a message whose transfer takes W at full bandwidth, takes
  // L + W + 2·sqrt(L·W) (pipelined-transfer bound); NCCL's tuner keeps the
  // first two terms. The share of the cross term added: kNcclPipelineFill
  // for NCCL's collectives, 0 for point-to-point and RCCL.
  double pipeline_fill = 0;
};

// Share of the pipelined-transfer cross term 2·sqrt(L·W) that NCCL's mid-size
// runs show: fitted to nccl_tables.json with the network hop latencies
// (cluster.h NetTransports), 651 rows on 18 systems; each
// leave-one-system-out fit lands in 0.325–0.375 (`validate --collectives`
// refits it per held-out system). Without the term the 64 KiB – 256 MiB rows
// are 31 % fast at the median; with it, 13 %. RCCL's tables (MI300X, MI355X)
// reach their bandwidth sooner and take none (docs/model.md "Collectives").
inline constexpr double kNcclPipelineFill = 0.325;
// The largest latency L the fill is taken at, µs: the largest of the
// InfiniBand and RoCE rows the share was first fitted on (GCP's TCPX two-node
// ring, 132 µs); EFA's rows above it (p4d's Simple tree, 184 µs) fit with
// it. Rings across hundreds of nodes have latencies of milliseconds, where
// no table measured the cross term; it is not extrapolated there.
inline constexpr double kPipelineFillMaxLatencyUs = 132;

// A group's options, kept in order of latency: a query stops at the first
// option whose latency alone exceeds the best time found (the search asks a
// dozen times per candidate).
struct AlgoOptions {
  std::array<AlgoOption, 12> items{};
  uint8_t count = 0;
  void Add(const AlgoOption& o);
};

// Every option NCCL's tuner enables for `coll` on `shape` (tuning.cc:267-401,
// 463-497). All-to-all and send/recv get the one point-to-point option.
AlgoOptions NcclOptions(Collective coll, const GroupShape& shape);

// Seconds one option runs on a buffer of `bytes`: NCCL's estimate (latency
// plus transfer) and the pipeline fill; +infinity when unusable.
double OptionSeconds(const AlgoOption& o, double bytes);

// The fastest option among `allowed`; `*chosen` (when given) points at it, or
// at nothing when none is allowed (+infinity returned). NCCL's tuner weighs
// its estimates without the fill; picking on the run's time instead differs
// from it on 16 of nccl_tables.json's 651 rows, by under 4 %, and keeps time
// monotone in bytes and in bandwidth.
double FastestSeconds(const AlgoOptions& options, double bytes,
                      AlgorithmMask allowed = kAnyAlgorithm, const AlgoOption** chosen = nullptr);

}  // namespace paratune::topology
