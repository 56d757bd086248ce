// The integer-dot path (kernels_int.cc): activation quantization, exactness
// where the arithmetic is exact, and batch invariance (a token's outputs are
// bit-identical in matvec and in any matmul batch, for any thread count).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/blocks.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/gemm_q4k_avx2.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

using kernels::ActBlock256;
using kernels::ActBlock32;
using kernels::ActFormat;

std::vector<DType> int_types() {
  std::vector<DType> out;
  for (DType t : test::supported_types())
    if (kernels::act_format(t) != ActFormat::kNone) out.push_back(t);
  return out;
}

// The integer kernels' matvec, one token at a time: the bits every
// prefill tile must give.
std::vector<float> token_by_token(const WeightMatrix& w, const std::vector<float>& x, int64_t n,
                                  ThreadPool& pool) {
  std::vector<float> y(size_t(n * w.rows));
  for (int64_t t = 0; t < n; ++t)
    matmul(w, x.data() + t * w.cols, 1, y.data() + t * w.rows, pool, MatmulKernel::kInteger);
  return y;
}

TEST(IntDot, TheMostUsedTypesHaveAnIntegerKernel) {
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q4_0})
    EXPECT_NE(kernels::act_format(t), ActFormat::kNone) << dtype_name(t);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    EXPECT_EQ(kernels::act_format(t), ActFormat::kNone) << dtype_name(t);
  EXPECT_EQ(quantized_activation_bytes(DType::Q4_K, 512, 3), 3 * 2 * sizeof(ActBlock256));
  EXPECT_EQ(quantized_activation_bytes(DType::Q8_0, 64, 1), 2 * sizeof(ActBlock32));
  EXPECT_EQ(quantized_activation_bytes(DType::F16, 64, 1), 0u);
}

// |x - d q| <= d / 2, q in [-127, 127], d = amax / 127, the block sums, and
// the same bytes on every target.
template <class Block>
void check_blocks(const std::vector<float>& x, const std::vector<uint8_t>& bytes) {
  constexpr int K = Block::kValues;
  for (size_t b = 0; b < x.size() / K; ++b) {
    Block blk;
    std::memcpy(&blk, bytes.data() + b * sizeof(Block), sizeof(Block));
    float amax = 0;
    for (int k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(x[b * K + k]));
    // ggml's q8_0 carries an f16 scale, its q8_K a float one.
    const float step = amax / 127.0f;
    ASSERT_EQ(blk.d, K == 32 ? kernels::act_scale32(amax) : step) << "block " << b;
    const double scale_error = 127.0 * std::fabs(double(blk.d) - double(step));
    int sums[16] = {}, total = 0;
    for (int k = 0; k < K; ++k) {
      const int q = blk.q[k];
      ASSERT_LE(std::abs(q), 127);
      const double err = std::fabs(double(x[b * K + k]) - double(blk.d) * q);
      ASSERT_LE(err, double(step) / 2 * (1 + 1e-5) + scale_error)
          << "block " << b << " value " << k;
      sums[k / 16] += q;
      total += q;
    }
    if constexpr (K == 256) {
      for (int g = 0; g < 16; ++g) ASSERT_EQ(blk.bsums[g], sums[g]) << "block " << b;
    } else {
      ASSERT_EQ(blk.sum, total) << "block " << b;
    }
  }
}

TEST(IntDot, ActivationQuantizationBoundAndSumsOnEveryTarget) {
  for (ActFormat f : {ActFormat::kQ8x32, ActFormat::kQ8x256}) {
    const int64_t cols = 1024;
    auto x = test::gaussian(size_t(cols), 3, 2.0f);
    std::fill(x.begin(), x.begin() + 256, 0.0f);  // an all-zero block: d = 0, q = 0
    x[300] = 1e6f;                                // an outlier
    std::vector<uint8_t> first;
    test::for_each_simd_target([&](const std::string& target) {
      std::vector<uint8_t> bytes(kernels::act_row_bytes(f, cols));
      kernels::quantize_act(f, x.data(), cols, bytes.data());
      if (f == ActFormat::kQ8x32)
        check_blocks<ActBlock32>(x, bytes);
      else
        check_blocks<ActBlock256>(x, bytes);
      if (first.empty()) first = bytes;
      ASSERT_EQ(bytes, first) << target;
    });
  }
}

