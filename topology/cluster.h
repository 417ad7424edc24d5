// topology/cluster.h: a cluster description (nodes of identical GPUs, the links
// inside a node, the NICs that leave it) and the placement-aware bandwidth
// queries the cost model asks: "a group of `size` ranks, `stride` ranks apart,
// runs a collective: what α and bus bandwidth does it get?" (cost-model.md §3,
// AxoNN's rule: inside a node the intra-node figure for (stride, size); across
// nodes the node's injection bandwidth shared by the min(stride, gpus_per_node)
// group instances that run at once). Presets live in topology/presets/clusters/.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "topology/collective_algorithms.h"
#include "topology/gpu.h"

namespace paratune::topology {

enum class Tier : uint8_t { kIntraNode = 0, kInterNode };
const char* TierName(Tier t);  // "intra_node" | "inter_node"

// A measured (or preset) intra-node bus bandwidth for one (stride, size) shape.
struct IntraNodeEntry {
  int stride = 1;
  int group_size = 2;
  double busbw_GBps = 0;
};

// A fitted α-β pair for one collective on one tier and group size, from a
// measured profile (profiler/). Where present it has the last word over the
// link model (cost-model.md §3: "let the profile ... have the last word").
struct CollectiveFit {
  Collective collective = Collective::kAllReduce;
  Tier tier = Tier::kIntraNode;
  int group_size = 2;
  double alpha_us = 0;    // µs per rank, as LinkCost
  double busbw_GBps = 0;  // fitted bus bandwidth, GB/s
};

// Accepted ranges of a cluster object's numbers beyond the GPU's (gpu.h;
// docs/presets.md, "Accepted ranges").
inline constexpr double kMaxLatencyUs = 1e4;         // per rank: 10 ms, 250x the slowest measured
inline constexpr double kMaxHostMemoryGiB = 65536;   // 64 TiB of CPU DRAM per node
inline constexpr int kMaxClusterNodes = 1 << 24;     // as many nodes as the planner takes GPUs

// Latency a network hop adds above NCCL's tuner figures, µs, per fabric
// (cluster.cc NetTransports): fitted to nccl_tables.json's multi-node rows
// (docs/model.md "Network transports").
inline constexpr double kVerbsNetLatencyUs = 3;
inline constexpr double kEfaNetLatencyUs = 23;

// A network transport NCCL runs over (ClusterSpec::net_transport).
struct NetTransport {
  const char* name;
  const char* fabric;  // "verbs" | "efa": the hop latency it shares
  double latency_us;   // per network hop above NCCL's tuner figures
  bool simple_only;    // the plugin forces NCCL_PROTO=simple
};
// Every transport paratune prices; the first is the default.
const std::vector<NetTransport>& NetTransports();
// The transport named `name`; the default when none is.
const NetTransport& FindNetTransport(const std::string& name);

struct ClusterSpec {
  std::string name;  // preset key or user label
  GpuSpec gpu;
  int gpus_per_node = 8;
  int max_nodes = 0;  // 0 = unbounded (user clusters)
  // GPUs that share one switched NVLink domain: 0 or gpus_per_node = the node
  // (DGX/HGX); larger for rack-scale systems whose NVLink switches join many
  // nodes (GB200/GB300 NVL72: 72 GPUs over 18 trays of 4). A multiple of
  // gpus_per_node; above it the fabric must be "nvswitch". Groups that fit in
  // one domain run at the switch figure (intra_node_GBps) across trays; NICs
  // stay per node.
  int nvlink_domain_gpus = 0;
  // Intra-node fabric. "nvswitch": every GPU reaches every other at its port
  // bandwidth. "mesh": direct links per pair (link_GBps), e.g. 4-GPU NVLink
  // boards and MI250X nodes. "pcie": a shared host bridge.
  std::string intra_node_fabric = "nvswitch";
  double intra_node_GBps = 0;  // achievable collective busbw over a switch, per GPU, GB/s
  std::vector<std::vector<double>> link_GBps;  // mesh: per-pair per-direction line rate, GB/s
  double link_efficiency = 0.76;               // mesh: achievable fraction of the summed link rate
  // Optional measured (stride, size) overrides. Lookup for a group inside a node:
  // the exact (stride, size) entry; else the entry with the same stride whose
  // size is nearest in log2 (ties: the lower busbw); else the link model. Entries
  // must fit a node (stride·group_size divides gpus_per_node). Not used for
  // sendrecv, which takes the per-pair path.
  std::vector<IntraNodeEntry> intra_node_table;
  // Latency per rank of a measured α-β fit's kind, intra-node, µs: what a
  // profile's fit and the fake backend's α-β view use. Presets' collectives
  // take NCCL's own latency tables (collective_algorithms.h) instead.
  double intra_alpha_us = 8;
  // Inter-node.
  int nics_per_node = 0;
  double nic_GBps = 0;               // line rate per NIC per direction, GB/s
  double nic_efficiency = 0.94;      // achievable busbw / line rate
  double inter_alpha_us = 12;        // as intra_alpha_us, inter-node, µs
  double alltoall_efficiency = 0.6;  // all-to-all busbw relative to ring collectives
  // Inter-node all-reduce busbw / line rate where it was measured apart from
  // the all-gather/reduce-scatter figure above (NCCL picks other algorithms
  // for it: tree, or ring with different channel counts). 0: nic_efficiency.
  double allreduce_nic_efficiency = 0;
  // How a collective's time is priced: "nccl" (default), NCCL's tuner tables
  // on the placed group's bandwidth (collective_algorithms.h); "alpha_beta",
  // t = α·p + busbw factor·N / busbw with intra_alpha_us / inter_alpha_us, for
  // systems whose α and bus bandwidth were measured in that form (AxoNN's
  // comm model on Perlmutter and Frontier, axonn-notes §2.3).
  std::string collective_model = "nccl";
  // NVLink SHARP (NVLS) all-reduce bus bandwidth inside one NVLink domain,
  // GB/s, as nccl-tests measures it on 8 GPUs with NCCL_ALGO=NVLS (other group
  // sizes follow from it, collective_algorithms.cc); 0 = the fabric has no
  // NVLS (no NVSwitch, or a GPU before Hopper). NCCL then runs NVLS inside a
  // domain and NVLS-Tree across domains where they beat its rings and trees.
  double nvls_GBps = 0;
  std::string network = "fat-tree";  // "fat-tree" | "dragonfly" | ...
  // How NCCL reaches the network (NetTransports() lists them): "verbs",
  // InfiniBand or RoCE through NCCL's own transport; "efa", AWS EFA through
  // aws-ofi-nccl's RDMA protocol (p5 and later); "efa-sendrecv", its
  // send/recv protocol on EFA devices that cannot order 128-byte writes (p4d,
  // p4de), where the plugin forces NCCL_PROTO=simple.
  std::string net_transport = "verbs";
  // Latency each network hop adds above NCCL's InfiniBand figures, µs
  // (collective_algorithms.h GroupShape::net_latency_us); < 0 = the transport's.
  double net_latency_us = -1;
  // Host (CPU) side of a node, for ZeRO-Offload/Infinity and FPDT's offloaded
  // chunks (docs/model.md "Host memory and offload"). 0 = not stated: the
  // model then checks no host memory and offers no optimizer/parameter offload.
  double host_memory_GiB = 0;   // CPU DRAM per node, GiB (DIMM capacities are binary)
  double host_memory_GBps = 0;  // peak CPU DRAM bandwidth per node, GB/s (all sockets)
  // GPU<->host bandwidth per GPU and direction when every GPU of the node
  // transfers at once, GB/s (PCIe switches shared by two GPUs halve it). 0 =
  // the GPU preset's host_link_GBps.
  double host_link_GBps = 0;
  std::string source;
  // Per-field provenance: JSON key ("nic_GBps", "intra_node_table", ...) -> where
  // that number comes from.
  std::map<std::string, std::string> sources;
  // Measured fits from a profile; empty for presets. GroupCost uses the fit with
  // the same collective and tier whose group size is nearest (in log2) to the
  // query; an inter-node fit is per group instance and is still divided by the
  // number of concurrent instances sharing the node's NICs.
  std::vector<CollectiveFit> fits;
  std::string profile_fingerprint;  // set when fits came from a profile
  // Multipliers fitted from measured runs (`paratune calibrate`, executor/):
  // the cost model scales its compute, communication and memory-bound terms by
  // them. 1 = uncalibrated. Not part of the fingerprint: they describe how
  // well the model fits this cluster, not the cluster.
  struct Corrections {
    double compute = 1.0;        // GEMMs, attention, element-wise kernels
    double communication = 1.0;  // every collective and send/recv
    double memory_bound = 1.0;   // optimizer step, embedding, loss
    // Mean relative iteration-time error left after the calibration fit
    // (0 = not calibrated); widens every prediction's uncertainty band.
    double residual = 0.0;
    bool operator==(const Corrections&) const = default;
  } corrections;
  // Corrections that hold for one training framework on one GPU only
  // (`paratune calibrate --logs`: a training log calibrates the stack that
  // produced it, not the cluster). The planner uses an entry in place of
  // `corrections` for a cost model whose framework name ("megatron", ...) and
  // gpu.name both match (planner::ClusterForFramework); every other framework
  // or GPU keeps `corrections`. Absolute factors, like `corrections`. Not part
  // of the fingerprint. JSON key "framework_corrections": [{framework, gpu,
  // compute, communication, memory_bound, residual?}].
  struct FrameworkCorrections {
    std::string framework;  // planner::FrameworkName, e.g. "torchtitan"
    std::string gpu;        // GpuSpec::name, e.g. "h100-sxm"
    Corrections corrections;
    bool operator==(const FrameworkCorrections&) const = default;
  };
  std::vector<FrameworkCorrections> framework_corrections;

