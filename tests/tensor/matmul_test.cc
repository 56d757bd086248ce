// matvec / matmul against the double-precision reference for every type and
// SIMD target, at sizes that exercise every tail; thread-count and batch-size
// independence; make_weight's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

// Column counts: a few blocks, not a multiple of any vector tile; the float
// types also get counts that are not a multiple of the vector length.
std::vector<int64_t> test_cols(DType type) {
  const int64_t bs = traits(type).block_size;
  // 2080 = 65 blocks and 2560 = 10 super-blocks: the AVX-512 kernels work
  // in runs of 64 blocks / 8 super-blocks, so these end in a partial run.
  if (bs == 1) return {37, 300};
  if (bs == 32) return {32, 96, 2080};
  return {256, 2560};
}

// The accuracy contract of matmul.h against the double-precision product of
// the dequantized weights and the unquantized x: float path
// |y - y_ref| <= 1e-5 * sum_k |w_k x_k|; integer path additionally
// sum_k |w_k| d(k) / 2 for the activation quantization, d(k) the step of
// k's activation block. float_bound replaces 1e-5 for the bf16 GEMM.
// Reference holds y_ref and the two sums of every output's bound, so one
// reference serves every SIMD target and kernel that computes the product.
struct Reference {
  std::vector<float> want;
  std::vector<double> quant, mag;  // [token * rows + row], like want
};

Reference reference(DType type, const uint8_t* w, int64_t rows, int64_t cols, const float* x,
                    int64_t n) {
  const size_t outputs = static_cast<size_t>(rows * n);
  Reference ref{std::vector<float>(outputs), std::vector<double>(outputs),
                std::vector<double>(outputs)};
  matmul_ref(type, w, rows, cols, x, n, ref.want.data());
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = row_bytes(type, cols);
  std::vector<double> half_step(static_cast<size_t>(n * cols), 0.0);
  if (const int64_t k = test::act_block_values(type); k > 0)
    for (int64_t i = 0; i < n * cols; i += k) {
      double amax = 0;
      for (int64_t j = i; j < i + k; ++j) amax = std::max(amax, std::fabs(double(x[j])));
      std::fill_n(half_step.begin() + i, k, amax / 127.0 / 2.0);
    }
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(type, w + static_cast<size_t>(r) * rb, row.data(), cols);
    for (int64_t i = 0; i < n; ++i) {
      double quant = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double hs = half_step[static_cast<size_t>(i * cols + k)];
        quant += std::fabs(double(row[size_t(k)])) * hs;
        mag += std::fabs(double(row[size_t(k)])) * (std::fabs(double(x[i * cols + k])) + hs);
      }
      const size_t at = static_cast<size_t>(i * rows + r);
      ref.quant[at] = quant;
      ref.mag[at] = mag;
    }
  }
  return ref;
}

void expect_close(const Reference& ref, int64_t rows, const std::vector<float>& got,
                  const std::string& what, double float_bound = 1e-5) {
  ASSERT_EQ(got.size(), ref.want.size()) << what;
  for (size_t at = 0; at < got.size(); ++at) {
    const double bound = ref.quant[at] * (1 + 1e-4) + float_bound * ref.mag[at] + 1e-30;
    ASSERT_LE(std::fabs(double(got[at]) - double(ref.want[at])), bound)
        << what << " row " << int64_t(at) % rows << " token " << int64_t(at) / rows << ": "
        << got[at] << " vs " << ref.want[at];
  }
}

TEST(Matvec, MatchesReferenceOnEveryTypeAndTarget) {
  ThreadPool pool(2);
  for (DType type : test::supported_types()) {
    for (int64_t cols : test_cols(type)) {
      for (int64_t rows : {1, 7, 37}) {
        const uint32_t seed = uint32_t(type) * 1000 + uint32_t(rows * 7 + cols);
        const auto wb = test::random_block_bytes(type, rows, cols, seed);
        const auto x = test::gaussian(static_cast<size_t>(cols), seed + 1);
        const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "test");
        const Reference ref = reference(type, wb.data(), rows, cols, x.data(), 1);
        test::for_each_simd_target([&](const std::string& target) {
          std::vector<float> y(static_cast<size_t>(rows), -1.0f);
          matvec(w, x.data(), y.data(), pool);
          expect_close(ref, rows, y,
                       str(dtype_name(type), " matvec ", rows, "x", cols, " on ", target));
        });
      }
    }
  }
}

