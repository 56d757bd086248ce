// Lloyd-Max centroids for one coordinate of a random unit vector.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "kv/codec/codec.h"

namespace tkv::kv {
namespace {

// Positive halves of the N(0,1) Lloyd-Max quantizers (Max 1960).
const std::vector<std::vector<double>> kGaussianLevels = {
    {0.7979},
    {0.4528, 1.5104},
    {0.2451, 0.7560, 1.3440, 2.1520},
    {0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6181, 2.0690, 2.7326},
};

TEST(LloydMax, MatchesScaledGaussianLevelsWithinTwoPercent) {
  for (int d : {64, 96, 128, 256}) {
    for (int bits = 1; bits <= 4; ++bits) {
      const auto& c = lloyd_max_centroids(bits, d);
      ASSERT_EQ(c.size(), size_t(1) << bits);
      const auto& g = kGaussianLevels[bits - 1];
      const int half = int(c.size()) / 2;
      for (int i = 0; i < half; ++i) {
        const double want = g[i] / std::sqrt(double(d));
        EXPECT_NEAR(c[half + i], want, 0.02 * want) << "d=" << d << " bits=" << bits << " i=" << i;
        EXPECT_EQ(c[half - 1 - i], -c[half + i]) << "symmetric";
      }
    }
  }
}

// Monte-Carlo check that the centroids are the conditional means of their
// cells (the Lloyd-Max fixed point): below d = 64 for the exact distribution
// of a sphere coordinate (far from Gaussian at d = 8), from d = 64 on for
// N(0, 1/d) (see lloyd_max.cc for why).
TEST(LloydMax, CentroidsAreConditionalMeansOfTheirDistribution) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n01;
  for (int d : {8, 16, 32, 64}) {
    for (int bits = 1; bits <= 4; ++bits) {
      const auto& c = lloyd_max_centroids(bits, d);
      const int k = int(c.size());
      std::vector<double> sum(k, 0), cnt(k, 0);
      std::vector<double> x(d);
      for (int s = 0; s < 60000; ++s) {
        double nrm = 0;
        for (double& v : x) {
          v = n01(rng);
          nrm += v * v;
        }
        nrm = d >= 64 ? std::sqrt(double(d)) : std::sqrt(nrm);
        for (int i = 0; i < d; ++i) {
          const double u = x[i] / nrm;
          int best = 0;
          for (int j = 1; j < k; ++j)
            if (std::abs(u - c[j]) < std::abs(u - c[best])) best = j;
          sum[best] += u;
          cnt[best] += 1;
        }
      }
      for (int j = 0; j < k; ++j) {
        ASSERT_GT(cnt[j], 100) << "empty cell";
        const double mean = sum[j] / cnt[j];
        // Cell widths are ~1/sqrt(d); the sampling error is far below 1.5%.
        EXPECT_NEAR(mean, c[j], 0.015 * std::abs(c[j]) + 2e-4)
            << "d=" << d << " bits=" << bits << " cell " << j;
      }
    }
  }
}

TEST(LloydMax, SmallDimIsLighterTailedThanGaussian) {
  // At d = 8 the coordinate is bounded by 1 and its distribution is
  // (1-x^2)^2.5: the outer 4-bit level sits well inside the Gaussian one.
  const auto& c = lloyd_max_centroids(4, 8);
  EXPECT_LT(c.back(), 0.95 * 2.7326 / std::sqrt(8.0));
  EXPECT_LT(c.back(), 1.0f);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_LT(c[i - 1], c[i]);
}

TEST(LloydMax, CachedAndValidated) {
  EXPECT_EQ(&lloyd_max_centroids(3, 128), &lloyd_max_centroids(3, 128));
  EXPECT_THROW(lloyd_max_centroids(0, 128), Error);
  EXPECT_THROW(lloyd_max_centroids(5, 128), Error);
  EXPECT_THROW(lloyd_max_centroids(2, 1), Error);
}

}  // namespace
}  // namespace tkv::kv