// Runs fn with the dot-product instructions (VNNI, sdot) allowed and, where
// the active target would use them, again with them disallowed.
void with_and_without_dot_instructions(const std::function<void(bool)>& fn) {
  test::set_kernel_switch(&KernelConfig::int_dot, true);
  const bool used = kernels::int_dot_vnni_active();
  fn(used);
  if (!used) return;
  test::set_kernel_switch(&KernelConfig::int_dot, false);
  EXPECT_FALSE(kernels::int_dot_vnni_active());
  fn(false);
  test::set_kernel_switch(&KernelConfig::int_dot, true);
}

// Runs fn on every SIMD target with the dot-product instructions
// disallowed (what a CPU without VNNI runs), checking that on AVX2 the
// k-quant prefill tiles are the kernel an n-token product takes.
void on_each_target_without_dot_instructions(DType type, int64_t n,
                                             const std::function<void(const std::string&)>& fn) {
  test::for_each_simd_target([&](const std::string& target) {
    test::set_kernel_switch(&KernelConfig::int_dot, false);
    if (target == "AVX2") {
      EXPECT_TRUE(kernels::q4k_gemm_active(type, n));
    }
    fn(target);
    test::set_kernel_switch(&KernelConfig::int_dot, true);
  });
}

// With power-of-two weight scales and integer activations whose block amax
// is 127 (so d_x = 1 and q = x), every product and partial sum is exact in
// f32: the kernels must equal the double-precision reference exactly.
TEST(IntDot, ExactWhereTheArithmeticIsExact) {
  ThreadPool pool(2);
  for (DType type : int_types()) {
    const int64_t block = test::act_block_values(type);
    const int64_t rows = 13, cols = block == 256 ? 256 : 64, n = 3;
    const auto wb = test::random_block_bytes(type, rows, cols, 40 + uint32_t(type), true);
    std::vector<float> x(size_t(n * cols));
    const auto g = test::gaussian(x.size(), 41);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::fmax(-2.0f, std::fmin(2.0f, std::round(g[i])));
    for (size_t i = 0; i < x.size(); i += size_t(block))
      x[i + 5] = (i / size_t(block)) % 2 ? 127 : -127;
    std::vector<float> want(size_t(n * rows));
    matmul_ref(type, wb.data(), rows, cols, x.data(), n, want.data());
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "exact");
    test::for_each_simd_target([&](const std::string& target) {
      with_and_without_dot_instructions([&](bool vnni) {
        std::vector<float> got(want.size());
        matmul(w, x.data(), n, got.data(), pool, MatmulKernel::kInteger);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << dtype_name(type) << " on " << target
                                     << (vnni ? " with VNNI" : "") << " element " << i;
      });
    });
  }
}