TEST(Matmul, MatchesReferenceOnEveryTypeAndTarget) {
  ThreadPool pool(2);
  for (DType type : test::supported_types()) {
    const int64_t cols = test_cols(type).back();
    const int64_t rows = 53;  // not a multiple of any row tile or panel
    const uint32_t seed = uint32_t(type) * 77;
    const auto wb = test::random_block_bytes(type, rows, cols, seed);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "test");
    for (int64_t n : {1, 3, 17, 64}) {
      const auto x = test::gaussian(static_cast<size_t>(n * cols), seed + uint32_t(n));
      const Reference ref = reference(type, wb.data(), rows, cols, x.data(), n);
      test::for_each_simd_target([&](const std::string& target) {
        for (MatmulKernel kernel :
             {MatmulKernel::kAuto, MatmulKernel::kInteger, MatmulKernel::kFloat}) {
          std::vector<float> y(static_cast<size_t>(rows * n), -1.0f);
          matmul(w, x.data(), n, y.data(), pool, kernel);
          // BF16 weights' GEMM rounds activations to bf16 where the CPU can
          // (reference.h); matvec, which matmul of one token is not, never.
          const bool bf16 = type == DType::BF16 && kernels::bf16_dot_gemm_active();
          expect_close(
              ref, rows, y,
              str(dtype_name(type), " matmul n=", n, " kernel ", int(kernel), " on ", target),
              bf16 ? kBf16GemmRelativeBound : 1e-5);
        }
      });
    }
  }
}

TEST(Matmul, LongRowsStayWithinTheContract) {
  // 8192 columns (llama's FFN down projection): the bound must still hold.
  ThreadPool pool(2);
  for (DType type :
       {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::MXFP4}) {
    const int64_t rows = 9, cols = 8192;
    const auto wb = test::random_weights(type, rows, cols, 5);
    const auto x = test::gaussian(static_cast<size_t>(3 * cols), 6);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "long");
    std::vector<float> y(static_cast<size_t>(rows));
    matvec(w, x.data(), y.data(), pool);
    expect_close(reference(type, wb.data(), rows, cols, x.data(), 1), rows, y,
                 str(dtype_name(type), " matvec"));
    std::vector<float> ym(static_cast<size_t>(rows * 3));
    matmul(w, x.data(), 3, ym.data(), pool);
    expect_close(reference(type, wb.data(), rows, cols, x.data(), 3), rows, ym,
                 str(dtype_name(type), " matmul"));
  }
}

TEST(Threads, OneToFourThreadsGiveIdenticalResults) {
  for (DType type : test::supported_types()) {
    const int64_t cols = traits(type).block_size == 1 ? 1000 : 1024;
    const int64_t rows = 301, n = 19;
    const auto wb = test::random_block_bytes(type, rows, cols, 11 + uint32_t(type));
    const auto x = test::gaussian(static_cast<size_t>(n * cols), 12);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "threads");
    std::vector<float> mv1, mm1;
    for (int threads = 1; threads <= 4; ++threads) {
      ThreadPool pool(threads);
      std::vector<float> mv(static_cast<size_t>(rows)), mm(static_cast<size_t>(rows * n));
      matvec(w, x.data(), mv.data(), pool);
      matmul(w, x.data(), n, mm.data(), pool);
      if (threads == 1) {
        mv1 = mv;
        mm1 = mm;
        continue;
      }
      // Bitwise: every float compares equal (no NaNs here).
      ASSERT_EQ(mv, mv1) << dtype_name(type) << " matvec, " << threads << " threads";
      ASSERT_EQ(mm, mm1) << dtype_name(type) << " matmul, " << threads << " threads";
    }
  }
}

TEST(Matmul, TokenResultsDoNotDependOnBatchSize) {
  ThreadPool pool(3);
  for (DType type :
       {DType::F16, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::MXFP4}) {
    const int64_t rows = 40, cols = 512;
    const auto wb = test::random_weights(type, rows, cols, 21);
    const auto x = test::gaussian(static_cast<size_t>(64 * cols), 22);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "batch");
    std::vector<float> all(static_cast<size_t>(64 * rows)), some(static_cast<size_t>(17 * rows));
    matmul(w, x.data(), 64, all.data(), pool);
    matmul(w, x.data(), 17, some.data(), pool);
    for (size_t i = 0; i < some.size(); ++i)
      ASSERT_EQ(some[i], all[i]) << dtype_name(type) << " element " << i;
    // One token under prefill_kernel gets the bits it gets among 64 (the
    // model's last layer keeps a chunk's last row alone).
    std::vector<float> one(static_cast<size_t>(rows));
    matmul(w, x.data() + 63 * cols, 1, one.data(), pool, prefill_kernel(type));
    for (size_t r = 0; r < one.size(); ++r)
      ASSERT_EQ(one[r], all[size_t(63 * rows) + r]) << dtype_name(type) << " row " << r;
  }
}

