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
#include "tensor/kernel_config.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// Every test runs with the bf16 GEMM preferred (on Intel it is off by
// default, kernel_config.h) and AMX off, and skips where the CPU or target lacks it.
class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = test::set_kernel_switch(&KernelConfig::bf16_dot, KernelChoice::kOn);
    amx_before_ =
        test::set_kernel_switch(&KernelConfig::amx, false);  // AMX would take BF16 weights first
    if (!kernels::bf16_dot_gemm_active())
      GTEST_SKIP() << "no AVX512-BF16 on this CPU (target " << active_simd_target() << ")";
  }
  void TearDown() override {
    test::set_kernel_switch(&KernelConfig::bf16_dot, before_);
    test::set_kernel_switch(&KernelConfig::amx, amx_before_);
  }

 private:
  KernelChoice before_ = KernelChoice::kAuto;
  bool amx_before_ = true;
};

using test::FloatProduct;
using test::max_relative_error;
using test::run_float_matmul;

FloatProduct make_product(int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
  return test::make_float_product(DType::BF16, rows, cols, n, seed);
}

// The activations rounded to bf16 (the double-precision product of these is
// what the kernel's f32 sums approach).
std::vector<float> rounded_to_bf16(const std::vector<float>& x) {
  std::vector<float> r = x;
  for (float& v : r) v = bf16_to_f32(f32_to_bf16(v));
  return r;
}

TEST_F(Bf16Gemm, StaysWithinTheBf16RoundingBound) {
  // Odd and partial-chunk column counts, partial row panels and token tiles.
  for (const auto& [rows, cols, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {53, 37, 5}, {49, 300, 33}, {100, 2049, 64}, {13, 8192, 3}}) {
    const FloatProduct p = make_product(rows, cols, n, uint32_t(rows * 31 + cols));
    const std::vector<float> y = run_float_matmul(p);
    EXPECT_LE(max_relative_error(p, y), kBf16GemmRelativeBound) << rows << "x" << cols;
    // Of the rounded activations only the f32 sums remain: a lost or doubled
    // pair (a relative 1 / cols) shows here.
    EXPECT_LE(max_relative_error(p, y, rounded_to_bf16(p.x)), kBf16GemmRelativeBound - 0x1p-8)
        << rows << "x" << cols << " n=" << n;
  }
}

TEST_F(Bf16Gemm, DiffersFromTheForcedF32GemmWhichKeepsItsBound) {
  const FloatProduct p = make_product(61, 1000, 40, 7);
  const std::vector<float> native = run_float_matmul(p);
  hwy::SetSupportedTargetsForTest(HWY_AVX2);  // what TURBOKV_SIMD=avx2 does
  EXPECT_FALSE(kernels::bf16_dot_gemm_active());
  const std::vector<float> forced = run_float_matmul(p);
  hwy::SetSupportedTargetsForTest(0);
  ASSERT_TRUE(kernels::bf16_dot_gemm_active());
  test::set_kernel_switch(&KernelConfig::bf16_dot,
                          KernelChoice::kOff);  // TURBOKV_BF16_DOT=0, same target
  EXPECT_FALSE(kernels::bf16_dot_gemm_active());
  const std::vector<float> unpreferred = run_float_matmul(p);
  test::set_kernel_switch(&KernelConfig::bf16_dot, KernelChoice::kOn);
  EXPECT_LE(max_relative_error(p, forced), 1e-5);
  EXPECT_LE(max_relative_error(p, unpreferred), 1e-5);
  // The bf16 rounding of the activations shows: gaussian x are not bf16.
  EXPECT_NE(native, forced);
  EXPECT_GT(max_relative_error(p, native), 1e-5);
  EXPECT_LE(max_relative_error(p, native), kBf16GemmRelativeBound);
}

TEST_F(Bf16Gemm, TokenResultsDoNotDependOnTokenCountOrThreads) {
  const FloatProduct all = make_product(97, 777, 70, 11);
  const std::vector<float> want = run_float_matmul(all, 1);
  for (const int64_t n : {1, 2, 17, 31, 32, 33, 64}) {
    const FloatProduct some = test::first_tokens(all, n);
    for (const int threads : {1, 3}) {
      const std::vector<float> got = run_float_matmul(some, threads);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "n=" << n << " threads=" << threads << " element " << i;
    }
  }
}

TEST_F(Bf16Gemm, DecodeKeepsTheExactF32Path) {
  // matvec and matvec_batch never round activations: within the f32 bound.
  const FloatProduct p = make_product(45, 520, 3, 17);
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
