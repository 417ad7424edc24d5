// Host-memory offload terms of the cost model (docs/model.md "Host memory and
// offload"): ZeRO-Infinity's per-layer parameter fetches and ZeRO-Offload's
// CPU Adam step with its gradient and parameter copies.
#include <algorithm>

#include "planner/cost/internal.h"
#include "planner/memory.h"

namespace paratune::planner {

using cost::HiddenByCopyEngine;

double CostModel::OffloadLayerSeconds(const ParallelConfig& c, const LayerTimes& lt,
                                      double layer_bytes, int nd) const {
  if (!c.offload_param || c.zero != 3) return 0.0;
  // This rank's partition of the layer comes from host memory before each
  // all-gather: forward, backward and again for a full recompute. DeepSpeed
  // prefetches it with the gathers (stage3_prefetch_bucket_size) when
  // overlap_param_gather is on, as far as the framework's shard overlap goes.
  const double n_fetch = c.recompute == Recompute::kFull ? 3.0 : 2.0;
  const double fetch = n_fetch * (layer_bytes / std::max(1, nd)) / (cluster_.HostLinkGBps() * 1e9);
  const double eta = c.overlap_param_gather ? fw_.costs.shard_overlap : 0.0;
  return HiddenByCopyEngine(fetch, lt.fwd_compute + lt.bwd_compute + lt.recompute, eta);
}

CostModel::OffloadStep CostModel::OffloadStepSeconds(const ParallelConfig& c, double psi, int nd,
                                                     int64_t n_mb, double bwd_window_s) const {
  OffloadStep o;
  const double partition = psi / std::max(1, nd);
  // Every rank of the node updates its partition at once, sharing the DRAM.
  o.cpu_adam_s = CpuAdamSeconds(partition * RanksPerNode(), cluster_.host_memory_GBps);
  const double link = cluster_.HostLinkGBps() * 1e9;
  // Gradients: the reduced partition goes to the host in the parameter dtype
  // as its buckets fill, every micro-batch under ZeRO-2/3 (accumulated on the
  // host), once after the last backward under ZeRO-1; hidden behind that
  // backward as far as overlap_comm hides the reduction.
  const double rounds = c.zero >= 2 ? static_cast<double>(n_mb) : 1.0;
  const double grads = rounds * partition * param_bytes_ / link;
  const double eta = c.overlap_grad_reduce ? fw_.costs.grad_reduce_overlap : 0.0;
  o.copies_s = HiddenByCopyEngine(grads, rounds * bwd_window_s, eta);
  // The updated 16-bit partition goes back to the GPU after the CPU step
  // (ZeRO-Offload §4.1: nothing overlaps it without the delayed update);
  // under offload_param it stays on the host and is fetched per layer.
  if (!c.offload_param) o.copies_s += partition * param_bytes_ / link;
  return o;
}

}  // namespace paratune::planner
