// The Highway activation quantization (act_quant_simd.cc) against its scalar
// reference (act_quant.cc): the same bytes, pads included, on every SIMD
// target, for random inputs and the edges of the arithmetic (zeros of both
// signs, huge and tiny magnitudes, rounding ties, infinities, NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/kernels/act_blocks.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

using kernels::ActFormat;

constexpr float kInf = std::numeric_limits<float>::infinity();

// One token of 1024 values: four 256-value blocks, 32 blocks of 32.
std::vector<std::vector<float>> edge_inputs() {
  std::vector<std::vector<float>> cases;
  auto base = [] { return test::gaussian(1024, 41, 3.0f); };
  cases.push_back(base());
  cases.push_back(std::vector<float>(1024, 0.0f));
  cases.push_back(std::vector<float>(1024, -0.0f));
  {
    auto x = base();  // zeros of both signs in otherwise normal blocks
    for (size_t i = 0; i < x.size(); i += 3) x[i] = i % 2 ? -0.0f : 0.0f;
    cases.push_back(x);
  }
  for (float scale : {FLT_MAX, 1e30f, 1e-30f, FLT_MIN, 1e-40f, 1.4e-45f}) {
    auto x = base();
    for (float& v : x) v = std::fmod(v, 1.0f) * scale;
    x[5] = scale;
    x[700] = -scale;
    cases.push_back(x);
  }
  {
    auto x = base();  // +-FLT_MAX next to small values in the same blocks
    for (size_t i = 0; i < x.size(); i += 37) x[i] = i % 2 ? FLT_MAX : -FLT_MAX;
    cases.push_back(x);
  }
  {
    // Ties: amax 127 so x * 127 / amax = x, halves round to even.
    std::vector<float> x(1024);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 255) - 127) * 0.5f;
    for (size_t b = 0; b < x.size(); b += 32) x[b] = 127.0f;
    cases.push_back(x);
  }
  {
    std::vector<float> x(1024, 2.5f);  // constant blocks: every q is 127
    x[100] = -2.5f;
    cases.push_back(x);
  }
  {
    auto x = base();  // infinities: d = inf, q = 0 in their blocks
    x[10] = kInf;
    x[600] = -kInf;
    cases.push_back(x);
  }
  {
    auto x = base();  // NaN: d = NaN, q = 0 in its blocks
    x[33] = std::numeric_limits<float>::quiet_NaN();
    x[999] = -std::numeric_limits<float>::quiet_NaN();
    cases.push_back(x);
  }
  for (uint32_t seed = 0; seed < 8; ++seed) {
    auto x = test::gaussian(1024, 100 + seed, std::ldexp(1.0f, int(seed) * 9 - 36));
    cases.push_back(x);
  }
  return cases;
}

TEST(ActQuant, SimdEqualsTheScalarReferenceOnEveryTarget) {
  const auto cases = edge_inputs();
  for (ActFormat f : {ActFormat::kQ8x32, ActFormat::kQ8x256}) {
    const size_t bytes = kernels::act_row_bytes(f, 1024);
    for (size_t c = 0; c < cases.size(); ++c) {
      std::vector<uint8_t> want(bytes, 0xAB);
      kernels::quantize_act_scalar(f, cases[c].data(), 1024, want.data());
      test::for_each_simd_target([&](const std::string& target) {
        std::vector<uint8_t> got(bytes, 0xCD);  // pads must be written too
        kernels::quantize_act(f, cases[c].data(), 1024, got.data());
        ASSERT_EQ(got, want) << "case " << c << " format " << int(f) << " on " << target;
      });
    }
  }
}

// The 32-value blocks carry ggml's q8_0 scale: amax / 127 rounded to f16
// (subnormal f16 included), q from the unrounded 127 / amax; the 256-value
// blocks keep q8_K's f32 amax / 127. A scale past the f16 range stays f32.
TEST(ActQuant, ScalesAreGgmlsF16ForQ8x32AndF32ForQ8x256) {
  const float amaxes[] = {1.0f, 3.3f, 2.0e-5f, 1.0e-3f, 7.0e6f, 1.0e9f};
  for (const float amax : amaxes) {
    std::vector<float> x = test::gaussian(256, 7, amax / 4.0f);
    for (float& v : x) v = std::clamp(v, -amax / 2.0f, amax / 2.0f);
    for (size_t b = 0; b < x.size(); b += 32) x[b + 3] = b % 64 ? amax : -amax;
    const float step = amax / 127.0f;
    const float want32 = step <= 65504.0f ? f16_to_f32(f32_to_f16(step)) : step;
    if (amax == 3.3f || amax == 2.0e-5f) {
      ASSERT_NE(want32, step);  // the rounding is visible
    }
    test::for_each_simd_target([&](const std::string& target) {
      std::vector<uint8_t> b32(kernels::act_row_bytes(ActFormat::kQ8x32, 256));
      kernels::quantize_act(ActFormat::kQ8x32, x.data(), 256, b32.data());
      const auto* blk = reinterpret_cast<const kernels::ActBlock32*>(b32.data());
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(blk[i].d, want32) << "amax " << amax << " on " << target;
        ASSERT_EQ(std::abs(blk[i].q[3]), 127);  // q uses 127 / amax, not 1 / d
      }
      std::vector<uint8_t> b256(kernels::act_row_bytes(ActFormat::kQ8x256, 256));
      kernels::quantize_act(ActFormat::kQ8x256, x.data(), 256, b256.data());
      EXPECT_EQ(reinterpret_cast<const kernels::ActBlock256*>(b256.data())->d, step) << target;
    });
  }
}

TEST(ActQuant, NonFiniteBlocksHaveTheDocumentedForm) {
  std::vector<float> x = test::gaussian(64, 5);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[40] = kInf;
  std::vector<uint8_t> bytes(kernels::act_row_bytes(ActFormat::kQ8x32, 64));
  kernels::quantize_act(ActFormat::kQ8x32, x.data(), 64, bytes.data());
  const auto* b = reinterpret_cast<const kernels::ActBlock32*>(bytes.data());
  EXPECT_TRUE(std::isnan(b[0].d));
  EXPECT_EQ(b[1].d, kInf);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(b[i].sum, 0);
    for (int8_t q : b[i].q) EXPECT_EQ(q, 0);
  }
}

}  // namespace
}  // namespace tkv
