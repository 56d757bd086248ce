// The layer rotation: orthogonality, inverse, determinism per seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codec_test_util.h"
#include "common/error.h"
#include "kv/codec/codec.h"
#include "kv/codec/rng.h"

namespace tkv::kv {
namespace {

// Columns of R, by applying it to the basis vectors.
std::vector<double> matrix_of(const Rotation& r) {
  const int d = r.dim();
  std::vector<double> m(size_t(d) * d);
  std::vector<float> e(d), y(d);
  for (int j = 0; j < d; ++j) {
    std::fill(e.begin(), e.end(), 0.0f);
    e[j] = 1.0f;
    r.apply(e.data(), y.data());
    for (int i = 0; i < d; ++i) m[size_t(i) * d + j] = y[i];
  }
  return m;
}

class RotationDims : public ::testing::TestWithParam<int> {};

TEST_P(RotationDims, IsOrthogonal) {
  const int d = GetParam();
  const Rotation r(d, 42);
  const auto m = matrix_of(r);
  double worst = 0;
  for (int a = 0; a < d; ++a)
    for (int b = 0; b < d; ++b) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += m[size_t(i) * d + a] * m[size_t(i) * d + b];
      worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
    }
  EXPECT_LT(worst, 1e-5) << "R^T R - I, d = " << d;
}

TEST_P(RotationDims, TransposeIsTheInverseAndInPlaceWorks) {
  const int d = GetParam();
  const Rotation r(d, 9);
  std::mt19937_64 rng(d);
  const auto x = test::gaussian_vector(rng, d);
  std::vector<float> y(d), z(d), w = x;
  r.apply(x.data(), y.data());
  r.apply_transpose(y.data(), z.data());
  r.apply(w.data(), w.data());  // in place
  double nx = 0, ny = 0;
  for (int i = 0; i < d; ++i) {
    EXPECT_NEAR(z[i], x[i], 1e-5f);
    EXPECT_EQ(w[i], y[i]);
    nx += double(x[i]) * x[i];
    ny += double(y[i]) * y[i];
  }
  EXPECT_NEAR(ny, nx, 1e-5 * nx);
  r.apply_transpose(w.data(), w.data());
  for (int i = 0; i < d; ++i) EXPECT_EQ(w[i], z[i]);
}

TEST_P(RotationDims, DeterministicPerSeedAndSeedsDiffer) {
  const int d = GetParam();
  const auto a = matrix_of(Rotation(d, 1000));
  const auto b = matrix_of(Rotation(d, 1000));
  const auto c = matrix_of(Rotation(d, 1001));
  EXPECT_EQ(a, b);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - c[i]);
  EXPECT_GT(diff, 0.1 * d);
}

TEST_P(RotationDims, SpreadsABasisVectorOverAllCoordinates) {
  // A rotation that leaves a spike a spike would not make the coordinates
  // look like those of a random unit vector (the premise of the codebooks).
  const int d = GetParam();
  const Rotation r(d, 5);
  std::vector<float> e(d, 0.0f), y(d);
  e[d / 2] = 1.0f;
  r.apply(e.data(), y.data());
  float mx = 0;
  for (float v : y) mx = std::max(mx, std::abs(v));
  // Largest coordinate of a random unit vector: about sqrt(2 ln(2d) / d).
  EXPECT_LT(mx, std::min(0.95, std::sqrt(8.0 * std::log(double(d)) / d)));
}

INSTANTIATE_TEST_SUITE_P(Dims, RotationDims, ::testing::Values(8, 12, 64, 80, 96, 128, 256));

TEST(Rotation, PowerOfTwoMakesASpikeLookGaussian) {
  // One randomized Hadamard round would give every coordinate magnitude
  // exactly 1/sqrt(d); two rounds give sums of random signs: varied
  // magnitudes with the second moment of a Gaussian coordinate.
  const int d = 256;
  const Rotation r(d, 77);
  std::vector<float> e(d, 0.0f), y(d);
  e[100] = 1.0f;
  r.apply(e.data(), y.data());
  double m2 = 0, m4 = 0;
  int distinct_magnitudes = 0;
  std::vector<float> seen;
  for (float v : y) {
    m2 += double(v) * v;
    m4 += double(v) * v * v * v;
    if (std::find(seen.begin(), seen.end(), std::abs(v)) == seen.end()) seen.push_back(std::abs(v));
  }
  distinct_magnitudes = int(seen.size());
  EXPECT_NEAR(m2, 1.0, 1e-5);
  EXPECT_GT(distinct_magnitudes, 4);
  // Kurtosis d * sum y^4 / (sum y^2)^2: 1 for a flat vector, ~3 for Gaussian.
  EXPECT_GT(d * m4 / (m2 * m2), 2.0);
}

// R = H D2 H D1 / d written out with a plain scalar transform: the
// vectorized transform must give these bits on every target (persisted pages
// and every reference in the tests depend on them).
void reference_rotate(const std::vector<float>& signs, const float* x, float* y, int d) {
  auto fwht = [d](float* v) {
    for (int len = 1; len < d; len <<= 1)
      for (int i = 0; i < d; i += 2 * len)
        for (int j = i; j < i + len; ++j) {
          const float u = v[j], w = v[j + len];
          v[j] = u + w;
          v[j + len] = u - w;
        }
  };
  for (int i = 0; i < d; ++i) y[i] = x[i] * signs[size_t(i)];
  fwht(y);
  for (int i = 0; i < d; ++i) y[i] *= signs[size_t(d + i)];
  fwht(y);
}

TEST(Rotation, PowerOfTwoGivesTheScalarBitsOnEveryTarget) {
  for (int d : {4, 8, 16, 64, 128, 256}) {
    const Rotation r(d, 7);
    // D1 and D2 as rotation.cc draws them from the seed.
    std::vector<float> signs(2 * size_t(d));
    SplitMix64 rng(7);
    const float scale = 1.0f / std::sqrt(float(d));
    for (float& s : signs) s = (rng.next() >> 63) ? -scale : scale;
    std::mt19937 gen{uint32_t(d)};
    std::normal_distribution<float> nd;
    const size_t n = size_t(d);
    std::vector<float> x(n), want(n), got(n);
    for (float& v : x) v = nd(gen);
    reference_rotate(signs, x.data(), want.data(), d);
    test::for_each_simd_target([&](const std::string& target) {
      r.apply(x.data(), got.data());
      for (int i = 0; i < d; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[size_t(i)]), std::bit_cast<uint32_t>(want[size_t(i)]))
            << "d " << d << " coordinate " << i << " on " << target;
    });
  }
}

TEST(Rotation, RejectsUnusableDims) {
  EXPECT_THROW(Rotation(1, 0), Error);
  EXPECT_THROW(Rotation(0, 0), Error);
  EXPECT_THROW(Rotation(100000, 0), Error);
}

}  // namespace
}  // namespace tkv::kv