  // Node injection bandwidth for collectives, GB/s: nics × nic_GBps × nic_efficiency.
  double NodeInjectionGBps() const;
  // GPUs of one NVLink domain: nvlink_domain_gpus, else gpus_per_node.
  int DomainGpus() const {
    return nvlink_domain_gpus > gpus_per_node ? nvlink_domain_gpus : gpus_per_node;
  }
  // Per-GPU share of it (the request form's inter_node_GBps_per_gpu).
  double InterNodeGBpsPerGpu() const { return NodeInjectionGBps() / gpus_per_node; }
  // GPU<->host GB/s per GPU and direction: host_link_GBps, else the GPU's.
  double HostLinkGBps() const { return host_link_GBps > 0 ? host_link_GBps : gpu.host_link_GBps; }
  // net_latency_us when stated, else the transport's (NetTransports()).
  double NetLatencyUs() const;
  // Whether the transport forces NCCL's Simple protocol on every collective.
  bool NetSimpleOnly() const;
};

// The cost of one collective on one placed group.
struct LinkCost {
  Tier tier = Tier::kIntraNode;
  double alpha_us = 0;    // the α-β view: µs per rank (the cluster's α, or a fit's)
  double busbw_GBps = 0;  // bus bandwidth of a Simple ring on the group, GB/s
  // What the collective costs: NCCL's algorithms and protocols on this group
  // (collective_algorithms.h), or the one α-β option of a measured fit.
  AlgoOptions options;
};

// Seconds of a collective on `cost`'s group with a buffer of `bytes`: the
// fastest of its options; 0 when group_size <= 1, +infinity when unreachable.
double LinkSeconds(const LinkCost& cost, int group_size, double bytes);

// Placement-aware query. A group of `group_size` ranks whose consecutive members
// are `stride` ranks apart, ranks laid on GPUs in order (rank r on node
// r / gpus_per_node). REQUIRES: group_size >= 2, stride >= 1.
//
// Tier: intra-node when every instance of the group lies in one node, i.e.
// stride·size <= gpus_per_node and divides it (a non-dividing block straddles a
// node boundary somewhere, and the collective waits for that instance). On a
// cluster whose NVLink domain spans nodes (DomainGpus() > gpus_per_node), also
// when stride·size <= DomainGpus(): the job's ranks are laid on a domain in
// whole blocks of stride·size (a rack-aware scheduler's segment placement), so
// no instance straddles a domain; a larger block leaves the domain and is
// priced at the NICs (a `gpus` count that needs a second rack for one group).
// Intra-node busbw: intra_node_table (rules above); else "nvswitch" and "pcie" ->
// the hub port figure (intra_node_GBps); "mesh" -> link_efficiency × the
// smallest, over members of every instance in the node, sum of direct link
// rates from that member to the other members (a member with no direct link
// to any other member uses its widest routed path instead). Inter-node busbw:
// NodeInjectionGBps() / min(stride, gpus_per_node), capped by the intra-node
// busbw of the group's part inside one node (stride, min(size, gpus_per_node /
// stride)) or, with one member per node, by the GPU's own path to the network.
// alltoall: × alltoall_efficiency. sendrecv: the per-pair path (widest path ×
// link_efficiency on a mesh, the port figure on a hub) inside a node, the NIC
// share across nodes. A matching fit (see ClusterSpec::fits) replaces all of
// this. busbw 0 (no NICs, a group that must leave the node) means unreachable.
LinkCost GroupCost(const ClusterSpec& c, Collective coll, int stride, int group_size);

// Seconds for one collective on a placed group with a buffer of `bytes` (the
// nccl-tests "size": whole buffer): LinkSeconds of GroupCost.
double CollectiveSeconds(const ClusterSpec& c, Collective coll, int stride, int group_size,
                         double bytes);

// GroupCost for every (stride, size) a search over `total_gpus` ranks can ask
// (strides dividing total_gpus; sizes as Get says), precomputed once so the
// search loop does O(1), allocation-free lookups. Thread-safe for concurrent reads.
class GroupCostTable {
 public:
  // REQUIRES: total_gpus >= 1. Costs O(divisors² · collectives) GroupCost calls.
  GroupCostTable(const ClusterSpec& c, int total_gpus);
  // REQUIRES: stride divides total_gpus; size divides total_gpus or size <=
  // max(2, gpus_per_node) (pairs for sendrecv and node-local groups such as
  // ZeRO++ hpZ need not divide it). Size 1: alpha 0, busbw +infinity (no traffic).
  const LinkCost& Get(Collective coll, int stride, int size) const;
  // Seconds for a collective over `bytes` (whole buffer); 0 when size <= 1.
  // Inline: the search calls it a dozen times per candidate.
  double Seconds(Collective coll, int stride, int size, double bytes) const {
    if (size <= 1) return 0.0;
    return FastestSeconds(Get(coll, stride, size).options, bytes);
  }
  int total_gpus() const { return total_gpus_; }

