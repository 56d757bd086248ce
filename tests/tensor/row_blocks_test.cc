// F16 weights as row blocks (tensor/matmul.h, RowLayout::kRowBlocks16): the
// reordering keeps every value where the layout says, matvec and
// matvec_batch on the blocks give, token by token, the bits of the f32 GEMM
// on the same matrix's rows, and matmul on the blocks the bits of matmul on
// the rows (the f32 GEMM, or AMX where it runs), on every SIMD target, for
// every column count (partial 256-column chunks and 32-column AMX steps,
// fewer columns than a vector), block count (whole and partial tiles of
// blocks, several tasks), token count (whole and partial token tiles) and
// thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/kernel_config.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// The matrix's bytes reordered into row blocks (a copy; the rows stay).
struct Blocks {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};
Blocks reorder(const std::vector<uint8_t>& rows, int64_t n_rows, int64_t cols) {
  Blocks b{rows, {}};
  const WeightMatrix w = make_weight(DType::F16, b.bytes.data(), n_rows, cols, "blocks");
  ThreadPool pool(2);
  b.w = to_row_blocks(w, b.bytes.data(), pool);
  return b;
}

TEST(RowBlocks, OnlyF16MatricesOfWholeBlocksAreReordered) {
  const test::PreferRowBlocks prefer;
  const auto f16 = test::random_weights(DType::F16, 48, 64, 1);
  const auto f32 = test::random_weights(DType::F32, 48, 64, 1);
  const auto bf16 = test::random_weights(DType::BF16, 48, 64, 1);
  EXPECT_TRUE(row_blocks_pay_off(make_weight(DType::F16, f16.data(), 48, 64)));
  EXPECT_FALSE(row_blocks_pay_off(make_weight(DType::F16, f16.data(), 40, 64)));
  EXPECT_FALSE(row_blocks_pay_off(make_weight(DType::F32, f32.data(), 48, 64)));
  EXPECT_FALSE(row_blocks_pay_off(make_weight(DType::BF16, bf16.data(), 48, 64)));
  test::set_kernel_switch(&KernelConfig::row_blocks, KernelChoice::kOff);
  EXPECT_FALSE(row_blocks_pay_off(make_weight(DType::F16, f16.data(), 48, 64)));
}

TEST(RowBlocks, ReorderingPutsEveryValueWhereTheLayoutSays) {
  const test::PreferRowBlocks prefer;
  constexpr int64_t kRows = 48, kCols = 37;
  const auto rows = test::random_weights(DType::F16, kRows, kCols, 5);
  const Blocks b = reorder(rows, kRows, kCols);
  EXPECT_EQ(b.w.layout, RowLayout::kRowBlocks16);
  uint16_t got = 0, want = 0;
  std::vector<float> row(kCols), from_blocks(kCols);
  const WeightMatrix w = make_weight(DType::F16, rows.data(), kRows, kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kCols; ++k) {
      std::memcpy(&got, b.bytes.data() + ((r / 16 * kCols + k) * 16 + r % 16) * 2, 2);
      std::memcpy(&want, rows.data() + (r * kCols + k) * 2, 2);
      ASSERT_EQ(got, want) << "row " << r << " column " << k;
    }
    weight_row(w, r, row.data());
    weight_row(b.w, r, from_blocks.data());
    ASSERT_EQ(from_blocks, row) << "row " << r;
  }
}

void expect_blocks_equal_gemm_on_rows(int64_t n_rows, int64_t cols,
                                      const std::vector<int64_t>& batch_sizes) {
  const test::PreferRowBlocks prefer;
  const uint32_t seed = uint32_t(n_rows * 7 + cols);
  const auto rows = test::random_weights(DType::F16, n_rows, cols, seed);
  const WeightMatrix w = make_weight(DType::F16, rows.data(), n_rows, cols, "rows");
  int64_t n_max = 0;
  for (int64_t n : batch_sizes) n_max = std::max(n_max, n);
  const auto x = test::gaussian(size_t(n_max * cols), seed + 1);
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    test::for_each_simd_target([&](const std::string& target) {
      const Blocks b = reorder(rows, n_rows, cols);
      // want: the f32 GEMM's bits, the exact kernels' order; gemm: matmul's
      // on this target (AMX's where it runs).
      std::vector<float> want(size_t(n_max * n_rows)), gemm(want.size());
      matmul(w, x.data(), n_max, gemm.data(), pool, MatmulKernel::kFloat);
      const bool amx = test::set_kernel_switch(&KernelConfig::amx, false);
      matmul(w, x.data(), n_max, want.data(), pool, MatmulKernel::kFloat);
      test::set_kernel_switch(&KernelConfig::amx, amx);
      const auto where = [&](int64_t n, int64_t t) {
        return "F16 " + std::to_string(n_rows) + "x" + std::to_string(cols) +
               " n=" + std::to_string(n) + " token " + std::to_string(t) + " threads " +
               std::to_string(threads) + " on " + target;
      };
      // Token t's outputs in a product of several tokens.
      const auto token = [&](const std::vector<float>& v, int64_t t) {
        return std::span<const float>(v.data() + t * n_rows, size_t(n_rows));
      };
      std::vector<float> one(static_cast<size_t>(n_rows));
      for (int64_t t = 0; t < n_max; ++t) {
        matvec(b.w, x.data() + t * cols, one.data(), pool);
        ASSERT_TRUE(test::same_bits(one, token(want, t))) << "matvec " << where(1, t);
      }
      for (int64_t n : batch_sizes) {
        std::vector<float> y(size_t(n * n_rows), -1.0f), z(size_t(n * n_rows), -1.0f);
        matvec_batch(b.w, x.data(), n, y.data(), pool);
        matmul(b.w, x.data(), n, z.data(), pool);
        for (int64_t t = 0; t < n; ++t) {
          ASSERT_TRUE(test::same_bits(token(y, t), token(want, t)))
              << "matvec_batch " << where(n, t);
          ASSERT_TRUE(test::same_bits(token(z, t), token(gemm, t))) << "matmul " << where(n, t);
        }
      }
    });
  }
}

TEST(RowBlocks, ProductsEqualTheGemmOnTheRowsForEveryShapeAndTarget) {
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 6, 7, 8, 9, 12, 17, 31};
  // 5: fewer columns than a vector; 256: one whole chunk; 300 and 2083:
  // partial chunks; 16 rows: one block; 48, 80: tiles of 3 blocks whole and
  // partial; 176: several tasks with two threads.
  for (const int64_t cols : {5, 256, 300, 2083}) expect_blocks_equal_gemm_on_rows(48, cols, sizes);
  expect_blocks_equal_gemm_on_rows(16, 300, {1, 8, 9});
  expect_blocks_equal_gemm_on_rows(80, 256, {1, 4, 8});
  expect_blocks_equal_gemm_on_rows(176, 1061, {1, 8, 40});
}

TEST(RowBlocks, LongRowsEqualTheGemmOnTheRows) {
  // 8192 columns (llama's FFN down projection) over two threads' tasks,
  // prefill-sized token counts through the GEMM on blocks.
  expect_blocks_equal_gemm_on_rows(64, 8192, {1, 8, 16, 61});
}

}  // namespace
}  // namespace tkv
