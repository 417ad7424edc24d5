// The host convolution (backend/conv.h) against a direct convolution written
// from the definition, every pass, in 1D, 2D and 3D, strided and grouped: the
// lowering (patch layout, padding, the gather back) computes the convolution
// itself, not only something of its cost.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/conv.h"

namespace paratune::backend {
namespace {

struct Case {
  int dims;
  int64_t n, c, k;
  std::array<int64_t, 3> extent;
  int kernel, stride, groups;
};

// The input position of output coordinate `o` at kernel coordinate `r` in
// each dimension, or -1 in the padding; positions row-major.
int64_t Source(const Case& t, const std::array<int64_t, 3>& o, const std::array<int64_t, 3>& r) {
  int64_t src = 0;
  const int pad = (t.kernel - 1) / 2;
  for (int d = 0; d < t.dims; ++d) {
    const int64_t i = o[d] * t.stride - pad + r[d];
    if (i < 0 || i >= t.extent[d]) return -1;
    src = src * t.extent[d] + i;
  }
  return src;
}

struct Direct {
  std::vector<float> y, dx, dw;
};

// The three passes by their definition: y[n,o,k] = Σ_{r,c∈group(k)} x[n, o·s − p + r, c] w[k, r, c].
Direct Reference(const Case& t, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& dy) {
  ConvArgs a;
  a.dims = t.dims;
  a.extent = t.extent;
  a.stride = t.stride;
  std::array<int64_t, 3> out{1, 1, 1};
  for (int d = 0; d < t.dims; ++d) out[d] = ConvOutExtent(a, d);
  const int64_t in_pos = t.extent[0] * t.extent[1] * t.extent[2], out_pos = out[0] * out[1] * out[2];
  const int64_t window = static_cast<int64_t>(std::pow(t.kernel, t.dims)), cg = t.c / t.groups, kg = t.k / t.groups;
  Direct d{std::vector<float>(t.n * out_pos * t.k), std::vector<float>(x.size()), std::vector<float>(w.size())};
  for (int64_t n = 0; n < t.n; ++n) {
    for (int64_t o = 0; o < out_pos; ++o) {
      const std::array<int64_t, 3> oc{o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
      for (int64_t r = 0; r < window; ++r) {
        std::array<int64_t, 3> rc{0, 0, 0};
        for (int dd = t.dims - 1, rr = static_cast<int>(r); dd >= 0; --dd, rr /= t.kernel) rc[dd] = rr % t.kernel;
        const int64_t src = Source(t, oc, rc);
        if (src < 0) continue;
        for (int64_t k = 0; k < t.k; ++k) {
          const int64_t g = k / kg;
          for (int64_t c = 0; c < cg; ++c) {
            const int64_t xi = (n * in_pos + src) * t.c + g * cg + c, wi = (k * window + r) * cg + c;
            const int64_t yi = (n * out_pos + o) * t.k + k;
            d.y[yi] += x[xi] * w[wi];
            d.dx[xi] += dy[yi] * w[wi];
            d.dw[wi] += dy[yi] * x[xi];
          }
        }
      }
    }
  }
  return d;
}

Buffer Host(std::vector<float>& v, uint64_t id) {
  Buffer b;
  b.id = id;
  b.bytes = static_cast<int64_t>(v.size() * sizeof(float));
  b.data = v.data();
  return b;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3) << what << " element " << i;
}

class HostConvTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostConvTest, EveryPassMatchesTheDirectConvolution) {
  const Case t = GetParam();
  ConvArgs a;
  a.dims = t.dims;
  a.n = t.n;
  a.c = t.c;
  a.k = t.k;
  a.extent = t.extent;
  a.kernel = t.kernel;
  a.stride = t.stride;
  a.groups = t.groups;
  a.precision = GemmPrecision::kFp32;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(ConvInputElems(a)), w(ConvFilterElems(a)), dy(ConvOutputElems(a));
  for (auto* v : {&x, &w, &dy}) {
    for (float& e : *v) e = u(rng);
  }
  const Direct want = Reference(t, x, w, dy);
  // A workspace of one sample's patches: the samples run in chunks of one,
  // so the weight gradient is summed over chunks.
  std::vector<float> col(static_cast<size_t>(ConvPatchBytesPerSample(a) / 4));
  a.workspace = Host(col, 4);

  std::vector<float> y(dy.size());
  a.pass = ConvPass::kForward;
  a.x = Host(x, 1), a.w = Host(w, 2), a.y = Host(y, 3);
  ASSERT_TRUE(HostConvFp32(a).ok());
  ExpectNear(y, want.y, "forward");

  std::vector<float> dx(x.size(), 99.0f);  // every element is written
  a.pass = ConvPass::kDataGrad;
  a.x = Host(dx, 1), a.y = Host(dy, 3);
  ASSERT_TRUE(HostConvFp32(a).ok());
  ExpectNear(dx, want.dx, "data gradient");

  std::vector<float> dw(w.size(), 99.0f);
  a.pass = ConvPass::kWeightGrad;
  a.x = Host(x, 1), a.w = Host(dw, 2);
  ASSERT_TRUE(HostConvFp32(a).ok());
  ExpectNear(dw, want.dw, "weight gradient");
}

INSTANTIATE_TEST_SUITE_P(Shapes, HostConvTest,
                         ::testing::Values(Case{1, 2, 3, 4, {9, 1, 1}, 3, 1, 1},      // 1D
                                           Case{2, 3, 4, 6, {7, 6, 1}, 3, 2, 2},      // strided, grouped
                                           Case{2, 2, 5, 3, {5, 5, 1}, 1, 1, 1},      // 1×1
                                           Case{3, 2, 2, 4, {4, 5, 3}, 3, 1, 1},      // 3D
                                           Case{2, 1, 4, 4, {8, 8, 1}, 5, 2, 4}));   // depthwise, 5×5

TEST(ConvArgsTest, ChecksRefuseWhatCannotRun) {
  ConvArgs a;
  a.c = 6, a.k = 4, a.groups = 4;
  EXPECT_FALSE(CheckConvArgs(a, false).ok());  // 4 groups do not divide 6 channels
  a.groups = 2, a.precision = GemmPrecision::kFp8;
  EXPECT_EQ(CheckConvArgs(a, false).code(), StatusCode::kUnavailable);
  a.precision = GemmPrecision::kFp32;
  EXPECT_FALSE(CheckConvArgs(a, false).ok());  // no buffers
  std::vector<float> v(1024);
  a.x = a.w = a.y = a.workspace = Host(v, 1);
  EXPECT_TRUE(CheckConvArgs(a, false).ok());
  a.extent = {64, 64, 1};  // the input no longer fits
  EXPECT_FALSE(CheckConvArgs(a, false).ok());
}

}  // namespace
}  // namespace paratune::backend
