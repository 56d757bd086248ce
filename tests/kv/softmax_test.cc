// The online-softmax tile kernel (with its fast exponential) against double
// precision, including masked entries and rows with nothing visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/softmax_kernels.h"

namespace tkv::kv {
namespace {

TEST(SoftmaxTileTest, MatchesDoublePrecision) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-60.0f, 10.0f);
  for (int len : {1, 7, 16, 33, 64}) {
    const int rows = 5;
    const size_t stride = 64;
    std::vector<float> s(rows * stride), m(rows), l(rows), corr(rows);
    std::vector<double> em(rows), el(rows);
    for (int r = 0; r < rows; ++r) {
      m[r] = r == 0 ? kMaskedScore : u(rng);  // row 0 starts empty
      l[r] = r == 0 ? 0.0f : 2.5f;
      em[r] = m[r];
      el[r] = l[r];
    }
    std::vector<float> orig = s;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < len; ++j) {
        float v = u(rng);
        if (r == 3 && j % 3 == 0) v = kMaskedScore;  // masked entries
        if (r == 4) v = kMaskedScore;                // nothing visible
        s[r * stride + j] = orig[r * stride + j] = v;
      }
    online_softmax_tile(s.data(), stride, rows, len, m.data(), l.data(), corr.data());
    for (int r = 0; r < rows; ++r) {
      double mx = -1e300;
      for (int j = 0; j < len; ++j)
        if (orig[r * stride + j] > kMaskedScore / 2)
          mx = std::max(mx, double(orig[r * stride + j]));
      if (mx == -1e300) {  // nothing visible: row zeroed, state unchanged
        EXPECT_EQ(corr[r], 1.0f);
        EXPECT_EQ(l[r], float(el[r]));
        for (int j = 0; j < len; ++j) EXPECT_EQ(s[r * stride + j], 0.0f);
        continue;
      }
      const double m_new = std::max(em[r], mx);
      const double c = em[r] <= kMaskedScore / 2 ? 0.0 : std::exp(em[r] - m_new);
      EXPECT_NEAR(corr[r], c, 3e-6 * c + 1e-30) << "row " << r;
      double sum = 0;
      for (int j = 0; j < len; ++j) {
        const double x = orig[r * stride + j];
        const double e = x <= kMaskedScore / 2 ? 0.0 : std::exp(x - m_new);
        sum += e;
        // 3e-6 from the polynomial, plus float rounding of the argument
        // (|x - m| * 2^-24 relative), which only matters for negligible e.
        const double tol = (3e-6 + std::fabs(x - m_new) * 1.2e-7) * e + 1e-37;
        EXPECT_NEAR(s[r * stride + j], e, tol) << "row " << r << " j " << j;
      }
      EXPECT_NEAR(l[r], el[r] * c + sum, 1e-5 * (el[r] * c + sum));
      EXPECT_FLOAT_EQ(m[r], float(m_new));
    }
  }
}

}  // namespace
}  // namespace tkv::kv
