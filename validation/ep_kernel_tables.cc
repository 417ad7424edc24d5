// The expert-parallel kernels' benchmarks of shared/calibration/nccl_tables.json
// as questions to the MoE dispatch term (validation/ep_kernel_tables.h;
// docs/model.md "Expert-parallel kernels").
#include "validation/ep_kernel_tables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "common/strings.h"
#include "planner/cost_model.h"
#include "planner/moe.h"
#include "validation/row_fields.h"

namespace paratune::planner {
namespace {

using row_fields::Num;
using row_fields::Str;

// The SM counts Megatron-Core gives the kernels when the job does not set
// moe_flex_dispatcher_num_sms: DeepEP 20 (token_dispatcher.py:1288-1292
// @d98e8a64); HybridEP its own default, 24 SMs inside one NVLink domain and
// 8 across (deepseek-ai/DeepEP@94a9f8f csrc/hybrid_ep/config.cuh:366-367).
int DefaultSms(MoeDispatcher d, bool one_domain) {
  if (d == MoeDispatcher::kHybridEp) return one_domain ? 24 : 8;
  return 20;
}

// DeepEP V1's intranode kernels take at most 8 NVLink ranks
// (NUM_MAX_NVL_PEERS, csrc/kernels/configs.cuh:3 @c18eabd); beyond, they run
// internode.
constexpr int kDeepEpMaxNvlRanks = 8;

// FP8 rows move 1 byte per element and one fp32 scale per 128 (the tests'
// fp8_factor (1 + 4/128) / 2 on the bf16 bytes: test_intranode.py:178 @c18eabd,
// test_hybrid_ep.py:344 @94a9f8f).
double ElemBytes(bool fp8) { return fp8 ? 1.0 + 4.0 / 128.0 : 2.0; }

int FirstInt(const std::string& text, const std::regex& re, int fallback) {
  std::smatch m;
  if (!std::regex_search(text, m, re)) return fallback;
  int v = std::stoi(m[1].str());
  if (m.size() > 2 && m[2].matched && m[2].str() == "K") v *= 1024;
  return v;
}

// The test's workload from the table's `workload` text: "4096 tokens/batch,
// hidden 7168, top-4 groups, top-8 experts" or "8 local experts". False when
// it names no tokens, hidden size or top-k.
bool ParseWorkload(const std::string& text, EpKernelTable* t) {
  static const std::regex kTokens(R"((\d+)(K?) tokens)");
  static const std::regex kHidden(R"(hidden(?: dimension)? (\d+))");
  static const std::regex kTopK(R"(top-(\d+)(?! groups)(?:\b|$))");
  static const std::regex kLocal(R"((\d+) local experts)");
  t->tokens = FirstInt(text, kTokens, 0);
  t->hidden = FirstInt(text, kHidden, 0);
  t->top_k = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kTopK);
       it != std::sregex_iterator(); ++it) {
    const size_t end = static_cast<size_t>(it->position(0) + it->length(0));
    if (text.compare(end, 7, " groups") != 0) t->top_k = std::stoi((*it)[1].str());
  }
  t->local_experts = FirstInt(text, kLocal, 0);
  t->node_groups = Contains(text, "groups");
  return t->tokens > 0 && t->hidden > 0 && t->top_k > 0;
}

// The table's system: the GPU's preset with its GPUs per node and, where the
// network text says "N x R Gb/s per GPU", a NIC of R per GPU.
Result<topology::ClusterSpec> EpCluster(const Json& t, const std::string& preset,
                                        std::vector<std::string>* assumed) {
  PT_ASSIGN_OR_RETURN(topology::ClusterSpec c, CollectivePresetWithNodes(t, preset));
  const int gpn = c.gpus_per_node;
  static const std::regex kNicPerGpu(R"((\d+)\s*x\s*\S*\s*(\d+)\s*Gb/s per GPU)");
  const std::string net = Str(t, "inter_network");
  std::smatch m;
  if (std::regex_search(net, m, kNicPerGpu)) {
    c.nics_per_node = gpn * std::stoi(m[1].str());
    c.nic_GBps = std::stod(m[2].str()) / 8.0;
  } else if (!Contains(net, "MNNVL") && !Contains(net, "none")) {
    assumed->push_back("NICs not stated: the preset's " + std::to_string(c.nics_per_node) + " x " +
                       FormatFixed(c.nic_GBps * 8, 0) + " Gb/s per node");
  }
  c.name = preset + " (" + Str(t, "id") + ")";
  return c;
}

