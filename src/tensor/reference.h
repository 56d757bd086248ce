// Scalar reference implementations of every supported weight type: plain C++
// that follows ggml's dequantize_row_* formulas line by line (tensor/blocks.h).
// Tests compare the Highway kernels against these; `turbokv synth --type X`
// uses the quantizers. Nothing in a hot path calls this file.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tkv {

// Dequantizes n values (a multiple of the block size) of `type`.
// Throws tkv::Error for an unsupported type or a partial block.
void dequantize_row_ref(DType type, const uint8_t* src, float* dst, int64_t n);

// Quantizes n values (a multiple of the block size) into `type`. The
// quantizers are the straightforward ones: ggml's reference quantizers for
// the 32-value types, and for the K-quants and IQ4_XS a min/max (or absmax)
// fit of each sub-block followed by rounding of the sub-block scales. They are
// deterministic and round-trip within the bounds the tests check; they do not
// search for optimal scales as llama-quantize does.
void quantize_row_ref(DType type, const float* src, uint8_t* dst, int64_t n);

// y[r] = sum_k w[r][k] * x[k], dequantizing each row and summing in double.
void matvec_ref(DType type, const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y);

// y[i * rows + r] = sum_k w[r][k] * x[i * cols + k] for i in [0, n), in double.
void matmul_ref(DType type, const uint8_t* w, int64_t rows, int64_t cols, const float* x, int64_t n,
                float* y);

// Numerics of BF16 weights' matmul on CPUs with AVX512-BF16 (the prefill
// GEMM of tensor/kernels/gemm_bf16.h; matvec and matvec_batch keep the
// exact f32 path). Every activation is rounded to bf16 (f32_to_bf16 of
// common/f16.h: round to nearest even), the products w_k * bf16(x_k) are
// exact in f32 and vdpbf16ps adds them pairwise in f32, subnormal inputs
// and results flushed to zero. Against matmul_ref, for every output:
//   |y - y_ref| <= kBf16GemmRelativeBound * sum_k |w_k x_k|
//                  + cols * 2^-126 * max_k |w_k|   (the flushed subnormals)
// 2^-8 is the activation rounding (half an ulp of bf16's 8-bit
// significand, relative); 2e-5 the f32 sums (per 256-column chunk a chain
// of 256 adds, then one add per chunk: (256 + cols / 256) * 2^-24 for cols
// up to 16K). The f32 GEMM that F16 weights (and BF16 ones elsewhere) take
// has the 1e-5 contract of tensor/matmul.h.
inline constexpr double kBf16GemmRelativeBound = 0x1p-8 + 2e-5;

// Numerics of F16 and BF16 weights' matmul on CPUs with AMX-BF16 (the
// prefill GEMM of tensor/kernels/gemm_amx.h; matvec and matvec_batch keep
// the f32 path). Weights split exactly into w_hi = bf16(w) and
// w_lo = w - w_hi (BF16 weights: w_lo = 0), activations into
// x_1 = bf16(x), x_2 = bf16(x - x_1), x_3 = bf16(x - x_1 - x_2) (f32_to_bf16
// of common/f16.h, round to nearest even; x_1 + x_2 + x_3 = x for normal x).
// The products w_hi x_1, w_hi x_2, w_hi x_3, w_lo x_1, w_lo x_2 of every
// column are exact in f32 and added into one f32 chain (subnormal inputs
// and results flushed to zero); w_lo x_3, |.| <= 2^-8 * 2^-16 |w x|, is
// left out. Against matmul_ref, for every output:
//   |y - y_ref| <= amx_gemm_relative_bound(cols) * sum_k |w_k x_k|
//                  + 5 * cols * 2^-126 * max_k |w_k|   (the flushed subnormals)
// The worst case of the chain's 5 * cols rounded adds (2^-24 each) is far
// above what a product shows: on Gaussian data the error measured the same
// as the f32 GEMM's (1e-7 of sum_k |w_k x_k|), at most 3.3x it for 8192
// columns and 3 tokens (tests/tensor/gemm_amx_test.cc).
inline constexpr double amx_gemm_relative_bound(int64_t cols) {
  return 0x1p-24 * (1 + 5 * double(cols));
}

}  // namespace tkv
