// The weight kernels' cache-line arithmetic (tensor/kernels/line_span.h),
// and their results on weights that start 32 bytes past a cache line, where
// a mapped GGUF file with the default 32-byte alignment puts them.
#include "tensor/kernels/line_span.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/matmul.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

TEST(LineSpan, CoversEveryLineOfTheRangeAndNoOther) {
  alignas(64) static uint8_t buf[1024];
  for (size_t off = 0; off < 130; ++off) {
    for (size_t bytes :
         {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(256), size_t(512)}) {
      const uint8_t* p = buf + off;
      std::set<uintptr_t> want;
      for (size_t i = 0; i < bytes; ++i) want.insert(reinterpret_cast<uintptr_t>(p + i) / 64);
      const kernels::LineSpan s = kernels::line_span(p, bytes);
      ASSERT_EQ(s.lines, want.size()) << "offset " << off << ", " << bytes << " bytes";
      ASSERT_LE(s.lines, kernels::max_lines(bytes));
      if (bytes == 0) continue;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(s.first) % 64, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(s.first) / 64, *want.begin());
    }
  }
}

// The prefill GEMM and the batched decode read the same bits from weights 32
// bytes past a line as from the same weights on a line: their prefetch and
// loads follow the rows wherever they start.
TEST(LineSpan, KernelsGiveTheSameResultsOnWeightsStartingMidLine) {
  ThreadPool pool(2);
  for (DType type : {DType::F16, DType::BF16, DType::F32, DType::Q8_0, DType::Q4_K}) {
    const int64_t rows = 200, cols = 1024;
    const auto wb = test::random_weights(type, rows, cols, 31);
    std::vector<uint8_t> storage(wb.size() + 128);
    uint8_t* aligned = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64);
    uint8_t* mid_line = aligned + 32;
    const WeightMatrix on_line = make_weight(type, aligned, rows, cols, "on_line");
    const WeightMatrix off_line = make_weight(type, mid_line, rows, cols, "mid_line");
    for (int64_t n : {int64_t(8), int64_t(48)}) {
      const auto x = test::gaussian(size_t(n * cols), 32);
      std::vector<float> want(size_t(n * rows)), got(size_t(n * rows));
      std::memcpy(aligned, wb.data(), wb.size());
      if (n == 8)
        matvec_batch(on_line, x.data(), n, want.data(), pool);
      else
        matmul(on_line, x.data(), n, want.data(), pool);
      std::memmove(mid_line, aligned, wb.size());
      if (n == 8)
        matvec_batch(off_line, x.data(), n, got.data(), pool);
      else
        matmul(off_line, x.data(), n, got.data(), pool);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << dtype_name(type) << ", n = " << n;
    }
  }
}

}  // namespace
}  // namespace tkv
