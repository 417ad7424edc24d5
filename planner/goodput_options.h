// planner/goodput_options.h: what a plan needs to know, beyond one step, to
// price a whole training run: the token budget, the filesystem checkpoints are
// written to, how often the hardware fails, what a restart costs and what a
// GPU-hour costs. Plain values; the model that uses them is planner/goodput.h
// (docs/model.md, "Time to train"). Kept apart from goodput.h so that the
// search options can carry them without including the model.
#pragma once

#include <cstdint>

namespace paratune::planner {

// Llama 3 405B pre-training: 419 unexpected interruptions in a 54-day
// snapshot on 16,384 H100 GPUs (Dubey et al., "The Llama 3 Herd of Models",
// arXiv 2407.21783, §3.3.4 and Table 5): 419 / (16,384 × 54 × 24) GPU-hours.
// The default failure rate: the largest published fleet record with counts.
inline constexpr double kLlama3UnexpectedInterruptions = 419;
inline constexpr double kLlama3Gpus = 16384;
inline constexpr double kLlama3Days = 54;
inline constexpr double kDefaultFailuresPerGpuHour =
    kLlama3UnexpectedInterruptions / (kLlama3Gpus * kLlama3Days * 24);

// Aggregate parallel-filesystem bandwidth a job gets for its checkpoints by
// default, GB/s: a tenth of Perlmutter scratch's ">5 TB/s aggregate" (NERSC
// docs, docs.nersc.gov/filesystems/perlmutter-scratch), since one job rarely
// has the whole filesystem; the figure `replan` reads checkpoints at. An
// assumption: --fs-GBps sets the real one.
inline constexpr double kDefaultCheckpointFsGBps = 500;

// Seconds from a failure to the first new step, before the checkpoint is
// read: detecting the fault, draining and relaunching the job on healthy
// nodes, NCCL initialisation and the first steps' warm-up. 10 minutes is
// MegaScale's figure on more than 10,000 GPUs: "The average time required for
// detecting failure and executing diagnostic tests is less than 10 minutes"
// (Jiang et al., NSDI'24, arXiv 2402.15627 §6.3), with its initialisation cut
// to under 30 s there (§3.5). A stack without those optimisations starts
// slower (Megatron-LM took 1,047 s to initialise on 2,048 GPUs, §3.5), so the
// figure is stated wherever it is used; --restart-min sets the real one.
inline constexpr double kDefaultRestartS = 600;

// The shortest interval between checkpoints by default, seconds. An
// asynchronous save stalls the step for little more than a copy to host
// memory, so Daly's optimum would save it as often as the write allows (a
// 1 TB checkpoint every few steps). What that costs is not in the model: the
// filesystem shared with other jobs kept busy, the writer's CPU, host memory
// and network, the files to retain and delete. Llama 3's storage took
// checkpoints as bursts that "saturate the storage fabric for short
// durations" (arXiv 2407.21783 §3.3.1), not as a continuous write. No source
// states an interval, so 10 minutes is an assumption, stated wherever it
// binds; --checkpoint-min-interval-min sets it (0: none beyond the write).
inline constexpr double kDefaultMinCheckpointIntervalS = 600;

// Seconds from a node's failure to its return (diagnosis, replacement or
// repair, re-admission) by default, for pricing spares against waiting or
// continuing on fewer GPUs (elastic/failure_policy.h). The only published
// statement we found is OPT-175B's logbook: "Replacement through the cloud
// interface can take hours for a single machine" (facebookresearch/metaseq,
// projects/OPT/chronicles/27_percent_update.md). 4 hours is an assumption,
// stated wherever it is used; --repair-h sets the real one.
inline constexpr double kDefaultRepairS = 4 * 3600.0;

// How checkpoints are saved: kAuto = asynchronously where the framework
// offers it (the step pays only the copy to host memory), else synchronously;
// kSync = always synchronously (the step waits for the filesystem).
enum class CheckpointSave : uint8_t { kAuto = 0, kSync };

struct GoodputOptions {
  double tokens = 0;                          // token budget to train; 0 = not asked (no goodput)
  double fs_GBps = kDefaultCheckpointFsGBps;  // aggregate filesystem write/read bandwidth, GB/s
  // Per-node filesystem bandwidth, GB/s; 0 = the node's network injection
  // bandwidth (ClusterSpec::NodeInjectionGBps), the most a node can push.
  double fs_node_GBps = 0;
  double failures_per_gpu_hour = kDefaultFailuresPerGpuHour;  // job-stopping failures
  double restart_s = kDefaultRestartS;  // relaunch + warm-up, seconds (load is added)
  CheckpointSave save = CheckpointSave::kAuto;
  double min_interval_s = kDefaultMinCheckpointIntervalS;  // shortest interval between saves
  double repair_s = kDefaultRepairS;  // a failed node's time to return (failure policies)
  double gpu_hour_price = 0;  // currency per GPU-hour; 0 = no cost shown

  bool enabled() const { return tokens > 0; }
};

}  // namespace paratune::planner
