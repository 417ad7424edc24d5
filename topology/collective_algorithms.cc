// NCCL's collective tuner applied to a placed group (collective_algorithms.h).
// Tables and factors are NCCL's, src/graph/tuning.cc at v2.28.9-1 (commit
// dbc86fd06e8b0c4517b95d8958a09ccacf9520c9); line numbers below are that file's
// unless named otherwise. The bandwidths they scale are the placement model's
// achievable figures, not NCCL's topology-search estimates.
#include "topology/collective_algorithms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/enum_names.h"

namespace paratune::topology {
namespace {

constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;
// NCCL's algorithm rows of the tables below: Tree 0, Ring 1, NVLS 4, NVLS_TREE 5, PAT 6.
constexpr int kTree = 0, kRing = 1, kNvls = 4, kNvlsTree = 5, kPat = 6;

// baseLatencies, µs (tuning.cc:143-148).
constexpr float kBaseLat[7][3] = {{6.8f, 14.0f, 8.4f}, {6.6f, 14.0f, 8.4f}, {0, 0, 0}, {0, 0, 0},
                                  {0, 0, 0},           {0, 0, 0},           {8.0f, 8.0f, 8.0f}};
// hwLatencies [NVLINK | PCI | NET][algorithm][protocol], µs (tuning.cc:149-168).
constexpr float kHwLat[3][7][3] = {
    {{.6f, 1.25f, 4.0f}, {.6f, 1.9f, 3.4f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0f}},
    {{1.0f, 1.9f, 4.0f}, {1.0f, 2.5f, 5.7f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0f}},
    {{5.0f, 8.5f, 14}, {2.7f, 4.0f, 14.0f}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9f}, {0, 0, 14}}};
// llMaxBws [row][N1 | N2 | N4+], GB/s (tuning.cc:169-174). One node: the row
// is the GPU generation; several: the host CPU (row 0 Intel/other).
constexpr float kLlMaxBw[4][3] = {
    {39.0f, 39.0f, 20.4f}, {87.7f, 22.5f, 19.0f}, {141.0f, 45.0f, 35.0f}, {282.0f, 90.0f, 70.0f}};
// treeCorrectionFactor [protocol][log2(bytes / 64)], 64 B to 256 MB (tuning.cc:578-582).
constexpr float kTreeCorrection[3][23] = {
    {1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .7f, .7f, .7f, .7f, .6f, .5f,
     .4f,  .4f,  .5f,  .6f,  .7f, .8f, .9f, 1.0f, 1.0f, 1.0f, 1.0f},
    {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .8f, .8f, .7f, .6f, .6f,
     .6f,  .6f,  .6f,  .6f,  .8f,  .9f, .9f, .9f, .9f, 1.0f, 1.0f},
    {.9f, .9f, .9f, .9f, .9f, .9f, .9f, .8f, .7f, .6f, .6f, .5f,
     .5f, .5f, .5f, .6f, .7f, .8f, .7f, .7f, .8f, .9f, .9f}};
// Network post overhead per ring step on an Intel (or other) host, µs; ×3
// with Simple (tuning.cc:214-219, 372-375).
constexpr float kNetOverheadUs = 1.0f;
// Ring bandwidth left by the LL (8-byte lines carrying 4 bytes of data) and
// LL128 protocols (tuning.cc:304-305); Tree's, PAT's (tuning.cc:306-310).
constexpr float kRingLLFactor = 0.5f, kLL128Factor = 0.92f, kTreeFactor = 0.92f;
constexpr float kTreeLLDivisor = 3.8f, kTreeLL128Factor = 120.0f / 128.0f, kPatFactor = 0.75f;
// Ring "plateau effect": multi-node Simple all-reduce latency ×1.4 (×1.9 before
// Ampere) once nBytes / (nChannels · nRanks) ≥ 64 (tuning.cc:593-596), with
// the 32 channels NCCL's search allows a ring (init.cc:1017-1020).
constexpr float kPlateauChannels = 32;
// The GPUs a cluster's nvls_GBps was measured on (nccl-tests on one 8-GPU
// node or two 4-GPU trays).
constexpr int kNvlsMeasuredGpus = 8;
// Serialization per peer of a grouped point-to-point operation, µs: NCCL's
// arity serialization figure (tuning.cc:387, CollNetDirect's 0.4 µs per peer).
constexpr float kPerPeerUs = 0.4f;

constexpr const char* kAlgorithmNames[kNumAlgorithms] = {"ring", "tree", "nvls",
                                                         "nvls_tree", "pat", "direct"};
constexpr const char* kProtocolNames[3] = {"LL", "LL128", "Simple"};

int Log2Floor(double x) { return x >= 1 ? static_cast<int>(std::floor(std::log2(x))) : 0; }

// One inter-node hop of `algo` with `proto`: NCCL's NET row plus the
// transport's own latency, twice with Simple (tuning.cc:355-359).
double NetHopUs(const GroupShape& g, int algo, int proto) {
  return kHwLat[kHwNet][algo][proto] + g.net_latency_us * (proto == kSimple ? 2.0 : 1.0);
}

// Whether `proto` runs on this group: LL128 needs NVLink inside the node
// (tuning.cc:478-494); a transport without ordered 128-byte writes leaves
// Simple alone (GroupShape::simple_only).
bool ProtocolRuns(const GroupShape& g, int proto) {
  if (proto != kSimple && g.simple_only) return false;
  return !(proto == kLL128 && g.pcie);
}

float LlMaxBw(const GroupShape& g) {
  const int n_index = g.nodes <= 1 ? 0 : g.nodes == 2 ? 1 : 2;
  const int row = g.nodes <= 1 ? static_cast<int>(g.arch) : 0;
  return kLlMaxBw[row][n_index];
}

// Ring all-reduce / all-gather / reduce-scatter (tuning.cc:353-380).
void AddRing(Collective coll, const GroupShape& g, AlgoOptions* out) {
  const bool ar = coll == Collective::kAllReduce;
  const int p = g.ranks, n = g.nodes;
  const double ppn = static_cast<double>(p) / n;
  const int nsteps = ar ? 2 * (p - 1) : p - 1;
  const int n_inter = n <= 1 ? 0 : ar ? 2 * (n - 1) : n - 1;
  const int intra_hw = g.pcie ? kHwPci : kHwNvlink;
  const double factor = BusFactor(coll, p);
  for (int proto : {kLL, kLL128, kSimple}) {
    if (!ProtocolRuns(g, proto)) continue;
    float intra_lat = kHwLat[intra_hw][kRing][proto];
    if (n > 1) intra_lat = std::max(intra_lat, kNetOverheadUs * (proto == kSimple ? 3.0f : 1.0f));
    // With one GPU per node every hop is exposed: the Tree network figure (tuning.cc:356).
    const double inter_lat = NetHopUs(g, ppn <= 1.0 ? kTree : kRing, proto);
    AlgoOption o;
    o.algorithm = Algorithm::kRing;
    o.protocol = static_cast<Protocol>(proto);
    o.latency_us = kBaseLat[kRing][proto] + static_cast<double>(nsteps - n_inter) * intra_lat +
                   static_cast<double>(n_inter) * inter_lat;
    double bus = g.ring_GBps;
    if (proto == kLL) bus = std::min<double>(LlMaxBw(g), bus * kRingLLFactor);
    if (proto == kLL128) bus *= kLL128Factor;
    o.algbw_GBps = bus / factor;
    if (ar && proto == kSimple && n > 1) o.plateau_bytes = 64.0 * kPlateauChannels * p;
    o.pipeline_fill = g.rccl ? 0.0 : kNcclPipelineFill;
    out->Add(o);
  }
}

// Inter-node bandwidth of a tree-shaped exchange between nodes, GB/s of
// buffer: with two nodes each node's NICs carry the buffer once per
// direction; with more, an interior node of the double binary tree carries it
// about twice (NCCL doubles NVLS-Tree's inter-node bandwidth at nNodes ≤ 2,
// tuning.cc:296).
double TreeNetworkGBps(const GroupShape& g) {
  return g.node_nic_GBps * (g.nodes <= 2 ? 1.0 : 0.5);
}

// Tree all-reduce across nodes (tuning.cc:306-309, 381-385): a chain inside
// each node, a double binary tree between nodes. The chain reduces up and
// broadcasts down, so each GPU's NVLink port carries the buffer twice per
// direction; with one GPU per node there is no chain.
void AddTree(const GroupShape& g, AlgoOptions* out) {
  const int n = g.nodes;
  const int ppn = std::max(1, g.ranks / n);
  const int intra_hw = g.pcie ? kHwPci : kHwNvlink;
  const double chain = ppn > 1 ? g.intra_GBps / 2.0 : g.intra_GBps;
  const double simple = kTreeFactor * std::min(TreeNetworkGBps(g), chain);
  for (int proto : {kLL, kLL128, kSimple}) {
    if (!ProtocolRuns(g, proto)) continue;
    AlgoOption o;
    o.algorithm = Algorithm::kTree;
    o.protocol = static_cast<Protocol>(proto);
    o.latency_us = kBaseLat[kTree][proto] +
                   2.0 * (static_cast<double>(ppn - 1) * kHwLat[intra_hw][kTree][proto] +
                           static_cast<double>(Log2Floor(n)) * NetHopUs(g, kTree, proto));
    double bw = simple;
    if (proto == kLL) bw = std::min<double>(bw / kTreeLLDivisor, LlMaxBw(g));
    if (proto == kLL128) bw *= kTreeLL128Factor;
    o.algbw_GBps = bw;
    o.tree_correction = true;
    o.pipeline_fill = g.rccl ? 0.0 : kNcclPipelineFill;
    out->Add(o);
  }
}

// Algorithm bandwidth of an NVLS all-reduce over `p` GPUs of one domain, from
// the bus bandwidth measured on 8: the switch reduces and multicasts at its
// own rate whatever the group's size, so the algorithm bandwidth stays (OCI's
// nccl-tests, nccl_tables.json: GB200 463 GB/s on 8 GPUs, 453 on 64; GB300 481
// and 472). On two GPUs a ring is faster; from four NVLS is.
double NvlsAlgbw(double nvls_GBps) {
  return nvls_GBps / BusFactor(Collective::kAllReduce, kNvlsMeasuredGpus);
}

// NVLS all-reduce inside one NVLink domain, NVLS-Tree across domains
// (tuning.cc:285-300, 391-395): Simple only, the switch reducing in place.
void AddNvls(const GroupShape& g, AlgoOptions* out) {
  const int n = g.nodes;
  const double intra_alg = NvlsAlgbw(g.nvls_GBps);
  AlgoOption o;
  o.protocol = Protocol::kSimple;
  if (n <= 1) {
    o.algorithm = Algorithm::kNvls;
    o.latency_us = kHwLat[kHwNvlink][kNvls][kSimple];
    o.algbw_GBps = NvlsAlgbw(g.nvls_GBps);
  } else {
    o.algorithm = Algorithm::kNvlsTree;
    o.latency_us = kBaseLat[kNvlsTree][kSimple] + kHwLat[kHwNvlink][kNvlsTree][kSimple] +
                   2.0 * static_cast<double>(Log2Floor(n)) * NetHopUs(g, kNvlsTree, kSimple);
    o.algbw_GBps = std::min(intra_alg, TreeNetworkGBps(g));
  }
  o.pipeline_fill = g.rccl ? 0.0 : kNcclPipelineFill;
  out->Add(o);
}

// PAT all-gather / reduce-scatter with one GPU per node (tuning.cc:201-209,
// 310, 396-400): its bandwidth is relative to the whole buffer.
void AddPat(const GroupShape& g, AlgoOptions* out) {
  AlgoOption o;
  o.algorithm = Algorithm::kPat;
  o.protocol = Protocol::kSimple;
  o.latency_us = kBaseLat[kPat][kSimple] +
                 static_cast<double>(Log2Floor(g.nodes)) * NetHopUs(g, kPat, kSimple) / 3.5 +
                 2.8 * static_cast<double>(g.ranks);
  o.algbw_GBps = kPatFactor * g.ring_GBps;
  o.pipeline_fill = g.rccl ? 0.0 : kNcclPipelineFill;
  out->Add(o);
}

// All-to-all and send/recv: grouped point-to-point operations, which NCCL's
// tuner does not price. One Simple step's latency (base plus the hop's) and,
// for all-to-all, the serialization of its peers.
void AddDirect(Collective coll, const GroupShape& g, AlgoOptions* out) {
  const int hw = g.pcie ? kHwPci : kHwNvlink;
  AlgoOption o;
  o.algorithm = Algorithm::kDirect;
  o.protocol = Protocol::kSimple;
  o.latency_us = kBaseLat[kRing][kSimple] +
                 (g.nodes > 1 ? NetHopUs(g, kRing, kSimple) : kHwLat[hw][kRing][kSimple]);
  if (coll == Collective::kAllToAll) o.latency_us += kPerPeerUs * static_cast<double>(g.ranks - 1);
  o.algbw_GBps = g.ring_GBps / BusFactor(coll, g.ranks);
  out->Add(o);
}

}  // namespace