// A slice's products are its rows' results in the whole matrix's, bit for
// bit, wherever it is cut at multiples of kSliceRows (or at its end).
TEST(RowSlice, ProductsGiveTheWholeMatrixsBitsForItsRows) {
  ThreadPool pool(2);
  const int64_t rows = 150, cols = 512, n = 9;
  for (DType type : test::supported_types()) {
    const auto wb = test::random_weights(type, rows, cols, 31 + uint32_t(type));
    const auto x = test::gaussian(static_cast<size_t>(n * cols), 32);
    const WeightMatrix w = make_weight(type, wb.data(), rows, cols, "slice");
    std::vector<float> whole(static_cast<size_t>(rows * n));
    matvec_batch(w, x.data(), n, whole.data(), pool);
    for (const auto& [r0, r1] :
         {std::pair<int64_t, int64_t>{0, 16}, {16, 80}, {48, 150}, {144, 150}}) {
      const WeightMatrix s = row_slice(w, r0, r1);
      const int64_t m = r1 - r0;
      std::vector<float> one(static_cast<size_t>(m)), batch(static_cast<size_t>(m * n));
      matvec_batch(s, x.data(), n, batch.data(), pool);
      for (int64_t t = 0; t < n; ++t) {
        matvec(s, x.data() + t * cols, one.data(), pool);
        for (int64_t r = 0; r < m; ++r) {
          const float want = whole[size_t(t * rows + r0 + r)];
          ASSERT_EQ(batch[size_t(t * m + r)], want)
              << dtype_name(type) << " rows " << r0 << ".." << r1 << " token " << t;
          ASSERT_EQ(one[size_t(r)], want) << dtype_name(type) << " matvec, row " << r0 + r;
        }
      }
    }
  }
}

