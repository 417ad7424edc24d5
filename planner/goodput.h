// planner/goodput.h: the time to train a token budget, not one step
// (docs/model.md, "Time to train"). A plan's checkpoint as its framework
// writes it (bytes per rank from the plan's sharding, in the framework's
// format), the time to save it and to read it back, the job's failure rate,
// the optimal checkpoint interval (Young 1974; Daly 2006) and the expected
// fraction of wall time that trains, hence the wall time, GPU-hours and cost
// to a token budget. Pure: deterministic functions of their inputs, no I/O.
// Failures are a Poisson process (exponential times between them), the
// assumption of Young's and Daly's derivations.
#pragma once

#include <cstdint>
#include <string>

#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/framework.h"
#include "planner/goodput_options.h"
#include "planner/request.h"

namespace paratune::planner {

// The on-disk layout each framework writes (docs/model.md, "Time to train",
// has the sources with file and line):
// kMegatronDistCkpt: Megatron-Core dist_checkpointing, format torch_dist (the
//   default): the model's 16-bit weights and the distributed optimizer's
//   fp32_param, exp_avg and exp_avg_sq; replicated shards are split over the
//   data-parallel ranks (fully parallel save, on by default), so every rank
//   writes about the same. On load each rank reads what it holds (fully
//   parallel load is off by default).
// kTorchDcp: torch.distributed.checkpoint (torchtitan, FSDP trainers): the
//   fp32 sharded parameters (the optimizer's master copy) and Adam moments;
//   an item held by several ranks is written by the one with the least
//   planned storage (dedup_save_plans), balancing the write.
// kDeepSpeed: DeepSpeed's engine: `mp_rank_XX_model_states.pt` (16-bit
//   weights, written by data-parallel rank 0 of each model-parallel group)
//   and `zero_pp_rank_N_mp_rank_XX_optim_states.pt` (each rank's fp32
//   partition and Adam moments under ZeRO); under ZeRO-3 the 16-bit weights
//   are partitioned placeholders, so the fp32 partitions are the weights.
// kAxonn: torch.save of each rank's shard by the first data-parallel
//   replica: an assumption, AxoNN documents no checkpoint layout.
enum class CheckpointFormat : uint8_t { kMegatronDistCkpt = 0, kTorchDcp, kDeepSpeed, kAxonn };
// "megatron_dist_ckpt" | "torch_dcp" | "deepspeed" | "axonn_torch_save"
const char* CheckpointFormatName(CheckpointFormat f);
CheckpointFormat CheckpointFormatOf(Framework f);
// Whether the framework can save configuration `c` asynchronously (the step
// pays only the hand-off of its state; a background process writes it). Each
// is opt-in, their defaults save synchronously, and `emit` turns it on for a
// plan priced with it (docs/frameworks.md, "Checkpoints"):
// - Megatron-Core: --async-save with --use-persistent-ckpt-worker (without the
//   worker validate_args turns async off with a warning: arguments.py:1814-1820
//   @ d98e8a6), format torch_dist (checkpointing.py:763-776).
// - torchtitan: checkpoint.async_mode "async_with_pinned_mem" (dcp.py:137,
//   322-330 @ b5bcd76); each save waits for the previous one (dcp.py:427).
// - DeepSpeed's decoupled writer (checkpoint.writer.decoupled,
//   model_checkpointing/constants.py:84-85 @ edaa722): the save is committed,
//   and the step waits for the write, at the next DeepSpeedEngine.step()
//   (engine.py:3452-3453, decoupled_checkpoint_engine.py:168-181), so it
//   overlaps one step at most. The pipeline engine never calls step()
//   (pipe/engine.py:1244-1252): under Megatron-DeepSpeed's PipelineModule
//   (pp > 1; at pp 1 paratune emits --no-pipeline-parallel) a decoupled save
//   would not be committed until the job ends, so those plans save
//   synchronously.
// Not the FSDP1 trainers or AxoNN (no asynchronous saver found).
bool OffersAsyncSave(Framework f, const ParallelConfig& c);
// Whether an asynchronous save of framework `f` overlaps at most the step
// after it (DeepSpeed's decoupled writer, above) rather than running beside
// training until the next save.
bool AsyncSaveOverlapsOneStep(Framework f);

// One checkpoint of one plan. Bytes are decimal (GB = 1e9, as the bandwidths).
struct CheckpointEstimate {
  CheckpointFormat format = CheckpointFormat::kMegatronDistCkpt;
  double params = 0;           // parameters saved (the model's count)
  double bytes_per_param = 0;  // total_bytes / params
  double total_bytes = 0;      // all ranks' files, each state written once
  // Of total_bytes, the model's weights as written: 16-bit, fp32 where they
  // are the master copy (torch DCP, fp32 training), 0 under DeepSpeed ZeRO-3.
  double weights_bytes = 0;
  double max_rank_bytes = 0;      // the rank that writes the most
  double max_node_bytes = 0;      // the node whose ranks write the most
  double held_rank_bytes = 0;     // what the rank holding the most reads back on restart
  double write_s = 0;             // to the filesystem: max(total / fs, node / node bandwidth)
  bool write_node_bound = false;  // the node's bandwidth, not the filesystem's, sets write_s
  bool async = false;             // saved asynchronously (GoodputOptions::save, OffersAsyncSave)
  bool async_one_step = false;    // the async write overlaps one step only (AsyncSaveOverlapsOneStep)
  // Seconds the training step stops for one save: write_s when synchronous;
  // when asynchronous, the copy of max_rank_bytes to host memory at the GPU's
  // host-link bandwidth (the write then runs beside training), or, when the
  // write overlaps one step only, what of it that step does not hide
  // (GoodputOf sets it from the step time: write_s − step, at least 0).
  double blocking_s = 0;
  double load_s = 0;  // every rank reading its state back on restart
};

// REQUIRES: job validated, c a configuration of `fw` for job.gpus ranks,
// options.fs_GBps > 0.
CheckpointEstimate EstimateCheckpoint(const Job& job, Framework fw, const ParallelConfig& c,
                                      const GoodputOptions& options);

// Young's first-order optimum checkpoint interval, seconds of computation
// between saves: sqrt(2·δ·M) for a save costing δ seconds and a mean time
// between failures M (J. W. Young, "A first order approximation to the
// optimum checkpoint interval", CACM 17(9), 1974). REQUIRES: δ, M > 0.
double YoungInterval(double delta_s, double mtbf_s);
// Daly's higher-order optimum (J. T. Daly, "A higher order estimate of the
// optimum checkpoint interval for restart dumps", FGCS 22(3), 2006, Eq. 37):
// sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ for δ < 2M, else M.
double DalyInterval(double delta_s, double mtbf_s);
// The fraction of wall time that trains: solve time over Daly's expected wall
// time (Daly 2006, Eq. 20: T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ) with
// interval τ, save cost δ, restart cost R (everything between a failure and
// the resumed computation) and mean time between failures M. In (0, 1].
double EffectiveFraction(double interval_s, double delta_s, double restart_s, double mtbf_s);

// The expected work lost to a failure: the computation since the last save,
// M − τ/(e^{τ/M} − 1) for failures at exponential times of mean M within an
// interval τ (the Poisson assumption of Young's and Daly's derivations); τ/2
// when τ ≪ M. REQUIRES: τ, M > 0.
double ExpectedReworkS(double interval_s, double mtbf_s);

// A plan's run to the token budget.
struct Goodput {
  CheckpointEstimate checkpoint;
  double job_mtbf_s = 0;  // 1 / (failures per GPU-hour × GPUs), seconds
  // Seconds from a failure to resumed training: options.restart_s + the load,
  // plus, when saving asynchronously, the write still under way (the newest
  // durable checkpoint is one write behind the newest started).
  double restart_s = 0;
  double interval_young_s = 0;    // YoungInterval
  // DalyInterval, at least one step, options.min_interval_s and, when saving
  // asynchronously, the write (a save waits for the previous one).
  double interval_s = 0;
  // What set interval_s: "daly", "step", "min_interval" or "write".
  const char* interval_bound = "daly";
  double interval_steps = 0;      // interval_s in whole steps (at least 1)
  double effective_fraction = 0;  // EffectiveFraction at interval_s
  double steps = 0;               // tokens / (global batch × sequence)
  double compute_s = 0;           // steps × step time: the run with no failure and no save
  double time_to_train_s = 0;     // expected wall time: compute_s / effective_fraction
  // The same from the pessimistic step time (Prediction::pessimistic_time_s):
  // what RankForTrust ranks time to train by.
  double pessimistic_time_to_train_s = 0;
  double gpu_hours = 0;  // time_to_train_s × GPUs / 3600
  double cost = 0;       // gpu_hours × options.gpu_hour_price (0 without a price)
};

// REQUIRES: options.enabled(), prediction of c under job and fw (fits).
Goodput GoodputOf(const Job& job, Framework fw, const ParallelConfig& c, const Prediction& p,
                  const GoodputOptions& options);

}  // namespace paratune::planner
