// The forward pass's element-wise ops against plain double-precision formulas.
#include "model/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/synth.h"
#include "test_util.h"

namespace tkv::model {
namespace {

using ::tkv::test::random_vector;

// Sizes around the vector widths (4, 8, 16 lanes) and a real FFN width.
const int64_t kSizes[] = {1, 3, 8, 15, 16, 17, 63, 64, 100, 8192, 14336};

TEST(Ops, RmsNormMatchesFormula) {
  for (int64_t n : kSizes) {
    const auto x = random_vector(n, 1, 3.0f);
    const auto w = random_vector(n, 2);
    std::vector<float> y(static_cast<size_t>(n));
    ops::rmsnorm(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / double(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(y[size_t(i)], x[size_t(i)] * scale * w[size_t(i)],
                  1e-5 * (1 + std::fabs(y[size_t(i)])))
          << "n=" << n << " i=" << i;
    }
  }
}

TEST(Ops, RmsNormInPlaceAndRowsAgree) {
  ThreadPool pool(3);
  struct Shape {
    int64_t rows, n;
  };
  for (const Shape sh : {Shape{7, 40}, Shape{64, 1024}}) {  // serial and parallel paths
    const auto x = random_vector(sh.rows * sh.n, 3);
    const auto w = random_vector(sh.n, 4);
    std::vector<float> by_rows(x.size()), in_place = x;
    ops::rmsnorm_rows(x.data(), w.data(), by_rows.data(), sh.rows, sh.n, 1e-6f, pool);
    ops::rmsnorm_rows(in_place.data(), w.data(), in_place.data(), sh.rows, sh.n, 1e-6f, pool);
    for (int64_t r = 0; r < sh.rows; ++r) {
      std::vector<float> one(static_cast<size_t>(sh.n));
      ops::rmsnorm(x.data() + r * sh.n, w.data(), one.data(), sh.n, 1e-6f);
      for (int64_t i = 0; i < sh.n; ++i) {
        ASSERT_EQ(by_rows[size_t(r * sh.n + i)], one[size_t(i)]);
        ASSERT_EQ(in_place[size_t(r * sh.n + i)], one[size_t(i)]);
      }
    }
  }
}

TEST(Ops, SiluMulMatchesFormulaAndSurvivesHugeInputs) {
  for (int64_t n : kSizes) {
    auto gate = random_vector(n, 5, 4.0f);
    if (n > 4) {  // far outside exp's range: must give finite, exact-limit results
      gate[0] = -1000.0f;
      gate[1] = 1000.0f;
      gate[2] = -90.0f;
      gate[3] = 90.0f;
    }
    const auto up = random_vector(n, 6);
    auto out = gate;
    ops::silu_mul(out.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[size_t(i)];
      const double expect = g / (1.0 + std::exp(-g)) * up[size_t(i)];
      ASSERT_TRUE(std::isfinite(out[size_t(i)])) << "g=" << g;
      ASSERT_NEAR(out[size_t(i)], expect, 2e-6 * (1 + std::fabs(expect)))
          << "n=" << n << " g=" << g;
    }
  }
}

TEST(Ops, AddAndBias) {
  const auto a = random_vector(37, 7), b = random_vector(37, 8);
  auto y = a;
  ops::add(y.data(), b.data(), 37);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(y[i], a[i] + b[i]);
  std::vector<float> rows(3 * 5, 1.0f);
  const float bias[5] = {1, 2, 3, 4, 5};
  ops::add_bias_rows(rows.data(), bias, 3, 5);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 5; ++i) ASSERT_EQ(rows[size_t(r * 5 + i)], 1.0f + bias[i]);
  }
}

ModelConfig rope_config(RopeStyle style, int head_dim, int n_rot, float base) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.n_rot = n_rot;
  c.rope_base = base;
  c.rope_style = style;
  return c;
}

// RoPE of one head at position `pos`, computed directly from the definition.
std::vector<double> rope_reference(const std::vector<float>& x, RopeStyle style, int n_rot,
                                   double base, int64_t pos, const std::vector<float>& factors) {
  std::vector<double> y(x.begin(), x.end());
  for (int i = 0; i < n_rot / 2; ++i) {
    double theta = double(pos) / std::pow(base, 2.0 * i / n_rot);
    if (!factors.empty()) theta /= factors[size_t(i)];
    const int a = style == RopeStyle::Normal ? 2 * i : i;
    const int b = style == RopeStyle::Normal ? 2 * i + 1 : i + n_rot / 2;
    y[size_t(a)] = x[size_t(a)] * std::cos(theta) - x[size_t(b)] * std::sin(theta);
    y[size_t(b)] = x[size_t(a)] * std::sin(theta) + x[size_t(b)] * std::cos(theta);
  }
  return y;
}