 private:
  int total_gpus_;
  std::vector<int> divisor_index_;  // value -> index into divisors_, -1 if not a divisor
  std::vector<int> divisors_;
  std::vector<LinkCost> costs_;  // [coll][stride idx][size idx]
  std::vector<int> size_index_;  // size -> index into sizes_, -1 if not tabulated
  std::vector<int> sizes_;       // divisors of total_gpus plus 1..max(2, gpus_per_node)
};

// Parses a cluster object: either the preset format, or the request form
// {gpu, gpus_per_node, intra_node_GBps, inter_node_GBps_per_gpu} where `gpu` is a
// preset name or a GPU object. Strict; errors name the JSON pointer.
Result<ClusterSpec> ParseClusterSpec(const Json& j, const std::string& pointer);
Json ClusterSpecToJson(const ClusterSpec& c);
// A preset name or an object.
Result<ClusterSpec> ResolveCluster(const Json& j, const std::string& pointer);

// Built-in presets: perlmutter, frontier, alps, polaris, dgx-a100-80gb, dgx-h100, dgx-h200.
std::vector<std::string> ClusterPresetNames();
Result<ClusterSpec> ClusterPreset(const std::string& name);

// A stable 16-hex-digit fingerprint of everything in the spec that affects a
// prediction (not names or sources). Equal specs give equal fingerprints.
std::string Fingerprint(const ClusterSpec& c);

}  // namespace paratune::topology
