// The F16 and BF16 weights' prefill GEMM with AMX (tensor/kernels/gemm_amx.h):
// within its documented bound of the double-precision product and close to
// the f32 GEMM's error, a token's result independent of how many tokens the
// product has and of the thread count, and off under TURBOKV_AMX=0 (the
// setter) and TURBOKV_SIMD=avx2 (here: forcing the AVX2 target).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <vector>

#include "common/thread_pool.h"
#include "hwy/targets.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/gemm_amx.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// Every test runs with AMX preferred and skips where the CPU, the OS or the
// target lacks it.
class AmxGemm : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    before_ = test::set_kernel_switch(&KernelConfig::amx, true);
    if (!kernels::amx_gemm_active())
      GTEST_SKIP() << "no AMX-BF16 on this CPU or OS (target " << active_simd_target() << ")";
  }
  void TearDown() override { test::set_kernel_switch(&KernelConfig::amx, before_); }

 private:
  bool before_ = true;
};

using test::FloatProduct;
using test::make_float_product;
using test::max_relative_error;
using test::run_float_matmul;

TEST_P(AmxGemm, StaysWithinItsBoundAndNearTheF32Gemm) {
  // Partial row tiles and panels, column steps and chunks, token tiles and
  // pairs of them.
  for (const auto& [rows, cols, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {53, 37, 5}, {49, 300, 33}, {100, 2049, 64}, {13, 8192, 3}, {64, 256, 48}}) {
    const FloatProduct p =
        make_float_product(GetParam(), rows, cols, n, uint32_t(rows * 31 + cols));
    const std::vector<float> amx = run_float_matmul(p);
    test::set_kernel_switch(&KernelConfig::amx, false);
    const std::vector<float> f32 = run_float_matmul(p);
    test::set_kernel_switch(&KernelConfig::amx, true);
    const double amx_err = max_relative_error(p, amx), f32_err = max_relative_error(p, f32);
    EXPECT_LE(amx_err, amx_gemm_relative_bound(cols)) << rows << "x" << cols << " n=" << n;
    // What a product shows is the f32 GEMM's error: a left-out term (the
    // smallest kept one, w_hi x_3 or w_lo x_2, is up to 2^-16 of a product)
    // shows as several times it.
    EXPECT_LE(amx_err, 4 * f32_err + 0x1p-24) << rows << "x" << cols << " n=" << n;
  }
}

TEST_P(AmxGemm, TokenResultsDoNotDependOnTokenCountOrThreads) {
  const FloatProduct all = make_float_product(GetParam(), 97, 777, 512, 11);
  const std::vector<float> want = run_float_matmul(all, 1);
  EXPECT_EQ(run_float_matmul(all, 2), want);
  for (int64_t n = 1; n <= 40; ++n) {
    const FloatProduct some = test::first_tokens(all, n);
    for (const int threads : {1, 2}) {
      const std::vector<float> got = run_float_matmul(some, threads);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "n=" << n << " threads=" << threads << " element " << i;
    }
  }
}

// F16 row blocks (tensor/matmul.h) are read as AMX's B operand: the same
// bits as the rows, AMX's and not the f32 GEMM's, for partial column steps
// and chunks, one and several blocks and token tiles, and either thread
// count.
TEST_P(AmxGemm, RowBlocksGiveTheRowsBits) {
  if (GetParam() != DType::F16) GTEST_SKIP() << "row blocks are F16 only";
  const test::PreferRowBlocks prefer;
  for (const auto& [rows, cols, n] : std::vector<std::array<int64_t, 3>>{
           {16, 5, 1}, {48, 37, 17}, {32, 300, 33}, {112, 2049, 40}, {16, 8192, 3}}) {
    const FloatProduct p = make_float_product(DType::F16, rows, cols, n, uint32_t(rows + cols));
    std::vector<uint8_t> bytes = p.w;
    ThreadPool reorder_pool(2);
    const WeightMatrix b = to_row_blocks(make_weight(DType::F16, bytes.data(), rows, cols),
                                         bytes.data(), reorder_pool);
    test::set_kernel_switch(&KernelConfig::amx, false);
    const std::vector<float> f32 = run_float_matmul(p);
    test::set_kernel_switch(&KernelConfig::amx, true);
    for (const int threads : {1, 2}) {
      const std::vector<float> want = run_float_matmul(p, threads);
      ThreadPool pool(threads);
      std::vector<float> got(want.size(), -1.0f);
      matmul(b, p.x.data(), n, got.data(), pool, MatmulKernel::kFloat);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << rows << "x" << cols << " n=" << n << " threads=" << threads << " element " << i;
      if (cols >= 32) {
        EXPECT_NE(got, f32) << "AMX did not run: " << rows << "x" << cols;
      }
    }
  }
}

TEST_P(AmxGemm, TurnsOffWithTheSwitchAndOnOlderTargets) {
  test::set_kernel_switch(&KernelConfig::amx, false);  // TURBOKV_AMX=0
  EXPECT_FALSE(kernels::amx_gemm_active());
  test::set_kernel_switch(&KernelConfig::amx, true);
  hwy::SetSupportedTargetsForTest(HWY_AVX2);  // what TURBOKV_SIMD=avx2 does
  EXPECT_FALSE(kernels::amx_gemm_active());
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_TRUE(kernels::amx_gemm_active());
}

// Long batches are cut into calls of 512 tokens where the AMX kernel splits
// the weights per call, 256 where the weights are read in place.
TEST_P(AmxGemm, LongBatchesAreCutIntoCallsByKernel) {
  EXPECT_EQ(matmul_rows_per_call(GetParam()), 512);
  EXPECT_EQ(matmul_rows_per_call(DType::Q4_K), 256);
  EXPECT_EQ(matmul_rows_per_call(DType::F32), 256);
  test::set_kernel_switch(&KernelConfig::amx, false);
  EXPECT_EQ(matmul_rows_per_call(GetParam()), 256);
}

INSTANTIATE_TEST_SUITE_P(Types, AmxGemm, ::testing::Values(DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tkv
