// The shared vector reductions (common/vec_math.h): argmax, exp-weights,
// softmax and log-sum-exp against scalar double-precision versions, on every
// SIMD target, around the vector widths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/vec_math.h"
#include "test_util.h"

namespace tkv {
namespace {

using ::tkv::test::random_vector;

// Sizes around the vector widths (4, 8, 16 lanes) and a real vocabulary.
const int64_t kSizes[] = {1, 3, 8, 15, 16, 17, 63, 64, 100, 8192, 128256};

TEST(VecMath, SoftmaxAndLogSumExp) {
  test::for_each_simd_target([&](const std::string& target) {
    for (int64_t n : kSizes) {
      auto x = random_vector(n, 9, 10.0f);
      x[0] = 500.0f;  // would overflow a naive exp
      const auto orig = x;
      softmax(x.data(), n);
      double m = orig[0];
      for (float v : orig) m = std::max(m, double(v));
      double sum = 0;
      for (float v : orig) sum += std::exp(double(v) - m);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double expect = std::exp(double(orig[size_t(i)]) - m) / sum;
        ASSERT_NEAR(x[size_t(i)], expect, 1e-6) << "n=" << n;
        total += x[size_t(i)];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
      EXPECT_NEAR(log_sum_exp(orig.data(), n), m + std::log(sum), 1e-4) << target;
    }
  });
}

TEST(VecMath, ArgmaxTakesFirstOfTies) {
  const float x[] = {1, 5, 3, 5, -2};
  EXPECT_EQ(argmax(x, 5), 1);
  EXPECT_EQ(argmax(x, 1), 0);
}

TEST(VecMath, ArgmaxIgnoresNaNAndFindsTheFirstMaxOnEveryTarget) {
  test::for_each_simd_target([&](const std::string& target) {
    for (int64_t n : kSizes) {
      auto x = random_vector(n, uint32_t(n), 4.0f);
      const int64_t want = int64_t(std::max_element(x.begin(), x.end()) - x.begin());
      EXPECT_EQ(argmax(x.data(), n), want) << target << " n=" << n;
      if (n > 1) {
        x[0] = std::numeric_limits<float>::quiet_NaN();
        const int64_t want2 = int64_t(std::max_element(x.begin() + 1, x.end()) - x.begin());
        EXPECT_EQ(argmax(x.data(), n), want2) << target << " n=" << n;
        const MaxScan s = scan_max(x.data(), size_t(n));
        EXPECT_TRUE(s.has_nan_or_inf);
        EXPECT_EQ(s.max, x[size_t(want2)]);
      }
    }
  });
}

TEST(VecMath, ExpWeightsMatchStdExpAndZeroTheMasked) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -float(i) * 3.1f;
  x[5] = -std::numeric_limits<float>::infinity();
  std::vector<float> w(x.size());
  const double total = exp_weights(x.data(), x.size(), 0.0f, 1.0f, w.data());
  double want_total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] < -87.0f ? 0.0 : std::exp(double(x[i]));
    EXPECT_NEAR(w[i], want, 2e-7 * want) << i;
    want_total += want;
  }
  EXPECT_EQ(w[5], 0.0f);
  EXPECT_EQ(w[36], 0.0f);  // -111.6: below the underflow cut
  EXPECT_NEAR(total, want_total, 1e-6 * want_total);
}

TEST(VecMath, SoftCapMatchesStdTanhAndBoundsTheValues) {
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(37)}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = (float(i) - float(n) / 2) * 9.7f;  // -180 .. 180
    std::vector<float> y = x;
    soft_cap(y.data(), n, 50.0f);
    for (size_t i = 0; i < n; ++i) {
      const double want = 50.0 * std::tanh(double(x[i]) / 50.0);
      EXPECT_NEAR(y[i], want, 2e-5 * 50.0) << n << " " << i;
      EXPECT_LE(std::fabs(y[i]), 50.0f);
    }
  }
}

}  // namespace
}  // namespace tkv
