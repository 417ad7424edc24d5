// The goodput model (planner/goodput.h; docs/model.md, "Time to train"):
// checkpoint bytes per rank and node from the plan's sharding and the
// framework's format, save and load times, Young's and Daly's intervals,
// Daly's expected wall time, and the run to a token budget.
#include "planner/goodput.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/enum_names.h"

namespace paratune::planner {
namespace {

constexpr const char* kFormatNames[] = {"megatron_dist_ckpt", "torch_dcp", "deepspeed",
                                        "axonn_torch_save"};

// Bytes per parameter of each state a checkpoint holds under mixed-precision
// Adam (the only optimizer the planner models): the model's weights as the
// framework keeps them, and the optimizer's (fp32 master copy where it is a
// separate tensor, and the two fp32 moments).
struct StateBytes {
  double weights = 0;
  double optimizer = 0;
};

StateBytes StateBytesOf(CheckpointFormat f, const ParallelConfig& c, const TrainingSpec& training) {
  const bool fp32 = topology::TrainsInFp32(training.precision);
  // fp8 recipes keep bf16 weights (Transformer Engine quantises at the GEMM).
  const double weight = fp32 ? 4 : 2;
  const double master = fp32 ? 0 : 4;  // fp32 training: the weights are the master copy
  switch (f) {
    case CheckpointFormat::kTorchDcp:
      // FSDP keeps the sharded parameters in fp32 and casts at the gather
      // (FrameworkSpec::sharded_params_are_master): they are the master copy.
      return {4, 8};
    case CheckpointFormat::kDeepSpeed:
      // ZeRO-3 writes no 16-bit weights: the fp32 partitions stand for them.
      return {c.zero >= 3 ? 0.0 : weight, master + 8};
    case CheckpointFormat::kMegatronDistCkpt:
    case CheckpointFormat::kAxonn:
      return {weight, master + 8};
  }
  return {weight, master + 8};
}

// The ranks over which each state is split. Ranks are laid out in Megatron's
// order (tensor innermost, then the data-parallel ranks, then the pipeline),
// so ranks r and r + tensor hold the same shard of a replicated state.
struct Split {
  int64_t world = 1;
  int64_t tensor = 1;  // tensor-parallel ranks (gx·gy), innermost
  int64_t z = 1;       // gz: FSDP's shard, AxoNN's third tensor dimension
  int64_t pp = 1;
  int64_t model = 1;             // tensor × pipeline: ranks that hold different weights
  int64_t replicas = 1;          // world / model: the data-parallel width (gz·gdata·cp)
  int64_t weight_shards = 1;     // of the replicas, those over which the weights are sharded
  int64_t optimizer_shards = 1;  // and the optimizer states
};

Split SplitOf(const ParallelConfig& c, int gpus) {
  Split s;
  s.world = gpus;
  s.tensor = c.tensor();
  s.z = c.gz;
  s.pp = c.pp;
  s.model = s.tensor * c.pp;
  s.replicas = std::max<int64_t>(1, s.world / s.model);
  const bool zero3 = c.zero >= 3;
  // FSDP shards both over gz (HSDP replicates over the rest); ZeRO >= 1 and
  // Megatron's distributed optimizer shard the optimizer over every replica.
  const bool sharded_optimizer = c.zero >= 1 || c.distributed_optimizer;
  s.weight_shards = zero3 ? s.replicas : c.gz;
  s.optimizer_shards = sharded_optimizer ? s.replicas : c.gz;
  return s;
}

// Bytes rank `r` writes under the format. Balanced formats spread every
// state over all ranks; under DeepSpeed the first data-parallel replica of
// each model-parallel group writes the 16-bit weights (and, without ZeRO, the
// optimizer states), every rank its optimizer partition under ZeRO; AxoNN's
// first data-parallel replica (its gx·gy·gz·pp ranks come first: data is its
// outermost dimension) writes everything.
double RankWriteBytes(CheckpointFormat f, const Split& s, const StateBytes& b, double params,
                      int64_t r) {
  const double total = params * (b.weights + b.optimizer);
  const bool first_replica = (r % (s.tensor * s.replicas)) / s.tensor == 0;
  switch (f) {
    case CheckpointFormat::kMegatronDistCkpt:
    case CheckpointFormat::kTorchDcp:
      return total / static_cast<double>(s.world);
    case CheckpointFormat::kDeepSpeed: {
      const double optimizer =
          params * b.optimizer / static_cast<double>(s.model * s.optimizer_shards);
      const double weights = params * b.weights / static_cast<double>(s.model);
      return (s.optimizer_shards > 1 || first_replica ? optimizer : 0.0) +
             (first_replica ? weights : 0.0);
    }
    case CheckpointFormat::kAxonn: {
      const int64_t writers = s.tensor * s.z * s.pp;
      return r < writers ? total / static_cast<double>(writers) : 0.0;
    }
  }
  return 0;
}

}  // namespace

const char* CheckpointFormatName(CheckpointFormat f) { return EnumName(f, kFormatNames); }

CheckpointFormat CheckpointFormatOf(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return CheckpointFormat::kMegatronDistCkpt;
    case Framework::kMegatronDeepSpeed:
    case Framework::kDeepSpeed:
      return CheckpointFormat::kDeepSpeed;
    case Framework::kFsdp:
    case Framework::kTorchtitan:
      return CheckpointFormat::kTorchDcp;
    case Framework::kAxonn:
      return CheckpointFormat::kAxonn;
  }
  return CheckpointFormat::kMegatronDistCkpt;
}

