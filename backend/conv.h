// backend/conv.h: convolutions lowered to GEMMs (ConvArgs, backend.h): the
// geometry every backend lowers from, and the host implementation the
// mpi-cpu backend runs (fp32, Eigen's GEMM). The CUDA backend lowers the same
// way with its own kernels and cuBLAS (cuda_kernels.h).
#pragma once

#include "backend/backend.h"
#include "backend/conv_lowering.h"
#include "common/status.h"

namespace paratune::backend {

// The lowering's view of `a`. REQUIRES: CheckConvArgs(a, ...) passed.
ConvLowering LoweringOf(const ConvArgs& a);

// Samples per chunk: as many whole samples' patches as the workspace holds,
// at most a.n. REQUIRES: the workspace holds one sample's (CheckConvArgs).
int64_t ConvChunkSamples(const ConvArgs& a);

// Runs the pass on host memory in fp32: patches gathered, Eigen's GEMM per
// group, the data gradient scattered back by gathering each input element's
// patch entries (no atomics), the weight gradient summed over the chunks.
// Checks the arguments (CheckConvArgs) and that the precision is fp32.
Status HostConvFp32(const ConvArgs& a);

}  // namespace paratune::backend