TEST(RowSlice, RowBlocksAreCutAtWholeBlocksOnly) {
  const test::PreferRowBlocks prefer;
  ThreadPool pool(2);
  const int64_t rows = 64, cols = 96;
  auto wb = test::random_weights(DType::F16, rows, cols, 33);
  const auto x = test::gaussian(static_cast<size_t>(cols), 34);
  const WeightMatrix w = make_weight(DType::F16, wb.data(), rows, cols, "blocks");
  std::vector<float> whole(static_cast<size_t>(rows)), part(32);
  const WeightMatrix b = to_row_blocks(w, wb.data(), pool);
  matvec(row_slice(b, 16, 48), x.data(), part.data(), pool);
  matvec(b, x.data(), whole.data(), pool);
  for (size_t r = 0; r < part.size(); ++r) ASSERT_EQ(part[r], whole[16 + r]) << r;
  EXPECT_THROW(row_slice(b, 8, 40), Error);
  EXPECT_THROW(row_slice(b, 0, 80), Error);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MakeWeight, RejectsBadTypesAndShapesNamingTheTensor) {
  std::vector<uint8_t> data(4096);
  const auto unknown = error_of([&] { make_weight(DType(4), data.data(), 1, 32, "blk.0.attn_q"); });
  EXPECT_NE(unknown.find("blk.0.attn_q"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown"), std::string::npos) << unknown;
  const auto unsupported =
      error_of([&] { make_weight(DType::IQ2_XXS, data.data(), 1, 256, "output.weight"); });
  EXPECT_NE(unsupported.find("output.weight"), std::string::npos) << unsupported;
  EXPECT_NE(unsupported.find("iq2_xxs"), std::string::npos) << unsupported;
  EXPECT_NE(unsupported.find("not supported"), std::string::npos) << unsupported;
  const auto partial = error_of([&] { make_weight(DType::Q4_K, data.data(), 2, 300, "ffn_up"); });
  EXPECT_NE(partial.find("ffn_up"), std::string::npos) << partial;
  EXPECT_NE(partial.find("300"), std::string::npos) << partial;
  EXPECT_FALSE(error_of([&] { make_weight(DType::F32, data.data(), -1, 8, "neg"); }).empty());
  EXPECT_FALSE(error_of([&] { make_weight(DType::F32, nullptr, 2, 8, "null"); }).empty());
  for (DType t : {DType::Q8_1, DType::Q8_K, DType::I8, DType::F64, DType::TQ1_0})
    EXPECT_FALSE(error_of([&] { make_weight(t, data.data(), 1, 256, "x"); }).empty())
        << dtype_name(t);
  EXPECT_NE(
      error_of([&] { make_weight(DType::Q4_0, data.data() + 1, 1, 32, "odd"); }).find("aligned"),
      std::string::npos);
  const WeightMatrix ok = make_weight(DType::Q6_K, data.data(), 3, 512, "ok");
  EXPECT_EQ(ok.row_bytes, 2u * 210u);
  EXPECT_EQ(ok.total_bytes(), 3u * 2u * 210u);
}

// MXFP4's 17-byte blocks have no 16-bit field: a matrix (one expert's
// slice of a 3-D tensor) may start at an odd address, and its rows of 5
// blocks (85 bytes) alternate odd and even. Every product on every target
// gives the bits of the same matrix at an aligned address.
TEST(MakeWeight, MXFP4MayStartAtAnyAddress) {
  ThreadPool pool(2);
  const int64_t rows = 7, cols = 160, n = 3;
  const auto wb = test::random_block_bytes(DType::MXFP4, rows, cols, 17);
  std::vector<uint8_t> shifted(wb.size() + 1);
  std::copy(wb.begin(), wb.end(), shifted.begin() + 1);
  const WeightMatrix aligned = make_weight(DType::MXFP4, wb.data(), rows, cols, "aligned");
  const WeightMatrix odd = make_weight(DType::MXFP4, shifted.data() + 1, rows, cols, "odd");
  ASSERT_EQ(odd.row_bytes, 85u);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(odd.data) % 2, 1u);  // vectors' data is 16-byte aligned
  const auto x = test::gaussian(size_t(n * cols), 18);
  test::for_each_simd_target([&](const std::string& target) {
    std::vector<float> want(size_t(n * rows)), got(want.size());
    auto same = [&](const char* what) {
      ASSERT_TRUE(test::same_bits(want, got)) << what << " on " << target;
    };
    matvec(aligned, x.data(), want.data(), pool);
    matvec(odd, x.data(), got.data(), pool);
    same("matvec");
    matvec_batch(aligned, x.data(), n, want.data(), pool);
    matvec_batch(odd, x.data(), n, got.data(), pool);
    same("matvec_batch");
    for (MatmulKernel kernel : {MatmulKernel::kInteger, MatmulKernel::kFloat}) {
      matmul(aligned, x.data(), n, want.data(), pool, kernel);
      matmul(odd, x.data(), n, got.data(), pool, kernel);
      same("matmul");
    }
    std::vector<float> row_want(static_cast<size_t>(cols)), row_got(row_want.size());
    weight_row(aligned, 3, row_want.data());
    weight_row(odd, 3, row_got.data());
    ASSERT_EQ(row_got, row_want) << target;
  });
}

TEST(Matmul, ZeroTokensAndZeroRowsAreNoOps) {
  ThreadPool pool(2);
  std::vector<uint8_t> data(row_bytes(DType::F16, 64) * 4);
  const WeightMatrix w = make_weight(DType::F16, data.data(), 4, 64, "w");
  std::vector<float> y(4, 7.0f);
  matmul(w, nullptr, 0, y.data(), pool);
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
  EXPECT_THROW(matmul(w, nullptr, -1, y.data(), pool), Error);
}

}  // namespace
}  // namespace tkv

// Reports name the kernel variables set in the environment, in the order the
// configuration reads them; empty ones count as unset.
TEST(KernelConfig, EnvOverridesNameTheSetVariables) {
  const char* names[] = {"TURBOKV_SIMD", "TURBOKV_VNNI", "TURBOKV_AMX", "TURBOKV_BF16_DOT",
                         "TURBOKV_ROW_BLOCKS"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names)
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
  for (const char* n : names) ::unsetenv(n);
  EXPECT_EQ(tkv::kernel_env_overrides(), "");
  ::setenv("TURBOKV_ROW_BLOCKS", "1", 1);
  ::setenv("TURBOKV_SIMD", "avx2", 1);
  ::setenv("TURBOKV_AMX", "", 1);
  EXPECT_EQ(tkv::kernel_env_overrides(), "TURBOKV_SIMD=avx2 TURBOKV_ROW_BLOCKS=1");
  for (const char* n : names) ::unsetenv(n);
  for (const auto& [n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
}