// matmul's token i == matvec of x_i, bit for bit, for every batch size and
// thread count, with and without VNNI: the batched decode of many sequences
// and the prefill tiles never change one token's numbers.
TEST(IntDot, MatmulTokensEqualMatvecBitForBit) {
  const int64_t kNs[] = {1, 2, 3, 5, 8, 13, 16, 17, 64, 100};
  for (DType type : int_types()) {
    const int64_t rows = 37, cols = test::act_block_values(type) == 256 ? 512 : 160;
    const auto wb = test::random_block_bytes(type, rows, cols, 50 + uint32_t(type));
    const auto x = test::gaussian(size_t(100 * cols), 51);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "batch");
    test::for_each_simd_target([&](const std::string& target) {
      ThreadPool one(1);
      const std::vector<float> single = token_by_token(w, x, 100, one);
      // Where matvec is on the integer path it is that same computation.
      const bool native = integer_path_active(type);
      if (native)
        for (int64_t i = 0; i < 100; i += 33) {
          std::vector<float> mv(static_cast<size_t>(rows));
          matvec(w, x.data() + i * cols, mv.data(), one);
          for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(mv[size_t(r)], single[size_t(i * rows + r)]);
        }
      for (int threads = 1; threads <= 3; ++threads) {
        ThreadPool pool(threads);
        for (int64_t n : kNs) {
          with_and_without_dot_instructions([&](bool vnni) {
            std::vector<float> y(size_t(n * rows), -1.0f);
            matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kInteger);
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_EQ(y[i], single[i])
                  << dtype_name(type) << " on " << target << (vnni ? " with VNNI" : "")
                  << ", n=" << n << ", " << threads << " threads, token " << i / rows << " row "
                  << i % rows;
          });
          std::vector<float> y(single.begin(), single.begin() + n * rows);
          if (n > kIntMatmulMaxTokens || !native) continue;
          // The default kernel choice is the integer one for small batches.
          std::vector<float> y_auto(y.size(), -1.0f);
          matmul(w, x.data(), n, y_auto.data(), pool);
          ASSERT_EQ(y_auto, y) << dtype_name(type) << " on " << target << ", n=" << n;
        }
        if (!native) continue;
        std::vector<float> y1(static_cast<size_t>(rows));
        matvec(w, x.data() + 7 * cols, y1.data(), pool);
        for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(y1[size_t(r)], single[size_t(7 * rows + r)]);
      }
    });
  }
}

// Rows long enough that the token tiles walk them in several column
// segments (kernels_intgemm.cc), and more rows than one row block: still
// matvec's bits for every token, with and without VNNI.
TEST(IntDot, TilesOverLongRowsEqualMatvec) {
  ThreadPool pool(2), one(1);
  for (DType type : int_types()) {
    const int64_t rows = 21, cols = 4096, n = 13;
    const auto wb = test::random_block_bytes(type, rows, cols, 90 + uint32_t(type));
    const auto x = test::gaussian(size_t(n * cols), 91);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "long");
    test::for_each_simd_target([&](const std::string& target) {
      const std::vector<float> single = token_by_token(w, x, n, one);
      with_and_without_dot_instructions([&](bool vnni) {
        std::vector<float> y(single.size(), -1.0f);
        matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kInteger);
        ASSERT_EQ(y, single) << dtype_name(type) << " on " << target << (vnni ? " with VNNI" : "");
      });
    });
  }
}

// The x86 targets share one lane layout: AVX3 and AVX3_DL compute the
// K-quants' blocks two chunks per 512-bit vector (intdot_wide-inl.h), AVX2
// one per 256-bit vector, and the outputs are the same bits, for one token
// (matvec; q6_K in its offset form) and for a tile of tokens (the sign
// form), with and without VNNI. Weights at random and activations up to the
// int8 extremes.
TEST(IntDot, X86TargetsGiveTheSameBits) {
  std::vector<std::string> x86;
  for (const std::string& t : test::simd_targets_covered())
    if (t.rfind("AVX", 0) == 0) x86.push_back(t);
  if (x86.size() < 2) GTEST_SKIP() << "fewer than two x86 SIMD targets here";
  ThreadPool pool(2);
  for (DType type : int_types()) {
    const int64_t rows = 37, cols = 1024;
    const auto wb = test::random_block_bytes(type, rows, cols, 70 + uint32_t(type));
    auto x = test::gaussian(size_t(8 * cols), 71);
    for (size_t i = 0; i < x.size(); i += 97) x[i] = (i / 97) % 2 ? 40.0f : -40.0f;
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "x86");
    for (const int64_t n : {int64_t(1), int64_t(8)}) {
      std::vector<float> first;
      std::string first_target;
      test::for_each_simd_target([&](const std::string& target) {
        if (target.rfind("AVX", 0) != 0) return;
        with_and_without_dot_instructions([&](bool vnni) {
          std::vector<float> y(size_t(n * rows), -1.0f);
          matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kInteger);
          if (first.empty()) {
            first = y, first_target = target;
            return;
          }
          ASSERT_EQ(y, first) << dtype_name(type) << ", n=" << n << ": " << target
                              << (vnni ? " with VNNI" : "") << " against " << first_target;
        });
      });
    }
  }
}

