// The running job the elastic tests replan: Llama 2 7B on 8 DGX A100 nodes
// (64 GPUs), seq 4096, batch 256, running tp 2 · pp 2 · dp 16 with the
// distributed optimizer.
#pragma once

#include "planner/config.h"
#include "planner/request.h"
#include "topology/cluster.h"

namespace paratune::planner::elastic_test {

inline Job RunningJob() {
  Job job;
  job.model = *ModelPreset("llama2-7b");
  job.cluster = *topology::ClusterPreset("dgx-a100-80gb");
  job.gpus = 64;
  job.training.seq_len = 4096;
  job.training.global_batch = 256;
  return job;
}

inline ParallelConfig RunningConfig() {
  ParallelConfig c;
  c.gy = 2;
  c.pp = 2;
  c.gdata = 16;
  c.distributed_optimizer = true;
  return c;
}

}  // namespace paratune::planner::elastic_test