const char* AlgorithmName(Algorithm a) { return EnumLookup(a, kAlgorithmNames, "unknown"); }
const char* ProtocolName(Protocol p) { return EnumLookup(p, kProtocolNames, "unknown"); }
Result<Algorithm> ParseAlgorithm(const std::string& name) {
  return ParseKnownEnumName<Algorithm>(name, kAlgorithmNames, "algorithm");
}

NcclArch NcclArchOf(const std::string& gpu_name) {
  auto starts = [&](const char* prefix) { return gpu_name.rfind(prefix, 0) == 0; };
  if (starts("v100")) return NcclArch::kVolta;
  if (starts("a100")) return NcclArch::kAmpere;
  if (starts("b") || starts("gb")) return NcclArch::kBlackwell;
  return NcclArch::kHopper;
}

bool RunsRccl(const std::string& gpu_name) { return gpu_name.rfind("mi", 0) == 0; }

AlgoOptions NcclOptions(Collective coll, const GroupShape& shape) {
  AlgoOptions out;
  if (shape.ranks < 2 || !(shape.ring_GBps > 0)) return out;
  GroupShape g = shape;
  g.nodes = std::clamp(g.nodes, 1, g.ranks);
  switch (coll) {
    case Collective::kAllToAll:
    case Collective::kSendRecv:
      AddDirect(coll, g, &out);
      break;
    case Collective::kAllReduce:
      AddRing(coll, g, &out);
      if (g.nodes > 1) AddTree(g, &out);
      if (g.nvls_GBps > 0) AddNvls(g, &out);
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      AddRing(coll, g, &out);
      if (g.nodes > 1 && g.nodes == g.ranks) AddPat(g, &out);
      break;
  }
  return out;
}