// The Q4_K and Q6_K prefill tiles of AVX2 without VNNI (gemm_q4k_avx2.cc:
// 2 rows x 5 tokens, then 1-row and 1..4-token tails; outputs 8 rows at a
// time, then row pair by row pair: 13 rows are 8 + 2 + 2 + 1) on odd row and
// token counts and several row lengths (1, 2, 9 and 32 super-blocks), one
// and two threads: matvec's bits for every (row, token).
TEST(IntDot, KQuantPrefillTilesOnOddShapesEqualMatvec) {
  ThreadPool one(1), two(2);
  for (const DType type : {DType::Q4_K, DType::Q6_K})
    for (const int64_t cols : {256, 512, 2304, 8192}) {
      const int64_t rows = 37, n = 41;
      const auto wb = test::random_block_bytes(type, rows, cols, 70 + uint32_t(cols));
      const auto x = test::gaussian(size_t(n * cols), 71);
      const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "kq");
      on_each_target_without_dot_instructions(type, n, [&](const std::string& target) {
        const std::vector<float> single = token_by_token(w, x, n, one);
        for (const int64_t nt : {int64_t(17), int64_t(23), int64_t(29), n})
          for (const int64_t r : {int64_t(1), int64_t(3), int64_t(13), int64_t(18), rows}) {
            const WeightMatrix part = make_weight(type, wb.data(), r, cols, "kq");
            for (ThreadPool* pool : {&one, &two}) {
              std::vector<float> y(size_t(nt * r), -1.0f);
              matmul(part, x.data(), nt, y.data(), *pool, MatmulKernel::kInteger);
              for (int64_t t = 0; t < nt; ++t)
                for (int64_t i = 0; i < r; ++i)
                  ASSERT_EQ(y[size_t(t * r + i)], single[size_t(t * rows + i)])
                      << dtype_name(type) << " on " << target << ", cols " << cols << " rows " << r
                      << " n " << nt << " token " << t << " row " << i << " threads "
                      << pool->size();
            }
          }
      });
    }
}

// The AVX2 prefill tiles add two vpmaddubsw pair sums in int16 before the
// scale step; at the extremes (q6_K's q - 32 = -32 against activations
// quantized to +127, i.e. 255 after the +128 offset: -32640; q4_K's 15
// against -127) that sum is closest to wrapping. Such blocks must still give
// matvec's bits and the float reference's value.
TEST(IntDot, KQuantPrefillTilesAtTheInt16ExtremesEqualMatvec) {
  ThreadPool one(1), two(2);
  const int64_t rows = 5, cols = 512, n = 23;
  for (const DType type : {DType::Q4_K, DType::Q6_K})
    for (const bool top : {false, true})
      for (const float sign : {1.0f, -1.0f}) {
        auto wb = test::random_block_bytes(type, rows, cols, 90 + uint32_t(type));
        const size_t block_bytes = type == DType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ6_K);
        const uint8_t q = top ? 0xFF : 0x00;  // every quant at its largest / smallest
        for (size_t b = 0; b < wb.size() / block_bytes; ++b) {
          uint8_t* blk = wb.data() + b * block_bytes;
          if (type == DType::Q4_K) {
            std::memset(blk + offsetof(BlockQ4_K, qs), q, sizeof(BlockQ4_K::qs));
          } else {
            std::memset(blk + offsetof(BlockQ6_K, ql), q, sizeof(BlockQ6_K::ql));
            std::memset(blk + offsetof(BlockQ6_K, qh), q, sizeof(BlockQ6_K::qh));
          }
        }
        // Every activation of a token equal: all quantize to +-127.
        std::vector<float> x(size_t(n * cols));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t i = 0; i < cols; ++i) x[size_t(t * cols + i)] = sign * float(1 + t % 3);
        std::vector<float> want(size_t(n * rows));
        matmul_ref(type, wb.data(), rows, cols, x.data(), n, want.data());
        const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "kq");
        on_each_target_without_dot_instructions(type, n, [&](const std::string& target) {
          const std::vector<float> single = token_by_token(w, x, n, one);
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> y(size_t(n * rows), -1.0f);
            matmul(w, x.data(), n, y.data(), *pool, MatmulKernel::kInteger);
            for (size_t i = 0; i < y.size(); ++i) {
              ASSERT_EQ(y[i], single[i])
                  << dtype_name(type) << " on " << target << " top " << top << " sign " << sign
                  << " at " << i << " threads " << pool->size();
              ASSERT_NEAR(y[i], want[i], 1e-3f * (1.0f + std::fabs(want[i])))
                  << dtype_name(type) << " on " << target << " top " << top << " sign " << sign
                  << " at " << i;
            }
          }
        });
      }
}