TEST(Ops, RopeNormalAndNeoxMatchDefinition) {
  for (RopeStyle style : {RopeStyle::Normal, RopeStyle::Neox}) {
    for (int n_rot : {64, 32}) {  // full and partial rotation of a 64-dim head
      const auto cfg = rope_config(style, 64, n_rot, 10000.0f);
      const auto rope = ops::RopeFrequencies::make(cfg, {});
      const int64_t pos0 = 4090, T = 3;
      std::vector<float> cos(size_t(T * n_rot / 2)), sin(cos.size());
      ops::rope_angles(rope, pos0, T, cos.data(), sin.data());
      for (int64_t t = 0; t < T; ++t) {
        const auto x = random_vector(2 * 64, uint32_t(10 + t));  // two heads
        auto y = x;
        ops::rope_apply(rope, y.data(), 2, 64, cos.data() + t * n_rot / 2,
                        sin.data() + t * n_rot / 2);
        for (int h = 0; h < 2; ++h) {
          const std::vector<float> head(x.begin() + h * 64, x.begin() + (h + 1) * 64);
          const auto expect = rope_reference(head, style, n_rot, 10000.0, pos0 + t, {});
          for (int i = 0; i < 64; ++i) {
            ASSERT_NEAR(y[size_t(h * 64 + i)], expect[size_t(i)], 2e-5)
                << "style " << int(style) << " n_rot " << n_rot << " dim " << i;
          }
        }
      }
    }
  }
}

TEST(Ops, RopeAtPositionZeroIsIdentity) {
  const auto cfg = rope_config(RopeStyle::Normal, 8, 8, 10000.0f);
  const auto rope = ops::RopeFrequencies::make(cfg, {});
  float cos[4], sin[4];
  ops::rope_angles(rope, 0, 1, cos, sin);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ops::rope_apply(rope, x, 1, 8, cos, sin);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], float(i + 1));
}

TEST(Ops, Llama3RopeFactorsSlowLowFrequencies) {
  // Llama 3.1 8B: head_dim 128, base 500000, factor 8, low 1, high 4, 8192.
  const auto f = llama3_rope_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f.front(), 1.0f);  // highest frequency: untouched
  EXPECT_EQ(f.back(), 8.0f);   // lowest frequency: slowed by the full factor
  bool smooth_band = false;
  for (size_t i = 1; i < f.size(); ++i) {
    EXPECT_GE(f[i], f[i - 1]);  // monotone from 1 to factor
    smooth_band |= f[i] > 1.0f && f[i] < 8.0f;
  }
  EXPECT_TRUE(smooth_band);

  auto cfg = rope_config(RopeStyle::Normal, 128, 128, 500000.0f);
  const auto rope = ops::RopeFrequencies::make(cfg, f);
  std::vector<float> cos(64), sin(64);
  ops::rope_angles(rope, 100000, 1, cos.data(), sin.data());
  auto x = random_vector(128, 11);
  const auto expect = rope_reference(x, RopeStyle::Normal, 128, 500000.0, 100000, f);
  ops::rope_apply(rope, x.data(), 1, 128, cos.data(), sin.data());
  for (int i = 0; i < 128; ++i) ASSERT_NEAR(x[size_t(i)], expect[size_t(i)], 2e-5) << i;
}

TEST(Ops, LinearRopeScalingDividesPositions) {
  auto cfg = rope_config(RopeStyle::Neox, 16, 16, 10000.0f);
  cfg.rope_freq_scale = 0.25f;
  const auto scaled = ops::RopeFrequencies::make(cfg, {});
  cfg.rope_freq_scale = 1.0f;
  const auto plain = ops::RopeFrequencies::make(cfg, {});
  std::vector<float> c1(8), s1(8), c2(8), s2(8);
  ops::rope_angles(scaled, 400, 1, c1.data(), s1.data());
  ops::rope_angles(plain, 100, 1, c2.data(), s2.data());
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(c1[size_t(i)], c2[size_t(i)], 1e-6);
    EXPECT_NEAR(s1[size_t(i)], s2[size_t(i)], 1e-6);
  }
}

}  // namespace
}  // namespace tkv::model
