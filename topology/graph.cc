#include "topology/graph.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <functional>
#include <limits>

namespace paratune::topology {
namespace {

enum class VertexKind { kGpu, kHub, kNic, kNetwork };

struct VertexProps {
  VertexKind kind = VertexKind::kGpu;
  int index = 0;  // local GPU or NIC index
};

struct EdgeProps {
  double GBps = 0;  // per-direction bandwidth of this directed edge
};

using Graph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

// Keeps GPU and hub vertices: paths between GPUs of one node must not hairpin
// through a NIC and the network.
struct IntraNodeOnly {
  const Graph* g = nullptr;
  bool operator()(Vertex v) const {
    const VertexKind k = (*g)[v].kind;
    return k == VertexKind::kGpu || k == VertexKind::kHub;
  }
};

void AddLink(Graph* g, Vertex a, Vertex b, double GBps_ab, double GBps_ba) {
  if (GBps_ab > 0) boost::add_edge(a, b, EdgeProps{GBps_ab}, *g);
  if (GBps_ba > 0) boost::add_edge(b, a, EdgeProps{GBps_ba}, *g);
}

// Widest-path (maximum bottleneck) distances from `source`, by Dijkstra with
// (max, min) in place of (min, +): a path is as fast as its slowest edge.
template <typename G>
std::vector<double> WidestFrom(const G& g, Vertex source, size_t num_vertices) {
  std::vector<double> width(num_vertices, 0.0);
  boost::dijkstra_shortest_paths(
      g, source,
      boost::weight_map(boost::get(&EdgeProps::GBps, g))
          .distance_map(
              boost::make_iterator_property_map(width.begin(), boost::get(boost::vertex_index, g)))
          .distance_compare(std::greater<double>())
          .distance_combine([](double a, double b) { return std::min(a, b); })
          .distance_inf(0.0)
          .distance_zero(std::numeric_limits<double>::infinity()));
  return width;
}

}  // namespace

int NicOfGpu(const ClusterSpec& c, int local) {
  PT_CHECK(c.nics_per_node >= 1 && local >= 0 && local < c.gpus_per_node);
  return static_cast<int>(int64_t{local} * c.nics_per_node / c.gpus_per_node);
}

NodeBandwidths AnalyzeNode(const ClusterSpec& c) {
  const int n = c.gpus_per_node;
  PT_CHECK(n >= 1);
  Graph g;
  std::vector<Vertex> gpu(n), nic(std::max(0, c.nics_per_node));
  for (int i = 0; i < n; ++i) gpu[i] = boost::add_vertex(VertexProps{VertexKind::kGpu, i}, g);

  if (c.intra_node_fabric == "mesh") {
    PT_CHECK_MSG(static_cast<int>(c.link_GBps.size()) == n, "mesh link_GBps must be square");
    for (int a = 0; a < n; ++a) {
      PT_CHECK_MSG(static_cast<int>(c.link_GBps[a].size()) == n, "mesh link_GBps must be square");
      for (int b = 0; b < n; ++b) {
        if (a != b && c.link_GBps[a][b] > 0) {
          boost::add_edge(gpu[a], gpu[b], EdgeProps{c.link_GBps[a][b]}, g);
        }
      }
    }
  } else {
    // "nvswitch" or "pcie": every GPU has one port on a hub vertex.
    double port = c.intra_node_GBps;
    if (c.intra_node_fabric == "pcie" && !(port > 0)) {
      port = c.gpu.host_link_GBps * c.link_efficiency;
    }
    const Vertex hub = boost::add_vertex(VertexProps{VertexKind::kHub, 0}, g);
    for (int i = 0; i < n; ++i) AddLink(&g, gpu[i], hub, port, port);
  }

  double injection = 0;
  if (c.nics_per_node > 0) {
    const Vertex net = boost::add_vertex(VertexProps{VertexKind::kNetwork, 0}, g);
    const double out = c.nic_GBps * c.nic_efficiency;
    for (int j = 0; j < c.nics_per_node; ++j) {
      nic[j] = boost::add_vertex(VertexProps{VertexKind::kNic, j}, g);
      AddLink(&g, nic[j], net, out, out);
    }
    for (int i = 0; i < n; ++i) AddLink(&g, gpu[i], nic[NicOfGpu(c, i)], c.nic_GBps, c.nic_GBps);
    // Read the injection back off the graph rather than from the spec's formula,
    // so a wiring mistake here shows up against NodeInjectionGBps().
    for (auto [e, end] = boost::edges(g); e != end; ++e) {
      if (g[boost::target(*e, g)].kind == VertexKind::kNetwork) injection += g[*e].GBps;
    }
  }

  NodeBandwidths out;
  out.gpus = n;
  out.num_vertices = static_cast<int>(boost::num_vertices(g));
  out.num_edges = static_cast<int>(boost::num_edges(g));
  out.injection_GBps = injection;
  out.link_GBps.assign(n, std::vector<double>(n, 0.0));
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Vertex s = boost::source(*e, g), t = boost::target(*e, g);
    if (g[s].kind == VertexKind::kGpu && g[t].kind == VertexKind::kGpu) {
      out.link_GBps[g[s].index][g[t].index] += g[*e].GBps;
    }
  }