// q6_K at the extremes (every q 0 or 63, every activation +-127 in runs of
// 8 of one sign): each pair of 6-bit products sums to 63 * 127 * 2 and the
// -32 offset terms to their largest, so tiles of 8 and 4 tokens must still
// give matvec's bits and the reference's value, with and without VNNI.
TEST(IntDot, Q6KTilesAtTheExtremesEqualMatvec) {
  ThreadPool one(1), two(2);
  const int64_t rows = 7, cols = 768, n = 12;
  for (const uint8_t q : {uint8_t(0x00), uint8_t(0xFF)})
    for (const float sign : {1.0f, -1.0f}) {
      auto wb = test::random_block_bytes(DType::Q6_K, rows, cols, 95);
      for (size_t b = 0; b < wb.size() / sizeof(BlockQ6_K); ++b) {
        uint8_t* blk = wb.data() + b * sizeof(BlockQ6_K);
        std::memset(blk + offsetof(BlockQ6_K, ql), q, sizeof(BlockQ6_K::ql));
        std::memset(blk + offsetof(BlockQ6_K, qh), q, sizeof(BlockQ6_K::qh));
      }
      std::vector<float> x(size_t(n * cols));
      for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 8) % 2 ? sign : -sign;
      std::vector<float> want(size_t(n * rows));
      matmul_ref(DType::Q6_K, wb.data(), rows, cols, x.data(), n, want.data());
      const WeightMatrix w = make_weight(DType::Q6_K, wb.data(), rows, cols, "q6");
      test::for_each_simd_target([&](const std::string& target) {
        with_and_without_dot_instructions([&](bool vnni) {
          const std::vector<float> single = token_by_token(w, x, n, one);
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> y(size_t(n * rows), -1.0f);
            matmul(w, x.data(), n, y.data(), *pool, MatmulKernel::kInteger);
            for (size_t i = 0; i < y.size(); ++i) {
              ASSERT_EQ(y[i], single[i]) << target << (vnni ? " with VNNI" : "") << " q " << int(q)
                                         << " sign " << sign << " at " << i;
              ASSERT_NEAR(y[i], want[i], 1e-3f * (1.0f + std::fabs(want[i])))
                  << target << (vnni ? " with VNNI" : "") << " at " << i;
            }
          }
        });
      });
    }
}

