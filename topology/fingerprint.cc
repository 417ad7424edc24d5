// The cluster fingerprint: a hash of the cluster's canonical text (every field
// that changes a prediction, numbers printed the same way on every machine),
// so profiles and plans name the cluster they belong to.
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/strings.h"
#include "topology/cluster.h"

namespace paratune::topology {
namespace {

void AppendNumber(std::string* out, double v) {
  if (v == 0) v = 0;  // folds -0 into 0
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out->append(buf);
}

void AppendField(std::string* out, const char* key, double v) {
  out->append(key);
  out->push_back('=');
  AppendNumber(out, v);
  out->push_back(';');
}

void AppendField(std::string* out, const char* key, const std::string& v) {
  out->append(key);
  out->push_back('=');
  out->append(std::to_string(v.size()));  // length prefix: no delimiter ambiguity
  out->push_back(':');
  out->append(v);
  out->push_back(';');
}

// An efficiency curve as "size:efficiency," per point, closed by ';'.
void AppendCurve(std::string* out, const std::vector<EfficiencyPoint>& curve) {
  for (const EfficiencyPoint& pt : curve) {
    AppendNumber(out, pt.size);
    out->push_back(':');
    AppendNumber(out, pt.efficiency);
    out->push_back(',');
  }
  out->push_back(';');
}

// The canonical text of the prediction-relevant fields: fixed order, fixed
// number format, effective values (fallbacks resolved) so that two specs that
// predict alike hash alike.
std::string CanonicalText(const ClusterSpec& c) {
  std::string s = "paratune.cluster.fingerprint/v1;";
  const GpuSpec& g = c.gpu;
  AppendField(&s, "memory_GiB", g.memory_GiB);
  AppendField(&s, "hbm_GBps", g.hbm_GBps);
  AppendField(&s, "hbm_efficiency", g.hbm_efficiency);
  for (int i = 0; i < kNumPrecisions; ++i) {
    const Precision p = static_cast<Precision>(i);
    s += "peak_tflops.";
    AppendField(&s, PrecisionName(p), g.PeakTflops(p));
    s += "gemm.";
    s += PrecisionName(p);
    s += '=';
    AppendCurve(&s, g.EffectiveGemmCurve(p));
  }
  // Only when stated, so GPUs without it keep their fingerprints.
  if (g.gemm_sustained_fraction != 1.0)
    AppendField(&s, "gemm_sustained_fraction", g.gemm_sustained_fraction);
  // Only when stated, so GPUs without them keep their fingerprints.
  for (const GemmCeiling& cell : g.gemm_ceilings) {
    AppendField(&s, (std::string("gemm_ceiling.") + PrecisionName(cell.precision)).c_str(),
                cell.fraction);
  }
  // Only when stated, so GPUs without them keep their fingerprints.
  for (int i = 0; i < kNumRecipes; ++i) {
    if (g.recipe_gemm_factor[i] != 1.0) {
      AppendField(&s,
                  (std::string("recipe_gemm_factor.") + RecipeName(static_cast<Recipe>(i))).c_str(),
                  g.recipe_gemm_factor[i]);
    }
  }
  // Only when present, so GPUs without fp4 keep their fingerprints.
  if (g.fp4_peak_tflops > 0) {
    AppendField(&s, "fp4_peak_tflops", g.fp4_peak_tflops);
    s += "fp4_gemm=";
    AppendCurve(&s, g.fp4_gemm_efficiency);
  }
  AppendField(&s, "flash_fwd_efficiency", g.flash_fwd_efficiency);
  AppendField(&s, "flash_bwd_efficiency", g.flash_bwd_efficiency);
  AppendField(&s, "host_link_GBps", g.host_link_GBps);
  AppendField(&s, "runtime_reserved_GiB", g.runtime_reserved_GiB);

  AppendField(&s, "gpus_per_node", c.gpus_per_node);
  AppendField(&s, "max_nodes", c.max_nodes);
  // Only when it spans nodes, so single-node domains keep their fingerprints.
  if (c.DomainGpus() > c.gpus_per_node) AppendField(&s, "nvlink_domain_gpus", c.DomainGpus());
  AppendField(&s, "intra_node_fabric", c.intra_node_fabric);
  AppendField(&s, "intra_node_GBps", c.intra_node_GBps);
  s += "link_GBps=";
  for (const auto& row : c.link_GBps) {
    for (double v : row) {
      AppendNumber(&s, v);
      s += ',';
    }
    s += '/';
  }
  s += ';';
  AppendField(&s, "link_efficiency", c.link_efficiency);
  std::vector<std::tuple<int, int, double>> table;
  for (const IntraNodeEntry& e : c.intra_node_table) {
    table.emplace_back(e.stride, e.group_size, e.busbw_GBps);
  }
  std::sort(table.begin(), table.end());
  s += "intra_node_table=";
  for (const auto& [stride, size, bw] : table) {
    s += std::to_string(stride) + "x" + std::to_string(size) + ":";
    AppendNumber(&s, bw);
    s += ',';
  }
  s += ';';
  AppendField(&s, "intra_alpha_us", c.intra_alpha_us);
  AppendField(&s, "nics_per_node", c.nics_per_node);
  AppendField(&s, "nic_GBps", c.nic_GBps);
  AppendField(&s, "nic_efficiency", c.nic_efficiency);
  AppendField(&s, "inter_alpha_us", c.inter_alpha_us);
  AppendField(&s, "alltoall_efficiency", c.alltoall_efficiency);
  // Only when stated, so the other clusters keep their fingerprints.
  if (c.allreduce_nic_efficiency > 0) AppendField(&s, "allreduce_nic_efficiency", c.allreduce_nic_efficiency);
  if (c.nvls_GBps > 0) AppendField(&s, "nvls_GBps", c.nvls_GBps);
  if (c.collective_model != "nccl") AppendField(&s, "collective_model", c.collective_model);
  AppendField(&s, "network", c.network);
  // Only when not the defaults, so the other clusters keep their fingerprints.
  if (c.net_transport != NetTransports().front().name) AppendField(&s, "net_transport", c.net_transport);
  if (c.net_latency_us >= 0) AppendField(&s, "net_latency_us", c.net_latency_us);
  // Host fields only when stated, so clusters without them keep their
  // fingerprints from before the fields existed.
  if (c.host_memory_GiB > 0) AppendField(&s, "host_memory_GiB", c.host_memory_GiB);
  if (c.host_memory_GBps > 0) AppendField(&s, "host_memory_GBps", c.host_memory_GBps);
  if (c.host_link_GBps > 0) AppendField(&s, "host_link_GBps", c.host_link_GBps);
  std::vector<std::tuple<int, int, int, double, double>> fits;
  for (const CollectiveFit& f : c.fits) {
    fits.emplace_back(static_cast<int>(f.collective), static_cast<int>(f.tier), f.group_size,
                      f.alpha_us, f.busbw_GBps);
  }
  std::sort(fits.begin(), fits.end());
  s += "fits=";
  for (const auto& [coll, tier, size, alpha, bw] : fits) {
    s += std::to_string(coll) + "/" + std::to_string(tier) + "/" + std::to_string(size) + ":";
    AppendNumber(&s, alpha);
    s += ':';
    AppendNumber(&s, bw);
    s += ',';
  }
  s += ';';
  return s;
}

}  // namespace

std::string Fingerprint(const ClusterSpec& c) { return Fnv1a64Hex(CanonicalText(c)); }

}  // namespace paratune::topology