bool OffersAsyncSave(Framework f, const ParallelConfig& c) {
  switch (f) {
    case Framework::kMegatron:
    case Framework::kTorchtitan:
    case Framework::kDeepSpeed:
      return true;
    case Framework::kMegatronDeepSpeed:
      return c.pp == 1;
    case Framework::kFsdp:
    case Framework::kAxonn:
      return false;
  }
  return false;
}

bool AsyncSaveOverlapsOneStep(Framework f) {
  return f == Framework::kDeepSpeed || f == Framework::kMegatronDeepSpeed;
}

CheckpointEstimate EstimateCheckpoint(const Job& job, Framework fw, const ParallelConfig& c,
                                      const GoodputOptions& options) {
  CheckpointEstimate e;
  e.format = CheckpointFormatOf(fw);
  e.params = static_cast<double>(job.model.ParamCount());
  const StateBytes b = StateBytesOf(e.format, c, job.training);
  e.bytes_per_param = b.weights + b.optimizer;
  e.total_bytes = e.params * e.bytes_per_param;
  e.weights_bytes = e.params * b.weights;
  const Split s = SplitOf(c, job.gpus);
  const int64_t gpn = std::max(1, job.cluster.gpus_per_node);
  // The heaviest rank and node: one pass over the ranks (called per ranked
  // row, never in the search loop).
  double node_bytes = 0;
  for (int64_t r = 0; r < s.world; ++r) {
    const double w = RankWriteBytes(e.format, s, b, e.params, r);
    e.max_rank_bytes = std::max(e.max_rank_bytes, w);
    node_bytes += w;
    if ((r + 1) % gpn == 0 || r + 1 == s.world) {
      e.max_node_bytes = std::max(e.max_node_bytes, node_bytes);
      node_bytes = 0;
    }
  }
  // On restart every rank reads the states it holds, replicas included.
  e.held_rank_bytes = e.params * (b.weights / static_cast<double>(s.model * s.weight_shards) +
                                  b.optimizer / static_cast<double>(s.model * s.optimizer_shards));
  const double fs = options.fs_GBps * 1e9;
  const double node_bw =
      (options.fs_node_GBps > 0 ? options.fs_node_GBps : job.cluster.NodeInjectionGBps()) * 1e9;
  auto transfer = [&](double total, double per_node) {
    const double all = total / fs;
    const double node = node_bw > 0 ? per_node / node_bw : std::numeric_limits<double>::infinity();
    return std::pair<double, bool>(std::max(all, node), node > all);
  };
  const auto [write_s, node_bound] = transfer(e.total_bytes, e.max_node_bytes);
  e.write_s = write_s;
  e.write_node_bound = node_bound;
  const double ranks_per_node = static_cast<double>(std::min<int64_t>(gpn, s.world));
  e.load_s =
      transfer(e.held_rank_bytes * static_cast<double>(s.world), e.held_rank_bytes * ranks_per_node)
          .first;
  e.async = options.save == CheckpointSave::kAuto && OffersAsyncSave(fw, c);
  e.async_one_step = e.async && AsyncSaveOverlapsOneStep(fw);
  if (e.async && !e.async_one_step) {
    // The step waits for the copy of the rank's shard to (pinned) host
    // memory; every GPU of the node copies at once, each at the host-link
    // bandwidth the cluster states per GPU under that load.
    const double host = job.cluster.HostLinkGBps() * 1e9;
    e.blocking_s = host > 0 ? e.max_rank_bytes / host : e.write_s;
  } else {
    // Synchronous; or DeepSpeed's decoupled write, whose stall GoodputOf
    // sets from the step it overlaps (write_s is the bound without a step).
    e.blocking_s = e.write_s;
  }
  return e;
}

