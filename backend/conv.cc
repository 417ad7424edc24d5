#include "backend/conv.h"

#include <Eigen/Core>
#include <algorithm>
#include <new>

namespace paratune::backend {

ConvLowering LoweringOf(const ConvArgs& a) {
  ConvLowering g;
  g.dims = a.dims;
  g.kernel = a.kernel;
  g.stride = a.stride;
  g.pad = (a.kernel - 1) / 2;
  g.c = a.c;
  g.k = a.k;
  g.groups = a.groups;
  g.cg = a.c / a.groups;
  g.kg = a.k / a.groups;
  for (int d = 0; d < a.dims; ++d) {
    g.in[d] = a.extent[static_cast<size_t>(d)];
    g.out[d] = ConvOutExtent(a, d);
    g.in_positions *= g.in[d];
    g.out_positions *= g.out[d];
    g.window *= a.kernel;
  }
  g.patch = g.window * g.cg;
  return g;
}

int64_t ConvChunkSamples(const ConvArgs& a) {
  const int64_t per_sample = ConvPatchBytesPerSample(a);
  return std::clamp<int64_t>(a.workspace.bytes / std::max<int64_t>(1, per_sample), 1, a.n);
}

namespace {

using Matrix = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrix = Eigen::Map<const Eigen::MatrixXf>;
using Strided = Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const Eigen::MatrixXf, 0, Eigen::OuterStride<>>;

// Patches of samples [n0, n0 + nn) of x into col (conv_lowering.h's layout);
// each (position, kernel offset) pair's source found once for all samples.
void Im2Col(const ConvLowering& g, const float* x, int64_t n0, int64_t nn, float* col) {
  for (int64_t o = 0; o < g.out_positions; ++o) {
    for (int64_t r = 0; r < g.window; ++r) {
      const int64_t src = PatchSource(g, o, r);
      for (int64_t s = 0; s < nn; ++s) {
        if (src < 0) {
          for (int64_t c = 0; c < g.c; ++c) col[PatchIndex(g, nn, s, o, r, c)] = 0.0f;
          continue;
        }
        const float* xs = x + ((n0 + s) * g.in_positions + src) * g.c;
        for (int64_t c = 0; c < g.c; ++c) col[PatchIndex(g, nn, s, o, r, c)] = xs[c];
      }
    }
  }
}

// dx of samples [n0, n0 + nn) from the patch gradients in col: each input
// element the sum of its entries (a gather: no two writes to one element).
void Col2Im(const ConvLowering& g, const float* col, int64_t n0, int64_t nn, float* dx) {
  std::fill(dx + n0 * g.in_positions * g.c, dx + (n0 + nn) * g.in_positions * g.c, 0.0f);
  for (int64_t i = 0; i < g.in_positions; ++i) {
    for (int64_t r = 0; r < g.window; ++r) {
      const int64_t o = PatchTarget(g, i, r);
      if (o < 0) continue;
      for (int64_t s = 0; s < nn; ++s) {
        float* out = dx + ((n0 + s) * g.in_positions + i) * g.c;
        for (int64_t c = 0; c < g.c; ++c) out[c] += col[PatchIndex(g, nn, s, o, r, c)];
      }
    }
  }
}

}  // namespace

Status HostConvFp32(const ConvArgs& a) {
  PT_RETURN_IF_ERROR(CheckConvArgs(a, true));
  if (a.precision != GemmPrecision::kFp32) {
    return Status::Unavailable(std::string("host convolutions run in fp32 only, not ") +
                               GemmPrecisionName(a.precision));
  }
  const ConvLowering g = LoweringOf(a);
  const int64_t chunk = ConvChunkSamples(a);
  auto* x = static_cast<float*>(a.x.data);
  auto* w = static_cast<float*>(a.w.data);
  auto* y = static_cast<float*>(a.y.data);
  auto* col = static_cast<float*>(a.workspace.data);
  try {
    for (int64_t n0 = 0; n0 < a.n; n0 += chunk) {
      const int64_t nn = std::min(chunk, a.n - n0), cols = nn * g.out_positions;
      float* y0 = y + n0 * g.out_positions * g.k;
      if (a.pass != ConvPass::kDataGrad) Im2Col(g, x, n0, nn, col);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Matrix col_g(col + grp * g.patch * cols, g.patch, cols);
        Strided y_g(y0 + grp * g.kg, g.kg, cols, Eigen::OuterStride<>(g.k));
        Matrix w_g(w + grp * g.kg * g.patch, g.patch, g.kg);
        switch (a.pass) {
          case ConvPass::kForward: y_g.noalias() = w_g.transpose() * col_g; break;
          case ConvPass::kDataGrad: col_g.noalias() = w_g * y_g; break;
          case ConvPass::kWeightGrad:
            if (n0 == 0) w_g.setZero();
            w_g.noalias() += col_g * y_g.transpose();
            break;
        }
      }
      if (a.pass == ConvPass::kDataGrad) Col2Im(g, col, n0, nn, x);
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory(0, 0, "host convolution (GEMM workspace)");
  }
  return Status::Ok();
}

}  // namespace paratune::backend
