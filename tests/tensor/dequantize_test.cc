// SIMD dequantization equals the scalar reference on every target; the
// quantizers round-trip within per-type error bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "common/error.h"
#include "hwy/targets.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// Values per test row: several blocks of every type (and an odd count for
// the float types, which have no blocks).
int64_t test_length(DType type) {
  const uint32_t bs = traits(type).block_size;
  return bs == 1 ? 1000 + 37 : int64_t(bs) * 7;
}

TEST(Dequantize, MatchesReferenceOnEveryTarget) {
  for (DType type : test::supported_types()) {
    const int64_t n = test_length(type);
    const auto bytes = test::random_block_bytes(type, 1, n, 1234 + uint32_t(type));
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    dequantize_row_ref(type, bytes.data(), want.data(), n);
    test::for_each_simd_target([&](const std::string& target) {
      std::fill(got.begin(), got.end(), -999.0f);
      dequantize_row(type, bytes.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(test::same_value(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]))
            << dtype_name(type) << " on " << target << " value " << i << ": "
            << got[static_cast<size_t>(i)] << " vs " << want[static_cast<size_t>(i)];
    });
  }
}

TEST(Dequantize, EveryCompiledTargetIsVisited) {
  // The loop must visit every target that the build compiled *and* this CPU
  // runs, and really switch between them. How many that is depends on the
  // build (the sanitized one compiles fewer) and the CPU: count them here
  // from Highway's two lists, independently of for_each_simd_target.
  std::vector<std::string> seen;
  test::for_each_simd_target([&](const std::string& target) {
    EXPECT_EQ(target, active_simd_target()) << "the kernels' dispatcher did not switch target";
    seen.push_back(target);
  });
  std::vector<std::string> expected;
  for (int64_t bits = HWY_TARGETS & hwy::SupportedTargets(); bits != 0; bits &= bits - 1)
    expected.push_back(hwy::TargetName(bits & -bits));
  std::string all;
  for (const auto& s : seen) all += s + " ";
  RecordProperty("simd_targets", all);
  std::cout << "SIMD targets tested: " << all << "\n";
  EXPECT_EQ(seen, expected) << all;
#if defined(__x86_64__)
  // Every x86-64 build compiles AVX2 and a portable fallback; a CPU from
  // AVX2 up therefore covers at least those two.
  if (hwy::SupportedTargets() & HWY_AVX2) {
    EXPECT_GE(seen.size(), 2u) << all;
    EXPECT_NE(std::find(seen.begin(), seen.end(), "AVX2"), seen.end()) << all;
  }
#endif
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_NE(seen[i], seen[i - 1]);
}

TEST(Dequantize, PartialBlockIsAnError) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> out(1024);
  try {
    dequantize_row(DType::Q4_K, bytes.data(), out.data(), 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row_ref(DType::Q8_0, bytes.data(), out.data(), 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_K, bytes.data(), out.data(), 256), Error);
}

// Relative RMS error of quantize -> dequantize on N(0, 1) data. The bounds
// sit about 1.5x above what each format's step size implies: e.g. Q8_0 steps
// by absmax/127 over 32 values (absmax ~2.1 sigma) -> rms step/sqrt(12)
// ~0.005; Q4_0 steps by absmax/8 -> ~0.08; Q6_K by absmax/32 over 16 values.
double rms_bound(DType type) {
  switch (type) {
    case DType::F32:
      return 0.0;
    case DType::F16:
      return 4e-4;
    case DType::BF16:
      return 2.5e-3;
    case DType::Q8_0:
      return 0.008;
    case DType::Q6_K:
      return 0.027;
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K:
      return 0.06;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q4_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return 0.12;
    case DType::MXFP4:
      // A power-of-two scale: the top level is 1.5 * 2^floor(log2 amax),
      // so values above it are clipped (up to amax / 4) and the steps are
      // coarser than a fitted scale's (measured 0.115).
      return 0.17;
    case DType::Q3_K:
      return 0.22;
    case DType::Q2_K:
      return 0.45;
    default:
      return 0.0;
  }
}

TEST(Quantize, RoundTripErrorWithinBounds) {
  for (DType type : test::supported_types()) {
    const int64_t n = 256 * 64;
    const auto x = test::gaussian(static_cast<size_t>(n), 99);
    std::vector<uint8_t> q(row_bytes(type, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(type, x.data(), q.data(), n);
    dequantize_row_ref(type, q.data(), y.data(), n);
    double err2 = 0, x2 = 0, max_err = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = double(y[static_cast<size_t>(i)]) - double(x[static_cast<size_t>(i)]);
      err2 += e * e;
      x2 += double(x[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      max_err = std::max(max_err, std::fabs(e));
    }
    const double rel = std::sqrt(err2 / x2);
    EXPECT_LE(rel, rms_bound(type)) << dtype_name(type);
    // No single value is far off either (a few steps at most).
    EXPECT_LE(max_err, 6 * rms_bound(type) + 1e-12) << dtype_name(type);
    // A quantizer that wrote zeros would fail the bound; make sure the
    // format actually carries the data (not a degenerate all-equal output).
    EXPECT_GT(std::fabs(y[0] - y[1]) + std::fabs(y[2] - y[3]), 0.0) << dtype_name(type);
  }
}

TEST(Quantize, Q4_0AndQ8_0AreExactOnTheirOwnGrid) {
  // Values already on the Q4_0 grid (max magnitude maps to -8) survive exactly,
  // as with ggml's reference quantizer.
  std::vector<float> x(64), y(64);
  for (int j = 0; j < 64; ++j) x[static_cast<size_t>(j)] = float(j % 16 - 8) * 0.5f;
  std::vector<uint8_t> q(row_bytes(DType::Q4_0, 64));
  quantize_row(DType::Q4_0, x.data(), q.data(), 64);
  dequantize_row(DType::Q4_0, q.data(), y.data(), 64);
  EXPECT_EQ(x, y);
  for (int j = 0; j < 64; ++j) x[static_cast<size_t>(j)] = float((j % 32) * 8 - 127) * 0.25f;
  q.resize(row_bytes(DType::Q8_0, 64));
  quantize_row(DType::Q8_0, x.data(), q.data(), 64);
  dequantize_row(DType::Q8_0, q.data(), y.data(), 64);
  EXPECT_EQ(x, y);
}

TEST(Quantize, ZeroRowsStayZero) {
  for (DType type : test::supported_types()) {
    const int64_t n = 512;
    std::vector<float> x(static_cast<size_t>(n), 0.0f), y(static_cast<size_t>(n), 1.0f);
    std::vector<uint8_t> q(row_bytes(type, n));
    quantize_row(type, x.data(), q.data(), n);
    dequantize_row(type, q.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(type);
  }
}

}  // namespace
}  // namespace tkv
