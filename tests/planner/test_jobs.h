// Jobs made of presets, and their cost models, shared by the planner tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "planner/cost_model.h"
#include "planner/request.h"
#include "tests/planner/test_models.h"
#include "topology/cluster.h"

namespace paratune::planner::testing {

// The `model` preset trained on `gpus` GPUs of the `cluster` preset under
// `fw`: `batch` sequences of `seq` tokens per iteration.
inline Job MakeJob(const std::string& model, const std::string& cluster, int gpus, int64_t batch,
                   int seq, Framework fw = Framework::kMegatron) {
  Job j;
  j.model = Preset(model);
  auto c = topology::ClusterPreset(cluster);
  EXPECT_TRUE(c.ok()) << cluster << ": " << c.status().ToString();
  if (c.ok()) j.cluster = *c;
  j.gpus = gpus;
  j.training.seq_len = seq;
  j.training.global_batch = batch;
  j.training.framework = fw;
  return j;
}

// The cost model of `j` (it keeps its own copies of the job's specs).
inline CostModel CostModelOf(const Job& j) {
  return CostModel(j.model, j.training, j.cluster, j.gpus);
}

}  // namespace paratune::planner::testing
