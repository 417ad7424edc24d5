// topology/graph.h: the graph view of one node of a cluster, and what the
// placement queries read from it. graph.cc builds a Boost.Graph adjacency_list
// with a vertex per GPU, a hub vertex for switch ("nvswitch") and host-bridge
// ("pcie") fabrics or direct GPU-GPU edges for "mesh" fabrics, a vertex per NIC
// and one network vertex; every edge carries its per-direction bandwidth in
// GB/s. Boost stays inside graph.cc: this header exposes plain data only.
//
// Nodes of a cluster are identical, so one node plus the network vertex is the
// whole picture the cost model needs; rank r lives on node r / gpus_per_node
// as local GPU r % gpus_per_node.
#pragma once

#include <vector>

#include "topology/cluster.h"

namespace paratune::topology {

// The bandwidth facts of one node, read off its graph. Plain value; thread-safe
// to share once built.
struct NodeBandwidths {
  int gpus = 0;
  // Per-direction bandwidth of the direct GPU->GPU edge [from][to], GB/s; 0 when
  // the pair has no direct link. Always 0 on "nvswitch" and "pcie" fabrics,
  // where GPUs meet at a hub vertex instead.
  std::vector<std::vector<double>> link_GBps;
  // Bottleneck bandwidth of the widest path [from][to] inside the node (a direct
  // link, a route through other GPUs of a mesh, or through the hub), GB/s;
  // 0 when unreachable and on the diagonal. Never leaves the node through a NIC.
  std::vector<std::vector<double>> path_GBps;
  // Bottleneck bandwidth of the widest path from each GPU to the network vertex
  // (through its NIC, NIC line rate × nic_efficiency), GB/s; 0 without NICs.
  std::vector<double> to_network_GBps;
  // Sum of the NIC->network edges, GB/s: equals ClusterSpec::NodeInjectionGBps().
  double injection_GBps = 0;
  int num_vertices = 0;
  int num_edges = 0;  // directed edges (each physical link counts once per direction)
};

// The bandwidth facts of one NVLink domain that spans several nodes (GB200 /
// GB300 NVL72: 72 GPUs on 18 trays of 4), read off a graph of the whole domain:
// a GPU vertex per GPU, one switch vertex for the domain's NVLink switches
// (every GPU one port at intra_node_GBps), each tray's NICs and the network.
struct DomainBandwidths {
  int gpus = 0;   // GPUs in the domain (= gpus_per_node for a single-node domain)
  int nodes = 1;  // trays (nodes) it spans
  // Bottleneck of the widest path from a GPU of the first tray to a GPU of
  // any other tray without leaving through a NIC (the slowest such pair),
  // GB/s; 0 for a single-node domain.
  double cross_node_GBps = 0;
  // The same pair's widest path allowed through the NICs and the network
  // (what a domain without its switches would give), GB/s.
  double cross_node_via_network_GBps = 0;
  int num_vertices = 0;
  int num_edges = 0;
};

// Builds and reads the domain graph of `c`. For a single-node domain only
// `gpus` and `nodes` are set. REQUIRES: gpus_per_node >= 1.
DomainBandwidths AnalyzeDomain(const ClusterSpec& c);

// Which of the node's NICs serves local GPU `local`: NICs are spread evenly in
// order, GPU l -> NIC l·nics_per_node / gpus_per_node (one NIC per GPU on DGX
// and Alps, one per MI250X on Frontier, one per two GPUs on Polaris).
// REQUIRES: nics_per_node >= 1, 0 <= local < gpus_per_node.
int NicOfGpu(const ClusterSpec& c, int local);

// Builds the node graph of `c` and reads it. Hub port bandwidth: intra_node_GBps
// (the achievable switch busbw); for "pcie" without intra_node_GBps, the GPU's
// host_link_GBps × link_efficiency. GPU->NIC edges run at nic_GBps.
// REQUIRES: gpus_per_node >= 1; for "mesh", link_GBps is gpus_per_node square.
NodeBandwidths AnalyzeNode(const ClusterSpec& c);

}  // namespace paratune::topology
