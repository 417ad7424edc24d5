// backend/conv_lowering.h: the index arithmetic of a convolution lowered to
// GEMMs (ConvArgs, backend.h), shared by the CPU code and the CUDA kernels so
// both lower the same way.
//
// Per chunk of `nn` samples and per group g the patch matrix is
//   col[g][s · P + o][r][cc]   (s < nn, o < P output positions, r < window, cc < c / groups)
// column-major as a (window · c/groups) × (nn · P) matrix: one output
// position's patch contiguous. Then, with K = k / groups and L = window · c / groups,
//   forward:  y_g  (K × nn·P, ld k)  = w_gᵀ · col_g      (w_g: L × K)
//   dgrad:    col_g (L × nn·P)       = w_g · dy_g        then col2im into dx
//   wgrad:    dw_g (L × K)          += col_g · dy_gᵀ      summed over the chunks
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PT_HOST_DEVICE __host__ __device__
#else
#define PT_HOST_DEVICE
#endif

namespace paratune::backend {

// A convolution's geometry as the lowering reads it (plain data: copied to
// the device by value).
struct ConvLowering {
  int dims = 1, kernel = 1, stride = 1, pad = 0;
  int64_t c = 1, k = 1, groups = 1, cg = 1, kg = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t in_positions = 1, out_positions = 1;
  int64_t window = 1;  // kernel^dims
  int64_t patch = 1;   // window · cg: one group's patch length (L)
};

// The input position output position `o` reads at kernel offset `r`, or −1
// where that falls in the padding. Positions are row-major, last dimension fastest.
PT_HOST_DEVICE inline int64_t PatchSource(const ConvLowering& g, int64_t o, int64_t r) {
  int64_t src = 0, scale = 1;
  for (int d = g.dims - 1; d >= 0; --d) {
    const int64_t od = o % g.out[d], rd = r % g.kernel;
    o /= g.out[d];
    r /= g.kernel;
    const int64_t id = od * g.stride - g.pad + rd;
    if (id < 0 || id >= g.in[d]) return -1;
    src += id * scale;
    scale *= g.in[d];
  }
  return src;
}

// The output position whose patch holds input position `i` at kernel offset
// `r`, or −1 where none does (the inverse of PatchSource).
PT_HOST_DEVICE inline int64_t PatchTarget(const ConvLowering& g, int64_t i, int64_t r) {
  int64_t dst = 0, scale = 1;
  for (int d = g.dims - 1; d >= 0; --d) {
    const int64_t id = i % g.in[d], rd = r % g.kernel;
    i /= g.in[d];
    r /= g.kernel;
    const int64_t t = id + g.pad - rd;
    if (t < 0 || t % g.stride != 0 || t / g.stride >= g.out[d]) return -1;
    dst += (t / g.stride) * scale;
    scale *= g.out[d];
  }
  return dst;
}

// Index in the patch matrix of a chunk of `nn` samples: sample s, output
// position o, kernel offset r, channel c (its group from c).
PT_HOST_DEVICE inline int64_t PatchIndex(const ConvLowering& g, int64_t nn, int64_t s, int64_t o, int64_t r,
                                         int64_t c) {
  const int64_t group = c / g.cg;
  return ((group * nn * g.out_positions + s * g.out_positions + o) * g.window + r) * g.cg + c % g.cg;
}

}  // namespace paratune::backend
