// The BF16 weights' prefill GEMM with vdpbf16ps (tensor/kernels/gemm_bf16.h):
// within its documented bound of the double-precision product (activations
// rounded to bf16), different from the f32 GEMM that TURBOKV_SIMD=avx2 (here:
// forcing the AVX2 target) and TURBOKV_BF16_DOT=0 keep, a token's result
// independent of how many tokens the product has and of the thread count,
// and decode (matvec, matvec_batch) untouched by it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "hwy/targets.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// Every test runs with the bf16 GEMM preferred (on Intel it is off by
// default, cpu_features.h) and AMX off, and skips where the CPU or target lacks it.
class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = kernels::bf16_dot_preferred();
    amx_before_ = kernels::amx_preferred();
    kernels::set_bf16_dot_preferred(true);
    kernels::set_amx_preferred(false);  // AMX would take BF16 weights first
    if (!kernels::bf16_dot_gemm_active())
      GTEST_SKIP() << "no AVX512-BF16 on this CPU (target " << active_simd_target() << ")";
  }
  void TearDown() override {
    kernels::set_bf16_dot_preferred(before_);
    kernels::set_amx_preferred(amx_before_);
  }

 private:
  bool before_ = false, amx_before_ = true;
};

struct Product {
  int64_t rows, cols, n;
  std::vector<uint8_t> w;
  std::vector<float> x;
};

Product make_product(int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
  return {rows, cols, n, test::random_weights(DType::BF16, rows, cols, seed),
          test::gaussian(size_t(n * cols), seed + 1)};
}

std::vector<float> run(const Product& p, int threads = 2) {
  ThreadPool pool(threads);
  const WeightMatrix w = make_weight(DType::BF16, p.w.data(), p.rows, p.cols, "bf16");
  std::vector<float> y(size_t(p.rows * p.n), -1.0f);
  matmul(w, p.x.data(), p.n, y.data(), pool, MatmulKernel::kFloat);
  return y;
}

// Largest |y - y_exact| / sum_k |w_k x_k| over the outputs (y_exact: the
// double-precision product of the activations, rounded to bf16 first with
// round_x).
double max_relative_error(const Product& p, const std::vector<float>& y, bool round_x = false) {
  std::vector<float> want(size_t(p.rows * p.n)), row(size_t(p.cols)), x = p.x;
  if (round_x)
    for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
  matmul_ref(DType::BF16, p.w.data(), p.rows, p.cols, x.data(), p.n, want.data());
  const size_t rb = row_bytes(DType::BF16, p.cols);
  double worst = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    dequantize_row_ref(DType::BF16, p.w.data() + size_t(r) * rb, row.data(), p.cols);
    for (int64_t i = 0; i < p.n; ++i) {
      const double mag = test::abs_dot(row.data(), p.x.data() + i * p.cols, p.cols) + 1e-30;
      const size_t at = size_t(i * p.rows + r);
      worst = std::max(worst, std::fabs(double(y[at]) - double(want[at])) / mag);
    }
  }
  return worst;
}

TEST_F(Bf16Gemm, StaysWithinTheBf16RoundingBound) {
  // Odd and partial-chunk column counts, partial row panels and token tiles.
  for (const auto& [rows, cols, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {53, 37, 5}, {49, 300, 33}, {100, 2049, 64}, {13, 8192, 3}}) {
    const Product p = make_product(rows, cols, n, uint32_t(rows * 31 + cols));
    const std::vector<float> y = run(p);
    EXPECT_LE(max_relative_error(p, y), kBf16GemmRelativeBound) << rows << "x" << cols;
    // Of the rounded activations only the f32 sums remain: a lost or doubled
    // pair (a relative 1 / cols) shows here.
    EXPECT_LE(max_relative_error(p, y, true), kBf16GemmRelativeBound - 0x1p-8)
        << rows << "x" << cols << " n=" << n;
  }
}

TEST_F(Bf16Gemm, DiffersFromTheForcedF32GemmWhichKeepsItsBound) {
  const Product p = make_product(61, 1000, 40, 7);
  const std::vector<float> native = run(p);
  hwy::SetSupportedTargetsForTest(HWY_AVX2);  // what TURBOKV_SIMD=avx2 does
  EXPECT_FALSE(kernels::bf16_dot_gemm_active());
  const std::vector<float> forced = run(p);
  hwy::SetSupportedTargetsForTest(0);
  ASSERT_TRUE(kernels::bf16_dot_gemm_active());
  kernels::set_bf16_dot_preferred(false);  // TURBOKV_BF16_DOT=0, same target
  EXPECT_FALSE(kernels::bf16_dot_gemm_active());
  const std::vector<float> unpreferred = run(p);
  kernels::set_bf16_dot_preferred(true);
  EXPECT_LE(max_relative_error(p, forced), 1e-5);
  EXPECT_LE(max_relative_error(p, unpreferred), 1e-5);
  // The bf16 rounding of the activations shows: gaussian x are not bf16.
  EXPECT_NE(native, forced);
  EXPECT_GT(max_relative_error(p, native), 1e-5);
  EXPECT_LE(max_relative_error(p, native), kBf16GemmRelativeBound);
}

TEST_F(Bf16Gemm, TokenResultsDoNotDependOnTokenCountOrThreads) {
  const Product all = make_product(97, 777, 70, 11);
  const std::vector<float> want = run(all, 1);
  for (const int64_t n : {1, 2, 17, 31, 32, 33, 64}) {
    Product some = all;
    some.n = n;
    some.x.resize(size_t(n * all.cols));
    for (const int threads : {1, 3}) {
      const std::vector<float> got = run(some, threads);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "n=" << n << " threads=" << threads << " element " << i;
    }
  }
}

TEST_F(Bf16Gemm, DecodeKeepsTheExactF32Path) {
  // matvec and matvec_batch never round activations: within the f32 bound.
  const Product p = make_product(45, 520, 3, 17);
  ThreadPool pool(2);
  const WeightMatrix w = make_weight(DType::BF16, p.w.data(), p.rows, p.cols, "bf16");
  std::vector<float> batch(size_t(p.rows * p.n)), one(size_t(p.rows * p.n));
  matvec_batch(w, p.x.data(), p.n, batch.data(), pool);
  for (int64_t i = 0; i < p.n; ++i)
    matvec(w, p.x.data() + i * p.cols, one.data() + i * p.rows, pool);
  EXPECT_EQ(batch, one);
  EXPECT_LE(max_relative_error(p, one), 1e-5);
}

}  // namespace
}  // namespace tkv