double YoungInterval(double delta_s, double mtbf_s) { return std::sqrt(2 * delta_s * mtbf_s); }

double DalyInterval(double delta_s, double mtbf_s) {
  if (delta_s >= 2 * mtbf_s) return mtbf_s;
  const double x = delta_s / (2 * mtbf_s);
  return std::sqrt(2 * delta_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - delta_s;
}

double ExpectedReworkS(double interval_s, double mtbf_s) {
  return mtbf_s - interval_s / std::expm1(interval_s / mtbf_s);
}

double EffectiveFraction(double interval_s, double delta_s, double restart_s, double mtbf_s) {
  // Daly's Eq. 20 per unit of solve time: M·e^{R/M}·(e^{(τ+δ)/M} − 1) / τ.
  const double wall_per_solve = mtbf_s * std::exp(restart_s / mtbf_s) *
                                std::expm1((interval_s + delta_s) / mtbf_s) / interval_s;
  return 1 / wall_per_solve;
}

Goodput GoodputOf(const Job& job, Framework fw, const ParallelConfig& c, const Prediction& p,
                  const GoodputOptions& options) {
  Goodput g;
  g.checkpoint = EstimateCheckpoint(job, fw, c, options);
  const CheckpointEstimate& ck = g.checkpoint;
  const double rate_per_s = options.failures_per_gpu_hour * job.gpus / 3600;
  g.job_mtbf_s = rate_per_s > 0 ? 1 / rate_per_s : std::numeric_limits<double>::infinity();
  // After a failure the newest durable checkpoint is read back; an
  // asynchronous save that was still writing is not durable, so on average
  // the work lost grows by one write (docs/model.md).
  g.restart_s = options.restart_s + ck.load_s + (ck.async ? ck.write_s : 0.0);
  g.steps =
      options.tokens / (static_cast<double>(job.training.global_batch) * job.training.seq_len);
  // The stall of one save at a step of step_s: a write that overlaps one
  // step only stalls the next for what that step does not hide.
  auto blocking = [&](double step_s) {
    return ck.async_one_step ? std::max(0.0, ck.write_s - step_s) : ck.blocking_s;
  };
  auto wall = [&](double step_s, double* fraction, double* interval, const char** bound) {
    const double compute = g.steps * step_s;
    if (!std::isfinite(g.job_mtbf_s)) {
      *fraction = 1;
      *interval = compute;
      return compute;
    }
    const double delta = blocking(step_s);
    // Daly's optimum, then the floors: one step, the shortest interval
    // asked, and for an async save its write (a save cannot start before
    // the previous one has finished writing).
    *interval = DalyInterval(delta, g.job_mtbf_s);
    *bound = "daly";
    const std::pair<double, const char*> floors[] = {
        {step_s, "step"}, {options.min_interval_s, "min_interval"}, {ck.async ? ck.write_s : 0.0, "write"}};
    for (const auto& [floor, name] : floors) {
      if (floor > *interval) *interval = floor, *bound = name;
    }
    *fraction = EffectiveFraction(*interval, delta, g.restart_s, g.job_mtbf_s);
    return compute / *fraction;
  };
  g.checkpoint.blocking_s = blocking(p.iteration_time_s);
  g.interval_young_s = std::isfinite(g.job_mtbf_s) ? YoungInterval(ck.blocking_s, g.job_mtbf_s)
                                                   : std::numeric_limits<double>::infinity();
  g.compute_s = g.steps * p.iteration_time_s;
  g.time_to_train_s =
      wall(p.iteration_time_s, &g.effective_fraction, &g.interval_s, &g.interval_bound);
  double pess_fraction = 0, pess_interval = 0;
  const char* pess_bound = nullptr;
  g.pessimistic_time_to_train_s =
      wall(p.pessimistic_time_s, &pess_fraction, &pess_interval, &pess_bound);
  g.interval_steps = std::max(1.0, std::round(g.interval_s / p.iteration_time_s));
  g.gpu_hours = g.time_to_train_s * job.gpus / 3600;
  g.cost = g.gpu_hours * options.gpu_hour_price;
  return g;
}

}  // namespace paratune::planner
