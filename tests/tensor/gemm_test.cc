// The f32 prefill GEMM (tensor/kernels/gemm.cc) on matrices tall enough that
// a task holds several weight panels: a token's results must not depend on
// the token count, the thread count (which changes the panels per task) or
// a last panel shorter than the others, on every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// The prefill GEMMs' packed operands and accumulators are scratch the
// engine reports (activation_scratch_bytes, per calling thread): every one
// (f32 GEMM, AMX, BF16 dot) packs at least n x K f32 or 2 x n x K bf16 values.
TEST(Gemm, PackedOperandsAreAccountedToTheCallingThread) {
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t rows = 64, cols = 1024, n = 48;
    const auto wb = test::random_weights(type, rows, cols, 90);
    const auto x = test::gaussian(size_t(n * cols), 91);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "scratch");
    std::vector<float> y(size_t(n * rows));
    size_t before = 0, after = 0;
    // A fresh thread: its scratch starts empty.
    std::thread([&] {
      ThreadPool pool(2);
      before = activation_scratch_bytes();
      matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kFloat);
      after = activation_scratch_bytes();
    }).join();
    EXPECT_EQ(before, 0u) << dtype_name(type);
    EXPECT_GE(after, size_t(n * cols) * sizeof(float)) << dtype_name(type);
  }
}

TEST(Gemm, ManyPanelsPerTaskKeepEachTokensBits) {
  // 1000 rows: dozens of panels, the last one partial; 768 columns: three
  // chunks, so the next-chunk prefetch crosses chunks and panels.
  const int64_t rows = 1000, cols = 768, n = 40;
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_K}) {
    const auto wb = test::random_weights(type, rows, cols, 31 + uint32_t(type));
    const auto x = test::gaussian(static_cast<size_t>(n * cols), 32);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "gemm");
    std::vector<float> ref(static_cast<size_t>(n * rows));
    matmul_ref(type, wb.data(), rows, cols, x.data(), n, ref.data());
    test::for_each_simd_target([&](const std::string& target) {
      const std::string what = str(dtype_name(type), " on ", target);
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> all(static_cast<size_t>(n * rows)), some(static_cast<size_t>(5 * rows));
        matmul(w, x.data(), n, all.data(), pool, MatmulKernel::kFloat);
        matmul(w, x.data(), 5, some.data(), pool, MatmulKernel::kFloat);
        for (size_t i = 0; i < some.size(); ++i)
          ASSERT_EQ(some[i], all[i]) << what << ", " << threads << " threads, element " << i;
        if (first.empty()) {
          first = all;
          // Loose: the accuracy contract itself is matmul_test's.
          for (size_t i = 0; i < all.size(); ++i)
            ASSERT_NEAR(all[i], ref[i], 1e-3 * (1 + std::fabs(ref[i]))) << what << " element " << i;
        }
        ASSERT_EQ(all, first) << what << ", " << threads << " threads";
      }
    });
  }
}

TEST(Gemm, ShortLastPanelsAndOddTokenCountsKeepEachTokensBits) {
  // 97 rows: one row past 96 (4 row tiles of 24 on AVX2, 2 of 48 on
  // AVX-512), so the last panel holds a single row and skips its empty row
  // tiles; 5 rows: one partial panel, fewer rows than a row tile; 3 threads
  // on 5 rows: more threads than panels. The tasks are cut evenly for each
  // thread count; no cut may change a bit.
  const int64_t cols = 96;
  for (DType type : {DType::F16, DType::Q8_0}) {
    for (int64_t rows : {5, 97}) {
      const auto wb = test::random_weights(type, rows, cols, 7 + uint32_t(rows));
      const int64_t n_max = 40;
      const auto x = test::gaussian(static_cast<size_t>(n_max * cols), 8);
      const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "gemm");
      std::vector<float> ref(static_cast<size_t>(n_max * rows));
      matmul_ref(type, wb.data(), rows, cols, x.data(), n_max, ref.data());
      test::for_each_simd_target([&](const std::string& target) {
        const std::string what = str(dtype_name(type), " ", rows, " rows on ", target);
        std::vector<float> first;
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> all(static_cast<size_t>(n_max * rows));
          matmul(w, x.data(), n_max, all.data(), pool, MatmulKernel::kFloat);
          for (size_t i = 0; i < all.size(); ++i)
            ASSERT_NEAR(all[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << what << " element " << i;
          if (first.empty()) first = all;
          ASSERT_EQ(all, first) << what << ", " << threads << " threads";
          for (int64_t n : {1, 17, 33}) {
            std::vector<float> some(static_cast<size_t>(n * rows));
            matmul(w, x.data(), n, some.data(), pool, MatmulKernel::kFloat);
            for (size_t i = 0; i < some.size(); ++i)
              ASSERT_EQ(some[i], all[i])
                  << what << ", n = " << n << ", " << threads << " threads, element " << i;
          }
        }
      });
    }
  }
}

TEST(Gemm, ColumnAndTokenTailsAreTransposedInPlace) {
  // The activations go into token tiles through 8 x 8 register transposes
  // where 256-bit vectors exist, the rest by a scalar copy: columns past a
  // multiple of 8 (1027, 13) and tokens past a multiple of 8 in a tile
  // (45 = 32 + 8 + 5 with 32-token tiles, 16 + 16 + 8 + 5 with 16). A value
  // moved to the wrong place would be far off the reference.
  for (int64_t cols : {1027, 13}) {
    const int64_t rows = 30, n = 45;
    const auto wb = test::random_weights(DType::F32, rows, cols, 51 + uint32_t(cols));
    const auto x = test::gaussian(static_cast<size_t>(n * cols), 52);
    const WeightMatrix w = make_weight(DType::F32, wb.data(), rows, cols, "gemm");
    std::vector<float> ref(static_cast<size_t>(n * rows));
    matmul_ref(DType::F32, wb.data(), rows, cols, x.data(), n, ref.data());
    test::for_each_simd_target([&](const std::string& target) {
      ThreadPool pool(2);
      std::vector<float> all(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));
      matmul(w, x.data(), n, all.data(), pool, MatmulKernel::kFloat);
      for (size_t i = 0; i < all.size(); ++i)
        ASSERT_NEAR(all[i], ref[i], 1e-4 * (1 + std::fabs(ref[i])))
            << cols << " columns on " << target << ", element " << i;
      // The last token alone: the tail of its tile in both cases.
      matmul(w, x.data() + (n - 1) * cols, 1, one.data(), pool, MatmulKernel::kFloat);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(one[size_t(r)], all[size_t((n - 1) * rows + r)])
            << cols << " columns on " << target << ", row " << r;
    });
  }
}

}  // namespace
}  // namespace tkv
