// matvec_batch on float weights (F32/F16/BF16, and a few quantized types
// for which it is the integer path or per-token matvec): token t of the batch is
// bit-identical to matvec(x_t) on every SIMD target, for every column count
// (whole column chunks, a partial chunk, an odd number of vectors, a scalar
// tail), row count (whole and partial register tiles and row panels), batch
// size (whole and partial token tiles and token groups) and thread count.
// This is the batch invariance of batched decode: a sequence's logits must
// not depend on what else is in its batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

void expect_batch_equals_matvec(DType type, int64_t rows, int64_t cols,
                                const std::vector<int64_t>& batch_sizes) {
  const uint32_t seed = uint32_t(type) * 131 + uint32_t(rows * 7 + cols);
  const auto wb = test::random_weights(type, rows, cols, seed);
  const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "batch");
  int64_t n_max = 0;
  for (int64_t n : batch_sizes) n_max = std::max(n_max, n);
  const auto x = test::gaussian(size_t(n_max * cols), seed + 1);
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    test::for_each_simd_target([&](const std::string& target) {
      std::vector<float> want(size_t(n_max * rows));
      for (int64_t t = 0; t < n_max; ++t)
        matvec(w, x.data() + t * cols, want.data() + t * rows, pool);
      for (int64_t n : batch_sizes) {
        std::vector<float> y(size_t(n * rows), -1.0f);
        matvec_batch(w, x.data(), n, y.data(), pool);
        for (int64_t t = 0; t < n; ++t)
          ASSERT_TRUE(
              test::same_bits(std::span<const float>(y).subspan(size_t(t * rows), size_t(rows)),
                              std::span<const float>(want).subspan(size_t(t * rows), size_t(rows))))
              << dtype_name(type) << " " << rows << "x" << cols << " n=" << n << " token " << t
              << " threads " << threads << " on " << target;
      }
    });
  }
}

TEST(MatvecBatch, FloatTokensEqualMatvecForEveryShapeAndTarget) {
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 24, 31};
  for (const DType type : {DType::F32, DType::F16, DType::BF16}) {
    // 5, 37: shorter than a vector or a scalar tail; 300: one partial chunk;
    // 528 = 33 AVX-512 vectors (an odd count: the last goes to chain 0);
    // 2083: several chunks, a partial one and a tail.
    for (const int64_t cols : {5, 37, 300, 528, 2083})
      expect_batch_equals_matvec(type, 37, cols, sizes);
    // 1 row; rows that fill whole panels.
    expect_batch_equals_matvec(type, 1, 300, {1, 8, 9});
    expect_batch_equals_matvec(type, 64, 256, {8, 16, 19});
  }
}

TEST(MatvecBatch, ManyFloatTokensEqualMatvec) {
  // Prefill-sized batches: several token groups, a partial last group and
  // partial token tiles, with partial row panels and a column tail.
  for (const DType type : {DType::F32, DType::F16, DType::BF16})
    expect_batch_equals_matvec(type, 45, 1061, {40, 64, 101});
}

TEST(MatvecBatch, LongFloatRowsEqualMatvec) {
  // 8192 columns (llama's FFN down projection) across two threads' tasks;
  // 40 and 61 tokens span more than one token block (the packed activations
  // of 24 tokens on AVX-512, 30 on AVX2, fill the kernel's L2 share).
  for (const DType type : {DType::F16, DType::BF16})
    expect_batch_equals_matvec(type, 40, 8192, {8, 16, 40, 61});
}

TEST(MatvecBatch, QuantizedTokensEqualMatvec) {
  // The 4-bit types with 32-value blocks and a level table (MXFP4's rows of
  // 17-byte blocks start at odd offsets): the integer path on x86, one
  // matvec per token elsewhere; either way matvec's bits.
  for (const DType type : {DType::Q4_0, DType::IQ4_NL, DType::MXFP4})
    expect_batch_equals_matvec(type, 37, 160, {1, 2, 5, 8, 9, 16});
}

TEST(MatvecBatch, ZeroTokensWriteNothingAndNegativeCountsAreErrors) {
  const auto wb = test::random_weights(DType::F16, 4, 64, 3);
  const WeightMatrix w = make_weight(DType::F16, wb.data(), 4, 64, "batch");
  ThreadPool pool(1);
  std::vector<float> x(64), y(4, -1.0f);
  matvec_batch(w, x.data(), 0, y.data(), pool);
  EXPECT_EQ(y, std::vector<float>(4, -1.0f));
  EXPECT_THROW(matvec_batch(w, x.data(), -1, y.data(), pool), Error);
}

}  // namespace
}  // namespace tkv
