// profiler/sampler.h: the measurements, run over a Backend on every rank at
// once (SPMD: each rank calls RunMeasurements with the same plan).
//
// Timing follows nccl-tests and nvbandwidth: warm-up iterations first; then
// per sample a host barrier, the streams held at a gate, `iters` ops enqueued
// between two events, a second barrier, every rank releasing its gate (so all
// streams start together), the event time divided by `iters`; each sample's
// time is reduced across ranks with max, and the row reports the median of the
// samples. Collectives run on every group of a shape at once (concurrent
// groups share a node's NICs like NCCL_TESTS_SPLIT); a correctness check fills
// known values and counts wrong elements (#wrong). Samplers never print: they
// report progress through a callback.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "profiler/measurements.h"
#include "profiler/nccl_format.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::profiler {

// A group layout: `group_size` members `stride` world ranks apart. The world is
// cut into blocks of group_size·stride consecutive ranks; each block holds
// `stride` interleaved groups (AxoNN's placement order).
struct GroupShape {
  int group_size = 2;
  int stride = 1;
};

// The color and key that put world rank `rank` into its group of `shape`
// (color -1: the rank is in no full block and idles).
struct GroupSlot {
  int color = -1;
  int key = 0;
};
GroupSlot SlotFor(const GroupShape& shape, int world_size, int rank);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

struct MeasurementPlan {
  std::vector<topology::Collective> collectives;    // empty = none
  std::vector<GroupShape> groups;                   // shapes every collective runs on
  std::vector<GroupShape> extra_all_reduce_groups;  // strided intra-node shapes, all_reduce only
  SizeSweep sweep;
  backend::DataType dtype = backend::DataType::kFloat32;
  backend::ReduceOp op = backend::ReduceOp::kSum;
  int warmup_iters = 5;
  int iters = 20;   // ops per timed sample (nccl-tests -n)
  int samples = 5;  // timed samples per row; the row reports their median
  int64_t check_max_bytes = int64_t{64} << 20;  // correctness check up to this size, else N/A
  std::vector<topology::Precision> gemm_precisions;
  std::vector<GemmShape> gemm_shapes;
  int gemm_iters = 10;
  int64_t copy_bytes = 0;  // device copy bandwidth; 0 skips
  int64_t p2p_bytes = 0;   // P2P matrix among the ranks on rank 0's host; 0 skips
};

// Shapes worth measuring on `world_size` ranks with `ranks_per_node` per host:
// stride-1 groups of 2, 4, … up to a node; across nodes one rank per node
// (stride = ranks_per_node, all of a node's groups sharing its NICs) for 2, 4, …
// nodes, and the whole world. `quick` keeps the largest of each kind.
std::vector<GroupShape> DefaultGroupShapes(int world_size, int ranks_per_node, bool quick);

// Defaults per backend ("cuda", "mpi-cpu", "fake"); `quick` aims at about a
// minute on one node.
MeasurementPlan DefaultPlan(const std::string& backend_name, bool quick, int world_size,
                            int ranks_per_node);

using ProgressFn = std::function<void(const std::string&)>;

// Runs the plan. Every rank gets the same Measurements (timings reduced with
// max, wrong counts summed). Fills env.hosts/world_size/ranks_per_node/nodes/
// device/versions/created_at; the caller adds tool, argv and backend name.
// Items the backend cannot run are recorded in `waived`; a failing backend call
// (dead rank, NCCL error, timeout) fails the whole run with its Status, naming
// the measurement.
Result<Measurements> RunMeasurements(backend::Backend& b, const MeasurementPlan& plan,
                                     const ProgressFn& progress);

// topology::Precision → the backend's GEMM precision, and the element type of
// its inputs (for random fills).
backend::GemmPrecision ToGemmPrecision(topology::Precision p);
backend::DataType GemmInputType(topology::Precision p);

}  // namespace paratune::profiler