// Why a whole table is not asked ("" when it is).
std::string EpTableSkipReason(const Json& t, const std::string& preset) {
  const std::string id = Str(t, "id"), what = Str(t, "collective");
  if (Contains(id, "lowlatency") || Contains(what, "low-latency")) {
    return "DeepEP's low-latency kernels (inference decoding): Megatron-Core's flex dispatcher "
           "trains with the normal ones (fused_a2a.py @d98e8a64)";
  }
  if (Contains(id, "deepep-v2") || Contains(what, "V2")) {
    return "DeepEP V2's ElasticBuffer: Megatron-Core at d98e8a64 calls V1's Buffer "
           "(fused_a2a.py:20-60)";
  }
  if (preset.empty()) return "no cluster preset for GPU '" + Str(t, "gpu") + "'";
  return "";
}

MoeDispatcher RowDispatcher(const Json& r, MoeDispatcher table) {
  const std::string impl = Str(r, "impl");
  if (impl == "DeepEP") return MoeDispatcher::kDeepEp;
  if (impl == "HybridEP") return MoeDispatcher::kHybridEp;
  return table;
}

// Converts one table's rows (the table's fields already set), counting the
// rows left out by reason into `left_out`.
void ReadEpRows(const Json& t, EpKernelTable* table, std::map<std::string, int>* left_out) {
  const int domain = table->cluster.DomainGpus();
  // The SM counts printed per (kernel, ranks), for the nearest-to-default choice.
  std::map<std::pair<bool, int>, std::set<int>> sms;  // (HybridEP, ranks) → SM counts
  for (const Json& r : t["rows"]) {
    if (Str(r, "measurement") == "kernel_only") continue;
    const MoeDispatcher d = RowDispatcher(r, table->dispatcher);
    sms[{d == MoeDispatcher::kHybridEp, static_cast<int>(Num(r, "ep_ranks", 0))}].insert(
        static_cast<int>(Num(r, "num_sms", 0)));
  }
  for (const Json& r : t["rows"]) {
    EpKernelRow row;
    const MoeDispatcher d = RowDispatcher(r, table->dispatcher);
    if (d != table->dispatcher) continue;  // the other kernel's rows, asked as their own table
    row.ep_ranks = static_cast<int>(Num(r, "ep_ranks", 0));
    row.combine = Str(r, "phase") == "combine";
    row.fp8 = Str(r, "dtype") == "FP8";
    row.num_sms = static_cast<int>(Num(r, "num_sms", 0));
    row.measured_GBps = Num(r, "bandwidth_GBps", 0);
    const bool one_domain = row.ep_ranks <= domain;
    if (Str(r, "measurement") == "kernel_only") {
      ++(*left_out)
          ["kernel time alone: Megatron-Core calls the torch API, whose time the model prices"];
      continue;
    }
    if (d == MoeDispatcher::kDeepEp && one_domain && row.ep_ranks > kDeepEpMaxNvlRanks) {
      ++(*left_out)
          ["DeepEP over more than 8 NVLink ranks runs its internode kernels: the table does "
           "not say which bytes its bandwidth counts"];
      continue;
    }
    if (row.num_sms > 0) {
      const int want = DefaultSms(d, one_domain);
      int best = 1 << 30;
      for (int s : sms[{d == MoeDispatcher::kHybridEp, row.ep_ranks}]) {
        best = std::min(best, std::abs(s - want));
      }
      if (std::abs(row.num_sms - want) != best) {
        ++(*left_out)
            ["other SM counts than the nearest to what Megatron-Core runs (DeepEP 20, "
             "HybridEP 24 in one NVLink domain and 8 across)"];
        continue;
      }
    }
    if (!(row.measured_GBps > 0) || row.ep_ranks < 2) {
      ++(*left_out)["no bandwidth or fewer than 2 ranks"];
      continue;
    }
    // Which bytes the bandwidth counts: the RDMA rows (and HybridEP's "IB
    // bandwidth" across nodes) every node a token reaches, its own included
    // (test_internode.py:40-44, 167 @c18eabd; count_rdma_send_from_routing_map,
    // tests/utils.py:671-683 @94a9f8f); inside one domain the rows each rank
    // receives (recv_x.numel(), test_intranode.py:165; dispatched_hidden.numel(),
    // test_hybrid_ep.py:345).
    const std::string kind = Str(r, "bandwidth_kind");
    row.rdma = Contains(kind, "RDMA") || (!Contains(kind, "NVLink") && !one_domain);
    // A rank is a "node" of one GPU for the per-rank count.
    const int experts = table->ExpertsAt(row.ep_ranks);
    const double per_token =
        row.rdma ? ExpectedNodesPerToken(
                       experts, table->top_k, row.ep_ranks / table->cluster.gpus_per_node,
                       table->RouterGroupsAt(row.ep_ranks), table->RouterGroupTopkAt(row.ep_ranks))
                 : ExpectedNodesPerToken(experts, table->top_k, row.ep_ranks, 0, 0);
    row.bench_bytes = table->tokens * per_token * table->hidden * ElemBytes(row.fp8);
    row.measured_us = row.bench_bytes / (row.measured_GBps * 1e3);
    table->rows.push_back(row);
  }
}

}  // namespace