  const size_t nv = boost::num_vertices(g);
  boost::filtered_graph<Graph, boost::keep_all, IntraNodeOnly> intra(g, boost::keep_all(),
                                                                     IntraNodeOnly{&g});
  out.path_GBps.assign(n, std::vector<double>(n, 0.0));
  out.to_network_GBps.assign(n, 0.0);
  for (int a = 0; a < n; ++a) {
    const std::vector<double> w = WidestFrom(intra, gpu[a], nv);
    for (int b = 0; b < n; ++b) out.path_GBps[a][b] = (a == b) ? 0.0 : w[gpu[b]];
    if (c.nics_per_node > 0) {
      const std::vector<double> wn = WidestFrom(g, gpu[a], nv);
      for (Vertex v = 0; v < nv; ++v) {
        if (g[v].kind == VertexKind::kNetwork) out.to_network_GBps[a] = wn[v];
      }
    }
  }
  return out;
}

DomainBandwidths AnalyzeDomain(const ClusterSpec& c) {
  DomainBandwidths out;
  const int gpn = c.gpus_per_node;
  PT_CHECK(gpn >= 1);
  out.gpus = c.DomainGpus();
  out.nodes = out.gpus / gpn;
  if (out.nodes <= 1) return out;
  Graph g;
  const int n = out.gpus;
  std::vector<Vertex> gpu(n);
  for (int i = 0; i < n; ++i) gpu[i] = boost::add_vertex(VertexProps{VertexKind::kGpu, i}, g);
  // The domain's NVLink switch trays act as one non-blocking switch: each GPU
  // has one port on it at the achievable switch figure.
  const Vertex hub = boost::add_vertex(VertexProps{VertexKind::kHub, 0}, g);
  for (int i = 0; i < n; ++i) AddLink(&g, gpu[i], hub, c.intra_node_GBps, c.intra_node_GBps);
  if (c.nics_per_node > 0) {
    const Vertex net = boost::add_vertex(VertexProps{VertexKind::kNetwork, 0}, g);
    const double rate = c.nic_GBps * c.nic_efficiency;
    for (int node = 0; node < out.nodes; ++node) {
      std::vector<Vertex> nic(c.nics_per_node);
      for (int j = 0; j < c.nics_per_node; ++j) {
        nic[j] = boost::add_vertex(VertexProps{VertexKind::kNic, node * c.nics_per_node + j}, g);
        AddLink(&g, nic[j], net, rate, rate);
      }
      for (int l = 0; l < gpn; ++l) {
        AddLink(&g, gpu[node * gpn + l], nic[NicOfGpu(c, l)], c.nic_GBps, c.nic_GBps);
      }
    }
  }
  out.num_vertices = static_cast<int>(boost::num_vertices(g));
  out.num_edges = static_cast<int>(boost::num_edges(g));
  const size_t nv = boost::num_vertices(g);
  boost::filtered_graph<Graph, boost::keep_all, IntraNodeOnly> inside(g, boost::keep_all(),
                                                                      IntraNodeOnly{&g});
  double worst = std::numeric_limits<double>::infinity();
  double worst_net = std::numeric_limits<double>::infinity();
  for (int a = 0; a < gpn; ++a) {
    const std::vector<double> w = WidestFrom(inside, gpu[a], nv);
    const std::vector<double> wn = WidestFrom(g, gpu[a], nv);
    for (int b = gpn; b < n; ++b) {
      worst = std::min(worst, w[gpu[b]]);
      worst_net = std::min(worst_net, wn[gpu[b]]);
    }
  }
  out.cross_node_GBps = worst;
  out.cross_node_via_network_GBps = worst_net;
  return out;
}

}  // namespace paratune::topology
