// validation/ep_kernel_tables.h: the expert-parallel kernels' own benchmarks
// in shared/calibration/nccl_tables.json (DeepEP's normal kernels, HybridEP:
// tables of kind ep_kernel_benchmark) as questions to the MoE dispatch term
// (CostModel::DispatchSeconds): each row's dispatch or combine on the table's
// system, predicted vs measured time (`paratune validate --collectives`,
// docs/model.md "Expert-parallel kernels").
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/config.h"
#include "topology/cluster.h"
#include "validation/collective_tables.h"

namespace paratune::planner {

struct EpKernelRow {
  int ep_ranks = 0;
  bool combine = false;  // the combine (else the dispatch)
  bool fp8 = false;      // FP8 rows with their per-128 fp32 scales (else BF16)
  int num_sms = 0;       // 0: the table does not say
  bool rdma = false;     // the bandwidth counts the bytes sent over RDMA (else over NVLink)
  double measured_GBps = 0;
  // The bytes the benchmark divides by its time (rdma: every node a token
  // reaches, its own included; NVLink: the rows each rank receives), and the
  // time they imply.
  double bench_bytes = 0;
  double measured_us = 0;
};

struct EpKernelTable {
  std::string id;
  std::string system;  // "<GPU> @ <kernel>", e.g. "H100 @ HybridEP"
  std::string source;  // URL of the README table
  MoeDispatcher dispatcher = MoeDispatcher::kDeepEp;
  topology::ClusterSpec cluster;  // the GPU's preset with the table's node and NIC facts
  int tokens = 0, hidden = 0, top_k = 0;
  int experts = 0;           // routed experts, when fixed (DeepEP's tests: 256)
  int local_experts = 0;     // else experts per rank (HybridEP's tests: 8)
  bool node_groups = false;  // one router group per node, top min(nodes, 4) (test_internode.py)
  std::vector<EpKernelRow> rows;
  std::vector<std::string> assumed;

  int ExpertsAt(int ep_ranks) const { return experts > 0 ? experts : local_experts * ep_ranks; }
  // The router groups (and the top groups per token) of the test at `ep_ranks`:
  // with node_groups one per node and the top min(nodes, 4) across nodes
  // (test_internode.py:276-278 @c18eabd); none otherwise.
  int RouterGroupsAt(int ep_ranks) const;
  int RouterGroupTopkAt(int ep_ranks) const;
};

struct EpKernelTables {
  std::vector<EpKernelTable> tables;
  std::vector<SkippedCollectives> skipped;  // tables and rows not asked, with the reason
};

// The ep_kernel_benchmark tables of nccl_tables.json (IsCollectiveTablesDocument).
// Asked: DeepEP's normal kernels and HybridEP, through the torch API (the
// calls Megatron-Core makes), at the SM count Megatron-Core runs them with
// (the nearest printed; both on a tie). Not asked, with the reason:
// low-latency kernels (inference decoding; training dispatches with the
// normal ones), DeepEP V2 (Megatron-Core calls V1's Buffer), kernel-only
// timings, other SM counts, DeepEP over more NVLink ranks than its intranode
// kernels take, GPUs without a preset.
Result<EpKernelTables> EpKernelTablesFromCalibration(const Json& doc);

struct EpKernelCheck {
  double predicted_us = 0;
  double error = 0;  // predicted / measured − 1
};
EpKernelCheck CheckEpKernelRow(const EpKernelTable& table, const EpKernelRow& row);

}  // namespace paratune::planner