int EpKernelTable::RouterGroupsAt(int ep_ranks) const {
  const int nodes = ep_ranks / cluster.gpus_per_node;
  return node_groups && nodes > 1 ? nodes : 0;
}

int EpKernelTable::RouterGroupTopkAt(int ep_ranks) const {
  return RouterGroupsAt(ep_ranks) > 0 ? std::min(RouterGroupsAt(ep_ranks), 4) : 0;
}

Result<EpKernelTables> EpKernelTablesFromCalibration(const Json& doc) {
  if (!IsCollectiveTablesDocument(doc)) {
    return Status::InvalidArgument(
        "not a collective-tables document (shared/calibration/nccl_tables.json)");
  }
  EpKernelTables out;
  for (const Json& t : doc) {
    const bool kernels_table = Str(t, "kind") == "ep_kernel_benchmark" ||
                               Str(t, "collective").rfind("alltoall_ep", 0) == 0;
    if (!kernels_table) continue;
    const std::string id = Str(t, "id", "?");
    const int n_rows = static_cast<int>(t["rows"].size());
    const std::string preset = CollectivePresetOf(Str(t, "gpu"), Str(t, "gpu_detail"));
    if (std::string why = EpTableSkipReason(t, preset); !why.empty()) {
      out.skipped.push_back({id, n_rows, why});
      continue;
    }
    // One table per kernel its rows measure (HybridEP's B200 table compares both).
    const MoeDispatcher named =
        Contains(id, "hybridep") ? MoeDispatcher::kHybridEp : MoeDispatcher::kDeepEp;
    std::set<MoeDispatcher> kernels;
    for (const Json& r : t["rows"]) kernels.insert(RowDispatcher(r, named));
    std::map<std::string, int> left_out;
    for (const MoeDispatcher d : kernels) {
      EpKernelTable table;
      table.dispatcher = d;
      const std::string kernel = d == MoeDispatcher::kHybridEp ? "HybridEP" : "DeepEP";
      table.id = kernels.size() > 1 ? id + " (" + kernel + ")" : id;
      table.system = Str(t, "gpu") + " @ " + kernel;
      table.source = t.contains("source") ? Str(t["source"], "url") : "";
      if (!ParseWorkload(Str(t, "workload"), &table)) {
        out.skipped.push_back({id, n_rows, "workload names no tokens, hidden size or top-k"});
        break;
      }
      if (table.local_experts == 0) {
        table.experts = 256;
        table.assumed.push_back(
            "256 experts: DeepEP's tests' default (--num-experts, test_intranode.py:270, "
            "test_internode.py:270 @c18eabd)");
      }
      auto cluster = EpCluster(t, preset, &table.assumed);
      if (!cluster.ok()) return cluster.status().WithContext(id);
      table.cluster = std::move(*cluster);
      ReadEpRows(t, &table, &left_out);
      if (!table.rows.empty()) out.tables.push_back(std::move(table));
    }
    for (const auto& [why, rows] : left_out) out.skipped.push_back({id, rows, why});
  }
  return out;
}

EpKernelCheck CheckEpKernelRow(const EpKernelTable& table, const EpKernelRow& row) {
  // DeepSeek-V3's layer (read once) with the test's hidden size, experts and routing.
  static const Result<ModelSpec> kLayer = ModelPreset("deepseek-v3");
  EpKernelCheck check;
  check.predicted_us = check.error = std::nan("");
  if (!kLayer.ok()) return check;
  ModelSpec m = *kLayer;
  m.hidden = table.hidden;
  m.top_k = table.top_k;
  m.experts = table.ExpertsAt(row.ep_ranks);
  m.router_groups = table.RouterGroupsAt(row.ep_ranks);
  m.router_group_topk = table.RouterGroupTopkAt(row.ep_ranks);
  if (!ValidateModel(m, "/model").ok()) return check;
  // Megatron-Core's flex dispatcher: the framework whose NIC fractions price it.
  TrainingSpec training;
  training.framework = Framework::kMegatron;
  training.seq_len = table.tokens;
  training.global_batch = row.ep_ranks;
  const CostModel cost(m, training, table.cluster, row.ep_ranks);
  ParallelConfig c;
  c.gdata = row.ep_ranks;
  c.ep = row.ep_ranks;
  c.moe_dispatcher = table.dispatcher;
  check.predicted_us =
      cost.DispatchSeconds(c, table.dispatcher, table.tokens, ElemBytes(row.fp8)) * 1e6;
  check.error = row.measured_us > 0 ? check.predicted_us / row.measured_us - 1.0 : 0.0;
  return check;
}

}  // namespace paratune::planner
