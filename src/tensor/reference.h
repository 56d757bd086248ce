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

}  // namespace tkv