void AlgoOptions::Add(const AlgoOption& o) {
  if (count >= items.size() || !(o.algbw_GBps > 0)) return;
  int at = count++;
  for (; at > 0 && items[at - 1].latency_us > o.latency_us; --at) items[at] = items[at - 1];
  items[at] = o;
}

double OptionSeconds(const AlgoOption& o, double bytes) {
  if (!(o.algbw_GBps > 0)) return std::numeric_limits<double>::infinity();
  double latency = o.latency_us;
  if (o.plateau_bytes > 0 && bytes >= o.plateau_bytes) latency *= 1.4;
  double bw = o.algbw_GBps;
  if (o.tree_correction && bytes >= 64) {
    const int index = std::ilogb(bytes) - 6;  // log2(bytes / 64), floored
    if (index < 23) bw *= kTreeCorrection[static_cast<int>(o.protocol)][index];
  }
  const double transfer = std::max(0.0, bytes) / (bw * 1e9);
  const double fill_latency = std::min<double>(o.latency_us, kPipelineFillMaxLatencyUs) * 1e-6;
  const double fill = o.pipeline_fill * 2.0 * std::sqrt(fill_latency * transfer);
  return latency * 1e-6 + transfer + fill;
}

double FastestSeconds(const AlgoOptions& options, double bytes, AlgorithmMask allowed,
                      const AlgoOption** chosen) {
  double best = std::numeric_limits<double>::infinity();
  if (chosen != nullptr) *chosen = nullptr;
  for (int i = 0; i < options.count; ++i) {
    const AlgoOption& o = options.items[i];
    // In latency order: no later option can finish before its latency.
    if (o.latency_us * 1e-6 >= best) break;
    if (!(allowed & MaskOf(o.algorithm))) continue;
    const double t = OptionSeconds(o, bytes);
    if (t < best) {
      best = t;
      if (chosen != nullptr) *chosen = &o;
    }
  }
  return best;
}

}  // namespace paratune::topology
