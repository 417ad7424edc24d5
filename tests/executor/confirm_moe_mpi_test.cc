// The MPI tier for mixture-of-experts plans (run under `mpirun -np 4`):
// confirming an MoE candidate on four real processes also runs one MoE layer
// with real bytes (dispatch all-to-all, the local experts' GEMMs, combine
// all-to-all, the ETP all-gather and reduce-scatter when the experts' width is
// split) and the report has it measured beside the cost model's figures. Rank 0
// asserts; every rank runs (the measurements are collective).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "backend/mpi_cpu.h"
#include "executor/run/runner.h"
#include "planner/config.h"
#include "tests/executor/test_util.h"
#include "topology/cluster.h"

namespace paratune::executor {
namespace {

TEST(ConfirmMoeMpi, MoeCandidatesReportTheLayerMeasuredAndPredicted) {
  backend::Backend& b = testing::MpiCpuBackend();
  ASSERT_EQ(b.world_size(), 4) << "run under mpirun -np 4";
  constexpr int kSeq = 64;
  ConfirmInput in;
  in.job.model = testing::SmallMoe();
  auto cluster = topology::ClusterPreset("dgx-a100-80gb");
  ASSERT_TRUE(cluster.ok());
  in.job.cluster = *cluster;
  in.job.gpus = 4;
  in.job.training.seq_len = kSeq;
  in.job.training.global_batch = 4;
  in.job.training.precision = topology::Precision::kFp32;  // the CPU backend's GEMMs
  planner::ParallelConfig ep4;                             // data parallel 4, the experts over EP 4
  ep4.gdata = 4;
  ep4.ep = 4;
  planner::ParallelConfig etp2;  // TP 2 with SP, the experts over EP 2 x ETP 2
  etp2.gy = 2;
  etp2.sp = true;
  etp2.gdata = 2;
  etp2.ep = 2;
  etp2.etp = 2;
  in.candidates = {ep4, etp2};
  in.plan_ranks = {1, 2};
  ConfirmOptions o;
  o.workload.slice_layers = 1;
  o.samples = 3;
  o.comm_iters = 2;
  o.overlapped_slice = false;  // the dense slice's overlap is the dense tests' business
  o.peers_can_hang = true;
  auto rep = ConfirmCandidates(b, in, o, nullptr, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  if (b.rank() != 0) return;
  const planner::ModelSpec& m = in.job.model;
  ASSERT_EQ(rep->candidates.size(), 2u);
  for (size_t i = 0; i < in.candidates.size(); ++i) {
    const planner::ParallelConfig& c = in.candidates[i];
    const CandidateReport& cand = rep->candidates[i];
    SCOPED_TRACE(planner::ConfigToString(c));
    // fp32 tokens: 4 bytes each.
    ASSERT_NO_FATAL_FAILURE(testing::ExpectMoeLayerAsPlanned(cand, c, m, kSeq, 4));
    const MoeLayerReport& ml = *cand.moe_layer;
    EXPECT_GT(ml.experts.measured_s, 0);
    std::printf(
        "  %-36s moe layer: a2a %.6f s measured / %.6f s predicted, experts %.6f / %.6f s\n",
        planner::ConfigToString(c).c_str(), ml.a2a.measured_s, ml.a2a.predicted_s,
        ml.experts.measured_s, ml.experts.predicted_s);
  }
}

}  // namespace
}  // namespace paratune::executor