// The kernel kAuto picks: integer up to kIntMatmulMaxTokens wherever the
// integer path is native, above it only where the token tiles are faster
// (int_gemm_preferred), the same choice for every larger n; and its results
// are that kernel's.
TEST(IntDot, AutoKernelChoice) {
  ThreadPool pool(2);
  for (DType type : int_types()) {
    const int64_t rows = 24, cols = test::act_block_values(type) == 256 ? 512 : 128, n = 40;
    const auto wb = test::random_block_bytes(type, rows, cols, 80 + uint32_t(type));
    const auto x = test::gaussian(size_t(n * cols), 81);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "auto");
    test::for_each_simd_target([&](const std::string& target) {
      const bool native = integer_path_active(type);
      const bool large = native && kernels::int_gemm_preferred(type);
      EXPECT_EQ(integer_matmul_active(type, 1), native) << target;
      EXPECT_EQ(integer_matmul_active(type, kIntMatmulMaxTokens), native) << target;
      for (int64_t m : {kIntMatmulMaxTokens + 1, int64_t(40), int64_t(512), int64_t(4096)})
        EXPECT_EQ(integer_matmul_active(type, m), large) << dtype_name(type) << " on " << target;
      std::vector<float> y_auto(size_t(n * rows)), y_want(y_auto.size());
      matmul(w, x.data(), n, y_auto.data(), pool);
      matmul(w, x.data(), n, y_want.data(), pool,
             large ? MatmulKernel::kInteger : MatmulKernel::kFloat);
      ASSERT_EQ(y_auto, y_want) << dtype_name(type) << " on " << target;
    });
  }
  // The f32 GEMM keeps AVX-512's prefill; q4_K takes the tiles on AVX2.
  test::for_each_simd_target([&](const std::string& target) {
    if (target.rfind("AVX3", 0) == 0) {
      EXPECT_FALSE(kernels::int_gemm_preferred(DType::Q4_K));
    }
    if (target == "AVX2") {
      EXPECT_TRUE(kernels::int_gemm_preferred(DType::Q4_K));
    }
    EXPECT_FALSE(integer_matmul_active(DType::F16, 1)) << target;
  });
}

// The dot-product instructions (VNNI on x86, sdot on aarch64) are used
// exactly where the CPU and the target have them.
TEST(IntDot, DotInstructionsWhereTheCpuHasThem) {
  test::for_each_simd_target([&](const std::string& target) {
    bool want = false;
    if (target == "AVX3_DL") want = true;
    if (target == "AVX3") want = kernels::cpu_has_avx512_vnni();
    if (target == "AVX2") want = kernels::cpu_has_avx_vnni();
    if (target == "NEON" || target.rfind("SVE", 0) == 0) want = kernels::cpu_has_arm_dotprod();
    EXPECT_EQ(kernels::int_dot_vnni_active(), want) << target;
    test::set_kernel_switch(&KernelConfig::int_dot, false);
    EXPECT_FALSE(kernels::int_dot_vnni_active()) << target;
    test::set_kernel_switch(&KernelConfig::int_dot, true);
  });
}

TEST(IntDot, TheIntegerPathIsActiveOnX86WithAvx2) {
  test::for_each_simd_target([&](const std::string& target) {
    const bool x86_simd = target == "AVX2" || target.rfind("AVX3", 0) == 0;
    EXPECT_EQ(integer_path_active(DType::Q4_K), x86_simd) << target;
    EXPECT_FALSE(integer_path_active(DType::F16)) << target;
  });
}

TEST(IntDot, NonFiniteActivationsGiveNaNNotGarbage) {
  ThreadPool pool(1);
  for (DType type : int_types()) {
    const int64_t rows = 3, cols = 512;
    const auto wb = test::random_weights(type, rows, cols, 70);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "nan");
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      auto x = test::gaussian(size_t(cols), 71);
      x[100] = bad;
      test::for_each_simd_target([&](const std::string& target) {
        std::vector<float> y(static_cast<size_t>(rows), 0.0f);
        matmul(w, x.data(), 1, y.data(), pool, MatmulKernel::kInteger);
        for (float v : y) EXPECT_TRUE(std::isnan(v)) << dtype_name(type) << " on " << target;
      });
    }
  }
}

TEST(IntDot, ScratchIsAccounted) {
  ThreadPool pool(1);
  const int64_t rows = 4, cols = 512;
  const auto wb = test::random_weights(DType::Q4_K, rows, cols, 60);
  const auto x = test::gaussian(size_t(20 * cols), 61);
  const WeightMatrix w = make_weight(DType::Q4_K, wb.data(), rows, cols, "scratch");
  std::vector<float> y(size_t(20 * rows));
  matmul(w, x.data(), 20, y.data(), pool, MatmulKernel::kInteger);
  EXPECT_GE(activation_scratch_bytes(), quantized_activation_bytes(DType::Q4_K, cols, 20));
}

}  // namespace
}  // namespace tkv
