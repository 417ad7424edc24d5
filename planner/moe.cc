#include "planner/moe.h"

#include <algorithm>
#include <cmath>

namespace paratune::planner {

MoeLayerShape MoeShape(const ModelSpec& m, double tokens, int ep, int etp, double skew) {
  PT_CHECK(m.is_moe() && ep >= 1 && etp >= 1 && skew >= 1.0);
  MoeLayerShape s;
  s.tokens = tokens;
  s.copies = tokens * m.top_k;
  s.local_experts = std::max(1, m.experts / ep);
  s.ffn_local = static_cast<double>(m.moe_ffn_hidden) / etp;
  // The EP group's copies (ep·copies, and gathered over ETP: × etp) spread over
  // its experts: ep·etp·copies / experts rows per expert.
  s.rows_mean = s.copies * ep * etp / m.experts;
  double load = skew;
  if (m.capacity_factor > 0 && load > m.capacity_factor) {
    // Each expert takes at most capacity_factor × its mean share; the rest is dropped.
    s.dropped_fraction = 1.0 - m.capacity_factor / load;
    load = m.capacity_factor;
  }
  s.rows_max = s.rows_mean * load;
  return s;
}

namespace {

// Uniform routing of top_k of `experts` spread evenly over `nodes`:
// nodes · (1 − C(E − E/n, k) / C(E, k)), the product form of the ratio.
double UniformNodesPerToken(double experts, int top_k, int nodes) {
  if (nodes <= 1) return 1.0;
  const double per_node = experts / nodes;
  double miss = 1.0;
  for (int i = 0; i < top_k; ++i) {
    const double num = experts - per_node - i, den = experts - i;
    miss *= std::max(0.0, num) / den;
  }
  return nodes * (1.0 - miss);
}

}  // namespace

double ExpectedNodesPerToken(int experts, int top_k, int nodes, int groups, int group_topk) {
  PT_CHECK(nodes >= 1);
  if (nodes == 1) return 1.0;
  const double uniform = UniformNodesPerToken(experts, top_k, nodes);
  if (groups <= 1 || group_topk <= 0 || group_topk >= groups) return uniform;
  if (groups % nodes == 0) {
    // Each node holds groups/nodes whole groups; a token's group_topk groups,
    // drawn uniformly, reach the nodes that hold any of them (each selected
    // group receives at least one of the token's experts: Megatron selects
    // the groups by their top-(k/group_topk) scores).
    return std::min(uniform, UniformNodesPerToken(groups, group_topk, nodes));
  }
  if (nodes % groups == 0) {
    // Each group spans nodes/groups nodes; the token's experts fall about
    // top_k/group_topk to each of its selected groups.
    const int per_group = std::max(1, top_k / group_topk);
    return std::min(uniform, group_topk * UniformNodesPerToken(static_cast<double>(experts) / groups,
                                                               per_group, nodes / groups));
  }
  return uniform;
}

DispatchVolume DispatchBytes(const ModelSpec& m, MoeDispatcher d, double tokens, int ep,
                             int ep_per_node, double elem_bytes) {
  DispatchVolume v;
  if (ep <= 1) return v;
  const double h = m.hidden, p = ep;
  const double per_node = std::clamp(ep_per_node, 1, ep);
  const double nodes = std::ceil(p / per_node);
  switch (d) {
    case MoeDispatcher::kAllGather:
      // Every rank receives every other rank's tokens (hidden states, not copies).
      v.bytes = tokens * h * elem_bytes * (p - 1.0);
      v.inter_node_bytes = tokens * h * elem_bytes * (p - per_node);
      break;
    case MoeDispatcher::kAllToAll: {
      const double copies = tokens * m.top_k;
      v.bytes = copies * h * elem_bytes * (p - 1.0) / p;
      v.inter_node_bytes = copies * h * elem_bytes * (p - per_node) / p;
      break;
    }
    case MoeDispatcher::kDeepEp:
    case MoeDispatcher::kHybridEp: {
      const double copies = tokens * m.top_k;
      // Inside the node, the copies bound for local experts; across nodes one
      // copy per remote node the token's experts lie on (forwarded over NVLink there).
      const double distinct = ExpectedNodesPerToken(m.experts, m.top_k, static_cast<int>(nodes),
                                                    m.router_groups, m.router_group_topk);
      const double remote_nodes = distinct * (nodes - 1.0) / nodes;
      v.inter_node_bytes = tokens * h * elem_bytes * remote_nodes;
      v.bytes = copies * h * elem_bytes * (per_node - 1.0) / p + v.inter_node_bytes;
      break;
    }
  }
  return v;
}

const char* MegatronMoeCudaGraphGap(const ModelSpec& m, const ParallelConfig& c) {
  if (!c.cuda_graphs || !m.is_moe() || c.moe_dispatcher == MoeDispatcher::kHybridEp) {
    return nullptr;
  }
  return "full-iteration CUDA graphs of a mixture-of-experts model need the hybridep "
         "dispatcher (moe_dispatcher), whose per-rank token budget makes the dispatch "
         "capturable (Megatron-LM docs/user-guide/features/cuda_graph.md:159-181)";
}

std::string MegatronDeepSpeedMoeGap(const ModelSpec& m) {
  if (!m.is_moe()) return "";
  const auto S = [](int64_t v) { return std::to_string(v); };
  if (m.moe_ffn_hidden != m.ffn_hidden) {
    return "Megatron-DeepSpeed's experts are the dense MLP (ParallelMLP of --ffn-hidden-size, "
           "megatron/model/transformer.py:1066-1083 @4efb479): the expert width " +
           S(m.moe_ffn_hidden) + " is not ffn_hidden " + S(m.ffn_hidden);
  }
  if (m.shared_ffn_hidden > 0 || m.is_mla() || m.mtp_layers > 0 || m.router != "softmax") {
    return "Megatron-DeepSpeed's MoE layer is softmax top-k gating over routed experts "
           "(transformer.py:1066-1083 @4efb479): it has no shared experts, MLA, multi-token "
           "prediction or sigmoid router, which " + m.name + " has";
  }
  for (int i = 0; i < m.layers; ++i) {
    if (m.is_moe_layer(i) != ((i + 1) % m.moe_layer_step == 0)) {
      return "--expert-interval " + S(m.moe_layer_step) +
             " puts experts on every layer number divisible by it (transformer.py:1650-1660 "
             "@4efb479); " + m.name + "'s layer " + S(i) + " differs (first_dense_layers " +
             S(m.first_dense_layers) + ")";
    }
  }
  return "";
}

namespace {

struct AutoEpShape {
  const char* preset;
  int layers, hidden, experts, top_k, moe_ffn;
};
constexpr AutoEpShape kAutoEpShapes[] = {
    {"mixtral", 32, 4096, 8, 2, 14336},      // Mixtral-8x7B
    {"mixtral", 56, 6144, 8, 2, 16384},      // Mixtral-8x22B
    {"qwen3_moe", 48, 2048, 128, 8, 768},    // Qwen3-30B-A3B
    {"qwen3_moe", 94, 4096, 128, 8, 1536},   // Qwen3-235B-A22B
    {"deepseek_v2", 27, 2048, 64, 6, 1408},  // DeepSeek-V2-Lite
    {"deepseek_v3", 61, 7168, 256, 8, 2048}, // DeepSeek-V3
};

}  // namespace

const char* DeepSpeedAutoEpPreset(const ModelSpec& m) {
  for (const AutoEpShape& s : kAutoEpShapes) {
    if (m.layers == s.layers && m.hidden == s.hidden && m.experts == s.experts &&
        m.top_k == s.top_k && m.moe_ffn_hidden == s.moe_ffn) {
      return s.preset;
    }
  }
  return nullptr;
}

std::string DeepSpeedAutoEpGap(const ModelSpec& m) {
  if (!m.is_moe() || DeepSpeedAutoEpPreset(m) != nullptr) return "";
  return "DeepSpeed splits a Hugging Face model's experts through AutoEP, whose presets are "
         "Mixtral, Qwen2/Qwen3-MoE, Qwen3.5-MoE and DeepSeek-V2/V3 "
         "(deepspeed/module_inject/auto_ep_presets/registry.py:19-27 @edaa722); " +
         m.name + " is none of them, so every GPU would hold all its experts";
}

int EpRanksPerDomain(int ep, int stride, int domain_gpus) {
  const int cap = std::max(1, domain_gpus / std::max(1, stride));
  for (int d = std::min(ep, cap); d > 1; --d) {
    if (ep % d == 0) return d;
  }
  return 1;
}

}  // namespace paratune::planner
